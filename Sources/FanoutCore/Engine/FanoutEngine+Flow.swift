/// Flow control and commits (docs/design.md §6 and §4): when a partition is
/// paused or resumed, and when a commit goes out with what. The worker executes the actions and
/// reports what Kafka answered; a commit in flight never holds anything else back.
extension FanoutEngine {
    /// Pauses partitions that reached a bound and resumes those that drained below `resumeRatio` of
    /// every bound. Call after each batch of records (cheap: O(assigned partitions)). A pause also
    /// relieves the partition's held minor updates (`relieve`), so the offsets they carry can complete.
    ///
    /// Measures: the partition's window of uncommitted records (the records the worker must keep for
    /// dead letters) and its sends in flight; its lane's sends in flight and incomplete offsets.
    public mutating func regulate(now: Nanoseconds, into actions: inout [EngineAction]) {
        var pause: [PartitionID] = []
        var resume: [PartitionID] = []
        let ratio = configuration.resumeRatio
        for index in partitions.indices where partitions[index] != nil {
            // Read in place: `let state = partitions[index]` would copy every partition's state each call.
            guard partitions[index]!.phase != .closing else { continue }
            let lane = partitions[index]!.lane.slot
            let window = partitions[index]!.tracker.window
            let inFlight = partitions[index]!.inFlight
            if !partitions[index]!.pressured {
                if window >= configuration.maxIncompletePerPartition || inFlight >= configuration.maxInFlightPerPartition
                    || laneInFlight[lane] >= configuration.maxInFlightPerLane || laneIncomplete[lane] >= configuration.maxIncompletePerLane {
                    partitions[index]!.pressured = true
                }
            } else if Double(window) < Double(configuration.maxIncompletePerPartition) * ratio
                        && Double(inFlight) < Double(configuration.maxInFlightPerPartition) * ratio
                        && Double(laneInFlight[lane]) < Double(configuration.maxInFlightPerLane) * ratio
                        && Double(laneIncomplete[lane]) < Double(configuration.maxIncompletePerLane) * ratio {
                partitions[index]!.pressured = false
            }
            let wanted = partitions[index]!.pressured
            guard wanted != partitions[index]!.fetchPaused else { continue }
            partitions[index]!.fetchPaused = wanted
            if wanted { pause.append(partitions[index]!.id) } else { resume.append(partitions[index]!.id) }
        }
        if !pause.isEmpty {
            actions.append(.pauseFetching(pause))
            for id in pause { relieve(id, now: now, into: &actions) }
        }
        if !resume.isEmpty { actions.append(.resumeFetching(resume)) }
    }

    /// Pausing (`paused` true) or resuming these partitions failed: the next `regulate` asks again.
    public mutating func fetchControlFailed(_ failed: [PartitionID], paused: Bool) {
        for id in failed {
            guard let slot = partitionSlotByID[id] else { continue }
            partitions[Int(slot)]!.fetchPaused = !paused
        }
    }

    /// Partitions whose fetching the engine asked to pause (for gauges).
    public var pausedPartitions: [PartitionID] {
        partitions.compactMap { state in state.flatMap { $0.fetchPaused && $0.phase != .closing ? $0.id : nil } }
    }

    /// Owned partitions still reading their activity-tokens (and fanout-state) partition: their events
    /// are taken in and held, nothing of theirs is sent yet (for gauges).
    public var catchingUpPartitions: [PartitionID] {
        partitions.compactMap { state in state.flatMap { $0.phase == .readingTokens ? $0.id : nil } }
    }

    /// Kafka answered a `.commit`: `points` were asked, `failed` are the partitions it refused (a
    /// rebalance in progress, an old generation, the coordinator unavailable). Refused points are
    /// offered again at the next commit interval; points of partitions no longer ours are ignored, and
    /// so is any answer but the one for the point this assignment offered last (a late answer of an
    /// earlier assignment, or of an offer overtaken since, says nothing about what Kafka holds now).
    /// `refusedForRebalanceIn`: the `.commit`'s `round`, when Kafka refused it because the group is
    /// rebalancing (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION): commits are held until `groupSettled`.
    /// Unless the group has settled since that offer: its refusal then speaks of a rebalance that is
    /// over, and holding for it would wait for a settle that is not coming, with every commit of a
    /// settled worker stopped (the refused points are offered again at the next interval either way).
    /// Returns whether commits are held now (what waits to be committed in the worker is then withdrawn).
    @discardableResult
    public mutating func commitAnswered(_ points: [CommitPoint], failed: Set<PartitionID>, refusedForRebalanceIn round: UInt64? = nil) -> Bool {
        if let round, round == groupSettles { groupIsRebalancing = true }
        for point in points {
            guard let slot = partitionSlotByID[point.partition] else { continue }
            let index = Int(slot)
            if failed.contains(point.partition) {
                if partitions[index]!.lastReportedCommit == point.offset { partitions[index]!.lastReportedCommit = partitions[index]!.committed }
            } else if point.offset == partitions[index]!.lastReportedCommit {
                partitions[index]!.committed = point.offset
            }
        }
        return groupIsRebalancing
    }

