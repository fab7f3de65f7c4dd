import APNsModel
import Testing
@testable import FanoutCore

@Suite struct TokenRegistryTests {
    /// Forgetting a revoked partition's registrations leaves every other partition's, and follows a
    /// key that a newer registration moved to another partition.
    @Test func removingAPartitionForgetsOnlyItsOwnRegistrations() {
        var registry = TokenRegistry()
        for index in 0..<300 {
            registry.register(key: "k\(index)", token: pushToken(String(format: "%064x", index + 1)), environment: .production,
                              at: 1, partition: Int32(index % 3))
        }
        // k0 rotates to a registration read from partition 2.
        registry.register(key: "k0", token: pushToken(String(repeating: "ee", count: 32)), environment: nil, at: 2, partition: 2)
        #expect(registry.count(partition: 0) == 99 && registry.count(partition: 1) == 100 && registry.count(partition: 2) == 101)
        registry.removeAll(partition: 0)
        #expect(registry.count == 201 && registry.count(partition: 0) == 0)
        #expect(registry.record(for: "k3") == nil && registry.record(for: "k0")?.partition == 2)
        #expect(registry.record(for: "k1")?.token.hex == String(format: "%064x", 2))
        registry.removeAll(partition: 2)
        registry.remove(key: "k1")
        #expect(registry.count == 99 && registry.count(partition: 1) == 99)
        // Freed entries are reused and linked into their new partition's list.
        registry.register(key: "again", token: tokenA, environment: nil, at: 1, partition: 0)
        #expect(registry.count(partition: 0) == 1 && registry.usableToken(for: "again", notBefore: 0)?.token == tokenA)
    }

    /// An ended activity's token is retired with it; a token registered after the end (a new activity
    /// under the same key) is not.
    @Test func retiringAnEndedActivityKeepsALaterRegistration() {
        var registry = TokenRegistry()
        registry.register(key: "a", token: tokenA, environment: nil, at: 100, partition: 0)
        registry.register(key: "b", token: tokenB, environment: nil, at: 300, partition: 0)
        registry.retire(key: "a", endedAt: 200)
        registry.retire(key: "b", endedAt: 200)
        #expect(registry.usableToken(for: "a", notBefore: 0) == nil && registry.record(for: "a")?.gone == true)
        #expect(registry.usableToken(for: "b", notBefore: 0)?.token == tokenB)
        // The same registration published again does not revive it; a newer one does.
        let republished = registry.register(key: "a", token: tokenA, environment: nil, at: 100, partition: 0)
        let newer = registry.register(key: "a", token: tokenA, environment: nil, at: 400, partition: 0)
        #expect(!republished && newer && registry.usableToken(for: "a", notBefore: 0)?.token == tokenA)
    }
}

/// A long activity key is held once, whichever came first, its token or its first event.
@Suite struct SharedActivityKeyTests {
    /// A copy with a storage of its own, as a decoded Kafka record's key is.
    static func copy(_ key: String) -> String { String(decoding: Array(key.utf8), as: UTF8.self) }

    static func storage(_ key: String) -> UnsafeRawPointer? {
        key.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }

    @Test func aTrackedActivityAndItsTokenShareOneCopyOfALongKey() throws {
        let tokenFirst = "export-4e1f2c7a-9b3d-4d2a-8c55-1f0e9a7b6c31"
        let eventFirst = "export-0d6b8e2f-3a71-4c9e-b2d4-7e5f1a3c9b80"
        var h = Harness.started { _ in }
        h.register(tokenA, key: Self.copy(tokenFirst), at: 1)
        h.feed(makeEvent("e1", target: Self.copy(tokenFirst), timestamp: 100))
        h.feed(makeEvent("e2", target: Self.copy(eventFirst), timestamp: 100))
        h.register(tokenB, key: Self.copy(eventFirst), at: 1)

        for key in [tokenFirst, eventFirst] {
            let hash = TargetHash(lane: .activity, id: key)
            let slot = try #require(h.engine.slot(of: hash, id: key))
            let registered = try #require(h.engine.tokens.storedKey(key, hash: hash))
            let targetKey = h.engine.targets[Int(slot)].key
            #expect(targetKey == key && Self.storage(targetKey) != nil)
            #expect(Self.storage(targetKey) == Self.storage(registered.key), "\(key): two copies of the key")
        }
        // Each went to its own token: the one registered first at once, the other once it came.
        #expect(h.actions.sends.map(\.destination) == [.activityToken(tokenA), .activityToken(tokenB)])
    }
}
