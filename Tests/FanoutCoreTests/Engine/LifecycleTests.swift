import APNsModel
import Testing
@testable import FanoutCore

@Suite struct LifecycleTests {
    @Test func idleAndEndedTargetsAreForgottenAfterTheirRetention() throws {
        var configuration = EngineConfiguration()
        configuration.forgetIdleAfter = 600 * sec
        configuration.endedRetention = 60 * sec
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

    /// A revoke waits for the partition's send in flight: its answer completes the offset, and the
    /// drain hands back the point after it.
    @Test func aRevokeIsDrainedWhenItsSendInFlightIsAnswered() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        #expect(h.revoke([activityPartition]).drained.isEmpty, "a send is in flight")
        #expect(h.engine.phase(of: activityPartition) == .closing)
        #expect(h.feed(makeEvent("e2", timestamp: 101, status: "b")).isEmpty, "a closing partition takes no new record")
        let answered = h.complete(send)
        #expect(answered.drained == [activityPartition: CommitPoint(partition: activityPartition, offset: 1)])
        #expect(h.engine.phase(of: activityPartition) == nil)
        #expect(h.engine.totalLoad == Load(incomplete: 0, inFlight: 0))
    }

    /// A send that is never answered holds a revoke for `revokeDrainTimeout` at most; its offsets stay
    /// uncommitted and its late answer is ignored.
    @Test func aRevokeIsDrainedAtItsDeadlineWithoutTheUnansweredSend() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.revoke([activityPartition])
        #expect(h.advance(h.engine.configuration.revokeDrainTimeout - 1).drained.isEmpty)
        #expect(h.advance(1).drained == [activityPartition: nil], "nothing to commit past the unanswered send")
        #expect(h.complete(send).isEmpty)
        #expect(h.engine.totalLoad == Load(incomplete: 0, inFlight: 0))
    }

    /// No send starts for a closing partition: the pending state stays for the next owner.
    @Test func nothingIsSentForAClosingPartition() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.complete(first)
        h.feed(makeEvent("e2", timestamp: 101, status: "b"))  // waits for min_interval
        let other = PartitionID(topic: "activity-updates", partition: 1)
        h.register(tokenB, key: "other", at: 1)
        let busy = try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100), partition: other).sends.first)
        #expect(h.revoke([activityPartition]).drained == [activityPartition: CommitPoint(partition: activityPartition, offset: 1)],
                "nothing in flight: drained at once, e2 uncommitted")
        #expect(h.advance(2 * sec).sends.isEmpty)
        #expect(h.complete(busy).drained.isEmpty, "the other partition is not affected")
    }

    /// Losing one partition frees its own targets, sends in flight and dead letters — visiting those
    /// only — and leaves every other partition's targets, tokens and sends as they were.
    @Test func forgettingAPartitionVisitsOnlyItsOwnTargets() throws {
        var h = Harness()
        let other = PartitionID(topic: "activity-updates", partition: 1)
        for index in 0..<40 {
            h.register(pushToken(String(format: "%064x", index + 1)), key: "kept-\(index)", at: 1)
            h.complete(try #require(h.feed(makeEvent("k\(index)", target: "kept-\(index)", timestamp: 100)).sends.first))
        }
        let keptInFlight = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        var actions: [EngineAction] = []
        h.engine.tokenRegistered(key: "lost-0", token: tokenB, environment: nil, at: 1, partition: 1, now: h.now, into: &actions)
        let lostInFlight = try #require(h.feed(makeEvent("l0", target: "lost-0", timestamp: 100), partition: other).sends.first)
        h.feed(makeEvent("l1", target: "lost-1", timestamp: 100), partition: other)  // no token: dead-lettered, not yet acknowledged
        let letter = try #require(h.advance(h.engine.configuration.tokenWait + sec).deadLetters.first)
        #expect(letter.reason == .noToken && h.engine.targetCount(of: other) == 2)
        #expect(h.engine.targetCount(of: activityPartition) == 41)

        h.engine.lose([other], into: &actions)
        #expect(h.engine.lastForgetVisited == 2, "only the lost partition's own targets are visited")
        #expect(h.engine.targetCount == 41 && h.engine.targetCount(of: activityPartition) == 41 && h.engine.tokens.count == 41)
        #expect(h.engine.totalLoad == Load(incomplete: 1, inFlight: 1), "what remains is the kept partition's send")
        #expect(h.engine.busyTargets() == (activity: 1, broadcast: 0))
        #expect(h.complete(lostInFlight).isEmpty, "the lost partition's answer is ignored")
        h.engine.resolve(letter.resolution)
        #expect(h.complete(keptInFlight).drops.isEmpty && h.engine.totalLoad == Load(incomplete: 0, inFlight: 0))
        #expect(h.engine.commitPoints() == [CommitPoint(partition: activityPartition, offset: 41)])
        #expect(h.engine.snapshot(lane: .activity, target: "kept-7", now: h.now)?.deliveries == 1)
    }

    @Test func revokingAnActivityPartitionForgetsItsTokens() throws {
        var h = Harness()
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        #expect(h.engine.tokens.count == 1)
        h.revoke([activityPartition])
        #expect(h.engine.tokens.count == 0)
    }

    /// Sends of an activity partition wait until its activity-tokens partition was read for this
    /// assignment; a catch-up reported for an earlier assignment of the same partition changes nothing.
    @Test func sendsWaitForTheTokensOfThisAssignment() throws {
        var h = Harness()
        let first = h.assign(activityPartition, at: h.now - 60 * sec, tokensRead: false)
        guard case let .followTokens(number, old)? = first.first else { Issue.record("no followTokens: \(first)"); return }
        h.revoke([activityPartition])
        let again = h.assign(activityPartition, at: h.now - 60 * sec, tokensRead: false)
        guard case let .followTokens(_, current)? = again.first else { Issue.record("no followTokens: \(again)"); return }
        #expect(old != current)
        h.register(tokenA, at: 1)  // read from activity-tokens for this assignment
        #expect(h.feed(makeEvent("e1", timestamp: 100)).sends.isEmpty, "tokens not read yet")
        var actions: [EngineAction] = []
        h.engine.tokensCaughtUp(partition: number, assignment: old, now: h.now, into: &actions)
        #expect(actions.isEmpty && h.engine.phase(of: activityPartition) == .readingTokens, "a report of the earlier assignment")
        #expect(h.engine.catchingUpPartitions == [activityPartition], "what fanout_partitions_catching_up counts")
        h.engine.tokensCaughtUp(partition: number, assignment: current, now: h.now, into: &actions)
        #expect(actions.sends.map(\.event.id) == ["e1"])
        #expect(h.engine.catchingUpPartitions.isEmpty)
    }

    /// A partition lost without a handoff is dropped at once: nothing committed, its sends' answers ignored.
    @Test func aLostPartitionIsDroppedWithoutACommit() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        var actions: [EngineAction] = []
        h.engine.lose([activityPartition], into: &actions)
        #expect(actions.drained.isEmpty && h.engine.phase(of: activityPartition) == nil)
        #expect(h.complete(send).isEmpty)
        #expect(h.engine.commitPoints().isEmpty)
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
        #expect(h.engine.commitPoints().isEmpty, "0 is where the group resumed the partition: nothing to commit")
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
        #expect(h.engine.commitPoints() == [CommitPoint(partition: activityPartition, offset: 1)], "other stays at 0, where it resumed")
    }
}

