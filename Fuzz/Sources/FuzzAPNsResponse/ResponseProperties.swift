import APNsModel
@testable import FanoutAPNs
import FuzzSupport

/// What `APNsResponseClassifier` and the response reading promise (README, "APNs outcome" table).
enum ResponseProperties {
    static let tokenGoneReasons: Set<APNsReason> = [.unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic, .channelNotRegistered, .badChannelId]
    static let payloadReasons: Set<APNsReason> = [
        .payloadTooLarge, .payloadEmpty, .badCollapseId, .badExpirationDate, .badMessageId, .badPriority,
        .duplicateHeaders, .missingDeviceToken, .missingChannelId, .badRequestParams, .badRequestPayload,
    ]
    static let providerTokenReasons: Set<APNsReason> = [.expiredProviderToken, .invalidProviderToken, .missingProviderToken]

    static func check(_ result: APNsResult, response: APNsHTTPResponse, gate: ConnectionGate.Completion,
                      retryAfter: [UInt8]?, ids: (apnsID: [UInt8]?, requestID: [UInt8]?)) {
        Property.require(result.status == response.status, "the status is passed through")
        guard let status = response.status else {
            Property.require(result.outcome == .retry(reason: response.transportFailure ?? "no response", status: nil, after: nil),
                             "no HTTP answer is retried: \(result.outcome)")
            return
        }
        let reason = result.reason
        Property.require(reason == response.errorBody().reason || (200..<300).contains(status), "the reason is the error body's")
        let expectedID = (ids.apnsID ?? ids.requestID).map { String(decoding: $0, as: UTF8.self) }
        Property.require(result.apnsID == expectedID, "apns-id (or apns-request-id) is kept: \(String(describing: result.apnsID))")

        if case .response(let authenticated) = gate {
            let rejectsToken = status == 403 && reason.map(providerTokenReasons.contains) == true
            Property.require(authenticated == !rejectsToken, "only a 403 provider-token rejection leaves the connection unauthenticated")
        } else {
            Property.fail("an HTTP answer is a response for the connection gate")
        }

        let known: APNsReason? = reason.flatMap { reason -> APNsReason? in
            if case .unknown = reason { return nil }
            return reason
        }
        switch result.outcome {
        case .delivered:
            Property.require((200..<300).contains(status), "delivered only on 2xx")
        case .tokenGone:
            Property.require(!(200..<300).contains(status) && (status == 410 || known.map(tokenGoneReasons.contains) == true),
                             "a token is gone only on 410 or a token reason, not \(status) \(String(describing: reason))")
        case .badPayload:
            Property.require(status == 413 || known.map(payloadReasons.contains) == true,
                             "dead-lettered as a bad payload only on 413 or a payload reason, never on a guess: \(status) \(String(describing: reason))")
        case .retry(_, let retryStatus, let after):
            Property.require(retryStatus == status, "the retry carries the status")
            if let after { Property.require(after >= .zero, "a retry never waits a negative time: \(after) from retry-after \(String(decoding: retryAfter ?? [], as: UTF8.self))") }
            if known != .expiredProviderToken, let retryAfter, let seconds = delaySeconds(retryAfter) {
                Property.require(after == .seconds(seconds), "a retry-after of \(seconds) s is the retry's delay, got \(String(describing: after))")
            }
        case .refreshAuth:
            Property.require(known == .expiredProviderToken && response.rejectedProviderToken?.newerTokenExists != false,
                             "a resend with a fresh JWT only for ExpiredProviderToken when a newer token exists")
        case .configError:
            Property.require(!(200..<300).contains(status), "a configuration error only on an error status")
        }
        if known == nil, !(200..<300).contains(status) {
            let expected: String
            switch status {
            case 410: expected = "tokenGone"
            case 413: expected = "badPayload"
            case 500...599: expected = "retry"
            case 429 where reason == nil: expected = "retry"
            default: expected = "configError"
            }
            Property.require(kind(result.outcome) == expected,
                             "with no known reason, \(status) is \(expected) (README's table), got \(result.outcome)")
        }
    }

    static func kind(_ outcome: SendOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .tokenGone: "tokenGone"
        case .retry: "retry"
        case .refreshAuth: "refreshAuth"
        case .badPayload: "badPayload"
        case .configError: "configError"
        }
    }

    /// RFC 9110 §10.2.3 `delay-seconds = 1*DIGIT`, when it fits an Int.
    static func delaySeconds(_ value: [UInt8]) -> Int? {
        guard !value.isEmpty, value.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int(String(decoding: value, as: UTF8.self))
    }
}
