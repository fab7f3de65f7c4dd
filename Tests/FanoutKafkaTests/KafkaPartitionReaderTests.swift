import FanoutCore
import Foundation
import Testing
@testable import FanoutKafka

@Suite struct KafkaPartitionReaderTests {
    @Test func readsOnePartitionFromTheBeginningUntilCaughtUp() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("tokens")
        try cluster.createTopic(topic, partitions: 3)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        try await produceAll(producer, topic: topic, range: 0..<7, partition: 1)
        try await produceAll(producer, topic: topic, range: 100..<105, partition: 2)

        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        let partition = PartitionID(topic: topic, partition: 1)
        let (marks, read, caughtUp) = try await onThread { () -> (KafkaWatermarks, [KafkaMessage], Bool) in
            let marks = try reader.watermarks(of: partition, timeout: .seconds(10))
            try reader.assign([partition: .beginning])
            var read: [KafkaMessage] = []
            var caughtUp = false
            try pollUntil({ try reader.poll(timeout: $0) }, what: "partition 1 caught up") { batch in
                read += batch.messages
                #expect(batch.messages.allSatisfy { $0.topicPartition == partition })
                if batch.reachedEnd.contains(partition) { caughtUp = true }
                return caughtUp
            }
            #expect(try reader.assignment() == [partition])
            try reader.unassign([partition])
            #expect(try reader.assignment().isEmpty)
            reader.close()
            return (marks, read, caughtUp)
        }
        #expect(marks == KafkaWatermarks(low: 0, high: 7))
        #expect(caughtUp)
        // Produced concurrently, so the order within the partition is the broker's: check offsets and content.
        #expect(read.map(\.offset) == Array(0..<7))
        #expect(Set(read.map { text($0.value)! }) == Set((0..<7).map { "value-\($0)" }))
        #expect(throws: KafkaError.self) { _ = try reader.poll(timeout: .zero) }
    }

    @Test func assignsAtAnOffset() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("offset")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        try await produceAll(producer, topic: topic, range: 0..<10, partition: 0)
        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        let offsets = try await onThread { () -> [Int64] in
            try reader.assign([PartitionID(topic: topic, partition: 0): .offset(6)])
            var offsets: [Int64] = []
            try pollUntil({ try reader.poll(timeout: $0) }, what: "end of partition") { batch in
                offsets += batch.messages.map(\.offset)
                return !batch.reachedEnd.isEmpty
            }
            return offsets
        }
        #expect(offsets == [6, 7, 8, 9])
    }
}

@Suite struct KafkaRecordTimestampTests {
    /// Records produced with explicit CreateTimes are read back with exactly those timestamps
    /// (`fanout replay` schedules by them); without one, librdkafka stamps the produce time.
    @Test func producedTimestampsAreKept() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("times")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration())
        let base: Int64 = 1_700_000_000_000
        for index in 0..<4 {
            _ = try await producer.produce(topic: topic, partition: 0, key: bytes("k\(index)"), value: bytes("v\(index)"),
                                           timestampMilliseconds: base + 1000 * Int64(index))
        }
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try await producer.produce(topic: topic, partition: 0, key: nil, value: bytes("now"))
        let reader = try KafkaPartitionReader(configuration: cluster.configuration())
        let stamps = try await onThread { () -> [Int64?] in
            try reader.assign([PartitionID(topic: topic, partition: 0): .beginning])
            var stamps: [Int64?] = []
            try pollUntil({ try reader.poll(timeout: $0) }, what: "end of partition") { batch in
                stamps += batch.messages.map(\.timestampMilliseconds)
                return !batch.reachedEnd.isEmpty
            }
            reader.close()
            return stamps
        }
        #expect(Array(stamps.prefix(4)) == (0..<4).map { base + 1000 * Int64($0) })
        #expect(stamps.count == 5)
        #expect((stamps.last ?? nil).map { $0 >= before } == true)
    }
}
