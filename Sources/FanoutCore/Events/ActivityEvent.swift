/// Which APNs path an event travels: per-activity token sends or broadcast-channel sends.
public enum Lane: String, Sendable, Hashable, CaseIterable {
    /// `activity-updates`: `/3/device/<token>`, keyed by activity key.
    case activity
    /// `broadcast-updates`: `/4/broadcasts/apps/<bundle>`, keyed by channel id.
    case broadcast
}

public enum EventKind: String, Sendable, Hashable, CaseIterable {
    case start, update, end
}

public enum Importance: String, Sendable, Hashable {
    case major, minor
}

/// A JSON value kept exactly as the producer wrote it (already checked to be valid JSON),
/// so it can be spliced into the APNs payload byte for byte.
public struct RawJSON: Sendable, Hashable {
    public var bytes: [UInt8]
    public init(bytes: [UInt8]) { self.bytes = bytes }
}

/// One top-level field of `content_state`, reduced to what coalescing needs:
/// a digest of its raw bytes (to tell whether it changed) and its numeric value, if it is a number
/// (to measure progress).
public struct ContentField: Sendable, Hashable {
    public var name: String
    public var digest: UInt64
    public var number: Double?
    public init(name: String, digest: UInt64, number: Double?) {
        self.name = name
        self.digest = digest
        self.number = number
    }
}

/// A decoded, validated v1 event (DESIGN.md §2). Everything the engine and payload builder need;
/// nothing here has to be parsed again.
public struct ActivityEvent: Sendable, Hashable {
    public var id: String
    /// Bundle id. `EventDecoder` always sets it: when the producer left it out (allowed only when
    /// exactly one app is configured) it fills in that app. `nil` only for events built by hand.
    public var app: String?
    public var lane: Lane
    /// Activity key (activity lane) or base64 channel id (broadcast lane).
    public var target: String
    public var kind: EventKind
    /// UNIX seconds of the state change; becomes `aps.timestamp`.
    public var timestamp: Int64
    public var contentState: RawJSON
    public var contentFields: [ContentField]
    public var importance: Importance?
    public var alert: RawJSON?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var relevanceScore: Double?
    /// Inline push token (hex): required on start (push-to-start token), optional otherwise.
    public var token: String?
    public var attributesType: String?
    public var attributes: RawJSON?
    /// Start only: ask iOS 18 for an update token (`input-push-token: 1`).
    public var inputPushToken: Bool
    /// Start only: subscribe the new activity to a broadcast channel (`input-push-channel`).
    public var inputPushChannel: String?

    public init(id: String, app: String?, lane: Lane, target: String, kind: EventKind, timestamp: Int64,
                contentState: RawJSON, contentFields: [ContentField] = [], importance: Importance? = nil,
                alert: RawJSON? = nil, staleDate: Int64? = nil, dismissalDate: Int64? = nil,
                relevanceScore: Double? = nil, token: String? = nil, attributesType: String? = nil,
                attributes: RawJSON? = nil, inputPushToken: Bool = false, inputPushChannel: String? = nil) {
        self.id = id
        self.app = app
        self.lane = lane
        self.target = target
        self.kind = kind
        self.timestamp = timestamp
        self.contentState = contentState
        self.contentFields = contentFields
        self.importance = importance
        self.alert = alert
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.token = token
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
    }
}
