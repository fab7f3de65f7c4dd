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

    /// A reader following a producer that keeps writing: each fetch hands over everything up to the
    /// high watermark of that moment and fills the queue past its threshold, so the fetcher stops
    /// while the producer writes the next batch. Drained, the reader sees no lag (librdkafka's high
    /// watermark is as old as its last fetch), yet the broker holds a batch it has not fetched: the
    /// full polls before the short one are what calls for the nudge. Without it each round waited for
    /// the broker thread's own wake-up, up to a second (0.5–0.8 s a round here); with it, 60–100 ms.
    @Test func aReaderFollowingAWritingProducerDoesNotWaitAtTheQueueBound() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("following")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: cluster.configuration(["linger.ms": "0"]))
        let reader = try KafkaPartitionReader(configuration: cluster.configuration(["queued.min.messages": "10"]))
        let partition = PartitionID(topic: topic, partition: 0)
        let rounds = 40, perBatch = 50, perPoll = 10
        try reader.assign([partition: .beginning])
        var read = 0
        var elapsed = Duration.zero
        for round in 0...rounds {
            // One acknowledged produce call per batch, written while the reader holds the last one.
            _ = try await produceAll(producer, topic: topic, range: round * perBatch..<(round + 1) * perBatch, partition: 0)
            let already = read
            let (count, took) = try await onThread { () -> (Int, Duration) in
                let clock = ContinuousClock()
                let began = clock.now
                var count = already
                // Into this round's batch: the rest of the last one first (full polls, then a short one).
                try pollUntil({ try reader.poll(timeout: $0, maxMessages: perPoll) }, limit: .seconds(60), what: "round \(round)") { batch in
                    count += batch.messages.count
                    return count >= round * perBatch + perPoll
                }
                return (count, clock.now - began)
            }
            read = count
            if round > 0 { elapsed += took }
        }
        reader.close()
        print("measured: a reader following a writing producer: \(rounds) rounds in \(elapsed), \(reader.fetchNudges.sent) nudges")
        #expect(read >= rounds * perBatch + perPoll && read <= (rounds + 1) * perBatch)
        // A wide bound between the two (see above), not a measurement.
        #expect(elapsed < .seconds(14), "\(rounds) rounds took \(elapsed)")
    }
}
