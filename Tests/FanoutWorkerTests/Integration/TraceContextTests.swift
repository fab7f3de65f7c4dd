import APNsSimulator
import FanoutCore
import FanoutKafka
@testable import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// A producer's W3C `traceparent` reaches every place an event's fate shows (docs/design.md §12):
    /// the log lines of its send and of its dead letter, the feedback and dead-letter records, and
    /// `/debug/targets`; a send that coalesced several events names every trace it covers.
    @Suite struct TraceContext {
        static func trace(_ index: Int) -> String {
            "00-" + String(format: "%032x", 0xabc000 + index) + "-" + String(format: "%016x", 0x5000 + index) + "-01"
        }

        func produce(_ harness: IntegrationHarness, key: String, _ json: String, trace: String) async throws {
            _ = try await harness.producer.produce(topic: IntegrationHarness.updates, key: Array(key.utf8), value: Array(json.utf8),
                                                   headers: [KafkaHeader(name: "traceparent", string: trace)])
        }

        static func lines(_ harness: IntegrationHarness, _ message: String) -> [[String: Any]] {
            harness.logs.lines.filter { $0.contains("\"msg\":\"\(message)\"") }.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        @Test func coalescedSendsNameEveryTraceAndTheDebugViewShowsThem() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "traced-0", token = IntegrationHarness.token(120)
            let base = IntegrationHarness.now - 600
            try await harness.registerToken(key: key, token: token, at: base - 10)
            let worker = try harness.makeWorker(name: "t", adminServer: true)
            try worker.start()
            try await harness.eventually("ready") { worker.isReady().isReady }
            let port = try #require(worker.adminPort)

            // The first send is held 3 s by APNs; two more events meanwhile coalesce into one pending state.
            try harness.simulator.setFaults(APNsSimulatorFaults(latencyMillis: 3000))
            for step in 0..<3 {
                try await produce(harness, key: key, IntegrationHarness.event(id: "\(key)-\(step)", key: key, timestamp: base + Int64(step),
                                                                              state: "{\"stage\":\"s\(step)\"}", importance: "major"),
                                  trace: Self.trace(step))
                if step == 0 { try await harness.eventually("the first send in flight") { worker.core.snapshot(key: key)?.target.inFlightSendID != nil } }
            }
            try await harness.eventually("two events pending behind the send in flight") {
                worker.core.snapshot(key: key)?.target.pendingOffsets == 2
            }
            let view = try #require(try JSONSerialization.jsonObject(with: Data(get(port: port, "/debug/targets/\(key)").body.utf8)) as? [String: Any])
            #expect(view["in_flight_traces"] as? [String] == [Self.trace(0)], "\(view)")
            #expect(view["pending_traces"] as? [String] == [Self.trace(1), Self.trace(2)], "\(view)")

            try harness.simulator.setFaults(APNsSimulatorFaults())
            try await harness.eventually("the newest state delivered") { harness.simulator.deviceView(token: token)?.contentState.contains("s2") == true }
            try await harness.eventually("both sends logged") { Self.lines(harness, "send completed").count >= 2 }
            let sends = Self.lines(harness, "send completed")
            #expect(sends[0]["trace_id"] as? String == String(format: "%032x", 0xabc000))
            #expect(sends[0]["span_id"] as? String == String(format: "%016x", 0x5000))
            #expect(sends[0]["trace_links"] == nil, "one event, no links: \(sends[0])")
            #expect(sends[1]["trace_id"] as? String == String(format: "%032x", 0xabc002), "the newest event's trace: \(sends[1])")
            #expect(sends[1]["trace_links"] as? [String] == [Self.trace(1), Self.trace(2)], "\(sends[1])")
            await worker.stop(timeout: .seconds(5))
        }

        @Test func feedbackAndDeadLetterRecordsCarryTheTraceOfTheirEvents() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let gone = "traced-gone", goneToken = IntegrationHarness.token(121)
            let base = IntegrationHarness.now - 600
            try await harness.registerToken(key: gone, token: goneToken, at: base - 10)
            harness.simulator.registerToken(goneToken, state: .unregistered(timestampMillis: (base - 5) * 1000))
            let worker = try harness.makeWorker(name: "f")
            try worker.start()
            try await harness.eventually("ready") { worker.isReady().isReady }

            try await produce(harness, key: gone, IntegrationHarness.event(id: "g-1", key: gone, timestamp: base, state: "{\"stage\":\"a\"}"),
                              trace: Self.trace(7))
            // Milliseconds where seconds belong: rejected by the decoder, dead-lettered.
            try await produce(harness, key: "traced-bad", IntegrationHarness.event(id: "b-1", key: "traced-bad", timestamp: base * 1000, state: "{}"),
                              trace: Self.trace(8))
            try await harness.eventually("everything committed") { try harness.allCommitted() }

            let feedback = try harness.readAll(IntegrationHarness.feedback)
            #expect(feedback.count == 1)
            #expect(feedback.first?.header("traceparent")?.value == Array(Self.trace(7).utf8), "\(feedback)")
            let letters = try harness.readAll(IntegrationHarness.deadLetters)
            #expect(letters.count == 1)
            #expect(letters.first?.header("traceparent")?.value == Array(Self.trace(8).utf8), "\(letters)")

            let goneLine = try #require(Self.lines(harness, "APNs says the token is gone").first)
            #expect(goneLine["trace_id"] as? String == String(format: "%032x", 0xabc007), "\(goneLine)")
            // The trace ids go out unmasked; the token on the same line does not.
            let loggedToken = try #require(goneLine["token"] as? String)
            #expect(!loggedToken.isEmpty && !goneToken.hasPrefix(loggedToken) && loggedToken != goneToken, "\(goneLine)")
            #expect(!harness.logs.lines.contains { $0.contains(goneToken) }, "no log line holds the whole token")
            let rejected = try #require(Self.lines(harness, "event rejected").first)
            #expect(rejected["trace_id"] as? String == String(format: "%032x", 0xabc008), "\(rejected)")
            #expect(rejected["span_id"] as? String == String(format: "%016x", 0x5008), "\(rejected)")
            await worker.stop(timeout: .seconds(5))
        }
    }
}
