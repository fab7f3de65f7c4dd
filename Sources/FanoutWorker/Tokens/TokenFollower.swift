import FanoutCore
import FanoutKafka
import Foundation

/// Follows partition p of `activity-tokens` for every owned partition p of `activity-updates`
/// (docs/design.md §2, §5): reads it from the beginning on assignment, reports when it has caught up with
/// the high watermark taken at assignment (the engine starts the partition's sends only then,
/// for that assignment), and then applies registrations, rotations and tombstones live.
///
/// Threading: one thread of its own runs every blocking reader call (poll, watermarks);
/// `follow`/`unfollow` only queue a request and are safe from any thread (the rebalance callback).
final class TokenFollower: Sendable {
    private enum Request: Sendable {
        case follow(Int32, AssignmentID)
        case unfollow(Int32)
    }

    private let reader: KafkaPartitionReader
    private let topic: String
    private let core: WorkerCore
    /// Told once per follow request: (partition, the assignment the request was for).
    private let caughtUp: @Sendable (Int32, AssignmentID) -> Void
    private let requests = RequestThread<Request>(name: "fanout-tokens")

    /// The reader's fetch nudges so far (`fanout_kafka_fetch_nudges_total{client="tokens"}`).
    var fetchNudges: KafkaFetchNudges { reader.fetchNudges }

    init(configuration: KafkaConfiguration, topic: String, core: WorkerCore, caughtUp: @escaping @Sendable (Int32, AssignmentID) -> Void) throws {
        reader = try KafkaPartitionReader(configuration: configuration, log: KafkaLogBridge.handler(core.log))
        self.topic = topic
        self.core = core
        self.caughtUp = caughtUp
    }

    func follow(_ partition: Int32, assignment: AssignmentID) { requests.enqueue(.follow(partition, assignment)) }

    func unfollow(_ partition: Int32) { requests.enqueue(.unfollow(partition)) }

    func start() { requests.start { [self] in run() } }

    func stop() {
        guard requests.stop() else { return }
        reader.close()
    }

    private func run() {
        /// Partition → high watermark still to reach, and the assignment it is read for.
        var catchingUp: [Int32: (high: Int64, assignment: AssignmentID)] = [:]
        var following = Set<Int32>()
        while true {
            guard let taken = requests.take() else { return }
            for request in taken {
                switch request {
                case .follow(let partition, let assignment):
                    let tp = PartitionID(topic: topic, partition: partition)
                    if following.contains(partition) { unassign(tp) }
                    do {
                        try reader.assign([tp: .beginning])
                        following.insert(partition)
                        let marks = try reader.watermarks(of: tp, timeout: .seconds(10))
                        if marks.isEmpty {
                            catchingUp[partition] = nil
                            caughtUp(partition, assignment)
                        } else {
                            catchingUp[partition] = (marks.high, assignment)
                        }
                    } catch {
                        // Without the watermark we cannot tell when we caught up: rely on partition EOF.
                        catchingUp[partition] = (Int64.max, assignment)
                        core.log.warning("could not read the watermarks of the token partition; waiting for its end instead",
                                         ["partition": .string(tp.description), "error": .string("\(error)")])
                    }
                case .unfollow(let partition):
                    catchingUp[partition] = nil
                    if following.remove(partition) != nil { unassign(PartitionID(topic: topic, partition: partition)) }
                }
            }
            guard !following.isEmpty else {
                requests.waitForRequests()
                continue
            }
            let batch: KafkaPollBatch
            do {
                batch = try reader.poll(timeout: .milliseconds(50), maxMessages: 2000)
            } catch {
                core.fail("the activity-tokens reader failed, token updates stopped (restart the worker): \(error)")
                return
            }
            let live = batch.messages.filter { following.contains($0.partition) }
            core.applyTokenRecords(live)
            for message in live {
                if let target = catchingUp[message.partition], message.offset + 1 >= target.high {
                    catchingUp[message.partition] = nil
                    caughtUp(message.partition, target.assignment)
                }
            }
            for end in batch.reachedEnd {
                guard let target = catchingUp.removeValue(forKey: end.partition) else { continue }
                caughtUp(end.partition, target.assignment)
            }
            for error in batch.errors {
                core.log.warning("activity-tokens reader error", ["error": .string(error.description)])
            }
        }
    }

    /// Stops reading a token partition. A failure leaves it assigned, which only costs reading
    /// records the engine no longer needs: logged, not fatal.
    private func unassign(_ partition: PartitionID) {
        do { try reader.unassign([partition]) } catch {
            core.log.warning("could not stop reading a token partition", ["partition": .string(partition.description), "error": .string("\(error)")])
        }
    }
}
