import APNsModel

/// Everything the engine remembers about one target (activity key or channel) — docs/design.md §3.
///
/// One contiguous record per target, laid out in the order the per-event path reads it (key check,
/// coalescing, then the send decision). 216 bytes (`MemoryLayout<TargetState>.stride`, checked by a
/// test), plus the key's heap bytes when it is longer than 15 UTF-8 bytes and 16–32 bytes of
/// `TargetTable` index. The pending state lives in `FanoutEngine.pendings` and the in-flight send in
/// `FanoutEngine.inFlight`, each only while it exists; cold debug fields come last.
struct TargetState: Sendable {
    // Lookup and coalescing (receive).
    var key: String
    /// Newest timestamp accepted (pending, in flight or sent); later events must be newer.
    var latestAccepted: Int64 = -1
    /// The last event for the target, or the end of its last piece of work, whichever came later:
    /// where idle and ended retention count from.
    var lastActiveAt: Nanoseconds
    var partitionSlot: Int32
    /// The newest unsent state and the offsets it covers, in `FanoutEngine.pendings`; -1: none.
    var pendingIndex: Int32 = -1
    var profileIndex: UInt16
    var appIndex: UInt16
    var lane: Lane
    /// Broadcast targets: what is known of the channel's storage policy.
    var channelPolicy = ChannelPolicyState.unknown
    var budgetClass: BudgetClass
    /// The yes-or-no facts below, two bytes for all of them (a byte each, with the padding around them,
    /// made every target record 16 bytes larger).
    private var flags: Flags = [.live, .recentlyActive]
    var attempts: UInt16 = 0
    /// Bumped whenever a timer is (re)armed or the slot is reused; stale heap entries are skipped.
    var generation: UInt32
    var inFlightSendID: UInt64 = 0
    // The send decision (evaluate).
    /// Time of the last send attempt (min_interval is measured from it).
    var lastSendAt: Nanoseconds = Int64.min / 4
    var backoffUntil: Nanoseconds = Int64.min / 4
    /// Timestamp of the last delivered state, or -1.
    var lastSentTimestamp: Int64 = -1
    var lastDeliveredAt: Nanoseconds = Int64.min / 4
    var lastSentSummary = ContentSummary.empty
    /// Where `tokens` held this target's key at the last send (`TokenRegistry.usableToken(for:notBefore:hint:)`), or -1.
    var tokenEntry: Int32 = -1
    var bucket: TokenBucket
    /// Armed timer, or `Int64.max`.
    var timerAt: Nanoseconds = .max
    /// Since when a pending update waits for a usable token, or -1.
    var tokenWaitSince: Nanoseconds = -1
    /// After a start was delivered, only tokens registered at or after its timestamp belong to the new activity.
    var tokenNotBefore: Int64 = 0
    // Cold: slot reuse, bookkeeping and the debug snapshot.
    /// Bumped when the slot is reused, so parked references to a former occupant are skipped.
    var incarnation: UInt32
    var sends: UInt32 = 0
    var deliveries: UInt32 = 0
    /// Neighbours in its partition's list of targets (`PartitionState.firstTarget`; -1: none), so a
    /// revoke visits the partition's own targets only.
    var previousInPartition: Int32 = -1
    var nextInPartition: Int32 = -1
    /// The last APNs outcome in 4 bytes (kind and HTTP status), for the debug snapshot.
    var lastOutcome: OutcomeSummary?
    var lastOutcomeAt: Nanoseconds = 0

    private struct Flags: OptionSet, Sendable {
        let rawValue: UInt16
        static let live = Flags(rawValue: 1 << 0)
        static let endAccepted = Flags(rawValue: 1 << 1)
        static let ended = Flags(rawValue: 1 << 2)
        static let parked = Flags(rawValue: 1 << 3)
        static let heldForPartition = Flags(rawValue: 1 << 4)
        static let listedAsHeldMinor = Flags(rawValue: 1 << 5)
        static let recentlyActive = Flags(rawValue: 1 << 6)
        static let outageListed = Flags(rawValue: 1 << 7)
        static let relieved = Flags(rawValue: 1 << 8)
        static let busy = Flags(rawValue: 1 << 9)
        static let retentionScheduled = Flags(rawValue: 1 << 10)
        static let waitingForLane = Flags(rawValue: 1 << 11)
        static let inChangelog = Flags(rawValue: 1 << 12)
        static let sendUnsaved = Flags(rawValue: 1 << 13)
    }

    private mutating func set(_ flag: Flags, _ on: Bool) {
        if on { flags.insert(flag) } else { flags.remove(flag) }
    }

