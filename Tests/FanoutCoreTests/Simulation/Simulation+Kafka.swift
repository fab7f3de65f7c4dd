import APNsModel
@testable import FanoutCore

/// The simulated Kafka side of the worker: the group's assignments, revokes and losses (with sends
/// still in flight), the activity-tokens catch-up (which may be reported after the partition was
/// assigned again), commits answered late, refused or never, and channel-management lookups.
extension Simulation {
    mutating func assign(_ partition: PartitionID) {
        assigned.insert(partition)
        fetchPaused.remove(partition)
        tokensRead.remove(partition)
        let lane: Lane = partition.topic == SimulatedWorkload.activityTopic ? .activity : .broadcast
        var assignment: [EngineAction] = []
        engine.assign(partition, lane: lane, now: now, into: &assignment)
        position[partition] = Int(stored[partition] ?? 0)
        // The worker reports the high watermark it first sees: what was in the log when it got the partition.
        let logEnd = workload.logs[partition].map { log in log.prefix { $0.arrival <= now }.count } ?? 0
        engine.replayBoundary(of: partition, below: Int64(logEnd))
        // The owner re-reads activity-tokens for this partition from the beginning; its sends wait for that.
        guard lane == .activity else { return }
        guard case let .followTokens(number, id)? = assignment.first, assignment.count == (handsOverState ? 2 : 1) else {
            preconditionFailure("an activity partition's assignment asks for its tokens (and its state, with a changelog), and nothing else: \(assignment)")
        }
        currentAssignment[number] = id
        changelog.restored.remove(partition)
        if handsOverState {
            guard case .restoreState(number, id) = assignment[1] else {
                preconditionFailure("an activity partition's assignment asks to restore its state: \(assignment)")
            }
            scheduleRestore(number, assignment: id)
        }
        // Usually quick; now and then a long token partition, so a revoke can overtake its catch-up.
        var readIn = random.chance(0.15) ? random.between(5_000, 60_000) : random.between(0, 2_000)
        if let earlier = catchUps.filter({ $0.partition == number }).map(\.at).max(), earlier > now, random.chance(0.5) {
            // The earlier assignment's catch-up is still under way: this one outlasts it, so the stale
            // report comes first, while this assignment's tokens are still being read.
            readIn = max(readIn, (earlier - now) / 1_000_000 + random.between(100, 5_000))
        }
        catchUps.append((number, id, now + readIn * 1_000_000))
        var ignored: [EngineAction] = []
        for key in latestToken.keys.sorted() where SimulatedWorkload.partition(for: key, lane: .activity) == partition {
            let record = latestToken[key]!
            engine.tokenRegistered(key: key, token: PushToken(simulated: record.token), environment: .sandbox, at: record.registeredAt,
                                   partition: partition.partition, now: now, into: &ignored)
        }
        precondition(ignored.isEmpty, "no target of a freshly assigned partition sends before its tokens were read")
    }

    /// An orderly revoke, or (sometimes) a loss: sends in flight stay in flight.
    mutating func revoke(_ partition: PartitionID, into actions: inout [EngineAction]) throws {
        stats.revokes += 1
        // A catch-up already under way may be reported after a re-assignment: it names the old assignment.
        if random.chance(0.5) { catchUps.removeAll { $0.partition == partition.partition && partition.topic == SimulatedWorkload.activityTopic } }
        // The member rejoins: the rebalance settles a while later (or later still, when one is under way).
        settleAt = max(settleAt ?? .min, now + random.between(100, 8_000) * 1_000_000)
        if random.chance(0.15) {
            stats.losses += 1
            engine.lose([partition], into: &actions)
            try handle(&actions)
            try giveUp(partition)
            return
        }
        let inFlight = flights.keys.filter { flights[$0]!.request.partition == partition }.sorted()
        if !inFlight.isEmpty {
            stats.revokesWithSendsInFlight += 1
            // APNs is slow just then: the drain waits (or hits its deadline) while other partitions send.
            for sendID in inFlight where random.chance(0.5) { flights[sendID]!.completeAt += random.between(500, 4_000) * 1_000_000 }
        }
        closing.insert(partition)
        engine.revoke([partition], now: now, into: &actions)
        try handle(&actions)
    }

