import Foundation
import Synchronization

/// The process-wide cache of APNs provider tokens: ONE JWT per (team, key), shared by every
/// connection and every `APNsClient` that uses the same cache (by default `ProviderTokenCache.shared`).
///
/// Refreshes on a schedule (`refreshInterval`, clamped to Apple's 20–60 minutes) and early after
/// `403 ExpiredProviderToken`, but never mints twice for one key within 20 minutes: since all
/// connections share the token, no connection ever sees a new token more than once per 20 minutes,
/// which is what `429 TooManyProviderTokenUpdates` punishes. Thread-safe (one Mutex).
public final class ProviderTokenCache: Sendable {
    public struct Identity: Hashable, Sendable {
        public var teamID: String
        public var keyID: String
    }

    /// A minted token. `generation` increases with every mint for the identity.
    public struct Token: Sendable, Hashable {
        public let jwt: String
        public let issuedAt: Int64
        public let generation: Int
        /// `authorization: bearer <jwt>`, prebuilt for the transport's header list.
        public let authorizationHeader: String
    }

    /// The process-wide cache: use it unless a test needs its own clock.
    public static let shared = ProviderTokenCache()

    /// Apple: no more often than every 20 minutes, no less than every 60.
    public static let minimumInterval: Int64 = 20 * 60
    public static let maximumInterval: Int64 = 60 * 60

    public let refreshInterval: Int64
    private let now: @Sendable () -> Int64
    private let sign: @Sendable (APNsCredentials, Int64) throws -> String
    private let state = Mutex<[Identity: Token]>([:])
    private let mints = Atomic<Int>(0)

    /// - Parameters:
    ///   - refreshInterval: seconds between scheduled refreshes, 20–60 minutes (default 50).
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

    /// The current token for `credentials`, minting one when there is none or it is due.
    public func token(for credentials: APNsCredentials) throws -> Token {
        let identity = credentials.identity
        let current = now()
        if let token = state.withLock({ $0[identity] }), current - token.issuedAt < refreshInterval, current >= token.issuedAt {
            return token
        }
        return try mint(credentials, at: current, replacingGenerationAtMost: nil)
    }

    /// APNs said `ExpiredProviderToken` for `generation`: mint a new token unless one newer than
    /// it exists already, and unless the current token is younger than 20 minutes (then keep it:
    /// a new token now would be a TooManyProviderTokenUpdates). Returns the token to retry with.
    @discardableResult
    public func tokenRejectedAsExpired(_ generation: Int, for credentials: APNsCredentials) throws -> Token {
        let current = now()
        if let token = state.withLock({ $0[credentials.identity] }) {
            if token.generation > generation { return token }
            if current - token.issuedAt < Self.minimumInterval && current >= token.issuedAt { return token }
        }
        return try mint(credentials, at: current, replacingGenerationAtMost: generation)
    }

    private func mint(_ credentials: APNsCredentials, at issuedAt: Int64, replacingGenerationAtMost: Int?) throws -> Token {
        // Signing happens outside the lock; two racing minters resolve below and the loser's
        // token is discarded before anyone uses it, so every user still sees one token.
        let jwt = try sign(credentials, issuedAt)
        return state.withLock { tokens in
            let identity = credentials.identity
            if let existing = tokens[identity] {
                let stillFresh = issuedAt - existing.issuedAt < refreshInterval && issuedAt >= existing.issuedAt
                if let limit = replacingGenerationAtMost {
                    if existing.generation > limit { return existing }
                } else if stillFresh {
                    return existing
                }
            }
            let token = Token(jwt: jwt, issuedAt: issuedAt, generation: (tokens[identity]?.generation ?? 0) + 1,
                              authorizationHeader: "authorization: bearer " + jwt)
            tokens[identity] = token
            mints.add(1, ordering: .relaxed)
            return token
        }
    }
}
