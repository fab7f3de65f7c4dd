/// Where an assigned partition is in its life with this worker (docs/design.md §5):
///
/// ```
/// assigned ─► readingTokens ─(tokens and state caught up, same assignment)─► live ─(revoke)─► closing ─► drained
///     └──────────(broadcast lane: no tokens to read)──────────────►┘      (lost: dropped at once, nothing committed)
/// ```
///
/// Events are received and coalesced in every phase but `closing`; sends start only while `live`.
public enum PartitionPhase: String, Sendable, Hashable {
    /// An activity partition whose activity-tokens partition is being read from the beginning (and,
    /// with a state changelog, its `fanout-state` partition): without those registrations an update
    /// would wait for a token it already has, and without that state a handoff would reset budgets.
    case readingTokens = "reading-tokens"
    case live
    /// Revoked: no new send starts; the revoke is drained when its sends in flight are answered
    /// (or `revokeDrainTimeout` passed).
    case closing
}

/// One assignment of a partition to this worker. A token catch-up or commit answer tagged with an
/// earlier assignment of the same partition never touches a later one.
public struct AssignmentID: Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
}

/// One assigned partition: its phase, offset tracker, dedupe window, sends in flight, fetch state
/// and commit bookkeeping.
struct PartitionState: Sendable {
    var id: PartitionID
    var assignment: AssignmentID
    var phase: PartitionPhase
    var tracker = OffsetTracker()
    var dedupe: DedupeWindow
    var inFlight = 0
    /// Dead letters and feedback records of this partition the worker has not had acknowledged yet
    /// (keys of `FanoutEngine.resolutions`), so forgetting the partition removes only its own.
    var resolutions: Set<UInt64> = []
    /// Head of the list of this partition's targets (`TargetState.nextInPartition`; -1: none) and its length.
    var firstTarget: Int32 = -1
    var targetCount = 0
    /// Fixed when the slot is created (counts per lane must add and subtract in the same lane).
    var lane: Lane
    /// Whether the lane is known from the assignment or the first event (else assumed activity).
    var laneKnown: Bool
    /// The commit point last handed out (`commitPoints`, `.commit`), not necessarily acknowledged.
    var lastReportedCommit: Int64?
    /// The commit point Kafka acknowledged last (or the position the partition was resumed from).
    var committed: Int64?
    /// When the worker was given the partition, or `.min` when it was never said.
    var assignedAt: Nanoseconds = .min
    /// While `closing`: when the revoke is drained even with sends still in flight.
    var drainBy: Nanoseconds = .max
    /// While `readingTokens`: whether activity-tokens was read to its high watermark, and whether the
    /// handed-over state was restored (`FanoutEngine.stateRestored`; true when there is none to read).
    /// The partition goes live once both are.
    var tokensRead = false
    var stateRestored = true
    /// Targets with work that wait for the partition to go live: (slot, incarnation).
    var held: [(slot: Int32, incarnation: UInt32)] = []
    /// Targets that held a minor update back for max_quiet (a pause relieves them): (slot, incarnation).
    var heldMinor: [(slot: Int32, incarnation: UInt32)] = []
    /// Under backpressure (`regulate`).
    var pressured = false
    /// What the worker was last told: fetching paused (true) or running.
    var fetchPaused = false
    /// Records below this offset were in the log when this member got the partition, so a previous
    /// owner may have handled them — sent a start among them (`FanoutEngine.replayBoundary`); -1 unknown.
    var replayedBelow: Int64 = -1

    /// Closing and nothing of it is outstanding: no send in flight, no record awaiting Kafka's acknowledgement.
    var isDrained: Bool { inFlight == 0 && resolutions.isEmpty }
}
