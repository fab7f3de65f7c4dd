import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
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
            // The job starts, and the device shows it, before the rest of the story arrives in a
            // burst: otherwise one poll could take all 42 events and one send would cover them.
            try await harness.produceEvent(key: key, events[0])
            try await harness.eventually("the device shows the export preparing") {
                harness.simulator.deviceView(token: token)?.contentState.contains("preparing") == true
            }
            for event in events.dropFirst() { try await harness.produceEvent(key: key, event) }

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
            // Each carries apns-expiration, its stale date: never APNs' 30-day default storage (docs/apns.md §11).
            #expect(sends.allSatisfy { send in send.expiration.map { $0 > Int64(send.timestamp) } == true }, "\(sends.map(\.expiration))")
            let summary = worker.summary
            #expect(summary.eventsIn == events.count)
            #expect(summary.totalDelivered == sends.count)
            #expect(summary.coalesced + summary.totalDelivered + summary.dropped.values.reduce(0, +) == events.count)

            // The admin server answers for this worker.
            let port = try #require(worker.adminPort)
            let answer = try get(port: port, "/debug/targets/\(key)")
            #expect(answer.status == 200)
            let target = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
            #expect(target["ended"] as? Bool == true)
            #expect((target["token_prefix"] as? String)?.hasPrefix(String(token.prefix(8))) == true)
            #expect(worker.isReady().isReady)
            #expect(try get(port: port, "/metrics").body.contains("fanout_apns_sends_total{lane=\"activity\""))

            await worker.stop(timeout: .seconds(5))
            #expect(try harness.allCommitted())
        }
    }
}

extension WorkerIntegration.Delivery {
    /// (c) 410 Unregistered: a feedback record acknowledged by Kafka, no further sends to the token, offsets done.
    @Test func goneTokenProducesFeedbackAndStopsSends() async throws {
        let harness = try IntegrationHarness(partitions: 2)
        let key = "ride-7", token = IntegrationHarness.token(7)
        let goneAt: Int64 = 1_790_000_000_000
        harness.simulator.registerToken(token, state: .unregistered(timestampMillis: goneAt))
        let base = IntegrationHarness.now - 300
        try await harness.registerToken(key: key, token: token, at: base - 10)
        let worker = try harness.makeWorker(name: "c")
        try worker.start()

        try await harness.produceEvent(key: key, IntegrationHarness.event(id: "r1", key: key, timestamp: base, state: "{\"eta\":10}"))
        try await harness.eventually("a feedback record on \(IntegrationHarness.feedback)") {
            try !harness.readAll(IntegrationHarness.feedback).isEmpty
        }
        let records = try harness.readAll(IntegrationHarness.feedback)
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record.key.map { String(decoding: $0, as: UTF8.self) } == key)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
        #expect(json["key"] as? String == key)
        #expect(json["token"] as? String == token)
        #expect(json["app"] as? String == IntegrationHarness.app)
        #expect(json["status"] as? Int == 410)
        #expect(json["reason"] as? String == "Unregistered")
        #expect((json["apns_timestamp"] as? NSNumber)?.int64Value == goneAt)
        #expect(json["observed_at"] is NSNumber)
        try await harness.eventually("the first event's offset committed") { try harness.allCommitted() }

