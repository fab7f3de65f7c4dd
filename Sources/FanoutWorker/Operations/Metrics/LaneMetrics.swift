import FanoutCore

/// The handles a lane's send and decision paths update, resolved once (as `FanoutMetrics` advises),
/// so an event or a send looks no label up and allocates nothing for its metrics. Every combination
/// exists from the start at 0, as Prometheus advises for label values known in advance.
public struct LaneMetrics: Sendable {
    /// `fanout_apns_sends_total`, by priority (5, then 10) and then `SendResult`.
    private let sends: [Counter]
    /// `fanout_event_decisions_total`, by `Decision`.
    private let decisions: [Counter]
    /// `fanout_apns_latency_seconds`.
    public let latency: Histogram
    /// `fanout_budget_downgrades_total`.
    public let budgetDowngrades: Counter

    init(lane: Lane, sends: CounterFamily, decisions: CounterFamily, latency: HistogramFamily, budgetDowngrades: CounterFamily) {
        let name = lane.rawValue
        self.sends = ["5", "10"].flatMap { priority in FanoutMetrics.SendResult.allCases.map { sends.labels(name, priority, $0.rawValue) } }
        self.decisions = FanoutMetrics.Decision.allCases.map { decisions.labels(name, $0.rawValue) }
        self.latency = latency.labels(name)
        self.budgetDowngrades = budgetDowngrades.labels(name)
    }

    /// The sends counter for an APNs priority (10, else 5) and result.
    public func sends(priority: Int, _ result: FanoutMetrics.SendResult) -> Counter {
        let results = FanoutMetrics.SendResult.allCases
        return sends[(priority >= 10 ? results.count : 0) + results.firstIndex(of: result)!]
    }

    public func decision(_ decision: FanoutMetrics.Decision) -> Counter {
        decisions[FanoutMetrics.Decision.allCases.firstIndex(of: decision)!]
    }
}
