import FanoutCore
import Foundation
import Synchronization
import Testing
@testable import FanoutKafka

/// `close` in every group state returns, takes the member out of the group and never aborts the
/// process (librdkafka 2.0.2 aborted destroying a cooperative-sticky member closed between JoinGroup
/// and SyncGroup: in this suite that abort would kill the whole test process). Each test runs with a
/// dynamic closing member, which leaves, and a static one, which does not (its partitions move after
/// its session timeout) and is closed without unsubscribing first.
@Suite struct KafkaConsumerCloseTests {
    /// One group member polled on its own thread until told to stop, then closed on that thread.
    final class Observed: Sendable {
        let owned = Mutex<Set<PartitionID>>([])
        let everOwned = Mutex<Set<PartitionID>>([])
        let lostCount = Atomic(0)
        /// librdkafka group-protocol log lines (`debug=cgrp`) matching the watched texts.
        let seen = Mutex<[String]>([])
    }

    final class Member: Sendable {
        let observed = Observed()
        let stop = Flag()
        let consumer: KafkaConsumer
        var owned: Set<PartitionID> { observed.owned.withLock { $0 } }
        var everOwned: Set<PartitionID> { observed.everOwned.withLock { $0 } }
        var lostCount: Int { observed.lostCount.load(ordering: .relaxed) }

        init(_ cluster: MockKafkaCluster, group: String, instance: String? = nil, watched: [String] = [], _ extra: [String: String] = [:]) throws {
            let observed = observed
            let handler = KafkaRebalanceHandler(
                assigned: { partitions in
                    observed.owned.withLock { $0.formUnion(partitions) }
                    observed.everOwned.withLock { $0.formUnion(partitions) }
                },
                revoking: { partitions in
                    observed.owned.withLock { $0.subtract(partitions) }
                    return [:]   // nothing processed, nothing to commit
                },
                lost: { partitions in
                    observed.owned.withLock { $0.subtract(partitions) }
                    observed.lostCount.add(1, ordering: .relaxed)
                })
            consumer = try KafkaConsumer(
                configuration: groupConfiguration(cluster, ["debug": "cgrp"].merging(extra) { _, new in new }),
                groupID: group, groupInstanceID: instance, rebalance: handler,
                log: { record in
                    if watched.contains(where: { record.message.contains($0) }) {
                        observed.seen.withLock { $0.append(record.message) }
                    }
                })
        }

        func saw(_ text: String) -> Bool { observed.seen.withLock { $0.contains { $0.contains(text) } } }

        /// Subscribes, polls until `stop`, closes. Throws what `close` throws.
        func run(_ topic: String) async throws {
            try await onThread("member") {
                try self.consumer.subscribe([topic])
                while !self.stop.isSet { _ = try self.consumer.poll(timeout: .milliseconds(50)) }
                try self.consumer.close(timeout: .seconds(20))
            }
        }
    }

    static let joinAnswered = "JoinGroup response: GenerationId"

    func topic(_ cluster: MockKafkaCluster, partitions: Int32 = 4) throws -> (String, Set<PartitionID>) {
        let topic = uniqueName("close")
        try cluster.createTopic(topic, partitions: Int(partitions))
        return (topic, Set((0..<partitions).map { PartitionID(topic: topic, partition: $0) }))
    }

    /// A steady member owning every partition, polled until the test stops it.
    func steadyMember(_ cluster: MockKafkaCluster, group: String, topic: String, all: Set<PartitionID>,
                      instance: String? = nil, watched: [String] = []) async throws -> (Member, Task<Void, Error>) {
        let member = try Member(cluster, group: group, instance: instance, watched: watched)
        let run = Task { try await member.run(topic) }
        try await waitUntil("the first member to own every partition") { member.owned == all }
        return (member, run)
    }

