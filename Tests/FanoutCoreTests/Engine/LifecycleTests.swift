import APNsModel
import Testing
@testable import FanoutCore

@Suite struct LifecycleTests {
    @Test func idleAndEndedTargetsAreForgottenAfterTheirRetention() throws {
        var configuration = EngineConfiguration()
        configuration.forgetIdleAfter = 600 * sec
        configuration.forgetEndedAfter = 60 * sec
        configuration.sweepInterval = 10 * sec
        var h = Harness(configuration: configuration)
        h.register(tokenB, key: "ended", at: 1)
        h.advance(0)  // arms the sweep
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        h.complete(try #require(h.feed(makeEvent("x1", target: "ended", kind: .end, timestamp: 100)).sends.first))
        #expect(h.engine.targetCount == 2)
        for _ in 0..<10 { h.advance(10 * sec) }
        #expect(h.engine.snapshot(lane: .activity, target: "ended", now: h.now) == nil)
        #expect(h.engine.snapshot(lane: .activity, target: "export-42", now: h.now) != nil)
        for _ in 0..<60 { h.advance(10 * sec) }
        #expect(h.engine.targetCount == 0)
    }

    @Test func targetWithPendingWorkIsNeverForgotten() {
        var configuration = EngineConfiguration()
        configuration.forgetIdleAfter = 60 * sec
        configuration.sweepInterval = 10 * sec
        configuration.tokenWait = 3600 * sec
        var h = Harness(configuration: configuration, registerToken: false)
        h.advance(0)
        h.feed(makeEvent("e1", timestamp: 100))
        for _ in 0..<30 { h.advance(10 * sec) }
        #expect(h.engine.snapshot(lane: .activity, target: "export-42", now: h.now)?.pendingOffsets == 1)
    }

    @Test func outcomeOfARevokedPartitionsSendIsIgnored() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        _ = h.engine.revoke([activityPartition])
        #expect(h.complete(send).isEmpty)
        #expect(h.engine.commitPoints().isEmpty)
        #expect(h.engine.totalLoad == Load(incomplete: 0, inFlight: 0))
    }

    @Test func revokingAnActivityPartitionForgetsItsTokens() {
        var h = Harness()
        h.feed(makeEvent("e1", timestamp: 100))
        #expect(h.engine.tokens.count == 1)
        _ = h.engine.revoke([activityPartition])
        #expect(h.engine.tokens.count == 0)
    }

    @Test func commitPointsAreReportedOnlyWhenTheyMove() throws {
        var h = Harness()
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        #expect(h.engine.commitPoints() == [CommitPoint(partition: activityPartition, offset: 1)])
        #expect(h.engine.commitPoints().isEmpty)
    }

    @Test func rejectedRecordHoldsTheCommitUntilResolved() {
        var h = Harness()
        let source = EventSource(partition: activityPartition, offset: 0)
        h.engine.receiveRejected(source)
        #expect(h.engine.commitPoints() == [CommitPoint(partition: activityPartition, offset: 0)])
        h.engine.resolveRejected(source)
        #expect(h.engine.commitPoints() == [CommitPoint(partition: activityPartition, offset: 1)])
    }
}

@Suite struct PartitionMismatchTests {
    @Test func keyOnAnotherPartitionWhileBusyIsDeadLetteredAndIdleTargetIsRehomed() throws {
        var h = Harness()
        let other = PartitionID(topic: "activity-updates", partition: 1)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let refused = h.feed(makeEvent("e2", timestamp: 101, status: "b"), partition: other)
        #expect(refused.deadLetters.map(\.reason) == [.keyMismatch])
        #expect(refused.deadLetters.first?.sources == [EventSource(partition: other, offset: 0)])
        h.complete(first)
        h.advance(2 * sec)
        let moved = try #require(h.feed(makeEvent("e3", timestamp: 102, status: "c"), partition: other).sends.first)
        #expect(moved.partition == other && moved.coveredOffsets == [1])
        h.complete(moved)
        #expect(Set(h.engine.commitPoints()) == [CommitPoint(partition: activityPartition, offset: 1), CommitPoint(partition: other, offset: 0)])
    }
}
