import APNsModel
import FanoutCrypto
import FanoutHTTP2
import Foundation

/// Which listener accepted a connection.
enum ListenerKind: Sendable { case push, management }

/// One accepted TLS + HTTP/2 connection: bytes from `SSL_read` feed an nghttp2 server session,
/// whose output goes out through `SSL_write`.
///
/// Owns the socket descriptor, the TLS session and the HTTP/2 session (all released in `deinit`).
/// Confined to the event-loop thread that accepted or adopted it; the session calls back into it only
/// from inside `onReadable`/`flush` on that thread.
final class ServerConnection: HTTP2SessionDelegate {
    let descriptor: Int32
    let serial: UInt64
    let kind: ListenerKind
    private let tls: TLSConnection
    private let engine: SimulatorEngine
    private unowned let loop: EventLoop
    private var session: HTTP2Session!
    private var gate = ProviderTokenGate()
    private var random: SeededRandom

    private var streams: [Int32: RequestHead] = [:]
    private var lastStreamID: Int32 = 0
    private var lastHead: RequestHead?
    private var spareHeads: [RequestHead] = []
    private var responseBodies: [Int32: ResponseBody] = [:]
    private var delayedResponses = 0
    private var output = HTTP2OutputPump()
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

    private var responseHeaders = HTTP2HeaderBlock()

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

    /// Request heads kept for reuse (about one per concurrent stream a busy client keeps open).
    static let maxSpareHeads = 256

    init(descriptor: Int32, serial: UInt64, kind: ListenerKind, tls: TLSConnection, engine: SimulatorEngine,
         loop: EventLoop) throws {
        self.descriptor = descriptor
        self.serial = serial
        self.kind = kind
        self.tls = tls
        self.engine = engine
        self.loop = loop
        openedAt = DispatchTime.now().uptimeNanoseconds
        lastActivity = openedAt
        random = SeededRandom(seed: engine.configuration.seed ^ (serial &* 0x9E37_79B9_7F4A_7C15))
        do {
            session = try HTTP2Session(role: .server, delegate: self)
            // Like APNs: one stream until a request carries a valid provider token.
            try session.submitSettings([HTTP2Setting(.maxConcurrentStreams, 1)])
        } catch {
            throw APNsSimulatorError.socket("\(error)")
        }
    }

    deinit {
        // The session first: it is deleted without calling back, before the descriptor closes.
        session = nil
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
                do {
                    try session.receive(UnsafeRawBufferPointer(rebasing: loop.readBuffer[..<count]))
                } catch {
                    return false
                }
                if resetRequested || closeRequested { return false }
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
        guard !closeRequested else { return false }
        switch output.flush(session, over: tls) {
        case .drained:
            break
        case .waitsForWritable:
            writeWaitsForWritable = true
            return true
        case .waitsForReadable:
            // TLS needs the peer's bytes first (the handshake is not finished): the output waits for the next
            // readable event, whose `onReadable` ends in `flush`. Watching for writability here would spin the
            // loop (the socket is writable) until the client answers, for up to the handshake timeout.
            writeWaitsForWritable = false
            return true
        case .closed, .failed, .sessionFailed:
            return false
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
        if !session.wantsRead && !session.wantsWrite && delayedResponses == 0 {
            return false
        }
        return true
    }

    var isHandshakeDone: Bool { tls.isHandshakeDone }
    /// Requests not yet fully answered (a response still queued, or waiting for injected latency).
    var hasOpenStreams: Bool { !streams.isEmpty || !responseBodies.isEmpty || delayedResponses > 0 }

    /// Idle timeout: GOAWAY (NO_ERROR, reason IdleTimeout) then the same close as after any GOAWAY. Call `flush` next.
    func goAwayIdle(now: UInt64) {
        guard !goingAway else { return }
        goingAway = true
        goAwayAt = now
        let json = Array("{\"reason\":\"IdleTimeout\"}".utf8)
        // Idle: nothing is in flight, so if the GOAWAY cannot be queued, closing loses nothing.
        do {
            try session.submitGoAway(lastStreamID: session.lastProcessedStreamID, errorCode: .noError, debugData: json)
        } catch {
            closeRequested = true
        }
    }

    /// A response whose injected latency has elapsed.
    func sendDelayed(_ plan: ResponsePlan, streamID: Int32) {
        delayedResponses -= 1
        guard session.hasStream(streamID) else { return }
        submit(plan, streamID: streamID)
    }

    // MARK: HTTP2SessionDelegate

    func beganRequest(streamID: Int32) {
        let head = spareHeads.popLast() ?? RequestHead()
        head.reset()
        streams[streamID] = head
        lastStreamID = streamID
        lastHead = head
    }

    func receivedHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let known = RequestHeader.named(name), let head = head(streamID) else { return }
        head.set(known, value)
    }

