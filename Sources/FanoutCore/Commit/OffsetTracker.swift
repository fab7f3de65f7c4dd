/// Which offsets of one partition are done, and the offset Kafka may commit (the lowest incomplete one,
/// i.e. the next to read).
///
/// Offsets are received in increasing order (Kafka's order within a partition) and complete in any
/// order. Memory is proportional to the number of incomplete offsets: done offsets are dropped once
/// they are at the front or once they outnumber the incomplete ones, and gaps between offsets
/// (compaction, transaction markers) cost nothing.
public struct OffsetTracker: Sendable {
    /// Ascending received offsets from `head` on. A done offset `o` is stored as `-(o + 1)`.
    private var entries: [Int64] = []
    private var head = 0
    /// Highest offset received so far, or `-1`.
    public private(set) var highestReceived: Int64 = -1
    /// Offsets received and not yet done.
    public private(set) var incompleteCount = 0

    public init() {}

    /// Records a newly read offset as incomplete. Returns false (and records nothing) for an offset at
    /// or below one already received: a redelivery of something already tracked.
    @discardableResult
    public mutating func receive(_ offset: Int64) -> Bool {
        precondition(offset >= 0, "Kafka offsets are non-negative")
        guard offset > highestReceived else { return false }
        highestReceived = offset
        entries.append(offset)
        incompleteCount += 1
        return true
    }

    /// Marks `offset` done. Returns false when it was not tracked or already done.
    @discardableResult
    public mutating func complete(_ offset: Int64) -> Bool {
        guard let index = find(offset) else { return false }
        entries[index] = -(offset + 1)
        incompleteCount -= 1
        if index == head {
            while head < entries.count && entries[head] < 0 { head += 1 }
        }
        compactIfWorthwhile()
        return true
    }

    /// Whether `offset` was received and is not yet done.
    public func isIncomplete(_ offset: Int64) -> Bool { find(offset) != nil }

    /// Kafka's "next offset to read": the lowest incomplete offset, or one past the highest received
    /// when everything is done. `nil` before anything was received.
    public var commitPoint: Int64? {
        if head < entries.count { return entries[head] }
        return highestReceived >= 0 ? highestReceived + 1 : nil
    }

    /// Entries held in memory (incomplete plus not-yet-compacted done ones); for tests and metrics.
    public var storedEntries: Int { entries.count - head }

    /// Finds the entry of `offset`. Offsets received one after another sit at consecutive indexes, so the
    /// distance from the newest (or the oldest) entry usually points at it exactly: one probe each. Only
    /// when neither guess holds (gaps, or done entries compacted away in between) does a branch-free
    /// binary search run (the comparison becomes a conditional move: completions arrive in no
    /// particular order, so a branchy search mispredicts about every other step).
    private func find(_ offset: Int64) -> Int? {
        // Fast path: an event resolved as soon as it is read (duplicate, not newer, after end) completes
        // the newest offset, which is the last entry.
        if offset == highestReceived, let last = entries.last, entries.count > head {
            return last == offset ? entries.count - 1 : nil
        }
        return entries.withUnsafeBufferPointer { buffer in
            let count = buffer.count
            guard count > head else { return nil }
            // Done entries hold -(o + 1) == ~o: xor with the sign recovers o for both kinds.
            let newest = buffer[count - 1] ^ (buffer[count - 1] >> 63)
            if offset <= newest && newest - offset < Int64(count - head) {
                let guess = buffer[count - 1 - Int(newest - offset)]
                if guess ^ (guess >> 63) == offset { return guess == offset ? count - 1 - Int(newest - offset) : nil }
            }
            let oldest = buffer[head] ^ (buffer[head] >> 63)
            if offset >= oldest && offset - oldest < Int64(count - head) {
                let guess = buffer[head + Int(offset - oldest)]
                if guess ^ (guess >> 63) == offset { return guess == offset ? head + Int(offset - oldest) : nil }
            }
            var base = head
            var length = count - head
            while length > 1 {
                let half = length >> 1
                let stored = buffer[base + half]
                base = stored ^ (stored >> 63) <= offset ? base + half : base
                length -= half
            }
            // A done entry is negative, so it never equals a (non-negative) offset.
            return buffer[base] == offset ? base : nil
        }
    }

    private mutating func compactIfWorthwhile() {
        let live = entries.count - head
        if live == 0 {
            entries.removeAll(keepingCapacity: entries.capacity <= 1024)
            head = 0
            return
        }
        // Keep memory O(incomplete): rebuild when done entries dominate.
        if live > 2 * incompleteCount + 32 {
            var kept: [Int64] = []
            kept.reserveCapacity(incompleteCount + 16)
            for index in head..<entries.count where entries[index] >= 0 { kept.append(entries[index]) }
            entries = kept
            head = 0
        } else if head > 64 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
