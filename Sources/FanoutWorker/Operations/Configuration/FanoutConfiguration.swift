import FanoutAPNs

/// Every knob of `fanout run`, typed and validated. Built by `FanoutConfiguration.load(path:environment:)`.
///
/// Defaults are those of the README's "Configuration" table (docs/design.md says what they tune).
/// Value semantics: pass it around freely; it never changes after load.
public struct FanoutConfiguration: Sendable, Equatable {
    public var kafka: Kafka
    public var apps: [App]
    public var apns: APNs
    public var engine: Engine
    public var backpressure: Backpressure
    /// On SIGTERM/SIGINT: how long to drain in-flight sends before the final commit.
    public var shutdownTimeout: Duration
    public var admin: Admin
    public var logLevel: LogLevel
    /// Every knob with its value and source, in reading order (for `describe()`).
    public var knobs: [ConfigKnob]

    public struct Kafka: Sendable, Equatable {
        public var bootstrapServers: String
        public var groupID: String
        /// Static membership (KIP-345, librdkafka's `group.instance.id`): a stable name per worker, e.g.
        /// the pod name. A restarted worker with the same name takes its partitions back without a
        /// rebalance, if it returns within the session timeout; stopping does not leave the group, so
        /// a worker that does not come back holds its partitions for a whole session timeout.
        /// nil: a dynamic member, which leaves the group on stop.
        public var groupInstanceID: String?
        public var topics: Topics
        /// How often done offsets are committed (also on revoke and shutdown).
        public var commitInterval: Duration
        /// librdkafka properties passed through verbatim (`kafka.properties.*`), e.g. `sasl.mechanism`,
        /// over `defaultKafkaProperties`.
        public var properties: [String: String]
    }

    /// librdkafka properties Fanout sets unless the configuration does. The consumer-only ones
    /// (`consumerOnlyKafkaProperties`) are not given to the producer, nor the producer-only ones
    /// (`producerOnlyKafkaProperties`) to the consumers (librdkafka would warn that it ignores each).
    /// `fetch.wait.max.ms`: librdkafka's 500 ms is paid whenever a partition is newly fetched or
    /// resumed with nothing buffered (a token partition read on assignment, a partition resumed after
    /// backpressure); 10 ms costs an idle worker about 100 small fetch requests a second per broker.
    /// `isolation.level`: librdkafka's default too, written out because Fanout rests on it — records of
    /// aborted transactions are never read; another value is refused (`requiredKafkaProperties`).
    /// `reconnect.backoff.max.ms`: librdkafka backs off up to 10 s between attempts to reach a broker
    /// that dropped its connections, so partitions stayed without delivery up to ≈9 s after a 2 s broker
    /// outage (README "FleetTests"); 1 s is the Java client's default.
    /// `queued.max.messages.kbytes`: what each of the worker's three consumers (intake, the token
    /// follower, the state restorer) may prefetch: librdkafka's 64 MiB each would let a backlog hold up
    /// to ≈190 MiB in buffers; 16 MiB is ≈80,000 events of 200 bytes, seconds of work at full speed.
    /// `linger.ms`: the worker's producer writes a state record for every delivered send (and the dead
    /// letters). librdkafka wakes its broker thread for the first record queued on an idle partition,
    /// so its 5 ms meant up to one wake-up per partition every 5 ms under load — ≈10,000 a second with
    /// 48 partitions (16,000 `poll` calls a second measured) — and small batches; 50 ms cuts both
    /// tenfold and only delays when an offset may be committed (every `commit_interval`, 1 s), never a push.
    public static let defaultKafkaProperties = ["fetch.wait.max.ms": "10", "isolation.level": "read_committed",
                                                "reconnect.backoff.max.ms": "1000", "queued.max.messages.kbytes": "16384",
                                                "linger.ms": "50"]
    /// The defaults only a consumer understands.
    public static let consumerOnlyKafkaProperties: Set<String> = ["fetch.wait.max.ms", "isolation.level", "queued.max.messages.kbytes"]
    /// The defaults only a producer understands.
    public static let producerOnlyKafkaProperties: Set<String> = ["linger.ms"]

