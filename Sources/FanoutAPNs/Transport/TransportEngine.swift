import APNsModel
import Synchronization

/// What `APNsClient` runs on its one dedicated thread: takes submissions from the queue, spreads
/// them over the connection pool within every bound, and completes each exactly once.
///
/// `run()` returns after shutdown (queue closed and drained, or its deadline passed) and then
/// signals `finished`. `wakeup()` is the only method other threads call.
protocol TransportEngine: AnyObject, Sendable {
    func run()
    /// Interrupts the engine's wait (new submissions, shutdown). Thread-safe.
    func wakeup()
}

/// Counters the transport thread publishes for `APNsClient.stats`.
final class APNsClientCounters: Sendable {
    let inFlight = Atomic<Int>(0)
    let connections = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
    /// nghttp2 transport only: PING ACKs received, the latest server stream limit (-1: none yet),
    /// and the latest GOAWAY.
    let pingsAcknowledged = Atomic<Int>(0)
    let serverMaxConcurrentStreams = Atomic<Int>(-1)
    let lastGoAway = Mutex<APNsClient.GoAway?>(nil)
}

/// Fires once when the transport thread has finished; async waiters resume then.
final class ShutdownSignal: Sendable {
    private let state = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func signal() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    var isDone: Bool { state.withLock { $0.done } }
}

extension ConnectionGate.Completion {
    /// The gate event for an HTTP response, shared by both transports: a provider-token rejection
    /// (403 ExpiredProviderToken, InvalidProviderToken, MissingProviderToken) does not open a probing
    /// connection, and ExpiredProviderToken also tells the token cache (which re-mints at most once
    /// per 20 minutes per key).
    static func response(_ response: APNsHTTPResponse, credentials: APNsCredentials?, tokenGeneration: Int,
                         tokenCache: ProviderTokenCache) -> Self {
        guard response.status == 403, let reason = response.errorBody().reason else { return .response(authenticated: true) }
        switch reason {
        case .expiredProviderToken:
            if let credentials {
                // Fails only if signing fails; the next send reports that error itself.
                _ = try? tokenCache.tokenRejectedAsExpired(tokenGeneration, for: credentials)
            }
            return .response(authenticated: false)
        case .invalidProviderToken, .missingProviderToken:
            return .response(authenticated: false)
        default:
            return .response(authenticated: true)
        }
    }
}

extension APNsHTTPResponse {
    /// Records one response header APNs defines (name lowercase, as HTTP/2 sends it and as both
    /// transports hand it over); others are ignored.
    mutating func record(headerName name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        if Self.equalsIgnoringCase(name, "apns-id") {
            apnsID = String(decoding: value, as: UTF8.self)
        } else if Self.equalsIgnoringCase(name, "apns-unique-id") {
            apnsUniqueID = String(decoding: value, as: UTF8.self)
        } else if Self.equalsIgnoringCase(name, "apns-request-id") {
            apnsRequestID = String(decoding: value, as: UTF8.self)
        } else if Self.equalsIgnoringCase(name, "apns-channel-id") {
            channelID = String(decoding: value, as: UTF8.self)
        } else if Self.equalsIgnoringCase(name, "retry-after") {
            retryAfterSeconds = Int(String(decoding: value, as: UTF8.self))
        }
    }

    private static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Bool {
        guard bytes.count == name.utf8CodeUnitCount else { return false }
        let expected = name.utf8Start
        for index in 0..<bytes.count where bytes[index] | 0x20 != expected[index] | 0x20 { return false }
        return true
    }
}

extension SubmissionQueue {
    /// Fails everything still queued (each exactly once) with `reason`.
    func failRemaining(reason: String, scratch batch: inout [Submission]) {
        while true {
            batch.removeAll(keepingCapacity: true)
            take(upTo: 1024, into: &batch)
            if batch.isEmpty { break }
            for submission in batch { submission.completion(APNsHTTPResponse(status: nil, transportFailure: reason)) }
        }
    }
}
