/// The top-level members of a v1 event (DESIGN.md §2). Anything else is `unknown-field`.
enum EventField: Int, CaseIterable {
    case v, id, app, activity, channel, event, timestamp, contentState, importance, alert
    case staleDate, dismissalDate, relevanceScore, token, attributesType, attributes
    case inputPushToken, inputPushChannel

    var name: String {
        switch self {
        case .v: "v"
        case .id: "id"
        case .app: "app"
        case .activity: "activity"
        case .channel: "channel"
        case .event: "event"
        case .timestamp: "timestamp"
        case .contentState: "content_state"
        case .importance: "importance"
        case .alert: "alert"
        case .staleDate: "stale_date"
        case .dismissalDate: "dismissal_date"
        case .relevanceScore: "relevance_score"
        case .token: "token"
        case .attributesType: "attributes_type"
        case .attributes: "attributes"
        case .inputPushToken: "input_push_token"
        case .inputPushChannel: "input_push_channel"
        }
    }

    static let count = allCases.count
    static let names: [[UInt8]] = allCases.map { Array($0.name.utf8) }

    /// The field whose name is the raw (unescaped) byte range `name`, if any.
    static func match(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> EventField? {
        let length = range.count
        candidates: for (index, name) in names.enumerated() where name.count == length {
            var offset = 0
            for byte in name {
                if bytes[range.lowerBound + offset] != byte { continue candidates }
                offset += 1
            }
            return EventField(rawValue: index)
        }
        return nil
    }
}
