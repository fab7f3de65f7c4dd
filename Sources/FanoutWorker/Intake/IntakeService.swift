import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// The Kafka side of the worker: one group consumer for activity-updates and broadcast-updates,
/// polled on a thread of its own (blocking librdkafka calls never run on Swift's cooperative pool).
///
/// An executor of the engine (docs/design.md §5): it reports facts — records, assignment
/// changes, token catch-up, commit answers — and carries out the engine's partition actions
/// (`PartitionActions`): follow a token partition, pause or resume fetching, commit, hand a drained
/// revoke back. It decides nothing about when a partition may send, pauses, or commits.
///
/// Commits never wait (`OffsetCommitter`): one unanswered for 40 s holds back nothing but the next commit.
final class IntakeService: PartitionActions {
    struct State: Sendable {
        /// What the group assigned (facts from the rebalance callback): records of other partitions are not fed.
        var owned: Set<PartitionID> = []
        /// Per owned partition: highest offset read + 1, and the last committed offset (for the lag gauge).
        var readEnd: [PartitionID: Int64] = [:]
        var committedAt: [PartitionID: Int64] = [:]
        /// For `/livez` (`ProgressWatch`): when the poll loop last returned, how often a committed
        /// offset moved forward and how often the assignment changed.
        var pollReturnedAt: Nanoseconds?
        var commitAdvances: UInt64 = 0
        var assignmentChanges: UInt64 = 0
        /// Owned partitions whose replay boundary the engine was told (`FanoutEngine.replayBoundary`).
        var boundaryReported: Set<PartitionID> = []
        /// Revokes the engine drained, with their final commit point, until the rebalance callback takes them.
        var drained: [PartitionID: CommitPoint?] = [:]
        var stopDeadline: ContinuousClock.Instant?
        var aborted = false
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Lets the consumer's rebalance handler and the token follower reach the service that owns
    /// them without a reference cycle (a worker that is never started is freed with its clients).
    private final class Relay: Sendable {
        private struct Weak: Sendable { weak var service: IntakeService? }
        private let box = Mutex(Weak())
        func set(_ service: IntakeService?) { box.withLock { $0.service = service } }
        func get() -> IntakeService? { box.withLock { $0.service } }
    }

    let consumer: KafkaConsumer
    let tokens: TokenFollower
    /// nil without a state changelog (`kafka.topics.state` empty).
    let handoffs: StateRestorer?
    private let core: WorkerCore
    private let relay: Relay
    fileprivate let commits: OffsetCommitter
    let state = Mutex(State())
    /// Signalled whenever the engine drains a revoke (`revokeDrained`).
    private let drainSignal = DispatchSemaphore(value: 0)
    private let topics: FanoutConfiguration.Topics
    private let gaugeInterval: Duration

    init(core: WorkerCore) throws {
        let relay = Relay()
        let settings = core.settings
        topics = settings.configuration.kafka.topics
        let handler = KafkaRebalanceHandler(
            assigned: { relay.get()?.assigned($0) },
            revoking: { relay.get()?.revoking($0) ?? [:] },
            lost: { relay.get()?.lost($0) },
            settled: { relay.get()?.core.groupSettled() },
            rejoining: { relay.get()?.rejoining() },
            heartbeatSent: { relay.get()?.core.groupHeartbeatSent() })
        consumer = try KafkaConsumer(configuration: settings.kafka, groupID: settings.configuration.kafka.groupID,
                                     groupInstanceID: settings.configuration.kafka.groupInstanceID, rebalance: handler,
                                     log: KafkaLogBridge.handler(core.log))
        tokens = try TokenFollower(configuration: settings.kafka, topic: topics.activityTokens, core: core) { partition, assignment in
            relay.get()?.core.tokensCaughtUp(partition: partition, assignment: assignment)
        }
        handoffs = topics.state.isEmpty ? nil : try StateRestorer(configuration: settings.kafka, topic: topics.state, core: core)
        self.core = core
        self.relay = relay
        commits = OffsetCommitter(consumer: consumer, core: core, commitInterval: settings.configuration.kafka.commitInterval)
        gaugeInterval = settings.configuration.kafka.commitInterval
        relay.set(self)
        core.setPartitionActions(self)
    }

