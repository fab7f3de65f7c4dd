import APNsModel

/// All state shared between event-loop threads, behind the simulator's one `Mutex`: fault settings
/// and their seeded generator, token states and rates, channels, counters, the in-memory delivery log,
/// device views and the lines waiting for the log writer. Pure: callers pass the time in.
struct SimulatorState {
    /// What the fault settings decided for one request.
    struct FaultPlan {
        enum Action: Equatable { case proceed, refuse(APNsRejection), answer(APNsSimulatorFaults.InjectedAnswer), reset }
        var action: Action = .proceed
        var delayMillis = 0
        var goAwayAfterRequests: Int?
        var goAwayReason = "Shutdown"
    }

    var faults: APNsSimulatorFaults
    var random: SeededRandom
    var tokens: [String: TokenState] = [:]
    let rejectUnknownTokens: Bool
    var rate: TokenRateLimiter
    var channels: ChannelRegistry
    var deviceViews: DeviceViewTracker
    var channelViews: DeviceViewTracker

    private var reasonCounts = [Int](repeating: 0, count: APNsRejection.allCases.count)
    /// Injected answers by "status reason" (as `stats.responses` names them).
    private var injectedCounts: [String: Int] = [:]
    private var okCount = 0
    private var acceptedCount = 0
    private var createdCount = 0
    private var noContentCount = 0
    var requests = 0
    var connectionsAccepted = 0
    var connectionsOpen = 0
    var connectionsRefused = 0
    var acceptFailures = 0
    var goAwaysSent = 0
    var connectionsReset = 0
    var connectionsTimedOut = 0
    var deliveryLogWriteErrors = 0

    private var ring: [DeliveryRecord] = []
    private var ringNext = 0
    let ringCapacity: Int
    /// Accepted records waiting for the log file writer (nil when no file is configured).
    var pendingLog: [DeliveryRecord]?
    let pendingLogCapacity = 1_000_000

    init(configuration: APNsSimulatorConfiguration) {
        faults = configuration.faults
        random = SeededRandom(seed: configuration.seed)
        rejectUnknownTokens = configuration.rejectUnknownTokens
        rate = TokenRateLimiter(limit: configuration.maxRequestsPerTokenPerSecond, capacity: 1_000_000)
        channels = ChannelRegistry(maxPerApp: configuration.maxChannelsPerApp)
        deviceViews = DeviceViewTracker(capacity: configuration.maxTrackedTargets)
        channelViews = DeviceViewTracker(capacity: configuration.maxTrackedTargets)
        ringCapacity = max(1, configuration.deliveryMemoryCapacity)
        pendingLog = configuration.deliveryLogPath == nil ? nil : []
    }

    /// Draws this request's fate from the fault settings: outage first, then one uniform draw split
    /// between 500, 503, 429, reset and the injected answer, then the latency. A push outside `faults.scope` gets no fault.
    mutating func planFaults(now: Double, isBroadcast: Bool) -> FaultPlan {
        guard faults.scope.applies(toBroadcast: isBroadcast) else { return FaultPlan(goAwayAfterRequests: nil, goAwayReason: faults.goAwayReason) }
        return drawFaults(now: now, plan: FaultPlan(goAwayAfterRequests: faults.goAwayAfterRequests, goAwayReason: faults.goAwayReason))
    }

    /// The same draw for a channel-management request, when the faults are scoped to `management`
    /// (never a GOAWAY there).
    mutating func planManagementFaults(now: Double) -> FaultPlan {
        guard faults.scope == .channelManagement else { return FaultPlan(goAwayAfterRequests: nil, goAwayReason: faults.goAwayReason) }
        return drawFaults(now: now, plan: FaultPlan(goAwayAfterRequests: nil, goAwayReason: faults.goAwayReason))
    }

    private mutating func drawFaults(now: Double, plan: FaultPlan) -> FaultPlan {
        var plan = plan
        if let start = faults.outageStart, let end = faults.outageEnd, now >= start, now < end {
            plan.action = .refuse(.serviceUnavailable)
        } else if faults.internalServerErrorRate + faults.serviceUnavailableRate + faults.tooManyRequestsRate + faults.connectionResetRate
                    + (faults.injectedAnswer?.rate ?? 0) > 0 {
            var draw = random.unit()
            var choices = [(faults.internalServerErrorRate, FaultPlan.Action.refuse(.internalServerError)),
                           (faults.serviceUnavailableRate, .refuse(.serviceUnavailable)),
                           (faults.tooManyRequestsRate, .refuse(.tooManyRequests)),
                           (faults.connectionResetRate, .reset)]
            if let answer = faults.injectedAnswer { choices.append((answer.rate, .answer(answer))) }
            for (rate, action) in choices {
                if draw < rate { plan.action = action; break }
                draw -= rate
            }
        }
        plan.delayMillis = faults.latencyMillis
        if faults.latencyJitterMillis > 0 { plan.delayMillis += Int(random.next() % UInt64(faults.latencyJitterMillis + 1)) }
        return plan
    }

