import FanoutCore

/// Carries out the engine's Kafka-side actions (docs/design.md §5): the intake service,
/// which owns the group consumer and the activity-tokens follower. It decides nothing: each call
/// executes what the engine asked and reports what Kafka answered back through `WorkerCore`.
///
/// Threading: every method may be called from any thread (the engine's actions are performed on
/// whichever thread fed it) and must not block.
protocol PartitionActions: AnyObject, Sendable {
    func followTokens(_ partition: Int32, assignment: AssignmentID)
    /// Also stops restoring the partition's state, if that is under way.
    func unfollowTokens(_ partition: Int32)
    /// Reads the partition's state changelog; the result comes back through `WorkerCore.stateRestored`.
    func restoreState(_ partition: Int32, assignment: AssignmentID)
    func pauseFetching(_ partitions: [PartitionID])
    func resumeFetching(_ partitions: [PartitionID])
    /// Commit without waiting; the answer comes back through `WorkerCore.commitAnswered` (with
    /// `round` when Kafka refused it because the group is rebalancing).
    func commit(_ points: [CommitPoint], round: UInt64)
    /// A revoke the engine drained: its final point is committed inside the rebalance callback.
    func revokeDrained(_ partition: PartitionID, commit: CommitPoint?)
}

/// A weak reference, so the core does not keep the intake (which owns it) alive.
struct WeakPartitionActions: Sendable {
    weak var value: (any PartitionActions)?
}
