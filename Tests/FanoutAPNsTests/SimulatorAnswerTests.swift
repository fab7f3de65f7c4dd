import APNsModel
import APNsSimulator
import Foundation
import Testing
@testable import FanoutAPNs
import FanoutCrypto

/// Answers whose meaning Fanout must not guess, through the real client against the simulator over
/// HTTP/2 + TLS: each must halt the app as a configuration error (offsets kept, probed later), never
/// dead-letter the stream as a bad payload nor retry forever.
@Suite struct SimulatorAnswerTests {
    static let transports = APNsClientConfiguration.Transport.allCases

    @Test(arguments: transports) func unknownReasonOrNoReasonOn4xxIsAConfigurationError(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness(faults: APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: "SomethingAppleAddedLater")))
        let client = try harness.client(transport)
        let unknown = await client.send(try TestApps.push())
        #expect(unknown.status == 400)
        #expect(unknown.reason == .unknown("SomethingAppleAddedLater"))
        #expect(unknown.outcome == .configError(reason: "SomethingAppleAddedLater", status: 400))

        try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: nil)))
        let bare = await client.send(try TestApps.push(1))
        #expect(bare.outcome == .configError(reason: "HTTP 400 without a reason", status: 400))

        // Server trouble with a reason nobody knows is still server trouble.
        try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 502, reason: "BadGateway")))
        let upstream = await client.send(try TestApps.push(2))
        #expect(upstream.outcome == .retry(reason: "BadGateway", status: 502, after: nil))
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func currentProviderTokenRejectedAsExpiredNamesTheClock(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        // This machine's clock runs 40–100 minutes behind the simulator's, so every token it mints is over an hour
        // old there, and stands in the middle of its 60-minute window: in the window's last minute an expired
        // current token means "wait for the next one" instead (`RejectedProviderToken`), so a clock merely 70
        // minutes behind failed this test whenever the wall clock was in that minute of its hour.
        let window: Int64 = 3600
        let seventyBehind = harness.clock.now - 70 * 60
        let midWindow = seventyBehind - ((seventyBehind % window) + window) % window + window / 2
        let lag = harness.clock.now - midWindow
        let behind = ProviderTokenCache(refreshInterval: .seconds(3600), now: { harness.clock.now - lag })
        let client = try APNsClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: harness.simulator.deviceURL, caFile: harness.simulator.caCertificatePath),
            credentials: TestApps.credentials(key: harness.key), tokenCache: behind, transport: transport))

        for n in 0..<2 {
            let result = await client.send(try TestApps.push(n))
            #expect(result.status == 403)
            #expect(result.reason == .expiredProviderToken)
            guard case .configError(let reason, let status) = result.outcome else {
                Issue.record("the current window's token rejected as expired must be a configuration error, got \(result.outcome)")
                return
            }
            #expect(status == 403)
            #expect(reason.hasPrefix("ExpiredProviderToken for the current provider token"))
            #expect(reason.contains("APNs's clock is at least"))
            #expect(reason.contains("NTP"))
        }
        #expect(behind.mintCount == 1, "within the window there is no other token to mint")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: transports) func appWithoutBroadcastCapabilityIsAConfigurationError(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness(broadcastApps: [])
        let pushes = try harness.client(transport)
        let broadcast = try APNsRequest.broadcast(channelID: "AAAAAAAAAAAAAAAAAAAAAA==", bundleID: TestApps.bundleID,
                                                  payload: TestApps.updatePayload(), priority: .immediate, expiration: 0)
        let sent = await pushes.send(broadcast)
        #expect(sent.reason == .broadcastFeatureNotEnabled)
        #expect(sent.outcome == .configError(reason: "BroadcastFeatureNotEnabled", status: 400))

        let channels = try APNsChannelClient(configuration: APNsClientConfiguration(
            endpoint: .custom(baseURL: harness.simulator.managementURL, caFile: harness.simulator.caCertificatePath),
            credentials: TestApps.credentials(key: harness.key), connections: 1, tokenCache: harness.cache, transport: transport))
        do {
            _ = try await channels.list(bundleID: TestApps.bundleID)
            Issue.record("listing channels of an app without the broadcast capability succeeded")
        } catch let APNsChannelError.rejected(result) {
            #expect(result.outcome == .configError(reason: "BroadcastFeatureNotEnabled", status: 400))
        }
        await pushes.shutdown(deadline: .now + .seconds(5))
        await channels.shutdown(deadline: .now + .seconds(5))
    }
}
