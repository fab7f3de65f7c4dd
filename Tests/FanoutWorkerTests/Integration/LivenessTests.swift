import APNsSimulator
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// `/livez` on a real worker (docs/operations.md §1): alive while it commits or has nothing to
    /// commit, stuck once records wait with no commit moving and nothing reported to explain it, alive
    /// again when commits move.
    @Suite struct LivenessProbe {
        @Test func aWorkerWhoseSendsHangIsStuckAfterTheWindowAndAliveOnceItCommitsAgain() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let key = "live-0", token = IntegrationHarness.token(90)
            let base = IntegrationHarness.now - 600
            try await harness.registerToken(key: key, token: token, at: base - 10)
            var configuration = harness.configuration()
            configuration.admin.livenessWindow = .seconds(2)
            configuration.apns.requestTimeout = .seconds(60)  // the hung send is answered, not timed out
            let worker = try harness.makeWorker(name: "l", configuration: configuration, adminServer: true)
            try worker.start()
            try await harness.eventually("ready") { worker.isReady().isReady }
            let port = try #require(worker.adminPort)

            _ = try await harness.produceProgress(key: key, token: token, progress: 0, base: base)
            try await harness.eventually("the first state delivered and committed") {
                try harness.devicesShow([token], progress: [token: 0]) && harness.allCommitted()
            }
            let idle = try get(port: port, "/livez")
            #expect(idle.status == 200, "\(idle)")

            // APNs accepts the next send and answers only after 8 s: the record waits uncommitted,
            // no lane fails (nothing has failed), so nothing explains the wait.
            try harness.simulator.setFaults(APNsSimulatorFaults(latencyMillis: 8000))
            let hung = ContinuousClock.now
            _ = try await harness.produceProgress(key: key, token: token, progress: 1, base: base)
            try await harness.eventually("stuck", timeout: .seconds(7)) { !worker.liveness().isAlive }
            print("measured: /livez stuck \(seconds(since: hung)) after the send hung (window 2 s)")
            let stuck = try get(port: port, "/livez")
            #expect(stuck.status == 503, "\(stuck)")
            #expect(stuck.body.contains("record(s) uncommitted and no committed offset advanced"), "\(stuck.body)")
            #expect(!(try harness.allCommitted()), "committed before /livez said stuck: the test proves nothing")

            try harness.simulator.setFaults(APNsSimulatorFaults())
            try await harness.eventually("the hung send answered, committed, and alive again") {
                try harness.devicesShow([token], progress: [token: 1]) && harness.allCommitted() && worker.liveness().isAlive
            }
            #expect(try get(port: port, "/livez").status == 200)
            await worker.stop(timeout: .seconds(5))
        }
    }
}