    func start() throws {
        try consumer.subscribe([topics.activityUpdates, topics.broadcastUpdates])
        tokens.start()
        handoffs?.start()
        let thread = Thread.named("fanout-intake") { [self] in
            run()
            finish()
        }
        thread.start()
    }

    /// Stops intake, drains until `deadline`, commits, leaves the group; returns when done.
    func stop(deadline: ContinuousClock.Instant) async {
        state.withLock { $0.stopDeadline = $0.stopDeadline ?? deadline }
        await waitUntilFinished()
    }

    /// Leaves at once without committing anything more (what a crash leaves behind).
    func abort() async {
        state.withLock { state in
            state.aborted = true
            state.stopDeadline = .now
        }
        await waitUntilFinished()
    }

    var isAssigned: Bool { state.withLock { !$0.owned.isEmpty } }

    /// The intake's part of `/livez`'s facts: the poll loop's last return, records read and not
    /// committed on owned partitions, and the counters of progress.
    func progress() -> (pollReturnedAt: Nanoseconds?, uncommitted: Int64, commitAdvances: UInt64, assignmentChanges: UInt64) {
        state.withLock { state in
            var uncommitted: Int64 = 0
            for (partition, end) in state.readEnd where state.owned.contains(partition) {
                uncommitted += max(0, end - (state.committedAt[partition] ?? end))
            }
            return (state.pollReturnedAt, uncommitted, state.commitAdvances, state.assignmentChanges)
        }
    }

