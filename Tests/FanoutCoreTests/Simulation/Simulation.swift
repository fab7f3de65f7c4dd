import APNsModel
@testable import FanoutCore

/// A deterministic driver: one seeded run of the engine against a simulated Kafka, APNs and token API,
/// in virtual time, checking the invariants of docs/design.md §10 as it goes and at the end.
struct Simulation {
    struct Violation: Error, CustomStringConvertible {
        var description: String
    }

    enum Done { case delivered, resolved, dropped(DropReason) }

    struct Flight {
        var request: SendRequest
        var completeAt: Nanoseconds
        var outcome: SendOutcome
        /// The push reached the device, whatever Fanout hears (an ambiguous send when the outcome is not 200).
        var reachesDevice: Bool
        /// Ownership epoch of the partition when it was sent.
        var epoch: Int
    }

    let seed: UInt64
    var random: SeededRandom
    var configuration: EngineConfiguration
    var engine: FanoutEngine
    var workload: SimulatedWorkload
    var now: Nanoseconds
    let start: Nanoseconds
    let horizon: Nanoseconds

    var position: [PartitionID: Int] = [:]
    var assigned: Set<PartitionID> = []
    var epoch: [PartitionID: Int] = [:]
    var reassignAt: [PartitionID: Nanoseconds] = [:]
    var done: [PartitionID: [Int64: Done]] = [:]
    /// The highest point the engine issued (judged when issued: Kafka may store it whatever it answers).
    var committed: [PartitionID: Int64] = [:]
    /// What Kafka holds: where the next owner resumes.
    var stored: [PartitionID: Int64] = [:]
    var watches: [String: TargetWatch] = [:]
    var device = DeviceView()
    /// Ownership epoch of its partition in which each activity's start first reached its device.
    var startReachedInEpoch: [String: Int] = [:]
    /// Activities whose start reached the device under one owner and whose end a later owner cancelled.
    var cancelledAfterHandoff: Set<String> = []
    var pushToStartBudgets: [String: PriorityBudgetModel] = [:]
    var flights: [UInt64: Flight] = [:]
    var resolutions: [(at: Nanoseconds, id: ResolutionID?, rejected: EventSource?, sources: [EventSource], kind: Done)] = []
    var tokenEvents: [(at: Nanoseconds, key: String, token: String, registeredAt: Int64)] = []
    var latestToken: [String: (token: String, registeredAt: Int64)] = [:]
    var deadTokens: Set<String> = []
    /// Offsets of sends APNs answered 410 for, keyed by token|key, until the engine asks for feedback.
    var pendingFeedback: [String: [EventSource]] = [:]
    var outages: [(from: Nanoseconds, to: Nanoseconds, tooMany: Bool)] = []
    var configBroken: (app: String, from: Nanoseconds, to: Nanoseconds)?
    var nextRevokeAt: Nanoseconds
    /// When the worker process crashes (nil: not in this run).
    var crashAt: Nanoseconds?
    var healed = false
    var steps = 0
    var nextArrival: [(PartitionID, Nanoseconds)] = []
    var assignedOrder: [PartitionID] = []
    /// Partitions the engine asked to stop fetching (backpressure).
    var fetchPaused: Set<PartitionID> = []
    /// Token partitions being read for an assignment: the catch-up is reported at `at`.
    var catchUps: [(partition: Int32, assignment: AssignmentID, at: Nanoseconds)] = []
    /// Per activity partition number: the assignment its latest followTokens was for.
    var currentAssignment: [Int32: AssignmentID] = [:]
    /// Activity partitions whose tokens were reported read for their current assignment.
    var tokensRead: Set<PartitionID> = []
    /// Assignments the engine said are over (`.assignmentEnded`): no send may name one, and a
    /// partition given up must have its last sending assignment among them.
    var endedAssignments: Set<AssignmentID> = []
    /// The assignment each partition's latest send was decided under.
    var sendAssignment: [PartitionID: AssignmentID] = [:]
    /// Revoked partitions the engine has not drained yet (no send may start for them).
    var closing: Set<PartitionID> = []
    /// Commits issued by the engine, answered at `at` (never, when the coordinator lost them).
    /// In issue order (one coordinator connection answers in order). `answered` false: the answer is
    /// lost (the commit is written or not, as `refused` says), the engine never hears of it.
    var commitAnswers: [(at: Nanoseconds, points: [CommitPoint], refused: Bool, answered: Bool, epochs: [Int], round: UInt64)] = []
    /// Channel storage-policy lookups, answered at `at`.
    var policyAnswers: [(at: Nanoseconds, app: String, channel: String)] = []
    /// Each channel's storage policy as channel management would answer (nil: the lookup fails).
    var channelPolicies: [String: ChannelStoragePolicy?] = [:]
    /// The group is rebalancing for this member (after a revoke or loss) until `settleAt`.
    var settleAt: Nanoseconds?
    /// The member's heartbeats (half the seeds with `commitInterval`; a step each, so not all): draws
    /// of their own, so they change nothing else a seed does. Each answer comes within the answer
    /// window; some start a rejoin.
    var heartbeatRandom: SeededRandom
    var heartbeatInterval: Nanoseconds = 0
    var nextHeartbeatAt: Nanoseconds?
    var heartbeatAnswer: (sentAt: Nanoseconds, at: Nanoseconds, rejoin: Bool)?
    var stats = SimulationStats()
    var changelog = SimulatedChangelog()

