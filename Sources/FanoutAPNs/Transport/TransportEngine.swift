import APNsModel
import FanoutCrypto
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

/// A pooled connection as the dispatcher sees it, whichever transport carries it.
protocol PooledConnection: AnyObject {
    /// Requests dispatched to this connection and not yet completed.
    var inFlight: Int { get }
    /// Requests this connection may carry in total right now (its `ConnectionGate`, capped by what the
    /// transport knows, such as the server's stream limit).
    func capacity(now: ContinuousClock.Instant) -> Int
}

/// The dispatch decisions both transports share: how many queued submissions fit now, which connection
/// takes the next one (the least loaded with a free slot), and the provider token it is signed with.
struct Dispatcher<Connection: PooledConnection> {
    let connections: [Connection]
    let maxInFlight: Int
    let tokenCache: ProviderTokenCache
    let gate: (any WriteGate)?
    /// Scratch for one `dispatch`: the free slots of each connection, counted down as submissions are placed.
    private var free: [Int]

    init(connections: [Connection], maxInFlight: Int, tokenCache: ProviderTokenCache, gate: (any WriteGate)?) {
        self.connections = connections
        self.maxInFlight = maxInFlight
        self.tokenCache = tokenCache
        self.gate = gate
        free = Array(repeating: 0, count: connections.count)
    }

    /// Takes as many submissions from `queue` as the bounds allow and hands each to `start` with its
    /// connection and token (or completes it with the configuration error that keeps it from being
    /// signed). Returns whether room is left (then the queue is empty).
    ///
    /// The free slots are counted once, before anything is taken, and only as many submissions as
    /// there are free slots are started: each is placed on a connection with a slot left in that count,
    /// so every submission started has a connection (by construction, whatever `start` does).
    ///
    /// The `WriteGate` is asked here, the last step before a request goes on the wire: while it is
    /// closed nothing is taken (returns false: no room, so the loop sleeps until woken); a submission
    /// whose permit it no longer admits completes as `.withdrawn` without being written. A submission
    /// completed without being started (withdrawn, or its token cannot be signed) takes no slot: more
    /// are taken in its place until the room is used or the queue is empty, so the thousands of sends a
    /// rebalance withdraws clear in one pass, even through probing connections' single slots.
    mutating func dispatch(from queue: SubmissionQueue, into batch: inout [Submission], inFlight: Int, now: ContinuousClock.Instant,
                           start: (Submission, Connection, ProviderTokenCache.Token) -> Void) -> Bool {
        var slots = 0
        for index in connections.indices {
            free[index] = max(0, connections[index].capacity(now: now) - connections[index].inFlight)
            slots += free[index]
        }
        let room = min(maxInFlight - inFlight, slots)
        guard room > 0 else { return false }
        if let gate, !gate.isOpen() { return false }
        var started = 0
        var signed: (credentials: APNsCredentials, token: ProviderTokenCache.Token)?
        while started < room {
            batch.removeAll(keepingCapacity: true)
            queue.take(upTo: room - started, into: &batch)
            if batch.isEmpty { break }
            for submission in batch {
                if let permit = submission.permit, let gate, !gate.admits(permit) {
                    submission.completion(.failure(.withdrawn))
                    continue
                }
                guard let token = providerToken(for: submission, reusing: &signed) else { continue }
                // Σ free ≥ room > started: each start uses one slot of that sum.
                let best = leastLoadedWithFreeSlot()
                free[best] -= 1
                started += 1
                start(submission, connections[best], token)
            }
        }
        return started < room
    }

    /// The token `submission` is signed with, or nil after completing it with the configuration error
    /// that keeps it from being signed. A pass is signed by one or a few keys: the cache (a lock and a
    /// hash of both ids) is asked again only when the key changes (`signed` is the last one).
    private func providerToken(for submission: Submission,
                               reusing signed: inout (credentials: APNsCredentials, token: ProviderTokenCache.Token)?) -> ProviderTokenCache.Token? {
        let credentials = submission.credentials
        if let signed, signed.credentials.keyID == credentials.keyID, signed.credentials.teamID == credentials.teamID {
            return signed.token
        }
        do {
            let token = try tokenCache.token(for: credentials)
            signed = (credentials, token)
            return token
        } catch {
            // docs/design.md §4: a configuration error, not a transport failure to retry forever. The
            // error describes the key problem (OpenSSL's reason), never the key or a JWT.
            submission.completion(.failure(.cannotSignProviderToken(teamID: credentials.teamID, keyID: credentials.keyID,
                                                                    reason: "\(error)")))
            return nil
        }
    }

