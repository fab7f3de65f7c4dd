import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// The Kafka side of the worker: one group consumer for activity-updates and broadcast-updates,
/// polled on a thread of its own (blocking librdkafka calls never run on Swift's cooperative pool).
///
/// Per loop: poll a batch → decode and feed the engine → pause/resume partitions by backpressure →
/// commit moved commit points every `kafka.commit_interval`. Rebalance callbacks run inside `poll`
/// on the same thread: an assigned activity partition stays paused until its token partition has
/// been read up to the high watermark; a revoked one stops sending, waits (bounded) for its
/// in-flight sends, commits its final point and is forgotten.
final class IntakeService: Sendable {
    struct State: Sendable {
        var owned: Set<TopicPartition> = []
        /// Activity partitions waiting for their token partition to catch up.
        var gated: Set<TopicPartition> = []
        /// Activity partitions whose tokens caught up, to resume on the intake thread.
        var released: Set<TopicPartition> = []
        /// Partitions paused by backpressure.
        var pressured: Set<TopicPartition> = []
        /// Commit points not yet committed (a failed commit is retried with the next).
        var uncommitted: [TopicPartition: Int64] = [:]
        /// Per owned partition: highest offset read + 1, and the last committed offset (for the lag gauge).
        var readEnd: [TopicPartition: Int64] = [:]
        var committedAt: [TopicPartition: Int64] = [:]
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
    private let core: WorkerCore
    private let relay: Relay
    private let gate: BackpressureGate
    let state = Mutex(State())
    private let topics: FanoutConfiguration.Topics
    private let commitInterval: Duration

    init(core: WorkerCore) throws {
        let relay = Relay()
        let settings = core.settings
        topics = settings.configuration.kafka.topics
        let handler = KafkaRebalanceHandler(
            assigned: { relay.get()?.assigned($0) },
            revoking: { relay.get()?.revoking($0) ?? [:] },
            lost: { relay.get()?.lost($0) })
        consumer = try KafkaConsumer(configuration: settings.kafka, groupID: settings.configuration.kafka.groupID, rebalance: handler,
                                     log: KafkaLogBridge.handler(core.log))
        tokens = try TokenFollower(configuration: settings.kafka, topic: topics.activityTokens, core: core) { partition in
            relay.get()?.tokensCaughtUp(partition)
        }
        self.core = core
        self.relay = relay
        gate = BackpressureGate(settings.configuration.backpressure)
        commitInterval = settings.configuration.kafka.commitInterval
        relay.set(self)
    }

    func start() throws {
        try consumer.subscribe([topics.activityUpdates, topics.broadcastUpdates])
        tokens.start()
        let thread = Thread { [self] in
            run()
            finish()
        }
        thread.name = "fanout-intake"
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

    var gatedCount: Int { state.withLock { $0.gated.count } }

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
        var lastCommit = ContinuousClock.now
        while true {
            let (deadline, aborted) = state.withLock { ($0.stopDeadline, $0.aborted) }
            if let deadline {
                if aborted {
                    closeConsumer()
                } else {
                    drain(until: deadline)
                }
                return
            }
            let batch: KafkaPollBatch
            do {
                batch = try consumer.poll(timeout: core.options.pollTimeout, maxMessages: core.options.maxPollRecords)
            } catch {
                core.fail("the Kafka consumer failed, intake stopped (restart the worker): \(error)")
                return
            }
            for error in batch.errors {
                if error.code == .commit { core.metrics.commits.labels("failed").increment() }
                log.warning("Kafka consumer error", ["error": .string(error.description)])
            }
            if !batch.messages.isEmpty {
                let owned = state.withLock { state in
                    for message in batch.messages where state.owned.contains(message.topicPartition) {
                        let end = message.offset + 1
                        if end > state.readEnd[message.topicPartition] ?? 0 { state.readEnd[message.topicPartition] = end }
                        if state.committedAt[message.topicPartition] == nil { state.committedAt[message.topicPartition] = message.offset }
                    }
                    return state.owned
                }
                core.ingest(batch.messages.filter { owned.contains($0.topicPartition) })
            }
            resumeReleased()
            applyBackpressure()
            if ContinuousClock.now - lastCommit >= commitInterval {
                commit()
                updateLag()
                core.updateGauges()
                lastCommit = .now
            }
        }
    }

    /// Graceful stop: no more intake, wait for in-flight sends and pending produces, final commit,
    /// leave the group (the revoke callback commits once more, without waiting).
    private func drain(until deadline: ContinuousClock.Instant) {
        let owned = state.withLock { $0.owned }
        do { try consumer.pause(owned) } catch {
            core.log.warning("could not pause partitions for shutdown", ["error": .string("\(error)")])
        }
        while !core.isIdle && ContinuousClock.now < deadline {
            // Keep serving the group (heartbeats, callbacks); records that still arrive are not
            // taken: they were never received, so nothing is committed past them.
            _ = try? consumer.poll(timeout: .milliseconds(20), maxMessages: 1)
            Thread.sleep(forTimeInterval: 0.01)
        }
        if !core.isIdle {
            core.log.warning("shutdown timeout reached with sends or produces still outstanding; their offsets stay uncommitted and will be replayed")
        }
        commit()
        closeConsumer()
    }

