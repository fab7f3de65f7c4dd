import FanoutCore
import Foundation
import Synchronization
import Testing
@testable import FanoutKafka

/// Static membership (`group.instance.id`) on librdkafka 2.0.2 and its mock cluster.
///
/// What librdkafka does, proven here: the id reaches librdkafka and its JoinGroup (v5 carries it);
/// `close` of a static member revokes locally and sends no LeaveGroup, where a dynamic member's does.
/// What the 2.0.2 mock does not do: it reads the instance id of a JoinGroup and ignores it, matching
/// members by member id only. A restarted member with the same instance id is a new member: the
/// other members are made to rejoin, and the group waits (electing the gone member as leader, whose
/// SyncGroup never comes) until the old member's session has expired. The KIP-345 promise — back
/// without a rebalance, before the session ends — is therefore stated below as a known issue.
@Suite struct KafkaStaticMembershipTests {
    /// A member polled on its own thread until stopped, then closed there; it records what the
    /// group did to it and when its session or group ended according to the broker.
    final class Member: Sendable {
        /// What the group did to the member, shared with the rebalance handler.
        final class Observed: Sendable {
            let owned = Mutex<Set<PartitionID>>([])
            let revoked = Mutex<[Set<PartitionID>]>([])
            let lost = Atomic(0)
            let rejoins = Atomic(0)
            /// When the member first got partitions, had the broker already ended a session in its group?
            let assignedAfterASessionEnded = Mutex<Bool?>(nil)
        }
        let consumer: KafkaConsumer
        let stop = Flag()
        let observed = Observed()

        init(_ cluster: MockKafkaCluster, group: String, instance: String?, broker: BrokerLog) throws {
            let observed = observed
            consumer = try KafkaConsumer(
                configuration: groupConfiguration(cluster), groupID: group, groupInstanceID: instance,
                rebalance: KafkaRebalanceHandler(
                    assigned: { partitions in
                        observed.owned.withLock { $0.formUnion(partitions) }
                        observed.assignedAfterASessionEnded.withLock { $0 = $0 ?? broker.saw("session timed out for group \(group)") }
                    },
                    revoking: { partitions in
                        observed.owned.withLock { $0.subtract(partitions) }
                        observed.revoked.withLock { $0.append(Set(partitions)) }
                        return [:]
                    },
                    lost: { partitions in
                        observed.owned.withLock { $0.subtract(partitions) }
                        observed.lost.add(1, ordering: .relaxed)
                    },
                    rejoining: { observed.rejoins.add(1, ordering: .relaxed) }),
                log: { _ in })
        }

        var rejoins: Int { observed.rejoins.load(ordering: .relaxed) }
        var lostCount: Int { observed.lost.load(ordering: .relaxed) }
        var assignedAfterASessionEnded: Bool? { observed.assignedAfterASessionEnded.withLock { $0 } }
        var partitions: Set<PartitionID> { observed.owned.withLock { $0 } }
        var revocations: [Set<PartitionID>] { observed.revoked.withLock { $0 } }
        var everRevoked: Set<PartitionID> { revocations.reduce(into: []) { $0.formUnion($1) } }

        func run(_ topic: String) -> Task<Void, Error> {
            Task {
                try await onThread("member") {
                    try self.consumer.subscribe([topic])
                    while !self.stop.isSet { _ = try self.consumer.poll(timeout: .milliseconds(50)) }
                    try self.consumer.close(timeout: .seconds(20))
                }
            }
        }
    }

    /// The brokers' debug lines about groups (a member leaving, a session ending).
    final class BrokerLog: Sendable {
        private let lines = Mutex<[String]>([])
        var handler: KafkaLogHandler {
            { record in
                if record.message.contains("is leaving group") || record.message.contains("session timed out") {
                    self.lines.withLock { $0.append(record.message) }
                }
            }
        }
        func saw(_ text: String) -> Bool { lines.withLock { $0.contains { $0.contains(text) } } }
    }

