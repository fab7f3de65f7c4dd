/// One push to APNs: a Live Activity device-token push or a broadcast to a channel.
///
/// Built only through the validating factories, so a value that exists is well-formed: the token,
/// channel id, priority, apns-id and payload size are checked before anything is sent.
public struct APNsRequest: Sendable, Hashable {
    public enum Target: Sendable, Hashable {
        /// `/3/device/<token>`, the whole path, made once with the request: an activity's push token
        /// or a push-to-start token (hex).
        case device(path: String)
        /// `/4/broadcasts/apps/<bundle>` with `apns-channel-id` (base64).
        case broadcast(channelID: String)
    }

    public let bundleID: String
    public let target: Target
    public let priority: APNsPriority
    /// `apns-expiration`, UNIX seconds (0: deliver once, store nothing). Every push carries one: on a
    /// device push APNs would otherwise store the notification up to 30 days (docs/apns.md §11), on a
    /// broadcast it is required (0 on no-storage channels).
    public let expiration: Int64
    /// Canonical lowercase UUID: `apns-id` on device pushes, `apns-request-id` on broadcasts.
    public let apnsID: String?
    /// The JSON body, already size-checked against the target's limit.
    public let payload: [UInt8]

    /// A Live Activity push to a per-activity or push-to-start token. `expiration` is required: an
    /// update is worth little after the activity's stale date, which is what the worker sends.
    public static func liveActivity(deviceToken: String, bundleID: String, payload: [UInt8],
                                    priority: APNsPriority, expiration: Int64,
                                    apnsID: String? = nil) throws(APNsRequestError) -> APNsRequest {
        guard !deviceToken.isEmpty, deviceToken.utf8.allSatisfy(\.isHexDigit) else {
            throw .badDeviceToken(prefix: String(deviceToken.prefix(8)))
        }
        return try device(path: "/3/device/" + deviceToken, bundleID: bundleID, payload: payload, priority: priority,
                          expiration: expiration, apnsID: apnsID)
    }

    /// A Live Activity push to a token held as bytes (what the worker's engine holds): the same checks,
    /// except that the hex needs none, and the path is written from the bytes in one string.
    public static func liveActivity(token: PushToken, bundleID: String, payload: [UInt8],
                                    priority: APNsPriority, expiration: Int64,
                                    apnsID: String? = nil) throws(APNsRequestError) -> APNsRequest {
        guard token.byteCount > 0 else { throw .badDeviceToken(prefix: "") }
        return try device(path: token.hexPath(prefix: devicePathPrefix), bundleID: bundleID, payload: payload,
                          priority: priority, expiration: expiration, apnsID: apnsID)
    }

    private static let devicePathPrefix = Array("/3/device/".utf8)

    /// What both device forms check once the token is known good: the priority, then the rest.
    private static func device(path: String, bundleID: String, payload: [UInt8], priority: APNsPriority,
                               expiration: Int64, apnsID: String?) throws(APNsRequestError) -> APNsRequest {
        guard priority != .low else { throw .priorityNotAllowed(priority.rawValue) }
        return try APNsRequest(bundleID: bundleID, target: .device(path: path), priority: priority,
                               expiration: expiration, apnsID: apnsID, payload: payload, limit: APNsRequest.deviceLimit)
    }

    /// A broadcast to a channel (iOS 18). `expiration` is required by APNs; use 0 on no-storage channels.
    public static func broadcast(channelID: String, bundleID: String, payload: [UInt8],
                                 priority: APNsPriority, expiration: Int64,
                                 requestID: String? = nil) throws(APNsRequestError) -> APNsRequest {
        guard Base64URL.isStandardBase64(channelID) else { throw .badChannelID(channelID) }
        return try APNsRequest(bundleID: bundleID, target: .broadcast(channelID: channelID), priority: priority,
                               expiration: expiration, apnsID: requestID, payload: payload,
                               limit: APNsRequest.broadcastLimit)
    }

