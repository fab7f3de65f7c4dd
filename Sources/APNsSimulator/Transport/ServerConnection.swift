import CNghttp2
import FanoutCrypto
import Foundation

/// Which listener accepted a connection.
enum ListenerKind: Sendable { case push, management }

/// One accepted TLS + HTTP/2 connection: bytes from `SSL_read` feed an nghttp2 server session,
/// whose output goes out through `SSL_write`.
///
/// Owns the socket descriptor, the TLS session and the nghttp2 session (all released in `deinit`).
/// Confined to the event-loop thread that accepted or adopted it; nghttp2 calls back into it only
/// from inside `onReadable`/`flush` on that thread.
final class ServerConnection {
    let descriptor: Int32
    let serial: UInt64
    let kind: ListenerKind
    private let tls: TLSConnection
    private let engine: SimulatorEngine
    private unowned let loop: EventLoop
    private var session: OpaquePointer?
    private var gate = ProviderTokenGate()
    private var random: SeededRandom

    private var streams: [Int32: RequestHead] = [:]
    private var lastStreamID: Int32 = 0
    private var lastHead: RequestHead?
    private var spareHeads: [RequestHead] = []
    private var responseBodies: [Int32: ResponseBody] = [:]
    private var delayedResponses = 0
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var goingAway = false
    /// Monotonic nanoseconds: accepted, last read or timer activity, GOAWAY sent (for `ConnectionDeadlines`).
    let openedAt: UInt64
    var lastActivity: UInt64
    private(set) var goAwayAt: UInt64?
    private var writeShutDown = false
    /// Set by a reset fault during request handling; the loop then drops the connection with RST.
    private(set) var resetRequested = false
    /// Set when nghttp2 refused to queue a frame the connection depends on (a GOAWAY, a SETTINGS, the
    /// RST_STREAM for a response it refused): the loop drops the connection, and the client retries
    /// what it did not get an answer for, instead of waiting on a stream nobody will answer.
    private var closeRequested = false
    /// True while buffered output waits for the socket to become writable.
    private var writeWaitsForWritable = false
    /// True when `SSL_read` needs to write first (a TLS record of its own) and the socket is full:
    /// the read is retried when the socket becomes writable.
    private(set) var readWaitsForWritable = false
    /// Whether the loop should watch the socket for writability.
    var wantsWritable: Bool { writeWaitsForWritable || readWaitsForWritable }

    private var headerArena: [UInt8] = []
    private var headerSpans: [(Int, Int, Int, Int)] = []
    private var nameValues: [nghttp2_nv] = []

    private static func statusText(_ status: Int) -> String {
        switch status {
        case 200: "200"
        case 400: "400"
        case 403: "403"
        case 410: "410"
        case 429: "429"
        default: String(status)
        }
    }

    struct ResponseBody {
        var bytes: [UInt8]
        var offset = 0
    }

    static let outputHighWater = 64 * 1024
    /// Request heads kept for reuse (about one per concurrent stream a busy client keeps open).
    static let maxSpareHeads = 256

