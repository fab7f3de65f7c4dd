import APNsSimulator
import FanoutAPNs
import FanoutCore
import FanoutCrypto
import FanoutKafka
import FanoutWorker
import Foundation
import Synchronization
import Testing

/// Every integration test runs one at a time: each starts a mock Kafka cluster, an APNs simulator
/// over real HTTP/2+TLS and one or two workers, and the machine's cores are shared.
@Suite(.serialized) struct WorkerIntegration {}

struct IntegrationTimeout: Error, CustomStringConvertible {
    var description: String
}

/// A mock Kafka cluster with Fanout's topics, the APNs simulator trusting a fresh signing key, and
/// helpers to produce events and tokens, read topics back, and look at committed offsets.
final class IntegrationHarness: Sendable {
    static let app = "com.example.exports"
    static let updates = "activity-updates"
    static let broadcasts = "broadcast-updates"
    static let tokens = "activity-tokens"
    static let feedback = "activity-token-feedback"
    static let deadLetters = "activity-updates-dlq"
    static let state = "fanout-state"

    let cluster: MockKafkaCluster
    let credentials: SimulatorCredentials
    let keyPath: String
    let scratch: String
    let partitions: Int
    let group: String
    let producer: KafkaProducer
    private let probe: KafkaConsumer
    private let simulatorBox: Mutex<APNsSimulator?>
    /// Stable address in front of the simulator, so it can be replaced during a test.
    let forwarder: TCPForwarder
    /// One TLS identity for every simulator of the test, so a restarted one is trusted too.
    private let tls: (chain: String, key: String, ca: String)
    /// Every worker log line (JSON), for failure messages and send-overlap checks.
    let logs = LogCollector()

    /// The simulator trusts `trustedKey` for the key id (default: the worker's own key).
    /// - Parameter missing: output topics (dead-letter, feedback) not to create, for startup checks.
    /// - Parameter coordinatorApart: two brokers, the group coordinator (broker 1) apart from every
    ///   partition's leader (broker 2), so the coordinator can be slowed down alone.
    /// - Parameter broadcastPartitions: broadcast-updates' partition count (default: `partitions`).
    init(partitions: Int = 2, tokenPartitions: Int? = nil, broadcastPartitions: Int? = nil, trustWorkerKey: Bool = true,
         missing: Set<String> = [], coordinatorApart: Bool = false) throws {
        self.partitions = partitions
        group = "fanout-it-\(UUID().uuidString.prefix(6))"
        cluster = try MockKafkaCluster(brokers: coordinatorApart ? 2 : 1)
        var layout = [(Self.updates, partitions), (Self.broadcasts, broadcastPartitions ?? partitions), (Self.tokens, tokenPartitions ?? partitions)]
        if !missing.contains(Self.state) { layout.append((Self.state, partitions)) }
        for topic in [Self.feedback, Self.deadLetters, Self.broadcasts + "-dlq"] where !missing.contains(topic) { layout.append((topic, 1)) }
        for (topic, count) in layout {
            try cluster.createTopic(topic, partitions: count)
            if coordinatorApart {
                for partition in 0..<Int32(count) { try cluster.setPartitionLeader(PartitionID(topic: topic, partition: partition), broker: 2) }
            }
        }
        if coordinatorApart { try cluster.setCoordinator(keyType: "group", key: group, broker: 1) }
        credentials = try SimulatorCredentials.generate()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("fanout-it-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        keyPath = scratch + "/worker.p8"
        try credentials.privateKey.pemPKCS8().write(toFile: keyPath, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyPath)   // as a key should be
        let trusted = trustWorkerKey ? credentials : try SimulatorCredentials.generate(teamID: credentials.teamID, keyID: credentials.keyID)
        let files = try CertificateAuthority.generateLoopbackServerFiles(in: scratch)
        tls = (files.certificateChainPath, files.privateKeyPath, files.caCertificatePath)
        let simulator = try Self.startSimulator(trusting: trusted, port: 0, tls: tls)
        forwarder = try TCPForwarder(targetPort: simulator.port)
        simulatorBox = Mutex(simulator)
        producer = try KafkaProducer(configuration: cluster.configuration())
        probe = try KafkaConsumer(configuration: cluster.configuration(), groupID: group)
    }

    deinit {
        simulatorBox.withLock { $0?.stop() }
        try? probe.close()
        try? FileManager.default.removeItem(atPath: scratch)
    }

    var simulator: APNsSimulator { simulatorBox.withLock { $0! } }

    private static func startSimulator(trusting credentials: SimulatorCredentials, port: Int,
                                       tls: (chain: String, key: String, ca: String)) throws -> APNsSimulator {
        var configuration = APNsSimulatorConfiguration(teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()],
                                                       apps: [app])
        configuration.threads = 1
        configuration.port = port
        configuration.certificatePath = tls.chain
        configuration.privateKeyPath = tls.key
        let simulator = try APNsSimulator(configuration: configuration)
        try simulator.start()
        return simulator
    }

