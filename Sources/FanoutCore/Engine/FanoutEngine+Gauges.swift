/// Point-in-time counts for the worker's gauges.
extension FanoutEngine {
    /// Targets with a pending update or a send in flight, per lane (kept as they change: O(1)).
    public func busyTargets() -> (activity: Int, broadcast: Int) {
        (laneBusy[Lane.activity.slot], laneBusy[Lane.broadcast.slot])
    }

    /// Targets forgotten so far, by why (for `fanout_targets_forgotten_total`).
    public var forgottenTargets: ForgottenTargets { forgotten }
}

/// How many targets the engine stopped tracking, by why (monotonic counts).
public struct ForgottenTargets: Sendable, Hashable {
    /// Ended, and `endedRetention` passed since the end (or a later event).
    public var ended: UInt64 = 0
    /// Idle for `forgetIdleAfter`.
    public var idle: UInt64 = 0
    /// Evicted at `maxTrackedTargets` to make room for a new target (least recently active idle ones).
    public var evicted: UInt64 = 0

    public init() {}
}
