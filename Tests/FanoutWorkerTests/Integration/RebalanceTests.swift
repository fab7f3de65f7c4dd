import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Synchronization
import Testing

extension WorkerIntegration {
    /// Ownership changes: a crash and restart, and a second worker joining mid-stream.
    @Suite struct Ownership {
        /// (e) A worker dies without committing; its successor resumes from the last commit and the
        /// device ends up showing the right state.
        @Test func crashReplaysFromTheLastCommit() async throws {
            let harness = try IntegrationHarness(partitions: 2)
            let keys = (0..<4).map { "crash-\($0)" }
            let base = IntegrationHarness.now - 600
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(100 + index), at: base - 10)
            }
            let first = try harness.makeWorker(name: "e1")
            try first.start()
            for key in keys {
                try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-0", key: key, timestamp: base, state: "{\"phase\":\"one\"}"))
            }
            try await harness.eventually("batch 1 delivered and committed") { try harness.allCommitted() }

            // APNs goes down, batch 2 arrives and cannot be delivered, then the worker dies.
            let now = Date().timeIntervalSince1970
            try harness.simulator.setFaults(APNsSimulatorFaults(outageStart: now, outageEnd: now + 3600))
            for step in 1...3 {
                for key in keys {
                    try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-\(step)", key: key, timestamp: base + Int64(step) * 10,
                                                                                      state: "{\"phase\":\"two-\(step)\"}"))
                }
            }
            // At least: delivery is at-least-once, and a rebalance on a loaded machine can make the
            // worker read some events again.
            try await harness.eventually("batch 2 read by the first worker") { first.summary.eventsIn >= keys.count * 4 }
            await first.abort()
            let committedAtCrash = try harness.committed()
            let ends = try harness.endOffsets()
            let replay = ends.reduce(0) { total, entry in total + Int(entry.value - ((committedAtCrash[entry.key] ?? nil) ?? 0)) }
            #expect(replay == keys.count * 3, "the crash left \(replay) events uncommitted")

            try harness.simulator.setFaults(APNsSimulatorFaults())
            let second = try harness.makeWorker(name: "e2")
            try second.start()
            try await harness.eventually("every key shows its last state") {
                keys.indices.allSatisfy { harness.simulator.deviceView(token: IntegrationHarness.token(100 + $0))?.contentState.contains("two-3") == true }
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            #expect(second.summary.eventsIn == replay)
            await second.stop(timeout: .seconds(5))
        }

        /// (f) A second worker joins mid-stream: no event is committed undelivered (every key ends
        /// on its last state, every offset is committed) and no target is sent to by both owners at once.
        @Test func rebalanceHandsOffWithoutOverlap() async throws {
            let harness = try IntegrationHarness(partitions: 4)
            let keys = (0..<8).map { "job-\($0)" }
            let base = IntegrationHarness.now - 900
            for (index, key) in keys.enumerated() {
                try await harness.registerToken(key: key, token: IntegrationHarness.token(200 + index), at: base - 10)
            }
            let first = try harness.makeWorker(name: "f1")
            try first.start()
            try await harness.eventually("the first worker owns partitions") { first.isReady().isReady }

            let steps = 60
            let producing = Task {
                for step in 0..<steps {
                    for key in keys {
                        try await harness.produceEvent(key: key, IntegrationHarness.event(id: "\(key)-\(step)", key: key, timestamp: base + Int64(step),
                                                                                          state: "{\"phase\":\"p\(step / 10)\",\"progress\":\(step)}"))
                    }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            try await Task.sleep(for: .seconds(1))
            let second = try harness.makeWorker(name: "f2")
            try second.start()
            try await harness.eventually("both workers own partitions", timeout: .seconds(30)) {
                first.isReady().isReady && second.isReady().isReady
            }
            try await producing.value

            try await harness.eventually("every key shows its last state", timeout: .seconds(60)) {
                keys.indices.allSatisfy {
                    harness.simulator.deviceView(token: IntegrationHarness.token(200 + $0))?.contentState.contains("\"progress\":\(steps - 1)") == true
                }
            }
            try await harness.eventually("every offset committed") { try harness.allCommitted() }
            #expect(second.summary.totalDelivered > 0, "the second worker never delivered: no handoff happened")
            #expect(first.summary.totalDelivered > 0)

            // No target had sends of both workers in flight at the same time.
            let intervals = harness.sendIntervals()
            for key in keys {
                let mine = intervals.filter { $0.key == key }
                for a in mine where a.worker == "f1" {
                    for b in mine where b.worker == "f2" {
                        #expect(a.completed <= b.started || b.completed <= a.started,
                                "\(key): f1 sent \(a.started)...\(a.completed) while f2 sent \(b.started)...\(b.completed)")
                    }
                }
            }
            await second.stop(timeout: .seconds(5))
            await first.stop(timeout: .seconds(5))
            #expect(try harness.allCommitted())
        }
    }
}
