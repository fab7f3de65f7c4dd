/// State handed over between owners of a partition through the compacted changelog
/// (docs/design.md §11, `EngineConfiguration.handoffState`): each delivered activity send saves its
/// target's `TargetHandoff` before the offsets it covers complete, and the next owner restores the
/// partition's records before it sends, so a handoff resets no priority-10 budget and no min_interval
/// spacing, and does not send again what was delivered and saved. What it cannot prevent: a send
/// delivered whose record was not yet acknowledged when its owner died is sent again (the offsets
/// it covered were not committed either).
extension FanoutEngine {
    /// The activity partition `partition`'s changelog was read up to its high watermark for
    /// `assignment`; `records` is what it holds (the newest record of each key, tombstoned keys left
    /// out). Each record is merged into its target, created when not tracked; then the partition goes
    /// live once its tokens are read too. A report of an earlier assignment changes nothing.
    public mutating func stateRestored(partition: Int32, assignment: AssignmentID, records: some Sequence<TargetHandoff>,
                                       now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let index = catchingUpSlot(partition: partition, assignment: assignment), !partitions[index]!.stateRestored else { return }
        for record in records { restore(record, partitionSlot: Int32(index), now: now, into: &actions) }
        partitions[index]!.stateRestored = true
        goLiveIfCaughtUp(index, now: now, into: &actions)
    }

    /// Saves what the delivered send of target `index` leaves (`.saveState`); its offsets complete when
    /// the record is acknowledged (`resolve`).
    mutating func saveHandoff(_ index: Int, offsets: [Int64], partitionSlot: Int32, into actions: inout [EngineAction]) {
        guard partitions[Int(partitionSlot)] != nil else { return }  // revoked: its offsets went with it
        saveHandoff(handoff(of: index), index, resolution: makeResolution(offsets, partitionSlot: partitionSlot),
                    partitionSlot: partitionSlot, into: &actions)
    }

    /// The saves of ends settled without delivery whose feedback or dead letter was acknowledged
    /// (`resolve`). A target forgotten since has its record tombstoned instead: its offsets complete.
    mutating func saveSettledEnds(into actions: inout [EngineAction]) {
        for save in settledEndSaves {
            let index = Int(save.slot)
            if targets[index].live && targets[index].incarnation == save.incarnation {
                saveHandoff(handoff(of: index), index, resolution: save.resolution, partitionSlot: save.partitionSlot, into: &actions)
            } else {
                resolve(save.resolution)
            }
        }
        settledEndSaves.removeAll(keepingCapacity: true)
    }

    private mutating func saveHandoff(_ record: TargetHandoff, _ index: Int, resolution: ResolutionID, partitionSlot: Int32,
                                      into actions: inout [EngineAction]) {
        guard partitions[Int(partitionSlot)] != nil else { return }
        let partition = partitions[Int(partitionSlot)]!.id
        targets[index].inChangelog = true
        targets[index].sendUnsaved = false
        actions.append(.saveState(record, partition: partition, resolution: resolution))
    }

    /// An orderly revoke of activity partition `partitionSlot`: saves every target whose last send is in
    /// no record yet (it failed, timed out or is still in flight: APNs may have counted it all the same),
    /// so the next owner restores the priority-10 credit and the send time it spent, not the state of
    /// the last delivered send. The saves cover no offsets; the partition drains once they are
    /// acknowledged, before its final commit and before the next owner is given it.
    mutating func saveUnsavedSends(partitionSlot: Int32, into actions: inout [EngineAction]) {
        var target = partitions[Int(partitionSlot)]!.firstTarget
        while target >= 0 {
            if targets[Int(target)].sendUnsaved {
                // Not ended: an end known here and not delivered (cancelled with its start, dead-lettered,
                // its token gone) is not yet done, and the next owner must judge its replay itself. A
                // delivered end was saved already, and nothing is sent after it.
                var record = handoff(of: Int(target))
                record.ended = false
                saveHandoff(record, Int(target), resolution: makeResolution([], partitionSlot: partitionSlot),
                            partitionSlot: partitionSlot, into: &actions)
            }
            target = targets[Int(target)].nextInPartition
        }
    }

    func handoff(of index: Int) -> TargetHandoff {
        TargetHandoff(key: targets[index].key, app: apps[Int(targets[index].appIndex)],
                      lastSentTimestamp: targets[index].lastSentTimestamp, lastSentSummary: targets[index].lastSentSummary,
                      bucket: targets[index].bucket, lastSendAt: targets[index].lastSendAt,
                      lastDeliveredAt: targets[index].lastDeliveredAt, tokenNotBefore: targets[index].tokenNotBefore,
                      ended: targets[index].ended, pushToStart: pushToStartCredit(of: index),
                      attributesType: attributesTypeToSave(of: index))
    }

