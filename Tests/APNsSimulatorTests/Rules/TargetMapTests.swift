@testable import APNsSimulator
import Testing

@Suite struct TargetMapTests {
    private static func hex(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    private static func token(_ index: Int) -> TargetKey { TargetKey(hex(index)) }

    @Test func holdsEveryTargetAndUpdatesInPlace() {
        var map = TargetMap<Int>()
        for index in 0..<10_000 { map.insert(Self.token(index), index) }
        #expect(map.count == 10_000)
        let present = map.update(Self.token(42)) { $0 += 1_000_000 }
        let absent = map.update(Self.token(10_000)) { _ in Issue.record("updated an absent target") }
        #expect(present && !absent)
        #expect(map[Self.token(42)] == 1_000_042)
        #expect(map[Self.token(9_999)] == 9_999)
        #expect(map[Self.token(10_000)] == nil)
        map.insert(Self.token(7), -7)
        #expect(map.count == 10_000, "replacing a value is not a new entry")
    }

    /// Sequential tokens (sharing all but their last bytes, as in the load tests) spread over the shards,
    /// so that no shard grows much beyond an even share.
    @Test func sequentialTokensSpreadOverTheShards() {
        var map = TargetMap<Int>()
        let n = 64 * TargetKey.shardCount
        for index in 0..<n { map.insert(Self.token(index), index) }
        let sizes = (0..<n).map { map.shardCount(of: Self.token($0)) }
        #expect(sizes.max()! <= 2 * 64, "largest shard \(sizes.max()!) of an even 64")
    }

    @Test func removingInOneShardLeavesTheOthers() {
        var map = TargetMap<Int>()
        for index in 0..<4_096 { map.insert(Self.token(index), index) }
        let probe = Self.token(5)
        let inShard = map.shardCount(of: probe)
        map.removeAll(inShardOf: probe) { $0 != 5 }
        #expect(map.shardCount(of: probe) == 1 && map[probe] == 5)
        #expect(map.count == 4_096 - (inShard - 1))
    }

    @Test func rateLimiterStaysWithinItsShardBoundsAndKeepsCounting() {
        let capacity = 2 * TargetKey.shardCount
        var limiter = TokenRateLimiter(limit: 1, capacity: capacity)
        // Far more tokens than the capacity, each once in second 10: each shard stays within its bound
        // and the limiter keeps answering (a token seen twice in a second is refused).
        var refused = 0
        for index in 0..<(20 * capacity) where !limiter.allow(Self.hex(index), now: 10.5) { refused += 1 }
        let again = limiter.allow(Self.hex(20 * capacity - 1), now: 10.6)
        let nextSecond = limiter.allow(Self.hex(20 * capacity - 1), now: 11.0)
        #expect(refused == 0)
        #expect(!again, "the newest token is still counted")
        #expect(nextSecond, "a new second starts a new window")
    }
}
