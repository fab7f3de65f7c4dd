import APNsModel
import APNsSimulator
import Foundation
import Testing
@testable import FanoutAPNs

/// Exactly once under faults: resets, GOAWAYs and latency from the simulator, with request timeouts of
/// 1–30 ms so that timeouts race answers, resets and reconnects all the time. `sendAll` fails the test on
/// a lost or doubled completion; no report may be left unmatched.
@Suite struct TransportStressTests {
    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func faultsAndShortTimeoutsLoseAndDoubleNothing(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness(faults: APNsSimulatorFaults(connectionResetRate: 0.01, latencyMillis: 1,
                                                                      latencyJitterMillis: 20, goAwayAfterRequests: 300))
        var outcomes: [String: Int] = [:]
        for timeout in [1, 5, 15, 30] {
            let client = try APNsClient(configuration: APNsClientConfiguration(
                endpoint: .custom(baseURL: harness.simulator.deviceURL, caFile: harness.simulator.caCertificatePath),
                credentials: TestApps.credentials(key: harness.key), connections: 2, maxConcurrentStreamsPerConnection: 200,
                maxInFlight: 400, maxQueued: 5000, requestTimeout: .milliseconds(timeout),
                reconnectBackoff: (.milliseconds(1), .milliseconds(20)), tokenCache: harness.cache, transport: transport))
            for result in try await sendAll(client, count: 1500, token: { String(format: "%064x", $0) }) {
                switch result.outcome {
                case .delivered: outcomes["delivered", default: 0] += 1
                case .retry: outcomes["retry", default: 0] += 1
                default: Issue.record("unexpected \(result)")
                }
            }
            #expect(client.stats.unmatchedEnds == 0, "\(timeout) ms: \(client.stats)")
            #expect(client.stats.inFlight == 0)
            await client.shutdown(deadline: .now + .seconds(5))
        }
        // The faults happened (not only that nothing bad did).
        #expect(outcomes["retry", default: 0] > 0, "\(outcomes)")
        #expect(harness.simulator.stats().connectionsReset + harness.simulator.stats().goAwaysSent > 0, "\(harness.simulator.stats())")
    }
}
