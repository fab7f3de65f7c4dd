import APNsModel
import Testing
@testable import FanoutCore

@Suite struct MeaningAndBudgetTests {
    static func progressConfiguration() -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.meaningProfiles["ExportAttributes"] = MeaningProfile(progressFields: ["done"], minProgressDelta: 10, maxQuiet: 30 * sec)
        configuration.attributesTypeByApp["com.example.exports"] = "ExportAttributes"
        return configuration
    }

    @Test func minorProgressIsHeldUntilMaxQuiet() throws {
        var h = Harness(configuration: Self.progressConfiguration())
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100, fields: [("done", 10)])).sends.first)
        h.complete(first)
        h.advance(2 * sec)
        #expect(h.feed(makeEvent("e2", timestamp: 102, fields: [("done", 12)])).sends.isEmpty)
        #expect(h.advance(20 * sec).sends.isEmpty)
        let held = try #require(h.advance(8 * sec).sends.first)
        #expect(held.event.id == "e2")
        #expect(held.priority == 5)
    }

    /// A partition paused by backpressure must not stay paused for max_quiet while its targets hold
    /// minor updates (and the offsets they carry): relief sends them as soon as min_interval allows.
    @Test func reliefSendsHeldMinorUpdatesOfThatPartitionOnly() throws {
        var h = Harness(configuration: Self.progressConfiguration())
        let other = PartitionID(topic: "activity-updates", partition: 1)
        h.register(tokenB, key: "elsewhere", at: 1)
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100, fields: [("done", 10)])).sends.first))
        h.complete(try #require(h.feed(makeEvent("x1", target: "elsewhere", timestamp: 100, fields: [("done", 10)]), partition: other).sends.first))
        h.advance(2 * sec)
        #expect(h.feed(makeEvent("e2", timestamp: 102, fields: [("done", 12)])).sends.isEmpty)
        #expect(h.feed(makeEvent("x2", target: "elsewhere", timestamp: 102, fields: [("done", 12)]), partition: other).sends.isEmpty)
        #expect(h.engine.commitPoints().contains(CommitPoint(partition: activityPartition, offset: 1)))
        var actions: [EngineAction] = []
        h.engine.relieve(activityPartition, now: h.now, into: &actions)
        let relieved = try #require(actions.sends.first)
        #expect(actions.sends.count == 1 && relieved.event.id == "e2" && relieved.priority == 5)
        h.complete(relieved)
        #expect(h.engine.commitPoints().contains(CommitPoint(partition: activityPartition, offset: 2)), "the held offset is done")
        // The other partition's minor update still waits for max_quiet; the relieved target is normal again.
        #expect(h.advance(20 * sec).sends.isEmpty)
        h.feed(makeEvent("e3", timestamp: 130, fields: [("done", 13)]))
        #expect(h.actions.sends.filter { $0.event.id == "e3" }.isEmpty, "after its send a target holds minor updates again")
        let later = try #require(h.advance(8 * sec).sends.first)
        #expect(later.event.id == "x2")
    }

    /// A channel's first send waits for its storage policy (apns-expiration depends on it); the send
    /// is decided when the answer comes, so min_interval counts from when it actually left.
    @Test func aChannelsFirstSendWaitsForItsStoragePolicy() throws {
        var configuration = EngineConfiguration()
        configuration.broadcastExpirationImmediate = false
        var h = Harness(configuration: configuration)
        let channel = "Y2hhbm5lbA=="
        let asked = h.feed(makeEvent("b1", target: channel, timestamp: 100, lane: .broadcast, staleDate: 1_772_789_100),
                           partition: broadcastPartition)
        #expect(asked == [.lookUpChannelPolicy(app: "com.example.exports", channel: channel)])
        h.advance(sec * 8 / 10)
        var actions: [EngineAction] = []
        h.engine.channelPolicyKnown(app: "com.example.exports", channel: channel, policy: .mostRecent, now: h.now, into: &actions)
        let first = try #require(actions.sends.first)
        #expect(first.expiration == 1_772_789_100, "a most-recent channel stores it until the stale date")
        h.complete(first)
        h.feed(makeEvent("b2", target: channel, timestamp: 101, status: "2-0", lane: .broadcast), partition: broadcastPartition)
        #expect(h.advance(sec * 9 / 10).sends.isEmpty, "min_interval counts from when b1 left")
        #expect(h.advance(sec / 10).sends.map(\.event.id) == ["b2"], "the policy is known: no second lookup")
        // A no-storage answer sends expiration 0.
        let other = "b3RoZXI="
        h.feed(makeEvent("c1", target: other, timestamp: 100, lane: .broadcast), partition: broadcastPartition)
        actions = []
        h.engine.channelPolicyKnown(app: "com.example.exports", channel: other, policy: .noStorage, now: h.now, into: &actions)
        #expect(actions.sends.map(\.expiration) == [0])
    }

    @Test func progressPastDeltaIsSentAtPriority5() throws {
        var h = Harness(configuration: Self.progressConfiguration())
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100, fields: [("done", 10)])).sends.first))
        h.advance(2 * sec)
        let send = try #require(h.feed(makeEvent("e2", timestamp: 102, fields: [("done", 20)])).sends.first)
        #expect(send.priority == 5)
    }

    @Test func nonProgressChangeIsMajor() throws {
        var h = Harness(configuration: Self.progressConfiguration())
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100, fields: [("done", 10)])).sends.first))
        h.advance(2 * sec)
        let send = try #require(h.feed(makeEvent("e2", timestamp: 102, fields: [("done", 11)], status: "uploading")).sends.first)
        #expect(send.priority == 10)
    }

    @Test func explicitMajorIsMajorAndExplicitMinorIsHeld() throws {
        var h = Harness(configuration: Self.progressConfiguration())
        h.complete(try #require(h.feed(makeEvent("e1", timestamp: 100, fields: [("done", 10)])).sends.first))
        h.advance(2 * sec)
        let major = try #require(h.feed(makeEvent("e2", timestamp: 102, fields: [("done", 11)], importance: .major)).sends.first)
        #expect(major.priority == 10)
        h.complete(major)
        h.advance(2 * sec)
        #expect(h.feed(makeEvent("e3", timestamp: 104, fields: [("done", 11)], status: "new", importance: .minor)).sends.isEmpty)
    }

    @Test func minIntervalSeparatesSends() throws {
        var h = Harness()
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.advance(sec / 10)
        h.complete(first)
        #expect(h.feed(makeEvent("e2", timestamp: 101, status: "b")).sends.isEmpty)
        let deadline = h.engine.nextDeadline()
        #expect(deadline == h.now - sec / 10 + sec)
        #expect(h.advance(sec / 2).sends.isEmpty)
        #expect(h.advance(sec / 2).sends.count == 1)
    }

    @Test func bucketExhaustionDowngradesToPriority5ThenRefills() throws {
        var h = Harness()
        var priorities: [Int] = []
        for i in 0..<6 {
            let send = try #require(h.feed(makeEvent("e\(i)", timestamp: 100 + Int64(i), status: "s\(i)")).sends.first)
            priorities.append(send.priority)
            h.complete(send)
            h.advance(2 * sec)
        }
        #expect(priorities == [10, 10, 10, 10, 5, 5])
        h.advance(300 * sec)  // 12/hour: one credit per 5 minutes
        let send = try #require(h.feed(makeEvent("e9", timestamp: 200, status: "s9")).sends.first)
        #expect(send.priority == 10)
    }

    @Test func frequentUpdatesProfileHasBiggerBurst() throws {
        var configuration = EngineConfiguration()
        configuration.frequentUpdatesApps = ["com.example.exports"]
        var h = Harness(configuration: configuration)
        var tens = 0
        for i in 0..<8 {
            let send = try #require(h.feed(makeEvent("e\(i)", timestamp: 100 + Int64(i), status: "s\(i)")).sends.first)
            if send.priority == 10 { tens += 1 }
            h.complete(send)
            h.advance(2 * sec)
        }
        #expect(tens == 8)
    }

    @Test func broadcastLaneUsesChannelAndImmediateExpiration() throws {
        var h = Harness(registerToken: false)
        let send = try #require(h.feed(makeEvent("b1", target: "Y2hhbm5lbA==", timestamp: 100, lane: .broadcast),
                                       partition: broadcastPartition).sends.first)
        #expect(send.destination == .channel("Y2hhbm5lbA=="))
        #expect(send.expiration == 0)
        #expect(send.lane == .broadcast)
    }

    @Test func startOnBroadcastIsDeadLettered() {
        var h = Harness(registerToken: false)
        let actions = h.feed(makeEvent("b1", target: "Y2g=", kind: .start, timestamp: 100, token: tokenA, lane: .broadcast),
                             partition: broadcastPartition)
        #expect(actions.deadLetters.map(\.reason) == [.startOnBroadcast])
    }
}

@Suite struct EngineConfigurationTests {
    @Test func defaultsAreValid() throws {
        try EngineConfiguration().validate()
    }

    @Test func unknownAttributesTypeIsNamed() {
        var configuration = EngineConfiguration()
        configuration.attributesTypeByApp["com.example.exports"] = "ExportAtributes"
        #expect(throws: EngineConfigurationError.self) { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect(error.setting == "attributes_type_by_app" && error.description.contains("ExportAtributes"))
        }
    }

    @Test func backoffCapBelowBaseIsRejected() {
        var configuration = EngineConfiguration()
        configuration.backoffCap = configuration.backoffBase - 1
        #expect(throws: EngineConfigurationError.self) { try configuration.validate() }
    }
}