    public struct Topics: Sendable, Equatable {
        public var activityUpdates: String
        public var broadcastUpdates: String
        public var activityTokens: String
        public var activityTokenFeedback: String
        /// Appended to a source topic's name to get its dead-letter topic.
        public var dlqSuffix: String
        /// The compacted changelog of per-target state handed over between owners (docs/design.md §11),
        /// partitioned like activity-updates; empty: no handoff (every new owner starts every target afresh).
        public var state: String = "fanout-state"

        public func deadLetterTopic(for topic: String) -> String { topic + dlqSuffix }
    }

    public enum APNsEnvironment: String, Sendable, Equatable, CaseIterable {
        case production, sandbox
    }

    public struct App: Sendable, Equatable {
        public var bundleID: String
        public var teamID: String
        public var keyID: String
        /// Path of the `.p8` signing key (checked to exist and be readable at load).
        public var keyPath: String
        public var environment: APNsEnvironment
        /// The app declares `NSSupportsLiveActivitiesFrequentUpdates`: use `engine.frequent` budgets.
        public var frequentUpdates: Bool
        /// Per attributes type overrides, keyed by the Swift type name (e.g. `ExportAttributes`).
        public var attributes: [String: AttributesSettings]
        /// Storage policy of broadcast channels known in advance, keyed by channel id. Channels not
        /// listed are looked up through channel management (cached) when a management endpoint is
        /// known, else sent with `apns-expiration: 0`.
        public var broadcastChannels: [String: ChannelStorage]

        public init(bundleID: String, teamID: String, keyID: String, keyPath: String, environment: APNsEnvironment = .production,
                    frequentUpdates: Bool = false, attributes: [String: AttributesSettings] = [:],
                    broadcastChannels: [String: ChannelStorage] = [:]) {
            self.bundleID = bundleID
            self.teamID = teamID
            self.keyID = keyID
            self.keyPath = keyPath
            self.environment = environment
            self.frequentUpdates = frequentUpdates
            self.attributes = attributes
            self.broadcastChannels = broadcastChannels
        }
    }

    /// A broadcast channel's message-storage policy, named as `fanout channels create --storage` names it.
    public enum ChannelStorage: String, Sendable, Equatable, CaseIterable {
        /// Policy 0: nothing stored; sends carry `apns-expiration: 0`.
        case none
        /// Policy 1: the latest message is stored (up to 8 h); sends carry the stale date as expiration.
        case mostRecent = "most-recent"
    }

    public struct AttributesSettings: Sendable, Equatable {
        /// content_state fields whose change alone is a minor update; nil = use `engine.progress_fields`.
        public var progressFields: [String]?
        /// nil = use `engine.default_stale_after`.
        public var staleAfter: Duration?

        public init(progressFields: [String]? = nil, staleAfter: Duration? = nil) {
            self.progressFields = progressFields
            self.staleAfter = staleAfter
        }
    }

    public struct APNs: Sendable, Equatable {
        /// Custom base URL (the simulator), e.g. `https://127.0.0.1:8443`; nil = Apple's host per environment.
        public var baseURL: String?
        /// Custom base URL for channel management; nil = Apple's management host per environment.
        public var managementBaseURL: String?
        /// Extra CA bundle to trust (the simulator's); TLS verification is never turned off.
        public var caFile: String?
        /// 443 or 2197, for Apple's hosts (ignored when `baseURL` is set: it carries its own port).
        public var port: Int
        public var requestTimeout: Duration
        /// A lane whose every send fails (no HTTP answer, or 5xx) for this long makes `/readyz` not ready.
        public var laneFailingAfter: Duration
        /// The provider-token window; Apple requires 20…60 minutes. Every JWT's `iat` is UNIX time
        /// floored to a multiple of it, so replicas with the same value present the same token and
        /// replace it at the same boundary (`ProviderTokenCache`).
        public var jwtRefreshInterval: Duration
        /// The HTTP/2 implementation under every APNs client: `nghttp2` (default: PINGs idle
        /// connections, reports GOAWAY reasons and the server's stream limit, ≈5× cheaper per request) or `curl`.
        public var transport: APNsClientConfiguration.Transport
        public var activity: APNsLane
        public var broadcast: APNsLane
    }

