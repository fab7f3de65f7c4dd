import APNsModel
@testable import FanoutCore

/// The invariants (docs/design.md §10), each judged by a model of its own in this folder (`TargetWatch`,
/// `PriorityBudgetModel`, `DeviceView`, the `done` and `committed` maps), never by the engine's types.
extension Simulation {
    /// Rules every send must satisfy (docs/design.md §3).
    mutating func checkSend(_ request: SendRequest) throws {
        var watch = watches[request.target] ?? TargetWatch(budget: budgetModel(for: request))
        if let problem = watch.admit(request, at: now) { throw fail("\(request.target): \(problem)") }
        watches[request.target] = watch
        switch request.priority {
        case 10:
            if case let .pushToStartToken(pushToken) = request.destination {
                let token = pushToken.simulatedLabel
                let settings = configuration.pushToStartBudget
                var budget = pushToStartBudgets[token] ?? PriorityBudgetModel(burst: Int64(settings.burst), perHour: Int64(settings.refillPerHour))
                if let since = budget.admit(at: now) { throw fail("push-to-start budget of \(token) exceeded since the start at \(since)") }
                pushToStartBudgets[token] = budget
            }
        case 5: break
        default: throw fail("priority \(request.priority)")
        }
        if request.dismissalDate != nil && request.event.kind != .end { throw fail("dismissal-date on a non-end send") }
        if request.event.staleDate == nil && request.staleDate != request.event.timestamp + configuration.defaultStaleAfterSeconds {
            throw fail("default stale-date missing")
        }
        if request.coveredOffsets.isEmpty { throw fail("send covering no offsets") }
    }

    /// Activity targets get the default of docs/design.md §3 (burst 4, 12 an hour); the frequent-updates
    /// profile and broadcast channels have no numbers there, so theirs come from the configuration.
    func budgetModel(for request: SendRequest) -> PriorityBudgetModel {
        let settings: BudgetSettings
        switch request.lane {
        case .broadcast: settings = configuration.broadcastBudget
        case .activity where configuration.frequentUpdatesApps.contains(request.app): settings = configuration.frequentUpdatesBudget
        case .activity:
            return PriorityBudgetModel(burst: PriorityBudgetModel.activityDefault.burst, perHour: PriorityBudgetModel.activityDefault.perHour)
        }
        return PriorityBudgetModel(burst: Int64(settings.burst), perHour: Int64(settings.refillPerHour))
    }

    // MARK: Commit checks

    mutating func checkCommits() throws {
        for point in engine.commitPoints() {  // committed synchronously: stored at once
            try checkCommit(point)
            stored[point.partition] = point.offset
        }
    }

    /// Nothing is committed before every event at or below it was delivered or resolved. (A point may
    /// be lower than one issued before: a new owner resumes from what Kafka stored, which a refused or
    /// lost commit never reached, and Kafka keeps the last commit written.)
    mutating func checkCommit(_ point: CommitPoint) throws {
        let previous = min(stored[point.partition] ?? 0, committed[point.partition] ?? 0)
        for offset in previous..<max(previous, point.offset) where done[point.partition]?[offset] == nil {
            throw fail("committed \(point.partition) at \(point.offset) but offset \(offset) was neither delivered nor resolved")
        }
        committed[point.partition] = point.offset
    }

    // MARK: After recovery

    /// After APNs recovered: everything committed, every target's final state shown on its device
    /// (or resolved), and every activity that may have started on a device ended there.
    func finalChecks() throws {
        for (partition, log) in workload.logs where (stored[partition] ?? 0) != Int64(log.count) {
            throw fail("\(partition) committed \(stored[partition] ?? 0) of \(log.count) after recovery (last issued \(committed[partition] ?? 0))")
        }
        for (partition, log) in workload.logs {
            try checkEndsOfStartedActivities(partition, log)
            try checkFinalStates(partition, log)
        }
    }

    /// The newest state of each target up to its end reached the device, or its events were resolved.
    private func checkFinalStates(_ partition: PartitionID, _ log: [LogRecord]) throws {
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
        for (key, final) in finals where !device.shown(key, timestamp: final.timestamp) {
            let resolved = final.offsets.contains { offset in
                switch done[partition]?[offset] {
                case .resolved?: true
                case .dropped(.endedBeforeStart)?: device.activities[key]?.started != true
                default: false
                }
            }
            if !resolved { throw fail("final state (timestamp \(final.timestamp)) of \(key) was neither shown nor resolved") }
        }
    }

    /// An activity whose start reached its device stays on the Lock Screen for hours unless its end
    /// reaches it too; short of that, the end must be dead-lettered with a reason, never dropped.
    private func checkEndsOfStartedActivities(_ partition: PartitionID, _ log: [LogRecord]) throws {
        for (key, activity) in device.activities where activity.started && !activity.ended {
            let ends = log.indices.filter { log[$0].event.target == key && log[$0].event.kind == .end }
            guard !ends.isEmpty else { continue }  // the producer never ended it
            let accounted = ends.contains { offset in
                if log[offset].rejected { return true }  // the worker dead-lettered the record itself
                switch done[partition]?[Int64(offset)] {
                case .resolved?: return true
                // The producer's own timestamps put a later state after the end: the device would ignore the end as well.
                case .dropped(.notNewer)?: return true
                default: return false
                }
            }
            if !accounted {
                let how = ends.map { done[partition]?[Int64($0)].map { "\($0)" } ?? "nothing" }
                let handoff = cancelledAfterHandoff.contains(key) ? "; the start reached it under a previous owner of the partition and the next owner cancelled it with its end" : ""
                throw fail("\(key) may be on its Lock Screen for hours: its start reached the device, its end did not and was not dead-lettered (\(how))\(handoff)")
            }
        }
    }
}
