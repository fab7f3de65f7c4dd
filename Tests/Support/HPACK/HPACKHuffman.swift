/// The HPACK Huffman code (RFC 7541 §5.2, the code of Appendix B), for decoding string literals.
///
/// Appendix B's code is canonical: sort the symbols by (code length, symbol value), count up from 0
/// and shift left wherever the length grows, and out come exactly its codes (the last, EOS, is thirty
/// 1 bits). So only Appendix B's "len" column is written here and the codes are made from it;
/// `HPACKDecoderTests` checks rows of Appendix B against the codes made.
public enum HPACKHuffman {
    /// The end-of-string symbol; a decoder must refuse it inside a string (§5.2).
    public static let endOfString = 256

    /// Code length in bits of symbols 0...255 and of EOS (256): RFC 7541 Appendix B, "len".
    static let lengths: [UInt8] = [
        13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,  // 0-15
        28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,  // 16-31
        6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,  // ' ' - '/'
        5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,  // '0' - '?'
        13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,  // '@' - 'O'
        7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,  // 'P' - '_'
        15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,  // '`' - 'o'
        6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,  // 'p' - 127
        20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,  // 128-143
        24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,  // 144-159
        22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,  // 160-175
        21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,  // 176-191
        26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,  // 192-207
        19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,  // 208-223
        20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,  // 224-239
        26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,  // 240-255
        30,  // EOS
    ]

    /// The code of every symbol (index = symbol, EOS last), made canonically from `lengths`.
    public static let codes: [(code: UInt32, length: Int)] = {
        var codes = [(code: UInt32, length: Int)](repeating: (0, 0), count: lengths.count)
        var code: UInt32 = 0
        var previousLength = 0
        for (position, symbol) in symbolsInCodeOrder.enumerated() {
            let length = Int(lengths[symbol])
            if position > 0 { code = (code + 1) << UInt32(length - previousLength) }
            codes[symbol] = (code, length)
            previousLength = length
        }
        return codes
    }()

    /// Symbols sorted by (code length, symbol): the order of the canonical codes.
    private static let symbolsInCodeOrder: [Int] = lengths.indices.sorted { (lengths[$0], $0) < (lengths[$1], $1) }

    /// Per code length: the first code of that length, how many codes have it, and where their
    /// symbols start in `symbolsInCodeOrder`.
    private static let byLength: [(first: UInt32, count: Int, offset: Int)] = {
        var table = [(first: UInt32, count: Int, offset: Int)](repeating: (0, 0, 0), count: 31)
        for symbol in lengths.indices { table[Int(lengths[symbol])].count += 1 }
        var first: UInt32 = 0
        var offset = 0
        for length in 1...30 {
            table[length].first = first
            table[length].offset = offset
            first = (first + UInt32(table[length].count)) << 1
            offset += table[length].count
        }
        return table
    }()

    /// Decodes one Huffman-coded string literal: refuses EOS inside it, and padding that is longer
    /// than 7 bits or not the most significant bits of EOS (all 1s), as §5.2 requires.
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(HPACKError) -> [UInt8] {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count * 8 / 5)
        var code: UInt32 = 0
        var length = 0
        for byte in bytes {
            for shift in stride(from: 7, through: 0, by: -1) {
                code = code << 1 | UInt32(byte >> UInt8(shift) & 1)
                length += 1
                guard length <= 30 else { throw .huffmanCodeUnknown }
                let entry = byLength[length]
                guard entry.count > 0, code >= entry.first, code - entry.first < UInt32(entry.count) else { continue }
                let symbol = symbolsInCodeOrder[entry.offset + Int(code - entry.first)]
                guard symbol != endOfString else { throw .huffmanEndOfStringInside }
                decoded.append(UInt8(symbol))
                code = 0
                length = 0
            }
        }
        guard length <= 7, code == (UInt32(1) << UInt32(length)) - 1 else { throw .huffmanBadPadding }
        return decoded
    }
}
