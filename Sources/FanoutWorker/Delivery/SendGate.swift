import FanoutAPNs
import FanoutCore
import Foundation
import Synchronization

/// The send lease executed (docs/design.md §5, "The send lease"): every APNs client of the worker asks
/// this gate just before it writes a request. It carries out two decisions made elsewhere:
/// - `SendLease` (pure): after this process did not run for half a session timeout, nothing is
///   written until a consumer poll has let librdkafka report what the group did meanwhile;
/// - the engine's `.assignmentEnded`: a send decided under an assignment that is over (the
///   partition lost, drained, or given back) is withdrawn instead of written.
///
/// Reports of a running process come from a thread of its own (every `tickInterval`), from each
/// client thread as it dispatches, and from the intake thread after every poll.
final class SendGate: WriteGate {
    static let tickInterval: Duration = .milliseconds(100)
    /// Ended assignments remembered (the oldest forgotten first): a queued send is at most
    /// `apns.activity.max_queued` sends old, far fewer rebalances than this.
    static let endedCapacity = 4096

    private struct State {
        var lease: SendLease
        /// Assignments the engine ended, the newest `endedCapacity` of them.
        var ended = DedupeWindow(capacity: SendGate.endedCapacity)
    }

    private let state: Mutex<State>
    private let origin = ContinuousClock.now
    private let log: Log
    private let metrics: FanoutMetrics
    /// The clients to wake when the gate opens again; set once, before any send. Held weakly: each
    /// client holds this gate, so a strong list was a cycle that kept every client, its connections
    /// and the metrics alive after the worker was released (LeakSanitizer at every `fanout run` exit).
    private let clients = Mutex<[WeakClient]>([])

    private struct WeakClient {
        weak var client: APNsClient?
    }
    private let ticking = PeriodicThread(name: "fanout-lease", every: SendGate.tickInterval)

    /// `sessionTimeout`: the consumer's `session.timeout.ms` (librdkafka's default 45 s when unset).
    init(sessionTimeout: Duration, log: Log, metrics: FanoutMetrics) {
        state = Mutex(State(lease: SendLease(sessionTimeout: Nanoseconds(sessionTimeout))))
        self.log = log
        self.metrics = metrics
    }

    static func sessionTimeout(of kafka: [String: String]) -> Duration {
        .milliseconds(kafka["session.timeout.ms"].flatMap { Int($0) } ?? 45_000)
    }

    /// The clients this gate guards; called once, before the worker starts.
    func guarding(_ clients: [APNsClient]) { self.clients.withLock { $0 = clients.map { WeakClient(client: $0) } } }

    var isHolding: Bool { state.withLock { $0.lease.isHolding } }

    // MARK: WriteGate (client threads)

    func isOpen() -> Bool { ran() == .open }

    func admits(_ permit: WritePermit) -> Bool {
        state.withLock { !$0.ended.contains(permit.assignment) }
    }

    // MARK: Facts from the worker

    /// The engine ended this assignment: its queued sends are withdrawn from now on.
    func ended(_ assignment: AssignmentID) {
        _ = state.withLock { $0.ended.insert(assignment.rawValue) }
    }

    /// A consumer poll that began at `startedAt` returned (its rebalance callbacks ran inside it).
    func polled(startedAt: ContinuousClock.Instant) {
        ran()
        let began = Nanoseconds(startedAt - origin)
        guard state.withLock({ $0.lease.pollReturned(startedAt: began) }) else { return }
        metrics.sendsHeld.labels().set(0)
        log.info("the consumer group has had its say after the stall: queued sends go on (those of partitions lost meanwhile are withdrawn)")
        for client in clients.withLock({ $0.compactMap(\.client) }) { client.wake() }
    }

    // MARK: The ticking thread

    func start() {
        ticking.start { [self] in ran() }
    }

    func stop() { ticking.stop() }

    // MARK: Internals

    /// Reports that this thread runs now; the first report after a stall logs and counts it.
    @discardableResult
    private func ran() -> SendLease.Observation {
        let now = Nanoseconds(ContinuousClock.now - origin)
        let (observation, threshold) = state.withLock { ($0.lease.ran(at: now), $0.lease.stallThreshold) }
        guard case .stalled(let gap) = observation else { return observation }
        metrics.sendStalls.labels().increment()
        metrics.sendsHeld.labels().set(1)
        log.warning("this process did not run for longer than half the session timeout (stopped, swapped out or starved): no send is written until the consumer group has had its say, so none goes out for a partition another member may own by now",
                    ["stalled_for": .duration(.nanoseconds(gap)), "threshold": .duration(.nanoseconds(threshold))])
        return observation
    }
}
