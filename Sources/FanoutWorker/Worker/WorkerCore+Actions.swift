import APNsModel
import FanoutAPNs
import FanoutCore
import FanoutKafka
import Foundation
import Synchronization

/// Carrying out the engine's actions, outside the lock: sends, dead letters, feedback records,
/// pausing and resuming apps. Results come back on the APNs client threads and librdkafka's
/// background thread, go through the engine under the lock, and their actions are performed here again.
extension WorkerCore {
    func perform(_ initial: [EngineAction]) {
        guard !initial.isEmpty else { return }
        var work = initial
        var index = 0
        while index < work.count {
            let action = work[index]
            index += 1
            switch action {
            case .send(let send):
                work.append(contentsOf: start(send))
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
                metrics.eventDecisions.labels(lane.rawValue, decision.rawValue).increment()
                state.withLock { $0.summary.dropped[reason.rawValue, default: 0] += 1 }
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
            case .pauseFetching(let partitions):
                partitionActions?.pauseFetching(partitions)
                for partition in partitions { log.info("partition paused by backpressure", ["partition": .string(partition.description)]) }
            case .resumeFetching(let partitions):
                partitionActions?.resumeFetching(partitions)
                for partition in partitions { log.info("partition resumed", ["partition": .string(partition.description)]) }
            case .commit(let points):
                // Records below a commit point are done: no dead letter will need their bytes.
                state.withLock { state in
                    for point in points { state.retained[point.partition]?.prune(below: point.offset) }
                }
                partitionActions?.commit(points)
            case .revokeDrained(let partition, let point):
                state.withLock { $0.retained[partition] = nil }
                partitionActions?.revokeDrained(partition, commit: point)
            case .lookUpChannelPolicy(let app, let channel):
                work.append(contentsOf: lookUpChannelPolicy(app: app, channel: channel))
            }
        }
        wakeTicker()
    }

    func wakeTicker() {
        if let deadline = nextDeadline() { ticker.wake(ifEarlierThan: deadline) }
    }

    // MARK: Sends

    /// The channel's storage policy, from configuration, cache or a lookup (answered later, on the
    /// management client's completion); the engine then decides the channel's waiting send.
    private func lookUpChannelPolicy(app: String, channel: String) -> [EngineAction] {
        let resolution = lanes.channelPolicies.resolve(app: app, channel: channel) { [self] policy in
            perform(channelPolicyKnown(app: app, channel: channel, policy: policy))
        }
        switch resolution {
        case .ready(let policy): return channelPolicyKnown(app: app, channel: channel, policy: policy)
        case .deferred: return []
        }
    }

    private func channelPolicyKnown(app: String, channel: String, policy: ChannelStoragePolicy?) -> [EngineAction] {
        let now = clock.now()
        var actions: [EngineAction] = []
        state.withLock { $0.engine.channelPolicyKnown(app: app, channel: channel, policy: policy, now: now, into: &actions) }
        return actions
    }

    /// Starts one send; returns follow-up actions when it failed synchronously.
    private func start(_ send: SendRequest) -> [EngineAction] {
        state.withLock { $0.summary.sends[WorkerSummary.SendKey(lane: send.lane, priority: send.priority), default: 0] += 1 }
        if send.budgetDowngraded { metrics.budgetDowngrades.labels(send.lane.rawValue).increment() }
        let request: APNsRequest
        do {
            request = try APNsLanes.request(for: send)
        } catch {
            return complete(send, outcome: .badPayload(reason: error.description, status: 0), result: nil, started: nil)
        }
        guard let client = lanes.client(lane: send.lane, app: send.app, environment: send.environment) else {
            return complete(send, outcome: .configError(reason: "no APNs client for app \(send.app)", status: 0), result: nil, started: nil)
        }
        let started = ContinuousClock.now
        do throws(APNsClientError) {
            try client.send(request) { [self] result in
                let actions = complete(send, outcome: result.outcome, result: result, started: started)
                perform(actions)
            }
            return []
        } catch {
            return complete(send, outcome: error.outcome, result: nil, started: nil)
        }
    }