    /// Every commit point Kafka has not acknowledged yet, whether handed out before or not (the final
    /// commit at shutdown, which must not miss a point whose earlier commit is still unanswered).
    public mutating func uncommittedPoints() -> [CommitPoint] {
        var points: [CommitPoint] = []
        for index in partitions.indices {
            guard let state = partitions[index], state.phase != .closing, let offset = state.tracker.commitPoint,
                  offset != state.committed else { continue }
            partitions[index]!.lastReportedCommit = offset
            points.append(CommitPoint(partition: state.id, offset: offset))
        }
        return points
    }

    /// The commit points to emit now, every `commitInterval` (from `tick`): every point Kafka has not
    /// acknowledged, offered again each interval until it is (an answer lost, or never coming, holds
    /// nothing back for longer than one interval; the worker keeps one commit outstanding at a time).
    mutating func commitIfDue(now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let interval = configuration.commitInterval else { return }
        if nextCommitAt == .min { (nextCommitAt, lastCommitPassAt) = (now + interval, now) }
        guard now >= nextCommitAt else { return }
        if now < commitsQuietUntil {
            nextCommitAt = commitsQuietUntil  // a heartbeat's answer may be on its way
            return
        }
        (nextCommitAt, lastCommitPassAt) = (now + interval, now)
        guard !groupIsRebalancing && !commitsStopped else { return }
        let points = uncommittedPoints()
        if !points.isEmpty { actions.append(.commit(points, round: groupSettles)) }
    }

    /// Every record read is settled (the last offset just completed): what is done is committed a
    /// quarter of `commitInterval` after the last commit (at once when that has passed) instead of a
    /// whole interval after it. Under load the interval paces commits; when a burst drains, its last
    /// offsets no longer wait up to one more interval (docs/design.md §4). A worker whose records
    /// trickle in and drain one by one commits at most four times per interval.
    mutating func commitWhenDrained() {
        guard let interval = configuration.commitInterval, nextCommitAt != .min else { return }
        nextCommitAt = min(nextCommitAt, lastCommitPassAt + interval / 4)
    }

    /// The group is rebalancing for this member: no `.commit` is offered until `groupSettled`.
    public var commitsHeldForRebalance: Bool { groupIsRebalancing }

    /// The worker is stopping: no more `.commit`; it commits `uncommittedPoints()` itself, once,
    /// before it leaves the group (a commit after that could only fail against a closed consumer).
    public mutating func stopCommitting() { commitsStopped = true }

    /// The group started rebalancing for this member (it revoked or lost partitions, or Kafka refused
    /// a commit for it): no commit goes out until `groupSettled`. A commit of the old generation that
    /// the coordinator answers after the member rejoined makes librdkafka 2.0.2 drop every partition,
    /// the kept ones too (librdkafka issue #4059): seconds without delivery for nothing.
    public mutating func groupRebalancing() { groupIsRebalancing = true }

    /// This member sent a heartbeat at `at` (librdkafka's `HEARTBEAT` debug line): no commit is offered
    /// until its answer has surely arrived and been acted on (`EngineConfiguration.heartbeatAnswerWindow`).
    /// A commit offered before the heartbeat left goes out ahead of any JoinGroup its answer causes.
    public mutating func heartbeatSent(at: Nanoseconds) {
        guard let window = configuration.heartbeatAnswerWindow else { return }
        commitsQuietUntil = max(commitsQuietUntil, at + window)
    }

    /// The rebalance finished for this member: what waited is committed now.
    /// Counted even when no hold was on: a commit offered before it belongs to the generation before.
    public mutating func groupSettled(now: Nanoseconds, into actions: inout [EngineAction]) {
        groupSettles += 1
        guard groupIsRebalancing else { return }
        groupIsRebalancing = false
        guard configuration.commitInterval != nil else { return }
        nextCommitAt = now
        commitIfDue(now: now, into: &actions)
    }

    /// The broadcast channel's storage policy (nil: unknown — the lookup failed, or no lookups are
    /// possible): its waiting send goes now, with the `apns-expiration` the policy allows.
    public mutating func channelPolicyKnown(app: String, channel: String, policy: ChannelStoragePolicy?, now: Nanoseconds,
                                            into actions: inout [EngineAction]) {
        guard let slot = slot(of: TargetHash(lane: .broadcast, id: channel), id: channel),
              targets[Int(slot)].channelPolicy == .lookingUp, apps[Int(targets[Int(slot)].appIndex)] == app else { return }
        targets[Int(slot)].channelPolicy = switch policy {
        case .noStorage?: .noStorage
        case .mostRecent?: .mostRecent
        case nil: .answeredUnknown
        }
        evaluate(slot, now: now, into: &actions)
    }
}

extension OffsetTracker {
    /// Records from the commit point to the newest one read: what the worker keeps uncommitted.
    var window: Int {
        guard highestReceived >= 0, let point = commitPoint else { return 0 }
        return Int(highestReceived + 1 - point)
    }
}
