import APNsModel

/// The send decision for one target: meaning, min_interval, backoff, budget, token, app pause.
extension FanoutEngine {
    func budget(of target: TargetState) -> BudgetSettings { budget(target.budgetClass) }

    func budget(_ budgetClass: BudgetClass) -> BudgetSettings {
        switch budgetClass {
        case .activity: configuration.activityBudget
        case .frequentUpdates: configuration.frequentUpdatesBudget
        case .broadcast: configuration.broadcastBudget
        }
    }

    /// Sends the target's pending state if every rule allows it now; otherwise arms a timer for when
    /// one might, or parks the target behind its paused app. Then `settle`s the target.
    mutating func evaluate(_ slot: Int32, now: Nanoseconds, into actions: inout [EngineAction]) {
        decide(slot, now: now, into: &actions)
        settle(slot, now: now)
    }

    private mutating func decide(_ slot: Int32, now: Nanoseconds, into actions: inout [EngineAction]) {
        let index = Int(slot)
        // Read through the buffer: going through `Array`'s subscript getter, the optimizer copied the
        // whole target (reference counts included) to read a few fields of it. The pending state is
        // read in place and moved out (not copied) only when sent.
        let pendingIndex: Int32 = targets.withUnsafeBufferPointer { buffer in
            buffer[index].inFlightSendID == 0 ? buffer[index].pendingIndex : -1
        }
        guard pendingIndex >= 0 else { return }
        let facts = pendings.facts(pendingIndex)
        let partitionSlot = Int(targets[index].partitionSlot)
        let phase = partitions.withUnsafeBufferPointer { $0[partitionSlot]?.phase }
        guard phase == .live else {
            // Reading its tokens: decided once the partition goes live. Closing: never sent from here
            // (the next owner replays it).
            if phase == .readingTokens && !targets[index].heldForPartition {
                targets[index].heldForPartition = true
                partitions[partitionSlot]!.held.append((slot, targets[index].incarnation))
            }
            return
        }
        let kind = facts.kind
        var probing = false
        if !paused.isEmpty, let pausedApp = paused[targets[index].appIndex] {  // isEmpty: no hashing in the common case
            guard pausedApp.probeSendID == 0 && now >= pausedApp.probeAt else {
                if !targets[index].parked {
                    targets[index].parked = true
                    paused[targets[index].appIndex]!.parked.append((slot, targets[index].incarnation))
                }
                return
            }
            probing = true
        }
        let settings = budget(targets[index].budgetClass)
        var earliest = max(targets[index].lastSendAt + settings.minInterval, targets[index].backoffUntil)
        let summary = facts.summary
        let forcedMajor = facts.forcedMajor
        let explicitMinor = facts.explicitMinor
        let lastSentTimestamp = targets[index].lastSentTimestamp
        let lastSent = targets[index].lastSentSummary
        let major = forcedMajor || (!explicitMinor && (lastSentTimestamp < 0 || summary.digest != lastSent.digest))
        if !major && lastSentTimestamp >= 0 && !targets[index].relieved
            && !profiles[Int(targets[index].profileIndex)].progressMoved(from: lastSent, to: summary) {
            // Read in place: copying the profile would retain and release its field list per event.
            earliest = max(earliest, targets[index].lastDeliveredAt + profiles[Int(targets[index].profileIndex)].maxQuiet)
            if !targets[index].listedAsHeldMinor {
                // Indexed for `relieve`, so a pause visits only the targets it can relieve.
                targets[index].listedAsHeldMinor = true
                if partitions[partitionSlot]!.heldMinor.count >= targets.count - freeSlots.count + 1024 {
                    // Entries of targets freed since they were listed: drop them (amortized, the list at most doubles).
                    partitions[partitionSlot]!.heldMinor.removeAll { entry in
                        !(targets[Int(entry.slot)].live && targets[Int(entry.slot)].incarnation == entry.incarnation)
                    }
                }
                partitions[partitionSlot]!.heldMinor.append((slot, targets[index].incarnation))
            }
        }

        let destination: Destination
        var environment: APNsEnvironment?
        switch (targets[index].lane, kind) {
        case (.broadcast, _):
            destination = .channel(targets[index].key)
            if !configuration.broadcastExpirationImmediate {
                // apns-expiration depends on the channel's storage policy: ask before the first send.
                switch targets[index].channelPolicy {
                case .unknown:
                    guard now >= earliest else { return arm(slot, at: earliest, now: now) }
                    targets[index].channelPolicy = .lookingUp
                    actions.append(.lookUpChannelPolicy(app: apps[Int(targets[index].appIndex)], channel: targets[index].key))
                    return
                case .lookingUp:
                    return  // `channelPolicyKnown` evaluates it again
                case .answeredUnknown, .noStorage, .mostRecent:
                    break
                }
            }
        case (.activity, .start):
            let token = pendings[pendingIndex].event.token!  // checked on receive
            destination = .pushToStartToken(token)
            let bucket = pushToStartBuckets[token] ?? TokenBucket(capacity: configuration.pushToStartBudget.burst, now: now)
            earliest = max(earliest, bucket.nextCredit(after: now, settings: configuration.pushToStartBudget))
        case (.activity, _):
            // Not due yet: look the token up when it is (the token wait starts then).
            if now < earliest && targets[index].tokenWaitSince < 0 { return arm(slot, at: earliest, now: now) }
            guard let record = tokens.usableToken(for: targets[index].key, notBefore: targets[index].tokenNotBefore,
                                                  hint: &targets[index].tokenEntry) else {
                return waitForToken(slot, now: now, into: &actions)
            }
            guard record.appIndex == TokenRegistry.Record.anyApp || record.appIndex == targets[index].appIndex else {
                // Issued for another app: APNs would refuse it under this app's topic (DeviceTokenNotForTopic),
                // and the token, good for its own app, would be reported gone. Wait for one of this app.
                return waitForToken(slot, now: now, into: &actions,
                                    why: "the registered token belongs to app '\(apps[Int(record.appIndex)])', the events to '\(apps[Int(targets[index].appIndex)])'")
            }
            targets[index].tokenWaitSince = -1
            destination = .activityToken(record.token)
            environment = record.environment
        }
        guard now >= earliest else { return arm(slot, at: earliest, now: now) }
        let laneSlot = targets[index].lane.slot
        guard laneInFlight[laneSlot] < configuration.sendCapacityPerLane[laneSlot] else {
            // Every rule allows the send but the worker's client is full: wait for a send of the lane to end.
            if !targets[index].waitingForLane {
                targets[index].waitingForLane = true
                laneWaiting[laneSlot].push(slot, incarnation: targets[index].incarnation)
            }
            return
        }

        let priority: Int
        if case let .pushToStartToken(token) = destination {
            var bucket = pushToStartBuckets[token] ?? TokenBucket(capacity: configuration.pushToStartBudget.burst, now: now)
            _ = bucket.take(at: now, settings: configuration.pushToStartBudget)
            pushToStartBuckets[token] = bucket
            pushToStartOfTarget[slot] = (targets[index].incarnation, token)
            priority = 10
        } else if major && targets[index].bucket.take(at: now, settings: settings) {
            priority = 10
        } else {
            priority = 5
        }
        // A major update that went at priority 5 because the target's priority-10 bucket was empty.
        let budgetDowngraded = major && priority == 5
        let update = takePending(index)
        targets[index].relieved = false
        let sendID = nextSendID
        nextSendID += 1
        let event = update.event
        let staleDate = event.staleDate ?? event.timestamp + configuration.defaultStaleAfterSeconds
        let expiration: Int64
        if targets[index].lane == .broadcast {
            let policy = targets[index].channelPolicy.policy
            // An unknown answer holds for this send only: the next one asks again.
            if targets[index].channelPolicy == .answeredUnknown { targets[index].channelPolicy = .unknown }
            expiration = configuration.broadcastExpirationImmediate ? 0
                : ChannelStoragePolicy.expiration(policy: policy, staleDate: staleDate, now: now / Nanoseconds.nanosecondsPerSecond)
        } else {
            expiration = staleDate
        }
        targets[index].inFlightSendID = sendID
        targets[index].lastSendAt = now
        if configuration.handoffState && targets[index].lane == .activity { targets[index].sendUnsaved = true }
        targets[index].sends &+= 1
        partitions[partitionSlot]!.inFlight += 1
        laneInFlight[partitions[partitionSlot]!.lane.slot] += 1
        totalInFlight += 1
        if probing { paused[targets[index].appIndex]!.probeSendID = sendID }
        inFlight.insert(InFlightSend(slot: slot, incarnation: targets[index].incarnation, update: update, destination: destination,
                                     priority: priority, isProbe: probing, partitionSlot: targets[index].partitionSlot), id: sendID)
        actions.append(.send(SendRequest(
            sendID: sendID, lane: targets[index].lane, target: targets[index].key, app: apps[Int(targets[index].appIndex)],
            destination: destination, environment: environment, priority: priority, event: event,
            staleDate: staleDate, dismissalDate: event.kind == .end ? event.dismissalDate : nil, expiration: expiration,
            partition: partitions[Int(targets[index].partitionSlot)]!.id,
            assignment: partitions[Int(targets[index].partitionSlot)]!.assignment, coveredOffsets: update.offsets, isProbe: probing,
            budgetDowngraded: budgetDowngraded)))
    }

