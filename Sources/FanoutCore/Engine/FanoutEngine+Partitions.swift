/// Partitions, offsets, commit points, resolutions and backpressure counts.
extension FanoutEngine {
    /// Starts tracking `partition` (idempotent). Receiving on an unassigned partition assigns it too.
    ///
    /// With `now` (the worker's assignment time), min_interval also holds across the handoff: the
    /// previous owner's last send started before it gave the partition up, so a target this worker
    /// first sees on the partition sends no earlier than `now + min_interval`. (Its priority-10 bucket
    /// cannot be carried over: it starts full, as for any target first seen.)
    /// With `lane`, the partition's lane is known before its first event, so `revoke` drops the token
    /// registrations of an activity partition that never saw one.
    public mutating func assign(_ partition: PartitionID, lane: Lane? = nil, now: Nanoseconds? = nil) {
        let slot = Int(assignSlot(partition))
        if let now, partitions[slot]!.assignedAt == .min { partitions[slot]!.assignedAt = now }
        if let lane, partitions[slot]!.lane == nil { partitions[slot]!.lane = lane }
    }

    /// Stops tracking `partitions`: returns their final commit points, then forgets their offsets,
    /// dedupe windows and targets (and, for activity-lane partitions, the token registrations of the
    /// same partition number). Outcomes of their sends still in flight are ignored afterwards; the
    /// worker should wait for them (bounded) before calling this.
    public mutating func revoke(_ revoked: [PartitionID]) -> [CommitPoint] {
        var points: [CommitPoint] = []
        var slots = Set<Int32>()
        for id in revoked {
            guard let slot = partitionSlotByID.removeValue(forKey: id), let state = partitions[Int(slot)] else { continue }
            if let offset = state.tracker.commitPoint { points.append(CommitPoint(partition: id, offset: offset)) }
            totalIncomplete -= state.tracker.incompleteCount
            if state.lane == .activity { tokens.removeAll(partition: id.partition) }
            partitions[Int(slot)] = nil
            slots.insert(slot)
            for index in partitionCacheSlots.indices where partitionCacheSlots[index] == slot { partitionCacheSlots[index] = -1 }
        }
        guard !slots.isEmpty else { return points }
        for index in targets.indices where targets[index].live && slots.contains(targets[index].partitionSlot) {
            freeTarget(Int32(index))
        }
        for sendID in inFlight.ids(where: { slots.contains($0.partitionSlot) }) {
            if inFlight.remove(sendID)?.isProbe == true {
                // Its answer will be ignored: without this the app would wait for that probe forever
                // (never probed again, every target parked, its partitions' commits stuck).
                for appIndex in Array(paused.keys) where paused[appIndex]!.probeSendID == sendID {
                    paused[appIndex]!.probeSendID = 0
                }
            }
            totalInFlight -= 1
        }
        resolutions = resolutions.filter { !slots.contains($0.value.partitionSlot) }
        freePartitionSlots.append(contentsOf: slots.sorted())
        return points
    }

    /// Commit points that moved since the last call (Kafka's next offset to read, per partition).
    public mutating func commitPoints() -> [CommitPoint] {
        var points: [CommitPoint] = []
        for index in partitions.indices {
            guard let state = partitions[index], let offset = state.tracker.commitPoint,
                  offset != state.lastReportedCommit else { continue }
            partitions[index]!.lastReportedCommit = offset
            points.append(CommitPoint(partition: state.id, offset: offset))
        }
        return points
    }

    /// Incomplete offsets and in-flight sends of one partition, or nil when it is not assigned.
    public func load(of partition: PartitionID) -> Load? {
        guard let slot = partitionSlotByID[partition], let state = partitions[Int(slot)] else { return nil }
        return Load(incomplete: state.tracker.incompleteCount, inFlight: state.inFlight)
    }

    /// Totals over all partitions.
    public var totalLoad: Load { Load(incomplete: totalIncomplete, inFlight: totalInFlight) }

    /// True when the partition (or the process) reached a bound: pause fetching it.
    public func shouldPause(_ partition: PartitionID) -> Bool {
        guard let load = load(of: partition) else { return false }
        return load.incomplete >= configuration.maxIncompletePerPartition
            || load.inFlight >= configuration.maxInFlightPerPartition
            || totalIncomplete >= configuration.maxIncompleteTotal
    }

    /// Backpressure relief, for when the worker pauses `partition`: the minor updates its targets hold
    /// back (waiting for `max_quiet` or a bigger progress step) go as soon as min_interval and the
    /// budget allow, at priority 5, instead of holding the offsets they carry, and with them the
    /// whole partition, for up to `max_quiet`. O(targets): called once per pause.
    public mutating func relieve(_ partition: PartitionID, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let slot = partitionSlotByID[partition] else { return }
        for index in targets.indices
        where targets[index].live && targets[index].partitionSlot == slot && targets[index].pending != nil
            && targets[index].inFlightSendID == 0 && !targets[index].relieved {
            targets[index].relieved = true
            evaluate(Int32(index), now: now, into: &actions)
        }
    }

