import APNsModel
import FanoutCrypto
import FanoutHTTP2
import Foundation

/// The nghttp2 transport's thread state and loop: takes submissions, spreads them over the
/// connection pool within every bound (the same `ConnectionGate` as the libcurl transport, capped
/// by each server's SETTINGS_MAX_CONCURRENT_STREAMS), drives sockets with epoll, and completes
/// each request exactly once, outside nghttp2's callbacks.
///
/// Everything here runs on the client's one dedicated thread. Other threads only touch `queue`
/// (Mutex), `counters` (atomics, one Mutex) and `events.wake()`; hence `@unchecked Sendable`.
///
/// DNS: a new connection to a host name looks it up afresh (as Apple asks) on an `HTTP2Resolver`
/// thread, never on this one; the connect timeout covers the lookup.
final class HTTP2TransportEngine: TransportEngine, @unchecked Sendable {
    let configuration: APNsClientConfiguration
    let queue: SubmissionQueue
    let counters: APNsClientCounters
    let finished: ShutdownSignal
    /// The transport's epoll set; `wakeToken` aside, a connection's token is its index + 1.
    private let events: SocketEventSet
    private let resolver: HTTP2Resolver
    /// Internal for the tests that report ends directly.
    let sink = HTTP2CompletionSink()
    private let connections: [HTTP2ClientConnection]
    private var dispatcher: Dispatcher<HTTP2ClientConnection>
    private let readBuffer: UnsafeMutableRawBufferPointer
    private let clock = ContinuousClock()
    private var idleStreams: [HTTP2Stream] = []
    private var inFlight = 0
    private var tickets = DispatchTicketIssuer()
    private var batch: [Submission] = []

    init(configuration: APNsClientConfiguration, queue: SubmissionQueue, counters: APNsClientCounters,
         finished: ShutdownSignal) throws(APNsClientError) {
        self.configuration = configuration
        self.queue = queue
        self.counters = counters
        self.finished = finished
        let endpoint = try HTTP2Endpoint(baseURL: configuration.baseURL)
        let tlsContext: TLSClientContext
        do {
            tlsContext = try TLSClientContext(caFile: configuration.caFile)
        } catch {
            throw .transportSetup("\(error)")
        }
        do {
            events = try SocketEventSet(capacity: 64)
        } catch {
            throw .transportSetup("\(error)")
        }
        resolver = HTTP2Resolver(events: events)
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        let settings = HTTP2ClientConnection.Settings(endpoint: endpoint, connectTimeout: configuration.connectTimeout,
                                                      requestTimeout: configuration.requestTimeout,
                                                      upkeepInterval: configuration.upkeepInterval, pingTimeout: configuration.pingTimeout)
        let now = ContinuousClock.now
        connections = (0..<configuration.connections).map { [events, sink, resolver, readBuffer] index in
            HTTP2ClientConnection(
                index: index,
                gate: ConnectionGate(streamCap: configuration.maxConcurrentStreamsPerConnection, idleReprobe: nil,
                                     backoffMinimum: configuration.reconnectBackoff.minimum,
                                     backoffMaximum: configuration.reconnectBackoff.maximum, now: now),
                settings: settings, tlsContext: tlsContext, events: events, sink: sink,
                counters: counters, resolver: resolver, readBuffer: readBuffer)
        }
        dispatcher = Dispatcher(connections: connections, maxInFlight: configuration.maxInFlight, tokenCache: configuration.tokenCache,
                                gate: configuration.writeGate)
        batch.reserveCapacity(min(configuration.maxInFlight, 1024))
    }

    deinit { readBuffer.deallocate() }

    func wakeup() { events.wake() }

    func run() {
        while true {
            let now = clock.now
            let (closed, deadline) = queue.closing
            if let deadline, now >= deadline {
                abortEverything(reason: "shutdown deadline passed before APNs answered; the push may or may not have been delivered")
                break
            }
            for answer in resolver.take() { connections[answer.connection].resolved(answer, now: now) }
            let spare = dispatcher.dispatch(from: queue, into: &batch, inFlight: inFlight, now: now) { submission, connection, token in
                start(submission, on: connection, token: token, now: now)
            }
            for connection in connections {
                connection.tick(now: now)
                if connection.isDirty { connection.flush(now: now) }
            }
            let completedSome = !sink.ended.isEmpty
            if completedSome { completeEnded() }
            if closed && inFlight == 0 && queue.count == 0 { break }
            publishCounters()
            // Completions freed capacity: dispatch again before sleeping.
            if completedSome || (spare && queue.count > 0) { continue }
            wait(now: now, deadline: deadline, canTakeMore: spare)
        }
        for connection in connections { connection.closeQuietly() }
        completeEnded()
        publishCounters()
        finished.signal()
    }

