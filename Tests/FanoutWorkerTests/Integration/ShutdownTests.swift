import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Testing

extension WorkerIntegration {
    /// Issue 11 item 3: `Worker.stop(timeout:)` (what SIGTERM calls) returns in every group state,
    /// commits only what was delivered or resolved, and the other member then owns every partition.
    @Suite struct Shutdown {
        /// Activities spread over the harness's partitions, with their device tokens.
        struct Activities {
            let keys: [String]
            let tokens: [String]
            let base = IntegrationHarness.now - 600
            var events: [ProgressEvent] = []

            init(_ prefix: String, count: Int, tokenBase: Int) {
                keys = (0..<count).map { "\(prefix)-\($0)" }
                tokens = keys.indices.map { IntegrationHarness.token(tokenBase + $0) }
            }

            func register(in harness: IntegrationHarness) async throws {
                for (key, token) in zip(keys, tokens) { try await harness.registerToken(key: key, token: token, at: base - 10) }
            }

            /// State number `progress` of every activity.
            mutating func produce(_ progress: Int, in harness: IntegrationHarness) async throws {
                for (key, token) in zip(keys, tokens) {
                    events.append(try await harness.produceProgress(key: key, token: token, progress: progress, base: base))
                }
            }

            func all(_ progress: Int) -> [String: Int] { Dictionary(uniqueKeysWithValues: tokens.map { ($0, progress) }) }
        }

        /// Stops `worker` and fails if it does not return (the bound covers the drain `timeout`,
        /// leaving the group and stopping the APNs clients; it is not a performance threshold).
        func stop(_ worker: Worker, _ name: String, timeout: Duration, harness: IntegrationHarness) async throws {
            let returned = StopFlag()
            let started = ContinuousClock.now
            let stopping = Task {
                await worker.stop(timeout: timeout)
                returned.set()
            }
            try await harness.eventually("\(name).stop(timeout: \(timeout)) to return", timeout: timeout + .seconds(20)) { returned.isSet }
            await stopping.value
            let took = ContinuousClock.now - started
            print("measured: \(name).stop(timeout: \(timeout)) returned in \(seconds(since: started))")
            // The contract (docs/design.md §5): drain, final commit and leaving the group all within the
            // timeout; the slack is for a loaded machine's scheduling, not for any step of the stop.
            #expect(took <= timeout + .seconds(1), "\(name).stop(timeout: \(timeout)) took \(took)")
        }

        /// `owner` delivers a new state of every activity, over every partition, and commits it all.
        func expectOwnsEverything(_ owner: Worker, _ activities: inout Activities, progress: Int, harness: IntegrationHarness) async throws {
            try await activities.produce(progress, in: harness)
            #expect(Set(activities.events.map(\.partition)).count == harness.partitions, "the activities do not cover every partition")
            try await harness.eventually("every activity shows state \(progress)") { harness.devicesShow(activities.tokens, progress: activities.all(progress)) }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            #expect(try harness.commitsPastUndelivered(activities.events) == [])
        }

        /// A harness over two partitions and worker "a" owning every partition, its first states delivered and committed.
        func firstOwner(_ prefix: String, tokenBase: Int, kafkaProperties: [String: String] = IntegrationHarness.shortRebalance)
            async throws -> (IntegrationHarness, Activities, Worker) {
            let harness = try IntegrationHarness(partitions: 2)
            var activities = Activities(prefix, count: 6, tokenBase: tokenBase)
            try await activities.register(in: harness)
            let first = try harness.makeWorker(name: "a", kafkaProperties: kafkaProperties)
            try first.start()
            try await expectOwnsEverything(first, &activities, progress: 0, harness: harness)
            return (harness, activities, first)
        }

        /// Worker "b" starts after a stopped, delivers every state a left undelivered (`progress`), then owns everything.
        func secondTakesOver(_ activities: inout Activities, progress: Int, harness: IntegrationHarness) async throws {
            let second = try harness.makeWorker(name: "b")
            try second.start()
            let expected = activities.all(progress)
            try await harness.eventually("b delivers what a left") { harness.devicesShow(activities.tokens, progress: expected) }
            try await expectOwnsEverything(second, &activities, progress: progress + 1, harness: harness)
            await second.stop(timeout: .seconds(5))
        }

