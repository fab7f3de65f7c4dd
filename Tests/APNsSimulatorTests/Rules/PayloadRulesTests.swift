import APNsModel
@testable import APNsSimulator
import Testing

@Suite("Strict JSON scanning and Live Activity payload rules (no network)")
struct PayloadRulesTests {
    static func validate(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBufferPointer { (try? JSONScanner.validateDocument($0)) != nil }
    }

    @Test(arguments: ["{}", "[]", "0", "-0.5e+3", "\"a\\u00e9\\n\"", "{\"a\":[1,true,null,{\"b\":\"é\"}]}", " {\"x\" : 1 } "])
    func acceptsValidJSON(_ text: String) { #expect(Self.validate(text)) }

    @Test(arguments: ["", "{", "{\"a\":}", "[1,]", "01", "1.", "-", "\"\\x\"", "\"a", "{\"a\":1}x", "tru", "{a:1}", "[1 2]", "\"\u{01}\"", "1e"])
    func rejectsInvalidJSON(_ text: String) { #expect(!Self.validate(text)) }

    @Test func rejectsInvalidUTF8AndDeepNesting() {
        let invalid: [UInt8] = [0x22, 0xC3, 0x28, 0x22]
        #expect(invalid.withUnsafeBufferPointer { (try? JSONScanner.validateDocument($0)) == nil })
        let overlong: [UInt8] = [0x22, 0xE0, 0x80, 0x80, 0x22]
        #expect(overlong.withUnsafeBufferPointer { (try? JSONScanner.validateDocument($0)) == nil })
        #expect(!Self.validate(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)))
        #expect(Self.validate(String(repeating: "[", count: 30) + String(repeating: "]", count: 30)))
    }

    @Test func payloadFieldsAreLocated() throws {
        let text = "{\"aps\":{\"timestamp\":1700000000.5,\"event\":\"end\",\"content-state\":{\"a\":[1]},\"dismissal-date\":1700003600}}"
        let bytes = Array(text.utf8)
        let payload = try bytes.withUnsafeBufferPointer { try LiveActivityPayload.parse($0, isBroadcast: false).get() }
        #expect(payload.event == .end)
        #expect(payload.timestamp == 1_700_000_000.5)
        #expect(String(decoding: bytes[payload.contentState], as: UTF8.self) == "{\"a\":[1]}")
        #expect(String(decoding: bytes[payload.aps], as: UTF8.self).hasPrefix("{\"timestamp\""))
    }

    /// A 5 KB broadcast body is fine for APNs, but ActivityKit drops a content state over 4 KB.
    @Test func broadcastContentStateOver4KBIsRefused() throws {
        func body(_ textBytes: Int) -> [UInt8] {
            Array("{\"aps\":{\"timestamp\":1700000000,\"event\":\"update\",\"content-state\":{\"t\":\"\(String(repeating: "x", count: textBytes))\"}}}".utf8)
        }
        let fits = body(4096 - 8)  // {"t":"…"} is 8 bytes around the text
        #expect(fits.withUnsafeBufferPointer { (try? LiveActivityPayload.parse($0, isBroadcast: true).get()) != nil })
        let over = body(4096 - 7)
        let refusal = over.withUnsafeBufferPointer { result -> Refusal? in
            if case .failure(let refusal) = LiveActivityPayload.parse(result, isBroadcast: true) { return refusal }
            return nil
        }
        #expect(refusal?.detail?.contains("content-state is 4097 bytes") == true, "\(String(describing: refusal))")
    }

    @Test func deviceViewTrackerIsBounded() {
        var tracker = DeviceViewTracker(capacity: 1)
        tracker.apply(target: "a", event: .update, timestamp: 1, contentState: "{}")
        tracker.apply(target: "b", event: .update, timestamp: 1, contentState: "{}")
        #expect(tracker.count == 1)
        #expect(tracker.view("a") != nil && tracker.view("b") == nil)
        #expect(tracker.untracked == 1)
    }

    @Test func rateLimiterCountsPerSecond() {
        var limiter = TokenRateLimiter(limit: 2, capacity: 10)
        let answers = [limiter.allow("t", now: 10.1), limiter.allow("t", now: 10.2), limiter.allow("t", now: 10.9),
                       limiter.allow("t", now: 11.0), limiter.allow("u", now: 10.95)]
        #expect(answers == [true, true, false, true, true])
    }

    @Test func seededUUIDsAreCanonicalAndRepeatable() {
        var first = SeededRandom(seed: 7), second = SeededRandom(seed: 7)
        let id = first.uuid(), again = second.uuid()
        #expect(id == again)
        let bytes = Array(id.utf8)
        #expect(bytes.withUnsafeBufferPointer { HeaderRules.isCanonicalUUID($0) })
        #expect(Array(id)[14] == "4")
    }
}
