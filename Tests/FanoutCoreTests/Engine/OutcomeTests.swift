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
        #expect(snapshot.sends == 2 && snapshot.deliveries == 0 && snapshot.tokenPrefix == "\(tokenA.hex.prefix(8))…(\(tokenA.hex.count))")
    }

    /// A retry-after of a century (the header is any run of digits) is honoured up to `backoff_cap`:
    /// the target retries, and its offsets can commit, within the cap.
    @Test func aHugeRetryAfterIsHonouredUpToTheBackoffCap() throws {
        var configuration = EngineConfiguration()
        configuration.backoffBase = sec
        configuration.backoffCap = 60 * sec
        var h = Harness(configuration: configuration)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.complete(first, .retry(reason: "TooManyRequests", status: 429, after: .seconds(Int64(100 * 365 * 86_400))))
        #expect(h.advance(59 * sec).sends.isEmpty, "the retry-after is a floor up to the cap")
        let retry = try #require(h.advance(sec).sends.first, "retried at the cap, not in a century")
        #expect(retry.event.id == "e1")
        h.complete(retry, .delivered)
        #expect(h.engine.commitPoints().map(\.offset) == [1], "delivered: its offset can commit")
    }

    @Test func backoffIsCappedAndJittered() throws {
        var configuration = EngineConfiguration()
        configuration.backoffBase = sec
        configuration.backoffCap = 8 * sec
        var h = Harness(configuration: configuration)
        var send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        for _ in 0..<12 {
            h.complete(send, .retry(reason: "ServiceUnavailable", status: 503, after: nil))
            let failedAt = h.now
            // The next timer may be another (the lane reported failing after 30 s): wait for the retry.
            while h.actions.sends.last?.sendID == send.sendID {
                h.advance(try #require(h.engine.nextDeadline()) - h.now)
            }
            #expect(h.now - failedAt <= 8 * sec)
            send = try #require(h.actions.sends.last)
        }
        #expect(h.actions.sends.count == 13)
        #expect(h.actions.contains { if case .laneFailing(.activity, _, _) = $0 { true } else { false } })
    }

    /// After an outage, backed-off targets must not each wait out a backoff that grew toward the cap:
    /// once APNs answers their lane, they retry within `recoveryRamp`. A 429, a retry-after and the
    /// other lane keep their own backoff.
    @Test func outageBackoffsAreReArmedWithinTheRampOnceTheLaneAnswers() throws {
        var configuration = EngineConfiguration()
        configuration.backoffBase = 300 * sec
        configuration.backoffCap = 300 * sec
        configuration.recoveryRamp = 10 * sec
        var h = Harness(configuration: configuration)
        let keys = (0..<40).map { "job-\($0)" }
        for (i, key) in keys.enumerated() {
            h.register(String(repeating: "c3", count: 31) + String(format: "%02x", i), key: key, at: 1)
        }
        var first: [String: SendRequest] = [:]
        for key in keys + ["throttled", "told-to-wait"] {
            if key.hasPrefix("job") == false {
                h.register(String(repeating: key == "throttled" ? "d4" : "e5", count: 32), key: key, at: 1)
            }
            let send = try #require(h.feed(makeEvent("\(key)-1", target: key, timestamp: 100)).sends.first)
            first[key] = send
        }
        // The broadcast lane fails too; its first failure becomes that lane's probe (retry within 10 s).
        let channels = ["Y2hhbm5lbEE=", "Y2hhbm5lbEI="]
        for (i, channel) in channels.enumerated() {
            let send = try #require(h.feed(makeEvent("b\(i)", target: channel, timestamp: 100, lane: .broadcast),
                                           partition: broadcastPartition).sends.first)
            h.complete(send, .retry(reason: "InternalServerError", status: 500, after: nil))
        }
        for key in keys { h.complete(first[key]!, .retry(reason: "connection refused", status: nil, after: nil)) }
        h.complete(first["throttled"]!, .retry(reason: "TooManyRequests", status: 429, after: nil))
        h.complete(first["told-to-wait"]!, .retry(reason: "ServiceUnavailable", status: 503, after: .seconds(120)))
        func backoff(_ key: String, lane: Lane = .activity) -> Nanoseconds? {
            h.engine.snapshot(lane: lane, target: key, now: h.now)?.backoffUntil
        }
        #expect(backoff(keys[0]) == h.now + 10 * sec, "the activity lane's first outage failure is its probe")
        #expect(backoff(channels[0], lane: .broadcast) == h.now + 10 * sec, "and the broadcast lane's")
        let throttledUntil = try #require(backoff("throttled"))
        let channelUntil = try #require(backoff(channels[1], lane: .broadcast))
        let listed = keys.filter { (backoff($0) ?? 0) > h.now + 10 * sec }
        // Still down a minute later: nothing was re-armed early (those whose backoff ended retried, still in flight).
        h.advance(60 * sec)
        #expect(h.actions.sends.count == 44 + keys.filter { !listed.contains($0) || backoff($0) == nil }.count
                + (throttledUntil <= h.now ? 1 : 0) + (channelUntil <= h.now ? 2 : 1))
        let waitingLong = keys.filter { (backoff($0) ?? 0) > h.now + 10 * sec }
        #expect(waitingLong.count > 20, "full jitter over 300 s leaves most targets waiting past the ramp")
        let start = h.actions.sends.count
        // APNs is back: a new activity's first send is delivered.
        h.register(String(repeating: "f6", count: 32), key: "new", at: 1)
        let probe = try #require(h.feed(makeEvent("new-1", target: "new", timestamp: 100)).sends.first)
        h.complete(probe)
        for key in waitingLong {
            let until = try #require(backoff(key), "\(key) re-armed")
            #expect(until <= h.now + 10 * sec)
        }
        // Spread over the ramp, second by second, not sent in one burst.
        var perSecond: [Int] = []
        for _ in 0..<10 {
            let before = h.actions.sends.count
            h.advance(sec)
            perSecond.append(h.actions.sends[before...].filter { waitingLong.contains($0.target) }.count)
        }
        let retried = h.actions.sends[start...].map(\.target)
        #expect(Set(retried).isSuperset(of: waitingLong))
        #expect(retried.filter { waitingLong.contains($0) }.count == waitingLong.count, "one retry each")
        #expect(perSecond.max()! <= waitingLong.count / 2, "\(perSecond)")
        #expect(!retried.contains("told-to-wait"), "a retry-after stays a floor")
        if throttledUntil > h.now {
            #expect(!retried.contains("throttled") && backoff("throttled") == throttledUntil, "a 429 keeps its backoff")
        }
        if channelUntil > h.now {
            #expect(!retried.contains(channels[1]) && backoff(channels[1], lane: .broadcast) == channelUntil,
                    "the broadcast lane did not answer")
        }
    }

    /// However long every backoff grew, a lane in an outage keeps one retry due per `recoveryRamp`, so
    /// the recovery is noticed within that, not after the longest backoff.
    @Test func aLaneInAnOutageKeepsProbing() throws {
        var configuration = EngineConfiguration()
        configuration.backoffBase = 300 * sec
        configuration.backoffCap = 300 * sec
        configuration.recoveryRamp = 5 * sec
        var h = Harness(configuration: configuration)
        var send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        for _ in 0..<6 {
            h.complete(send, .retry(reason: "connection reset", status: nil, after: nil))
            #expect(try #require(h.engine.nextDeadline()) - h.now <= 5 * sec)
            h.advance(5 * sec)
            send = try #require(h.actions.sends.last)
        }
        #expect(h.actions.sends.count == 7)
        // A 429 is about this token: it is not a lane probe and keeps its full backoff.
        h.complete(send, .retry(reason: "TooManyRequests", status: 429, after: nil))
        let until = h.engine.snapshot(lane: .activity, target: "export-42", now: h.now)?.backoffUntil
        #expect(until != h.now + 5 * sec, "full jitter over 300 s, not the probe's 5 s")
    }

    @Test func badPayloadIsDeadLetteredAndOffsetsCompleteAfterResolve() throws {
        var h = Harness()
        let send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let letter = try #require(h.complete(send, .badPayload(reason: "PayloadTooLarge", status: 413)).deadLetters.first)
        #expect(letter.reason == .rejectedByAPNs)
        #expect(h.engine.commitPoints().isEmpty, "0 is where the partition resumed")
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
        #expect(h.engine.commitPoints().isEmpty, "0 is where the partition resumed")
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

    /// A paused app's probe whose partition is revoked while it is in flight: its answer will never be
    /// heard, so the app must probe again with another target, not wait for that one forever.
    @Test func aProbeLostToARevokeIsReplaced() throws {
        var configuration = EngineConfiguration()
        configuration.configProbeInterval = 60 * sec
        var h = Harness(configuration: configuration)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.complete(first, .configError(reason: "InvalidProviderToken", status: 403))
        let probe = try #require(h.advance(60 * sec).sends.first)
        #expect(probe.isProbe)
        h.revoke([activityPartition])
        #expect(h.advance(h.engine.configuration.revokeDrainTimeout).drained.keys.contains(activityPartition), "drained without the probe's answer")
        h.complete(probe)  // too late: ignored
        let other = PartitionID(topic: "activity-updates", partition: 1)
        h.register(tokenB, key: "other", at: 1)
        // The probe time has come already: the next target of the app is the probe.
        let next = try #require(h.feed(makeEvent("o1", target: "other", timestamp: 100), partition: other).sends.first,
                                "the app probes again")
        #expect(next.isProbe && next.target == "other")
        let resumed = h.complete(next)
        #expect(resumed.contains(.resumeApp(app: "com.example.exports")))
        #expect(h.engine.commitPoints().contains(CommitPoint(partition: other, offset: 1)))
    }

    /// Months of rebalances must not grow the engine's partition table: revoked slots are reused, and
    /// the reused slot starts clean (no offsets, no dedupe memory of the former occupant).
    @Test func partitionSlotsAreReusedAfterRevoke() throws {
        var h = Harness()
        for round in 0..<200 {
            let partition = PartitionID(topic: "activity-updates", partition: Int32(round % 3))
            h.assign(partition)
            h.assign(broadcastPartition, lane: .broadcast)
            h.revoke([partition, broadcastPartition])
        }
        #expect(h.engine.partitions.count <= 2)
        h.feed(makeEvent("e1", timestamp: 100))
        h.feed(makeEvent("e1", timestamp: 101))  // a duplicate id: dropped, offset done
        #expect(h.actions.drops == [.duplicateID])
    }

    /// After a handoff the previous owner may have just sent to a target: the new owner's first send
    /// waits min_interval from the assignment. Targets on partitions held long before are unaffected.
    @Test func minIntervalHoldsAcrossAPartitionHandoff() throws {
        var h = Harness()
        let moved = PartitionID(topic: "activity-updates", partition: 5)
        h.assign(moved)
        #expect(h.feed(makeEvent("e1", timestamp: 100), partition: moved).sends.isEmpty)
        #expect(h.advance(sec / 2).sends.isEmpty)
        let first = try #require(h.advance(sec / 2).sends.first, "sent once min_interval has passed since the assignment")
        #expect(first.event.id == "e1")
        // A partition assigned long ago: a new target there sends at once.
        let held = PartitionID(topic: "activity-updates", partition: 6)
        h.assign(held, at: h.now - 60 * sec)
        h.register(tokenB, key: "other", at: 1)
        #expect(h.feed(makeEvent("o1", target: "other", timestamp: 100), partition: held).sends.count == 1)
    }

    /// An activity partition revoked before any event arrived on it still takes its token registrations
    /// along (the next owner restores them from activity-tokens).
    @Test func revokingAnIdleActivityPartitionForgetsItsTokens() {
        var h = Harness(registerToken: false)
        let idle = PartitionID(topic: "activity-updates", partition: 3)
        h.assign(idle)
        var actions: [EngineAction] = []
        h.engine.tokenRegistered(key: "export-7", token: tokenB, environment: nil, at: 1, partition: 3, now: h.now, into: &actions)
        #expect(h.engine.tokens.count == 1)
        h.revoke([idle])
        #expect(h.engine.tokens.count == 0)
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
        #expect(h.revoke([activityPartition]).drained == [activityPartition: CommitPoint(partition: activityPartition, offset: 1)])
        #expect(h.engine.targetCount == 0)
        #expect(h.engine.totalLoad == Load(incomplete: 0, inFlight: 0))
        // Re-assigned later: the replayed event is not a duplicate.
        h.register(tokenA, at: 1)
        let replay = h.engine.receive(makeEvent("e2", timestamp: 101, status: "b"),
                                      from: EventSource(partition: activityPartition, offset: 1), now: h.now)
        #expect(replay.sends.count == 1)
    }

    /// Backpressure is the engine's: a partition whose uncommitted window reaches its bound is paused
    /// (and its held minor updates relieved), and resumed once every measure is below the resume
    /// ratio; a pause that failed is asked for again.
    @Test func backpressurePausesAtTheBoundAndResumesBelowTheRatio() throws {
        var configuration = EngineConfiguration()
        configuration.maxIncompletePerPartition = 4
        var h = Harness(configuration: configuration, registerToken: false)
        for i in 0..<3 { h.feed(makeEvent("e\(i)", target: "k\(i)", timestamp: 100)) }
        var actions: [EngineAction] = []
        h.engine.regulate(now: h.now, into: &actions)
        #expect(actions.isEmpty, "below the bound")
        h.feed(makeEvent("e3", target: "k3", timestamp: 100))
        h.engine.regulate(now: h.now, into: &actions)
        #expect(actions == [.pauseFetching([activityPartition])])
        h.engine.fetchControlFailed([activityPartition], paused: true)
        actions = []
        h.engine.regulate(now: h.now, into: &actions)
        #expect(actions == [.pauseFetching([activityPartition])], "a failed pause is asked for again")
        #expect(h.engine.pausedPartitions == [activityPartition])
        // Tokens arrive: all four are sent and delivered, the window empties.
        for i in 0..<4 { h.register(tokenA, key: "k\(i)", at: 1) }
        for send in h.actions.sends { h.complete(send) }
        actions = []
        h.engine.regulate(now: h.now, into: &actions)
        #expect(actions == [.resumeFetching([activityPartition])])
        #expect(h.engine.pausedPartitions.isEmpty)
    }

    /// Each lane is held to its own totals: a flood of sends in flight on the broadcast lane pauses
    /// its partitions, never the activity lane's.
    @Test func aLaneAtItsInFlightBoundPausesOnlyItsOwnPartitions() throws {
        var configuration = EngineConfiguration()
        configuration.maxInFlightPerLane = 2
        var h = Harness(configuration: configuration)
        h.feed(makeEvent("b1", target: "Y2hhbm5lbA==", timestamp: 100, lane: .broadcast), partition: broadcastPartition)
        h.feed(makeEvent("b2", target: "b3RoZXI=", timestamp: 100, lane: .broadcast), partition: broadcastPartition)
        h.feed(makeEvent("e1", timestamp: 100))
        var actions: [EngineAction] = []
        h.engine.regulate(now: h.now, into: &actions)
        #expect(actions == [.pauseFetching([broadcastPartition])])
    }
}

