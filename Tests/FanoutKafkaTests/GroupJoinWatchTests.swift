import Foundation
import Synchronization
import Testing
@testable import FanoutKafka

@Suite struct GroupJoinWatchTests {
    @Test func readsTheNewJoinStateOfALine() {
        let line = #"Group "fanout" changed join state steady -> init (state up)"#
        #expect(line.withCString { GroupJoinWatch.newState(in: $0) } == "init")
        #expect("changed join state wait-sync -> wait-assign-call (state up)".withCString { GroupJoinWatch.newState(in: $0) } == "wait-assign-call")
        #expect("no arrow here".withCString { GroupJoinWatch.newState(in: $0) } == nil)
    }

    @Test func reportsOnlyLeavingTheSteadyState() {
        let count = Atomic(0)
        let watch = GroupJoinWatch { count.add(1, ordering: .relaxed) }
        for line in ["init -> wait-join", "wait-join -> wait-sync", "wait-sync -> steady",
                     "steady -> init", "init -> wait-join", "wait-join -> steady", "steady -> init"] {
            line.withCString { watch.observe($0) }
        }
        #expect(count.load(ordering: .relaxed) == 2)
    }

    /// A heartbeat leaving is reported; its answer (an error line of the same facility) and every other
    /// facility are not, and join-state lines still go to the join-state reading.
    @Test func reportsAHeartbeatLeavingNotItsAnswer() {
        let heartbeats = Atomic(0)
        let rejoins = Atomic(0)
        let watch = GroupJoinWatch(rejoining: { rejoins.add(1, ordering: .relaxed) },
                                   heartbeatSent: { heartbeats.add(1, ordering: .relaxed) })
        let lines = [
            ("HEARTBEAT", #"GroupCoordinator/1: Heartbeat for group "fanout" generation id 3"#),
            ("HEARTBEAT", #"Group "fanout" heartbeat error response in state up (join-state steady, 5 partition(s) assigned): Broker: Group rebalance in progress"#),
            ("CGRPJOINSTATE", #"Group "fanout" changed join state wait-assign-call -> steady (state up)"#),
            ("CGRPJOINSTATE", #"Group "fanout" changed join state steady -> init (state up)"#),
            ("COMMIT", #"GroupCoordinator/1: Committing offsets for 4 partition(s) with generation-id 3 in join-state wait-join: manual"#),
            ("REJOIN", #"Group "fanout": Rejoining group with 5 owned partition(s): Heartbeat for group"#),
        ]
        for (facility, message) in lines {
            facility.withCString { f in message.withCString { watch.observe(facility: f, message: $0) } }
        }
        #expect(heartbeats.load(ordering: .relaxed) == 1)
        #expect(rejoins.load(ordering: .relaxed) == 1)
        #expect(!watch.isSteady)
    }

    /// Against librdkafka itself: when a second member joins, the first hears `rejoining` before any
    /// callback of that rebalance — after at least one heartbeat, whose answer told it — and none of
    /// the debug lines Fanout turned on reaches its log.
    @Test func aJoiningMemberMakesTheFirstReportRejoiningBeforeItsCallbacks() async throws {
        let cluster = try MockKafkaCluster()
        let topic = uniqueName("join")
        try cluster.createTopic(topic, partitions: 4)
        let group = uniqueName("group")
        let events = Mutex<[String]>([])
        let debugLines = Atomic(0)
        let heartbeats = Atomic(0)
        let heartbeatsBeforeRejoining = Atomic(-1)
        let handler = KafkaRebalanceHandler(
            assigned: { _ in events.withLock { $0.append("assigned") } },
            revoking: { _ in events.withLock { $0.append("revoking") }; return [:] },
            lost: { _ in events.withLock { $0.append("lost") } },
            settled: { events.withLock { $0.append("settled") } },
            rejoining: {
                events.withLock { $0.append("rejoining") }
                _ = heartbeatsBeforeRejoining.compareExchange(expected: -1, desired: heartbeats.load(ordering: .relaxed), ordering: .relaxed)
            },
            heartbeatSent: { heartbeats.add(1, ordering: .relaxed) })
        let a = try KafkaConsumer(configuration: groupConfiguration(cluster), groupID: group, rebalance: handler,
                                  log: { record in if record.level >= 7 { debugLines.add(1, ordering: .relaxed) } })
        let b = try KafkaConsumer(configuration: groupConfiguration(cluster), groupID: group)
        let stop = Flag()
        async let runA: Void = onThread("member-a") {
            try a.subscribe([topic])
            while !stop.isSet { _ = try a.poll(timeout: .milliseconds(50)) }
            try a.close()
        }
        try await waitUntil("a settles alone") { events.withLock { $0.contains("settled") } }
        let before = events.withLock { $0.count }
        async let runB: Void = onThread("member-b") {
            try b.subscribe([topic])
            while !stop.isSet { _ = try b.poll(timeout: .milliseconds(50)) }
            try b.close()
        }
        try await waitUntil("a settles again after b joined") { events.withLock { $0.dropFirst(before).contains("settled") } }
        stop.set()
        try await runA
        try await runB
        let round = Array(events.withLock { $0 }.dropFirst(before))
        #expect(round.first == "rejoining", "a's callbacks while b joined: \(round)")
        #expect(!round.contains("lost"))
        #expect(debugLines.load(ordering: .relaxed) == 0)
        #expect(heartbeatsBeforeRejoining.load(ordering: .relaxed) > 0, "no heartbeat seen before the rejoin its answer caused")
    }

    /// The polling threads' stop flag ends a member's loop by itself once its limit has passed, so a
    /// test that failed before setting it cannot hang the run (see `Flag`).
    @Test func aStopFlagCountsAsSetOnceItsLimitHasPassed() {
        let flag = Flag()
        #expect(!flag.isSet)
        flag.set()
        #expect(flag.isSet)
        #expect(Flag(limit: .zero).isSet)
    }
}
