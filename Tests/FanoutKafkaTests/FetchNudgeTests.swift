import FanoutCore
import Foundation
import Testing
@testable import FanoutKafka

@Suite struct FetchNudgeTests {
    /// librdkafka 2.0.2 stops fetching while its queue holds `queued.min.messages` records and looks
    /// again only when its broker thread wakes, up to a second later. Here each fetch returns about
    /// one 50-record batch (`max.partition.fetch.bytes` is tiny) and the queue's threshold is 10
    /// records, so reading 60 batches means about 60 such waits: ≈ 47 s without nudges here, 2–4 s
    /// with them (most of it the mock broker answering a request behind another one ≈ 40 ms late).
    @Test func aReaderCatchingUpPastItsQueueThresholdKeepsFetching() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("backlog")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration(["linger.ms": "0"]))
        let batches = 60, perBatch = 50
        for batch in 0..<batches {  // one acknowledged produce call per batch: one record batch each
            try await produceAll(producer, topic: topic, range: batch * perBatch..<(batch + 1) * perBatch, partition: 0)
        }
        let reader = try KafkaPartitionReader(configuration: cluster.configuration(
            ["queued.min.messages": "10", "max.partition.fetch.bytes": "64"]))
        let partition = PartitionID(topic: topic, partition: 0)
        let (read, elapsed) = try await onThread { () -> (Int, Duration) in
            try reader.assign([partition: .beginning])
            let clock = ContinuousClock()
            let began = clock.now
            var read = 0
            try pollUntil({ try reader.poll(timeout: $0, maxMessages: 100) }, limit: .seconds(120), what: "the backlog read") { batch in
                read += batch.messages.count
                return read >= batches * perBatch
            }
            let elapsed = clock.now - began
            reader.close()
            return (read, elapsed)
        }
        #expect(read == batches * perBatch)
        #expect(reader.fetchNudges.sent > 0)
        // A wide bound between the two (see above), not a measurement.
        #expect(elapsed < .seconds(20), "read \(read) records in \(elapsed)")
    }
}
