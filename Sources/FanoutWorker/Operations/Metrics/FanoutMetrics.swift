import FanoutCore

/// Every metric the worker exports, registered once at startup. Label values are small closed sets
/// (lane, topic, app bundle id, APNs reason, decision) — never a token, activity key or event id.
///
/// Resolve handles once where the labels are known (`sends.labels("activity", "10", "delivered")`)
/// and keep them; updating a handle is a single atomic operation.
public final class FanoutMetrics: Sendable {
    public let registry: MetricsRegistry

    /// Kafka records read. Labels: topic.
    public let eventsConsumed: CounterFamily
    /// What became of each consumed event. Labels: lane, decision (see `Decision`).
    public let eventDecisions: CounterFamily
    /// Events written to a dead-letter topic. Labels: topic (the source), reason (`fanout-error` code).
    public let deadLetters: CounterFamily
    /// APNs sends by result. Labels: lane, priority ("5"|"10"), outcome (see `SendResult`).
    public let sends: CounterFamily
    /// Non-200 APNs responses. Labels: lane, status, reason (APNs reason string or transport error).
    public let apnsErrors: CounterFamily
    /// Request start to response, seconds. Labels: lane.
    public let apnsLatency: HistogramFamily
    /// Streams in flight. Labels: lane.
    public let apnsInFlight: GaugeFamily
    /// Sends waiting for a stream. Labels: lane.
    public let apnsQueued: GaugeFamily
    /// Open HTTP/2 connections. Labels: lane.
    public let apnsConnections: GaugeFamily
    /// 1 while every send of the lane has failed lane-wide for `apns.lane_failing_after` (what `/readyz`
    /// reports), else 0. Labels: lane.
    public let apnsLaneFailing: GaugeFamily
    /// End reports of the transport that matched no request in flight (each ignored, never completing
    /// another request). Labels: lane.
    public let apnsUnmatchedEnds: CounterFamily
    /// APNs connections put into backoff by a failure (not by one request timing out while the
    /// connection answers others). Labels: lane.
    public let apnsConnectionBackoffs: CounterFamily
    /// Times the process was found not to have run for half a session timeout (`SendGate`).
    public let sendStalls: CounterFamily
    /// Rounds of latest-offset requests that woke librdkafka's stopped fetcher while a backlog was read
    /// (`FetchNudge`). Labels: client ("intake", "tokens"), result ("sent", "failed").
    public let kafkaFetchNudges: CounterFamily
    /// 1 while no send is written after such a stall, else 0.
    public let sendsHeld: GaugeFamily
    public let commitsHeld: GaugeFamily
    public let commitWaiting: GaugeFamily
    /// Sends withdrawn before they were written: decided under an assignment that ended meanwhile. Labels: lane.
    public let sendsWithdrawn: CounterFamily
    /// Sends made at priority 5 because the target's priority-10 budget was empty. Labels: lane.
    public let budgetDowngrades: CounterFamily
    /// Targets with a pending update or a send in flight. Labels: lane.
    public let pendingTargets: GaugeFamily
    /// Partitions paused by backpressure. Labels: topic.
    public let pausedPartitions: GaugeFamily
    /// Owned partitions reading their tokens and handed-over state before they send. Labels: topic.
    public let partitionsCatchingUp: GaugeFamily
    /// End of what was read (the high watermark while intake keeps up) minus the committed offset. Labels: topic, partition.
    public let consumerLag: GaugeFamily
    /// The offset `consumerLag` counts from: the last commit Kafka acknowledged (before the first, the
    /// first offset read). A value that stops changing while the lag is above 0 is a stalled commit.
    /// Labels: topic, partition.
    public let committedOffset: GaugeFamily
    /// Offset commits. Labels: result ("ok"|"failed").
    public let commits: CounterFamily
    /// Partition assignment changes. Labels: kind ("assigned"|"revoked"|"lost").
    public let rebalances: CounterFamily
    /// Activity keys with a known token.
    public let tokenRegistrySize: GaugeFamily
    /// Targets (activities and channels) the engine tracks.
    public let trackedTargets: GaugeFamily
    /// Targets the engine stopped tracking. Labels: reason ("ended": `engine.ended_retention` after
    /// its end; "idle": 12 h without activity; "evicted": past `engine.max_tracked_targets`).
    public let targetsForgotten: CounterFamily
    /// Records of the state changelog (docs/design.md §11). Labels: kind ("saved", "forgotten": a
    /// tombstone, "restored", "unreadable-<code>": skipped while restoring).
    public let stateRecords: CounterFamily
    /// Records produced to activity-token-feedback. Labels: app, reason.
    public let feedbackRecords: CounterFamily
    /// Failed attempts to produce a dead letter or feedback record (each is retried). Labels: topic,
    /// kind ("permanent"|"transient", see `ProduceFailure`).
    public let produceFailures: CounterFamily
    /// APNs configuration errors (bad key, topic, …). Labels: app, reason.
    public let appConfigErrors: CounterFamily
    /// 1 while sending for the app is stopped by a configuration error, else 0. Labels: app.
    public let appBlocked: GaugeFamily
    /// JWTs minted. Labels: app.
    public let jwtRefreshes: CounterFamily
    /// Bytes lying free in the process heap at the last look (`HeapTrimmer`, once a second).
    public let heapFreeBytes: GaugeFamily
    /// Times free heap pages were returned to the kernel (`ProcessHeap.trim`).
    public let heapTrims: CounterFamily
    /// Resident memory of the process in bytes at the last look (`HeapTrimmer`, once a second).
    public let residentMemoryBytes: GaugeFamily
    /// 1 when `/readyz` would answer 200, else 0; computed at each `/metrics` scrape (`Worker.isReady`).
    public let ready: GaugeFamily
    /// Broadcasts APNs answered ChannelNotRegistered (their events are dead-lettered). Labels: app.
    public let channelNotRegistered: CounterFamily
    /// The per-lane handles of the send and decision paths (`lane(_:)`).
    private let laneHandles: [LaneMetrics]

