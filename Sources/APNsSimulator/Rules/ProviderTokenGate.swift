import Foundation

/// Per-connection provider-token rules (docs/apns.md §2), with the verification cached per token text so
/// ES256 runs once per new JWT on a connection, not per request:
/// - missing → 403 MissingProviderToken; malformed, bad signature, wrong team → 403 InvalidProviderToken;
/// - `iat` older than the maximum age → 403 ExpiredProviderToken;
/// - a `kid` other than the first one used on the connection → 403 UnrelatedKeyIdInToken;
/// - a different valid JWT issued less than the minimum interval (Apple: 20 minutes) after the connection's
///   current one → 429 TooManyProviderTokenUpdates. Measured between the two tokens' `iat`, not from when
///   the connection first saw its token: Apple's rule is about how often the provider token is renewed
///   ("no more than once every 20 minutes"), so a connection opened late in a token's life may move to the
///   next token at once; going back to an older token, or churning fresh ones, is refused;
/// - a token new to the connection that would be the key's one-too-many new token within 20 minutes
///   across all connections → 429 TooManyProviderTokenUpdates (`ProviderTokenLedger`).
///
/// A value type owned by one connection (one event-loop thread); the ledger is shared.
struct ProviderTokenGate {
    struct Policy {
        var maxAgeSeconds: Double
        var minUpdateIntervalSeconds: Double
    }

    private var current: [UInt8] = []
    private var currentIssuedAt: Double = 0
    private var firstKeyID: String?
    /// The `kid` of the tokens admitted on this connection (nil before the first).
    var keyID: String? { firstKeyID }
    /// The last token that failed verification, and why (so a client looping on a bad token costs one verify).
    private var lastInvalid: [UInt8] = []
    private var lastInvalidRefusal: Refusal?
    /// The last token that verified but was not admitted (expired or too-soon), to skip re-verifying it.
    private var lastVerified: [UInt8] = []
    private var lastVerifiedResult: ProviderTokenVerifier.Verified?

    /// How far ahead of the simulator's clock an `iat` may be (clock skew).
    static let maxFutureSeconds: Double = 600

    /// Requests answered on this connection (for GOAWAY-after-N faults).
    var requestsOnConnection = 0

    /// True once a request carried a valid token (the server then raises MAX_CONCURRENT_STREAMS).
    private(set) var hasAuthenticated = false

    /// - Parameter authorization: the `authorization` header value, nil when absent.
    /// - Returns: success(true) the first time a token is admitted on this connection.
    mutating func admit(
        authorization: UnsafeBufferPointer<UInt8>?, now: Double, policy: Policy, verifier: ProviderTokenVerifier,
        ledger: ProviderTokenLedger
    ) -> Result<Bool, Refusal> {
        guard let authorization, !authorization.isEmpty else { return .failure(Refusal(.missingProviderToken)) }
        guard authorization.count > 7, Self.hasBearerPrefix(authorization) else {
            return .failure(Refusal(.invalidProviderToken, "authorization must be 'bearer <JWT>'"))
        }
        let jwt = UnsafeBufferPointer(rebasing: authorization[7...])
        if Self.same(current, jwt) {
            return now - currentIssuedAt > policy.maxAgeSeconds ? .failure(Refusal(.expiredProviderToken)) : .success(false)
        }
        if let refusal = lastInvalidRefusal, Self.same(lastInvalid, jwt) { return .failure(refusal) }
        let verified: ProviderTokenVerifier.Verified
        if let cached = lastVerifiedResult, Self.same(lastVerified, jwt) {
            verified = cached
        } else {
            switch verifier.verify(jwt) {
            case .failure(let refusal):
                lastInvalid = Array(jwt)
                lastInvalidRefusal = refusal
                return .failure(refusal)
            case .success(let result):
                verified = result
                lastVerified = Array(jwt)
                lastVerifiedResult = result
            }
        }
        if now - verified.issuedAt > policy.maxAgeSeconds { return .failure(Refusal(.expiredProviderToken)) }
        // Stricter than anything Apple documents, on purpose: an `iat` well in the future is a clock or a
        // units bug (milliseconds), and such a token would otherwise never expire here.
        if verified.issuedAt - now > Self.maxFutureSeconds {
            return .failure(Refusal(.invalidProviderToken, "iat \(Int64(verified.issuedAt)) is more than \(Int(Self.maxFutureSeconds)) s in the future; iat is UNIX seconds"))
        }
        if let firstKeyID, firstKeyID != verified.keyID { return .failure(Refusal(.unrelatedKeyIdInToken)) }
        if !current.isEmpty, verified.issuedAt - currentIssuedAt < policy.minUpdateIntervalSeconds {
            return .failure(Refusal(.tooManyProviderTokenUpdates))
        }
        if !ledger.admit(keyID: verified.keyID, jwt: jwt, issuedAt: verified.issuedAt, now: now) {
            return .failure(Refusal(.tooManyProviderTokenUpdates,
                                    "key \(verified.keyID) already brought \(ledger.limit) new provider tokens into use in the last "
                                        + "\(Int(ledger.intervalSeconds)) s; every replica should present the same token"))
        }
        current = Array(jwt)
        currentIssuedAt = verified.issuedAt
        firstKeyID = verified.keyID
        let first = !hasAuthenticated
        hasAuthenticated = true
        return .success(first)
    }

    private static func same(_ stored: [UInt8], _ candidate: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !stored.isEmpty, stored.count == candidate.count else { return false }
        return stored.withUnsafeBufferPointer { memcmp($0.baseAddress!, candidate.baseAddress!, candidate.count) == 0 }
    }

    private static func hasBearerPrefix(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix: [UInt8] = Array("bearer ".utf8)
        for offset in 0..<7 {
            var byte = value[offset]
            if byte >= UInt8(ascii: "A"), byte <= UInt8(ascii: "Z") { byte += 32 }
            if byte != prefix[offset] { return false }
        }
        return true
    }
}
