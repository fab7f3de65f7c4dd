import APNsModel
import Foundation
import Synchronization
import Testing
@testable import FanoutAPNs

/// The worker's send lease as the transport executes it: a closed gate keeps requests queued (none
/// written, none failed) until it opens and wakes the client; a permit the gate no longer admits
/// completes withdrawn and never reaches APNs.
@Suite struct WriteGateTests {
    final class TestGate: WriteGate {
        let open = Atomic(true)
        let refused = Mutex<Set<UInt64>>([])
        func isOpen() -> Bool { open.load(ordering: .acquiring) }
        func admits(_ permit: WritePermit) -> Bool { !refused.withLock { $0.contains(permit.assignment) } }
    }

    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func aClosedGateHoldsRequestsUntilItOpens(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        let gate = TestGate()
        let client = try harness.client(transport, gate: gate)
        // One request first, so the connection is up and its stream limit known: the hold is what waits.
        #expect(await client.send(try TestApps.push(0)).outcome == .delivered)
        gate.open.store(false, ordering: .releasing)
        let results = Mutex<[APNsResult]>([])
        for n in 1...3 {
            try client.send(try TestApps.push(n), permit: WritePermit(assignment: 1)) { result in results.withLock { $0.append(result) } }
        }
        // Observable, not timed: the requests sit in the queue and the simulator saw only the first.
        #expect(try await eventually { client.stats.queued == 3 }, "the three requests are queued")
        try await Task.sleep(for: .milliseconds(300))
        #expect(results.withLock { $0.isEmpty }, "nothing completes while the gate is closed")
        #expect(client.stats.queued == 3)
        #expect(harness.simulator.stats().accepted == 1)
        gate.open.store(true, ordering: .releasing)
        client.wake()
        #expect(try await eventually { results.withLock { $0.count } == 3 }, "the held requests are answered")
        #expect(results.withLock { $0 }.allSatisfy { $0.outcome == .delivered })
        #expect(harness.simulator.stats().accepted == 4)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func aRequestWhosePermitIsRefusedIsWithdrawnUnwritten(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        let gate = TestGate()
        gate.refused.withLock { $0 = [7] }
        let client = try harness.client(transport, gate: gate)
        let results = Mutex<[UInt64: APNsResult]>([:])
        for (n, assignment) in [UInt64(7), 8, 7, 8].enumerated() {
            try client.send(try TestApps.push(n), permit: WritePermit(assignment: assignment)) { result in
                results.withLock { $0[UInt64(n)] = result }
            }
        }
        #expect(try await eventually { results.withLock { $0.count } == 4 }, "every request is completed")
        let answered = results.withLock { $0 }
        for n in [UInt64(0), 2] {
            #expect(APNsClient.isWithdrawn(answered[n]!), "request \(n) (assignment 7) must be withdrawn")
            #expect(answered[n]!.outcome == APNsClientError.withdrawn.outcome)
        }
        for n in [UInt64(1), 3] {
            #expect(answered[n]!.outcome == .delivered, "request \(n) (assignment 8) must be delivered")
            #expect(!APNsClient.isWithdrawn(answered[n]!))
        }
        // A failure before writing that is not a withdrawal (the client shut down) is a retry, not withdrawn.
        #expect(!APNsClient.isWithdrawn(APNsResult.notSent(APNsClientError.withdrawn.description)),
                "withdrawn is the client's flag, not the failure's text")
        #expect(harness.simulator.stats().accepted == 2, "the withdrawn requests never reached APNs")
        #expect(harness.simulator.stats().requests == 2)
        await client.shutdown(deadline: .now + .seconds(5))
    }

    /// A rebalance withdraws thousands of queued sends at once, ahead of the sends of kept partitions,
    /// while the connections may be probing (one stream each: fresh, or after a request timeout). The
    /// withdrawn ones take no stream: the kept sends behind them go out in the same pass, not after
    /// the withdrawn ones trickled out one per connection per wait of the client's loop.
    @Test(arguments: APNsClientConfiguration.Transport.allCases)
    func sendsWithdrawnAheadOfOthersDoNotHoldThemUp(transport: APNsClientConfiguration.Transport) async throws {
        let harness = try SimulatorHarness()
        let gate = TestGate()
        gate.refused.withLock { $0 = [1] }
        gate.open.store(false, ordering: .releasing)
        // Fresh: each of the two connections takes one request (the probe) until it is answered.
        let client = try harness.client(transport, gate: gate)
        let results = Mutex<[Int: APNsResult]>([:])
        let withdrawn = 3000
        for n in 0..<(withdrawn + 4) {
            try client.send(try TestApps.push(n), permit: WritePermit(assignment: n < withdrawn ? 1 : 2)) { result in
                results.withLock { $0[n] = result }
            }
        }
        #expect(try await eventually { client.stats.queued == withdrawn + 4 })
        gate.open.store(true, ordering: .releasing)
        client.wake()
        // Before the change: two withdrawn a second, so 25 minutes before the kept sends went.
        #expect(try await eventually { results.withLock { $0.count } == withdrawn + 4 }, "every request is completed")
        let answered = results.withLock { $0 }
        #expect((0..<withdrawn).allSatisfy { APNsClient.isWithdrawn(answered[$0]!) })
        #expect((withdrawn..<(withdrawn + 4)).allSatisfy { answered[$0]!.outcome == .delivered })
        #expect(harness.simulator.stats().accepted == 4)
        await client.shutdown(deadline: .now + .seconds(5))
    }
}
