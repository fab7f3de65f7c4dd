import FanoutCore
import FanoutKafka
import Synchronization

/// Executes the engine's `.commit` actions without ever waiting for Kafka (`commitAsync`): a commit
/// the coordinator takes 40 s to answer (a rebalance in progress) stops nothing — not decoding,
/// deciding, sending, nor the poll loop, which brings the answer back (`answered`).
///
/// At most one commit is outstanding; points the engine hands out meanwhile wait in `next` (the
/// newest point per partition wins), so memory stays one entry per partition however long Kafka
/// takes. Every answer goes back to the engine (`WorkerCore.commitAnswered`): refused points are
/// offered again at its next commit interval.
///
/// While the group rebalances the engine offers no commit (`FanoutEngine.groupRebalancing`); what
/// was queued here before is withdrawn (`withdrawQueued`) and offered again once it settles. A commit
/// about to start while the member is not settled, or while a heartbeat's answer may be on its way, is
/// withheld (`fanout_offset_commits_total{result="withheld"}`; docs/design.md §4).
///
/// An outstanding commit that librdkafka has not answered within `answerDeadline` is given up when
/// the engine offers the next (a warning, `fanout_offset_commits_total{result="unanswered"}`): the next
/// starts without it, and a late answer still reaches the engine, which acts only on the newest offer.
/// Waiting on it forever stopped every commit of a worker with nothing in its log (seen in an
/// AddressSanitizer run of the fleet's SIGTERM scenario: six partitions committed short of their end
/// for 90 s while every state was delivered). `fanout_offset_commit_waiting_seconds` says how long the
/// outstanding one has waited.
final class OffsetCommitter: Sendable {
    private struct State: Sendable {
        /// `round`: the engine's round of the offer (`EngineAction.commit`), handed back with a refusal.
        var outstanding: (id: KafkaCommitID, since: ContinuousClock.Instant, partitions: Int, round: UInt64)?
        var next: [PartitionID: Int64] = [:]
        /// The round of the newest offer in `next`.
        var nextRound: UInt64 = 0
    }

    /// How long an outstanding commit may go unanswered before the next one starts without it: ten
    /// commit intervals, at least 10 s (a coordinator answers in milliseconds; while the group
    /// rebalances the engine offers nothing, so a commit held by a rebalance is not given up then).
    let answerDeadline: Duration

    /// Answers meaning "the group is rebalancing": commits of this generation are refused until it settles.
    private static let rebalanceCodes: Set<KafkaResponseCode> = [.rebalanceInProgress, .illegalGeneration]

    private let consumer: KafkaConsumer
    private let core: WorkerCore
    private let state = Mutex(State())

    init(consumer: KafkaConsumer, core: WorkerCore, commitInterval: Duration) {
        self.consumer = consumer
        self.core = core
        answerDeadline = max(.seconds(10), commitInterval * 10)
    }

    /// How long the outstanding commit has waited for its answer (zero when none is outstanding).
    var waiting: Duration { state.withLock { $0.outstanding.map { .now - $0.since } ?? .zero } }

    /// Commits `points` now, or as soon as the outstanding commit is answered. Any thread.
    func enqueue(_ points: [CommitPoint], round: UInt64) {
        guard !points.isEmpty else { return }
        let (send, abandoned): (Offer?, (waited: Duration, partitions: Int)?) = state.withLock { state in
            for point in points { state.next[point.partition] = max(point.offset, state.next[point.partition] ?? .min) }
            state.nextRound = max(state.nextRound, round)
            var abandoned: (Duration, Int)?
            if let outstanding = state.outstanding {
                let waited = ContinuousClock.now - outstanding.since
                guard waited >= answerDeadline else { return (nil, nil) }
                abandoned = (waited, outstanding.partitions)
                state.outstanding = nil
            }
            return (takeNext(&state), abandoned)
        }
        if let abandoned {
            core.metrics.commits.labels("unanswered").increment()
            core.log.warning("offset commit unanswered; the next starts without waiting for it",
                             ["waited": .duration(abandoned.waited), "partitions": .int(abandoned.partitions)])
        }
        if let send { start(send) }
    }

    /// Drops the points waiting behind the outstanding commit (the group started rebalancing: the
    /// engine offers them again once it settled). Any thread.
    func withdrawQueued() { state.withLock { $0.next.removeAll() } }

