import Foundation
import Synchronization

/// Runs a body every `interval` on a named thread of its own, from `start` until `stop` (the heap
/// trimmer, the send lease's ticking). `stop` wakes the thread at once and waits for it to finish.
final class PeriodicThread: Sendable {
    private let name: String
    private let interval: Duration
    private let stopped = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(false)

    init(name: String, every interval: Duration) {
        self.name = name
        self.interval = interval
    }

    /// Starts the thread, unless it runs already.
    func start(_ body: @escaping @Sendable () -> Void) {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread.named(name) { [self] in
            while stopped.wait(timeout: .now() + interval.timeInterval) == .timedOut { body() }
            finished.signal()
        }
        thread.start()
    }

    func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        stopped.signal()
        finished.wait()
    }
}
