import APNsModel
import CNghttp2
import FanoutCrypto
import Foundation

/// One pooled connection of the nghttp2 transport: a non-blocking TCP socket, a client TLS session
/// (verified, ALPN h2) and an nghttp2 client session, reopened on demand after it closes.
///
/// Confined to the transport thread. Owns the descriptor, the TLS session and the nghttp2 session
/// (released in `teardown`, which `deinit` also runs); nghttp2 calls back into it only from inside
/// `service`, `flush`, `tick` and `submit` on that thread.
final class HTTP2ClientConnection: PooledConnection {
    enum State: Equatable { case idle, resolving, connecting, handshaking, ready, draining }

    struct Settings {
        var endpoint: HTTP2Endpoint
        var connectTimeout: Duration
        var requestTimeout: Duration
        var upkeepInterval: Duration
        var pingTimeout: Duration
    }

    let index: Int
    var gate: ConnectionGate
    private(set) var state: State = .idle
    /// On the wire (each stream knows its `slot`).
    private(set) var streams: [HTTP2Stream] = []
    /// Dispatched while the connection was being opened; submitted once the session is up.
    private(set) var pending: [HTTP2Stream] = []
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (1 until its SETTINGS arrive, as APNs starts).
    private(set) var serverStreamLimit = 1
    private(set) var goAway: APNsClient.GoAway?
    /// Set when nghttp2 has frames to write; the engine flushes dirty connections in one pass.
    var isDirty = false

    private let settings: Settings
    private let tlsContext: TLSClientContext
    private let events: HTTP2EventSet
    private let sink: HTTP2CompletionSink
    private let callbacks: HTTP2ClientCallbacks
    private let counters: APNsClientCounters
    private let resolver: HTTP2Resolver
    private let readBuffer: UnsafeMutableRawBufferPointer
    private var descriptor: Int32 = -1
    private var tls: TLSConnection?
    private var session: OpaquePointer?
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var watchingWritable = false
    /// SSL_read needed to write first and the socket was full: the read is retried when writable.
    private var readWaitsForWritable = false
    private var connectDeadline: ContinuousClock.Instant?
    private var lastRead = ContinuousClock.now
    private var pingSentAt: ContinuousClock.Instant?
    private var attempts = 0
    private var addresses: [SocketAddress] = []
    private var resolveSerial: UInt64 = 0
    private var addressIndex = 0
    private var nextStreamScan = ContinuousClock.now

    private var headers = HTTP2RequestHeaders()

    static let outputHighWater = 64 * 1024
    static let streamScanInterval: Duration = .milliseconds(100)

    init(index: Int, gate: ConnectionGate, settings: Settings, tlsContext: TLSClientContext, events: HTTP2EventSet,
         sink: HTTP2CompletionSink, callbacks: HTTP2ClientCallbacks, counters: APNsClientCounters, resolver: HTTP2Resolver,
         readBuffer: UnsafeMutableRawBufferPointer) {
        self.index = index
        self.gate = gate
        self.settings = settings
        self.tlsContext = tlsContext
        self.events = events
        self.sink = sink
        self.callbacks = callbacks
        self.counters = counters
        self.resolver = resolver
        self.readBuffer = readBuffer
        output.reserveCapacity(Self.outputHighWater + 16 * 1024)
    }

    deinit { teardown() }

    var inFlight: Int { streams.count + pending.count }
    var isOpen: Bool { state != .idle }
    private var token: UInt64 { UInt64(index) + 1 }

    /// Requests this connection may carry in total right now: the gate's answer, capped by the
    /// server's limit once the session is up; none while a GOAWAY drains it.
    func capacity(now: ContinuousClock.Instant) -> Int {
        // Ask the gate first, even while draining: it moves a finished backoff on to fresh.
        let allowed = gate.capacity(inFlight: inFlight, now: now)
        switch state {
        case .draining: return 0
        case .ready: return min(allowed, serverStreamLimit)
        case .idle, .resolving, .connecting, .handshaking: return allowed
        }
    }

    // MARK: Requests

