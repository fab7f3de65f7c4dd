import FanoutCore
import Testing
@testable import FanoutKafka

@Suite struct DeadLetterProducerTests {
    /// The record a delivery report points at, read back from the cluster.
    static func readBack(_ report: KafkaDeliveryReport, from cluster: MockKafkaCluster) async throws -> KafkaMessage {
        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        return try await onThread { () -> KafkaMessage in
            try reader.assign([PartitionID(topic: report.topic, partition: report.partition): .offset(report.offset)])
            var found: KafkaMessage?
            try pollUntil({ try reader.poll(timeout: $0) }, what: "dead letter") { batch in
                found = found ?? batch.messages.first
                return found != nil
            }
            return found!
        }
    }

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
            try reader.assign([PartitionID(topic: topic, partition: 1): .beginning])
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

        let record = try await Self.readBack(report, from: cluster)
        #expect(record.key == bytes("export-42"))
        #expect(record.value == original)
        #expect(Array(record.headers.prefix(2)) == originalHeaders)
        #expect(text(record.header("fanout-error")?.value) == "timestamp-in-milliseconds")
        #expect(text(record.header("fanout-source")?.value) == "\(topic)/1/\(source.offset)")
        #expect(text(record.header("fanout-detail")?.value) == "timestamp 1772788200000")
    }

    /// A rejected record too large to copy into the dead-letter topic (here: over the producer's
    /// message.max.bytes once Fanout's headers are added) must still land, without its value, or its
    /// offset could never be committed.
    @Test func aRecordTooLargeToCopyIsDeadLetteredWithoutItsValue() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("updates")
        try cluster.createTopic(topic + "-dlq", partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        let huge = KafkaMessage(topic: topic, partition: 0, offset: 7, key: bytes("export-42"),
                                value: [UInt8](repeating: 0x20, count: 999_990), headers: [KafkaHeader(name: "trace", string: "abc")])
        let deadLetters = DeadLetterProducer(producer: producer)
        let report = try await deadLetters.deadLetter(huge, reason: "event-too-large", detail: "999990 bytes")
        let record = try await Self.readBack(report, from: cluster)
        #expect(record.key == bytes("export-42"))
        #expect(record.value == nil)
        #expect(record.header("trace") == nil)
        #expect(text(record.header("fanout-error")?.value) == "event-too-large")
        #expect(text(record.header("fanout-source")?.value) == "\(topic)/0/7")
        #expect(text(record.header("fanout-original-bytes")?.value) == String(999_990 + 5 + 3))
        #expect(text(record.header("fanout-detail")?.value)?.hasPrefix("999990 bytes; the original") == true)
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

    /// A detail quoting an event or an APNs answer keeps its words but no whole push token or JWT, in
    /// the full record and in the valueless one (Fanout's headers only; the original value is the producer's).
    @Test func fanoutHeadersNeverCarryAWholeTokenOrJWT() throws {
        let producer = try KafkaProducer(configuration: KafkaConfiguration(["bootstrap.servers": "127.0.0.1:1"]))
        let deadLetters = DeadLetterProducer(producer: producer)
        let token = String(repeating: "0f1e2d3c", count: 8)
        let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNMTIzNDU2In0.c2lnbmF0dXJl"
        let detail = "the Kafka key \"\(token)\" differs from \"activity\" \"a-1\"; APNs 400 bearer \(jwt)"
        let message = KafkaMessage(topic: "activity-updates", partition: 0, offset: 5, key: bytes(token), value: bytes("{}"))
        let full = deadLetters.record(for: message, reason: "key-mismatch", detail: detail)
        let valueless = deadLetters.valuelessRecord(for: message, reason: "key-mismatch", detail: detail,
                                                    refusal: KafkaError(.produce, underlying: .messageTooLarge, reason: "too large"))
        for headers in [full.headers, valueless.headers] {
            let shown = try #require(headers.first { $0.name == DeadLetterProducer.detailHeader }.flatMap { text($0.value) })
            #expect(!shown.contains(token) && !shown.contains(jwt) && !shown.contains("eyJpc3Mi"), "\(shown)")
            #expect(shown.hasPrefix("the Kafka key \"0f1e2d3c…(64)\" differs from \"activity\" \"a-1\"; APNs 400 bearer <jwt redacted>"), "\(shown)")
        }
        #expect(full.key == bytes(token), "the original record is copied as it was")
    }
}
