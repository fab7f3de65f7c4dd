import Dispatch
import FanoutWorker
import Foundation
import Synchronization

/// `fanout run`: the worker. Reads the configuration (file + `FANOUT_*`), starts the worker, and
/// shuts it down gracefully on SIGTERM/SIGINT (a second signal exits at once).
struct RunCommand: Command {
    static let name = "run"
    static let summary = "Run the worker: Kafka job events to Live Activity pushes on APNs"
    static let help = """
    Usage: fanout run [--config <file>] [--print-config]

    Consumes activity-updates and broadcast-updates in one consumer group, coalesces events into
    Live Activity updates under each token's budget, sends them to APNs over HTTP/2, and commits
    offsets only after APNs accepted the push that carried them (or the event was resolved).

    Options:
      --config <file>   JSON configuration file (default: $FANOUT_CONFIG; none = defaults + env)
      --print-config    print every knob with its value and where it came from, then exit

    Every knob can also be set with a FANOUT_* environment variable (env wins), e.g.
    FANOUT_KAFKA__BOOTSTRAP_SERVERS=broker:9092, FANOUT_APNS__ACTIVITY__CONNECTIONS=4,
    FANOUT_KAFKA__SASL_MECHANISM=PLAIN (any librdkafka property).

    Signals: SIGTERM or SIGINT stops intake, drains in-flight sends up to shutdown_timeout, commits
    and leaves the group (exit 0). A second signal exits at once (exit 130) without committing
    anything more; undelivered events are replayed by the next owner.

    If the worker fails for good while running (its Kafka consumer or the activity-tokens reader
    died), /readyz reports it and the process stops the same way and exits 1, to be restarted.

    Exit codes: 0 stopped cleanly · 78 configuration error · 1 other startup failure or failed while
    running · 64 usage
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        ProcessHeap.limitArenas()  // before the worker's threads start (ProcessHeap says why)
        var args = Arguments(arguments)
        let path = try args.option("config") ?? ProcessInfo.processInfo.environment["FANOUT_CONFIG"]
        let printConfig = args.flag("print-config")
        try args.finish()

        let configuration: FanoutConfiguration
        do {
            configuration = try FanoutConfiguration.load(path: path)
        } catch let error as ConfigurationError {
            Output.err("fanout run: \(error)")
            return 78
        }
        if printConfig {
            Output.out(configuration.describe())
            return 0
        }
        let log = Log(level: configuration.logLevel)
        let worker: Worker
        do {
            worker = try Worker(configuration: configuration, log: log, metrics: FanoutMetrics())
            try worker.start()
        } catch let error as WorkerError {
            log.error("fanout run could not start", ["error": .string(error.message), "code": .string(error.code.rawValue)])
            Output.err("fanout run: \(error.message)")
            return error.isConfigurationError ? 78 : 1
        }

        let signals = SignalCounter()
        let failure: String? = await withCheckedContinuation { continuation in
            let first = FirstOf(continuation)
            worker.whenFailed { first.resume($0) }
            Task { await signals.waitForFirst(); first.resume(nil) }
        }
        if let failure {
            log.error("stopping: the worker failed", ["reason": .string(failure), "timeout": .duration(configuration.shutdownTimeout)])
            await worker.stop(timeout: configuration.shutdownTimeout)
            Output.err("fanout run: \(failure)")
            return 1
        }
        log.info("stop requested: draining", ["timeout": .duration(configuration.shutdownTimeout)])
        await worker.stop(timeout: configuration.shutdownTimeout)
        return 0
    }
}

/// Resumes a continuation with whichever of several sources answers first; later answers are ignored.
private final class FirstOf<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) { self.continuation = Mutex(continuation) }

    func resume(_ value: Value) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}

/// SIGTERM/SIGINT through dispatch sources (not async-signal handlers): the first resumes the
/// waiter, the second exits the process at once. Nothing undelivered is ever committed, so exiting
/// without the final commit only means the next owner replays a little more.
/// `@unchecked Sendable`: every stored property is set in `init` and never changed; the sources are
/// only kept alive here, and `state` guards its own fields with a lock.
private final class SignalCounter: @unchecked Sendable {
    private let queue = DispatchQueue(label: "fanout-signals")
    private let sources: [any DispatchSourceSignal]
    private let state = SignalState()

    init() {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            sources.append(source)
        }
        self.sources = sources
        for source in sources {
            source.setEventHandler { [state] in state.received() }
            source.resume()
        }
    }

    func waitForFirst() async {
        await withCheckedContinuation { continuation in state.wait(continuation) }
    }
}

private final class SignalState: @unchecked Sendable {
    // Only touched on the signal queue and in `wait`, both under `lock`.
    private let lock = NSLock()
    private var count = 0
    private var waiter: CheckedContinuation<Void, Never>?

    func received() {
        lock.lock()
        count += 1
        let current = count
        let resume = waiter
        waiter = nil
        lock.unlock()
        if current >= 2 {
            Output.err("fanout run: second signal, exiting now without a final commit")
            _exit(130)
        }
        resume?.resume()
    }

    func wait(_ continuation: CheckedContinuation<Void, Never>) {
        lock.lock()
        if count > 0 {
            lock.unlock()
            continuation.resume()
            return
        }
        waiter = continuation
        lock.unlock()
    }
}