    /// No usable token: wait up to `tokenWait`, then dead-letter everything pending as `no-token`.
    private mutating func waitForToken(_ slot: Int32, now: Nanoseconds, into actions: inout [EngineAction], why: String? = nil) {
        let index = Int(slot)
        if targets[index].tokenWaitSince < 0 { targets[index].tokenWaitSince = now }
        let deadline = targets[index].tokenWaitSince + configuration.tokenWait
        guard now >= deadline else { return arm(slot, at: deadline, now: now) }
        guard targets[index].hasPending else { return }
        let update = takePending(index)
        targets[index].tokenWaitSince = -1
        if update.event.kind == .end { targets[index].ended = true }
        let possiblyStarted = update.event.kind == .end && update.startAttemptTimestamp != nil
        deadLetter(update.offsets, partitionSlot: targets[index].partitionSlot, reason: .noToken,
                   detail: "no usable push token for activity '\(targets[index].key)' within \(configuration.tokenWait / 1_000_000) ms"
                       + (why.map { ": \($0)" } ?? "")
                       + (possiblyStarted ? "; its start may have been delivered (sent without a 200 in answer, or by the partition's previous owner) and no activity token arrived to end it, so the activity may stay on the Lock Screen" : ""),
                   target: targets[index].key, app: apps[Int(targets[index].appIndex)], into: &actions)
    }