    init(seed: UInt64) {
        self.seed = seed
        random = SeededRandom(seed: seed)
        start = 1_772_000_000 * Nanoseconds.nanosecondsPerSecond
        horizon = Nanoseconds(random.between(60, 900)) * Nanoseconds.nanosecondsPerSecond
        now = start
        configuration = EngineConfiguration()
        configuration.randomSeed = seed
        // Odd seeds hand state over through the changelog (no random draw: even seeds run as before).
        configuration.handoffState = seed % 2 == 1
        configuration.meaningProfiles["SimAttributes"] = MeaningProfile(progressFields: ["done"], minProgressDelta: 10, maxQuiet: 30 * 1_000_000_000)
        configuration.attributesTypeByApp = ["com.sim.a": "SimAttributes", "com.sim.b": "SimAttributes"]
        configuration.frequentUpdatesApps = ["com.sim.b"]
        configuration.backoffBase = 200_000_000
        configuration.backoffCap = 60 * 1_000_000_000
        configuration.configProbeInterval = 20 * 1_000_000_000
        configuration.dedupeWindowPerPartition = 16 + random.below(64)
        configuration.forgetIdleAfter = .hours(48)
        // Ended targets are forgotten after the default retention (10 min), within most runs: a straggler
        // after an end is read seconds after it, well within it.
        configuration.endedRetention = EngineConfiguration().endedRetention
        configuration.maxIncompletePerPartition = 40 + random.below(200)
        // The engine's own commit timing and answers that come late, refused or never (else the
        // simulation polls commitPoints()); channel lookups with latency; short and long revoke drains.
        configuration.commitInterval = random.chance(0.7) ? random.between(200, 3_000) * 1_000_000 : nil
        configuration.broadcastExpirationImmediate = random.chance(0.5)
        configuration.revokeDrainTimeout = random.between(200, 5_000) * 1_000_000
        // Now and then a worker whose APNs clients carry only a few sends at once per lane.
        if random.chance(0.3) { configuration.sendCapacityPerLane = [1 + random.below(8), 1 + random.below(4)] }
        heartbeatRandom = SeededRandom(seed: seed ^ 0x4845_4152_5442_4541)
        let heartbeats = heartbeatRandom.chance(0.5)
        if configuration.commitInterval != nil && heartbeats {
            heartbeatInterval = heartbeatRandom.between(200, 3_000) * 1_000_000
            configuration.heartbeatAnswerWindow = EngineConfiguration.heartbeatAnswerWindow(heartbeatInterval: heartbeatInterval)
            nextHeartbeatAt = start + heartbeatRandom.between(0, heartbeatInterval / 1_000_000) * 1_000_000
        }
        engine = FanoutEngine(configuration: configuration)
        workload = SimulatedWorkload(random: &random, start: start, horizon: horizon)
        nextRevokeAt = start + random.between(5, 120) * 1_000_000_000
        if random.chance(0.2) { crashAt = start + random.between(1, horizon / 1_000_000_000) * 1_000_000_000 }
        for _ in 0..<random.below(4) {
            let from = start + random.between(0, horizon / 1_000_000_000) * 1_000_000_000
            outages.append((from, from + random.between(1, random.chance(0.3) ? 600 : 60) * 1_000_000_000, random.chance(0.5)))
        }
        if random.chance(0.15) {
            let from = start + random.between(0, horizon / 1_000_000_000) * 1_000_000_000
            configBroken = (SimulatedWorkload.apps[random.below(2)], from, from + random.between(1, 120) * 1_000_000_000)
        }
        for (key, time, at) in workload.initialTokens {
            let token = "tok-\(key)-0"
            tokenEvents.append((time, key, token, at))
            if random.chance(0.1) { deadTokens.insert(token) }
            if random.chance(0.3) {  // a rotation later
                tokenEvents.append((time + random.between(1, horizon / 1_000_000_000) * 1_000_000_000, key, "tok-\(key)-1", at + 500))
            }
        }
        assignedOrder = workload.logs.keys.sorted(by: { $0.description < $1.description })
        for partition in assignedOrder { assign(partition) }
    }

