import APNsModel

/// The decision core of Fanout: a deterministic state machine with no I/O, no threads and no clock.
///
/// The worker feeds it input records, token registrations, send outcomes and the passage of time
/// (`now`, nanoseconds since the UNIX epoch), and carries out the `EngineAction`s it returns:
/// sends, dead letters, feedback records, app pauses. It asks `commitPoints()` for the offsets to
/// commit. Every call appends actions to an `inout` buffer so the hot path allocates little;
/// convenience overloads return arrays.
///
/// Threading: a value type; own it from one thread (or behind one `Mutex`) and handle the actions
/// outside the lock. Determinism: given the same calls, it returns the same actions (jitter comes
/// from `EngineConfiguration.randomSeed`).
///
/// Memory per target: `TargetState` (216 bytes: last sent timestamp and digest, budget, times, flags,
/// list links) and its index bucket; its pending state (`pendings`) and in-flight send (`inFlight`)
/// only while they exist; dedupe ids per partition (bounded); token records per key (`TokenRegistry`).
/// What is tracked is bounded (`FanoutEngine+Retention.swift`): an ended target is forgotten
/// `endedRetention` after its end, an idle one after `forgetIdleAfter`, and past `maxTrackedTargets`
/// the least recently active idle ones are evicted. No call visits every target: a revoke visits its
/// partition's own (`PartitionState.firstTarget`), the sweep a bounded slice per tick.
public struct FanoutEngine: Sendable {
    public let configuration: EngineConfiguration

    var targets: [TargetState] = []
    var freeSlots: [Int32] = []
    /// Pending updates of the targets that have one (`TargetState.pendingIndex`).
    var pendings = PendingStore()
    /// Per lane: targets with a pending update or a send in flight (`TargetState.busy`, kept by `settle`).
    var laneBusy = [0, 0]
    /// Ended targets to forget, by when (`TargetState.retentionScheduled`; entries carry the incarnation).
    var endedRetention = DeadlineHeap()
    /// The eviction clock hand and the idle sweep's position over `targets`.
    var evictionHand = 0
    var sweepHand = 0
    var lastSweepAt: Nanoseconds = .min
    /// Targets with a changelog record forgotten since the last `tick`: their tombstones (`.forgetState`).
    var forgottenHandoffs: [(key: String, partition: Int32)] = []
    /// Targets forgotten so far, by why (`forgottenTargets`).
    var forgotten = ForgottenTargets()
    /// Targets the last `forget` visited (its partitions' own targets only).
    var lastForgetVisited = 0
    var slotByKey = TargetTable()
    var inFlight = InFlightStore()
    var partitions: [PartitionState?] = []
    var partitionSlotByID: [PartitionID: Int32] = [:]
    /// Slots of revoked partitions, reused by the next assignment.
    var freePartitionSlots: [Int32] = []
    /// Recently used partitions by partition number (`assignSlot`); a slot of -1 is empty.
    var partitionCacheIDs = [PartitionID?](repeating: nil, count: Int(partitionCacheMask) + 1)
    var partitionCacheSlots = [Int32](repeating: -1, count: Int(partitionCacheMask) + 1)
    static let partitionCacheMask: UInt32 = 63
    /// Records asked for and not yet acknowledged, by resolution id, with the offsets they complete.
    /// `thenSave`: an end settled without delivery, whose target's state is saved once this record
    /// (its feedback or dead letter) is acknowledged; the offsets complete with that save.
    var resolutions: [UInt64: (partitionSlot: Int32, offsets: [Int64], thenSave: (slot: Int32, incarnation: UInt32)?)] = [:]
    /// Saves of settled ends that came due in `resolve`, produced at the next `tick`.
    var settledEndSaves: [(slot: Int32, incarnation: UInt32, partitionSlot: Int32, resolution: ResolutionID)] = []
    public internal(set) var tokens = TokenRegistry()
    var pushToStartBuckets: [PushToken: TokenBucket] = [:]
    /// The push-to-start token each activity target was (or is being) started through, by slot, while
    /// that token's bucket is not full again: the target's state record carries the bucket to the next
    /// owner (`TargetHandoff.pushToStart`). Only recently started targets are here.
    var pushToStartOfTarget: [Int32: (incarnation: UInt32, token: PushToken)] = [:]
    var heap = DeadlineHeap()
    var apps: [String] = []
    var appIndexByName: [String: UInt16] = [:]
    /// By app index: the profile of the app's activities when no start names their type
    /// (`attributesTypeByApp`, else the default's 0).
    var appProfiles: [UInt16] = []
    var profiles: [MeaningProfile]
    /// By profile index: the attributes type it is for ("" for the default at 0).
    var profileTypes: [String]
    var profileIndexByType: [String: UInt16] = [:]
    var paused: [UInt16: PausedApp] = [:]
    /// Per lane (`Lane.slot`): targets backed off by a transport failure or 5xx, as (slot, incarnation),
    /// re-armed when APNs answers that lane again. At most one live entry per target (`outageListed`);
    /// entries of freed targets are skipped and compacted away.
    var outageBackoffs: [[(slot: Int32, incarnation: UInt32)]] = [[], []]
    /// Per lane: a retry of the lane is due by then (a natural short backoff, or a probe).
    var laneRetryDueBy: [Nanoseconds] = [.min, .min]
    var random: SeededRandom
    var nextSendID: UInt64 = 1
    var nextResolutionID: UInt64 = 1
    var totalIncomplete = 0
    var totalInFlight = 0
    /// Per lane (`Lane.slot`): incomplete offsets and sends in flight (backpressure measures).
    var laneIncomplete = [0, 0]
    var laneInFlight = [0, 0]
    /// Per lane: targets ready to send while the lane was at `sendCapacityPerLane`, in arrival order,
    /// as (slot, incarnation); at most one live entry per target (`waitingForLane`).
    var laneWaiting: [SlotQueue] = [SlotQueue(), SlotQueue()]
    var nextAssignment: UInt64 = 1
    /// Partitions in `closing` (so `tick` looks for overdue drains only when there are some).
    var closingCount = 0
    var nextCommitAt: Nanoseconds = .min
    /// When `commitIfDue` last found a commit due (whether it had points to offer or not).
    var lastCommitPassAt: Nanoseconds = .min
    /// The group is rebalancing (`groupRebalancing`): no `.commit` until `groupSettled`.
    var groupIsRebalancing = false
    /// Until when the answer to this member's last heartbeat may still be on the way (`heartbeatSent`).
    var commitsQuietUntil: Nanoseconds = .min
    /// How many times the group settled for this member (`groupSettled`): each `.commit` carries it
    /// as its `round`, so a refusal can be told apart from one about a rebalance that is over.
    var groupSettles: UInt64 = 0
    /// The worker is stopping (`stopCommitting`): it makes the final commit itself.
    var commitsStopped = false
    /// Per lane: since when every send failed lane-wide (nil: the last answer came over HTTP), the
    /// last failure, and whether `.laneFailing` was said for this episode.
    var laneFailingSince: [Nanoseconds?] = [nil, nil]
    var laneLastFailure = ["", ""]
    var laneFailingReported = [false, false]

