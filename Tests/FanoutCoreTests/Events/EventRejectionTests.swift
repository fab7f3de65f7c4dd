import Foundation
import Testing
@testable import FanoutCore

/// One case per rule: each input breaks exactly one rule and must be rejected with exactly that reason.
@Suite struct EventRejectionTests {
    typealias F = EventFixtures

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var reason: RejectionReason
        var input: @Sendable () -> Result<ActivityEvent, EventRejection>
        var testDescription: String { "\(reason.rawValue): \(name)" }
    }

    static let tooLong = String(repeating: "k", count: 300)
    static let ahead = F.now + 8 * 3600 + 1

    static let cases: [Case] = [
        Case(name: "truncated", reason: .malformedJSON) { F.decode(#"{"v":1,"id":"#) },
        Case(name: "NaN", reason: .malformedJSON) { F.decode(#"{"v":NaN}"#) },
        Case(name: "1e400", reason: .malformedJSON) { F.decode(#"{"v":1e400}"#) },
        Case(name: "leading zero", reason: .malformedJSON) { F.decode(#"{"v":01}"#) },
        Case(name: "trailing garbage", reason: .malformedJSON) { F.decode(#"{"v":1} x"#) },
        Case(name: "invalid utf-8", reason: .invalidUTF8) {
            F.decoder().decode(Array(#"{"id":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8), key: nil, lane: .activity, now: F.now)
        },
        Case(name: "too deep", reason: .tooDeep) { F.decode(String(repeating: "[", count: 40) + String(repeating: "]", count: 40)) },
        Case(name: "duplicate key", reason: .duplicateKey) { F.decode(#"{"v":1,"v":1}"#) },
        Case(name: "array", reason: .notAnObject) { F.decode("[1,2]") },
        Case(name: "over max bytes", reason: .eventTooLarge) {
            EventDecoder(policy: EventPolicy(apps: [F.app], maxEventBytes: 64)).decode(F.bytes(F.update()), key: nil, lane: .activity, now: F.now)
        },
        Case(name: "v missing", reason: .unsupportedVersion) { F.decode(F.update(["v": nil])) },
        Case(name: "v 2", reason: .unsupportedVersion) { F.decode(F.update(["v": 2])) },
        Case(name: "id missing", reason: .missingID) { F.decode(F.update(["id": nil])) },
        Case(name: "id number", reason: .invalidID) { F.decode(F.update(["id": 5])) },
        Case(name: "id empty", reason: .invalidID) { F.decode(F.update(["id": ""])) },
        Case(name: "id too long", reason: .invalidID) { F.decode(F.update(["id": tooLong])) },
        Case(name: "event missing", reason: .missingEvent) { F.decode(F.update(["event": nil])) },
        Case(name: "event unknown", reason: .invalidEvent) { F.decode(F.update(["event": "pause"])) },
        Case(name: "activity missing", reason: .missingTarget) { F.decode(F.update(["activity": nil])) },
        Case(name: "channel missing", reason: .missingTarget) { F.decode(F.broadcast(["channel": nil]), lane: .broadcast) },
        Case(name: "activity empty", reason: .invalidTarget) { F.decode(F.update(["activity": ""])) },
        Case(name: "channel on activity lane", reason: .invalidTarget) { F.decode(F.update(["channel": F.channel])) },
        Case(name: "key differs", reason: .keyMismatch) { F.decode(F.update(), key: "export-43") },
        Case(name: "channel not base64", reason: .invalidChannel) { F.decode(F.broadcast(["channel": "not base64!"]), lane: .broadcast) },
        Case(name: "input_push_channel not base64", reason: .invalidChannel) { F.decode(F.start(["input_push_channel": "a b"])) },
        Case(name: "start on broadcast", reason: .startOnBroadcast) {
            F.decode(F.broadcast(["event": "start"]), lane: .broadcast)
        },
        Case(name: "app unknown", reason: .unknownApp) { F.decode(F.update(["app": "com.other"])) },
        Case(name: "app not a bundle id", reason: .unknownApp) { F.decode(F.update(["app": "no spaces"]), apps: []) },
        Case(name: "app missing, two apps", reason: .missingApp) { F.decode(F.update(["app": nil]), apps: [F.app, "com.b"]) },
        Case(name: "app missing, none configured", reason: .missingApp) { F.decode(F.update(["app": nil]), apps: []) },
        Case(name: "timestamp missing", reason: .missingTimestamp) { F.decode(F.update(["timestamp": nil])) },
        Case(name: "timestamp string", reason: .invalidTimestamp) { F.decode(F.update(["timestamp": "1772788200"])) },
        Case(name: "timestamp fraction", reason: .invalidTimestamp) { F.decode(F.update(["timestamp": 1_772_788_200.5])) },
        Case(name: "timestamp zero", reason: .invalidTimestamp) { F.decode(F.update(["timestamp": 0])) },
        Case(name: "timestamp negative", reason: .invalidTimestamp) { F.decode(F.update(["timestamp": -5])) },
        Case(name: "timestamp ms", reason: .timestampInMilliseconds) { F.decode(F.update(["timestamp": F.timestamp * 1000])) },
        Case(name: "timestamp huge", reason: .timestampInMilliseconds) { F.decode(#"{"v":1,"id":"e","activity":"a","event":"update","timestamp":123456789012345678901234567890,"content_state":{}}"#) },
        Case(name: "timestamp too far ahead", reason: .dateTooFarAhead) { F.decode(F.update(["timestamp": ahead])) },
        Case(name: "stale_date ms", reason: .dateInMilliseconds) { F.decode(F.update(["stale_date": F.timestamp * 1000])) },
        Case(name: "dismissal_date ms", reason: .dateInMilliseconds) { F.decode(F.update(["event": "end", "dismissal_date": F.timestamp * 1000])) },
        Case(name: "stale_date too far ahead", reason: .dateTooFarAhead) { F.decode(F.update(["stale_date": ahead])) },
        Case(name: "stale_date before timestamp", reason: .invalidDate) { F.decode(F.update(["stale_date": F.timestamp - 1])) },
        Case(name: "stale_date string", reason: .invalidDate) { F.decode(F.update(["stale_date": "soon"])) },
        Case(name: "dismissal_date on update", reason: .invalidDate) { F.decode(F.update(["dismissal_date": F.timestamp])) },
        Case(name: "content_state missing", reason: .missingContentState) { F.decode(F.update(["content_state": nil])) },
        Case(name: "content_state array", reason: .invalidContentState) { F.decode(F.update(["content_state": [1]])) },
        Case(name: "importance unknown", reason: .invalidImportance) { F.decode(F.update(["importance": "huge"])) },
        Case(name: "alert string", reason: .invalidAlert) { F.decode(F.update(["alert": "hi"])) },
        Case(name: "alert without title", reason: .invalidAlert) { F.decode(F.update(["alert": ["body": "b"]])) },
        Case(name: "alert unknown member", reason: .invalidAlert) { F.decode(F.update(["alert": ["title": "t", "body": "b", "badge": 1]])) },
        Case(name: "alert loc-args not strings", reason: .invalidAlert) {
            F.decode(F.update(["alert": ["title": ["loc-key": "K", "loc-args": [1]], "body": "b"]]))
        },
        Case(name: "start without alert", reason: .startWithoutAlert) { F.decode(F.start(["alert": nil])) },
        Case(name: "start without attributes", reason: .startWithoutAttributes) { F.decode(F.start(["attributes": nil])) },
        Case(name: "start without attributes_type", reason: .startWithoutAttributes) { F.decode(F.start(["attributes_type": nil])) },
        Case(name: "start without token", reason: .startWithoutToken) { F.decode(F.start(["token": nil])) },
        Case(name: "relevance_score string", reason: .invalidRelevanceScore) { F.decode(F.update(["relevance_score": "high"])) },
        Case(name: "token odd length", reason: .invalidToken) { F.decode(F.update(["token": "abc"])) },
        Case(name: "token base64", reason: .invalidToken) { F.decode(F.update(["token": "q83vEjRWeJA="])) },
        Case(name: "token on broadcast", reason: .invalidToken) { F.decode(F.broadcast(["token": F.token]), lane: .broadcast) },
        Case(name: "payload too large", reason: .payloadTooLarge) {
            F.decode(F.update(["content_state": ["text": String(repeating: "x", count: 4100)]]))
        },
        Case(name: "broadcast content_state over 4 KB", reason: .payloadTooLarge) {
            // The 5 KB broadcast body would fit; ActivityKit would drop the state.
            F.decode(F.broadcast(["content_state": ["text": String(repeating: "x", count: 4100)]]), lane: .broadcast)
        },
        Case(name: "unknown top-level field", reason: .unknownField) { F.decode(F.update(["progress": 5])) },
        Case(name: "attributes on update", reason: .invalidAttributes) { F.decode(F.update(["attributes": ["a": 1]])) },
        Case(name: "attributes not an object", reason: .invalidAttributes) { F.decode(F.start(["attributes": "x"])) },
        Case(name: "attributes_type empty", reason: .invalidAttributes) { F.decode(F.start(["attributes_type": ""])) },
        Case(name: "input_push_token not bool", reason: .invalidInputPush) { F.decode(F.start(["input_push_token": 1])) },
        Case(name: "input_push_token on update", reason: .invalidInputPush) { F.decode(F.update(["input_push_token": true])) },
        Case(name: "both input push kinds", reason: .invalidInputPush) {
            F.decode(F.start(["input_push_token": true, "input_push_channel": F.channel]))
        },
        Case(name: "a record with a null Kafka key", reason: .missingKey) {
            F.decoder().decode(record: Array("{}".utf8), key: nil, lane: .activity, now: F.timestamp)
        },
    ]

    @Test(arguments: cases)
    func rejects(_ testCase: Case) {
        let result = testCase.input()
        guard case let .failure(rejection) = result else {
            Issue.record("accepted, expected \(testCase.reason.rawValue)")
            return
        }
        #expect(rejection.reason == testCase.reason, "\(rejection)")
        #expect(!rejection.detail.isEmpty)
    }

    /// Every reason the decoder owns has a case above (the worker-side ones and the token-record ones
    /// are covered elsewhere).
    @Test func everyDecoderReasonIsCovered() {
        let resolvedLater: Set<RejectionReason> = [.noToken, .rejectedByAPNs, .channelNotRegistered, .missingToken, .invalidEnvironment]
        let covered = Set(Self.cases.map(\.reason))
        let missing = Set(RejectionReason.allCases).subtracting(resolvedLater).subtracting(covered)
        #expect(missing.isEmpty, "no test for: \(missing.map(\.rawValue).sorted())")
    }

    @Test func theFirstBrokenRuleIsReported() {
        // Both the version and the timestamp are wrong: version is checked first.
        #expect(F.reason(F.decode(F.update(["v": 3, "timestamp": F.timestamp * 1000]))) == .unsupportedVersion)
    }

    @Test func detailNamesTheFieldAndTheFix() throws {
        guard case let .failure(rejection) = F.decode(F.update(["timestamp": F.timestamp * 1000])) else {
            Issue.record("accepted")
            return
        }
        #expect(rejection.detail.contains("timestamp") && rejection.detail.contains("seconds"))
        #expect(rejection.description.hasPrefix("timestamp-in-milliseconds: "))
    }
}

@Suite struct EventDecoderBoundsTests {
    typealias F = EventFixtures

    /// Extreme clocks and policy values must not trap on overflow.
    @Test func extremeNowAndPolicyValuesDoNotOverflow() {
        let bytes = F.bytes(F.update(["timestamp": 99_999_999_999]))
        let wide = EventDecoder(policy: EventPolicy(apps: [F.app], maxFutureSeconds: .max, defaultStaleAfter: .max))
        #expect(F.reason(wide.decode(bytes, key: nil, lane: .activity, now: .max)) == nil)
        #expect(F.reason(F.decoder().decode(bytes, key: nil, lane: .activity, now: .min)) == .dateTooFarAhead)
    }
}

/// Hostile events through the whole decoder, with a size limit high enough that the parser sees them.
@Suite struct HostileEventTests {
    typealias F = EventFixtures
    let decoder = EventDecoder(policy: EventPolicy(apps: [F.app], maxEventBytes: 16 << 20))

    func reason(_ bytes: [UInt8]) -> RejectionReason? {
        F.reason(decoder.decode(bytes, key: nil, lane: .activity, now: F.now))
    }

    @Test func deepNestingIsTooDeep() {
        let deep = #"{"v":1,"content_state":"# + String(repeating: #"{"a":"#, count: 100_000) + "1" + String(repeating: "}", count: 100_001)
        #expect(reason(Array(deep.utf8)) == .tooDeep)
    }

    @Test func tenMegabyteStringIsRejectedByPayloadSize() {
        let huge = F.update(["content_state": ["text": String(repeating: "x", count: 10_000_000)]])
        #expect(reason(F.bytes(huge)) == .payloadTooLarge)
        #expect(F.reason(F.decode(huge)) == .eventTooLarge)  // default 64 KiB limit: never parsed
    }

    @Test func byteOrderMarkIsMalformed() {
        #expect(reason([0xEF, 0xBB, 0xBF] + F.bytes(F.update())) == .malformedJSON)
    }

    @Test func trailingGarbageAndSecondObjectAreMalformed() {
        #expect(reason(F.bytes(F.update()) + Array("x".utf8)) == .malformedJSON)
        #expect(reason(F.bytes(F.update()) + F.bytes(F.update())) == .malformedJSON)
        #expect(reason(F.bytes(F.update()) + Array(" \n".utf8)) == nil)
    }

    @Test func specialNumbersInContentState() {
        func state(_ number: String) -> [UInt8] {
            Array(#"{"v":1,"id":"e","app":"com.example.exports","activity":"a","event":"update","timestamp":1772788200,"content_state":{"n":"#.utf8)
                + Array(number.utf8) + Array("}}".utf8)
        }
        #expect(reason(state("NaN")) == .malformedJSON)
        #expect(reason(state("Infinity")) == .malformedJSON)
        #expect(reason(state("1e400")) == .malformedJSON)
        #expect(reason(state("-0")) == nil)
        #expect(reason(state("1e-400")) == nil)
    }

    @Test func overlongAndSurrogateUTF8InAnyString() {
        for sequence: [UInt8] in [[0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]] {
            let bytes = Array(#"{"v":1,"id":""#.utf8) + sequence + Array(#""}"#.utf8)
            #expect(reason(bytes) == .invalidUTF8)
        }
    }

    @Test func duplicateTopLevelKeyWithDifferentValues() {
        let text = #"{"v":1,"id":"e","app":"com.example.exports","activity":"a","activity":"b","event":"update","timestamp":1772788200,"content_state":{}}"#
        #expect(reason(Array(text.utf8)) == .duplicateKey)
    }
}
