import FanoutCore
import FanoutKafka
import Foundation
import Testing
@testable import FanoutWorker

extension WorkerIntegration {
    /// Bad input from producers, at volume and at Kafka's size limit: each record dead-lettered with
    /// its reason, nothing else lost or blocked (README, "Hostile inputs tried").
    @Suite struct HostileInput {
        /// The malformed kinds a broken producer sends, one per reason code.
        static let malformed: [(value: [UInt8], reason: String)] = [
            (Array("{\"v\":1,\"id\":\"broken\"".utf8), "malformed-json"),
            ([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d], "invalid-utf8"),
            (Array("[1,2,3]".utf8), "not-an-object"),
            (Array("{\"v\":9,\"id\":\"x\",\"activity\":\"export-11\",\"event\":\"update\",\"timestamp\":1,\"content_state\":{}}".utf8), "unsupported-version"),
            (Array("{\"v\":1,\"activity\":\"export-11\",\"event\":\"update\",\"timestamp\":1,\"content_state\":{}}".utf8), "missing-id"),
            (Array("{\"v\":1,\"id\":\"x\",\"activity\":\"export-11\",\"event\":\"update\",\"content_state\":{}}".utf8), "missing-timestamp"),
        ]

        /// 10,000 malformed events in a row, then a valid one: every one dead-lettered with its reason,
        /// the valid one delivered, every offset committed.
        @Test func tenThousandMalformedEventsInARowAreDeadLetteredAndThePartitionFlows() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "export-11", token = IntegrationHarness.token(11)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            let count = 10_000
            let producer = harness.producer
            try await withThrowingTaskGroup(of: Void.self) { group in
                for batch in stride(from: 0, to: count, by: 1_000) {
                    group.addTask {
                        for index in batch..<min(batch + 1_000, count) {
                            let value = Self.malformed[index % Self.malformed.count].value
                            try producer.produce(topic: IntegrationHarness.updates, partition: 0, key: Array(key.utf8), value: value) { _ in }
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ok", key: key, timestamp: base, state: "{\"phase\":\"final\"}"))
            #expect(try harness.endOffsets()[0] == Int64(count + 1), "every malformed record reached Kafka")

            let worker = try harness.makeWorker(name: "malformed")
            try worker.start()
            try await harness.eventually("the valid state on the device", timeout: .seconds(120)) {
                harness.simulator.deviceView(token: token)?.contentState.contains("final") == true
            }
            try await harness.eventually("every offset committed", timeout: .seconds(120)) { try harness.allCommitted() }
            #expect(worker.summary.totalDeadLettered == count)
            let expected = Dictionary(grouping: (0..<count).map { Self.malformed[$0 % Self.malformed.count].reason }, by: { $0 }).mapValues(\.count)
            #expect(worker.summary.deadLettered == expected)
            let letters = try harness.readAll(IntegrationHarness.deadLetters)
            #expect(letters.count == count)
            #expect(harness.simulator.deliveries().count == 1, "only the valid event reached APNs")
            await worker.stop(timeout: .seconds(5))
        }

        /// A record at the Kafka size limit (librdkafka's default message.max.bytes, 1,000,000): dead-
        /// lettered `event-too-large` without its value (with it, the dead letter would be over the
        /// limit), and the events after it delivered and committed.
        @Test func aRecordAtTheKafkaSizeLimitIsDeadLetteredAndThePartitionFlows() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "export-12", token = IntegrationHarness.token(12)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            let shell = IntegrationHarness.event(id: "huge", key: key, timestamp: base, state: "{\"note\":\"\"}")
            // As large as the harness's producer takes (record overhead included); Fanout's headers then
            // push the dead letter over the limit.
            let filler = String(repeating: "x", count: 999_900 - shell.utf8.count)
            let huge = IntegrationHarness.event(id: "huge", key: key, timestamp: base, state: "{\"note\":\"\(filler)\"}")
            try await harness.produceEvent(key: key, huge)
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ok", key: key, timestamp: base + 1, state: "{\"phase\":\"final\"}"))

            let worker = try harness.makeWorker(name: "huge")
            try worker.start()
            try await harness.eventually("the valid state on the device") {
                harness.simulator.deviceView(token: token)?.contentState.contains("final") == true
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            let letters = try harness.readAll(IntegrationHarness.deadLetters)
            try #require(letters.count == 1)
            let letter = letters[0]
            #expect(letter.header("fanout-error")?.value.map { String(decoding: $0, as: UTF8.self) } == "event-too-large")
            #expect(letter.header("fanout-source")?.value.map { String(decoding: $0, as: UTF8.self) } == "\(IntegrationHarness.updates)/0/0")
            #expect(letter.value == nil, "the original is left out (\(letter.value?.count ?? 0) bytes): with it the dead letter would exceed the limit")
            #expect(letter.header("fanout-original-bytes")?.value.map { String(decoding: $0, as: UTF8.self) } == String(huge.utf8.count))
            #expect(harness.simulator.deliveries().count == 1)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
