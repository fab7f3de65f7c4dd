import CRdKafka
import FanoutCore
import Foundation
import Synchronization

/// A consumer-group member: cooperative-sticky assignment, no auto commit, no auto offset store;
/// the owner commits explicit offsets after its work is done. Dynamic, or static with a
/// `groupInstanceID` (then `close` does not leave the group).
///
/// Threading: `poll` blocks and must run on a thread the caller owns (never Swift's cooperative
/// pool); rebalance handler closures run inside `poll`/`close` on that thread. `commit`,
/// `committed`, `close` and metadata calls block too. `commitAsync`, `drainCommitAnswers`, `pause`,
/// `resume` and `assignment` are cheap and safe from any thread.
public final class KafkaConsumer: Sendable {
    public let groupID: String
    /// Set: a static member (KIP-345), which `close` takes out of service without leaving the group.
    public let groupInstanceID: String?
    let client: RDKafkaClient
    let context: RebalanceContext
    let groupJoin: GroupJoinWatch
    let commits: CommitQueue
    let closed = Mutex(false)
    /// Whether `subscribe` ever succeeded: only then is there a group membership to settle on close.
    let subscribed = Atomic(false)

    /// Properties Fanout pins: changing them would break commit-after-ack.
    static let pinned = ["enable.auto.commit": "false", "enable.auto.offset.store": "false"]

    /// - Parameter configuration: librdkafka properties (at least `bootstrap.servers`). Defaults:
    ///   `partition.assignment.strategy=cooperative-sticky` (classic protocol), `auto.offset.reset=earliest`;
    ///   pinned: no auto commit or offset store, `isolation.level=read_committed`.
    ///   `group.protocol` is checked against the linked librdkafka (`KafkaGroupProtocol`): `consumer`
    ///   where it is not generally available is refused, `classic` is not passed to a librdkafka
    ///   that does not know the property.
    ///   - groupInstanceID: librdkafka's `group.instance.id` (static membership), e.g. the pod name;
    ///     nil for a dynamic member. Also taken from `configuration` when set there.
    ///   - log: receives librdkafka's log lines; `nil` leaves librdkafka's own stderr logger.
    public init(configuration: KafkaConfiguration, groupID: String, groupInstanceID: String? = nil,
                rebalance: KafkaRebalanceHandler = KafkaRebalanceHandler(), log: KafkaLogHandler? = nil) throws {
        guard !groupID.isEmpty else {
            throw KafkaError(.invalidConfiguration, reason: "the consumer group id is empty")
        }
        let instance = groupInstanceID ?? configuration["group.instance.id"]
        if let instance, instance.isEmpty {
            throw KafkaError(.invalidConfiguration, reason: "the group instance id is empty; name this member, or give none for a dynamic member")
        }
        if let given = configuration["group.instance.id"], let groupInstanceID, given != groupInstanceID {
            throw KafkaError(.invalidConfiguration, reason: "two group instance ids: '\(groupInstanceID)' and group.instance.id '\(given)'; give one")
        }
        let resolution: KafkaGroupProtocol.Resolution
        switch KafkaGroupProtocol.resolve(configuration.properties, librdkafka: .linked) {
        case .success(let resolved): resolution = resolved
        case .failure(let refusal): throw KafkaError(.invalidConfiguration, reason: refusal.reason)
        }
        var defaults = ["auto.offset.reset": "earliest"]
        // Under KIP-848 the broker assigns: an assignor property would be refused.
        if resolution.groupProtocol == .classic { defaults["partition.assignment.strategy"] = "cooperative-sticky" }
        var effective = try KafkaConfiguration(resolution.properties)
            .withDefaults(defaults)
            .pinning(Self.pinned, client: "group consumer")
            .pinning(KafkaConfiguration.readCommitted, client: "group consumer", because: KafkaConfiguration.readCommittedReason)
        effective["group.id"] = groupID
        effective["group.instance.id"] = instance
        // The `cgrp` debug context carries the join state (GroupJoinWatch); lines the user did not ask
        // for stay unforwarded.
        let requested = effective["debug"].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
        let forwardedLevel: Int32 = !requested.isEmpty ? 7 : Int32(effective["log_level"] ?? "6") ?? 6
        if !requested.contains("cgrp") && !requested.contains("all") {
            effective["debug"] = (requested + ["cgrp"]).joined(separator: ",")
        }
        let conf = try RDKafkaConf(effective)
        conf.withPointer { rd_kafka_conf_set_rebalance_cb($0, fanoutRebalanceCallback) }
        // librdkafka refuses to mix cooperative and eager assignors, so one entry decides; KIP-848
        // is incremental throughout.
        let assignors = (effective["partition.assignment.strategy"] ?? "").split(separator: ",")
        let cooperative = resolution.groupProtocol == .consumer
            || assignors.contains { $0.trimmingCharacters(in: .whitespaces) == "cooperative-sticky" }
        context = RebalanceContext(handler: rebalance, cooperative: cooperative)
        groupJoin = GroupJoinWatch(rejoining: rebalance.rejoining, heartbeatSent: rebalance.heartbeatSent)
        client = try RDKafkaClient(type: RD_KAFKA_CONSUMER, conf: conf,
                                   context: ClientContext(log: log, rebalance: context, groupJoin: groupJoin,
                                                          forwardedLevel: forwardedLevel))
        self.groupID = groupID
        self.groupInstanceID = instance
        commits = CommitQueue(client: client)
        // Route the main queue (errors, logs as events) to the consumer queue served by poll.
        _ = client.withHandle { rd_kafka_poll_set_consumer($0) }
    }

