import APNsSimulator
import FanoutCore
import FanoutKafka
import FanoutWorker
import Foundation

/// What the demo runs: the embedded pipeline with one worker and the demo's three apps, a broadcast
/// channel for the match, and a reader of the dead-letter and feedback topics. Tear down with
/// `shutdown()` (worker first, broker last).
final class DemoStage: Sendable {
    static let activityPartitions = 4
    static let broadcastPartitions = 2

    // Declaration order is teardown order: the tail is a Kafka client and must be gone before the
    // pipeline's mock cluster stops.
    let tail: KafkaTopicTail
    let pipeline: EmbeddedPipeline
    let directory: String
    let channel: String
    let workerLogPath: String?
    let workerLogFile: LogFile?
    let deliveryLogPath: String?

    var worker: Worker { pipeline.workers[0] }
    var producer: KafkaProducer { pipeline.producer }
    var simulator: APNsSimulator { pipeline.simulator }
    var cluster: MockKafkaCluster { pipeline.cluster }
    var configuration: FanoutConfiguration { pipeline.configuration }
    var eventPartitions: [PartitionID] { pipeline.eventPartitions }

    /// - Parameters:
    ///   - directory: where the signing key, the worker's JSON log and (when kept) the delivery log go.
    ///   - keepLogs: write the simulator's delivery log too (`--keep-log`).
    ///   - workerLogSink: nil writes the worker's log to `<directory>/worker.log`.
    ///   - speed: the demo's speed factor; shortens `token_wait` in step with the story.
    init(directory: String, keepLogs: Bool, workerLogSink: Log.Sink?, speed: Double) throws {
        self.directory = directory
        deliveryLogPath = keepLogs ? directory + "/deliveries.jsonl" : nil
        var layout = EmbeddedPipeline.Layout(
            directory: directory,
            // Delivery apps declare NSSupportsLiveActivitiesFrequentUpdates: a larger priority-10 budget.
            apps: [(DemoScene.exportsApp, false), (DemoScene.foodApp, true), (DemoScene.sportsApp, false)],
            activityPartitions: Self.activityPartitions, broadcastPartitions: Self.broadcastPartitions)
        layout.deliveryLogPath = deliveryLogPath
        var logFile: LogFile?
        let logPath = directory + "/worker.log"
        pipeline = try EmbeddedPipeline(layout: layout, configure: { configuration in
            // A gone token's later events wait token_wait for a new registration; keep that wait in step with the story.
            configuration.engine.tokenWait = .milliseconds(max(200, Int((5000 / speed).rounded())))
        }, logSink: { _ in
            if let workerLogSink { return workerLogSink }
            let file = try LogFile(path: logPath)
            logFile = file
            return { file.write($0) }
        })
        workerLogFile = logFile
        workerLogPath = logFile == nil ? nil : logPath
        // The sports app created this channel through the management API; storage policy 0 (no storage).
        channel = try pipeline.simulator.createChannel(bundleID: DemoScene.sportsApp, storagePolicy: 0)
        // librdkafka's assign needs a group.id even though this reader never joins the group or commits.
        tail = try KafkaTopicTail(configuration: pipeline.cluster.configuration(["group.id": "fanout-demo-reader", "log_level": "3"]),
                                  partitions: pipeline.outcomePartitions)
    }

    /// Stops the worker (drain, final commit), the simulator and the outcome reader.
    func shutdown() async throws {
        try await pipeline.shutdown()
        try await onOwnThread { [tail] in tail.stop() }
    }
}
