import APNsModel
@testable import FanoutCore

extension Simulation {
    /// Carries out the engine's actions as the worker would, checking each send against the rules.
    mutating func handle(_ actions: inout [EngineAction]) throws {
        defer { actions.removeAll(keepingCapacity: true) }
        for action in actions {
            switch action {
            case let .send(request):
                try checkSend(request)
                stats.sends += 1
                if request.priority == 10 { stats.priority10 += 1 }
                if request.coveredOffsets.count > 1 { stats.coalescedSends += 1 }
                flights[request.sendID] = Flight(request: request, completeAt: now + latency(), outcome: apnsOutcome(for: request))
            case let .deadLetter(letter):
                stats.deadLetters[letter.reason.rawValue, default: 0] += 1
                resolutions.append((now + random.between(1_000_000, 100_000_000), letter.resolution, nil, letter.sources, .resolved))
            case let .feedback(record):
                stats.feedback += 1
                guard let sources = pendingFeedback.removeValue(forKey: record.token + "|" + record.key) else {
                    throw fail("feedback for \(record.key) without a gone token")
                }
                resolutions.append((now + random.between(1_000_000, 100_000_000), record.resolution, nil, sources, .resolved))
            case let .dropped(source, reason):
                stats.drops[reason.rawValue, default: 0] += 1
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
            case let .revokeDrained(_, point):
                if let point { try checkCommit(point) }
            case .laneFailing:
                stats.laneFailures += 1
            case .laneRecovered:
                break
            case .followTokens, .unfollowTokens:
                break  // assign() schedules the catch-up; the simulated token API needs no unfollow
            case .commit, .lookUpChannelPolicy:
                throw fail("unexpected \(action): the simulation commits through commitPoints() and sends broadcasts with expiration 0")
            }
        }
    }

    func latency() -> Nanoseconds {
        var copy = random
        return copy.between(5_000_000, copy.chance(0.05) ? 3_000_000_000 : 300_000_000)
    }

