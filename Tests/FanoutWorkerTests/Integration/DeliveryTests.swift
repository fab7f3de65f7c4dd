import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

extension WorkerIntegration {
    /// Events in, Live Activity pushes out, offsets committed: the happy path, token loss and bad input.
    @Suite struct Delivery {
        /// (a) An export job's story arrives on the device with its final state, in far fewer sends than events.
        @Test func exportStoryReachesTheDeviceCoalesced() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let key = "export-42", token = IntegrationHarness.token(42)
            let base = IntegrationHarness.now - 600
            try await harness.registerToken(key: key, token: token, at: base - 10)
            let worker = try harness.makeWorker(name: "a", adminServer: true)
            try worker.start()

            var events: [String] = [IntegrationHarness.event(id: "e0", key: key, timestamp: base, state: "{\"phase\":\"preparing\",\"progress\":0}")]
            for step in 1...20 {
                events.append(IntegrationHarness.event(id: "u\(step)", key: key, timestamp: base + Int64(step),
                                                       state: "{\"phase\":\"uploading\",\"progress\":\(Double(step) / 20)}"))
            }
            for step in 1...20 {
                events.append(IntegrationHarness.event(id: "r\(step)", key: key, timestamp: base + 20 + Int64(step),
                                                       state: "{\"phase\":\"rendering\",\"progress\":\(Double(step) / 20)}"))
            }
            events.append(IntegrationHarness.event(id: "done", key: key, timestamp: base + 60, state: "{\"phase\":\"ready\",\"progress\":1}", kind: "end"))
            for event in events { try await harness.produceEvent(key: key, event) }

            try await harness.eventually("the device shows the ended export as ready") {
                guard let view = harness.simulator.deviceView(token: token) else { return false }
                return view.ended && view.contentState.contains("ready")
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }

            let view = try #require(harness.simulator.deviceView(token: token))
            #expect(view.event == "end")
            #expect(view.timestamp == Double(base + 60))
            #expect(view.ignored == 0)
            let sends = harness.simulator.deliveries().filter { $0.token == token }
            #expect(sends.count >= 2)
            #expect(sends.count * 4 < events.count, "sent \(sends.count) pushes for \(events.count) events")
            // Timestamps strictly increase per target.
            #expect(zip(sends, sends.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
            let summary = worker.summary
            #expect(summary.eventsIn == events.count)
            #expect(summary.totalDelivered == sends.count)
            #expect(summary.coalesced + summary.totalDelivered + summary.dropped.values.reduce(0, +) == events.count)

            // The admin server answers for this worker.
            let port = try #require(worker.adminPort)
            let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/debug/targets/\(key)")!)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            let target = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            #expect(target["ended"] as? Bool == true)
            #expect((target["token_prefix"] as? String)?.hasPrefix(String(token.prefix(8))) == true)
            #expect(worker.isReady().isReady)
            let (metrics, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
            #expect(String(decoding: metrics, as: UTF8.self).contains("fanout_apns_sends_total{lane=\"activity\""))

            await worker.stop(timeout: .seconds(5))
            #expect(try harness.allCommitted())
        }
    }
}
