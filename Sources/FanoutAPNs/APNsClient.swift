import APNsModel
import Foundation
import Synchronization

/// Fanout's transport to APNs: HTTP/2 over TLS, multiplexed over a small pool of long-lived
/// connections, with token auth from a shared `ProviderTokenCache`. The HTTP/2 implementation is
/// `configuration.transport`: libcurl's multi interface (`.curl`) or nghttp2 sessions over OpenSSL
/// (`.nghttp2`); both keep every guarantee below.
///
/// Threading: one dedicated thread per client drives the transport (never Swift's cooperative pool).
/// `send` only enqueues (bounded; throws `.queueFull`), and completions run on that thread: keep
/// them short. Guarantees: every accepted request completes exactly once, with an HTTP response,
/// a transport failure (classified `.retry`), or a shutdown failure; a connection that dies fails
/// its in-flight requests as `.retry`, never drops them. Stream limit: a fresh connection carries one
/// request until the first authenticated response, then up to the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS capped by `maxConcurrentStreamsPerConnection`. A connection that
/// fails (reset, GOAWAY refusing requests, timeout, TLS) reconnects after a jittered exponential backoff.
///
/// Keep-alive with `.nghttp2`: an HTTP/2 PING after `upkeepInterval` of silence; no answer within
/// `pingTimeout` fails the connection's in-flight requests as `.retry` and reconnects. A GOAWAY's
/// error code, last stream id and debug reason are surfaced (`stats.lastGoAway`, and in the
/// `transportFailure` of the requests it refused); requests at or below its last stream id finish normally.
///
/// Keep-alive with `.curl`: libcurl 7.88's `curl_easy_upkeep` only reaches connections of the easy interface's
/// own cache, not a multi handle's, so idle connections are kept with TCP keep-alive
/// (`upkeepInterval`) and re-probed with a single request after that much idle time.
public final class APNsClient: Sendable {
    public let configuration: APNsClientConfiguration
    private let queue: SubmissionQueue
    private let counters = APNsClientCounters()
    private let finished = ShutdownSignal()
    private let engine: any TransportEngine
    /// Per configured app: its credentials and the `apns-topic` of its Live Activity pushes, made once,
    /// not once a push.
    private let apps: [String: (credentials: APNsCredentials, liveActivityTopic: String)]

    /// Point-in-time numbers for metrics and health.
    public struct Stats: Sendable, Hashable {
        public var inFlight: Int
        public var queued: Int
        /// Connections established or being established (not idle-fresh, not backing off).
        public var connections: Int
        public var completed: Int
        /// `.nghttp2` only (0 / nil with `.curl`): PING ACKs received, the latest
        /// SETTINGS_MAX_CONCURRENT_STREAMS a server sent, and the latest GOAWAY received.
        public var pingsAcknowledged: Int
        public var serverMaxConcurrentStreams: Int?
        public var lastGoAway: GoAway?
        /// End reports (a response, reset, failure or timeout of one dispatch) that matched no request
        /// in flight: each dispatch carries a ticket never reused, and a report completes only the
        /// request holding its ticket, so a stale one completes nothing and is counted here. Should
        /// stay 0; anything else is a transport bug worth a metric and an alert, never a lost or doubled completion.
        public var unmatchedEnds: Int = 0
        /// Times a connection was put into backoff by a failure (reset, GOAWAY that lost requests, TLS,
        /// no answer to a PING or to a request while nothing else was answered either). A request that
        /// timed out while its connection answered others is not one: that connection keeps its streams.
        public var connectionBackoffs: Int = 0
    }

    /// A GOAWAY frame as received: the HTTP/2 error code (0 is NO_ERROR), the last stream the server
    /// processed, and the `reason` of its JSON debug data (or the raw debug text when not JSON).
    public struct GoAway: Sendable, Hashable, CustomStringConvertible {
        public var errorCode: UInt32
        public var errorName: String
        public var lastStreamID: Int32
        public var reason: String?

        public var description: String {
            "GOAWAY \(errorName) (last stream \(lastStreamID)" + (reason.map { ", reason \($0)" } ?? "") + ")"
        }
    }

    public init(configuration: APNsClientConfiguration) throws {
        try configuration.validate()
        self.configuration = configuration
        queue = SubmissionQueue(capacity: configuration.maxQueued)
        apps = configuration.credentials.reduce(into: [:]) { apps, app in
            apps[app.key] = (app.value, APNsRequest.liveActivityTopic(app.key))
        }
        let engine: any TransportEngine = switch configuration.transport {
        case .curl: try CurlTransportEngine(configuration: configuration, queue: queue, counters: counters, finished: finished)
        case .nghttp2: try HTTP2TransportEngine(configuration: configuration, queue: queue, counters: counters, finished: finished)
        }
        self.engine = engine
        let thread = Thread.named("fanout-apns") { engine.run() }
        thread.stackSize = 1 << 20
        thread.start()
    }

