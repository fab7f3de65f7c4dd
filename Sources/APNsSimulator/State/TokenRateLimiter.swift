/// Requests per device token per wall-clock second; more than `limit` → 429 TooManyRequests.
/// Remembers about `capacity` tokens, bounded per shard of its `TargetMap`: when a token's shard is
/// full it forgets that shard's tokens not seen this second (all of them if every one was).
struct TokenRateLimiter {
    let limit: Int
    let capacity: Int
    private var windows = TargetMap<(second: Int64, count: Int)>()

    init(limit: Int, capacity: Int) {
        self.limit = limit
        self.capacity = capacity
    }

    /// Counts one request; false when it exceeds the limit.
    mutating func allow(_ token: String, now: Double) -> Bool {
        guard limit > 0 else { return true }
        let second = Int64(now.rounded(.down))
        let key = TargetKey(token)
        var count = 1
        let known = windows.update(key) { window in
            if window.second != second { window = (second, 0) }
            window.count += 1
            count = window.count
        }
        if known { return count <= limit }
        let shardCapacity = max(1, capacity / TargetKey.shardCount)
        if windows.shardCount(of: key) >= shardCapacity {
            windows.removeAll(inShardOf: key) { $0.second != second }
            if windows.shardCount(of: key) >= shardCapacity { windows.removeAll(inShardOf: key) { _ in true } }
        }
        windows.insert(key, (second, 1))
        return true
    }
}
