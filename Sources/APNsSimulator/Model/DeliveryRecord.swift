/// One push the simulator accepted (answered 200): what a phone, or a channel's subscribers, received.
/// Written as one JSON line per record to the delivery log.
public struct DeliveryRecord: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable { case device, broadcast }

    /// Arrival time, UNIX seconds.
    public var time: Double
    public var kind: Kind
    /// Device token (kind == .device).
    public var token: String?
    /// Channel ID (kind == .broadcast).
    public var channel: String?
    public var bundleID: String
    public var priority: Int
    /// `apns-id` (device) or `apns-request-id` (broadcast), echoed or generated.
    public var apnsID: String
    public var uniqueID: String
    public var topic: String?
    public var pushType: String
    public var expiration: Int64?
    public var collapseID: String?
    /// `aps.event` and `aps.timestamp` (seconds), copied out for quick checks.
    public var event: String
    public var timestamp: Double
    /// The `aps` object exactly as received (JSON text).
    public var aps: String
    /// `kid` of the provider token that authorized the push (which sender it came from when each has its own key).
    public var keyID: String?

    enum CodingKeys: String, CodingKey {
        case time, kind, token, channel, priority, topic, expiration, event, timestamp, aps
        case bundleID = "bundle-id", apnsID = "apns-id", uniqueID = "apns-unique-id"
        case pushType = "push-type", collapseID = "collapse-id", keyID = "key-id"
    }
}

/// What a device (or every subscriber of a channel) would display for one Live Activity, derived from the
/// accepted pushes the way ActivityKit applies them: an update older than the newest applied timestamp is
/// ignored, `end` applies regardless of timestamp (docs/apns.md §4), and anything after `end` is ignored.
public struct DeviceView: Sendable, Equatable, Codable {
    /// Token or channel ID.
    public var target: String
    /// The event last applied: "start", "update" or "end".
    public var event: String
    /// `aps.timestamp` of the push last applied (seconds).
    public var timestamp: Double
    /// `content-state` of the push last applied, as received (JSON text).
    public var contentState: String
    public var ended: Bool
    /// Pushes applied and ignored (older timestamp, or after end).
    public var applied: Int
    public var ignored: Int

    enum CodingKeys: String, CodingKey {
        case target, event, timestamp, ended, applied, ignored
        case contentState = "content-state"
    }
}

/// Live counters: responses per status and reason, plus connection figures.
public struct APNsSimulatorStats: Sendable, Equatable, Codable {
    /// Key: "200", or "<status> <reason>" such as "410 Unregistered".
    public var responses: [String: Int]
    public var requests: Int
    public var accepted: Int
    public var connectionsAccepted: Int
    public var connectionsOpen: Int
    public var connectionsRefused: Int
    public var goAwaysSent: Int
    public var connectionsReset: Int
    /// Connections closed by the handshake timeout, the idle timeout or the end of a GOAWAY grace period.
    public var connectionsTimedOut: Int
    /// accept() failures other than "nothing waiting", such as running out of file descriptors (EMFILE):
    /// each pauses the listeners briefly instead of retrying at once.
    public var acceptFailures: Int
    /// Targets not tracked because `maxTrackedTargets` was reached.
    public var untrackedTargets: Int
    /// Delivery-log lines not yet written / failed to write.
    public var deliveryLogWriteErrors: Int

    public func count(status: Int, reason: APNsRejection? = nil) -> Int {
        responses[reason.map { "\(status) \($0.rawValue)" } ?? "\(status)"] ?? 0
    }
}
