import FanoutTestSupport
import Testing

/// The tests' own HPACK decoder against RFC 7541's examples (Appendix C) and its Huffman code
/// (Appendix B), before it is trusted to judge what Fanout's clients send (`RequestHeaderRulesTests`).
@Suite struct HPACKDecoderTests {
    typealias Expected = [(name: String, value: String)]

    /// Decodes `hex` and checks the fields, and the dynamic table (newest first) and its size after.
    func expect(_ decoder: inout HPACKDecoder, _ hex: String, fields: Expected, table: Expected, size: Int,
                sourceLocation: SourceLocation = #_sourceLocation) throws {
        let decoded = try decoder.decode(hexBytes(hex))
        #expect(decoded.map(\.name) == fields.map(\.name), sourceLocation: sourceLocation)
        #expect(decoded.map(\.value) == fields.map(\.value), sourceLocation: sourceLocation)
        #expect(decoder.dynamicTable.map(\.name) == table.map(\.name), sourceLocation: sourceLocation)
        #expect(decoder.dynamicTable.map(\.value) == table.map(\.value), sourceLocation: sourceLocation)
        #expect(decoder.dynamicTableSize == size, sourceLocation: sourceLocation)
    }

    // MARK: C.2: one representation each

    @Test func representationsOfAppendixC2() throws {
        var decoder = HPACKDecoder()
        let withIndexing = try decoder.decode(hexBytes("400a637573746f6d2d6b65790d637573746f6d2d686561646572"))
        #expect(withIndexing.map(\.representation) == [.incrementalIndexing])
        #expect(withIndexing.first?.index == nil, "a literal name")
        #expect(decoder.dynamicTable.map(\.name) == ["custom-key"] && decoder.dynamicTableSize == 55)

        var fresh = HPACKDecoder()
        let withoutIndexing = try fresh.decode(hexBytes("040c2f73616d706c652f70617468"))
        #expect(withoutIndexing.map(\.description) == [":path: /sample/path [withoutIndexing #4]"])
        let neverIndexed = try fresh.decode(hexBytes("100870617373776f726406736563726574"))
        #expect(neverIndexed.map(\.description) == ["password: secret [neverIndexed]"])
        let indexed = try fresh.decode([0x82])
        #expect(indexed.map(\.description) == [":method: GET [indexed #2]"])
        #expect(fresh.dynamicTable.isEmpty && fresh.dynamicTableSize == 0, "only incremental indexing adds to the table")
    }

    // MARK: C.3 and C.4: three requests on one connection, without and with Huffman coding

