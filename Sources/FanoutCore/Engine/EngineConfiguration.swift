/// Every knob of the core engine, with the defaults of the README's "Configuration" (the rules they
/// tune: docs/design.md §3). All durations in nanoseconds.
public struct EngineConfiguration: Sendable {
    /// Per-activity targets of apps not listed in `frequentUpdatesApps`.
    public var activityBudget = BudgetSettings.standard
    /// Per-activity targets of apps in `frequentUpdatesApps`.
    public var frequentUpdatesBudget = BudgetSettings.frequentUpdates
    public var frequentUpdatesApps: Set<String> = []
    /// Broadcast channels.
    public var broadcastBudget = BudgetSettings.broadcast
    /// One bucket per push-to-start token; starts wait for credit rather than being wasted.
    public var pushToStartBudget = BudgetSettings.pushToStart

    /// stale-date when the producer gave none: event timestamp + this (seconds).
    public var defaultStaleAfterSeconds: Int64 = 15 * 60
    /// How long an activity-lane update waits for a usable token before it is dead-lettered `no-token`.
    public var tokenWait: Nanoseconds = .seconds(30)
    /// Event ids remembered per partition for duplicate detection.
    public var dedupeWindowPerPartition = 8192

    /// Meaning rules per ActivityKit attributes type.
    public var meaningProfiles: [String: MeaningProfile] = [:]
    /// Used when the target's attributes type is unknown or has no profile.
    public var defaultMeaning = MeaningProfile()
    /// Attributes type of an app's activities when no start event told us (activities started on device).
    public var attributesTypeByApp: [String: String] = [:]
    /// Bundle id for events without `app` (allowed when exactly one app is configured).
    public var defaultApp: String?

    /// Retry backoff per target: full jitter over `min(cap, base * 2^(attempt-1))`; a retry-after from
    /// APNs is a floor, honoured up to `backoffCap`.
    public var backoffBase: Nanoseconds = .milliseconds(500)
    public var backoffCap: Nanoseconds = .minutes(5)
    /// When APNs answers a lane again after an outage (a send of that lane is delivered or otherwise
    /// answered over HTTP), targets of the lane backed off by transport failures or 5xx are re-armed
    /// to retry at a uniformly random point within this window, instead of each waiting out a backoff
    /// that may have grown to `backoffCap`. 0 retries them all at once. A retry-after APNs gave stays a floor.
    /// During the outage each lane keeps one retry due at least every `max(recoveryRamp, 1 s)` (a probe),
    /// so the recovery is noticed even when every backoff grew long.
    public var recoveryRamp: Nanoseconds = .seconds(10)
    /// A lane whose every send has failed lane-wide (no HTTP answer, or 5xx) for this long is reported
    /// failing (`.laneFailing`: the worker is not ready); the first HTTP answer reports it recovered.
    public var laneFailingAfter: Nanoseconds = .seconds(30)
    /// How often a paused app (configuration error) is probed with one send.
    public var configProbeInterval: Nanoseconds = .seconds(60)

    /// `apns-expiration` on the broadcast lane: `true` sends 0 (required on no-storage channels),
    /// `false` uses the stale-date.
    public var broadcastExpirationImmediate = true

    /// Backpressure bounds (`regulate`): a partition is paused when its window of uncommitted records,
    /// its sends in flight, or its lane's totals reach these, and resumed when every measure is below
    /// `resumeRatio` of its bound. Each lane is held to the per-lane bounds on its own, so a flood or an
    /// APNs outage on one lane never pauses the other lane's intake.
    public var maxIncompletePerPartition = 20_000
    public var maxInFlightPerPartition = 2_000
    public var maxInFlightPerLane = 2_000
    public var maxIncompletePerLane = 200_000
    public var resumeRatio = 0.5
    /// Per lane (`Lane.slot`): sends the worker's APNs client of the lane surely takes at once (its
    /// queue; the worker sets it). A target ready to send when its lane is full waits its turn
    /// (`laneWaiting`) instead of being handed to a client that would refuse it into a retry backoff.
    public var sendCapacityPerLane: [Int] = [.max, .max]

    /// How often `tick` emits `.commit` with the commit points that moved (a quarter of it after the
    /// last commit once every record read is settled: `commitWhenDrained`); nil: never (the owner
    /// calls `commitPoints()` itself, as tests and benchmarks do).
    public var commitInterval: Nanoseconds?
    /// How long after one of this member's heartbeats its answer may still be on the way: no
    /// `.commit` is offered in that time (`FanoutEngine.heartbeatSent`). An answer saying the group is
    /// rebalancing makes librdkafka send a JoinGroup at once; a commit handed to librdkafka after
    /// that answer arrived goes out behind the JoinGroup, is answered ILLEGAL_GENERATION once the
    /// group has moved on, and librdkafka 2.0.2 then drops every partition of the member, kept ones
    /// too (librdkafka issue #4059; docs/design.md §4). nil: heartbeats are not reported.
    public var heartbeatAnswerWindow: Nanoseconds?
    /// How long a revoked partition waits for its sends in flight before it is drained anyway
    /// (their offsets stay uncommitted; the next owner replays them).
    public var revokeDrainTimeout: Nanoseconds = .seconds(3)

