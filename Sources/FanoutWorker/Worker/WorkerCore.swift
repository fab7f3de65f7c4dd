import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// The worker's shared state: ONE `Mutex` around the engine and its bookkeeping. Every thread
/// (Kafka intake, token follower, the answer thread fed by the APNs clients, the ticker) changes it the same way:
/// take the lock, feed the engine, collect its actions, release, then carry the actions out
/// (`perform`) outside the lock.
final class WorkerCore: Sendable {
    struct State: Sendable {
        var engine: FanoutEngine
        var summary = WorkerSummary()
        /// App → reason, while APNs says its configuration is wrong.
        var pausedApps: [String: String] = [:]
        var retained: [PartitionID: RetainedMessages] = [:]
        /// Per lane the engine reported failing: since when (UNIX ns) and the last failure.
        var failingLanes: [Lane: (since: Nanoseconds, reason: String)] = [:]
        /// `rejoins` as the engine last heard of it.
        var rejoinsReported = RejoinReports()
        /// `heartbeatSentAt` as the engine last heard of it.
        var heartbeatReported: Nanoseconds = .min
        /// The engine's forgotten-target counts when the gauges were last refreshed.
        var forgottenReported = ForgottenTargets()
        /// Since when the gauges have seen the engine hold commits for a rebalance (nil: not holding).
        var commitsHeldSince: Nanoseconds?
    }

    let state: Mutex<State>
    let settings: WorkerSettings
    let log: Log
    let metrics: FanoutMetrics
    let clock: WorkerClock
    let lanes: APNsLanes
    /// The send lease every push client asks before it writes (`SendGate`).
    let gate: SendGate
    /// Dead letters and token feedback, each acknowledged by Kafka before its offsets complete.
    let records: RecordProducer
    let options: WorkerOptions
    let ticker = EngineTicker()
    /// APNs answers on their way from the client threads to the engine.
    let answers = AnswerQueue()
    let topics: FanoutConfiguration.Topics
    /// Who carries out the engine's Kafka-side actions (the intake service), held weakly: the
    /// intake owns this core, and a worker that is never started is freed with its clients.
    private let partitionActionsBox = Mutex(WeakPartitionActions())
    /// Why the worker can no longer do its job (a Kafka thread died), and who to tell.
    private let failure = Mutex<(reason: String?, handlers: [@Sendable (String) -> Void])>((nil, []))
    /// Times the member left its settled group state (`groupRejoining`), counted on librdkafka's thread.
    private let rejoins = Atomic<UInt64>(0)
    /// When this member last sent a heartbeat (`groupHeartbeatSent`, the worker's clock).
    private let heartbeatSentAt = Atomic<Int64>(.min)

    init(settings: WorkerSettings, log: Log, metrics: FanoutMetrics, options: WorkerOptions, lanes: APNsLanes,
         gate: SendGate, producer: KafkaProducer) {
        var engine = FanoutEngine(configuration: settings.engine)
        engine.reserveTrackingCapacity(settings.engine.maxTrackedTargets)
        state = Mutex(State(engine: engine))
        self.settings = settings
        self.log = log
        self.metrics = metrics
        self.clock = options.clock
        self.lanes = lanes
        self.gate = gate
        records = RecordProducer(producer: producer, topics: settings.configuration.kafka.topics, log: log, metrics: metrics,
                                 clock: options.clock, retryDelay: options.produceRetryDelay)
        self.options = options
        topics = settings.configuration.kafka.topics
    }

    func lane(of topic: String) -> Lane { topic == topics.broadcastUpdates ? .broadcast : .activity }

    // MARK: Intake