    deinit {
        // Without an explicit shutdown, stop now: queued and in-flight requests fail as retryable.
        queue.close(deadline: .now)
        engine.wakeup()
    }

    /// Enqueues `request`; `completion` runs once on the client thread. Throws `.queueFull`,
    /// `.shutDown` or `.unknownApp` without calling `completion`. With a `permit`, the configuration's
    /// `writeGate` is asked just before the request is written; one it no longer admits completes
    /// withdrawn (`isWithdrawn`), never written.
    public func send(_ request: APNsRequest, permit: WritePermit? = nil,
                     completion: @escaping @Sendable (APNsResult) -> Void) throws(APNsClientError) {
        guard let app = apps[request.bundleID] else { throw .unknownApp(request.bundleID) }
        try submit(request.http(liveActivityTopic: app.liveActivityTopic), credentials: app.credentials, permit: permit,
                   completion: .push(completion))
    }

    /// Sends and waits. Enqueue failures come back as results (queue full and shut down as `.retry`,
    /// an unknown app as `.configError`) so a caller has one thing to handle.
    public func send(_ request: APNsRequest) async -> APNsResult {
        await withCheckedContinuation { continuation in
            do throws(APNsClientError) {
                try send(request) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: Self.result(for: error))
            }
        }
    }

    /// The raw HTTP exchange (used by the channel-management client).
    func perform(_ request: APNsHTTPRequest, permit: WritePermit? = nil,
                 completion: @escaping @Sendable (Result<APNsHTTPResponse, APNsClientError>) -> Void) throws(APNsClientError) {
        guard let app = apps[request.bundleID] else { throw .unknownApp(request.bundleID) }
        try submit(request, credentials: app.credentials, permit: permit, completion: .exchange(completion))
    }

    private func submit(_ request: APNsHTTPRequest, credentials: APNsCredentials, permit: WritePermit?,
                        completion: SubmissionCompletion) throws(APNsClientError) {
        if try queue.append(Submission(request: request, credentials: credentials, permit: permit, completion: completion)) {
            engine.wakeup()
        }
    }

    func perform(_ request: APNsHTTPRequest) async throws(APNsClientError) -> APNsHTTPResponse {
        let outcome: Result<APNsHTTPResponse, APNsClientError> = await withCheckedContinuation { continuation in
            do throws(APNsClientError) {
                try perform(request) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try outcome.get()
    }

    /// Interrupts the client thread's wait: its `writeGate` opened again, so queued requests can go.
    public func wake() { engine.wakeup() }

    /// Whether `result` is of a request the `writeGate` withdrew: nothing was written, APNs never saw it.
    public static func isWithdrawn(_ result: APNsResult) -> Bool {
        result.withdrawn
    }

    /// Stops intake, waits for queued and in-flight requests to complete until `deadline`, then fails
    /// whatever is left (each exactly once, as `.retry`) and stops the thread.
    public func shutdown(deadline: ContinuousClock.Instant) async {
        queue.close(deadline: deadline)
        engine.wakeup()
        await finished.wait()
    }

    public var stats: Stats {
        Stats(inFlight: counters.inFlight.load(ordering: .relaxed), queued: queue.count,
              connections: counters.connections.load(ordering: .relaxed),
              completed: counters.completed.load(ordering: .relaxed),
              pingsAcknowledged: counters.pingsAcknowledged.load(ordering: .relaxed),
              serverMaxConcurrentStreams: Optional(counters.serverMaxConcurrentStreams.load(ordering: .relaxed)).flatMap { $0 < 0 ? nil : $0 },
              lastGoAway: counters.lastGoAway.withLock { $0 },
              unmatchedEnds: counters.unmatchedEnds.load(ordering: .relaxed),
              connectionBackoffs: counters.connectionBackoffs.load(ordering: .relaxed))
    }

    static func result(for error: APNsClientError) -> APNsResult {
        var result = APNsResult(status: nil, reason: nil, apnsID: nil, apnsUniqueID: nil, timestampMillis: nil,
                                outcome: error.outcome, transportFailure: error.description)
        if case .withdrawn = error { result.withdrawn = true }
        return result
    }
}
