import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// Reads the given partitions from the beginning on a thread of its own, started by `init`
/// (librdkafka's poll blocks), keeping what arrived for the demo to show: the dead-letter topics and
/// activity-token-feedback, as a backend consuming them would see them.
///
/// Bounds: keeps at most `capacity` records (the demo produces a handful); beyond it counts only.
final class KafkaTopicTail: Sendable {
    private struct State {
        var records: [KafkaMessage] = []
        var overflow = 0
        var errors: [String] = []
        var stopping = false
    }

    private let reader: KafkaPartitionReader
    private let capacity: Int
    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)

    init(configuration: KafkaConfiguration, partitions: [PartitionID], capacity: Int = 10_000) throws {
        reader = try KafkaPartitionReader(configuration: configuration)
        self.capacity = capacity
        try reader.assign(Dictionary(uniqueKeysWithValues: partitions.map { ($0, KafkaOffset.beginning) }))
        start()
    }

    private func start() {
        let thread = Thread.named("demo-topic-tail") { [self] in
            while !state.withLock({ $0.stopping }) {
                do {
                    let batch = try reader.poll(timeout: .milliseconds(100), maxMessages: 500)
                    state.withLock { state in
                        for message in batch.messages {
                            if state.records.count < capacity { state.records.append(message) } else { state.overflow += 1 }
                        }
                        // Transient broker errors are informational (librdkafka retries); keep the latest few.
                        for error in batch.errors where state.errors.count < 20 { state.errors.append("\(error)") }
                    }
                } catch {
                    state.withLock { $0.errors.append("reader stopped: \(error)") }
                    break
                }
            }
            finished.signal()
        }
        thread.start()
    }

    /// Records read so far, in arrival order.
    var records: [KafkaMessage] { state.withLock { $0.records } }
    var errors: [String] { state.withLock { $0.errors } }

    /// Blocking (up to one poll timeout): stops the thread and closes the reader.
    func stop() {
        let wasStopping = state.withLock { state in
            defer { state.stopping = true }
            return state.stopping
        }
        guard !wasStopping else { return }
        finished.wait()
        reader.close()
    }
}
