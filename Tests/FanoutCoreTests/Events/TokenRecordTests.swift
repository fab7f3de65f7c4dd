import APNsModel
import Testing
@testable import FanoutCore

@Suite struct TokenRecordTests {
    let apps: Set<String> = ["com.example.exports"]

    func reason(_ text: String, apps: Set<String>? = nil) -> RejectionReason? {
        if case let .failure(rejection) = TokenRecord.decode(Array(text.utf8), apps: apps ?? self.apps) { return rejection.reason }
        return nil
    }

    @Test func decodesAValidRecord() throws {
        let record = try TokenRecord.decode(Array(#"{"token":"AB12cd","app":"com.example.exports","environment":"sandbox","at":1772788200}"#.utf8), apps: apps).get()
        #expect(record == TokenRecord(token: PushToken(hex: "ab12cd")!, app: "com.example.exports", environment: .sandbox, at: 1_772_788_200))
    }

    @Test func appMayBeOmittedWithOneConfiguredApp() throws {
        let record = try TokenRecord.decode(Array(#"{"token":"ab12","environment":"production","at":1772788200}"#.utf8), apps: apps).get()
        #expect(record.app == "com.example.exports" && record.environment == .production)
    }

    @Test func nilValueIsATombstoneAndEmptyIsNot() {
        #expect(TokenRecord.isTombstone(nil))
        #expect(!TokenRecord.isTombstone([]))
        #expect(TokenRecord.update(from: nil, apps: apps) == .tombstone)
        if case .rejected(let rejection) = TokenRecord.update(from: [], apps: apps) {
            #expect(rejection.reason == .malformedJSON)
        } else {
            Issue.record("empty value was not rejected")
        }
        let value = Array(#"{"token":"ab12","environment":"production","at":1772788200}"#.utf8)
        #expect(TokenRecord.update(from: value, apps: apps) == .register(TokenRecord(token: PushToken(hex: "ab12")!, app: "com.example.exports", environment: .production, at: 1_772_788_200)))
    }

    @Test func rejectsBadRecordsWithSpecificReasons() {
        #expect(reason(#"{"app":"com.example.exports","environment":"sandbox","at":1}"#) == .missingToken)
        #expect(reason(#"{"token":"xyz1","environment":"sandbox","at":1}"#) == .invalidToken)
        #expect(reason(#"{"token":"abc","environment":"sandbox","at":1}"#) == .invalidToken)
        #expect(reason(#"{"token":"ab12","environment":"staging","at":1}"#) == .invalidEnvironment)
        #expect(reason(#"{"token":"ab12","at":1}"#) == .invalidEnvironment)
        #expect(reason(#"{"token":"ab12","environment":"sandbox"}"#) == .missingTimestamp)
        #expect(reason(#"{"token":"ab12","environment":"sandbox","at":1772788200000}"#) == .timestampInMilliseconds)
        #expect(reason(#"{"token":"ab12","environment":"sandbox","at":"now"}"#) == .invalidTimestamp)
        #expect(reason(#"{"token":"ab12","app":"com.other","environment":"sandbox","at":1}"#) == .unknownApp)
        #expect(reason(#"{"token":"ab12","environment":"sandbox","at":1}"#, apps: []) == .missingApp)
        #expect(reason(#"{"token":"ab12","environment":"sandbox","at":1,"extra":1}"#) == .unknownField)
        #expect(reason(#"["ab12"]"#) == .notAnObject)
        #expect(reason(#"{"token":"ab12","token":"cd34","environment":"sandbox","at":1}"#) == .duplicateKey)
    }
}
