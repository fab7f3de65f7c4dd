import Foundation

/// What came back for one `APNsHTTPRequest`: an HTTP response, or a transport failure.
public struct APNsHTTPResponse: Sendable, Hashable {
    /// HTTP status; nil when the request failed below HTTP (see `transportFailure`).
    public var status: Int?
    /// `apns-id`, `apns-unique-id` and `apns-request-id` as they came (`HeaderText`: no allocation
    /// per response); the `String` properties below read them.
    public var apnsIDHeader: HeaderText?
    public var apnsUniqueIDHeader: HeaderText?
    public var apnsRequestIDHeader: HeaderText?
    public var channelID: String?
    public var retryAfterSeconds: Int?
    public var body: [UInt8]
    /// Connect/TLS/reset/GOAWAY/timeout description when no HTTP response arrived; beside a status, a note
    /// on what went wrong reading it (a body over the limit, cut short).
    public var transportFailure: String?
    /// Set by the client on a 403 ExpiredProviderToken: what it knew about the token the request carried.
    public var rejectedProviderToken: RejectedProviderToken?

    public init(status: Int?, apnsID: String? = nil, apnsUniqueID: String? = nil, apnsRequestID: String? = nil,
                channelID: String? = nil, retryAfterSeconds: Int? = nil, body: [UInt8] = [],
                transportFailure: String? = nil, rejectedProviderToken: RejectedProviderToken? = nil) {
        self.status = status
        self.apnsIDHeader = apnsID.map(HeaderText.init)
        self.apnsUniqueIDHeader = apnsUniqueID.map(HeaderText.init)
        self.apnsRequestIDHeader = apnsRequestID.map(HeaderText.init)
        self.channelID = channelID
        self.retryAfterSeconds = retryAfterSeconds
        self.body = body
        self.transportFailure = transportFailure
        self.rejectedProviderToken = rejectedProviderToken
    }

    public var apnsID: String? {
        get { apnsIDHeader?.description }
        set { apnsIDHeader = newValue.map(HeaderText.init) }
    }
    public var apnsUniqueID: String? {
        get { apnsUniqueIDHeader?.description }
        set { apnsUniqueIDHeader = newValue.map(HeaderText.init) }
    }
    public var apnsRequestID: String? {
        get { apnsRequestIDHeader?.description }
        set { apnsRequestIDHeader = newValue.map(HeaderText.init) }
    }

    /// The `{"reason": ..., "timestamp": ...}` error body; nil fields when absent or not JSON.
    public func errorBody() -> (reason: APNsReason?, timestampMillis: Int64?) {
        guard !body.isEmpty,
              let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            return (nil, nil)
        }
        let reason = (object["reason"] as? String).map(APNsReason.init(rawValue:))
        let timestamp = (object["timestamp"] as? NSNumber)?.int64Value
        return (reason, timestamp)
    }

    /// This response as the result of a push, classified.
    public func result() -> APNsResult {
        guard let status else {
            let failure = transportFailure ?? "no response"
            return APNsResult(status: nil, reason: nil, apnsID: nil, apnsUniqueID: nil, timestampMillis: nil,
                              outcome: APNsResponseClassifier.classifyTransportFailure(failure),
                              transportFailure: failure)
        }
        let (reason, timestamp) = (200..<300).contains(status) ? (nil, nil) : errorBody()
        let outcome = APNsResponseClassifier.classify(status: status, reason: reason, timestampMillis: timestamp,
                                                      retryAfter: retryAfterSeconds.map { .seconds($0) },
                                                      rejectedProviderToken: rejectedProviderToken)
        return APNsResult(status: status, reason: reason, apnsIDHeader: apnsIDHeader ?? apnsRequestIDHeader,
                          apnsUniqueIDHeader: apnsUniqueIDHeader, timestampMillis: timestamp, outcome: outcome,
                          transportFailure: transportFailure)
    }
}

/// The result of one push: what APNs said (or why nothing was said) and what it means.
public struct APNsResult: Sendable, Hashable {
    /// HTTP status; nil on a transport failure.
    public var status: Int?
    /// The error body's reason; nil on success or when the body had none.
    public var reason: APNsReason?
    /// `apns-id` (device pushes) or `apns-request-id` (broadcasts) from the response, as it came.
    public var apnsIDHeader: HeaderText?
    /// `apns-unique-id` (development environment and broadcasts only), as it came.
    public var apnsUniqueIDHeader: HeaderText?
    public var apnsID: String? { apnsIDHeader?.description }
    public var apnsUniqueID: String? { apnsUniqueIDHeader?.description }
    /// The 410 body's `timestamp` (milliseconds since 1970) when the token stopped being valid.
    public var timestampMillis: Int64?
    /// The single classification every part of Fanout acts on.
    public var outcome: SendOutcome
    /// Why no HTTP response arrived (status nil); beside a status, a note on reading the response (e.g. its
    /// body was over the limit and cut short), kept so the worker can log it.
    public var transportFailure: String?
    /// True when the client withdrew the request before writing it (its ownership had ended):
    /// APNs never saw it. Set by the client; every other result leaves it false.
    public var withdrawn = false

    public init(status: Int?, reason: APNsReason?, apnsID: String?, apnsUniqueID: String?, timestampMillis: Int64?,
                outcome: SendOutcome, transportFailure: String?) {
        self.init(status: status, reason: reason, apnsIDHeader: apnsID.map(HeaderText.init),
                  apnsUniqueIDHeader: apnsUniqueID.map(HeaderText.init), timestampMillis: timestampMillis,
                  outcome: outcome, transportFailure: transportFailure)
    }

    /// With the ids as they came in the response's headers, kept inline until read.
    public init(status: Int?, reason: APNsReason?, apnsIDHeader: HeaderText?, apnsUniqueIDHeader: HeaderText?,
                timestampMillis: Int64?, outcome: SendOutcome, transportFailure: String?) {
        self.status = status
        self.reason = reason
        self.apnsIDHeader = apnsIDHeader
        self.apnsUniqueIDHeader = apnsUniqueIDHeader
        self.timestampMillis = timestampMillis
        self.outcome = outcome
        self.transportFailure = transportFailure
    }

    /// A result for a request that never reached APNs (queue closed, shutdown deadline, ...).
    public static func notSent(_ why: String) -> APNsResult {
        APNsResult(status: nil, reason: nil, apnsID: nil, apnsUniqueID: nil, timestampMillis: nil,
                   outcome: .retry(reason: why, status: nil, after: nil), transportFailure: why)
    }
}
