import APNsModel

/// Why is this Lock Screen stale: what the engine knows about one target, for `/debug/targets/<key>`.
public struct TargetSnapshot: Sendable, Hashable {
    public var lane: Lane
    public var key: String
    public var app: String
    public var ended: Bool
    public var endAccepted: Bool
    public var sends: Int
    public var deliveries: Int
    /// Timestamp of the last delivered state, if any.
    public var lastSentTimestamp: Int64?
    public var lastSendAt: Nanoseconds?
    public var lastDeliveredAt: Nanoseconds?
    public var lastOutcome: OutcomeSummary?
    public var lastOutcomeAt: Nanoseconds?
    /// The pending state: its kind, timestamp and how many input offsets it covers.
    public var pendingKind: EventKind?
    public var pendingTimestamp: Int64?
    public var pendingOffsets: Int
    public var inFlightSendID: UInt64?
    /// Priority-10 credits left now.
    public var budgetLeft: Double
    public var backoffUntil: Nanoseconds?
    public var retryAttempts: Int
    public var waitingForTokenSince: Nanoseconds?
    /// The usable token as `PushToken.redacted` shows it (at most 8 hex digits and its length), never whole.
    public var tokenPrefix: String?
    public var appPausedReason: String?
    public var nextTimer: Nanoseconds?
    /// The partition the target's events come from (nil once it was revoked), and the offsets its
    /// pending state and its send in flight cover there, oldest first: what the worker reads the
    /// events' trace contexts from (docs/design.md §12).
    public var partition: PartitionID?
    public var pendingEventOffsets: [Int64] = []
    public var inFlightEventOffsets: [Int64] = []
}

extension FanoutEngine {
    /// A snapshot of one target, or nil when it is not tracked.
    public func snapshot(lane: Lane, target key: String, now: Nanoseconds) -> TargetSnapshot? {
        guard let slot = slot(of: TargetHash(lane: lane, id: key), id: key) else { return nil }
        let target = targets[Int(slot)]
        let update = target.hasPending ? pendings[target.pendingIndex] : nil
        let token = lane == .activity ? tokens.usableToken(for: key, notBefore: target.tokenNotBefore) : nil
        return TargetSnapshot(
            lane: lane, key: key, app: apps[Int(target.appIndex)], ended: target.ended, endAccepted: target.endAccepted,
            sends: Int(target.sends), deliveries: Int(target.deliveries),
            lastSentTimestamp: target.lastSentTimestamp >= 0 ? target.lastSentTimestamp : nil,
            lastSendAt: target.sends > 0 ? target.lastSendAt : nil,
            lastDeliveredAt: target.deliveries > 0 ? target.lastDeliveredAt : nil,
            lastOutcome: target.lastOutcome, lastOutcomeAt: target.lastOutcome != nil ? target.lastOutcomeAt : nil,
            pendingKind: update?.event.kind, pendingTimestamp: update?.event.timestamp, pendingOffsets: update?.offsets.count ?? 0,
            inFlightSendID: target.inFlightSendID == 0 ? nil : target.inFlightSendID,
            budgetLeft: target.bucket.available(at: now, settings: budget(of: target)),
            backoffUntil: target.backoffUntil > now ? target.backoffUntil : nil,
            retryAttempts: Int(target.attempts),
            waitingForTokenSince: target.tokenWaitSince >= 0 ? target.tokenWaitSince : nil,
            tokenPrefix: token.map { $0.token.redacted },
            appPausedReason: paused[target.appIndex]?.reason,
            nextTimer: target.timerAt == .max ? nil : target.timerAt,
            partition: partitions[Int(target.partitionSlot)]?.id,
            pendingEventOffsets: update?.offsets ?? [],
            inFlightEventOffsets: inFlight.send(target.inFlightSendID)?.update.offsets ?? [])
    }
}
