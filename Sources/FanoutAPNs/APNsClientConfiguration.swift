import APNsModel

/// Everything an `APNsClient` needs. Every bound is explicit.
public struct APNsClientConfiguration: Sendable {
    /// Where requests go.
    public enum Endpoint: Sendable, Hashable {
        /// Apple's push hosts (docs/apns.md §1).
        case apple(APNsEnvironment)
        /// Apple's channel-management hosts (`api-manage-broadcast.*`, ports 2195/2196).
        case appleChannelManagement(APNsEnvironment)
        /// A custom base URL such as `https://127.0.0.1:8443` (the simulator), trusting `caFile`
        /// (PEM) in addition to nothing else when given. TLS is always verified; a `caFile` for one of
        /// Apple's hosts is refused (`validate`), so Apple is only ever trusted through the system's CAs.
        case custom(baseURL: String, caFile: String?)
    }

    /// Which HTTP/2 implementation carries the requests. Both honour every bound and guarantee of
    /// `APNsClient`; only `.nghttp2` can PING idle connections, surface GOAWAY's code and reason, and
    /// read the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    public enum Transport: String, Sendable, Hashable, CaseIterable {
        /// libcurl's multi interface (one multi handle per pooled connection).
        case curl
        /// nghttp2 sessions over OpenSSL on non-blocking sockets, driven by epoll.
        case nghttp2
    }

    public var endpoint: Endpoint
    public var transport: Transport
    /// 443 or 2197 for Apple push hosts; ignored for custom endpoints (the URL carries the port).
    public var port: Int?
    /// Long-lived HTTP/2 connections in this client's pool (with `.curl`, each its own libcurl multi).
    public var connections: Int
    /// Our cap on concurrent streams per connection; the server's SETTINGS may lower it further,
    /// and a fresh connection carries one request until the first authenticated response.
    public var maxConcurrentStreamsPerConnection: Int
    /// Requests on the wire across all connections.
    public var maxInFlight: Int
    /// Requests accepted but not yet on the wire; `send` throws `.queueFull` beyond it.
    public var maxQueued: Int
    /// From hand-off to libcurl to the response.
    public var requestTimeout: Duration
    public var connectTimeout: Duration
    /// Keep-alive for idle connections. `.nghttp2`: an HTTP/2 PING after this much silence on a
    /// connection. `.curl`: TCP keep-alive idle time (libcurl 7.88 cannot send HTTP/2 PINGs on a multi
    /// handle's connections; see the client docs), and the idle time after which a connection is
    /// re-probed with a single request before opening up again.
    public var upkeepInterval: Duration
    /// `.nghttp2` only: a PING unanswered this long means the connection is dead (its in-flight
    /// requests fail as retryable and it reconnects).
    public var pingTimeout: Duration
    /// Reconnect backoff after a connection failure: doubles from `minimum` up to `maximum`, full jitter.
    public var reconnectBackoff: (minimum: Duration, maximum: Duration)
    /// Credentials by bundle id. Several apps and keys can be configured at once.
    public var credentials: [String: APNsCredentials]
    /// Usually `.shared`, so every client in the process uses one JWT per key.
    public var tokenCache: ProviderTokenCache
    /// Asked just before each request is written (the worker's send lease); nil: everything is written.
    public var writeGate: (any WriteGate)? = nil

    public init(endpoint: Endpoint, credentials: [String: APNsCredentials], port: Int? = nil, connections: Int = 2,
                maxConcurrentStreamsPerConnection: Int = 500, maxInFlight: Int = 1000, maxQueued: Int = 10_000,
                requestTimeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(10),
                upkeepInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10),
                reconnectBackoff: (minimum: Duration, maximum: Duration) = (.milliseconds(100), .seconds(30)),
                tokenCache: ProviderTokenCache = .shared, transport: Transport = .nghttp2) {
        self.endpoint = endpoint
        self.transport = transport
        self.credentials = credentials
        self.port = port
        self.connections = connections
        self.maxConcurrentStreamsPerConnection = maxConcurrentStreamsPerConnection
        self.maxInFlight = maxInFlight
        self.maxQueued = maxQueued
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.upkeepInterval = upkeepInterval
        self.pingTimeout = pingTimeout
        self.reconnectBackoff = reconnectBackoff
        self.tokenCache = tokenCache
    }

    /// `https://host:port` without a trailing slash.
    public var baseURL: String {
        switch endpoint {
        case .apple(let environment): "https://\(environment.pushHost):\(port ?? 443)"
        case .appleChannelManagement(let environment): "https://\(environment.channelManagementHost):\(port ?? environment.channelManagementPort)"
        case .custom(let url, _): url.hasSuffix("/") ? String(url.dropLast()) : url
        }
    }

    var caFile: String? {
        if case .custom(_, let caFile) = endpoint { return caFile }
        return nil
    }

    /// Checks every bound; throws `APNsClientError.badConfiguration` naming the field.
    func validate() throws(APNsClientError) {
        func bad(_ text: String) -> APNsClientError { .badConfiguration(text) }
        guard (1...64).contains(connections) else { throw bad("connections must be 1...64, got \(connections)") }
        guard (1...10_000).contains(maxConcurrentStreamsPerConnection) else {
            throw bad("maxConcurrentStreamsPerConnection must be 1...10000, got \(maxConcurrentStreamsPerConnection)")
        }
        guard maxInFlight >= 1 else { throw bad("maxInFlight must be at least 1, got \(maxInFlight)") }
        guard maxQueued >= 1 else { throw bad("maxQueued must be at least 1, got \(maxQueued)") }
        guard requestTimeout > .zero, connectTimeout > .zero, upkeepInterval > .zero, pingTimeout > .zero else {
            throw bad("timeouts and the upkeep interval must be positive")
        }
        guard reconnectBackoff.minimum > .zero, reconnectBackoff.maximum >= reconnectBackoff.minimum else {
            throw bad("reconnect backoff needs 0 < minimum <= maximum")
        }
        if case .apple = endpoint, let port, port != 443 && port != 2197 {
            throw bad("APNs push hosts listen on 443 or 2197, not \(port)")
        }
        if case .custom(let url, _) = endpoint, !url.hasPrefix("https://") {
            throw bad("base URL must start with https:// (APNs is HTTP/2 over TLS), got '\(url)'")
        }
        if case .custom(let url, .some) = endpoint, let host = try? HTTP2Endpoint(baseURL: url).host, APNsEnvironment.isAppleHost(host) {
            throw bad("a custom CA file is for the simulator and test servers, not Apple's host \(host): Apple is verified against "
                      + "the system's CAs only (use the Apple endpoint, or drop the CA file)")
        }
        guard !credentials.isEmpty else { throw bad("no app credentials configured") }
        let keys = Set(credentials.values.map { "\($0.teamID)/\($0.keyID)" })
        guard keys.count == 1 else {
            throw bad("the apps' credentials use \(keys.count) signing keys (\(keys.sorted().joined(separator: ", "))); one client per key: "
                      + "APNs refuses a second key on a connection (403 UnrelatedKeyIdInToken)")
        }
    }
}

