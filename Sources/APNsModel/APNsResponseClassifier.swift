/// The one place that decides what an APNs response (or a transport failure) means for Fanout.
///
/// Pure: status, reason and timing in, `SendOutcome` out. Every part of Fanout acts on this result.
/// A reason this version does not know, or a 4xx without any reason, never means "this payload is
/// bad": dead-lettering on a guess would commit a whole stream's offsets (live APNs answers
/// `BroadcastFeatureNotEnabled`, which Apple's table does not list). Such answers are configuration
/// errors (the app halts, its offsets stay, Fanout probes), except where the status alone is clear:
/// 410 is a gone token, 413 a payload too large, 5xx (and a 429 without a reason) worth a retry.
public enum APNsResponseClassifier {
    /// Classifies an HTTP response. `reason` is the parsed body reason (nil when the body had none),
    /// `timestampMillis` the 410 body's `timestamp`, `retryAfter` a `retry-after` header if sent, and
    /// `rejectedProviderToken` what the client knew about the token of a 403 ExpiredProviderToken.
    public static func classify(status: Int, reason: APNsReason?, timestampMillis: Int64? = nil,
                                retryAfter: Duration? = nil, rejectedProviderToken: RejectedProviderToken? = nil) -> SendOutcome {
        if (200..<300).contains(status) { return .delivered }
        if let reason, let outcome = classify(reason: reason, status: status, timestampMillis: timestampMillis,
                                              retryAfter: retryAfter, rejectedProviderToken: rejectedProviderToken) {
            return outcome
        }
        let text = reason?.rawValue ?? "HTTP \(status) without a reason"
        switch status {
        case 410: return .tokenGone(reason: text, status: status, apnsTimestampMillis: timestampMillis)
        case 413: return .badPayload(reason: text, status: status)
        case 500...599: return .retry(reason: text, status: status, after: retryAfter)
        case 429 where reason == nil: return .retry(reason: text, status: status, after: retryAfter)
        default: return .configError(reason: text, status: status)
        }
    }

    /// A failure below HTTP (connect, TLS, reset, GOAWAY, timeout): always worth retrying elsewhere.
    public static func classifyTransportFailure(_ description: String) -> SendOutcome {
        .retry(reason: description, status: nil, after: nil)
    }

    /// The class of a known reason, independent of status; nil for `.unknown` (status decides).
    public static func classify(reason: APNsReason, status: Int, timestampMillis: Int64? = nil,
                                retryAfter: Duration? = nil, rejectedProviderToken: RejectedProviderToken? = nil) -> SendOutcome? {
        let text = reason.rawValue
        switch reason {
        // BadChannelId: live APNs answers a broadcast to a well-formed id that was never created so (a
        // deleted one: ChannelNotRegistered), and Fanout sends only ids its decoder checked as base64.
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic, .channelNotRegistered, .badChannelId:
            return .tokenGone(reason: text, status: status, apnsTimestampMillis: timestampMillis)
        case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable,
             .shutdown, .idleTimeout:
            return .retry(reason: text, status: status, after: retryAfter)
        case .expiredProviderToken:
            // See RejectedProviderToken: a newer token exists (resend with it), the current one
            // expired in the last seconds of its window (retry once the next one takes over), or
            // this machine's clock is wrong.
            guard let rejected = rejectedProviderToken, !rejected.newerTokenExists else { return .refreshAuth }
            if rejected.showsWrongClock { return .configError(reason: rejected.wrongClockDescription, status: status) }
            return .retry(reason: text, status: status, after: .seconds(rejected.secondsUntilNextToken))
        case .payloadTooLarge, .payloadEmpty, .badCollapseId, .badExpirationDate, .badMessageId,
             .badPriority, .duplicateHeaders, .missingDeviceToken, .missingChannelId,
             .badRequestParams, .badRequestPayload:
            return .badPayload(reason: text, status: status)
        case .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badTopic,
             .topicDisallowed, .missingTopic, .topicMismatch, .badCertificate, .badCertificateEnvironment,
             .forbidden, .featureNotEnabled, .broadcastFeatureNotEnabled, .invalidPushType, .missingPushType,
             .badPath, .methodNotAllowed, .cannotCreateChannelConfig:
            return .configError(reason: text, status: status)
        case .unknown:
            return nil
        }
    }
}
