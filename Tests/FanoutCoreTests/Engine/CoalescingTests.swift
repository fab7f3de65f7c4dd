import APNsModel
import Testing
@testable import FanoutCore

@Suite struct CoalescingTests {
    @Test func firstUpdateIsSentAtOnceAtPriority10WithDefaultStaleDate() throws {
        var h = Harness()
        let sends = h.feed(makeEvent("e1", timestamp: 100)).sends
        let send = try #require(sends.first)
        #expect(sends.count == 1)
        #expect(send.priority == 10)
        #expect(send.destination == .activityToken(tokenA))
        #expect(send.environment == .sandbox)
        #expect(send.staleDate == 100 + 15 * 60)
        #expect(send.dismissalDate == nil)
        #expect(send.coveredOffsets == [0])
    }

    @Test func producerStaleDateWins() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100, staleDate: 777)).sends.first)
        #expect(send.staleDate == 777)
        #expect(send.expiration == 777)
    }

    @Test func latestStateWinsWhileInFlightAndCarriesOffsets() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100, status: "a")).sends.first)
        #expect(h.feed(makeEvent("e2", timestamp: 101, status: "b")).sends.isEmpty)
        #expect(h.feed(makeEvent("e3", timestamp: 102, status: "c")).sends.isEmpty)
        h.advance(2 * sec)
        let next = try #require(h.complete(first).sends.first)
        #expect(next.event.id == "e3")
        #expect(next.coveredOffsets == [1, 2])
        #expect(h.engine.commitPoints().map(\.offset) == [1])
        h.complete(next)
        #expect(h.engine.commitPoints().map(\.offset) == [3])
    }

    @Test func alertOfReplacedEventIsKept() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.feed(makeEvent("e2", timestamp: 101, status: "b", alert: true))
        h.feed(makeEvent("e3", timestamp: 102, status: "c"))
        h.advance(2 * sec)
        let next = try #require(h.complete(first).sends.first)
        #expect(next.event.id == "e3")
        #expect(next.event.alert != nil)
    }

    @Test func duplicateIDIsResolvedAtOnce() {
        var h = Harness()
        h.feed(makeEvent("e1", timestamp: 100))
        let again = h.feed(makeEvent("e1", timestamp: 100))
        #expect(again.drops == [.duplicateID])
        #expect(again.sends.isEmpty)
    }

    @Test func timestampNotNewerThanPendingOrSentIsResolved() {
        var h = Harness()
        h.feed(makeEvent("e1", timestamp: 100))
        #expect(h.feed(makeEvent("e2", timestamp: 100, status: "x")).drops == [.notNewer])
        #expect(h.feed(makeEvent("e3", timestamp: 99, status: "y")).drops == [.notNewer])
        #expect(h.feed(makeEvent("e4", timestamp: 101, status: "z")).drops.isEmpty)
    }

    @Test func eventsAfterEndAreResolvedAndNothingIsSentAfterEnd() throws {
        var h = Harness()
        let end = try #require(h.feed(makeEvent("e1", kind: .end, timestamp: 100, dismissalDate: 200)).sends.first)
        #expect(end.event.kind == .end)
        #expect(end.dismissalDate == 200)
        #expect(h.feed(makeEvent("e2", timestamp: 101, status: "later")).drops == [.afterEnd])
        h.advance(5 * sec)
        h.complete(end)
        h.advance(60 * sec)
        #expect(h.actions.sends.count == 1)
        #expect(h.engine.commitPoints().map(\.offset) == [2])
    }

    @Test func endReplacesPendingUpdateAndCarriesItsOffsets() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.feed(makeEvent("e2", timestamp: 101, status: "b"))
        h.feed(makeEvent("e3", kind: .end, timestamp: 102, status: "done"))
        h.advance(sec)
        let end = try #require(h.complete(first).sends.first)
        #expect(end.event.kind == .end && end.coveredOffsets == [1, 2])
    }

    @Test func oneSendInFlightPerTarget() {
        var h = Harness()
        h.feed(makeEvent("e1", timestamp: 100))
        h.advance(5 * sec)
        h.feed(makeEvent("e2", timestamp: 101, status: "b"))
        h.advance(5 * sec)
        #expect(h.actions.sends.count == 1)
    }

    @Test func inlineTokenIsHonoured() throws {
        var h = Harness(registerToken: false)
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100, token: tokenB)).sends.first)
        #expect(send.destination == .activityToken(tokenB))
    }
}