    public init(configuration: EngineConfiguration = EngineConfiguration()) {
        self.configuration = configuration
        self.random = SeededRandom(seed: configuration.randomSeed)
        var profiles = [configuration.defaultMeaning], profileTypes = [""]
        for (type, profile) in configuration.meaningProfiles.sorted(by: { $0.key < $1.key }) {
            profileIndexByType[type] = UInt16(profiles.count)
            profiles.append(profile)
            profileTypes.append(type)
        }
        self.profiles = profiles
        self.profileTypes = profileTypes
    }

    /// Reserves room for `targets` tracked targets and as many registered tokens up front, so the two
    /// slabs never grow by doubling: a doubling copies the whole slab into a new one while the old one
    /// is still alive (at 512k targets, 120 MB more resident for a moment — the worker's peak in
    /// README "Performance"). The reserved pages stay virtual until targets use them.
    public mutating func reserveTrackingCapacity(_ count: Int) {
        targets.reserveCapacity(count)
        tokens.reserveCapacity(count)
    }

    // MARK: Input

    /// A decoded event read at `source`. Records the offset as incomplete, coalesces the event into its
    /// target and may send at once.
    public mutating func receive(_ event: ActivityEvent, from source: EventSource, now: Nanoseconds, into actions: inout [EngineAction]) {
        let partitionSlot = assignSlot(source.partition, lane: event.lane)
        // A record of a closing partition is not taken: it stays uncommitted and its next owner reads it.
        guard partitions[Int(partitionSlot)]!.phase != .closing, receiveOffset(source.offset, partitionSlot: partitionSlot) else { return }
        // The target's bytes are hashed once: the dedupe digest and the target lookup share it.
        let targetHash = TargetHash(lane: event.lane, id: event.target)
        let digest = DedupeWindow.digest(targetFNV: targetHash.fnv, id: event.id)
        // Look the target up before the dedupe probe (read-only; the result is used below): the two are
        // independent random reads, and in this order the dedupe table's cache miss is issued while the
        // target's is still outstanding instead of after it.
        let existing = slot(of: targetHash, id: event.target)
        guard partitions[Int(partitionSlot)]!.dedupe.insert(digest) else {
            return drop(source.offset, partitionSlot: partitionSlot, reason: .duplicateID, into: &actions)
        }
        guard let app = event.app ?? configuration.defaultApp else {
            return deadLetter([source.offset], partitionSlot: partitionSlot, reason: .missingApp,
                              detail: "event has no app and no default app is configured", target: event.target, app: nil, into: &actions)
        }
        if event.kind == .start && event.lane == .broadcast {
            return deadLetter([source.offset], partitionSlot: partitionSlot, reason: .startOnBroadcast,
                              detail: "start is not possible on a broadcast channel", target: event.target, app: app, into: &actions)
        }
        if event.kind == .start && event.token == nil {
            return deadLetter([source.offset], partitionSlot: partitionSlot, reason: .startWithoutToken,
                              detail: "start needs the push-to-start token in `token`", target: event.target, app: app, into: &actions)
        }
        let slot = existing ?? newTarget(targetHash, id: event.target, app: app, partitionSlot: partitionSlot, now: now)
        let index = Int(slot)
        // Every path below either leaves what the target holds as it was (a drop, a refusal) or ends in
        // `evaluate`, which settles it; the cancelled start settles itself.
        if targets[index].partitionSlot != partitionSlot {
            // Same key, other partition (repartitioned topic, or a key on two topics of one lane). Offsets
            // must complete on the partition they came from: re-home an idle target, refuse while busy.
            guard !targets[index].hasPending && targets[index].inFlightSendID == 0 else {
                return deadLetter([source.offset], partitionSlot: partitionSlot, reason: .keyMismatch,
                                  detail: "'\(event.target)' arrived on \(source.partition) while its updates are in progress on \(partitions[Int(targets[index].partitionSlot)]?.id.description ?? "a revoked partition"); one key must always map to one partition",
                                  target: event.target, app: app, into: &actions)
            }
            unlinkFromPartition(slot)
            linkToPartition(slot, partitionSlot: partitionSlot)
        }
        targets[index].lastActiveAt = now
        targets[index].recentlyActive = true
        if targets[index].endAccepted {
            return drop(source.offset, partitionSlot: partitionSlot, reason: .afterEnd, into: &actions)
        }
        if event.timestamp <= targets[index].latestAccepted {
            return drop(source.offset, partitionSlot: partitionSlot, reason: .notNewer, into: &actions)
        }
        if event.kind == .start, let type = event.attributesType {
            targets[index].profileIndex = profileIndexByType[type] ?? 0
        }
        if event.kind != .start, event.lane == .activity, let token = event.token {
            tokens.register(key: targets[index].key, token: token, environment: nil, at: event.timestamp,
                            partition: source.partition.partition, appIndex: targets[index].appIndex)
        }
        targets[index].latestAccepted = event.timestamp
        if event.kind == .end { targets[index].endAccepted = true }
        let summary = profiles[Int(targets[index].profileIndex)].summarize(event.contentFields)
        let pendingIndex = targets[index].pendingIndex
        if pendingIndex >= 0 {
            if event.kind == .end && event.lane == .activity, pendings[pendingIndex].event.kind == .start,
               pendings[pendingIndex].startAttemptTimestamp == nil,
               pendings[pendingIndex].offsets[0] < partitions[Int(partitionSlot)]!.replayedBelow
                || tokens.usableToken(for: event.target, notBefore: pendings[pendingIndex].event.timestamp, hint: &targets[index].tokenEntry) != nil {
                // This worker never sent the start, but a previous owner of the partition may have: the
                // start was in the log before this member got the partition (a replay after a handoff),
                // or the activity's own token, registered since, shows it started on the device. Its
                // end must reach that token (or be dead-lettered saying why), not cancel the pair.
                pendings[pendingIndex].startWasAttempted()
            }
            // In place: the pending state is not copied.
            switch pendings[pendingIndex].absorb(event, summary: summary, offset: source.offset) {
            case .merged:
                break
            case .cancelled:
                let offsets = takePending(index).offsets
                targets[index].ended = true
                for offset in offsets {
                    drop(offset, partitionSlot: partitionSlot, reason: .endedBeforeStart, into: &actions)
                }
                return settle(slot, now: now)
            case let .endsPossiblyStartedActivity(startTimestamp):
                targets[index].tokenNotBefore = max(targets[index].tokenNotBefore, startTimestamp)
            }
        } else {
            targets[index].pendingIndex = pendings.insert(PendingUpdate(event: event, summary: summary, offset: source.offset))
        }
        evaluate(slot, now: now, into: &actions)
    }

