import APNsModel
import Testing
@testable import FanoutCore

/// What one engine holds and sends when producers misbehave at volume (README, "Hostile inputs
/// tried"). These drive the engine directly, keeping only the actions they look at, so a million
/// events cost the test no more memory than the engine itself.
@Suite struct BoundsUnderAttackTests {
    /// One million distinct keys, each with a token and one delivered update, against a bound of
    /// 20,000 tracked targets: the oldest idle targets make room (counted as evicted, the figure behind
    /// `fanout_targets_forgotten_total{reason="evicted"}`), the table stays at the bound, and the ten
    /// targets that hold work (no token yet: pending for an hour) are never touched.
    @Test func aMillionDistinctKeysStayWithinTheTrackingBound() throws {
        var configuration = EngineConfiguration()
        configuration.maxTrackedTargets = 20_000
        configuration.tokenWait = 3600 * sec
        var engine = FanoutEngine(configuration: configuration)
        var now: Nanoseconds = 1_772_788_200 * sec
        var actions: [EngineAction] = []
        let keys = 1_000_000
        var holders: [String] = []
        var delivered = 0
        for index in 0..<keys {
            let key = "k\(index)"
            let source = EventSource(partition: activityPartition, offset: Int64(index))
            actions.removeAll(keepingCapacity: true)
            if index % 100_000 == 50_000 {
                holders.append(key)
                engine.receive(makeEvent("e\(index)", target: key, timestamp: 100), from: source, now: now, into: &actions)
                #expect(actions.sends.isEmpty, "no token yet: pending")
                continue
            }
            engine.tokenRegistered(key: key, token: tokenB, environment: .production, at: 1, partition: 0, now: now, into: &actions)
            engine.receive(makeEvent("e\(index)", target: key, timestamp: 100), from: source, now: now, into: &actions)
            let send = try #require(actions.sends.first, "key \(index) was not sent")
            actions.removeAll(keepingCapacity: true)
            engine.complete(send.sendID, outcome: .delivered, now: now, into: &actions)
            delivered += 1
            if index % 1_000 == 0 {
                now += 10_000_000
                engine.tick(now: now, into: &actions)
            }
        }
        #expect(delivered == keys - holders.count)
        #expect(engine.targetCount <= configuration.maxTrackedTargets + holders.count, "\(engine.targetCount) tracked")
        #expect(engine.forgottenTargets.evicted >= keys - configuration.maxTrackedTargets - holders.count)
        for key in holders {
            #expect(engine.snapshot(lane: .activity, target: key, now: now)?.pendingOffsets == 1, "\(key) holds work and stays")
        }
        #expect(engine.totalLoad == Load(incomplete: holders.count, inFlight: 0))
        let point = try #require(engine.commitPoints().first)
        #expect(point.offset == 50_000, "the commit stops at the first event still pending")
    }

    /// One key flooded at 50,000 events a second for 4 seconds (each a major change) while 50 other
    /// keys get an update every 1.5 s: the flooded key is sent at most once per min_interval and at
    /// priority 10 only within its burst, its newest state is delivered, every flood event is settled
    /// (folded, dropped as not newer, or sent), and every other key's update goes out the moment it
    /// arrives.
    @Test func oneKeyFloodedAt50kEventsASecondIsCoalescedAndOthersAreUnaffected() throws {
        var engine = FanoutEngine(configuration: EngineConfiguration())
        let start: Nanoseconds = 1_772_788_200 * sec
        var now = start
        var actions: [EngineAction] = []
        var offset: Int64 = 0
        let quiet = (0..<50).map { "quiet-\($0)" }
        for key in ["hot"] + quiet {
            engine.tokenRegistered(key: key, token: tokenA, environment: .production, at: 1, partition: 0, now: now, into: &actions)
        }
        var hotSends: [SendRequest] = []
        var quietLate = 0, quietSent = 0
        let base: Int64 = 1_772_788_000
        let perSecond = 50_000, seconds = 4
        let step = sec / Nanoseconds(perSecond)
        var nextQuiet = start
        for index in 0..<(perSecond * seconds) {
            now = start + Nanoseconds(index) * step
            actions.removeAll(keepingCapacity: true)
            let timestamp = base + Int64(index / perSecond)
            engine.receive(makeEvent("h\(index)", target: "hot", timestamp: timestamp, status: "s\(index)"),
                           from: EventSource(partition: activityPartition, offset: offset), now: now, into: &actions)
            offset += 1
            if now >= nextQuiet {
                nextQuiet += 3 * sec / 2
                for key in quiet {
                    let before = actions.count
                    engine.receive(makeEvent("\(key)-\(index)", target: key, timestamp: timestamp, status: "q\(index)"),
                                   from: EventSource(partition: activityPartition, offset: offset), now: now, into: &actions)
                    offset += 1
                    if Array(actions[before...]).sends.contains(where: { $0.target == key }) { quietSent += 1 } else { quietLate += 1 }
                }
            }
            if index % 50 == 0 { engine.tick(now: now, into: &actions) }
            try settle(&engine, actions, now: now, hot: &hotSends)
        }
        // Let the held state go out.
        for _ in 0..<30 {
            now += sec / 10
            actions.removeAll(keepingCapacity: true)
            engine.tick(now: now, into: &actions)
            try settle(&engine, actions, now: now, hot: &hotSends)
        }
        #expect(quietLate == 0 && quietSent == 50 * 3, "every quiet update was sent on arrival (\(quietSent) sent, \(quietLate) held)")
        #expect(hotSends.count >= 4 && hotSends.count <= seconds + 2, "\(hotSends.count) sends to the flooded key")
        let gaps = zip(hotSends.dropFirst(), hotSends).map { $0.0.event.timestamp - $0.1.event.timestamp }
        #expect(gaps.allSatisfy { $0 >= 1 }, "timestamps strictly increase: \(gaps)")
        #expect(Double(hotSends.filter { $0.priority == 10 }.count) <= BudgetSettings.standard.burst)
        #expect(hotSends.last?.event.timestamp == base + Int64(seconds - 1), "the newest second's state reached the device")
        #expect(engine.totalLoad == Load(incomplete: 0, inFlight: 0), "every flood event settled")
    }

    /// Completes every send in `actions` as delivered, keeping the flooded key's.
    private func settle(_ engine: inout FanoutEngine, _ actions: [EngineAction], now: Nanoseconds, hot: inout [SendRequest]) throws {
        var pending = actions.sends
        while let send = pending.popLast() {
            if send.target == "hot" { hot.append(send) }
            var more: [EngineAction] = []
            engine.complete(send.sendID, outcome: .delivered, now: now, into: &more)
            pending += more.sends
        }
    }
}
