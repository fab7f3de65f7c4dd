import APNsModel
import Synchronization

/// A request accepted by `APNsClient.send` and not yet handed to libcurl.
struct Submission: Sendable {
    var request: APNsHTTPRequest
    var credentials: APNsCredentials
    /// Checked against the client's `WriteGate` just before the request is written; nil: always written.
    var permit: WritePermit? = nil
    /// Runs once on the transport thread: `.success` for anything that went to the transport (an HTTP
    /// response, or a transport failure inside the response), `.failure` when the request could not be
    /// sent for a reason retrying cannot fix (the provider token cannot be signed).
    var completion: SubmissionCompletion
}

/// Whom a request's end is told: the raw HTTP exchange (channel management), or a push's caller, to
/// whom the exchange is told as an `APNsResult`. Both are called the same way (`callAsFunction`); the
/// push's mapping is done here, so a push carries its caller's closure alone, not a second closure
/// allocated around it for every send.
enum SubmissionCompletion: Sendable {
    case exchange(@Sendable (Result<APNsHTTPResponse, APNsClientError>) -> Void)
    case push(@Sendable (APNsResult) -> Void)

    func callAsFunction(_ outcome: Result<APNsHTTPResponse, APNsClientError>) {
        switch self {
        case .exchange(let completion):
            completion(outcome)
        case .push(let completion):
            switch outcome {
            case .success(let response): completion(response.result())
            case .failure(let error): completion(APNsClient.result(for: error))
            }
        }
    }
}

/// The bounded hand-off from any thread to the transport thread: a ring buffer behind one Mutex.
///
/// `send` appends (or throws `.queueFull`); the transport thread takes batches. Closing stops
/// intake; the transport thread then drains or, at the deadline, fails what is left.
final class SubmissionQueue: Sendable {
    struct State {
        var ring: [Submission?]
        var head = 0
        var count = 0
        var closed = false
        var deadline: ContinuousClock.Instant?
        /// Set by the transport thread just before it may sleep in poll; a sender that clears it wakes the thread.
        var sleeping = false
    }

    let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        self.capacity = capacity
        state = Mutex(State(ring: Array(repeating: nil, count: capacity)))
    }

    /// Appends; returns true when the transport thread must be woken.
    func append(_ submission: Submission) throws(APNsClientError) -> Bool {
        let outcome: Result<Bool, APNsClientError> = state.withLock { state in
            if state.closed { return .failure(.shutDown) }
            if state.count == capacity { return .failure(.queueFull(limit: capacity)) }
            state.ring[(state.head + state.count) % capacity] = submission
            state.count += 1
            let wake = state.sleeping
            state.sleeping = false
            return .success(wake)
        }
        return try outcome.get()
    }

    /// Takes up to `limit` submissions in FIFO order.
    func take(upTo limit: Int, into batch: inout [Submission]) {
        guard limit > 0 else { return }
        state.withLock { state in
            let n = min(limit, state.count)
            for _ in 0..<n {
                // Moved out, not copied and then cleared: no retain and release of each request's parts.
                batch.append(state.ring[state.head].take()!)
                state.head = (state.head + 1) % capacity
                state.count -= 1
            }
        }
    }

    /// Marks the transport thread as about to sleep; false when work is waiting (don't sleep).
    func prepareToSleep() -> Bool {
        state.withLock { state in
            if state.count > 0 { return false }
            state.sleeping = true
            return true
        }
    }

    func awake() { state.withLock { $0.sleeping = false } }

    /// Stops intake. The earliest deadline wins when called twice.
    func close(deadline: ContinuousClock.Instant) {
        state.withLock { state in
            state.closed = true
            state.deadline = min(state.deadline ?? deadline, deadline)
        }
    }

    var count: Int { state.withLock { $0.count } }
    var closing: (closed: Bool, deadline: ContinuousClock.Instant?) { state.withLock { ($0.closed, $0.deadline) } }
}
