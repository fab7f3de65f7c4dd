import FanoutCore

/// When to pause and resume fetching a partition (DESIGN.md §4 "Backpressure"), from the bounds in
/// `configuration.backpressure`. Pure: the intake loop feeds it counts and applies its answers.
struct BackpressureGate: Sendable, Hashable {
    /// Records of one partition read and not yet committed (retained for dead letters).
    var maxPendingPerPartition: Int
    /// Sends in flight across the process, counted per lane (each lane is held to it on its own).
    var maxInFlight: Int
    /// Offsets read and not yet done across the process, counted per lane (each pending target holds at least one).
    var maxPendingTotal: Int
    /// Paused partitions resume when every measure is below this fraction of its bound.
    var resumeRatio: Double

    struct Measures: Sendable, Hashable {
        /// This partition: retained records (≥ its incomplete offsets).
        var partitionPending: Int
        /// Totals of the partition's lane.
        var totalInFlight: Int
        var totalIncomplete: Int
    }

    init(_ backpressure: FanoutConfiguration.Backpressure) {
        maxPendingPerPartition = backpressure.maxPendingPerPartition
        maxInFlight = backpressure.maxInFlight
        maxPendingTotal = backpressure.maxPendingTargets
        resumeRatio = backpressure.resumeRatio
    }

    func shouldPause(_ m: Measures) -> Bool {
        m.partitionPending >= maxPendingPerPartition || m.totalInFlight >= maxInFlight || m.totalIncomplete >= maxPendingTotal
    }

    func mayResume(_ m: Measures) -> Bool {
        Double(m.partitionPending) < Double(maxPendingPerPartition) * resumeRatio
            && Double(m.totalInFlight) < Double(maxInFlight) * resumeRatio
            && Double(m.totalIncomplete) < Double(maxPendingTotal) * resumeRatio
    }
}
