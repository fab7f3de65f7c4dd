import FanoutCore
import FanoutKafka
import Foundation
import Testing
@testable import FanoutWorker

extension WorkerIntegration {
    /// A dead-letter topic the worker may not write to: the dead letter is retried (never dropped),
    /// its offset stays uncommitted while the partition's other events still reach the device, the
    /// worker says on /readyz which topic and what to do, and recovers once the produce succeeds.
    @Suite struct OutputTopics {
        @Test func aPermanentlyFailingDeadLetterHoldsItsOffsetAndMakesTheWorkerNotReadyUntilItSucceeds() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "export-7", token = IntegrationHarness.token(7)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            // All input is in Kafka before the fault is armed: the fault hits every Produce request,
            // the harness's own included.
            try await harness.produceEvent(key: key, "{\"v\":1,\"id\":\"broken\"")
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ok1", key: key, timestamp: base, state: "{\"phase\":\"a\"}"))
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "ok2", key: key, timestamp: base + 5, state: "{\"phase\":\"final\"}"))
            harness.cluster.pushRequestErrors(.produce, Array(repeating: .topicAuthorizationFailed, count: 500))

            let metrics = FanoutMetrics()
            let worker = try harness.makeWorker(name: "dlq", metrics: metrics)
            try worker.start()
            let failures = metrics.produceFailures.labels(IntegrationHarness.deadLetters, ProduceFailure.Kind.permanent.rawValue)
            try await harness.eventually("the dead letter failed twice") { failures.value >= 2 }

            let expected = "cannot produce to \(IntegrationHarness.deadLetters): Broker: Topic authorization failed — grant the worker's Kafka principal write access to the topic; the offsets it covers stay uncommitted"
            #expect(worker.isReady().reasons.contains(expected), "\(worker.isReady().reasons)")
            // The rest of the partition is delivered; the commit point stays at the dead letter's offset.
            // The fault refuses the delivered sends' fanout-state records too, so their offsets wait as well
            // (docs/design.md §11): nothing of the partition is done until producing works again.
            try await harness.eventually("the last valid state on the device") {
                harness.simulator.deviceView(token: token)?.contentState.contains("final") == true
            }
            let partition = PartitionID(topic: IntegrationHarness.updates, partition: 0)
            try await harness.eventually("the state records of the delivered sends refused too") {
                metrics.produceFailures.labels(IntegrationHarness.state, ProduceFailure.Kind.permanent.rawValue).value >= 1
            }
            #expect(worker.core.state.withLock { $0.engine.load(of: partition)?.incomplete } == 3)
            #expect(try (harness.committed()[0] ?? nil) ?? 0 == 0)
            #expect(try harness.readAll(IntegrationHarness.deadLetters).isEmpty)
            let warnings = harness.logs.lines.filter { $0.contains("\"level\":\"warning\"") && $0.contains("cannot produce to \(IntegrationHarness.deadLetters)") }
            #expect(warnings.count == 1, "one warning a minute, not one per retry: \(warnings)")

            harness.cluster.clearRequestErrors(.produce)
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            try await harness.eventually("ready again") { worker.isReady().isReady }
            let letters = try harness.readAll(IntegrationHarness.deadLetters)
            #expect(letters.count == 1)
            #expect(letters.first?.header("fanout-error")?.value.map { String(decoding: $0, as: UTF8.self) } == "malformed-json")
            #expect(harness.logs.lines.filter { $0.contains("producing works again") && $0.contains(IntegrationHarness.deadLetters) }.count == 1)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
