/// How long a target is remembered (docs/design.md §6: what the dedupe and timestamp rules need, no
/// longer), with every cost bounded and none growing with the number of tracked targets:
///
/// - An ended target (its end delivered or resolved) is kept `endedRetention` after its end or the
///   last event for it, whichever is later, so that late events are dropped as after-end and
///   duplicates as such; then it is forgotten (`releaseEndedTargets`, O(log n) each, at most
///   `releaseBatchLimit` a tick). Its activity's token is retired with it (`TokenRegistry.retire`):
///   a late event for the key then finds no usable token and, like any update without one, waits
///   `tokenWait` and is dead-lettered `no-token` — it is never sent to the ended activity.
/// - An idle target (nothing pending or in flight, in no waiting list) is forgotten after
///   `forgetIdleAfter` without activity (`sweepIdleTargets`: every slot is looked at once per
///   `sweepInterval`, in slices of at most `sweepSliceLimit` slots a tick).
/// - Past `maxTrackedTargets`, making room for a new target evicts the least recently active idle
///   ones (`evictIdleTargets`: a clock hand, at most `evictionScanLimit` slots per new target).
///
/// Nothing that holds work is ever forgotten (`TargetState.holdsWork`): not a pending update (whose
/// offsets are incomplete), a send in flight, a target parked behind a paused app or held for its
/// partition's tokens, a channel lookup. An idle target's offsets are all done (dead letters and
/// feedback records complete theirs through `resolutions`, without the target). What a forgotten
/// target loses: its priority-10 budget (a later event starts a full bucket), min_interval spacing,
/// backoff, last sent timestamp and content (a later update is major, and an older timestamp is no
/// longer refused), and, once ended, the after-end rule.
extension FanoutEngine {
    /// Ended targets forgotten per tick at most; the rest are due at once (`nextDeadline`).
    static let releaseBatchLimit = 4_096
    /// Slots the idle sweep looks at per tick at most.
    static let sweepSliceLimit = 65_536
    /// Slots the eviction hand passes per new target at most, and targets evicted per new target at
    /// most (two, so a table over the bound converges back to it).
    static let evictionScanLimit = 64
    static let evictionsPerNewTarget = 2

    /// After anything that may change what a target holds (`receive`, `evaluate`): keeps the per-lane
    /// busy counts, marks when its work ended, and schedules an ended target's release.
    mutating func settle(_ slot: Int32, now: Nanoseconds) {
        let index = Int(slot)
        // Read through the buffer (no uniqueness check of `targets`): most calls change nothing.
        let (unchanged, busy) = targets.withUnsafeBufferPointer { buffer in
            let busy = buffer[index].pendingIndex >= 0 || buffer[index].inFlightSendID != 0
            return (!buffer[index].live || (busy == buffer[index].busy && (!buffer[index].ended || buffer[index].retentionScheduled)), busy)
        }
        guard !unchanged else { return }
        if busy != targets[index].busy {
            targets[index].busy = busy
            laneBusy[targets[index].lane.slot] += busy ? 1 : -1
            if !busy { targets[index].lastActiveAt = now }
        }
        if targets[index].ended && !targets[index].retentionScheduled && !targets[index].holdsWork {
            targets[index].retentionScheduled = true
            endedRetention.push(DeadlineHeap.Entry(deadline: targets[index].lastActiveAt + configuration.endedRetention,
                                                   slot: slot, generation: targets[index].incarnation))
        }
    }

    /// Forgets ended targets whose retention passed. One that saw a late event since it was scheduled
    /// is kept `endedRetention` after that event.
    mutating func releaseEndedTargets(now: Nanoseconds) {
        var popped = 0
        while popped < Self.releaseBatchLimit, let top = endedRetention.top, top.deadline <= now {
            _ = endedRetention.pop()
            popped += 1
            let index = Int(top.slot)
            guard targets[index].live, targets[index].incarnation == top.generation, targets[index].retentionScheduled else { continue }
            let due = targets[index].lastActiveAt + configuration.endedRetention
            if due > now {
                endedRetention.push(DeadlineHeap.Entry(deadline: due, slot: top.slot, generation: top.generation))
                continue
            }
            guard !targets[index].holdsWork else {
                targets[index].retentionScheduled = false  // scheduled again once its work is done (`settle`)
                continue
            }
            forgetTarget(top.slot)
            forgotten.ended += 1
        }
    }