    /// The engine drained a revoke: its final point is committed in the rebalance callback.
    mutating func finishRevoke(_ partition: PartitionID, commit point: CommitPoint?) throws {
        guard closing.remove(partition) != nil else { throw fail("\(partition) drained without being revoked") }
        if let point {
            try checkCommit(point)
            stored[partition] = point.offset
        }
        try giveUp(partition)
    }

    private mutating func giveUp(_ partition: PartitionID) throws {
        if let last = sendAssignment.removeValue(forKey: partition), !endedAssignments.contains(last) {
            throw fail("\(partition) was given up without its assignment \(last) ending: the worker would still write the sends it has queued")
        }
        assigned.remove(partition)
        fetchPaused.remove(partition)
        tokensRead.remove(partition)
        changelog.restored.remove(partition)
        epoch[partition, default: 0] += 1
        for target in workload.targets where SimulatedWorkload.partition(for: target.key, lane: target.lane) == partition {
            if watchSurvivesHandoff(target.key) {
                stats.watchesHandedOver += 1
            } else {
                watches[target.key] = nil
            }
        }
        reassignAt[partition] = now + random.between(0, 30) * 1_000_000_000
    }

    mutating func commitIssued(_ points: [CommitPoint], round: UInt64) throws {
        guard configuration.commitInterval != nil else { throw fail("a commit action without commit_interval") }
        // librdkafka 2.0.2 drops every partition when a commit of the old generation is answered after
        // the member rejoined (#4059): no commit may go out while the group rebalances.
        if settleAt != nil { throw fail("a commit issued while the group rebalances") }
        // Nor while the answer to a heartbeat is on its way and will start a rejoin: librdkafka would
        // send the JoinGroup first and the commit behind it, with the same outcome.
        if let answer = heartbeatAnswer, answer.rejoin, now >= answer.sentAt {
            throw fail("a commit issued \((now - answer.sentAt) / 1_000_000) ms after a heartbeat whose answer starts a rejoin")
        }
        stats.commits += 1
        for point in points {
            guard assigned.contains(point.partition), !closing.contains(point.partition) else {
                throw fail("commit of \(point.partition), which this worker does not deliver for")
            }
            // Once issued, Kafka may store it whatever answer comes back: judged now.
            try checkCommit(point)
        }
        let roll = random.below(100)
        let answered = roll >= 5  // else the answer is lost; the commit itself may or may not have been written
        if !answered { stats.commitsUnanswered += 1 }
        let refused = answered ? roll < 15 : random.chance(0.5)
        let delay = random.chance(0.1) ? random.between(5_000, 40_000) : random.between(1, 200)
        let at = max(now + delay * 1_000_000, commitAnswers.last?.at ?? .min)
        commitAnswers.append((at, points, refused, answered, points.map { epoch[$0.partition, default: 0] }, round))
    }

    mutating func lookupIssued(app: String, channel: String) throws {
        guard !configuration.broadcastExpirationImmediate else { throw fail("a channel lookup with expiration 0 configured") }
        stats.lookups += 1
        policyAnswers.append((now + random.between(0, 2_000) * 1_000_000, app, channel))
    }

    /// The member's heartbeat: sent every interval; its answer comes back within the answer window
    /// and, now and then until the run heals, says another member joined or left — the member rejoins
    /// and the group settles a while later.
    mutating func heartbeat() {
        if let answer = heartbeatAnswer, answer.at <= now {
            heartbeatAnswer = nil
            if answer.rejoin && settleAt == nil {
                stats.heartbeatRejoins += 1
                engine.groupRebalancing()
                settleAt = now + heartbeatRandom.between(100, 8_000) * 1_000_000
            }
        }
        guard let due = nextHeartbeatAt, due <= now, let window = configuration.heartbeatAnswerWindow else { return }
        stats.heartbeats += 1
        nextHeartbeatAt = now + heartbeatInterval
        engine.heartbeatSent(at: now)
        let answerIn = heartbeatRandom.between(0, window - 1)
        heartbeatAnswer = (now, now + answerIn, !healed && heartbeatRandom.chance(0.01))
    }

