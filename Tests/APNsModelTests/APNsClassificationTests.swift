import Testing
import APNsModel

/// Pins every documented reason to its class, so a change in classification is a visible test change.
@Suite struct APNsClassificationTests {
    enum Class: String { case tokenGone, retry, refreshAuth, badPayload, configError }

    static let expected: [(String, Int, Class)] = [
        // /3/device (APNS.md §5)
        ("BadCollapseId", 400, .badPayload), ("BadDeviceToken", 400, .tokenGone),
        ("BadExpirationDate", 400, .badPayload), ("BadMessageId", 400, .badPayload),
        ("BadPriority", 400, .badPayload), ("BadTopic", 400, .configError),
        ("DeviceTokenNotForTopic", 400, .tokenGone), ("DuplicateHeaders", 400, .badPayload),
        ("IdleTimeout", 400, .retry), ("InvalidPushType", 400, .configError),
        ("MissingDeviceToken", 400, .badPayload), ("MissingTopic", 400, .configError),
        ("PayloadEmpty", 400, .badPayload), ("TopicDisallowed", 400, .configError),
        ("BadCertificate", 403, .configError), ("BadCertificateEnvironment", 403, .configError),
        ("ExpiredProviderToken", 403, .refreshAuth), ("Forbidden", 403, .configError),
        ("InvalidProviderToken", 403, .configError), ("MissingProviderToken", 403, .configError),
        ("UnrelatedKeyIdInToken", 403, .configError), ("BadPath", 404, .configError),
        ("MethodNotAllowed", 405, .configError), ("ExpiredToken", 410, .tokenGone),
        ("Unregistered", 410, .tokenGone), ("PayloadTooLarge", 413, .badPayload),
        ("TooManyProviderTokenUpdates", 429, .retry), ("TooManyRequests", 429, .retry),
        ("InternalServerError", 500, .retry), ("ServiceUnavailable", 503, .retry), ("Shutdown", 503, .retry),
        // broadcast / channel (APNS.md §6)
        ("FeatureNotEnabled", 400, .configError), ("MissingChannelId", 400, .badPayload),
        ("BadChannelId", 400, .badPayload), ("ChannelNotRegistered", 400, .tokenGone),
        ("BadRequestParams", 400, .badPayload), ("BadRequestPayload", 400, .badPayload),
        ("MissingPushType", 400, .configError), ("CannotCreateChannelConfig", 400, .configError),
        ("TopicMismatch", 403, .configError), ("Service Unavailable", 503, .retry),
    ]

    static func classOf(_ outcome: SendOutcome) -> Class? {
        switch outcome {
        case .delivered: nil
        case .tokenGone: .tokenGone
        case .retry: .retry
        case .refreshAuth: .refreshAuth
        case .badPayload: .badPayload
        case .configError: .configError
        }
    }

    @Test(arguments: expected.map { "\($0.0)|\($0.1)|\($0.2.rawValue)" })
    func reasonMapsToItsClass(_ row: String) {
        let parts = row.split(separator: "|").map(String.init)
        let reason = APNsReason(rawValue: parts[0])
        #expect(reason != .unknown(parts[0]), "\(parts[0]) should be a documented reason")
        let outcome = APNsResponseClassifier.classify(status: Int(parts[1])!, reason: reason)
        #expect(Self.classOf(outcome)?.rawValue == parts[2])
    }

    @Test func everyDocumentedReasonIsPinned() {
        let pinned = Set(Self.expected.map { APNsReason(rawValue: $0.0) })
        for reason in APNsReason.documented {
            #expect(pinned.contains(reason), "\(reason) has no pinned class")
            #expect(APNsReason(rawValue: reason.rawValue) == reason)
        }
    }

    @Test func successAndDetails() {
        #expect(APNsResponseClassifier.classify(status: 200, reason: nil) == .delivered)
        #expect(APNsResponseClassifier.classify(status: 201, reason: nil) == .delivered)
        #expect(APNsResponseClassifier.classify(status: 410, reason: .unregistered, timestampMillis: 1_700_000_000_000)
                == .tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: 1_700_000_000_000))
        #expect(APNsResponseClassifier.classify(status: 429, reason: .tooManyRequests, retryAfter: .seconds(3))
                == .retry(reason: "TooManyRequests", status: 429, after: .seconds(3)))
    }

    @Test func unknownReasonsFallBackOnStatus() {
        let odd = APNsReason(rawValue: "SomethingNew")
        #expect(odd == .unknown("SomethingNew"))
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 503, reason: odd)) == .retry)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 500, reason: nil)) == .retry)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 429, reason: odd)) == .retry)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 410, reason: odd)) == .tokenGone)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 413, reason: nil)) == .badPayload)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 400, reason: odd)) == .badPayload)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 403, reason: odd)) == .configError)
        #expect(Self.classOf(APNsResponseClassifier.classify(status: 404, reason: nil)) == .configError)
        #expect(Self.classOf(APNsResponseClassifier.classifyTransportFailure("connection reset")) == .retry)
    }

    @Test func responseParsingKeepsStatusIDsAndTimestamp() {
        let response = APNsHTTPResponse(status: 410, apnsID: "0a1b2c3d-0000-0000-0000-000000000001",
                                        apnsUniqueID: "u-1",
                                        body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8))
        let result = response.result()
        #expect(result.status == 410)
        #expect(result.reason == .unregistered)
        #expect(result.apnsID == "0a1b2c3d-0000-0000-0000-000000000001")
        #expect(result.apnsUniqueID == "u-1")
        #expect(result.timestampMillis == 1_700_000_000_123)
        #expect(result.outcome == .tokenGone(reason: "Unregistered", status: 410, apnsTimestampMillis: 1_700_000_000_123))

        let garbage = APNsHTTPResponse(status: 500, body: Array("<html>".utf8)).result()
        #expect(garbage.reason == nil)
        #expect(Self.classOf(garbage.outcome) == .retry)

        let transport = APNsHTTPResponse(status: nil, transportFailure: "GOAWAY").result()
        #expect(transport.status == nil)
        #expect(transport.outcome == .retry(reason: "GOAWAY", status: nil, after: nil))
        #expect(transport.transportFailure == "GOAWAY")
        #expect(result.transportFailure == nil)

        // A response whose body was cut short keeps its status, its class and the note saying so.
        let cut = APNsHTTPResponse(status: 500, body: Array("<html>".utf8), transportFailure: "body over 1 MiB, cut short").result()
        #expect(cut.status == 500)
        #expect(Self.classOf(cut.outcome) == .retry)
        #expect(cut.transportFailure == "body over 1 MiB, cut short")
    }
}
