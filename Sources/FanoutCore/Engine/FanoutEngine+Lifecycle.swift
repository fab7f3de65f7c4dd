/// Each partition's life with this worker (docs/design.md §5, `PartitionPhase`): the worker
/// reports assignment changes and token catch-up; the engine decides when a partition may send and
/// when a revoke is drained, and says so with actions.
extension FanoutEngine {
    /// The group gave this worker `partition`. An activity partition reads its activity-tokens
    /// partition first (`.followTokens`; sends wait for `tokensCaughtUp`, events are taken and
    /// coalesced meanwhile); a broadcast partition is live at once.
    ///
    /// min_interval also holds across the handoff: the previous owner's last send started before it
    /// gave the partition up, so a target first seen here sends no earlier than `now + min_interval`.
    public mutating func assign(_ partition: PartitionID, lane: Lane, now: Nanoseconds, into actions: inout [EngineAction]) {
        if let slot = partitionSlotByID[partition], partitions[Int(slot)]!.phase != .closing { return }  // already ours
        if let slot = partitionSlotByID[partition] {  // a closing one given back: start over
            actions.append(.assignmentEnded(partitions[Int(slot)]!.assignment))
            forget([partition])
        }
        let slot = Int(assignSlot(partition, lane: lane))
        partitions[slot]!.assignedAt = now
        if lane == .activity {
            partitions[slot]!.phase = .readingTokens
            actions.append(.followTokens(partition: partition.partition, assignment: partitions[slot]!.assignment))
            if configuration.handoffState {
                partitions[slot]!.stateRestored = false
                actions.append(.restoreState(partition: partition.partition, assignment: partitions[slot]!.assignment))
            }
        }
    }

    /// The activity-tokens partition `partition` was read up to its high watermark for `assignment`:
    /// that assignment's activity partition goes live (once its state is restored too, with
    /// `handoffState`) and its held targets are decided. A report of an earlier assignment (the
    /// partition was revoked and assigned again since) changes nothing.
    public mutating func tokensCaughtUp(partition: Int32, assignment: AssignmentID, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let index = catchingUpSlot(partition: partition, assignment: assignment) else { return }
        partitions[index]!.tokensRead = true
        goLiveIfCaughtUp(index, now: now, into: &actions)
    }

    /// The slot of activity partition `partition` while it is still reading its tokens or state for `assignment`.
    func catchingUpSlot(partition: Int32, assignment: AssignmentID) -> Int? {
        partitions.firstIndex(where: {
            $0?.lane == .activity && $0?.id.partition == partition && $0?.assignment == assignment && $0?.phase == .readingTokens
        })
    }

    /// The partition has read its tokens and restored its handed-over state: it goes live.
    mutating func goLiveIfCaughtUp(_ index: Int, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard partitions[index]!.tokensRead && partitions[index]!.stateRestored else { return }
        partitions[index]!.phase = .live
        let held = partitions[index]!.held
        partitions[index]!.held = []
        for entry in held {
            let target = Int(entry.slot)
            guard targets[target].live, targets[target].incarnation == entry.incarnation else { continue }
            targets[target].heldForPartition = false
            evaluate(entry.slot, now: now, into: &actions)
        }
    }

    /// The group is taking `revoked` away in an orderly rebalance (or the worker is leaving). No new
    /// send starts for them; each is drained (`.revokeDrained` with its final commit point, and
    /// forgotten) once its sends in flight are answered, or after `revokeDrainTimeout` at the latest
    /// (`tick`). Partitions with nothing in flight are drained at once. With `handoffState`, the state
    /// of targets whose last send was not saved is saved first, and the partition drains once that is
    /// acknowledged too (`saveUnsavedSends`).
    public mutating func revoke(_ revoked: [PartitionID], now: Nanoseconds, into actions: inout [EngineAction]) {
        groupRebalancing()  // the member rejoins after a revoke
        for id in revoked {
            guard let slot = partitionSlotByID[id], partitions[Int(slot)]!.phase != .closing else { continue }
            if partitions[Int(slot)]!.lane == .activity { actions.append(.unfollowTokens(partition: id.partition)) }
            partitions[Int(slot)]!.phase = .closing
            partitions[Int(slot)]!.drainBy = now + configuration.revokeDrainTimeout
            partitions[Int(slot)]!.held = []
            closingCount += 1
            if configuration.handoffState && partitions[Int(slot)]!.lane == .activity { saveUnsavedSends(partitionSlot: slot, into: &actions) }
            drainIfDone(slot, now: now, into: &actions)
        }
    }

