import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// The fanout-state changelog end to end (docs/design.md §11): what one worker saves, the next
    /// owner of the partition restores before it sends.
    @Suite struct StateHandoff {
        /// Worker A spends an activity's priority-10 burst; worker B, the partition's next owner,
        /// sends the activity's next major update at priority 5, as A would have. Without the
        /// changelog (`kafka.topics.state` ""), B starts a full bucket and sends it at priority 10.
        @Test(arguments: [true, false])
        func theNextOwnerKeepsTheBudgetItsPredecessorSpent(handsOver: Bool) async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "handoff-1", token = IntegrationHarness.token(31)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            var configuration = harness.configuration()
            if !handsOver { configuration.kafka.topics.state = "" }

            let metricsA = FanoutMetrics()
            let first = try harness.makeWorker(name: "a", configuration: configuration, metrics: metricsA)
            try first.start()
            let burst = 4  // BudgetSettings.standard
            for step in 0..<burst {
                try await harness.produceEvent(key: key, IntegrationHarness.event(id: "e\(step)", key: key, timestamp: base + Int64(step),
                                                                                  state: "{\"phase\":\"p\(step)\"}"))
                try await harness.eventually("state \(step) on the device") {
                    harness.simulator.deviceView(token: token)?.contentState.contains("p\(step)") == true
                }
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            let sentByA = harness.simulator.deliveries().filter { $0.token == token }
            #expect(sentByA.map(\.priority) == Array(repeating: 10, count: burst), "A spends the whole burst")
            if handsOver {
                #expect(metricsA.stateRecords.labels("saved").value == UInt64(burst), "each delivered send saved before its commit")
            }
            await first.stop(timeout: .seconds(5))

            let metricsB = FanoutMetrics()
            let second = try harness.makeWorker(name: "b", configuration: configuration, metrics: metricsB)
            try second.start()
            try await harness.eventually("B owns the partition") { second.isReady().isReady }
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "e9", key: key, timestamp: base + 50, state: "{\"phase\":\"after\"}"))
            try await harness.eventually("B's update on the device") {
                harness.simulator.deviceView(token: token)?.contentState.contains("after") == true
            }
            let sentByB = harness.simulator.deliveries().filter { $0.token == token }.dropFirst(burst)
            #expect(sentByB.map(\.priority) == [handsOver ? 5 : 10])
            if handsOver {
                #expect(metricsB.stateRecords.labels("restored").value == 1)
            } else {
                #expect(metricsB.stateRecords.labels("saved").value == 0)
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            await second.stop(timeout: .seconds(5))
        }

        /// A state changelog with another partition count than activity-updates would put a target's
        /// state where its next owner never reads it: the worker refuses to start, saying how to fix it.
        @Test func aChangelogWithTheWrongPartitionCountIsAStartupError() async throws {
            let harness = try IntegrationHarness(partitions: 2, missing: [IntegrationHarness.state])
            try harness.cluster.createTopic(IntegrationHarness.state, partitions: 3)
            let worker = try harness.makeWorker(name: "w")
            #expect {
                try worker.start()
            } throws: { error in
                "\(error)".contains("kafka.topics.state: 'fanout-state' has 3 partitions but activity-updates has 2")
                    && "\(error)".contains("cleanup.policy=compact")
            }
        }
    }
}
