import APNsModel

/// What each APNs outcome does (docs/design.md §4).
extension FanoutEngine {
    /// The result of send `sendID`. Unknown ids (for example sends of a revoked partition) are ignored.
    public mutating func complete(_ sendID: UInt64, outcome: SendOutcome, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let send = inFlight.remove(sendID) else { return }
        totalInFlight -= 1
        // A send of a forgotten partition was removed from `inFlight` then: this one's partition is ours.
        partitions[Int(send.partitionSlot)]!.inFlight -= 1
        let laneSlot = partitions[Int(send.partitionSlot)]!.lane.slot
        laneInFlight[laneSlot] -= 1
        // Last: the target waiting longest for room in the lane goes once this outcome is handled.
        defer { admitWaiting(laneSlot, now: now, into: &actions) }
        // Decided first, acted on last: a closing partition whose last send this was is drained after
        // the outcome's own actions (its feedback or dead letter holds the drain until acknowledged).
        defer { if isClosing(send.partitionSlot) { drainIfDone(send.partitionSlot, now: now, into: &actions) } }
        let index = Int(send.slot)
        guard targets[index].live, targets[index].incarnation == send.incarnation else { return }
        targets[index].inFlightSendID = 0
        targets[index].lastOutcome = OutcomeSummary(outcome)
        targets[index].lastOutcomeAt = now
        let appIndex = targets[index].appIndex
        let event = send.update.event

        switch outcome {
        case .delivered:
            targets[index].deliveries &+= 1
            targets[index].lastSentTimestamp = event.timestamp
            targets[index].lastSentSummary = send.update.summary
            targets[index].lastDeliveredAt = now
            targets[index].attempts = 0
            if event.kind == .end { targets[index].ended = true }
            if event.kind == .start { targets[index].tokenNotBefore = event.timestamp }
            if configuration.handoffState && targets[index].lane == .activity {
                saveHandoff(index, offsets: send.update.offsets, partitionSlot: send.partitionSlot, into: &actions)
            } else {
                for offset in send.update.offsets { completeOffset(offset, partitionSlot: send.partitionSlot) }
            }
            configurationWorks(appIndex, send: sendID, now: now, into: &actions)

        case let .tokenGone(reason, status, apnsTimestampMillis):
            targets[index].attempts = 0
            if event.kind == .end { targets[index].ended = true }
            let resolution = makeResolution(send.update.offsets, partitionSlot: send.partitionSlot,
                                            thenSave: settledEndToSave(index, slot: send.slot, event: event))
            switch send.destination {
            case let .activityToken(token), let .pushToStartToken(token):
                if case .activityToken = send.destination { tokens.markGone(key: targets[index].key, token: token) }
                actions.append(.feedback(TokenFeedback(
                    resolution: resolution, key: targets[index].key, token: token, app: apps[Int(appIndex)],
                    status: status, reason: reason, apnsTimestampMillis: apnsTimestampMillis,
                    observedAt: now / Int64.nanosecondsPerSecond,
                    sources: sources(send.update.offsets, partitionSlot: send.partitionSlot))))
            case .channel:
                targets[index].channelPolicy = .unknown  // a channel created again later is asked anew
                actions.append(.deadLetter(DeadLetter(
                    resolution: resolution, sources: sources(send.update.offsets, partitionSlot: send.partitionSlot),
                    reason: .channelNotRegistered, detail: "APNs \(status) \(reason) for channel",
                    target: targets[index].key, app: apps[Int(appIndex)])))
            }
            configurationWorks(appIndex, send: sendID, now: now, into: &actions)

        case let .badPayload(reason, status):
            targets[index].attempts = 0
            if event.kind == .end { targets[index].ended = true }
            let resolution = makeResolution(send.update.offsets, partitionSlot: send.partitionSlot,
                                            thenSave: settledEndToSave(index, slot: send.slot, event: event))
            deadLetter(send.update.offsets, resolution: resolution, partitionSlot: send.partitionSlot, reason: .rejectedByAPNs,
                       detail: "APNs \(status) \(reason)", target: targets[index].key, app: apps[Int(appIndex)], into: &actions)
            configurationWorks(appIndex, send: sendID, now: now, into: &actions)

        case let .retry(reason, status, after):
            backOff(index, suggested: after.map { Nanoseconds($0) }, now: now)
            // Lane-wide failures (no HTTP answer, 5xx) without a retry-after: recovered early when the
            // lane answers again. A 429 is about this token or topic and keeps its own backoff.
            if status.map({ $0 >= 500 }) ?? true {
                laneFailed(targets[index].lane.slot, reason: status.map { "APNs \($0) \(reason)" } ?? reason, now: now, into: &actions)
                if after == nil { listOutageBackoff(index, now: now) }
            }
            requeue(send.update, slot: send.slot)
            if send.isProbe { probeFailed(appIndex, now: now) }

        case .refreshAuth:
            // The transport mints a new JWT on its own; retry after a (jittered) backoff so a broken
            // key cannot turn into a tight loop.
            backOff(index, suggested: nil, now: now)
            requeue(send.update, slot: send.slot)
            if send.isProbe { probeFailed(appIndex, now: now) }

        case let .configError(reason, status):
            requeue(send.update, slot: send.slot)
            if paused[appIndex] == nil {
                paused[appIndex] = PausedApp(reason: "APNs \(status) \(reason)", probeAt: now + configuration.configProbeInterval)
                actions.append(.pauseApp(app: apps[Int(appIndex)], reason: "APNs \(status) \(reason)"))
            } else if send.isProbe {
                probeFailed(appIndex, now: now)
            }
        }
        evaluate(send.slot, now: now, into: &actions)
        switch outcome {
        case .delivered, .tokenGone, .badPayload:
            // APNs answered this lane over HTTP: it is reachable again.
            let lane = targets[index].lane.slot
            laneAnswered(lane, now: now, into: &actions)
            if !outageBackoffs[lane].isEmpty { recoverLane(lane, now: now, into: &actions) }
        case .retry, .refreshAuth, .configError:
            break
        }
    }

