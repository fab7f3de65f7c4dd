import APNsModel

/// What one activity target's next owner must know so that a handoff resets no budget and repeats
/// no delivered state (docs/design.md §11): the facts of its last delivered send. One record per
/// target on the compacted `fanout-state` topic, keyed by the activity key, in the partition of
/// the same number as the target's activity-updates partition.
///
/// Only delivered facts are handed over, never what was merely accepted: an event the previous
/// owner accepted but did not deliver is still uncommitted, and the next owner must take it again.
///
/// Wire form (`encoded()`, little-endian, 96 bytes plus the app's name):
/// `version(1) flags(1) lastSentTimestamp(8) digest(8) ranks(4) progress(4×8) credits(8)
/// refilledAt(8) lastSendAt(8) lastDeliveredAt(8) tokenNotBefore(8) appLength(2) app`.
/// Version 2 is the same followed by the push-to-start credit (`pushToStart`):
/// `tokenLength(2) token credits(8) refilledAt(8)`. Version 3 adds the attributes type
/// (`attributesType`): `tokenLength(2)`, then `token credits(8) refilledAt(8)` only when tokenLength is
/// not 0, then `typeLength(2) type`. Each record is written in the lowest version that holds it, so
/// most are version 1, which a worker of an earlier release still reads during a rolling upgrade.
public struct TargetHandoff: Sendable, Hashable {
    /// The newest version this build writes and reads (it reads every earlier one too).
    public static let version: UInt8 = 3
    /// The longest attributes type a record carries (as an event may name, `EventDecoder`).
    static let maxAttributesTypeBytes = 256
    /// Bytes of the wire form before the app's name.
    static let fixedSize = 96

    public var key: String
    public var app: String
    /// aps.timestamp of the last delivered state.
    public var lastSentTimestamp: Int64
    /// Content of the last delivered state, as the meaning profile summarized it.
    var lastSentSummary: ContentSummary
    /// The priority-10 bucket after the last send (it refills from `bucket.refilledAt` on).
    public var bucket: TokenBucket
    /// When the last send started (min_interval counts from it) and when it was delivered (UNIX ns).
    public var lastSendAt: Nanoseconds
    public var lastDeliveredAt: Nanoseconds
    /// Tokens registered before this (a start's timestamp) belong to an earlier activity.
    public var tokenNotBefore: Int64
    /// Its end was delivered: nothing more is ever sent for it.
    public var ended: Bool
    /// The push-to-start token this target was started through, with that token's bucket when saved,
    /// while the bucket is not full again: starts are limited per push-to-start token (docs/design.md
    /// §3), and the next owner must not give the token a fresh burst.
    public var pushToStart: PushToStartCredit?
    /// The attributes type whose meaning profile summarized `lastSentSummary`, when a start named one
    /// other than the app's activities get without a start (`attributes_type_by_app`, else the
    /// default): the next owner must summarize the next state with the same profile.
    public var attributesType: String?

    /// A push-to-start token's start bucket as one owner last knew it.
    public struct PushToStartCredit: Sendable, Hashable {
        public var token: PushToken
        public var bucket: TokenBucket
    }

