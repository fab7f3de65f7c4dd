import APNsModel

/// What a batch of simulation runs exercised, printed so a reader can see the invariants were tested
/// against real traffic (sends, outages, revokes, drops), not vacuously.
struct SimulationStats: CustomStringConvertible {
    var events = 0
    var steps = 0
    var sends = 0
    var priority10 = 0
    var coalescedSends = 0
    var feedback = 0
    var pauses = 0
    var resumes = 0
    /// Partitions paused by backpressure (`.pauseFetching`).
    var fetchPauses = 0
    /// Lanes reported failing (`.laneFailing`).
    var laneFailures = 0
    var losses = 0
    var revokesWithSendsInFlight = 0
    /// Sends to other partitions while one was closing (a rebalance does not stop them).
    var sendsWhileClosing = 0
    var commits = 0
    var commitsRefused = 0
    var commitsUnanswered = 0
    var lookups = 0
    /// Token catch-ups reported for an earlier assignment of their partition.
    var staleCatchUps = 0
    var rebalancesSettled = 0
    /// Heartbeats the member sent, and those whose answer started a rejoin (another member joined or left).
    var heartbeats = 0
    var heartbeatRejoins = 0
    var revokes = 0
    var crashes = 0
    /// Pushes that reached a device while Fanout saw a failure (written, answer lost).
    var ambiguousDeliveries = 0
    /// Sends that filled their lane to its capacity (the engine held the next ones back).
    var laneFull = 0
    /// Ends dead-lettered because their activity may have started and no activity token arrived.
    var endsOfPossiblyStartedDeadLettered = 0
    /// Ended targets the engine forgot after `endedRetention` (the invariants held across it).
    var endedForgotten: UInt64 = 0
    /// The state changelog (odd seeds): records saved, tombstones, records restored, and target
    /// watches that went on across a handoff or crash because the last send's state was saved.
    var stateSaves = 0
    var stateTombstones = 0
    var stateRestored = 0
    var watchesHandedOver = 0
    var pushToStartBudgetsHandedOver = 0
    var drops: [String: Int] = [:]
    var deadLetters: [String: Int] = [:]
    var outcomes: [String: Int] = [:]

    mutating func count(_ outcome: SendOutcome) {
        let name = switch outcome {
        case .delivered: "delivered"
        case .tokenGone: "tokenGone"
        case .retry: "retry"
        case .refreshAuth: "refreshAuth"
        case .badPayload: "badPayload"
        case .configError: "configError"
        }
        outcomes[name, default: 0] += 1
    }

    mutating func add(_ other: SimulationStats) {
        events += other.events
        sends += other.sends
        priority10 += other.priority10
        coalescedSends += other.coalescedSends
        feedback += other.feedback
        pauses += other.pauses
        resumes += other.resumes
        fetchPauses += other.fetchPauses
        laneFailures += other.laneFailures
        losses += other.losses
        revokesWithSendsInFlight += other.revokesWithSendsInFlight
        sendsWhileClosing += other.sendsWhileClosing
        commits += other.commits
        commitsRefused += other.commitsRefused
        commitsUnanswered += other.commitsUnanswered
        lookups += other.lookups
        staleCatchUps += other.staleCatchUps
        rebalancesSettled += other.rebalancesSettled
        heartbeats += other.heartbeats
        heartbeatRejoins += other.heartbeatRejoins
        revokes += other.revokes
        crashes += other.crashes
        ambiguousDeliveries += other.ambiguousDeliveries
        laneFull += other.laneFull
        endsOfPossiblyStartedDeadLettered += other.endsOfPossiblyStartedDeadLettered
        endedForgotten += other.endedForgotten
        stateSaves += other.stateSaves
        stateTombstones += other.stateTombstones
        stateRestored += other.stateRestored
        watchesHandedOver += other.watchesHandedOver
        pushToStartBudgetsHandedOver += other.pushToStartBudgetsHandedOver
        drops.merge(other.drops, uniquingKeysWith: +)
        deadLetters.merge(other.deadLetters, uniquingKeysWith: +)
        outcomes.merge(other.outcomes, uniquingKeysWith: +)
    }

    var description: String {
          "events=\(events) steps=\(steps) sends=\(sends) p10=\(priority10) coalesced=\(coalescedSends) feedback=\(feedback) "
            + "pauses=\(pauses) resumes=\(resumes) fetchPauses=\(fetchPauses) laneFailures=\(laneFailures) losses=\(losses) revokesInFlight=\(revokesWithSendsInFlight) "
            + "sendsWhileClosing=\(sendsWhileClosing) commits=\(commits) refused=\(commitsRefused) unanswered=\(commitsUnanswered) "
            + "lookups=\(lookups) heartbeats=\(heartbeats) heartbeatRejoins=\(heartbeatRejoins) staleCatchUps=\(staleCatchUps) revokes=\(revokes) crashes=\(crashes) ambiguous=\(ambiguousDeliveries) laneFull=\(laneFull) "
            + "endsOfPossiblyStartedDeadLettered=\(endsOfPossiblyStartedDeadLettered) endedForgotten=\(endedForgotten) stateSaves=\(stateSaves) stateTombstones=\(stateTombstones) stateRestored=\(stateRestored) watchesHandedOver=\(watchesHandedOver) pushToStartBudgetsHandedOver=\(pushToStartBudgetsHandedOver) drops=\(drops.sorted { $0.key < $1.key }) "
            + "deadLetters=\(deadLetters.sorted { $0.key < $1.key }) outcomes=\(outcomes.sorted { $0.key < $1.key })"
    }
}