    func receivedData(streamID: Int32, chunk: UnsafeBufferPointer<UInt8>) {
        head(streamID)?.appendBody(chunk)
    }

    /// A stream's frames tend to arrive together: remember the last lookup.
    private func head(_ streamID: Int32) -> RequestHead? {
        if streamID == lastStreamID, let lastHead { return lastHead }
        lastHead = streams[streamID]
        lastStreamID = streamID
        return lastHead
    }

    func received(_ frame: HTTP2ReceivedFrame) {
        if case .endOfStream(let streamID) = frame { requestComplete(streamID: streamID) }
    }

    private func requestComplete(streamID: Int32) {
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
            // Without it the client stays at one stream for good: close instead (it reconnects and re-probes).
            do {
                try session.submitSettings([HTTP2Setting(.maxConcurrentStreams, UInt32(engine.configuration.maxConcurrentStreams))])
            } catch {
                closeRequested = true
            }
            plan.raiseStreamLimit = false
        }
        if plan.delayMillis > 0 {
            delayedResponses += 1
            loop.schedule(afterMillis: plan.delayMillis, connection: self, streamID: streamID, plan: plan)
        } else {
            submit(plan, streamID: streamID)
        }
    }

    func streamClosed(streamID: Int32, errorCode: HTTP2ErrorCode) {
        if streamID == lastStreamID { lastHead = nil; lastStreamID = 0 }
        if let head = streams.removeValue(forKey: streamID), spareHeads.count < Self.maxSpareHeads { spareHeads.append(head) }
        responseBodies[streamID] = nil
    }

    func readBody(streamID: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) -> HTTP2BodyRead {
        guard var body = responseBodies[streamID] else { return .bytes(0, endOfBody: true) }
        let count = min(buffer.count, body.bytes.count - body.offset)
        body.bytes.withUnsafeBufferPointer { source in
            buffer.baseAddress!.update(from: source.baseAddress! + body.offset, count: count)
        }
        body.offset += count
        if body.offset == body.bytes.count {
            responseBodies[streamID] = nil
            return .bytes(count, endOfBody: true)
        }
        responseBodies[streamID] = body
        return .bytes(count, endOfBody: false)
    }

    // MARK: Responses

    private func submit(_ plan: ResponsePlan, streamID: Int32) {
        // GOAWAY first (its last_stream_id still covers this stream), so clients see the reason before the last answer.
        if case .goAway(let reason) = plan.after, !goingAway {
            goingAway = true
            goAwayAt = DispatchTime.now().uptimeNanoseconds
            var json = Array("{\"reason\":".utf8)
            JSONString.append(reason, to: &json)
            json.append(UInt8(ascii: "}"))
            // The fault asks for this connection to end; if the GOAWAY cannot be queued, end it by closing.
            do {
                try session.submitGoAway(lastStreamID: session.lastProcessedStreamID, errorCode: .noError, debugData: json)
            } catch {
                closeRequested = true
            }
        }
        // Header bytes go into one reused block; nghttp2 copies them while the response is submitted.
        responseHeaders.removeAll()
        // Values that differ on every response (IDs) would only churn the HPACK dynamic table: never index them.
        func add(_ name: String, _ value: String) { responseHeaders.add(name, value, index: value.utf8.count != 36) }
        add(":status", Self.statusText(plan.status))
        for (name, value) in plan.headers { add(name, value) }
        if let body = plan.body { add("content-length", String(body.count)) }
        if let body = plan.body, !body.isEmpty { responseBodies[streamID] = ResponseBody(bytes: body) }
        do {
            try session.submitResponse(streamID: streamID, &responseHeaders, hasBody: responseBodies[streamID] != nil)
        } catch {
            // nghttp2 refused the response (out of memory, or the stream is in a state that cannot take one):
            // never leave the stream unanswered. Reset it so the client retries; if even that cannot be
            // queued, close the connection.
            responseBodies[streamID] = nil
            do {
                try session.submitReset(streamID: streamID, errorCode: .internalError)
            } catch {
                closeRequested = true
            }
        }
    }
}
