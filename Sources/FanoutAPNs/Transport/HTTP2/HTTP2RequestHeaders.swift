import APNsModel
import FanoutHTTP2

/// Builds the HTTP/2 header block of one APNs request into a reused `HTTP2HeaderBlock` (no allocation
/// per request once warm), which the session copies when the request is submitted.
///
/// Confined to the transport thread (one per connection).
struct HTTP2RequestHeaders {
    var block = HTTP2HeaderBlock()

    /// Fills the block with the header fields of `request`: pseudo-headers, `authorization`, the APNs
    /// headers, and content headers when there is a body.
    mutating func build(for request: APNsHTTPRequest, authorization: String, endpoint: HTTP2Endpoint) {
        block.removeAll()
        block.add(":method", request.method.rawValue)
        block.add(":scheme", "https")
        block.add(":authority", endpoint.authority)
        // Apple (docs/apns.md §1 "HPACK"): `:path` and `authorization` are literals without indexing. Device paths
        // differ per token and message ids per request, so indexing them would only churn the table; the
        // provider token is a secret that stays out of it. (nghttp2's deflater also keeps `:path` and
        // `authorization` out on its own; RequestHeaderRulesTests checks what reaches the wire.)
        block.add(":path", endpoint.pathPrefix + request.path, index: !request.path.hasPrefix("/3/device/"))
        block.add("authorization", authorization, index: false)
        for header in request.headers {
            block.add(header.name, header.value, index: header.name != "apns-id" && header.name != "apns-request-id")
        }
        if !request.body.isEmpty {
            block.add("content-type", "application/json")
            block.add("content-length", String(request.body.count), index: false)
        }
    }
}
