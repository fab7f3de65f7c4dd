import FanoutKafka

/// The order in which `fanout replay` produces records: each source partition in offset order, the
/// partitions merged by record timestamp (the smallest head first; ties by partition number).
/// A record is handed out only once every partition still in range has its next record buffered,
/// so the merge never runs ahead of a partition whose data has not arrived yet.
///
/// Bounds: each partition buffers at most `readAhead` records before `flowChanges` asks to pause
/// its fetching (plus at most one poll batch already on its way); it is resumed once its buffer is
/// half drained. Pure: no Kafka calls, no clock.
struct ReplayMerge: Sendable {
    enum Next: Equatable {
        case record(KafkaMessage)
        /// These partitions have nothing buffered and are not finished: read more.
        case needRecords([Int32])
        /// Every partition reached the end of its range, or the count limit was reached.
        case finished
    }

    private struct Source {
        var partition: Int32
        var range: ReplayRange
        var buffer = RecordQueue()
        /// No more records of this partition will be copied (buffered ones still will).
        var ended: Bool
        /// The first record at or after `range.startTime` was seen.
        var started: Bool
        var paused = false
        /// The newest offset taken, so a record delivered again (after a pause) is not copied twice.
        var lastOffset: Int64 = -1
    }

    let readAhead: Int
    /// Records still to hand out under `--count`; nil is unlimited.
    private(set) var remaining: Int?
    /// By partition number; mutated in place (`sources[i]`), never copied out, so buffers are not
    /// copied on write.
    private var sources: [Source]
    private let index: [Int32: Int]
    /// Records read but outside the range (before `startTime`): counted for the progress lines.
    private(set) var skipped = 0

    init(ranges: [Int32: ReplayRange], readAhead: Int, count: Int? = nil) {
        precondition(readAhead > 0, "readAhead must be positive")
        self.readAhead = readAhead
        remaining = count
        sources = ranges.keys.sorted().map { partition in
            let range = ranges[partition]!
            return Source(partition: partition, range: range, ended: range.isEmpty, started: range.startTime == nil)
        }
        index = Dictionary(uniqueKeysWithValues: sources.enumerated().map { ($1.partition, $0) })
    }

    /// Partitions that may still deliver records to the merge.
    var open: [Int32] { sources.filter { !$0.ended }.map(\.partition) }

    /// Records held in buffers now.
    var buffered: Int { sources.reduce(0) { $0 + $1.buffer.count } }

    /// Takes one record read from a source partition (in offset order for that partition).
    mutating func receive(_ message: KafkaMessage) {
        guard let position = index[message.partition] else { return }
        skipped += Self.take(message, into: &sources[position])
    }

    /// Returns 1 when the record was skipped for being before the start time.
    private static func take(_ message: KafkaMessage, into source: inout Source) -> Int {
        guard !source.ended else { return 0 }
        guard message.offset >= source.range.start, message.offset > source.lastOffset else { return 0 }
        source.lastOffset = message.offset
        if message.offset >= source.range.end {
            source.ended = true
            return 0
        }
        if let endTime = source.range.endTime, let stamp = message.timestampMilliseconds, stamp >= endTime {
            source.ended = true
            return 0
        }
        if !source.started {
            guard let stamp = message.timestampMilliseconds, stamp >= source.range.startTime! else {
                if message.offset + 1 >= source.range.end { source.ended = true }
                return 1
            }
            source.started = true
        }
        source.buffer.append(message)
        if message.offset + 1 >= source.range.end { source.ended = true }
        return 0
    }

    /// The partition's fetch reached the high watermark: nothing more is in range (the range's end is
    /// at most the high watermark seen when the replay started).
    mutating func reachedEnd(_ partition: Int32) {
        guard let position = index[partition] else { return }
        sources[position].ended = true
    }

    /// The next record to produce, or why there is none yet.
    mutating func next() -> Next {
        if remaining == 0 { return .finished }
        var best: (position: Int, stamp: Int64)?
        var missing: [Int32] = []
        for position in sources.indices {
            guard let stamp = sources[position].buffer.firstStamp else {
                if !sources[position].ended { missing.append(sources[position].partition) }
                continue
            }
            // Positions follow partition numbers, so a strict `<` breaks ties by partition.
            if best == nil || stamp < best!.stamp { best = (position, stamp) }
        }
        if !missing.isEmpty { return .needRecords(missing) }
        guard let best else { return .finished }
        let record = sources[best.position].buffer.removeFirst()
        if let remaining { self.remaining = remaining - 1 }
        return .record(record)
    }

    /// Fetching to pause (buffer full, or the partition is finished) and to resume (buffer half
    /// drained); marks them as done, so each change is returned once.
    mutating func flowChanges() -> (pause: [Int32], resume: [Int32]) {
        var pause: [Int32] = []
        var resume: [Int32] = []
        for position in sources.indices {
            let (partition, ended, paused, count) = (sources[position].partition, sources[position].ended,
                                                     sources[position].paused, sources[position].buffer.count)
            if !paused, ended || count >= readAhead {
                pause.append(partition)
                sources[position].paused = true
            } else if paused, !ended, count <= readAhead / 2 {
                resume.append(partition)
                sources[position].paused = false
            }
        }
        return (pause, resume)
    }
}

/// A FIFO of records: an array with a moving head, compacted when half of it is consumed.
struct RecordQueue: Sendable {
    private var storage: [KafkaMessage] = []
    private var head = 0

    var count: Int { storage.count - head }
    /// The head record's timestamp (`Int64.min` when it has none, i.e. due at once); nil when empty.
    var firstStamp: Int64? { head < storage.count ? storage[head].timestampMilliseconds ?? .min : nil }

    mutating func append(_ message: KafkaMessage) { storage.append(message) }

    mutating func removeFirst() -> KafkaMessage {
        let message = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }
}
