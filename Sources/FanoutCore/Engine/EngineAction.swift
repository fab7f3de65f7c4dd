import APNsModel

/// Identifies a dead letter or feedback record whose Kafka produce the worker must acknowledge with
/// `FanoutEngine.resolve(_:now:)` before the offsets it covers complete.
public struct ResolutionID: Sendable, Hashable {
    public var rawValue: UInt64
}

/// Where a push goes.
public enum Destination: Sendable, Hashable {
    /// `/3/device/<token.hex>`: the activity's own update token.
    case activityToken(PushToken)
    /// `/3/device/<token.hex>`: the user's push-to-start token (start events only).
    case pushToStartToken(PushToken)
    /// `/4/broadcasts/apps/<bundle>` with `apns-channel-id`.
    case channel(String)
}

/// A record for `activity-token-feedback`.
public struct TokenFeedback: Sendable, Hashable {
    public var resolution: ResolutionID
    public var key: String
    public var token: PushToken
    public var app: String
    public var status: Int
    public var reason: String
    /// APNs's 410 timestamp (milliseconds), when given.
    public var apnsTimestampMillis: Int64?
    /// When Fanout saw it (UNIX seconds).
    public var observedAt: Int64
    /// The input records the send covered: their trace contexts go on the record (docs/design.md §12).
    public var sources: [EventSource] = []
}

/// Events to produce to the dead-letter topic.
public struct DeadLetter: Sendable, Hashable {
    public var resolution: ResolutionID
    /// Every input record concerned; the worker writes each one's original bytes.
    public var sources: [EventSource]
    public var reason: RejectionReason
    public var detail: String
    /// The newest state involved, for context.
    public var target: String
    public var app: String?
}

/// Why an event was done without a send of its own (metrics and logs).
public enum DropReason: String, Sendable, Hashable {
    case duplicateID = "duplicate-id"
    case notNewer = "not-newer"
    case afterEnd = "after-end"
    /// A start and its end were both pending: nothing was ever shown, nothing to send.
    case endedBeforeStart = "ended-before-start"
}

/// What the engine wants done.
public enum EngineAction: Sendable, Hashable {
    case send(SendRequest)
    /// Produce to the DLQ, then call `resolve(resolution)`.
    case deadLetter(DeadLetter)
    /// Produce to activity-token-feedback, then call `resolve(resolution)`.
    case feedback(TokenFeedback)
    /// Informational: the event is already done (its offset completed).
    case dropped(EventSource, DropReason)
    /// Stop sending for this app and report not-ready; its offsets stay uncommitted.
    case pauseApp(app: String, reason: String)
    /// The probe succeeded: the app's configuration works again.
    case resumeApp(app: String)

    /// Every send of `lane` has failed lane-wide (no HTTP answer, or 5xx) since `since` for longer than
    /// `laneFailingAfter`: report not ready with `reason` (the last failure). Said once per episode.
    case laneFailing(lane: Lane, since: Nanoseconds, reason: String)
    /// APNs answered the failing lane over HTTP again.
    case laneRecovered(lane: Lane, after: Nanoseconds)

    // The partition lifecycle (docs/design.md §5): the worker executes these and reports back.

    /// Read partition `partition` of activity-tokens from the beginning and apply it live; report
    /// `tokensCaughtUp(partition:assignment:now:into:)` once the high watermark seen at this request is reached.
    case followTokens(partition: Int32, assignment: AssignmentID)
    /// Stop reading that activity-tokens partition (its activity partition was revoked or lost), and
    /// its state changelog partition if that is still being read (`.restoreState`).
    case unfollowTokens(partition: Int32)
    /// Stop fetching these partitions (backpressure). A pause that failed is reported with `fetchControlFailed`.
    case pauseFetching([PartitionID])
    /// Fetch these partitions again.
    case resumeFetching([PartitionID])
    /// Commit these points without waiting for the answer; report it with
    /// `commitAnswered(_:failed:refusedForRebalanceIn:)`, handing back `round` if Kafka refused it
    /// because the group is rebalancing (`round`: how many times the group had settled when it was offered).
    case commit([CommitPoint], round: UInt64)
    /// A revoked partition is drained and forgotten: commit `commit` (when given) before giving it up.
    case revokeDrained(PartitionID, commit: CommitPoint?)
    /// This assignment of a partition is over (lost, drained, or given back and assigned again): a
    /// send decided under it that is still queued must not be written (`SendRequest.assignment`).
    /// Comes before the partition's `.revokeDrained`.
    case assignmentEnded(AssignmentID)
    /// With `handoffState`: read partition `partition` of the state changelog from the beginning up to
    /// the high watermark seen at this request, then report what it holds with
    /// `stateRestored(partition:assignment:records:now:into:)` (sends wait for it).
    case restoreState(partition: Int32, assignment: AssignmentID)
    /// Produce `handoff` to the state changelog (key `handoff.key`, partition `partition.partition`),
    /// then call `resolve(resolution)`: the delivered send's offsets complete only once the next owner
    /// can read what it did.
    case saveState(TargetHandoff, partition: PartitionID, resolution: ResolutionID)
    /// The target is forgotten (ended and retained long enough, or idle): produce a tombstone for `key`
    /// to partition `partition` of the state changelog, so compaction drops its record. Nothing waits for it.
    case forgetState(key: String, partition: Int32)
    /// Look up the broadcast channel's message-storage policy, then report `channelPolicyKnown`. The
    /// channel's next send waits for the answer (its `apns-expiration` depends on it).
    case lookUpChannelPolicy(app: String, channel: String)
}

/// A broadcast channel's message-storage policy, fixed when the channel is created.
public enum ChannelStoragePolicy: String, Sendable, Hashable {
    /// Policy 0: nothing stored; `apns-expiration` must be 0.
    case noStorage = "none"
    /// Policy 1: the most recent message is stored up to 8 hours.
    case mostRecent = "most-recent"

    /// APNs keeps a stored broadcast at most 8 hours.
    public static let maxStorageSeconds: Int64 = 8 * 3600

    /// `apns-expiration` for a broadcast: 0 unless the channel is known to store messages and the
    /// state is not stale yet; then the stale date, at most 8 hours ahead (UNIX seconds).
    public static func expiration(policy: ChannelStoragePolicy?, staleDate: Int64, now: Int64) -> Int64 {
        guard policy == .mostRecent, staleDate > now else { return 0 }
        return min(staleDate, now + maxStorageSeconds)
    }
}

/// Offset to commit for a partition (Kafka's next offset to read).
public struct CommitPoint: Sendable, Hashable {
    public var partition: PartitionID
    public var offset: Int64

    public init(partition: PartitionID, offset: Int64) {
        self.partition = partition
        self.offset = offset
    }
}

/// Counts for backpressure decisions.
public struct Load: Sendable, Hashable {
    /// Offsets read and not yet done.
    public var incomplete: Int
    /// Sends issued and not yet completed.
    public var inFlight: Int

    public init(incomplete: Int, inFlight: Int) {
        self.incomplete = incomplete
        self.inFlight = inFlight
    }
}