    /// True when a paused partition drained below half of every bound: resume fetching it.
    public func mayResume(_ partition: PartitionID) -> Bool {
        guard let load = load(of: partition) else { return true }
        return load.incomplete < configuration.maxIncompletePerPartition / 2
            && load.inFlight < configuration.maxInFlightPerPartition / 2
            && totalIncomplete < configuration.maxIncompleteTotal / 2
    }

    /// Number of tracked targets.
    public var targetCount: Int { slotByKey.count }

    // MARK: Internals

    mutating func assignSlot(_ partition: PartitionID) -> Int32 {
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
        // A slot freed by `revoke` is reused (else every rebalance would grow `partitions` for the life
        // of the process): revoke removed every reference to it (targets, sends in flight, resolutions,
        // the cache), so nothing late can reach the new occupant.
        let state = PartitionState(id: partition, dedupe: DedupeWindow(capacity: configuration.dedupeWindowPerPartition))
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

    /// Starts tracking a target whose key is not tracked yet (`slot(of:id:)` returned nil).
    mutating func newTarget(_ hash: TargetHash, id: String, app: String, partitionSlot: Int32, now: Nanoseconds) -> Int32 {
        let lane = hash.lane
        let appIndex = internApp(app)
        var profileIndex: UInt16 = 0
        if let type = configuration.attributesTypeByApp[app] { profileIndex = profileIndexByType[type] ?? 0 }
        let settings = configuration.budget(lane: lane, app: app)
        let budgetClass: BudgetClass = lane == .broadcast ? .broadcast
            : configuration.frequentUpdatesApps.contains(app) ? .frequentUpdates : .activity
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            let old = targets[Int(free)]
            targets[Int(free)] = TargetState(key: id, lane: lane, appIndex: appIndex, profileIndex: profileIndex, partitionSlot: partitionSlot,
                                             generation: old.generation &+ 1, incarnation: old.incarnation &+ 1, now: now, budgetClass: budgetClass, budget: settings)
        } else {
            slot = Int32(targets.count)
            targets.append(TargetState(key: id, lane: lane, appIndex: appIndex, profileIndex: profileIndex, partitionSlot: partitionSlot,
                                       generation: 0, incarnation: 0, now: now, budgetClass: budgetClass, budget: settings))
        }
        // A handoff: nothing earlier than the assignment + min_interval (see `assign(_:now:)`).
        targets[Int(slot)].lastSendAt = max(targets[Int(slot)].lastSendAt, partitions[Int(partitionSlot)]!.assignedAt)
        slotByKey.insert(hash, slot: slot)
        return slot
    }

    mutating func internApp(_ app: String) -> UInt16 {
        if let index = appIndexByName[app] { return index }
        precondition(apps.count < Int(UInt16.max), "more than 65535 distinct apps")
        let index = UInt16(apps.count)
        apps.append(app)
        appIndexByName[app] = index
        return index
    }

    mutating func freeTarget(_ slot: Int32) {
        let index = Int(slot)
        slotByKey.remove(TargetHash(lane: targets[index].lane, id: targets[index].key), slot: slot)
        targets[index].pending = nil
        targets[index].live = false
        targets[index].generation &+= 1
        targets[index].key = ""
        targets[index].lastOutcome = nil
        freeSlots.append(slot)
    }

    mutating func completeOffset(_ offset: Int64, partitionSlot: Int32) {
        guard partitions.indices.contains(Int(partitionSlot)), partitions[Int(partitionSlot)] != nil else { return }
        if partitions[Int(partitionSlot)]!.tracker.complete(offset) { totalIncomplete -= 1 }
    }

    mutating func drop(_ offset: Int64, partitionSlot: Int32, reason: DropReason, into actions: inout [EngineAction]) {
        completeOffset(offset, partitionSlot: partitionSlot)
        // Through the buffer: via Array's getter the optimizer copied the whole partition state (its
        // offset and dedupe tables retained and released) to read the id, once per dropped event.
        if let id = partitions.withUnsafeBufferPointer({ $0[Int(partitionSlot)]?.id }) {
            actions.append(.dropped(EventSource(partition: id, offset: offset), reason))
        }
    }

    mutating func makeResolution(_ offsets: [Int64], partitionSlot: Int32) -> ResolutionID {
        let id = nextResolutionID
        nextResolutionID += 1
        resolutions[id] = (partitionSlot, offsets)
        return ResolutionID(rawValue: id)
    }

    func sources(_ offsets: [Int64], partitionSlot: Int32) -> [EventSource] {
        guard let id = partitions[Int(partitionSlot)]?.id else { return [] }
        return offsets.map { EventSource(partition: id, offset: $0) }
    }

    mutating func deadLetter(_ offsets: [Int64], partitionSlot: Int32, reason: RejectionReason, detail: String,
                             target: String, app: String?, into actions: inout [EngineAction]) {
        let resolution = makeResolution(offsets, partitionSlot: partitionSlot)
        actions.append(.deadLetter(DeadLetter(resolution: resolution, sources: sources(offsets, partitionSlot: partitionSlot),
                                              reason: reason, detail: detail, target: target, app: app)))
    }
}
