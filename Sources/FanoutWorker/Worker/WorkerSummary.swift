import FanoutCore

/// What a worker has done since it started: for `fanout demo`'s closing report, tests and logs.
public struct WorkerSummary: Sendable, Hashable {
    /// Kafka records read from activity-updates and broadcast-updates.
    public var eventsIn = 0
    /// Events accepted by the decoder and handed to the engine.
    public var eventsAccepted = 0
    /// APNs sends attempted, by lane (`activity` / `broadcast`) and priority (5 / 10).
    public var sends: [SendKey: Int] = [:]
    /// Sends APNs answered 200, by lane and priority.
    public var delivered: [SendKey: Int] = [:]
    /// Events completed by a send that carried a newer state (latest state wins).
    public var coalesced = 0
    /// Events done without a send: duplicate, not newer, after end, ended before start.
    public var dropped: [String: Int] = [:]
    /// Records written to a dead-letter topic (acknowledged), by reason code.
    public var deadLettered: [String: Int] = [:]
    /// Records written to activity-token-feedback (acknowledged).
    public var feedbackRecords = 0
    /// Token registrations and tombstones applied from activity-tokens.
    public var tokenUpdates = 0
    /// Last committed offset (next to read) per `topic/partition`.
    public var committed: [String: Int64] = [:]
    /// Successful offset commits.
    public var commits = 0

    public struct SendKey: Sendable, Hashable, CustomStringConvertible {
        public var lane: Lane
        public var priority: Int
        public init(lane: Lane, priority: Int) {
            self.lane = lane
            self.priority = priority
        }
        public var description: String { "\(lane)/p\(priority)" }
    }

    public init() {}

    public var totalSends: Int { sends.values.reduce(0, +) }
    public var totalDelivered: Int { delivered.values.reduce(0, +) }
    public var totalDeadLettered: Int { deadLettered.values.reduce(0, +) }
}