    /// Bound on leaving the group after the final commit: past it the worker exits anyway and the
    /// group reassigns its partitions after the session timeout, from the commit just made.
    static let leaveGroupTimeout: Duration = .seconds(15)

    private func closeConsumer() {
        do {
            try consumer.close(timeout: Self.leaveGroupTimeout)
        } catch {
            core.log.warning("leaving the consumer group reported an error", ["error": .string("\(error)")])
        }
    }

    private func commit() {
        let points = core.commitPoints()
        let offsets: [TopicPartition: Int64] = state.withLock { state in
            for point in points {
                let tp = TopicPartition(point.partition.topic, point.partition.partition)
                guard state.owned.contains(tp) else { continue }
                // A point equal to what the group already holds (the resume position right after an
                // assignment) is not committed again: a redundant commit racing a rebalance is
                // rejected with ILLEGAL_GENERATION, which librdkafka treats as a lost assignment.
                state.uncommitted[tp] = point.offset == state.committedAt[tp] ? nil : point.offset
            }
            return state.uncommitted
        }
        guard !offsets.isEmpty else { return }
        do {
            try consumer.commit(offsets)
            core.metrics.commits.labels("ok").increment()
            core.recordCommitted(offsets)
            state.withLock { state in
                for (partition, offset) in offsets where state.uncommitted[partition] == offset { state.uncommitted[partition] = nil }
                for (partition, offset) in offsets where state.owned.contains(partition) { state.committedAt[partition] = offset }
            }
        } catch {
            core.metrics.commits.labels("failed").increment()
            core.log.warning("offset commit failed; retrying with the next", ["error": .string("\(error)")])
        }
    }

    /// `fanout_consumer_lag`: per owned partition, the partition's end minus the committed offset.
    /// The end is the high watermark librdkafka last saw in a fetch response (no broker round trip;
    /// it stops moving while the partition is paused), or the end of what this worker has read when
    /// that is further. Partitions with nothing committed yet by this worker are reported from the
    /// first offset it read.
    private func updateLag() {
        let positions: [(TopicPartition, end: Int64, committed: Int64)] = state.withLock { state in
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
        }
    }

    /// Forgets a partition's lag bookkeeping and removes its gauge (revoked or lost): the new owner
    /// exports it, and a dashboard summing lag over workers must not count it twice or as zero.
    private func forgetLag(_ partitions: [TopicPartition]) {
        state.withLock { state in
            for partition in partitions {
                state.readEnd[partition] = nil
                state.committedAt[partition] = nil
            }
        }
        for partition in partitions { core.metrics.consumerLag.remove(partition.topic, String(partition.partition)) }
    }

    private func applyBackpressure() {
        let (candidates, pressured) = state.withLock { state in (state.owned.subtracting(state.gated), state.pressured) }
        var pause: [TopicPartition] = []
        var resume: [TopicPartition] = []
        let ordered = Array(candidates)
        let allMeasures = core.measures(of: ordered.map { PartitionID(topic: $0.topic, partition: $0.partition) })
        for (partition, measures) in zip(ordered, allMeasures) {
            if pressured.contains(partition) {
                if gate.mayResume(measures) { resume.append(partition) }
            } else if gate.shouldPause(measures) {
                pause.append(partition)
            }
        }
        guard !pause.isEmpty || !resume.isEmpty else { return }
        // Each call on its own, and only what succeeded is recorded: the rest is tried again on the
        // next pass (a resume that failed after a pause that worked must not leave a partition paused
        // without being listed as pressured, where nothing would ever resume it).
        do {
            if !pause.isEmpty { try consumer.pause(pause) }
        } catch {
            core.log.warning("could not pause partitions; trying again", ["error": .string("\(error)")])
            pause = []
        }
        do {
            if !resume.isEmpty { try consumer.resume(resume) }
        } catch {
            core.log.warning("could not resume partitions; trying again", ["error": .string("\(error)")])
            resume = []
        }
        let paused = state.withLock { state in
            state.pressured.formUnion(pause)
            state.pressured.subtract(resume)
            return state.pressured
        }
        for partition in pause { core.log.info("partition paused by backpressure", ["partition": .string(partition.description)]) }
        core.relieve(pause.map { PartitionID(topic: $0.topic, partition: $0.partition) })
        for partition in resume { core.log.info("partition resumed", ["partition": .string(partition.description)]) }
        for topic in [topics.activityUpdates, topics.broadcastUpdates] {
            core.metrics.pausedPartitions.labels(topic).set(paused.filter { $0.topic == topic }.count)
        }
    }