    /// Replaces the simulator (behind the same forwarded address) by one trusting the worker's
    /// key: "Apple accepts the key again".
    func restartSimulatorTrustingWorkerKey() throws {
        let fresh = try Self.startSimulator(trusting: credentials, port: 0, tls: tls)
        let old = simulatorBox.withLock { simulator in
            defer { simulator = fresh }
            return simulator
        }
        forwarder.retarget(fresh.port)
        old?.stop()
    }

    // MARK: Workers

    func configuration() -> FanoutConfiguration {
        var c = FanoutConfiguration.defaults(apps: [
            .init(bundleID: Self.app, teamID: credentials.teamID, keyID: credentials.keyID, keyPath: keyPath),
        ])
        c.kafka.bootstrapServers = cluster.bootstrapServers
        c.kafka.groupID = group
        c.kafka.commitInterval = .milliseconds(200)
        c.apns.baseURL = "https://127.0.0.1:\(forwarder.port)"
        c.apns.caFile = tls.ca
        c.admin.port = 0
        c.engine.progressFields = ["*": ["progress"]]
        c.engine.tokenWait = .seconds(2)
        c.shutdownTimeout = .seconds(5)
        return c
    }

    static let shortRebalance = ["session.timeout.ms": "6000", "max.poll.interval.ms": "7000", "heartbeat.interval.ms": "500"]

    /// - Parameter kafkaProperties: librdkafka properties for the worker's clients (default: `shortRebalance`).
    func makeWorker(name: String, configuration: FanoutConfiguration? = nil, adminServer: Bool = false,
                    configProbeInterval: Duration = .seconds(60), maxPollRecords: Int = 1000,
                    metrics: FanoutMetrics = FanoutMetrics(), kafkaProperties: [String: String] = shortRebalance) throws -> Worker {
        let logs = logs
        let log = Log(level: .trace, sink: { line in logs.append("{\"worker\":\"\(name)\"," + line.dropFirst()) })
        let options = WorkerOptions(extraKafkaProperties: kafkaProperties, adminServer: adminServer, revokeDrainTimeout: .seconds(2),
                                    maxPollRecords: maxPollRecords, produceRetryDelay: .milliseconds(200), randomSeed: 42, configProbeInterval: configProbeInterval)
        return try Worker(configuration: configuration ?? self.configuration(), log: log, metrics: metrics, options: options)
    }

