import Foundation
import Testing
import APNsModel

/// Golden tests: the builder's output is parsed and compared as JSON values, not as strings.
@Suite struct LiveActivityPayloadTests {
    func aps(_ payload: LiveActivityPayload) throws -> [String: Any] {
        var buffer: [UInt8] = [1, 2, 3]  // stale contents must be replaced
        payload.write(into: &buffer)
        #expect(buffer.count == payload.encodedSize)
        #expect(buffer == payload.encoded())
        let root = try #require(try JSONSerialization.jsonObject(with: Data(buffer)) as? [String: Any])
        #expect(root.keys.sorted() == ["aps"])
        return try #require(root["aps"] as? [String: Any])
    }

    @Test func minimalUpdateMatchesApplesExample() throws {
        let payload = LiveActivityPayload(event: .update, timestamp: 1_685_952_000,
                                          contentState: Array(#"{"currentHealthLevel":0.941,"eventDescription":"Power Panda found a sword!"}"#.utf8))
        let aps = try aps(payload)
        let expected: [String: Any] = ["timestamp": 1_685_952_000, "event": "update",
                                       "content-state": ["currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!"]]
        #expect(try sameJSON(aps, expected))
    }

    @Test func fullStartCarriesEveryKey() throws {
        let payload = LiveActivityPayload(
            event: .start, timestamp: 1_772_788_200, contentState: Array(#"{"progress":0}"#.utf8),
            alert: Array(#"{"title":{"loc-key":"%@ started","loc-args":["Q3"]},"body":"b","sound":"chime.aiff"}"#.utf8),
            staleDate: 1_772_789_100, relevanceScore: 0.25, attributesType: "Export\"Attr\\ibutes\u{1}",
            attributes: Array(#"{"name":"Q3 report"}"#.utf8), inputPushToken: true)
        let aps = try aps(payload)
        let expected: [String: Any] = [
            "timestamp": 1_772_788_200, "event": "start", "content-state": ["progress": 0],
            "alert": ["title": ["loc-key": "%@ started", "loc-args": ["Q3"]], "body": "b", "sound": "chime.aiff"],
            "stale-date": 1_772_789_100, "relevance-score": 0.25, "attributes-type": "Export\"Attr\\ibutes\u{1}",
            "attributes": ["name": "Q3 report"], "input-push-token": 1,
        ]
        #expect(try sameJSON(aps, expected))
    }

    @Test func endWithDismissalAndChannelInput() throws {
        let end = LiveActivityPayload(event: .end, timestamp: 10, contentState: Array("{}".utf8), dismissalDate: 20, relevanceScore: 100)
        let aps1 = try aps(end)
        #expect(try sameJSON(aps1, ["timestamp": 10, "event": "end", "content-state": [String: Any](), "dismissal-date": 20, "relevance-score": 100] as [String: Any]))
        let start = LiveActivityPayload(event: .start, timestamp: 10, contentState: Array("{}".utf8), inputPushChannel: "dHN0LXNyY2gtY2hubA==")
        #expect(try aps(start)["input-push-channel"] as? String == "dHN0LXNyY2gtY2hubA==")
    }

    @Test(arguments: [0.0, -0.0, 1.5, -3.25, 1e-7, 1e21, 123_456_789.125, 75])
    func relevanceScoreWritesAValidNumber(_ score: Double) throws {
        let payload = LiveActivityPayload(event: .update, timestamp: 1, contentState: Array("{}".utf8), relevanceScore: score)
        #expect((try aps(payload)["relevance-score"] as? NSNumber)?.doubleValue == score)
    }

    @Test(arguments: [Int64(0), 1, -1, 9, 10, Int64.max, Int64.min])
    func integersRoundTrip(_ value: Int64) throws {
        let payload = LiveActivityPayload(event: .update, timestamp: value, contentState: Array("{}".utf8))
        #expect((try aps(payload)["timestamp"] as? NSNumber)?.int64Value == value)
    }

    @Test func sizeCheckUsesTheLimitGiven() {
        func payload(_ padding: Int) -> LiveActivityPayload {
            LiveActivityPayload(event: .update, timestamp: 1_772_788_200,
                                contentState: Array(#"{"p":""#.utf8) + [UInt8](repeating: 0x78, count: padding) + Array(#""}"#.utf8))
        }
        let base = payload(0).encodedSize
        let exact = payload(LiveActivityPayload.deviceLimit - base)
        #expect(exact.encodedSize == 4096)
        #expect(exact.checkSize(limit: LiveActivityPayload.deviceLimit) == .success(4096))
        let over = payload(LiveActivityPayload.deviceLimit - base + 1)
        #expect(over.checkSize(limit: LiveActivityPayload.deviceLimit) == .failure(.tooLarge(size: 4097, limit: 4096)))
        #expect(over.checkSize(limit: LiveActivityPayload.broadcastLimit) == .success(4097))
        #expect(LiveActivityPayload.broadcastLimit == 5120)
    }

    @Test func nonFiniteRelevanceScoreIsReported() {
        let payload = LiveActivityPayload(event: .update, timestamp: 1, contentState: Array("{}".utf8), relevanceScore: .nan)
        #expect(payload.checkSize(limit: 4096) == .failure(.nonFiniteRelevanceScore))
    }

    @Test func bufferIsReusedAcrossWrites() {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(8192)
        let capacity = buffer.capacity
        LiveActivityPayload(event: .update, timestamp: 1, contentState: Array(#"{"a":1}"#.utf8)).write(into: &buffer)
        LiveActivityPayload(event: .end, timestamp: 2, contentState: Array("{}".utf8)).write(into: &buffer)
        #expect(buffer.capacity == capacity)
        #expect(String(decoding: buffer, as: UTF8.self).contains("\"end\""))
    }
}

/// Compares two JSON values by normalizing both through JSONSerialization (sorted keys), so key
/// order and number spelling in the builder's output do not matter, only the values.
func sameJSON(_ actual: Any, _ expected: Any) throws -> Bool {
    let a = try JSONSerialization.data(withJSONObject: actual, options: [.sortedKeys, .fragmentsAllowed])
    let b = try JSONSerialization.data(withJSONObject: expected, options: [.sortedKeys, .fragmentsAllowed])
    return a == b
}
