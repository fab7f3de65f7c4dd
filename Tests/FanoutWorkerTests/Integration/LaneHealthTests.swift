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
            let worker = try harness.makeWorker(name: "h", configuration: configuration, adminServer: true)
            try worker.start()
            let port = try #require(worker.adminPort)
            /// `/metrics` as Prometheus scrapes it: `fanout_ready` is computed for the scrape, not by `isReady()`.
            func scraped(_ series: String) throws -> Double? {
                let body = try get(port: port, "/metrics").body
                return body.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
            }
            try await harness.eventually("the worker is ready, and scraped as ready") { try scraped("fanout_ready") == 1 }
            #expect(worker.isReady().isReady)
            #expect(try scraped("fanout_apns_lane_failing{lane=\"activity\"}") == 0)
            let outageStart = Date().timeIntervalSince1970
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: outageStart, outageEnd: outageStart + 6, scope: .devicePushes))
            try await harness.produceEvent(key: key, IntegrationHarness.event(id: "h0", key: key, timestamp: base, state: "{\"phase\":\"during\"}"))
            try await harness.eventually("scraped as not ready, the activity lane failing") {
                try scraped("fanout_ready") == 0 && scraped("fanout_apns_lane_failing{lane=\"activity\"}") == 1
            }
            #expect(worker.isReady().reasons.contains { $0.contains("activity lane has failed") && $0.contains("503") })
            #expect(try scraped("fanout_apns_lane_failing{lane=\"broadcast\"}") == 0)
            try await harness.eventually("ready again once APNs answers", timeout: .seconds(60)) {
                try scraped("fanout_ready") == 1 && harness.simulator.deviceView(token: token)?.contentState.contains("during") == true
            }
            #expect(try scraped("fanout_apns_lane_failing{lane=\"activity\"}") == 0)
            // 503s are answers: the lane failed, its connections did not.
            #expect(try scraped("fanout_apns_connection_backoffs_total{lane=\"activity\"}") == 0)
            let lines = harness.logs.lines
            #expect(lines.filter { $0.contains("\"level\":\"warning\"") && $0.contains("every APNs send on this lane has failed") }.count == 1)
            #expect(lines.filter { $0.contains("APNs answers this lane again") }.count == 1)
            try await harness.eventually("committed") { try harness.allCommitted() }
            await worker.stop(timeout: .seconds(5))
        }
    }
}
