import APNsModel
import APNsSimulator
import Foundation
import Synchronization
import Testing
@testable import FanoutAPNs

/// The nghttp2 transport and the server's HTTP/2 connection window (RFC 9113 §6.9).
@Suite struct FlowControlTests {
    /// Requests leave in the order they were sent even when many more wait than the server's connection
    /// window takes (the simulator keeps nghttp2's 65,535 bytes): the client hands nghttp2 only what the
    /// window takes and keeps the rest in its own queue. nghttp2 holding hundreds of bodies sent them
    /// out of order: in workload 3 of scripts/bench some waited 250–800 ms behind later ones.
    @Test func requestsBeyondTheConnectionWindowLeaveInOrder() async throws {
        let harness = try SimulatorHarness()
        let client = try harness.client(.nghttp2, connections: 1)
        // The simulator raises its stream limit from 1 with the first authenticated answer.
        #expect(await client.send(try TestApps.push()).outcome == .delivered)
        let count = 1_000
        let padding = String(repeating: "x", count: 2_000)
        let answered = Atomic<Int>(0)
        let delivered = Atomic<Int>(0)
        for n in 0..<count {
            let payload = Array(#"{"aps":{"event":"update","timestamp":\#(1_700_000_000 + n),"content-state":{"n":\#(n),"pad":"\#(padding)"}}}"#.utf8)
            let request = try APNsRequest.liveActivity(deviceToken: TestApps.token, bundleID: TestApps.bundleID, payload: payload,
                                                       priority: .conserve, expiration: TestApps.expiration)
            try client.send(request) { result in
                if result.outcome == .delivered { delivered.add(1, ordering: .relaxed) }
                answered.add(1, ordering: .relaxed)
            }
        }
        #expect(try await eventually(within: .seconds(60)) { answered.load(ordering: .relaxed) == count })
        #expect(delivered.load(ordering: .relaxed) == count, "\(client.stats)")

        // The order the simulator received them in (after the first push), against the order sent.
        let arrivals = harness.simulator.deliveries().dropFirst().map { Self.sequenceNumber(in: $0.aps) }
        #expect(arrivals.count == count)
        let displacement = arrivals.enumerated().map { abs($0.offset - ($0.element ?? -count)) }.max() ?? 0
        // A window holds 32 of these bodies: nghttp2 may reorder only those it was handed together.
        #expect(displacement <= 65_535 / 2_000, "a request arrived \(displacement) places away from where it was sent")
        await client.shutdown(deadline: .now + .seconds(5))
    }

    /// `content-state.n` of a delivered push's `aps` object.
    static func sequenceNumber(in aps: String) -> Int? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(aps.utf8)) as? [String: Any],
              let state = object["content-state"] as? [String: Any] else { return nil }
        return state["n"] as? Int
    }
}