    public struct APNsLane: Sendable, Equatable {
        /// Long-lived HTTP/2 connections per environment for this lane.
        public var connections: Int
        /// Streams in flight across this lane's connections (also capped by the server's limit).
        public var maxInFlight: Int
        /// Sends waiting for a stream; beyond it the lane pushes back.
        public var maxQueued: Int
    }

    /// One per-target send budget: spacing plus a priority-10 token bucket.
    public struct Budget: Sendable, Equatable {
        public var minInterval: Duration
        public var priority10PerHour: Int
        public var priority10Burst: Int
    }

    public struct PushToStartBudget: Sendable, Equatable {
        public var perHour: Int
        public var burst: Int
    }

    public struct Engine: Sendable, Equatable {
        /// Per-activity lane, apps without frequent updates.
        public var standard: Budget
        /// Per-activity lane, apps with `frequent_updates: true`.
        public var frequent: Budget
        /// Broadcast lane, per channel.
        public var broadcast: Budget
        /// Per push-to-start token.
        public var pushToStart: PushToStartBudget
        public var maxQuiet: Duration
        /// Absolute change of a progress field's number that makes a minor update worth sending.
        public var minProgressDelta: Double
        /// content_state progress fields per attributes type (`*` = any type).
        public var progressFields: [String: [String]]
        public var defaultStaleAfter: Duration
        public var tokenWait: Duration
        /// Ceiling of a target's retry backoff after 429/5xx/transport failures (exponential from
        /// 500 ms, full jitter; APNs's retry-after still applies as a floor).
        public var backoffCap: Duration
        /// After an outage, targets backed off by transport failures or 5xx retry within this window of
        /// the first answer from APNs on their lane (spread uniformly), not after their own backoff.
        public var recoveryRamp: Duration
        /// Event ids remembered per partition to drop duplicates (`FanoutEngine`: one window per partition).
        public var dedupeWindow: Int
        public var maxEventBytes: Int
        /// How long an ended activity (or channel) is remembered after its end or its last event:
        /// later events are dropped as after-end meanwhile; then it is forgotten and its token retired.
        public var endedRetention: Duration
        /// Targets tracked at most per worker; past it the least recently active idle ones are evicted.
        public var maxTrackedTargets: Int
    }

    public struct Backpressure: Sendable, Equatable {
        /// Events read from one partition and not yet done; past it the partition is paused.
        public var maxPendingPerPartition: Int
        /// Sends in flight across the process (both lanes); past it intake pauses.
        public var maxInFlight: Int
        /// Targets with pending or in-flight state across the process.
        public var maxPendingTargets: Int
        /// Paused partitions resume when their load falls below this fraction of the bound.
        public var resumeRatio: Double
    }

    public struct Admin: Sendable, Equatable {
        public var host: String
        /// 0 = any free port (the server reports the bound one).
        public var port: Int
        public var maxConnections: Int
        public var readTimeout: Duration
        public var maxRequestBytes: Int
        /// `/livez` answers 503 when records wait uncommitted and no committed offset moved for this
        /// long with nothing reported to explain it (`ProgressWatch`).
        public var livenessWindow: Duration
    }

    /// The budget for a target of `app` on `lane`-style use: broadcast, frequent or standard.
    public func budget(for app: App?, broadcast: Bool) -> Budget {
        if broadcast { return engine.broadcast }
        return app?.frequentUpdates == true ? engine.frequent : engine.standard
    }

    /// Progress fields for an attributes type: the app's override, else the engine's map, else `*`.
    public func progressFields(app: App?, attributesType: String?) -> [String] {
        if let type = attributesType, let fields = app?.attributes[type]?.progressFields { return fields }
        if let type = attributesType, let fields = engine.progressFields[type] { return fields }
        return engine.progressFields["*"] ?? []
    }

    public func staleAfter(app: App?, attributesType: String?) -> Duration {
        if let type = attributesType, let stale = app?.attributes[type]?.staleAfter { return stale }
        return engine.defaultStaleAfter
    }

    public func app(bundleID: String) -> App? { apps.first { $0.bundleID == bundleID } }
}
