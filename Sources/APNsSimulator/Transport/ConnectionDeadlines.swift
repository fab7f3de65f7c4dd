/// When a connection has waited too long, decided from plain numbers (monotonic nanoseconds) so it is
/// testable without sockets. The event loop asks every connection on each sweep.
struct ConnectionDeadlines: Sendable, Equatable {
    var handshakeNanos: UInt64
    var idleNanos: UInt64
    var goAwayGraceNanos: UInt64

    enum Verdict: Equatable {
        case keep
        /// The TLS handshake did not finish in time: drop (there is no session to say goodbye on).
        case handshakeTimedOut
        /// No open stream and no traffic for the idle timeout: send GOAWAY, then close like after any GOAWAY.
        case idle
        /// A GOAWAY was sent and the grace period is over (streams unanswered or the peer never closed): drop.
        case goAwayGraceOver
    }

    init(configuration: APNsSimulatorConfiguration) {
        handshakeNanos = Self.nanos(configuration.handshakeTimeoutSeconds)
        idleNanos = Self.nanos(configuration.idleTimeoutSeconds)
        goAwayGraceNanos = Self.nanos(configuration.goAwayGraceSeconds)
    }

    /// How often the loop sweeps: a quarter of the shortest deadline, within 10 ms...1 s.
    var sweepIntervalNanos: UInt64 {
        min(max(min(handshakeNanos, idleNanos, goAwayGraceNanos) / 4, 10_000_000), 1_000_000_000)
    }

    func verdict(now: UInt64, openedAt: UInt64, handshakeDone: Bool, lastActivity: UInt64, hasOpenStreams: Bool,
                 goAwayAt: UInt64?) -> Verdict {
        if !handshakeDone { return Self.elapsed(now, since: openedAt) >= handshakeNanos ? .handshakeTimedOut : .keep }
        if let goAwayAt { return Self.elapsed(now, since: goAwayAt) >= goAwayGraceNanos ? .goAwayGraceOver : .keep }
        if !hasOpenStreams, Self.elapsed(now, since: lastActivity) >= idleNanos { return .idle }
        return .keep
    }

    /// Zero when `start` is later than `now` (the loop reads its clock before it accepts and stamps new connections).
    private static func elapsed(_ now: UInt64, since start: UInt64) -> UInt64 { now > start ? now - start : 0 }

    private static func nanos(_ seconds: Double) -> UInt64 { UInt64((seconds * 1e9).rounded()) }
}
