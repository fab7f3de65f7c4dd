import FanoutCore
import Foundation
import Synchronization
import Testing
@testable import FanoutKafka

/// `commitAsync` against the mock cluster: the group coordinator (broker 1) is slowed down while the
/// partitions' leader (broker 2) answers at once, so a commit stays outstanding while records flow.
@Suite struct KafkaConsumerCommitAsyncTests {
    /// Everything one poll loop saw, in order.
    struct Seen {
        var values: [String] = []
        var answers: [KafkaCommitAnswer] = []
        /// Values that arrived in batches polled before any commit answer had come.
        var valuesBeforeFirstAnswer: [String] = []

        mutating func take(_ batch: KafkaPollBatch) {
            let values = batch.messages.map { text($0.value)! }
            self.values += values
            if answers.isEmpty { valuesBeforeFirstAnswer += values }
            answers += batch.commitAnswers
        }
    }

    @Test func pollKeepsDeliveringWhileCommitsAreOutstandingAndEachIsAnsweredOnce() async throws {
        let cluster = try MockKafkaCluster(brokers: 2)
        let topic = uniqueName("async-commit")
        let group = uniqueName("group")
        try cluster.createTopic(topic, partitions: 2)
        let p0 = PartitionID(topic: topic, partition: 0)
        let p1 = PartitionID(topic: topic, partition: 1)
        try cluster.setPartitionLeader(p0, broker: 2)
        try cluster.setPartitionLeader(p1, broker: 2)
        try cluster.setCoordinator(keyType: "group", key: group, broker: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        try await produceAll(producer, topic: topic, range: 0..<10, partition: 0)
        // Heartbeats go to the slowed coordinator too: a session long enough to outlast its delay.
        let consumer = try KafkaConsumer(
            configuration: groupConfiguration(cluster, ["session.timeout.ms": "20000", "max.poll.interval.ms": "21000"]),
            groupID: group)
        let seen = Mutex(Seen())
        try await onThread {
            try consumer.subscribe([topic])
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "the first 10 records") { batch in
                seen.withLock { $0.take(batch) }
                return seen.withLock { $0.values.count } >= 10
            }
        }

        try cluster.setBrokerRoundTripTime(1, milliseconds: 4000)
        let first = try consumer.commitAsync([p0: 10])
        try await produceAll(producer, topic: topic, range: 10..<20, partition: 1)
        let second = try await onThread { () -> KafkaCommitID in
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "10 records produced after the commit") { batch in
                seen.withLock { $0.take(batch) }
                return seen.withLock { $0.values.count } >= 20
            }
            // The first commit is still unanswered: a second one starts all the same.
            return try consumer.commitAsync([p1: 10])
        }
        #expect(second > first)
        let whileOutstanding = seen.withLock { $0.valuesBeforeFirstAnswer }
        #expect(Set(whileOutstanding).isSuperset(of: (10..<20).map { "value-\($0)" }),
                "records produced after the commit arrived only after its answer: \(whileOutstanding)")

        try await onThread {
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "both commit answers") { batch in
                seen.withLock { $0.take(batch) }
                return seen.withLock { $0.answers.count } >= 2
            }
            for _ in 0..<3 { seen.withLock { $0.take(try! consumer.poll(timeout: .milliseconds(200))) } }
        }
        let answers = seen.withLock { $0.answers }
        #expect(answers.map(\.id) == [first, second])
        #expect(answers.map(\.offsets) == [[p0: 10], [p1: 10]])
        #expect(answers.allSatisfy { $0.error == nil }, "\(answers)")

        try cluster.setBrokerRoundTripTime(1, milliseconds: 0)
        let committed = try await onThread { try consumer.committed([p0, p1], timeout: .seconds(10)) }
        #expect(committed == [p0: 10, p1: 10])
        try await onThread { try consumer.close() }
        #expect(consumer.drainCommitAnswers().isEmpty)
    }

    @Test func aRefusedCommitReportsEachPartitionsError() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("refused-commit")
        try cluster.createTopic(topic, partitions: 2)
        let p0 = PartitionID(topic: topic, partition: 0)
        let p1 = PartitionID(topic: topic, partition: 1)
        let consumer = try KafkaConsumer(configuration: groupConfiguration(cluster), groupID: uniqueName("group"))
        let answers = try await onThread { () -> [KafkaCommitAnswer] in
            try consumer.subscribe([topic])
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "assignment") { _ in
                (try? consumer.assignment()) == [p0, p1]
            }
            var answers: [KafkaCommitAnswer] = []
            for code in [KafkaResponseCode.rebalanceInProgress, .illegalGeneration] {
                cluster.pushRequestErrors(.offsetCommit, [code])
                let id = try consumer.commitAsync([p0: 0, p1: 0])
                try pollUntil({ try consumer.poll(timeout: $0) }, what: "the answer to \(id)") { batch in
                    answers += batch.commitAnswers
                    return answers.contains { $0.id == id }
                }
            }
            try consumer.close()
            return answers + consumer.drainCommitAnswers()
        }
        #expect(answers.count == 2)
        for (answer, code) in zip(answers, [KafkaResponseCode.rebalanceInProgress, .illegalGeneration]) {
            #expect(answer.error?.code == .commit)
            let failures = answer.error?.partitionFailures ?? []
            #expect(Set(failures.map(\.partition)) == [p0, p1], "\(answer)")
            #expect(failures.allSatisfy { $0.underlying == code }, "\(answer)")
            #expect(answer.committed == [:])
        }
    }

    @Test func closingAnswersEveryOutstandingCommit() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("close-commit")
        try cluster.createTopic(topic, partitions: 1)
        let p0 = PartitionID(topic: topic, partition: 0)
        let consumer = try KafkaConsumer(configuration: groupConfiguration(cluster), groupID: uniqueName("group"))
        let (ids, answers) = try await onThread { () -> ([KafkaCommitID], [KafkaCommitAnswer]) in
            try consumer.subscribe([topic])
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "assignment") { _ in (try? consumer.assignment()) == [p0] }
            // The coordinator delays every answer past the close deadline.
            try cluster.setBrokerRoundTripTime(1, milliseconds: 10000)
            let ids = try (0..<3).map { _ in try consumer.commitAsync([p0: 0]) }
            #expect(throws: KafkaError.self) { try consumer.close(timeout: .seconds(1), quietPeriod: .zero) }
            #expect(throws: KafkaError.self) { _ = try consumer.commitAsync([p0: 0]) }
            return (ids, consumer.drainCommitAnswers() + consumer.drainCommitAnswers())
        }
        #expect(answers.map(\.id) == ids)
        #expect(answers.allSatisfy { $0.error?.code == .closed }, "\(answers)")
        try cluster.setBrokerRoundTripTime(1, milliseconds: 0)
    }
}
