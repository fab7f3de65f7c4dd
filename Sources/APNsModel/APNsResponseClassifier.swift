/// The one place that decides what an APNs response (or a transport failure) means for Fanout.
///
/// Pure: status, reason and timing in, `SendOutcome` out. Every part of Fanout acts on this result.
public enum APNsResponseClassifier {
    /// Classifies an HTTP response. `reason` is the parsed body reason (nil when the body had none),
    /// `timestampMillis` the 410 body's `timestamp`, `retryAfter` a `retry-after` header if sent.
    public static func classify(status: Int, reason: APNsReason?, timestampMillis: Int64? = nil,
                                retryAfter: Duration? = nil) -> SendOutcome {
        if (200..<300).contains(status) { return .delivered }
        if let reason, let outcome = classify(reason: reason, status: status, timestampMillis: timestampMillis, retryAfter: retryAfter) {
            return outcome
        }
        let text = reason?.rawValue ?? "HTTP \(status)"
        switch status {
        case 410: return .tokenGone(reason: text, status: status, apnsTimestampMillis: timestampMillis)
        case 413: return .badPayload(reason: text, status: status)
        case 429, 500...599: return .retry(reason: text, status: status, after: retryAfter)
        case 400: return .badPayload(reason: text, status: status)
        default: return .configError(reason: text, status: status)
        }
    }

    /// A failure below HTTP (connect, TLS, reset, GOAWAY, timeout): always worth retrying elsewhere.
    public static func classifyTransportFailure(_ description: String) -> SendOutcome {
        .retry(reason: description, status: nil, after: nil)
    }

    /// The class of a known reason, independent of status; nil for `.unknown` (status decides).
    public static func classify(reason: APNsReason, status: Int, timestampMillis: Int64? = nil,
                                retryAfter: Duration? = nil) -> SendOutcome? {
        let text = reason.rawValue
        switch reason {
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic, .channelNotRegistered:
            return .tokenGone(reason: text, status: status, apnsTimestampMillis: timestampMillis)
        case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable,
             .shutdown, .idleTimeout:
            return .retry(reason: text, status: status, after: retryAfter)
        case .expiredProviderToken:
            return .refreshAuth
        case .payloadTooLarge, .payloadEmpty, .badCollapseId, .badExpirationDate, .badMessageId,
             .badPriority, .duplicateHeaders, .missingDeviceToken, .missingChannelId, .badChannelId,
             .badRequestParams, .badRequestPayload:
            return .badPayload(reason: text, status: status)
        case .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badTopic,
             .topicDisallowed, .missingTopic, .topicMismatch, .badCertificate, .badCertificateEnvironment,
             .forbidden, .featureNotEnabled, .invalidPushType, .missingPushType, .badPath,
             .methodNotAllowed, .cannotCreateChannelConfig:
            return .configError(reason: text, status: status)
        case .unknown:
            return nil
        }
    }
}
