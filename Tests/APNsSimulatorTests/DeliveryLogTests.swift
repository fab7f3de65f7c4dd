@testable import APNsSimulator
import Foundation
import Testing

@Suite("Delivery log, device view and control endpoint")
struct DeliveryLogTests {
    @Test func deliveryLogFileHasOneJSONLinePerAcceptedPush() async throws {
        let logPath = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-log-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        let harness = try SimulatorHarness(configure: { $0.deliveryLogPath = logPath })
        #expect(try await harness.devicePush(body: SimulatorHarness.updateBody(timestamp: 1_700_000_001, state: "{\"n\":1}")).status == 200)
        #expect(try await harness.devicePush(headers: harness.pushHeaders(["apns-topic": "nope"])).status == 400)
        #expect(try await harness.devicePush(headers: harness.pushHeaders(["apns-priority": "5", "apns-collapse-id": "job-1"]),
                                             body: SimulatorHarness.updateBody(timestamp: 1_700_000_002, state: "{\"n\":2}")).status == 200)
        try harness.simulator.flushDeliveryLog()
        let lines = try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == 2)
        #expect(objects.map { $0["token"] as? String } == [SimulatorHarness.token, SimulatorHarness.token])
        #expect(objects.map { $0["priority"] as? Int } == [10, 5])
        #expect(objects[1]["collapse-id"] as? String == "job-1")
        #expect(objects[1]["timestamp"] as? Double == 1_700_000_002)
        let aps = try #require((objects[1]["aps"] as? String)?.data(using: .utf8))
        let parsed = try #require(try JSONSerialization.jsonObject(with: aps) as? [String: Any])
        #expect((parsed["content-state"] as? [String: Any])?["n"] as? Int == 2)
    }

    /// Each accepted push names the key that authorized it, so a fleet whose workers each sign with their
    /// own key can tell from the simulator alone which worker sent what.
    @Test func eachRecordNamesTheKeyIDThatAuthorizedIt() async throws {
        let second = try SimulatorCredentials.generate(keyID: "KEY0000002")
        let harness = try SimulatorHarness(configure: { $0.keys["KEY0000002"] = try? second.publicKeyPEM() })
        #expect(second.teamID == harness.credentials.teamID)
        let secondJWT = try second.providerToken(issuedAt: Int(Date().timeIntervalSince1970))
        #expect(try await harness.devicePush(body: SimulatorHarness.updateBody(timestamp: 1_700_000_001)).status == 200)
        #expect(try await harness.devicePush(headers: harness.pushHeaders(["authorization": "bearer \(secondJWT)"]),
                                             body: SimulatorHarness.updateBody(timestamp: 1_700_000_002)).status == 200)
        let records = harness.simulator.deliveries()
        #expect(records.map(\.keyID) == [harness.credentials.keyID, "KEY0000002"])
        let line = String(decoding: try JSONEncoder().encode(records[1]), as: UTF8.self)
        #expect(line.contains("\"key-id\":\"KEY0000002\""))
    }

    /// The log's hand-written lines are the records' `Codable` form: each decodes back to its record, and
    /// parses to the same JSON object `JSONEncoder` writes (escapes, absent optionals, numbers).
    @Test func eachLogLineIsTheRecordsCodableForm() throws {
        let device = DeliveryRecord(time: 1_796_548_376.136_12, kind: .device, token: String(repeating: "ab", count: 32),
                                    channel: nil, bundleID: "com.example.app", priority: 10, apnsID: "0A1B2C3D-0000-4000-8000-000000000001",
                                    uniqueID: "u-1", topic: "com.example.app.push-type.liveactivity", pushType: "liveactivity",
                                    expiration: 1_796_552_000, collapseID: nil, event: "update", timestamp: 1_700_000_002,
                                    aps: #"{"event":"update","content-state":{"note":"line\n \"quoted\" / \\ é \u0001"}}"#, keyID: "KEY0000001")
        var broadcast = device
        broadcast.kind = .broadcast
        broadcast.token = nil
        broadcast.channel = "dHJhY2stMQ=="
        broadcast.expiration = nil
        broadcast.collapseID = "tab\tquote\"\u{1F}"
        broadcast.keyID = nil
        broadcast.time = 5
        broadcast.timestamp = 0.000_01
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for record in [device, broadcast] {
            var line: [UInt8] = []
            record.appendJSONLine(to: &line)
            #expect(line.last == 0x0A)
            #expect(line.dropLast().allSatisfy { $0 != 0x0A }, "one line per record")
            let body = Data(line.dropLast())
            #expect(try JSONDecoder().decode(DeliveryRecord.self, from: body) == record)
            let written = try #require(try JSONSerialization.jsonObject(with: body) as? NSDictionary)
            let encoded = try #require(try JSONSerialization.jsonObject(with: encoder.encode(record)) as? NSDictionary)
            #expect(written == encoded, "\(String(decoding: line, as: UTF8.self))")
        }
    }

    /// What the phone shows: newest timestamp wins, older updates are dropped, end is final.
    @Test func deviceViewFollowsActivityKitOrdering() async throws {
        let harness = try SimulatorHarness()
        let sequence: [(Int, String, String)] = [
            (100, "update", "{\"step\":\"a\"}"), (90, "update", "{\"step\":\"stale\"}"), (120, "update", "{\"step\":\"b\"}"),
            (110, "end", "{\"step\":\"done\"}"), (130, "update", "{\"step\":\"after-end\"}"),
        ]
        for (timestamp, event, state) in sequence {
            #expect(try await harness.devicePush(body: SimulatorHarness.updateBody(timestamp: timestamp, state: state, event: event)).status == 200)
        }
        let view = try #require(harness.simulator.deviceView(token: SimulatorHarness.token))
        #expect(view.contentState == "{\"step\":\"done\"}")
        #expect(view.ended)
        #expect(view.event == "end")
        #expect(view.applied == 3)
        #expect(view.ignored == 2)
        #expect(harness.simulator.deviceView(token: String(repeating: "09", count: 32)) == nil)
    }

    @Test func controlEndpointServesStatsFaultsTokensAndViews() async throws {
        let harness = try SimulatorHarness()
        let control = harness.simulator.controlURL
        func http(_ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, [String: Any]) {
            var arguments = ["--silent", "--show-error", "-X", method, "-w", "\n%{http_code}", control + path]
            if let body { arguments += ["-H", "content-type: application/json", "--data-binary", body] }
            let result = try await SimulatorHarness.run("/usr/bin/curl", arguments)
            let parts = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let status = Int(parts.last ?? "") ?? 0
            let json = parts.dropLast().joined(separator: "\n").data(using: .utf8).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
            return (status, json ?? [:])
        }
        let gone = String(repeating: "0a", count: 32)
        #expect(try await http("PUT", "/tokens/\(gone)", "{\"state\":\"unregistered\",\"timestamp\":1700000000999}").0 == 200)
        let refused = try await harness.devicePush(token: gone)
        #expect(refused.status == 410)
        #expect((refused.json?["timestamp"] as? NSNumber)?.int64Value == 1_700_000_000_999)

        #expect(try await harness.devicePush(body: SimulatorHarness.updateBody(state: "{\"k\":\"v\"}")).status == 200)
        let (statsStatus, stats) = try await http("GET", "/stats")
        #expect(statsStatus == 200)
        #expect((stats["responses"] as? [String: Int])?["410 Unregistered"] == 1)
        #expect((stats["responses"] as? [String: Int])?["200"] == 1)

        let (viewStatus, view) = try await http("GET", "/device?token=\(SimulatorHarness.token)")
        #expect(viewStatus == 200)
        #expect(view["content-state"] as? String == "{\"k\":\"v\"}")
        #expect(try await http("GET", "/device?token=\(gone)").0 == 404)

        #expect(try await http("PUT", "/faults", "{\"serviceUnavailableRate\":1}").0 == 200)
        #expect(try await harness.devicePush().status == 503)
        #expect(try await http("PUT", "/faults", "{\"internalServerErrorRate\":7}").0 == 400)
        #expect(try await http("PUT", "/faults", "{\"outageForSeconds\":60}").0 == 200)
        #expect(try await harness.devicePush().reason == "ServiceUnavailable")
        #expect(try await http("PUT", "/faults", "{}").0 == 200)
        #expect(try await harness.devicePush().status == 200)

        let (createdStatus, created) = try await http("POST", "/channels", "{\"bundle-id\":\"\(SimulatorHarness.app)\",\"message-storage-policy\":0}")
        #expect(createdStatus == 201)
        #expect((created["channel-id"] as? String).map { Data(base64Encoded: $0) != nil } == true)
        #expect(try await http("GET", "/nope").0 == 404)
    }
}