    /// The wire form (see the type's comment).
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        encode(into: &bytes)
        return bytes
    }

    /// Appends the wire form to `bytes` (a buffer reused for many records allocates once).
    public func encode(into bytes: inout [UInt8]) {
        let appBytes = app.utf8.prefix(Int(UInt16.max))
        let typeBytes = attributesType.map { $0.utf8.prefix(Self.maxAttributesTypeBytes) }
        let version: UInt8 = typeBytes != nil ? 3 : pushToStart != nil ? 2 : 1
        bytes.reserveCapacity(bytes.count + Self.fixedSize + appBytes.count + (pushToStart.map { 18 + $0.token.byteCount } ?? (version >= 2 ? 2 : 0))
                              + (typeBytes.map { 2 + $0.count } ?? 0))
        bytes.append(version)
        bytes.append(ended ? 1 : 0)
        Self.append(UInt64(bitPattern: lastSentTimestamp), to: &bytes)
        Self.append(lastSentSummary.digest, to: &bytes)
        for lane in 0..<4 { bytes.append(lastSentSummary.ranks[lane]) }
        for slot in 0..<4 { Self.append(lastSentSummary.progress[slot].bitPattern, to: &bytes) }
        Self.append(bucket.credits.bitPattern, to: &bytes)
        Self.append(UInt64(bitPattern: bucket.refilledAt), to: &bytes)
        Self.append(UInt64(bitPattern: lastSendAt), to: &bytes)
        Self.append(UInt64(bitPattern: lastDeliveredAt), to: &bytes)
        Self.append(UInt64(bitPattern: tokenNotBefore), to: &bytes)
        Self.appendLengthPrefixed(appBytes, to: &bytes)
        guard version >= 2 else { return }
        if let pushToStart {
            Self.appendLengthPrefixed(pushToStart.token.bytes, to: &bytes)  // at most PushToken.maxBytes
            Self.append(pushToStart.bucket.credits.bitPattern, to: &bytes)
            Self.append(UInt64(bitPattern: pushToStart.bucket.refilledAt), to: &bytes)
        } else {
            bytes.append(contentsOf: [0, 0])
        }
        if let typeBytes { Self.appendLengthPrefixed(typeBytes, to: &bytes) }
    }

    /// Reads the wire form of the record keyed `key`.
    public init(key: String, decoding bytes: [UInt8]) throws(HandoffDecodingError) {
        guard let version = bytes.first else { throw .truncated(bytes.count) }
        guard (1...Self.version).contains(version) else { throw .unknownVersion(version) }
        guard bytes.count >= Self.fixedSize else { throw .truncated(bytes.count) }
        var reader = Reader(bytes: bytes, position: 1)
        let flags = reader.byte()
        guard flags & ~1 == 0 else { throw .unknownFlags(flags) }
        ended = flags & 1 != 0
        lastSentTimestamp = Int64(bitPattern: reader.word())
        let digest = reader.word()
        var ranks = SIMD4<UInt8>(repeating: ContentSummary.noField)
        for lane in 0..<4 { ranks[lane] = reader.byte() }
        var progress = ProgressValues(repeating: .nan)
        for slot in 0..<4 { progress[slot] = Double(bitPattern: reader.word()) }
        lastSentSummary = ContentSummary(digest: digest, ranks: ranks, progress: progress)
        bucket = try reader.bucket()
        lastSendAt = Int64(bitPattern: reader.word())
        lastDeliveredAt = Int64(bitPattern: reader.word())
        tokenNotBefore = Int64(bitPattern: reader.word())
        let appLength = reader.length()
        let appEnd = Self.fixedSize + appLength
        guard version >= 2 ? bytes.count >= appEnd + 2 : bytes.count == appEnd else {
            throw .badLength(bytes.count, expected: appEnd + (version >= 2 ? 2 : 0))
        }
        app = String(decoding: bytes[Self.fixedSize..<appEnd], as: UTF8.self)
        self.key = key
        guard version >= 2 else { return }
        reader.position = appEnd
        let tokenLength = reader.length()
        if tokenLength > 0 || version == 2 {
            guard (1...PushToken.maxBytes).contains(tokenLength) else { throw .badPushToStartToken(tokenLength) }
            guard bytes.count >= reader.position + tokenLength + 16 else {
                throw .badLength(bytes.count, expected: reader.position + tokenLength + 16)
            }
            let token = PushToken(bytes: bytes[reader.position..<reader.position + tokenLength])
            reader.position += tokenLength
            pushToStart = PushToStartCredit(token: token, bucket: try reader.bucket())
        }
        if version == 3 {
            guard bytes.count >= reader.position + 2 else { throw .badLength(bytes.count, expected: reader.position + 2) }
            let typeLength = reader.length()
            guard (1...Self.maxAttributesTypeBytes).contains(typeLength) else { throw .badAttributesType(typeLength) }
            guard bytes.count >= reader.position + typeLength else { throw .badLength(bytes.count, expected: reader.position + typeLength) }
            attributesType = String(decoding: bytes[reader.position..<reader.position + typeLength], as: UTF8.self)
            reader.position += typeLength
        }
        guard bytes.count == reader.position else { throw .badLength(bytes.count, expected: reader.position) }
    }

    init(key: String, app: String, lastSentTimestamp: Int64, lastSentSummary: ContentSummary, bucket: TokenBucket,
         lastSendAt: Nanoseconds, lastDeliveredAt: Nanoseconds, tokenNotBefore: Int64, ended: Bool,
         pushToStart: PushToStartCredit? = nil, attributesType: String? = nil) {
        self.key = key
        self.app = app
        self.lastSentTimestamp = lastSentTimestamp
        self.lastSentSummary = lastSentSummary
        self.bucket = bucket
        self.lastSendAt = lastSendAt
        self.lastDeliveredAt = lastDeliveredAt
        self.tokenNotBefore = tokenNotBefore
        self.ended = ended
        self.pushToStart = pushToStart
        self.attributesType = attributesType
    }

    /// `length(2) bytes`, little-endian; `field` is at most UInt16.max bytes.
    private static func appendLengthPrefixed<Field: Collection<UInt8>>(_ field: Field, to bytes: inout [UInt8]) {
        bytes.append(UInt8(field.count & 0xff))
        bytes.append(UInt8(field.count >> 8))
        bytes.append(contentsOf: field)
    }

    private static func append(_ word: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
    }

    private struct Reader {
        let bytes: [UInt8]
        var position: Int

        mutating func byte() -> UInt8 {
            defer { position += 1 }
            return bytes[position]
        }

        /// A little-endian `length(2)`.
        mutating func length() -> Int {
            Int(byte()) | Int(byte()) << 8
        }

        mutating func word() -> UInt64 {
            var word: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 8) { word |= UInt64(byte()) << UInt64(shift) }
            return word
        }

        /// `credits(8) refilledAt(8)`.
        mutating func bucket() throws(HandoffDecodingError) -> TokenBucket {
            let credits = Double(bitPattern: word())
            let refilledAt = Int64(bitPattern: word())
            guard credits.isFinite, credits >= 0 else { throw .badCredits(credits) }
            return TokenBucket(credits: credits, refilledAt: refilledAt)
        }
    }
}

