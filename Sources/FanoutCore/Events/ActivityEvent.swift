import APNsModel

/// Which APNs path an event travels: per-activity token sends or broadcast-channel sends.
public enum Lane: String, Sendable, Hashable, CaseIterable {
    /// `activity-updates`: `/3/device/<token>`, keyed by activity key.
    case activity
    /// `broadcast-updates`: `/4/broadcasts/apps/<bundle>`, keyed by channel id.
    case broadcast

    /// Index of per-lane arrays in the engine.
    var slot: Int { self == .activity ? 0 : 1 }
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

/// A decoded, validated v1 event (docs/design.md §2). Everything the engine and payload builder need;
/// nothing here has to be parsed again.
///
/// A value type whose fields live in one immutable heap box, so copying an event (into the pending
/// state, the in-flight send and the `SendRequest`) costs one reference count, not one per string and
/// array field, and moves 8 bytes instead of ~220. Setting a field builds a new box (events are built
/// once by `EventDecoder` and almost never changed afterwards).
public struct ActivityEvent: Sendable, Hashable {
    /// The stored fields. Immutable, hence `Sendable` without exceptions.
    final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    struct Fields: Sendable, Hashable {
        var id: String
        var app: String?
        var lane: Lane
        var target: String
        var kind: EventKind
        var timestamp: Int64
        var contentState: RawJSON
        var contentFields: [ContentField]
        var importance: Importance?
        var alert: RawJSON?
        var staleDate: Int64?
        var dismissalDate: Int64?
        var relevanceScore: Double?
        var token: PushToken?
        var attributesType: String?
        var attributes: RawJSON?
        var inputPushToken: Bool
        var inputPushChannel: String?
    }

    private(set) var storage: Storage

    /// The fields, read in place (no copy, no reference counting of the fields).
    var fields: Fields {
        _read { yield storage.fields }
    }

    /// Replaces several fields with one new box.
    mutating func update(_ change: (inout Fields) -> Void) {
        var fields = storage.fields
        change(&fields)
        storage = Storage(fields)
    }

    public var id: String {
        _read { yield storage.fields.id }
        set { update { $0.id = newValue } }
    }
    /// Bundle id. `EventDecoder` always sets it: when the producer left it out (allowed only when
    /// exactly one app is configured) it fills in that app. `nil` only for events built by hand.
    public var app: String? {
        _read { yield storage.fields.app }
        set { update { $0.app = newValue } }
    }
    public var lane: Lane {
        _read { yield storage.fields.lane }
        set { update { $0.lane = newValue } }
    }
    /// Activity key (activity lane) or base64 channel id (broadcast lane).
    public var target: String {
        _read { yield storage.fields.target }
        set { update { $0.target = newValue } }
    }
    public var kind: EventKind {
        _read { yield storage.fields.kind }
        set { update { $0.kind = newValue } }
    }
    /// UNIX seconds of the state change; becomes `aps.timestamp`.
    public var timestamp: Int64 {
        _read { yield storage.fields.timestamp }
        set { update { $0.timestamp = newValue } }
    }
    public var contentState: RawJSON {
        _read { yield storage.fields.contentState }
        set { update { $0.contentState = newValue } }
    }
    public var contentFields: [ContentField] {
        _read { yield storage.fields.contentFields }
        set { update { $0.contentFields = newValue } }
    }
    public var importance: Importance? {
        _read { yield storage.fields.importance }
        set { update { $0.importance = newValue } }
    }
    public var alert: RawJSON? {
        _read { yield storage.fields.alert }
        set { update { $0.alert = newValue } }
    }
    public var staleDate: Int64? {
        _read { yield storage.fields.staleDate }
        set { update { $0.staleDate = newValue } }
    }
    public var dismissalDate: Int64? {
        _read { yield storage.fields.dismissalDate }
        set { update { $0.dismissalDate = newValue } }
    }
    public var relevanceScore: Double? {
        _read { yield storage.fields.relevanceScore }
        set { update { $0.relevanceScore = newValue } }
    }
    /// Inline push token (decoded from the event's hex): required on start (push-to-start token), optional otherwise.
    public var token: PushToken? {
        _read { yield storage.fields.token }
        set { update { $0.token = newValue } }
    }
    public var attributesType: String? {
        _read { yield storage.fields.attributesType }
        set { update { $0.attributesType = newValue } }
    }
    public var attributes: RawJSON? {
        _read { yield storage.fields.attributes }
        set { update { $0.attributes = newValue } }
    }
    /// Start only: ask iOS 18 for an update token (`input-push-token: 1`).
    public var inputPushToken: Bool {
        _read { yield storage.fields.inputPushToken }
        set { update { $0.inputPushToken = newValue } }
    }
    /// Start only: subscribe the new activity to a broadcast channel (`input-push-channel`).
    public var inputPushChannel: String? {
        _read { yield storage.fields.inputPushChannel }
        set { update { $0.inputPushChannel = newValue } }
    }

    public init(id: String, app: String?, lane: Lane, target: String, kind: EventKind, timestamp: Int64,
                contentState: RawJSON, contentFields: [ContentField] = [], importance: Importance? = nil,
                alert: RawJSON? = nil, staleDate: Int64? = nil, dismissalDate: Int64? = nil,
                relevanceScore: Double? = nil, token: PushToken? = nil, attributesType: String? = nil,
                attributes: RawJSON? = nil, inputPushToken: Bool = false, inputPushChannel: String? = nil) {
        storage = Storage(Fields(
            id: id,
            app: app,
            lane: lane,
            target: target,
            kind: kind,
            timestamp: timestamp,
            contentState: contentState,
            contentFields: contentFields,
            importance: importance,
            alert: alert,
            staleDate: staleDate,
            dismissalDate: dismissalDate,
            relevanceScore: relevanceScore,
            token: token,
            attributesType: attributesType,
            attributes: attributes,
            inputPushToken: inputPushToken,
            inputPushChannel: inputPushChannel))
    }

    public static func == (lhs: ActivityEvent, rhs: ActivityEvent) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    public func hash(into hasher: inout Hasher) { storage.fields.hash(into: &hasher) }
}
