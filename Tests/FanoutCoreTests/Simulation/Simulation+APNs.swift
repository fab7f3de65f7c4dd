import APNsModel
@testable import FanoutCore

/// The simulated worker and APNs: actions carried out, answers chosen, what reached the devices.
extension Simulation {
    /// A request written to APNs whose answer is lost (timeout, connection dropped) was delivered this
    /// often: the device shows it, Fanout sees a retry.
    static let ambiguousTimeoutDelivery = 0.25
    static let ambiguousConnectionLossDelivery = 0.1

    /// The worker's client of a lane carries at most `sendCapacityPerLane` sends of the partitions it
    /// owns now (sends of a revoked or lost partition were given up by the engine).
    mutating func checkLaneCapacity(_ request: SendRequest) throws {
        let capacity = configuration.sendCapacityPerLane[request.lane == .activity ? 0 : 1]
        guard capacity < .max else { return }
        let carried = flights.values.filter { flight in
            flight.request.lane == request.lane && assigned.contains(flight.request.partition)
                && flight.epoch == epoch[flight.request.partition, default: 0]
        }.count
        if carried >= capacity { throw fail("lane \(request.lane) carries \(carried + 1) sends, past its capacity \(capacity)") }
        if carried + 1 == capacity { stats.laneFull += 1 }
    }

    /// Carries out the engine's actions as the worker would, checking each send against the rules.
    mutating func handle(_ actions: inout [EngineAction]) throws {
        defer { actions.removeAll(keepingCapacity: true) }
        for action in actions {
            switch action {
            case let .send(request):
                if endedAssignments.contains(request.assignment) {
                    throw fail("send to \(request.target) under assignment \(request.assignment) of \(request.partition), which the engine had ended")
                }
                sendAssignment[request.partition] = request.assignment
                try checkLifecycle(request)
                try checkSend(request)
                try checkLaneCapacity(request)
                sendStarted(request)
                if !closing.isEmpty && !closing.contains(request.partition) { stats.sendsWhileClosing += 1 }
                stats.sends += 1
                if request.priority == 10 { stats.priority10 += 1 }
                if request.coveredOffsets.count > 1 { stats.coalescedSends += 1 }
                let completeAt = now + latency()
                let (outcome, reachesDevice) = apnsOutcome(for: request)
                flights[request.sendID] = Flight(request: request, completeAt: completeAt, outcome: outcome, reachesDevice: reachesDevice,
                                                 epoch: epoch[request.partition, default: 0])
            case let .deadLetter(letter):
                stats.deadLetters[letter.reason.rawValue, default: 0] += 1
                if letter.detail.contains("may have been delivered") { stats.endsOfPossiblyStartedDeadLettered += 1 }
                // Now and then the dead-letter topic refuses writes for minutes (a permanent produce failure
                // until an operator fixes it): the offsets wait, nothing is committed past them.
                let acknowledgedIn = random.chance(0.02) ? random.between(60, 600) * 1_000_000_000 : random.between(1_000_000, 100_000_000)
                resolutions.append((now + acknowledgedIn, letter.resolution, nil, letter.sources, .resolved))
            case let .feedback(record):
                stats.feedback += 1
                guard let sources = pendingFeedback.removeValue(forKey: record.token.simulatedLabel + "|" + record.key) else {
                    throw fail("feedback for \(record.key) without a gone token")
                }
                resolutions.append((now + random.between(1_000_000, 100_000_000), record.resolution, nil, sources, .resolved))
            case let .dropped(source, reason):
                stats.drops[reason.rawValue, default: 0] += 1
                if reason == .endedBeforeStart, let target = workload.logs[source.partition]?[Int(source.offset)].event.target,
                   let startEpoch = startReachedInEpoch[target], startEpoch != epoch[source.partition, default: 0] {
                    cancelledAfterHandoff.insert(target)
                }
                markDone(source, .dropped(reason))
            case .pauseApp:
                stats.pauses += 1
            case .resumeApp:
                stats.resumes += 1
            case let .pauseFetching(partitions):
                stats.fetchPauses += partitions.count
                fetchPaused.formUnion(partitions)
            case let .resumeFetching(partitions):
                fetchPaused.subtract(partitions)
            case let .assignmentEnded(assignment):
                guard endedAssignments.insert(assignment).inserted else { throw fail("assignment \(assignment) ended twice") }
            case let .revokeDrained(partition, point):
                try finishRevoke(partition, commit: point)
            case .laneFailing:
                stats.laneFailures += 1
            case .laneRecovered:
                break
            case .followTokens, .unfollowTokens:
                break  // assign() schedules the catch-up; the simulated token API needs no unfollow
            case let .commit(points, round):
                try commitIssued(points, round: round)
            case let .lookUpChannelPolicy(app, channel):
                try lookupIssued(app: app, channel: channel)
            case .saveState, .forgetState, .restoreState:
                _ = try handleHandoff(action)
            }
        }
    }