    /// Feeds a send's outcome to the engine and records it; returns the engine's actions.
    private func complete(_ send: SendRequest, outcome: SendOutcome, result: APNsResult?, started: ContinuousClock.Instant?) -> [EngineAction] {
        let lane = send.lane.rawValue
        let priority = send.priority >= 10 ? "10" : "5"
        if let started { metrics.apnsLatency.labels(lane).observe(ContinuousClock.now - started) }
        record(outcome, of: send, result: result, lane: lane, priority: priority)
        let now = clock.now()
        var actions: [EngineAction] = []
        state.withLock { state in
            if let result {
                if result.status != nil {
                    state.unreachable[send.lane] = nil
                } else if let failure = result.transportFailure {
                    state.unreachable[send.lane] = failure
                }
            }
            if case .delivered = outcome {
                state.summary.delivered[WorkerSummary.SendKey(lane: send.lane, priority: send.priority), default: 0] += 1
                state.summary.coalesced += max(0, send.coveredOffsets.count - 1)
            }
            state.engine.complete(send.sendID, outcome: outcome, now: now, into: &actions)
        }
        if let result, let status = result.status, let note = result.transportFailure {
            log.warning("APNs response was not read whole", ["key": .string(send.target), "lane": .string(lane),
                                                             "status": .int(status), "note": .string(note)])
        }
        if let started, log.isEnabled(.trace) {
            let elapsed = Nanoseconds(ContinuousClock.now - started)
            log.trace("send completed", ["key": .string(send.target), "lane": .string(lane), "started_ns": .int(now - elapsed),
                                         "completed_ns": .int(now), "outcome": .string(Self.sendResult(outcome).rawValue),
                                         "timestamp": .int(send.event.timestamp), "offsets": .int(send.coveredOffsets.count)])
        }
        if case .tokenGone(let reason, let status, _) = outcome, case .channel(let channel) = send.destination {
            // The engine dead-letters it as channel-not-registered (counted with the dead letter);
            // whatever was known about the channel is forgotten.
            lanes.channelPolicies.forget(app: send.app, channel: channel)
            metrics.channelNotRegistered.labels(send.app).increment()
            log.warning("APNs says the broadcast channel is not registered (never created, or deleted): its events are dead-lettered as channel-not-registered",
                        ["channel": .string(channel), "app": .string(send.app), "status": .int(status), "reason": .string(reason)])
        } else if case .tokenGone(let reason, let status, _) = outcome {
            metrics.eventDecisions.labels(lane, FanoutMetrics.Decision.tokenGone.rawValue).increment(by: UInt64(send.coveredOffsets.count))
            log.info("APNs says the token is gone", ["key": .string(send.target), "status": .int(status), "reason": .string(reason),
                                                     "token": tokenField(send.destination)])
        } else if case .badPayload(let reason, let status) = outcome {
            log.error("APNs rejected a payload that passed validation (a bug): dead-lettered",
                      ["key": .string(send.target), "status": .int(status), "reason": .string(reason)])
        }
        return actions
    }

    /// The send and error metrics of an answered (or failed on the wire) send.
    private func record(_ outcome: SendOutcome, of send: SendRequest, result: APNsResult?, lane: String, priority: String) {
        metrics.sends.labels(lane, priority, Self.sendResult(outcome).rawValue).increment()
        if case .delivered = outcome {
            metrics.eventDecisions.labels(lane, FanoutMetrics.Decision.sent.rawValue).increment()
            if send.coveredOffsets.count > 1 {
                metrics.eventDecisions.labels(lane, FanoutMetrics.Decision.coalesced.rawValue).increment(by: UInt64(send.coveredOffsets.count - 1))
            }
        } else {
            let status = result?.status.map(String.init) ?? "none"
            metrics.apnsErrors.labels(lane, status, Self.reasonLabel(outcome, result: result)).increment()
        }
    }

    private func tokenField(_ destination: Destination) -> LogValue {
        switch destination {
        case .activityToken(let token), .pushToStartToken(let token): .token(token)
        case .channel(let channel): .string(channel)
        }
    }

    static func sendResult(_ outcome: SendOutcome) -> FanoutMetrics.SendResult {
        switch outcome {
        case .delivered: .delivered
        case .tokenGone: .tokenGone
        case .retry: .retry
        case .refreshAuth: .refreshAuth
        case .badPayload: .badPayload
        case .configError: .configError
        }
    }

    private static func reasonLabel(_ outcome: SendOutcome, result: APNsResult?) -> String {
        if let reason = result?.reason { return reason.rawValue }
        if let result, result.status == nil, result.transportFailure != nil { return "transport" }
        switch outcome {
        case .delivered: return "none"
        case .tokenGone(let reason, _, _), .retry(let reason, _, _), .badPayload(let reason, _), .configError(let reason, _):
            return reason.count > 40 ? "other" : reason
        case .refreshAuth: return "ExpiredProviderToken"
        }
    }

    // MARK: Dead letters and feedback

    /// A record the decoder rejected: dead-letter it, then its offset is done.
    func deadLetterRejected(_ message: KafkaMessage, _ rejection: EventRejection) {
        let source = EventSource(partition: PartitionID(topic: message.topic, partition: message.partition), offset: message.offset)
        produceReliably(what: "dead letter for \(source)", attempt: { [deadLetters] completion in
            try deadLetters.deadLetter(message, reason: rejection.reason.rawValue, detail: rejection.detail, completion: completion)
        }, acknowledged: { [self] in
            metrics.deadLetters.labels(message.topic, rejection.reason.rawValue).increment()
            state.withLock { state in
                state.engine.resolveRejected(source)
                state.summary.deadLettered[rejection.reason.rawValue, default: 0] += 1
            }
        })
    }