    /// Takes a dispatched stream: on the wire now when the session is up, else once it is (opening
    /// the connection when idle).
    func submit(_ stream: HTTP2Stream, now: ContinuousClock.Instant) {
        stream.connectionIndex = index
        stream.deadline = now + settings.requestTimeout
        switch state {
        case .ready:
            start(stream)
        case .resolving, .connecting, .handshaking:
            pending.append(stream)
        case .idle:
            pending.append(stream)
            open(now: now)
        case .draining:
            // capacity() is 0 while draining, so the engine never gets here; never lose the request.
            sink.ended.append((stream, .streamFailed("connection is going away (internal)")))
        }
    }

    private func start(_ stream: HTTP2Stream) {
        guard let session else { return }
        let pointer = Unmanaged.passUnretained(stream).toOpaque()
        let body = !stream.request.body.isEmpty
        let streamID = headers.withHeaders(for: stream.request, authorization: stream.authorization, endpoint: settings.endpoint) {
            nameValues, count in
            guard body else { return nghttp2_submit_request(session, nil, nameValues, count, nil, pointer) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readRequestBody)
            return nghttp2_submit_request(session, nil, nameValues, count, &provider, pointer)
        }
        guard streamID > 0 else {
            sink.ended.append((stream, .transportFailed("cannot start an HTTP/2 stream: \(String(cString: nghttp2_strerror(streamID)))")))
            return
        }
        stream.streamID = streamID
        stream.slot = streams.count
        streams.append(stream)
        isDirty = true
    }

    // MARK: Opening

    private func open(now: ContinuousClock.Instant) {
        connectDeadline = now + settings.connectTimeout
        lastRead = now
        if settings.endpoint.hostIsIPLiteral {
            return resolved(settings.endpoint.resolve(), now: now)
        }
        // A DNS name: looked up on a resolver thread (Apple asks for a fresh lookup per connection).
        state = .resolving
        resolveSerial += 1
        resolver.resolve(settings.endpoint, connection: index, serial: resolveSerial)
    }

    /// A lookup answer from `HTTP2Resolver`; ignored unless this connection still waits for it.
    func resolved(_ answer: HTTP2Resolver.Answer, now: ContinuousClock.Instant) {
        guard state == .resolving, answer.serial == resolveSerial else { return }
        resolved(answer.result, now: now)
    }

    private func resolved(_ result: Result<[SocketAddress], HTTP2ConnectError>, now: ContinuousClock.Instant) {
        switch result {
        case .success(let list): addresses = list
        case .failure(let error): return fail(error.text, now: now)
        }
        // Each connection starts one address further down the list, so a dead address is not tried first every time.
        attempts += 1
        addressIndex = 0
        connectNext(now: now, firstError: nil)
    }

    /// Starts a TCP connect to the next untried address; fails the connection when none is left.
    private func connectNext(now: ContinuousClock.Instant, firstError: String?) {
        var firstError = firstError
        while addressIndex < addresses.count {
            let address = addresses[(attempts - 1 + addressIndex) % addresses.count]
            addressIndex += 1
            switch address.startConnect() {
            case .success(let socket):
                descriptor = socket
                state = .connecting
                watchingWritable = true
                events.add(descriptor, token: token, writable: true)
                lastRead = now
                return
            case .failure(let error):
                firstError = firstError ?? error.text
            }
        }
        fail("connect to \(settings.endpoint.authority) failed: \(firstError ?? "no address")", now: now)
    }

    private func finishConnect(now: ContinuousClock.Instant) {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else {
            // Try the host's next address (IPv6 unreachable, one address down) within the same connect timeout.
            let text = String(cString: strerror(error))
            events.remove(descriptor)
            close(descriptor)
            descriptor = -1
            return connectNext(now: now, firstError: text)
        }
        do {
            tls = try tlsContext.makeConnection(socket: descriptor, serverName: settings.endpoint.host)
        } catch {
            return fail("\(error)", now: now)
        }
        state = .handshaking
        continueHandshake(now: now)
    }

    private func continueHandshake(now: ContinuousClock.Instant) {
        guard let tls else { return }
        switch tls.handshake() {
        case .bytes:
            guard tls.negotiatedProtocol == "h2" else {
                let offered = tls.negotiatedProtocol.map { "'\($0)'" } ?? "no protocol"
                return fail("TLS: \(settings.endpoint.authority) did not select HTTP/2 in ALPN (it chose \(offered)); APNs needs h2",
                            now: now)
            }
            startSession(now: now)
        case .wantRead:
            watch(writable: false)
        case .wantWrite:
            watch(writable: true)
        case .failed(let text):
            fail("TLS handshake with \(settings.endpoint.authority) failed: \(text)", now: now)
        case .closed:
            fail("TLS handshake with \(settings.endpoint.authority) failed: connection closed", now: now)
        }
    }