/// When a lane counts as failing: every send failing lane-wide for `laneFailingAfter`, said once per
/// episode; a 429 or a configuration error is not a lane failure; the first HTTP answer ends it.
@Suite struct LaneHealthTests {
    private func failing(_ actions: [EngineAction]) -> [String] {
        actions.compactMap { if case let .laneFailing(lane, _, reason) = $0 { "\(lane.rawValue): \(reason)" } else { nil } }
    }

    @Test func aLaneFailingForTheConfiguredTimeIsReportedOnceAndItsRecoveryOnce() throws {
        var configuration = EngineConfiguration()
        configuration.laneFailingAfter = 10 * sec
        configuration.backoffBase = sec
        configuration.backoffCap = 2 * sec
        var h = Harness(configuration: configuration)
        var send = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        let started = h.now
        while h.now - started < 25 * sec {
            h.complete(send, .retry(reason: "connection reset", status: nil, after: nil))
            while h.actions.sends.last?.sendID == send.sendID {
                h.advance(try #require(h.engine.nextDeadline()) - h.now)
            }
            send = try #require(h.actions.sends.last)
        }
        #expect(failing(h.actions) == ["activity: connection reset"], "said once, with the last failure")
        let recovered = h.complete(send)
        #expect(recovered.contains { if case .laneRecovered(.activity, _) = $0 { true } else { false } })
        #expect(!h.complete(send).contains { if case .laneRecovered = $0 { true } else { false } }, "once")
    }

    @Test func throttlingAndShortFailuresAreNotALaneFailure() throws {
        var configuration = EngineConfiguration()
        configuration.laneFailingAfter = 10 * sec
        var h = Harness(configuration: configuration)
        let first = try #require(h.feed(makeEvent("e1", timestamp: 100)).sends.first)
        h.complete(first, .retry(reason: "TooManyRequests", status: 429, after: nil))
        h.advance(60 * sec)
        #expect(failing(h.actions).isEmpty, "a 429 is about one token")
        let second = try #require(h.actions.sends.last)
        h.complete(second, .retry(reason: "ServiceUnavailable", status: 503, after: nil))
        let third = try #require(h.advance(h.engine.nextDeadline()! - h.now).sends.last)
        h.complete(third)
        h.advance(60 * sec)
        #expect(failing(h.actions).isEmpty, "answered over HTTP before the time passed")
    }
}
