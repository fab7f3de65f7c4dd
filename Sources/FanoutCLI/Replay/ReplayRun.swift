import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// A setup or copy failure of `fanout replay`, in words a person can act on (exit code 1).
struct ReplayError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Delivery results, written by the producer's completion thread, read by the copy loop.
final class ReplayDeliveries: Sendable {
    private let state: Mutex<ReplaySummary>
    init(_ summary: ReplaySummary) { state = Mutex(summary) }
    func withLock<R: Sendable>(_ body: (inout ReplaySummary) -> R) -> R { state.withLock { body(&$0) } }
}

/// Set by a signal handler; checked by the copy loop between records.
final class ReplayStop: Sendable {
    private let signal = Mutex<Int32?>(nil)
    func request(_ number: Int32) { signal.withLock { if $0 == nil { $0 = number } } }
    var requested: Int32? { signal.withLock { $0 } }
}

/// Copies a topic range with one reader and one idempotent producer, on the calling thread
/// (`run` blocks: call it from a thread of its own, never from Swift's cooperative pool).
///
/// Bounds: `readAhead` records per source partition in the merge (plus one poll batch of at most
/// `pollBatch`); librdkafka's prefetch (`queued.max.messages.kbytes`, 16 MiB unless set) and the
/// producer queue (`queue.buffering.max.messages`, 100,000) on top.
final class ReplayRun: Sendable {
    static let pollBatch = 500
    static let metadataTimeout: Duration = .seconds(10)

    private let options: ReplayOptions
    private let stop: ReplayStop
    private let progress: @Sendable (String) -> Void
    private let deliveries: ReplayDeliveries

    init(options: ReplayOptions, stop: ReplayStop = ReplayStop(), progress: @escaping @Sendable (String) -> Void) {
        self.options = options
        self.stop = stop
        self.progress = progress
        deliveries = ReplayDeliveries(ReplaySummary(from: options.from, to: options.to, speed: options.speed))
    }