    /// The connection with a free slot left in this pass's count that carries the fewest requests.
    private func leastLoadedWithFreeSlot() -> Int {
        var best = -1
        for index in connections.indices where free[index] > 0 {
            if best < 0 || connections[index].inFlight < connections[best].inFlight { best = index }
        }
        precondition(best >= 0, "dispatch started more submissions than it counted free slots")
        return best
    }
}

/// Counters the transport thread publishes for `APNsClient.stats`.
final class APNsClientCounters: Sendable {
    let inFlight = Atomic<Int>(0)
    let connections = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
    /// nghttp2 transport only: PING ACKs received, the latest server stream limit (-1: none yet),
    /// and the latest GOAWAY.
    let pingsAcknowledged = Atomic<Int>(0)
    /// End reports whose ticket matched no request in flight, and completed nothing (should stay 0).
    let unmatchedEnds = Atomic<Int>(0)
    /// Connection failures that put a connection into backoff (`ConnectionGate`), all connections.
    let connectionBackoffs = Atomic<Int>(0)
    let serverMaxConcurrentStreams = Atomic<Int>(-1)
    let lastGoAway = Mutex<APNsClient.GoAway?>(nil)
}

/// Fires once when the transport thread has finished; async waiters resume then.
final class ShutdownSignal: Sendable {
    private let state = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// The transport thread's last act. It frees the thread's OpenSSL state first: a waiter may exit
    /// the process as soon as it resumes, before the thread's exit handlers would have freed it.
    func signal() {
        OpenSSLThreadState.release()
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
}

extension ConnectionGate.Completion {
    /// The gate event for an HTTP response, shared by both transports: a provider-token rejection
    /// (403 ExpiredProviderToken, InvalidProviderToken, MissingProviderToken) does not open a probing
    /// connection. ExpiredProviderToken also goes to the token cache, whose judgement of it (a newer
    /// token exists, the window is about to end, or this machine's clock is wrong) is noted on
    /// `response` for the classifier. `providerToken` is the token the request carried and `credentials` its signer.
    static func response(_ response: inout APNsHTTPResponse, credentials: APNsCredentials?,
                         providerToken: ProviderTokenCache.Token?, tokenCache: ProviderTokenCache) -> Self {
        guard response.status == 403, let reason = response.errorBody().reason else { return .response(authenticated: true) }
        switch reason {
        case .expiredProviderToken:
            if let credentials, let providerToken {
                response.rejectedProviderToken = tokenCache.tokenRejectedAsExpired(providerToken, for: credentials)
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
    /// The note (in `transportFailure`, next to the status) on an answered request whose response body
    /// went over the transport's limit; both transports keep the first `limit` bytes.
    static func bodyOverflowNote(limit: Int) -> String {
        "response body over \(limit) bytes: only the first \(limit) were kept"
    }

    /// Records one response header APNs defines (name lowercase, as HTTP/2 sends it and as both
    /// transports hand it over); others are ignored.
    mutating func record(headerName name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        if Self.equalsIgnoringCase(name, "apns-id") {
            apnsIDHeader = HeaderText(value)
        } else if Self.equalsIgnoringCase(name, "apns-unique-id") {
            apnsUniqueIDHeader = HeaderText(value)
        } else if Self.equalsIgnoringCase(name, "apns-request-id") {
            apnsRequestIDHeader = HeaderText(value)
        } else if Self.equalsIgnoringCase(name, "apns-channel-id") {
            channelID = String(decoding: value, as: UTF8.self)
        } else if Self.equalsIgnoringCase(name, "retry-after") {
            retryAfterSeconds = Self.delaySeconds(value)
        }
    }

    /// A `retry-after` value as delay-seconds, which is digits only (RFC 9110 §10.2.3): nil for an
    /// HTTP-date, a sign (`-1` would be a retry "after" a time already past) or a number too large for
    /// Int (leading zeros are fine). Read from the bytes, without making a String.
    static func delaySeconds(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !value.isEmpty else { return nil }
        var seconds = 0
        for byte in value {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflowA) = seconds.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = shifted.addingReportingOverflow(Int(digit))
            guard !overflowA, !overflowB else { return nil }
            seconds = sum
        }
        return seconds
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
            for submission in batch { submission.completion(.success(APNsHTTPResponse(status: nil, transportFailure: reason))) }
        }
    }
}
