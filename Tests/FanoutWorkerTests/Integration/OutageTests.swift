import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// APNs unavailable, and APNs refusing the app's key: nothing is committed that was not delivered.
    @Suite struct Outages {
        /// (b) APNs down for a while: no commit past the first undelivered event; after recovery
        /// everything is delivered and committed.
        @Test func outageHoldsCommitsUntilDelivered() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let keys = (0..<4).map { "export-\($0)" }
            let base = IntegrationHarness.now - 600
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(index), at: base - 10)
            }
            let worker = try harness.makeWorker(name: "b")
            try worker.start()
            for key in keys {
                try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-0", key: key, timestamp: base, state: "{\"phase\":\"preparing\"}"))
            }
            try await harness.eventually("phase 1 delivered and committed") { try harness.allCommitted() }
            let before = try harness.endOffsets()

            let outageStart = Date().timeIntervalSince1970
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: outageStart, outageEnd: outageStart + 4))
            for step in 1...5 {
                for key in keys {
                    try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-\(step)", key: key, timestamp: base + Int64(step) * 10,
                                                                                      state: "{\"phase\":\"step \(step)\"}"))
                }
            }
            // While APNs answers 503, the commit point stays at the first undelivered event.
            while Date().timeIntervalSince1970 < outageStart + 3.5 {
                for (partition, offset) in try harness.committed() {
                    #expect((offset ?? 0) <= before[partition]!, "partition \(partition) committed \(String(describing: offset)) during the outage")
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(harness.simulator.stats().count(status: 503, reason: .serviceUnavailable) > 0)

            try await harness.eventually("every key shows its last state", timeout: .seconds(60)) {
                keys.indices.allSatisfy { harness.simulator.deviceView(token: IntegrationHarness.token($0))?.contentState.contains("step 5") == true }
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            #expect(worker.summary.totalDeadLettered == 0)
            await worker.stop(timeout: .seconds(5))
        }

        /// (g) APNs rejects the app's key: not ready with the reason, nothing committed or dead-lettered;
        /// once APNs accepts the key, the probe resumes the app and everything is delivered.
        @Test func configurationErrorPausesTheAppUntilFixed() async throws {
            let harness = try IntegrationHarness(partitions: 2, trustWorkerKey: false)
            let key = "export-g", token = IntegrationHarness.token(77)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            let worker = try harness.makeWorker(name: "g", configProbeInterval: .milliseconds(500))
            try worker.start()
            for step in 0..<5 {
                try await harness.produceEvent(key: key, IntegrationHarness.event(id: "g\(step)", key: key, timestamp: base + Int64(step),
                                                                                  state: "{\"phase\":\"p\(step)\"}"))
            }
            try await harness.eventually("not ready because of the key") {
                worker.isReady().reasons.contains { $0.contains(IntegrationHarness.app) && $0.contains("InvalidProviderToken") }
            }
            #expect(!worker.isReady().isReady)
            // Let the probe fail a few times; nothing may be committed or dead-lettered meanwhile.
            try await harness.eventually("the app was probed again") {
                harness.simulator.stats().count(status: 403, reason: .invalidProviderToken) >= 3
            }
            for (_, offset) in try harness.committed() { #expect((offset ?? 0) == 0) }
            #expect(try harness.readAll(IntegrationHarness.deadLetters).isEmpty)
            #expect(harness.simulator.deliveries().isEmpty)

            try harness.restartSimulatorTrustingWorkerKey()
            try await harness.eventually("the device shows the last state") {
                harness.simulator.deviceView(token: token)?.contentState.contains("p4") == true
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            try await harness.eventually("ready again") { worker.isReady().isReady }
            #expect(try harness.readAll(IntegrationHarness.deadLetters).isEmpty)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
