import APNsModel
import FanoutCore
import FuzzSupport

/// What the contract says of every event the decoder accepts (README, "Event contract").
enum AcceptedEvent {
    static func check(_ event: ActivityEvent, lane: Lane, key: String?, policy: EventPolicy, now: Int64) {
        Property.require(event.lane == lane, "the event is on the lane it was read from")
        Property.require((1...256).contains(event.id.utf8.count), "id is 1–256 bytes")
        Property.require((1...1024).contains(event.target.utf8.count), "the target is 1–1024 bytes")
        if let key { Property.require(event.target == key, "the target equals the Kafka key") }
        if let app = event.app {
            if policy.apps.isEmpty {
                Property.require(Contract.isBundleID(app), "with no apps configured, app is a bundle id (letters, digits, '.', '-')")
            } else {
                Property.require(policy.apps.contains(app), "app is a configured app")
            }
        } else {
            Property.fail("the decoder always sets app")
        }
        if lane == .broadcast {
            Property.require(event.kind != .start, "no start on the broadcast lane")
            Property.require(event.token == nil, "no token on the broadcast lane")
            Property.require(Contract.isBase64(event.target), "a channel is base64 (the schema's pattern)")
        }
        if event.kind == .start {
            Property.require(event.token != nil && event.alert != nil && event.attributesType != nil && event.attributes != nil,
                             "a start carries its token, alert and attributes")
        } else {
            Property.require(event.attributesType == nil && event.attributes == nil && !event.inputPushToken && event.inputPushChannel == nil,
                             "attributes and input_push_* only on start")
        }
        Property.require(!(event.inputPushToken && event.inputPushChannel != nil), "not both kinds of input push")
        if let channel = event.inputPushChannel { Property.require(Contract.isBase64(channel), "input_push_channel is base64 (the schema's pattern)") }
        if event.dismissalDate != nil { Property.require(event.kind == .end, "dismissal_date only on end") }

        let latest = min(100_000_000_000, now + policy.maxFutureSeconds)
        for (name, date) in [("timestamp", event.timestamp), ("stale_date", event.staleDate), ("dismissal_date", event.dismissalDate)] {
            if let date { Property.require((1...latest).contains(date), "\(name) \(date) is positive seconds at most 8 h ahead") }
        }
        if let stale = event.staleDate { Property.require(stale >= event.timestamp, "stale_date is not before timestamp") }
        if let score = event.relevanceScore { Property.require(score.isFinite, "relevance_score is a finite number") }

        Property.require(event.contentState.bytes.first == UInt8(ascii: "{"), "content_state is an object")
        Property.require(event.contentState.bytes.count <= LiveActivityPayload.contentStateLimit, "content_state fits ActivityKit's 4 KB")
        Property.require(event.contentFields.count == Set(event.contentFields.map(\.name)).count, "content fields are distinct members")

        let payload = event.livePayload(defaultStaleAfter: policy.defaultStaleAfter)
        let limit = lane == .activity ? LiveActivityPayload.deviceLimit : LiveActivityPayload.broadcastLimit
        let body = payload.encoded()
        Property.require(body.count == payload.encodedSize, "the payload's size is known before it is built")
        Property.require(body.count <= limit, "an accepted event's payload fits the lane's \(limit) bytes")
        if let refusal = SimulatorJSON.payloadRefusal(body, isBroadcast: lane == .broadcast) {
            Property.fail("the APNs simulator accepts the payload of every accepted event, refused: \(refusal) for \(String(decoding: body, as: UTF8.self))")
        }
    }
}