    /// A cluster whose brokers log to `broker`, a 4-partition topic, and two members a and b that
    /// have split it (2 + 2).
    func splitGroup(instances: (String?, String?)) async throws
        -> (cluster: MockKafkaCluster, broker: BrokerLog, topic: String, group: String, a: Member, runA: Task<Void, Error>, b: Member, runB: Task<Void, Error>) {
        let broker = BrokerLog()
        let cluster = try MockKafkaCluster(log: broker.handler)
        let topic = uniqueName("static"), group = uniqueName("group")
        try cluster.createTopic(topic, partitions: 4)
        let a = try Member(cluster, group: group, instance: instances.0, broker: broker)
        let runA = a.run(topic)
        try await waitUntil("a to own the topic") { a.partitions.count == 4 }
        let b = try Member(cluster, group: group, instance: instances.1, broker: broker)
        let runB = b.run(topic)
        try await waitUntil("the cooperative split") { a.partitions.count == 2 && b.partitions.count == 2 }
        return (cluster, broker, topic, group, a, runA, b, runB)
    }

    @Test func theInstanceIDReachesLibrdkafka() throws {
        let unreachable = KafkaConfiguration(["bootstrap.servers": "127.0.0.1:1"])
        let named = try KafkaConsumer(configuration: unreachable, groupID: "g", groupInstanceID: "fanout-0", log: { _ in })
        #expect(named.configuredValue(of: "group.instance.id") == "fanout-0" && named.groupInstanceID == "fanout-0")
        let dynamic = try KafkaConsumer(configuration: unreachable, groupID: "g", log: { _ in })
        #expect(dynamic.configuredValue(of: "group.instance.id") == nil && dynamic.groupInstanceID == nil)
        #expect(throws: KafkaError.self) { _ = try KafkaConsumer(configuration: unreachable, groupID: "g", groupInstanceID: "") }
    }

    /// Closing revokes the member's partitions locally either way (its last commit point goes out
    /// there); only a dynamic member then tells the broker it left. A LeaveGroup is answered before
    /// librdkafka finishes closing, so the broker's log holds it by the time `close` returns.
    @Test(arguments: [true, false]) func closingAStaticMemberRevokesButSendsNoLeaveGroup(_ isStatic: Bool) async throws {
        let group = try await splitGroup(instances: isStatic ? ("fanout-a", "fanout-b") : (nil, nil))
        let held = group.a.partitions, revokedBefore = group.a.revocations.count   // the split revoked two already
        group.a.stop.set()
        try await group.runA.value
        #expect(Array(group.a.revocations.dropFirst(revokedBefore)) == [held])
        #expect(group.broker.saw("is leaving group \(group.group)") == !isStatic)
        // b gave up nothing for a's departure (a dynamic a's partitions come to b later, added).
        #expect(group.b.everRevoked.isEmpty && group.b.lostCount == 0)
        group.b.stop.set()
        try await group.runB.value
    }

    @Test func aRestartedStaticMemberTakesBackItsPartitions() async throws {
        let group = try await splitGroup(instances: ("fanout-a", "fanout-b"))
        let heldByA = group.a.partitions, heldByB = group.b.partitions
        group.a.stop.set()
        try await group.runA.value
        let rejoinsBefore = group.b.rejoins

        let restarted = try Member(group.cluster, group: group.group, instance: "fanout-a", broker: group.broker)
        let runRestarted = restarted.run(group.topic)
        try await waitUntil("the restarted member to hold a's partitions") { restarted.partitions == heldByA }
        // What holds here as on Kafka: the same partitions back, b untouched throughout.
        #expect(group.b.partitions == heldByB && group.b.everRevoked.isEmpty && group.b.lostCount == 0)
        withKnownIssue("librdkafka 2.0.2's mock cluster ignores group.instance.id: the restart is a join, b rejoins, and the group waits for a's old session to end") {
            #expect(group.b.rejoins == rejoinsBefore, "b was made to rejoin")
            #expect(restarted.assignedAfterASessionEnded == false, "the assignment waited for a's old session to end")
        }
        restarted.stop.set()
        group.b.stop.set()
        try await runRestarted.value
        try await group.runB.value
    }
}