    /// The worker rejected the record at `source` (it dead-letters it itself). The offset stays
    /// incomplete until `resolveRejected(_:)`.
    public mutating func receiveRejected(_ source: EventSource) {
        let partitionSlot = assignSlot(source.partition)
        guard partitions[Int(partitionSlot)]!.phase != .closing else { return }
        _ = receiveOffset(source.offset, partitionSlot: partitionSlot)
    }

    /// True when a rejected record at `source` was taken (`receiveRejected`): dead-letter it. False
    /// for a closing partition, whose next owner judges the record again.
    public func takes(_ source: EventSource) -> Bool {
        guard let slot = partitionSlotByID[source.partition] else { return true }
        return partitions[Int(slot)]!.phase != .closing
    }

    /// The dead letter for a rejected record was acknowledged by Kafka: its offset is done.
    public mutating func resolveRejected(_ source: EventSource) {
        guard let partitionSlot = partitionSlotByID[source.partition] else { return }
        completeOffset(source.offset, partitionSlot: partitionSlot)
    }

    /// A dead letter, feedback or state record the engine asked for was acknowledged: its offsets are
    /// done (after the target's state record, for an end settled without delivery: `tick` asks for it).
    public mutating func resolve(_ resolution: ResolutionID) {
        guard let entry = resolutions.removeValue(forKey: resolution.rawValue) else { return }
        partitions[Int(entry.partitionSlot)]?.resolutions.remove(resolution.rawValue)
        if let save = entry.thenSave {
            // Its own resolution, made now, holds the partition's drain until the record is acknowledged.
            settledEndSaves.append((save.slot, save.incarnation, entry.partitionSlot,
                                    makeResolution(entry.offsets, partitionSlot: entry.partitionSlot)))
            return
        }
        for offset in entry.offsets { completeOffset(offset, partitionSlot: entry.partitionSlot) }
    }

