import APNsModel
import Foundation
import Synchronization

/// The process-wide cache of APNs provider tokens: ONE JWT per (team, key), shared by every
/// connection and every `APNsClient` that uses the same cache (by default `ProviderTokenCache.shared`).
///
/// Refreshes on a schedule (`refreshInterval`, clamped to Apple's 20–60 minutes) and once at once
/// after `403 ExpiredProviderToken` (however many connections report the same token). When the
/// replacement is rejected as expired too while it is younger than 20 minutes, this machine's clock
/// is wrong: the cache mints nothing more (the rejection says so, see `RejectedProviderToken`), so
/// no connection sees a new token more often than the 20 minutes `429 TooManyProviderTokenUpdates`
/// punishes beyond that one replacement. Thread-safe (one Mutex).
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
    public static let minimumInterval: Int64 = RejectedProviderToken.minimumRefreshSeconds
    public static let maximumInterval: Int64 = 60 * 60

    public let refreshInterval: Int64
    private let now: @Sendable () -> Int64
    private let sign: @Sendable (APNsCredentials, Int64) throws -> String
    private struct State {
        var tokens: [Identity: Token] = [:]
        /// Per key, the newest generation APNs answered ExpiredProviderToken for (outside a wrong clock).
        var rejectedGenerations: [Identity: Int] = [:]
    }

    private let state = Mutex(State())
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
        if let token = state.withLock({ $0.tokens[identity] }), current - token.issuedAt < refreshInterval, current >= token.issuedAt {
            return token
        }
        return try mint(credentials, at: current, replacingGenerationAtMost: nil)
    }

    /// APNs said `ExpiredProviderToken` to a request signed with `rejected`: judges the rejection
    /// (see `RejectedProviderToken`) and, unless it shows a wrong clock, makes sure a newer token
    /// exists, minting one unless another connection's report of the same token already did.
    /// A signing failure is not reported here: the next send that needs the token reports it.
    public func tokenRejectedAsExpired(_ rejected: Token, for credentials: APNsCredentials) -> RejectedProviderToken {
        let identity = credentials.identity
        let current = now()
        let (judgement, keep) = state.withLock { state -> (RejectedProviderToken, Bool) in
            let earlier = state.rejectedGenerations[identity]
            let judgement = RejectedProviderToken(issuedAt: rejected.issuedAt, rejectedAt: current,
                                                  mintedAfterEarlierRejection: earlier.map { rejected.generation > $0 } ?? false)
            // A wrong clock makes every new token look expired as well: keep the one there is.
            // Otherwise keep it only when a newer one exists already (another report of this token).
            if judgement.showsWrongClock { return (judgement, true) }
            state.rejectedGenerations[identity] = max(earlier ?? 0, rejected.generation)
            return (judgement, (state.tokens[identity]?.generation ?? 0) > rejected.generation)
        }
        if !keep { _ = try? mint(credentials, at: current, replacingGenerationAtMost: rejected.generation) }
        return judgement
    }

    private func mint(_ credentials: APNsCredentials, at issuedAt: Int64, replacingGenerationAtMost: Int?) throws -> Token {
        // Signing happens outside the lock; two racing minters resolve below and the loser's
        // token is discarded before anyone uses it, so every user still sees one token.
        let jwt = try sign(credentials, issuedAt)
        return state.withLock { state in
            let identity = credentials.identity
            if let existing = state.tokens[identity] {
                let stillFresh = issuedAt - existing.issuedAt < refreshInterval && issuedAt >= existing.issuedAt
                if let limit = replacingGenerationAtMost {
                    if existing.generation > limit { return existing }
                } else if stillFresh {
                    return existing
                }
            }
            let token = Token(jwt: jwt, issuedAt: issuedAt, generation: (state.tokens[identity]?.generation ?? 0) + 1,
                              authorizationHeader: "authorization: bearer " + jwt)
            state.tokens[identity] = token
            mints.add(1, ordering: .relaxed)
            return token
        }
    }
}
