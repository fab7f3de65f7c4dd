/// Every reason string the simulator answers with, with its HTTP status. The raw values are Apple's
/// strings (see docs/apns.md §5 and §6) so clients classify simulator answers exactly like Apple's.
public enum APNsRejection: String, Sendable, CaseIterable, Codable {
    // 400
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    /// Apple's table for an app without the broadcast capability; the simulator answers what live
    /// APNs sends instead, `broadcastFeatureNotEnabled` (README, "Load testing and benchmarks").
    case featureNotEnabled = "FeatureNotEnabled"
    case broadcastFeatureNotEnabled = "BroadcastFeatureNotEnabled"
    case missingChannelId = "MissingChannelId"
    case badChannelId = "BadChannelId"
    case channelNotRegistered = "ChannelNotRegistered"
    case badRequestParams = "BadRequestParams"
    /// Unparseable body, or (simulator strictness) a Live Activity payload the device would drop;
    /// the body's `detail` says which rule failed.
    case badRequestPayload = "BadRequestPayload"
    case missingPushType = "MissingPushType"
    case cannotCreateChannelConfig = "CannotCreateChannelConfig"
    // 403
    case expiredProviderToken = "ExpiredProviderToken"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
    case topicMismatch = "TopicMismatch"
    // 404, 405
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    // 410
    case unregistered = "Unregistered"
    // 413
    case payloadTooLarge = "PayloadTooLarge"
    // 429
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    // 500, 503
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"

    public var status: Int {
        switch self {
        case .expiredProviderToken, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .topicMismatch: 403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        default: 400
        }
    }

    /// Dense index for allocation-free counters.
    var index: Int { Self.indexByReason[self]! }
    private static let indexByReason: [APNsRejection: Int] = Dictionary(
        uniqueKeysWithValues: allCases.enumerated().map { ($1, $0) })
}

/// A request the rules refused: the reason, plus what exactly was wrong (for humans; sent as `detail`).
struct Refusal: Error, Equatable {
    var reason: APNsRejection
    var detail: String?
    /// 410 only: when the token became invalid, in milliseconds since the epoch.
    var timestampMillis: Int64? = nil

    init(_ reason: APNsRejection, _ detail: String? = nil, timestampMillis: Int64? = nil) {
        self.reason = reason
        self.detail = detail
        self.timestampMillis = timestampMillis
    }
}