/// Errors from the client itself (not APNs responses, which are `APNsResult`s).
public enum APNsClientError: Error, Sendable, Hashable, CustomStringConvertible {
    case badConfiguration(String)
    /// The bounded submission queue is full: slow down (back-pressure), don't drop.
    case queueFull(limit: Int)
    /// `shutdown` was called; no new requests are accepted.
    case shutDown
    /// No credentials are configured for this bundle id.
    case unknownApp(String)
    /// libcurl could not be set up.
    case curl(String)
    /// The nghttp2 transport could not be set up (sockets, epoll, TLS context, nghttp2).
    case transportSetup(String)
    /// The provider token (JWT) for this team and key cannot be signed: a configuration error
    /// (`reason` says why; it never contains the key or a token).
    case cannotSignProviderToken(teamID: String, keyID: String, reason: String)
    /// Not written: the client's `WriteGate` no longer admits what the request was decided under
    /// (the worker lost the partition it belongs to). Nothing went to APNs.
    case withdrawn

    public var description: String {
        switch self {
        case .badConfiguration(let text): "bad APNs client configuration: \(text)"
        case .queueFull(let limit): "APNs send queue is full (\(limit) waiting): back off and retry"
        case .shutDown: "APNs client is shut down"
        case .unknownApp(let bundle): "no APNs credentials configured for app '\(bundle)'"
        case .curl(let text): "libcurl: \(text)"
        case .transportSetup(let text): "APNs transport setup: \(text)"
        case .cannotSignProviderToken(let teamID, let keyID, let reason):
            "cannot sign the APNs provider token for team \(teamID), key \(keyID): \(reason); check the .p8 key file, key id and team id"
        case .withdrawn: "withdrawn before it was written: the ownership it was decided under is gone"
        }
    }
}

extension APNsClientError {
    /// What a request refused with this error (never sent, or not signable) comes to; the one mapping
    /// every caller uses. No credentials or a key that cannot sign: a configuration error, no send for
    /// the app can succeed until it is fixed. A full queue or a client shutting down: retry later.
    public var outcome: SendOutcome {
        switch self {
        case .unknownApp(let bundle): .configError(reason: "no credentials for app \(bundle)", status: 0)
        case .cannotSignProviderToken, .badConfiguration: .configError(reason: description, status: 0)
        case .queueFull, .shutDown, .curl, .transportSetup, .withdrawn: .retry(reason: description, status: nil, after: nil)
        }
    }
}