    /// Throws `ReplayError`/`KafkaError` when the replay cannot start (unknown topic, partition out
    /// of range); once copying began, failures end up in the summary instead.
    func run() throws -> ReplaySummary {
        var readerProperties = options.properties
        // A range that retention deletes under the reader must fail, not silently jump ahead.
        readerProperties["auto.offset.reset"] = readerProperties["auto.offset.reset"] ?? "error"
        readerProperties["queued.max.messages.kbytes"] = readerProperties["queued.max.messages.kbytes"] ?? "16384"
        // A resumed partition waits for the fetch request already in flight to its broker, which the
        // broker may hold up to fetch.wait.max.ms (default 500) when the other partitions in it have
        // no new data. Measured on the mock, 200,000 records, 16 partitions: 7.2 s → 2.4 s at 100 ms.
        readerProperties["fetch.wait.max.ms"] = readerProperties["fetch.wait.max.ms"] ?? "100"
        let reader = try KafkaPartitionReader(configuration: KafkaConfiguration(bootstrapServers: options.bootstrap, readerProperties))
        defer { reader.close() }
        let producerProperties = options.properties.merging(options.toProperties) { _, destination in destination }
        let producer = try KafkaProducer(
            configuration: KafkaConfiguration(bootstrapServers: options.toBootstrap ?? options.bootstrap, producerProperties),
            onError: { [progress] error in progress("replay: destination: \(error)") })

        let sourceCount = try reader.partitionCounts(of: [options.from], timeout: Self.metadataTimeout)[options.from]!
        let destinationCount = try producer.partitionCounts(of: [options.to], timeout: Self.metadataTimeout)[options.to]!
        let partitions = options.partitions ?? (0..<Int32(sourceCount)).map { $0 }
        for partition in partitions where partition >= sourceCount {
            throw ReplayError("--partitions: partition \(partition) does not exist: topic '\(options.from)' has \(sourceCount) partition(s), 0...\(sourceCount - 1)")
        }
        if options.keepPartition, let missing = partitions.first(where: { $0 >= destinationCount }) {
            throw ReplayError("--keep-partition: source partition \(missing) has no counterpart: topic '\(options.to)' has \(destinationCount) partition(s), 0...\(destinationCount - 1); drop --keep-partition to choose partitions by key")
        }

        var ranges: [Int32: ReplayRange] = [:]
        for partition in partitions {
            let marks = try reader.watermarks(of: PartitionID(topic: options.from, partition: partition), timeout: Self.metadataTimeout)
            var start = marks.low
            if let asked = options.startOffset {
                if asked < marks.low {
                    progress("replay: partition \(partition): offsets below \(marks.low) no longer exist (retention); starting at \(marks.low) instead of \(asked)")
                } else {
                    start = asked
                }
            }
            let end = min(options.endOffset ?? marks.high, marks.high)
            ranges[partition] = ReplayRange(start: start, end: end, startTime: options.startTime, endTime: options.endTime)
        }
        let inOffsetRange = ranges.values.reduce(Int64(0)) { $0 + max(0, $1.end - $1.start) }
        progress("replay: \(options.from) (partitions \(partitions.map(String.init).joined(separator: ","))) → \(options.to) "
                 + "(\(destinationCount) partition(s), \(options.keepPartition ? "same partition" : "partition by key")): "
                 + "\(inOffsetRange) record(s) in the offset range"
                 + (options.startTime != nil || options.endTime != nil ? " before the time bounds" : "")
                 + (options.count.map { ", at most \($0)" } ?? "")
                 + ", " + (options.speed > 0 ? "\(options.speed)× the recorded pace" : "as fast as possible"))
        deliveries.withLock { summary in
            for partition in partitions { summary.partitions[partition] = ReplaySummary.Tally() }
        }
        var merge = ReplayMerge(ranges: ranges, readAhead: options.readAhead, count: options.count)
        let starts = ranges.filter { !$0.value.isEmpty }
        try reader.assign(Dictionary(uniqueKeysWithValues: starts.map { (PartitionID(topic: options.from, partition: $0.key), KafkaOffset.offset($0.value.start)) }))

        var copy = CopyLoop(options: options, reader: reader, producer: producer, stop: stop, progress: progress,
                            deliveries: deliveries)
        let started = ContinuousClock.now
        var copyError: String?
        do {
            try copy.run(&merge)
        } catch {
            copyError = "\(error)"
        }
        // Whatever was produced gets its acknowledgement (or failure) before the summary.
        do {
            try producer.flush(timeout: .milliseconds(Int64(options.timeout * 1000)))
        } catch {
            progress("replay: \(error); giving up on them")
            try? producer.purge(timeout: .seconds(5))
        }
        var summary = deliveries.withLock { $0 }
        summary.elapsed = ContinuousClock.now - started
        summary.produced = copy.produced
        summary.recordedFirst = copy.recorded.recordedFirst
        summary.recordedLast = copy.recorded.recordedLast
        summary.error = copyError
        summary.interruptedBy = copy.interruptedBy
        return summary
    }
}

/// The copy loop proper: reads into the merge, waits for each record's due time, produces it.
private struct CopyLoop {
    let options: ReplayOptions
    let reader: KafkaPartitionReader
    let producer: KafkaProducer
    let stop: ReplayStop
    let progress: @Sendable (String) -> Void
    let deliveries: ReplayDeliveries

    private let clock = ContinuousClock()
    private(set) var produced = 0
    private(set) var recorded = ReplaySummary(from: "", to: "", speed: 0)
    private(set) var interruptedBy: Int32?
    private var consumeWarnings = 0
    private var origin = ContinuousClock.now
    private var nextProgress: ContinuousClock.Instant?
    /// How late the latest record was produced against its schedule.
    private var behind: Duration = .zero

    init(options: ReplayOptions, reader: KafkaPartitionReader, producer: KafkaProducer, stop: ReplayStop,
         progress: @escaping @Sendable (String) -> Void, deliveries: ReplayDeliveries) {
        self.options = options
        self.reader = reader
        self.producer = producer
        self.stop = stop
        self.progress = progress
        self.deliveries = deliveries
    }

