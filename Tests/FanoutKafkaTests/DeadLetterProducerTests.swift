import Testing
@testable import FanoutKafka

@Suite struct DeadLetterProducerTests {
    @Test func deadLetterCarriesOriginalBytesAndHeadersPlusReason() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("updates")
        try cluster.createTopic(topic, partitions: 2)
        try cluster.createTopic(topic + "-dlq", partitions: 2)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        // Bytes that are not valid UTF-8 must survive untouched.
        let original: [UInt8] = [0x7b, 0xff, 0x00, 0x22, 0x7d]
        let originalHeaders = [KafkaHeader(name: "trace", string: "abc"), KafkaHeader(name: "nullable", value: nil)]
        _ = try await producer.produce(topic: topic, partition: 1, key: bytes("export-42"), value: original, headers: originalHeaders)

        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        let source = try await onThread { () -> KafkaMessage in
            try reader.assign([TopicPartition(topic, 1): .beginning])
            var found: KafkaMessage?
            try pollUntil({ try reader.poll(timeout: $0) }, what: "source record") { batch in
                found = found ?? batch.messages.first
                return found != nil
            }
            return found!
        }
        #expect(source.headers == originalHeaders)

        let deadLetters = DeadLetterProducer(producer: producer)
        let report = try await deadLetters.deadLetter(source, reason: "timestamp-in-milliseconds", detail: "timestamp 1772788200000")
        #expect(report.topic == topic + "-dlq")

        let dlqReader = try KafkaPartitionReader(configuration: cluster.configuration())
        let record = try await onThread { () -> KafkaMessage in
            try dlqReader.assign([TopicPartition(report.topic, report.partition): .offset(report.offset)])
            var found: KafkaMessage?
            try pollUntil({ try dlqReader.poll(timeout: $0) }, what: "dead letter") { batch in
                found = found ?? batch.messages.first
                return found != nil
            }
            return found!
        }
        #expect(record.key == bytes("export-42"))
        #expect(record.value == original)
        #expect(Array(record.headers.prefix(2)) == originalHeaders)
        #expect(text(record.header("fanout-error")?.value) == "timestamp-in-milliseconds")
        #expect(text(record.header("fanout-source")?.value) == "\(topic)/1/\(source.offset)")
        #expect(text(record.header("fanout-detail")?.value) == "timestamp 1772788200000")
    }

    @Test func suffixIsConfigurableAndDetailOptional() {
        let producer = try! KafkaProducer(configuration: KafkaConfiguration(["bootstrap.servers": "127.0.0.1:1"]))
        let deadLetters = DeadLetterProducer(producer: producer, topicSuffix: ".rejected")
        let message = KafkaMessage(topic: "broadcast-updates", partition: 3, offset: 99, key: nil, value: bytes("{}"))
        let record = deadLetters.record(for: message, reason: "start-on-broadcast", detail: nil)
        #expect(record.topic == "broadcast-updates.rejected")
        #expect(record.key == nil)
        #expect(record.headers.map(\.name) == ["fanout-error", "fanout-source"])
        #expect(text(record.headers[1].value) == "broadcast-updates/3/99")
    }
}