    /// Answers from the poll batch (the intake thread). Returns the points Kafka now holds.
    func answered(_ answers: [KafkaCommitAnswer]) -> [CommitPoint] {
        var held: [CommitPoint] = []
        for answer in answers {
            let points = answer.offsets.map { CommitPoint(partition: $0.key, offset: $0.value) }
            let stored = answer.committed
            let failed = Set(answer.offsets.keys.filter { stored[$0] == nil })
            // A refusal because the group is rebalancing is a fact the engine acts on: it holds commits,
            // unless the group settled since the offer (a late answer given up on has no round: the
            // engine heard of its rebalance by then, from the join watch or the rebalance callbacks).
            let rebalancing = answer.error?.partitionFailures.contains { Self.rebalanceCodes.contains($0.underlying) } == true
                || answer.error.map { Self.rebalanceCodes.contains($0.underlying) } == true
            let round = rebalancing ? state.withLock { state in state.outstanding?.id == answer.id ? state.outstanding?.round : nil } : nil
            if core.commitAnswered(points, failed: failed, refusedForRebalanceIn: round) { withdrawQueued() }
            core.metrics.commits.labels(failed.isEmpty ? "ok" : "failed").increment()
            if let error = answer.error, error.code != .closed {
                core.log.warning("offset commit refused; the engine offers it again with the next", ["error": .string(error.description)])
            }
            held += points.filter { !failed.contains($0.partition) }
            let send: Offer? = state.withLock { state in
                guard state.outstanding?.id == answer.id else { return nil }
                state.outstanding = nil
                return takeNext(&state)
            }
            if let send { start(send) }
        }
        return held
    }

    /// Blocking, on the caller's thread: the final commit at shutdown. Returns whether Kafka took it.
    @discardableResult
    func commitNow(_ points: [CommitPoint]) -> Bool {
        guard !points.isEmpty else { return true }
        do {
            try consumer.commit(Self.offsets(points))
            core.metrics.commits.labels("ok").increment()
            core.commitAnswered(points, failed: [])
            return true
        } catch {
            core.metrics.commits.labels("failed").increment()
            core.commitAnswered(points, failed: Set(points.map(\.partition)))
            core.log.warning("final offset commit failed; the next owner replays from the previous commit", ["error": .string("\(error)")])
            return false
        }
    }

    /// Points to commit, with the round of the newest offer among them.
    private typealias Offer = (points: [CommitPoint], round: UInt64)

    private func takeNext(_ state: inout State) -> Offer? {
        guard !state.next.isEmpty else { return nil }
        defer { state.next.removeAll(keepingCapacity: true) }
        return (state.next.map { CommitPoint(partition: $0.key, offset: $0.value) }, state.nextRound)
    }

    private func start(_ offer: Offer) {
        let points = offer.points
        // The last check before librdkafka gets it: between the engine's offer and here the member may
        // have left its settled state, or sent a heartbeat whose answer can start a rejoin ahead of this
        // commit (docs/design.md §4). Withheld, it is offered again at the next interval.
        let settled = consumer.isSettledMember
        if !settled || core.heartbeatAnswerMayBePending() {
            core.metrics.commits.labels("withheld").increment()
            core.commitAnswered(points, failed: Set(points.map(\.partition)))
            core.log.info("offset commit withheld; the engine offers it again with the next",
                          ["reason": .string(settled ? "a heartbeat's answer may be on its way" : "the group is rebalancing for this member"),
                           "partitions": .int(points.count)])
            return
        }
        do {
            let id = try consumer.commitAsync(Self.offsets(points))
            state.withLock { $0.outstanding = (id, .now, points.count, offer.round) }
        } catch {
            // Not started (the consumer closed, or librdkafka refused): no answer will come.
            core.metrics.commits.labels("failed").increment()
            core.commitAnswered(points, failed: Set(points.map(\.partition)))
            core.log.warning("offset commit could not start; the engine offers it again with the next", ["error": .string("\(error)")])
        }
    }

    /// The points as Kafka's "next offset to read" per partition.
    private static func offsets(_ points: [CommitPoint]) -> [PartitionID: Int64] {
        Dictionary(uniqueKeysWithValues: points.map { ($0.partition, $0.offset) })
    }
}