    /// Arms the target's timer at `deadline` unless an earlier live one is armed (it re-evaluates anyway).
    mutating func arm(_ slot: Int32, at deadline: Nanoseconds, now: Nanoseconds) {
        let index = Int(slot)
        let current = targets[index].timerAt
        if current <= deadline && current > now { return }
        targets[index].generation &+= 1
        targets[index].timerAt = deadline
        heap.push(DeadlineHeap.Entry(deadline: deadline, slot: slot, generation: targets[index].generation))
    }

    /// For each paused app whose probe time came: give one parked target the chance to send as the probe.
    mutating func probePausedApps(now: Nanoseconds, into actions: inout [EngineAction]) {
        guard !paused.isEmpty else { return }
        for appIndex in paused.keys.sorted() {
            guard var app = paused[appIndex], app.probeSendID == 0, now >= app.probeAt, !app.parked.isEmpty else { continue }
            let parked = app.parked
            app.parked = []
            paused[appIndex] = app
            for entry in parked {
                let index = Int(entry.slot)
                guard targets[index].live, targets[index].incarnation == entry.incarnation else { continue }
                targets[index].parked = false
                // Every target either becomes the probe, arms a timer, or parks again.
                evaluate(entry.slot, now: now, into: &actions)
            }
        }
    }
}
