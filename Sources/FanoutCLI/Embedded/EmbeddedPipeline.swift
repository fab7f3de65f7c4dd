import APNsSimulator
import FanoutCore
import FanoutKafka
import FanoutWorker
import Foundation

/// The whole Fanout pipeline in this one process, needing nothing running: librdkafka's mock
/// cluster as the broker, the APNs simulator as Apple (HTTP/2+TLS, trusting a throwaway ES256 key
/// generated here), a producer for the apps' backends, and `workers` real Fanout `Worker`s in one
/// consumer group, configured in code to use both. Shared by `fanout demo` and `fanout loadtest`.
/// Tear down with `shutdown()` (workers first, broker last).
final class EmbeddedPipeline: Sendable {
    /// What to build.
    struct Layout: Sendable {
        /// Where the signing key goes (and whatever the caller writes beside it).
        var directory: String
        /// Bundle IDs the team may push to; `frequentUpdates` apps get the larger priority-10 budget.
        var apps: [(bundleID: String, frequentUpdates: Bool)]
        /// Partitions of activity-updates and activity-tokens (equal, as Fanout requires).
        var activityPartitions: Int
        var broadcastPartitions: Int
        var workers = 1
        /// The simulator appends every accepted push here as a JSON line (nil: none).
        var deliveryLogPath: String?
        /// Accepted pushes the simulator keeps in memory for `deliveries()`.
        var deliveryMemoryCapacity = 100_000
        /// Answer 400 BadDeviceToken for tokens not registered with the simulator.
        var rejectUnknownTokens = false
        var simulatorSeed: UInt64 = 1
        /// Each app signs with its own provider key (same team) instead of one shared key: the workers
        /// then keep apps of different keys on different connections, as APNs requires.
        var keyPerApp = false
    }

    /// librdkafka's defaults make the mock cluster finish a rebalance only after minutes; the embedded
    /// workers use short group timings (docs/environment.md §1).
    static let shortRebalance = ["session.timeout.ms": "6000", "max.poll.interval.ms": "7000", "heartbeat.interval.ms": "500"]

    // Declaration order is teardown order: Swift destroys stored properties in this order, and
    // every Kafka client must be gone before the mock cluster stops (or librdkafka logs disconnects).
    let workers: [Worker]
    let producer: KafkaProducer
    let simulator: APNsSimulator
    let cluster: MockKafkaCluster
    let configuration: FanoutConfiguration
    /// The partitions whose commits count: activity-updates and broadcast-updates.
    let eventPartitions: [PartitionID]
    /// The dead-letter topics and activity-token-feedback (one partition each).
    let outcomePartitions: [PartitionID]

    /// - Parameters:
    ///   - configure: adjusts the workers' configuration after the embedded defaults are set.
    ///   - logSink: the JSON log sink of worker `index`.
    init(layout: Layout, configure: (inout FanoutConfiguration) -> Void = { _ in },
         logSink: (_ index: Int) throws -> Log.Sink) throws {
        precondition(layout.workers >= 1 && layout.activityPartitions >= 1 && layout.broadcastPartitions >= 1)
        try FileManager.default.createDirectory(atPath: layout.directory, withIntermediateDirectories: true)

        // Throwaway provider keys (one, or one per app): the simulator trusts their public halves, the
        // workers sign with them.
        var signers: [(credentials: SimulatorCredentials, keyPath: String)] = []
        for index in 0..<(layout.keyPerApp ? layout.apps.count : 1) {
            let credentials = try SimulatorCredentials.generate(teamID: "DEMOTEAM01", keyID: String(format: "DEMOKEY%03d", index + 1))
            let keyPath = layout.directory + "/AuthKey_\(credentials.keyID).p8"
            guard FileManager.default.createFile(atPath: keyPath, contents: Data(try credentials.privateKey.pemPKCS8().utf8),
                                                 attributes: [.posixPermissions: 0o600]) else {
                throw EmbeddedError("cannot write the signing key to \(keyPath)")
            }
            signers.append((credentials, keyPath))
        }

        cluster = try MockKafkaCluster(brokers: 1)
        let topics = FanoutConfiguration.defaults().kafka.topics
        let partitions: [(String, Int)] = [
            (topics.activityUpdates, layout.activityPartitions), (topics.activityTokens, layout.activityPartitions),
            (topics.broadcastUpdates, layout.broadcastPartitions),
            (topics.deadLetterTopic(for: topics.activityUpdates), 1), (topics.deadLetterTopic(for: topics.broadcastUpdates), 1),
            (topics.activityTokenFeedback, 1), (topics.state, layout.activityPartitions),
        ]
        for (name, count) in partitions { try cluster.createTopic(name, partitions: count) }
        outcomePartitions = [PartitionID(topic: topics.deadLetterTopic(for: topics.activityUpdates), partition: 0),
                             PartitionID(topic: topics.deadLetterTopic(for: topics.broadcastUpdates), partition: 0),
                             PartitionID(topic: topics.activityTokenFeedback, partition: 0)]
        eventPartitions = (0..<layout.activityPartitions).map { PartitionID(topic: topics.activityUpdates, partition: Int32($0)) }
            + (0..<layout.broadcastPartitions).map { PartitionID(topic: topics.broadcastUpdates, partition: Int32($0)) }

        var trusted: [String: String] = [:]
        for signer in signers { trusted[signer.credentials.keyID] = try signer.credentials.publicKeyPEM() }
        var simulatorConfiguration = APNsSimulatorConfiguration(
            teamID: signers[0].credentials.teamID, keys: trusted, apps: layout.apps.map(\.bundleID))
        simulatorConfiguration.threads = 1
        simulatorConfiguration.seed = layout.simulatorSeed
        simulatorConfiguration.rejectUnknownTokens = layout.rejectUnknownTokens
        simulatorConfiguration.deliveryMemoryCapacity = layout.deliveryMemoryCapacity
        // The simulator appends to its delivery log; a kept directory must not mix in a previous run.
        if let path = layout.deliveryLogPath, FileManager.default.fileExists(atPath: path) {
            try FileManager.default.removeItem(atPath: path)
        }
        simulatorConfiguration.deliveryLogPath = layout.deliveryLogPath
        simulator = try APNsSimulator(configuration: simulatorConfiguration)
        try simulator.start()

        let apps = layout.apps.enumerated().map { index, app in
            let signer = signers[index % signers.count]
            return FanoutConfiguration.App(bundleID: app.bundleID, teamID: signer.credentials.teamID, keyID: signer.credentials.keyID,
                                           keyPath: signer.keyPath, frequentUpdates: app.frequentUpdates)
        }
        var configuration = FanoutConfiguration.defaults(apps: apps)
        configuration.kafka.bootstrapServers = cluster.bootstrapServers
        configuration.kafka.commitInterval = .milliseconds(200)
        configuration.apns.baseURL = simulator.deviceURL
        configuration.apns.managementBaseURL = simulator.managementURL
        configuration.apns.caFile = simulator.caCertificatePath
        configuration.apns.activity.connections = 1
        configuration.apns.broadcast.connections = 1
        configuration.engine.progressFields = ["*": ["progress"]]
        configuration.shutdownTimeout = .seconds(5)
        configuration.admin.port = 0
        configure(&configuration)
        self.configuration = configuration

        producer = try KafkaProducer(configuration: cluster.configuration(["linger.ms": "5", "log_level": "3"]))
        // Short group timings for one member too: its first join takes ≈3 s either way, but a join
        // repeated on a loaded machine makes the mock hold the rebalance for the session timeout
        // (45 s by default; seen as "Worker ready in 45.2 s" in a sanitizer run).
        let options = WorkerOptions(extraKafkaProperties: Self.shortRebalance, adminServer: false)
        workers = try (0..<layout.workers).map { index in
            try Worker(configuration: configuration, log: Log(level: configuration.logLevel, sink: try logSink(index)),
                       metrics: FanoutMetrics(), options: options)
        }
    }

