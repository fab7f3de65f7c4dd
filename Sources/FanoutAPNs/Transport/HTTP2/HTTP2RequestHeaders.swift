import APNsModel
import CNghttp2

/// Builds the HTTP/2 header block of one APNs request into reused buffers (no allocation per request
/// once warm) and lends it to nghttp2 as `nghttp2_nv`s, which `nghttp2_submit_request` copies.
///
/// Confined to the transport thread (one per connection).
struct HTTP2RequestHeaders {
    private var arena: [UInt8] = []
    private var spans: [(nameStart: Int, nameLength: Int, valueStart: Int, valueLength: Int, flags: UInt8)] = []
    private var nameValues: [nghttp2_nv] = []

    /// Calls `body` with the header block of `request`: pseudo-headers, `authorization`, the APNs
    /// headers, and content headers when there is a body.
    mutating func withHeaders<Result>(for request: APNsHTTPRequest, authorization: String, endpoint: HTTP2Endpoint,
                                      _ body: (UnsafePointer<nghttp2_nv>, Int) -> Result) -> Result {
        arena.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
        add(":method", request.method.rawValue)
        add(":scheme", "https")
        add(":authority", endpoint.authority)
        // Device paths differ per token, message ids per request: indexing them would only churn the HPACK table.
        add(":path", endpoint.pathPrefix + request.path, index: !request.path.hasPrefix("/3/device/"))
        add("authorization", authorization)
        for header in request.headers {
            add(header.name, header.value, index: header.name != "apns-id" && header.name != "apns-request-id")
        }
        if !request.body.isEmpty {
            add("content-type", "application/json")
            add("content-length", String(request.body.count), index: false)
        }
        return arena.withUnsafeMutableBufferPointer { bytes in
            nameValues.removeAll(keepingCapacity: true)
            for span in spans {
                nameValues.append(nghttp2_nv(name: bytes.baseAddress! + span.nameStart, value: bytes.baseAddress! + span.valueStart,
                                             namelen: span.nameLength, valuelen: span.valueLength, flags: span.flags))
            }
            return nameValues.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }

    private mutating func add(_ name: String, _ value: String, index: Bool = true) {
        let nameStart = arena.count
        arena.append(contentsOf: name.utf8)
        let valueStart = arena.count
        arena.append(contentsOf: value.utf8)
        spans.append((nameStart, valueStart - nameStart, valueStart, arena.count - valueStart,
                      UInt8(index ? NGHTTP2_NV_FLAG_NONE.rawValue : NGHTTP2_NV_FLAG_NO_INDEX.rawValue)))
    }
}
