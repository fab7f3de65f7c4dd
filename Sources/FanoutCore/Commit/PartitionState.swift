/// One assigned partition: its offset tracker, dedupe window and send count.
struct PartitionState: Sendable {
    var id: PartitionID
    var tracker = OffsetTracker()
    var dedupe: DedupeWindow
    var inFlight = 0
    var lane: Lane?
    var lastReportedCommit: Int64?
}