    /// An activity's end settled without delivery (its token gone, or its payload refused): the target
    /// has ended all the same. With the changelog its record says so once the feedback or dead letter
    /// is acknowledged, and the end's offsets complete only after that record, so the next owner drops
    /// what comes after it too; an end replayed before then is settled again (docs/design.md §11).
    private func settledEndToSave(_ index: Int, slot: Int32, event: ActivityEvent) -> (slot: Int32, incarnation: UInt32)? {
        guard event.kind == .end && configuration.handoffState && targets[index].lane == .activity else { return nil }
        return (slot, targets[index].incarnation)
    }

    /// A lane-wide failure: the lane's failing episode starts (or goes on); reported once it lasted
    /// `laneFailingAfter`.
    private mutating func laneFailed(_ lane: Int, reason: String, now: Nanoseconds, into actions: inout [EngineAction]) {
        if laneFailingSince[lane] == nil { laneFailingSince[lane] = now }
        laneLastFailure[lane] = reason
        reportFailingLanes(now: now, into: &actions)
    }

    private mutating func laneAnswered(_ lane: Int, now: Nanoseconds, into actions: inout [EngineAction]) {
        guard let since = laneFailingSince[lane] else { return }
        laneFailingSince[lane] = nil
        if laneFailingReported[lane] {
            laneFailingReported[lane] = false
            actions.append(.laneRecovered(lane: Lane.allCases[lane], after: now - since))
        }
    }

    /// Says `.laneFailing` for each lane whose failing episode has lasted `laneFailingAfter` (once).
    mutating func reportFailingLanes(now: Nanoseconds, into actions: inout [EngineAction]) {
        for lane in 0..<2 where !laneFailingReported[lane] {
            guard let since = laneFailingSince[lane], now - since >= configuration.laneFailingAfter else { continue }
            laneFailingReported[lane] = true
            actions.append(.laneFailing(lane: Lane.allCases[lane], since: since, reason: laneLastFailure[lane]))
        }
    }

    /// A target backed off by a lane-wide failure. The lane keeps one retry due at least every
    /// `max(recoveryRamp, 1 s)` (a probe), so recovery is noticed even when every backoff grew long; and
    /// the target is remembered, once, to be re-armed on recovery when its backoff reaches past the ramp.
    private mutating func listOutageBackoff(_ index: Int, now: Nanoseconds) {
        let lane = targets[index].lane.slot
        let probeEvery = max(configuration.recoveryRamp, .seconds(1))
        if targets[index].backoffUntil <= now + probeEvery {
            laneRetryDueBy[lane] = max(laneRetryDueBy[lane], targets[index].backoffUntil)
        } else if laneRetryDueBy[lane] <= now {
            targets[index].backoffUntil = now + probeEvery
            laneRetryDueBy[lane] = now + probeEvery
        }
        guard !targets[index].outageListed, targets[index].backoffUntil > now + configuration.recoveryRamp else { return }
        let liveTargets = targets.count - freeSlots.count
        if outageBackoffs[lane].count >= liveTargets + 1024 {
            // Entries of targets freed since they were listed: drop them (amortized, the list at most doubles).
            outageBackoffs[lane].removeAll { entry in
                !(targets[Int(entry.slot)].live && targets[Int(entry.slot)].incarnation == entry.incarnation
                  && targets[Int(entry.slot)].outageListed)
            }
        }
        targets[index].outageListed = true
        outageBackoffs[lane].append((Int32(index), targets[index].incarnation))
    }

