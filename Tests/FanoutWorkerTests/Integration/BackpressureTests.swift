import APNsSimulator
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    @Suite struct Backpressure {
        /// Constant input while APNs is down: intake pauses at the per-partition bound instead of
        /// reading everything into memory, then drains and commits everything after recovery — with the
        /// default 5-minute backoff cap: the lane's probe notices the recovery and the backed-off targets
        /// retry within `recovery_ramp`, not after their own backoff.
        @Test func outageIsBoundedByPausingPartitions() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let keys = (0..<20).map { "bp-\($0)" }
            let base = IntegrationHarness.now - 3600
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(50 + index), at: base - 10)
            }
            var configuration = harness.configuration()
            configuration.backpressure.maxPendingPerPartition = 100
            #expect(configuration.engine.backoffCap == .seconds(300) && configuration.engine.recoveryRamp == .seconds(10))
            let batch = 20
            let worker = try harness.makeWorker(name: "bp", configuration: configuration, maxPollRecords: batch)
            let now = Date().timeIntervalSince1970
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: now, outageEnd: now + 3600))
            try worker.start()

            let rounds = 60
            for round in 0..<rounds {
                for key in keys {
                    try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-\(round)", key: key, timestamp: base + Int64(round),
                                                                                      state: "{\"phase\":\"p\(round)\"}"))
                }
            }
            let produced = rounds * keys.count
            let bound = harness.partitions * (100 + batch)
            // Give intake every chance to read on; it must stop at the bound.
            try await harness.eventually("intake reached its bound") { worker.summary.eventsIn >= harness.partitions * 100 }
            try await Task.sleep(for: .seconds(2))
            let read = worker.summary.eventsIn
            #expect(read <= bound, "read \(read) of \(produced) events with a bound of \(bound)")
            #expect(read < produced)

            try harness.simulator.setFaults(APNsSimulatorFaults())
            try await harness.eventually("every key shows its last state", timeout: .seconds(60)) {
                keys.indices.allSatisfy { harness.simulator.deviceView(token: IntegrationHarness.token(50 + $0))?.contentState.contains("p\(rounds - 1)") == true }
            }
            try await harness.eventually("every offset committed", timeout: .seconds(60)) { try harness.allCommitted() }
            // At least once: a rebalance on a loaded machine can make the worker read some again.
            #expect(worker.summary.eventsIn >= produced)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
