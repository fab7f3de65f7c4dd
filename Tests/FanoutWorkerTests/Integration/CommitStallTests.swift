import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Synchronization
import Testing

extension WorkerIntegration {
    /// Issue 11 item 2: a commit in flight never holds back delivery (docs/design.md §4, §5).
    @Suite struct CommitStall {
        /// A started worker with four registered activities, on a harness whose group coordinator
        /// (broker 1) can be slowed apart from the partitions' leader. Heartbeats go to the slowed
        /// coordinator too: its session (`sessionSeconds`) must outlast the delay.
        struct SlowableCoordinator {
            let harness: IntegrationHarness
            let worker: Worker
            let metrics = FanoutMetrics()
            let keys: [String]
            let tokens: [String]
            let base = IntegrationHarness.now - 600

            init(keyPrefix: String, tokenBase: Int, sessionSeconds: Int) async throws {
                harness = try IntegrationHarness(partitions: 2, coordinatorApart: true)
                keys = (0..<4).map { "\(keyPrefix)-\($0)" }
                tokens = keys.indices.map { IntegrationHarness.token(tokenBase + $0) }
                for (key, token) in zip(keys, tokens) { try await harness.registerToken(key: key, token: token, at: base - 10) }
                worker = try harness.makeWorker(name: keyPrefix, metrics: metrics, kafkaProperties: [
                    "session.timeout.ms": "\(sessionSeconds * 1000)", "max.poll.interval.ms": "\((sessionSeconds + 5) * 1000)",
                    "heartbeat.interval.ms": "500"])
                try worker.start()
            }
        }

        /// The group coordinator answers only after 10 s: events produced meanwhile are delivered
        /// before any of those answers comes back, and everything commits once it answers again.
        @Test func deliveryGoesOnWhileTheCoordinatorHoldsCommits() async throws {
            let setup = try await SlowableCoordinator(keyPrefix: "stall", tokenBase: 40, sessionSeconds: 25)
            let (harness, worker, metrics, keys, tokens, base) = (setup.harness, setup.worker, setup.metrics, setup.keys, setup.tokens, setup.base)
            for (key, token) in zip(keys, tokens) { _ = try await harness.produceProgress(key: key, token: token, progress: 0, base: base) }
            // Committed, and the worker heard every answer: nothing is left to commit, so no commit is
            // in flight, and every answer from here on is a delayed one.
            try await harness.eventually("the first states delivered and committed, and the worker heard it") {
                let heard = worker.summary.committed
                return try harness.allCommitted()
                    && harness.endOffsets().allSatisfy { $0.value == 0 || heard["\(IntegrationHarness.updates)/\($0.key)"] == $0.value }
            }
            let answers = { metrics.commits.labels("ok").value + metrics.commits.labels("failed").value }
            try harness.cluster.setBrokerRoundTripTime(1, milliseconds: 10_000)
            let answersBefore = answers()
            let delayed = ContinuousClock.now
            for round in 1...3 {
                var expected: [String: Int] = [:]
                for (key, token) in zip(keys, tokens) {
                    _ = try await harness.produceProgress(key: key, token: token, progress: round, base: base)
                    expected[token] = round
                }
                try await harness.eventually("round \(round) delivered") { harness.devicesShow(tokens, progress: expected) }
            }
            print("measured: three rounds delivered \(seconds(since: delayed)) after the coordinator was slowed to 10 s")
            #expect(answers() == answersBefore, "a delayed commit answer came in before the deliveries: they waited for it")
            #expect(worker.summary.commits > 0)

            // The mock stores a commit on receipt and delays only its answer: the worker's own view
            // (the answers it heard) is what shows the commits were outstanding until now.
            try harness.cluster.setBrokerRoundTripTime(1, milliseconds: 0)
            try await harness.eventually("the delayed commit answers heard") { answers() > answersBefore }
            print("measured: first delayed commit answer heard \(seconds(since: delayed)) after the coordinator was slowed")
            try await harness.eventually("everything committed once the coordinator answers") {
                let heard = worker.summary.committed
                return try harness.allCommitted()
                    && harness.endOffsets().allSatisfy { $0.value == 0 || heard["\(IntegrationHarness.updates)/\($0.key)"] == $0.value }
            }
            await worker.stop(timeout: .seconds(5))
        }

        /// A commit the coordinator has not answered for ten commit intervals (at least 10 s) no
        /// longer holds back the next one: the worker gives it up when the engine offers the next, so
        /// states delivered meanwhile are committed while the first answer is still on its way. (The
        /// mock stores a commit on receipt and delays only its answer; waiting for that answer, the
        /// worker sent nothing newer for 30 s.)
        @Test func aCommitUnansweredForItsDeadlineDoesNotHoldTheNext() async throws {
            let setup = try await SlowableCoordinator(keyPrefix: "unanswered", tokenBase: 80, sessionSeconds: 45)
            let (harness, worker, metrics, keys, tokens, base) = (setup.harness, setup.worker, setup.metrics, setup.keys, setup.tokens, setup.base)
            func deliverAndCommit(_ round: Int) async throws {
                var expected: [String: Int] = [:]
                for (key, token) in zip(keys, tokens) {
                    _ = try await harness.produceProgress(key: key, token: token, progress: round, base: base)
                    expected[token] = round
                }
                try await harness.eventually("round \(round) delivered") { harness.devicesShow(tokens, progress: expected) }
            }
            try await deliverAndCommit(0)
            try await harness.eventually("round 0 committed") { try harness.allCommitted() }

            try harness.cluster.setBrokerRoundTripTime(1, milliseconds: 30_000)
            let slowed = ContinuousClock.now
            try await deliverAndCommit(1)   // its commit is stored at once and answered in 30 s
            try await deliverAndCommit(2)   // its commit waits behind round 1's until that one is given up
            try await harness.eventually("round 1's unanswered commit given up", timeout: .seconds(28)) {
                metrics.commits.labels("unanswered").value >= 1
            }
            print("measured: an unanswered commit given up \(seconds(since: slowed)) after the coordinator was slowed to 30 s")
            #expect(harness.logs.lines.contains { $0.contains("offset commit unanswered; the next starts without waiting for it") })
            // Reading the committed offsets goes through the slowed coordinator too.
            try harness.cluster.setBrokerRoundTripTime(1, milliseconds: 0)
            try await harness.eventually("round 2 committed") { try harness.allCommitted() }
            try harness.cluster.setBrokerRoundTripTime(1, milliseconds: 0)
            await worker.stop(timeout: .seconds(5))
        }