    /// Deletes a broadcast channel through the simulator's management API (as `fanout channels delete` does).
    func deleteChannel(_ channel: String) async throws {
        let credentials = try APNsCredentials(teamID: self.credentials.teamID, keyID: self.credentials.keyID, keyFile: keyPath)
        let client = try APNsChannelClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: simulator.managementURL, caFile: tls.ca), credentials: [Self.app: credentials],
            connections: 1, maxConcurrentStreamsPerConnection: 1, maxInFlight: 1, maxQueued: 1, requestTimeout: .seconds(10),
            tokenCache: ProviderTokenCache(refreshInterval: .seconds(50 * 60))))
        try await client.delete(bundleID: Self.app, channelID: channel)
        await client.shutdown(deadline: .now + .seconds(1))
    }

    // MARK: Producing

    @discardableResult
    func produce(_ topic: String, key: String, value: String?) async throws -> KafkaDeliveryReport {
        try await producer.produce(topic: topic, key: Array(key.utf8), value: value.map { Array($0.utf8) })
    }

    /// A record with a null key (a producer that forgot it).
    @discardableResult
    func produceKeyless(_ topic: String, _ value: String) async throws -> KafkaDeliveryReport {
        try await producer.produce(topic: topic, key: nil, value: Array(value.utf8))
    }

    @discardableResult
    func produceEvent(key: String, _ json: String) async throws -> KafkaDeliveryReport {
        try await produce(Self.updates, key: key, value: json)
    }

    /// Events enqueued together, in order, then flushed: librdkafka sends them in as few record
    /// batches as it can, so one fetch hands a reader many of them at once.
    func produceEvents(key: String, _ jsons: [String]) throws {
        let failures = Mutex<[KafkaError]>([])
        for json in jsons {
            try producer.produce(topic: Self.updates, key: Array(key.utf8), value: Array(json.utf8)) { result in
                if case .failure(let error) = result { failures.withLock { $0.append(error) } }
            }
        }
        try producer.flush(timeout: .seconds(10))
        if let failure = failures.withLock({ $0.first }) { throw failure }
    }

    func registerToken(key: String, token: String, at: Int64) async throws {
        try await produce(Self.tokens, key: key,
                          value: "{\"token\":\"\(token)\",\"app\":\"\(Self.app)\",\"environment\":\"production\",\"at\":\(at)}")
    }

    static func token(_ index: Int) -> String { String(repeating: String(format: "%02x", index % 256), count: 32) }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// A v1 broadcast-lane event for `channel`.
    static func broadcastEvent(id: String, channel: String, timestamp: Int64, state: String, kind: String = "update") -> String {
        "{\"v\":1,\"id\":\"\(id)\",\"channel\":\"\(channel)\",\"event\":\"\(kind)\",\"timestamp\":\(timestamp),\"content_state\":\(state)}"
    }

    /// A v1 activity-lane update (or end) event.
    static func event(id: String, key: String, timestamp: Int64, state: String, kind: String = "update", importance: String? = nil) -> String {
        var json = "{\"v\":1,\"id\":\"\(id)\",\"activity\":\"\(key)\",\"event\":\"\(kind)\",\"timestamp\":\(timestamp),\"content_state\":\(state)"
        if let importance { json += ",\"importance\":\"\(importance)\"" }
        if kind == "end" { json += ",\"dismissal_date\":\(timestamp + 60)" }
        return json + "}"
    }

    // MARK: Reading back

    /// The group's committed offsets of activity-updates (nil: nothing committed).
    func committed(_ topic: String = IntegrationHarness.updates) throws -> [Int32: Int64?] {
        let partitions = (0..<Int32(self.partitions)).map { PartitionID(topic: topic, partition: $0) }
        var result: [Int32: Int64?] = [:]
        for (partition, offset) in try probe.committed(partitions, timeout: .seconds(5)) { result[partition.partition] = offset }
        return result
    }

    /// High watermark per partition.
    func endOffsets(_ topic: String = IntegrationHarness.updates) throws -> [Int32: Int64] {
        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        defer { reader.close() }
        let count = try reader.partitionCounts(of: [topic], timeout: .seconds(5))[topic] ?? 0
        var result: [Int32: Int64] = [:]
        for partition in 0..<Int32(count) {
            result[partition] = try reader.watermarks(of: PartitionID(topic: topic, partition: partition), timeout: .seconds(5)).high
        }
        return result
    }

    /// True when every partition's committed offset equals its end.
    func allCommitted(_ topic: String = IntegrationHarness.updates) throws -> Bool {
        let ends = try endOffsets(topic)
        let committed = try committed(topic)
        return ends.allSatisfy { partition, end in end == 0 || committed[partition] == .some(end) }
    }

    /// Every record of `topic`, read from the beginning up to the current end.
    func readAll(_ topic: String) throws -> [KafkaMessage] {
        let ends = try endOffsets(topic).filter { $0.value > 0 }
        guard !ends.isEmpty else { return [] }
        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        defer { reader.close() }
        try reader.assign(Dictionary(uniqueKeysWithValues: ends.keys.map { (PartitionID(topic: topic, partition: $0), KafkaOffset.beginning) }))
        var messages: [KafkaMessage] = []
        var remaining = Set(ends.keys)
        let deadline = ContinuousClock.now + .seconds(10)
        while !remaining.isEmpty && ContinuousClock.now < deadline {
            let batch = try reader.poll(timeout: .milliseconds(100))
            for message in batch.messages {
                messages.append(message)
                if message.offset + 1 >= ends[message.partition]! { remaining.remove(message.partition) }
            }
        }
        return messages
    }

    // MARK: Waiting

    /// Polls `condition` every 50 ms until it holds; fails after `timeout` (a bound against hangs,
    /// not a performance threshold) with the last worker log lines.
    func eventually(_ what: String, timeout: Duration = .seconds(40), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try condition() { return }
            guard ContinuousClock.now < deadline else {
                let tail = logs.lines.suffix(40).joined(separator: "\n")
                throw IntegrationTimeout(description: "timed out waiting for: \(what)\nlast worker log lines:\n\(tail)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Send intervals from the workers' trace lines: (worker, key, started, completed) in UNIX ns.
    func sendIntervals() -> [(worker: String, key: String, started: Int64, completed: Int64)] {
        logs.lines.compactMap { line in
            guard line.contains("\"send completed\""),
                  let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let worker = object["worker"] as? String, let key = object["key"] as? String,
                  let started = (object["started_ns"] as? NSNumber)?.int64Value,
                  let completed = (object["completed_ns"] as? NSNumber)?.int64Value else { return nil }
            return (worker, key, started, completed)
        }
    }
}

/// Runs a blocking call off Swift's cooperative pool.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Worker log lines, kept for failure messages and for checks on what the workers did when.
final class LogCollector: Sendable {
    /// Each line with the UNIX time it was logged at.
    private let storage = Mutex<[(time: Double, line: String)]>([])
    func append(_ line: String) {
        let time = Date().timeIntervalSince1970
        storage.withLock { $0.append((time, line)) }
    }
    var lines: [String] { storage.withLock { $0.map(\.line) } }

    /// The partitions (`activity-updates/3`) named by `worker`'s log lines with message `message`.
    func partitions(worker: String, message: String) -> Set<String> {
        var result: Set<String> = []
        for line in lines where line.hasPrefix("{\"worker\":\"\(worker)\"") && line.contains("\"msg\":\"\(message)") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let list = object["partitions"] as? String else { continue }
            result.formUnion(list.split(separator: ",").map(String.init))
        }
        return result
    }

    /// When `worker` first logged a line containing `text` (UNIX seconds), nil when it has not.
    func firstTime(worker: String, containing text: String) -> Double? {
        storage.withLock { $0.first { $0.line.hasPrefix("{\"worker\":\"\(worker)\"") && $0.line.contains(text) }?.time }
    }
}
