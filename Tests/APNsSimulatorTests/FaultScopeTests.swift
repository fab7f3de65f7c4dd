import APNsSimulator
import Foundation
import Testing

/// Faults scoped to one kind of push, so a test can break one Fanout lane and watch the other, or to
/// channel management, so a channel client can be tried against answers APNs may send.
@Suite("Injected faults scoped to device pushes, broadcasts or channel management")
struct FaultScopeTests {
    func broadcast(_ harness: SimulatorHarness, channel: String) async throws -> SimulatorHarness.Response {
        let headers = [("apns-channel-id", channel), ("apns-expiration", "0"), ("apns-priority", "10"),
                       ("apns-push-type", "liveactivity"), ("authorization", "bearer \(harness.jwt)")]
        return try await harness.curl(url: "\(harness.simulator.deviceURL)/4/broadcasts/apps/\(SimulatorHarness.app)", method: "POST",
                                      headers: headers, body: SimulatorHarness.updateBody(state: "{\"score\":\"1-0\"}"))
    }

    @Test func eachScopeFaultsOnlyItsKindOfPush() async throws {
        let harness = try SimulatorHarness()
        let channel = try harness.simulator.createChannel(bundleID: SimulatorHarness.app, storagePolicy: 0)
        let now = Date().timeIntervalSince1970

        try harness.simulator.setFaults(APNsSimulatorFaults(tooManyRequestsRate: 1, scope: .devicePushes))
        #expect(try await harness.devicePush().status == 429)
        #expect(try await broadcast(harness, channel: channel).status == 200)

        try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: now - 1, outageEnd: now + 600, scope: .broadcasts))
        let refused = try await broadcast(harness, channel: channel)
        #expect(refused.status == 503)
        #expect(refused.reason == "ServiceUnavailable")
        #expect(try await harness.devicePush().status == 200)

        try harness.simulator.setFaults(APNsSimulatorFaults(internalServerErrorRate: 1, scope: .all))
        #expect(try await harness.devicePush().status == 500)
        #expect(try await broadcast(harness, channel: channel).status == 500)

        let stats = harness.simulator.stats()
        #expect(stats.count(status: 429, reason: .tooManyRequests) == 1)
        #expect(stats.count(status: 503, reason: .serviceUnavailable) == 1)
        #expect(harness.simulator.deliveries().map(\.kind) == [.broadcast, .device])
    }

    /// Scoped to `management`, an injected answer (here a reason no table lists) answers every channel
    /// request before it is carried out, pushes are untouched; no push scope reaches channel management.
    @Test func managementScopeFaultsOnlyChannelManagement() async throws {
        let harness = try SimulatorHarness()
        let channels = "\(harness.simulator.managementURL)/1/apps/\(SimulatorHarness.app)/channels"
        let create = { try await harness.curl(url: channels, method: "POST", headers: [("authorization", "bearer \(harness.jwt)")],
                                              body: "{\"message-storage-policy\":0,\"push-type\":\"LiveActivity\"}") }

        try harness.simulator.setFaults(APNsSimulatorFaults(injectedAnswer: .init(status: 400, reason: "ChannelQuotaFrozen"), scope: .channelManagement))
        let refused = try await create()
        #expect(refused.status == 400)
        #expect(refused.reason == "ChannelQuotaFrozen")
        #expect(refused.headers["apns-request-id"] != nil)
        #expect(try await harness.devicePush().status == 200)

        try harness.simulator.setFaults(APNsSimulatorFaults(internalServerErrorRate: 1, scope: .all))
        #expect(try await create().status == 201, "a push fault never reaches channel management")
        #expect(try await harness.devicePush().status == 500)

        try harness.simulator.setFaults(APNsSimulatorFaults())
        let list = try await harness.curl(url: "\(harness.simulator.managementURL)/1/apps/\(SimulatorHarness.app)/all-channels", method: "GET",
                                          headers: [("authorization", "bearer \(harness.jwt)")], body: nil)
        #expect((list.json?["channels"] as? [String])?.count == 1, "the refused create made no channel: \(list.body)")
        #expect(harness.simulator.stats().responses["400 ChannelQuotaFrozen"] == 1)
    }

    /// The control endpoint's JSON takes the scope by name; a missing scope means every push.
    @Test func scopeDecodesFromControlJSON() throws {
        let scoped = try JSONDecoder().decode(APNsSimulatorFaults.self, from: Data(#"{"tooManyRequestsRate":0.5,"scope":"broadcast"}"#.utf8))
        #expect(scoped.scope == .broadcasts)
        #expect(scoped.tooManyRequestsRate == 0.5)
        let unscoped = try JSONDecoder().decode(APNsSimulatorFaults.self, from: Data(#"{"tooManyRequestsRate":0.5}"#.utf8))
        #expect(unscoped.scope == .all)
        let management = try JSONDecoder().decode(APNsSimulatorFaults.self, from: Data(#"{"injectedAnswer":{"status":400,"reason":"X"},"scope":"management"}"#.utf8))
        #expect(management.scope == .channelManagement)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(APNsSimulatorFaults.self, from: Data(#"{"scope":"devices"}"#.utf8))
        }
    }
}
