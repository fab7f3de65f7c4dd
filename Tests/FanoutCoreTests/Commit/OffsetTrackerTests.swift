import APNsModel
import Testing
@testable import FanoutCore

@Suite struct OffsetTrackerTests {
    @Test func commitPointIsLowestIncomplete() {
        var tracker = OffsetTracker()
        #expect(tracker.commitPoint == nil)
        for offset in [10, 11, 12, 15] as [Int64] { tracker.receive(offset) }
        #expect(tracker.commitPoint == 10)
        tracker.complete(12)
        tracker.complete(11)
        #expect(tracker.commitPoint == 10)
        tracker.complete(10)
        #expect(tracker.commitPoint == 15)
        tracker.complete(15)
        #expect(tracker.commitPoint == 16)
        #expect(tracker.incompleteCount == 0)
    }

    @Test func redeliveryAndDoubleCompletionAreRejected() {
        var tracker = OffsetTracker()
        let results = [tracker.receive(5), tracker.receive(5), tracker.receive(3),
                       tracker.complete(5), tracker.complete(5), tracker.complete(99)]
        #expect(results == [true, false, false, true, false, false])
    }

    @Test func memoryStaysProportionalToIncompleteOffsets() {
        var tracker = OffsetTracker()
        for offset in 0..<200_000 as Range<Int64> { tracker.receive(offset * 3) }  // gaps
        for offset in 1..<200_000 as Range<Int64> { tracker.complete(offset * 3) }
        #expect(tracker.incompleteCount == 1)
        #expect(tracker.storedEntries < 100)
        #expect(tracker.commitPoint == 0)
        tracker.complete(0)
        let expected: Int64 = 199_999 * 3 + 1
        let point = tracker.commitPoint
        #expect(point == expected)
        #expect(tracker.storedEntries == 0)
    }

    @Test func randomCompletionOrderMatchesModel() {
        var random = SeededRandom(seed: 7)
        var tracker = OffsetTracker()
        var done = Set<Int64>()
        var received: [Int64] = []
        var next: Int64 = 0
        for _ in 0..<5000 {
            if random.next() % 3 != 0 {
                next += Int64(random.next() % 3) + 1
                tracker.receive(next)
                received.append(next)
            } else if let pick = received.filter({ !done.contains($0) }).randomElement(using: &random) {
                tracker.complete(pick)
                done.insert(pick)
            }
            let expected = received.first { !done.contains($0) } ?? (received.last.map { $0 + 1 })
            #expect(tracker.commitPoint == expected)
        }
    }

    /// `complete` finds offsets by their distance from the newest or oldest entry before searching:
    /// dense runs, gaps, compacted done entries, repeats and offsets never received must all answer
    /// exactly as a set would.
    @Test func completionLookupMatchesModelAcrossDenseRunsAndGaps() {
        var random = SeededRandom(seed: 11)
        var tracker = OffsetTracker()
        var incomplete = Set<Int64>()
        var received: [Int64] = []
        var next: Int64 = 0
        for step in 0..<40_000 {
            if random.next() % 2 == 0 {
                // Mostly consecutive offsets, now and then a gap (compaction, transaction markers).
                next += random.next() % 10 == 0 ? Int64(random.next() % 50) + 2 : 1
                let fresh = tracker.receive(next)
                #expect(fresh)
                received.append(next)
                incomplete.insert(next)
            } else if !received.isEmpty {
                // Recent offsets most of the time (as deliveries are), any received or unseen one otherwise.
                let back = random.next() % 4 == 0 ? Int(random.next() % UInt64(received.count)) : Int(random.next() % UInt64(min(64, received.count)))
                let pick = random.next() % 8 == 0 ? received[received.count - 1 - back] + 1 : received[received.count - 1 - back]
                let expected = incomplete.remove(pick) != nil
                let completed = tracker.complete(pick)
                #expect(completed == expected, "step \(step): complete(\(pick))")
            }
            if step % 97 == 0, let probe = received.randomElement(using: &random) {
                #expect(tracker.isIncomplete(probe) == incomplete.contains(probe))
            }
        }
        #expect(tracker.incompleteCount == incomplete.count)
        #expect(tracker.commitPoint == (incomplete.min() ?? next + 1))
    }
}

@Suite struct DedupeWindowTests {
    @Test func forgetsTheOldestAtCapacity() {
        var window = DedupeWindow(capacity: 3)
        let results = [window.insert(1), window.insert(2), window.insert(3), window.insert(2), window.insert(4),
                       window.insert(1)]  // 1 was evicted by 4
        #expect(results == [true, true, true, false, true, true])
        #expect(window.count == 3)
    }
}

extension DedupeWindowTests {
    @Test func matchesASetWithFIFOEvictionOverRandomTraffic() {
        var random = SeededRandom(seed: 11)
        for capacity in [1, 3, 16, 100] {
            var window = DedupeWindow(capacity: capacity)
            var model: [UInt64] = []
            for _ in 0..<20_000 {
                // Small value range so duplicates, evictions and probe-run collisions are frequent;
                // 0 is included to exercise the empty-slot remapping.
                let digest = random.next() % UInt64(capacity * 3 + 2)
                let stored = digest == 0 ? 1 : digest
                let expected = !model.contains(stored)
                #expect(window.contains(digest) == !expected)
                #expect(window.insert(digest) == expected)
                if expected {
                    model.append(stored)
                    if model.count > capacity { model.removeFirst() }
                }
                #expect(window.count == model.count)
            }
        }
    }

    /// Mostly distinct digests: expired entries pile up and are purged many times (every `capacity`
    /// inserts or so); the window must still forget exactly the oldest.
    @Test func purgingExpiredEntriesKeepsTheExactWindow() {
        var random = SeededRandom(seed: 12)
        let capacity = 500
        var window = DedupeWindow(capacity: capacity)
        var model: [UInt64] = []
        var modelSet = Set<UInt64>()
        var duplicates = 0
        for _ in 0..<40_000 {
            let digest = random.next() % UInt64(capacity * 20) + 1
            let expected = !modelSet.contains(digest)
            #expect(window.insert(digest) == expected)
            if expected {
                model.append(digest)
                modelSet.insert(digest)
                if model.count > capacity { modelSet.remove(model.removeFirst()) }
            } else {
                duplicates += 1
            }
        }
        #expect(window.count == capacity)
        #expect(duplicates > 100)  // the window did catch repeats, not only fresh ids
    }
}

@Suite struct TokenBucketTests {
    @Test func burstThenRefill() {
        let settings = BudgetSettings(minInterval: 0, burst: 2, refillPerHour: 3600)
        var bucket = TokenBucket(capacity: 2, now: 0)
        let first = [bucket.take(at: 0, settings: settings), bucket.take(at: 0, settings: settings), bucket.take(at: 0, settings: settings)]
        #expect(first == [true, true, false])
        #expect(bucket.nextCredit(after: 0, settings: settings) == 1_000_000_000)
        let later = bucket.take(at: 1_000_000_000, settings: settings)
        #expect(later)
    }
}