    /// How long an ended target is remembered after its end was delivered or resolved, or after the
    /// last event for it, whichever is later: while it is, later events for it are dropped as
    /// after-end. Then it is forgotten and its activity's token retired, so a later event for the key
    /// waits for a new token (`tokenWait`) and is dead-lettered `no-token`, never sent to the ended
    /// activity (see `FanoutEngine+Retention.swift`). 0 forgets it as soon as its end is done.
    public var endedRetention: Nanoseconds = .minutes(10)
    /// Targets tracked at most: making room for a new one past this evicts the least recently active
    /// idle targets (never one that holds work), each losing its budget memory. Sized so a worker
    /// with this many activities, each with a registered token, stays well under 512 MiB (≈350 bytes
    /// an activity: README, "cost against what is tracked").
    public var maxTrackedTargets = 1_000_000
    /// Idle targets (nothing pending or in flight) are forgotten after this long without activity.
    public var forgetIdleAfter: Nanoseconds = .hours(12)
    /// The idle sweep looks at every target slot once per this interval, a tenth of it at a time.
    public var sweepInterval: Nanoseconds = .minutes(10)

    /// Seed of the jitter generator (the worker passes something random; simulations a fixed seed).
    public var randomSeed: UInt64 = 0x5eed

    /// Hand per-target state over between owners through a compacted changelog (docs/design.md §11):
    /// every delivered activity send is saved (`.saveState`) before the offsets it covers complete, an
    /// assigned activity partition restores its state (`.restoreState`) before it sends, and a
    /// forgotten target's record is deleted (`.forgetState`).
    public var handoffState = false

    public init() {}

    func budget(lane: Lane, app: String) -> BudgetSettings {
        if lane == .broadcast { return broadcastBudget }
        return frequentUpdatesApps.contains(app) ? frequentUpdatesBudget : activityBudget
    }
}

/// A setting the engine cannot work with, named with the value given and what to do.
public struct EngineConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var setting: String
    public var description: String
}

extension EngineConfiguration {
    /// Checks every knob; throws on the first that cannot work.
    public func validate() throws(EngineConfigurationError) {
        func require(_ condition: Bool, _ setting: String, _ message: String) throws(EngineConfigurationError) {
            if !condition { throw EngineConfigurationError(setting: setting, description: "\(setting): \(message)") }
        }
        try require(tokenWait > 0, "token_wait", "must be positive (default 30 s): updates wait this long for a push token")
        try require(defaultStaleAfterSeconds > 0, "default_stale_after", "must be positive (default 900 s)")
        try require(dedupeWindowPerPartition >= 0, "dedupe_window", "must not be negative (0 turns id-based duplicate detection off)")
        try require(backoffBase > 0, "backoff_base", "must be positive")
        try require(backoffCap >= backoffBase, "backoff_cap", "must be at least backoff_base")
        try require(recoveryRamp >= 0, "recovery_ramp", "must not be negative (0 retries every backed-off target at once)")
        try require(laneFailingAfter > 0, "apns.lane_failing_after", "must be positive")
        try require(configProbeInterval > 0, "config_probe_interval", "must be positive: a paused app is probed this often")
        try require(maxIncompletePerPartition > 1, "max_pending_per_partition", "must be above 1")
        try require(maxInFlightPerPartition > 1, "max_in_flight_per_partition", "must be above 1")
        try require(maxIncompletePerLane > 1, "max_pending_targets", "must be above 1")
        try require(maxInFlightPerLane > 1, "max_in_flight", "must be above 1")
        try require(sendCapacityPerLane.count == 2 && sendCapacityPerLane.allSatisfy { $0 >= 1 }, "send_capacity", "needs one capacity of at least 1 per lane")
        try require(resumeRatio > 0 && resumeRatio < 1, "resume_ratio", "must be between 0 and 1 (exclusive)")
        try require(commitInterval.map { $0 > 0 } ?? true, "commit_interval", "must be positive")
        try require(heartbeatAnswerWindow.map { $0 > 0 } ?? true, "heartbeat answer window", "must be positive")
        try require(revokeDrainTimeout >= 0, "revoke_drain_timeout", "must not be negative")
        try require(sweepInterval > 0 && forgetIdleAfter > 0, "forget_idle_after", "idle retention and sweep interval must be positive")
        try require(endedRetention >= 0, "ended_retention", "must not be negative (0 forgets an ended activity as soon as its end is done)")
        try require(maxTrackedTargets >= 1, "max_tracked_targets", "must be at least 1")
        for (app, type) in attributesTypeByApp.sorted(by: { $0.key < $1.key }) {
            try require(meaningProfiles[type] != nil, "attributes_type_by_app",
                        "app '\(app)' names attributes type '\(type)', which has no meaning profile; add one or fix the name")
        }
        for (type, profile) in [("*", defaultMeaning)] + meaningProfiles.sorted(by: { $0.key < $1.key }) {
            try require(Set(profile.progressFields).count == profile.progressFields.count, "meaning_profiles",
                        "'\(type)' lists a progress field twice")
        }
    }
}

extension EngineConfiguration {
    /// `heartbeatAnswerWindow` for a member heartbeating every `heartbeatInterval` (docs/design.md §4):
    /// half of it, at most 500 ms, at least 1 ms, so commits always have a window between heartbeats.
    public static func heartbeatAnswerWindow(heartbeatInterval: Nanoseconds) -> Nanoseconds {
        max(.milliseconds(1), min(.milliseconds(500), heartbeatInterval / 2))
    }
}
