import APNsModel

/// Turns the bytes of one v1 event (docs/design.md §2) into a validated `ActivityEvent`, or says exactly
/// why not with a stable `RejectionReason`.
///
/// Pure and thread-safe: a value configured once by `EventPolicy`; `decode` touches no shared state.
/// Every rule runs before anything is sent, including the final APNs payload size, so an event that
/// decodes can be delivered as far as Fanout can tell. Rules, in the order they are checked:
/// size (before parsing), JSON, object shape and known fields, `v`, `id`, `event`, lane and target,
/// `app`, `timestamp`, `content_state`, `importance`, `alert`, dates, `relevance_score`, `token`,
/// attributes, `input_push_*`, payload size. The first failing rule is reported.
/// `null` for an optional field means the same as leaving it out.
public struct EventDecoder: Sendable {
    public let policy: EventPolicy
    /// The one configured app, which events may then omit.
    private let onlyApp: String?

    static let eventKinds: [(name: [UInt8], value: EventKind)] = EventKind.allCases.map { (Array($0.rawValue.utf8), $0) }
    static let importances: [(name: [UInt8], value: Importance)] = [Importance.major, .minor].map { (Array($0.rawValue.utf8), $0) }

    public init(policy: EventPolicy) {
        self.policy = policy
        self.onlyApp = policy.apps.count == 1 ? policy.apps.first : nil
    }

    /// Decodes one Kafka record of an event topic: a record without a value (a tombstone) or without a
    /// key is rejected before its bytes are read — without a key the producer's partitioner spread
    /// one target's events over partitions, so no single owner would handle them in order.
    public func decode(record value: [UInt8]?, key: [UInt8]?, lane: Lane, now: Int64) -> Result<ActivityEvent, EventRejection> {
        guard let value else {
            return .failure(EventRejection(.malformedJSON, "the record has a null value (a tombstone); events must be JSON objects"))
        }
        guard let key else {
            let field = lane == .activity ? "activity" : "channel"
            return .failure(EventRejection(.missingKey, "the record has a null Kafka key; produce each event with key = its \"\(field)\" so one owner handles each target in order"))
        }
        return decode(value, key: String(decoding: key, as: UTF8.self), lane: lane, now: now)
    }

    /// Decodes one event. `key` is the Kafka message key, when there is one: it must equal the
    /// event's `activity` (activity lane) or `channel` (broadcast lane). `now` is UNIX seconds.
    public func decode(_ bytes: [UInt8], key: String?, lane: Lane, now: Int64) -> Result<ActivityEvent, EventRejection> {
        bytes.withUnsafeBufferPointer { decode($0, key: key, lane: lane, now: now) }
    }

    public func decode(_ bytes: UnsafeRawBufferPointer, key: String?, lane: Lane, now: Int64) -> Result<ActivityEvent, EventRejection> {
        decode(bytes.assumingMemoryBound(to: UInt8.self), key: key, lane: lane, now: now)
    }

    public func decode(_ bytes: UnsafeBufferPointer<UInt8>, key: String?, lane: Lane, now: Int64) -> Result<ActivityEvent, EventRejection> {
        do {
            return .success(try decodeEvent(bytes, key: key, lane: lane, now: now))
        } catch {
            return .failure(error)
        }
    }

