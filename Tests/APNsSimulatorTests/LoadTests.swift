import APNsSimulator
import Foundation
import Testing

@Suite("Many concurrent connections and streams (h2load)")
struct LoadTests {
    /// 8 connections × 20 streams. APNs (and the simulator) allow one stream until a valid JWT, so h2load's
    /// first burst on each connection may be refused (REFUSED_STREAM → "errored"); every answered request is 200
    /// and recorded exactly once.
    @Test func concurrentConnectionsAreServed() async throws {
        let harness = try SimulatorHarness(configure: { $0.threads = 2 })
        let result = try await harness.h2load(requests: 4000, clients: 8, streams: 20)
        #expect(result.done == 4000, "\(result.output)")
        #expect(result.status4xx == 0 && result.status5xx == 0, "\(result.output)")
        #expect(result.status2xx > 3000, "\(result.output)")
        let stats = harness.simulator.stats()
        #expect(stats.connectionsAccepted == 8)
        #expect(stats.accepted == result.status2xx)
        #expect(harness.simulator.deliveries().count == result.status2xx)
    }
}
