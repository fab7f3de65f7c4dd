import APNsModel

/// One JSON value found by `JSONReader`: its kind and where its raw bytes are.
///
/// Nodes are stored in document order. A container is followed by its children (for an object:
/// name, value, name, value, …); `next` is the index just past the node's whole subtree, so a
/// sibling can be reached without walking the children.
struct JSONNode: Sendable {
    enum Kind: UInt8, Sendable { case object, array, string, number, `true`, `false`, null }

    var kind: Kind
    /// Strings: contains a backslash escape. Numbers: an integer (no fraction, no exponent).
    var flag = false
    /// Containers: number of members or elements.
    var count: Int32 = 0
    /// Byte range of the raw value, quotes and brackets included.
    var start: Int32
    var end: Int32
    var subtreeEnd: Int32

    init(kind: Kind, start: Int, end: Int, subtreeEnd: Int) {
        self.kind = kind
        self.start = Int32(truncatingIfNeeded: start)
        self.end = Int32(truncatingIfNeeded: end)
        self.subtreeEnd = Int32(truncatingIfNeeded: subtreeEnd)
    }

    var next: Int { Int(subtreeEnd) }
    var range: Range<Int> { Int(start)..<Int(end) }
}

struct JSONReadError: Error, Sendable {
    enum Code: Sendable { case malformed, invalidUTF8, tooDeep, duplicateKey, stringTooLong, numberOutOfRange }
    var code: Code
    /// Byte offset in the input where the problem was found.
    var offset: Int
    var message: String

    init(_ code: Code, at offset: Int, _ message: String) {
        self.code = code
        self.offset = offset
        self.message = message
    }
}

/// The nodes of one parsed document plus typed accessors. The document does not own the bytes:
/// every accessor takes the same buffer the document was read from.
struct JSONDocument: Sendable {
    var nodes: [JSONNode]

    subscript(_ index: Int) -> JSONNode { nodes[index] }

    /// Calls `body(nameIndex, valueIndex)` for each member of the object at `object`, in order.
    @inline(__always)
    func forEachMember<E: Error>(of object: Int, _ body: (Int, Int) throws(E) -> Void) throws(E) {
        var name = object + 1
        let end = nodes[object].next
        while name < end {
            let value = name + 1
            try body(name, value)
            name = nodes[value].next
        }
    }

    /// Whether the string at `index` (without quotes, after unescaping) equals `text`.
    func stringEquals(_ index: Int, _ text: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let node = nodes[index]
        if node.flag { return stringBytes(index, in: bytes) == text }
        let length = Int(node.end - node.start) - 2
        guard length == text.count else { return false }
        let base = Int(node.start) + 1
        for offset in 0..<length where bytes[base + offset] != text[offset] { return false }
        return true
    }

    func keysEqual(_ a: Int, _ b: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let nodeA = nodes[a], nodeB = nodes[b]
        if nodeA.flag || nodeB.flag { return stringBytes(a, in: bytes) == stringBytes(b, in: bytes) }
        return keysEqual(nodeA, nodeB, in: bytes)
    }

    /// Raw comparison of two unescaped string nodes (an escaped one is compared after unescaping).
    func keysEqual(_ nodeA: JSONNode, _ nodeB: JSONNode, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        if nodeA.flag || nodeB.flag { return Self.unescaped(nodeA, in: bytes) == Self.unescaped(nodeB, in: bytes) }
        let length = Int(nodeA.end - nodeA.start)
        guard length == Int(nodeB.end - nodeB.start) else { return false }
        let baseA = Int(nodeA.start), baseB = Int(nodeB.start)
        for offset in 0..<length where bytes[baseA + offset] != bytes[baseB + offset] { return false }
        return true
    }

    /// The unescaped UTF-8 bytes of the string at `index`.
    func stringBytes(_ index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        Self.unescaped(nodes[index], in: bytes)
    }

    static func unescaped(_ node: JSONNode, in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        let inner = UnsafeBufferPointer(rebasing: bytes[(Int(node.start) + 1)..<(Int(node.end) - 1)])
        guard node.flag else { return Array(inner) }
        var out: [UInt8] = []
        out.reserveCapacity(inner.count)
        var i = 0
        while i < inner.count {
            let byte = inner[i]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                i += 1
                continue
            }
            let escape = inner[i + 1]
            i += 2
            switch escape {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(inner, at: i)
                i += 4
                if (0xD800...0xDBFF).contains(scalar) {
                    // The reader guaranteed a following \uDC00-\uDFFF escape.
                    let low = hex4(inner, at: i + 2)
                    i += 6
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                out.append(contentsOf: UTF8.encode(Unicode.Scalar(scalar)!)!)
            default: out.append(escape)
            }
        }
        return out
    }

    func string(_ index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> String {
        let node = nodes[index]
        if node.flag { return String(decoding: stringBytes(index, in: bytes), as: UTF8.self) }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[(Int(node.start) + 1)..<(Int(node.end) - 1)]), as: UTF8.self)
    }

    /// The numeric value of the number at `index` (finite: the reader rejected anything else).
    func double(_ index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Double {
        let node = nodes[index]
        if node.flag, let integer = integer(index, in: bytes), integer.magnitude < (1 << 53) {
            return integer == 0 && bytes[Int(node.start)] == UInt8(ascii: "-") ? -0.0 : Double(integer)
        }
        return Self.parseDouble(UnsafeBufferPointer(rebasing: bytes[node.range])) ?? .nan
    }

    /// The value of an integer number (no fraction, no exponent) that fits in 18 digits; nil otherwise.
    func integer(_ index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        let node = nodes[index]
        guard node.kind == .number, node.flag else { return nil }
        var i = Int(node.start)
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard Int(node.end) - i <= 18 else { return nil }
        var value: Int64 = 0
        while i < Int(node.end) {
            value = value * 10 + Int64(bytes[i] &- UInt8(ascii: "0"))
            i += 1
        }
        return negative ? -value : value
    }

    /// Raw bytes of the value at `index`, exactly as written.
    func raw(_ index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        Array(UnsafeBufferPointer(rebasing: bytes[nodes[index].range]))
    }

    /// FNV-1a 64 of the raw bytes of the value at `index`.
    func digest(_ index: Int, in bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        FNV1a.hash(UnsafeBufferPointer(rebasing: bytes[nodes[index].range]))
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func hex4(_ bytes: UnsafeBufferPointer<UInt8>, at position: Int) -> UInt32 {
        var value: UInt32 = 0
        for offset in 0..<4 { value = value << 4 | UInt32(hexValue(bytes[position + offset]) ?? 0) }
        return value
    }

    /// Parses JSON number text already validated by the reader. Short numbers fit Swift's small-string
    /// storage, so this does not allocate for them.
    static func parseDouble(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
        Double(String(decoding: text, as: UTF8.self))
    }
}
