import FanoutCore
import Testing
@testable import FanoutWorker

/// `/livez`'s judgement: a stuck worker is named stuck after the window, a busy, idle or waiting one
/// never is.
@Suite struct ProgressWatchTests {
    static let window = Nanoseconds.seconds(600)

    static func facts(polledAt: Nanoseconds?, uncommitted: Int64 = 0, advances: UInt64 = 0, assignments: UInt64 = 1,
                      excuses: [String] = [], failure: String? = nil, stopping: Bool = false) -> ProgressFacts {
        ProgressFacts(pollReturnedAt: polledAt, uncommitted: uncommitted, commitAdvances: advances,
                      assignmentChanges: assignments, excuses: excuses, failure: failure, stopping: stopping)
    }

    @Test func recordsWaitingWithNoCommitMovingAreStuckOnlyAfterTheWindow() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        #expect(watch.judge(Self.facts(polledAt: 1, uncommitted: 0), now: .seconds(1)).isAlive)
        // Work arrives at 10 s and the commits never move again; the poll loop keeps returning.
        for second in stride(from: Int64(10), through: 600, by: 10) {
            let answer = watch.judge(Self.facts(polledAt: .seconds(second), uncommitted: 40), now: .seconds(second))
            #expect(answer.isAlive, "at \(second) s: \(answer)")
        }
        // Measured from the last probe that saw nothing waiting (1 s).
        let stuck = watch.judge(Self.facts(polledAt: .seconds(602), uncommitted: 40), now: .seconds(602))
        #expect(stuck == .stuck("40 record(s) uncommitted and no committed offset advanced for 601 s, with no APNs, app or output problem to explain it"))
    }

    @Test func aCommitMovingForwardIsProgressHoweverMuchWaits() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        var advances: UInt64 = 0
        for second in stride(from: Int64(0), through: 3600, by: 300) {
            advances += 1
            let answer = watch.judge(Self.facts(polledAt: .seconds(second), uncommitted: 100_000, advances: advances), now: .seconds(second))
            #expect(answer == .alive("committing: 100000 record(s) uncommitted"), "at \(second) s")
        }
        // The same count twice, 601 s apart: no commit moved in between.
        #expect(!watch.judge(Self.facts(polledAt: .seconds(4201), uncommitted: 100_000, advances: advances), now: .seconds(4201)).isAlive)
    }

    @Test func aReasonARestartWouldNotCureKeepsItAliveAndRestartsTheClock() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        _ = watch.judge(Self.facts(polledAt: 0, uncommitted: 5), now: 0)
        let outage = ["every APNs send on the activity lane has failed for 900 s (last: 503)"]
        let waiting = watch.judge(Self.facts(polledAt: .seconds(900), uncommitted: 5, excuses: outage), now: .seconds(900))
        #expect(waiting == .alive("5 record(s) wait on: " + outage[0]))
        // APNs is back; the window counts from the last excused probe, not from the start.
        #expect(watch.judge(Self.facts(polledAt: .seconds(1400), uncommitted: 5), now: .seconds(1400)).isAlive)
        #expect(!watch.judge(Self.facts(polledAt: .seconds(1501), uncommitted: 5), now: .seconds(1501)).isAlive)
    }

    @Test func nothingToCommitIsAliveForever() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        for hour in Int64(1)...48 {
            #expect(watch.judge(Self.facts(polledAt: .hours(hour), uncommitted: 0), now: .hours(hour)) == .alive("nothing waits to be committed"))
        }
    }

    @Test func anAssignmentChangeIsProgress() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        _ = watch.judge(Self.facts(polledAt: 0, uncommitted: 7, assignments: 1), now: 0)
        #expect(watch.judge(Self.facts(polledAt: .seconds(601), uncommitted: 7, assignments: 2), now: .seconds(601)).isAlive)
        #expect(watch.judge(Self.facts(polledAt: .seconds(1200), uncommitted: 7, assignments: 2), now: .seconds(1200)).isAlive)
        #expect(!watch.judge(Self.facts(polledAt: .seconds(1202), uncommitted: 7, assignments: 2), now: .seconds(1202)).isAlive)
    }

    @Test func aPollLoopThatStopsReturningIsStuckEvenWithNothingToCommit() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        #expect(watch.judge(Self.facts(polledAt: .seconds(5)), now: .seconds(605)).isAlive)
        #expect(watch.judge(Self.facts(polledAt: .seconds(5)), now: .seconds(606)) == .stuck("the Kafka poll loop has not returned for 601 s"))
        // Never returned at all: counted from the start.
        var fresh = ProgressWatch(window: Self.window, startedAt: .seconds(100))
        #expect(fresh.judge(Self.facts(polledAt: nil), now: .seconds(700)).isAlive)
        #expect(!fresh.judge(Self.facts(polledAt: nil), now: .seconds(701)).isAlive)
    }

    @Test func aFailedWorkerIsStuckAndAStoppingOneAlive() {
        var watch = ProgressWatch(window: Self.window, startedAt: 0)
        #expect(watch.judge(Self.facts(polledAt: 0, failure: "the Kafka consumer failed"), now: .seconds(1)) == .stuck("worker failed: the Kafka consumer failed"))
        #expect(watch.judge(Self.facts(polledAt: 0, uncommitted: 9, stopping: true), now: .seconds(5000)) == .alive("shutting down"))
    }
}
