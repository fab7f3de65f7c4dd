import FanoutCore
import Testing
@testable import FanoutCLI

/// The generator: exact totals, per-key order, determinism, and every record is what it claims to be
/// for Fanout's own decoder (story events valid, malformed ones rejected with their reason).
@Suite struct LoadMixTests {
    static let channels = ["Y2hhbm5lbC0x", "Y2hhbm5lbC0y", "Y2hhbm5lbC0z"]

    static func records(events: Int = 3000, activities: Int = 40, seed: UInt64 = 7) throws -> (LoadMix, [LoadMix.Record]) {
        var options = LoadTestOptions()
        options.events = events
        options.activities = activities
        options.channels = channels.count
        options.malformedShare = 0.02
        options.duplicateShare = 0.03
        var mix = LoadMix(plan: try LoadPlan(options: options), activities: activities, channelIDs: channels, seed: seed)
        var records: [LoadMix.Record] = []
        var now: Int64 = 1_772_788_200
        while let record = try mix.next(now: now) {
            records.append(record)
            if records.count % 100 == 0 { now += 1 }
        }
        return (mix, records)
    }

    @Test func theMixHasExactlyTheRequestedCountsAndEveryStoryEnds() throws {
        let (mix, records) = try Self.records()
        #expect(records.count == 3000)
        #expect(records.filter { if case .malformed = $0.kind { true } else { false } }.count == 60)
        #expect(records.filter { $0.kind == .duplicate }.count == 90)
        let finals = records.filter { if case .story(_, _, true) = $0.kind { true } else { false } }
        #expect(finals.count == 40 + 3)
        #expect(mix.finals.allSatisfy { $0 != nil })
        #expect(mix.isFinished)
        let channelStories = records.filter { record in
            if case .story = record.kind { record.topic == .broadcastUpdates } else { false }
        }
        #expect(channelStories.count == Int((Double(3000 - 60 - 90) * 0.2).rounded()))
    }

    @Test func perKeyTimestampsStrictlyIncreaseAndNothingFollowsAnEnd() throws {
        let (_, records) = try Self.records()
        var last: [Int: Int64] = [:]
        var ended: Set<Int> = []
        for record in records {
            guard case let .story(target, timestamp, final) = record.kind else { continue }
            #expect(!ended.contains(target))
            #expect(timestamp > last[target, default: 0])
            last[target] = timestamp
            if final { ended.insert(target) }
        }
    }

    @Test func theSameSeedPublishesTheSameEventsAndAnotherSeedDoesNot() throws {
        let first = try Self.records(seed: 3).1.map(\.value)
        let again = try Self.records(seed: 3).1.map(\.value)
        let other = try Self.records(seed: 4).1.map(\.value)
        #expect(first == again)
        #expect(first != other)
    }

    @Test func storyEventsDecodeAndMalformedOnesAreRejectedWithTheirReason() throws {
        let (_, records) = try Self.records()
        let decoder = EventDecoder(policy: EventPolicy(apps: [LoadMix.exportsApp, LoadMix.ridesApp, LoadMix.sportsApp]))
        var lastStory: LoadMix.Record?
        for record in records {
            let lane: Lane = record.topic == .broadcastUpdates ? .broadcast : .activity
            let result = decoder.decode(record.value, key: record.key, lane: lane, now: 1_772_788_300)
            switch record.kind {
            case .story, .duplicate:
                if case let .failure(rejection) = result { Issue.record("\(rejection): \(String(decoding: record.value, as: UTF8.self))") }
            case .malformed(let reason):
                guard case let .failure(rejection) = result else {
                    Issue.record("accepted a malformed event: \(String(decoding: record.value, as: UTF8.self))")
                    continue
                }
                #expect(rejection.reason == reason)
            }
            // A duplicate repeats the last story event (a producer retry), whatever came in between.
            if record.kind == .duplicate { #expect(record.value == lastStory?.value && record.key == lastStory?.key) }
            if case .story = record.kind { lastStory = record }
        }
    }

    @Test func timestampsRunningTooFarAheadOfTheClockAreAnError() throws {
        var options = LoadTestOptions()
        options.events = Int(LoadMix.maxAheadSeconds) + 10
        options.activities = 1
        options.channels = 0
        options.malformedShare = 0
        options.duplicateShare = 0
        var mix = LoadMix(plan: try LoadPlan(options: options), activities: 1, channelIDs: [], seed: 1)
        // The clock stands still while the one activity publishes: its timestamps run ahead one second an event.
        var published = 0
        var failure: LoadMix.Failure?
        do {
            while try mix.next(now: 1_000) != nil { published += 1 }
        } catch let error as LoadMix.Failure {
            failure = error
        }
        #expect(failure != nil)
        #expect(published == Int(LoadMix.maxAheadSeconds) + 1)
        #expect(failure?.description.contains("job-0") == true)
    }

    @Test func tokensAreHexAndDifferPerActivity() {
        let tokens = (0..<100).map { LoadMix.token(seed: 1, index: $0) }
        #expect(Set(tokens).count == 100)
        #expect(tokens.allSatisfy { $0.count == 64 && $0.allSatisfy(\.isHexDigit) })
    }

    @Test func weightedDrawsLandInTheirRanges() {
        var weights = RemainingWeights([3, 0, 2, 5])
        #expect(weights.total == 10)
        #expect((0..<10).map { weights.index(containing: $0) } == [0, 0, 0, 2, 2, 3, 3, 3, 3, 3])
        weights.add(0, -3)
        weights.add(1, 1)
        #expect((0..<8).map { weights.index(containing: $0) } == [1, 2, 2, 3, 3, 3, 3, 3])
    }
}
