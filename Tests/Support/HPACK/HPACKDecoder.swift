/// How one header field was represented in a header block (RFC 7541 §6).
public enum HPACKRepresentation: Sendable, Hashable {
    /// §6.1: a reference to an entry of the static or dynamic table.
    case indexed
    /// §6.2.1: a literal that the decoder appends to its dynamic table.
    case incrementalIndexing
    /// §6.2.2: a literal that leaves the dynamic table as it is.
    case withoutIndexing
    /// §6.2.3: a literal that leaves the dynamic table as it is and that no intermediary may index either.
    case neverIndexed
}

/// One decoded header field and how it was sent.
public struct HPACKField: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let value: String
    public let representation: HPACKRepresentation
    /// The table index of the field (`.indexed`) or of its name (a literal with an indexed name);
    /// nil when the name was a literal too. Above 61 it points into the dynamic table.
    public let index: Int?

    /// Whether this field was added to the dynamic table, where later blocks can refer to it.
    public var enteredDynamicTable: Bool { representation == .incrementalIndexing }

    public var description: String { "\(name): \(value) [\(representation)\(index.map { " #\($0)" } ?? "")]" }
}

/// A dynamic table entry (§4.1): its size is the octets of name and value plus 32.
public struct HPACKEntry: Sendable, Hashable {
    public let name: String
    public let value: String
    public let size: Int
}

/// Why a header block could not be decoded. Each is a decoding error that RFC 7541 says ends the
/// connection (a COMPRESSION_ERROR in HTTP/2).
public enum HPACKError: Error, Sendable, Hashable {
    /// The block ended inside a representation.
    case truncated
    /// An integer (§5.1) too large to be meant.
    case integerOverflow
    /// Index 0 (§6.1) or past the end of the static and dynamic tables (§2.3.3).
    case badIndex(Int)
    /// A Huffman string with a bit sequence that is no code.
    case huffmanCodeUnknown
    /// A Huffman string containing EOS (§5.2).
    case huffmanEndOfStringInside
    /// A Huffman string padded with more than 7 bits, or not with the most significant bits of EOS (§5.2).
    case huffmanBadPadding
    /// A dynamic table size update above the limit the decoder's side announced (§6.3).
    case tableSizeAboveLimit(Int, limit: Int)
    /// A dynamic table size update after a header field of the block (§4.2: only at the start).
    case tableSizeUpdateAfterField
}

/// An HPACK decoder (RFC 7541) that reports, besides each field, which representation carried it:
/// the tests' own, independent of nghttp2, so that what Fanout's encoders (nghttp2's deflater, driven
/// by the nghttp2 transport or by libcurl) actually put on the wire can be checked.
///
/// One per connection and direction: the dynamic table carries over from one header block to the
/// next, so blocks must be decoded in the order they were sent.
public struct HPACKDecoder: Sendable {
    /// Newest first: `dynamicTable[0]` is index 62.
    public private(set) var dynamicTable: [HPACKEntry] = []
    /// Sum of the entries' sizes.
    public private(set) var dynamicTableSize = 0
    /// The table's current maximum size (changed by the encoder's size updates).
    public private(set) var maximumSize: Int
    /// SETTINGS_HEADER_TABLE_SIZE that the decoder's side announced: no size update may exceed it.
    public let sizeLimit: Int
    /// Every dynamic table size update seen, in order.
    public private(set) var sizeUpdates: [Int] = []

    public init(headerTableSize: Int = 4096) {
        maximumSize = headerTableSize
        sizeLimit = headerTableSize
    }

