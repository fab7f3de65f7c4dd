import APNsModel
import FanoutAPNs
import FanoutCore
import Foundation

/// Executing the engine's sends: the channel-policy lookups a broadcast waits on, the request handed
/// to the lane's APNs client, and its answer fed back to the engine with the send metrics and logs.
extension WorkerCore {
    /// The channel's storage policy, from configuration, cache or a lookup (answered later, on the
    /// management client's completion); the engine then decides the channel's waiting send.
    func lookUpChannelPolicy(app: String, channel: String) -> [EngineAction] {
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

    /// Starts one send; returns follow-up actions when it failed synchronously. Its answer goes to
    /// the answer thread (`AnswerQueue`), which feeds it to the engine. The send is counted in `tally`,
    /// which `perform` adds to the summary once for all the sends it starts.
    func start(_ send: SendRequest, counting tally: inout SendTally) -> [EngineAction] {
        tally.count(send)
        if send.budgetDowngraded { metrics.lane(send.lane).budgetDowngrades.increment() }
        let request: APNsRequest
        do {
            request = try APNsLanes.request(for: send)
        } catch {
            return complete(.unsent(send, .badPayload(reason: error.description, status: 0)))
        }
        guard let client = lanes.client(lane: send.lane, app: send.app, environment: send.environment) else {
            return complete(.unsent(send, .configError(reason: "no APNs client for app \(send.app)", status: 0)))
        }
        let started = ContinuousClock.now
        do throws(APNsClientError) {
            try client.send(request, permit: WritePermit(assignment: send.assignment.rawValue)) { [self] result in
                answers.add(AnswerQueue.Answer(send: send, outcome: result.outcome, result: result, latency: ContinuousClock.now - started), core: self)
            }
            return []
        } catch {
            return complete(.unsent(send, error.outcome))
        }
    }

    func complete(_ answer: AnswerQueue.Answer) -> [EngineAction] { complete([answer][...]) }

    /// Feeds answers to the engine under one lock and records them; returns the engine's actions.
    ///
    /// The answers are read in place (by index), not copied out per loop: each copy of an answer
    /// retained and released every string of its APNs result.
    func complete(_ answers: ArraySlice<AnswerQueue.Answer>) -> [EngineAction] {
        for index in answers.indices {
            // Withdrawn: never written, counted as such, not as an APNs answer.
            if let result = answers[index].result, APNsClient.isWithdrawn(result) {
                metrics.sendsWithdrawn.labels(answers[index].send.lane.rawValue).increment()
                continue
            }
            if let latency = answers[index].latency { metrics.lane(answers[index].send.lane).latency.observe(latency) }
            record(answers[index].outcome, of: answers[index].send, result: answers[index].result, lane: answers[index].send.lane.rawValue)
        }
        let now = clock.now()
        var actions: [EngineAction] = []
        actions.reserveCapacity(2 * answers.count)
        let tracing = log.isEnabled(.trace)
        /// By position in `answers`, only for the answers whose log lines carry them (none, mostly).
        var traces: [Int: EventTraces] = [:]
        state.withLock { state in
            for index in answers.indices {
                let send = answers[index].send
                // Read before the engine completes the offsets (a commit may prune their records then).
                if tracing || Self.isLoggedAlways(answers[index].outcome) {
                    traces[index] = EventTraces(offsets: send.coveredOffsets, in: state.retained[send.partition])
                }
                if case .delivered = answers[index].outcome {
                    state.summary.delivered[WorkerSummary.SendKey(lane: send.lane, priority: send.priority), default: 0] += 1
                    state.summary.coalesced += max(0, send.coveredOffsets.count - 1)
                }
                state.engine.complete(send.sendID, outcome: answers[index].outcome, now: now, into: &actions)
            }
        }
        for index in answers.indices { report(answers[index], traces: traces[index] ?? EventTraces([]), now: now) }
        return actions
    }

    /// Outcomes whose log line is written at the default level (info): their trace contexts are read always.
    private static func isLoggedAlways(_ outcome: SendOutcome) -> Bool {
        switch outcome {
        case .tokenGone, .badPayload: true
        case .delivered, .retry, .refreshAuth, .configError: false
        }
    }

    /// The logs of an answer, and what an answer about a channel changes outside the engine.
    private func report(_ answer: AnswerQueue.Answer, traces: EventTraces, now: Nanoseconds) {
        let send = answer.send, outcome = answer.outcome, lane = send.lane.rawValue
        if let result = answer.result, let status = result.status, let note = result.transportFailure {
            log.warning("APNs response was not read whole", ["key": .string(send.target), "lane": .string(lane),
                                                             "status": .int(status), "note": .string(note)])
        }
        if let latency = answer.latency, log.isEnabled(.trace) {
            let elapsed = Nanoseconds(latency)
            log.log(.trace, "send completed", ["key": .string(send.target), "lane": .string(lane), "started_ns": .int(now - elapsed),
                                               "completed_ns": .int(now), "outcome": .string(Self.sendResult(outcome).rawValue),
                                               "timestamp": .int(send.event.timestamp), "offsets": .int(send.coveredOffsets.count)],
                    more: traces.logFields)
        }
        if case .tokenGone(let reason, let status, _) = outcome, case .channel(let channel) = send.destination {
            // The engine dead-letters it as channel-not-registered (counted with the dead letter);
            // whatever was known about the channel is forgotten.
            lanes.channelPolicies.forget(app: send.app, channel: channel)
            metrics.channelNotRegistered.labels(send.app).increment()
            log.warning("APNs says the broadcast channel is not registered (never created, or deleted): its events are dead-lettered as channel-not-registered",
                        ["channel": .string(channel), "app": .string(send.app), "status": .int(status), "reason": .string(reason)])
        } else if case .tokenGone(let reason, let status, _) = outcome {
            metrics.lane(send.lane).decision(.tokenGone).increment(by: UInt64(send.coveredOffsets.count))
            log.log(.info, "APNs says the token is gone", ["key": .string(send.target), "status": .int(status), "reason": .string(reason),
                                                           "token": tokenField(send.destination)], more: traces.logFields)
        } else if case .badPayload(let reason, let status) = outcome {
            log.log(.error, "APNs rejected a payload that passed validation (a bug): dead-lettered",
                    ["key": .string(send.target), "status": .int(status), "reason": .string(reason)], more: traces.logFields)
        }
    }

    /// The send and error metrics of an answered (or failed on the wire) send.
    private func record(_ outcome: SendOutcome, of send: SendRequest, result: APNsResult?, lane: String) {
        let handles = metrics.lane(send.lane)
        handles.sends(priority: send.priority, Self.sendResult(outcome)).increment()
        if case .delivered = outcome {
            handles.decision(.sent).increment()
            if send.coveredOffsets.count > 1 {
                handles.decision(.coalesced).increment(by: UInt64(send.coveredOffsets.count - 1))
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
}

/// Sends started in one `perform`, by lane and priority, added to the summary when `perform` takes
/// the core's lock anyway, rather than under one lock per send (every worker thread takes it).
struct SendTally {
    private var counts: [(key: WorkerSummary.SendKey, sends: Int)] = []

    mutating func count(_ send: SendRequest) {
        let key = WorkerSummary.SendKey(lane: send.lane, priority: send.priority)
        // A handful of lane and priority pairs: a short list beats hashing.
        if let index = counts.firstIndex(where: { $0.key == key }) {
            counts[index].sends += 1
        } else {
            counts.append((key, 1))
        }
    }

    /// Under the core's lock.
    func add(to summary: inout WorkerSummary) {
        for (key, sends) in counts { summary.sends[key, default: 0] += sends }
    }
}