    mutating func run(_ merge: inout ReplayMerge) throws {
        origin = clock.now
        nextProgress = options.progressInterval > 0 ? origin + .seconds(options.progressInterval) : nil
        var pacer = ReplayPacer(speed: options.speed)
        while true {
            if let signal = stop.requested { interruptedBy = signal; return }
            if let failure = deliveries.withLock({ $0.failed > 0 ? ($0.firstFailure ?? "no reason given") : nil }) {
                throw ReplayError("stopped at the first record the destination did not acknowledge: \(failure)")
            }
            reportIfDue(merge)
            switch merge.next() {
            case .finished:
                return
            case .needRecords:
                try poll(&merge, timeout: .milliseconds(100))
            case .record(let record):
                let due = origin + pacer.due(recordedMilliseconds: record.timestampMilliseconds, now: clock.now - origin)
                while clock.now < due {
                    if let signal = stop.requested { interruptedBy = signal; return }
                    reportIfDue(merge)
                    try poll(&merge, timeout: min(due - clock.now, .milliseconds(100)))
                }
                behind = clock.now - due
                guard try produce(record, merge: &merge) else { return }
            }
        }
    }

    /// Produces one record, waiting (while reading on) when the producer queue is full.
    /// Returns false when a signal stopped the wait.
    private mutating func produce(_ record: KafkaMessage, merge: inout ReplayMerge) throws -> Bool {
        let source = record.partition
        let size = (record.key?.count ?? 0) + (record.value?.count ?? 0)
            + record.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
        while true {
            do {
                try producer.produce(topic: options.to, partition: options.keepPartition ? source : nil,
                                     key: record.key, value: record.value, headers: record.headers) { [deliveries] result in
                    deliveries.withLock { summary in
                        switch result {
                        case .success:
                            summary.partitions[source, default: .init()].records += 1
                            summary.partitions[source, default: .init()].bytes += size
                        case .failure(let error):
                            summary.failed += 1
                            if summary.firstFailure == nil { summary.firstFailure = "\(error)" }
                        }
                    }
                }
                produced += 1
                recorded.noteRecorded(record.timestampMilliseconds)
                return true
            } catch let error as KafkaError where error.code == .queueFull {
                if let signal = stop.requested { interruptedBy = signal; return false }
                try poll(&merge, timeout: .milliseconds(10))
            }
        }
    }

    private mutating func poll(_ merge: inout ReplayMerge, timeout: Duration) throws {
        let batch = try reader.poll(timeout: timeout, maxMessages: ReplayRun.pollBatch)
        for message in batch.messages { merge.receive(message) }
        for partition in batch.reachedEnd where partition.topic == options.from { merge.reachedEnd(partition.partition) }
        for error in batch.errors {
            if error.underlying == .autoOffsetReset || error.underlying == .offsetOutOfRange {
                throw ReplayError("records in range were deleted from '\(options.from)' before they could be read (retention): \(error)")
            }
            consumeWarnings += 1
            if consumeWarnings <= 20 { progress("replay: source: \(error)") }
        }
        let changes = merge.flowChanges()
        try reader.pause(changes.pause.map { PartitionID(topic: options.from, partition: $0) })
        try reader.resume(changes.resume.map { PartitionID(topic: options.from, partition: $0) })
    }

    private mutating func reportIfDue(_ merge: ReplayMerge) {
        guard let due = nextProgress, clock.now >= due else { return }
        report(merge: merge, elapsed: clock.now - origin)
        nextProgress = due + .seconds(options.progressInterval)
    }

    private func report(merge: ReplayMerge, elapsed: Duration) {
        let acknowledged = deliveries.withLock { $0.acknowledged }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        var line = "replay: \(produced) produced, \(acknowledged) acknowledged, "
            + String(format: "%.0f records/s", seconds > 0 ? Double(acknowledged) / seconds : 0)
            + "; \(merge.open.count) partition(s) still reading, \(merge.buffered) buffered"
        if merge.skipped > 0 { line += ", \(merge.skipped) skipped before --start-time" }
        if options.speed > 0 {
            let late = Double(behind.components.seconds) + Double(behind.components.attoseconds) / 1e18
            line += String(format: "; %.3f s behind schedule", max(0, late))
        }
        progress(line)
    }
}
