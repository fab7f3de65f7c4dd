/// The most recent `capacity` event ids seen on one partition, as 64-bit digests of (target, id).
///
/// Bounded: the oldest digest is forgotten when a new one arrives at capacity. Kept per partition
/// so that a revoked and later re-assigned partition starts clean (its replayed events are not
/// duplicates: they were never done). An open-addressing table (linear probing, backward-shift
/// deletion) plus a FIFO ring: no per-insert allocation, no hashing beyond a multiply.
public struct DedupeWindow: Sendable {
    public let capacity: Int
    private var ring: [UInt64] = []
    private var next = 0
    private var table: [UInt64]
    private let mask: Int
    public private(set) var count = 0

    public init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        table = [UInt64](repeating: 0, count: capacity > 0 ? size : 0)
        mask = size - 1
    }

    /// Inserts the digest; returns false when it was already in the window (a duplicate).
    public mutating func insert(_ rawDigest: UInt64) -> Bool {
        guard capacity > 0 else { return true }
        let digest = rawDigest == 0 ? 1 : rawDigest  // 0 marks an empty table slot
        var index = home(digest)
        while table[index] != 0 {
            if table[index] == digest { return false }
            index = (index + 1) & mask
        }
        if ring.count < capacity {
            ring.append(digest)
        } else {
            remove(ring[next])
            ring[next] = digest
            next = next + 1 == capacity ? 0 : next + 1  // no division per event
            // The removal may have shifted entries: find the free slot again.
            index = home(digest)
            while table[index] != 0 { index = (index + 1) & mask }
        }
        table[index] = digest
        count += 1
        return true
    }

    private func home(_ digest: UInt64) -> Int {
        Int(truncatingIfNeeded: (digest &* 0x9e37_79b9_7f4a_7c15) >> 32) & mask
    }

    private mutating func remove(_ digest: UInt64) {
        var index = home(digest)
        while table[index] != digest {
            guard table[index] != 0 else { return }
            index = (index + 1) & mask
        }
        table[index] = 0
        count -= 1
        // Backward-shift: move later entries of the probe run into the hole when that brings them closer home.
        var hole = index
        var probe = (index + 1) & mask
        while table[probe] != 0 {
            let want = home(table[probe])
            let distanceFromWant = (probe - want) & mask
            let distanceFromHole = (probe - hole) & mask
            if distanceFromWant >= distanceFromHole {
                table[hole] = table[probe]
                table[probe] = 0
                hole = probe
            }
            probe = (probe + 1) & mask
        }
    }

    /// FNV-1a over the target and the event id: stable across runs and processes, unlike `Hasher`.
    public static func digest(target: String, id: String) -> UInt64 {
        digest(targetFNV: fnv(fnvBasis, target), id: id)
    }

    /// `digest(target:id:)` continued from `fnv(fnvBasis, target)` (the engine hashes the target once per event).
    @inline(__always)
    static func digest(targetFNV: UInt64, id: String) -> UInt64 {
        fnv((targetFNV ^ 0xff) &* 0x100_0000_01b3, id)
    }

    static let fnvBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    /// FNV-1a of `text`'s UTF-8 bytes, continuing from `hash`. Reads contiguous storage directly when it can.
    @inline(__always)
    static func fnv(_ hash: UInt64, _ text: String) -> UInt64 {
        if let result = text.utf8.withContiguousStorageIfAvailable({ bytes in
            var hash = hash
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            return hash
        }) {
            return result
        }
        var hash = hash
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
