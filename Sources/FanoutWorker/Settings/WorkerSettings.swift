import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutKafka

/// The one place where `FanoutConfiguration` becomes the settings of each part: the engine, the
/// decoder, the APNs clients and the Kafka clients. Everything the worker builds comes from here.
struct WorkerSettings: Sendable {
    let configuration: FanoutConfiguration
    let engine: EngineConfiguration
    let policy: EventPolicy
    /// For the consumers (group consumer, activity-tokens reader).
    let kafka: KafkaConfiguration
    /// For the producer: `kafka` without Fanout's consumer-only defaults, which it would only warn about.
    let producerKafka: KafkaConfiguration
    let appNames: Set<String>
    /// Per app, per attributes type: `apps[].attributes.<Type>.stale_after` in seconds.
    let staleAfterOverrides: [String: [String: Int64]]
    /// Apps with exactly one configured attributes type: that type (update events do not name theirs).
    let soleAttributesType: [String: String]

    init(configuration: FanoutConfiguration, options: WorkerOptions) {
        self.configuration = configuration
        var overrides: [String: [String: Int64]] = [:]
        var sole: [String: String] = [:]
        for app in configuration.apps {
            for (type, settings) in app.attributes {
                if let stale = settings.staleAfter { overrides[app.bundleID, default: [:]][type] = Self.seconds(stale) }
            }
            if app.attributes.count == 1, let type = app.attributes.keys.first { sole[app.bundleID] = type }
        }
        staleAfterOverrides = overrides
        soleAttributesType = sole
        engine = Self.engineConfiguration(configuration, options: options)
        let apps = Set(configuration.apps.map(\.bundleID))
        appNames = apps
        policy = EventPolicy(apps: apps, maxEventBytes: configuration.engine.maxEventBytes,
                             defaultStaleAfter: Self.seconds(configuration.engine.defaultStaleAfter))
        var properties = configuration.kafka.properties
        properties["bootstrap.servers"] = configuration.kafka.bootstrapServers
        for (name, value) in options.extraKafkaProperties { properties[name] = value }
        kafka = KafkaConfiguration(properties.filter { !FanoutConfiguration.producerOnlyKafkaProperties.contains($0.key) })
        producerKafka = KafkaConfiguration(properties.filter { !FanoutConfiguration.consumerOnlyKafkaProperties.contains($0.key) })
    }

    /// Applies a per-app, per-attributes-type `stale_after` to an event that has no stale date of its
    /// own (the engine would use `engine.default_stale_after`). The type is the event's (start), else
    /// the app's only configured type; with several types an update keeps the default.
    func applyStaleAfter(to event: inout ActivityEvent) {
        guard event.staleDate == nil, !staleAfterOverrides.isEmpty, let app = event.app ?? engine.defaultApp,
              let overrides = staleAfterOverrides[app],
              let type = event.attributesType ?? soleAttributesType[app], let after = overrides[type] else { return }
        let (sum, overflow) = event.timestamp.addingReportingOverflow(after)
        event.staleDate = overflow ? Int64.max : sum
    }

    static func nanoseconds(_ duration: Duration) -> Nanoseconds { Nanoseconds(duration) }

    /// How long a heartbeat's answer may take to arrive and be acted on, for the consumer's
    /// `heartbeat.interval.ms` (librdkafka's default 3 s): `EngineConfiguration.heartbeatAnswerWindow`.
    static func heartbeatAnswerWindow(_ kafka: [String: String]) -> Nanoseconds {
        let interval = kafka["heartbeat.interval.ms"].flatMap { Int64($0) }.flatMap { $0 > 0 ? $0 : nil } ?? 3_000
        return EngineConfiguration.heartbeatAnswerWindow(heartbeatInterval: .milliseconds(interval))
    }

    static func seconds(_ duration: Duration) -> Int64 { duration.components.seconds }

    static func budget(_ budget: FanoutConfiguration.Budget) -> BudgetSettings {
        BudgetSettings(minInterval: nanoseconds(budget.minInterval), burst: Double(budget.priority10Burst),
                       refillPerHour: Double(budget.priority10PerHour))
    }