    func latency() -> Nanoseconds {
        var copy = random
        return copy.between(5_000_000, copy.chance(0.05) ? 3_000_000_000 : 300_000_000)
    }

    /// What APNs answers `request`, and whether the push reaches the device regardless.
    mutating func apnsOutcome(for request: SendRequest) -> (SendOutcome, reachesDevice: Bool) {
        _ = random.next()  // keep latency() and this draw independent
        if let broken = configBroken, broken.app == request.app, now >= broken.from, now < broken.to {
            return (.configError(reason: "BadTopic", status: 400), false)
        }
        for outage in outages where now >= outage.from && now < outage.to {
            if outage.tooMany {
                return (.retry(reason: "TooManyRequests", status: 429, after: random.chance(0.5) ? .seconds(random.between(1, 30)) : nil), false)
            }
            if random.chance(0.3) {
                return (.retry(reason: "connection lost", status: nil, after: nil), random.chance(Self.ambiguousConnectionLossDelivery))
            }
            return (.retry(reason: "ServiceUnavailable", status: 503, after: nil), false)
        }
        switch request.destination {
        case let .activityToken(token) where deadTokens.contains(token.simulatedLabel),
             let .pushToStartToken(token) where deadTokens.contains(token.simulatedLabel):
            return (.tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: now / 1_000_000), false)
        default: break
        }
        if healed { return (.delivered, true) }
        let roll = random.below(1000)
        if roll < 30 { return (.retry(reason: "timeout", status: nil, after: nil), random.chance(Self.ambiguousTimeoutDelivery)) }
        if roll < 40 { return (.refreshAuth, false) }
        if roll < 45 { return (.badPayload(reason: "PayloadTooLarge", status: 413), false) }
        return (.delivered, true)
    }

    /// Book-keeping of what APNs answered, before the engine hears it.
    mutating func observeOutcome(_ flight: Flight) throws {
        let request = flight.request
        // A late answer of a previous owner's send says nothing about this owner's watch.
        if flight.epoch == epoch[request.partition, default: 0] { watches[request.target]?.answered(request, outcome: flight.outcome) }
        stats.count(flight.outcome)
        if flight.reachesDevice { deviceReceived(flight) }
        let sources = request.coveredOffsets.map { EventSource(partition: request.partition, offset: $0) }
        switch flight.outcome {
        case .delivered:
            for source in sources { markDone(source, .delivered) }
        case .tokenGone:
            let token: String
            switch request.destination {
            case let .activityToken(value), let .pushToStartToken(value): token = value.simulatedLabel
            case .channel: throw fail("tokenGone on a channel in the simulation")
            }
            pendingFeedback[token + "|" + request.target] = sources
            if !healed && random.chance(0.5), case .activityToken = request.destination {
                // The app uploads a fresh token a little later.
                let fresh = "tok-\(request.target)-fresh-\(now)"
                let at = (latestToken[request.target]?.registeredAt ?? 0) + 1
                tokenEvents.append((now + random.between(1, 20) * 1_000_000_000, request.target, fresh, at))
            }
        case .badPayload, .retry, .refreshAuth, .configError:
            break
        }
    }

    /// The push reached the device: the device view shows it, and a started activity's app uploads
    /// the activity's own token a little later (or never).
    mutating func deviceReceived(_ flight: Flight) {
        let request = flight.request
        var acknowledged = false
        if case .delivered = flight.outcome { acknowledged = true }
        if !acknowledged { stats.ambiguousDeliveries += 1 }
        device.received(request, acknowledged: acknowledged)
        if request.event.kind == .start && startReachedInEpoch[request.target] == nil {
            startReachedInEpoch[request.target] = flight.epoch
        }
        if request.event.kind == .start, let delay = workload.tokenDelayAfterStart[request.target], let delay {
            let token = "tok-\(request.target)-started-\(request.event.timestamp)"
            tokenEvents.append((now + delay, request.target, token, request.event.timestamp))
        }
    }

    /// What became of an event. Delivered and resolved are for good: a replay that later drops the
    /// event (the next owner knows its end was delivered or settled) does not take back the push
    /// the device has, or the dead letter or feedback record the producer was given.
    mutating func markDone(_ source: EventSource, _ how: Done) {
        switch done[source.partition]?[source.offset] {
        case .delivered?, .resolved?: return
        default: break
        }
        done[source.partition, default: [:]][source.offset] = how
    }
}
