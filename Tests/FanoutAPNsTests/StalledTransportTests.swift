import APNsModel
import Foundation
import Synchronization
import Testing
@testable import FanoutAPNs
@testable import APNsSimulator

/// A client thread that did not run for longer than a request timeout (the process stopped, swapped
/// out or starved) finds the answers that came meanwhile in its socket: it reads them before it
/// times anything out, so an accepted push is reported delivered, not failed to be sent again.
@Suite struct StalledTransportTests {
    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func answersThatCameWhileTheClientWasStalledAreReadBeforeTheRequestTimesOut(transport: APNsClientConfiguration.Transport) async throws {
        var faults = APNsSimulatorFaults()
        faults.latencyMillis = 600
        let harness = try SimulatorHarness(faults: faults)
        let client = try harness.client(transport, requestTimeout: .seconds(1))
        #expect(await client.send(try TestApps.push(0)).outcome == .delivered, "the connection is up")
        let results = Mutex<[Int: APNsResult]>([:])
        // The first push's completion runs on the client thread and holds it for 1.5 s (a stall):
        // meanwhile the second push, sent 300 ms after the first and answered 600 ms after that, passes
        // its 1 s request timeout with its answer waiting in the socket.
        try client.send(try TestApps.push(1)) { result in
            results.withLock { $0[1] = result }
            Thread.sleep(forTimeInterval: 1.5)
        }
        #expect(try await eventually { harness.simulator.stats().requests == 2 })
        try await Task.sleep(for: .milliseconds(300))
        try client.send(try TestApps.push(2)) { result in results.withLock { $0[2] = result } }
        #expect(try await eventually { results.withLock { $0.count } == 2 })
        let answered = results.withLock { $0 }
        #expect(answered[1]?.outcome == .delivered)
        #expect(answered[2]?.outcome == .delivered, "answered during the stall: \(String(describing: answered[2]))")
        #expect(harness.simulator.stats().accepted == 3)
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
