import FanoutCore
import FanoutKafka
import Foundation

/// Restores handed-over target state (docs/design.md §11): for each `.restoreState` the engine asks
/// for, reads partition p of the `fanout-state` changelog from the beginning up to the high watermark
/// seen at the request, keeps the newest record of each key (a tombstone removes the key), and reports
/// the records to the engine (`WorkerCore.stateRestored`), which lets the partition send only then.
/// Unlike activity-tokens, the changelog is not followed afterwards: while this worker owns the
/// partition it is the only writer.
///
/// A record that cannot be read is skipped and counted (`fanout_state_records_total{kind="unreadable"}`,
/// with a warning once per partition read): its target starts afresh, as it would without a changelog.
///
/// Threading: one thread of its own runs every blocking reader call; `restore`/`cancel` only queue a
/// request and are safe from any thread.
final class StateRestorer: Sendable {
    private enum Request: Sendable {
        case restore(Int32, AssignmentID)
        case cancel(Int32)
    }

    /// One partition being read: the watermark to reach, the assignment it is read for, and the newest
    /// record bytes per key so far (nil: tombstoned).
    private struct Reading {
        var high: Int64
        var assignment: AssignmentID
        var records: [String: [UInt8]?] = [:]
    }

    private let reader: KafkaPartitionReader
    private let topic: String
    private let core: WorkerCore
    private let requests = RequestThread<Request>(name: "fanout-state")

    init(configuration: KafkaConfiguration, topic: String, core: WorkerCore) throws {
        reader = try KafkaPartitionReader(configuration: configuration, log: KafkaLogBridge.handler(core.log))
        self.topic = topic
        self.core = core
    }

    func restore(_ partition: Int32, assignment: AssignmentID) { requests.enqueue(.restore(partition, assignment)) }

    /// The partition was revoked or lost before its state was read: stop reading it.
    func cancel(_ partition: Int32) { requests.enqueue(.cancel(partition)) }

    func start() { requests.start { [self] in run() } }

    func stop() {
        guard requests.stop() else { return }
        reader.close()
    }

    private func run() {
        var reading: [Int32: Reading] = [:]
        while true {
            guard let taken = requests.take() else { return }
            for request in taken {
                switch request {
                case .restore(let partition, let assignment):
                    let tp = PartitionID(topic: topic, partition: partition)
                    if reading.removeValue(forKey: partition) != nil { unassign(tp) }
                    do {
                        let marks = try reader.watermarks(of: tp, timeout: .seconds(10))
                        if marks.isEmpty {
                            report(partition, Reading(high: 0, assignment: assignment))
                            continue
                        }
                        try reader.assign([tp: .beginning])
                        reading[partition] = Reading(high: marks.high, assignment: assignment)
                    } catch {
                        // Without the watermark there is no telling when the partition is read: the
                        // partition would never send. Fatal, like a failed token reader.
                        core.fail("the fanout-state reader could not start reading \(tp) (restart the worker): \(error)")
                        return
                    }
                case .cancel(let partition):
                    if reading.removeValue(forKey: partition) != nil { unassign(PartitionID(topic: topic, partition: partition)) }
                }
            }
            guard !reading.isEmpty else {
                requests.waitForRequests()
                continue
            }
            let batch: KafkaPollBatch
            do {
                batch = try reader.poll(timeout: .milliseconds(50), maxMessages: 4000)
            } catch {
                core.fail("the fanout-state reader failed, handed-over state cannot be restored (restart the worker): \(error)")
                return
            }
            var done: [Int32] = []
            for message in batch.messages {
                guard reading[message.partition] != nil, let key = message.key else { continue }
                reading[message.partition]!.records[String(decoding: key, as: UTF8.self)] = .some(message.value)
                if message.offset + 1 >= reading[message.partition]!.high { done.append(message.partition) }
            }
            for end in batch.reachedEnd where reading[end.partition] != nil { done.append(end.partition) }
            for partition in Set(done) {
                guard let finished = reading.removeValue(forKey: partition) else { continue }
                unassign(PartitionID(topic: topic, partition: partition))
                report(partition, finished)
            }
            for error in batch.errors {
                core.log.warning("fanout-state reader error", ["error": .string(error.description)])
            }
        }
    }

    /// Decodes what `reading` found and hands it to the engine.
    private func report(_ partition: Int32, _ reading: Reading) {
        var records: [TargetHandoff] = []
        records.reserveCapacity(reading.records.count)
        var unreadable = 0
        var firstProblem: String?
        for (key, value) in reading.records {
            guard let value else { continue }  // tombstoned
            do {
                records.append(try TargetHandoff(key: key, decoding: value))
            } catch {
                unreadable += 1
                firstProblem = firstProblem ?? error.description
                core.metrics.stateRecords.labels("unreadable-" + error.code).increment()
            }
        }
        if let firstProblem {
            core.log.warning("fanout-state records could not be read and were skipped: their targets start with a full budget, as without a changelog",
                             ["partition": .string("\(topic)/\(partition)"), "unreadable": .int(unreadable), "first_problem": .string(firstProblem)])
        }
        core.metrics.stateRecords.labels("restored").increment(by: UInt64(records.count))
        core.stateRestored(partition: partition, assignment: reading.assignment, records: records)
    }

    /// Stops reading a partition. A failure leaves it assigned, which only costs reading records no
    /// longer needed: logged, not fatal.
    private func unassign(_ partition: PartitionID) {
        do { try reader.unassign([partition]) } catch {
            core.log.warning("could not stop reading a fanout-state partition", ["partition": .string(partition.description), "error": .string("\(error)")])
        }
    }
}
