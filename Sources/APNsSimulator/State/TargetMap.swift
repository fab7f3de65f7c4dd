/// Per-target state of the simulator (device views, per-token request windows): a dictionary split
/// into `shardCount` dictionaries by a hash of the key. A `Dictionary` rehashes every entry when it
/// grows, under the state lock every connection takes: at 196,608 device views that took ≈ 100 ms,
/// and every request of that moment waited (Benchmarks/BENCH.md, workload 3). Split, one growth moves
/// 1/256 of the entries, and the shards, filled evenly, grow at different moments.
struct TargetMap<Value> {
    private var shards: [[TargetKey: Value]]
    private(set) var count = 0

    init() {
        shards = Array(repeating: [:], count: TargetKey.shardCount)
    }

    var isEmpty: Bool { count == 0 }

    subscript(target: String) -> Value? {
        let key = TargetKey(target)
        return shards[key.shard][key]
    }

    /// Mutates the stored value in place (no copy of it); false when `target` is absent.
    mutating func update(_ target: String, _ body: (inout Value) -> Void) -> Bool {
        let key = TargetKey(target)
        let shard = key.shard
        guard let index = shards[shard].index(forKey: key) else { return false }
        body(&shards[shard].values[index])
        return true
    }

    mutating func insert(_ target: String, _ value: Value) {
        let key = TargetKey(target)
        if shards[key.shard].updateValue(value, forKey: key) == nil { count += 1 }
    }

    /// The number of entries in the shard `target` belongs to.
    func shardCount(of target: String) -> Int { shards[TargetKey(target).shard].count }

    /// Removes the entries of `target`'s shard for which `shouldRemove` is true: a bound kept per shard
    /// (`capacity / TargetKey.shardCount`) scans 1/256 of the entries, never all of them.
    mutating func removeAll(inShardOf target: String, where shouldRemove: (Value) -> Bool) {
        let shard = TargetKey(target).shard
        let before = shards[shard].count
        shards[shard] = shards[shard].filter { !shouldRemove($0.value) }
        count -= before - shards[shard].count
    }
}

/// A token or channel ID as a dictionary key, hashed over all its UTF-8 bytes (no Unicode normalization,
/// which `String`'s own hash pays for). Hashing only part of the bytes let tokens that share that part
/// (e.g. the same tail) collide into one probe chain of full string compares under the state lock.
struct TargetKey: Hashable {
    static let shardCount = 256
    let text: String

    init(_ text: String) { self.text = text }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    static func == (lhs: TargetKey, rhs: TargetKey) -> Bool { lhs.text == rhs.text }

    /// The shard of a `TargetMap`: FNV-1a over all the bytes (tokens in tests share long prefixes and
    /// tails), independent of the seeded hash the dictionary inside the shard uses.
    var shard: Int {
        var text = text
        let hash = text.withUTF8 { bytes -> UInt64 in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            return hash
        }
        return Int(truncatingIfNeeded: (hash ^ (hash >> 32)) & UInt64(Self.shardCount - 1))
    }
}
