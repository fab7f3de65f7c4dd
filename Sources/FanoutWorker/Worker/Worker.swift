import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// `fanout run` as a library: Kafka intake, the engine, two APNs lanes, token following, feedback,
/// dead letters, backpressure, rebalance handling, graceful shutdown and the admin server.
///
/// Lifecycle: `init` validates and builds every part (bad key files, Kafka properties or APNs
/// settings throw a `WorkerError` with `isConfigurationError`; a key file others can read is logged
/// as a warning); `start` checks the topic layout,
/// joins the group and starts the threads; `stop(timeout:)` stops intake, drains in-flight sends up
/// to `timeout`, commits, leaves the group and stops the APNs clients; `abort()` leaves without
/// committing anything more (what a crash leaves behind, for tests). Thread-safe throughout.
public final class Worker: Sendable {
    private enum Phase: Sendable { case created, running, stopping, stopped }

    /// The lifecycle phase, in a box the admin server's readiness closure can share.
    private final class PhaseBox: Sendable {
        let value = Mutex(Phase.created)
        func withLock<R>(_ body: (inout Phase) throws -> R) rethrows -> R { try value.withLock { try body(&$0) } }
    }

    /// The `/livez` judge, shared by the admin server's requests.
    private final class WatchBox: Sendable {
        let value: Mutex<ProgressWatch>
        init(_ watch: ProgressWatch) { value = Mutex(watch) }
    }

    public let configuration: FanoutConfiguration
    let core: WorkerCore
    let intake: IntakeService
    private let admin: AdminServer?
    private let phase = PhaseBox()
    private let log: Log
    private let heap: HeapTrimmer
    private let watch: WatchBox

