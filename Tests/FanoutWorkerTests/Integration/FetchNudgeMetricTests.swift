import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// `fanout_kafka_fetch_nudges_total`: what the worker's Kafka clients did to keep librdkafka fetching.
    @Suite struct FetchNudgeMetric {
        /// A worker that reads a backlog past librdkafka's queue threshold nudges its stopped fetcher
        /// (`FetchNudge`), and `/metrics` counts the rounds for the intake client. The backlog is ten
        /// record batches of 50 events, fetches are made tiny (one batch each) and the threshold 10
        /// records, as in FetchNudgeTests: each fetched batch stops the fetcher with more batches
        /// waiting in the broker. (With a batch per event the reader keeps up with the fetches and
        /// the fetcher never stops: no nudge is needed, and whether one is sent depends on timing.)
        @Test func nudgesWhileABacklogIsReadAreCounted() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "export-9", token = IntegrationHarness.token(9)
            let base = IntegrationHarness.now - 600
            try await harness.registerToken(key: key, token: token, at: base - 10)
            for batch in 0..<10 {
                try harness.produceEvents(key: key, (batch * 50..<(batch + 1) * 50).map { step in
                    IntegrationHarness.event(id: "p\(step)", key: key, timestamp: base + Int64(step), state: "{\"progress\":\(step)}")
                })
            }
            var properties = IntegrationHarness.shortRebalance
            properties["queued.min.messages"] = "10"
            properties["max.partition.fetch.bytes"] = "64"
            let worker = try harness.makeWorker(name: "a", adminServer: true, kafkaProperties: properties)
            try worker.start()
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            let port = try #require(worker.adminPort)
            let metrics = try ExpositionParser(try get(port: port, "/metrics").body)
            let sent = try #require(metrics.value("fanout_kafka_fetch_nudges_total", ["client": "intake", "result": "sent"]))
            #expect(sent > 0, "the intake consumer read 500 records one fetched batch at a time without a nudge")
            #expect(metrics.value("fanout_kafka_fetch_nudges_total", ["client": "tokens", "result": "sent"]) != nil)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
