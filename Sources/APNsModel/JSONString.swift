/// Writes a Swift string as a JSON string literal: the one escaper for payloads, logs, feedback
/// records, admin answers, provider tokens and the simulator's answers.
///
/// UTF-8 passes through unchanged; `"` and `\` are escaped, control characters take their short
/// form where JSON has one (`\b \t \n \f \r`) and `\u00XX` otherwise. No allocation beyond the
/// appended bytes.
public enum JSONString {
    /// Appends `text` with its surrounding quotes.
    public static func append(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        appendEscaped(text, to: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `text` with its surrounding quotes to a `String`.
    public static func append(_ text: String, to out: inout String) {
        if encodedCount(text) == text.utf8.count + 2 {  // nothing to escape
            out += "\""
            out += text
            out += "\""
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        append(text, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// Copies each run of bytes that needs no escape in one go (a JSON line of the simulator's delivery
    /// log is mostly such runs; byte by byte, this took half of the log writer's time).
    private static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            var run = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if run < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index])) }
                appendEscape(of: byte, to: &out)
                run = index + 1
            }
            if run < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...])) }
        }
    }

    private static func appendEscape(of byte: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        case 0x08: out.append(UInt8(ascii: "b"))
        case 0x0C: out.append(UInt8(ascii: "f"))
        default:
            out.append(UInt8(ascii: "u"))
            out.append(UInt8(ascii: "0")); out.append(UInt8(ascii: "0"))
            out.append(hexDigit(byte >> 4))
            out.append(hexDigit(byte & 0xF))
        }
    }

    /// The bytes `append(text, to:)` writes, quotes included, without writing them.
    public static func encodedCount(_ text: String) -> Int {
        var count = 2
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x08, 0x09, 0x0A, 0x0C, 0x0D: count += 2
            case 0..<0x20: count += 6
            default: count += 1
            }
        }
        return count
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
