import APNsSimulator
import FanoutKafka
import FanoutWorker
import Foundation
import Synchronization

/// Runs the demo: builds the stage, waits for the worker to be assigned, plays the scene while
/// showing every Lock Screen change, waits until every event is committed, stops, then checks the
/// result against the scene's expectations. Never hangs: everything is bounded by `options.timeout`.
enum DemoRunner {
    static func run(options: DemoOptions, console: DemoConsole) async throws -> DemoOutcome {
        let clock = ContinuousClock()
        let deadline = clock.now + options.timeout
        let directory = options.keepLogDirectory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("fanout-demo-\(UUID().uuidString.prefix(8))").path
        let stage = try DemoStage(directory: directory, keepLogs: options.keepLogDirectory != nil,
                                  workerLogSink: options.workerLogsToStderr ? Log.standardErrorSink : nil, speed: options.speed)
        let tail = stage.tail
        console.note(console.paint("Kafka: mock cluster at \(stage.cluster.bootstrapServers) · APNs: simulator at \(stage.simulator.deviceURL)"
                                   + " · worker joining group '\(stage.configuration.kafka.groupID)'", .dim))
        if let path = stage.workerLogPath { console.note(console.paint("Worker log (JSON lines): \(path)", .dim)) }
        var problems: [String] = []

        let startup = clock.now
        switch try await stage.pipeline.startWorkers(deadline: deadline, interrupted: { options.interrupt.isSet }) {
        case .ready:
            console.note(console.paint("Worker ready in \(format(clock.now - startup)) — playing the scene"
                                       + (options.speed == 1 ? "" : " at \(options.speed)×") + ".", .dim))
        case .interrupted:
            problems.append(interruptedProblem)
        case .timedOut(let reasons):
            problems.append("the worker did not become ready within \(options.timeout): \(reasons)")
        }

        // Story second 0 lies `length` seconds in the past, so no event is dated in the future.
        let scene = DemoScene(base: Int64(Date().timeIntervalSince1970) - Int64(DemoScene.length), channel: stage.channel)
        let ledger = ProduceLedger()
        let player = DemoPlayer(scene: scene, producer: stage.producer, simulator: stage.simulator, ledger: ledger,
                                console: console, speed: options.speed)
        var board = LockScreenBoard(cards: scene.cards)
        console.startClock()
        if problems.isEmpty, let problem = try await playPrelude(player, worker: stage.worker, deadline: deadline, options: options) {
            problems.append(problem)
        }
        if problems.isEmpty {
            problems += try await playAndWatch(player, board: &board, stage: stage, deadline: deadline, options: options,
                                               console: console)
        }
        let seconds = console.elapsed

        try await stage.shutdown()
        let summary = stage.worker.summary
        let committed = try await stage.pipeline.committedOffsets()

        var outcome = DemoOutcome(
            scene: scene, faces: board.faces, worker: summary, ledger: ledger.snapshot, committed: committed,
            eventPartitions: stage.eventPartitions, deadLetters: deadLetters(tail.records, stage: stage),
            feedback: feedback(tail.records, stage: stage), deliveries: stage.simulator.deliveries(),
            simulatorStats: stage.simulator.stats(), seconds: seconds, workerLogPath: stage.workerLogPath,
            deliveryLogPath: stage.deliveryLogPath, workerLogWriteFailures: stage.workerLogFile?.failedWrites ?? 0,
            problems: problems)
        outcome.interrupted = options.interrupt.isSet
        if problems.isEmpty { outcome.problems = DemoChecks.problems(in: outcome) }
        // A failed run keeps its directory: the worker's log says why.
        if outcome.succeeded && options.keepLogDirectory == nil {
            do {
                try FileManager.default.removeItem(atPath: directory)
                outcome.workerLogPath = nil
            } catch {
                console.line("note: could not remove the demo's temporary directory \(directory): \(error)")
            }
        }
        return outcome
    }

