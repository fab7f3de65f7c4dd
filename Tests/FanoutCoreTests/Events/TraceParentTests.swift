import FanoutCore
import Testing

/// The W3C Trace Context rules for a receiver of `traceparent` (docs/design.md §12).
@Suite struct TraceParentTests {
    static let example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func theW3CExampleParsesAndIsWrittenBackTheSame() throws {
        let trace = try #require(TraceParent(header: Self.example))
        #expect(trace.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(trace.spanID == "00f067aa0ba902b7")
        #expect(trace.sampled)
        #expect(trace.header == Self.example)
        let unsampled = try #require(TraceParent(header: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"))
        #expect(!unsampled.sampled)
        #expect(unsampled.header == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
    }

    @Test func aLaterVersionIsReadAsVersion00() throws {
        let future = try #require(TraceParent(header: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-adds"))
        #expect(future.header == Self.example)
        #expect(TraceParent(header: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") != nil)
        // Version 00 has exactly four fields.
        #expect(TraceParent(header: Self.example + "-extra") == nil)
        // A later version's extra part must start with '-'.
        #expect(TraceParent(header: "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x") == nil)
    }

    @Test func surroundingWhitespaceIsIgnored() {
        #expect(TraceParent(header: "  \(Self.example)\t")?.header == Self.example)
    }

    @Test(arguments: [
        "",
        "00",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // all-zero parent id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // uppercase
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",   // dashes in the wrong places
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",   // not hex
        "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",    // short
    ])
    func anInvalidHeaderIsIgnored(_ header: String) {
        #expect(TraceParent(header: header) == nil, "\(header)")
    }

    @Test func bytesThatAreNotTextAreIgnored() {
        #expect(TraceParent(header: [UInt8](repeating: 0xff, count: 55)) == nil)
        #expect(TraceParent(header: Array(Self.example.utf8)) != nil)
    }
}