        @Test func stopBeforeAnyAssignment() async throws {
            let (harness, initial, first) = try await firstOwner("early", tokenBase: 110)
            var activities = initial

            let second = try harness.makeWorker(name: "b")
            try second.start()   // then at once: its JoinGroup is still unanswered
            try await stop(second, "b", timeout: .seconds(5), harness: harness)
            #expect(harness.logs.firstTime(worker: "b", containing: "\"partitions assigned\"") == nil, "b was assigned before it stopped")
            try await expectOwnsEverything(first, &activities, progress: 1, harness: harness)
            await first.stop(timeout: .seconds(5))
        }

        @Test func stopDuringARebalanceWhileASecondMemberJoins() async throws {
            let (harness, initial, first) = try await firstOwner("joining", tokenBase: 120, kafkaProperties: IntegrationHarness.shortRebalance.merging(["debug": "cgrp"]) { $1 })
            var activities = initial

            let second = try harness.makeWorker(name: "b")
            try second.start()
            // a hears of the rebalance from its heartbeat: b has joined, nothing is reassigned yet.
            try await harness.eventually("a to hear of the rebalance") {
                harness.logs.firstTime(worker: "a", containing: "Group rebalance in progress") != nil
            }
            try await activities.produce(1, in: harness)
            try await stop(first, "a", timeout: .seconds(5), harness: harness)
            #expect(try harness.commitsPastUndelivered(activities.events) == [])
            try await expectOwnsEverything(second, &activities, progress: 2, harness: harness)
            await second.stop(timeout: .seconds(5))
        }

        @Test func stopAfterThePartitionsWereLost() async throws {
            let (harness, initial, first) = try await firstOwner("lost", tokenBase: 130)
            var activities = initial

            // The coordinator forgets a: its next heartbeat is answered UNKNOWN_MEMBER_ID (the
            // assignment is lost), and its rejoin is refused until the test clears it.
            harness.cluster.pushRequestErrors(.joinGroup, Array(repeating: .rebalanceInProgress, count: 200))
            harness.cluster.pushRequestErrors(.heartbeat, [.unknownMemberID])
            try await harness.eventually("a to lose its partitions") {
                harness.logs.firstTime(worker: "a", containing: "partitions lost") != nil
            }
            try await activities.produce(1, in: harness)
            try await stop(first, "a", timeout: .seconds(5), harness: harness)
            harness.cluster.clearRequestErrors(.joinGroup)
            #expect(try harness.commitsPastUndelivered(activities.events) == [])

            try await secondTakesOver(&activities, progress: 1, harness: harness)
        }

        @Test func stopWhileSendsAreInFlightToASlowAPNs() async throws {
            let (harness, initial, first) = try await firstOwner("slow", tokenBase: 140)
            var activities = initial
            let committedBefore = try harness.committed()

            try harness.simulator.setFaults(APNsSimulatorFaults(latencyMillis: 4000))
            let sendsBefore = first.summary.totalSends
            for progress in 1...3 { try await activities.produce(progress, in: harness) }
            try await harness.eventually("a's sends to the slow APNs in flight") { first.summary.totalSends >= sendsBefore + activities.tokens.count }
            try await stop(first, "a", timeout: .seconds(1), harness: harness)
            #expect(harness.logs.firstTime(worker: "a", containing: "shutdown timeout reached") != nil,
                    "a's sends were answered before its shutdown deadline: nothing was in flight")
            // No 200 came back before a stopped, so nothing past the first states is committed.
            #expect(try harness.committed() == committedBefore)
            #expect(try harness.commitsPastUndelivered(activities.events) == [])

            try harness.simulator.setFaults(APNsSimulatorFaults())
            try await secondTakesOver(&activities, progress: 3, harness: harness)
        }
    }
}