    /// Values of the `decision` label of `eventDecisions`.
    public enum Decision: String, Sendable, CaseIterable {
        case sent, coalesced, duplicate, stale
        case afterEnd = "after_end"
        case deadLettered = "dead_lettered"
        case tokenGone = "token_gone"
        case noToken = "no_token"
    }

    /// Values of the `outcome` label of `sends` (one per `SendOutcome` case).
    public enum SendResult: String, Sendable, CaseIterable {
        case delivered
        case tokenGone = "token_gone"
        case retry
        case refreshAuth = "refresh_auth"
        case badPayload = "bad_payload"
        case configError = "config_error"
    }

    /// Upper bounds for `fanout_apns_latency_seconds`.
    public static let latencyBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    public init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        eventsConsumed = registry.counter("fanout_events_consumed_total", help: "Kafka records read, by topic.", labels: ["topic"])
        eventDecisions = registry.counter("fanout_event_decisions_total",
                                          help: "What became of consumed events: sent, coalesced, duplicate, stale, after_end, dead_lettered, token_gone, no_token.",
                                          labels: ["lane", "decision"])
        deadLetters = registry.counter("fanout_dead_letters_total", help: "Events written to a dead-letter topic, by source topic and reason code.",
                                       labels: ["topic", "reason"])
        sends = registry.counter("fanout_apns_sends_total", help: "APNs sends by lane, priority and outcome.", labels: ["lane", "priority", "outcome"])
        apnsErrors = registry.counter("fanout_apns_errors_total", help: "Non-200 APNs responses and transport failures, by lane, status and reason.",
                                      labels: ["lane", "status", "reason"])
        apnsLatency = registry.histogram("fanout_apns_latency_seconds", help: "APNs request latency from send to response, by lane.",
                                         labels: ["lane"], buckets: Self.latencyBuckets)
        kafkaFetchNudges = registry.counter("fanout_kafka_fetch_nudges_total", help: "Rounds of latest-offset requests sent to wake librdkafka's fetcher, which stops while its local queue is full and looks again only up to a second later (docs/environment.md); sent while a backlog or a burst is read faster than it is fetched. By Kafka client (intake, tokens) and result (sent; failed: the request got no answer, the broker was woken all the same unless it never left).", labels: ["client", "result"])
        sendStalls = registry.counter("fanout_send_stalls_total", help: "Times this process was found not to have run for half the consumer session timeout (stopped, swapped out, starved); each holds every send until a consumer poll has let librdkafka report what the group did meanwhile.")
        sendsHeld = registry.gauge("fanout_sends_held", help: "1 while no send is written after a stall of the process (fanout_send_stalls_total), else 0.")
        commitsHeld = registry.gauge("fanout_commits_held", help: "1 while the group rebalances for this member and no offset commit is offered until it settles, else 0.")
        commitWaiting = registry.gauge("fanout_offset_commit_waiting_seconds", help: "Whole seconds the outstanding offset commit has waited for Kafka's answer (0 when none is outstanding); given up after ten commit intervals, at least 10 s.")
        sendsWithdrawn = registry.counter("fanout_sends_withdrawn_total", help: "Sends withdrawn before they were written, by lane: decided under an assignment of their partition that ended meanwhile (lost, drained or given back); the next owner sends from the last commit.", labels: ["lane"])
        apnsUnmatchedEnds = registry.counter("fanout_apns_unmatched_ends_total", help: "End reports of the HTTP/2 transport that matched no request in flight, by lane: each is ignored (it never completes another request); any at all is a transport defect worth reporting.", labels: ["lane"])
        apnsConnectionBackoffs = registry.counter("fanout_apns_connection_backoffs_total", help: "APNs connections put into backoff by a failure (reset, TLS, a GOAWAY that lost requests, no answer to a PING, or a request timeout with nothing answered since it left), by lane. A request that times out while its connection answers others does not count: it is retried and the connection keeps its streams.", labels: ["lane"])
        apnsInFlight = registry.gauge("fanout_apns_in_flight", help: "APNs streams in flight, by lane.", labels: ["lane"])
        apnsQueued = registry.gauge("fanout_apns_queued", help: "Sends waiting for an APNs stream, by lane.", labels: ["lane"])
        apnsConnections = registry.gauge("fanout_apns_connections", help: "Open HTTP/2 connections to APNs, by lane.", labels: ["lane"])
        apnsLaneFailing = registry.gauge("fanout_apns_lane_failing",
                                         help: "1 while every APNs send of the lane has failed lane-wide (no HTTP answer, or 5xx) for apns.lane_failing_after, as /readyz reports; else 0. By lane.",
                                         labels: ["lane"])
        budgetDowngrades = registry.counter("fanout_budget_downgrades_total",
                                            help: "Sends made at priority 5 because the target's priority-10 budget was empty.", labels: ["lane"])
        pendingTargets = registry.gauge("fanout_pending_targets", help: "Targets with a pending update or a send in flight, by lane.", labels: ["lane"])
        pausedPartitions = registry.gauge("fanout_paused_partitions", help: "Partitions paused by backpressure, by topic.", labels: ["topic"])
        partitionsCatchingUp = registry.gauge("fanout_partitions_catching_up", help: "Owned partitions still reading their activity-tokens partition (and fanout-state partition) from the beginning: their events are read and held, none is sent until it caught up. By topic.", labels: ["topic"])
        consumerLag = registry.gauge("fanout_consumer_lag", help: "Offsets not yet committed, by topic and partition: the high watermark of the last fetch (or the end of what this worker read, when further) minus the committed offset. Only the owner exports a partition; while it is paused the watermark stops moving.",
                                     labels: ["topic", "partition"])
        committedOffset = registry.gauge("fanout_committed_offset",
                                         help: "The offset fanout_consumer_lag counts from, by topic and partition: the last commit Kafka acknowledged (before the first, the first offset this worker read). Only the owner exports a partition; unchanged while the lag is above 0 means commits are stalled.",
                                         labels: ["topic", "partition"])
        commits = registry.counter("fanout_offset_commits_total", help: "Offset commits, by result.", labels: ["result"])
        rebalances = registry.counter("fanout_rebalances_total", help: "Partition assignment changes, by kind.", labels: ["kind"])
        tokenRegistrySize = registry.gauge("fanout_token_registry_size", help: "Activity keys with a known push token.")
        trackedTargets = registry.gauge("fanout_tracked_targets", help: "Activities and broadcast channels the engine tracks (at most engine.max_tracked_targets, plus targets with work).")
        targetsForgotten = registry.counter("fanout_targets_forgotten_total",
                                            help: "Targets the engine stopped tracking, by reason: ended (ended_retention after the end), idle (12 h without activity), evicted (least recently active idle ones past max_tracked_targets; each loses its budget memory).",
                                            labels: ["reason"])
        stateRecords = registry.counter("fanout_state_records_total",
                                        help: "Records of the fanout-state changelog, by kind: saved (a delivered send's state, before its offsets commit), forgotten (a tombstone for a forgotten target), restored (read on assignment), unreadable-<code> (skipped while restoring; that target starts with a full budget).",
                                        labels: ["kind"])
        feedbackRecords = registry.counter("fanout_token_feedback_records_total",
                                           help: "Records produced to the token feedback topic, by app and APNs reason.", labels: ["app", "reason"])
        produceFailures = registry.counter("fanout_produce_failures_total",
                                           help: "Failed attempts to produce a dead letter or token feedback record (each is retried until acknowledged), by topic and kind (permanent: the topic is missing, not writable or refuses the record; transient: timeouts, brokers down, queue full).",
                                           labels: ["topic", "kind"])
        appConfigErrors = registry.counter("fanout_app_config_errors_total",
                                           help: "APNs configuration errors (key, topic, environment), by app and reason.", labels: ["app", "reason"])
        appBlocked = registry.gauge("fanout_app_blocked", help: "1 while sending for the app is stopped by a configuration error.", labels: ["app"])
        jwtRefreshes = registry.counter("fanout_jwt_refreshes_total", help: "Provider JWTs minted, by app.", labels: ["app"])
        heapFreeBytes = registry.gauge("fanout_heap_free_bytes", help: "Bytes the allocator holds but the program does not use (jemalloc: freed pages not yet returned; glibc: free chunks, mallinfo2 fordblks), sampled once a second; above 32 MiB the free pages are returned to the kernel.")
        heapTrims = registry.counter("fanout_heap_trims_total", help: "Times free heap pages were returned to the kernel (a jemalloc purge, or glibc malloc_trim), at most once a second.")
        residentMemoryBytes = registry.gauge("fanout_resident_memory_bytes", help: "Resident memory of the process in bytes (/proc/self/statm), sampled once a second.")
        ready = registry.gauge("fanout_ready", help: "1 when /readyz would answer 200 (partitions assigned, no APNs lane failing, no app paused by a configuration error, every output topic writable), else 0; computed at each scrape.")
        channelNotRegistered = registry.counter("fanout_broadcast_channel_not_registered_total",
                                                help: "Broadcasts APNs answered ChannelNotRegistered (never created or deleted channel), by app; their events are dead-lettered.",
                                                labels: ["app"])
        _ = tokenRegistrySize.labels()  // unlabeled: exported as 0 from the start
        _ = trackedTargets.labels()
        _ = heapFreeBytes.labels()
        for lane in ["activity", "broadcast"] {
            _ = apnsUnmatchedEnds.labels(lane)
            _ = apnsConnectionBackoffs.labels(lane)
            _ = sendsWithdrawn.labels(lane)
            _ = apnsLaneFailing.labels(lane)
        }
        _ = residentMemoryBytes.labels()
        _ = ready.labels()
        _ = heapTrims.labels()
        _ = sendStalls.labels()
        for client in ["intake", "tokens"] { for result in ["sent", "failed"] { _ = kafkaFetchNudges.labels(client, result) } }
        _ = sendsHeld.labels()
        _ = commitsHeld.labels()
        _ = commitWaiting.labels()
        for reason in ["ended", "idle", "evicted"] { _ = targetsForgotten.labels(reason) }
        for kind in ["saved", "forgotten", "restored"] { _ = stateRecords.labels(kind) }
        let (sends, decisions, latency, downgrades) = (sends, eventDecisions, apnsLatency, budgetDowngrades)
        laneHandles = [Lane.activity, .broadcast].map {
            LaneMetrics(lane: $0, sends: sends, decisions: decisions, latency: latency, budgetDowngrades: downgrades)
        }
    }

    /// The lane's resolved send and decision handles.
    public func lane(_ lane: Lane) -> LaneMetrics { laneHandles[lane == .activity ? 0 : 1] }
}
