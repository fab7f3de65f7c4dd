/// Which records of one source partition `fanout replay` copies.
///
/// Offsets bound the range first (`start` inclusive, `end` exclusive: the high watermark when the
/// replay began, or `--end-offset`); times then narrow it the way Kafka's `offsetsForTimes` does:
/// copying begins at the first record whose timestamp is at or after `startTime`, and the partition
/// ends at the first record whose timestamp is at or after `endTime`. Times are milliseconds since
/// the UNIX epoch. Records after the first one in range are copied whatever their timestamp.
struct ReplayRange: Sendable, Hashable {
    var start: Int64
    var end: Int64
    var startTime: Int64?
    var endTime: Int64?

    init(start: Int64, end: Int64, startTime: Int64? = nil, endTime: Int64? = nil) {
        self.start = start
        self.end = end
        self.startTime = startTime
        self.endTime = endTime
    }

    /// No offset can be in range.
    var isEmpty: Bool { end <= start || (startTime != nil && endTime != nil && endTime! <= startTime!) }
}
