/// FNV-1a, 64 bits: a hash that is the same in every run and every process (unlike `Hasher`, which is
/// seeded per process), for dedupe digests that outlive a process and for choosing a shard
/// independently of the hash a dictionary inside the shard uses.
public enum FNV1a {
    public static let basis: UInt64 = 0xcbf2_9ce4_8422_2325
    public static let prime: UInt64 = 0x0000_0100_0000_01b3

    /// The hash of `bytes`, continuing from `hash`.
    @inlinable @inline(__always)
    public static func hash(_ bytes: UnsafeBufferPointer<UInt8>, continuing hash: UInt64 = basis) -> UInt64 {
        var hash = hash
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* prime }
        return hash
    }

    /// The hash of `text`'s UTF-8 bytes, continuing from `hash`; reads contiguous storage directly when it can.
    @inlinable @inline(__always)
    public static func hash(_ text: String, continuing hash: UInt64 = basis) -> UInt64 {
        if let result = text.utf8.withContiguousStorageIfAvailable({ Self.hash($0, continuing: hash) }) { return result }
        var hash = hash
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* prime }
        return hash
    }
}
