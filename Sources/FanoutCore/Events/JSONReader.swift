/// A strict RFC 8259 JSON reader for untrusted event bytes.
///
/// It validates the whole document in one pass and records every value as a `JSONNode` (kind and
/// raw byte range) in a flat array, so callers can read fields without building a tree and can pass
/// objects through byte for byte. Beyond RFC 8259 it rejects: invalid UTF-8 (overlongs, surrogates,
/// code points above U+10FFFF), unpaired `\u` surrogate escapes, duplicate object keys, a byte order
/// mark, nesting deeper than `maxDepth`, strings longer than `maxStringBytes`, and numbers whose
/// magnitude does not fit a Double (such as `1e400`).
///
/// Recursion is bounded by `maxDepth` (checked before descending), so hostile nesting cannot
/// exhaust the stack. The reader never reads outside the buffer it is given.
struct JSONReader {
    struct Limits: Sendable, Hashable {
        /// Containers nested deeper than this are rejected (the top-level object is depth 1).
        var maxDepth: Int = 32
        /// Longest string, in raw bytes between the quotes.
        var maxStringBytes: Int = Int.max
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let limits: Limits
    private var index = 0
    private(set) var nodes: [JSONNode]

    /// Reserves `capacity` nodes in the reader's own array: one made outside and passed in would be
    /// shared with the caller's variable, and the first append would copy it.
    private init(bytes: UnsafeBufferPointer<UInt8>, limits: Limits, capacity: Int) {
        self.bytes = bytes
        self.limits = limits
        self.nodes = []
        nodes.reserveCapacity(capacity)
    }

    /// Parses `bytes` as one JSON document. On success node 0 is the top-level value.
    static func read(_ bytes: UnsafeBufferPointer<UInt8>, limits: Limits = Limits(),
                     reservingCapacity capacity: Int = 64) throws(JSONReadError) -> JSONDocument {
        // Node offsets are 32-bit to keep nodes small; events are kilobytes, so this is no limit in practice.
        guard bytes.count < Int(Int32.max) else { throw JSONReadError(.malformed, at: 0, "input larger than 2 GiB") }
        var reader = JSONReader(bytes: bytes, limits: limits, capacity: capacity)
        try reader.readDocument()
        return JSONDocument(nodes: reader.nodes)
    }

    private mutating func readDocument() throws(JSONReadError) {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            throw JSONReadError(.malformed, at: 0, "starts with a UTF-8 byte order mark; JSON text must not carry one")
        }
        skipWhitespace()
        guard index < bytes.count else { throw JSONReadError(.malformed, at: index, "empty input; expected a JSON object") }
        try readValue(depth: 0)
        skipWhitespace()
        if index != bytes.count {
            throw JSONReadError(.malformed, at: index, "unexpected data after the JSON value; send exactly one JSON value per message")
        }
    }

    private mutating func skipWhitespace() {
        var scan = index
        let count = bytes.count
        while scan < count {
            switch bytes[scan] {
            case 0x20, 0x0A, 0x0D, 0x09: scan += 1
            default:
                index = scan
                return
            }
        }
        index = scan
    }