        /// A second member joins while the first delivers a steady stream over 8 partitions: the
        /// partitions that stay with the first keep delivering during the cooperative rebalance.
        @Test func keptPartitionsKeepDeliveringWhileASecondMemberJoins() async throws {
            // One broadcast partition: the sticky assignor splits 9 partitions 5/4, so a keeps some
            // activity partitions (with 8 + 8 it may hand b every activity partition).
            let harness = try IntegrationHarness(partitions: 8, broadcastPartitions: 1)
            let keys = (0..<20).map { "steady-\($0)" }
            let tokens = keys.indices.map { IntegrationHarness.token(60 + $0) }
            let base = IntegrationHarness.now - 900
            for (key, token) in zip(keys, tokens) { try await harness.registerToken(key: key, token: token, at: base - 10) }
            let first = try harness.makeWorker(name: "a")
            try first.start()
            try await harness.eventually("a owns the partitions") { first.isReady().isReady }

            let stopProducing = StopFlag()
            let producing = Task { () -> [ProgressEvent] in
                var events: [ProgressEvent] = []
                var step = 0
                while !stopProducing.isSet {
                    for (key, token) in zip(keys, tokens) {
                        events.append(try await harness.produceProgress(key: key, token: token, progress: step, base: base))
                    }
                    step += 1
                    try await Task.sleep(for: .milliseconds(200))
                }
                return events
            }
            try await harness.eventually("a delivers the stream") { harness.progressDeliveries().count == tokens.count }
            let second = try harness.makeWorker(name: "b")
            let joinStarted = Date().timeIntervalSince1970
            try second.start()
            try await harness.eventually("b owns partitions") { second.isReady().isReady }
            let assignedAt = try #require(harness.logs.firstTime(worker: "b", containing: "\"partitions assigned\""))
            let readyAt = Date().timeIntervalSince1970
            // Keep the stream going a little past the settled rebalance, then let it end.
            let settled = harness.progressDeliveries().values.map(\.count).reduce(0, +)
            try await harness.eventually("deliveries after the rebalance") {
                harness.progressDeliveries().values.map(\.count).reduce(0, +) >= settled + tokens.count * 2
            }
            stopProducing.set()
            let events = try await producing.value
            var last: [String: Int] = [:]
            for event in events { last[event.token] = max(event.progress, last[event.token] ?? -1) }

            try await harness.eventually("every final state on the device view") { harness.devicesShow(tokens, progress: last) }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            #expect(try harness.commitsPastUndelivered(events) == [])

            // Kept: the activities of partitions the group never gave to b.
            let movedToB = harness.logs.partitions(worker: "b", message: "partitions assigned")
            let partitionOf = Dictionary(events.map { ($0.token, "\(IntegrationHarness.updates)/\($0.partition)") }) { first, _ in first }
            let kept = tokens.filter { !movedToB.contains(partitionOf[$0]!) }
            #expect(!kept.isEmpty && kept.count < tokens.count, "the rebalance moved \(tokens.count - kept.count) of \(tokens.count) activities")
            // librdkafka 2.0.2 (issue #4059): a commit of the ending generation answered after the
            // member's JoinGroup drops every partition. The engine hears of the rejoin from the
            // heartbeat's moment on (`GroupJoinWatch`) and offers no commit until the group settles.
            let lostByA = harness.logs.partitions(worker: "a", message: "partitions lost")
            #expect(lostByA.isEmpty, "a lost \(lostByA.sorted()) during the rebalance")
            let deliveries = harness.progressDeliveries()
            var largestGap = 0.0
            var deliveredWhileJoining = 0
            for token in kept {
                let times = (deliveries[token] ?? []).map(\.time).filter { $0 >= joinStarted - 1 }  // to the end of the stream
                deliveredWhileJoining += times.filter { $0 > joinStarted && $0 < assignedAt }.count
                for (earlier, later) in zip(times, times.dropFirst()) { largestGap = max(largestGap, later - earlier) }
            }
            print(String(format: "measured: largest delivery gap on kept partitions = %.2f s (b joined to first assignment %.2f s, to ready %.2f s; %d kept activities; a lost %d partitions)",
                         largestGap, assignedAt - joinStarted, readyAt - joinStarted, kept.count, lostByA.count))
            #expect(deliveredWhileJoining > 0, "a delivered nothing to its kept partitions while b was joining")
            await second.stop(timeout: .seconds(5))
            await first.stop(timeout: .seconds(5))
            #expect(try harness.allCommitted())
        }
    }
}
