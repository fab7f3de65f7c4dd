import FanoutCore
import FanoutKafka

/// What the worker knows about producing to each output topic (dead-letter topics, the token
/// feedback topic): which ones are failing and how, when to say so again, and how long a record
/// waits before its next attempt. A plain value fed failures, successes and time; `RecordProducer`
/// carries out what it says.
///
/// A topic failing permanently makes the worker not ready until a produce to it succeeds; a
/// transient failure does not (librdkafka or the next attempt gets past it). Either way the
/// warning about a topic is repeated at most once per `warningInterval`, so a topic that stays
/// broken does not flood the log with one line per retry.
struct ProduceHealth: Sendable {
    struct Trouble: Sendable, Equatable {
        var failure: ProduceFailure
        /// librdkafka's words for the last error ("Broker: Topic authorization failed").
        var error: String
        var lastWarned: Nanoseconds
    }

    /// What to tell the log about a failure.
    enum Warning: Sendable, Equatable {
        /// Nothing: the topic's state was logged less than `warningInterval` ago.
        case none
        /// The topic started failing, its kind of failure changed, or `warningInterval` passed.
        case warn
    }

    static let warningInterval: Nanoseconds = 60 * Nanoseconds.nanosecondsPerSecond
    /// A permanent failure's retry delay doubles from the base up to this many times the base.
    static let permanentBackoffLimit = 30

    private(set) var troubles: [String: Trouble] = [:]

    mutating func failed(topic: String, _ failure: ProduceFailure, error: String, now: Nanoseconds) -> Warning {
        let previous = troubles[topic]
        let due = previous.map { $0.failure.kind != failure.kind || now - $0.lastWarned >= Self.warningInterval } ?? true
        troubles[topic] = Trouble(failure: failure, error: error, lastWarned: due ? now : previous!.lastWarned)
        return due ? .warn : .none
    }

    /// A produce to `topic` was acknowledged; returns the trouble it ends (to be logged once), if any.
    mutating func succeeded(topic: String) -> Trouble? {
        troubles.removeValue(forKey: topic)
    }

    /// One line per topic failing permanently, for readiness.
    var problems: [String] {
        troubles.filter { $0.value.failure.kind == .permanent }.sorted { $0.key < $1.key }.map { topic, trouble in
            Self.problem(topic: topic, trouble)
        }
    }

    static func problem(topic: String, _ trouble: Trouble) -> String {
        "cannot produce to \(topic): \(trouble.error) — \(trouble.failure.remedy); the offsets it covers stay uncommitted"
    }

    /// How long record attempt `attempt` (1 for the first retry) waits: `base` after a transient failure;
    /// after a permanent one, `base` doubled per attempt up to `permanentBackoffLimit` × `base`.
    static func retryDelay(after kind: ProduceFailure.Kind, attempt: Int, base: Duration) -> Duration {
        switch kind {
        case .transient: return base
        case .permanent:
            let factor = 1 << min(max(attempt - 1, 0), 5)  // 2^5 = 32 > the limit: no overflow past it
            return base * min(factor, permanentBackoffLimit)
        }
    }
}
