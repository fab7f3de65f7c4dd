import APNsModel
import FanoutCore
import FuzzSupport

/// Fuzzes `TokenRecord` (values of the compacted activity-tokens topic) against
/// `schema/activity-token.v1.schema.json` and the README's token-record contract.
///
/// Input: one flag byte, then the record's value. Flag (low nibble): 0–3 picks the configured apps as
/// the event decoder target does (one, two, none, one); from 4 the value is a Kafka tombstone (null).
enum TokenRecordTarget {
    static let appSets: [Set<String>] = [["com.example.exports"], ["com.example.exports", "com.example.food"], [], ["com.example.exports"]]

    /// The reasons a token record can be refused with; the rest belong to events or to the worker.
    static let tokenRecordReasons: Set<RejectionReason> = [
        .eventTooLarge, .malformedJSON, .invalidUTF8, .tooDeep, .duplicateKey, .notAnObject, .unknownField,
        .missingToken, .invalidToken, .unknownApp, .missingApp, .invalidEnvironment,
        .missingTimestamp, .invalidTimestamp, .timestampInMilliseconds,
    ]

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        guard let flags = input.first.map({ Int($0 & 0x0F) }) else { return }
        let value = Array(input.dropFirst())
        if flags >= 4 {
            Property.require(TokenRecord.update(from: nil, apps: appSets[0]) == .tombstone, "a null value is a tombstone")
            Property.require(TokenRecord.update(from: [], apps: appSets[0]) != .tombstone, "empty bytes are not a tombstone")
            return
        }
        let apps = appSets[flags]
        let result = TokenRecord.decode(value, apps: apps)
        switch (TokenRecord.update(from: value, apps: apps), result) {
        case (.register(let registered), .success(let decoded)):
            Property.require(registered == decoded, "update(from:) registers what decode returns")
        case (.rejected(let rejected), .failure(let failure)):
            Property.require(rejected == failure, "update(from:) rejects as decode does")
        default:
            Property.fail("update(from:) and decode agree on \(result)")
        }

        switch result {
        case .failure(let rejection):
            Property.require(tokenRecordReasons.contains(rejection.reason), "a token record is never refused with \(rejection.reason.rawValue)")
            Property.require(!rejection.detail.isEmpty, "every rejection says why (\(rejection.reason.rawValue))")
            Property.require((value.count > 4096) == (rejection.reason == .eventTooLarge),
                             "too large exactly when over 4096 bytes (\(value.count) bytes, \(rejection))")
        case .success(let record):
            Property.require(value.count <= 4096, "an accepted record is at most 4096 bytes")
            Property.require(FuzzText.isValidUTF8(value), "an accepted record is valid UTF-8")
            Property.require((1...PushToken.maxBytes).contains(record.token.byteCount), "the token has 1–512 bytes")
            Property.require(apps.isEmpty ? Contract.isBundleID(record.app) : apps.contains(record.app), "app is a configured app or, with none configured, a bundle id")
            Property.require((1...100_000_000_000).contains(record.at), "at is positive UNIX seconds, not milliseconds")
            let canonical = canonicalJSON(record)
            Property.require(TokenRecord.decode(canonical, apps: apps) == .success(record),
                             "the record written back as JSON decodes to the same record: \(String(decoding: canonical, as: UTF8.self))")
        }
    }

    static func canonicalJSON(_ record: TokenRecord) -> [UInt8] {
        var out: [UInt8] = Array("{\"token\":".utf8)
        JSONString.append(record.token.hex, to: &out)
        out.append(contentsOf: ",\"app\":".utf8)
        JSONString.append(record.app, to: &out)
        out.append(contentsOf: ",\"environment\":".utf8)
        JSONString.append(record.environment.rawValue, to: &out)
        out.append(contentsOf: ",\"at\":\(record.at)}".utf8)
        return out
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    TokenRecordTarget.run(FuzzDriver.bytes(data, size))
    return 0
}

FuzzDriver.run(testOneInput)
