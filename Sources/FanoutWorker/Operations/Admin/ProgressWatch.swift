import FanoutCore

/// What the worker reports to its `ProgressWatch` when `/livez` is asked.
struct ProgressFacts: Sendable, Equatable {
    /// When the consumer's poll loop last returned (nil: not yet).
    var pollReturnedAt: Nanoseconds?
    /// Records read from owned partitions and not yet committed.
    var uncommitted: Int64
    /// Times a committed offset moved forward since the worker started (only grows).
    var commitAdvances: UInt64
    /// Times the assignment changed since the worker started (only grows).
    var assignmentChanges: UInt64
    /// Reasons work may wait that a restart would not cure, as `/readyz` reports them: an APNs lane
    /// failing, an app paused by a configuration error, an output topic not writable.
    var excuses: [String]
    /// The worker failed for good (its consumer died): a restart is the cure.
    var failure: String?
    /// The worker is stopping: it is on its way out already.
    var stopping: Bool
}

/// `/livez`'s answer: alive (200) or stuck (503), with the reason.
public enum Liveness: Sendable, Equatable {
    case alive(String)
    case stuck(String)

    public var isAlive: Bool {
        if case .alive = self { return true }
        return false
    }

    public var reason: String {
        switch self {
        case .alive(let reason), .stuck(let reason): return reason
        }
    }
}

/// Judges whether the worker still makes progress, for a liveness probe that restarts a stuck worker
/// and never a busy or a waiting one (docs/operations.md §1, `/livez`).
///
/// Progress is a committed offset moving forward, an assignment change, or nothing waiting to be
/// committed. Work may wait without progress for a reason `/readyz` reports (APNs failing, an app
/// paused, an output topic not writable): a restart would not cure those, so they count as progress
/// too. The worker is stuck when records have waited uncommitted with none of these for longer than
/// `window`, or when the Kafka poll loop has not returned for that long (nothing read, nothing
/// committed, heartbeats only from librdkafka's own threads). `window` must outlast every deadline
/// the engine may legitimately wait for (a retry's backoff cap, the token wait): the configuration
/// checks that.
///
/// Pure: the caller supplies the time. It samples when asked: a gap is measured from the last probe
/// that saw progress (a probe period at most before the work arrived).
struct ProgressWatch: Sendable {
    let window: Nanoseconds
    private let startedAt: Nanoseconds
    private var lastProgressAt: Nanoseconds
    private var lastAdvances: UInt64?
    private var lastAssignmentChanges: UInt64?

    init(window: Nanoseconds, startedAt: Nanoseconds) {
        self.window = window
        self.startedAt = startedAt
        lastProgressAt = startedAt
    }

    mutating func judge(_ facts: ProgressFacts, now: Nanoseconds) -> Liveness {
        if let failure = facts.failure { return .stuck("worker failed: \(failure)") }
        if facts.stopping { return .alive("shutting down") }
        let pollSilence = now - (facts.pollReturnedAt ?? startedAt)
        if pollSilence > window {
            return .stuck("the Kafka poll loop has not returned for \(Self.seconds(pollSilence)) s")
        }
        defer {
            lastAdvances = facts.commitAdvances
            lastAssignmentChanges = facts.assignmentChanges
        }
        if facts.commitAdvances != lastAdvances || facts.assignmentChanges != lastAssignmentChanges {
            lastProgressAt = now
            return facts.uncommitted == 0 ? .alive("nothing waits to be committed") : .alive("committing: \(facts.uncommitted) record(s) uncommitted")
        }
        if facts.uncommitted == 0 {
            lastProgressAt = now
            return .alive("nothing waits to be committed")
        }
        if !facts.excuses.isEmpty {
            lastProgressAt = now
            return .alive("\(facts.uncommitted) record(s) wait on: " + facts.excuses.joined(separator: "; "))
        }
        let quiet = now - lastProgressAt
        if quiet > window {
            return .stuck("\(facts.uncommitted) record(s) uncommitted and no committed offset advanced for \(Self.seconds(quiet)) s, with no APNs, app or output problem to explain it")
        }
        return .alive("\(facts.uncommitted) record(s) uncommitted; no committed offset advanced for \(Self.seconds(quiet)) s (stuck after \(Self.seconds(window)) s)")
    }

    private static func seconds(_ span: Nanoseconds) -> Int64 { span / Nanoseconds.nanosecondsPerSecond }
}
