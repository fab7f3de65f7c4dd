import FanoutCore
import FanoutKafka
import Synchronization

/// What a producer (the demo's player, the load test's generator) published and Kafka acknowledged. Thread-safe: completions arrive on librdkafka's
/// background thread.
final class ProduceLedger: Sendable {
    struct State: Sendable {
        var enqueued: [String: Int] = [:]
        var acked: [String: Int] = [:]
        /// Next offset to be written per partition (highest acknowledged offset + 1).
        var ends: [PartitionID: Int64] = [:]
        var failed: [String: Int] = [:]
        var failures: [String] = []
        /// Token → UNIX seconds when the simulator started answering 410 for it.
        var unregistered: [String: Double] = [:]
    }

    private let state = Mutex(State())

    var snapshot: State { state.withLock { $0 } }

    func enqueued(_ topic: String) { state.withLock { $0.enqueued[topic, default: 0] += 1 } }

    func record(_ result: Result<KafkaDeliveryReport, KafkaError>, topic: String) {
        state.withLock { state in
            switch result {
            case .success(let report):
                state.acked[topic, default: 0] += 1
                let partition = PartitionID(topic: report.topic, partition: report.partition)
                state.ends[partition] = max(state.ends[partition] ?? 0, report.offset + 1)
            case .failure(let error):
                state.failed[topic, default: 0] += 1
                if state.failures.count < 20 { state.failures.append("\(topic): \(error)") }
            }
        }
    }

    func unregistered(_ token: String, at time: Double) { state.withLock { $0.unregistered[token] = time } }

    /// Every enqueued record acknowledged (or failed).
    var settled: Bool {
        state.withLock { state in
            state.enqueued.allSatisfy { topic, count in (state.acked[topic] ?? 0) + (state.failed[topic] ?? 0) >= count }
        }
    }
}
