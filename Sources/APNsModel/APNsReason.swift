/// Every reason string APNs documents for `/3/device` and broadcast/channel responses, plus the ones
/// live APNs is known to send instead (`broadcastFeatureNotEnabled`), and `unknown` for anything new.
/// GOAWAY frames carry the same strings.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    // 400
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType
    case missingDeviceToken, missingTopic, payloadEmpty, topicDisallowed
    case featureNotEnabled, missingChannelId, badChannelId, channelNotRegistered
    case badRequestParams, badRequestPayload, missingPushType, cannotCreateChannelConfig
    /// What live APNs answers on broadcast and channel requests for an app without the broadcast
    /// capability, where Apple's table says `FeatureNotEnabled`.
    case broadcastFeatureNotEnabled
    // 403
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden
    case invalidProviderToken, missingProviderToken, unrelatedKeyIdInToken, topicMismatch
    // 404, 405, 410, 413, 429, 500, 503
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests, internalServerError
    case serviceUnavailable, shutdown
    /// A reason string this version of Fanout does not know.
    case unknown(String)

    /// Every known reason (documented by Apple or observed from live APNs), for parsing, tests and documentation.
    public static let documented: [APNsReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType,
        .missingDeviceToken, .missingTopic, .payloadEmpty, .topicDisallowed,
        .featureNotEnabled, .missingChannelId, .badChannelId, .channelNotRegistered,
        .badRequestParams, .badRequestPayload, .missingPushType, .cannotCreateChannelConfig,
        .broadcastFeatureNotEnabled, .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden,
        .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .topicMismatch,
        .badPath, .methodNotAllowed, .expiredToken, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError,
        .serviceUnavailable, .shutdown,
    ]

    private static let byString: [String: APNsReason] = {
        var table: [String: APNsReason] = [:]
        for reason in documented { table[reason.rawValue] = reason }
        // ERRB spells the 503 reason with a space.
        table["Service Unavailable"] = .serviceUnavailable
        return table
    }()

    public init(rawValue: String) {
        self = APNsReason.byString[rawValue] ?? .unknown(rawValue)
    }

    /// The string APNs sends.
    public var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .featureNotEnabled: "FeatureNotEnabled"
        case .missingChannelId: "MissingChannelId"
        case .badChannelId: "BadChannelId"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .badRequestParams: "BadRequestParams"
        case .badRequestPayload: "BadRequestPayload"
        case .missingPushType: "MissingPushType"
        case .cannotCreateChannelConfig: "CannotCreateChannelConfig"
        case .broadcastFeatureNotEnabled: "BroadcastFeatureNotEnabled"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .topicMismatch: "TopicMismatch"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .unknown(let text): text
        }
    }

    public var description: String { rawValue }
}
