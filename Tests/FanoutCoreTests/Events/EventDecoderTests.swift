import Foundation
import Testing
import APNsModel
@testable import FanoutCore

@Suite struct EventDecoderTests {
    typealias F = EventFixtures

    @Test func decodesAnUpdateOnTheActivityLane() throws {
        let text = #"{"v":1,"id":"evt-7","app":"com.example.exports","activity":"export-42","event":"update","timestamp":1772788200,"content_state":{"progress":37,"status":"rendering","eta":{"s":30}},"importance":"minor","stale_date":1772789100,"relevance_score":50.5}"#
        let event = try F.decode(text, key: "export-42").get()
        #expect(event.id == "evt-7")
        #expect(event.app == "com.example.exports")
        #expect(event.lane == .activity)
        #expect(event.target == "export-42")
        #expect(event.kind == .update)
        #expect(event.timestamp == 1_772_788_200)
        #expect(event.contentState.bytes == Array(#"{"progress":37,"status":"rendering","eta":{"s":30}}"#.utf8))
        #expect(event.importance == .minor)
        #expect(event.staleDate == 1_772_789_100)
        #expect(event.relevanceScore == 50.5)
        #expect(event.alert == nil && event.token == nil && event.dismissalDate == nil)
        #expect(event.contentFields.map(\.name) == ["progress", "status", "eta"])
        #expect(event.contentFields[0].number == 37)
        #expect(event.contentFields[1].number == nil)
        #expect(event.contentFields[0].digest == fnv1a(Array("37".utf8)))
        #expect(event.contentFields[2].digest == fnv1a(Array(#"{"s":30}"#.utf8)))
    }

    @Test func contentFieldDigestChangesOnlyWithTheField() throws {
        let a = try F.decode(F.update(["content_state": ["progress": 37, "status": "rendering"]])).get()
        let b = try F.decode(F.update(["content_state": ["progress": 38, "status": "rendering"]])).get()
        let byName = { (event: ActivityEvent, name: String) in event.contentFields.first { $0.name == name }! }
        #expect(byName(a, "status").digest == byName(b, "status").digest)
        #expect(byName(a, "progress").digest != byName(b, "progress").digest)
        #expect(byName(b, "progress").number == 38)
    }

    @Test func decodesAFullStartEvent() throws {
        let event = try F.decode(F.start(["input_push_token": true, "relevance_score": 75, "importance": "major"])).get()
        #expect(event.kind == .start)
        #expect(event.token?.hex == F.token)
        #expect(event.attributesType == "ExportAttributes")
        #expect(try json(event.attributes!.bytes) as? [String: String] == ["name": "Q3 report"])
        #expect(try json(event.alert!.bytes) as? [String: String] == ["title": "Export started", "body": "We'll keep you posted", "sound": "default"])
        #expect(event.inputPushToken)
        #expect(event.inputPushChannel == nil)
        #expect(event.importance == .major)
    }

    @Test func decodesAnEndWithDismissalDate() throws {
        let event = try F.decode(F.update(["event": "end", "dismissal_date": F.timestamp + 600])).get()
        #expect(event.kind == .end)
        #expect(event.dismissalDate == F.timestamp + 600)
    }

    @Test func decodesUpdateAndEndOnTheBroadcastLane() throws {
        let update = try F.decode(F.broadcast(), lane: .broadcast, key: F.channel).get()
        #expect(update.lane == .broadcast && update.target == F.channel && update.kind == .update)
        let end = try F.decode(F.broadcast(["event": "end"]), lane: .broadcast).get()
        #expect(end.kind == .end)
    }

    @Test func fillsInTheOnlyConfiguredApp() throws {
        let event = try F.decode(F.update(["app": nil])).get()
        #expect(event.app == F.app)
    }

    @Test func acceptsAnyBundleIDWhenNoAppsAreConfigured() throws {
        let event = try F.decode(F.update(["app": "org.other.app"]), apps: []).get()
        #expect(event.app == "org.other.app")
    }

    @Test func nullMeansAbsentForOptionalFields() throws {
        let event = try F.decode(F.update(["importance": NSNull(), "alert": NSNull(), "stale_date": NSNull()])).get()
        #expect(event.importance == nil && event.alert == nil && event.staleDate == nil)
    }

    @Test func acceptsLocalizedAlertText() throws {
        let alert: [String: Any] = ["title": ["loc-key": "%@ started", "loc-args": ["Q3"]], "body": ["loc-key": "BODY"], "sound": "chime.aiff"]
        let event = try F.decode(F.start(["alert": alert])).get()
        let decoded = try json(event.alert!.bytes) as! [String: Any]
        #expect((decoded["title"] as? [String: Any])?["loc-key"] as? String == "%@ started")
    }

