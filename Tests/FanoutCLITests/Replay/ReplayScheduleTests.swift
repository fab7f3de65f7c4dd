import FanoutKafka
import Testing
@testable import FanoutCLI

/// The pure parts of `fanout replay`: pacing with an injected clock, the merge order, the range.
@Suite struct ReplayScheduleTests {
    let base: Int64 = 1_700_000_000_000

    func record(_ partition: Int32, _ offset: Int64, at stamp: Int64?) -> KafkaMessage {
        KafkaMessage(topic: "t", partition: partition, offset: offset, key: Array("k\(partition)".utf8),
                     value: Array("v\(offset)".utf8), timestampMilliseconds: stamp)
    }

    @Test func recordedGapsAreDividedBySpeedFromTheFirstRecord() {
        var pacer = ReplayPacer(speed: 2)
        // The first record fixes the origin at the `now` it was handed over (here 10 s on the caller's clock).
        #expect(pacer.due(recordedMilliseconds: base, now: .seconds(10)) == .seconds(10))
        // Recorded 1 s and 3 s later: due 0.5 s and 1.5 s after the origin, whatever `now` is.
        #expect(pacer.due(recordedMilliseconds: base + 1000, now: .seconds(10)) == .milliseconds(10_500))
        #expect(pacer.due(recordedMilliseconds: base + 3000, now: .seconds(99)) == .milliseconds(11_500))
        // Earlier than the first, or without a timestamp: due at the origin (at once when its turn comes).
        #expect(pacer.due(recordedMilliseconds: base - 5000, now: .seconds(12)) == .seconds(10))
        #expect(pacer.due(recordedMilliseconds: nil, now: .seconds(12)) == .seconds(10))
    }

    @Test func slowerThanRecordedStretchesTheSchedule() {
        var pacer = ReplayPacer(speed: 0.5)
        #expect(pacer.due(recordedMilliseconds: base, now: .zero) == .zero)
        #expect(pacer.due(recordedMilliseconds: base + 1500, now: .zero) == .seconds(3))
    }

    @Test func speedZeroMakesEverythingDueAtOnce() {
        var pacer = ReplayPacer(speed: 0)
        #expect(pacer.due(recordedMilliseconds: base, now: .seconds(1)) == .seconds(1))
        #expect(pacer.due(recordedMilliseconds: base + 60_000, now: .seconds(2)) == .seconds(2))
        #expect(pacer.origin == nil)
    }

    @Test func partitionsAreMergedByTimestampAndKeepTheirOwnOrder() {
        var merge = ReplayMerge(ranges: [0: ReplayRange(start: 0, end: 3), 1: ReplayRange(start: 0, end: 2)], readAhead: 10)
        merge.receive(record(0, 0, at: base + 100))
        // Partition 1 has nothing yet: the merge must not hand out partition 0's record before it knows.
        #expect(merge.next() == .needRecords([1]))
        merge.receive(record(1, 0, at: base + 50))
        merge.receive(record(1, 1, at: base + 300))
        merge.receive(record(0, 1, at: base + 200))
        merge.receive(record(0, 2, at: base + 10))   // out of time order within its partition: follows offset 1
        var order: [String] = []
        while case .record(let next) = merge.next() { order.append("\(next.partition)/\(next.offset)") }
        #expect(order == ["1/0", "0/0", "0/1", "0/2", "1/1"])
        #expect(merge.next() == .finished)
    }

    @Test func offsetAndTimeBoundsEndAPartition() {
        var merge = ReplayMerge(ranges: [0: ReplayRange(start: 2, end: 100, startTime: base + 3000, endTime: base + 6000)],
                                readAhead: 100)
        for offset in Int64(2)..<10 { merge.receive(record(0, offset, at: base + 1000 * offset)) }
        var offsets: [Int64] = []
        while case .record(let next) = merge.next() { offsets.append(next.offset) }
        #expect(offsets == [3, 4, 5])
        #expect(merge.skipped == 1)
        #expect(merge.next() == .finished)
    }

    @Test func theEndOffsetIsExclusiveAndEndOfPartitionFinishes() {
        var merge = ReplayMerge(ranges: [0: ReplayRange(start: 0, end: 2), 1: ReplayRange(start: 5, end: 9)], readAhead: 100)
        for offset in Int64(0)..<4 { merge.receive(record(0, offset, at: base + 10 * offset)) }
        merge.receive(record(1, 5, at: base + 5))
        merge.reachedEnd(1)   // offsets 6...8 do not exist (compacted): the fetch hit the end
        var seen: [String] = []
        while case .record(let next) = merge.next() { seen.append("\(next.partition)/\(next.offset)") }
        #expect(seen == ["0/0", "1/5", "0/1"])
        #expect(merge.next() == .finished)
    }

    @Test func countLimitsTheWholeSchedule() {
        var merge = ReplayMerge(ranges: [0: ReplayRange(start: 0, end: 10)], readAhead: 100, count: 2)
        for offset in Int64(0)..<10 { merge.receive(record(0, offset, at: base + offset)) }
        guard case .record = merge.next(), case .record = merge.next() else { Issue.record("expected two records"); return }
        #expect(merge.next() == .finished)
    }

    @Test func readAheadPausesAFullPartitionAndResumesItHalfDrained() {
        var merge = ReplayMerge(ranges: [0: ReplayRange(start: 0, end: 100), 1: ReplayRange(start: 0, end: 0)], readAhead: 4)
        // The empty partition is finished from the start: paused at once.
        #expect(merge.flowChanges().pause == [1])
        for offset in Int64(0)..<4 { merge.receive(record(0, offset, at: base)) }
        #expect(merge.flowChanges() == ([0], []))
        merge.receive(record(0, 3, at: base))   // delivered again after the pause: not copied twice
        #expect(merge.buffered == 4)
        _ = merge.next()
        #expect(merge.flowChanges() == ([], []))
        _ = merge.next()
        #expect(merge.flowChanges() == ([], [0]))
    }
}
