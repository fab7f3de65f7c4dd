@testable import FanoutCore
import Testing

/// A lane carries at most `sendCapacityPerLane` sends (what the worker's APNs client holds): targets
/// ready past it wait, oldest first, and go as sends of that lane end — the other lane is not held.
@Suite struct LaneCapacityTests {
    @Test func targetsReadyPastTheLaneCapacityWaitAndGoOldestFirst() throws {
        var configuration = EngineConfiguration()
        configuration.sendCapacityPerLane = [2, 1]
        var h = Harness(configuration: configuration)
        for i in 0..<4 { h.register(tokenA, key: "k\(i)", at: 1) }
        var sent: [SendRequest] = []
        for i in 0..<4 { sent += h.feed(makeEvent("e\(i)", target: "k\(i)", timestamp: 100)).sends }
        #expect(sent.map(\.target) == ["k0", "k1"], "two fill the lane; k2 and k3 wait")
        #expect(h.engine.targetCount == 4)
        // The broadcast lane has its own capacity: not held by the full activity lane.
        let channel = h.feed(makeEvent("b", target: "Y2hhbm5lbA==", timestamp: 100, lane: .broadcast), partition: broadcastPartition)
        #expect(channel.sends.count == 1)

        let afterFirst = h.complete(sent[0]).sends
        #expect(afterFirst.map(\.target) == ["k2"])
        let afterSecond = h.complete(sent[1]).sends
        #expect(afterSecond.map(\.target) == ["k3"])
        #expect(h.complete(afterFirst[0]).sends.isEmpty && h.complete(afterSecond[0]).sends.isEmpty)
    }

    /// A waiting target whose update is replaced keeps its place and sends the newest state once.
    @Test func aWaitingTargetSendsItsNewestStateOnce() throws {
        var configuration = EngineConfiguration()
        configuration.sendCapacityPerLane = [1, 1]
        var h = Harness(configuration: configuration)
        h.register(tokenA, key: "k0", at: 1)
        h.register(tokenA, key: "k1", at: 1)
        let first = try #require(h.feed(makeEvent("a", target: "k0", timestamp: 100)).sends.first)
        #expect(h.feed(makeEvent("b1", target: "k1", timestamp: 100, status: "one")).sends.isEmpty)
        #expect(h.feed(makeEvent("b2", target: "k1", timestamp: 101, status: "two")).sends.isEmpty)
        let next = h.complete(first).sends
        #expect(next.count == 1 && next[0].target == "k1" && next[0].event.id == "b2" && next[0].coveredOffsets == [1, 2])
    }
}
