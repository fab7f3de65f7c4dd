import CRdKafka
import FanoutCore
import Synchronization

/// Non-blocking offset commits: owns the `rd_kafka_queue_t` that librdkafka posts each commit's
/// result to (`rd_kafka_commit_queue`, event API: no callback runs), and the ledger that turns
/// those results into exactly one `KafkaCommitAnswer` per commit.
///
/// The queue is served only by `collect()`, never waited on, so the poll loop picks answers up
/// without blocking. Holds the client so that the queue is destroyed before the handle.
///
/// `@unchecked Sendable`: the queue pointer is immutable and librdkafka queues are thread-safe;
/// the ledger is behind a mutex.
final class CommitQueue: @unchecked Sendable {
    private let queue: OpaquePointer
    private let client: RDKafkaClient
    private let ledger = Mutex(CommitLedger())

    init(client: RDKafkaClient) {
        self.client = client
        queue = client.withHandle { rd_kafka_queue_new($0) }
    }

    deinit { rd_kafka_queue_destroy(queue) }

    /// Hands the offsets to librdkafka's group thread and returns at once; the answer comes through
    /// `collect()`. Throws `.closed` after `close`, `.commit` when librdkafka refused to start it.
    func commit(_ offsets: [PartitionID: Int64]) throws -> KafkaCommitID {
        guard !offsets.isEmpty else {
            throw KafkaError(.commit, reason: "an asynchronous commit needs at least one partition")
        }
        guard let id = ledger.withLock({ $0.register(offsets) }) else {
            throw KafkaError(.closed, reason: "the consumer is closing; no new commit can start")
        }
        let list = RDKafkaTopicPartitionList(offsets: offsets)
        // The id travels as librdkafka's commit opaque (a tag, never dereferenced).
        let tag = UnsafeMutableRawPointer(bitPattern: UInt(id.rawValue))
        let err = client.withHandle { handle in
            list.withPointer { rd_kafka_commit_queue(handle, $0, queue, nil, tag) }
        }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            ledger.withLock { $0.withdraw(id) }
            throw KafkaError(.commit, err, "could not start the commit of \(PartitionID.describe(offsets)): \(KafkaResponseCode(err).message)")
        }
        return id
    }

    /// Non-blocking: moves the results librdkafka has posted so far into the ledger.
    func collect() {
        while let event = rd_kafka_queue_poll(queue, 0) {
            defer { rd_kafka_event_destroy(event) }
            guard rd_kafka_event_type(event) == RD_KAFKA_EVENT_OFFSET_COMMIT else { continue }
            let id = KafkaCommitID(rawValue: UInt64(UInt(bitPattern: rd_kafka_event_opaque(event))))
            let err = rd_kafka_event_error(event)
            var failures: [KafkaError.PartitionFailure] = []
            if let list = rd_kafka_event_topic_partition_list(event) {
                failures = RDKafkaTopicPartitionList.entries(of: list)
                    .filter { $0.error != .noError }
                    .map { KafkaError.PartitionFailure(partition: $0.partition, underlying: $0.error) }
            }
            var error: KafkaError?
            if err != RD_KAFKA_RESP_ERR_NO_ERROR || !failures.isEmpty {
                let text = rd_kafka_event_error_string(event).map { String(cString: $0) } ?? KafkaResponseCode(err).message
                error = KafkaError(.commit, err, "the group coordinator refused the commit: \(text)", partitionFailures: failures)
            }
            ledger.withLock { $0.answer(id, error: error) }
        }
    }

    /// Answers collected and not yet handed out, oldest first.
    func take() -> [KafkaCommitAnswer] {
        ledger.withLock { $0.take() }
    }

    /// Collects what librdkafka answered, then answers every commit still outstanding with
    /// `.closed`; later results from librdkafka for them are dropped.
    func close(groupID: String) {
        collect()
        ledger.withLock {
            $0.close(reason: "consumer of group '\(groupID)' closed before the coordinator answered this commit; it may or may not have been stored")
        }
    }
}
