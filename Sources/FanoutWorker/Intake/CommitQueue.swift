import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// Executes the engine's `.commit` actions on a thread of its own, so a commit the broker takes 40 s
/// to answer (a rebalance in progress on the coordinator) never stops decoding, deciding or sending.
///
/// At most one commit is outstanding; points the engine hands out meanwhile wait in `next` (newest
/// point per partition wins), so memory stays one entry per partition however long Kafka takes.
/// Every answer goes back to the engine (`WorkerCore.commitAnswered`): refused points are offered
/// again at its next commit interval.
final class CommitQueue: Sendable {
    private struct State: Sendable {
        var next: [PartitionID: Int64] = [:]
        var running = false
    }

    private let consumer: KafkaConsumer
    private let core: WorkerCore
    private let acknowledged: @Sendable ([CommitPoint]) -> Void
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "fanout-commit")

    /// `acknowledged`: told of every commit Kafka accepted (the lag gauge counts from it).
    init(consumer: KafkaConsumer, core: WorkerCore, acknowledged: @escaping @Sendable ([CommitPoint]) -> Void) {
        self.consumer = consumer
        self.core = core
        self.acknowledged = acknowledged
    }

    /// Commits `points` as soon as the commit before them was answered; never blocks.
    func enqueue(_ points: [CommitPoint]) {
        guard !points.isEmpty else { return }
        let start = state.withLock { state -> Bool in
            for point in points { state.next[point.partition] = max(point.offset, state.next[point.partition] ?? .min) }
            guard !state.running else { return false }
            state.running = true
            return true
        }
        if start { queue.async { [self] in drainQueue() } }
    }

    /// Blocking: commits `points` now, on the caller's thread (the final commit at shutdown).
    func commitNow(_ points: [CommitPoint]) {
        guard !points.isEmpty else { return }
        commit(points)
    }

    private func drainQueue() {
        while true {
            let batch: [CommitPoint] = state.withLock { state in
                defer { state.next.removeAll() }
                if state.next.isEmpty { state.running = false }
                return state.next.map { CommitPoint(partition: $0.key, offset: $0.value) }
            }
            guard !batch.isEmpty else { return }
            commit(batch)
        }
    }

    private func commit(_ points: [CommitPoint]) {
        var offsets: [TopicPartition: Int64] = [:]
        for point in points { offsets[TopicPartition(point.partition.topic, point.partition.partition)] = point.offset }
        do {
            try consumer.commit(offsets)
            core.metrics.commits.labels("ok").increment()
            core.commitAnswered(points, failed: [])
            acknowledged(points)
        } catch let error as KafkaError {
            core.metrics.commits.labels("failed").increment()
            let failed = error.partitionFailures.isEmpty
                ? Set(points.map(\.partition))
                : Set(error.partitionFailures.map { PartitionID(topic: $0.partition.topic, partition: $0.partition.partition) })
            core.commitAnswered(points, failed: failed)
            core.log.warning("offset commit failed; the engine offers it again with the next", ["error": .string(error.description)])
        } catch {
            core.metrics.commits.labels("failed").increment()
            core.commitAnswered(points, failed: Set(points.map(\.partition)))
            core.log.warning("offset commit failed; the engine offers it again with the next", ["error": .string("\(error)")])
        }
    }
}