    func fail(_ message: String) -> Violation {
        Violation(description: "seed \(seed) at t=+\(Double(now - start) / 1e9)s: \(message)")
    }

    // MARK: Running

    mutating func run() throws {
        let healAt = start + horizon + 60 * 1_000_000_000
        let giveUpAt = healAt + .hours(3)
        while true {
            steps += 1
            if steps > 2_000_000 { throw fail("did not settle after 2M steps") }
            if !healed && now >= healAt { heal() }
            try step()
            if healed && isSettled() { break }
            guard let next = nextTime() else { break }
            if next > giveUpAt { throw fail("did not settle within 3 h of healing: \(engine.totalLoad)") }
            now = max(now, next)
        }
        try commitsReachKafkaWhileSettled()
        // The final commit at shutdown: every point Kafka has not acknowledged.
        for point in engine.uncommittedPoints() {
            try checkCommit(point)
            stored[point.partition] = point.offset
        }
        try finalChecks()
        stats.endedForgotten += engine.forgottenTargets.ended
    }

    /// A settled worker's commits reach Kafka by themselves, without the final commit of a shutdown:
    /// nothing holds them for a rebalance that is over (a refusal answered after the group settled
    /// speaks of the rebalance before it). Refusals and lost answers still happen meanwhile, and each
    /// interval offers again, so this allows a few minutes.
    mutating func commitsReachKafkaWhileSettled() throws {
        guard configuration.commitInterval != nil else { return }
        let dueBy = now + .minutes(5)
        func short() -> [String] { workload.logs.filter { (stored[$0.key] ?? 0) != Int64($0.value.count) }.map(\.key.description) }
        while !short().isEmpty {
            guard let next = nextTime(), next <= dueBy else {
                throw fail("commits of \(short().sorted().joined(separator: ",")) did not reach Kafka within 5 min of settling"
                           + (engine.commitsHeldForRebalance ? " (held for a rebalance)" : ""))
            }
            now = max(now, next)
            steps += 1
            try step()
        }
    }

