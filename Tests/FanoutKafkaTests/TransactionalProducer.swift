import CRdKafka
@testable import FanoutKafka

/// A transactional producer for tests only (Fanout produces nothing in transactions, so FanoutKafka
/// has none): the peer that writes records a read-committed consumer must or must not see. The one
/// test-side user of CRdKafka; every call blocks.
final class TransactionalProducer {
    private let handle: OpaquePointer

    init(cluster: MockKafkaCluster, transactionalID: String) throws {
        let conf = try RDKafkaConf(cluster.configuration(["transactional.id": transactionalID, "log_level": "3"]))
        handle = try conf.makeClient(RD_KAFKA_PRODUCER)
        try check(rd_kafka_init_transactions(handle, 10_000), "init_transactions")
    }

    deinit { rd_kafka_destroy(handle) }

    /// One transaction of `values` to `partition`, flushed to the broker, then committed or aborted.
    func transaction(_ values: [String], topic: String, partition: Int32, commit: Bool) throws {
        try check(rd_kafka_begin_transaction(handle), "begin_transaction")
        let rkt = rd_kafka_topic_new(handle, topic, nil)
        defer { rd_kafka_topic_destroy(rkt) }
        for value in values {
            var bytes = Array(value.utf8)
            let result = rd_kafka_produce(rkt, partition, RD_KAFKA_MSG_F_COPY, &bytes, bytes.count, nil, 0, nil)
            guard result == 0 else { throw KafkaError(.produce, rd_kafka_last_error(), "produce of \(value) failed") }
        }
        // On the broker before the transaction ends, as an open transaction's records are.
        let flushed = rd_kafka_flush(handle, 10_000)
        guard flushed == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(.flushTimedOut, flushed, "flush failed") }
        if commit {
            try check(rd_kafka_commit_transaction(handle, 10_000), "commit_transaction")
        } else {
            try check(rd_kafka_abort_transaction(handle, 10_000), "abort_transaction")
        }
    }

    private func check(_ error: OpaquePointer?, _ what: String) throws {
        if let error { throw KafkaError(.produce, consuming: error, context: what) }
    }
}
