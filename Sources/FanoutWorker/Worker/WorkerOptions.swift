import FanoutCore

/// Overrides for tests and `fanout demo` that are not operator knobs. Production uses the defaults.
public struct WorkerOptions: Sendable {
    /// librdkafka properties added to every Kafka client of the worker (after the configuration's own),
    /// e.g. short `session.timeout.ms` / `max.poll.interval.ms` / `heartbeat.interval.ms` on the mock cluster.
    public var extraKafkaProperties: [String: String]
    public var clock: WorkerClock
    /// APNs base URL (e.g. the simulator's `deviceURL`) when the configuration has none.
    public var apnsBaseURL: String?
    /// Extra CA (PEM) to trust for `apnsBaseURL` when the configuration has none.
    public var apnsCAFile: String?
    /// Start the admin HTTP server (`/metrics`, `/healthz`, `/readyz`, `/livez`, `/debug/targets/<key>`).
    public var adminServer: Bool
    /// How long a revoke waits for the revoked partitions' in-flight sends before committing.
    /// Keep it well under `max.poll.interval.ms`: the wait runs inside the rebalance callback.
    public var revokeDrainTimeout: Duration
    /// How long one Kafka poll waits for records (bounds how quickly intake notices stop and pauses).
    public var pollTimeout: Duration
    /// Most records taken per poll: backpressure is checked between polls, so intake can overshoot
    /// a partition's bound by at most this many records.
    public var maxPollRecords: Int
    /// How often a dead letter or feedback record whose produce failed is produced again.
    public var produceRetryDelay: Duration
    /// Seed of the engine's jitter generator; nil = random.
    public var randomSeed: UInt64?
    /// How often an app paused by an APNs configuration error is probed with one send.
    public var configProbeInterval: Duration

    public init(extraKafkaProperties: [String: String] = [:], clock: WorkerClock = .system, apnsBaseURL: String? = nil,
                apnsCAFile: String? = nil, adminServer: Bool = true, revokeDrainTimeout: Duration = .seconds(3),
                pollTimeout: Duration = .milliseconds(100), maxPollRecords: Int = 1000, produceRetryDelay: Duration = .seconds(1),
                randomSeed: UInt64? = nil, configProbeInterval: Duration = .seconds(60)) {
        self.extraKafkaProperties = extraKafkaProperties
        self.clock = clock
        self.apnsBaseURL = apnsBaseURL
        self.apnsCAFile = apnsCAFile
        self.adminServer = adminServer
        self.revokeDrainTimeout = revokeDrainTimeout
        self.pollTimeout = pollTimeout
        self.maxPollRecords = max(1, maxPollRecords)
        self.produceRetryDelay = produceRetryDelay
        self.randomSeed = randomSeed
        self.configProbeInterval = configProbeInterval
    }
}
