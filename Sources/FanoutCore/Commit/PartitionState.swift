/// One assigned partition: its offset tracker, dedupe window and send count.
struct PartitionState: Sendable {
    var id: PartitionID
    var tracker = OffsetTracker()
    var dedupe: DedupeWindow
    var inFlight = 0
    var lane: Lane?
    var lastReportedCommit: Int64?
    /// When the worker was given the partition (`assign(_:now:)`), or `.min` when it was never said.
    var assignedAt: Nanoseconds = .min
}
