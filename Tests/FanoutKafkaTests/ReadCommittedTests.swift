import FanoutCore
import Testing
@testable import FanoutKafka

/// Fanout's consumers read committed records only, whatever librdkafka's default.
@Suite struct ReadCommittedTests {
    let unreachable = KafkaConfiguration(["bootstrap.servers": "127.0.0.1:1"])

    @Test func bothConsumersHandLibrdkafkaReadCommittedUnasked() throws {
        #expect(try KafkaConsumer(configuration: unreachable, groupID: "g").configuredValue(of: "isolation.level") == "read_committed")
        #expect(try KafkaPartitionReader(configuration: unreachable).configuredValue(of: "isolation.level") == "read_committed")
        // The accessor reads librdkafka, not an echo: a property left unset reads as nil.
        #expect(try KafkaConsumer(configuration: unreachable, groupID: "g").configuredValue(of: "group.instance.id") == nil)
    }

    @Test func readUncommittedIsRefusedByBothConsumers() throws {
        var uncommitted = unreachable
        uncommitted["isolation.level"] = "read_uncommitted"
        let consumer = #expect(throws: KafkaError.self) { _ = try KafkaConsumer(configuration: uncommitted, groupID: "g") }
        let reader = #expect(throws: KafkaError.self) { _ = try KafkaPartitionReader(configuration: uncommitted) }
        for error in [consumer, reader] {
            #expect(error?.code == .invalidConfiguration)
            #expect(error?.reason.contains("'isolation.level' must be 'read_committed'") == true && error?.reason.contains("aborted") == true,
                    "\(String(describing: error))")
        }
        var restated = unreachable
        restated["isolation.level"] = "read_committed"
        _ = try KafkaConsumer(configuration: restated, groupID: "g")
    }

    /// An aborted transaction, then a committed one, on one partition, read by a group consumer as
    /// the worker builds it. Committed records must arrive. Aborted ones must not — but librdkafka
    /// 2.0.2's mock cluster writes no transaction markers, answers every fetch with no aborted
    /// transactions and the log end as the last stable offset, whatever the isolation level: its
    /// consumers see aborted records too (README "Operating it"). That half is a known issue here; if
    /// a mock ever honours it, the known issue stops reproducing and this test fails, to be updated.
    @Test func committedTransactionsArriveAndAbortedOnesMustNot() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("txn")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try TransactionalProducer(cluster: cluster, transactionalID: uniqueName("txn-producer"))
        let aborted = (0..<3).map { "aborted-\($0)" }, committed = (0..<3).map { "committed-\($0)" }
        try producer.transaction(aborted, topic: topic, partition: 0, commit: false)
        try producer.transaction(committed, topic: topic, partition: 0, commit: true)

        let consumer = try KafkaConsumer(configuration: groupConfiguration(cluster), groupID: uniqueName("group"))
        let values = try await onThread { () -> [String] in
            try consumer.subscribe([topic])
            var values: [String] = []
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "the committed transaction") { batch in
                values += batch.messages.compactMap { text($0.value) }
                return Set(values).isSuperset(of: committed)
            }
            try consumer.close()
            return values
        }
        #expect(values.filter { $0.hasPrefix("committed") } == committed)
        withKnownIssue("librdkafka 2.0.2's mock cluster ignores the isolation level and delivers aborted records") {
            #expect(values.filter { $0.hasPrefix("aborted") } == [])
        }
    }
}
