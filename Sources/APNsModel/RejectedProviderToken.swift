/// What the client knew about the provider token (JWT) that APNs answered `403 ExpiredProviderToken`
/// to: its `iat`, when the answer came, when the key's next token takes over (all by this machine's
/// clock), and whether a newer token exists already.
///
/// Every replica of the fleet presents the same token for a key within a refresh window (its `iat` is
/// the window's start, its signature deterministic), so "mint a new one" is not an answer: within the
/// window a new token would be the same bytes, and a token of its own would make this replica the one
/// that churns the key's tokens (429 TooManyProviderTokenUpdates). So the answer depends on the window:
/// - the rejected token's window is over (a request signed before the boundary, answered after it):
///   a newer token exists and the resend carries it (`SendOutcome.refreshAuth`);
/// - the rejected token is the current one and APNs's clock need only be a little ahead of this
///   machine's (at most `clockToleranceSeconds`) for it to be over an hour old: that is the last
///   seconds of a 60-minute window, and the next token comes at the boundary (a retry after it);
/// - otherwise APNs's clock is ahead of this machine's by more than any NTP-kept clock drifts: a
///   configuration error that names the clock (`wrongClockDescription`); retrying cannot help.
/// Pure: the token cache records, the classifier decides.
public struct RejectedProviderToken: Sendable, Hashable {
    /// The rejected token's `iat` (UNIX seconds, this machine's clock).
    public var issuedAt: Int64
    /// When the rejection arrived (UNIX seconds, this machine's clock).
    public var rejectedAt: Int64
    /// When the key's next token takes over: the end of the rejected token's window.
    public var nextTokenAt: Int64
    /// The cache already holds a newer token than the rejected one.
    public var newerTokenExists: Bool

    /// Apple: a provider token may be renewed at most once every 20 minutes.
    public static let minimumRefreshSeconds: Int64 = 20 * 60
    /// Apple: a token whose `iat` is more than an hour old is ExpiredProviderToken.
    public static let maximumAgeSeconds: Int64 = 60 * 60
    /// How far ahead of this machine's APNs's clock may be before the rejection is blamed on the clock.
    public static let clockToleranceSeconds: Int64 = 60

    public init(issuedAt: Int64, rejectedAt: Int64, nextTokenAt: Int64, newerTokenExists: Bool) {
        self.issuedAt = issuedAt
        self.rejectedAt = rejectedAt
        self.nextTokenAt = nextTokenAt
        self.newerTokenExists = newerTokenExists || rejectedAt >= nextTokenAt
    }

    /// How old the token was by this machine's clock when APNs rejected it.
    public var ageSeconds: Int64 { rejectedAt - issuedAt }

    /// APNs's clock is at least this many seconds ahead of this machine's (it found the token over an hour old).
    public var minimumClockLeadSeconds: Int64 { Self.maximumAgeSeconds - ageSeconds }

    /// The current token was rejected and no NTP-level skew explains it: this machine's clock is wrong.
    public var showsWrongClock: Bool {
        !newerTokenExists && minimumClockLeadSeconds > Self.clockToleranceSeconds
    }

    /// The current token expired at the very end of its window: wait for the next one.
    public var waitsForNextToken: Bool { !newerTokenExists && !showsWrongClock }

    /// Seconds until the next token takes over (at least 1).
    public var secondsUntilNextToken: Int64 { max(1, nextTokenAt - rejectedAt) }

    /// The configuration error a person reads when `showsWrongClock`.
    public var wrongClockDescription: String {
        "ExpiredProviderToken for the current provider token (iat \(issuedAt), \(ageSeconds) s old by this machine's clock): "
            + "APNs's clock is at least \(minimumClockLeadSeconds) s ahead of this machine's. Every replica presents this "
            + "token until its window ends in \(secondsUntilNextToken) s, so a new one cannot help: fix this machine's clock (NTP)"
    }
}