    /// The lane answers again: every target it backed off for the outage retries within `recoveryRamp`
    /// (uniformly spread, so the recovered service is not hit by all of them at once), unless its own
    /// backoff ends sooner. min_interval, the budget and the one-send-in-flight rule still apply.
    private mutating func recoverLane(_ lane: Int, now: Nanoseconds, into actions: inout [EngineAction]) {
        let listed = outageBackoffs[lane]
        outageBackoffs[lane].removeAll(keepingCapacity: true)
        let ramp = configuration.recoveryRamp
        for entry in listed {
            let index = Int(entry.slot)
            guard targets[index].live, targets[index].incarnation == entry.incarnation, targets[index].outageListed else { continue }
            targets[index].outageListed = false
            let retryAt = now + (ramp > 0 ? Int64(random.next() % UInt64(ramp + 1)) : 0)
            guard retryAt < targets[index].backoffUntil else { continue }
            targets[index].backoffUntil = retryAt
            evaluate(entry.slot, now: now, into: &actions)
        }
    }

    /// Exponential backoff with full jitter, capped; APNs's suggested delay is a floor.
    private mutating func backOff(_ index: Int, suggested: Nanoseconds?, now: Nanoseconds) {
        targets[index].attempts = targets[index].attempts == .max ? .max : targets[index].attempts + 1
        let exponent = min(Int(targets[index].attempts) - 1, 40)
        let ceiling = configuration.backoffBase > configuration.backoffCap >> exponent
            ? configuration.backoffCap
            : min(configuration.backoffCap, configuration.backoffBase << exponent)
        let jitter = ceiling > 0 ? Int64(random.next() % UInt64(ceiling + 1)) : 0
        // APNs's retry-after is a floor, honoured up to `backoffCap`: a value of days or years (the
        // header is digits, up to Int) would otherwise hold the target, and its partition's commits, for that long.
        let floor = min(suggested ?? 0, configuration.backoffCap)
        targets[index].backoffUntil = now + max(jitter, floor)
    }

    /// Puts an undelivered state back as pending; a newer pending state wins, keeping the offsets.
    /// A start put back may have reached the device: it is marked, so its end is sent, not cancelled.
    private mutating func requeue(_ update: PendingUpdate, slot: Int32) {
        let index = Int(slot)
        var merged = update
        merged.startWasAttempted()
        guard targets[index].hasPending else {
            targets[index].pendingIndex = pendings.insert(merged)
            return
        }
        let newer = takePending(index)
        switch merged.absorb(newer) {
        case .merged:
            break
        case .cancelled:
            preconditionFailure("a start that was sent is marked attempted, so its end never cancels it")
        case let .endsPossiblyStartedActivity(startTimestamp):
            targets[index].tokenNotBefore = max(targets[index].tokenNotBefore, startTimestamp)
        }
        targets[index].pendingIndex = pendings.insert(merged)
    }

    /// A send of the app got an answer that proves its credentials and topic work: resume it.
    private mutating func configurationWorks(_ appIndex: UInt16, send: UInt64, now: Nanoseconds, into actions: inout [EngineAction]) {
        // isEmpty first: every delivered send passes here, and hashing the key of an empty dictionary is not free.
        guard !paused.isEmpty, let app = paused.removeValue(forKey: appIndex) else { return }
        actions.append(.resumeApp(app: apps[Int(appIndex)]))
        for entry in app.parked {
            let index = Int(entry.slot)
            guard targets[index].live, targets[index].incarnation == entry.incarnation else { continue }
            targets[index].parked = false
            evaluate(entry.slot, now: now, into: &actions)
        }
    }

    private mutating func probeFailed(_ appIndex: UInt16, now: Nanoseconds) {
        guard paused[appIndex] != nil else { return }
        paused[appIndex]!.probeSendID = 0
        paused[appIndex]!.probeAt = now + configuration.configProbeInterval
    }
}