    private func waitUntilFinished() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.finished { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func finish() {
        relay.set(nil)
        tokens.stop()
        handoffs?.stop()
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: The loop

    private func run() {
        let log = core.log
        var lastGauges = ContinuousClock.now
        while true {
            let (deadline, aborted) = state.withLock { ($0.stopDeadline, $0.aborted) }
            if let deadline {
                if aborted {
                    closeConsumer(by: .now + Self.leaveGroupTimeout)
                } else {
                    drain(until: deadline)
                }
                return
            }
            let batch: KafkaPollBatch
            let began = ContinuousClock.now
            do {
                batch = try consumer.poll(timeout: core.options.pollTimeout, maxMessages: core.options.maxPollRecords)
            } catch {
                core.fail("the Kafka consumer failed, intake stopped (restart the worker): \(error)")
                return
            }
            // Its rebalance callbacks have run: a loss librdkafka raised before it began is in the engine.
            core.gate.polled(startedAt: began)
            let returnedAt = core.clock.now()
            state.withLock { $0.pollReturnedAt = returnedAt }
            if !batch.commitAnswers.isEmpty { committed(commits.answered(batch.commitAnswers)) }
            for error in batch.errors {
                if error.code == .commit { core.metrics.commits.labels("failed").increment() }
                log.warning("Kafka consumer error", ["error": .string(error.description)])
            }
            if batch.messages.isEmpty {
                core.regulate()  // sends completed meanwhile may let a paused partition resume
            } else {
                let runs = KafkaPartitionRun.runs(in: batch.messages)
                let (ownedRuns, firstRead) = state.withLock { state in
                    var ownedRuns: [KafkaPartitionRun] = []
                    var firstRead: [PartitionID: Int64] = [:]
                    for run in runs where state.owned.contains(run.partition) {
                        ownedRuns.append(run)
                        let end = batch.messages[run.range.upperBound - 1].offset + 1
                        if end > state.readEnd[run.partition] ?? 0 { state.readEnd[run.partition] = end }
                        if state.committedAt[run.partition] == nil { state.committedAt[run.partition] = batch.messages[run.range.lowerBound].offset }
                        if !state.boundaryReported.contains(run.partition) { firstRead[run.partition] = end }
                    }
                    state.boundaryReported.formUnion(firstRead.keys)
                    return (ownedRuns, firstRead)
                }
                // Before the partition's first records reach the engine: what was in the log when this
                // member got it is the high watermark of its first fetch (at least the records read now).
                for (partition, readEnd) in firstRead {
                    let watermark = (try? consumer.lastKnownHighWatermark(of: partition)) ?? nil
                    core.replayBoundary(of: partition, below: max(readEnd, watermark ?? readEnd))
                }
                core.ingest(batch.messages, runs: ownedRuns)  // regulates too
            }
            if ContinuousClock.now - lastGauges >= gaugeInterval {
                updateLag()
                updatePartitionGauges()
                core.updateGauges()
                core.metrics.commitWaiting.labels().set(Int(commits.waiting.components.seconds))
                lastGauges = .now
            }
        }
    }

    /// Graceful stop: no more intake, wait for in-flight sends and pending produces, final commit of
    /// every point Kafka has not acknowledged, leave the group (the revoke callback then finds
    /// nothing more to commit) — all by `deadline`, the end of `shutdown_timeout`. Waiting for sends
    /// stops early enough to leave the group in what remains (`leaveReserve`): a member that does not
    /// leave holds its partitions from the rest of the fleet for a whole session timeout.
    ///
    /// A static member (`kafka.group_instance_id`) does just that on purpose: it closes without
    /// leaving (`KafkaConsumer.close`), so the final commit here is the last word on its partitions
    /// until it comes back with the same id (and takes them again, from that commit) or its session
    /// ends and the group hands them to the others. Nothing in this stop waits for that.
    private func drain(until deadline: ContinuousClock.Instant) {
        let owned = state.withLock { $0.owned }
        do { try consumer.pause(owned) } catch {
            core.log.warning("could not pause partitions for shutdown", ["error": .string("\(error)")])
        }
        let sendsBy = deadline - Self.leaveReserve(of: max(.zero, deadline - .now))
        while !core.isIdle && ContinuousClock.now < sendsBy {
            // Keep serving the group (heartbeats, callbacks); records that still arrive are not
            // taken: they were never received, so nothing is committed past them.
            let began = ContinuousClock.now
            _ = try? consumer.poll(timeout: .milliseconds(20), maxMessages: 1)
            core.gate.polled(startedAt: began)
        }
        if !core.isIdle {
            core.log.warning("shutdown timeout reached with sends or produces still outstanding; their offsets stay uncommitted and will be replayed")
        }
        let final = core.finalCommitPoints()
        if commits.commitNow(final) { committed(final) }
        closeConsumer(by: deadline - Self.leaveMargin)
        _ = commits.answered(consumer.drainCommitAnswers())  // the last answers, `.closed` ones included
    }

    /// Bound on leaving the group after the final commit: past it the worker exits anyway and the
    /// group reassigns its partitions after the session timeout, from the commit just made.
    static let leaveGroupTimeout: Duration = .seconds(15)

    /// What a graceful stop keeps of its budget for leaving the group: a quarter, at most 2 s (on the
    /// mock cluster, and on Kafka when nothing is rebalancing, leaving takes well under a second).
    static func leaveReserve(of budget: Duration) -> Duration { min(budget / 4, .seconds(2)) }

    /// Leaving may run this much past the time it is given (`KafkaConsumer.close` waits at least
    /// 100 ms for librdkafka), and the APNs clients close after it.
    static let leaveMargin: Duration = .milliseconds(150)

    /// Leaves the group by `deadline` (at least 100 ms to try). Past it the consumer is left behind
    /// (`KafkaConsumer.close`): the worker exits on time, and the group reassigns its partitions after
    /// the session timeout, from the final commit.
    private func closeConsumer(by deadline: ContinuousClock.Instant) {
        do {
            try consumer.close(timeout: min(Self.leaveGroupTimeout, max(.milliseconds(100), deadline - .now)))
        } catch {
            core.log.warning("leaving the consumer group reported an error", ["error": .string("\(error)")])
        }
    }

    /// `fanout_consumer_lag`: per owned partition, the partition's end minus the committed offset
    /// (`fanout_committed_offset`).
    /// The end is the high watermark librdkafka last saw in a fetch response (no broker round trip;
    /// it stops moving while the partition is paused), or the end of what this worker has read when
    /// that is further. Partitions with nothing committed yet by this worker are reported from the
    /// first offset it read.
    private func updateLag() {
        let positions: [(PartitionID, end: Int64, committed: Int64)] = state.withLock { state in
            state.readEnd.compactMap { partition, end in
                guard state.owned.contains(partition), let committed = state.committedAt[partition] else { return nil }
                return (partition, end, committed)
            }
        }
        for (partition, readEnd, committed) in positions {
            // Throws only once the consumer is closed (shutdown): then the read end stands in.
            let watermark = try? consumer.lastKnownHighWatermark(of: partition)
            let end = max(readEnd, watermark ?? readEnd)
            core.metrics.consumerLag.labels(partition.topic, String(partition.partition)).set(Int(max(0, end - committed)))
            core.metrics.committedOffset.labels(partition.topic, String(partition.partition)).set(committed)
        }
    }

    private func updatePartitionGauges() {
        let (paused, catchingUp) = core.state.withLock { ($0.engine.pausedPartitions, $0.engine.catchingUpPartitions) }
        for topic in [topics.activityUpdates, topics.broadcastUpdates] {
            core.metrics.pausedPartitions.labels(topic).set(paused.filter { $0.topic == topic }.count)
        }
        core.metrics.partitionsCatchingUp.labels(topics.activityUpdates).set(catchingUp.count)
    }

    /// Forgets a partition's lag bookkeeping and removes its gauges (revoked or lost): the new owner
    /// exports it, and a dashboard summing lag over workers must not count it twice or as zero.
    private func forgetLag(_ partitions: [PartitionID]) {
        state.withLock { state in
            for partition in partitions {
                state.readEnd[partition] = nil
                state.committedAt[partition] = nil
                state.boundaryReported.remove(partition)
            }
        }
        for partition in partitions {
            core.metrics.consumerLag.remove(partition.topic, String(partition.partition))
            core.metrics.committedOffset.remove(partition.topic, String(partition.partition))
        }
    }

    /// A commit Kafka acknowledged: the lag gauge counts from it.
    private func committed(_ points: [CommitPoint]) {
        state.withLock { state in
            for point in points where state.owned.contains(point.partition) {
                if point.offset > state.committedAt[point.partition] ?? .min { state.commitAdvances += 1 }
                state.committedAt[point.partition] = point.offset
            }
        }
    }

    // MARK: PartitionActions (the engine's orders, from any thread)

    func followTokens(_ partition: Int32, assignment: AssignmentID) { tokens.follow(partition, assignment: assignment) }

    /// Brings `fanout_kafka_fetch_nudges_total` up to both Kafka clients' own counts (at each scrape).
    func publishFetchNudges(to metrics: FanoutMetrics) {
        for (client, nudges) in [("intake", consumer.fetchNudges), ("tokens", tokens.fetchNudges)] {
            metrics.kafkaFetchNudges.labels(client, "sent").advance(to: nudges.sent)
            metrics.kafkaFetchNudges.labels(client, "failed").advance(to: nudges.failed)
        }
    }

    func unfollowTokens(_ partition: Int32) {
        tokens.unfollow(partition)
        handoffs?.cancel(partition)
    }

    func restoreState(_ partition: Int32, assignment: AssignmentID) {
        guard let handoffs else { return core.fail("the engine asked to restore state but kafka.topics.state is empty") }
        handoffs.restore(partition, assignment: assignment)
    }

    func pauseFetching(_ partitions: [PartitionID]) {
        do { try consumer.pause(partitions) } catch {
            core.log.warning("could not pause partitions; trying again", ["error": .string("\(error)")])
            core.fetchControlFailed(partitions, paused: true)
        }
    }

    func resumeFetching(_ partitions: [PartitionID]) {
        do { try consumer.resume(partitions) } catch {
            core.log.warning("could not resume partitions; trying again", ["error": .string("\(error)")])
            core.fetchControlFailed(partitions, paused: false)
        }
    }

    func commit(_ points: [CommitPoint], round: UInt64) { commits.enqueue(points, round: round) }

    func revokeDrained(_ partition: PartitionID, commit: CommitPoint?) {
        state.withLock { $0.drained[partition] = .some(commit) }
        drainSignal.signal()
    }

    // MARK: Rebalance callbacks (on the intake thread, inside poll/close)

    /// The engine takes the partitions first and the log says so; only then do they count as
    /// owned, which is what readiness reads: a ready worker's assignment is known and logged.
    private func assigned(_ partitions: [PartitionID]) {
        core.metrics.rebalances.labels("assigned").increment(by: UInt64(partitions.count))
        core.assign(partitions)
        core.log.info("partitions assigned", ["partitions": .string(partitions.sorted().map(\.description).joined(separator: ","))])
        state.withLock { state in
            state.owned.formUnion(partitions)
            state.assignmentChanges += 1
        }
    }

    /// The engine drains the revoked partitions (their sends in flight answered, bounded by
    /// `revokeDrainTimeout`) and hands each back with its final commit point, which librdkafka
    /// commits before the incremental unassign. This waits for that hand-back, without polling;
    /// sends of the other partitions go on meanwhile.
    private func revoking(_ partitions: [PartitionID]) -> [PartitionID: Int64] {
        commits.withdrawQueued()  // the engine holds commits until the rejoin settles (`FanoutEngine.revoke`)
        let (aborted, stopDeadline) = state.withLock { state in
            state.owned.subtract(partitions)
            state.assignmentChanges += 1
            return (state.aborted, state.stopDeadline)
        }
        forgetLag(partitions)
        core.metrics.rebalances.labels("revoked").increment(by: UInt64(partitions.count))
        if aborted {
            core.lose(partitions)  // a crash commits nothing
            return [:]
        }
        core.revoke(partitions)
        // The engine drains by its own deadline (the ticker fires it); this bound only guards against
        // a ticker that stopped, so a dead thread cannot hold the group's rebalance forever.
        // A revoke inside `close` at shutdown waits no longer than the stop deadline: past it the
        // final commit is made already, and `stop(timeout:)` must not overshoot by another drain.
        var bound = core.options.revokeDrainTimeout + .seconds(2)
        if let stopDeadline { bound = min(bound, max(.zero, stopDeadline - .now)) }
        let giveUpAt = DispatchTime.now() + bound.timeInterval
        var points: [CommitPoint?] = []
        while true {
            let done: [CommitPoint?]? = state.withLock { state in
                guard partitions.allSatisfy({ state.drained[$0] != nil }) else { return nil }
                return partitions.map { state.drained.removeValue(forKey: $0)! }
            }
            if let done {
                points = done
                break
            }
            if drainSignal.wait(timeout: giveUpAt) == .timedOut {
                let names: LogValue = .string(partitions.map(\.description).joined(separator: ","))
                if stopDeadline != nil {
                    core.log.info("shutdown deadline reached: revoked partitions handed back with the final commit already made", ["partitions": names])
                } else {
                    core.log.error("a revoke was not drained in time; giving the partitions up without a final commit (the next owner replays from the last one)",
                                   ["partitions": names])
                }
                core.lose(partitions)
                state.withLock { state in for partition in partitions { state.drained[partition] = nil } }
                return [:]
            }
        }
        var offsets: [PartitionID: Int64] = [:]
        for point in points.compactMap({ $0 }) { offsets[point.partition] = point.offset }
        if !offsets.isEmpty { core.commitAnswered(points.compactMap { $0 }, failed: []) }
        core.log.info("partitions revoked", ["partitions": .string(partitions.sorted().map(\.description).joined(separator: ",")),
                                              "committing": .string(offsets.sorted { $0.key < $1.key }.map { "\($0.key)@\($0.value)" }.joined(separator: ","))])
        return offsets
    }

    /// On librdkafka's thread, the moment the member leaves its settled state: the engine hears of it
    /// before its next decision (`WorkerCore.groupRejoining`), and what waited here is withdrawn.
    private func rejoining() {
        core.groupRejoining()
        commits.withdrawQueued()
    }

    private func lost(_ partitions: [PartitionID]) {
        commits.withdrawQueued()  // the engine holds commits until the rejoin settles (`FanoutEngine.lose`)
        core.metrics.rebalances.labels("lost").increment(by: UInt64(partitions.count))
        forgetLag(partitions)
        state.withLock { state in
            state.owned.subtract(partitions)
            state.assignmentChanges += 1
        }
        core.lose(partitions)
        core.log.warning("partitions lost without an orderly handoff; their state is dropped uncommitted",
                         ["partitions": .string(partitions.sorted().map(\.description).joined(separator: ","))])
    }
}