/// Commits wait while the group rebalances for this worker (librdkafka 2.0.2 drops every partition
/// when a commit of the old generation is answered after the rejoin) and go out when it settles.
@Suite struct CommitTimingTests {
    /// An engine that emits `.commit` every second, its commit clock started.
    static func committingEverySecond() -> Harness { Harness.started { $0.commitInterval = sec } }

    @Test func commitsAreHeldWhileTheGroupRebalancesAndGoOutWhenItSettles() throws {
        var h = Self.committingEverySecond()
        let other = PartitionID(topic: "activity-updates", partition: 1)
        h.register(tokenB, key: "other", at: 1)
        h.complete(try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100), partition: other).sends.first))
        h.feed(makeEvent("e1", timestamp: 100))
        h.revoke([activityPartition])  // e1's send in flight: closing, and the member rejoins
        #expect(!h.advance(2 * sec).contains { if case .commit = $0 { true } else { false } }, "held while rebalancing")
        var actions: [EngineAction] = []
        h.engine.groupSettled(now: h.now, into: &actions)
        #expect(actions == [.commit([CommitPoint(partition: other, offset: 1)], round: 1)], "at once when it settles, in the round after it")
    }

    @Test func aRefusalBecauseOfARebalanceHoldsCommitsToo() throws {
        var h = Self.committingEverySecond()
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        let offer = try #require(Self.offers(h.advance(sec)).first)
        #expect(offer.points == [CommitPoint(partition: activityPartition, offset: 1)])
        let held = h.engine.commitAnswered(offer.points, failed: [activityPartition], refusedForRebalanceIn: offer.round)
        #expect(held)
        #expect(Self.offers(h.advance(3 * sec)).isEmpty)
        var actions: [EngineAction] = []
        h.engine.groupSettled(now: h.now, into: &actions)
        #expect(actions == [.commit(offer.points, round: offer.round + 1)], "offered again once it settled")
    }

    /// A refusal "because the group rebalances" that Kafka answers after the group settled is about
    /// the rebalance that just ended: holding for it waited for a settle that never came, and a settled
    /// worker committed nothing more (the simulation found it once answers could come after a settle).
    @Test func aRefusalOfAnOfferFromBeforeTheLastSettleDoesNotHoldCommits() throws {
        var h = Self.committingEverySecond()
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        let stale = try #require(Self.offers(h.advance(sec)).first)
        h.engine.groupRebalancing()  // the group starts rebalancing while that commit is on its way
        var actions: [EngineAction] = []
        h.engine.groupSettled(now: h.now, into: &actions)
        #expect(Self.offers(actions).map(\.points) == [stale.points], "offered again in the new round at once")
        let held = h.engine.commitAnswered(stale.points, failed: [activityPartition], refusedForRebalanceIn: stale.round)
        #expect(!held && !h.engine.commitsHeldForRebalance)
        let again = Self.offers(h.advance(sec))
        #expect(again.map(\.points) == [stale.points] && again.first?.round == stale.round + 1, "offered at the next interval")
    }
}

