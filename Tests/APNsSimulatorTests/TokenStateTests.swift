import APNsSimulator
import Foundation
import Testing

@Suite("Token states and per-token rate")
struct TokenStateTests {
    @Test func registeredStatesAnswerLikeAPNs() async throws {
        let harness = try SimulatorHarness()
        let gone = String(repeating: "01", count: 32), bad = String(repeating: "02", count: 32), valid = String(repeating: "03", count: 32)
        harness.simulator.registerToken(gone, state: .unregistered(timestampMillis: 1_700_000_000_123))
        harness.simulator.registerToken(bad, state: .bad)
        harness.simulator.registerToken(valid, state: .valid)

        let unregistered = try await harness.devicePush(token: gone)
        #expect(unregistered.status == 410)
        #expect(unregistered.reason == "Unregistered")
        #expect((unregistered.json?["timestamp"] as? NSNumber)?.int64Value == 1_700_000_000_123)

        let refused = try await harness.devicePush(token: bad)
        #expect(refused.status == 400)
        #expect(refused.reason == "BadDeviceToken")

        #expect(try await harness.devicePush(token: valid).status == 200)
        #expect(try await harness.devicePush(token: String(repeating: "04", count: 32)).status == 200, "unknown tokens accepted by default")
        #expect(harness.simulator.deliveries().compactMap(\.token) == [valid, String(repeating: "04", count: 32)])
    }

    /// A token issued for one app, pushed under another app's topic: 400 DeviceTokenNotForTopic.
    @Test func aTokenBoundToAnAppRefusesOtherTopics() async throws {
        let harness = try SimulatorHarness(configure: { $0.apps.append("com.example.other") })
        let mine = String(repeating: "07", count: 32), theirs = String(repeating: "08", count: 32)
        harness.simulator.registerToken(mine, state: .validFor(bundleID: SimulatorHarness.app))
        harness.simulator.registerToken(theirs, state: .validFor(bundleID: "com.example.other"))
        #expect(try await harness.devicePush(token: mine).status == 200)
        let wrong = try await harness.devicePush(token: theirs)
        #expect(wrong.status == 400)
        #expect(wrong.reason == "DeviceTokenNotForTopic")
        let other = try await harness.devicePush(token: theirs, headers: harness.pushHeaders(["apns-topic": "com.example.other.push-type.liveactivity"]))
        #expect(other.status == 200)
    }

    @Test func unknownTokensRejectedWhenConfigured() async throws {
        let harness = try SimulatorHarness(configure: { $0.rejectUnknownTokens = true })
        let known = String(repeating: "05", count: 32)
        harness.simulator.registerToken(known, state: .valid)
        let unknown = try await harness.devicePush(token: String(repeating: "06", count: 32))
        #expect(unknown.status == 400)
        #expect(unknown.reason == "BadDeviceToken")
        #expect(try await harness.devicePush(token: known).status == 200)
    }

    /// h2load (nghttp2-client) sends 6 requests to one token within one (frozen) second: 2 pass, 4 get 429.
    @Test func tooManyRequestsToOneTokenPerSecond() async throws {
        let harness = try SimulatorHarness(clock: { 1_800_000_000.25 }, configure: { $0.maxRequestsPerTokenPerSecond = 2 })
        let result = try await harness.h2load(requests: 6, clients: 1, streams: 1)
        #expect(result.done == 6 && result.status2xx == 2 && result.status4xx == 4, "\(result.output)")
        let stats = harness.simulator.stats()
        #expect(stats.count(status: 200) == 2)
        #expect(stats.count(status: 429, reason: .tooManyRequests) == 4)
        // Another token is not affected.
        #expect(try await harness.devicePush(token: String(repeating: "07", count: 32)).status == 200)
    }
}
