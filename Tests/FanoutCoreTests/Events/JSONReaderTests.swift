import APNsModel
import Foundation
import Testing
@testable import FanoutCore

/// The reader against hostile and edge-case input: it must reject precisely and never crash.
@Suite struct JSONReaderTests {
    func read(_ bytes: [UInt8], limits: JSONReader.Limits = .init()) -> Result<JSONDocument, JSONReadError> {
        bytes.withUnsafeBufferPointer { buffer in
            do throws(JSONReadError) {
                return .success(try JSONReader.read(buffer, limits: limits))
            } catch {
                return .failure(error)
            }
        }
    }

    func code(_ text: String) -> JSONReadError.Code? { code(Array(text.utf8)) }

    func code(_ bytes: [UInt8]) -> JSONReadError.Code? {
        if case let .failure(error) = read(bytes) { return error.code }
        return nil
    }

    @Test(arguments: [
        #"{}"#, #"[]"#, #" {"a" : [1, -0, 0.5, 1e3, -2E-2, true, false, null, "x"]} "#, #""s""#, "0", "-0",
        #"{"a":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"}"#, "{\"k\":\"é😀\"}", "1.7976931348623157e308",
    ])
    func acceptsValidJSON(_ text: String) {
        #expect(code(text) == nil)
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, #"{a:1}"#, "{'a':1}", "01", "-", "1.", ".5", "1e", "+1",
        "NaN", "Infinity", "-Infinity", "tru", "nul", #""abc"#, "\"a\u{01}b\"", #""\x""#, #""\u12""#, "[1 2]",
        "{} {}", "1 x", "{}\u{0}", "[\"a\"]]",
    ])
    func rejectsMalformedJSON(_ text: String) {
        #expect(code(text) == .malformed)
    }

    @Test func rejectsNumbersOutsideDoubleRange() {
        #expect(code("1e400") == .numberOutOfRange)
        #expect(code("-1e400") == .numberOutOfRange)
        #expect(code(String(repeating: "9", count: 400)) == .numberOutOfRange)
        #expect(code("1e-400") == nil)  // underflows to 0: representable
    }

    @Test func keepsMinusZeroAndIntegersExactly() throws {
        let text = Array(#"[-0, 9007199254740993, 1772788200]"#.utf8)
        let document = try read(text).get()
        text.withUnsafeBufferPointer { bytes in
            #expect(document.double(1, in: bytes) == 0 && document.double(1, in: bytes).sign == .minus)
            #expect(document.integer(2, in: bytes) == 9_007_199_254_740_993)
            #expect(document.integer(3, in: bytes) == 1_772_788_200)
        }
    }

    @Test func rejectsAByteOrderMark() {
        #expect(code([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == .malformed)
    }

    @Test(arguments: [
        [0xC0, 0xAF],              // overlong '/'
        [0xE0, 0x80, 0xAF],        // overlong 3-byte
        [0xF0, 0x80, 0x80, 0xAF],  // overlong 4-byte
        [0xED, 0xA0, 0x80],        // UTF-16 surrogate D800 encoded in UTF-8
        [0xED, 0xBF, 0xBF],        // surrogate DFFF
        [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
        [0xF5, 0x80, 0x80, 0x80],  // invalid lead
        [0x80],                    // lone continuation
        [0xC3],                    // truncated
        [0xE2, 0x82],              // truncated 3-byte
        [0xE2, 0x28, 0xA1],        // bad continuation
        [0xFF],
    ] as [[UInt8]])
    func rejectsInvalidUTF8InStrings(_ sequence: [UInt8]) {
        #expect(code(Array(#"{"a":""#.utf8) + sequence + Array(#""}"#.utf8)) == .invalidUTF8)
    }

    @Test func rejectsInvalidUTF8OutsideStrings() {
        #expect(code([UInt8(ascii: "[")] + [0xC0, 0xAF] + [UInt8(ascii: "]")]) == .invalidUTF8)
    }

    @Test(arguments: [#""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\ud800x""#])
    func rejectsUnpairedSurrogateEscapes(_ text: String) {
        #expect(code(text) == .invalidUTF8)
    }

    @Test func rejectsDuplicateKeysIncludingEscapedSpellings() {
        #expect(code(#"{"a":1,"a":2}"#) == .duplicateKey)
        #expect(code(#"{"a":1,"\u0061":2}"#) == .duplicateKey)
        #expect(code(#"{"x":{"b":1,"c":2,"b":3}}"#) == .duplicateKey)
        #expect(code(#"{"a":1,"b":{"a":2}}"#) == nil)
    }

    @Test func rejectsDuplicateKeysInLargeObjects() {
        let members = (0..<500).map { "\"k\($0)\":\($0)" }
        #expect(code("{" + members.joined(separator: ",") + "}") == nil)
        #expect(code("{" + (members + ["\"k250\":0"]).joined(separator: ",") + "}") == .duplicateKey)
    }

    @Test func stopsAtTheDepthLimitWithoutRecursingFurther() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(code(deep) == .tooDeep)
        let objects = String(repeating: #"{"a":"#, count: 100_000)
        #expect(code(objects) == .tooDeep)
        #expect(code(String(repeating: "[", count: 32) + String(repeating: "]", count: 32)) == nil)
        #expect(code(String(repeating: "[", count: 33) + String(repeating: "]", count: 33)) == .tooDeep)
    }

    @Test func boundsStringLength() {
        let huge = [UInt8(ascii: "\"")] + [UInt8](repeating: UInt8(ascii: "x"), count: 10_000_000) + [UInt8(ascii: "\"")]
        if case let .failure(error) = read(huge, limits: .init(maxStringBytes: 65_536)) {
            #expect(error.code == .stringTooLong)
        } else {
            Issue.record("a 10 MB string passed a 64 KiB limit")
        }
        #expect(code(huge) == nil)  // without a limit it is simply valid
    }

    @Test func unterminatedHugeStringIsMalformed() {
        let huge = [UInt8(ascii: "\"")] + [UInt8](repeating: UInt8(ascii: "x"), count: 10_000_000)
        #expect(code(huge) == .malformed)
    }

    @Test func recordsRawRangesAndUnescapesStrings() throws {
        let text = Array(#"{"state": {"a" : [1, 2]}, "s":"x\ny\u00e9"}"#.utf8)
        let document = try read(text).get()
        text.withUnsafeBufferPointer { bytes in
            #expect(document.raw(2, in: bytes) == Array(#"{"a" : [1, 2]}"#.utf8))
            var members: [String] = []
            document.forEachMember(of: 0) { name, _ in members.append(document.string(name, in: bytes)) }
            #expect(members == ["state", "s"])
            let stringIndex = document.nodes.lastIndex { $0.kind == .string }!
            #expect(document.string(stringIndex, in: bytes) == "x\nyé")
        }
    }

    /// Random byte soup and random mutations of a valid event must never crash the reader.
    @Test func survivesRandomMutations() {
        var generator = SeededRandom(seed: 0x5EED)
        let valid = Array(#"{"v":1,"id":"e","activity":"a","event":"update","timestamp":1772788200,"content_state":{"p":[1,2.5,"x\u00e9"],"q":{"r":null}}}"#.utf8)
        let decoder = EventDecoder(policy: EventPolicy())
        for _ in 0..<20_000 {
            var bytes = valid
            for _ in 0..<Int(generator.next() % 4 + 1) {
                let position = Int(generator.next() % UInt64(bytes.count))
                switch generator.next() % 3 {
                case 0: bytes[position] = UInt8(truncatingIfNeeded: generator.next())
                case 1: bytes.remove(at: position)
                default: bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                }
            }
            _ = read(bytes)
            _ = decoder.decode(bytes, key: nil, lane: .activity, now: 1_772_788_260)
        }
    }
}