extension CommitTimingTests {
    private static func offered(_ actions: [EngineAction]) -> [CommitPoint] { offers(actions).flatMap(\.points) }

    static func offers(_ actions: [EngineAction]) -> [(points: [CommitPoint], round: UInt64)] {
        actions.compactMap { if case let .commit(points, round) = $0 { (points, round) } else { nil } }
    }

    /// Once every record read is settled, what is done goes out a quarter interval after the last
    /// commit instead of a whole one: a drained burst's last offsets do not wait. While records are
    /// still incomplete, the interval paces commits as before.
    @Test func aDrainedWorkerCommitsAQuarterIntervalAfterTheLastCommit() throws {
        let ms: Nanoseconds = 1_000_000
        var h = Self.committingEverySecond()
        h.register(tokenB, key: "other", at: 1)
        h.register(PushToken(hex: String(repeating: "c3", count: 32))!, key: "third", at: 1)
        #expect(Self.offered(h.advance(sec)).isEmpty, "a commit pass with nothing to offer: the interval starts again")
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let second = try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100)).sends.first)
        h.advance(100 * ms)
        h.complete(first)
        #expect(Self.offered(h.advance(300 * ms)).isEmpty, "o1 is still in flight: the interval paces the commit")
        #expect(h.engine.nextDeadline() == h.now + 600 * ms)
        h.complete(second)  // 400 ms after the last pass: the quarter has passed
        #expect(h.engine.nextDeadline() ?? .max <= h.now, "due at once")
        #expect(Self.offered(h.advance(1 * ms)) == [CommitPoint(partition: activityPartition, offset: 2)])
        // A record that trickles in and drains at once: a quarter interval after that commit.
        h.complete(try #require(h.feed(makeEvent("t1", target: "third", timestamp: 100)).sends.first))
        #expect(Self.offered(h.advance(200 * ms)).isEmpty)
        #expect(Self.offered(h.advance(50 * ms)) == [CommitPoint(partition: activityPartition, offset: 3)])
    }

    /// Draining twice between two commit passes still waits the quarter interval from the last pass:
    /// the early commit counts from when the last commit went out, not from the moved deadline.
    @Test func drainingTwiceBeforeACommitPassWaitsTheQuarterOnce() throws {
        let ms: Nanoseconds = 1_000_000
        var h = Self.committingEverySecond()
        h.register(tokenB, key: "other", at: 1)
        #expect(Self.offered(h.advance(sec)).isEmpty, "a commit pass with nothing to offer")
        h.advance(50 * ms)
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        h.advance(50 * ms)
        h.complete(try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100)).sends.first))
        #expect(h.engine.nextDeadline() == h.now + 150 * ms, "a quarter after the last pass, not earlier")
        #expect(Self.offered(h.advance(149 * ms)).isEmpty)
        #expect(Self.offered(h.advance(1 * ms)) == [CommitPoint(partition: activityPartition, offset: 2)])
    }

    /// A commit that falls due while the answer to the member's last heartbeat may be on its way waits
    /// out the window: that answer can start a rejoin, and a commit handed to librdkafka after it
    /// arrived goes out behind the JoinGroup and costs every partition (librdkafka #4059). If the
    /// answer does start a rejoin, the commit waits for the settle instead.
    @Test func aCommitDueRightAfterAHeartbeatWaitsForItsAnswer() throws {
        let ms: Nanoseconds = 1_000_000
        var h = Harness.started { $0.commitInterval = sec; $0.heartbeatAnswerWindow = 250 * ms }
        h.register(tokenB, key: "other", at: 1)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        _ = try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100)).sends.first)  // in flight: the interval paces commits
        h.complete(first)
        h.advance(999 * ms)
        h.engine.heartbeatSent(at: h.now)  // both timers started when the group settled
        #expect(Self.offered(h.advance(1 * ms)).isEmpty, "due, but a heartbeat left a millisecond ago")
        #expect(h.engine.nextDeadline() == h.now + 249 * ms)
        #expect(Self.offered(h.advance(248 * ms)).isEmpty)
        #expect(Self.offered(h.advance(1 * ms)) == [CommitPoint(partition: activityPartition, offset: 1)], "once the window is over")

        h.advance(990 * ms)  // that offer is never answered: its point is offered again at the next interval
        h.engine.heartbeatSent(at: h.now)
        h.advance(20 * ms)
        h.engine.groupRebalancing()  // the answer: the group is rebalancing
        #expect(Self.offered(h.advance(2 * sec)).isEmpty, "held until the group settles")
        var actions: [EngineAction] = []
        h.engine.heartbeatSent(at: h.now)  // the first heartbeat of the new generation
        h.engine.groupSettled(now: h.now, into: &actions)
        #expect(Self.offered(actions).isEmpty, "settled while that heartbeat's answer is on its way")
        #expect(Self.offered(h.advance(250 * ms)) == [CommitPoint(partition: activityPartition, offset: 1)])
    }

    /// Without heartbeats reported (tests, benchmarks, `heartbeatAnswerWindow` nil) nothing waits.
    @Test func heartbeatsChangeNothingWithoutAnAnswerWindow() throws {
        var h = Self.committingEverySecond()
        h.register(tokenB, key: "other", at: 1)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        _ = try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100)).sends.first)
        h.complete(first)
        h.advance(sec - 1)
        h.engine.heartbeatSent(at: h.now)
        #expect(Self.offered(h.advance(1)) == [CommitPoint(partition: activityPartition, offset: 1)])
    }

    /// At shutdown the worker makes the final commit itself: the engine offers none after it.
    @Test func noCommitIsOfferedOnceTheWorkerStopsCommitting() throws {
        var h = Self.committingEverySecond()
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        h.engine.stopCommitting()
        #expect(h.engine.uncommittedPoints() == [CommitPoint(partition: activityPartition, offset: 1)])
        #expect(!h.advance(5 * sec).contains { if case .commit = $0 { true } else { false } })
    }
}

