/// A strict, allocation-free JSON (RFC 8259) validator over bytes that reports where values are.
///
/// Used on the request hot path instead of Foundation's parser: it checks the whole grammar
/// (string escapes, UTF-8, number syntax, nesting up to `maxDepth`, nothing after the value) while
/// the caller picks out only the members it needs by byte range.
struct JSONScanner {
    enum Kind: Equatable { case object, array, string, number, literal }

    struct Failure: Error, Equatable {
        var message: String
        var offset: Int
    }

    static let maxDepth = 64

    let bytes: UnsafeBufferPointer<UInt8>
    private(set) var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Validates the whole buffer as exactly one JSON value.
    static func validateDocument(_ bytes: UnsafeBufferPointer<UInt8>) throws -> Kind {
        var scanner = JSONScanner(bytes)
        scanner.skipWhitespace()
        let kind = try scanner.value(depth: 0)
        try scanner.expectEnd()
        return kind
    }

    mutating func expectEnd() throws {
        skipWhitespace()
        if index != bytes.count { throw fail("unexpected data after the JSON value") }
    }

    func fail(_ message: String) -> Failure { Failure(message: message, offset: index) }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Consumes one value (whitespace before it must already be skipped).
    @discardableResult
    mutating func value(depth: Int) throws -> Kind {
        guard index < bytes.count else { throw fail("unexpected end of JSON") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            try members(depth: depth) { scanner, _ in
                try scanner.value(depth: depth + 1)
            }
            return .object
        case UInt8(ascii: "["):
            guard depth < Self.maxDepth else { throw fail("JSON nested deeper than \(Self.maxDepth)") }
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array }
            while true {
                skipWhitespace()
                try value(depth: depth + 1)
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array }
                throw fail("expected ',' or ']' in array")
            }
        case UInt8(ascii: "\""):
            try string()
            return .string
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            return .number
        case UInt8(ascii: "t"): try literal("true"); return .literal
        case UInt8(ascii: "f"): try literal("false"); return .literal
        case UInt8(ascii: "n"): try literal("null"); return .literal
        default:
            throw fail("unexpected character in JSON")
        }
    }

    /// Walks an object's members; `body` must consume the member's value (whitespace before it is skipped).
    /// The key's range excludes the quotes and is the raw (still escaped) text.
    mutating func members(depth: Int, _ body: (inout JSONScanner, Range<Int>) throws -> Void) throws {
        guard depth < Self.maxDepth else { throw fail("JSON nested deeper than \(Self.maxDepth)") }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { throw fail("expected an object") }
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
            let keyStart = index + 1
            try string()
            let key = keyStart..<(index - 1)
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':' after member name") }
            index += 1
            skipWhitespace()
            try body(&self, key)
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return }
            throw fail("expected ',' or '}' in object")
        }
    }

    func keyEquals(_ key: Range<Int>, _ name: StaticString) -> Bool {
        guard key.count == name.utf8CodeUnitCount else { return false }
        let expected = name.utf8Start
        var offset = 0
        for position in key {
            if bytes[position] != expected[offset] { return false }
            offset += 1
        }
        return true
    }

    private mutating func literal(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of JSON") }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
            throw fail("invalid literal")
        }
        index += count
    }

    mutating func string() throws {
        index += 1  // opening quote
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unterminated string") }
                switch bytes[index] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    guard index + 4 < bytes.count else { throw fail("truncated \\u escape") }
                    for offset in 1...4 where !bytes[index + offset].isHexDigit {
                        throw fail("invalid \\u escape")
                    }
                    index += 5
                default:
                    throw fail("invalid escape in string")
                }
            case 0x00..<0x20:
                throw fail("unescaped control character in string")
            case 0x20..<0x80:
                index += 1
            default:
                try utf8Sequence()
            }
        }
        throw fail("unterminated string")
    }

    /// Validates one multi-byte UTF-8 sequence (no overlongs, no surrogates, ≤ U+10FFFF).
    private mutating func utf8Sequence() throws {
        let lead = bytes[index]
        let length: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw fail("invalid UTF-8")
        }
        guard index + length <= bytes.count else { throw fail("truncated UTF-8") }
        let second = bytes[index + 1]
        guard second >= low, second <= high else { throw fail("invalid UTF-8") }
        for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 {
            throw fail("invalid UTF-8")
        }
        index += length
    }

    private mutating func number() throws {
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, bytes[index].isDigit else { throw fail("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, bytes[index].isDigit { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, bytes[index].isDigit else { throw fail("invalid number fraction") }
            while index < bytes.count, bytes[index].isDigit { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, bytes[index].isDigit else { throw fail("invalid number exponent") }
            while index < bytes.count, bytes[index].isDigit { index += 1 }
        }
    }

    /// The number at `range` (already validated) as a Double.
    func double(_ range: Range<Int>) -> Double? {
        // Fast path: a plain non-negative integer of up to 15 digits is exact as a Double.
        if range.count <= 15 {
            var value: Int64 = 0
            var plain = true
            for position in range {
                let byte = bytes[position]
                guard byte.isDigit else { plain = false; break }
                value = value * 10 + Int64(byte &- UInt8(ascii: "0"))
            }
            if plain { return Double(value) }
        }
        var text = ""
        text.reserveCapacity(range.count)
        for position in range { text.unicodeScalars.append(Unicode.Scalar(bytes[position])) }
        return Double(text)
    }

    func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}

extension UInt8 {
    var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    var isHexDigit: Bool {
        isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f")) || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}
