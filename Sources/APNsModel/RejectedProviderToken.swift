/// What the client knew about the provider token (JWT) that APNs answered `403 ExpiredProviderToken`
/// to: when it was minted, when the answer came (both by this machine's clock), and whether the
/// token was already the replacement minted after an earlier ExpiredProviderToken for the same key.
///
/// APNs calls a token expired when its `iat` is more than an hour old by APNs's clock. A token minted
/// after an earlier rejection, and younger than 20 minutes by this machine's clock, can only be
/// "expired" if the two clocks disagree by more than 40 minutes: minting yet another one cannot help
/// (and Apple allows a new token only every 20 minutes), so the answer is a configuration error that
/// names the clock, not another refresh. Pure: the token cache records, the classifier decides.
public struct RejectedProviderToken: Sendable, Hashable {
    /// The rejected token's `iat` (UNIX seconds, this machine's clock).
    public var issuedAt: Int64
    /// When the rejection arrived (UNIX seconds, this machine's clock).
    public var rejectedAt: Int64
    /// The token was minted after an earlier ExpiredProviderToken for the same key.
    public var mintedAfterEarlierRejection: Bool

    /// Apple: a provider token may be renewed at most once every 20 minutes.
    public static let minimumRefreshSeconds: Int64 = 20 * 60

    public init(issuedAt: Int64, rejectedAt: Int64, mintedAfterEarlierRejection: Bool) {
        self.issuedAt = issuedAt
        self.rejectedAt = rejectedAt
        self.mintedAfterEarlierRejection = mintedAfterEarlierRejection
    }

    /// How old the token was by this machine's clock when APNs rejected it.
    public var ageSeconds: Int64 { rejectedAt - issuedAt }

    /// A fresh replacement token already rejected: this machine's clock and APNs's disagree.
    public var showsWrongClock: Bool {
        mintedAfterEarlierRejection && ageSeconds < Self.minimumRefreshSeconds
    }

    /// The configuration error a person reads when `showsWrongClock`.
    public var wrongClockDescription: String {
        "ExpiredProviderToken for a provider token minted \(ageSeconds) s ago: this machine's clock is probably wrong "
            + "(iat \(issuedAt) by this clock is over an hour old by APNs's); fix the clock (NTP)"
    }
}
