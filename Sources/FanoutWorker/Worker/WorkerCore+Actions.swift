import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// Carrying out the engine's actions, outside the lock: sends (`WorkerCore+Sends`), dead letters and
/// feedback records (`WorkerCore+Records`), app pauses, lane health and the Kafka-side partition
/// actions (`PartitionActions`). Results come back on the APNs client threads and librdkafka's
/// background thread, go through the engine under the lock, and their actions are performed here again.
extension WorkerCore {
    func perform(_ initial: [EngineAction]) {
        guard !initial.isEmpty else { return }
        var work = initial
        var index = 0
        /// State records of this call's delivered sends, produced together after the loop.
        var saves: [StateSave] = []
        var started = SendTally()
        while index < work.count {
            let action = work[index]
            index += 1
            switch action {
            case .send(let send):
                work.append(contentsOf: start(send, counting: &started))
            case .deadLetter(let letter):
                deadLetter(letter)
            case .feedback(let feedback):
                produceFeedback(feedback)
            case .dropped(let source, let reason):
                let lane = lane(of: source.partition.topic)
                let decision: FanoutMetrics.Decision = switch reason {
                case .duplicateID: .duplicate
                case .notNewer: .stale
                case .afterEnd, .endedBeforeStart: .afterEnd
                }
                metrics.lane(lane).decision(decision).increment()
                let traces = state.withLock { state in
                    state.summary.dropped[reason.rawValue, default: 0] += 1
                    return log.isEnabled(.trace) ? EventTraces(offsets: [source.offset], in: state.retained[source.partition]) : EventTraces([])
                }
                log.log(.trace, "event dropped", ["reason": .string(reason.rawValue), "source": .string(source.description)],
                        more: traces.logFields)
            case .pauseApp(let app, let reason):
                state.withLock { $0.pausedApps[app] = reason }
                metrics.appBlocked.labels(app).set(1)
                metrics.appConfigErrors.labels(app, reason).increment()
                log.error("APNs rejects this app's configuration: sending for it is stopped, its offsets stay uncommitted and it is probed periodically; fix the key, team, topic or environment",
                          ["app": .string(app), "reason": .string(reason)])
            case .resumeApp(let app):
                state.withLock { $0.pausedApps[app] = nil }
                metrics.appBlocked.labels(app).set(0)
                log.info("APNs accepts this app's configuration again: sending resumed", ["app": .string(app)])
            case .followTokens(let partition, let assignment):
                partitionActions?.followTokens(partition, assignment: assignment)
            case .unfollowTokens(let partition):
                partitionActions?.unfollowTokens(partition)
            case .restoreState(let partition, let assignment):
                partitionActions?.restoreState(partition, assignment: assignment)
            case .saveState(let handoff, let partition, let resolution):
                saves.append((handoff, partition.partition, resolution))
            case .forgetState(let key, let partition):
                records.forgetState(key: key, partition: partition)
            case .pauseFetching(let partitions):
                partitionActions?.pauseFetching(partitions)
                for partition in partitions { log.info("partition paused by backpressure", ["partition": .string(partition.description)]) }
            case .resumeFetching(let partitions):
                partitionActions?.resumeFetching(partitions)
                for partition in partitions { log.info("partition resumed", ["partition": .string(partition.description)]) }
            case .commit(let points, let round):
                // Records below a commit point are done: no dead letter will need their bytes.
                state.withLock { state in
                    for point in points { state.retained[point.partition]?.prune(below: point.offset) }
                }
                partitionActions?.commit(points, round: round)
            case .assignmentEnded(let assignment):
                gate.ended(assignment)
            case .revokeDrained(let partition, let point):
                state.withLock { $0.retained[partition] = nil }
                partitionActions?.revokeDrained(partition, commit: point)
            case .lookUpChannelPolicy(let app, let channel):
                work.append(contentsOf: lookUpChannelPolicy(app: app, channel: channel))
            case .laneFailing(let lane, let since, let reason):
                state.withLock { $0.failingLanes[lane] = (since, reason) }
                metrics.apnsLaneFailing.labels(lane.rawValue).set(1)
                log.warning("every APNs send on this lane has failed for a while: not ready until APNs answers again; sends are retried with backoff and nothing is dropped",
                            ["lane": .string(lane.rawValue), "failing_for": .duration(.nanoseconds(clock.now() - since)), "last_failure": .string(reason)])
            case .laneRecovered(let lane, let after):
                state.withLock { $0.failingLanes[lane] = nil }
                metrics.apnsLaneFailing.labels(lane.rawValue).set(0)
                log.info("APNs answers this lane again", ["lane": .string(lane.rawValue), "failed_for": .duration(.nanoseconds(after))])
            }
        }
        if !saves.isEmpty {
            records.saveStates(saves) { [self] resolutions in
                let deadline = state.withLock { state in
                    for resolution in resolutions { state.engine.resolve(resolution) }
                    return state.engine.nextDeadline()
                }
                wakeTicker(deadline)
            }
        }
        // One lock for the summary's count and the ticker's deadline: every worker thread takes this
        // lock, and each extra taking made the others queue behind it.
        wakeTicker(state.withLock { state in
            started.add(to: &state.summary)
            return state.engine.nextDeadline()
        })
    }

    func wakeTicker() { wakeTicker(nextDeadline()) }

    /// Wakes the ticker when `deadline` (read under the lock by the caller) is earlier than its own.
    func wakeTicker(_ deadline: Nanoseconds?) {
        if let deadline { ticker.wake(ifEarlierThan: deadline) }
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
