import Testing
@testable import FanoutKafka

@Suite struct KafkaMessageKeyTests {
    /// Events are keyed by activity; a null key and an empty one are different records to Kafka.
    @Test func aNullKeyAndAnEmptyKeyArriveAsProduced() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("keys")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        for key in [nil, [], bytes("k")] as [[UInt8]?] {
            _ = try await producer.produce(topic: topic, partition: 0, key: key, value: bytes("v"))
        }
        let consumer = try KafkaConsumer(configuration: groupConfiguration(cluster), groupID: uniqueName("group"))
        let messages = try await onThread { () -> [KafkaMessage] in
            try consumer.subscribe([topic])
            var messages: [KafkaMessage] = []
            try pollUntil({ try consumer.poll(timeout: $0) }, what: "3 records") { batch in
                messages += batch.messages
                return messages.count >= 3
            }
            try consumer.close()
            return messages
        }
        #expect(messages.map(\.key) == [nil, [], bytes("k")])
    }
}
