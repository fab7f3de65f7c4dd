@testable import FanoutKafka
@testable import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// docs/design.md §9's Kafka group conventions, as the worker's own consumer carries them to librdkafka.
    @Suite struct GroupConventions {
        typealias Activities = WorkerIntegration.Shutdown.Activities

        @Test func theWorkersConsumerIsCooperativeStickyReadCommittedAndNamedByItsInstanceID() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let dynamic = try harness.makeWorker(name: "d")
            #expect(dynamic.intake.consumer.configuredValue(of: "group.instance.id") == nil)
            var configuration = harness.configuration()
            configuration.kafka.groupInstanceID = "fanout-a"
            let worker = try harness.makeWorker(name: "a", configuration: configuration)
            let consumer = worker.intake.consumer
            #expect(consumer.configuredValue(of: "group.instance.id") == "fanout-a")
            #expect(consumer.configuredValue(of: "partition.assignment.strategy") == "cooperative-sticky")
            #expect(consumer.configuredValue(of: "isolation.level") == "read_committed")
            try worker.start()
            try await harness.eventually("a to be assigned") { worker.intake.isAssigned }
            // What the group chose, not only what was asked for.
            #expect(consumer.client.rebalanceProtocol == "COOPERATIVE")
            #expect(harness.logs.lines.contains { $0.contains("\"worker started\"") && $0.contains("\"group_instance_id\":\"fanout-a\"") })
            await worker.stop(timeout: .seconds(5))
        }

        /// Two static workers; a stops (final commit, no LeaveGroup) and comes back with its instance
        /// id while states arrive: it resumes its partition from its final commit, b keeps its own
        /// partition throughout and never takes a's, and nothing is committed undelivered. On the
        /// 2.0.2 mock a's return waits for its old session to end (README "Operating it"); on Kafka
        /// it would not.
        @Test func aStaticWorkerStoppedAndRestartedTakesBackItsPartitionFromItsFinalCommit() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            var activities = Activities("static", count: 6, tokenBase: 140)
            try await activities.register(in: harness)
            func member(_ name: String, instance: String) throws -> Worker {
                var configuration = harness.configuration()
                configuration.kafka.groupInstanceID = instance
                return try harness.makeWorker(name: name, configuration: configuration)
            }
            let a = try member("a", instance: "fanout-a")
            try a.start()
            // Two partitions of each of activity-updates and broadcast-updates.
            let all = Set([IntegrationHarness.updates, IntegrationHarness.broadcasts].flatMap { topic in (0..<2).map { "\(topic)/\($0)" } })
            try await harness.eventually("a to own every partition") { harness.logs.partitions(worker: "a", message: "partitions assigned") == all }
            let b = try member("b", instance: "fanout-b")
            try b.start()
            try await harness.eventually("the cooperative split") {
                harness.logs.partitions(worker: "b", message: "partitions assigned").count == 2 && a.intake.isAssigned
            }
            let ownedByB = harness.logs.partitions(worker: "b", message: "partitions assigned")
            try await activities.produce(0, in: harness)
            #expect(Set(activities.events.map(\.partition)).count == 2, "the activities do not cover both partitions")
            try await harness.eventually("state 0 everywhere, committed") {
                try harness.devicesShow(activities.tokens, progress: activities.all(0)) && harness.allCommitted()
            }

            await a.stop(timeout: .seconds(5))
            #expect(try harness.commitsPastUndelivered(activities.events) == [])
            let restarted = try member("a2", instance: "fanout-a")
            try restarted.start()
            try await activities.produce(1, in: harness)
            try await harness.eventually("state 1 everywhere", timeout: .seconds(60)) { harness.devicesShow(activities.tokens, progress: activities.all(1)) }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            #expect(try harness.commitsPastUndelivered(activities.events) == [])
            // The restarted member holds what a held; b never gave up or gained a partition. When b
            // owns both activity partitions, the waits above are over before a2's join is answered
            // (the mock first ends a's old session), so they say nothing about a2: wait for it.
            //
            // The 2.0.2 mock treats a2 as a new member (README "Kafka group conventions"), and when
            // that join overlaps a's old session its group can time b's sync out and answer b's
            // heartbeat with a new generation: b's partitions are lost and dealt anew (seen under
            // ThreadSanitizer in CI). What Fanout owes holds either way (every state delivered,
            // nothing committed undelivered, above); the stickiness is then the mock's to break.
            try await harness.eventually("a2 to be assigned") {
                !harness.logs.partitions(worker: "a2", message: "partitions assigned").isEmpty
            }
            let mockDealtAnew = !harness.logs.partitions(worker: "b", message: "partitions lost").isEmpty
            try await withKnownIssue("the mock's rebalance ended b's generation: its partitions were lost and dealt anew") {
                if mockDealtAnew { Issue.record("b lost its partitions in the mock's rebalance") }
                try await harness.eventually("a2 to hold what a held", timeout: mockDealtAnew ? .seconds(1) : .seconds(40)) {
                    harness.logs.partitions(worker: "a2", message: "partitions assigned") == all.subtracting(ownedByB)
                }
                #expect(harness.logs.partitions(worker: "b", message: "partitions assigned") == ownedByB)
                #expect(harness.logs.partitions(worker: "b", message: "partitions revoked").isEmpty)
            } when: { mockDealtAnew }
            await restarted.stop(timeout: .seconds(5))
            await b.stop(timeout: .seconds(5))
        }
    }
}
