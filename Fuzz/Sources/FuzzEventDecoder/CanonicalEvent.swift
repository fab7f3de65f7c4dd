import APNsModel
import FanoutCore

/// Writes a decoded event back as v1 JSON with every field it has (raw JSON parts verbatim), so
/// decoding the text again must give the same event.
enum CanonicalEvent {
    static func json(_ event: ActivityEvent) -> [UInt8] {
        var out: [UInt8] = Array("{\"v\":1".utf8)
        func name(_ text: String) {
            out.append(UInt8(ascii: ","))
            JSONString.append(text, to: &out)
            out.append(UInt8(ascii: ":"))
        }
        func string(_ field: String, _ value: String?) {
            guard let value else { return }
            name(field)
            JSONString.append(value, to: &out)
        }
        func raw(_ field: String, _ value: [UInt8]?) {
            guard let value else { return }
            name(field)
            out.append(contentsOf: value)
        }
        func integer(_ field: String, _ value: Int64?) {
            guard let value else { return }
            name(field)
            out.append(contentsOf: String(value).utf8)
        }
        string("id", event.id)
        string("app", event.app)
        string(event.lane == .activity ? "activity" : "channel", event.target)
        string("event", event.kind.rawValue)
        integer("timestamp", event.timestamp)
        raw("content_state", event.contentState.bytes)
        string("importance", event.importance?.rawValue)
        raw("alert", event.alert?.bytes)
        integer("stale_date", event.staleDate)
        integer("dismissal_date", event.dismissalDate)
        if let score = event.relevanceScore { raw("relevance_score", Array(score.description.utf8)) }
        string("token", event.token?.hex)
        string("attributes_type", event.attributesType)
        raw("attributes", event.attributes?.bytes)
        if event.inputPushToken { raw("input_push_token", Array("true".utf8)) }
        string("input_push_channel", event.inputPushChannel)
        out.append(UInt8(ascii: "}"))
        return out
    }
}