    /// A registration from activity-tokens (or a rotation). Takes effect for the next send; wakes a
    /// target waiting for a token.
    /// `app`: the bundle id the registration names (nil: valid for whatever app the events name).
    public mutating func tokenRegistered(key: String, token: PushToken, environment: APNsEnvironment?, at: Int64,
                                         partition: Int32, app: String? = nil, now: Nanoseconds, into actions: inout [EngineAction]) {
        let appIndex = app.map { internApp($0) } ?? TokenRegistry.Record.anyApp
        // A tracked activity's key string is shared with the registry (one heap copy of a long key).
        let slot = slot(of: TargetHash(lane: .activity, id: key), id: key)
        let stored = slot.map { targets[Int($0)].key } ?? key
        guard tokens.register(key: stored, token: token, environment: environment, at: at, partition: partition, appIndex: appIndex) else { return }
        if let slot { evaluate(slot, now: now, into: &actions) }
    }

    /// `tokenRegistered` with the token as hex text (validated already: a registration that is not hex
    /// is a caller's bug).
    public mutating func tokenRegistered(key: String, token hex: String, environment: APNsEnvironment?, at: Int64,
                                         partition: Int32, app: String? = nil, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let token = PushToken(hex: hex) else { preconditionFailure("a registered token must be even-length hex; got \(hex.utf8.count) characters that are not") }
        tokenRegistered(key: key, token: token, environment: environment, at: at, partition: partition, app: app, now: now, into: &actions)
    }

    /// A tombstone on activity-tokens.
    public mutating func tokenRemoved(key: String) { tokens.remove(key: key) }

    // MARK: Time