    /// When the next ended target is due to be forgotten.
    var nextRetentionDeadline: Nanoseconds? { endedRetention.top?.deadline }

    /// Looks at this tick's share of the target slots (every slot once per `sweepInterval`) and
    /// forgets idle targets without activity for `forgetIdleAfter`; once per round, full push-to-start
    /// buckets too.
    mutating func sweepIdleTargets(now: Nanoseconds) {
        guard lastSweepAt != .min else {
            lastSweepAt = now
            return
        }
        guard now > lastSweepAt, !targets.isEmpty else { return }
        let share = (Double(targets.count) * Double(now - lastSweepAt) / Double(configuration.sweepInterval)).rounded(.up)
        let steps = Int(min(share, Double(min(targets.count, Self.sweepSliceLimit))))
        lastSweepAt = now
        for _ in 0..<steps {
            if sweepHand >= targets.count {
                sweepHand = 0
                forgetFullPushToStartBuckets(now: now)
            }
            let index = sweepHand
            sweepHand += 1
            guard targets[index].live, !targets[index].ended, !targets[index].holdsWork,
                  now - targets[index].lastActiveAt >= configuration.forgetIdleAfter else { continue }
            forgetTarget(Int32(index))
            forgotten.idle += 1
        }
    }

    /// When a slice of the sweep is next worth running: a tenth of `sweepInterval` after the last one.
    var nextSweepDeadline: Nanoseconds? {
        guard !slotByKey.isEmpty, lastSweepAt != .min else { return nil }
        return lastSweepAt + max(configuration.sweepInterval / 10, 1)
    }

    /// Makes room for a new target at `maxTrackedTargets`: a clock hand passes the slots, sparing each
    /// recently active one once (clearing its mark) and evicting the first idle one it finds unmarked,
    /// so the least recently active idle targets go first. Bounded per call; when every slot it passes
    /// holds work or was active, the new target is tracked anyway (the bound is exceeded by at most
    /// the targets holding work, which backpressure bounds, plus a slow hand's lag).
    mutating func evictIdleTargets() {
        var steps = 0, evicted = 0
        while slotByKey.count >= configuration.maxTrackedTargets, steps < Self.evictionScanLimit,
              evicted < Self.evictionsPerNewTarget, !targets.isEmpty {
            if evictionHand >= targets.count { evictionHand = 0 }
            let index = evictionHand
            evictionHand += 1
            steps += 1
            guard targets[index].live, !targets[index].holdsWork else { continue }
            if targets[index].recentlyActive {
                targets[index].recentlyActive = false
                continue
            }
            forgetTarget(Int32(index))
            forgotten.evicted += 1
            evicted += 1
        }
    }

    /// Forgets an idle target; an ended activity's token goes with it (`TokenRegistry.retire`).
    mutating func forgetTarget(_ slot: Int32) {
        let index = Int(slot)
        if targets[index].ended && targets[index].lane == .activity {
            tokens.retire(key: targets[index].key, endedAt: targets[index].latestAccepted)
        }
        let partitionSlot = Int(targets[index].partitionSlot)
        if targets[index].inChangelog, partitions[partitionSlot] != nil {
            forgottenHandoffs.append((targets[index].key, partitions[partitionSlot]!.id.partition))
        }
        freeTarget(slot)
    }

    private mutating func forgetFullPushToStartBuckets(now: Nanoseconds) {
        for (token, bucket) in pushToStartBuckets
        where bucket.available(at: now, settings: configuration.pushToStartBudget) >= configuration.pushToStartBudget.burst {
            pushToStartBuckets[token] = nil
        }
        // A full bucket is what a new owner starts with anyway: no record needs to carry it any more.
        pushToStartOfTarget = pushToStartOfTarget.filter { pushToStartBuckets[$0.value.token] != nil }
    }
}