    /// The attributes type whose profile summarizes target `index`'s content, when a start named one
    /// other than what its app's activities get without a start (`appProfiles`): the next owner must
    /// compare the next state with the same profile.
    private func attributesTypeToSave(of index: Int) -> String? {
        let profile = targets[index].profileIndex
        return profile == appProfiles[Int(targets[index].appIndex)] ? nil : profileTypes[Int(profile)]
    }

    /// The bucket of the push-to-start token target `index` was started through, while not full again.
    private func pushToStartCredit(of index: Int) -> TargetHandoff.PushToStartCredit? {
        guard !pushToStartOfTarget.isEmpty, let entry = pushToStartOfTarget[Int32(index)],
              entry.incarnation == targets[index].incarnation, let bucket = pushToStartBuckets[entry.token] else { return nil }
        return TargetHandoff.PushToStartCredit(token: entry.token, bucket: bucket)
    }

    /// A saved push-to-start bucket: the emptier of it and the one known here wins (several targets
    /// started through one token each carry the bucket as of their own save), and the target carries
    /// it on in its own records.
    private mutating func restore(_ credit: TargetHandoff.PushToStartCredit, slot: Int32, now: Nanoseconds) {
        let settings = configuration.pushToStartBudget
        let saved = credit.bucket.available(at: now, settings: settings)
        if saved < pushToStartBuckets[credit.token]?.available(at: now, settings: settings) ?? settings.burst {
            pushToStartBuckets[credit.token] = credit.bucket
        }
        pushToStartOfTarget[slot] = (targets[Int(slot)].incarnation, credit.token)
    }

    /// Merges one record into its target. A target already tracked (events read while the changelog
    /// was) keeps whichever of each fact is further along: the newer delivered state, the emptier
    /// bucket, the later send. A pending state no newer than what was delivered is already on the
    /// device: its offsets are done without a send. Only delivered facts move `latestAccepted`: an
    /// event the previous owner accepted and never delivered is replayed here and must be taken.
    private mutating func restore(_ record: TargetHandoff, partitionSlot: Int32, now: Nanoseconds, into actions: inout [EngineAction]) {
        let hash = TargetHash(lane: .activity, id: record.key)
        let slot: Int32
        if let existing = self.slot(of: hash, id: record.key) {
            // Tracked under another partition (one key on two partitions): not this partition's to restore.
            guard targets[Int(existing)].partitionSlot == partitionSlot else { return }
            slot = existing
        } else {
            slot = newTarget(hash, id: record.key, app: record.app, partitionSlot: partitionSlot, now: now)
            // Idle since its last delivery, as far as retention and eviction go.
            targets[Int(slot)].lastActiveAt = min(now, max(record.lastDeliveredAt, record.lastSendAt))
            targets[Int(slot)].recentlyActive = false
        }
        let index = Int(slot)
        targets[index].inChangelog = true
        if let type = record.attributesType, targets[index].profileIndex == appProfiles[Int(targets[index].appIndex)] {
            // No start read here named another type (a replayed start names the record's own). A type
            // this configuration has no profile for summarizes as the default, as its start would.
            targets[index].profileIndex = profileIndexByType[type] ?? 0
        }
        if record.lastSentTimestamp > targets[index].lastSentTimestamp {
            targets[index].lastSentTimestamp = record.lastSentTimestamp
            targets[index].lastSentSummary = record.lastSentSummary
            targets[index].lastDeliveredAt = max(targets[index].lastDeliveredAt, record.lastDeliveredAt)
        }
        targets[index].latestAccepted = max(targets[index].latestAccepted, record.lastSentTimestamp)
        let settings = budget(of: targets[index])
        if record.bucket.available(at: now, settings: settings) < targets[index].bucket.available(at: now, settings: settings) {
            targets[index].bucket = record.bucket
        }
        targets[index].lastSendAt = max(targets[index].lastSendAt, record.lastSendAt)
        targets[index].tokenNotBefore = max(targets[index].tokenNotBefore, record.tokenNotBefore)
        if let credit = record.pushToStart { restore(credit, slot: slot, now: now) }
        if record.ended {
            targets[index].ended = true
            targets[index].endAccepted = true
        }
        if targets[index].hasPending {
            let pendingTimestamp = pendings[targets[index].pendingIndex].event.timestamp
            if record.ended || pendingTimestamp <= record.lastSentTimestamp {
                let reason: DropReason = pendingTimestamp <= record.lastSentTimestamp ? .notNewer : .afterEnd
                for offset in takePending(index).offsets { drop(offset, partitionSlot: partitionSlot, reason: reason, into: &actions) }
            }
        }
        settle(slot, now: now)
    }
}
