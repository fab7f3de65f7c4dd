import FanoutCore

/// What the group consumer tells its owner about partition ownership changes.
///
/// Threading: every closure runs synchronously on the thread inside `KafkaConsumer.poll` (or
/// `close`), the consumer's polling thread. Keep them short; never call `poll` from inside.
public struct KafkaRebalanceHandler: Sendable {
    /// Newly added partitions (incremental with cooperative-sticky), already assigned when called.
    public var assigned: @Sendable ([PartitionID]) -> Void
    /// Partitions about to be taken away in an orderly rebalance or on `close`. Return the offsets
    /// ("next to read") to commit for them; the consumer commits them synchronously right away,
    /// before the incremental unassign, while this member's generation is still valid. A failed
    /// commit is reported in the next poll batch's `errors` (or thrown from `close`).
    public var revoking: @Sendable ([PartitionID]) -> [PartitionID: Int64]
    /// Partitions lost without an orderly handoff (session timeout, fenced): another member may
    /// own them already, so nothing is committed; drop their state.
    public var lost: @Sendable ([PartitionID]) -> Void
    /// A rebalance finished for this member (a SyncGroup succeeded and its assignment, possibly
    /// adding nothing, is applied): after `assigned` when that is called, and also when it is not.
    /// Not after the assignment that follows a cooperative revoke: the member rejoins right after it.
    public var settled: @Sendable () -> Void
    /// The member left its settled state: a JoinGroup/SyncGroup round has begun (another member
    /// joined or left, a heartbeat answered "rebalance in progress", the subscription changed).
    /// Called on librdkafka's own thread the moment it happens, before any callback of that round:
    /// record the fact and return. Until `settled`, a commit carries a generation that is ending.
    public var rejoining: @Sendable () -> Void
    /// The member just sent a heartbeat, on librdkafka's own thread (like `rejoining`). Its answer may
    /// say the group is rebalancing, and librdkafka then rejoins before anything handed to it after the
    /// answer arrived: record the time and return.
    public var heartbeatSent: @Sendable () -> Void

    public init(assigned: @escaping @Sendable ([PartitionID]) -> Void = { _ in },
                revoking: @escaping @Sendable ([PartitionID]) -> [PartitionID: Int64] = { _ in [:] },
                lost: @escaping @Sendable ([PartitionID]) -> Void = { _ in },
                settled: @escaping @Sendable () -> Void = {},
                rejoining: @escaping @Sendable () -> Void = {},
                heartbeatSent: @escaping @Sendable () -> Void = {}) {
        self.assigned = assigned
        self.revoking = revoking
        self.lost = lost
        self.settled = settled
        self.rejoining = rejoining
        self.heartbeatSent = heartbeatSent
    }
}