    private func start(_ submission: Submission, on connection: HTTP2ClientConnection, token: ProviderTokenCache.Token,
                       now: ContinuousClock.Instant) {
        let stream = idleStreams.popLast() ?? HTTP2Stream()
        stream.request = submission.request
        stream.authorization = token.bearer
        stream.carried.begin(tickets.issue(), completion: submission.completion)
        stream.credentials = submission.credentials
        stream.providerToken = token
        // The epoch first: if the connection fails while opening, this stream's failure is already counted.
        stream.gateEpoch = connection.gate.dispatched(now: now)
        inFlight += 1
        connection.submit(stream, now: now)
    }

    /// Completes every reported end whose ticket matches the request its stream carries; counts the
    /// others in `unmatchedEnds` and leaves their stream alone (internal for the tests that drive it).
    func completeEnded() {
        let now = clock.now
        // Completions never reach nghttp2, so the list does not grow while it is walked; swap it out anyway.
        let ended = sink.ended
        sink.ended.removeAll(keepingCapacity: true)
        for report in ended {
            let stream = report.stream
            // A report for a dispatch already completed (the object may carry another request by now,
            // on another connection with the same stream id): it must complete nothing.
            guard let ticket = report.ticket, let completion = stream.carried.take(ticket) else {
                counters.unmatchedEnds.add(1, ordering: .relaxed)
                continue
            }
            let connection = connections[stream.connectionIndex]
            inFlight -= 1
            var response: APNsHTTPResponse
            let event: ConnectionGate.Completion
            switch report.end {
            case .response:
                response = stream.response
                event = .response(&response, credentials: stream.credentials, providerToken: stream.providerToken,
                                  tokenCache: configuration.tokenCache)
            case .streamFailed(let text):
                response = APNsHTTPResponse(status: nil, transportFailure: "transport: \(text) [nghttp2]")
                // No answer: a reset probe must not open the connection to the full cap.
                event = .streamReset
            case .transportFailed(let text):
                response = APNsHTTPResponse(status: nil, transportFailure: "transport: \(text) [nghttp2]")
                event = .transportFailure
            case .timedOut(let text):
                response = APNsHTTPResponse(status: nil, transportFailure: "transport: \(text) [nghttp2]")
                event = .requestTimedOut(dispatchedAt: stream.dispatchedAt)
            }
            if connection.gate.completed(event, epoch: stream.gateEpoch, now: now, jitter: Double.random(in: 0...1)) {
                counters.connectionBackoffs.add(1, ordering: .relaxed)
            }
            stream.reset()
            if idleStreams.count < configuration.maxInFlight { idleStreams.append(stream) }
            counters.completed.add(1, ordering: .relaxed)
            counters.inFlight.store(inFlight, ordering: .relaxed)   // exact when the completion runs
            completion(.success(response))
        }
    }

    private func wait(now: ContinuousClock.Instant, deadline: ContinuousClock.Instant?, canTakeMore: Bool) {
        var until = now + .seconds(1)
        for connection in connections {
            if let next = connection.nextTimer(now: now) { until = min(until, next) }
            // A backoff that is over matters only to dispatch, which runs when there is room: waking
            // for it now would spin the loop (and starve the sockets) while maxInFlight is reached.
            if let backoff = connection.gate.backoffDeadline, backoff > now { until = min(until, backoff) }
        }
        if let deadline { until = min(until, deadline) }
        let timeout = until <= now ? 0 : Int32(min(1000, (until - now).milliseconds + 1))
        if timeout == 0 { return }
        if canTakeMore {
            guard queue.prepareToSleep() else { return }
            poll(timeout: timeout)
            queue.awake()
        } else {
            poll(timeout: timeout)
        }
    }

    private func poll(timeout: Int32) {
        // An interrupted wait is like a timeout: the loop looks at everything again; a broken set cannot happen
        // to an epoll descriptor this engine owns and never closes while it runs.
        _ = events.wait(timeoutMillis: timeout)
        events.forEachReady { token, ready in
            guard token != SocketEventSet.wakeToken else { return }
            let index = Int(token) - 1
            guard index >= 0, index < connections.count else { return }
            connections[index].service(events: ready, now: clock.now)
        }
    }

    /// Shutdown deadline: fail everything still queued or on the wire, each exactly once.
    private func abortEverything(reason: String) {
        for connection in connections { connection.abort(reason) }
        completeEnded()
        queue.failRemaining(reason: "client shut down before the request was sent", scratch: &batch)
    }

    private func publishCounters() {
        counters.inFlight.store(inFlight, ordering: .relaxed)
        counters.connections.store(connections.reduce(0) { $0 + ($1.isOpen ? 1 : 0) }, ordering: .relaxed)
    }
}
