import APNsModel
import APNsSimulator
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// Three workers signing for one key — their own `ProviderTokenCache`, their own `APNsClient`s and
/// connections, clocks a few seconds apart — against the simulator's per-key limit on new tokens,
/// over HTTP/2 + TLS on loopback, through a token-window boundary (injected clocks, no sleeping).
@Suite struct FleetProviderTokenTests {
    static let transports = APNsClientConfiguration.Transport.allCases
    /// The replicas' clock offsets from the simulator's, in seconds.
    static let skews: [Int64] = [-3, 0, 4]

    struct Replica {
        var cache: ProviderTokenCache
        var client: APNsClient
    }

    static func replicas(_ harness: SimulatorHarness, transport: APNsClientConfiguration.Transport,
                         cache: (Int64) -> ProviderTokenCache) throws -> [Replica] {
        try skews.map { skew in
            let cache = cache(skew)
            // Each replica loads the key itself, as workers do from the same .p8 file.
            let key = try P256PrivateKey(pem: harness.key.pemPKCS8())
            let client = try APNsClient(configuration: APNsClientConfiguration(
                endpoint: .custom(baseURL: harness.simulator.deviceURL, caFile: harness.simulator.caCertificatePath),
                credentials: TestApps.credentials(key: key), connections: 2, tokenCache: cache, transport: transport))
            return Replica(cache: cache, client: client)
        }
    }

    @Test(arguments: transports) func replicasSharingTheKeyCrossAWindowBoundaryWithoutTooManyProviderTokenUpdates(
        transport: APNsClientConfiguration.Transport
    ) async throws {
        let harness = try SimulatorHarness()
        let clock = harness.clock
        let window: Int64 = 50 * 60
        clock.advance(window - clock.now % window - 10)   // 10 s before a boundary
        let replicas = try Self.replicas(harness, transport: transport) { skew in
            ProviderTokenCache(refreshInterval: .seconds(window), now: { clock.now + skew })
        }
        var tokens = Set<String>()
        // Before the boundary for all; past it for the fast replica only; for all but the slow one; for all.
        for step: Int64 in [0, 8, 4, 8] {
            clock.advance(step)
            for replica in replicas {
                for result in try await sendAll(replica.client, count: 20) {
                    #expect(result.outcome == .delivered, "t=\(clock.now % window): \(result)")
                }
                tokens.insert(try replica.cache.token(for: APNsCredentials(teamID: TestApps.teamID, keyID: TestApps.keyID, key: harness.key)).jwt)
            }
        }
        #expect(tokens.count == 2, "one token per window for the whole fleet")
        for replica in replicas { #expect(replica.cache.mintCount == 2) }
        #expect(harness.simulator.stats().responses["429 TooManyProviderTokenUpdates"] == nil)
        #expect(harness.simulator.stats().accepted == 4 * 3 * 20)
        for replica in replicas { await replica.client.shutdown(deadline: .now + .seconds(5)) }
    }

    /// The control: replicas that sign their minting time instead of the window's start present
    /// three different tokens for the key, and the third is refused.
    @Test(arguments: transports) func replicasMintingTheirOwnTokensDrawTooManyProviderTokenUpdates(
        transport: APNsClientConfiguration.Transport
    ) async throws {
        let harness = try SimulatorHarness()
        let clock = harness.clock
        let replicas = try Self.replicas(harness, transport: transport) { skew in
            ProviderTokenCache(refreshInterval: .seconds(50 * 60), now: { clock.now + skew }) { credentials, _ in
                try APNsJWT.make(teamID: credentials.teamID, keyID: credentials.keyID, issuedAt: clock.now + skew, key: credentials.key)
            }
        }
        var outcomes: [SendOutcome] = []
        for replica in replicas { outcomes.append(await replica.client.send(try TestApps.push()).outcome) }
        #expect(outcomes == [.delivered, .delivered, .retry(reason: "TooManyProviderTokenUpdates", status: 429, after: nil)])
        for replica in replicas { await replica.client.shutdown(deadline: .now + .seconds(5)) }
    }
}