    /// Decodes the records of `runs` in `messages` (outside the lock), feeds them to the engine (one
    /// lock), then performs the actions and dead-letters what the decoder rejected. Records outside
    /// the runs (of partitions this member does not own) are not looked at.
    func ingest(_ messages: [KafkaMessage], runs: [KafkaPartitionRun]) {
        guard !runs.isEmpty else { return }
        let now = clock.now()
        let decoder = EventDecoder(policy: settings.policy)
        var decoded: [Result<ActivityEvent, EventRejection>] = []
        decoded.reserveCapacity(messages.count)
        // Each counter's labels are resolved once per run, not once per event (each lookup hashes
        // the label values under a lock, ≈0.4 µs).
        for run in runs {
            let topic = run.partition.topic
            let lane = lane(of: topic)
            metrics.eventsConsumed.labels(topic).increment(by: UInt64(run.range.count))
            for message in messages[run.range] {
                var result = decoder.decode(record: message.value, key: message.key, lane: lane, now: now / Nanoseconds.nanosecondsPerSecond)
                if case .success(var event) = result, event.staleDate == nil, !settings.staleAfterOverrides.isEmpty {
                    settings.applyStaleAfter(to: &event)
                    result = .success(event)
                }
                decoded.append(result)
            }
        }
        var actions: [EngineAction] = []
        var rejected: [(KafkaMessage, EventRejection)] = []
        state.withLock { state in
            var next = 0
            for run in runs {
                state.retained[run.partition, default: RetainedMessages()].append(contentsOf: messages[run.range])
                state.summary.eventsIn += run.range.count
                for message in messages[run.range] {
                    let source = EventSource(partition: run.partition, offset: message.offset)
                    defer { next += 1 }
                    switch decoded[next] {
                    case .success(let event):
                        state.summary.eventsAccepted += 1
                        state.engine.receive(event, from: source, now: now, into: &actions)
                    case .failure(let rejection):
                        // A record of a closing partition is left to its next owner, who judges it again.
                        guard state.engine.takes(source) else { continue }
                        state.engine.receiveRejected(source)
                        rejected.append((message, rejection))
                    }
                }
            }
            state.engine.regulate(now: now, into: &actions)
        }
        perform(actions)
        for (message, rejection) in rejected {
            metrics.lane(lane(of: message.topic)).decision(.deadLettered).increment()
            log.log(.info, "event rejected", ["reason": .string(rejection.reason.rawValue), "detail": .string(rejection.detail),
                                              "source": .string("\(message.topic)/\(message.partition)/\(message.offset)")],
                    more: EventTraces([message]).logFields)
            deadLetterRejected(message, rejection)
        }
    }

    // MARK: Tokens

    /// Decodes the records outside the lock (as intake decodes events), then applies them under one:
    /// the token thread catching up on a partition holds the engine only to apply, never to parse.
    func applyTokenRecords(_ messages: [KafkaMessage]) {
        guard !messages.isEmpty else { return }
        var updates: [(partition: Int32, key: String, update: TokenRecord.Update)] = []
        updates.reserveCapacity(messages.count)
        for message in messages {
            guard let keyBytes = message.key else {
                let detail = "token record at \(message.topic)/\(message.partition)/\(message.offset) has no key"
                updates.append((message.partition, "", .rejected(EventRejection(.missingTarget, detail))))
                continue
            }
            updates.append((message.partition, String(decoding: keyBytes, as: UTF8.self),
                            TokenRecord.update(from: message.value, apps: settings.appNames)))
        }
        let now = clock.now()
        var actions: [EngineAction] = []
        var rejected: [(String, EventRejection)] = []
        let registrySize: Int = state.withLock { state in
            for (partition, key, update) in updates {
                // The token thread may still apply a batch of a partition the intake thread just revoked.
                guard state.engine.load(of: PartitionID(topic: topics.activityUpdates, partition: partition)) != nil else { continue }
                switch update {
                case .register(let record):
                    state.summary.tokenUpdates += 1
                    state.engine.tokenRegistered(key: key, record: record, partition: partition, now: now, into: &actions)
                case .tombstone:
                    state.summary.tokenUpdates += 1
                    state.engine.tokenRemoved(key: key)
                case .rejected(let rejection):
                    rejected.append((key, rejection))
                }
            }
            return state.engine.tokens.count
        }
        metrics.tokenRegistrySize.labels().set(registrySize)
        for (key, rejection) in rejected {
            log.warning("token record ignored", ["key": .string(key), "reason": .string(rejection.reason.rawValue),
                                                 "detail": .string(rejection.detail)])
        }
        perform(actions)
    }

    // MARK: Time

    func tick() { decide { state, now, actions in state.engine.tick(now: now, into: &actions) } }

