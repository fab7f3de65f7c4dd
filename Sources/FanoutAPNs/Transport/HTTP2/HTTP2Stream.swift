import APNsModel

/// One request on the nghttp2 transport, from dispatch until its completion runs; reused afterwards.
///
/// Confined to the transport thread. nghttp2 knows a stream only through its stream user data (an
/// unretained pointer to this object), which the connection clears before it lets the object go:
/// the connection's `streams` list holds it while nghttp2 may call back for it.
final class HTTP2Stream {
    var request = APNsHTTPRequest(method: .post, path: "", headers: [], body: [], bundleID: "")
    /// `bearer <jwt>`.
    var authorization = ""
    var bodyOffset = 0
    var response = APNsHTTPResponse(status: nil)
    /// Set when the client itself ends the stream (response body over the limit; the response
    /// completes with this as its note).
    var localFailure: String?
    /// The request on this object and its dispatch ticket; every end report must carry that ticket.
    var carried = CarriedRequest()
    var credentials: APNsCredentials?
    /// The provider token the request carries (the cache judges a rejection of it).
    var providerToken: ProviderTokenCache.Token?
    var gateEpoch = 0
    var connectionIndex = 0
    /// True from dispatch until the completion was taken.
    var isActive: Bool { carried.ticket != nil }
    var streamID: Int32 = 0
    /// Position in the connection's on-the-wire list; -1 when not on the wire.
    var slot = -1
    /// When the request was handed to its connection, and that + the request timeout.
    var dispatchedAt = ContinuousClock.now
    var deadline = ContinuousClock.now

    static let bodyLimit = 1 << 20

    /// Drops the request, the response and the callbacks' captures before the slot is pooled.
    func reset() {
        request.body = []
        request.headers = []
        authorization = ""
        bodyOffset = 0
        response = APNsHTTPResponse(status: nil)
        localFailure = nil
        credentials = nil
        providerToken = nil
        streamID = 0
        slot = -1
    }
}

/// How a stream ended, as the connection reports it to the engine.
enum HTTP2StreamEnd {
    /// A complete HTTP response (`stream.response`).
    case response
    /// This stream failed without an answer but the connection is fine (RST_STREAM): no backoff.
    case streamFailed(String)
    /// The connection failed or refused the stream (GOAWAY), or a request timed out before the
    /// connection was up: the gate backs off.
    case transportFailed(String)
    /// No answer within the request timeout on a connection that is up: the gate backs off unless
    /// the connection answered other requests meanwhile (`ConnectionGate.Completion.requestTimedOut`).
    case timedOut(String)
}

/// Streams that ended during I/O, handed to the engine, which completes them outside nghttp2's callbacks.
///
/// Each report carries the ticket of the dispatch it ends, taken when the report is made: the engine
/// completes only the request holding that ticket (see `CarriedRequest`).
final class HTTP2CompletionSink {
    struct Report {
        let stream: HTTP2Stream
        let ticket: DispatchTicket?
        let end: HTTP2StreamEnd
    }

    var ended: [Report] = []

    init() { ended.reserveCapacity(256) }

    func report(_ stream: HTTP2Stream, _ end: HTTP2StreamEnd) {
        ended.append(Report(stream: stream, ticket: stream.carried.ticket, end: end))
    }
}
