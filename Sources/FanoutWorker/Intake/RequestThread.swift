import Foundation
import Synchronization

/// A thread of its own for a reader whose calls block (`TokenFollower`, `StateRestorer`): callers on
/// any thread queue requests; the thread takes them between its blocking calls, until `stop()`.
final class RequestThread<Request: Sendable>: Sendable {
    private struct State: Sendable {
        var requests: [Request] = []
        var running = true
    }

    private let name: String
    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)

    init(name: String) { self.name = name }

    /// Safe from any thread; never blocks.
    func enqueue(_ request: Request) { state.withLock { $0.requests.append(request) } }

    /// The requests queued since the last call, or nil once `stop()` was called: the loop must return.
    func take() -> [Request]? {
        state.withLock { state in
            guard state.running else { return nil }
            defer { state.requests.removeAll() }
            return state.requests
        }
    }

    func start(_ loop: @escaping @Sendable () -> Void) {
        let thread = Thread.named(name) { [finished] in
            loop()
            finished.signal()
        }
        thread.start()
    }

    /// Tells the loop to end and waits until it did; false when it was stopped already.
    func stop() -> Bool {
        let wasRunning = state.withLock { state in
            defer { state.running = false }
            return state.running
        }
        guard wasRunning else { return false }
        finished.wait()
        return true
    }
}
