import APNsModel
import Foundation
import Synchronization

/// APNs provider tokens: ONE JWT per (team, key) for the whole fleet, not only for this process.
///
/// A token's `iat` is the start of the current refresh window — UNIX time floored to a multiple of
/// `refreshInterval` (20–60 minutes, counted from the epoch) — its header and claims are written
/// byte for byte the same way (`APNsJWT`), and its ES256 signature is deterministic (RFC 6979). So
/// every worker that signs for a key with the same interval presents byte-identical tokens within a
/// window and moves to the next one at the same boundary: the key sees one new token per window
/// however many replicas, connections and `APNsClient`s there are (APNs answers churn with
/// `429 TooManyProviderTokenUpdates`). Replicas must share `apns.jwt_refresh_interval` for this.
/// Their clocks need only agree to within seconds: around a boundary a replica a little behind
/// still presents the previous token, which is simply one of the two the boundary brings anyway.
///
/// `403 ExpiredProviderToken` cannot be answered with "mint another one" (within the window it
/// would be the same bytes): `tokenRejectedAsExpired` says whether a newer token exists, the window
/// is about to end, or this machine's clock is wrong (see `RejectedProviderToken`). Thread-safe
/// (one Mutex); signing happens outside it.
public final class ProviderTokenCache: Sendable {
    public struct Identity: Hashable, Sendable {
        public var teamID: String
        public var keyID: String
    }

    /// A minted token. `generation` increases with every window's token this cache mints for the identity.
    public struct Token: Sendable, Hashable {
        public let jwt: String
        /// The start of the token's window (UNIX seconds), which is its `iat`.
        public let issuedAt: Int64
        public let generation: Int
        /// `authorization: bearer <jwt>`, prebuilt for the curl transport's header list.
        public let authorizationHeader: String
        /// `bearer <jwt>`, prebuilt for the nghttp2 transport's `authorization` value (so a send
        /// does not build it again).
        public let bearer: String
    }

    /// The process-wide cache: use it unless a test needs its own clock.
    public static let shared = ProviderTokenCache()

    /// Apple: no more often than every 20 minutes, no less than every 60.
    public static let minimumInterval: Int64 = RejectedProviderToken.minimumRefreshSeconds
    public static let maximumInterval: Int64 = RejectedProviderToken.maximumAgeSeconds

    /// The window length in seconds: a token's `iat` is a multiple of it.
    public let refreshInterval: Int64
    private let now: @Sendable () -> Int64
    private let sign: @Sendable (APNsCredentials, Int64) throws -> String
    private let tokens = Mutex<[Identity: Token]>([:])
    private let mints = Atomic<Int>(0)

    /// - Parameters:
    ///   - refreshInterval: the window, clamped to 20–60 minutes (default 50).
    ///   - now: UNIX seconds; injected for tests.
    public convenience init(refreshInterval: Duration = .seconds(50 * 60),
                            now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.init(refreshInterval: refreshInterval, now: now) { credentials, issuedAt in
            try APNsJWT.make(teamID: credentials.teamID, keyID: credentials.keyID, issuedAt: issuedAt, key: credentials.key)
        }
    }

    /// `sign` makes the JWT (injected by tests to make signing fail).
    init(refreshInterval: Duration, now: @escaping @Sendable () -> Int64,
         sign: @escaping @Sendable (APNsCredentials, Int64) throws -> String) {
        let seconds = refreshInterval.components.seconds
        self.refreshInterval = min(max(seconds, Self.minimumInterval), Self.maximumInterval)
        self.now = now
        self.sign = sign
    }

    /// How many JWTs this cache has minted (for metrics and tests).
    public var mintCount: Int { mints.load(ordering: .relaxed) }

    /// The start of the window `time` falls in: `time` floored to a multiple of `refreshInterval`.
    public func windowStart(at time: Int64) -> Int64 {
        let remainder = time % refreshInterval
        return time - (remainder < 0 ? remainder + refreshInterval : remainder)
    }

    /// The current window's token for `credentials`, signing it when the window is new.
    ///
    /// Never goes back: if this machine's clock steps back across a boundary, the newer token is kept
    /// (returning to the older one would be one more token change on every connection).
    public func token(for credentials: APNsCredentials) throws -> Token {
        let identity = credentials.identity
        let window = windowStart(at: now())
        if let token = tokens.withLock({ $0[identity] }), token.issuedAt >= window { return token }
        // Two racing signers make the same bytes (deterministic signature); the first stored wins.
        let jwt = try sign(credentials, window)
        return tokens.withLock { tokens in
            let existing = tokens[identity]
            if let existing, existing.issuedAt >= window { return existing }
            let token = Token(jwt: jwt, issuedAt: window, generation: (existing?.generation ?? 0) + 1,
                              authorizationHeader: "authorization: bearer " + jwt, bearer: "bearer " + jwt)
            tokens[identity] = token
            mints.add(1, ordering: .relaxed)
            return token
        }
    }

    /// APNs said `ExpiredProviderToken` to a request signed with `rejected`: what that means (see
    /// `RejectedProviderToken`). Nothing is minted here: when a newer token exists, the resend's
    /// `token(for:)` returns it; within the rejected token's window there is no other token to give.
    public func tokenRejectedAsExpired(_ rejected: Token, for credentials: APNsCredentials) -> RejectedProviderToken {
        let current = now()
        let newer = tokens.withLock { ($0[credentials.identity]?.issuedAt ?? .min) > rejected.issuedAt }
        return RejectedProviderToken(issuedAt: rejected.issuedAt, rejectedAt: current,
                                     nextTokenAt: rejected.issuedAt + refreshInterval,
                                     newerTokenExists: newer || windowStart(at: current) > rejected.issuedAt)
    }
}