    /// Feeds the engine under the lock at the current time, then performs what it decided outside it.
    /// A rejoin counted since the last decision is reported first: every commit the engine offers
    /// comes from here (its timer, or a settled group), so none is offered for a generation that ended.
    func decide(_ body: (inout State, Nanoseconds, inout [EngineAction]) -> Void) {
        let now = clock.now()
        var actions: [EngineAction] = []
        state.withLock { state in
            if state.rejoinsReported.isNews(rejoins.load(ordering: .acquiring)) { state.engine.groupRebalancing() }
            let heartbeat = heartbeatSentAt.load(ordering: .acquiring)
            if heartbeat != state.heartbeatReported {
                state.heartbeatReported = heartbeat
                state.engine.heartbeatSent(at: heartbeat)
            }
            body(&state, now, &actions)
        }
        perform(actions)
    }

    func nextDeadline() -> Nanoseconds? { state.withLock { $0.engine.nextDeadline() } }

    // MARK: Partitions (facts from Kafka in, the engine's lifecycle actions out)

    func setPartitionActions(_ actions: any PartitionActions) {
        partitionActionsBox.withLock { $0.value = actions }
    }

    var partitionActions: (any PartitionActions)? { partitionActionsBox.withLock { $0.value } }

    func assign(_ partitions: [PartitionID]) {
        decide { state, now, actions in
            for partition in partitions { state.engine.assign(partition, lane: lane(of: partition.topic), now: now, into: &actions) }
        }
    }

    /// An orderly revoke: the engine drains each partition and says so with `.revokeDrained`.
    func revoke(_ partitions: [PartitionID]) {
        decide { state, now, actions in state.engine.revoke(partitions, now: now, into: &actions) }
    }

    /// Lost without an orderly handoff: dropped, nothing committed.
    func lose(_ partitions: [PartitionID]) {
        decide { state, _, actions in
            state.engine.lose(partitions, into: &actions)
            for partition in partitions { state.retained[partition] = nil }
        }
    }

    /// The member left its settled group state (librdkafka's thread, `KafkaRebalanceHandler.rejoining`):
    /// only counted here, no lock taken; the engine hears of it before its next decision.
    func groupRejoining() { rejoins.add(1, ordering: .releasing) }

    /// On librdkafka's thread: the member just sent a heartbeat (the engine offers no commit until its
    /// answer has surely been acted on, `EngineConfiguration.heartbeatAnswerWindow`).
    func groupHeartbeatSent() { heartbeatSentAt.store(clock.now(), ordering: .releasing) }

    /// Whether a commit handed to librdkafka now may meet a heartbeat's answer that starts a rejoin
    /// first: a heartbeat left less than the answer window ago. The last check before a commit goes out,
    /// for the time between the engine's offer and its execution (docs/design.md §4).
    func heartbeatAnswerMayBePending() -> Bool {
        guard let window = settings.engine.heartbeatAnswerWindow else { return false }
        let sent = heartbeatSentAt.load(ordering: .acquiring)
        return sent != .min && clock.now() - sent < window
    }

    /// The group's rebalance finished for this member (a SyncGroup succeeded): held commits go out.
    func groupSettled() { decide { state, now, actions in state.engine.groupSettled(now: now, into: &actions) } }

    /// Records of `partition` below `offset` were in the log when this member got it (`FanoutEngine.replayBoundary`).
    func replayBoundary(of partition: PartitionID, below offset: Int64) {
        state.withLock { $0.engine.replayBoundary(of: partition, below: offset) }
    }

    func tokensCaughtUp(partition: Int32, assignment: AssignmentID) {
        decide { state, now, actions in state.engine.tokensCaughtUp(partition: partition, assignment: assignment, now: now, into: &actions) }
    }

    /// The partition's state changelog was read (`StateRestorer`): the engine merges it and lets the partition send.
    func stateRestored(partition: Int32, assignment: AssignmentID, records: [TargetHandoff]) {
        decide { state, now, actions in
            state.engine.stateRestored(partition: partition, assignment: assignment, records: records, now: now, into: &actions)
        }
    }

    /// Backpressure: the engine pauses and resumes partitions (`.pauseFetching`, `.resumeFetching`).
    func regulate() { decide { state, now, actions in state.engine.regulate(now: now, into: &actions) } }

