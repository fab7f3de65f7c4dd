import Testing
import APNsModel

/// Pins every documented reason to its class, so a change in classification is a visible test change.
@Suite struct APNsClassificationTests {
    enum Class: String { case tokenGone, retry, refreshAuth, badPayload, configError }

    static let expected: [(String, Int, Class)] = [
        // /3/device (docs/apns.md §5)
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
        // broadcast / channel (docs/apns.md §6)
        ("FeatureNotEnabled", 400, .configError), ("MissingChannelId", 400, .badPayload),
        ("BadChannelId", 400, .tokenGone), ("ChannelNotRegistered", 400, .tokenGone),  // a never-created id, as live APNs answers
        ("BadRequestParams", 400, .badPayload), ("BadRequestPayload", 400, .badPayload),
        ("MissingPushType", 400, .configError), ("CannotCreateChannelConfig", 400, .configError),
        ("TopicMismatch", 403, .configError), ("Service Unavailable", 503, .retry),
        // observed from live APNs where Apple's table says FeatureNotEnabled (docs/apns.md §6)
        ("BroadcastFeatureNotEnabled", 400, .configError),
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
        #expect(APNsResponseClassifier.classifyTransportFailure("connection reset") == .retry(reason: "connection reset", status: nil, after: nil))
    }

    /// A reason Fanout does not know, or none at all, never dead-letters: on a 4xx it halts the app as a
    /// configuration error carrying what APNs said; only 410 (token gone), 413 (too large) and 5xx
    /// (server trouble) are clear from the status alone.
    static let unknownReasonCases: [(Int, String?, Class, String)] = [
        (400, "SomethingNew", .configError, "SomethingNew"), (403, "SomethingNew", .configError, "SomethingNew"),
        (404, "SomethingNew", .configError, "SomethingNew"), (405, "SomethingNew", .configError, "SomethingNew"),
        (429, "SomethingNew", .configError, "SomethingNew"), (401, "SomethingNew", .configError, "SomethingNew"),
        (400, nil, .configError, "HTTP 400 without a reason"), (403, nil, .configError, "HTTP 403 without a reason"),
        (404, nil, .configError, "HTTP 404 without a reason"),
        (410, "SomethingNew", .tokenGone, "SomethingNew"), (410, nil, .tokenGone, "HTTP 410 without a reason"),
        (413, "SomethingNew", .badPayload, "SomethingNew"), (413, nil, .badPayload, "HTTP 413 without a reason"),
        (429, nil, .retry, "HTTP 429 without a reason"),
        (500, "SomethingNew", .retry, "SomethingNew"), (503, "SomethingNew", .retry, "SomethingNew"),
        (502, nil, .retry, "HTTP 502 without a reason"),
    ]

    @Test(arguments: unknownReasonCases.map { "\($0.0)|\($0.1 ?? "")|\($0.2.rawValue)|\($0.3)" })
    func unknownOrMissingReasonIsClassifiedByStatus(_ row: String) {
        let parts = row.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
        let reason = parts[1].isEmpty ? nil : APNsReason(rawValue: parts[1])
        if let reason { #expect(reason == .unknown(parts[1])) }
        let outcome = APNsResponseClassifier.classify(status: Int(parts[0])!, reason: reason)
        #expect(Self.classOf(outcome)?.rawValue == parts[2], "\(parts[0]) \(parts[1]): \(outcome)")
        #expect(Self.text(of: outcome) == parts[3])
    }

    static func text(of outcome: SendOutcome) -> String? {
        switch outcome {
        case .delivered, .refreshAuth: nil
        case .tokenGone(let reason, _, _), .retry(let reason, _, _), .badPayload(let reason, _), .configError(let reason, _): reason
        }
    }

    /// 403 ExpiredProviderToken: a resend when a newer token exists; within the rejected token's own
    /// window (every replica presents that same token) a clock problem, unless APNs's clock need be
    /// at most a minute ahead, which is the last seconds of a 60-minute window: retry at its end.
    @Test func expiredProviderTokenDependsOnTheTokenWindow() {
        let iat: Int64 = 1_772_787_600
        func classify(age: Int64, window: Int64, newer: Bool = false) -> SendOutcome {
            let token = RejectedProviderToken(issuedAt: iat, rejectedAt: iat + age, nextTokenAt: iat + window, newerTokenExists: newer)
            return APNsResponseClassifier.classify(status: 403, reason: .expiredProviderToken, rejectedProviderToken: token)
        }
        #expect(APNsResponseClassifier.classify(status: 403, reason: .expiredProviderToken) == .refreshAuth)
        #expect(classify(age: 50 * 60, window: 50 * 60) == .refreshAuth, "answered after the boundary: the next token exists")
        #expect(classify(age: 3, window: 50 * 60, newer: true) == .refreshAuth, "the cache holds a newer token")
        #expect(classify(age: 3540, window: 3600) == .retry(reason: "ExpiredProviderToken", status: 403, after: .seconds(60)),
                "APNs a minute ahead at the end of a 60-minute window")
        #expect(classify(age: 3599, window: 3600) == .retry(reason: "ExpiredProviderToken", status: 403, after: .seconds(1)))
        #expect(classify(age: 3539, window: 3600) == .configError(
            reason: "ExpiredProviderToken for the current provider token (iat 1772787600, 3539 s old by this machine's clock): "
                + "APNs's clock is at least 61 s ahead of this machine's. Every replica presents this token until its window "
                + "ends in 61 s, so a new one cannot help: fix this machine's clock (NTP)", status: 403))
        guard case .configError(let reason, 403) = classify(age: 42, window: 50 * 60) else {
            Issue.record("a 42 s old current token rejected as expired must name the clock")
            return
        }
        #expect(reason.contains("at least 3558 s ahead") && reason.contains("ends in 2958 s"))
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
