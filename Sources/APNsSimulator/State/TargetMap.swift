import APNsModel

/// Per-target state of the simulator (device views, per-token request windows): a dictionary split
/// into `TargetKey.shardCount` dictionaries by a hash of the key. A `Dictionary` rehashes every entry
/// when it grows, under the state lock every connection takes: at 196,608 device views that took
/// ≈ 100 ms, and every request of that moment waited (Benchmarks/BENCH.md, workload 3). Split, one
/// growth moves 1/256 of the entries, and the shards, filled evenly, grow at different moments.
struct TargetMap<Value> {
    private var shards: [[TargetKey: Value]]
    private(set) var count = 0

    init() {
        shards = Array(repeating: [:], count: TargetKey.shardCount)
    }

    subscript(key: TargetKey) -> Value? { shards[key.shard][key] }

    /// Mutates the stored value in place (no copy of it); false when `key` is absent.
    mutating func update(_ key: TargetKey, _ body: (inout Value) -> Void) -> Bool {
        guard let index = shards[key.shard].index(forKey: key) else { return false }
        body(&shards[key.shard].values[index])
        return true
    }

    mutating func insert(_ key: TargetKey, _ value: Value) {
        if shards[key.shard].updateValue(value, forKey: key) == nil { count += 1 }
    }

    /// The number of entries in the shard `key` belongs to.
    func shardCount(of key: TargetKey) -> Int { shards[key.shard].count }

    /// Removes the entries of `key`'s shard for which `shouldRemove` is true: a bound kept per shard
    /// (`capacity / TargetKey.shardCount`) scans 1/256 of the entries, never all of them.
    mutating func removeAll(inShardOf key: TargetKey, where shouldRemove: (Value) -> Bool) {
        let shard = key.shard
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
    /// The shard of a `TargetMap`: FNV-1a over all the bytes (tokens in tests share long prefixes and
    /// tails), independent of the seeded hash the dictionary inside the shard uses. Computed once per key.
    let shard: Int

    init(_ text: String) {
        self.text = text
        let hash = FNV1a.hash(text)
        shard = Int(truncatingIfNeeded: (hash ^ (hash >> 32)) & UInt64(Self.shardCount - 1))
    }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    static func == (lhs: TargetKey, rhs: TargetKey) -> Bool { lhs.text == rhs.text }
}
