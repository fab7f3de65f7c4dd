import Foundation

/// Everything an `APNsSimulator` needs; defaults mirror APNs where Apple documents a value.
public struct APNsSimulatorConfiguration: Sendable {
    /// Numeric IPv4 or IPv6 address ("127.0.0.1", "0.0.0.0", "::1", "::") the device/broadcast and management
    /// listeners bind; the control endpoint binds 127.0.0.1.
    public var host: String = "127.0.0.1"
    /// Device-push and broadcast-send listener (HTTP/2 over TLS). 0 picks a free port.
    public var port: Int = 0
    /// Channel-management listener (HTTP/2 over TLS, like api-manage-broadcast). 0 picks a free port.
    public var managementPort: Int = 0
    /// Control endpoint (plain HTTP/1.1 on loopback: stats, faults, tokens, device views). 0 picks a free port.
    public var controlPort: Int = 0
    /// The 10-character team ID every JWT's `iss` must equal.
    public var teamID: String
    /// Key ID (JWT `kid`) → PEM of the P-256 public key that verifies it.
    public var keys: [String: String]
    /// Bundle IDs of the apps this team may push to (`<bundle>.push-type.liveactivity` topics).
    public var apps: [String]
    /// Apps with the broadcast capability; nil means every configured app. Broadcasts and channel requests for
    /// the others get 400 BroadcastFeatureNotEnabled, as live APNs answers.
    public var broadcastApps: [String]?
    /// SETTINGS_MAX_CONCURRENT_STREAMS after the first request with a valid JWT (before it: 1, like APNs).
    public var maxConcurrentStreams: Int = 1000
    /// PEM certificate chain and key for the TLS listeners; both nil generates a loopback CA and certificate.
    public var certificatePath: String?
    public var privateKeyPath: String?
    /// When set, every accepted push is appended to this file as one JSON line.
    public var deliveryLogPath: String?
    /// Unknown device tokens: accepted (false, default) or 400 BadDeviceToken (true).
    public var rejectUnknownTokens: Bool = false
    /// More than this many requests to one device token within one second → 429 TooManyRequests. 0 = no limit.
    public var maxRequestsPerTokenPerSecond: Int = 0
    /// Channels per app before 400 CannotCreateChannelConfig (Apple: 10,000 per app per environment).
    public var maxChannelsPerApp: Int = 10_000
    /// Faults active from start; change at runtime with `APNsSimulator.setFaults(_:)` or the control endpoint.
    public var faults: APNsSimulatorFaults = APNsSimulatorFaults()
    /// Seeds every random choice (faults, latency jitter, generated IDs) so a run can be repeated.
    public var seed: UInt64 = 1
    /// Event-loop threads serving the TLS listeners.
    public var threads: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Open connections across both TLS listeners; further connections are closed on accept.
    public var maxConnections: Int = 4096
    /// A connection whose TLS handshake has not finished after this long is closed (a silent client
    /// would otherwise hold a `maxConnections` slot forever).
    public var handshakeTimeoutSeconds: Double = 10
    /// A connection with no open stream and no traffic for this long gets a GOAWAY and is closed
    /// (APNs closes idle connections too; clients should reconnect or PING).
    public var idleTimeoutSeconds: Double = 300
    /// After a GOAWAY (fault or idle), in-flight streams are still answered; the connection is closed when the
    /// peer closes or at the latest this long after the GOAWAY.
    public var goAwayGraceSeconds: Double = 5
    /// Accepted pushes kept in memory for `deliveries()` (oldest dropped first).
    public var deliveryMemoryCapacity: Int = 100_000
    /// Distinct tokens and channels whose device view is tracked; beyond it new targets are counted, not tracked.
    public var maxTrackedTargets: Int = 1_000_000
    /// A JWT whose `iat` is older than this is 403 ExpiredProviderToken (Apple: one hour).
    public var providerTokenMaxAgeSeconds: Double = 3600
    /// A different JWT on the same connection issued (`iat`) less than this after the connection's
    /// current one is 429 TooManyProviderTokenUpdates (Apple: refresh no more than once per 20 minutes).
    public var providerTokenMinUpdateIntervalSeconds: Double = 1200
    /// Across all connections, at most this many distinct JWTs of one key (`kid`) may come into use
    /// within `providerTokenMinUpdateIntervalSeconds`; one more is 429 TooManyProviderTokenUpdates,
    /// as fleets whose replicas mint their own tokens see. 0 = no per-key limit. The default 2: Apple
    /// allows one renewal per 20 minutes, and a fleet sharing one token brings one new token per
    /// window (20–60 minutes); with a 20-minute window, replicas' clocks seconds apart can bring two
    /// new ones a little less than 20 minutes apart. A third new token within 20 minutes is churn.
    public var maxNewProviderTokensPerKey: Int = 2
    /// Wall clock in UNIX seconds; injectable so tests can age JWTs without sleeping.
    public var clock: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    public init(teamID: String, keys: [String: String], apps: [String]) {
        self.teamID = teamID
        self.keys = keys
        self.apps = apps
    }
}

/// How a device token answers (`APNsSimulator.registerToken`).
public enum TokenState: Sendable, Equatable {
    /// Accepted (200).
    case valid
    /// Accepted for this app's topic only; any other topic gets 400 DeviceTokenNotForTopic, as Apple
    /// answers a token used with an app it was not issued for.
    case validFor(bundleID: String)
    /// 410 Unregistered with `timestamp` (milliseconds since the epoch) in the body.
    case unregistered(timestampMillis: Int64)
    /// 400 BadDeviceToken.
    case bad
}
