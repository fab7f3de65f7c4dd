import APNsModel

/// The most recent `capacity` event ids seen on one partition, as 64-bit digests of (target, id).
///
/// Bounded: the oldest digest is forgotten when a new one arrives at capacity. Kept per partition
/// so that a revoked and later re-assigned partition starts clean (its replayed events are not
/// duplicates: they were never done).
///
/// An open-addressing table (linear probing) whose entries carry the insertion number: an entry older
/// than the last `capacity` insertions is expired and counts as absent (exact FIFO window semantics).
/// Forgetting the oldest id therefore costs nothing per event (no second random probe to delete it);
/// expired entries are reused by later inserts and purged in place, in two sequential passes, when
/// the table is three quarters full (at most once per `capacity / 2` inserts). Memory: 16 bytes × 2 ×
/// capacity (rounded up to a power of two).
public struct DedupeWindow: Sendable {
    public let capacity: Int
    private struct Entry {
        /// 0 marks an empty slot.
        var digest: UInt64
        /// `inserted` when this digest was added.
        var stamp: Int
    }
    private var table: [Entry]
    private let mask: Int
    /// Successful inserts so far; entries stamped below `inserted - capacity` are expired.
    private var inserted = 0
    /// Non-empty slots (live plus expired).
    private var occupied = 0

    /// Digests in the window.
    public var count: Int { min(inserted, capacity) }

    public init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        table = [Entry](repeating: Entry(digest: 0, stamp: 0), count: capacity > 0 ? size : 0)
        mask = size - 1
    }

    /// Inserts the digest; returns false when it was already in the window (a duplicate).
    public mutating func insert(_ rawDigest: UInt64) -> Bool {
        guard capacity > 0 else { return true }
        let digest = rawDigest == 0 ? 1 : rawDigest  // 0 marks an empty table slot
        let oldestLive = inserted - capacity
        let mask = self.mask
        let stamp = inserted
        // 0: duplicate, 1: reused an expired slot, 2: took an empty slot.
        let placement: Int = table.withUnsafeMutableBufferPointer { table in
            var index = Self.home(digest, mask: mask)
            var reusable = -1
            while table[index].digest != 0 {
                let live = table[index].stamp >= oldestLive
                if live {
                    if table[index].digest == digest { return 0 }
                } else if reusable < 0 {
                    reusable = index
                }
                index = (index + 1) & mask
            }
            if reusable >= 0 {
                table[reusable] = Entry(digest: digest, stamp: stamp)
                return 1
            }
            table[index] = Entry(digest: digest, stamp: stamp)
            return 2
        }
        guard placement != 0 else { return false }
        if placement == 2 { occupied += 1 }
        inserted += 1
        if occupied * 4 > table.count * 3 { purgeExpired() }
        return true
    }

    /// Whether the digest is in the window (inserted among the last `capacity`), without inserting it.
    public func contains(_ rawDigest: UInt64) -> Bool {
        guard capacity > 0 else { return false }
        let digest = rawDigest == 0 ? 1 : rawDigest
        let oldestLive = inserted - capacity
        var index = Self.home(digest, mask: mask)
        while table[index].digest != 0 {
            if table[index].digest == digest && table[index].stamp >= oldestLive { return true }
            index = (index + 1) & mask
        }
        return false
    }

    @inline(__always)
    private static func home(_ digest: UInt64, mask: Int) -> Int {
        Int(truncatingIfNeeded: (digest &* 0x9e37_79b9_7f4a_7c15) >> 32) & mask
    }

    /// Empties expired slots and re-places the live entries in place (no allocation). Live entries are
    /// at most `capacity`, so afterwards the table is at most half full and the next purge is at least
    /// `capacity / 2` inserts away.
    private mutating func purgeExpired() {
        let oldestLive = inserted - capacity
        let mask = self.mask
        occupied = table.withUnsafeMutableBufferPointer { table in
            // Start re-placing after a slot that was empty before the purge: no probe run crosses it,
            // so walking the runs in order from there moves every entry only backward, never past a
            // hole that an earlier entry's run needs.
            var start = -1
            var live = 0
            for index in 0..<table.count {
                if table[index].digest == 0 {
                    if start < 0 { start = index }
                } else if table[index].stamp < oldestLive {
                    table[index].digest = 0
                } else {
                    live += 1
                }
            }
            precondition(start >= 0, "the dedupe table is never full")
            for step in 1..<table.count {
                let index = (start + step) & mask
                let entry = table[index]
                guard entry.digest != 0 else { continue }
                table[index].digest = 0
                var slot = Self.home(entry.digest, mask: mask)
                while table[slot].digest != 0 { slot = (slot + 1) & mask }
                table[slot] = entry
            }
            return live
        }
    }

    /// FNV-1a over the target and the event id: stable across runs and processes, unlike `Hasher`.
    public static func digest(target: String, id: String) -> UInt64 {
        digest(targetFNV: FNV1a.hash(target), id: id)
    }

    /// `digest(target:id:)` continued from `FNV1a.hash(target)` (the engine hashes the target once per event).
    @inline(__always)
    static func digest(targetFNV: UInt64, id: String) -> UInt64 {
        FNV1a.hash(id, continuing: (targetFNV ^ 0xff) &* FNV1a.prime)
    }
}
