/// The top-level members of a v1 event (docs/design.md §2). Anything else is `unknown-field`.
enum EventField: Int, CaseIterable {
    case v, id, app, activity, channel, event, timestamp, contentState, importance, alert
    case staleDate, dismissalDate, relevanceScore, token, attributesType, attributes
    case inputPushToken, inputPushChannel

    var name: String { staticName.description }

    var staticName: StaticString {
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

    /// The field whose name is the raw (unescaped) byte range `name`, if any. Dispatches on length
    /// first so at most three names are compared (this runs for every member of every event).
    static func match(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> EventField? {
        func named(_ field: EventField) -> EventField? {
            let name = field.staticName.utf8Start
            for offset in 0..<range.count where bytes[range.lowerBound + offset] != name[offset] { return nil }
            return field
        }
        switch range.count {
        case 1: return named(.v)
        case 2: return named(.id)
        case 3: return named(.app)
        case 5: return named(.event) ?? named(.alert) ?? named(.token)
        case 7: return named(.channel)
        case 8: return named(.activity)
        case 9: return named(.timestamp)
        case 10: return named(.importance) ?? named(.staleDate) ?? named(.attributes)
        case 13: return named(.contentState)
        case 14: return named(.dismissalDate)
        case 15: return named(.relevanceScore) ?? named(.attributesType)
        case 16: return named(.inputPushToken)
        case 18: return named(.inputPushChannel)
        default: return nil
        }
    }
}