    static func engineConfiguration(_ c: FanoutConfiguration, options: WorkerOptions) -> EngineConfiguration {
        var e = EngineConfiguration()
        e.activityBudget = budget(c.engine.standard)
        e.frequentUpdatesBudget = budget(c.engine.frequent)
        e.broadcastBudget = budget(c.engine.broadcast)
        e.frequentUpdatesApps = Set(c.apps.filter(\.frequentUpdates).map(\.bundleID))
        e.pushToStartBudget = BudgetSettings(minInterval: BudgetSettings.pushToStart.minInterval,
                                             burst: Double(c.engine.pushToStart.burst),
                                             refillPerHour: Double(c.engine.pushToStart.perHour))
        e.defaultStaleAfterSeconds = seconds(c.engine.defaultStaleAfter)
        e.tokenWait = nanoseconds(c.engine.tokenWait)
        e.backoffCap = max(nanoseconds(c.engine.backoffCap), e.backoffBase)
        e.recoveryRamp = nanoseconds(c.engine.recoveryRamp)
        e.endedRetention = nanoseconds(c.engine.endedRetention)
        e.maxTrackedTargets = c.engine.maxTrackedTargets
        // The configuration's window is per target; the engine keeps one window per partition, so
        // it never gets smaller than the engine's own default.
        e.dedupeWindowPerPartition = c.engine.dedupeWindow
        let maxQuiet = nanoseconds(c.engine.maxQuiet)
        func profile(_ fields: [String]) -> MeaningProfile {
            MeaningProfile(progressFields: fields, minProgressDelta: c.engine.minProgressDelta, maxQuiet: maxQuiet)
        }
        e.defaultMeaning = profile(c.engine.progressFields["*"] ?? [])
        var types = Set(c.engine.progressFields.keys.filter { $0 != "*" })
        for app in c.apps { types.formUnion(app.attributes.keys) }
        for type in types {
            // Several apps may override one type; the first app's override wins (types are app-specific in practice).
            let owner = c.apps.first { $0.attributes[type]?.progressFields != nil }
            e.meaningProfiles[type] = profile(c.progressFields(app: owner, attributesType: type))
        }
        for app in c.apps where app.attributes.count == 1 {
            e.attributesTypeByApp[app.bundleID] = app.attributes.keys.first
        }
        e.defaultApp = c.apps.count == 1 ? c.apps[0].bundleID : nil
        e.configProbeInterval = nanoseconds(options.configProbeInterval)
        e.maxIncompletePerPartition = c.backpressure.maxPendingPerPartition
        e.maxInFlightPerPartition = c.backpressure.maxInFlight
        e.maxInFlightPerLane = c.backpressure.maxInFlight
        // What one APNs client of each lane surely takes at once: its queue (a lane has a client per
        // environment; the engine holds the lane to one client's share). The streams in flight come on
        // top only when the server allows all of them, so they are not counted.
        e.sendCapacityPerLane = [c.apns.activity, c.apns.broadcast].map { lane in max(1, lane.maxQueued) }
        e.maxIncompletePerLane = c.backpressure.maxPendingTargets
        e.resumeRatio = c.backpressure.resumeRatio
        e.commitInterval = nanoseconds(c.kafka.commitInterval)
        e.heartbeatAnswerWindow = heartbeatAnswerWindow(c.kafka.properties.merging(options.extraKafkaProperties) { $1 })
        e.revokeDrainTimeout = nanoseconds(options.revokeDrainTimeout)
        e.laneFailingAfter = nanoseconds(c.apns.laneFailingAfter)
        // Broadcast expiration follows each channel's storage policy, looked up through channel management.
        e.broadcastExpirationImmediate = false
        e.handoffState = !c.kafka.topics.state.isEmpty
        e.randomSeed = options.randomSeed ?? UInt64.random(in: 1...UInt64.max)
        return e
    }

    /// The client configuration of one lane for one APNs environment (all apps' credentials).
    func apnsClientConfiguration(lane: Lane, environment: APNsModel.APNsEnvironment, credentials: [String: APNsCredentials],
                                 tokenCache: ProviderTokenCache, options: WorkerOptions) -> APNsClientConfiguration {
        let apns = configuration.apns
        let settings = lane == .activity ? apns.activity : apns.broadcast
        let endpoint: APNsClientConfiguration.Endpoint
        if let base = apns.baseURL ?? options.apnsBaseURL {
            endpoint = .custom(baseURL: base, caFile: apns.caFile ?? options.apnsCAFile)
        } else {
            endpoint = .apple(environment)
        }
        return APNsClientConfiguration(
            endpoint: endpoint, credentials: credentials, port: apns.baseURL == nil && options.apnsBaseURL == nil ? apns.port : nil,
            connections: settings.connections, maxConcurrentStreamsPerConnection: min(500, max(1, settings.maxInFlight)),
            maxInFlight: settings.maxInFlight, maxQueued: max(1, settings.maxQueued), requestTimeout: apns.requestTimeout,
            tokenCache: tokenCache, transport: apns.transport)
    }

    /// The channel-management client configuration for one environment, for storage-policy lookups:
    /// `apns.management_base_url` when set; Apple's management host when pushes go to Apple; nil
    /// (no lookups) when pushes go to a custom base URL without a management URL. One connection,
    /// a handful of requests at once: lookups are rare (once per channel, cached).
    func channelManagementConfiguration(environment: APNsModel.APNsEnvironment, credentials: [String: APNsCredentials],
                                        tokenCache: ProviderTokenCache, options: WorkerOptions) -> APNsClientConfiguration? {
        let apns = configuration.apns
        let endpoint: APNsClientConfiguration.Endpoint
        if let management = apns.managementBaseURL {
            endpoint = .custom(baseURL: management, caFile: apns.caFile ?? options.apnsCAFile)
        } else if usesCustomEndpoint(options: options) {
            return nil
        } else {
            endpoint = .appleChannelManagement(environment)
        }
        return APNsClientConfiguration(endpoint: endpoint, credentials: credentials, connections: 1,
                                       maxConcurrentStreamsPerConnection: ChannelPolicies.defaultMaxConcurrentLookups,
                                       maxInFlight: ChannelPolicies.defaultMaxConcurrentLookups, maxQueued: 64,
                                       requestTimeout: apns.requestTimeout, tokenCache: tokenCache, transport: apns.transport)
    }

    /// Channels whose storage policy the configuration states.
    var configuredChannelPolicies: [ChannelPolicies.Key: ChannelPolicies.Policy] {
        var result: [ChannelPolicies.Key: ChannelPolicies.Policy] = [:]
        for app in configuration.apps {
            for (channel, storage) in app.broadcastChannels {
                result[ChannelPolicies.Key(app: app.bundleID, channel: channel)] = storage == .mostRecent ? .mostRecent : .noStorage
            }
        }
        return result
    }

    /// Whether every app's pushes go to one custom base URL (one client per lane suffices).
    func usesCustomEndpoint(options: WorkerOptions) -> Bool {
        configuration.apns.baseURL != nil || options.apnsBaseURL != nil
    }
}