    func fetchControlFailed(_ partitions: [PartitionID], paused: Bool) {
        state.withLock { $0.engine.fetchControlFailed(partitions, paused: paused) }
    }

    /// Kafka answered a commit (`failed`: the partitions it refused; `refusedForRebalanceIn`: the
    /// `.commit`'s round, when refused because the group is rebalancing). Returns whether the engine
    /// now holds commits for a rebalance.
    @discardableResult
    func commitAnswered(_ points: [CommitPoint], failed: Set<PartitionID>, refusedForRebalanceIn round: UInt64? = nil) -> Bool {
        state.withLock { state in
            let held = state.engine.commitAnswered(points, failed: failed, refusedForRebalanceIn: round)
            for point in points where !failed.contains(point.partition) {
                state.summary.committed[point.partition.description] = point.offset
            }
            if failed.count < points.count { state.summary.commits += 1 }
            return held
        }
    }

    /// Every commit point not yet acknowledged by Kafka, for the final commit at shutdown; the engine
    /// offers no commit of its own from now on.
    func finalCommitPoints() -> [CommitPoint] {
        state.withLock { state in
            state.engine.stopCommitting()
            return state.engine.uncommittedPoints()
        }
    }

    /// True when no send is in flight and no dead letter or feedback record awaits its acknowledgement.
    var isIdle: Bool {
        records.outstanding == 0 && state.withLock { $0.engine.totalLoad.inFlight == 0 }
    }

    var summary: WorkerSummary { state.withLock { $0.summary } }

    /// Refreshes the point-in-time gauges (lanes' streams, queues and connections, token registry).
    func updateGauges() {
        for lane in Lane.allCases {
            let stats = lanes.stats(lane: lane)
            metrics.apnsInFlight.labels(lane.rawValue).set(stats.inFlight)
            metrics.apnsQueued.labels(lane.rawValue).set(stats.queued)
            metrics.apnsConnections.labels(lane.rawValue).set(stats.connections)
            let unmatched = lanes.sinceLastCall(.unmatchedEnds, lane: lane, current: stats.unmatchedEnds)
            if unmatched > 0 { metrics.apnsUnmatchedEnds.labels(lane.rawValue).increment(by: UInt64(unmatched)) }
            let backoffs = lanes.sinceLastCall(.connectionBackoffs, lane: lane, current: stats.connectionBackoffs)
            if backoffs > 0 { metrics.apnsConnectionBackoffs.labels(lane.rawValue).increment(by: UInt64(backoffs)) }
        }
        let now = clock.now()
        let (registry, busy, tracked, forgotten, reported, commitsHeld, heldChange) = state.withLock { state in
            let forgotten = state.engine.forgottenTargets
            defer { state.forgottenReported = forgotten }
            let held = state.engine.commitsHeldForRebalance
            let change = Self.commitHoldChange(held: held, since: &state.commitsHeldSince, now: now)
            return (state.engine.tokens.count, state.engine.busyTargets(), state.engine.targetCount, forgotten, state.forgottenReported,
                    held, change)
        }
        metrics.commitsHeld.labels().set(commitsHeld ? 1 : 0)
        switch heldChange {
        case .began?: log.info("offset commits held: the group is rebalancing for this member")
        case .ended(let after)?: log.info("offset commits resume: the group settled", ["held_for": .duration(.nanoseconds(after))])
        case nil: break
        }
        metrics.tokenRegistrySize.labels().set(registry)
        metrics.trackedTargets.labels().set(tracked)
        metrics.targetsForgotten.labels("ended").increment(by: forgotten.ended - reported.ended)
        metrics.targetsForgotten.labels("idle").increment(by: forgotten.idle - reported.idle)
        metrics.targetsForgotten.labels("evicted").increment(by: forgotten.evicted - reported.evicted)
        metrics.pendingTargets.labels(Lane.activity.rawValue).set(busy.activity)
        metrics.pendingTargets.labels(Lane.broadcast.rawValue).set(busy.broadcast)
        for (app, minted) in lanes.jwtMintsSinceLastCall() where minted > 0 {
            metrics.jwtRefreshes.labels(app).increment(by: UInt64(minted))
        }
    }

