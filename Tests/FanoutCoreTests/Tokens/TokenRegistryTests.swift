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
