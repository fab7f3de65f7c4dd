/// How many requests one pooled connection may carry right now. Pure: the transport feeds it
/// dispatches, completions and time, and asks for capacity.
///
/// APNs allows one stream on a token-auth connection until a request with a valid token has been
/// answered (docs/apns.md §1). So a fresh connection carries exactly one request (the probe); the first
/// HTTP answer that is not a provider-token rejection opens it up to our cap (libcurl/nghttp2 then
/// also honour the server's SETTINGS_MAX_CONCURRENT_STREAMS). A transport failure (reset, GOAWAY,
/// TLS, or a request timeout with no answer since that request left) puts the connection into
/// exponential backoff with full jitter, after which it is fresh again. With libcurl, a connection
/// idle longer than `idleReprobe` is treated as fresh, because libcurl may have silently replaced a
/// dead one (the nghttp2 transport knows, and passes nil).
struct ConnectionGate {
    enum Phase: Equatable {
        case fresh
        case probing
        case open
        case backingOff(until: ContinuousClock.Instant)
    }

    enum Completion {
        /// An HTTP response arrived; `authenticated` is false for 403 provider-token rejections.
        case response(authenticated: Bool)
        /// One stream was reset (RST_STREAM) but the connection is fine: no answer, so a probing
        /// connection stays at one stream (the next request is the probe), and no backoff.
        case streamReset
        case transportFailure
        /// The transport gave up waiting for the answer to a request dispatched at `dispatchedAt`. When
        /// the open connection answered another request after that instant, the server is there and only
        /// this request went unanswered: it counts as a reset stream (no backoff; the connection keeps
        /// its streams). When nothing was answered since, the connection is presumed dead: a transport
        /// failure.
        case requestTimedOut(dispatchedAt: ContinuousClock.Instant)
    }

    private(set) var phase: Phase = .fresh
    /// Bumped on every counted connection failure. Requests remember the epoch they were sent in,
    /// so stragglers of a dead connection neither extend the backoff nor open the next connection.
    private(set) var epoch = 0
    private(set) var consecutiveFailures = 0
    private(set) var lastActivity: ContinuousClock.Instant
    /// When the last HTTP answer of this epoch arrived (nil: none yet).
    private(set) var lastAnswer: ContinuousClock.Instant?
    let streamCap: Int
    let idleReprobe: Duration?
    let backoffMinimum: Duration
    let backoffMaximum: Duration

    init(streamCap: Int, idleReprobe: Duration?, backoffMinimum: Duration, backoffMaximum: Duration,
         now: ContinuousClock.Instant) {
        self.streamCap = streamCap
        self.idleReprobe = idleReprobe
        self.backoffMinimum = backoffMinimum
        self.backoffMaximum = backoffMaximum
        self.lastActivity = now
    }

    /// Total requests this connection may have in flight now.
    mutating func capacity(inFlight: Int, now: ContinuousClock.Instant) -> Int {
        switch phase {
        case .fresh, .probing:
            return 1
        case .open:
            if inFlight == 0, let idleReprobe, now - lastActivity > idleReprobe {
                phase = .fresh
                return 1
            }
            return streamCap
        case .backingOff(let until):
            guard now >= until else { return 0 }
            phase = .fresh
            return 1
        }
    }

    /// When a backing-off connection becomes usable again (for the poll timeout).
    var backoffDeadline: ContinuousClock.Instant? {
        if case .backingOff(let until) = phase { return until }
        return nil
    }

    var isConnectedOrConnecting: Bool {
        switch phase {
        case .probing, .open: true
        case .fresh, .backingOff: false
        }
    }

    /// Returns the epoch to hand back in `completed`.
    mutating func dispatched(now: ContinuousClock.Instant) -> Int {
        lastActivity = now
        if phase == .fresh { phase = .probing }
        return epoch
    }

    /// `jitter` in 0...1 picks the point inside the full-jitter window (injected for tests). It is drawn
    /// only when the connection backs off: the system generator is a `getrandom` call, and this runs
    /// for every answer on the transport thread. Returns whether this completion started a backoff.
    @discardableResult
    mutating func completed(_ completion: Completion, epoch sentIn: Int, now: ContinuousClock.Instant,
                            jitter: @autoclosure () -> Double) -> Bool {
        lastActivity = now
        guard sentIn == epoch else { return false }
        switch completion {
        case .response(let authenticated):
            consecutiveFailures = 0
            lastAnswer = now
            switch phase {
            case .probing: phase = authenticated ? .open : .fresh
            case .fresh, .open, .backingOff: break
            }
        case .streamReset:
            break
        case .requestTimedOut(let dispatchedAt):
            if phase == .open, let lastAnswer, lastAnswer > dispatchedAt { break }
            return backOff(now: now, jitter: jitter)
        case .transportFailure:
            return backOff(now: now, jitter: jitter)
        }
        return false
    }

    private mutating func backOff(now: ContinuousClock.Instant, jitter: () -> Double) -> Bool {
        // Every stream of a dead connection fails at once: count the connection failure once.
        if case .backingOff = phase { return false }
        let ceiling = backoffCeiling(afterFailures: consecutiveFailures)
        consecutiveFailures += 1
        epoch += 1
        lastAnswer = nil
        phase = .backingOff(until: now + ceiling * max(0, min(1, jitter())))
        return true
    }

    /// The connection closed without losing a request (a drained GOAWAY, a server closing an idle
    /// connection): the next one is probed again, without backoff. A backoff in progress stays.
    mutating func connectionClosed() {
        lastAnswer = nil
        switch phase {
        case .probing, .open: phase = .fresh
        case .fresh, .backingOff: break
        }
    }

    /// min(maximum, minimum · 2^failures).
    func backoffCeiling(afterFailures failures: Int) -> Duration {
        var delay = backoffMinimum
        for _ in 0..<min(failures, 30) {
            delay = delay * 2
            if delay >= backoffMaximum { return backoffMaximum }
        }
        return min(delay, backoffMaximum)
    }
}