    enum CommitHoldChange: Equatable { case began, ended(after: Nanoseconds) }

    /// Whether the engine started or stopped holding commits since the gauges last looked: both are
    /// logged, so a worker whose commits stand still says whether it is waiting for its group.
    static func commitHoldChange(held: Bool, since: inout Nanoseconds?, now: Nanoseconds) -> CommitHoldChange? {
        switch (held, since) {
        case (true, nil):
            since = now
            return .began
        case (false, let start?):
            since = nil
            return .ended(after: now - start)
        default:
            return nil
        }
    }

    /// `/debug/targets/<key>`: the engine's snapshot of the target and the trace contexts of the events
    /// its pending state and its send in flight cover (read from their retained records).
    func snapshot(key: String) -> (target: TargetSnapshot, pending: EventTraces, inFlight: EventTraces)? {
        let now = clock.now()
        return state.withLock { state in
            guard let target = state.engine.snapshot(lane: .activity, target: key, now: now)
                    ?? state.engine.snapshot(lane: .broadcast, target: key, now: now) else { return nil }
            let retained = target.partition.flatMap { state.retained[$0] }
            return (target, EventTraces(offsets: target.pendingEventOffsets, in: retained),
                    EventTraces(offsets: target.inFlightEventOffsets, in: retained))
        }
    }

    /// Reasons the worker cannot deliver right now: paused apps, failing lanes and output topics
    /// that cannot be produced to.
    func deliveryProblems() -> [String] {
        let failed = failureReason.map { ["worker failed: \($0)"] } ?? []
        return failed + outsideProblems()
    }

    /// Why the worker failed for good, if it did (`fail`).
    var failureReason: String? { failure.withLock { $0.reason } }

    /// What holds delivery back that a restart would not cure: apps paused by a configuration error,
    /// lanes failing, output topics not writable.
    func outsideProblems() -> [String] {
        let now = clock.now()
        return state.withLock { state in
            state.pausedApps.sorted { $0.key < $1.key }.map { "app \($0.key): \($0.value)" }
                + state.failingLanes.sorted { $0.key.rawValue < $1.key.rawValue }.map { lane, failure in
                    "every APNs send on the \(lane.rawValue) lane has failed for \((now - failure.since) / Nanoseconds.nanosecondsPerSecond) s (last: \(failure.reason))"
                }
        } + records.problems()
    }

    // MARK: Failure

    /// A part the worker cannot run without stopped for good (its Kafka consumer failed): readiness
    /// reports it from now on, and whoever asked (`whenFailed`) is told once, so the process can exit
    /// and be restarted instead of holding its partitions while doing nothing.
    func fail(_ reason: String) {
        let handlers: [@Sendable (String) -> Void]? = failure.withLock { failure in
            guard failure.reason == nil else { return nil }
            failure.reason = reason
            defer { failure.handlers = [] }
            return failure.handlers
        }
        guard let handlers else { return }  // already failed and reported
        log.error("worker failed", ["reason": .string(reason)])
        for handler in handlers { handler(reason) }
    }

    /// Calls `handler` once when the worker fails (at once if it already has).
    func whenFailed(_ handler: @escaping @Sendable (String) -> Void) {
        let reason: String? = failure.withLock { failure in
            if failure.reason == nil { failure.handlers.append(handler) }
            return failure.reason
        }
        if let reason { handler(reason) }
    }
}

/// How many times the member left its settled group state, as the engine last heard of it.
///
/// The count only grows (`WorkerCore.groupRejoining`, on librdkafka's thread). A thread that read it
/// before another reported a newer count, and before the group settled after that, holds a count the
/// engine already knows: reported again, it would put the engine back into "rebalancing", where every
/// commit is held until a settle that is not coming, and nothing is logged. Only a higher count is news.
struct RejoinReports: Sendable {
    private(set) var reported: UInt64 = 0

    /// True when `seen` counts a rejoin the engine has not heard of; it is then the reported count.
    mutating func isNews(_ seen: UInt64) -> Bool {
        guard seen > reported else { return false }
        reported = seen
        return true
    }
}
