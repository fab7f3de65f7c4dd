/// The body of one ActivityKit push: `{"aps":{…}}` as APNs expects it (docs/apns.md §4).
///
/// JSON parts the producer wrote (content state, alert, attributes) are carried as raw bytes that
/// must already be valid JSON objects; they are spliced in verbatim. Building the body does not use
/// Foundation and writes into a caller-owned buffer, so a sender can reuse one buffer for every push.
public struct LiveActivityPayload: Sendable, Hashable {
    public enum Event: String, Sendable, Hashable, CaseIterable {
        case start, update, end
    }

    /// Largest body APNs accepts for `/3/device/<token>` sends.
    public static let deviceLimit = 4096
    /// Largest body APNs accepts for `/4/broadcasts/apps/<bundle>` sends.
    public static let broadcastLimit = 5120
    /// Largest content state ActivityKit applies ("can't exceed 4KB"), whatever the body limit.
    public static let contentStateLimit = 4096

    public var event: Event
    /// UNIX seconds (`aps.timestamp`).
    public var timestamp: Int64
    /// Raw JSON object for `content-state`.
    public var contentState: [UInt8]
    /// Raw JSON object for `alert` (`title`, `body`, `sound`, possibly localized objects), passed as given.
    public var alert: [UInt8]?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    /// Must be finite; `checkSize` reports a non-finite score.
    public var relevanceScore: Double?
    public var attributesType: String?
    /// Raw JSON object for `attributes`.
    public var attributes: [UInt8]?
    /// Writes `"input-push-token":1` when true.
    public var inputPushToken: Bool
    public var inputPushChannel: String?

    public init(event: Event, timestamp: Int64, contentState: [UInt8], alert: [UInt8]? = nil,
                staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil,
                attributesType: String? = nil, attributes: [UInt8]? = nil,
                inputPushToken: Bool = false, inputPushChannel: String? = nil) {
        self.event = event
        self.timestamp = timestamp
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
    }

    /// Replaces the contents of `buffer` with the JSON body (keeping its capacity).
    public func write(into buffer: inout [UInt8]) {
        buffer.removeAll(keepingCapacity: true)
        append(to: &buffer)
    }

    /// The JSON body as a new array.
    public func encoded() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(encodedSize)
        append(to: &buffer)
        return buffer
    }

    /// Appends the JSON body to `buffer`.
    public func append(to buffer: inout [UInt8]) {
        var out = PayloadWriter(buffer: buffer)
        buffer = []
        out.raw("{\"aps\":{\"timestamp\":")
        out.integer(timestamp)
        out.raw(",\"event\":")
        out.string(event.rawValue)
        out.raw(",\"content-state\":")
        out.bytes(contentState)
        if let staleDate {
            out.raw(",\"stale-date\":")
            out.integer(staleDate)
        }
        if let dismissalDate {
            out.raw(",\"dismissal-date\":")
            out.integer(dismissalDate)
        }
        if let relevanceScore {
            out.raw(",\"relevance-score\":")
            out.number(relevanceScore)
        }
        if let alert {
            out.raw(",\"alert\":")
            out.bytes(alert)
        }
        if let attributesType {
            out.raw(",\"attributes-type\":")
            out.string(attributesType)
        }
        if let attributes {
            out.raw(",\"attributes\":")
            out.bytes(attributes)
        }
        if inputPushToken { out.raw(",\"input-push-token\":1") }
        if let inputPushChannel {
            out.raw(",\"input-push-channel\":")
            out.string(inputPushChannel)
        }
        out.raw("}}")
        buffer = out.buffer
    }

    /// The exact number of bytes `write(into:)` produces, computed without building the body.
    public var encodedSize: Int {
        var size = PayloadWriter.Counter()
        size.raw("{\"aps\":{\"timestamp\":")
        size.integer(timestamp)
        size.raw(",\"event\":")
        size.string(event.rawValue)
        size.raw(",\"content-state\":")
        size.count += contentState.count
        if let staleDate { size.raw(",\"stale-date\":"); size.integer(staleDate) }
        if let dismissalDate { size.raw(",\"dismissal-date\":"); size.integer(dismissalDate) }
        if let relevanceScore { size.raw(",\"relevance-score\":"); size.number(relevanceScore) }
        if let alert { size.raw(",\"alert\":"); size.count += alert.count }
        if let attributesType { size.raw(",\"attributes-type\":"); size.string(attributesType) }
        if let attributes { size.raw(",\"attributes\":"); size.count += attributes.count }
        if inputPushToken { size.raw(",\"input-push-token\":1") }
        if let inputPushChannel { size.raw(",\"input-push-channel\":"); size.string(inputPushChannel) }
        size.raw("}}")
        return size.count
    }

    /// Checks the body against an APNs size limit (`deviceLimit` or `broadcastLimit`).
    /// Returns the body size when it fits.
    public func checkSize(limit: Int) -> Result<Int, PayloadError> {
        if let relevanceScore, !relevanceScore.isFinite { return .failure(.nonFiniteRelevanceScore) }
        let size = encodedSize
        guard size <= limit else { return .failure(.tooLarge(size: size, limit: limit)) }
        return .success(size)
    }
}

/// Why a payload cannot be sent.
public enum PayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The body is `size` bytes, over APNs's `limit`; APNs would answer 413 PayloadTooLarge.
    case tooLarge(size: Int, limit: Int)
    /// JSON cannot carry NaN or infinity.
    case nonFiniteRelevanceScore

    public var description: String {
        switch self {
        case let .tooLarge(size, limit):
            "APNs payload would be \(size) bytes, over the \(limit)-byte limit; shrink content_state, alert or attributes"
        case .nonFiniteRelevanceScore:
            "relevance-score is not a finite number"
        }
    }
}
