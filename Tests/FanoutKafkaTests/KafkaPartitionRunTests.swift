import FanoutCore
import Testing
@testable import FanoutKafka

@Suite struct KafkaPartitionRunTests {
    private func message(_ topic: String, _ partition: Int32, _ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: topic, partition: partition, offset: offset, key: nil, value: nil)
    }

    @Test func aBatchSplitsWhereThePartitionOrTheTopicChanges() {
        let messages = [message("a", 0, 5), message("a", 0, 6), message("a", 1, 2), message("b", 1, 9),
                        message("b", 1, 10), message("a", 0, 7)]
        #expect(KafkaPartitionRun.runs(in: messages) == [
            KafkaPartitionRun(partition: PartitionID(topic: "a", partition: 0), range: 0..<2),
            KafkaPartitionRun(partition: PartitionID(topic: "a", partition: 1), range: 2..<3),
            KafkaPartitionRun(partition: PartitionID(topic: "b", partition: 1), range: 3..<5),
            KafkaPartitionRun(partition: PartitionID(topic: "a", partition: 0), range: 5..<6),
        ])
    }

    @Test func emptyAndSingleBatches() {
        #expect(KafkaPartitionRun.runs(in: []).isEmpty)
        #expect(KafkaPartitionRun.runs(in: [message("a", 3, 1)]) == [KafkaPartitionRun(partition: PartitionID(topic: "a", partition: 3), range: 0..<1)])
    }
}