    /// Runs every timer due at `now`: held minor updates, min_interval waits, backoffs, token waits,
    /// app probes, ended targets' retention and a slice of the idle-target sweep.
    public mutating func tick(now: Nanoseconds, into actions: inout [EngineAction]) {
        while let top = heap.top, top.deadline <= now {
            _ = heap.pop()
            let index = Int(top.slot)
            guard targets[index].live, targets[index].generation == top.generation else { continue }
            targets[index].timerAt = .max
            evaluate(top.slot, now: now, into: &actions)
        }
        probePausedApps(now: now, into: &actions)
        admitWaitingInEveryLane(now: now, into: &actions)
        drainOverdue(now: now, into: &actions)
        commitIfDue(now: now, into: &actions)
        reportFailingLanes(now: now, into: &actions)
        releaseEndedTargets(now: now)
        sweepIdleTargets(now: now)
        for forgotten in forgottenHandoffs { actions.append(.forgetState(key: forgotten.key, partition: forgotten.partition)) }
        forgottenHandoffs.removeAll(keepingCapacity: true)
        if !settledEndSaves.isEmpty { saveSettledEnds(into: &actions) }
    }

    /// When `tick` next has work, or nil when nothing is scheduled. May be early (a timer that was
    /// superseded); `tick` then simply finds nothing to do.
    public func nextDeadline() -> Nanoseconds? {
        var deadline = heap.top?.deadline
        for app in paused.values where app.probeSendID == 0 && !app.parked.isEmpty {
            deadline = min(deadline ?? app.probeAt, app.probeAt)
        }
        if !forgottenHandoffs.isEmpty || !settledEndSaves.isEmpty { deadline = .min }  // tombstones and saves to hand out at once
        if let retention = nextRetentionDeadline { deadline = min(deadline ?? retention, retention) }
        if let sweep = nextSweepDeadline { deadline = min(deadline ?? sweep, sweep) }
        if let drain = nextDrainDeadline { deadline = min(deadline ?? drain, drain) }
        for lane in 0..<2 where !laneFailingReported[lane] {
            if let since = laneFailingSince[lane] { deadline = min(deadline ?? .max, since + configuration.laneFailingAfter) }
        }
        if configuration.commitInterval != nil && nextCommitAt != .min && !partitionSlotByID.isEmpty && !groupIsRebalancing && !commitsStopped {
            deadline = min(deadline ?? nextCommitAt, nextCommitAt)
        }
        return deadline
    }
}

// MARK: - Convenience overloads returning arrays

extension FanoutEngine {
    public mutating func receive(_ event: ActivityEvent, from source: EventSource, now: Nanoseconds) -> [EngineAction] {
        var actions: [EngineAction] = []
        receive(event, from: source, now: now, into: &actions)
        return actions
    }

    public mutating func complete(_ sendID: UInt64, outcome: SendOutcome, now: Nanoseconds) -> [EngineAction] {
        var actions: [EngineAction] = []
        complete(sendID, outcome: outcome, now: now, into: &actions)
        return actions
    }

    public mutating func tick(now: Nanoseconds) -> [EngineAction] {
        var actions: [EngineAction] = []
        tick(now: now, into: &actions)
        return actions
    }

    public mutating func tokenRegistered(key: String, token: String, environment: APNsEnvironment?, at: Int64,
                                         partition: Int32, now: Nanoseconds) -> [EngineAction] {
        var actions: [EngineAction] = []
        tokenRegistered(key: key, token: token, environment: environment, at: at, partition: partition, now: now, into: &actions)
        return actions
    }

    public mutating func tokenRegistered(key: String, token: PushToken, environment: APNsEnvironment?, at: Int64,
                                         partition: Int32, now: Nanoseconds) -> [EngineAction] {
        var actions: [EngineAction] = []
        tokenRegistered(key: key, token: token, environment: environment, at: at, partition: partition, now: now, into: &actions)
        return actions
    }

    /// A decoded activity-tokens record (see `TokenRecord.update(from:apps:)`), read from `partition`.
    public mutating func tokenRegistered(key: String, record: TokenRecord, partition: Int32, now: Nanoseconds,
                                         into actions: inout [EngineAction]) {
        tokenRegistered(key: key, token: record.token, environment: APNsEnvironment(rawValue: record.environment.rawValue),
                        at: record.at, partition: partition, app: record.app, now: now, into: &actions)
    }
}