    @Test func normalizesTheTokenToLowercase() throws {
        let event = try F.decode(F.update(["token": F.token.uppercased()])).get()
        #expect(event.token?.hex == F.token)
    }

    @Test func escapedFieldNamesAreRecognized() throws {
        let text = #"{"\u0076":1,"id":"e","activity":"a","event":"update","timestamp":1772788200,"content_state":{}}"#
        #expect(try F.decode(text).get().id == "e")
    }

    @Test func rawByteAndUnsafeBufferEntryPointsAgree() throws {
        let bytes = F.bytes(F.update())
        let viaArray = try F.decoder().decode(bytes, key: nil, lane: .activity, now: F.now).get()
        let viaRaw = try bytes.withUnsafeBytes { try F.decoder().decode($0, key: nil, lane: .activity, now: F.now).get() }
        #expect(viaArray == viaRaw)
    }

    /// A start event carrying everything builds a payload APNs would accept, and the payload holds
    /// exactly the event's values.
    @Test func fullStartEventRoundTripsThroughThePayloadBuilder() throws {
        let event = try F.decode(F.start(["input_push_token": true, "relevance_score": 75, "stale_date": F.timestamp + 300])).get()
        let payload = event.livePayload(defaultStaleAfter: 900)
        #expect(payload.checkSize(limit: LiveActivityPayload.deviceLimit) == .success(payload.encodedSize))
        var buffer: [UInt8] = []
        payload.write(into: &buffer)
        #expect(buffer.count == payload.encodedSize)
        let aps = try #require((try json(buffer) as? [String: Any])?["aps"] as? [String: Any])
        #expect(aps["event"] as? String == "start")
        #expect((aps["timestamp"] as? NSNumber)?.int64Value == F.timestamp)
        #expect((aps["stale-date"] as? NSNumber)?.int64Value == F.timestamp + 300)
        #expect((aps["relevance-score"] as? NSNumber)?.doubleValue == 75)
        #expect(aps["attributes-type"] as? String == "ExportAttributes")
        #expect(aps["attributes"] as? [String: String] == ["name": "Q3 report"])
        #expect((aps["input-push-token"] as? NSNumber)?.intValue == 1)
        #expect((aps["content-state"] as? [String: Any])?["status"] as? String == "queued")
        #expect((aps["alert"] as? [String: String])?["title"] == "Export started")
        #expect(aps["dismissal-date"] == nil)
        #expect(Set(aps.keys) == ["timestamp", "event", "content-state", "stale-date", "relevance-score", "alert",
                                  "attributes-type", "attributes", "input-push-token"])
    }

    @Test func defaultStaleDateIsAddedWhenTheEventHasNone() throws {
        let event = try F.decode(F.update()).get()
        #expect(event.livePayload(defaultStaleAfter: 900).staleDate == F.timestamp + 900)
        #expect(event.livePayload(defaultStaleAfter: nil).staleDate == nil)
    }

    @Test func payloadJustUnderTheDeviceLimitIsAcceptedAndJustOverIsRejected() throws {
        // Grow content_state until the final payload (with the default stale date) is exactly at the limit.
        func event(padding: Int) -> [String: Any] { F.update(["content_state": ["pad": String(repeating: "x", count: padding)]]) }
        let base = try F.decode(event(padding: 0)).get().livePayload(defaultStaleAfter: EventPolicy.defaultStaleAfterSeconds).encodedSize
        let fits = LiveActivityPayload.deviceLimit - base
        #expect(F.reason(F.decode(event(padding: fits))) == nil)
        #expect(F.reason(F.decode(event(padding: fits + 1))) == .payloadTooLarge)
        // The broadcast lane allows a 5120-byte body; its content state is held to ActivityKit's 4096 bytes.
        func broadcast(stateBytes: Int) -> [String: Any] {
            F.broadcast(["content_state": ["pad": String(repeating: "x", count: stateBytes - #"{"pad":""}"#.utf8.count)]])
        }
        let widest = try F.decode(broadcast(stateBytes: 4096), lane: .broadcast).get()
        #expect(widest.contentState.bytes.count == 4096)
        #expect(widest.livePayload(defaultStaleAfter: EventPolicy.defaultStaleAfterSeconds).encodedSize > LiveActivityPayload.deviceLimit)
        #expect(F.reason(F.decode(broadcast(stateBytes: 4097), lane: .broadcast)) == .payloadTooLarge)
    }
}

func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return hash
}

func json(_ bytes: [UInt8]) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
}
