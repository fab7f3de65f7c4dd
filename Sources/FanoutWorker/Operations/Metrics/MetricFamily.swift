import APNsModel
import Synchronization

public enum MetricKind: String, Sendable {
    case counter, gauge, histogram
}

/// One metric name with its label names; each distinct set of label values is a child metric.
///
/// Resolve a child once with `labels(…)` and keep the handle: updating it is lock-free. `labels(…)`
/// itself takes a lock and may allocate on first use of a label set, so keep it off per-event paths
/// when the label set is known in advance.
public final class MetricFamily<Metric: Sendable>: Sendable {
    public let name: String
    public let help: String
    public let kind: MetricKind
    public let labelNames: [String]
    private let make: @Sendable () -> Metric
    private let children = Mutex<[[String]: Metric]>([:])

    init(name: String, help: String, kind: MetricKind, labelNames: [String], make: @escaping @Sendable () -> Metric) {
        self.name = name
        self.help = help
        self.kind = kind
        self.labelNames = labelNames
        self.make = make
    }

    /// The child for these label values, in the order of `labelNames`. A value holding a push token or
    /// a JWT (a reason quoting an APNs answer) is kept as `Redact.text` masks it, so `/metrics` never
    /// shows one whole.
    public func labels(_ values: String...) -> Metric { labels(values) }

    public func labels(_ values: [String]) -> Metric {
        precondition(values.count == labelNames.count,
                     "metric \(name) takes labels \(labelNames), got \(values.count) values")
        return children.withLock { children in
            // Children are keyed by masked values, and a value with nothing to mask is its own mask:
            // the usual lookup costs no scan; a value with a secret is masked and found under that.
            if let existing = children[values] { return existing }
            let key = Self.masked(values)
            if let existing = children[key] { return existing }
            let metric = make()
            children[key] = metric
            return metric
        }
    }

    /// Drops the child for these label values (a partition this worker no longer owns), so the series
    /// disappears from the exposition instead of lingering at a stale value. A handle still held keeps
    /// working but is no longer exported.
    public func remove(_ values: String...) {
        let values = Self.masked(values)
        _ = children.withLock { $0.removeValue(forKey: values) }
    }

    /// The values as children are keyed: each masked by `Redact.text` (the array is copied only then).
    private static func masked(_ values: [String]) -> [String] {
        var values = values
        for index in values.indices {
            if let masked = Redact.masked(values[index]) { values[index] = masked }
        }
        return values
    }

    /// Children sorted by label values, for stable output.
    func snapshot() -> [([String], Metric)] {
        children.withLock { children in children.map { ($0.key, $0.value) } }
            .sorted { $0.0.lexicographicallyPrecedes($1.0) }
    }
}

public typealias CounterFamily = MetricFamily<Counter>
public typealias GaugeFamily = MetricFamily<Gauge>
public typealias HistogramFamily = MetricFamily<Histogram>