    static let request1: Expected = [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")]
    static let request2: Expected = request1 + [("cache-control", "no-cache")]
    static let request3: Expected = [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"),
                                     (":authority", "www.example.com"), ("custom-key", "custom-value")]
    static let table1: Expected = [(":authority", "www.example.com")]
    static let table2: Expected = [("cache-control", "no-cache")] + table1
    static let table3: Expected = [("custom-key", "custom-value")] + table2

    @Test func requestsWithoutHuffmanOfAppendixC3() throws {
        var decoder = HPACKDecoder()
        try expect(&decoder, "828684410f7777772e6578616d706c652e636f6d", fields: Self.request1, table: Self.table1, size: 57)
        try expect(&decoder, "828684be58086e6f2d6361636865", fields: Self.request2, table: Self.table2, size: 110)
        try expect(&decoder, "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
                   fields: Self.request3, table: Self.table3, size: 164)
    }

    @Test func requestsWithHuffmanOfAppendixC4() throws {
        var decoder = HPACKDecoder()
        try expect(&decoder, "828684418cf1e3c2e5f23a6ba0ab90f4ff", fields: Self.request1, table: Self.table1, size: 57)
        try expect(&decoder, "828684be5886a8eb10649cbf", fields: Self.request2, table: Self.table2, size: 110)
        try expect(&decoder, "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
                   fields: Self.request3, table: Self.table3, size: 164)
    }

    // MARK: C.5 and C.6: three responses in a 256-octet table, so entries are evicted

    static let date1 = "Mon, 21 Oct 2013 20:13:21 GMT", date2 = "Mon, 21 Oct 2013 20:13:22 GMT"
    static let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
    static let response1: Expected = [(":status", "302"), ("cache-control", "private"), ("date", date1), ("location", "https://www.example.com")]
    static let response2: Expected = [(":status", "307"), ("cache-control", "private"), ("date", date1), ("location", "https://www.example.com")]
    static let response3: Expected = [(":status", "200"), ("cache-control", "private"), ("date", date2), ("location", "https://www.example.com"),
                                      ("content-encoding", "gzip"), ("set-cookie", cookie)]
    static let responseTable1: Expected = [("location", "https://www.example.com"), ("date", date1), ("cache-control", "private"), (":status", "302")]
    /// ":status: 307" evicted ":status: 302", the oldest.
    static let responseTable2: Expected = [(":status", "307")] + responseTable1.dropLast()
    /// Three entries added, four evicted: the cookie alone takes 98 of the 256 octets.
    static let responseTable3: Expected = [("set-cookie", cookie), ("content-encoding", "gzip"), ("date", date2)]

    @Test func responsesWithoutHuffmanOfAppendixC5() throws {
        var decoder = HPACKDecoder(headerTableSize: 256)
        try expect(&decoder, "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
                   fields: Self.response1, table: Self.responseTable1, size: 222)
        try expect(&decoder, "4803333037c1c0bf", fields: Self.response2, table: Self.responseTable2, size: 222)
        try expect(&decoder, "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31",
                   fields: Self.response3, table: Self.responseTable3, size: 215)
    }

    @Test func responsesWithHuffmanOfAppendixC6() throws {
        var decoder = HPACKDecoder(headerTableSize: 256)
        try expect(&decoder, "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
                   fields: Self.response1, table: Self.responseTable1, size: 222)
        try expect(&decoder, "4883640effc1c0bf", fields: Self.response2, table: Self.responseTable2, size: 222)
        try expect(&decoder, "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
                   fields: Self.response3, table: Self.responseTable3, size: 215)
    }

    // MARK: Dynamic table size updates (§4.3, §6.3)

    @Test func sizeUpdatesEvictAndAreBoundedByTheSetting() throws {
        var decoder = HPACKDecoder()
        _ = try decoder.decode(hexBytes("828684410f7777772e6578616d706c652e636f6d"))   // C.3.1: 57 octets in the table
        // C.1.2's integer, 1337 in a 5-bit prefix, as a size update: the entry still fits.
        #expect(try decoder.decode([0x3F, 0x9A, 0x0A]).isEmpty)
        #expect(decoder.maximumSize == 1337 && decoder.dynamicTableSize == 57)
        // Down to 0 and back up within one block: the table is emptied, then fields follow.
        let fields = try decoder.decode([0x20, 0x3F, 0xE1, 0x1F, 0x82])
        #expect(decoder.sizeUpdates == [1337, 0, 4096])
        #expect(decoder.dynamicTable.isEmpty && fields.map(\.name) == [":method"])
        #expect(throws: HPACKError.tableSizeAboveLimit(4097, limit: 4096)) { try decoder.decode([0x3F, 0xE2, 0x1F]) }
        #expect(throws: HPACKError.tableSizeUpdateAfterField) { try decoder.decode([0x82, 0x20]) }
    }

    // MARK: Malformed blocks

    @Test func malformedBlocksAreRefused() {
        var decoder = HPACKDecoder()
        #expect(throws: HPACKError.badIndex(0)) { try decoder.decode([0x80]) }
        #expect(throws: HPACKError.badIndex(62)) { try decoder.decode([0xBE]) }
        #expect(throws: HPACKError.truncated) { try decoder.decode([0x04, 0x0C, 0x2F]) }
        #expect(throws: HPACKError.truncated) { try decoder.decode([0x3F]) }
        #expect(throws: HPACKError.integerOverflow) { try decoder.decode([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]) }
    }

    // MARK: Huffman code (Appendix B)

    @Test func madeCodesAreAppendixB() {
        // (symbol, code, length) rows of Appendix B.
        let rows: [(Int, UInt32, Int)] = [(0, 0x1FF8, 13), (10, 0x3FFFFFFC, 30), (32, 0x14, 6), (48, 0x0, 5), (58, 0x5C, 7),
                                          (97, 0x3, 5), (126, 0x1FFD, 13), (127, 0xFFFFFFC, 28), (128, 0xFFFE6, 20),
                                          (255, 0x3FFFFEE, 26), (HPACKHuffman.endOfString, 0x3FFFFFFF, 30)]
        for (symbol, code, length) in rows {
            #expect(HPACKHuffman.codes[symbol].code == code && HPACKHuffman.codes[symbol].length == length, "symbol \(symbol)")
        }
        // A complete prefix code: the codes fill the code space exactly (Kraft's sum is 1).
        let filled = HPACKHuffman.codes.reduce(UInt64(0)) { $0 + (UInt64(1) << UInt64(30 - $1.length)) }
        #expect(filled == UInt64(1) << 30)
    }

    @Test func huffmanStringsEndOnlyInEndOfStringPadding() {
        #expect(throws: HPACKError.huffmanEndOfStringInside) { try HPACKHuffman.decode([0xFF, 0xFF, 0xFF, 0xFF]) }
        // 'a' is 00011: then three 1s pad it (fine), eleven are too many, three 0s are not EOS's bits.
        #expect((try? HPACKHuffman.decode([0x1F])) == Array("a".utf8))
        #expect(throws: HPACKError.huffmanBadPadding) { try HPACKHuffman.decode([0x1F, 0xFF]) }
        #expect(throws: HPACKError.huffmanBadPadding) { try HPACKHuffman.decode([0x18]) }
    }
}
