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
    private var sources: [Int32: Source]
    /// Records read but outside the range (before `startTime`): counted for the progress lines.
    private(set) var skipped = 0

    init(ranges: [Int32: ReplayRange], readAhead: Int, count: Int? = nil) {
        precondition(readAhead > 0, "readAhead must be positive")
        self.readAhead = readAhead
        remaining = count
        sources = ranges.mapValues { range in
            Source(range: range, ended: range.isEmpty, started: range.startTime == nil)
        }
    }

    /// Partitions that may still deliver records to the merge.
    var open: [Int32] { sources.filter { !$0.value.ended }.keys.sorted() }

    /// Records held in buffers now.
    var buffered: Int { sources.values.reduce(0) { $0 + $1.buffer.count } }

    /// Takes one record read from a source partition (in offset order for that partition).
    mutating func receive(_ message: KafkaMessage) {
        guard var source = sources[message.partition], !source.ended else { return }
        defer { sources[message.partition] = source }
        guard message.offset >= source.range.start, message.offset > source.lastOffset else { return }
        source.lastOffset = message.offset
        if message.offset >= source.range.end {
            source.ended = true
            return
        }
        if let endTime = source.range.endTime, let stamp = message.timestampMilliseconds, stamp >= endTime {
            source.ended = true
            return
        }
        if !source.started {
            guard let stamp = message.timestampMilliseconds, stamp >= source.range.startTime! else {
                skipped += 1
                if message.offset + 1 >= source.range.end { source.ended = true }
                return
            }
            source.started = true
        }
        source.buffer.append(message)
        if message.offset + 1 >= source.range.end { source.ended = true }
    }

    /// The partition's fetch reached the high watermark: nothing more is in range (the range's end is
    /// at most the high watermark seen when the replay started).
    mutating func reachedEnd(_ partition: Int32) {
        sources[partition]?.ended = true
    }

    /// The next record to produce, or why there is none yet.
    mutating func next() -> Next {
        if remaining == 0 { return .finished }
        var best: (partition: Int32, stamp: Int64)?
        var missing: [Int32] = []
        for (partition, source) in sources {
            guard let head = source.buffer.first else {
                if !source.ended { missing.append(partition) }
                continue
            }
            let stamp = head.timestampMilliseconds ?? .min
            if best == nil || (stamp, partition) < (best!.stamp, best!.partition) { best = (partition, stamp) }
        }
        if !missing.isEmpty { return .needRecords(missing.sorted()) }
        guard let best else { return .finished }
        let record = sources[best.partition]!.buffer.removeFirst()
        if let remaining { self.remaining = remaining - 1 }
        return .record(record)
    }

    /// Fetching to pause (buffer full, or the partition is finished) and to resume (buffer half
    /// drained); marks them as done, so each change is returned once.
    mutating func flowChanges() -> (pause: [Int32], resume: [Int32]) {
        var pause: [Int32] = []
        var resume: [Int32] = []
        for partition in sources.keys.sorted() {
            let source = sources[partition]!
            if !source.paused, source.ended || source.buffer.count >= readAhead {
                pause.append(partition)
                sources[partition]!.paused = true
            } else if source.paused, !source.ended, source.buffer.count <= readAhead / 2 {
                resume.append(partition)
                sources[partition]!.paused = false
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
    var first: KafkaMessage? { head < storage.count ? storage[head] : nil }

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
