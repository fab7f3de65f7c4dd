import APNsSimulator
import Foundation
import Synchronization
import Testing

/// One scenario's run of a fleet: the harness, the generated workload streaming into it, commit
/// checks sampled every second while it runs, and at the end the checks and figures every scenario
/// reports.
final class FleetRun: Sendable {
    let name: String
    let harness: FleetHarness
    let workload: FleetWorkload
    let producer: FleetProducer
    /// Commit snapshots taken and the violations they found ("no committed offset past an undelivered event").
    /// A snapshot that could not be taken (the broker down, its answer late) proves nothing either way: counted, not failed.
    private let commitChecks = Mutex<(snapshots: Int, violations: [String], unavailable: [String])>((0, [], []))
    private let sampling = Atomic(true)
    private let sampler = Mutex<Task<Void, Never>?>(nil)
    private let tokenIndex: [String: Int]

    static let activities = 2000
    static let roundInterval = Duration.milliseconds(500)
    /// A partition that goes this long without a delivery is not at full throughput.
    static let stallThreshold = 1.5

    /// Starts the fleet with `workers`, registers every activity's token, starts the stream and waits
    /// until the workers own every partition and every partition delivers.
    init(_ name: String, workers: [Int], seed: UInt64, stateChangelog: Bool = true) async throws {
        self.name = name
        harness = try await FleetHarness(stateChangelog: stateChangelog)
        let workload = FleetWorkload(activities: Self.activities, share: 0.25, seed: seed, base: Int64(Date().timeIntervalSince1970) - 5)
        self.workload = workload
        tokenIndex = Dictionary(uniqueKeysWithValues: (0..<workload.activities).map { (workload.token($0), $0) })
        producer = try FleetProducer(workload: workload, bootstrap: harness.bootstrap)
        try await producer.registerTokens()
        let started = ContinuousClock.now
        for index in workers { try harness.startWorker(index) }
        producer.start(interval: Self.roundInterval)
        startSampling()
        try await harness.eventually("workers \(workers) own every partition", timeout: .seconds(90)) { harness.settled(Set(workers)) }
        try await waitUntilEveryPartitionDelivers(after: now, "after the first assignment")
        print("measured: [\(name)] \(workers.count) worker(s) started, every partition delivering after \(seconds(since: started))")
    }

    var now: Double { Date().timeIntervalSince1970 }