    /// Partitions lost without an orderly handoff (session timeout, fenced): another member may own
    /// them already, so nothing is committed and nothing more is sent; their state is dropped.
    public mutating func lose(_ lost: [PartitionID], into actions: inout [EngineAction]) {
        groupRebalancing()  // the member rejoins without an assignment
        for id in lost {
            guard let slot = partitionSlotByID[id], let state = partitions[Int(slot)] else { continue }
            if state.lane == .activity && state.phase != .closing { actions.append(.unfollowTokens(partition: id.partition)) }
            actions.append(.assignmentEnded(state.assignment))
        }
        forget(lost)
    }

    // MARK: Internals

    /// Whether the partition in `slot` is assigned and closing, read in place (`partitions[slot]?.phase`
    /// copies the whole state first: every array and set in it retained and released, on every outcome).
    func isClosing(_ slot: Int32) -> Bool {
        partitions[Int(slot)] != nil && partitions[Int(slot)]!.phase == .closing
    }

    /// A closing partition with nothing in flight (or past its drain deadline) is drained.
    mutating func drainIfDone(_ slot: Int32, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let state = partitions[Int(slot)], state.phase == .closing, state.isDrained || now >= state.drainBy else { return }
        let point = state.tracker.commitPoint.flatMap { $0 == state.committed ? nil : CommitPoint(partition: state.id, offset: $0) }
        forget([state.id])
        actions.append(.assignmentEnded(state.assignment))
        actions.append(.revokeDrained(state.id, commit: point))
    }

    /// Drains closing partitions that are done or whose deadline passed (from `tick`).
    mutating func drainOverdue(now: Nanoseconds, into actions: inout [EngineAction]) {
        guard closingCount > 0 else { return }
        for index in partitions.indices where partitions[index]?.phase == .closing {
            drainIfDone(Int32(index), now: now, into: &actions)
        }
    }

    /// When `tick` must next look at closing partitions: at once when one is drained (its last
    /// dead letter or feedback record was acknowledged since), else the earliest drain deadline.
    var nextDrainDeadline: Nanoseconds? {
        guard closingCount > 0 else { return nil }
        return partitions.lazy.compactMap { state in
            guard let state, state.phase == .closing else { return nil }
            return state.isDrained ? Nanoseconds.min : state.drainBy
        }.min()
    }

    /// Records of `partition` below `offset` were already in the log when this member was given it
    /// (the worker reports the high watermark it saw first, before any record of the assignment):
    /// a previous owner may have handled them. A start among them may be on its device even though
    /// this worker never sent it, so its end is never cancelled against it (`receive`). Once per
    /// assignment; ignored for a partition not assigned.
    public mutating func replayBoundary(of partition: PartitionID, below offset: Int64) {
        guard let slot = partitionSlotByID[partition], partitions[Int(slot)]!.replayedBelow < 0 else { return }
        partitions[Int(slot)]!.replayedBelow = offset
    }

    /// Forgets `ids`: their offsets, dedupe windows and targets (and, for activity-lane partitions,
    /// the token registrations of the same partition number). Outcomes of their sends still in flight
    /// are ignored afterwards. Visits each partition's own targets, sends and resolutions only: a
    /// send in flight belongs to a target of its partition (a target is never re-homed while it has
    /// one), so walking the partition's targets finds every one of its sends.
    mutating func forget(_ ids: [PartitionID]) {
        var freedSlots: [Int32] = []
        lastForgetVisited = 0
        for id in ids {
            guard let slot = partitionSlotByID.removeValue(forKey: id), let state = partitions[Int(slot)] else { continue }
            totalIncomplete -= state.tracker.incompleteCount
            laneIncomplete[state.lane.slot] -= state.tracker.incompleteCount
            if state.phase == .closing { closingCount -= 1 }
            if state.lane == .activity { tokens.removeAll(partition: id.partition) }
            var target = state.firstTarget
            var sendsFound = 0
            while target >= 0 {
                let next = targets[Int(target)].nextInPartition
                let sendID = targets[Int(target)].inFlightSendID
                if let send = inFlight.remove(sendID) {
                    sendsFound += 1
                    if send.isProbe {
                        // Its answer will be ignored: without this the app would wait for that probe forever
                        // (never probed again, every target parked, its partitions' commits stuck).
                        for appIndex in Array(paused.keys) where paused[appIndex]!.probeSendID == sendID {
                            paused[appIndex]!.probeSendID = 0
                        }
                    }
                }
                freeTarget(target, unlink: false)
                lastForgetVisited += 1
                target = next
            }
            assert(sendsFound == state.inFlight, "every send in flight of \(id) belongs to one of its targets")
            totalInFlight -= state.inFlight
            laneInFlight[state.lane.slot] -= state.inFlight
            for resolution in state.resolutions { resolutions.removeValue(forKey: resolution) }
            partitions[Int(slot)] = nil
            freedSlots.append(slot)
            for index in partitionCacheSlots.indices where partitionCacheSlots[index] == slot { partitionCacheSlots[index] = -1 }
        }
        freePartitionSlots.append(contentsOf: freedSlots.sorted())
    }
}