    private func decodeEvent(_ bytes: UnsafeBufferPointer<UInt8>, key: String?, lane: Lane,
                             now: Int64) throws(EventRejection) -> ActivityEvent {
        guard bytes.count <= policy.maxEventBytes else {
            throw EventRejection(.eventTooLarge, "the event is \(bytes.count) bytes, over the \(policy.maxEventBytes)-byte limit (max_event_bytes); send less content_state or attributes")
        }
        let reader = try EventReader(bytes: bytes, policy: policy)
        let fields = try reader.topLevelFields()
        let (sum, overflow) = now.addingReportingOverflow(max(0, policy.maxFutureSeconds))
        let latest = overflow ? Int64.max : sum

        guard let version = fields[.v] else { throw EventRejection(.unsupportedVersion, "missing \"v\"; set \"v\": 1") }
        guard reader.integer(version) == 1 else {
            throw EventRejection(.unsupportedVersion, "\"v\" is \(reader.excerpt(version)); this Fanout reads version 1 events only: set \"v\": 1")
        }

        guard let idNode = fields[.id] else { throw EventRejection(.missingID, "missing \"id\"; give every event a unique string id (used to drop duplicates)") }
        let id = try reader.boundedString(idNode, maxBytes: 256, reason: .invalidID, field: "id")

        guard let eventNode = fields[.event] else { throw EventRejection(.missingEvent, "missing \"event\"; set it to \"start\", \"update\" or \"end\"") }
        guard let kind = reader.oneOf(eventNode, EventDecoder.eventKinds) else {
            throw EventRejection(.invalidEvent, "\"event\" is \(reader.excerpt(eventNode)); it must be \"start\", \"update\" or \"end\"")
        }

        let target = try readTarget(reader, fields, kind: kind, key: key, lane: lane)
        let app = try readApp(reader, fields)

        guard let timestampNode = fields[.timestamp] else {
            throw EventRejection(.missingTimestamp, "missing \"timestamp\"; set it to the UNIX time in seconds of the state change")
        }
        let timestamp = try reader.seconds(timestampNode, field: "timestamp", invalid: .invalidTimestamp,
                                           milliseconds: .timestampInMilliseconds, latest: latest, now: now)

        guard let stateNode = fields[.contentState] else {
            throw EventRejection(.missingContentState, "missing \"content_state\"; every event carries the full state object for the Live Activity (ContentState)")
        }
        guard reader.kind(stateNode) == .object else {
            throw EventRejection(.invalidContentState, "\"content_state\" is \(reader.kindName(stateNode)); it must be a JSON object matching the app's ContentState")
        }

        var importance: Importance?
        if let node = fields[.importance] {
            guard let value = reader.oneOf(node, EventDecoder.importances) else {
                throw EventRejection(.invalidImportance, "\"importance\" is \(reader.excerpt(node)); it must be \"major\" or \"minor\"")
            }
            importance = value
        }

        if let node = fields[.alert] { try reader.validateAlert(node) }
        if kind == .start, fields[.alert] == nil {
            throw EventRejection(.startWithoutAlert, "a start event needs \"alert\" with \"title\" and \"body\"; iOS shows it when the activity starts")
        }

        var staleDate: Int64?
        if let node = fields[.staleDate] {
            let value = try reader.seconds(node, field: "stale_date", invalid: .invalidDate, milliseconds: .dateInMilliseconds, latest: latest, now: now)
            guard value >= timestamp else {
                throw EventRejection(.invalidDate, "\"stale_date\" \(value) is before \"timestamp\" \(timestamp); the activity would be stale on arrival")
            }
            staleDate = value
        }
        var dismissalDate: Int64?
        if let node = fields[.dismissalDate] {
            let value = try reader.seconds(node, field: "dismissal_date", invalid: .invalidDate, milliseconds: .dateInMilliseconds, latest: latest, now: now)
            guard kind == .end else {
                throw EventRejection(.invalidDate, "\"dismissal_date\" applies only to end events (iOS ignores it on \(kind.rawValue)); remove it or send it with \"event\": \"end\"")
            }
            dismissalDate = value
        }

        var relevanceScore: Double?
        if let node = fields[.relevanceScore] {
            guard reader.kind(node) == .number else {
                throw EventRejection(.invalidRelevanceScore, "\"relevance_score\" is \(reader.kindName(node)); it must be a number (higher ranks first)")
            }
            relevanceScore = reader.double(node)
        }

        var token: PushToken?
        if let node = fields[.token] {
            guard lane == .activity else {
                throw EventRejection(.invalidToken, "broadcast events go to a channel and take no \"token\"; remove it")
            }
            token = try reader.hexToken(node, field: "token")
        }
        if kind == .start, token == nil {
            throw EventRejection(.startWithoutToken, "a start event needs \"token\": the user's push-to-start token (hex)")
        }

        var attributesType: String?
        var attributes: RawJSON?
        if fields[.attributesType] != nil || fields[.attributes] != nil {
            guard kind == .start else {
                throw EventRejection(.invalidAttributes, "\"attributes\" and \"attributes_type\" belong only on start events; remove them from \(kind.rawValue)")
            }
        }
        if let node = fields[.attributesType] {
            attributesType = try reader.boundedString(node, maxBytes: 256, reason: .invalidAttributes, field: "attributes_type")
        }
        if let node = fields[.attributes] {
            guard reader.kind(node) == .object else {
                throw EventRejection(.invalidAttributes, "\"attributes\" is \(reader.kindName(node)); it must be a JSON object matching the app's ActivityAttributes")
            }
            attributes = RawJSON(bytes: reader.raw(node))
        }
        if kind == .start, attributesType == nil || attributes == nil {
            throw EventRejection(.startWithoutAttributes, "a start event needs both \"attributes_type\" (the ActivityAttributes type name) and \"attributes\" (an object)")
        }

        let (inputPushToken, inputPushChannel) = try readInputPush(reader, fields, kind: kind)

        let event = ActivityEvent(
            id: id, app: app, lane: lane, target: target, kind: kind, timestamp: timestamp,
            contentState: RawJSON(bytes: reader.raw(stateNode)), contentFields: reader.contentFields(stateNode),
            importance: importance, alert: fields[.alert].map { RawJSON(bytes: reader.raw($0)) },
            staleDate: staleDate, dismissalDate: dismissalDate, relevanceScore: relevanceScore, token: token,
            attributesType: attributesType, attributes: attributes,
            inputPushToken: inputPushToken, inputPushChannel: inputPushChannel)

        // ActivityKit drops a Live Activity update whose content state is over 4 KB, although a broadcast
        // body may be 5 KB (a device push's body, content state included, is 4 KB at most anyway).
        if event.contentState.bytes.count > LiveActivityPayload.contentStateLimit {
            throw EventRejection(.payloadTooLarge, "content_state is \(event.contentState.bytes.count) bytes; ActivityKit drops a Live Activity's content state over \(LiveActivityPayload.contentStateLimit) bytes (a broadcast body may be 5 KB, its content state may not)")
        }
        let limit = lane == .activity ? LiveActivityPayload.deviceLimit : LiveActivityPayload.broadcastLimit
        let payload = event.livePayload(defaultStaleAfter: policy.defaultStaleAfter)
        if case let .failure(error) = payload.checkSize(limit: limit) {
            throw EventRejection(.payloadTooLarge, error.description)
        }
        return event
    }

