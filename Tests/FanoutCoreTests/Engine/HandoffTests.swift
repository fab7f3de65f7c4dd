import APNsModel
import Testing
@testable import FanoutCore

/// The state changelog (docs/design.md §11): what one owner saves, the next restores.
@Suite struct HandoffTests {
    static func handingOver() -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.handoffState = true
        return configuration
    }

    /// Owner A sends a target's whole priority-10 burst; the records it saves go to owner B.
    static func ownerWithSpentBudget() throws -> (records: [TargetHandoff], a: Harness) {
        var a = Harness(configuration: handingOver())
        var records: [TargetHandoff] = []
        for step in 0..<4 {
            let send = try #require(a.feed(makeEvent("e\(step)", timestamp: 100 + Int64(step), status: "s\(step)")).sends.first)
            #expect(send.priority == 10)
            for case let .saveState(record, partition, resolution) in a.complete(send) {
                #expect(partition == activityPartition)
                records.append(record)
                a.engine.resolve(resolution)
            }
            a.advance(2 * sec)
        }
        #expect(records.count == 4, "every delivered send saves the target's state")
        return (records, a)
    }

    /// B assigned the partition with A's records as the changelog holds them (the newest per key).
    static func nextOwner(restoring records: [TargetHandoff], at now: Nanoseconds) -> Harness {
        var b = Harness(configuration: handingOver())
        b.now = now
        let assignment = b.assign(activityPartition)
        guard case let .restoreState(number, id)? = assignment.last else {
            Issue.record("an assignment with a changelog asks to restore the partition's state: \(assignment)")
            return b
        }
        var new: [EngineAction] = []
        b.engine.stateRestored(partition: number, assignment: id, records: records.suffix(1), now: b.now, into: &new)
        b.actions += new
        return b
    }

    @Test func aRecordSurvivesItsWireForm() throws {
        let (records, _) = try Self.ownerWithSpentBudget()
        let record = try #require(records.last)
        let bytes = record.encoded()
        #expect(bytes.count == TargetHandoff.fixedSize + record.app.utf8.count)
        let decoded = try TargetHandoff(key: record.key, decoding: bytes)
        #expect(decoded.encoded() == bytes, "progress values are NaN when absent, so the record is compared in its wire form")
        #expect(decoded.key == record.key && decoded.app == record.app && decoded.bucket == record.bucket)
        #expect(decoded.lastSendAt == record.lastSendAt && decoded.lastSentTimestamp == 103 && !decoded.ended)
    }

    @Test func aRecordThatCannotBeReadSaysWhy() throws {
        let (records, _) = try Self.ownerWithSpentBudget()
        let bytes = try #require(records.last).encoded()
        #expect(throws: HandoffDecodingError.unknownVersion(9)) { try TargetHandoff(key: "k", decoding: [9] + bytes.dropFirst()) }
        #expect(throws: HandoffDecodingError.truncated(40)) { try TargetHandoff(key: "k", decoding: Array(bytes.prefix(40))) }
        #expect(throws: HandoffDecodingError.self) { try TargetHandoff(key: "k", decoding: bytes + [0]) }
        #expect(throws: HandoffDecodingError.truncated(0)) { try TargetHandoff(key: "k", decoding: []) }
    }

    /// The reason the changelog exists: without it the next owner starts a full bucket.
    @Test func theNextOwnerKeepsTheSpentBudget() throws {
        let (records, a) = try Self.ownerWithSpentBudget()
        var b = Self.nextOwner(restoring: records, at: a.now + 2 * sec)
        b.feed(makeEvent("e9", timestamp: 200, status: "new"))
        let send = try #require(b.advance(sec).sends.first, "sent min_interval after the assignment")
        #expect(send.priority == 5 && send.budgetDowngraded, "the burst was spent under the previous owner")

        var fresh = Harness(configuration: EngineConfiguration())
        fresh.now = a.now + 2 * sec
        fresh.assign(activityPartition)
        fresh.feed(makeEvent("e9", timestamp: 200, status: "new"))
        #expect(try #require(fresh.advance(sec).sends.first).priority == 10, "without a changelog a handoff resets the budget")
    }

    @Test func theNextOwnerKeepsMinIntervalAndDropsWhatWasDelivered() throws {
        let (records, a) = try Self.ownerWithSpentBudget()
        let last = try #require(records.last)
        // Restored right after the last send: min_interval counts from that send, not from the assignment.
        var b = Self.nextOwner(restoring: records, at: last.lastSendAt + sec / 2)
        // The last delivered event replayed (its offset was not committed yet): already on the device.
        #expect(b.feed(makeEvent("e3", timestamp: 103, status: "s3")).drops == [.notNewer])
        #expect(b.feed(makeEvent("e10", timestamp: 300, status: "newer")).sends.isEmpty, "min_interval from the previous owner's send")
        let send = try #require(b.advance(sec).sends.first)
        #expect(send.event.timestamp == 300)
        #expect(b.now - last.lastSendAt >= sec)
        _ = a
    }

    /// Events read while the changelog is: a pending state the previous owner delivered is done
    /// without a send; a newer one is kept and sent once the partition is live.
    @Test func eventsReadDuringTheRestoreAreMergedWithIt() throws {
        let (records, a) = try Self.ownerWithSpentBudget()
        var b = Harness(configuration: Self.handingOver())
        b.now = a.now + 10 * sec
        let assignment = b.assign(activityPartition)
        guard case let .restoreState(number, id)? = assignment.last else {
            Issue.record("no restore asked: \(assignment)")
            return
        }
        #expect(b.feed(makeEvent("e3", timestamp: 103, status: "s3")).sends.isEmpty, "not live before the state is restored")
        var new: [EngineAction] = []
        b.engine.stateRestored(partition: number, assignment: id, records: records.suffix(1), now: b.now, into: &new)
        #expect(new.drops == [.notNewer] && new.sends.isEmpty)
        #expect(b.engine.totalLoad.incomplete == 0)

        b.feed(makeEvent("e11", timestamp: 400, status: "later"))
        new = []
        b.engine.stateRestored(partition: number, assignment: id, records: records.suffix(1), now: b.now, into: &new)
        #expect(new.isEmpty, "a second report of the same restore changes nothing")
    }

    @Test func anEndDeliveredBeforeTheHandoffStaysEnded() throws {
        var a = Harness(configuration: Self.handingOver())
        let start = try #require(a.feed(makeEvent("e1", timestamp: 100)).sends.first)
        a.complete(start)
        a.advance(2 * sec)
        let end = try #require(a.feed(makeEvent("x1", kind: .end, timestamp: 101)).sends.first)
        let saved = a.complete(end).compactMap { if case let .saveState(record, _, _) = $0 { record } else { nil } }
        #expect(saved.first?.ended == true)
        var b = Self.nextOwner(restoring: saved, at: a.now)
        #expect(b.feed(makeEvent("late", timestamp: 500, status: "after")).drops == [.afterEnd])
    }

    /// A delivered send's offsets complete only once its record is in the changelog.
    @Test func offsetsWaitForTheSavedState() throws {
        var a = Harness(configuration: Self.handingOver())
        let send = try #require(a.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let answered = a.complete(send)
        guard case let .saveState(_, _, resolution)? = answered.first(where: { if case .saveState = $0 { true } else { false } }) else {
            Issue.record("a delivered send saves its state: \(answered)")
            return
        }
        #expect(a.engine.load(of: activityPartition)?.incomplete == 1)
        a.engine.resolve(resolution)
        #expect(a.engine.load(of: activityPartition)?.incomplete == 0)
    }

    /// Forgetting a target that has a record deletes the record (compaction then drops the key).
    @Test func aForgottenTargetsRecordIsTombstoned() throws {
        var configuration = Self.handingOver()
        configuration.endedRetention = 60 * sec
        var a = Harness(configuration: configuration)
        a.advance(0)
        for case let .saveState(_, _, resolution) in a.complete(try #require(a.feed(makeEvent("x1", kind: .end, timestamp: 100)).sends.first)) {
            a.engine.resolve(resolution)
        }
        var tombstones: [String] = []
        for _ in 0..<10 {
            for case let .forgetState(key, partition) in a.advance(10 * sec) {
                #expect(partition == 0)
                tombstones.append(key)
            }
        }
        #expect(tombstones == ["export-42"])
    }

    // MARK: The push-to-start bucket

    static func oneStartAPushToStartToken() -> EngineConfiguration {
        var configuration = handingOver()
        configuration.pushToStartBudget = BudgetSettings(minInterval: sec, burst: 1, refillPerHour: 10)
        return configuration
    }

    /// Owner A starts `k1` through push-to-start token B (a burst of 1): its record carries the token's
    /// spent bucket.
    static func ownerThatStartedThroughPushToStart() throws -> (record: TargetHandoff, a: Harness) {
        var a = Harness(configuration: oneStartAPushToStartToken(), registerToken: false)
        let start = try #require(a.feed(makeEvent("s1", target: "k1", kind: .start, timestamp: 100, alert: true, token: tokenB)).sends.first)
        #expect(start.destination == .pushToStartToken(tokenB))
        var records: [TargetHandoff] = []
        for case let .saveState(record, _, resolution) in a.complete(start) {
            records.append(record)
            a.engine.resolve(resolution)
        }
        return (try #require(records.last), a)
    }

    /// Starts are limited per push-to-start token (docs/design.md §3): the next owner gets the token's
    /// spent bucket with the target that spent it, so a start of another activity through the same
    /// token waits for the credit to come back instead of drawing a fresh burst.
    @Test func theNextOwnerKeepsThePushToStartBucketItsPredecessorSpent() throws {
        let (record, a) = try Self.ownerThatStartedThroughPushToStart()
        let credit = try #require(record.pushToStart, "the record of a target started through push-to-start carries the bucket")
        #expect(credit.token == tokenB && credit.bucket.credits < 1)

        var b = Harness(configuration: Self.oneStartAPushToStartToken(), registerToken: false)
        b.now = a.now + 2 * sec
        guard case let .restoreState(number, id)? = b.assign(activityPartition).last else {
            Issue.record("no restore asked")
            return
        }
        var new: [EngineAction] = []
        b.engine.stateRestored(partition: number, assignment: id, records: [try TargetHandoff(key: record.key, decoding: record.encoded())],
                               now: b.now, into: &new)
        b.feed(makeEvent("s2", target: "k2", kind: .start, timestamp: 200, alert: true, token: tokenB))
        #expect(b.advance(sec).sends.isEmpty, "the token's one start was spent under the previous owner")
        let start = try #require(b.advance(359 * sec).sends.first, "sent once the bucket refilled (10 an hour)")
        #expect(start.event.id == "s2" && start.destination == .pushToStartToken(tokenB))

        var withoutChangelog = Self.oneStartAPushToStartToken()
        withoutChangelog.handoffState = false
        var fresh = Harness(configuration: withoutChangelog, registerToken: false)
        fresh.now = b.now
        fresh.assign(activityPartition)
        fresh.feed(makeEvent("s2", target: "k2", kind: .start, timestamp: 200, alert: true, token: tokenB))
        #expect(fresh.advance(sec).sends.first?.event.id == "s2",
                "without the credit a handoff gives the token a fresh burst (sent min_interval after the assignment)")
    }

    /// The target's later records carry the bucket on while it is not full; once it is, records go
    /// back to version 1 (what an earlier release reads).
    @Test func laterRecordsCarryTheBucketUntilItIsFull() throws {
        var (_, a) = try Self.ownerThatStartedThroughPushToStart()
        a.register(tokenA, key: "k1", at: 100)
        a.advance(2 * sec)
        let update = try #require(a.feed(makeEvent("u1", target: "k1", timestamp: 101, status: "b")).sends.first)
        var records: [TargetHandoff] = []
        for case let .saveState(record, _, resolution) in a.complete(update) {
            records.append(record)
            a.engine.resolve(resolution)
        }
        #expect(try #require(records.last).pushToStart?.token == tokenB)
        #expect(try #require(records.last).encoded().first == 2)

        a.advance(3600 * sec)  // full again; the sweep forgets full buckets
        a.advance(3600 * sec)
        let later = try #require(a.feed(makeEvent("u2", target: "k1", timestamp: 102, status: "c")).sends.first)
        records = []
        for case let .saveState(record, _, _) in a.complete(later) { records.append(record) }
        let last = try #require(records.last)
        #expect(last.pushToStart == nil)
        #expect(last.encoded().first == 1)
    }

    @Test func aVersion2RecordSurvivesItsWireFormAndRefusesABadToken() throws {
        let (record, _) = try Self.ownerThatStartedThroughPushToStart()
        let bytes = record.encoded()
        #expect(bytes.first == 2)
        #expect(bytes.count == TargetHandoff.fixedSize + record.app.utf8.count + 2 + tokenB.byteCount + 16)
        let decoded = try TargetHandoff(key: record.key, decoding: bytes)
        #expect(decoded.encoded() == bytes)
        #expect(decoded.pushToStart == record.pushToStart)
        #expect(throws: HandoffDecodingError.self) { try TargetHandoff(key: "k", decoding: bytes + [0]) }
        #expect(throws: HandoffDecodingError.self) { try TargetHandoff(key: "k", decoding: Array(bytes.dropLast())) }
        var noToken = Array(bytes.prefix(TargetHandoff.fixedSize + record.app.utf8.count))
        noToken[0] = 2
        noToken += [0, 0] + Array(repeating: 0, count: 16)
        #expect(throws: HandoffDecodingError.badPushToStartToken(0)) { try TargetHandoff(key: "k", decoding: noToken) }
    }

    // MARK: The attributes type's meaning profile

    /// A profile for `ExportAttributes` only: a change of `units` under 10 is minor, held for max_quiet;
    /// the app's activities get the default profile, where `units` is content like any other.
    static func exportProfile() -> EngineConfiguration {
        var configuration = oneStartAPushToStartToken()
        configuration.meaningProfiles["ExportAttributes"] = MeaningProfile(progressFields: ["units"], minProgressDelta: 10, maxQuiet: 30 * sec)
        return configuration
    }

    /// The start named `ExportAttributes`, which the app's activities do not get without one: every
    /// record of the target names it, so the next owner summarizes the next state with the same profile
    /// and holds a minor change, where a record without it would send the change as news.
    @Test func theNextOwnerSummarizesWithTheProfileTheStartNamed() throws {
        var a = Harness(configuration: Self.exportProfile(), registerToken: false)
        let start = try #require(a.feed(makeEvent("s1", target: "k1", kind: .start, timestamp: 100, fields: [("units", 0)],
                                                  alert: true, token: tokenB, attributesType: "ExportAttributes")).sends.first)
        var records: [TargetHandoff] = []
        for case let .saveState(record, _, resolution) in a.complete(start) {
            records.append(record)
            a.engine.resolve(resolution)
        }
        let record = try #require(records.last)
        #expect(record.attributesType == "ExportAttributes")
        #expect(record.encoded().first == 3)

        func nextOwner(restoring record: TargetHandoff) throws -> Harness {
            var b = Harness(configuration: Self.exportProfile(), registerToken: false)
            b.now = a.now + 2 * sec
            guard case let .restoreState(number, id)? = b.assign(activityPartition).last else {
                throw HandoffTestFailure.noRestoreAsked
            }
            var new: [EngineAction] = []
            b.engine.stateRestored(partition: number, assignment: id, records: [try TargetHandoff(key: record.key, decoding: record.encoded())],
                                   now: b.now, into: &new)
            b.register(tokenA, key: "k1", at: 100)
            b.feed(makeEvent("u1", target: "k1", timestamp: 101, fields: [("units", 2)]))
            return b
        }
        var b = try nextOwner(restoring: record)
        #expect(b.advance(20 * sec).sends.isEmpty, "a change of 2 units is minor under ExportAttributes")
        #expect(try #require(b.advance(10 * sec).sends.first).priority == 5, "held for max_quiet, then sent at priority 5")

        var withoutType = record
        withoutType.attributesType = nil
        var fresh = try nextOwner(restoring: withoutType)
        #expect(fresh.advance(sec).sends.first?.event.id == "u1", "under the app's default profile the change is news")
    }

    @Test func aVersion3RecordSurvivesItsWireFormWithAndWithoutAPushToStartCredit() throws {
        var record = try Self.ownerThatStartedThroughPushToStart().record
        record.attributesType = "ExportAttributes"
        for credit in [record.pushToStart, nil] {
            record.pushToStart = credit
            let bytes = record.encoded()
            #expect(bytes.first == 3)
            #expect(bytes.count == TargetHandoff.fixedSize + record.app.utf8.count + (credit == nil ? 2 : 2 + tokenB.byteCount + 16)
                    + 2 + "ExportAttributes".utf8.count)
            let decoded = try TargetHandoff(key: record.key, decoding: bytes)
            #expect(decoded.encoded() == bytes)
            #expect(decoded.attributesType == "ExportAttributes" && decoded.pushToStart == credit)
            #expect(throws: HandoffDecodingError.self) { try TargetHandoff(key: "k", decoding: bytes + [0]) }
            #expect(throws: HandoffDecodingError.self) { try TargetHandoff(key: "k", decoding: Array(bytes.dropLast())) }
            var noType = Array(bytes.dropLast("ExportAttributes".utf8.count + 2))
            noType += [0, 0]
            #expect(throws: HandoffDecodingError.badAttributesType(0)) { try TargetHandoff(key: "k", decoding: noType) }
        }
    }

    // MARK: Ends settled without delivery

    /// An end whose token APNs reports gone has ended the activity all the same: once its feedback record
    /// is acknowledged the target's state is saved as ended, and only that record's acknowledgement
    /// completes the end's offset, so a next owner that never reads the end again still drops what the
    /// producer sends after it.
    @Test func anEndWhoseTokenIsGoneIsSavedAsEndedBeforeItsOffsetCompletes() throws {
        var a = Harness(configuration: Self.handingOver())
        a.advance(0)
        let end = try #require(a.feed(makeEvent("x1", kind: .end, timestamp: 100)).sends.first)
        let answered = a.complete(end, .tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: nil))
        let feedback = try #require(answered.feedback.first)
        #expect(!answered.contains { if case .saveState = $0 { true } else { false } }, "saved once the feedback is acknowledged")
        a.engine.resolve(feedback.resolution)
        #expect(a.engine.load(of: activityPartition)?.incomplete == 1, "the end's offset waits for its state record")
        #expect(a.engine.nextDeadline() == .min, "the save goes out at the next tick")
        var saved: [(TargetHandoff, ResolutionID)] = []
        for case let .saveState(record, _, resolution) in a.advance(0) { saved.append((record, resolution)) }
        let (record, resolution) = try #require(saved.first)
        #expect(saved.count == 1 && record.ended && record.key == "export-42")
        a.engine.resolve(resolution)
        #expect(a.engine.load(of: activityPartition)?.incomplete == 0)

        var b = Self.nextOwner(restoring: [record], at: a.now + 2 * sec)
        #expect(b.feed(makeEvent("x2", timestamp: 200, status: "after")).drops == [.afterEnd])
    }
}

enum HandoffTestFailure: Error {
    case noRestoreAsked
}
