import APNsModel
import FanoutCore

extension TargetSnapshot {
    /// The JSON body of `/debug/targets/<key>`. Times are UNIX nanoseconds as the engine keeps them;
    /// the token appears only redacted, and every text (the key and a paused app's reason come from
    /// outside) goes through `Redact.text`.
    /// `pending_traces` and `in_flight_traces` list the `traceparent` of every event the pending state
    /// and the send in flight cover (at most `EventTraces.maxLinks` each, the newest).
    func json(pendingTraces: EventTraces = EventTraces([]), inFlightTraces: EventTraces = EventTraces([])) -> String {
        var out = "{\"lane\":\"\(lane.rawValue)\",\"key\":"
        JSONString.append(Redact.text(key), to: &out)
        out += ",\"app\":"
        JSONString.append(Redact.text(app), to: &out)
        out += ",\"ended\":\(ended),\"end_accepted\":\(endAccepted),\"sends\":\(sends),\"deliveries\":\(deliveries)"
        func field(_ name: String, _ value: Int64?) { out += ",\"\(name)\":" + (value.map(String.init) ?? "null") }
        func text(_ name: String, _ value: String?) {
            out += ",\"\(name)\":"
            if let value { JSONString.append(Redact.text(value), to: &out) } else { out += "null" }
        }
        field("last_sent_timestamp", lastSentTimestamp)
        field("last_send_at", lastSendAt)
        field("last_delivered_at", lastDeliveredAt)
        text("last_outcome", lastOutcome.map { "\($0)" })
        field("last_outcome_at", lastOutcomeAt)
        text("pending_kind", pendingKind?.rawValue)
        field("pending_timestamp", pendingTimestamp)
        out += ",\"pending_offsets\":\(pendingOffsets)"
        field("in_flight_send_id", inFlightSendID.map { Int64(bitPattern: $0) })
        out += ",\"budget_left\":\(budgetLeft.isFinite ? budgetLeft : 0)"
        field("backoff_until", backoffUntil)
        out += ",\"retry_attempts\":\(retryAttempts)"
        field("waiting_for_token_since", waitingForTokenSince)
        text("token_prefix", tokenPrefix)
        text("app_paused_reason", appPausedReason)
        field("next_timer", nextTimer)
        func traces(_ name: String, _ traces: EventTraces) {
            out += ",\"\(name)\":["
            for (index, trace) in traces.traces.enumerated() {
                if index > 0 { out += "," }
                out += "\"\(trace.header)\""  // validated lowercase hex and dashes: nothing to escape or redact
            }
            out += "]"
        }
        traces("pending_traces", pendingTraces)
        traces("in_flight_traces", inFlightTraces)
        out += "}"
        return out
    }
}