    private func readTarget(_ reader: EventReader, _ fields: EventReader.Fields, kind: EventKind, key: String?,
                            lane: Lane) throws(EventRejection) -> String {
        let (own, other): (EventField, EventField) = lane == .activity ? (.activity, .channel) : (.channel, .activity)
        if lane == .broadcast, kind == .start {
            throw EventRejection(.startOnBroadcast, "broadcast channels can update or end Live Activities but not start them; send the start to the activity lane with the user's push-to-start token")
        }
        if fields[other] != nil {
            throw EventRejection(.invalidTarget, "\"\(other.name)\" belongs on the \(lane == .activity ? "broadcast" : "activity") lane; events on the \(lane.rawValue) lane name their target with \"\(own.name)\"")
        }
        guard let node = fields[own] else {
            throw EventRejection(.missingTarget, lane == .activity
                ? "missing \"activity\"; set it to the activity key (the Kafka message key)"
                : "missing \"channel\"; set it to the base64 broadcast channel id (the Kafka message key)")
        }
        let target = try reader.boundedString(node, maxBytes: 1024, reason: .invalidTarget, field: own.name)
        if lane == .broadcast, !EventReader.isBase64(target) {
            throw EventRejection(.invalidChannel, "\"channel\" \(EventReader.quoted(target)) is not a base64 channel id as APNs returns it from channel creation")
        }
        if let key, key != target {
            throw EventRejection(.keyMismatch, "the Kafka key \(EventReader.quoted(key)) differs from \"\(own.name)\" \(EventReader.quoted(target)); produce with key = \(own.name) so one owner handles each target in order")
        }
        return target
    }

    private func readApp(_ reader: EventReader, _ fields: EventReader.Fields) throws(EventRejection) -> String {
        guard let node = fields[.app] else {
            if let onlyApp { return onlyApp }
            throw EventRejection(.missingApp, policy.apps.isEmpty
                ? "missing \"app\"; set it to the app's bundle id"
                : "missing \"app\"; several apps are configured (\(policy.apps.sorted().joined(separator: ", "))), so each event must name its bundle id")
        }
        guard reader.kind(node) == .string else {
            throw EventRejection(.unknownApp, "\"app\" is \(reader.kindName(node)); it must be a bundle id string")
        }
        // A configured name is reused instead of decoded into a new String (as token records do).
        if let known = reader.known(node, in: policy.apps) { return known }
        let app = reader.string(node)
        if policy.apps.isEmpty {
            guard EventReader.isBundleID(app) else {
                throw EventRejection(.unknownApp, "\"app\" \(EventReader.quoted(app)) is not a bundle id (letters, digits, '.', '-')")
            }
        } else if !policy.apps.contains(app) {
            throw EventRejection(.unknownApp, "\"app\" \(EventReader.quoted(app)) is not configured here; configured apps: \(policy.apps.sorted().joined(separator: ", "))")
        }
        return app
    }

    private func readInputPush(_ reader: EventReader, _ fields: EventReader.Fields,
                               kind: EventKind) throws(EventRejection) -> (Bool, String?) {
        var inputPushToken = false
        if let node = fields[.inputPushToken] {
            switch reader.kind(node) {
            case .true: inputPushToken = true
            case .false: inputPushToken = false
            default:
                throw EventRejection(.invalidInputPush, "\"input_push_token\" is \(reader.kindName(node)); it must be true or false")
            }
        }
        var inputPushChannel: String?
        if let node = fields[.inputPushChannel] {
            let channel = try reader.boundedString(node, maxBytes: 1024, reason: .invalidInputPush, field: "input_push_channel")
            guard EventReader.isBase64(channel) else {
                throw EventRejection(.invalidChannel, "\"input_push_channel\" \(EventReader.quoted(channel)) is not a base64 channel id")
            }
            inputPushChannel = channel
        }
        if kind != .start, inputPushToken || inputPushChannel != nil {
            throw EventRejection(.invalidInputPush, "\"input_push_token\" and \"input_push_channel\" apply only to start events")
        }
        if inputPushToken, inputPushChannel != nil {
            throw EventRejection(.invalidInputPush, "set either \"input_push_token\" or \"input_push_channel\", not both: an activity has one push type")
        }
        return (inputPushToken, inputPushChannel)
    }
}
