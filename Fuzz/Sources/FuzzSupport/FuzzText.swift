/// Splitting a fuzz input into the parts a target needs, with the separators the corpus files use.
public enum FuzzText {
    /// The bytes before the first `separator` and the bytes after it (nil when there is none).
    public static func split(_ bytes: UnsafeBufferPointer<UInt8>, at separator: UInt8) -> (head: [UInt8], tail: [UInt8]?) {
        guard let index = bytes.firstIndex(of: separator) else { return (Array(bytes), nil) }
        return (Array(bytes[..<index]), Array(bytes[(index + 1)...]))
    }

    /// A header block (`name: value` lines up to the first empty line) and the body after it.
    /// Names keep their leading `:` (pseudo-headers); one space after the colon is dropped.
    public static func headersAndBody(_ bytes: [UInt8]) -> (headers: [(name: [UInt8], value: [UInt8])], body: [UInt8]) {
        var headers: [(name: [UInt8], value: [UInt8])] = []
        var position = 0
        while position < bytes.count {
            let end = bytes[position...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            let line = bytes[position..<end]
            position = min(end + 1, bytes.count)
            if line.isEmpty { return (headers, Array(bytes[position...])) }
            let searchFrom = line.first == UInt8(ascii: ":") ? line.startIndex + 1 : line.startIndex
            guard let colon = line[searchFrom...].firstIndex(of: UInt8(ascii: ":")) else { continue }
            var valueStart = colon + 1
            if valueStart < line.endIndex, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
            headers.append((Array(line[..<colon]), Array(line[valueStart...])))
        }
        return (headers, [])
    }

    /// Whether `value` is a field value HTTP/2 delivers (RFC 9113 §8.2.1, as nghttp2 checks it on
    /// receipt): no NUL, CR or LF, and no space or tab at either end.
    public static func isDeliverableFieldValue(_ value: [UInt8]) -> Bool {
        if let first = value.first, first == 0x20 || first == 0x09 { return false }
        if let last = value.last, last == 0x20 || last == 0x09 { return false }
        return !value.contains { $0 == 0x00 || $0 == 0x0A || $0 == 0x0D }
    }

    /// Whether `name` is a field name HTTP/2 delivers: lowercase token characters (a leading `:` for pseudo-headers).
    public static func isDeliverableFieldName(_ name: [UInt8]) -> Bool {
        guard !name.isEmpty else { return false }
        let body = name.first == UInt8(ascii: ":") ? name.dropFirst() : name[...]
        guard !body.isEmpty else { return false }
        return body.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
                 UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
            default: false
            }
        }
    }

    /// Whether `bytes` is well-formed UTF-8, by the standard library's own validation.
    public static func isValidUTF8(_ bytes: some Collection<UInt8>) -> Bool {
        String(validating: bytes, as: UTF8.self) != nil
    }
}
