import Testing
@testable import FanoutCLI

@Suite struct LatencyBookTests {
    @Test func aPushIsMatchedToTheEventItCarriesAndCoalescedEventsAreDropped() {
        var book = LatencyBook(targets: 2)
        book.produced(target: 0, timestamp: 100, at: 10.0)
        book.produced(target: 0, timestamp: 101, at: 10.5)
        book.produced(target: 0, timestamp: 102, at: 11.0)
        book.produced(target: 1, timestamp: 100, at: 10.0)
        // The push carries timestamp 102: 100 and 101 were coalesced into it and have no latency.
        book.delivered(target: 0, timestamp: 102, at: 11.25)
        book.delivered(target: 1, timestamp: 100, at: 12.0)
        // A push whose state the book never saw (already matched) is counted, not measured.
        book.delivered(target: 0, timestamp: 101, at: 13.0)
        #expect(book.latencies == [0.25, 2.0])
        #expect(book.unmatched == 1)
    }

    @Test func percentilesAreNearestRank() {
        var book = LatencyBook(targets: 1)
        for index in 1...100 {
            book.produced(target: 0, timestamp: Int64(index), at: 0)
            book.delivered(target: 0, timestamp: Int64(index), at: Double(index))
        }
        #expect(book.percentiles([50, 90, 99, 100]) == [50, 90, 99, 100])
        #expect(LatencyBook(targets: 1).percentiles([50]) == nil)
    }
}
