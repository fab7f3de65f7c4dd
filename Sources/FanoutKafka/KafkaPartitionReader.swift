import CRdKafka
import FanoutCore
import Synchronization

/// A consumer without group membership: reads exactly the partitions it is told to, from the
/// offsets it is told (e.g. partition p of the compacted `activity-tokens` from the beginning), and
/// never commits. Partition EOF is reported (`enable.partition.eof=true` by default) so the owner
/// can tell when it has caught up; `watermarks` gives the end to compare against.
///
/// Threading: `poll`, `watermarks` and `partitionCounts` block and belong on a thread the caller
/// owns. `assign`/`unassign`/`pause`/`resume` are safe from any thread.
public final class KafkaPartitionReader: Sendable {
    private let client: RDKafkaClient
    private let closed = Mutex(false)

    /// - Parameter log: receives librdkafka's log lines; `nil` leaves librdkafka's own stderr logger.
    public init(configuration: KafkaConfiguration, log: KafkaLogHandler? = nil) throws {
        let effective = try configuration.outsideTheGroup()
            // librdkafka requires a group.id even for manual assignment; the reader never joins
            // the group nor commits, so sharing the worker's group id is harmless.
            .withDefaults(["enable.partition.eof": "true", "group.id": "fanout-partition-reader"])
            .pinning(["enable.auto.commit": "false"], client: "partition reader")
            .pinning(KafkaConfiguration.readCommitted, client: "partition reader", because: KafkaConfiguration.readCommittedReason)
        client = try RDKafkaClient(type: RD_KAFKA_CONSUMER, conf: try RDKafkaConf(effective), context: ClientContext(log: log))
        _ = client.withHandle { rd_kafka_poll_set_consumer($0) }
    }

    /// Adds partitions to the assignment, each starting at its offset. Already-assigned partitions
    /// are an error from librdkafka; `unassign` them first to restart.
    public func assign(_ starts: [PartitionID: KafkaOffset]) throws {
        try ensureOpen()
        guard !starts.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(offsets: starts.mapValues(\.rawValue))
        if let error = client.withHandle({ handle in list.withPointer { rd_kafka_incremental_assign(handle, $0) } }) {
            throw KafkaError(.assignment, consuming: error,
                             context: "could not assign \(starts.keys.sorted().map(\.description).joined(separator: ", "))")
        }
    }

    public func unassign(_ partitions: some Collection<PartitionID>) throws {
        try ensureOpen()
        guard !partitions.isEmpty else { return }
        let list = RDKafkaTopicPartitionList(partitions)
        if let error = client.withHandle({ handle in list.withPointer { rd_kafka_incremental_unassign(handle, $0) } }) {
            throw KafkaError(.assignment, consuming: error, context: "could not unassign \(partitions.count) partition(s)")
        }
    }

    public func assignment() throws -> Set<PartitionID> {
        try ensureOpen()
        return try client.assignment()
    }

    /// Blocking: see `KafkaConsumer.poll`. `reachedEnd` lists partitions that hit their end.
    public func poll(timeout: Duration, maxMessages: Int = 1000) throws -> KafkaPollBatch {
        try ensureOpen()
        return try client.pollBatch(timeout: timeout, maxMessages: max(1, maxMessages))
    }

    /// Blocking: asks the partition leader for the low/high watermarks. Caught up when the next
    /// offset to read reaches `high` (as of the query).
    public func watermarks(of partition: PartitionID, timeout: Duration) throws -> KafkaWatermarks {
        try ensureOpen()
        return try client.watermarks(of: partition, timeout: timeout)
    }

    public func pause(_ partitions: some Collection<PartitionID>) throws {
        try ensureOpen()
        try client.pause(partitions)
    }

    public func resume(_ partitions: some Collection<PartitionID>) throws {
        try ensureOpen()
        try client.resume(partitions)
    }

    /// Blocking. Throws `.topicNotFound` naming the first missing topic.
    public func partitionCounts(of topics: [String], timeout: Duration) throws -> [String: Int] {
        try ensureOpen()
        return try client.partitionCounts(of: topics, timeout: timeout)
    }

    /// Latest-offset requests sent so far to restart a fetcher that librdkafka left stopped (`FetchNudge`).
    public var fetchNudges: KafkaFetchNudges { client.fetchNudge.counts }

    /// Blocking: stops fetching. Later calls throw `.closed`.
    public func close() {
        let wasClosed = closed.withLock { closed in
            defer { closed = true }
            return closed
        }
        guard !wasClosed else { return }
        _ = client.withHandle { rd_kafka_consumer_close($0) }
    }

    /// What librdkafka holds for `property` (nil when unset): for tests that a setting reached it.
    func configuredValue(of property: String) -> String? { client.configuredValue(of: property) }

    private func ensureOpen() throws {
        if closed.withLock({ $0 }) { throw KafkaError(.closed, reason: "the partition reader is closed") }
    }
}