    /// `/3/device` body limit (docs/apns.md §3).
    public static let deviceLimit = 4096
    /// Broadcast body limit (docs/apns.md §6).
    public static let broadcastLimit = 5120

    private init(bundleID: String, target: Target, priority: APNsPriority, expiration: Int64,
                 apnsID: String?, payload: [UInt8], limit: Int) throws(APNsRequestError) {
        guard APNsRequest.isValidBundleID(bundleID) else { throw .badBundleID(bundleID) }
        guard !payload.isEmpty else { throw .emptyPayload }
        guard payload.count <= limit else { throw .payloadTooLarge(size: payload.count, limit: limit) }
        guard expiration >= 0 else { throw .badExpiration(expiration) }
        if let apnsID, !APNsRequest.isCanonicalUUID(apnsID) { throw .badAPNsID(apnsID) }
        self.bundleID = bundleID
        self.target = target
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID
        self.payload = payload
    }

    /// A bundle id: letters, digits, '-', '.'; no push-type suffix (that is added for the topic).
    ///
    /// Checked on every push, so on the bytes: ASCII only, hence `hasSuffix` needs no Unicode comparison.
    static func isValidBundleID(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            !bytes.isEmpty && bytes.count <= 155
                && bytes.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
                && !(bytes.count >= pushTypeSuffix.count && bytes[(bytes.count - pushTypeSuffix.count)...].elementsEqual(pushTypeSuffix))
        }
    }

    private static let pushTypeSuffix = Array(".push-type.liveactivity".utf8)

    /// 8-4-4-4-12 lowercase hex, as APNs wants `apns-id`.
    public static func isCanonicalUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else if !(byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) && !(byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")) {
                return false
            }
        }
        return true
    }
}

/// `apns-priority`.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable {
    /// Delivered immediately; counts against the Live Activity budget.
    case immediate = 10
    /// Not counted against the budget; may be delayed or grouped.
    case conserve = 5
    /// Broadcast only.
    case low = 1
}

/// Why an `APNsRequest` could not be built. Nothing was sent.
public enum APNsRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    case badDeviceToken(prefix: String)
    case badChannelID(String)
    case badBundleID(String)
    case badAPNsID(String)
    case badExpiration(Int64)
    case priorityNotAllowed(Int)
    case emptyPayload
    case payloadTooLarge(size: Int, limit: Int)
    /// Broadcasts can update or end activities, not start them (docs/apns.md §6).
    case startOverBroadcast

    public var description: String {
        switch self {
        case .badDeviceToken(let prefix): "device token '\(prefix)…' is empty or not hex"
        case .badChannelID(let id): "channel id '\(id)' is not base64"
        case .badBundleID(let id): "bundle id '\(id)' is not a bundle id (letters, digits, '-', '.', no .push-type suffix)"
        case .badAPNsID(let id): "apns-id '\(id)' is not a lowercase 8-4-4-4-12 UUID"
        case .badExpiration(let value): "apns-expiration \(value) is negative"
        case .priorityNotAllowed(let value): "apns-priority \(value) is not allowed on device pushes (use 5 or 10)"
        case .emptyPayload: "payload is empty"
        case .payloadTooLarge(let size, let limit): "payload is \(size) bytes, over the APNs limit of \(limit)"
        case .startOverBroadcast: "a broadcast cannot start a Live Activity (use update or end)"
        }
    }
}

extension UInt8 {
    var isHexDigit: Bool {
        (self >= 0x30 && self <= 0x39) || (self >= 0x41 && self <= 0x46) || (self >= 0x61 && self <= 0x66)
    }
    var isASCIIAlphanumeric: Bool {
        (self >= 0x30 && self <= 0x39) || (self >= 0x41 && self <= 0x5A) || (self >= 0x61 && self <= 0x7A)
    }
}

/// Validation shared by push and channel-management requests.
public enum APNsRequestValidation {
    public static func isBundleID(_ text: String) -> Bool { APNsRequest.isValidBundleID(text) }
}
