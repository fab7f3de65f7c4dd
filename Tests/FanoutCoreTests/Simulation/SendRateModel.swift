import APNsModel
@testable import FanoutCore

/// The priority-10 budget of docs/design.md §3, written from the rule and not from the engine's bucket:
/// between any priority-10 send and a later one (both counted) a target sent at most `burst` plus
/// what `perHour` earns in the time between them. A bucket that starts full and refills continuously
/// allows exactly the sequences that pass; integer arithmetic, so no rounding decides a verdict.
struct PriorityBudgetModel {
    /// The per-activity default: burst 4, 12 an hour.
    static let activityDefault = (burst: Int64(4), perHour: Int64(12))

    let burst: Int64
    let perHour: Int64
    private var sendTimes: [Nanoseconds] = []

    init(burst: Int64, perHour: Int64) {
        self.burst = burst
        self.perHour = perHour
    }

    /// Records a priority-10 send at `now`; returns the earlier send from which on too many went, if any.
    mutating func admit(at now: Nanoseconds) -> Nanoseconds? {
        sendTimes.append(now)
        for (index, earlier) in sendTimes.enumerated() {
            let sends = Int64(sendTimes.count - index)
            if (sends - burst) * 3_600_000_000_000 > perHour * (now - earlier) { return earlier }
        }
        return nil
    }
}

/// docs/design.md §3 rules on what one target is sent, tracked per target within one ownership epoch of its
/// partition from the sends and their answers alone.
struct TargetWatch {
    /// "At most one send per target per min_interval (default 1 s)".
    static let minInterval: Nanoseconds = 1_000_000_000

    var lastSendAt: Nanoseconds?
    /// aps.timestamp of the last send, and of the last one APNs acknowledged.
    var lastAttemptTimestamp: Int64 = .min
    var lastAcknowledgedTimestamp: Int64 = .min
    var endAcknowledged = false
    /// An end APNs answered without delivering it (token gone, payload refused): the activity has
    /// ended all the same, and nothing more may be sent for it. Where its newest offset is.
    var endSettled: EventSource?
    var inFlight = 0
    var budget: PriorityBudgetModel

    init(budget: PriorityBudgetModel) { self.budget = budget }

    /// What is wrong with sending `request` at `now`, or nil.
    mutating func admit(_ request: SendRequest, at now: Nanoseconds) -> String? {
        defer {
            lastSendAt = now
            lastAttemptTimestamp = max(lastAttemptTimestamp, request.event.timestamp)
            inFlight += 1
        }
        if endAcknowledged { return "send after its end was delivered" }
        if let endSettled { return "send after its end was settled without delivery (\(endSettled))" }
        if inFlight > 0 { return "two sends in flight" }
        if let lastSendAt, now - lastSendAt < Self.minInterval { return "sends \(now - lastSendAt) ns apart, min_interval 1 s" }
        let timestamp = request.event.timestamp
        // A retry repeats the timestamp it failed with; a state after an acknowledged one must be newer.
        if timestamp <= lastAcknowledgedTimestamp || timestamp < lastAttemptTimestamp {
            return "timestamp \(timestamp) after \(lastAttemptTimestamp) (acknowledged \(lastAcknowledgedTimestamp))"
        }
        if request.priority == 10, case .pushToStartToken = request.destination {
            return nil  // judged per push-to-start token
        }
        if request.priority == 10, let since = budget.admit(at: now) {
            return "priority-10 budget (burst \(budget.burst), \(budget.perHour)/h) exceeded since the send at \(since)"
        }
        return nil
    }

    /// APNs answered a send of this target.
    mutating func answered(_ request: SendRequest, outcome: SendOutcome) {
        inFlight -= 1
        switch outcome {
        case .tokenGone, .badPayload:
            if request.event.kind == .end, let newest = request.coveredOffsets.max() {
                endSettled = EventSource(partition: request.partition, offset: newest)
            }
            return
        case .retry, .refreshAuth, .configError:
            return
        case .delivered:
            break
        }
        lastAcknowledgedTimestamp = max(lastAcknowledgedTimestamp, request.event.timestamp)
        if request.event.kind == .end { endAcknowledged = true }
    }
}
