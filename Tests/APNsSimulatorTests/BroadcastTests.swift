import APNsSimulator
import Foundation
import Testing

@Suite("Broadcast channels and sends over HTTP/2")
struct BroadcastTests {
    func managementHeaders(_ harness: SimulatorHarness, channel: String? = nil) -> [(String, String)] {
        var headers = [("authorization", "bearer \(harness.jwt)")]
        if let channel { headers.append(("apns-channel-id", channel)) }
        return headers
    }

    func broadcastHeaders(_ harness: SimulatorHarness, channel: String?, _ overrides: [String: String?] = [:]) -> [(String, String)] {
        var headers: [String: String] = ["authorization": "bearer \(harness.jwt)", "apns-push-type": "liveactivity",
                                         "apns-priority": "10", "apns-expiration": "0"]
        if let channel { headers["apns-channel-id"] = channel }
        for (name, value) in overrides { headers[name] = value }
        return headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    @Test func channelLifecycleThroughManagementAPI() async throws {
        let harness = try SimulatorHarness()
        let base = "\(harness.simulator.managementURL)/1/apps/\(SimulatorHarness.app)"
        let requestID = "11111111-2222-4333-8444-555555555555"
        let created = try await harness.curl(
            url: base + "/channels", method: "POST", headers: managementHeaders(harness) + [("apns-request-id", requestID)],
            body: "{\"message-storage-policy\": 1, \"push-type\": \"LiveActivity\"}")
        #expect(created.status == 201)
        #expect(created.headers["apns-request-id"] == requestID)
        let channel = try #require(created.headers["apns-channel-id"])
        #expect(Data(base64Encoded: channel) != nil)

        let read = try await harness.curl(url: base + "/channels", method: "GET", headers: managementHeaders(harness, channel: channel), body: nil)
        #expect(read.status == 200)
        #expect(read.json?["message-storage-policy"] as? Int == 1)
        #expect(read.json?["push-type"] as? String == "LiveActivity")

        let list = try await harness.curl(url: base + "/all-channels", method: "GET", headers: managementHeaders(harness), body: nil)
        #expect(list.status == 200)
        #expect(list.json?["channels"] as? [String] == [channel])

        let deleted = try await harness.curl(url: base + "/channels", method: "DELETE", headers: managementHeaders(harness, channel: channel), body: nil)
        #expect(deleted.status == 204)
        let again = try await harness.curl(url: base + "/channels", method: "GET", headers: managementHeaders(harness, channel: channel), body: nil)
        #expect(again.status == 404)
        #expect(again.reason == "BadPath")
        let empty = try await harness.curl(url: base + "/all-channels", method: "GET", headers: managementHeaders(harness), body: nil)
        #expect(empty.json?["channels"] as? [String] == [])
    }

    /// A channel that is not there, never created or deleted (once or twice), is answered as live
    /// APNs answers it: 404 BadPath on read and on delete, while a broadcast to a deleted one is 400
    /// ChannelNotRegistered (to a never-created one BadChannelId, `broadcastSendRules`); another app's
    /// channel is not there for this app.
    @Test func readAndDeleteOfAMissingChannelAre404BadPath() async throws {
        let harness = try SimulatorHarness()
        let app = SimulatorHarness.app
        let base = "\(harness.simulator.managementURL)/1/apps/"
        let deleted = try harness.simulator.createChannel(bundleID: app, storagePolicy: 0)
        let others = try harness.simulator.createChannel(bundleID: "com.example.other", storagePolicy: 0)
        let first = try await harness.curl(url: base + app + "/channels", method: "DELETE", headers: managementHeaders(harness, channel: deleted), body: nil)
        #expect(first.status == 204, "\(first.body)")
        let missing: [(name: String, app: String, channel: String)] = [
            ("deleted", app, deleted), ("never created", app, "AAAAAAAAAAAAAAAAAAAAAA=="), ("another app's", app, others),
        ]
        for channel in missing {
            for method in ["GET", "DELETE", "DELETE"] {
                let response = try await harness.curl(url: base + channel.app + "/channels", method: method,
                                                      headers: managementHeaders(harness, channel: channel.channel), body: nil)
                #expect(response.status == 404, "\(method) \(channel.name): \(response.body)")
                #expect(response.reason == "BadPath", "\(method) \(channel.name): \(response.body)")
                #expect(response.headers["apns-request-id"] != nil)
            }
        }
        #expect(harness.simulator.stats().count(status: 404, reason: .badPath) == 9)
        // The other app still has its channel; a broadcast to the deleted one is ChannelNotRegistered.
        let owner = try await harness.curl(url: base + "com.example.other/channels", method: "GET", headers: managementHeaders(harness, channel: others), body: nil)
        #expect(owner.status == 200, "\(owner.body)")
        let broadcast = try await harness.curl(url: "\(harness.simulator.deviceURL)/4/broadcasts/apps/\(app)", method: "POST",
                                               headers: broadcastHeaders(harness, channel: deleted), body: SimulatorHarness.updateBody())
        #expect(broadcast.status == 400)
        #expect(broadcast.reason == "ChannelNotRegistered")
    }

    @Test func managementErrors() async throws {
        let harness = try SimulatorHarness(configure: { $0.broadcastApps = [SimulatorHarness.app]; $0.maxChannelsPerApp = 1 })
        let base = "\(harness.simulator.managementURL)/1/apps/"
        let app = SimulatorHarness.app
        let cases: [(String, String, String, [(String, String)], String?, Int, String)] = [
            ("unknown attribute", base + app + "/channels", "POST", managementHeaders(harness),
             "{\"message-storage-policy\":0,\"push-type\":\"LiveActivity\",\"x\":1}", 400, "BadRequestParams"),
            ("bad policy", base + app + "/channels", "POST", managementHeaders(harness), "{\"message-storage-policy\":2,\"push-type\":\"LiveActivity\"}", 400, "BadRequestParams"),
            ("missing push type", base + app + "/channels", "POST", managementHeaders(harness), "{\"message-storage-policy\":0}", 400, "MissingPushType"),
            ("wrong push type", base + app + "/channels", "POST", managementHeaders(harness), "{\"message-storage-policy\":0,\"push-type\":\"Alert\"}", 400, "InvalidPushType"),
            ("unparseable", base + app + "/channels", "POST", managementHeaders(harness), "{nope", 400, "BadRequestPayload"),
            ("empty body", base + app + "/channels", "POST", managementHeaders(harness), "", 400, "PayloadEmpty"),
            ("no JWT", base + app + "/channels", "POST", [], "{\"message-storage-policy\":0,\"push-type\":\"LiveActivity\"}", 403, "MissingProviderToken"),
            ("missing channel id", base + app + "/channels", "GET", managementHeaders(harness), nil, 400, "MissingChannelId"),
            ("bad channel id", base + app + "/channels", "GET", managementHeaders(harness, channel: "not base64!"), nil, 400, "BadChannelId"),
            ("unknown channel", base + app + "/channels", "DELETE", managementHeaders(harness, channel: "AAAAAAAAAAAAAAAAAAAAAA=="), nil, 404, "BadPath"),
            ("suffixed bundle", base + app + ".push-type.liveactivity/channels", "GET", managementHeaders(harness, channel: "AAAA"), nil, 400, "TopicDisallowed"),
            ("foreign bundle", base + "com.not.ours/all-channels", "GET", managementHeaders(harness), nil, 403, "TopicMismatch"),
            ("bad path", base + app + "/channel", "GET", managementHeaders(harness), nil, 404, "BadPath"),
            ("bad method", base + app + "/all-channels", "POST", managementHeaders(harness), "{}", 405, "MethodNotAllowed"),
        ]
        for (name, url, method, headers, body, status, reason) in cases {
            let response = try await harness.curl(url: url, method: method, headers: headers, body: body)
            #expect(response.status == status, "\(name): \(response.body)")
            #expect(response.reason == reason, "\(name): \(response.body)")
            #expect(response.headers["apns-request-id"] != nil, "\(name)")
        }
        let create = { try await harness.curl(url: base + app + "/channels", method: "POST", headers: managementHeaders(harness),
                                              body: "{\"message-storage-policy\":0,\"push-type\":\"LiveActivity\"}") }
        #expect(try await create().status == 201)
        let overLimit = try await create()
        #expect(overLimit.status == 400)
        #expect(overLimit.reason == "CannotCreateChannelConfig")
    }

    @Test func broadcastSendRules() async throws {
        let harness = try SimulatorHarness()
        let noStorage = try harness.simulator.createChannel(bundleID: SimulatorHarness.app, storagePolicy: 0)
        let stored = try harness.simulator.createChannel(bundleID: SimulatorHarness.app, storagePolicy: 1)
        let url = "\(harness.simulator.deviceURL)/4/broadcasts/apps/\(SimulatorHarness.app)"
        let body = SimulatorHarness.updateBody(state: "{\"score\":\"1-0\"}")
        // The padding sits outside aps (custom keys are allowed): the content state itself may not pass 4 KB.
        let prefix = "{\"pad\":\""
        let suffix = "\",\"aps\":{\"timestamp\":1700000000,\"event\":\"update\",\"content-state\":{\"s\":1}}}"
        let fill = 5120 - prefix.utf8.count - suffix.utf8.count
        let body5120 = prefix + String(repeating: "x", count: fill) + suffix
        let body5121 = prefix + String(repeating: "x", count: fill + 1) + suffix
        let bigState = "{\"aps\":{\"timestamp\":1700000000,\"event\":\"update\",\"content-state\":{\"t\":\""
            + String(repeating: "x", count: 4096 - 7) + "\"}}}"
        let startBody = DevicePushTests.startBody
        typealias Case = (name: String, url: String, headers: [(String, String)], body: String, status: Int, reason: String?)
        let cases: [Case] = [
            ("accepted on no-storage channel", url, broadcastHeaders(harness, channel: noStorage), body, 200, nil),
            ("stored channel with expiration", url, broadcastHeaders(harness, channel: stored, ["apns-expiration": "1900000000"]), body, 200, nil),
            ("no-storage with expiration", url, broadcastHeaders(harness, channel: noStorage, ["apns-expiration": "1900000000"]), body, 400, "BadExpirationDate"),
            ("missing expiration", url, broadcastHeaders(harness, channel: stored, ["apns-expiration": nil]), body, 400, "BadExpirationDate"),
            ("missing channel", url, broadcastHeaders(harness, channel: nil), body, 400, "MissingChannelId"),
            ("malformed channel", url, broadcastHeaders(harness, channel: "%%%"), body, 400, "BadChannelId"),
            ("never-created channel", url, broadcastHeaders(harness, channel: "AAAAAAAAAAAAAAAAAAAAAA=="), body, 400, "BadChannelId"),
            ("missing push type", url, broadcastHeaders(harness, channel: stored, ["apns-push-type": nil]), body, 400, "MissingPushType"),
            ("wrong push type", url, broadcastHeaders(harness, channel: stored, ["apns-push-type": "alert"]), body, 400, "InvalidPushType"),
            ("missing priority", url, broadcastHeaders(harness, channel: stored, ["apns-priority": nil]), body, 400, "BadPriority"),
            ("priority 1", url, broadcastHeaders(harness, channel: stored, ["apns-priority": "1"]), body, 200, nil),
            ("bad request id", url, broadcastHeaders(harness, channel: stored, ["apns-request-id": "x"]), body, 400, "BadMessageId"),
            ("suffixed bundle", url + ".push-type.liveactivity", broadcastHeaders(harness, channel: stored), body, 400, "TopicDisallowed"),
            ("foreign bundle", "\(harness.simulator.deviceURL)/4/broadcasts/apps/com.not.ours", broadcastHeaders(harness, channel: stored), body, 403, "TopicMismatch"),
            ("start over broadcast", url, broadcastHeaders(harness, channel: stored), startBody, 400, "BadRequestPayload"),
            ("5120 bytes", url, broadcastHeaders(harness, channel: stored), body5120, 200, nil),
            ("5121 bytes", url, broadcastHeaders(harness, channel: stored), body5121, 413, "PayloadTooLarge"),
            ("content state over 4 KB", url, broadcastHeaders(harness, channel: stored), bigState, 400, "BadRequestPayload"),
            ("empty", url, broadcastHeaders(harness, channel: stored), "", 400, "PayloadEmpty"),
        ]
        #expect(body5120.utf8.count == 5120)
        for testCase in cases {
            let response = try await harness.curl(url: testCase.url, method: "POST", headers: testCase.headers, body: testCase.body)
            #expect(response.status == testCase.status, "\(testCase.name): \(response.body)")
            #expect(response.reason == testCase.reason, "\(testCase.name): \(response.body)")
            #expect(response.headers["apns-request-id"] != nil, "\(testCase.name)")
            if testCase.status == 200 { #expect(response.headers["apns-unique-id"] != nil, "\(testCase.name)") }
        }
        let records = harness.simulator.deliveries()
        #expect(records.count == cases.filter { $0.status == 200 }.count)
        #expect(records.allSatisfy { $0.kind == .broadcast && $0.token == nil })
        #expect(records.first?.channel == noStorage)
        #expect(harness.simulator.deviceView(channel: noStorage)?.contentState == "{\"score\":\"1-0\"}")
    }

    /// An app configured without the broadcast capability is answered as live APNs answers it:
    /// 400 BroadcastFeatureNotEnabled on broadcast sends and on every channel-management call, while
    /// its device pushes are unaffected.
    @Test func appWithoutBroadcastCapabilityGetsBroadcastFeatureNotEnabled() async throws {
        let harness = try SimulatorHarness(configure: { $0.broadcastApps = [SimulatorHarness.app] })
        let other = "com.example.other"
        let channel = try harness.simulator.createChannel(bundleID: SimulatorHarness.app, storagePolicy: 0)
        let management = "\(harness.simulator.managementURL)/1/apps/\(other)"
        let createBody = "{\"message-storage-policy\":0,\"push-type\":\"LiveActivity\"}"
        let requests: [(name: String, url: String, method: String, headers: [(String, String)], body: String?)] = [
            ("broadcast send", "\(harness.simulator.deviceURL)/4/broadcasts/apps/\(other)", "POST",
             broadcastHeaders(harness, channel: channel), SimulatorHarness.updateBody()),
            ("create", management + "/channels", "POST", managementHeaders(harness), createBody),
            ("read", management + "/channels", "GET", managementHeaders(harness, channel: channel), nil),
            ("delete", management + "/channels", "DELETE", managementHeaders(harness, channel: channel), nil),
            ("list", management + "/all-channels", "GET", managementHeaders(harness), nil),
        ]
        for request in requests {
            let response = try await harness.curl(url: request.url, method: request.method, headers: request.headers, body: request.body)
            #expect(response.status == 400, "\(request.name): \(response.body)")
            #expect(response.reason == "BroadcastFeatureNotEnabled", "\(request.name): \(response.body)")
        }
        #expect(harness.simulator.stats().count(status: 400, reason: .broadcastFeatureNotEnabled) == requests.count)
        let device = try await harness.devicePush(headers: harness.pushHeaders(["apns-topic": other + ".push-type.liveactivity"]))
        #expect(device.status == 200, "device pushes need no broadcast capability: \(device.body)")
        // The app with the capability still broadcasts.
        let allowed = try await harness.curl(url: "\(harness.simulator.deviceURL)/4/broadcasts/apps/\(SimulatorHarness.app)", method: "POST",
                                             headers: broadcastHeaders(harness, channel: channel), body: SimulatorHarness.updateBody())
        #expect(allowed.status == 200, "\(allowed.body)")
    }
}
