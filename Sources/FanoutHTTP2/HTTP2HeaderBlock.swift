import CNghttp2

/// A header block built in reused buffers (no allocation per request once warm) and lent to nghttp2,
/// which copies it during `HTTP2Session.submitRequest`/`submitResponse`.
///
/// Not thread-safe: one per connection, on the thread that drives it.
public struct HTTP2HeaderBlock {
    private var arena: [UInt8] = []
    private var spans: [(nameStart: Int, nameLength: Int, valueStart: Int, valueLength: Int, flags: UInt8)] = []
    private var nameValues: [nghttp2_nv] = []

    public init() {}

    /// Empties the block, keeping its storage.
    public mutating func removeAll() {
        arena.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }

    /// Appends a field. `index: false` keeps it out of the HPACK dynamic table (values that differ on
    /// every message would only churn it).
    public mutating func add(_ name: String, _ value: String, index: Bool = true) {
        let nameStart = arena.count
        append(name)
        let valueStart = arena.count
        append(value)
        spans.append((nameStart, valueStart - nameStart, valueStart, arena.count - valueStart,
                      UInt8(index ? NGHTTP2_NV_FLAG_NONE.rawValue : NGHTTP2_NV_FLAG_NO_INDEX.rawValue)))
    }

    /// A native string's bytes in one copy (the generic sequence append goes byte by byte).
    private mutating func append(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ arena.append(contentsOf: $0) }) == nil {
            arena.append(contentsOf: text.utf8)
        }
    }

    /// Lends the block as `nghttp2_nv`s pointing into the arena, valid only during `body`.
    mutating func withNameValues<Result>(_ body: (UnsafePointer<nghttp2_nv>, Int) -> Result) -> Result {
        arena.withUnsafeMutableBufferPointer { bytes in
            nameValues.removeAll(keepingCapacity: true)
            for span in spans {
                nameValues.append(nghttp2_nv(name: bytes.baseAddress! + span.nameStart, value: bytes.baseAddress! + span.valueStart,
                                             namelen: span.nameLength, valuelen: span.valueLength, flags: span.flags))
            }
            return nameValues.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}
