import Foundation
import Testing
import APNsModel

/// Pins the one JSON string escaper byte for byte: payload sizes and log lines depend on it.
@Suite struct JSONStringTests {
    @Test func escapesQuotesBackslashesAndControlCharactersInTheirShortestForm() {
        var out: [UInt8] = []
        JSONString.append("a\"b\\c\n\r\t\u{8}\u{C}\u{0}\u{1F}\u{7F}é🚀", to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #""a\"b\\c\n\r\t\b\f\u0000\u001f"# + "\u{7F}é🚀\"")
    }

    @Test func stringAndByteFormsAgreeAndCountIsExact() throws {
        for scalar in (0..<0x80).compactMap(Unicode.Scalar.init) {
            let text = "x" + String(Character(scalar)) + "ü"
            var bytes: [UInt8] = []
            JSONString.append(text, to: &bytes)
            var string = "<"
            JSONString.append(text, to: &string)
            #expect(string == "<" + String(decoding: bytes, as: UTF8.self))
            #expect(JSONString.encodedCount(text) == bytes.count)
            let decoded = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String
            #expect(decoded == text)
        }
    }

    /// Runs of plain bytes are copied whole around each escape: escapes at either end, back to back,
    /// and spread through a long text all read back as the text.
    @Test func textAroundEscapesReadsBack() throws {
        var long = ""
        for index in 0..<1_000 { long += index % 37 == 0 ? "\"\n" : (index % 11 == 0 ? "ü" : "a") }
        for text in ["", "\"", "\"abc", "abc\"", "\"\"", "\\\n\u{1}", "a\nb\nc", "🚀\t🚀", long] {
            var bytes: [UInt8] = []
            JSONString.append(text, to: &bytes)
            #expect(JSONString.encodedCount(text) == bytes.count)
            let decoded = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String
            #expect(decoded == text, "\(text.debugDescription)")
        }
    }
}