    /// Answers that came due: token catch-ups, commit answers, channel lookups.
    mutating func answerKafka(into actions: inout [EngineAction]) throws {
        heartbeat()
        if let at = settleAt, at <= now {
            settleAt = nil
            stats.rebalancesSettled += 1
            engine.groupSettled(now: now, into: &actions)
        }
        for index in catchUps.indices.reversed() where catchUps[index].at <= now {
            let catchUp = catchUps.remove(at: index)
            let partition = PartitionID(topic: SimulatedWorkload.activityTopic, partition: catchUp.partition)
            if catchUp.assignment == currentAssignment[catchUp.partition] && assigned.contains(partition) && !closing.contains(partition) {
                tokensRead.insert(partition)
            } else {
                stats.staleCatchUps += 1
            }
            engine.tokensCaughtUp(partition: catchUp.partition, assignment: catchUp.assignment, now: now, into: &actions)
        }
        while let answer = commitAnswers.first, answer.at <= now {
            commitAnswers.removeFirst()
            // The group fences a commit of a generation that has since moved the partition.
            let fenced = Set(zip(answer.points, answer.epochs).filter { epoch[$0.0.partition, default: 0] != $0.1 }.map(\.0.partition))
            let refused = answer.refused ? Set(answer.points.map(\.partition)) : fenced
            if !refused.isEmpty { stats.commitsRefused += 1 }
            for point in answer.points where !refused.contains(point.partition) { stored[point.partition] = point.offset }
            // Fenced: refused because the group moved on. It may be rebalancing still, or have settled
            // since: the answer can come after the settle, and must not hold commits then.
            if answer.answered {
                engine.commitAnswered(answer.points, failed: refused, refusedForRebalanceIn: fenced.isEmpty ? nil : answer.round)
            }
        }
        for index in policyAnswers.indices.reversed() where policyAnswers[index].at <= now {
            let answer = policyAnswers.remove(at: index)
            let policy = channelPolicy(of: answer.channel)
            engine.channelPolicyKnown(app: answer.app, channel: answer.channel, policy: policy, now: now, into: &actions)
        }
    }

    /// What channel management answers for `channel`, fixed per channel (nil: the lookup fails).
    mutating func channelPolicy(of channel: String) -> ChannelStoragePolicy? {
        if let known = channelPolicies[channel] { return known }
        let roll = random.below(10)
        let policy: ChannelStoragePolicy? = roll < 4 ? .noStorage : roll < 8 ? .mostRecent : nil
        channelPolicies[channel] = .some(policy)
        return policy
    }

    /// A send must be for a partition this worker delivers for: assigned, not closing, and for an
    /// activity partition its tokens read for this assignment. Its expiration follows the channel policy.
    func checkLifecycle(_ request: SendRequest) throws {
        guard assigned.contains(request.partition), !closing.contains(request.partition) else {
            throw fail("send to \(request.target) for \(request.partition), which is revoked, closing or lost")
        }
        if request.lane == .activity && !tokensRead.contains(request.partition) {
            throw fail("send to \(request.target) before \(request.partition)'s tokens were read for this assignment")
        }
        if request.lane == .activity && handsOverState && !changelog.restored.contains(request.partition) {
            throw fail("send to \(request.target) before \(request.partition)'s state was restored for this assignment")
        }
        guard request.lane == .broadcast else { return }
        let expected: Int64
        if configuration.broadcastExpirationImmediate {
            expected = 0
        } else {
            let policy = channelPolicies[request.target] ?? nil
            expected = ChannelStoragePolicy.expiration(policy: policy, staleDate: request.staleDate, now: now / Nanoseconds.nanosecondsPerSecond)
        }
        if request.expiration != expected {
            throw fail("broadcast to \(request.target) with expiration \(request.expiration), its channel's policy allows \(expected)")
        }
    }

    /// Memory stays bounded: no partition holds more uncommitted records than its bound (intake
    /// stops once the engine pauses it), and no more targets are tracked than the workload has.
    func checkBounds() throws {
        for partition in assigned {
            guard let load = engine.load(of: partition) else {
                if !closing.contains(partition) { throw fail("\(partition) is assigned but the engine does not know it") }
                continue
            }
            if load.incomplete > configuration.maxIncompletePerPartition {
                throw fail("\(partition) holds \(load.incomplete) incomplete offsets, bound \(configuration.maxIncompletePerPartition)")
            }
        }
        if engine.targetCount > workload.targets.count { throw fail("\(engine.targetCount) targets tracked, the workload has \(workload.targets.count)") }
    }
}