    /// The slot holds a target (false: free, waiting for reuse).
    var live: Bool {
        get { flags.contains(.live) }
        set { set(.live, newValue) }
    }
    /// Set when an end was accepted: later events are resolved at once.
    var endAccepted: Bool {
        get { flags.contains(.endAccepted) }
        set { set(.endAccepted, newValue) }
    }
    /// The end was delivered (or resolved): nothing more is ever sent.
    var ended: Bool {
        get { flags.contains(.ended) }
        set { set(.ended, newValue) }
    }
    /// Listed in its paused app's `parked` list.
    var parked: Bool {
        get { flags.contains(.parked) }
        set { set(.parked, newValue) }
    }
    /// Listed in its partition's `held` list (the partition is not live yet).
    var heldForPartition: Bool {
        get { flags.contains(.heldForPartition) }
        set { set(.heldForPartition, newValue) }
    }
    /// Listed in its partition's `heldMinor` list (a minor update held for max_quiet).
    var listedAsHeldMinor: Bool {
        get { flags.contains(.listedAsHeldMinor) }
        set { set(.listedAsHeldMinor, newValue) }
    }
    /// Active since the eviction hand last passed (`FanoutEngine.evictIdleTarget`): spared once.
    var recentlyActive: Bool {
        get { flags.contains(.recentlyActive) }
        set { set(.recentlyActive, newValue) }
    }
    /// Listed in its lane's `outageBackoffs` (backed off by a lane-wide failure, re-armed on recovery).
    var outageListed: Bool {
        get { flags.contains(.outageListed) }
        set { set(.outageListed, newValue) }
    }
    /// Its partition is under backpressure: a held minor update goes without waiting for max_quiet.
    var relieved: Bool {
        get { flags.contains(.relieved) }
        set { set(.relieved, newValue) }
    }
    /// Counted in `FanoutEngine.laneBusy`: it has a pending update or a send in flight.
    var busy: Bool {
        get { flags.contains(.busy) }
        set { set(.busy, newValue) }
    }
    /// Ended and scheduled in `FanoutEngine.endedRetention` to be forgotten.
    var retentionScheduled: Bool {
        get { flags.contains(.retentionScheduled) }
        set { set(.retentionScheduled, newValue) }
    }
    /// Listed in its lane's `laneWaiting` queue (ready to send while the lane was full).
    var waitingForLane: Bool {
        get { flags.contains(.waitingForLane) }
        set { set(.waitingForLane, newValue) }
    }
    /// Has a record in the state changelog (saved or restored): forgetting it deletes the record.
    var inChangelog: Bool {
        get { flags.contains(.inChangelog) }
        set { set(.inChangelog, newValue) }
    }
    /// A send started since the target's state was last saved (`handoffState`): its priority-10 credit
    /// and `lastSendAt` are spent but in no record yet, because the send was not delivered (it failed,
    /// timed out, or is in flight). An orderly revoke saves such targets before the partition goes.
    var sendUnsaved: Bool {
        get { flags.contains(.sendUnsaved) }
        set { set(.sendUnsaved, newValue) }
    }

    init(key: String, lane: Lane, appIndex: UInt16, profileIndex: UInt16, partitionSlot: Int32,
         generation: UInt32, incarnation: UInt32, now: Nanoseconds, budgetClass: BudgetClass, budget: BudgetSettings) {
        self.budgetClass = budgetClass
        self.key = key
        self.lane = lane
        self.appIndex = appIndex
        self.profileIndex = profileIndex
        self.partitionSlot = partitionSlot
        self.generation = generation
        self.incarnation = incarnation
        self.lastActiveAt = now
        self.bucket = TokenBucket(capacity: budget.burst, now: now)
    }

    var hasPending: Bool { pendingIndex >= 0 }

    /// Nothing of it may be lost: a pending update (whose offsets are incomplete), a send in flight, a
    /// place in a list of targets waiting to send (a paused app, a partition reading its tokens), or
    /// a channel lookup in progress. Only a target that is none of these may be evicted or forgotten.
    var holdsWork: Bool {
        pendingIndex >= 0 || inFlightSendID != 0 || parked || heldForPartition || channelPolicy == .lookingUp
    }
}

/// What the engine knows of a broadcast channel's message-storage policy.
enum ChannelPolicyState: UInt8, Sendable {
    /// Not asked yet (or asked, answered unknown, and to be asked again at the next send).
    case unknown
    /// `.lookUpChannelPolicy` was emitted; the send waits for `channelPolicyKnown`.
    case lookingUp
    /// The answer came: unknown (expiration 0 this once), no storage, or most recent.
    case answeredUnknown, noStorage, mostRecent

    var policy: ChannelStoragePolicy? {
        switch self {
        case .noStorage: .noStorage
        case .mostRecent: .mostRecent
        case .unknown, .lookingUp, .answeredUnknown: nil
        }
    }
}

/// Which budget settings a target uses, decided once when it is created.
enum BudgetClass: UInt8, Sendable {
    case activity, frequentUpdates, broadcast
}

/// A send the engine handed out and has not heard back about.
struct InFlightSend: Sendable {
    var slot: Int32
    var incarnation: UInt32
    var update: PendingUpdate
    var destination: Destination
    var priority: Int
    var isProbe: Bool
    var partitionSlot: Int32
}

/// An app stopped by a configuration error, probed with one send every `configProbeInterval`.
struct PausedApp: Sendable {
    var reason: String
    var probeAt: Nanoseconds
    var probeSendID: UInt64 = 0
    /// Targets waiting for the app to resume: (slot, incarnation).
    var parked: [(slot: Int32, incarnation: UInt32)] = []
}