    mutating func apnsOutcome(for request: SendRequest) -> SendOutcome {
        _ = random.next()  // keep latency() and this draw independent
        if let broken = configBroken, broken.app == request.app, now >= broken.from, now < broken.to {
            return .configError(reason: "BadTopic", status: 400)
        }
        for outage in outages where now >= outage.from && now < outage.to {
            return outage.tooMany
                ? .retry(reason: "TooManyRequests", status: 429, after: random.chance(0.5) ? .seconds(random.between(1, 30)) : nil)
                : .retry(reason: "ServiceUnavailable", status: 503, after: nil)
        }
        switch request.destination {
        case let .activityToken(token) where deadTokens.contains(token),
             let .pushToStartToken(token) where deadTokens.contains(token):
            return .tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: now / 1_000_000)
        default: break
        }
        if healed { return .delivered }
        let roll = random.below(1000)
        if roll < 30 { return .retry(reason: "timeout", status: nil, after: nil) }
        if roll < 40 { return .refreshAuth }
        if roll < 45 { return .badPayload(reason: "PayloadTooLarge", status: 413) }
        return .delivered
    }

    /// Rules every send must satisfy (DESIGN.md §3).
    mutating func checkSend(_ request: SendRequest) throws {
        var watch = watches[request.target] ?? TargetWatch()
        let settings = request.lane == .broadcast ? configuration.broadcastBudget
            : (configuration.frequentUpdatesApps.contains(request.app) ? configuration.frequentUpdatesBudget : configuration.activityBudget)
        if watch.endDelivered { throw fail("send to \(request.target) after its end was delivered") }
        if watch.inFlight > 0 { throw fail("two sends in flight to \(request.target)") }
        if now - watch.lastSendAt < settings.minInterval {
            throw fail("sends to \(request.target) \(now - watch.lastSendAt) ns apart, min_interval \(settings.minInterval)")
        }
        let timestamp = request.event.timestamp
        if timestamp <= watch.lastDeliveredTimestamp || timestamp < watch.lastAttemptTimestamp {
            throw fail("timestamp \(timestamp) to \(request.target) after \(watch.lastAttemptTimestamp) (delivered \(watch.lastDeliveredTimestamp))")
        }
        if request.priority == 10 {
            if case let .pushToStartToken(token) = request.destination {
                var bucket = pushToStartBuckets[token] ?? TokenBucket(capacity: configuration.pushToStartBudget.burst, now: now)
                if !bucket.take(at: now, settings: configuration.pushToStartBudget) { throw fail("push-to-start budget exceeded for \(token)") }
                pushToStartBuckets[token] = bucket
            } else {
                var bucket = watch.bucket ?? TokenBucket(capacity: settings.burst, now: now)
                if !bucket.take(at: now, settings: settings) { throw fail("priority-10 budget exceeded for \(request.target)") }
                watch.bucket = bucket
            }
        } else if request.priority != 5 {
            throw fail("priority \(request.priority)")
        }
        if request.dismissalDate != nil && request.event.kind != .end { throw fail("dismissal-date on a non-end send") }
        if request.event.staleDate == nil && request.staleDate != timestamp + configuration.defaultStaleAfterSeconds {
            throw fail("default stale-date missing")
        }
        if request.coveredOffsets.isEmpty { throw fail("send covering no offsets") }
        watch.lastSendAt = now
        watch.lastAttemptTimestamp = timestamp
        watch.inFlight += 1
        watches[request.target] = watch
    }

    /// Book-keeping of what APNs answered, before the engine hears it.
    mutating func observeOutcome(_ flight: Flight) throws {
        let request = flight.request
        watches[request.target]?.inFlight -= 1
        stats.count(flight.outcome)
        let sources = request.coveredOffsets.map { EventSource(partition: request.partition, offset: $0) }
        switch flight.outcome {
        case .delivered:
            for source in sources { markDone(source, .delivered) }
            deliveredTimestamps[request.target, default: []].insert(request.event.timestamp)
            watches[request.target]?.lastDeliveredTimestamp = request.event.timestamp
            if request.event.kind == .end { watches[request.target]?.endDelivered = true }
            if request.event.kind == .start, let delay = workload.tokenDelayAfterStart[request.target], let delay {
                let token = "tok-\(request.target)-started-\(request.event.timestamp)"
                tokenEvents.append((now + delay, request.target, token, request.event.timestamp))
            }
        case .tokenGone:
            let token: String
            switch request.destination {
            case let .activityToken(value), let .pushToStartToken(value): token = value
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

    mutating func markDone(_ source: EventSource, _ how: Done) {
        if case .delivered = done[source.partition]?[source.offset] { return }
        done[source.partition, default: [:]][source.offset] = how
    }

    // MARK: Commit checks

    mutating func checkCommits() throws {
        for point in engine.commitPoints() { try checkCommit(point) }
    }

    /// Nothing is committed before every event at or below it was delivered or resolved.
    mutating func checkCommit(_ point: CommitPoint) throws {
        let previous = committed[point.partition] ?? 0
        if point.offset < previous { throw fail("commit of \(point.partition) went back from \(previous) to \(point.offset)") }
        for offset in previous..<point.offset where done[point.partition]?[offset] == nil {
            throw fail("committed \(point.partition) at \(point.offset) but offset \(offset) was neither delivered nor resolved")
        }
        committed[point.partition] = point.offset
    }

    /// After APNs recovered: everything committed, and every activity's final state (and its end) delivered.
    func finalChecks() throws {
        for (partition, log) in workload.logs where (committed[partition] ?? 0) != Int64(log.count) {
            throw fail("\(partition) committed \(committed[partition] ?? 0) of \(log.count) after recovery")
        }
        for (partition, log) in workload.logs {
            var finals: [String: (timestamp: Int64, offsets: [Int64])] = [:]
            var ended: Set<String> = []
            for (offset, record) in log.enumerated() where !record.rejected && !ended.contains(record.event.target) {
                let key = record.event.target
                if record.event.kind == .end { ended.insert(key) }
                let current = finals[key]
                if current == nil || record.event.timestamp > current!.timestamp {
                    finals[key] = (record.event.timestamp, [Int64(offset)])
                } else if record.event.timestamp == current!.timestamp {
                    finals[key]!.offsets.append(Int64(offset))
                }
            }
            for (key, final) in finals {
                if deliveredTimestamps[key]?.contains(final.timestamp) == true { continue }
                let resolved = final.offsets.contains { offset in
                    switch done[partition]?[offset] {
                    case .resolved?, .dropped(.endedBeforeStart)?: true
                    default: false
                    }
                }
                if !resolved { throw fail("final state (timestamp \(final.timestamp)) of \(key) was neither delivered nor resolved") }
            }
        }
    }
}