    enum Readiness: Equatable {
        case ready, interrupted
        case timedOut(String)
    }

    /// Starts every worker and waits for `/readyz`'s condition on each (partitions assigned, APNs
    /// reachable). Every worker assigned means the group's latest generation has all of them.
    func startWorkers(deadline: ContinuousClock.Instant, interrupted: @Sendable () -> Bool) async throws -> Readiness {
        // start() reads topic metadata and joins the group: blocking librdkafka calls, one thread each.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in workers { group.addTask { try await onOwnThread { try worker.start() } } }
            try await group.waitForAll()
        }
        while true {
            let waiting = workers.enumerated().compactMap { index, worker -> String? in
                let readiness = worker.isReady()
                return readiness.isReady ? nil : "worker \(index): " + readiness.reasons.joined(separator: "; ")
            }
            if waiting.isEmpty { return .ready }
            if interrupted() { return .interrupted }
            guard ContinuousClock.now < deadline else { return .timedOut(waiting.joined(separator: "; ")) }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The workers' summaries added up; `committed` keeps the highest offset any worker committed per partition.
    var summary: WorkerSummary {
        var total = WorkerSummary()
        for worker in workers {
            let part = worker.summary
            total.eventsIn += part.eventsIn
            total.eventsAccepted += part.eventsAccepted
            total.sends.merge(part.sends, uniquingKeysWith: +)
            total.delivered.merge(part.delivered, uniquingKeysWith: +)
            total.coalesced += part.coalesced
            total.dropped.merge(part.dropped, uniquingKeysWith: +)
            total.deadLettered.merge(part.deadLettered, uniquingKeysWith: +)
            total.feedbackRecords += part.feedbackRecords
            total.tokenUpdates += part.tokenUpdates
            total.committed.merge(part.committed, uniquingKeysWith: max)
            total.commits += part.commits
        }
        return total
    }

    /// Event partitions whose committed offset (as the workers report it) has not reached `ends`.
    func pendingCommits(ends: [PartitionID: Int64]) -> [String] {
        let committed = summary.committed
        return eventPartitions.compactMap { partition in
            let end = ends[partition] ?? 0
            let done = committed[partition.description] ?? 0
            return done >= end ? nil : "\(partition): committed \(done) of \(end)"
        }
    }

    /// Stops every worker (drain, final commit, leave the group) at once, then the simulator, then
    /// flushes the producer. Blocking parts run on their own threads.
    func shutdown() async throws {
        await withTaskGroup(of: Void.self) { group in
            for worker in workers { group.addTask { await worker.stop(timeout: .seconds(5)) } }
        }
        simulator.stop()
        try await onOwnThread { [producer] in try producer.flush(timeout: .seconds(5)) }
    }

    /// The group's committed offsets of the event partitions, read from the coordinator (after `shutdown()`).
    func committedOffsets() async throws -> [PartitionID: Int64?] {
        try await onOwnThread { [cluster, configuration, eventPartitions] () throws -> [PartitionID: Int64?] in
            // Not subscribed: it never joins the group, it only asks the coordinator for the group's commits.
            let reader = try KafkaConsumer(configuration: cluster.configuration(["log_level": "3"]), groupID: configuration.kafka.groupID)
            let committed = try reader.committed(eventPartitions, timeout: .seconds(5))
            try reader.close()
            return committed
        }
    }
}

/// Runs a blocking call (librdkafka flush, commit queries, joining a reader thread) on a thread of
/// its own, never on Swift's cooperative pool.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread.named("fanout-blocking") { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

struct EmbeddedError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