    mutating func heal() {
        healed = true
        outages = []
        configBroken = nil
        for partition in assignedOrder where !assigned.contains(partition) {
            reassignAt[partition] = nil
            assign(partition)
        }
    }

    func isSettled() -> Bool {
        guard flights.isEmpty, resolutions.isEmpty, changelog.writes.isEmpty, engine.totalLoad.inFlight == 0, closing.isEmpty, policyAnswers.isEmpty,
              tokenEvents.allSatisfy({ $0.at < now }) else { return false }
        for (partition, log) in workload.logs where position[partition, default: 0] < log.count || !assigned.contains(partition) { return false }
        return engine.totalLoad.incomplete == 0
    }

    /// The next instant anything can happen. Written with plain loops: this runs every step of every
    /// seed in a debug build.
    func nextTime() -> Nanoseconds? {
        var next = Int64.max
        for (partition, arrival) in nextArrival { next = min(next, max(arrival, now)); _ = partition }
        for flight in flights.values { next = min(next, flight.completeAt) }
        for resolution in resolutions { next = min(next, resolution.at) }
        for event in tokenEvents where event.at >= now { next = min(next, event.at) }
        for at in reassignAt.values { next = min(next, at) }
        for catchUp in catchUps { next = min(next, catchUp.at) }
        if let changelogAt = nextChangelogTime { next = min(next, changelogAt) }
        for answer in commitAnswers { next = min(next, answer.at) }
        for answer in policyAnswers { next = min(next, answer.at) }
        if let settleAt { next = min(next, settleAt) }
        if let nextHeartbeatAt { next = min(next, nextHeartbeatAt) }
        if let heartbeatAnswer { next = min(next, heartbeatAnswer.at) }
        if let deadline = engine.nextDeadline() { next = min(next, max(deadline, now)) }
        if !healed { next = min(next, max(nextRevokeAt, now), start + horizon + 60 * 1_000_000_000) }
        if let crashAt { next = min(next, max(crashAt, now)) }
        guard next != Int64.max else { return nil }
        return next <= now ? now + 1_000 : next
    }

    /// Arrival time of the next readable record of each assigned, unpaused partition.
    mutating func refreshArrivals() {
        nextArrival.removeAll(keepingCapacity: true)
        for partition in assignedOrder where assigned.contains(partition) {
            let log = workload.logs[partition]!
            let index = position[partition, default: 0]
            if index < log.count && !fetchPaused.contains(partition) { nextArrival.append((partition, log[index].arrival)) }
        }
    }

