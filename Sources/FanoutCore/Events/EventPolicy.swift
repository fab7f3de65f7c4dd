/// What `EventDecoder` accepts. A plain value: build it once from configuration and share it.
public struct EventPolicy: Sendable, Hashable {
    /// Bundle ids this deployment sends for. When exactly one is configured, events may omit `app`
    /// (the decoder fills it in). When empty, any well-formed bundle id is accepted and `app` is required.
    public var apps: Set<String>
    /// Larger events are rejected with `event-too-large` before they are parsed.
    public var maxEventBytes: Int
    /// `timestamp`, `stale_date` and `dismissal_date` may be at most this far after `now`
    /// (8 h: the longest a Live Activity lives; the device drops later timestamps).
    public var maxFutureSeconds: Int64
    /// The stale date the engine adds when an event has none (docs/design.md §3). The decoder sizes the
    /// final APNs payload with it, so an event that passes validation also fits once sent.
    public var defaultStaleAfter: Int64
    /// Deepest nesting of objects and arrays accepted (the event object itself is level 1).
    public var maxDepth: Int

    public static let defaultMaxEventBytes = 65_536
    public static let defaultMaxFutureSeconds: Int64 = 8 * 3600
    public static let defaultStaleAfterSeconds: Int64 = 15 * 60

    public init(apps: Set<String> = [], maxEventBytes: Int = EventPolicy.defaultMaxEventBytes,
                maxFutureSeconds: Int64 = EventPolicy.defaultMaxFutureSeconds,
                defaultStaleAfter: Int64 = EventPolicy.defaultStaleAfterSeconds, maxDepth: Int = 32) {
        self.apps = apps
        self.maxEventBytes = maxEventBytes
        self.maxFutureSeconds = maxFutureSeconds
        self.defaultStaleAfter = defaultStaleAfter
        self.maxDepth = maxDepth
    }
}

/// Why an event (or token record) was refused: a stable code for the `fanout-error` header and
/// a sentence for a person saying what was wrong and what to do.
public struct EventRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: RejectionReason
    public var detail: String

    public init(_ reason: RejectionReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(reason.rawValue): \(detail)" }
}
