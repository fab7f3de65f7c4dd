import Testing
@testable import FanoutCore

/// The send lease (docs/design.md §5): a stall of the process holds writes until a consumer poll
/// that began well after it has returned; anything shorter holds nothing.
@Suite struct SendLeaseTests {
    let ms: Nanoseconds = 1_000_000

    @Test func theThresholdIsHalfTheSessionTimeoutAndAtLeastASecond() {
        #expect(SendLease(sessionTimeout: 45_000 * ms).stallThreshold == 22_500 * ms)
        #expect(SendLease(sessionTimeout: 6_000 * ms).stallThreshold == 3_000 * ms)
        #expect(SendLease(sessionTimeout: 1_000 * ms).stallThreshold == 1_000 * ms)
    }

    @Test func runningOnTimeHoldsNothing() {
        var lease = SendLease(sessionTimeout: 6_000 * ms)
        var now: Nanoseconds = 0
        for _ in 0..<100 {
            #expect(lease.ran(at: now) == .open)
            now += 2_900 * ms  // just under the threshold between reports
        }
        #expect(!lease.isHolding)
    }

    @Test func aStallHoldsUntilAPollThatBeganAfterTheSettleTimeReturns() {
        var lease = SendLease(sessionTimeout: 6_000 * ms, settle: 1_500 * ms)
        #expect(lease.ran(at: 0) == .open)
        #expect(lease.ran(at: 100 * ms) == .open)
        // Stopped for 10 s: the first thread to run again sees the gap.
        #expect(lease.ran(at: 10_100 * ms) == .stalled(10_000 * ms))
        #expect(lease.isHolding)
        #expect(lease.ran(at: 10_200 * ms) == .held)
        // A poll that was under way across the stall, and one that began too soon, release nothing.
        _ = lease.ran(at: 10_150 * ms)  // the poll thread's own report
        let released1 = lease.pollReturned(startedAt: 50 * ms)
        #expect(!released1)
        _ = lease.ran(at: 10_400 * ms)  // the poll thread's own report
        let released2 = lease.pollReturned(startedAt: 10_300 * ms)
        #expect(!released2)
        #expect(lease.ran(at: 11_000 * ms) == .held)
        _ = lease.ran(at: 11_700 * ms)  // the poll thread's own report
        let released3 = lease.pollReturned(startedAt: 11_600 * ms)
        #expect(released3)
        #expect(!lease.isHolding)
        #expect(lease.ran(at: 11_800 * ms) == .open)
    }

    @Test func aPollThatEndsAStallHoldsRatherThanReleases() {
        var lease = SendLease(sessionTimeout: 6_000 * ms, settle: 1_500 * ms)
        _ = lease.ran(at: 0)
        // Nothing else ran: the poll thread is the first to see that 8 s went by.
        _ = lease.ran(at: 8_000 * ms)  // the poll thread's own report
        let released4 = lease.pollReturned(startedAt: 0)
        #expect(!released4)
        #expect(lease.isHolding)
        #expect(lease.heldSince == 8_000 * ms)
    }

    @Test func aSecondStallWhileHeldStartsTheSettleAgain() {
        var lease = SendLease(sessionTimeout: 6_000 * ms, settle: 1_500 * ms)
        _ = lease.ran(at: 0)
        _ = lease.ran(at: 5_000 * ms)
        #expect(lease.ran(at: 9_000 * ms) == .stalled(4_000 * ms))
        #expect(lease.ran(at: 14_000 * ms) == .stalled(5_000 * ms))
        _ = lease.ran(at: 14_100 * ms)  // the poll thread's own report
        let released5 = lease.pollReturned(startedAt: 10_600 * ms)
        #expect(!released5, "began after the first stall's settle, before the second ended")
        _ = lease.ran(at: 15_700 * ms)  // the poll thread's own report
        let released6 = lease.pollReturned(startedAt: 15_600 * ms)
        #expect(released6)
    }

    /// Several threads report; a report with a clock read a moment earlier arriving later is no stall.
    @Test func reportsOutOfOrderAreNoStall() {
        var lease = SendLease(sessionTimeout: 6_000 * ms)
        _ = lease.ran(at: 1_000 * ms)
        #expect(lease.ran(at: 900 * ms) == .open)
        #expect(lease.lastRan == 1_000 * ms)
        #expect(lease.ran(at: 3_900 * ms) == .open)
    }
}