    /// Plays story second 0 (token registrations) and waits until the worker applied them.
    private static func playPrelude(_ player: DemoPlayer, worker: Worker, deadline: ContinuousClock.Instant,
                                    options: DemoOptions) async throws -> String? {
        try await player.play(player.prelude, from: .now)
        let registrations = player.prelude.filter {
            if case .produce(.activityTokens, _, _) = $0.action { return true }
            return false
        }.count
        while worker.summary.tokenUpdates < registrations {
            if options.interrupt.isSet { return interruptedProblem }
            guard ContinuousClock.now < deadline else {
                return "the worker did not apply the \(registrations) token registrations of the scene's start within \(options.timeout)"
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Plays the story while showing what changes, until every record is acknowledged, every event
    /// partition committed to its end and every dead letter and feedback record read back.
    /// Returns the problems (a failed publish, or what was pending at the deadline).
    private static func playAndWatch(_ player: DemoPlayer, board: inout LockScreenBoard, stage: DemoStage,
                                     deadline: ContinuousClock.Instant, options: DemoOptions, console: DemoConsole) async throws -> [String] {
        let playerState = Mutex<PlayerState>(.playing)
        let sceneStart = ContinuousClock.now
        let playTask = Task {
            do {
                try await player.play(player.story, from: sceneStart)
                playerState.withLock { $0 = .finished }
            } catch {
                playerState.withLock { $0 = .failed("\(error)") }
            }
        }
        defer { playTask.cancel() }
        var shownTails = 0
        var problems: [String] = []
        while true {
            showChanges(&board, stage: stage, tail: stage.tail, scene: player.scene, shownTails: &shownTails, console: console)
            let state = playerState.withLock { $0 }
            if case .failed(let reason) = state {
                problems.append("publishing the scene failed: \(reason)")
                break
            }
            let ledgerState = player.ledger.snapshot
            if !ledgerState.failures.isEmpty {
                problems.append("Kafka did not accept every scene record: \(ledgerState.failures.joined(separator: "; "))")
                break
            }
            if state == .finished && player.ledger.settled
                && stage.pipeline.pendingCommits(ends: ledgerState.ends).isEmpty
                && outcomesShown(tail: stage.tail, summary: stage.worker.summary) {
                break
            }
            if options.interrupt.isSet {
                problems.append(interruptedProblem)
                break
            }
            guard ContinuousClock.now < deadline else {
                problems.append("timed out after \(options.timeout); still pending:")
                problems += pendingWork(player: state, ledger: player.ledger, stage: stage, board: board, scene: player.scene)
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        playTask.cancel()
        _ = await playTask.value
        showChanges(&board, stage: stage, tail: stage.tail, scene: player.scene, shownTails: &shownTails, console: console)
        return problems
    }

    static let interruptedProblem = "interrupted before the scene ended (the worker was stopped cleanly and committed what was done)"

    enum PlayerState: Equatable, Sendable {
        case playing, finished
        case failed(String)
    }

    // MARK: Showing what changed

    private static func showChanges(_ board: inout LockScreenBoard, stage: DemoStage, tail: KafkaTopicTail, scene: DemoScene,
                                    shownTails: inout Int, console: DemoConsole) {
        var views: [String: DeviceView] = [:]
        for card in scene.cards {
            for token in card.tokens { if let view = stage.simulator.deviceView(token: token) { views[token] = view } }
            if let channel = card.channel, let view = stage.simulator.deviceView(channel: channel) { views[channel] = view }
        }
        let records = tail.records
        let feedbackRecords = feedback(records, stage: stage)
        for line in board.update(views: views, deliveries: stage.simulator.deliveries(), goneTokens: Set(feedbackRecords.map(\.token))) {
            console.story(DemoSummary.describe(line, console: console))
        }
        guard records.count > shownTails else { return }
        let fresh = Array(records[shownTails...])
        shownTails = records.count
        for item in feedback(fresh, stage: stage) {
            console.story(console.paint("⚠ activity-token-feedback: \(item.key) token \(DemoScene.prefix(item.token)) → \(item.status) \(item.reason); Fanout stops sending to it", .yellow))
        }
        // Dead letters of one key and reason arriving together (a token_wait expiring) make one line.
        var groups: [[DemoOutcome.DeadLetter]] = []
        for letter in deadLetters(fresh, stage: stage) {
            if let last = groups.last?.last, last.topic == letter.topic, last.key == letter.key, last.reason == letter.reason {
                groups[groups.count - 1].append(letter)
            } else {
                groups.append([letter])
            }
        }
        for group in groups {
            let first = group[0]
            let sources = group.count == 1 ? first.source : "\(first.source) … \(group[group.count - 1].source)"
            let count = group.count == 1 ? "" : " ×\(group.count)"
            console.story(console.paint("✗ \(first.topic): \(first.key) — \(first.reason)\(count) (from \(sources))", .red))
        }
    }

    // MARK: Completion

    private static func outcomesShown(tail: KafkaTopicTail, summary: WorkerSummary) -> Bool {
        let records = tail.records
        let feedbackTopic = FanoutConfiguration.defaults().kafka.topics.activityTokenFeedback
        let feedbackCount = records.filter { $0.topic == feedbackTopic }.count
        return feedbackCount >= summary.feedbackRecords && records.count - feedbackCount >= summary.totalDeadLettered
    }

    private static func pendingWork(player: PlayerState, ledger: ProduceLedger, stage: DemoStage, board: LockScreenBoard,
                                    scene: DemoScene) -> [String] {
        var pending: [String] = []
        if player == .playing { pending.append("  the scene was still being published") }
        let state = ledger.snapshot
        for (topic, count) in state.enqueued.sorted(by: { $0.key < $1.key }) where (state.acked[topic] ?? 0) < count {
            pending.append("  \(topic): \(count - (state.acked[topic] ?? 0)) record(s) not acknowledged by Kafka")
        }
        pending += stage.pipeline.pendingCommits(ends: state.ends).map { "  " + $0 }
        for (name, expected) in scene.expectedFinal.sorted(by: { $0.key < $1.key }) {
            let face = board.faces[name]
            if face == nil || !DemoChecks.sameJSON(face!.contentState, expected.contentState) || face!.ended != expected.ended {
                pending.append("  \(name) does not show its final state yet (shows: \(face?.text ?? "nothing"))")
            }
        }
        return pending
    }

    // MARK: Reading the outcome topics

    static func deadLetters(_ records: [KafkaMessage], stage: DemoStage) -> [DemoOutcome.DeadLetter] {
        records.filter { $0.topic != stage.configuration.kafka.topics.activityTokenFeedback }.map { record in
            DemoOutcome.DeadLetter(topic: record.topic, key: text(record.key) ?? "(no key)",
                                   reason: text(record.header(DeadLetterProducer.errorHeader)?.value) ?? "(no fanout-error header)",
                                   source: text(record.header(DeadLetterProducer.sourceHeader)?.value) ?? "?",
                                   detail: text(record.header(DeadLetterProducer.detailHeader)?.value))
        }
    }

    static func feedback(_ records: [KafkaMessage], stage: DemoStage) -> [DemoOutcome.Feedback] {
        records.filter { $0.topic == stage.configuration.kafka.topics.activityTokenFeedback }.compactMap { record in
            guard let value = record.value,
                  let object = (try? JSONSerialization.jsonObject(with: Data(value))) as? [String: Any] else { return nil }
            return DemoOutcome.Feedback(key: object["key"] as? String ?? text(record.key) ?? "?", token: object["token"] as? String ?? "",
                                        status: (object["status"] as? NSNumber)?.intValue ?? 0, reason: object["reason"] as? String ?? "")
        }
    }

    private static func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    static func format(_ duration: Duration) -> String {
        String(format: "%.1f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}
