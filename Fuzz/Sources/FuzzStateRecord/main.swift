import APNsModel
import FanoutCore
import FuzzSupport

/// Fuzzes `TargetHandoff` decoding: the values of the compacted `fanout-state` topic (docs/design.md
/// §11), which a next owner reads back from Kafka, where a record may be corrupt, truncated, written by
/// another release or by something that is not Fanout.
///
/// Input: the record's value. A record is read or refused with a reason, never crashes; one that is
/// read is written back byte for byte when its names are valid UTF-8 (each record is written in the
/// lowest version that holds it, so every version this build reads has one form).
enum StateRecordTarget {
    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        let bytes = Array(input)
        let record: TargetHandoff
        do {
            record = try TargetHandoff(key: "k", decoding: bytes)
        } catch {
            Property.require(!error.description.isEmpty && !error.code.isEmpty, "every refusal says why")
            return
        }
        Property.require((1...TargetHandoff.version).contains(bytes[0]), "only versions 1–\(TargetHandoff.version) are read")
        Property.require(record.bucket.credits.isFinite && record.bucket.credits >= 0, "credits are finite and not negative")
        if let credit = record.pushToStart {
            Property.require((1...PushToken.maxBytes).contains(credit.token.byteCount), "a push-to-start token has 1–\(PushToken.maxBytes) bytes")
            Property.require(credit.bucket.credits.isFinite && credit.bucket.credits >= 0, "push-to-start credits are finite and not negative")
        }
        let appStart = 96, appLength = Int(bytes[94]) | Int(bytes[95]) << 8
        var rawNames = [bytes[appStart..<appStart + appLength]]
        if record.attributesType != nil {
            let tokenBytes = record.pushToStart.map { $0.token.byteCount + 16 } ?? 0
            let type = bytes[(appStart + appLength + 2 + tokenBytes + 2)...]
            Property.require(bytes[0] == 3, "only version 3 names an attributes type")
            Property.require((1...256).contains(type.count), "an attributes type has 1–256 bytes")
            rawNames.append(type)
        }
        // Names are decoded as UTF-8 with invalid bytes replaced: only valid ones come back unchanged.
        guard rawNames.allSatisfy({ FuzzText.isValidUTF8($0) }) else { return }
        Property.require(record.encoded() == bytes, "a record read is written back byte for byte (version \(bytes[0]))")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    StateRecordTarget.run(FuzzDriver.bytes(data, size))
    return 0
}

FuzzDriver.run(testOneInput)
