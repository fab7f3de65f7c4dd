import Foundation
import Synchronization

/// A thread of its own for a reader whose calls block (`TokenFollower`, `StateRestorer`): callers on
/// any thread queue requests; the thread takes them between its blocking calls, until `stop()`. With
/// nothing to read, the thread sleeps in `waitForRequests` until a request or `stop()` wakes it.
final class RequestThread<Request: Sendable>: Sendable {
    private struct State: Sendable {
        var requests: [Request] = []
        var running = true
        /// The thread sleeps in `waitForRequests`: the next `enqueue` or `stop` signals `arrived`.
        var waiting = false
    }

    private let name: String
    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)
    private let arrived = DispatchSemaphore(value: 0)

    init(name: String) { self.name = name }

    /// Safe from any thread; never blocks.
    func enqueue(_ request: Request) {
        let wake = state.withLock { state -> Bool in
            state.requests.append(request)
            defer { state.waiting = false }
            return state.waiting
        }
        if wake { arrived.signal() }
    }

    /// On the thread only: returns at once when requests are queued or `stop()` was called, else
    /// blocks until one of them happens (one signal per wait, so the semaphore never runs ahead).
    func waitForRequests() {
        let mustWait = state.withLock { state -> Bool in
            guard state.requests.isEmpty, state.running else { return false }
            state.waiting = true
            return true
        }
        if mustWait { arrived.wait() }
    }

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
        let (wasRunning, wake) = state.withLock { state in
            defer { state.running = false; state.waiting = false }
            return (state.running, state.waiting)
        }
        guard wasRunning else { return false }
        if wake { arrived.signal() }
        finished.wait()
        return true
    }
}
