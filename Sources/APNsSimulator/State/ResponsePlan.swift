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
        var json = "{\"reason\":\"\(refusal.reason.rawValue)\""
        if let millis = refusal.timestampMillis { json += ",\"timestamp\":\(millis)" }
        if let detail = refusal.detail { json += ",\"detail\":\(jsonString(detail))" }
        json += "}"
        return ResponsePlan(status: refusal.reason.status, headers: [(idHeader, id), ("content-type", "application/json")],
                            body: Array(json.utf8))
    }

    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
