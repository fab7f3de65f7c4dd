@testable import FanoutCore

/// The state changelog (docs/design.md §11) as the simulated Kafka holds it, for the odd seeds
/// (`EngineConfiguration.handoffState`): writes acknowledged in produce order and lost in a crash,
/// restores reported a while after the assignment asked for them (sometimes after a later
/// assignment, like token catch-ups). With it, a target's `TargetWatch` survives a handoff or a
/// crash when its last send's state was acknowledged: the next owner must keep that target's
/// min_interval, priority-10 budget, timestamp order and end as if nothing had moved.
struct SimulatedChangelog {
    /// Acknowledged records, per partition number and key.
    var records: [Int32: [String: TargetHandoff]] = [:]
    /// Writes produced and not yet acknowledged, in produce order; `sendSerial`: the target's send
    /// count when the record was asked for (nil for a tombstone); `startsCovered`: the push-to-start
    /// token whose bucket the record carries, and how many starts through it had been sent then.
    var writes: [(at: Nanoseconds, partition: Int32, key: String, record: TargetHandoff?, resolution: ResolutionID?, sendSerial: Int?,
                  startsCovered: (token: String, starts: Int)?)] = []
    /// Restores under way, reported at `at`.
    var restores: [(partition: Int32, assignment: AssignmentID, at: Nanoseconds)] = []
    /// Activity partitions whose state was reported restored for their current assignment.
    var restored: Set<PartitionID> = []
    /// Sends started per target, and the targets whose latest send's state is acknowledged.
    var sendSerials: [String: Int] = [:]
    var lastSendSaved: Set<String> = []
    /// Starts sent per push-to-start token (its label) and the partitions they came from; per key, what
    /// its acknowledged record's push-to-start bucket covers.
    var pushToStartStarts: [String: (count: Int, partitions: Set<Int32>)] = [:]
    var startsCoveredByKey: [String: (token: String, starts: Int)] = [:]
}

extension Simulation {
    var handsOverState: Bool { configuration.handoffState }

    /// Carries out the changelog actions; false for any other action.
    mutating func handleHandoff(_ action: EngineAction) throws -> Bool {
        switch action {
        case let .saveState(record, partition, resolution):
            guard handsOverState, partition.topic == SimulatedWorkload.activityTopic else { throw fail("state saved for \(partition) without a changelog") }
            guard record.key.isEmpty == false else { throw fail("state saved without a key") }
            stats.stateSaves += 1
            let covered = record.pushToStart.map { credit in
                (credit.token.simulatedLabel, changelog.pushToStartStarts[credit.token.simulatedLabel]?.count ?? 0)
            }
            writeState(partition: partition.partition, key: record.key, record: record, resolution: resolution,
                       sendSerial: changelog.sendSerials[record.key, default: 0], startsCovered: covered)
        case let .forgetState(key, partition):
            guard handsOverState else { throw fail("state tombstone without a changelog") }
            stats.stateTombstones += 1
            writeState(partition: partition, key: key, record: nil, resolution: nil, sendSerial: nil, startsCovered: nil)
        case .restoreState:
            break  // assign() schedules the restore
        default:
            return false
        }
        return true
    }

    private mutating func writeState(partition: Int32, key: String, record: TargetHandoff?, resolution: ResolutionID?, sendSerial: Int?,
                                     startsCovered: (token: String, starts: Int)?) {
        // A partition's produces are acknowledged in order: one queue, times never decreasing.
        let at = max(now + random.between(1, random.chance(0.02) ? 20_000 : 100) * 1_000_000, changelog.writes.last?.at ?? .min)
        changelog.writes.append((at, partition, key, record, resolution, sendSerial, startsCovered))
    }

    /// A send starts: until its state is acknowledged, the target's watch does not survive a handoff.
    mutating func sendStarted(_ request: SendRequest) {
        guard handsOverState else { return }
        changelog.sendSerials[request.target, default: 0] += 1
        changelog.lastSendSaved.remove(request.target)
        if case let .pushToStartToken(token) = request.destination {
            var starts = changelog.pushToStartStarts[token.simulatedLabel] ?? (0, [])
            starts.count += 1
            starts.partitions.insert(request.partition.partition)
            changelog.pushToStartStarts[token.simulatedLabel] = starts
        }
    }

    /// Acknowledgements that came due, then restores that came due.
    mutating func answerChangelog(into actions: inout [EngineAction]) {
        while let write = changelog.writes.first, write.at <= now {
            changelog.writes.removeFirst()
            changelog.records[write.partition, default: [:]][write.key] = write.record
            if let serial = write.sendSerial, serial == changelog.sendSerials[write.key, default: 0] { changelog.lastSendSaved.insert(write.key) }
            changelog.startsCoveredByKey[write.key] = write.startsCovered
            if let resolution = write.resolution { engine.resolve(resolution) }
        }
        for index in changelog.restores.indices.reversed() where changelog.restores[index].at <= now {
            let restore = changelog.restores.remove(at: index)
            let partition = PartitionID(topic: SimulatedWorkload.activityTopic, partition: restore.partition)
            if restore.assignment == currentAssignment[restore.partition] && assigned.contains(partition) && !closing.contains(partition) {
                changelog.restored.insert(partition)
            }
            let records = (changelog.records[restore.partition] ?? [:]).sorted { $0.key < $1.key }.map(\.value)
            stats.stateRestored += records.count
            engine.stateRestored(partition: restore.partition, assignment: restore.assignment, records: records, now: now, into: &actions)
        }
    }

    /// The assignment asked to restore `number`'s state: reported in a while.
    mutating func scheduleRestore(_ number: Int32, assignment: AssignmentID) {
        changelog.restores.append((number, assignment, now + random.between(0, random.chance(0.1) ? 20_000 : 1_500) * 1_000_000))
    }

    /// Whether `key`'s watch goes on under the partition's next owner (or the restarted worker): its
    /// last send's state was acknowledged; for an end settled without delivery, only once the end is
    /// committed (the next owner never reads it again, so only the changelog can tell it the activity
    /// ended; an end not committed is read again and settled again, whatever record an orderly revoke
    /// saved of the target meanwhile). Channels are in no record.
    func watchSurvivesHandoff(_ key: String) -> Bool {
        guard handsOverState, let watch = watches[key] else { return false }
        if let end = watch.endSettled {  // channels have no records: a channel's next owner cannot know
            return end.partition.topic == SimulatedWorkload.activityTopic && stored[end.partition].map { $0 > end.offset } ?? false
        }
        return changelog.lastSendSaved.contains(key) && watch.inFlight == 0
    }

    /// Whether the push-to-start budget of token `label` goes on under the next owner: every start
    /// through it came from one partition (keys of other partitions may have other owners, whose
    /// buckets no record joins: README, "Rebalance and shutdown"), and an acknowledged record still in
    /// the changelog carries the bucket as it was after the last of them.
    func pushToStartBudgetSurvivesHandoff(_ label: String) -> Bool {
        guard handsOverState, let starts = changelog.pushToStartStarts[label], starts.partitions.count == 1 else { return false }
        return changelog.startsCoveredByKey.values.contains { $0.token == label && $0.starts == starts.count }
    }

    /// The worker died: unacknowledged writes never happened, restores under way are gone.
    mutating func changelogAfterCrash() {
        changelog.writes = []
        changelog.restores = []
        changelog.restored = []
    }

    var nextChangelogTime: Nanoseconds? {
        var next = changelog.writes.first?.at
        for restore in changelog.restores { next = min(next ?? restore.at, restore.at) }
        return next
    }
}