    /// `remaining` takes over every partition after the closed member left, then closes itself.
    func expectTakeover(by remaining: Member, _ run: Task<Void, Error>, of all: Set<PartitionID>) async throws {
        try await waitUntil("the remaining member to own every partition") { remaining.owned == all }
        remaining.stop.set()
        try await run.value
    }

    /// The closing member's `group.instance.id`: none (dynamic) or one (static).
    static let closing: [String?] = [nil, "closing-member"]

    @Test(arguments: closing) func closeBeforeAnyAssignment(_ instance: String?) async throws {
        let cluster = try MockKafkaCluster()
        let (topic, all) = try topic(cluster)
        let group = uniqueName("group")
        let (a, runA) = try await steadyMember(cluster, group: group, topic: topic, all: all)
        let b = try Member(cluster, group: group, instance: instance)
        b.stop.set()   // subscribes, then closes at once: its JoinGroup is still unanswered
        try await b.run(topic)
        #expect(b.everOwned.isEmpty)
        try await expectTakeover(by: a, runA, of: all)
    }

    @Test(arguments: closing) func closeWhileJoiningAfterTheJoinGroupAnswerBeforeAnySyncGroupSucceeded(_ instance: String?) async throws {
        let cluster = try MockKafkaCluster()
        let (topic, all) = try topic(cluster)
        let group = uniqueName("group")
        let (a, runA) = try await steadyMember(cluster, group: group, topic: topic, all: all)
        // Every SyncGroup fails until cleared: b gets JoinGroup answers (an assignor is chosen) but
        // never an assignment: the state in which librdkafka 2.0.2 aborted on destroy.
        cluster.pushRequestErrors(.syncGroup, Array(repeating: .rebalanceInProgress, count: 500))
        let b = try Member(cluster, group: group, instance: instance, watched: [Self.joinAnswered])
        let runB = Task { try await b.run(topic) }
        try await waitUntil("b's JoinGroup to be answered") { b.saw(Self.joinAnswered) }
        b.stop.set()
        try await runB.value
        cluster.clearRequestErrors(.syncGroup)
        #expect(b.everOwned.isEmpty)
        try await expectTakeover(by: a, runA, of: all)
    }

    @Test(arguments: closing) func closeDuringARebalanceWhileASecondMemberJoins(_ instance: String?) async throws {
        let cluster = try MockKafkaCluster()
        let (topic, all) = try topic(cluster)
        let group = uniqueName("group")
        let rebalancing = "Group rebalance in progress"
        let (a, runA) = try await steadyMember(cluster, group: group, topic: topic, all: all, instance: instance, watched: [rebalancing])
        let b = try Member(cluster, group: group)
        let runB = Task { try await b.run(topic) }
        // a hears of the rebalance from its heartbeat: b has joined, nothing is reassigned yet.
        try await waitUntil("a to hear of the rebalance") { a.saw(rebalancing) }
        a.stop.set()
        try await runA.value
        try await expectTakeover(by: b, runB, of: all)
    }

    @Test(arguments: closing) func closeAfterALostAssignment(_ instance: String?) async throws {
        let cluster = try MockKafkaCluster()
        let (topic, all) = try topic(cluster, partitions: 2)
        let group = uniqueName("group")
        let (a, runA) = try await steadyMember(cluster, group: group, topic: topic, all: all)
        // b stalls its poll loop past max.poll.interval.ms once it owns partitions: it loses them.
        let b = try Member(cluster, group: group, instance: instance)
        let runB = Task {
            try await onThread("member-b") {
                try b.consumer.subscribe([topic])
                while b.owned.isEmpty && !b.stop.isSet { _ = try b.consumer.poll(timeout: .milliseconds(50)) }
                Thread.sleep(forTimeInterval: 8)   // the stuck loop under test, not an ordering wait
                while b.lostCount == 0 && !b.stop.isSet { _ = try b.consumer.poll(timeout: .milliseconds(50)) }
                try b.consumer.close(timeout: .seconds(20))
            }
        }
        try await runB.value
        try await expectTakeover(by: a, runA, of: all)
    }
}
