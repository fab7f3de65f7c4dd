/// A W3C Trace Context `traceparent` carried on an input record's Kafka headers (docs/design.md §12,
/// "Trace context"): `version-traceid-parentid-flags`, e.g.
/// `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
///
/// Fanout makes no spans of its own: it carries the producer's context into its log lines, its
/// dead-letter and feedback records and `/debug/targets`, so those join the producer's trace. Parsing
/// follows the W3C rules for a receiver: lowercase hex only; version `ff` invalid; version `00`
/// exactly 55 characters; a later version at least 55, the 56th a `-`, read as version 00; an
/// all-zero trace id or parent id invalid. An invalid header is ignored (nil), as the W3C asks,
/// never an error of the event.
public struct TraceParent: Sendable, Hashable, CustomStringConvertible {
    public static let headerName = "traceparent"
    /// The W3C length of a version-00 header.
    public static let length = 55

    public var traceIDHigh: UInt64
    public var traceIDLow: UInt64
    /// The producer's span, the parent of whatever continues the trace.
    public var parentID: UInt64
    public var flags: UInt8

    public init?(traceIDHigh: UInt64, traceIDLow: UInt64, parentID: UInt64, flags: UInt8) {
        guard traceIDHigh | traceIDLow != 0, parentID != 0 else { return nil }
        self.traceIDHigh = traceIDHigh
        self.traceIDLow = traceIDLow
        self.parentID = parentID
        self.flags = flags
    }

    /// Parses a header value; nil when it is not a valid `traceparent`.
    public init?(header bytes: some Collection<UInt8>) {
        var text = Array(bytes)
        while let last = text.last, last == 0x20 || last == 0x09 { text.removeLast() }  // optional whitespace
        let leading = text.prefix { $0 == 0x20 || $0 == 0x09 }.count
        if leading > 0 { text.removeFirst(leading) }
        guard text.count >= Self.length,
              let version = Self.hex(text[0..<2]), version != 0xff,
              version == 0 ? text.count == Self.length : (text.count == Self.length || text[Self.length] == UInt8(ascii: "-")),
              text[2] == UInt8(ascii: "-"), text[35] == UInt8(ascii: "-"), text[52] == UInt8(ascii: "-"),
              let high = Self.hex(text[3..<19]), let low = Self.hex(text[19..<35]),
              let parent = Self.hex(text[36..<52]), let flags = Self.hex(text[53..<55]) else { return nil }
        self.init(traceIDHigh: high, traceIDLow: low, parentID: parent, flags: UInt8(flags))
    }

    public init?(header text: String) { self.init(header: text.utf8) }

    /// 32 lowercase hex digits.
    public var traceID: String { Self.hexText(traceIDHigh, digits: 16) + Self.hexText(traceIDLow, digits: 16) }
    /// 16 lowercase hex digits: the producer's span id.
    public var spanID: String { Self.hexText(parentID, digits: 16) }
    /// True when the producer sampled the trace (flag bit 0).
    public var sampled: Bool { flags & 1 == 1 }

    /// The version-00 header for this context (what Fanout writes on records it produces).
    public var header: String { "00-\(traceID)-\(spanID)-\(Self.hexText(UInt64(flags), digits: 2))" }
    public var description: String { header }

    /// Lowercase hex only (the W3C forbids uppercase).
    private static func hex(_ digits: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        for digit in digits {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    private static func hexText(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