/// Why a `fanout-state` record could not be read. The record is skipped (its target starts afresh,
/// as without a changelog) and the worker counts and reports it.
public enum HandoffDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownVersion(UInt8)
    case unknownFlags(UInt8)
    case truncated(Int)
    case badLength(Int, expected: Int)
    case badCredits(Double)
    case badPushToStartToken(Int)
    case badAttributesType(Int)

    public var description: String {
        switch self {
        case .unknownVersion(let version): "unknown record version \(version) (this build reads versions 1 to \(TargetHandoff.version))"
        case .unknownFlags(let flags): "unknown flags \(flags)"
        case .truncated(let count): "\(count) bytes, shorter than a record"
        case .badLength(let count, let expected): "\(count) bytes where the app's name makes \(expected)"
        case .badCredits(let credits): "priority-10 credits \(credits)"
        case .badPushToStartToken(let length): "a push-to-start token of \(length) bytes (1...\(PushToken.maxBytes))"
        case .badAttributesType(let length): "an attributes type of \(length) bytes (1...\(TargetHandoff.maxAttributesTypeBytes))"
        }
    }

    /// A short stable code for metrics.
    public var code: String {
        switch self {
        case .unknownVersion: "unknown-version"
        case .unknownFlags: "unknown-flags"
        case .truncated, .badLength: "bad-length"
        case .badCredits: "bad-credits"
        case .badPushToStartToken: "bad-push-to-start-token"
        case .badAttributesType: "bad-attributes-type"
        }
    }
}
