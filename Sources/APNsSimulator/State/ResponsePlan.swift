import APNsModel
import Foundation

/// What the connection should send for one request, and what to do afterwards.
struct ResponsePlan {
    enum After: Equatable { case nothing, goAway(reason: String), reset }

    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8]?
    var delayMillis = 0
    var after: After = .nothing
    /// The first valid JWT on the connection: raise SETTINGS_MAX_CONCURRENT_STREAMS.
    var raiseStreamLimit = false

    /// `{"reason": …}` (plus `timestamp` for 410, and the simulator's `detail` when there is one).
    static func refusal(_ refusal: Refusal, idHeader: String, id: String) -> ResponsePlan {
        errorAnswer(status: refusal.reason.status, reason: refusal.reason.rawValue, timestampMillis: refusal.timestampMillis,
                    detail: refusal.detail, idHeader: idHeader, id: id)
    }

    /// An injected answer (`APNsSimulatorFaults.injectedAnswer`): its status and reason, or no body without a reason.
    static func injected(_ answer: APNsSimulatorFaults.InjectedAnswer, idHeader: String, id: String) -> ResponsePlan {
        guard let reason = answer.reason else { return ResponsePlan(status: answer.status, headers: [(idHeader, id)], body: []) }
        return errorAnswer(status: answer.status, reason: reason, timestampMillis: nil, detail: "injected fault", idHeader: idHeader, id: id)
    }

    private static func errorAnswer(status: Int, reason: String, timestampMillis: Int64?, detail: String?,
                                    idHeader: String, id: String) -> ResponsePlan {
        var json = "{\"reason\":"
        JSONString.append(reason, to: &json)
        if let millis = timestampMillis { json += ",\"timestamp\":\(millis)" }
        if let detail {
            json += ",\"detail\":"
            JSONString.append(detail, to: &json)
        }
        json += "}"
        return ResponsePlan(status: status, headers: [(idHeader, id), ("content-type", "application/json")],
                            body: Array(json.utf8))
    }
}
