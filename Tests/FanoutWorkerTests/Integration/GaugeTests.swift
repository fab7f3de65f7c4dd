import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// Metrics that follow the worker's state: consumer lag, pending targets, budget downgrades, JWT mints.
    @Suite struct Gauges {
        static func sample(_ metrics: FanoutMetrics, _ series: String) -> Double? {
            for line in metrics.registry.render().split(separator: "\n") where line.hasPrefix(series + " ") {
                return Double(line.dropFirst(series.count + 1))
            }
            return nil
        }

        @Test func lagPendingDowngradesAndJWTMintsAreExported() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "export-m", token = IntegrationHarness.token(61)
            let base = IntegrationHarness.now - 300
            try await harness.registerToken(key: key, token: token, at: base - 10)
            var configuration = harness.configuration()
            configuration.engine.standard.minInterval = .milliseconds(100)
            configuration.engine.standard.priority10Burst = 1
            configuration.engine.standard.priority10PerHour = 0
            let metrics = FanoutMetrics()
            let started = Int64(Date().timeIntervalSince1970)
            let worker = try harness.makeWorker(name: "m", configuration: configuration, metrics: metrics)
            try worker.start()
            let app = IntegrationHarness.app

            // Three major updates, spaced past min_interval: the first takes the only priority-10 credit.
            for step in 0..<3 {
                try await harness.produceEvent(key: key, IntegrationHarness.event(id: "m\(step)", key: key, timestamp: base + Int64(step),
                                                                                  state: "{\"phase\":\"p\(step)\"}"))
                try await harness.eventually("update \(step) delivered") {
                    harness.simulator.deviceView(token: token)?.contentState.contains("p\(step)") == true
                }
            }
            let sends = harness.simulator.deliveries().filter { $0.token == token }
            #expect(sends.map(\.priority) == [10, 5, 5])
            #expect(Self.sample(metrics, "fanout_budget_downgrades_total{lane=\"activity\"}") == 2)
            try await harness.eventually("a JWT mint counted") { (Self.sample(metrics, "fanout_jwt_refreshes_total{app=\"\(app)\"}") ?? 0) >= 1 }
            // One JWT per key and token window (a multiple of jwt_refresh_interval from the epoch): one,
            // unless this test happened to run across a window boundary.
            let window = Int64(configuration.apns.jwtRefreshInterval.components.seconds)
            let windows = Int64(Date().timeIntervalSince1970) / window - started / window + 1
            #expect((1...Double(windows)).contains(Self.sample(metrics, "fanout_jwt_refreshes_total{app=\"\(app)\"}") ?? 0),
                    "one key, one JWT per window for the whole process")

            // A key without a token waits token_wait (2 s): pending, and its offset read but not committed.
            let lag = "fanout_consumer_lag{topic=\"\(IntegrationHarness.updates)\",partition=\"0\"}"
            try await harness.eventually("lag back to 0 after the deliveries") { Self.sample(metrics, lag) == 0 }
            try await harness.produceEvent(key: "no-token-yet", IntegrationHarness.event(id: "w1", key: "no-token-yet", timestamp: base, state: "{\"phase\":\"a\"}"))
            let committed = "fanout_committed_offset{topic=\"\(IntegrationHarness.updates)\",partition=\"0\"}"
            #expect(Self.sample(metrics, committed) == 3, "three updates committed: the next offset is 3")
            try await harness.eventually("the waiting target shows as pending, its offset as lag, the commit waiting with it") {
                Self.sample(metrics, "fanout_pending_targets{lane=\"activity\"}") == 1 && Self.sample(metrics, lag) == 1
                    && Self.sample(metrics, committed) == 3
            }
            try await harness.eventually("dead-lettered no-token, committed: lag and pending back to 0") {
                Self.sample(metrics, "fanout_pending_targets{lane=\"activity\"}") == 0 && Self.sample(metrics, lag) == 0
            }
            #expect(Self.sample(metrics, committed) == 4)
            #expect(Self.sample(metrics, "fanout_pending_targets{lane=\"broadcast\"}") == 0)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
