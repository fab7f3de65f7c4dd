import Foundation
import Synchronization
import Testing
@testable import FanoutWorker

extension WorkerIntegration {
    /// A worker whose Kafka consumer (or activity-tokens reader) died cannot do its job: it must say so
    /// on /readyz and tell `fanout run`, which stops it and exits 1, rather than hold its partitions
    /// while doing nothing.
    @Suite struct Failure {
        @Test func aFailedWorkerIsNotReadyAndTellsItsOwnerOnce() async throws {
            let harness = try IntegrationHarness(partitions: 1)
            let worker = try harness.makeWorker(name: "failing", configuration: harness.configuration())
            try worker.start()
            try await harness.eventually("ready") { worker.isReady().isReady }
            let told = Mutex<[String]>([])
            worker.whenFailed { reason in told.withLock { $0.append(reason) } }
            worker.core.fail("the Kafka consumer failed, intake stopped (restart the worker): test")
            worker.core.fail("a second failure is not news")
            #expect(told.withLock { $0 } == ["the Kafka consumer failed, intake stopped (restart the worker): test"])
            let readiness = worker.isReady()
            #expect(!readiness.isReady)
            #expect(readiness.reasons.contains("worker failed: the Kafka consumer failed, intake stopped (restart the worker): test"))
            // Asking after the fact answers at once.
            let late = Mutex<String?>(nil)
            worker.whenFailed { reason in late.withLock { $0 = reason } }
            #expect(late.withLock { $0 } == told.withLock { $0.first })
            await worker.stop(timeout: .seconds(5))
        }
    }
}
