/// Partition bookkeeping: slots, offsets, commit points and load counts. The lifecycle (assignment,
/// token catch-up, revoke, loss) is in `FanoutEngine+Lifecycle.swift`, backpressure and commits in
/// `FanoutEngine+Flow.swift`.
extension FanoutEngine {
    /// Commit points that moved since they were last handed out (Kafka's next offset to read, per
    /// partition), for partitions this worker still delivers for (a closing partition's final point
    /// goes with `.revokeDrained`).
    public mutating func commitPoints() -> [CommitPoint] {
        var points: [CommitPoint] = []
        for index in partitions.indices where partitions[index] != nil {
            // Read in place: `let state = partitions[index]` would copy every partition's state each call.
            guard partitions[index]!.phase != .closing, let offset = partitions[index]!.tracker.commitPoint,
                  offset != partitions[index]!.lastReportedCommit, offset != partitions[index]!.committed else { continue }
            partitions[index]!.lastReportedCommit = offset
            points.append(CommitPoint(partition: partitions[index]!.id, offset: offset))
        }
        return points
    }

    /// Incomplete offsets and in-flight sends of one partition, or nil when it is not assigned.
    public func load(of partition: PartitionID) -> Load? {
        guard let slot = partitionSlotByID[partition], partitions[Int(slot)] != nil else { return nil }
        return Load(incomplete: partitions[Int(slot)]!.tracker.incompleteCount, inFlight: partitions[Int(slot)]!.inFlight)
    }

    /// The phase of an assigned partition, or nil when it is not assigned.
    public func phase(of partition: PartitionID) -> PartitionPhase? {
        guard let slot = partitionSlotByID[partition], partitions[Int(slot)] != nil else { return nil }
        return partitions[Int(slot)]!.phase
    }

    /// Totals over all partitions.
    public var totalLoad: Load { Load(incomplete: totalIncomplete, inFlight: totalInFlight) }

    /// Backpressure relief, for when `regulate` pauses `partition`: the minor updates its targets hold
    /// back (waiting for `max_quiet` or a bigger progress step) go as soon as min_interval and the
    /// budget allow, at priority 5, instead of holding the offsets they carry, and with them the
    /// whole partition, for up to `max_quiet`. Visits only the targets listed as holding one
    /// (`heldMinor`), not every tracked target.
    mutating func relieve(_ partition: PartitionID, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let slot = partitionSlotByID[partition] else { return }
        let listed = partitions[Int(slot)]!.heldMinor
        partitions[Int(slot)]!.heldMinor.removeAll(keepingCapacity: true)
        for entry in listed {
            let index = Int(entry.slot)
            guard targets[index].live, targets[index].incarnation == entry.incarnation, targets[index].listedAsHeldMinor else { continue }
            targets[index].listedAsHeldMinor = false
            guard targets[index].partitionSlot == slot, targets[index].hasPending, targets[index].inFlightSendID == 0,
                  !targets[index].relieved else { continue }
            targets[index].relieved = true
            evaluate(entry.slot, now: now, into: &actions)
        }
    }

    /// Number of tracked targets.
    public var targetCount: Int { slotByKey.count }

    /// Number of tracked targets of one partition, or nil when it is not assigned.
    public func targetCount(of partition: PartitionID) -> Int? {
        guard let slot = partitionSlotByID[partition] else { return nil }
        return partitions[Int(slot)]?.targetCount
    }

    // MARK: Internals

    /// The slot of `partition`, creating it (live, lane as given or activity) when it is not assigned:
    /// receiving on a partition that was never assigned treats it as assigned and live.
    mutating func assignSlot(_ partition: PartitionID, lane: Lane? = nil) -> Int32 {
        // Per event: a direct-mapped cache by partition number first, so the dictionary (SipHash over
        // the topic name) is consulted only on a miss.
        let cacheIndex = Int(UInt32(bitPattern: partition.partition) & Self.partitionCacheMask)
        if partitionCacheSlots[cacheIndex] >= 0 && partitionCacheIDs[cacheIndex] == partition {
            return partitionCacheSlots[cacheIndex]
        }
        if let slot = partitionSlotByID[partition] {
            partitionCacheIDs[cacheIndex] = partition
            partitionCacheSlots[cacheIndex] = slot
            return slot
        }
        // A slot freed by a drained revoke or a loss is reused (else every rebalance would grow `partitions` for the life
        // of the process): revoke removed every reference to it (targets, sends in flight, resolutions,
        // the cache), so nothing late can reach the new occupant.
        let state = PartitionState(id: partition, assignment: AssignmentID(rawValue: nextAssignment), phase: .live,
                                   dedupe: DedupeWindow(capacity: configuration.dedupeWindowPerPartition),
                                   lane: lane ?? .activity, laneKnown: lane != nil)
        nextAssignment += 1
        let slot: Int32
        if let free = freePartitionSlots.popLast() {
            slot = free
            partitions[Int(slot)] = state
        } else {
            slot = Int32(partitions.count)
            partitions.append(state)
        }
        partitionSlotByID[partition] = slot
        return slot
    }

