import FanoutCore
import Foundation

/// Where the worker reads `now` for the engine (UNIX nanoseconds). The real clock in production;
/// tests and the demo may inject another (it must be monotonic enough not to go backwards much,
/// and it must be UNIX time: event timestamps are compared with it).
public struct WorkerClock: Sendable {
    public var now: @Sendable () -> Nanoseconds

    public init(now: @escaping @Sendable () -> Nanoseconds) { self.now = now }

    /// Wall-clock UNIX time.
    public static let system = WorkerClock {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }
}
