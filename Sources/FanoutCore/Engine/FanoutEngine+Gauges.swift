/// Point-in-time counts for the worker's gauges (read once per commit interval, not per event).
extension FanoutEngine {
    /// Targets with a pending update or a send in flight, per lane. Walks every target slot: call it
    /// for gauges, not on the hot path.
    public func busyTargets() -> (activity: Int, broadcast: Int) {
        var activity = 0, broadcast = 0
        for index in targets.indices where targets[index].live {
            guard targets[index].inFlightSendID != 0 || targets[index].pending != nil else { continue }
            if targets[index].lane == .broadcast { broadcast += 1 } else { activity += 1 }
        }
        return (activity, broadcast)
    }
}