    /// Token state and per-token rate for a device push that passed the request rules.
    mutating func admitDevice(token: String, bundleID: String, now: Double) -> Refusal? {
        switch tokens.isEmpty ? nil : tokens[token] {
        case .validFor(let owner)? where owner != bundleID:
            return Refusal(.deviceTokenNotForTopic, "token registered for \(owner), pushed with topic \(bundleID)")
        case .validFor?: break
        case .bad?: return Refusal(.badDeviceToken)
        case .unregistered(let millis)?: return Refusal(.unregistered, timestampMillis: millis)
        case nil where rejectUnknownTokens: return Refusal(.badDeviceToken, "token not registered with the simulator")
        case .valid?, nil: break
        }
        return rate.allow(token, now: now) ? nil : Refusal(.tooManyRequests)
    }

    /// Returns the record the ring evicted, so the caller can release it (and its strings) after unlocking.
    @discardableResult
    mutating func recordAccepted(_ record: DeliveryRecord, event: LiveActivityPayload.Event, contentState: String) -> DeliveryRecord? {
        acceptedCount += 1
        if let target = record.token {
            deviceViews.apply(target: target, event: event, timestamp: record.timestamp, contentState: contentState)
        } else if let target = record.channel {
            channelViews.apply(target: target, event: event, timestamp: record.timestamp, contentState: contentState)
        }
        if pendingLog != nil {
            if pendingLog!.count < pendingLogCapacity { pendingLog!.append(record) } else { deliveryLogWriteErrors += 1 }
        }
        if ring.count < ringCapacity {
            ring.append(record)
            return nil
        }
        var evicted = record
        swap(&ring[ringNext], &evicted)
        ringNext = (ringNext + 1) % ringCapacity
        return evicted
    }

    mutating func count(_ reason: APNsRejection) { reasonCounts[reason.index] += 1 }
    mutating func count(_ answer: APNsSimulatorFaults.InjectedAnswer) {
        injectedCounts["\(answer.status) \(answer.reason ?? "(no reason)")", default: 0] += 1
    }
    mutating func countSuccess(status: Int) {
        switch status {
        case 201: createdCount += 1
        case 204: noContentCount += 1
        default: okCount += 1
        }
    }

    /// Accepted records in arrival order, oldest first.
    var deliveries: [DeliveryRecord] {
        ring.count < ringCapacity ? ring : Array(ring[ringNext...] + ring[..<ringNext])
    }

    /// Accepted records numbered 0, 1, … in arrival order: those numbered `index` or later that memory
    /// still holds, the number to ask for next, and how many from `index` on were already dropped
    /// (the memory keeps the newest `ringCapacity`). Lets a reader follow the log without copying it whole.
    func deliveries(from index: Int) -> (records: [DeliveryRecord], next: Int, missed: Int) {
        let oldest = acceptedCount - ring.count
        let first = max(index, oldest)
        guard first < acceptedCount else { return ([], max(index, acceptedCount), 0) }
        var records: [DeliveryRecord] = []
        records.reserveCapacity(acceptedCount - first)
        let start = ring.count < ringCapacity ? 0 : ringNext
        for number in first..<acceptedCount { records.append(ring[(start + number - oldest) % ring.count]) }
        return (records, acceptedCount, first - index)
    }

    var stats: APNsSimulatorStats {
        var responses: [String: Int] = [:]
        if okCount > 0 { responses["200"] = okCount }
        if createdCount > 0 { responses["201"] = createdCount }
        if noContentCount > 0 { responses["204"] = noContentCount }
        for reason in APNsRejection.allCases where reasonCounts[reason.index] > 0 {
            responses["\(reason.status) \(reason.rawValue)"] = reasonCounts[reason.index]
        }
        responses.merge(injectedCounts, uniquingKeysWith: +)
        return APNsSimulatorStats(
            responses: responses, requests: requests, accepted: acceptedCount,
            connectionsAccepted: connectionsAccepted, connectionsOpen: connectionsOpen, connectionsRefused: connectionsRefused,
            goAwaysSent: goAwaysSent, connectionsReset: connectionsReset, connectionsTimedOut: connectionsTimedOut,
            acceptFailures: acceptFailures,
            untrackedTargets: deviceViews.untracked + channelViews.untracked, deliveryLogWriteErrors: deliveryLogWriteErrors)
    }
}