    // MARK: Rebalance callbacks (on the intake thread, inside poll/close)

    private func assigned(_ partitions: [TopicPartition]) {
        core.metrics.rebalances.labels("assigned").increment(by: UInt64(partitions.count))
        core.assign(partitions.map { PartitionID(topic: $0.topic, partition: $0.partition) })
        let activity = partitions.filter { $0.topic == topics.activityUpdates }
        state.withLock { state in
            state.owned.formUnion(partitions)
            state.gated.formUnion(activity)
        }
        if !activity.isEmpty {
            do { try consumer.pause(activity) } catch {
                core.log.warning("could not hold new partitions until their tokens are read", ["error": .string("\(error)")])
            }
            for partition in activity { tokens.follow(partition.partition) }
        }
        core.log.info("partitions assigned", ["partitions": .string(partitions.sorted().map(\.description).joined(separator: ","))])
    }

    private func revoking(_ partitions: [TopicPartition]) -> [TopicPartition: Int64] {
        let ids = partitions.map { PartitionID(topic: $0.topic, partition: $0.partition) }
        let (aborted, carried) = state.withLock { state -> (Bool, [TopicPartition: Int64]) in
            var carried: [TopicPartition: Int64] = [:]
            for partition in partitions {
                state.owned.remove(partition)
                state.gated.remove(partition)
                state.released.remove(partition)
                state.pressured.remove(partition)
                carried[partition] = state.uncommitted.removeValue(forKey: partition)
            }
            return (state.aborted, carried)
        }
        for partition in partitions where partition.topic == topics.activityUpdates { tokens.unfollow(partition.partition) }
        forgetLag(partitions)
        core.metrics.rebalances.labels("revoked").increment(by: UInt64(partitions.count))
        if aborted {
            _ = core.revoke(ids)
            return [:]
        }
        core.beginClosing(ids)
        let deadline = ContinuousClock.now + core.options.revokeDrainTimeout
        while core.inFlight(of: ids) > 0 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        var offsets = carried
        for point in core.revoke(ids) {
            offsets[TopicPartition(point.partition.topic, point.partition.partition)] = point.offset
        }
        if !offsets.isEmpty { core.recordCommitted(offsets) }
        core.log.info("partitions revoked", ["partitions": .string(partitions.sorted().map(\.description).joined(separator: ",")),
                                              "committing": .string(offsets.sorted { $0.key < $1.key }.map { "\($0.key)@\($0.value)" }.joined(separator: ","))])
        return offsets
    }

    private func lost(_ partitions: [TopicPartition]) {
        core.metrics.rebalances.labels("lost").increment(by: UInt64(partitions.count))
        forgetLag(partitions)
        state.withLock { state in
            for partition in partitions {
                state.owned.remove(partition)
                state.gated.remove(partition)
                state.released.remove(partition)
                state.pressured.remove(partition)
                state.uncommitted[partition] = nil
            }
        }
        for partition in partitions where partition.topic == topics.activityUpdates { tokens.unfollow(partition.partition) }
        _ = core.revoke(partitions.map { PartitionID(topic: $0.topic, partition: $0.partition) })
        core.log.warning("partitions lost without an orderly handoff; their state is dropped uncommitted",
                         ["partitions": .string(partitions.sorted().map(\.description).joined(separator: ","))])
    }

    /// From the token follower's thread: only records the release; the intake thread resumes the
    /// partition, so every pause and resume happens on one thread.
    private func tokensCaughtUp(_ partition: Int32) {
        let tp = TopicPartition(topics.activityUpdates, partition)
        state.withLock { state in
            guard state.owned.contains(tp), state.gated.contains(tp) else { return }
            state.released.insert(tp)
        }
    }

    /// Resumes partitions whose tokens caught up (unless backpressure holds them).
    private func resumeReleased() {
        let resume: [TopicPartition] = state.withLock { state in
            defer { state.released.removeAll() }
            var resume: [TopicPartition] = []
            for partition in state.released where state.gated.remove(partition) != nil && state.owned.contains(partition) {
                if !state.pressured.contains(partition) { resume.append(partition) }
            }
            return resume
        }
        guard !resume.isEmpty else { return }
        do { try consumer.resume(resume) } catch {
            core.log.warning("could not resume partitions after their tokens were read; trying again", ["error": .string("\(error)")])
            // Still gated and released: the next pass tries again (else nothing would ever resume them).
            state.withLock { state in
                state.gated.formUnion(resume)
                state.released.formUnion(resume)
            }
            return
        }
        core.log.info("tokens read up to the high watermark; events flow", ["partitions": .string(resume.sorted().map(\.description).joined(separator: ","))])
    }
}
