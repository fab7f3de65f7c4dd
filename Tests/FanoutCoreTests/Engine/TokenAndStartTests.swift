import APNsModel
import Testing
@testable import FanoutCore

@Suite struct TokenAndStartTests {
    @Test func updateWithoutTokenWaitsThenIsDeadLetteredNoToken() throws {
        var h = Harness(registerToken: false)
        #expect(h.feed(makeEvent("e1", timestamp: 100)).sends.isEmpty)
        #expect(h.advance(29 * sec).deadLetters.isEmpty)
        let letter = try #require(h.advance(sec).deadLetters.first)
        #expect(letter.reason == .noToken)
        #expect(letter.sources.map(\.offset) == [0])
        #expect(h.engine.commitPoints().isEmpty || h.engine.commitPoints().allSatisfy { $0.offset == 0 })
        h.engine.resolve(letter.resolution)
        #expect(h.engine.commitPoints().map(\.offset) == [1])
    }

    @Test func tokenArrivingDuringWaitSendsAtOnce() throws {
        var h = Harness(registerToken: false)
        h.feed(makeEvent("e1", timestamp: 100))
        h.advance(5 * sec)
        let send = try #require(h.register(tokenB, at: 50).sends.first)
        #expect(send.destination == .activityToken(tokenB))
    }

    @Test func decodedTokenRecordRegistersWithItsEnvironment() throws {
        var h = Harness(registerToken: false)
        var actions: [EngineAction] = []
        h.engine.tokenRegistered(key: "export-42", record: TokenRecord(token: tokenB, app: "com.example.exports", environment: .sandbox, at: 7),
                                 partition: 0, now: h.now, into: &actions)
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        #expect(send.destination == .activityToken(tokenB) && send.environment == .sandbox)
        #expect(h.engine.tokens.record(for: "export-42")?.at == 7)
    }

    /// A token registered for another app is never sent under this app's topic (APNs: DeviceTokenNotForTopic,
    /// and the token, good for its own app, would be reported gone): the update waits for a token of its
    /// own app, and is dead-lettered no-token saying why.
    @Test func aTokenOfAnotherAppIsNotUsed() throws {
        var h = Harness(registerToken: false)
        var actions: [EngineAction] = []
        h.engine.tokenRegistered(key: "export-42", record: TokenRecord(token: tokenB, app: "com.example.rides", environment: .production, at: 7),
                                 partition: 0, now: h.now, into: &actions)
        #expect(h.feed(makeEvent("e1", timestamp: 100)).sends.isEmpty)
        let letter = try #require(h.advance(30 * sec).deadLetters.first)
        #expect(letter.reason == .noToken)
        #expect(letter.detail.contains("com.example.rides") && letter.detail.contains("com.example.exports"), "\(letter.detail)")
        // A registration for the events' app is used at once.
        h.feed(makeEvent("e2", timestamp: 101))
        h.engine.tokenRegistered(key: "export-42", record: TokenRecord(token: tokenA, app: "com.example.exports", environment: .production, at: 8),
                                 partition: 0, now: h.now, into: &actions)
        #expect(actions.sends.map(\.destination) == [.activityToken(tokenA)])
    }

