/// What one APNs send came to, in the single classification every part of Fanout acts on.
///
/// The APNs client maps each HTTP/2 response (or transport failure) to exactly one case; the core
/// engine turns the case into offset completions, feedback records, dead letters or backoff.
/// Reasons are APNs's own reason strings (for example `"Unregistered"`), or a transport description.
public enum SendOutcome: Sendable, Hashable {
    /// 200: Apple accepted the push.
    case delivered
    /// 410 Unregistered / ExpiredToken, 400 BadDeviceToken / DeviceTokenNotForTopic: stop using the token.
    /// `apnsTimestampMillis` is the 410 body's `timestamp`, when Apple gave one.
    case tokenGone(reason: String, status: Int, apnsTimestampMillis: Int64?)
    /// 429 TooManyRequests, 500, 503, Shutdown, IdleTimeout, timeouts, connection loss, GOAWAY, and an
    /// ExpiredProviderToken at the very end of a token window.
    /// `after` is a server-suggested delay when one was given (or, for an ExpiredProviderToken in the
    /// last seconds of its window, the time until the next provider token).
    case retry(reason: String, status: Int?, after: Duration?)
    /// 403 ExpiredProviderToken for a token a newer one replaced: send again (with the newer JWT).
    case refreshAuth
    /// 413 and payload-level 400s: this payload can never be delivered.
    case badPayload(reason: String, status: Int)
    /// Credentials, topic or app configuration is wrong: no send for this app can succeed until fixed.
    case configError(reason: String, status: Int)
}
