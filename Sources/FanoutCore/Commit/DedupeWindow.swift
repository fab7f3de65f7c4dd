/// The most recent `capacity` event ids seen on one partition, as 64-bit digests of (target, id).
///
/// Bounded: the oldest digest is forgotten when a new one arrives at capacity. Kept per partition
/// so that a revoked and later re-assigned partition starts clean (its replayed events are not
/// duplicates: they were never done).
public struct DedupeWindow: Sendable {
    public let capacity: Int
    private var ring: [UInt64] = []
    private var next = 0
    private var members: Set<UInt64> = []

    public init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
    }

    /// Inserts the digest; returns false when it was already in the window (a duplicate).
    public mutating func insert(_ digest: UInt64) -> Bool {
        guard capacity > 0 else { return true }
        guard !members.contains(digest) else { return false }
        if ring.count < capacity {
            ring.append(digest)
        } else {
            members.remove(ring[next])
            ring[next] = digest
            next = (next + 1) % capacity
        }
        members.insert(digest)
        return true
    }

    public var count: Int { members.count }

    /// FNV-1a over the target and the event id: stable across runs and processes, unlike `Hasher`.
    public static func digest(target: String, id: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in target.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = (hash ^ 0xff) &* 0x100_0000_01b3
        for byte in id.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