    public init(configuration: FanoutConfiguration, log: Log, metrics: FanoutMetrics, options: WorkerOptions = WorkerOptions()) throws {
        guard !configuration.apps.isEmpty else {
            throw WorkerError(.configuration, "apps: no app is configured; add at least one app with bundle_id, team_id, key_id and key_path")
        }
        self.configuration = configuration
        self.log = log
        heap = HeapTrimmer(metrics: metrics)
        let settings = WorkerSettings(configuration: configuration, options: options)
        var credentials: [String: APNsCredentials] = [:]
        for (index, app) in configuration.apps.enumerated() {
            do {
                credentials[app.bundleID] = try APNsCredentials(teamID: app.teamID, keyID: app.keyID, keyFile: app.keyPath)
            } catch {
                throw WorkerError(.configuration, "apps[\(index)].key_path: cannot use \(app.keyPath) as the APNs signing key of \(app.bundleID): \(error)")
            }
        }
        SigningKeyCheck.warnAboutExposedKeys(configuration.apps, log: log)
        let tokenCache = ProviderTokenCache(refreshInterval: configuration.apns.jwtRefreshInterval)
        let gate = SendGate(sessionTimeout: SendGate.sessionTimeout(of: settings.kafka.properties), log: log, metrics: metrics)
        let lanes: APNsLanes
        do {
            lanes = try APNsLanes(settings: settings, credentials: credentials, tokenCache: tokenCache, options: options, gate: gate)
        } catch let error as APNsClientError {
            if case .badConfiguration = error { throw WorkerError(.configuration, "apns: \(error.description)") }
            throw WorkerError(.apns, "apns: \(error.description)")
        }
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(configuration: settings.producerKafka, onError: { error in
                log.warning("Kafka producer error", ["error": .string(error.description)])
            }, log: KafkaLogBridge.handler(log))
        } catch {
            throw WorkerError.kafka(error, while: "creating the producer")
        }
        gate.guarding(lanes.pushClients)
        core = WorkerCore(settings: settings, log: log, metrics: metrics, options: options, lanes: lanes, gate: gate, producer: producer)
        do {
            intake = try IntakeService(core: core)
        } catch {
            throw WorkerError.kafka(error, while: "creating the consumer")
        }
        watch = WatchBox(ProgressWatch(window: Nanoseconds(configuration.admin.livenessWindow), startedAt: core.clock.now()))
        if options.adminServer {
            let core = core, intake = intake, phase = phase, watch = watch
            admin = AdminServer(settings: configuration.admin, routes: AdminRoutes(
                metrics: {
                    _ = Worker.readiness(phase: phase, intake: intake, core: core)  // refreshes fanout_ready for this scrape
                    intake.publishFetchNudges(to: metrics)
                    return metrics.registry.render()
                },
                readiness: { Worker.readiness(phase: phase, intake: intake, core: core) },
                liveness: { Worker.liveness(phase: phase, intake: intake, core: core, watch: watch) },
                target: { key in core.snapshot(key: key).map { $0.target.json(pendingTraces: $0.pending, inFlightTraces: $0.inFlight) } }), log: log)
        } else {
            admin = nil
        }
    }

    /// Checks the topic layout (partition counts of activity-updates and activity-tokens must match, and
    /// the state changelog's too; the dead-letter and token feedback topics exist, `OutputTopicCheck`), joins the consumer group
    /// and starts the answer, intake, token and ticker threads and the admin server.
    public func start() throws {
        try phase.withLock { phase in
            guard phase == .created else { throw WorkerError(.lifecycle, "the worker was already started") }
            phase = .running
        }
        let topics = configuration.kafka.topics
        do {
            if let admin { _ = try admin.start() }
        } catch {
            throw WorkerError(.admin, "\(error) (set admin.port to a free port, or 0)")
        }
        let counts: [String: Int]
        do {
            counts = try intake.consumer.partitionCounts(of: [topics.activityUpdates, topics.activityTokens, topics.broadcastUpdates],
                                                         timeout: .seconds(10))
        } catch {
            admin?.stop()
            throw WorkerError.kafka(error, while: "reading topic metadata")
        }
        let updates = counts[topics.activityUpdates] ?? 0, tokens = counts[topics.activityTokens] ?? 0
        guard updates == tokens else {
            admin?.stop()
            throw WorkerError(.configuration,
                              "kafka.topics: \(topics.activityUpdates) has \(updates) partitions but \(topics.activityTokens) has \(tokens); they must match, because the owner of partition p of \(topics.activityUpdates) reads partition p of \(topics.activityTokens) (create \(topics.activityTokens) with \(updates) partitions)")
        }
        do {
            try OutputTopicCheck.check(topics, using: intake.consumer, timeout: .seconds(10))
            try OutputTopicCheck.checkStateTopic(topics, partitions: updates, using: intake.consumer, timeout: .seconds(10))
        } catch {
            admin?.stop()
            throw error
        }
        core.answers.start(core: core)
        do {
            try intake.start()
        } catch {
            core.answers.stop()
            admin?.stop()
            throw WorkerError.kafka(error, while: "subscribing")
        }
        core.ticker.start(core: core)
        heap.start()
        core.gate.start()
        log.info("worker started", ["group": .string(configuration.kafka.groupID),
                                    "group_instance_id": .string(configuration.kafka.groupInstanceID ?? "(none: dynamic member)"),
                                    "partitions": .int(updates), "apps": .string(configuration.apps.map(\.bundleID).joined(separator: ",")),
                                    "allocator": .string(ProcessHeap.allocator)])
    }

    /// Graceful stop (SIGTERM): stop intake, drain in-flight sends and dead-letter/feedback produces
    /// up to `timeout`, commit what is done, leave the group, stop the APNs clients and the admin server.
    public func stop(timeout: Duration) async {
        guard beginStopping() else { return }
        let started = ContinuousClock.now
        await intake.stop(deadline: started + timeout)
        await tearDown(by: started + timeout)
        log.info("worker stopped", ["drained_in": .duration(ContinuousClock.now - started)])
    }

    /// Stops without committing anything more: the group sees this member leave (a static member:
    /// its session end), the next owner replays from the last commit. What a crash leaves behind; for tests and a second signal.
    public func abort() async {
        guard beginStopping() else { return }
        await intake.abort()
        await tearDown(by: .now + .seconds(1))
        log.warning("worker aborted without a final commit")
    }

    /// What the worker did so far.
    public var summary: WorkerSummary { core.summary }

    /// Calls `handler` once if the worker fails for good while running (its Kafka consumer or the
    /// activity-tokens reader died): `/readyz` reports it, and the caller should stop it and exit
    /// non-zero so it is restarted. At once when it already failed.
    public func whenFailed(_ handler: @escaping @Sendable (String) -> Void) { core.whenFailed(handler) }

    /// `/readyz`: assigned partitions, APNs reachable, no app stopped by a configuration error.
    public func isReady() -> Readiness { Self.readiness(phase: phase, intake: intake, core: core) }

    /// `/livez`: whether the worker still makes progress (`ProgressWatch`).
    public func liveness() -> Liveness { Self.liveness(phase: phase, intake: intake, core: core, watch: watch) }

    /// The admin server's bound port (nil when not started or disabled).
    public var adminPort: Int? {
        guard let admin, admin.boundPort != 0 else { return nil }
        return admin.boundPort
    }

    private func beginStopping() -> Bool {
        phase.withLock { phase in
            switch phase {
            case .running:
                phase = .stopping
                return true
            case .created:
                phase = .stopped
                return false
            case .stopping, .stopped:
                return false
            }
        }
    }

    /// Sends still in flight at `deadline` (past the drain, they stay uncommitted) are abandoned then.
    private func tearDown(by deadline: ContinuousClock.Instant) async {
        core.records.stop()
        core.ticker.stop()
        heap.stop()
        core.gate.stop()
        await core.lanes.shutdown(deadline: min(deadline, .now + .seconds(1)))
        core.answers.stop()  // the answers of sends abandoned at shutdown are fed to the engine first
        admin?.stop()
        phase.withLock { $0 = .stopped }
    }

    /// `/livez`: the facts of now, judged by the worker's `ProgressWatch`.
    private static func liveness(phase: PhaseBox, intake: IntakeService, core: WorkerCore, watch: WatchBox) -> Liveness {
        let progress = intake.progress()
        let stopping = phase.withLock { phase in phase == .stopping || phase == .stopped }
        let facts = ProgressFacts(pollReturnedAt: progress.pollReturnedAt, uncommitted: progress.uncommitted,
                                  commitAdvances: progress.commitAdvances, assignmentChanges: progress.assignmentChanges,
                                  excuses: core.outsideProblems(), failure: core.failureReason, stopping: stopping)
        let now = core.clock.now()
        return watch.value.withLock { $0.judge(facts, now: now) }
    }

    private static func readiness(phase: PhaseBox, intake: IntakeService, core: WorkerCore) -> Readiness {
        var reasons: [String] = []
        switch phase.withLock({ $0 }) {
        case .created: reasons.append("not started")
        case .stopping, .stopped: reasons.append("shutting down")
        case .running: break
        }
        if !intake.isAssigned { reasons.append("no partitions assigned") }
        reasons.append(contentsOf: core.deliveryProblems())
        core.metrics.ready.labels().set(reasons.isEmpty ? 1 : 0)
        return Readiness(isReady: reasons.isEmpty, reasons: reasons)
    }
}
