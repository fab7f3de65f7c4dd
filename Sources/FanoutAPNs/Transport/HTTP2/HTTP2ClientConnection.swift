import APNsModel
import FanoutCrypto
import FanoutHTTP2
import Foundation

/// One pooled connection of the nghttp2 transport: a non-blocking TCP socket, a client TLS session
/// (verified, ALPN h2) and an nghttp2 client session, reopened on demand after it closes.
///
/// Confined to the transport thread. Owns the descriptor, the TLS session and the HTTP/2 session
/// (released in `teardown`, which `deinit` also runs); the session calls back into it only from inside
/// `service`, `flush`, `tick` and `submit` on that thread.
///
/// Split by concern: opening (`+Opening`), timers (`+Timers`), the session's callbacks (`+Session`).
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
    var state: State = .idle
    /// On the wire (each stream knows its `slot`).
    var streams: [HTTP2Stream] = []
    /// Dispatched while the connection was being opened; submitted once the session is up.
    var pending: [HTTP2Stream] = []
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (1 until its SETTINGS arrive, as APNs starts).
    var serverStreamLimit = 1
    var goAway: APNsClient.GoAway?
    /// Set when nghttp2 has frames to write; the engine flushes dirty connections in one pass.
    var isDirty = false
    /// Request-body bytes handed to nghttp2 and not yet packed into DATA frames, and what one body
    /// weighs lately: with the server's connection window they bound what is dispatched here (`windowRoom`).
    var unsentBodyBytes = 0
    private var typicalBodyBytes = 4_096

    let settings: Settings
    let tlsContext: TLSClientContext
    let events: SocketEventSet
    let sink: HTTP2CompletionSink
    let counters: APNsClientCounters
    let resolver: HTTP2Resolver
    private let readBuffer: UnsafeMutableRawBufferPointer
    var descriptor: Int32 = -1
    var tls: TLSConnection?
    var session: HTTP2Session?
    private var output = HTTP2OutputPump()
    var watchingWritable = false
    /// SSL_read needed to write first and the socket was full: the read is retried when writable.
    private var readWaitsForWritable = false
    var connectDeadline: ContinuousClock.Instant?
    var lastRead = ContinuousClock.now
    var pingSentAt: ContinuousClock.Instant?
    var attempts = 0
    var addresses: [SocketAddress] = []
    var resolveSerial: UInt64 = 0
    var addressIndex = 0
    var nextStreamScan = ContinuousClock.now
    /// Every submitted stream's request deadline, in submission order (see `DeadlineQueue`): the
    /// timeout scan visits only what is due, never every stream on the wire.
    var deadlines = DeadlineQueue<HTTP2Stream>()
    var expired: [DeadlineQueue<HTTP2Stream>.Entry] = []

    private var headers = HTTP2RequestHeaders()

    static let streamScanInterval: Duration = .milliseconds(100)

    init(index: Int, gate: ConnectionGate, settings: Settings, tlsContext: TLSClientContext, events: SocketEventSet,
         sink: HTTP2CompletionSink, counters: APNsClientCounters, resolver: HTTP2Resolver,
         readBuffer: UnsafeMutableRawBufferPointer) {
        self.index = index
        self.gate = gate
        self.settings = settings
        self.tlsContext = tlsContext
        self.events = events
        self.sink = sink
        self.counters = counters
        self.resolver = resolver
        self.readBuffer = readBuffer
    }

    deinit { teardown() }

    var inFlight: Int { streams.count + pending.count }
    var isOpen: Bool { state != .idle }
    var token: UInt64 { UInt64(index) + 1 }

    /// Requests this connection may carry in total right now: the gate's answer, capped by the
    /// server's limit once the session is up; none while a GOAWAY drains it.
    func capacity(now: ContinuousClock.Instant) -> Int {
        // Ask the gate first, even while draining: it moves a finished backoff on to fresh.
        let allowed = gate.capacity(inFlight: inFlight, now: now)
        switch state {
        case .draining: return 0
        case .ready: return min(allowed, serverStreamLimit, inFlight + windowRoom)
        case .idle, .resolving, .connecting, .handshaking: return allowed
        }
    }

    /// How many more requests the server's connection window takes now: none while a body handed to
    /// nghttp2 still waits for the window (at least one otherwise, so a closed window still gets a
    /// request to carry). nghttp2 sends a body the window cut in two after every stream that has sent
    /// less, so while new streams kept coming, such a request waited 250–800 ms behind later ones
    /// (workload 3 of scripts/bench, under the simulator's 64 KiB window). Kept in the client's queue
    /// instead, requests leave in order, on whichever connection has room first.
    private var windowRoom: Int {
        guard let session, unsentBodyBytes == 0 else { return 0 }
        return max(1, session.remoteWindowSize / typicalBodyBytes)
    }

    // MARK: Requests

    /// Takes a dispatched stream: on the wire now when the session is up, else once it is (opening
    /// the connection when idle).
    func submit(_ stream: HTTP2Stream, now: ContinuousClock.Instant) {
        stream.connectionIndex = index
        stream.dispatchedAt = now
        stream.deadline = now + settings.requestTimeout
        if let ticket = stream.carried.ticket { deadlines.append(stream, ticket: ticket, deadline: stream.deadline) }
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
            sink.report(stream, .streamFailed("connection is going away (internal)"))
        }
    }

    func start(_ stream: HTTP2Stream) {
        guard let session else { return }
        headers.build(for: stream.request, authorization: stream.authorization, endpoint: settings.endpoint)
        let streamID: Int32
        do {
            streamID = try session.submitRequest(&headers.block, hasBody: !stream.request.body.isEmpty, context: stream)
        } catch {
            sink.report(stream, .transportFailed("cannot start an HTTP/2 stream: \(error.reason)"))
            return
        }
        stream.streamID = streamID
        stream.slot = streams.count
        streams.append(stream)
        let bodyBytes = stream.request.body.count
        unsentBodyBytes += bodyBytes
        typicalBodyBytes = max(1, (typicalBodyBytes * 7 + bodyBytes) / 8)
        isDirty = true
    }

    // MARK: I/O

    /// Handles readiness of this connection's socket.
    func service(events ready: SocketEventSet.Events, now: ContinuousClock.Instant) {
        switch state {
        case .idle, .resolving:
            return
        case .connecting:
            finishConnect(now: now)
        case .handshaking:
            continueHandshake(now: now)
        case .ready, .draining:
            if ready.contains(.readable) || (readWaitsForWritable && ready.contains(.writable)) {
                guard readAll(now: now) else { return }
            }
            flush(now: now)
        }
    }

    /// Feeds everything readable to nghttp2. False when the connection closed.
    func readAll(now: ContinuousClock.Instant) -> Bool {
        guard let tls, let session else { return false }
        readWaitsForWritable = false
        while state == .ready || state == .draining {
            switch tls.read(into: readBuffer) {
            case .bytes(let count):
                lastRead = now
                do {
                    try session.receive(UnsafeRawBufferPointer(rebasing: readBuffer[..<count]))
                } catch {
                    fail("HTTP/2 error from \(settings.endpoint.authority): \(error.reason)", now: now)
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
        switch output.flush(session, over: tls) {
        case .drained:
            break
        case .waitsForWritable:
            watch(writable: true)
            return
        case .waitsForReadable:
            // TLS needs the server's bytes first; the next readable event reads, then flushes again.
            watch(writable: readWaitsForWritable)
            return
        case .closed:
            return fail("\(settings.endpoint.authority) closed the connection while we were writing", now: now)
        case .failed(let text):
            return fail(text, now: now)
        case .sessionFailed(let reason):
            return fail("HTTP/2 error: \(reason)", now: now)
        }
        watch(writable: readWaitsForWritable)
        if closeIfSessionEnded(now: now) { return }
        if state == .draining && streams.isEmpty { closeQuietly() }
    }

    /// nghttp2 wants neither to read nor to write: the session is over, whatever the socket says (it
    /// sent a GOAWAY for an error it found, or GOAWAYs were exchanged). Left open it would look ready
    /// while its streams waited for the request timeout and new requests failed at once without
    /// backoff. A GOAWAY the server sent, drained of our requests, closes quietly; anything else is a
    /// connection failure: in-flight requests fail as retry and the gate backs off before reconnecting.
    /// Called once nghttp2's output is written (after which `wantsWrite` is its last word).
    private func closeIfSessionEnded(now: ContinuousClock.Instant) -> Bool {
        guard let session, !session.wantsRead, !session.wantsWrite else { return false }
        if goAway != nil, inFlight == 0 {
            closeQuietly()
        } else {
            fail("nghttp2 ended the HTTP/2 session with \(settings.endpoint.authority)" + (goAway.map { " after \($0)" } ?? " (an error it found in what the server sent)"),
                 now: now)
        }
        return true
    }

    func watch(writable: Bool) {
        guard descriptor >= 0, writable != watchingWritable else { return }
        watchingWritable = writable
        events.modify(descriptor, token: token, writable: writable)
    }

    // MARK: Closing

    /// The connection failed: every request on it or waiting for it fails as retryable with `reason`,
    /// and the gate backs off before the next attempt.
    func fail(_ reason: String, now: ContinuousClock.Instant) {
        guard state != .idle || !pending.isEmpty else { return }
        if gate.completed(.transportFailure, epoch: gate.epoch, now: now, jitter: Double.random(in: 0...1)) {
            counters.connectionBackoffs.add(1, ordering: .relaxed)
        }
        let lost = streams + pending
        teardown()
        for stream in lost { sink.report(stream, .transportFailed(reason)) }
    }

    /// Fails everything as `reason` without touching the gate (shutdown deadline).
    func abort(_ reason: String) {
        let lost = streams + pending
        teardown()
        for stream in lost { sink.report(stream, .transportFailed(reason)) }
    }

    /// Closes a connection that has nothing in flight (drained GOAWAY, server closed it, shutdown).
    func closeQuietly() {
        let lost = streams + pending
        teardown()
        gate.connectionClosed()
        for stream in lost { sink.report(stream, .transportFailed("connection closed")) }
    }

    /// Frees the session, TLS and socket; forgets the streams (the callers complete them).
    private func teardown() {
        for stream in streams { stream.slot = -1 }
        streams.removeAll(keepingCapacity: true)
        unsentBodyBytes = 0
        pending.removeAll(keepingCapacity: true)
        deadlines.removeAll()  // every stream that had one is reported by the caller
        // The session is deleted without calling back for its streams.
        session = nil
        tls?.shutdown()
        tls = nil
        if descriptor >= 0 {
            events.remove(descriptor)
            close(descriptor)
            descriptor = -1
        }
        output.reset()
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
