import APNsSimulator
import FanoutCrypto
import Foundation
import Testing

@Suite("Device pushes over real HTTP/2 (curl --http2)")
struct DevicePushTests {
    @Test func acceptedPushEchoesIDAndIsRecorded() async throws {
        let harness = try SimulatorHarness()
        let id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        let response = try await harness.devicePush(headers: harness.pushHeaders(["apns-id": id, "apns-priority": "5"]))
        #expect(response.status == 200)
        #expect(response.headers["apns-id"] == id)
        #expect(response.headers["apns-unique-id"]?.count == 36)
        #expect(response.body.isEmpty)
        let records = harness.simulator.deliveries()
        #expect(records.count == 1)
        #expect(records.first?.token == SimulatorHarness.token)
        #expect(records.first?.priority == 5)
        #expect(records.first?.event == "update")
        #expect(records.first?.apnsID == id)
        #expect(records.first?.topic == SimulatorHarness.topic)
        #expect(harness.simulator.stats().count(status: 200) == 1)
    }

    @Test func generatesLowercaseIDWhenNoneIsGiven() async throws {
        let harness = try SimulatorHarness()
        let response = try await harness.devicePush()
        #expect(response.status == 200)
        let id = try #require(response.headers["apns-id"])
        #expect(id.count == 36 && id == id.lowercased() && UUID(uuidString: id) != nil)
        #expect(response.headers["apns-unique-id"] != id)
    }

    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var headers: [String: String?] = [:]
        var body: String = SimulatorHarness.updateBody()
        var path: String = "/3/device/" + SimulatorHarness.token
        var method = "POST"
        var status: Int
        var reason: String?
        var description: String { name }
    }

    static let startBody = """
        {"aps":{"timestamp":1700000000,"event":"start","content-state":{"p":1},"attributes-type":"JobAttributes",\
        "attributes":{"job":"j1"},"alert":{"title":"Started","body":"Job j1"}}}
        """

    static var cases: [Case] {
        let fullBody = "{\"aps\":{\"timestamp\":1700000000,\"event\":\"update\",\"content-state\":{\"pad\":\"PAD\"}}}"
        let padding4096 = String(repeating: "x", count: 4096 - fullBody.utf8.count + 3)
        return [
            Case(name: "missing authorization", headers: ["authorization": nil], status: 403, reason: "MissingProviderToken"),
            Case(name: "not a bearer token", headers: ["authorization": "basic abc"], status: 403, reason: "InvalidProviderToken"),
            Case(name: "garbage JWT", headers: ["authorization": "bearer a.b.c"], status: 403, reason: "InvalidProviderToken"),
            Case(name: "missing push type", headers: ["apns-push-type": nil], status: 400, reason: "InvalidPushType"),
            Case(name: "alert push type", headers: ["apns-push-type": "alert"], status: 400, reason: "InvalidPushType"),
            Case(name: "missing topic", headers: ["apns-topic": nil], status: 400, reason: "MissingTopic"),
            Case(name: "bare bundle topic", headers: ["apns-topic": SimulatorHarness.app], status: 400, reason: "DeviceTokenNotForTopic"),
            Case(name: "other push-type suffix", headers: ["apns-topic": SimulatorHarness.app + ".voip"], status: 400, reason: "DeviceTokenNotForTopic"),
            Case(name: "unknown app topic", headers: ["apns-topic": "com.unknown.app.push-type.liveactivity"], status: 400, reason: "TopicDisallowed"),
            Case(name: "malformed topic", headers: ["apns-topic": "bad topic!"], status: 400, reason: "BadTopic"),
            Case(name: "priority 1", headers: ["apns-priority": "1"], status: 400, reason: "BadPriority"),
            Case(name: "priority text", headers: ["apns-priority": "high"], status: 400, reason: "BadPriority"),
            Case(name: "apns-id not a UUID", headers: ["apns-id": "message-1"], status: 400, reason: "BadMessageId"),
            Case(name: "apns-id uppercase", headers: ["apns-id": "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"], status: 400, reason: "BadMessageId"),
            Case(name: "expiration not a number", headers: ["apns-expiration": "soon"], status: 400, reason: "BadExpirationDate"),
            Case(name: "expiration number", headers: ["apns-expiration": "0"], status: 200),
            Case(name: "collapse id 65 bytes", headers: ["apns-collapse-id": String(repeating: "c", count: 65)], status: 400, reason: "BadCollapseId"),
            Case(name: "empty body", body: "", status: 400, reason: "PayloadEmpty"),
            Case(name: "body 4096 bytes", body: fullBody.replacingOccurrences(of: "PAD", with: padding4096).dropLast(3) + "}}}", status: 200),
            Case(name: "body 4097 bytes", body: fullBody.replacingOccurrences(of: "PAD", with: padding4096 + "x").dropLast(3) + "}}}",
                 status: 413, reason: "PayloadTooLarge"),
            Case(name: "token not hex", path: "/3/device/" + String(repeating: "zz", count: 32), status: 400, reason: "BadDeviceToken"),
            Case(name: "token odd length", path: "/3/device/" + String(repeating: "a", count: 63), status: 400, reason: "BadDeviceToken"),
            Case(name: "no token", path: "/3/device/", status: 400, reason: "MissingDeviceToken"),
            Case(name: "wrong path", path: "/3/devices/abc", status: 404, reason: "BadPath"),
            Case(name: "GET", method: "GET", status: 405, reason: "MethodNotAllowed"),
            Case(name: "body not JSON", body: "{aps:1}", status: 400, reason: "BadRequestPayload"),
            Case(name: "trailing garbage", body: SimulatorHarness.updateBody() + "x", status: 400, reason: "BadRequestPayload"),
            Case(name: "no aps", body: "{\"x\":{}}", status: 400, reason: "BadRequestPayload"),
            Case(name: "timestamp in milliseconds", body: SimulatorHarness.updateBody(timestamp: 1_700_000_000_000), status: 400, reason: "BadRequestPayload"),
            Case(name: "timestamp as string", body: "{\"aps\":{\"timestamp\":\"1700000000\",\"event\":\"update\",\"content-state\":{}}}",
                 status: 400, reason: "BadRequestPayload"),
            Case(name: "missing timestamp", body: "{\"aps\":{\"event\":\"update\",\"content-state\":{}}}", status: 400, reason: "BadRequestPayload"),
            Case(name: "unknown event", body: SimulatorHarness.updateBody(event: "change"), status: 400, reason: "BadRequestPayload"),
            Case(name: "missing content-state", body: "{\"aps\":{\"timestamp\":1700000000,\"event\":\"update\"}}", status: 400, reason: "BadRequestPayload"),
            Case(name: "content-state not object", body: SimulatorHarness.updateBody(state: "[1]"), status: 400, reason: "BadRequestPayload"),
            Case(name: "duplicate aps key", body: "{\"aps\":{\"timestamp\":1,\"timestamp\":2,\"event\":\"update\",\"content-state\":{}}}",
                 status: 400, reason: "BadRequestPayload"),
            Case(name: "dismissal-date in ms", body: "{\"aps\":{\"timestamp\":1700000000,\"event\":\"end\",\"content-state\":{},\"dismissal-date\":1700000000000}}",
                 status: 400, reason: "BadRequestPayload"),
            Case(name: "start complete", body: startBody, status: 200),
            Case(name: "start without alert", body: startBody.replacingOccurrences(of: ",\"alert\":{\"title\":\"Started\",\"body\":\"Job j1\"}", with: ""),
                 status: 400, reason: "BadRequestPayload"),
            Case(name: "start without attributes", body: startBody.replacingOccurrences(of: ",\"attributes\":{\"job\":\"j1\"}", with: ""),
                 status: 400, reason: "BadRequestPayload"),
            Case(name: "start without attributes-type", body: startBody.replacingOccurrences(of: "\"attributes-type\":\"JobAttributes\",", with: ""),
                 status: 400, reason: "BadRequestPayload"),
            Case(name: "end with custom keys", body: "{\"aps\":{\"timestamp\":1700000000,\"event\":\"end\",\"content-state\":{\"done\":true},\"x\":[1,2]},\"custom\":\"ok\"}",
                 status: 200),
            Case(name: "invalid UTF-8 escape", body: "{\"aps\":{\"timestamp\":1700000000,\"event\":\"update\",\"content-state\":{\"s\":\"\\u12\"}}}",
                 status: 400, reason: "BadRequestPayload"),
        ]
    }

    @Test func everyRequestRuleAnswersWithApplesReason() async throws {
        let harness = try SimulatorHarness()
        for testCase in Self.cases {
            let response = try await harness.curl(url: harness.simulator.deviceURL + testCase.path, method: testCase.method,
                                                  headers: harness.pushHeaders(testCase.headers),
                                                  body: testCase.method == "GET" ? nil : testCase.body)
            #expect(response.status == testCase.status, "\(testCase.name): \(response.body)")
            #expect(response.reason == testCase.reason, "\(testCase.name): \(response.body)")
            if testCase.status != 200 {
                #expect(response.headers["content-type"] == "application/json", "\(testCase.name)")
                #expect(response.headers["apns-id"] != nil, "\(testCase.name)")
            }
        }
        let stats = harness.simulator.stats()
        #expect(stats.requests == Self.cases.count)
        #expect(stats.count(status: 200) == Self.cases.filter { $0.status == 200 }.count)
        #expect(stats.count(status: 400, reason: .badRequestPayload) == Self.cases.filter { $0.reason == "BadRequestPayload" }.count)
        #expect(harness.simulator.deliveries().count == Self.cases.filter { $0.status == 200 }.count)
    }

    @Test func duplicateHeadersAreRefused() async throws {
        let harness = try SimulatorHarness()
        var headers = harness.pushHeaders()
        headers.append(("apns-topic", SimulatorHarness.topic))
        let response = try await harness.devicePush(headers: headers)
        #expect(response.status == 400)
        #expect(response.reason == "DuplicateHeaders")
    }
}