    /// A consumer dropped without `close` closes here (bounded by the default timeout), so that a
    /// handle librdkafka would abort on is never destroyed (see `close`).
    deinit {
        try? close()
    }

    /// Whether librdkafka's join state is `steady` (GroupJoinWatch): the member's assignment is
    /// applied and no JoinGroup/SyncGroup round is under way. A commit handed over now carries a
    /// generation that is current.
    public var isSettledMember: Bool { groupJoin.isSteady }

    public func subscribe(_ topics: [String]) throws {
        try ensureOpen()
        guard !topics.isEmpty else { throw KafkaError(.subscribe, reason: "subscribe needs at least one topic") }
        let list = RDKafkaTopicPartitionList(topics.map { PartitionID(topic: $0, partition: -1) })   // RD_KAFKA_PARTITION_UA
        let err = client.withHandle { handle in list.withPointer { rd_kafka_subscribe(handle, $0) } }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.subscribe, err, "could not subscribe to \(topics.joined(separator: ", ")): \(KafkaResponseCode(err).message)")
        }
        subscribed.store(true, ordering: .relaxed)
    }

    /// Blocking: waits up to `timeout` for the first record or event, then returns what is ready,
    /// at most `maxMessages` records. Rebalance callbacks run inside this call.
    /// Throws only when the consumer is closed or hit a fatal error; other errors are in the batch.
    public func poll(timeout: Duration, maxMessages: Int = 1000) throws -> KafkaPollBatch {
        try ensureOpen()
        var batch = try client.pollBatch(timeout: timeout, maxMessages: max(1, maxMessages))
        batch.errors.append(contentsOf: context.drainErrors())
        commits.collect()
        batch.commitAnswers = commits.take()
        return batch
    }

    /// Blocking, synchronous commit of "next offset to read" per partition. Throws `.commit` with
    /// per-partition failures (e.g. an old generation during a rebalance); nothing is retried here.
    public func commit(_ offsets: [PartitionID: Int64]) throws {
        try ensureOpen()
        try client.commit(offsets)
    }

    /// Non-blocking commit of "next offset to read" per partition: hands the offsets to librdkafka
    /// and returns at once, without waiting for the group coordinator. Its answer — success, the
    /// partitions refused (e.g. an old generation during a rebalance), or `.closed` when the
    /// consumer closed first — comes exactly once, in a later poll batch's `commitAnswers` (at most
    /// one poll timeout after librdkafka has it) or, after `close`, from `drainCommitAnswers`.
    /// Nothing is retried here. Throws (and no answer will come) when the consumer is closed,
    /// `offsets` is empty, or librdkafka refused to start the commit.
    public func commitAsync(_ offsets: [PartitionID: Int64]) throws -> KafkaCommitID {
        try ensureOpen()
        return try commits.commit(offsets)
    }

    /// Non-blocking, any thread, also after `close`: commit answers not yet returned by `poll`.
    /// After `close` returned or threw, this holds the last of them, including a `.closed` answer
    /// for every `commitAsync` librdkafka did not answer.
    public func drainCommitAnswers() -> [KafkaCommitAnswer] {
        commits.collect()
        return commits.take()
    }

    /// Blocking: the group's committed offsets; `nil` for a partition with no commit yet.
    public func committed(_ partitions: [PartitionID], timeout: Duration) throws -> [PartitionID: Int64?] {
        try ensureOpen()
        guard !partitions.isEmpty else { return [:] }
        let list = RDKafkaTopicPartitionList(partitions)
        let err = client.withHandle { handle in
            list.withPointer { rd_kafka_committed(handle, $0, timeout.librdkafkaMilliseconds) }
        }
        let failures = list.failures
        if err != RD_KAFKA_RESP_ERR_NO_ERROR || !failures.isEmpty {
            throw KafkaError(.committedOffsets, err, "could not read committed offsets", partitionFailures: failures)
        }
        var result: [PartitionID: Int64?] = [:]
        for entry in list.entries { result[entry.partition] = entry.offset >= 0 ? entry.offset : nil }
        return result
    }

    /// Stops fetching from these partitions (records already fetched are discarded and refetched
    /// after `resume`). Membership is unaffected.
    public func pause(_ partitions: some Collection<PartitionID>) throws {
        try ensureOpen()
        try client.pause(partitions)
    }

    public func resume(_ partitions: some Collection<PartitionID>) throws {
        try ensureOpen()
        try client.resume(partitions)
    }

    /// Non-blocking: the partition's high watermark as of the last fetch response (nil before the
    /// first; stale while paused). For lag gauges, where a broker round trip per partition is too dear.
    public func lastKnownHighWatermark(of partition: PartitionID) throws -> Int64? {
        try ensureOpen()
        return client.lastKnownHighWatermark(of: partition)
    }

    /// Latest-offset requests sent so far to restart a fetcher that librdkafka left stopped (`FetchNudge`).
    public var fetchNudges: KafkaFetchNudges { client.fetchNudge.counts }

    public func assignment() throws -> Set<PartitionID> {
        try ensureOpen()
        return try client.assignment()
    }

    /// Blocking. Throws `.topicNotFound` naming the first missing topic.
    public func partitionCounts(of topics: [String], timeout: Duration) throws -> [String: Int] {
        try ensureOpen()
        return try client.partitionCounts(of: topics, timeout: timeout)
    }

    /// What librdkafka holds for `property` (nil when unset): for tests that a setting reached it.
    func configuredValue(of property: String) -> String? { client.configuredValue(of: property) }

    func ensureOpen() throws {
        if closed.withLock({ $0 }) {
            throw KafkaError(.closed, reason: "the consumer of group '\(groupID)' is closed")
        }
    }
}