    mutating func step() throws {
        var actions: [EngineAction] = []
        // Token API.
        for index in tokenEvents.indices.reversed() where tokenEvents[index].at <= now {
            let event = tokenEvents.remove(at: index)
            latestToken[event.key] = (event.token, event.registeredAt)
            let partition = SimulatedWorkload.partition(for: event.key, lane: .activity)
            if assigned.contains(partition) {
                engine.tokenRegistered(key: event.key, token: PushToken(simulated: event.token), environment: .sandbox, at: event.registeredAt,
                                       partition: partition.partition, now: now, into: &actions)
            }
        }
        try answerKafka(into: &actions)
        answerChangelog(into: &actions)
        // Kafka produce acks for dead letters and feedback.
        for index in resolutions.indices.reversed() where resolutions[index].at <= now {
            let resolution = resolutions.remove(at: index)
            for source in resolution.sources { markDone(source, resolution.kind) }
            if let id = resolution.id { engine.resolve(id) }
            if let source = resolution.rejected { engine.resolveRejected(source) }
        }
        // APNs responses.
        for sendID in flights.keys.filter({ flights[$0]!.completeAt <= now }).sorted() {
            let flight = flights.removeValue(forKey: sendID)!
            try observeOutcome(flight)
            engine.complete(sendID, outcome: flight.outcome, now: now, into: &actions)
        }
        if let at = crashAt, now >= at { crash() }
        // Rebalances.
        if !healed && now >= nextRevokeAt {
            nextRevokeAt = now + random.between(5, 200) * 1_000_000_000
            // Half the time a partition with sends in flight: the revoke must wait for them (or its deadline).
            let busy = Set(flights.values.map(\.request.partition))
            let candidates = assignedOrder.filter { assigned.contains($0) && !closing.contains($0) }
            let preferred = random.chance(0.5) ? candidates.filter { busy.contains($0) } : []
            if let victim = (preferred.isEmpty ? candidates : preferred).randomElement(using: &random) {
                try revoke(victim, into: &actions)
            }
        }
        // Partitions due at once are assigned in a seeded order, never the hash order of this process
        // (a replay must repeat the run).
        let due = reassignAt.filter { $0.value <= now }.keys.sorted { $0.description < $1.description }
        for partition in due.count > 1 ? due.shuffled(using: &random) : due {
            reassignAt[partition] = nil
            assign(partition)
        }
        // Consumer fetch.
        for partition in assignedOrder where assigned.contains(partition) {
            guard let log = workload.logs[partition] else { continue }
            while position[partition, default: 0] < log.count, log[position[partition]!].arrival <= now, !fetchPaused.contains(partition) {
                let offset = position[partition]!
                position[partition] = offset + 1
                let source = EventSource(partition: partition, offset: Int64(offset))
                stats.events += 1
                if log[offset].rejected {
                    engine.receiveRejected(source)
                    resolutions.append((now + random.between(1_000_000, 50_000_000), nil, source, [source], .resolved))
                } else {
                    engine.receive(log[offset].event, from: source, now: now, into: &actions)
                }
                engine.regulate(now: now, into: &actions)
                try handle(&actions)
            }
        }
        engine.regulate(now: now, into: &actions)
        engine.tick(now: now, into: &actions)
        try handle(&actions)
        if configuration.commitInterval == nil && random.chance(0.2) { try checkCommits() }
        try checkBounds()
        refreshArrivals()
    }

    /// The worker dies: every bit of engine state is lost, Kafka replays from the last commit.
    /// Pushes APNs accepted before the crash did reach the device; unacknowledged produces did not happen.
    mutating func crash() {
        crashAt = nil
        stats.crashes += 1
        for sendID in flights.keys.sorted() where flights[sendID]!.reachesDevice {
            let flight = flights[sendID]!
            if case .delivered = flight.outcome {
                for offset in flight.request.coveredOffsets { markDone(EventSource(partition: flight.request.partition, offset: offset), .delivered) }
            }
            deviceReceived(flight)
        }
        flights = [:]
        resolutions.removeAll()  // produces not yet acknowledged never happened; the replay redoes them
        pendingFeedback = [:]
        // A new process: budgets it never saw are not held against it (Apple's are per device; see README),
        // unless the changelog told it (the target's last send was saved).
        for key in Array(watches.keys) where !watchSurvivesHandoff(key) { watches[key] = nil }
        stats.watchesHandedOver += watches.count
        changelogAfterCrash()
        pushToStartBudgets = pushToStartBudgets.filter { pushToStartBudgetSurvivesHandoff($0.key) }
        stats.pushToStartBudgetsHandedOver += pushToStartBudgets.count
        stats.endedForgotten += engine.forgottenTargets.ended
        engine = FanoutEngine(configuration: configuration)
        reassignAt = [:]
        assigned = []
        fetchPaused = []
        catchUps = []
        currentAssignment = [:]
        endedAssignments = []  // a new process numbers its assignments afresh
        sendAssignment = [:]
        tokensRead = []
        closing = []
        commitAnswers = []  // the new process never hears them; what Kafka stored stays stored
        settleAt = nil  // a new member joins afresh
        heartbeatAnswer = nil
        policyAnswers = []
        for partition in assignedOrder {
            epoch[partition, default: 0] += 1
            assign(partition)
        }
    }
}
