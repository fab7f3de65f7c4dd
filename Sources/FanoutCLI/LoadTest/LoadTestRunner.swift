import APNsSimulator
import FanoutCore
import FanoutKafka
import FanoutWorker
import Foundation
import Synchronization

/// Runs `fanout loadtest`: the embedded pipeline with N workers in one group, token registrations
/// first, then the seeded mix published while the simulator's accepted pushes are audited as they
/// arrive; waits until every offset is committed and every target's final state delivered (bounded
/// by `options.timeout`), stops the workers cleanly and reports.
enum LoadTestRunner {
    /// The generator pauses while it is this many events ahead of what the workers read: the mock
    /// cluster keeps only ≈5 MiB per partition and drops older records a lagging consumer still needs.
    static let maxAhead = 20_000

    /// What the generator published, handed over when it is done.
    struct Generation: Sendable {
        var mix: LoadMix
        var counts = LoadTestReport.Produced()
        var malformedByReason: [String: Int] = [:]
        var startedAt: ContinuousClock.Instant?
        var failure: String?
    }

    static func run(options: LoadTestOptions, progress: @escaping @Sendable (String) -> Void) async throws -> LoadTestReport {
        let clock = ContinuousClock()
        let deadline = clock.now + options.timeout
        let plan = try LoadPlan(options: options)
        let directory = options.keepLogDirectory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("fanout-loadtest-\(UUID().uuidString.prefix(8))").path
        var layout = EmbeddedPipeline.Layout(
            directory: directory, apps: [(LoadMix.exportsApp, false), (LoadMix.ridesApp, true), (LoadMix.sportsApp, false)],
            activityPartitions: options.partitions, broadcastPartitions: options.broadcastPartitions)
        layout.workers = options.workers
        layout.rejectUnknownTokens = true
        // Each app signs with its own key, as apps of different teams or keys do in production: the run
        // then also shows the workers keep them on separate connections (APNs refuses a second key on one).
        layout.keyPerApp = true
        layout.deliveryMemoryCapacity = 200_000
        layout.simulatorSeed = options.seed
        var logFiles: [LogFile] = []
        let pipeline = try EmbeddedPipeline(layout: layout, configure: { configuration in
            configuration.engine.progressFields = ["*": ["progress", "minute"]]
        }, logSink: { index in
            let file = try LogFile(path: directory + "/worker-\(index).log")
            logFiles.append(file)
            return { file.write($0) }
        })
        let channels = try (0..<options.channels).map { _ in
            try pipeline.simulator.createChannel(bundleID: LoadMix.sportsApp, storagePolicy: 0)
        }
        let mix = LoadMix(plan: plan, activities: options.activities, channelIDs: channels, seed: options.seed)
        // Each token is valid for its own app's topic only (DeviceTokenNotForTopic otherwise), so a push sent
        // under the wrong app shows up as a token reported gone.
        for target in mix.targets where !target.broadcast {
            pipeline.simulator.registerToken(target.destination, state: .validFor(bundleID: target.app))
        }

        var report = LoadTestReport(
            setup: .init(seed: options.seed, workers: options.workers, activities: options.activities, channels: options.channels,
                         partitions: options.partitions, rate: options.rate, build: buildKind),
            latency: .init(measured: "per push the simulator accepted: its arrival time minus the moment the generator handed the event "
                           + "whose state it carries (same target and timestamp) to the Kafka producer; events coalesced away have no push and are not measured",
                           pushes: 0, unmatched: 0))
        var destinations: [String: Int] = [:]
        var expectations: [String: BudgetAudit.Expectation] = [:]
        for (index, target) in mix.targets.enumerated() {
            destinations[target.destination] = index
            let app = pipeline.configuration.apps.first { $0.bundleID == target.app }
            let budget = pipeline.configuration.budget(for: app, broadcast: target.broadcast)
            expectations[target.destination] = BudgetAudit.Expectation(
                name: target.broadcast ? "channel \(BudgetAudit.short(target.key))" : target.key,
                budget: .init(minInterval: seconds(budget.minInterval), burst: Double(budget.priority10Burst), perHour: Double(budget.priority10PerHour)))
        }
        let origin = Date().timeIntervalSince1970
        var audit = BudgetAudit(expectations: expectations, origin: origin, tolerance: seconds(options.intervalTolerance))
        let book = SharedLatencyBook(LatencyBook(targets: mix.targets.count))
        let ledger = ProduceLedger()
        var reader = DeliveryReader()
        let interrupted: @Sendable () -> Bool = { options.interrupt.isSet }

        progress("Kafka: mock cluster at \(pipeline.cluster.bootstrapServers) · APNs: simulator at \(pipeline.simulator.deviceURL) · "
                 + "\(options.workers) worker(s) joining group '\(pipeline.configuration.kafka.groupID)'")
        var completedAt: ContinuousClock.Instant?
        var generation: Generation?
        switch try await pipeline.startWorkers(deadline: deadline, interrupted: interrupted) {
        case .ready:
            progress("workers ready; registering \(options.activities) tokens on activity-tokens")
            if let problem = try await registerTokens(mix, pipeline: pipeline, ledger: ledger, deadline: deadline, options: options) {
                report.problems.append(problem)
                break
            }
            progress("publishing \(options.events) events")
            let state = GenerationSlot()
            let task = Task { await generate(mix, pipeline: pipeline, ledger: ledger, book: book, options: options, deadline: deadline, into: state) }
            var pendingFinals: [String: LoadMix.Final]?
            var lastProgress = clock.now
            while true {
                reader.read(pipeline.simulator, into: &audit, book: book, destinations: destinations)
                if pendingFinals == nil, let done = state.value {
                    generation = done
                    if let failure = done.failure {
                        report.problems.append(failure)
                        break
                    }
                    pendingFinals = finals(of: done.mix)
                }
                if var pending = pendingFinals {
                    pending = pending.filter { !audit.finalDelivered($0.key, expected: $0.value) }
                    pendingFinals = pending
                    if pending.isEmpty && ledger.settled && pipeline.pendingCommits(ends: ledger.snapshot.ends).isEmpty {
                        completedAt = clock.now
                        break
                    }
                }
                if interrupted() {
                    report.problems.append("interrupted (the workers were stopped cleanly and committed what was done)")
                    break
                }
                guard clock.now < deadline else {
                    report.problems.append("timed out after \(options.timeout); still pending: "
                                           + pending(generation: pendingFinals == nil, finals: pendingFinals ?? [:], ledger: ledger,
                                                     pipeline: pipeline, mix: mix).joined(separator: "; "))
                    break
                }
                if clock.now - lastProgress >= .seconds(5) {
                    lastProgress = clock.now
                    let summary = pipeline.summary
                    progress("… \(ledger.snapshot.acked.values.reduce(0, +)) records acknowledged, \(summary.eventsIn) events consumed, "
                             + "\(audit.observed) pushes accepted")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            task.cancel()
            _ = await task.result
            generation = generation ?? state.value
        case .interrupted:
            report.problems.append("interrupted before the workers were ready")
        case .timedOut(let reasons):
            report.problems.append("the workers did not become ready within \(options.timeout): \(reasons)")
        }

        try await pipeline.shutdown()
        // Pushes accepted while the workers drained are audited too.
        reader.read(pipeline.simulator, into: &audit, book: book, destinations: destinations)
        let committed = try await pipeline.committedOffsets()
        let summary = pipeline.summary
        let produced = generation?.mix ?? mix
        audit.checkFinalStates(finals(of: produced))

        if var counts = generation?.counts {
            counts.tokenRegistrations = options.activities
            let ledgerState = ledger.snapshot
            counts.acknowledged = ledgerState.acked.values.reduce(0, +)
            counts.failed = ledgerState.failed.values.reduce(0, +)
            report.produced = counts
            report.malformedByReason = generation?.malformedByReason ?? [:]
            if let start = generation?.startedAt, let end = completedAt {
                report.consumed.seconds = seconds(end - start)
            }
        }
        report.consumed.events = summary.eventsIn
        if report.consumed.seconds > 0 { report.consumed.perSecond = Double(report.consumed.events) / report.consumed.seconds }
        report.sends = summary.sends.keys.sorted { (a: WorkerSummary.SendKey, b: WorkerSummary.SendKey) in
            ("\(a.lane)", a.priority) < ("\(b.lane)", b.priority)
        }.map { key in
            LoadTestReport.Sends(lane: "\(key.lane)", priority: key.priority, attempted: summary.sends[key] ?? 0, delivered: summary.delivered[key] ?? 0)
        }
        report.acceptedByPriority = Dictionary(uniqueKeysWithValues: audit.byPriority.map { ("\($0.key)", $0.value) })
        report.coalescingRatio = audit.observed == 0 ? nil : Double(summary.eventsAccepted) / Double(audit.observed)
        report.deadLetters = summary.deadLettered
        report.latency = latency(book.withLock { $0 }, measured: report.latency.measured)
        report.checks = checks(report: report, summary: summary, audit: audit, committed: committed,
                               ends: ledger.snapshot.ends.filter { pipeline.eventPartitions.contains($0.key) },
                               missed: reader.missed, feedback: summary.feedbackRecords, logFailures: logFiles.reduce(0) { $0 + $1.failedWrites })
        report.workerLogDirectory = directory
        // A failed run keeps its directory: the workers' logs say why.
        if report.passed && options.keepLogDirectory == nil {
            do {
                try FileManager.default.removeItem(atPath: directory)
                report.workerLogDirectory = nil
            } catch {
                progress("could not remove the run's temporary directory \(directory): \(error)")
            }
        }
        return report
    }

    // MARK: Phases

    /// Publishes every activity's update token and waits until the workers applied them all, so no
    /// event waits for its token (or is dead-lettered as no-token). Returns a problem on timeout.
    private static func registerTokens(_ mix: LoadMix, pipeline: EmbeddedPipeline, ledger: ProduceLedger,
                                       deadline: ContinuousClock.Instant, options: LoadTestOptions) async throws -> String? {
        let topic = pipeline.configuration.kafka.topics.activityTokens
        let now = Int64(Date().timeIntervalSince1970)
        for index in 0..<mix.activityCount {
            let record = mix.registration(index, at: now)
            guard try await produce(topic: topic, key: record.key, value: record.value, pipeline: pipeline, ledger: ledger,
                                    deadline: deadline, options: options) else {
                return "stopped while registering tokens"
            }
        }
        while pipeline.summary.tokenUpdates < mix.activityCount {
            if options.interrupt.isSet { return "interrupted while the workers applied the token registrations" }
            guard ContinuousClock.now < deadline else {
                return "the workers applied \(pipeline.summary.tokenUpdates) of \(mix.activityCount) token registrations within \(options.timeout)"
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Publishes the mix at `options.rate`, at most `maxAhead` events ahead of the workers, and leaves
    /// what it did in `state` (also when it stops early or fails).
    private static func generate(_ mix: LoadMix, pipeline: EmbeddedPipeline, ledger: ProduceLedger, book: SharedLatencyBook,
                                 options: LoadTestOptions, deadline: ContinuousClock.Instant, into state: GenerationSlot) async {
        var generation = Generation(mix: mix)
        let start = ContinuousClock.now
        generation.startedAt = start
        do {
            while let record = try generation.mix.next(now: Int64(Date().timeIntervalSince1970)) {
                let sent = generation.counts.events
                if options.rate > 0 {
                    let due = start + .nanoseconds(Int64(Double(sent) / options.rate * 1e9))
                    if due > ContinuousClock.now + .milliseconds(2) { try await Task.sleep(until: due, clock: .continuous) }
                }
                if sent % 500 == 0 {
                    while sent - pipeline.summary.eventsIn > maxAhead && !options.interrupt.isSet && ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                }
                if case let .story(target, timestamp, _) = record.kind {
                    let now = Date().timeIntervalSince1970
                    book.withLock { $0.produced(target: target, timestamp: timestamp, at: now) }
                }
                guard try await produce(topic: record.topic.rawValue, key: record.key, value: record.value, pipeline: pipeline,
                                        ledger: ledger, deadline: deadline, options: options) else { break }
                generation.counts.events += 1
                switch record.kind {
                case .story: generation.counts.storyEvents += 1
                case .duplicate: generation.counts.duplicates += 1
                case .malformed(let reason):
                    generation.counts.malformed += 1
                    generation.malformedByReason[reason.rawValue, default: 0] += 1
                }
            }
        } catch is CancellationError {
            // Cancelled only after the runner stopped waiting (interrupt, timeout): what was published is reported.
        } catch {
            generation.failure = "publishing the mix failed: \(error)"
        }
        generation.counts.seconds = seconds(ContinuousClock.now - start)
        if generation.counts.seconds > 0 { generation.counts.perSecond = Double(generation.counts.events) / generation.counts.seconds }
        state.value = generation
    }

    /// Enqueues one record, waiting while the producer's queue is full. False when stopped (interrupt, deadline).
    private static func produce(topic: String, key: String, value: [UInt8], pipeline: EmbeddedPipeline, ledger: ProduceLedger,
                                deadline: ContinuousClock.Instant, options: LoadTestOptions) async throws -> Bool {
        while true {
            if options.interrupt.isSet || ContinuousClock.now >= deadline || Task.isCancelled { return false }
            do {
                try pipeline.producer.produce(topic: topic, key: Array(key.utf8), value: value) { [ledger] result in
                    ledger.record(result, topic: topic)
                }
                ledger.enqueued(topic)
                return true
            } catch let error as KafkaError where error.code == .queueFull {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    // MARK: Results

    static func finals(of mix: LoadMix) -> [String: LoadMix.Final] {
        var finals: [String: LoadMix.Final] = [:]
        for (index, target) in mix.targets.enumerated() { if let final = mix.finals[index] { finals[target.destination] = final } }
        return finals
    }

    private static func pending(generation: Bool, finals: [String: LoadMix.Final], ledger: ProduceLedger, pipeline: EmbeddedPipeline,
                                mix: LoadMix) -> [String] {
        var pending: [String] = []
        if generation { pending.append("the mix was still being published") }
        let state = ledger.snapshot
        for (topic, count) in state.enqueued.sorted(by: { $0.key < $1.key }) where (state.acked[topic] ?? 0) + (state.failed[topic] ?? 0) < count {
            pending.append("\(topic): \(count - (state.acked[topic] ?? 0)) record(s) not acknowledged by Kafka")
        }
        pending += pipeline.pendingCommits(ends: state.ends)
        if !finals.isEmpty {
            let names = mix.targets.filter { finals[$0.destination] != nil }.prefix(3).map(\.key)
            pending.append("\(finals.count) target(s) without their final state delivered (e.g. \(names.joined(separator: ", ")))")
        }
        return pending
    }

    private static func latency(_ book: LatencyBook, measured: String) -> LoadTestReport.Latency {
        let ranks = book.percentiles([50, 90, 99, 100]).map { $0.map { $0 * 1000 } }
        return LoadTestReport.Latency(measured: measured, pushes: book.latencies.count, unmatched: book.unmatched,
                                      p50Millis: ranks?[0], p90Millis: ranks?[1], p99Millis: ranks?[2], maxMillis: ranks?[3])
    }

    static func checks(report: LoadTestReport, summary: WorkerSummary, audit: BudgetAudit, committed: [PartitionID: Int64?],
                       ends: [PartitionID: Int64], missed: Int, feedback: Int, logFailures: Int) -> [LoadTestReport.Check] {
        var checks: [LoadTestReport.Check] = []
        func check(_ name: String, _ description: String, _ count: Int, _ example: String?) {
            checks.append(.init(name: name, description: description, passed: count == 0, count: count, example: count == 0 ? nil : example))
        }
        let produced = report.produced
        check("produced-acknowledged", "every published record acknowledged by Kafka",
              produced.failed + max(0, produced.events + produced.tokenRegistrations - produced.acknowledged - produced.failed),
              "\(produced.acknowledged) acknowledged, \(produced.failed) refused of \(produced.events + produced.tokenRegistrations)")
        check("consumed", "every published event consumed by a worker", max(0, produced.events - summary.eventsIn),
              "\(summary.eventsIn) consumed of \(produced.events) published")
        let lagging = ends.sorted { $0.key < $1.key }.filter { partition, end in (committed[partition] ?? nil) != end }
        check("committed", "every offset committed (consumer-group lag 0)", lagging.count,
              lagging.first.map { "\($0.key): committed \((committed[$0.key] ?? nil).map(String.init) ?? "nothing") of \($0.value)" })
        let reasons = Set(report.deadLetters.keys).union(report.malformedByReason.keys)
        let mismatched = reasons.sorted().filter { report.deadLetters[$0, default: 0] != report.malformedByReason[$0, default: 0] }
        check("dead-letters", "dead letters are exactly the malformed events, by reason", mismatched.count,
              mismatched.first.map { "\($0): \(report.deadLetters[$0, default: 0]) dead-lettered, \(report.malformedByReason[$0, default: 0]) malformed published" })
        check("no-feedback", "no token reported gone (every token is valid)", feedback, "\(feedback) activity-token-feedback record(s)")
        for rule in BudgetAudit.Rule.allCases {
            let violations = audit.violations[rule] ?? BudgetAudit.Violations()
            check(rule.rawValue, rule.summary, violations.count, violations.example)
        }
        check("audited", "every accepted push audited", missed, "\(missed) push(es) left the simulator's memory before being read")
        check("worker-logs", "every worker log line written", logFailures, "\(logFailures) line(s) could not be written")
        return checks
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static var buildKind: String {
        #if DEBUG
        "debug"
        #else
        "release"
        #endif
    }
}

/// Follows the simulator's accepted pushes by sequence number, feeding each to the audit and the latency book.
struct DeliveryReader: Sendable {
    private(set) var next = 0
    private(set) var missed = 0

    mutating func read(_ simulator: APNsSimulator, into audit: inout BudgetAudit, book: SharedLatencyBook, destinations: [String: Int]) {
        let batch = simulator.deliveries(from: next)
        next = batch.next
        missed += batch.missed
        guard !batch.records.isEmpty else { return }
        book.withLock { book in
            for record in batch.records {
                audit.observe(record)
                if let target = destinations[record.token ?? record.channel ?? ""] {
                    book.delivered(target: target, timestamp: Int64(record.timestamp), at: record.time)
                }
            }
        }
    }
}

/// The latency book, shared by the generator (produce times) and the delivery reader.
final class SharedLatencyBook: Sendable {
    private let book: Mutex<LatencyBook>
    init(_ book: LatencyBook) { self.book = Mutex(book) }
    func withLock<Result: Sendable>(_ body: (inout LatencyBook) -> Result) -> Result { book.withLock { body(&$0) } }
}

/// Where the generator leaves what it published when it is done.
final class GenerationSlot: Sendable {
    private let slot = Mutex<LoadTestRunner.Generation?>(nil)
    var value: LoadTestRunner.Generation? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}