    private func startSampling() {
        let task = Task { [self] in
            while sampling.load(ordering: .relaxed) {
                do {
                    let found = try await blocking { [self] in try commitViolations() }
                    commitChecks.withLock {
                        $0.snapshots += 1
                        $0.violations += found
                    }
                } catch {
                    commitChecks.withLock { $0.unavailable.append("\(error)") }
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        sampler.withLock { $0 = task }
    }

    /// Committed offsets first, then the deliveries: a push accepted in between can only hide a
    /// violation, never make one up.
    func commitViolations() throws -> [String] {
        let committed = try harness.committed()
        let records = try harness.deliveries.refresh()
        let delivered = newestStep(records)
        var firstUndelivered: [Int32: (offset: Int64, event: ProducedEvent)] = [:]
        for event in producer.events where (delivered[event.activity] ?? -1) < event.step {
            if event.offset < firstUndelivered[event.partition]?.offset ?? .max { firstUndelivered[event.partition] = (event.offset, event) }
        }
        return firstUndelivered.compactMap { partition, first in
            guard let done = committed[partition] ?? nil, done > first.offset else { return nil }
            return "partition \(partition) committed at \(done), past offset \(first.offset) (\(workload.key(first.event.activity)) step \(first.event.step)) "
                + "whose state or a newer one the simulator never accepted"
        }
    }

    /// Activity index → the newest step the simulator accepted for it.
    func newestStep(_ records: [DeliveryRecord]) -> [Int: Int] {
        var result: [Int: Int] = [:]
        for record in records where record.kind == .device {
            guard let token = record.token, let activity = tokenIndex[token] else { continue }
            result[activity] = max(result[activity] ?? -1, Int(Int64(record.timestamp) - workload.base))
        }
        return result
    }

    func activity(of record: DeliveryRecord) -> Int? { record.token.flatMap { tokenIndex[$0] } }

    /// Waits until every partition has a delivery accepted after `time`.
    func waitUntilEveryPartitionDelivers(after time: Double, _ what: String, timeout: Duration = .seconds(60)) async throws {
        let partitionOf = producer.partitions
        try await harness.eventually("every partition delivering \(what)", timeout: timeout) {
            let records = try harness.deliveries.refresh()
            var seen: Set<Int32> = []
            for record in records.reversed() {
                guard record.time > time else { break }
                if let activity = activity(of: record), let partition = partitionOf[activity] { seen.insert(partition) }
            }
            return seen.count == harness.partitions
        }
    }

    /// Ends the stream (every activity's end, its final state), waits until every device shows it and
    /// every partition is committed to its end, checks what every scenario checks, stops the workers
    /// with SIGTERM (each must exit 0) and prints the figures. `event`: when the scenario's event began.
    @discardableResult
    func finish(event: Double) async throws -> FleetFigures {
        let streamEnded = now
        let final = try await producer.finish()
        let ends = producer.events.reduce(into: [Int32: Int64]()) { $0[$1.partition] = max($0[$1.partition] ?? 0, $1.offset + 1) }
        var missing = ""
        try await harness.eventually("every activity's end delivered and every partition committed to its end", timeout: .seconds(90),
                                     pending: { missing }) {
            let records = try harness.deliveries.refresh()
            let newest = newestStep(records)
            let behind: [Int] = (0..<workload.activities).filter { (newest[$0] ?? -1) < final }
            let committed = try harness.committed()
            let uncommitted: [Int32] = ends.keys.filter { (committed[$0] ?? nil) != ends[$0] }.sorted()
            let activities: [String] = behind.prefix(8).map { "\(workload.key($0)) at \(newest[$0] ?? -1)" }
            let partitions: [String] = uncommitted.map { partition in
                let offset: Int64? = committed[partition] ?? nil
                return "\(partition) at \(offset.map { "\($0)" } ?? "nothing") of \(ends[partition]!)"
            }
            missing = "\(behind.count) activities short of step \(final) (\(activities.joined(separator: ", "))); "
                + "partitions committed short of their end: \(partitions.joined(separator: ", "))"
            return behind.isEmpty && uncommitted.isEmpty
        }
        sampling.store(false, ordering: .relaxed)
        await sampler.withLock { $0 }?.value
        let lastCheck = try commitViolations()
        let checks = commitChecks.withLock { $0 }
        #expect(checks.violations.isEmpty && lastCheck.isEmpty,
                "[\(name)] committed past undelivered events: \((checks.violations + lastCheck).prefix(10).joined(separator: "\n"))")
        #expect(checks.snapshots >= 5, "[\(name)] only \(checks.snapshots) commit snapshots were taken")

        // Every activity's final state, as generated, on the device view.
        var wrong: [String] = []
        for index in 0..<workload.activities {
            let expected = workload.state(index, step: final, final: true) as NSDictionary
            guard let view = try harness.deviceView(token: workload.token(index)) else {
                wrong.append("\(workload.key(index)): no device view")
                continue
            }
            let shown = (try? JSONSerialization.jsonObject(with: Data(view.contentState.utf8))) as? NSDictionary
            if !view.ended || view.event != "end" || shown != expected || Int64(view.timestamp) != workload.base + Int64(final) {
                wrong.append("\(workload.key(index)): shows \(view.event) \(view.contentState) at \(view.timestamp), expected end \(expected)")
            }
        }
        #expect(wrong.isEmpty, "[\(name)] \(wrong.count) device(s) do not show their final state: \(wrong.prefix(5).joined(separator: "\n"))")

        let figures = figures(event: event, streamEnded: streamEnded, records: try harness.deliveries.refresh())
        print("measured: [\(name)] \(producer.events.count) events for \(workload.activities) activities, "
              + "\(figures.deliveries) pushes accepted; \(checks.snapshots) commit snapshots, none past an undelivered event: \(checks.violations.isEmpty && lastCheck.isEmpty)")
        if !checks.unavailable.isEmpty {
            print("measured: [\(name)] \(checks.unavailable.count) commit snapshot(s) could not be taken, first: \(checks.unavailable[0])")
        }
        print("measured: [\(name)] duplicate sends (same token and timestamp): \(figures.duplicates); "
              + "priority-10 budget overspend (sends past burst 4 + 12 an hour per token): \(figures.priority10Overspend); "
              + "pushes arriving under 0.75 s after the previous one to the same token (min_interval 1 s between send starts): \(figures.minIntervalBreaches)")
        if !figures.overBudgetTrail.isEmpty {
            print("measured: [\(name)] over budget, for example (seconds from the event): \(figures.overBudgetTrail)")
        }
        if !figures.disorderlyHandoffs.isEmpty {
            print("measured: [\(name)] handovers without an orderly handoff (seconds from the event): \(figures.disorderlyHandoffs.joined(separator: "; "))")
        }
        let kept = figures.keptGapPartition.map { "largest delivery gap of the \(harness.partitions - figures.moved.count) that did not: "
            + String(format: "%.2f s (partition %d)", figures.largestKeptGap, $0) } ?? "every partition moved"
        print("measured: [\(name)] partitions moved: \(figures.moved.sorted()); \(kept); largest gap of the moved: "
              + String(format: "%.2f s", figures.largestMovedGap))
        print("measured: [\(name)] time to full throughput after the event (until no partition goes \(Self.stallThreshold) s without a delivery): "
              + String(format: "%.2f s", figures.timeToFullThroughput))

        // Every worker still running stops cleanly.
        for (index, process) in harness.allWorkerProcesses where process.isRunning {
            process.signal(SIGTERM)
            guard let status = try await process.waitForExit(timeout: .seconds(20)) else {
                Issue.record("[\(name)] \(process.name) did not exit within 20 s of SIGTERM\n\(process.tail())")
                continue
            }
            #expect(status == 0, "[\(name)] w\(index) exit status \(status) on SIGTERM\n\(process.tail())")
        }
        return figures
    }

    /// The figures of a run from the simulator's delivery log and the workers' logs.
    func figures(event: Double, streamEnded: Double, records: [DeliveryRecord]) -> FleetFigures {
        let partitionOf = producer.partitions
        var duplicates = 0
        var seen: Set<String> = []
        for record in records where record.kind == .device {
            if !seen.insert("\(record.token ?? "")@\(record.timestamp)").inserted { duplicates += 1 }
        }
        var moved: Set<Int32> = []
        var disorderly: Set<Int32> = []
        var disorderlyEvents: [String] = []
        for (index, process) in harness.allWorkerProcesses {
            for line in process.logEvents() {
                let partitions = line.partitions(of: FleetHarness.updates)
                if line.time >= event, line.message == "partitions assigned" || line.message == "partitions revoked" || line.message.hasPrefix("partitions lost") {
                    moved.formUnion(partitions)
                }
                if line.message.hasPrefix("partitions lost") || line.message.hasPrefix("a revoke was not drained in time") {
                    disorderly.formUnion(partitions)
                    disorderlyEvents.append("w\(index) " + String(format: "%+.2f", line.time - event) + " \(line.message) \(partitions.sorted())")
                }
            }
        }
        var times: [Int32: [Double]] = [:]
        for record in records where record.time >= event - 2 && record.time <= streamEnded {
            if let activity = activity(of: record), let partition = partitionOf[activity] { times[partition, default: []].append(record.time) }
        }
        var figures = FleetFigures(deliveries: records.count, duplicates: duplicates, moved: moved)
        let budget = Self.budgetFigures(records)
        (figures.priority10Overspend, figures.minIntervalBreaches) = (budget.overspend, budget.minIntervalBreaches)
        figures.overBudgetTrail = Self.trail(of: budget.overspentTokens.keys.prefix(3), in: records, since: event)
        figures.disorderlyHandoffs = disorderlyEvents
        figures.priority10OverspendAfterOrderlyHandoffs = budget.overspentTokens.reduce(0) { sum, entry in
            guard let activity = tokenIndex[entry.key], let partition = partitionOf[activity] else { return sum + entry.value }
            return disorderly.contains(partition) ? sum : sum + entry.value
        }
        var recovered = event
        for partition in 0..<Int32(harness.partitions) {
            let points = [event - 2] + (times[partition] ?? []).sorted() + [streamEnded]
            var largest = 0.0
            for (a, b) in zip(points, points.dropFirst()) {
                largest = max(largest, b - a)
                if b - a > Self.stallThreshold && b > event { recovered = max(recovered, b) }
            }
            if moved.contains(partition) {
                figures.largestMovedGap = max(figures.largestMovedGap, largest)
            } else if largest > figures.largestKeptGap {
                figures.largestKeptGap = largest
                figures.keptGapPartition = partition
            }
        }
        figures.timeToFullThroughput = recovered - event
        return figures
    }

    /// Judged per device token from the pushes the simulator accepted, as one owner would have sent them
    /// (docs/design.md §3: burst 4, 12 an hour, at most one send a second): priority-10 pushes past what
    /// the bucket allows, and pushes closer than min_interval to the one before. A handoff without the
    /// state changelog starts every target's bucket full (docs/design.md §11), which shows up here.
    /// `overspentTokens`: each token with an overspend, and how many pushes it got past its budget.
    static func budgetFigures(_ records: [DeliveryRecord]) -> (overspend: Int, minIntervalBreaches: Int, overspentTokens: [String: Int]) {
        var byToken: [String: [DeliveryRecord]] = [:]
        for record in records where record.kind == .device { byToken[record.token ?? "", default: []].append(record) }
        var overspend = 0, breaches = 0
        var overspentTokens: [String: Int] = [:]
        for (token, pushes) in byToken {
            let before = overspend
            var credits = 4.0, countedAt = -Double.infinity, previous = -Double.infinity
            for push in pushes.sorted(by: { $0.time < $1.time }) {
                // Arrival times, not send starts: a push that waited in the client arrives late, so the
                // next one arrives ≈0.88 s after it on a loaded machine; 0.75 s leaves room for that.
                if push.time - previous < 0.75 { breaches += 1 }
                previous = push.time
                guard push.priority == 10 else { continue }
                if countedAt.isFinite { credits = min(4, credits + (push.time - countedAt) * 12 / 3600) }
                countedAt = push.time
                if credits >= 1 { credits -= 1 } else { overspend += 1 }
            }
            if overspend > before { overspentTokens[token] = overspend - before }
        }
        return (overspend, breaches, overspentTokens)
    }

    /// One line naming, for each of `tokens`, who sent its pushes and when: "token 3f2a…: p10 w1 -4.20,
    /// p10 w2 +0.35 …" (seconds from `event`, the worker by its key id), for a failure message.
    static func trail(of tokens: some Sequence<String>, in records: [DeliveryRecord], since event: Double) -> String {
        tokens.map { token in
            let pushes = records.filter { $0.kind == .device && $0.token == token }.sorted { $0.time < $1.time }
            let steps = pushes.map { push in
                let worker = push.keyID.flatMap(FleetHarness.worker(ofKeyID:)).map { "w\($0)" } ?? "w?"
                return "p\(push.priority) \(worker) " + String(format: "%+.2f", push.time - event)
            }
            return "token \(token.prefix(8))…: " + steps.joined(separator: ", ")
        }.joined(separator: "; ")
    }

    /// Pushes the simulator accepted from worker `index` (by its key id).
    func deliveries(from index: Int) throws -> [DeliveryRecord] {
        try harness.deliveries.refresh().filter { $0.keyID == FleetHarness.keyID(index) }
    }
}

struct FleetFigures {
    var deliveries: Int
    var duplicates: Int
    var moved: Set<Int32>
    var priority10Overspend = 0
    /// The same, counting only tokens whose partition was never handed over without an orderly handoff
    /// (lost to a session timeout, or revoked undrained): those the state changelog promises to keep.
    var priority10OverspendAfterOrderlyHandoffs = 0
    /// Each handover without an orderly handoff: "w2 -3.10 partitions lost … [4, 7]" (seconds from the event).
    var disorderlyHandoffs: [String] = []
    /// Who sent the pushes of a few over-budget tokens, and when (`FleetRun.trail`); empty without any.
    var overBudgetTrail = ""
    var minIntervalBreaches = 0
    var largestKeptGap = 0.0
    var keptGapPartition: Int32?
    var largestMovedGap = 0.0
    var timeToFullThroughput = 0.0
}
