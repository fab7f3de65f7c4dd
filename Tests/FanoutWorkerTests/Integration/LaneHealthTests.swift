import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// Readiness follows APNs as the engine judges it.
    @Suite struct LaneHealth {
        /// An outage of 503s longer than `apns.lane_failing_after`: not ready with the reason and one
        /// warning; when APNs answers again, ready, one info line, and everything delivered.
        @Test func aLaneFailingLongerThanTheSettingMakesTheWorkerNotReadyUntilAPNsAnswers() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let key = "export-h", token = IntegrationHarness.token(91)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            var configuration = harness.configuration()
            configuration.apns.laneFailingAfter = .seconds(1)
            let worker = try harness.makeWorker(name: "h", configuration: configuration)
            try worker.start()
            try await harness.eventually("the worker is ready") { worker.isReady().isReady }
            let outageStart = Date().timeIntervalSince1970
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: outageStart, outageEnd: outageStart + 6, scope: .devicePushes))
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "h0", key: key, timestamp: base, state: "{\"phase\":\"during\"}"))
            try await harness.eventually("not ready: the activity lane is failing") {
                worker.isReady().reasons.contains { $0.contains("activity lane has failed") && $0.contains("503") }
            }
            try await harness.eventually("ready again once APNs answers", timeout: .seconds(60)) {
                worker.isReady().isReady && harness.simulator.deviceView(token: token)?.contentState.contains("during") == true
            }
            let lines = harness.logs.lines
            #expect(lines.filter { $0.contains("\"level\":\"warning\"") && $0.contains("every APNs send on this lane has failed") }.count == 1)
            #expect(lines.filter { $0.contains("APNs answers this lane again") }.count == 1)
            try await harness.eventually("committed") { try harness.allCommitted() }
            await worker.stop(timeout: .seconds(5))
        }
    }
}