    private mutating func readValue(depth: Int) throws(JSONReadError) {
        guard index < bytes.count else { throw JSONReadError(.malformed, at: index, "unexpected end of input; expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try readContainer(depth: depth + 1, isObject: true)
        case UInt8(ascii: "["): try readContainer(depth: depth + 1, isObject: false)
        case UInt8(ascii: "\""): try readString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try readNumber()
        case UInt8(ascii: "t"): try readLiteral("true", kind: .true)
        case UInt8(ascii: "f"): try readLiteral("false", kind: .false)
        case UInt8(ascii: "n"): try readLiteral("null", kind: .null)
        case UInt8(ascii: "N"), UInt8(ascii: "I"):
            throw JSONReadError(.malformed, at: index, "NaN and Infinity are not JSON numbers")
        case UInt8(ascii: "'"):
            throw JSONReadError(.malformed, at: index, "single-quoted strings are not JSON; use double quotes")
        case let byte where byte >= 0x80:
            try validateUTF8Sequence()
            throw JSONReadError(.malformed, at: index, "unexpected character; expected a value")
        default:
            throw JSONReadError(.malformed, at: index, "unexpected character '\(Character(Unicode.Scalar(bytes[index])))'; expected a value")
        }
    }

    private mutating func readLiteral(_ word: StaticString, kind: JSONNode.Kind) throws(JSONReadError) {
        let start = index
        let length = word.utf8CodeUnitCount
        guard bytes.count - index >= length else { throw JSONReadError(.malformed, at: index, "unknown literal; expected true, false or null") }
        let expected = word.utf8Start
        for offset in 0..<length where bytes[index + offset] != expected[offset] {
            throw JSONReadError(.malformed, at: index, "unknown literal; expected true, false or null")
        }
        index += length
        nodes.append(JSONNode(kind: kind, start: start, end: index, subtreeEnd: nodes.count + 1))
    }

    private mutating func readContainer(depth: Int, isObject: Bool) throws(JSONReadError) {
        guard depth <= limits.maxDepth else {
            throw JSONReadError(.tooDeep, at: index, "nested deeper than \(limits.maxDepth) levels")
        }
        let nodeIndex = nodes.count
        let start = index
        nodes.append(JSONNode(kind: isObject ? .object : .array, start: start, end: start, subtreeEnd: 0))
        index += 1
        let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
        var count = 0
        skipWhitespace()
        if index < bytes.count, bytes[index] == close {
            index += 1
        } else {
            while true {
                if isObject {
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                        throw JSONReadError(.malformed, at: index, "expected a double-quoted member name")
                    }
                    try readString()
                    skipWhitespace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                        throw JSONReadError(.malformed, at: index, "expected ':' after a member name")
                    }
                    index += 1
                    skipWhitespace()
                }
                try readValue(depth: depth)
                count += 1
                skipWhitespace()
                guard index < bytes.count else {
                    throw JSONReadError(.malformed, at: index, isObject ? "unterminated object" : "unterminated array")
                }
                let byte = bytes[index]
                index += 1
                if byte == close { break }
                guard byte == UInt8(ascii: ",") else {
                    throw JSONReadError(.malformed, at: index - 1, isObject ? "expected ',' or '}' in object" : "expected ',' or ']' in array")
                }
                skipWhitespace()
                if index < bytes.count, bytes[index] == close {
                    throw JSONReadError(.malformed, at: index, "trailing comma")
                }
            }
        }
        nodes[nodeIndex].end = Int32(truncatingIfNeeded: index)
        nodes[nodeIndex].subtreeEnd = Int32(truncatingIfNeeded: nodes.count)
        nodes[nodeIndex].count = Int32(truncatingIfNeeded: count)
        if isObject, count > 1 { try rejectDuplicateKeys(object: nodeIndex) }
    }

    private func rejectDuplicateKeys(object: Int) throws(JSONReadError) {
        let count = Int(nodes[object].count)
        if count <= 16 {
            // Small objects: compare every pair, cheapest test (raw length) first.
            let duplicate: Int? = nodes.withUnsafeBufferPointer { nodes in
                let end = nodes[object].next
                var keyA = object + 1
                while keyA < end {
                    let a = nodes[keyA]
                    var keyB = nodes[keyA + 1].next
                    while keyB < end {
                        let b = nodes[keyB]
                        if a.flag || b.flag || a.end - a.start == b.end - b.start,
                           JSONDocument(nodes: []).keysEqual(a, b, in: bytes) {
                            return keyB
                        }
                        keyB = nodes[keyB + 1].next
                    }
                    keyA = nodes[keyA + 1].next
                }
                return nil
            }
            if let duplicate {
                throw JSONReadError(.duplicateKey, at: Int(nodes[duplicate].start),
                                    "duplicate member name \"\(JSONDocument(nodes: nodes).string(duplicate, in: bytes).prefix(64))\"")
            }
            return
        }
        let document = JSONDocument(nodes: nodes)
        var seen = Set<[UInt8]>(minimumCapacity: count)
        var key = object + 1
        for _ in 0..<count {
            if !seen.insert(document.stringBytes(key, in: bytes)).inserted {
                throw JSONReadError(.duplicateKey, at: Int(nodes[key].start),
                                    "duplicate member name \"\(document.string(key, in: bytes).prefix(64))\"")
            }
            key = nodes[key + 1].next
        }
    }

    private mutating func readString() throws(JSONReadError) {
        let start = index
        index += 1
        var escaped = false
        while true {
            // Fast path: plain ASCII needs no work beyond finding the next special byte.
            var scan = index
            let count = bytes.count
            while scan < count {
                let byte = bytes[scan]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
                scan += 1
            }
            index = scan
            if index - start - 1 > limits.maxStringBytes {
                throw JSONReadError(.stringTooLong, at: start, "string longer than \(limits.maxStringBytes) bytes")
            }
            guard index < bytes.count else { throw JSONReadError(.malformed, at: start, "unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                break
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
                try readEscape()
            } else if byte < 0x20 {
                throw JSONReadError(.malformed, at: index, "control character U+00\(hexByte(byte)) inside a string; escape it")
            } else {
                try validateUTF8Sequence()
            }
        }
        var node = JSONNode(kind: .string, start: start, end: index, subtreeEnd: nodes.count + 1)
        node.flag = escaped
        nodes.append(node)
    }

    private mutating func readEscape() throws(JSONReadError) {
        index += 1
        guard index < bytes.count else { throw JSONReadError(.malformed, at: index, "unterminated string") }
        switch bytes[index] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            index += 1
        case UInt8(ascii: "u"):
            let unit = try readHex4(at: index + 1)
            index += 5
            if (0xD800...0xDBFF).contains(unit) {
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw JSONReadError(.invalidUTF8, at: index - 6, "\\u escape of a high surrogate without its low surrogate")
                }
                let low = try readHex4(at: index + 2)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw JSONReadError(.invalidUTF8, at: index, "\\u escape of a high surrogate followed by a non-low-surrogate")
                }
                index += 6
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw JSONReadError(.invalidUTF8, at: index - 6, "\\u escape of a lone low surrogate")
            }
        default:
            throw JSONReadError(.malformed, at: index - 1, "invalid escape sequence in string")
        }
    }

    private func readHex4(at position: Int) throws(JSONReadError) -> UInt32 {
        guard bytes.count - position >= 4 else { throw JSONReadError(.malformed, at: position, "\\u escape needs four hex digits") }
        var value: UInt32 = 0
        for offset in 0..<4 {
            guard let digit = JSONDocument.hexValue(bytes[position + offset]) else {
                throw JSONReadError(.malformed, at: position, "\\u escape needs four hex digits")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Validates one multi-byte UTF-8 sequence at `index` (Unicode Table 3-7) and advances past it.
    private mutating func validateUTF8Sequence() throws(JSONReadError) {
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
        default:
            throw JSONReadError(.invalidUTF8, at: index, "invalid UTF-8 lead byte 0x\(hexByte(lead))")
        }
        guard bytes.count - index >= length else { throw JSONReadError(.invalidUTF8, at: index, "truncated UTF-8 sequence") }
        let second = bytes[index + 1]
        guard second >= low, second <= high else {
            throw JSONReadError(.invalidUTF8, at: index, "invalid UTF-8 sequence (overlong, surrogate or out of range)")
        }
        for offset in 2..<max(length, 2) where bytes[index + offset] & 0xC0 != 0x80 {
            throw JSONReadError(.invalidUTF8, at: index, "invalid UTF-8 continuation byte")
        }
        index += length
    }

    private mutating func readNumber() throws(JSONReadError) {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else {
            throw JSONReadError(.malformed, at: start, "'-' must be followed by digits (NaN and Infinity are not JSON)")
        }
        let digitsStart = index
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) {
                throw JSONReadError(.malformed, at: start, "number with a leading zero")
            }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else {
                throw JSONReadError(.malformed, at: start, "a decimal point must be followed by digits")
            }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else {
                throw JSONReadError(.malformed, at: start, "an exponent must have digits")
            }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var node = JSONNode(kind: .number, start: start, end: index, subtreeEnd: nodes.count + 1)
        node.flag = isInteger
        // Short integers are always finite; anything else is checked against Double's range now,
        // so `1e400` or a 400-digit integer never reaches a device that would decode it as infinity.
        if !isInteger || index - digitsStart > 15 {
            let value = JSONDocument.parseDouble(UnsafeBufferPointer(rebasing: bytes[start..<index]))
            guard let value, value.isFinite else {
                throw JSONReadError(.numberOutOfRange, at: start, "number out of the range of a 64-bit float")
            }
        }
        nodes.append(node)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    private func hexByte(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
