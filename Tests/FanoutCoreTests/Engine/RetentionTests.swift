import APNsModel
import Testing
@testable import FanoutCore

/// How long targets are remembered, and that forgetting one never loses work
/// (`FanoutEngine+Retention.swift`).
@Suite struct RetentionTests {
    static func retainingEndedFor(_ retention: Nanoseconds) -> Harness { Harness.started { $0.endedRetention = retention } }

    /// Within `endedRetention` a late event is dropped as after-end (and keeps the target another
    /// retention); after it the target is forgotten with its activity's token, so a late update is a
    /// new target without a token: it waits `tokenWait` and is dead-lettered, never sent.
    @Test func anEndedTargetIsKeptForItsRetentionThenALateUpdateIsDeadLetteredNoToken() throws {
        var h = Self.retainingEndedFor(60 * sec)
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        h.advance(2 * sec)
        h.complete(try #require(h.feed(makeEvent("x", kind: .end, timestamp: 110)).sends.first))
        h.advance(59 * sec)
        #expect(h.feed(makeEvent("late-1", timestamp: 120)).drops == [.afterEnd])
        h.advance(59 * sec)
        #expect(h.engine.targetCount == 1, "the late event restarted its retention")
        h.advance(2 * sec)
        #expect(h.engine.targetCount == 0 && h.engine.forgottenTargets.ended == 1)
        #expect(h.engine.tokens.usableToken(for: "export-42", notBefore: 0) == nil, "its activity's token is retired with it")

        #expect(h.feed(makeEvent("late-2", timestamp: 130, status: "b")).isEmpty, "a new target, waiting for a token")
        #expect(h.engine.busyTargets() == (activity: 1, broadcast: 0))
        let letters = h.advance(h.engine.configuration.tokenWait).deadLetters
        #expect(letters.map(\.reason) == [.noToken] && letters.first?.sources == [EventSource(partition: activityPartition, offset: 3)])
        #expect(!h.actions.sends.contains { $0.event.id.hasPrefix("late") })
    }

    /// A late replay of the end itself, after the target was forgotten, takes the same way; a new
    /// activity under the same key (a start with its push-to-start token, then its own token) is sent.
    @Test func aReplayedEndIsDeadLetteredAndANewActivityUnderTheKeyIsSent() throws {
        var h = Self.retainingEndedFor(0)
        h.complete(try #require(h.feed(makeEvent("x", kind: .end, timestamp: 110)).sends.first))
        h.advance(sec)
        #expect(h.engine.targetCount == 0, "retention 0: forgotten once its end is done")
        h.feed(makeEvent("x-again", kind: .end, timestamp: 111))
        #expect(h.advance(h.engine.configuration.tokenWait).deadLetters.map(\.reason) == [.noToken])
        h.advance(sec)  // the dead-lettered end ends the new target too: forgotten
        #expect(h.engine.targetCount == 0)

        let start = try #require(h.feed(makeEvent("s2", kind: .start, timestamp: 200, token: tokenB)).sends.first)
        #expect(start.destination == .pushToStartToken(tokenB))
        h.complete(start)
        h.register(pushToken(String(repeating: "c3", count: 32)), at: 200)
        h.advance(2 * sec)
        let update = try #require(h.feed(makeEvent("u2", timestamp: 201, status: "b")).sends.first)
        #expect(update.destination == .activityToken(pushToken(String(repeating: "c3", count: 32))))
    }

    /// At `maxTrackedTargets` a new target evicts the least recently active idle one; one with a
    /// pending update (its offset incomplete) or a send in flight is never touched.
    @Test func evictionMakesRoomFromIdleTargetsOnly() throws {
        var configuration = EngineConfiguration()
        configuration.maxTrackedTargets = 4
        configuration.tokenWait = 3600 * sec
        var h = Harness(configuration: configuration)
        h.feed(makeEvent("w1", target: "waiting", timestamp: 100))  // no token: pending for an hour, offset 0
        let inFlight = try #require(h.feed(makeEvent("f1", timestamp: 100)).sends.first)
        for key in ["idle-a", "idle-b", "idle-c", "idle-d"] {
            h.register(tokenB, key: key, at: 1)
            h.complete(try #require(h.feed(makeEvent("\(key)-1", target: key, timestamp: 100)).sends.first))
            h.advance(sec)
        }
        #expect(h.engine.targetCount == 4 && h.engine.forgottenTargets.evicted == 2, "idle-c and idle-d each made room")
        #expect(h.engine.snapshot(lane: .activity, target: "idle-a", now: h.now) == nil)
        #expect(h.engine.snapshot(lane: .activity, target: "idle-b", now: h.now) == nil)
        #expect(h.engine.snapshot(lane: .activity, target: "waiting", now: h.now)?.pendingOffsets == 1)
        #expect(h.engine.snapshot(lane: .activity, target: "export-42", now: h.now)?.inFlightSendID == inFlight.sendID)
        #expect(h.engine.commitPoints().isEmpty, "offset 0 (the waiting update) is still incomplete")
        #expect(h.complete(inFlight).drops.isEmpty && h.engine.totalLoad == Load(incomplete: 1, inFlight: 0))

        // An evicted target comes back as a new one: its budget starts full again (the trade-off).
        let back = try #require(h.feed(makeEvent("idle-a-2", target: "idle-a", timestamp: 101, status: "b")).sends.first)
        #expect(back.priority == 10)
    }

    /// When every tracked target holds work, a new one is tracked past the bound rather than losing any.
    @Test func nothingIsEvictedWhenEveryTargetHoldsWork() {
        var configuration = EngineConfiguration()
        configuration.maxTrackedTargets = 2
        configuration.tokenWait = 3600 * sec
        var h = Harness(configuration: configuration, registerToken: false)
        for key in ["a", "b", "c"] { h.feed(makeEvent("\(key)-1", target: key, timestamp: 100)) }
        #expect(h.engine.targetCount == 3 && h.engine.forgottenTargets.evicted == 0)
        #expect(h.engine.busyTargets() == (activity: 3, broadcast: 0) && h.engine.totalLoad.incomplete == 3)
    }

    /// An idle target is forgotten by the sweep after `forgetIdleAfter` without activity, however many
    /// ticks that takes; one that holds work is not.
    @Test func theSweepForgetsLongIdleTargetsOnly() throws {
        var h = Harness.started {
            $0.forgetIdleAfter = 600 * sec
            $0.sweepInterval = 60 * sec
            $0.tokenWait = 3600 * sec
        }
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        h.feed(makeEvent("w1", target: "waiting", timestamp: 100))
        for _ in 0..<(599 / 7) { h.advance(7 * sec) }
        #expect(h.engine.targetCount == 2)
        for _ in 0..<20 { h.advance(7 * sec) }
        #expect(h.engine.targetCount == 1 && h.engine.forgottenTargets.idle == 1)
        #expect(h.engine.snapshot(lane: .activity, target: "waiting", now: h.now) != nil)
    }

    /// The record every tracked target costs (the README's bytes per activity build on it).
    @Test func aTargetRecordStaysCompact() {
        #expect(MemoryLayout<TargetState>.stride == 216)
        #expect(MemoryLayout<PushToken>.size <= 34)
    }
}