    /// A dead letter the engine asked for: every source record, then `resolve`.
    private func deadLetter(_ letter: DeadLetter) {
        var missing = 0
        let messages: [KafkaMessage]? = state.withLock { state in
            var messages: [KafkaMessage] = []
            for source in letter.sources {
                // Revoked since the engine decided (a race with the intake thread): its offsets were not
                // committed, and the next owner replays and judges these events again.
                guard let retained = state.retained[source.partition] else { return nil }
                if let message = retained.message(at: source.offset) {
                    messages.append(message)
                } else {
                    missing += 1
                    messages.append(KafkaMessage(topic: source.partition.topic, partition: source.partition.partition, offset: source.offset,
                                                 key: Array(letter.target.utf8), value: nil))
                }
            }
            return messages
        }
        guard let messages else {
            log.info("dead letter skipped: its partition was revoked meanwhile; the next owner replays the events",
                     ["reason": .string(letter.reason.rawValue), "key": .string(letter.target)])
            return
        }
        if missing > 0 {
            log.warning("dead-lettering events whose original record is no longer retained: the dead letters carry no value",
                        ["reason": .string(letter.reason.rawValue), "key": .string(letter.target), "count": .int(missing)])
        }
        if letter.reason == .noToken {
            metrics.eventDecisions.labels(Lane.activity.rawValue, FanoutMetrics.Decision.noToken.rawValue).increment(by: UInt64(messages.count))
        } else {
            for message in messages {
                metrics.eventDecisions.labels(lane(of: message.topic).rawValue, FanoutMetrics.Decision.deadLettered.rawValue).increment()
            }
        }
        log.info("events dead-lettered", ["reason": .string(letter.reason.rawValue), "detail": .string(letter.detail),
                                          "key": .string(letter.target), "count": .int(messages.count)])
        let remaining = Atomic<Int>(messages.count)
        for message in messages {
            produceReliably(what: "dead letter for \(message.topic)/\(message.partition)/\(message.offset)", attempt: { [deadLetters] completion in
                try deadLetters.deadLetter(message, reason: letter.reason.rawValue, detail: letter.detail, completion: completion)
            }, acknowledged: { [self] in
                metrics.deadLetters.labels(message.topic, letter.reason.rawValue).increment()
                let last = remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
                state.withLock { state in
                    state.summary.deadLettered[letter.reason.rawValue, default: 0] += 1
                    if last { state.engine.resolve(letter.resolution) }
                }
            })
        }
    }

    private func produceFeedback(_ feedback: TokenFeedback) {
        var json = "{\"key\":"
        Log.appendString(feedback.key, to: &json)
        json += ",\"token\":"
        Log.appendString(feedback.token, to: &json)
        json += ",\"app\":"
        Log.appendString(feedback.app, to: &json)
        json += ",\"status\":\(feedback.status),\"reason\":"
        Log.appendString(feedback.reason, to: &json)
        json += ",\"apns_timestamp\":" + (feedback.apnsTimestampMillis.map(String.init) ?? "null")
        json += ",\"observed_at\":\(feedback.observedAt)}"
        let value = Array(json.utf8)
        let key = Array(feedback.key.utf8)
        let topic = topics.activityTokenFeedback
        produceReliably(what: "token feedback for \(feedback.key)", attempt: { [producer] completion in
            try producer.produce(topic: topic, key: key, value: value, completion: completion)
        }, acknowledged: { [self] in
            metrics.feedbackRecords.labels(feedback.app, feedback.reason).increment()
            state.withLock { state in
                state.summary.feedbackRecords += 1
                state.engine.resolve(feedback.resolution)
            }
        })
    }

    /// Produces until Kafka acknowledges: a failure is logged and retried after
    /// `options.produceRetryDelay` (the offsets it covers stay incomplete meanwhile). After the
    /// worker stopped, a failure is logged and given up: its offsets are never committed.
    func produceReliably(what: String, attempt: @escaping @Sendable (@escaping KafkaProducer.Completion) throws -> Void,
                         acknowledged: @escaping @Sendable () -> Void) {
        outstandingProduces.add(1, ordering: .relaxed)
        let retry: @Sendable (String) -> Void = { [self] failure in
            if stopped.load(ordering: .relaxed) {
                log.error("record not produced before shutdown; its offsets stay uncommitted and will be replayed",
                          ["record": .string(what), "error": .string(failure)])
                outstandingProduces.subtract(1, ordering: .relaxed)
                return
            }
            log.warning("producing failed, retrying", ["record": .string(what), "error": .string(failure)])
            retryQueue.asyncAfter(deadline: .now() + options.produceRetryDelay.timeInterval) { [self] in
                outstandingProduces.subtract(1, ordering: .relaxed)
                produceReliably(what: what, attempt: attempt, acknowledged: acknowledged)
            }
        }
        do {
            try attempt { result in
                switch result {
                case .success:
                    acknowledged()
                    self.outstandingProduces.subtract(1, ordering: .relaxed)
                    self.wakeTicker()
                case .failure(let error):
                    retry(error.description)
                }
            }
        } catch {
            retry("\(error)")
        }
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