    private func startSession(now: ContinuousClock.Instant) {
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // Until the server's SETTINGS arrive, assume what APNs starts with: one stream.
        nghttp2_option_set_peer_max_concurrent_streams(option, 1)
        var created: OpaquePointer?
        let status = nghttp2_session_client_new2(&created, callbacks.pointer, Unmanaged.passUnretained(self).toOpaque(), option)
        guard status == 0, let created else { return fail("nghttp2_session_client_new2: \(status)", now: now) }
        session = created
        var local = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        _ = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &local, local.count)
        state = .ready
        connectDeadline = nil
        serverStreamLimit = 1
        let waiting = pending
        pending.removeAll(keepingCapacity: true)
        for stream in waiting { start(stream) }
        isDirty = true
        flush(now: now)
    }

    // MARK: I/O

    /// Handles readiness of this connection's socket.
    func service(events mask: UInt32, now: ContinuousClock.Instant) {
        switch state {
        case .idle, .resolving:
            return
        case .connecting:
            finishConnect(now: now)
        case .handshaking:
            continueHandshake(now: now)
        case .ready, .draining:
            let readable = mask & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0
            if readable || (readWaitsForWritable && mask & EPOLLOUT.rawValue != 0) {
                guard readAll(now: now) else { return }
            }
            flush(now: now)
        }
    }

    /// Feeds everything readable to nghttp2. False when the connection closed.
    private func readAll(now: ContinuousClock.Instant) -> Bool {
        guard let tls else { return false }
        readWaitsForWritable = false
        while state == .ready || state == .draining {
            switch tls.read(into: readBuffer) {
            case .bytes(let count):
                lastRead = now
                let consumed = nghttp2_session_mem_recv(session, readBuffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
                if consumed < 0 {
                    fail("HTTP/2 error from \(settings.endpoint.authority): \(String(cString: nghttp2_strerror(Int32(consumed))))", now: now)
                    return false
                }
                isDirty = true
            case .wantRead:
                return true
            case .wantWrite:
                // TLS must write before it can read on (the socket is full): retry the read when writable.
                readWaitsForWritable = true
                return true
            case .closed:
                if inFlight == 0 {
                    closeQuietly()
                } else {
                    fail("\(settings.endpoint.authority) closed the connection" + (goAway.map { " after \($0)" } ?? ""), now: now)
                }
                return false
            case .failed(let text):
                fail(text, now: now)
                return false
            }
        }
        return false
    }

    /// Moves nghttp2's pending frames through TLS to the socket.
    func flush(now: ContinuousClock.Instant) {
        isDirty = false
        guard let session, let tls, state == .ready || state == .draining else { return }
        while true {
            while output.count - outputOffset < Self.outputHighWater {
                var chunk: UnsafePointer<UInt8>?
                let count = nghttp2_session_mem_send(session, &chunk)
                if count < 0 {
                    return fail("HTTP/2 error: \(String(cString: nghttp2_strerror(Int32(count))))", now: now)
                }
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
                watch(writable: true)
                return
            case .wantRead:
                // TLS needs the server's bytes first; the next readable event reads, then flushes again.
                watch(writable: readWaitsForWritable)
                return
            case .closed:
                return fail("\(settings.endpoint.authority) closed the connection while we were writing", now: now)
            case .failed(let text):
                return fail(text, now: now)
            }
        }
        watch(writable: readWaitsForWritable)
        if state == .draining && streams.isEmpty { closeQuietly() }
    }

    private func watch(writable: Bool) {
        guard descriptor >= 0, writable != watchingWritable else { return }
        watchingWritable = writable
        events.modify(descriptor, token: token, writable: writable)
    }

    // MARK: Timers

    /// Connect timeout, PING upkeep and its timeout, and request timeouts (scanned every 100 ms).
    func tick(now: ContinuousClock.Instant) {
        switch state {
        case .idle:
            return
        case .resolving, .connecting, .handshaking:
            if let connectDeadline, now >= connectDeadline {
                return fail("connecting to \(settings.endpoint.authority) timed out after \(settings.connectTimeout) (DNS + TCP + TLS)", now: now)
            }
        case .ready, .draining:
            if let pingSentAt {
                if now - pingSentAt >= settings.pingTimeout {
                    return fail("no answer to an HTTP/2 PING within \(settings.pingTimeout): connection to \(settings.endpoint.authority) presumed dead",
                                now: now)
                }
            } else if state == .ready, now - lastRead >= settings.upkeepInterval, let session {
                _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
                pingSentAt = now
                isDirty = true
            }
        }
        guard now >= nextStreamScan, inFlight > 0 else { return }
        nextStreamScan = now + Self.streamScanInterval
        var index = 0
        while index < streams.count {
            let stream = streams[index]
            if now >= stream.deadline { timeOut(stream) } else { index += 1 }
        }
        // Pending streams wait for the connect, which times out before them unless connectTimeout is the longer one.
        while let first = pending.first, now >= first.deadline {
            pending.removeFirst()
            sink.ended.append((first, .transportFailed("no response within \(settings.requestTimeout) (request timeout)")))
        }
    }

    /// The next instant `tick` has work, for the engine's wait: exactly the conditions `tick` checks,
    /// so a timer in the past is always handled by the next `tick` (the loop never spins on it).
    func nextTimer(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        var next: ContinuousClock.Instant?
        func consider(_ instant: ContinuousClock.Instant) { next = min(next ?? instant, instant) }
        switch state {
        case .idle: return nil
        case .resolving, .connecting, .handshaking: if let connectDeadline { consider(connectDeadline) }
        case .ready, .draining:
            if let pingSentAt {
                consider(pingSentAt + settings.pingTimeout)
            } else if state == .ready {
                consider(lastRead + settings.upkeepInterval)
            }
        }
        if inFlight > 0 { consider(nextStreamScan) }
        return next
    }

    private func timeOut(_ stream: HTTP2Stream) {
        if let session {
            nghttp2_session_set_stream_user_data(session, stream.streamID, nil)
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.streamID, NGHTTP2_CANCEL.rawValue)
            isDirty = true
        }
        removeFromWire(stream)
        sink.ended.append((stream, .transportFailed("no response within \(settings.requestTimeout) (request timeout)")))
    }

    private func removeFromWire(_ stream: HTTP2Stream) {
        let slot = stream.slot
        guard slot >= 0, slot < streams.count, streams[slot] === stream else { return }
        let last = streams.removeLast()
        if slot < streams.count {
            streams[slot] = last
            last.slot = slot
        }
        stream.slot = -1
    }

    // MARK: nghttp2 callbacks (from HTTP2ClientCallbacks)

    private func stream(_ streamID: Int32) -> HTTP2Stream? {
        guard let session, let pointer = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        return Unmanaged<HTTP2Stream>.fromOpaque(pointer).takeUnretainedValue()
    }

    func receivedHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID) else { return }
        if name.count == 7, name.elementsEqual(":status".utf8) {
            stream.response.status = Int(String(decoding: value, as: UTF8.self))
        } else {
            stream.response.record(headerName: name, value: value)
        }
    }

    func receivedData(streamID: Int32, chunk: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID), stream.localFailure == nil else { return }
        guard stream.response.body.count + chunk.count <= HTTP2Stream.bodyLimit else {
            // The answer (status) is in: keep what fits and stop the rest of the body with a CANCEL.
            stream.response.body.append(contentsOf: UnsafeBufferPointer(rebasing: chunk.prefix(HTTP2Stream.bodyLimit - stream.response.body.count)))
            stream.localFailure = APNsHTTPResponse.bodyOverflowNote(limit: HTTP2Stream.bodyLimit)
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
            return
        }
        stream.response.body.append(contentsOf: chunk)
    }

    func receivedSettings() {
        guard let session else { return }
        let limit = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
        serverStreamLimit = Int(min(limit, UInt32(Int32.max)))
        counters.serverMaxConcurrentStreams.store(serverStreamLimit, ordering: .relaxed)
    }

    func receivedPingAck() {
        pingSentAt = nil
        counters.pingsAcknowledged.add(1, ordering: .relaxed)
    }

    func receivedGoAway(errorCode: UInt32, lastStreamID: Int32, debugData: [UInt8]) {
        let received = APNsClient.GoAway(errorCode: errorCode, errorName: String(cString: nghttp2_http2_strerror(errorCode)),
                                         lastStreamID: lastStreamID, reason: Self.goAwayReason(debugData))
        goAway = received
        counters.lastGoAway.withLock { $0 = received }
        if state == .ready { state = .draining }
    }

    /// APNs puts `{"reason":"..."}` in the debug data; anything else is kept as text (bounded).
    static func goAwayReason(_ debug: [UInt8]) -> String? {
        guard !debug.isEmpty else { return nil }
        if let object = try? JSONSerialization.jsonObject(with: Data(debug)) as? [String: Any], let reason = object["reason"] as? String {
            return reason
        }
        return String(decoding: debug.prefix(256), as: UTF8.self)
    }

    func streamClosed(streamID: Int32, errorCode: UInt32) {
        guard let stream = stream(streamID) else { return }
        nghttp2_session_set_stream_user_data(session, streamID, nil)
        removeFromWire(stream)
        let end: HTTP2StreamEnd
        if let failure = stream.localFailure {
            // Only a body over the limit sets it, after the status arrived: answered, so a response
            // with the note (never retried blindly as a transport failure).
            if stream.response.status != nil {
                stream.response.transportFailure = failure
                end = .response
            } else {
                end = .streamFailed(failure)
            }
        } else if errorCode == NGHTTP2_NO_ERROR.rawValue, stream.response.status != nil {
            end = .response
        } else if let goAway, streamID > goAway.lastStreamID {
            end = .transportFailed("not processed: the server sent \(goAway); retry on a new connection")
        } else {
            let name = String(cString: nghttp2_http2_strerror(errorCode))
            end = .streamFailed("HTTP/2 stream closed without a complete response (\(name))")
        }
        sink.ended.append((stream, end))
    }

    func requestNotSent(streamID: Int32, libErrorCode: Int32) {
        // Rare (a GOAWAY raced our requests): a linear search is fine.
        guard let stream = streams.first(where: { $0.streamID == streamID }) else { return }
        removeFromWire(stream)
        let why = String(cString: nghttp2_strerror(libErrorCode))
        if let goAway {
            sink.ended.append((stream, .transportFailed("not sent: the server sent \(goAway); retry on a new connection")))
        } else {
            sink.ended.append((stream, .streamFailed("HTTP/2 request not sent (\(why))")))
        }
    }

    // MARK: Closing

    /// The connection failed: every request on it or waiting for it fails as retryable with `reason`,
    /// and the gate backs off before the next attempt.
    func fail(_ reason: String, now: ContinuousClock.Instant) {
        guard state != .idle || !pending.isEmpty else { return }
        gate.completed(.transportFailure, epoch: gate.epoch, now: now, jitter: Double.random(in: 0...1))
        let lost = streams + pending
        teardown()
        for stream in lost { sink.ended.append((stream, .transportFailed(reason))) }
    }

    /// Fails everything as `reason` without touching the gate (shutdown deadline).
    func abort(_ reason: String) {
        let lost = streams + pending
        teardown()
        for stream in lost { sink.ended.append((stream, .transportFailed(reason))) }
    }

    /// Closes a connection that has nothing in flight (drained GOAWAY, server closed it, shutdown).
    func closeQuietly() {
        let lost = streams + pending
        teardown()
        gate.connectionClosed()
        for stream in lost { sink.ended.append((stream, .transportFailed("connection closed"))) }
    }

    /// Frees the session, TLS and socket; forgets the streams (the callers complete them).
    private func teardown() {
        for stream in streams { stream.slot = -1 }
        streams.removeAll(keepingCapacity: true)
        pending.removeAll(keepingCapacity: true)
        // nghttp2_session_del frees its streams without calling back.
        if let session { nghttp2_session_del(session) }
        session = nil
        tls?.shutdown()
        tls = nil
        if descriptor >= 0 {
            events.remove(descriptor)
            close(descriptor)
            descriptor = -1
        }
        output.removeAll(keepingCapacity: true)
        outputOffset = 0
        watchingWritable = false
        readWaitsForWritable = false
        connectDeadline = nil
        pingSentAt = nil
        goAway = nil
        serverStreamLimit = 1
        isDirty = false
        state = .idle
    }
}