    init(descriptor: Int32, serial: UInt64, kind: ListenerKind, tls: TLSConnection, engine: SimulatorEngine,
         loop: EventLoop, callbacks: HTTP2Callbacks) throws {
        self.descriptor = descriptor
        self.serial = serial
        self.kind = kind
        self.tls = tls
        self.engine = engine
        self.loop = loop
        openedAt = DispatchTime.now().uptimeNanoseconds
        lastActivity = openedAt
        random = SeededRandom(seed: engine.configuration.seed ^ (serial &* 0x9E37_79B9_7F4A_7C15))
        output.reserveCapacity(Self.outputHighWater + 16 * 1024)
        var created: OpaquePointer?
        let status = nghttp2_session_server_new(&created, callbacks.pointer, Unmanaged.passUnretained(self).toOpaque())
        guard status == 0, let created else { throw APNsSimulatorError.socket("nghttp2_session_server_new: \(status)") }
        session = created
        // Like APNs: one stream until a request carries a valid provider token.
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: 1)]
        let submitted = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
        guard submitted == 0 else {
            throw APNsSimulatorError.socket("nghttp2_submit_settings: \(String(cString: nghttp2_strerror(submitted)))")
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        close(descriptor)
    }

    // MARK: I/O driven by the event loop

    /// Reads and processes everything available. False when the connection should be dropped.
    func onReadable() -> Bool {
        readWaitsForWritable = false
        while true {
            switch tls.read(into: loop.readBuffer) {
            case .bytes(let count):
                // After the GOAWAY half-close the session is done: read only to keep the socket from
                // resetting (closing with unread input sends RST), and discard.
                if writeShutDown { continue }
                let consumed = nghttp2_session_mem_recv(session, loop.readBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
                if consumed < 0 || resetRequested || closeRequested { return false }
            case .wantRead:
                return flush()
            case .wantWrite:
                readWaitsForWritable = true
                return flush()
            case .closed, .failed:
                return false
            }
        }
    }

    /// Moves nghttp2's pending frames through TLS to the socket. False when the connection is done.
    func flush() -> Bool {
        guard let session, !closeRequested else { return false }
        while true {
            while output.count - outputOffset < Self.outputHighWater {
                var chunk: UnsafePointer<UInt8>?
                let count = nghttp2_session_mem_send(session, &chunk)
                if count < 0 { return false }
                if count == 0 { break }
                output.append(contentsOf: UnsafeBufferPointer(start: chunk, count: count))
            }
            if outputOffset == output.count { break }
            let result = output.withUnsafeBytes { tls.write(UnsafeRawBufferPointer(rebasing: $0[outputOffset...])) }
            switch result {
            case .bytes(let written):
                outputOffset += written
                if outputOffset == output.count {
                    output.removeAll(keepingCapacity: true)
                    outputOffset = 0
                }
            case .wantWrite:
                writeWaitsForWritable = true
                return true
            case .wantRead:
                // TLS needs the peer's bytes first (the handshake is not finished): the output waits for the next
                // readable event, whose `onReadable` ends in `flush`. Watching for writability here would spin the
                // loop (the socket is writable) until the client answers, for up to the handshake timeout.
                writeWaitsForWritable = false
                return true
            case .closed, .failed:
                return false
            }
        }
        writeWaitsForWritable = false
        // Checked before nghttp2's want_read/want_write: after a GOAWAY and the last response nghttp2 wants
        // neither, and closing now, with client bytes still unread or on the way (requests sent right after
        // the GOAWAY-triggering one), would reset the connection and discard the GOAWAY and the last
        // answers still in flight: the client would retry pushes that were accepted.
        if goingAway && !hasOpenStreams {
            if !writeShutDown {
                // Everything queued is written (the loop above ran dry). Half-close: close_notify, then FIN;
                // keep reading and discarding until the peer closes or the GOAWAY grace period ends.
                writeShutDown = true
                tls.shutdown()
                Glibc.shutdown(descriptor, Int32(SHUT_WR))
            }
            return true
        }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && delayedResponses == 0 {
            return false
        }
        return true
    }

    var isHandshakeDone: Bool { tls.isHandshakeDone }
    /// Requests not yet fully answered (a response still queued, or waiting for injected latency).
    var hasOpenStreams: Bool { !streams.isEmpty || !responseBodies.isEmpty || delayedResponses > 0 }

    /// Idle timeout: GOAWAY (NO_ERROR, reason IdleTimeout) then the same close as after any GOAWAY. Call `flush` next.
    func goAwayIdle(now: UInt64) {
        guard !goingAway, let session else { return }
        goingAway = true
        goAwayAt = now
        let json = Array("{\"reason\":\"IdleTimeout\"}".utf8)
        // Idle: nothing is in flight, so if the GOAWAY cannot be queued, closing loses nothing.
        if nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                 NGHTTP2_NO_ERROR.rawValue, json, json.count) != 0 {
            closeRequested = true
        }
    }

    /// A response whose injected latency has elapsed.
    func sendDelayed(_ plan: ResponsePlan, streamID: Int32) {
        delayedResponses -= 1
        guard let session, nghttp2_session_find_stream(session, streamID) != nil else { return }
        submit(plan, streamID: streamID)
    }

    // MARK: nghttp2 callbacks (called from the free functions below)

    fileprivate func beginRequest(streamID: Int32) {
        let head = spareHeads.popLast() ?? RequestHead()
        head.reset()
        streams[streamID] = head
        lastStreamID = streamID
        lastHead = head
    }

    fileprivate func header(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let known = RequestHeader.named(name), let head = head(streamID) else { return }
        head.set(known, value)
    }

    fileprivate func data(streamID: Int32, chunk: UnsafeBufferPointer<UInt8>) {
        head(streamID)?.appendBody(chunk)
    }

    /// A stream's frames tend to arrive together: remember the last lookup.
    private func head(_ streamID: Int32) -> RequestHead? {
        if streamID == lastStreamID, let lastHead { return lastHead }
        lastHead = streams[streamID]
        lastStreamID = streamID
        return lastHead
    }

    fileprivate func requestComplete(streamID: Int32) {
        guard let head = head(streamID) else { return }
        var plan = switch kind {
        case .push: engine.handlePush(head, gate: &gate, random: &random)
        case .management: engine.handleManagement(head, gate: &gate, random: &random)
        }
        if plan.after == .reset {
            resetRequested = true
            return
        }
        if plan.raiseStreamLimit {
            var settings = [nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(engine.configuration.maxConcurrentStreams))]
            // Without it the client stays at one stream for good: close instead (it reconnects and re-probes).
            if nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1) != 0 { closeRequested = true }
            plan.raiseStreamLimit = false
        }
        if plan.delayMillis > 0 {
            delayedResponses += 1
            loop.schedule(afterMillis: plan.delayMillis, connection: self, streamID: streamID, plan: plan)
        } else {
            submit(plan, streamID: streamID)
        }
    }

    fileprivate func streamClosed(streamID: Int32) {
        if streamID == lastStreamID { lastHead = nil; lastStreamID = 0 }
        if let head = streams.removeValue(forKey: streamID), spareHeads.count < Self.maxSpareHeads { spareHeads.append(head) }
        responseBodies[streamID] = nil
    }

    fileprivate func readBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard var body = responseBodies[streamID] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let count = min(length, body.bytes.count - body.offset)
        body.bytes.withUnsafeBufferPointer { source in
            buffer.update(from: source.baseAddress! + body.offset, count: count)
        }
        body.offset += count
        if body.offset == body.bytes.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            responseBodies[streamID] = nil
        } else {
            responseBodies[streamID] = body
        }
        return count
    }

    // MARK: Responses

    private func submit(_ plan: ResponsePlan, streamID: Int32) {
        // GOAWAY first (its last_stream_id still covers this stream), so clients see the reason before the last answer.
        if case .goAway(let reason) = plan.after, !goingAway {
            goingAway = true
            goAwayAt = DispatchTime.now().uptimeNanoseconds
            let json = Array("{\"reason\":\(ResponsePlan.jsonString(reason))}".utf8)
            // The fault asks for this connection to end; if the GOAWAY cannot be queued, end it by closing.
            if nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                     NGHTTP2_NO_ERROR.rawValue, json, json.count) != 0 {
                closeRequested = true
            }
        }
        // Header bytes go into one reused arena; nghttp2 copies them during nghttp2_submit_response.
        headerArena.removeAll(keepingCapacity: true)
        headerSpans.removeAll(keepingCapacity: true)
        func add(_ name: String, _ value: String) {
            let nameStart = headerArena.count
            headerArena.append(contentsOf: name.utf8)
            let valueStart = headerArena.count
            headerArena.append(contentsOf: value.utf8)
            headerSpans.append((nameStart, valueStart - nameStart, valueStart, headerArena.count - valueStart))
        }
        add(":status", Self.statusText(plan.status))
        for (name, value) in plan.headers { add(name, value) }
        if let body = plan.body { add("content-length", String(body.count)) }
        if let body = plan.body, !body.isEmpty { responseBodies[streamID] = ResponseBody(bytes: body) }
        let hasBody = responseBodies[streamID] != nil
        let submitted = headerArena.withUnsafeMutableBufferPointer { bytes -> Int32 in
            nameValues.removeAll(keepingCapacity: true)
            for (nameStart, nameLength, valueStart, valueLength) in headerSpans {
                // Values that differ on every response (IDs) would only churn the HPACK dynamic table: never index them.
                let unique = valueLength == 36
                nameValues.append(nghttp2_nv(name: bytes.baseAddress! + nameStart, value: bytes.baseAddress! + valueStart,
                                             namelen: nameLength, valuelen: valueLength,
                                             flags: UInt8(unique ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue)))
            }
            if hasBody {
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readResponseBody)
                return nghttp2_submit_response(session, streamID, nameValues, nameValues.count, &provider)
            }
            return nghttp2_submit_response(session, streamID, nameValues, nameValues.count, nil)
        }
        guard submitted != 0 else { return }
        // nghttp2 refused the response (out of memory, or the stream is in a state that cannot take one):
        // never leave the stream unanswered. Reset it so the client retries; if even that cannot be
        // queued, close the connection.
        responseBodies[streamID] = nil
        if nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_INTERNAL_ERROR.rawValue) != 0 {
            closeRequested = true
        }
    }
}

