/// When `fanout replay` produces each record: the recorded timestamps define the schedule.
///
/// The first record handed to `due` fixes the origin: it is due at once (`now`), and a record
/// recorded t after it is due t / speed after that instant. A record without a timestamp, or recorded
/// before the origin, is due at the origin (i.e. as soon as its turn comes). Speed 0 means unpaced:
/// everything is due at once. Pure: the caller passes its own clock's `now`, as a `Duration` since
/// any fixed instant of that clock.
struct ReplayPacer: Sendable {
    /// 0 (as fast as possible) or a positive factor.
    let speed: Double
    private(set) var origin: (recordedMilliseconds: Int64, startedAt: Duration)?

    init(speed: Double) {
        precondition(speed >= 0 && speed.isFinite, "speed must be 0 or a positive factor")
        self.speed = speed
    }

    /// The instant (same clock as `now`) at which the record should be produced.
    mutating func due(recordedMilliseconds: Int64?, now: Duration) -> Duration {
        guard speed > 0 else { return now }
        guard let origin else {
            if let recordedMilliseconds { origin = (recordedMilliseconds, now) }
            return now
        }
        guard let recordedMilliseconds, recordedMilliseconds > origin.recordedMilliseconds else { return origin.startedAt }
        return origin.startedAt + .milliseconds(recordedMilliseconds - origin.recordedMilliseconds) / speed
    }
}