    @Test func rotationTakesEffectForTheNextSendAndOlderRegistrationIsIgnored() throws {
        var h = Harness()
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first))
        h.register(tokenB, at: 10)
        h.register(tokenA, at: 5)  // replayed older registration
        h.advance(2 * sec)
        let send = try #require(h.feed(makeEvent("e2", timestamp: 101, status: "b")).sends.first)
        #expect(send.destination == .activityToken(tokenB))
    }

    @Test func goneTokenProducesFeedbackAndStopsSendsUntilNewerRegistration() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let feedback = try #require(h.complete(send, .tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: 5)).feedback.first)
        #expect(feedback.token == tokenA && feedback.status == 410 && feedback.key == "export-42")
        #expect(h.engine.commitPoints().isEmpty, "0 is where the partition resumed")
        h.engine.resolve(feedback.resolution)
        #expect(h.engine.commitPoints().map(\.offset) == [1])
        h.advance(2 * sec)
        #expect(h.feed(makeEvent("e2", timestamp: 101, status: "b")).sends.isEmpty)
        h.register(tokenA, at: 1)  // same token, not newer: still gone
        #expect(h.actions.sends.count == 1)
        let resumed = try #require(h.register(tokenB, at: 20).sends.first)
        #expect(resumed.destination == .activityToken(tokenB))
    }

    @Test func startGoesToPushToStartTokenThenUpdatesWaitForTheActivityToken() throws {
        var h = Harness(registerToken: false)
        h.register(tokenA, at: 50)  // a previous activity's token under the same key
        let start = try #require(h.feed(makeEvent("s", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.first)
        #expect(start.destination == .pushToStartToken(tokenB))
        #expect(start.priority == 10)
        h.feed(makeEvent("u", timestamp: 101, status: "b"))
        h.advance(2 * sec)
        #expect(h.complete(start).sends.isEmpty)  // token registered at 50 predates the start
        let update = try #require(h.register(String(repeating: "c3", count: 32), at: 100).sends.first)
        #expect(update.event.id == "u" && update.event.kind == .update)
    }

    @Test func updatesWhileStartIsPendingRideOnTheStart() throws {
        var configuration = EngineConfiguration()
        configuration.pushToStartBudget = BudgetSettings(minInterval: sec, burst: 1, refillPerHour: 10)
        var h = Harness(configuration: configuration, registerToken: false)
        h.complete(try #require(h.feed(makeEvent("s1", target: "k1", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.first))
        // Same push-to-start token, other activity: no credit left, the start waits.
        #expect(h.feed(makeEvent("s2", target: "k2", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.isEmpty)
        h.feed(makeEvent("u2", target: "k2", timestamp: 101, status: "b"))
        let start = try #require(h.advance(360 * sec).sends.first)
        #expect(start.event.kind == .start && start.event.id == "u2" && start.coveredOffsets == [1, 2])
        #expect(start.event.attributes != nil)
    }

    @Test func endOfANeverSentStartCancelsBoth() {
        var configuration = EngineConfiguration()
        configuration.pushToStartBudget = BudgetSettings(minInterval: sec, burst: 1, refillPerHour: 10)
        var h = Harness(configuration: configuration, registerToken: false)
        h.feed(makeEvent("s1", target: "k1", kind: .start, timestamp: 100, alert: true, token: tokenB))
        h.feed(makeEvent("s2", target: "k2", kind: .start, timestamp: 100, alert: true, token: tokenB))
        let actions = h.feed(makeEvent("e2", target: "k2", kind: .end, timestamp: 101))
        #expect(actions.drops == [.endedBeforeStart, .endedBeforeStart])
        #expect(actions.sends.isEmpty && actions.deadLetters.isEmpty)
    }

    /// A start that was in the log when this member got the partition (below the replay boundary)
    /// may have been sent by the previous owner: its end is kept, waits for the activity's token, and
    /// without one is dead-lettered saying why, never cancelled with the start.
    @Test func endOfAStartReplayedFromBeforeTheAssignmentIsKept() throws {
        var configuration = EngineConfiguration()
        configuration.pushToStartBudget = BudgetSettings(minInterval: sec, burst: 1, refillPerHour: 10)
        var h = Harness(configuration: configuration, registerToken: false)
        _ = h.assign(activityPartition)
        h.engine.replayBoundary(of: activityPartition, below: 3)
        h.feed(makeEvent("s0", target: "other", kind: .start, timestamp: 90, alert: true, token: tokenB))  // spends the bucket
        #expect(h.feed(makeEvent("s", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.isEmpty)
        #expect(h.feed(makeEvent("e", kind: .end, timestamp: 101)).drops.isEmpty, "offset 2 < 3: the start may be on the device")
        h.advance(sec)  // the end starts waiting for the activity's token
        #expect(h.actions.sends.allSatisfy { $0.target != "export-42" })
        let letter = try #require(h.advance(40 * sec).deadLetters.first { $0.target == "export-42" })
        #expect(letter.reason == .noToken && letter.sources.map(\.offset) == [1, 2])
        #expect(letter.detail.contains("previous owner"), "\(letter.detail)")
    }

    /// The same pair produced after the assignment (at or above the boundary) no previous owner saw:
    /// the start was never sent anywhere, so its end cancels both.
    @Test func endOfAStartProducedAfterTheAssignmentCancelsBoth() {
        var configuration = EngineConfiguration()
        configuration.pushToStartBudget = BudgetSettings(minInterval: sec, burst: 1, refillPerHour: 10)
        var h = Harness(configuration: configuration, registerToken: false)
        _ = h.assign(activityPartition)
        h.engine.replayBoundary(of: activityPartition, below: 1)
        h.feed(makeEvent("s0", target: "other", kind: .start, timestamp: 90, alert: true, token: tokenB))
        h.feed(makeEvent("s", kind: .start, timestamp: 100, alert: true, token: tokenB))
        let actions = h.feed(makeEvent("e", kind: .end, timestamp: 101))
        #expect(actions.drops == [.endedBeforeStart, .endedBeforeStart])
    }

    /// A start this worker never sent, replayed after a handoff, meets its end: when the activity's own
    /// token (registered at or after the start) is known, a previous owner's start reached the device,
    /// and the end goes to that token instead of cancelling the pair.
    @Test func endOfAReplayedStartWhoseActivityTokenArrivedGoesToThatToken() throws {
        var configuration = EngineConfiguration()
        configuration.pushToStartBudget = BudgetSettings(minInterval: sec, burst: 1, refillPerHour: 10)
        var h = Harness(configuration: configuration, registerToken: false)
        h.feed(makeEvent("s0", target: "other", kind: .start, timestamp: 90, alert: true, token: tokenB))  // spends the bucket
        #expect(h.feed(makeEvent("s", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.isEmpty, "held by the push-to-start budget")
        h.register(tokenA, at: 100)  // uploaded by the app after the previous owner's start
        let actions = h.feed(makeEvent("e", kind: .end, timestamp: 101))
        #expect(actions.drops.isEmpty)
        let end = try #require((actions + h.advance(2 * sec)).sends.first { $0.target == "export-42" })
        #expect(end.event.kind == .end && end.destination == .activityToken(tokenA))
    }

    /// A start whose answer was lost may be on the Lock Screen: its end is sent to the activity's own
    /// token (one registered at or after the start), not cancelled with it.
    @Test func endOfAStartSentWithoutAnswerGoesToTheActivityToken() throws {
        var h = Harness(registerToken: false)
        h.register(tokenA, at: 50)  // a previous activity's token under the same key
        let start = try #require(h.feed(makeEvent("s", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.first)
        h.feed(makeEvent("e", kind: .end, timestamp: 101))
        h.advance(sec)
        #expect(h.complete(start, .retry(reason: "timeout", status: nil, after: nil)).drops.isEmpty)
        #expect(h.advance(5 * sec).sends.isEmpty)  // the old activity's token is not this activity's
        let tokenC = pushToken(String(repeating: "c3", count: 32))
        let end = try #require(h.register(tokenC, at: 100).sends.first)
        #expect(end.event.kind == .end && end.destination == .activityToken(tokenC) && end.coveredOffsets == [0, 1])
        #expect(end.event.alert == nil)
        h.complete(end)
        #expect(h.engine.commitPoints().map(\.offset) == [2])
    }

    /// The same end, when no activity token ever arrives: dead-lettered no-token after token_wait, saying why.
    @Test func endOfARetriedStartWithoutActivityTokenIsDeadLettered() throws {
        var h = Harness(registerToken: false)
        let start = try #require(h.feed(makeEvent("s", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.first)
        h.complete(start, .retry(reason: "ServiceUnavailable", status: 503, after: nil))
        #expect(h.feed(makeEvent("e", kind: .end, timestamp: 101)).drops.isEmpty)
        h.advance(sec)  // min_interval after the start: the end starts waiting for its token
        #expect(h.advance(20 * sec).deadLetters.isEmpty && h.actions.sends.count == 1)
        let letter = try #require(h.advance(20 * sec).deadLetters.first)
        #expect(letter.reason == .noToken && letter.sources.map(\.offset) == [0, 1])
        #expect(letter.detail.contains("start may have been delivered") && letter.detail.contains("no activity token arrived"), "\(letter.detail)")
    }
}