        // Later events for the key find no usable token: they wait token_wait, then are dead-lettered, never sent.
        for step in 1...3 {
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "r1-\(step)", key: key, timestamp: base + Int64(step),
                                                                              state: "{\"eta\":\(10 - step)}"))
        }
        try await harness.eventually("every offset committed") { try harness.allCommitted() }
        #expect(harness.simulator.stats().count(status: 410, reason: .unregistered) == 1)
        #expect(harness.simulator.deliveries().isEmpty)
        let letters = try harness.readAll(IntegrationHarness.deadLetters)
        #expect(letters.count == 3)
        #expect(letters.allSatisfy { $0.header("fanout-error")?.value.map { String(decoding: $0, as: UTF8.self) } == "no-token" })
        #expect(worker.summary.feedbackRecords == 1)
        #expect(worker.summary.totalSends == 1)

        // A newer registration (rotation) makes the key reachable again.
        let fresh = IntegrationHarness.token(8)
        try await harness.registerToken(key: key, token: fresh, at: base + 10)
        try await harness.produceEvent(key: key, IntegrationHarness.event(id: "r2", key: key, timestamp: base + 20, state: "{\"eta\":1}"))
        try await harness.eventually("the rotated token receives the update") { harness.simulator.deviceView(token: fresh) != nil }
        try await harness.eventually("every offset committed") { try harness.allCommitted() }
        await worker.stop(timeout: .seconds(5))
    }

    /// (d) Malformed events are dead-lettered with their reason codes, a record with a null key as
    /// `missing-key` (it used to reach APNs); the partition keeps flowing.
    @Test func malformedEventsAreDeadLetteredAndThePartitionFlows() async throws {
        let harness = try IntegrationHarness(partitions: 1)
        let key = "export-9", token = IntegrationHarness.token(9)
        let base = IntegrationHarness.now - 300
        try await harness.registerToken(key: key, token: token, at: base - 10)
        let worker = try harness.makeWorker(name: "d")
        try worker.start()

        try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ok1", key: key, timestamp: base, state: "{\"phase\":\"a\"}"))
        try await harness.produceEvent(key: key, "{\"v\":1,\"id\":\"broken\"")
        try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ms", key: key, timestamp: base * 1000, state: "{\"phase\":\"b\"}"))
        try await harness.produceEvent(key: key, "{\"v\":1,\"id\":\"nostate\",\"activity\":\"\(key)\",\"event\":\"update\",\"timestamp\":\(base + 1)}")
        try await harness.produce(IntegrationHarness.updates, key: key, value: nil)
        try await harness.produceKeyless(IntegrationHarness.updates,
                                         IntegrationHarness.event(id: "keyless", key: key, timestamp: base + 2, state: "{\"phase\":\"keyless\"}"))
        try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ok2", key: key, timestamp: base + 5, state: "{\"phase\":\"final\"}"))

        try await harness.eventually("the last valid state on the device") {
            harness.simulator.deviceView(token: token)?.contentState.contains("final") == true
        }
        try await harness.eventually("every offset committed") { try harness.allCommitted() }
        let letters = try harness.readAll(IntegrationHarness.deadLetters)
        let reasons = letters.compactMap { $0.header("fanout-error")?.value.map { String(decoding: $0, as: UTF8.self) } }
        #expect(reasons == ["malformed-json", "timestamp-in-milliseconds", "missing-content-state", "malformed-json", "missing-key"])
        #expect(!harness.simulator.deliveries().contains { $0.aps.contains("keyless") }, "the keyless record never reached APNs")
        // Original bytes and the source position travel with each dead letter.
        #expect(letters.first?.value.map { String(decoding: $0, as: UTF8.self) } == "{\"v\":1,\"id\":\"broken\"")
        #expect(letters.first?.header("fanout-source")?.value.map { String(decoding: $0, as: UTF8.self) } == "\(IntegrationHarness.updates)/0/1")
        #expect(worker.summary.deadLettered.values.reduce(0, +) == 5)
        await worker.stop(timeout: .seconds(5))
    }
}

extension WorkerIntegration.Delivery {
    /// The broadcast lane: events keyed by channel id reach the channel through its own APNs client.
    @Test func broadcastEventsReachTheChannel() async throws {
        let harness = try IntegrationHarness(partitions: 2)
        let channel = try harness.simulator.createChannel(bundleID: IntegrationHarness.app, storagePolicy: 0)
        let base = IntegrationHarness.now - 300
        let worker = try harness.makeWorker(name: "bc")
        try worker.start()
        for step in 0..<5 {
            let event = "{\"v\":1,\"id\":\"m\(step)\",\"channel\":\"\(channel)\",\"event\":\"update\",\"timestamp\":\(base + Int64(step)),\"content_state\":{\"score\":\"\(step)-0\"}}"
            try await harness.produce(IntegrationHarness.broadcasts, key: channel, value: event)
        }
        try await harness.eventually("the channel shows the last score") {
            harness.simulator.deviceView(channel: channel)?.contentState.contains("4-0") == true
        }
        try await harness.eventually("every broadcast offset committed") { try harness.allCommitted(IntegrationHarness.broadcasts) }
        let summary = worker.summary
        #expect(summary.delivered.keys.allSatisfy { $0.lane == .broadcast })
        #expect(summary.totalDelivered >= 1)
        #expect(harness.simulator.deliveries().allSatisfy { $0.kind == .broadcast && $0.expiration == 0 })
        await worker.stop(timeout: .seconds(5))
    }
}