/// Every end of an assignment is said (`.assignmentEnded`), so the worker withdraws the sends still
/// queued under it; each send names the assignment it was decided under.
@Suite struct AssignmentEndTests {
    private func ended(_ actions: [EngineAction]) -> [AssignmentID] {
        actions.compactMap { if case let .assignmentEnded(id) = $0 { id } else { nil } }
    }

    @Test func aSendNamesItsAssignmentAndALossEndsIt() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        var actions: [EngineAction] = []
        h.engine.lose([activityPartition], into: &actions)
        #expect(ended(actions) == [send.assignment])
    }

    @Test func aDrainedRevokeEndsItsAssignmentBeforeHandingThePartitionBack() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.revoke([activityPartition])
        let answered = h.complete(send)
        #expect(ended(answered) == [send.assignment])
        let endIndex = try #require(answered.firstIndex { if case .assignmentEnded = $0 { true } else { false } })
        let drainIndex = try #require(answered.firstIndex { if case .revokeDrained = $0 { true } else { false } })
        #expect(endIndex < drainIndex)
    }

    @Test func aClosingPartitionGivenBackEndsTheOldAssignmentAndSendsUnderTheNewOne() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.revoke([activityPartition])
        let again = h.assign(activityPartition)
        #expect(ended(again) == [first.assignment])
        h.register(tokenA, key: "export-42", at: 2)  // the new owner reads activity-tokens again
        h.advance(60 * sec)
        var sends = h.feed(makeEvent("e2", timestamp: 200, status: "b")).sends
        sends += h.advance(60 * sec).sends
        let second = try #require(sends.first)
        #expect(second.assignment != first.assignment)
    }
}
