import APNsSimulator
import FanoutCore
import FanoutKafka
import FanoutWorker
import Synchronization

struct DemoOptions: Sendable {
    /// Story speed factor (2 = twice as fast). The per-target `min_interval` stays real, so faster runs coalesce more.
    var speed: Double = 1
    var color = false
    /// Print only the summary.
    var quiet = false
    /// Keep the simulator's delivery log and the worker's JSON log in this directory.
    var keepLogDirectory: String?
    /// Write the worker's JSON log lines to stderr instead of a file.
    var workerLogsToStderr = false
    /// The whole run, startup included; past it the demo stops and fails with what was still pending.
    var timeout: Duration = .seconds(55)
    /// Checked while waiting; when set, the run stops early and reports "interrupted".
    var interrupt = DemoInterrupt()
}

/// What a run showed and checked, for the summary and for tests.
struct DemoOutcome: Sendable {
    var scene: DemoScene
    var faces: [String: LockScreenBoard.Face]
    var worker: WorkerSummary
    var ledger: ProduceLedger.State
    /// The group's committed offsets read back after the worker stopped (nil: never committed).
    var committed: [PartitionID: Int64?]
    var eventPartitions: [PartitionID]
    var deadLetters: [DeadLetter]
    var feedback: [Feedback]
    var deliveries: [DeliveryRecord]
    var simulatorStats: APNsSimulatorStats
    var seconds: Double
    var workerLogPath: String?
    var deliveryLogPath: String?
    var workerLogWriteFailures: Int
    /// Empty when every check passed; otherwise what was wrong or still pending.
    var problems: [String]

    struct DeadLetter: Sendable, Equatable {
        var topic: String
        var key: String
        var reason: String
        var source: String
        var detail: String?
    }

    struct Feedback: Sendable, Equatable {
        var key: String
        var token: String
        var status: Int
        var reason: String
    }

    var succeeded: Bool { problems.isEmpty }
    var interrupted = false
}

/// Set by the first SIGINT/SIGTERM: the demo stops playing, shuts the worker down cleanly and
/// prints the summary so far. Thread-safe (an atomic flag).
final class DemoInterrupt: Sendable {
    private let flag = Atomic(false)
    init() {}
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}