/// The nghttp2 callback table, shared by the sessions of one event loop. Owned; freed in `deinit`.
final class HTTP2Callbacks {
    let pointer: OpaquePointer

    init() {
        var created: OpaquePointer?
        nghttp2_session_callbacks_new(&created)
        pointer = created!
        nghttp2_session_callbacks_set_on_begin_headers_callback(pointer, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(pointer, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(pointer, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(pointer, onFrameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(pointer, onStreamClose)
    }

    deinit { nghttp2_session_callbacks_del(pointer) }
}

private func connection(_ userData: UnsafeMutableRawPointer?) -> ServerConnection {
    Unmanaged<ServerConnection>.fromOpaque(userData!).takeUnretainedValue()
}

private func onBeginHeaders(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
          frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
    connection(userData).beginRequest(streamID: frame.pointee.hd.stream_id)
    return 0
}

private func onHeader(
    _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let name, let value else { return 0 }
    connection(userData).header(streamID: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
                                value: UnsafeBufferPointer(start: value, count: valueLength))
    return 0
}

private func onDataChunk(
    _ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let data else { return 0 }
    connection(userData).data(streamID: streamID, chunk: UnsafeBufferPointer(start: data, count: length))
    return 0
}

private func onFrameReceived(_ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let type = frame.pointee.hd.type
    let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    if endStream, type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue) {
        connection(userData).requestComplete(streamID: frame.pointee.hd.stream_id)
    }
    return 0
}

private func onStreamClose(_ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32, _ userData: UnsafeMutableRawPointer?) -> Int32 {
    connection(userData).streamClosed(streamID: streamID)
    return 0
}

private func readResponseBody(
    _ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?, _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    return connection(userData).readBody(streamID: streamID, into: buffer, length: length, flags: flags)
}