    /// The slot of the live target with this key, if any.
    @inline(__always)
    func slot(of hash: TargetHash, id: String) -> Int32? {
        slotByKey.find(hash) { slot in
            targets[Int(slot)].lane == hash.lane && targets[Int(slot)].key == id
        }
    }

    /// Starts tracking a target whose key is not tracked yet (`slot(of:id:)` returned nil). At
    /// `maxTrackedTargets`, an idle target is evicted first (`evictIdleTargets`).
    mutating func newTarget(_ hash: TargetHash, id: String, app: String, partitionSlot: Int32, now: Nanoseconds) -> Int32 {
        if slotByKey.count >= configuration.maxTrackedTargets { evictIdleTargets() }
        let lane = hash.lane
        let appIndex = internApp(app)
        let profileIndex = appProfiles[Int(appIndex)]
        let settings = configuration.budget(lane: lane, app: app)
        let budgetClass: BudgetClass = lane == .broadcast ? .broadcast
            : configuration.frequentUpdatesApps.contains(app) ? .frequentUpdates : .activity
        // An activity whose token is registered shares the registry's copy of its key.
        let registered = lane == .activity ? tokens.storedKey(id, hash: hash) : nil
        let key = registered?.key ?? id
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            let old = targets[Int(free)]
            targets[Int(free)] = TargetState(key: key, lane: lane, appIndex: appIndex, profileIndex: profileIndex, partitionSlot: partitionSlot,
                                             generation: old.generation &+ 1, incarnation: old.incarnation &+ 1, now: now, budgetClass: budgetClass, budget: settings)
        } else {
            slot = Int32(targets.count)
            targets.append(TargetState(key: key, lane: lane, appIndex: appIndex, profileIndex: profileIndex, partitionSlot: partitionSlot,
                                       generation: 0, incarnation: 0, now: now, budgetClass: budgetClass, budget: settings))
        }
        targets[Int(slot)].tokenEntry = registered?.entry ?? -1
        // A handoff: nothing earlier than the assignment + min_interval (see `assign(_:now:)`).
        targets[Int(slot)].lastSendAt = max(targets[Int(slot)].lastSendAt, partitions[Int(partitionSlot)]!.assignedAt)
        linkToPartition(slot, partitionSlot: partitionSlot)
        slotByKey.insert(hash, slot: slot)
        return slot
    }

    /// Puts the target first in the list of the partition in `partitionSlot`.
    mutating func linkToPartition(_ slot: Int32, partitionSlot: Int32) {
        let first = partitions[Int(partitionSlot)]!.firstTarget
        targets[Int(slot)].partitionSlot = partitionSlot
        targets[Int(slot)].previousInPartition = -1
        targets[Int(slot)].nextInPartition = first
        if first >= 0 { targets[Int(first)].previousInPartition = slot }
        partitions[Int(partitionSlot)]!.firstTarget = slot
        partitions[Int(partitionSlot)]!.targetCount += 1
    }

    /// Takes the target out of its partition's list (O(1): the list is doubly linked).
    mutating func unlinkFromPartition(_ slot: Int32) {
        let index = Int(slot)
        let partitionSlot = Int(targets[index].partitionSlot)
        let previous = targets[index].previousInPartition, next = targets[index].nextInPartition
        if next >= 0 { targets[Int(next)].previousInPartition = previous }
        if previous >= 0 {
            targets[Int(previous)].nextInPartition = next
        } else {
            partitions[partitionSlot]!.firstTarget = next
        }
        partitions[partitionSlot]!.targetCount -= 1
        targets[index].previousInPartition = -1
        targets[index].nextInPartition = -1
    }

    mutating func internApp(_ app: String) -> UInt16 {
        if let index = appIndexByName[app] { return index }
        precondition(apps.count < Int(UInt16.max), "more than 65535 distinct apps")
        let index = UInt16(apps.count)
        apps.append(app)
        appIndexByName[app] = index
        appProfiles.append(configuration.attributesTypeByApp[app].flatMap { profileIndexByType[$0] } ?? 0)
        return index
    }

    /// Stops tracking the target: its slot, pending state and index entry are freed at once; parked
    /// references to it (timers, lists of held, parked, relieved or backed-off targets) carry its
    /// generation or incarnation and are skipped when they come up. `unlink` false: the caller drops
    /// the whole partition list (`forget`).
    mutating func freeTarget(_ slot: Int32, unlink: Bool = true) {
        let index = Int(slot)
        slotByKey.remove(TargetHash(lane: targets[index].lane, id: targets[index].key), slot: slot)
        if targets[index].pendingIndex >= 0 { _ = takePending(index) }
        if targets[index].busy { laneBusy[targets[index].lane.slot] -= 1 }
        if unlink { unlinkFromPartition(slot) }
        targets[index].busy = false
        targets[index].inFlightSendID = 0
        targets[index].live = false
        targets[index].generation &+= 1
        targets[index].key = ""
        targets[index].lastOutcome = nil
        if !pushToStartOfTarget.isEmpty { pushToStartOfTarget[slot] = nil }
        freeSlots.append(slot)
    }

    /// Moves the target's pending update out (it must have one).
    mutating func takePending(_ index: Int) -> PendingUpdate {
        let pendingIndex = targets[index].pendingIndex
        targets[index].pendingIndex = -1
        return pendings.take(pendingIndex)
    }

    mutating func completeOffset(_ offset: Int64, partitionSlot: Int32) {
        guard partitions.indices.contains(Int(partitionSlot)), partitions[Int(partitionSlot)] != nil else { return }
        if partitions[Int(partitionSlot)]!.tracker.complete(offset) {
            totalIncomplete -= 1
            laneIncomplete[partitions[Int(partitionSlot)]!.lane.slot] -= 1
            if totalIncomplete == 0 { commitWhenDrained() }
        }
    }

    /// Records a newly read offset as incomplete; false for a redelivery of something already tracked.
    mutating func receiveOffset(_ offset: Int64, partitionSlot: Int32) -> Bool {
        let first = partitions[Int(partitionSlot)]!.tracker.highestReceived < 0
        guard partitions[Int(partitionSlot)]!.tracker.receive(offset) else { return false }
        // The first record read is where the group's committed offset resumed this partition:
        // committing that point again is redundant (and, racing a rebalance, rejected).
        if first && partitions[Int(partitionSlot)]!.committed == nil { partitions[Int(partitionSlot)]!.committed = offset }
        totalIncomplete += 1
        laneIncomplete[partitions[Int(partitionSlot)]!.lane.slot] += 1
        return true
    }

    mutating func drop(_ offset: Int64, partitionSlot: Int32, reason: DropReason, into actions: inout [EngineAction]) {
        completeOffset(offset, partitionSlot: partitionSlot)
        // Through the buffer: via Array's getter the optimizer copied the whole partition state (its
        // offset and dedupe tables retained and released) to read the id, once per dropped event.
        if let id = partitions.withUnsafeBufferPointer({ $0[Int(partitionSlot)]?.id }) {
            actions.append(.dropped(EventSource(partition: id, offset: offset), reason))
        }
    }

    /// `thenSave`: the target whose state is saved once the record is acknowledged, before `offsets` complete.
    mutating func makeResolution(_ offsets: [Int64], partitionSlot: Int32,
                                 thenSave: (slot: Int32, incarnation: UInt32)? = nil) -> ResolutionID {
        let id = nextResolutionID
        nextResolutionID += 1
        resolutions[id] = (partitionSlot, offsets, thenSave)
        partitions[Int(partitionSlot)]!.resolutions.insert(id)
        return ResolutionID(rawValue: id)
    }

    func sources(_ offsets: [Int64], partitionSlot: Int32) -> [EventSource] {
        guard partitions[Int(partitionSlot)] != nil else { return [] }
        let id = partitions[Int(partitionSlot)]!.id
        return offsets.map { EventSource(partition: id, offset: $0) }
    }

    mutating func deadLetter(_ offsets: [Int64], partitionSlot: Int32, reason: RejectionReason, detail: String,
                             target: String, app: String?, into actions: inout [EngineAction]) {
        deadLetter(offsets, resolution: makeResolution(offsets, partitionSlot: partitionSlot), partitionSlot: partitionSlot,
                   reason: reason, detail: detail, target: target, app: app, into: &actions)
    }

    /// A dead letter that is one of the records `resolution` waits for.
    mutating func deadLetter(_ offsets: [Int64], resolution: ResolutionID, partitionSlot: Int32, reason: RejectionReason,
                             detail: String, target: String, app: String?, into actions: inout [EngineAction]) {
        actions.append(.deadLetter(DeadLetter(resolution: resolution, sources: sources(offsets, partitionSlot: partitionSlot),
                                              reason: reason, detail: detail, target: target, app: app)))
    }
}
