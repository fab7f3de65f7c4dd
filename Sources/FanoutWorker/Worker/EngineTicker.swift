import FanoutCore
import Foundation
import Synchronization

/// Ticks the engine at its `nextDeadline()` on a thread of its own: held minor updates,
/// `min_interval` waits, backoffs, token waits and app probes all fire from here.
///
/// Threading: `wake(ifEarlierThan:)` is called from any thread after the engine changed; it
/// signals only when the new deadline is earlier than the one the thread sleeps towards.
final class EngineTicker: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    /// Engine time the thread will wake at next (`Int64.max` while it is busy ticking).
    private let scheduled = Atomic<Int64>(Int64.max)
    private let running = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    /// Longest sleep: a safety net against a missed wake-up.
    static let maximumSleep: Nanoseconds = .milliseconds(500)

    /// How long to sleep before `deadline`. The engine says "at once" with `Nanoseconds.min` (a
    /// drained partition to give back, tombstones to hand out): `deadline - now` would overflow.
    static func sleep(until deadline: Nanoseconds, now: Nanoseconds) -> Nanoseconds {
        deadline <= now ? 0 : deadline - now
    }

    func wake(ifEarlierThan deadline: Nanoseconds) {
        let current = scheduled.load(ordering: .relaxed)
        // While ticking (max) the thread reads the deadline afresh afterwards: no signal needed.
        if current != Int64.max && deadline < current { semaphore.signal() }
    }

    func start(core: WorkerCore) {
        running.store(true, ordering: .relaxed)
        let thread = Thread.named("fanout-ticker") { [self] in
            while running.load(ordering: .relaxed) {
                // Any change from here on signals: the deadline read below may already be stale.
                scheduled.store(Int64.max - 1, ordering: .relaxed)
                let now = core.clock.now()
                let next = min(core.nextDeadline() ?? (now + Self.maximumSleep), now + Self.maximumSleep)
                scheduled.store(next, ordering: .relaxed)
                _ = semaphore.wait(timeout: .now() + .nanoseconds(Int(Self.sleep(until: next, now: now))))
                scheduled.store(Int64.max, ordering: .relaxed)
                guard running.load(ordering: .relaxed) else { break }
                core.tick()
            }
            finished.signal()
        }
        thread.start()
    }

    /// Stops the thread and waits for it.
    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        semaphore.signal()
        finished.wait()
    }
}