    /// Decodes one complete header block (a HEADERS frame's fragment and its CONTINUATIONs, joined).
    public mutating func decode(_ block: [UInt8]) throws(HPACKError) -> [HPACKField] {
        var reader = Reader(bytes: block[...])
        var fields: [HPACKField] = []
        while let first = reader.peek() {
            if first & 0x80 != 0 {
                let index = try reader.integer(prefixBits: 7)
                let entry = try lookUp(index)
                fields.append(HPACKField(name: entry.name, value: entry.value, representation: .indexed, index: index))
            } else if first & 0x40 != 0 {
                let (field, size) = try literal(&reader, prefixBits: 6, representation: .incrementalIndexing)
                add(field, size: size)
                fields.append(field)
            } else if first & 0x20 != 0 {
                guard fields.isEmpty else { throw .tableSizeUpdateAfterField }
                let size = try reader.integer(prefixBits: 5)
                guard size <= sizeLimit else { throw .tableSizeAboveLimit(size, limit: sizeLimit) }
                sizeUpdates.append(size)
                maximumSize = size
                evict(toFit: 0)
            } else if first & 0x10 != 0 {
                fields.append(try literal(&reader, prefixBits: 4, representation: .neverIndexed).field)
            } else {
                fields.append(try literal(&reader, prefixBits: 4, representation: .withoutIndexing).field)
            }
        }
        return fields
    }

    /// A literal field (§6.2): the name by index (non-zero prefix) or as a string, then the value; with
    /// its entry size (§4.1), counted in octets as sent.
    private func literal(_ reader: inout Reader, prefixBits: Int,
                         representation: HPACKRepresentation) throws(HPACKError) -> (field: HPACKField, size: Int) {
        let nameIndex = try reader.integer(prefixBits: prefixBits)
        let name = nameIndex == 0 ? try reader.string() : Array(try lookUp(nameIndex).name.utf8)
        let value = try reader.string()
        let field = HPACKField(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self),
                               representation: representation, index: nameIndex == 0 ? nil : nameIndex)
        return (field, name.count + value.count + 32)
    }

    /// §2.3.3: 1...61 is the static table, 62 and up the dynamic table, newest first.
    private func lookUp(_ index: Int) throws(HPACKError) -> (name: String, value: String) {
        let staticCount = HPACKStaticTable.entries.count
        if index >= 1 && index <= staticCount { return HPACKStaticTable.entries[index - 1] }
        let dynamicIndex = index - staticCount - 1
        guard index > staticCount, dynamicIndex < dynamicTable.count else { throw .badIndex(index) }
        return (dynamicTable[dynamicIndex].name, dynamicTable[dynamicIndex].value)
    }

    /// §4.4: evicts from the oldest end until the entry fits; an entry larger than the whole table
    /// empties it and is not added.
    private mutating func add(_ field: HPACKField, size: Int) {
        guard size <= maximumSize else {
            dynamicTable.removeAll()
            dynamicTableSize = 0
            return
        }
        evict(toFit: size)
        dynamicTable.insert(HPACKEntry(name: field.name, value: field.value, size: size), at: 0)
        dynamicTableSize += size
    }

    private mutating func evict(toFit incoming: Int) {
        while dynamicTableSize + incoming > maximumSize, let oldest = dynamicTable.popLast() {
            dynamicTableSize -= oldest.size
        }
    }
}

/// Reads §5 primitives from a header block.
private struct Reader {
    var bytes: ArraySlice<UInt8>

    func peek() -> UInt8? { bytes.first }

    /// §5.1: an integer in the low `prefixBits` bits of the current octet, continued in 7-bit groups.
    mutating func integer(prefixBits: Int) throws(HPACKError) -> Int {
        guard let first = bytes.popFirst() else { throw .truncated }
        let mask = (1 << prefixBits) - 1
        var value = Int(first) & mask
        guard value == mask else { return value }
        var shift = 0
        while true {
            guard let next = bytes.popFirst() else { throw .truncated }
            guard shift <= 21 else { throw .integerOverflow }
            value += Int(next & 0x7F) << shift
            shift += 7
            if next & 0x80 == 0 { return value }
        }
    }

    /// §5.2: a length-prefixed octet string, Huffman-coded when the first bit is set.
    mutating func string() throws(HPACKError) -> [UInt8] {
        guard let first = bytes.first else { throw .truncated }
        let length = try integer(prefixBits: 7)
        guard length <= bytes.count else { throw .truncated }
        let octets = bytes.prefix(length)
        bytes = bytes.dropFirst(length)
        return first & 0x80 != 0 ? try HPACKHuffman.decode(octets) : Array(octets)
    }
}
