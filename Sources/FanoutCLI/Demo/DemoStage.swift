import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation

/// Everything the demo runs in this one process: librdkafka's mock cluster as the broker, the APNs
/// simulator as Apple (trusting a throwaway ES256 key generated here), and one real Fanout `Worker`
/// configured in code to use both. Tear down with `shutdown()` (worker first, broker last).
final class DemoStage: Sendable {
    /// Partitions of activity-updates and activity-tokens (equal, as Fanout requires).
    static let activityPartitions = 4
    static let broadcastPartitions = 2

    // Declaration order is teardown order: Swift destroys stored properties in this order, and
    // every Kafka client must be gone before the mock cluster stops (or librdkafka logs disconnects).
    let worker: Worker
    let producer: KafkaProducer
    let tail: KafkaTopicTail
    let simulator: APNsSimulator
    let cluster: MockKafkaCluster
    let directory: String
    let configuration: FanoutConfiguration
    let channel: String
    let workerLogPath: String?
    let workerLogFile: LogFile?
    let deliveryLogPath: String?

    /// The dead-letter and feedback partitions the demo reads back.
    let outcomePartitions: [TopicPartition]
    /// The partitions whose commits the demo checks: activity-updates and broadcast-updates.
    let eventPartitions: [TopicPartition]

    /// - Parameters:
    ///   - directory: where the signing key, the worker's JSON log and (when kept) the delivery log go.
    ///   - keepLogs: write the simulator's delivery log too (`--keep-log`).
    ///   - workerLogSink: nil writes the worker's log to `<directory>/worker.log`.
    ///   - speed: the demo's speed factor; shortens `token_wait` in step with the story.
    init(directory: String, keepLogs: Bool, workerLogSink: Log.Sink?, speed: Double) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        // A throwaway provider key: the simulator trusts its public half, the worker signs with it.
        let credentials = try SimulatorCredentials.generate(teamID: "DEMOTEAM01", keyID: "DEMOKEY001")
        let keyPath = directory + "/AuthKey_\(credentials.keyID).p8"
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(try credentials.privateKey.pemPKCS8().utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw DemoError("cannot write the demo's signing key to \(keyPath)")
        }

        cluster = try MockKafkaCluster(brokers: 1)
        let topics = FanoutConfiguration.defaults().kafka.topics
        let partitions: [(String, Int)] = [
            (topics.activityUpdates, Self.activityPartitions), (topics.activityTokens, Self.activityPartitions),
            (topics.broadcastUpdates, Self.broadcastPartitions),
            (topics.deadLetterTopic(for: topics.activityUpdates), 1), (topics.deadLetterTopic(for: topics.broadcastUpdates), 1),
            (topics.activityTokenFeedback, 1),
        ]
        for (name, count) in partitions { try cluster.createTopic(name, partitions: count) }
        outcomePartitions = [TopicPartition(topics.deadLetterTopic(for: topics.activityUpdates), 0),
                             TopicPartition(topics.deadLetterTopic(for: topics.broadcastUpdates), 0),
                             TopicPartition(topics.activityTokenFeedback, 0)]
        eventPartitions = (0..<Self.activityPartitions).map { TopicPartition(topics.activityUpdates, Int32($0)) }
            + (0..<Self.broadcastPartitions).map { TopicPartition(topics.broadcastUpdates, Int32($0)) }

        var simulatorConfiguration = APNsSimulatorConfiguration(
            teamID: credentials.teamID, keys: [credentials.keyID: try credentials.publicKeyPEM()],
            apps: [DemoScene.exportsApp, DemoScene.foodApp, DemoScene.sportsApp])
        simulatorConfiguration.threads = 1
        deliveryLogPath = keepLogs ? directory + "/deliveries.jsonl" : nil
        // The simulator appends to its delivery log; a kept directory must not mix in a previous run.
        if let path = deliveryLogPath, FileManager.default.fileExists(atPath: path) {
            try FileManager.default.removeItem(atPath: path)
        }
        simulatorConfiguration.deliveryLogPath = deliveryLogPath
        simulator = try APNsSimulator(configuration: simulatorConfiguration)
        try simulator.start()
        // The sports app created this channel through the management API; storage policy 0 (no storage).
        channel = try simulator.createChannel(bundleID: DemoScene.sportsApp, storagePolicy: 0)

        configuration = Self.workerConfiguration(credentials: credentials, keyPath: keyPath, bootstrap: cluster.bootstrapServers,
                                                 simulator: simulator, speed: speed)
        producer = try KafkaProducer(configuration: cluster.configuration(["linger.ms": "5", "log_level": "3"]))
        // librdkafka's assign needs a group.id even though this reader never joins the group or commits.
        tail = try KafkaTopicTail(configuration: cluster.configuration(["group.id": "fanout-demo-reader", "log_level": "3"]),
                                  partitions: outcomePartitions)

        let sink: Log.Sink
        if let workerLogSink {
            sink = workerLogSink
            workerLogPath = nil
            workerLogFile = nil
        } else {
            let path = directory + "/worker.log"
            let file = try LogFile(path: path)
            sink = { file.write($0) }
            workerLogPath = path
            workerLogFile = file
        }
        // One member, no rebalance mid-run: the mock's default group timings are fine (the first join takes ≈3 s).
        let options = WorkerOptions(adminServer: false)
        worker = try Worker(configuration: configuration, log: Log(level: configuration.logLevel, sink: sink),
                            metrics: FanoutMetrics(), options: options)
    }

    static func workerConfiguration(credentials: SimulatorCredentials, keyPath: String, bootstrap: String,
                                    simulator: APNsSimulator, speed: Double) -> FanoutConfiguration {
        let apps = [
            FanoutConfiguration.App(bundleID: DemoScene.exportsApp, teamID: credentials.teamID, keyID: credentials.keyID, keyPath: keyPath),
            // Delivery apps declare NSSupportsLiveActivitiesFrequentUpdates: a larger priority-10 budget.
            FanoutConfiguration.App(bundleID: DemoScene.foodApp, teamID: credentials.teamID, keyID: credentials.keyID, keyPath: keyPath,
                                    frequentUpdates: true),
            FanoutConfiguration.App(bundleID: DemoScene.sportsApp, teamID: credentials.teamID, keyID: credentials.keyID, keyPath: keyPath),
        ]
        var configuration = FanoutConfiguration.defaults(apps: apps)
        configuration.kafka.bootstrapServers = bootstrap
        configuration.kafka.commitInterval = .milliseconds(200)
        configuration.apns.baseURL = simulator.deviceURL
        configuration.apns.managementBaseURL = simulator.managementURL
        configuration.apns.caFile = simulator.caCertificatePath
        configuration.apns.activity.connections = 1
        configuration.apns.broadcast.connections = 1
        configuration.engine.progressFields = ["*": ["progress"]]
        // A gone token's later events wait token_wait for a new registration; keep that wait in step with the story.
        configuration.engine.tokenWait = .milliseconds(max(200, Int((5000 / speed).rounded())))
        configuration.shutdownTimeout = .seconds(5)
        configuration.admin.port = 0
        return configuration
    }

    /// Stops the worker (drain, final commit) and the simulator. Blocking parts run on their own threads.
    func shutdown() async throws {
        await worker.stop(timeout: .seconds(5))
        simulator.stop()
        try await onOwnThread { [tail, producer] in
            tail.stop()
            try producer.flush(timeout: .seconds(5))
        }
    }
}
