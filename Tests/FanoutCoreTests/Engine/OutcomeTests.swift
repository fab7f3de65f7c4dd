import APNsModel
import Testing
@testable import FanoutCore

@Suite struct OutcomeTests {
    @Test func retryBacksOffAndSendsTheNewestState() throws {
        var configuration = EngineConfiguration()
        configuration.backoffBase = 4 * sec
        var h = Harness(configuration: configuration)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.feed(makeEvent("e2", timestamp: 101, status: "b"))
        #expect(h.complete(first, .retry(reason: "TooManyRequests", status: 429, after: .seconds(10))).sends.isEmpty)
        #expect(h.advance(9 * sec).sends.isEmpty)
        let retry = try #require(h.advance(sec).sends.first)
        #expect(retry.event.id == "e2" && retry.coveredOffsets == [0, 1])
        let snapshot = try #require(h.engine.snapshot(lane: .activity, target: "export-42", now: h.now))
        #expect(snapshot.retryAttempts == 1)
        #expect(snapshot.lastOutcome == OutcomeSummary(kind: .retry, status: 429))
        #expect(snapshot.sends == 2 && snapshot.deliveries == 0 && snapshot.tokenPrefix == String(tokenA.prefix(8)) + "…")
    }

    @Test func backoffIsCappedAndJittered() throws {
        var configuration = EngineConfiguration()
        configuration.backoffBase = sec
        configuration.backoffCap = 8 * sec
        var h = Harness(configuration: configuration)
        var send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        for _ in 0..<12 {
            h.complete(send, .retry(reason: "ServiceUnavailable", status: 503, after: nil))
            let deadline = h.engine.nextDeadline()
            let delay = try #require(deadline) - h.now
            #expect(delay <= 8 * sec)
            h.advance(delay)
            send = try #require(h.actions.sends.last)
        }
        #expect(h.actions.sends.count == 13)
    }

    @Test func badPayloadIsDeadLetteredAndOffsetsCompleteAfterResolve() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let letter = try #require(h.complete(send, .badPayload(reason: "PayloadTooLarge", status: 413)).deadLetters.first)
        #expect(letter.reason == .rejectedByAPNs)
        #expect(h.engine.commitPoints().map(\.offset) == [0])
        h.engine.resolve(letter.resolution)
        #expect(h.engine.commitPoints().map(\.offset) == [1])
    }

    @Test func configErrorPausesTheAppProbesAndResumes() throws {
        var configuration = EngineConfiguration()
        configuration.configProbeInterval = 60 * sec
        var h = Harness(configuration: configuration)
        h.register(tokenB, key: "other", at: 1)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let actions = h.complete(first, .configError(reason: "BadTopic", status: 400))
        #expect(actions.contains(.pauseApp(app: "com.example.exports", reason: "APNs 400 BadTopic")))
        #expect(h.feed(makeEvent("o1", target: "other", timestamp: 100)).sends.isEmpty)
        #expect(h.engine.commitPoints().map(\.offset) == [0])
        #expect(h.advance(59 * sec).sends.isEmpty)
        let probe = try #require(h.advance(sec).sends.first)
        #expect(probe.isProbe)
        #expect(h.actions.sends.count == 2)
        h.complete(probe, .configError(reason: "BadTopic", status: 400))
        let probe2 = try #require(h.advance(60 * sec).sends.first)
        let resumed = h.complete(probe2)
        #expect(resumed.contains(.resumeApp(app: "com.example.exports")))
        #expect(resumed.sends.count == 1)
    }

    @Test func refreshAuthRetriesTheSameState() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.complete(first, .refreshAuth)
        let deadline = h.engine.nextDeadline()
        h.advance(try #require(deadline) - h.now)
        let again = try #require(h.actions.sends.last)
        #expect(again.sendID != first.sendID && again.event.id == "e1")
    }

    @Test func revokeReturnsCommitPointAndDropsTargets() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.complete(first)
        h.feed(makeEvent("e2", timestamp: 101, status: "b"))
        let points = h.engine.revoke([activityPartition])
        #expect(points == [CommitPoint(partition: activityPartition, offset: 1)])
        #expect(h.engine.targetCount == 0)
        #expect(h.engine.totalLoad == Load(incomplete: 0, inFlight: 0))
        // Re-assigned later: the replayed event is not a duplicate.
        h.register(tokenA, at: 1)
        let replay = h.engine.receive(makeEvent("e2", timestamp: 101, status: "b"),
                                      from: EventSource(partition: activityPartition, offset: 1), now: h.now)
        #expect(replay.sends.count == 1)
    }

    @Test func backpressureBounds() {
        var configuration = EngineConfiguration()
        configuration.maxIncompletePerPartition = 4
        var h = Harness(configuration: configuration, registerToken: false)
        for i in 0..<4 { h.feed(makeEvent("e\(i)", target: "k\(i)", timestamp: 100)) }
        #expect(h.engine.shouldPause(activityPartition))
        #expect(!h.engine.mayResume(activityPartition))
        #expect(h.engine.load(of: activityPartition) == Load(incomplete: 4, inFlight: 0))
    }
}
