/// Time as the engine sees it: nanoseconds since the UNIX epoch, read from a clock the caller injects.
///
/// The engine never reads a clock itself. The worker passes its wall clock; the simulation passes
/// virtual time. Durations in configuration use the same unit.
public typealias Nanoseconds = Int64

extension Nanoseconds {
    public static let nanosecondsPerSecond: Int64 = 1_000_000_000

    /// `seconds` whole seconds as nanoseconds.
    public static func seconds(_ seconds: Int64) -> Nanoseconds { seconds * nanosecondsPerSecond }
    public static func milliseconds(_ ms: Int64) -> Nanoseconds { ms * 1_000_000 }
    public static func minutes(_ minutes: Int64) -> Nanoseconds { minutes * 60 * nanosecondsPerSecond }
    public static func hours(_ hours: Int64) -> Nanoseconds { hours * 3600 * nanosecondsPerSecond }

    /// A `Duration` (for example APNs's Retry-After) as nanoseconds, saturating instead of trapping.
    public init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: Int64.nanosecondsPerSecond)
        self = overflow ? (seconds < 0 ? Int64.min / 2 : Int64.max / 2) : whole &+ attoseconds / 1_000_000_000
    }
}
