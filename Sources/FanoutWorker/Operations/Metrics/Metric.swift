import Synchronization

/// A monotonically increasing count. Hot path: one relaxed atomic add, no lock, no allocation.
public final class Counter: Sendable {
    private let count = Atomic<UInt64>(0)

    init() {}

    @inline(__always)
    public func increment(by amount: UInt64 = 1) { count.add(amount, ordering: .relaxed) }

    public var value: UInt64 { count.load(ordering: .relaxed) }

    /// Raises the count to `total`, a count kept elsewhere (a client library's), when it is behind;
    /// safe when two scrapes do it at once (neither adds what the other did).
    public func advance(to total: UInt64) {
        var seen = count.load(ordering: .relaxed)
        while seen < total {
            let (exchanged, original) = count.compareExchange(expected: seen, desired: total, ordering: .relaxed)
            if exchanged { return }
            seen = original
        }
    }
}

/// A value that goes up and down (in flight, queued, paused). Hot path: one relaxed atomic operation.
public final class Gauge: Sendable {
    private let current = Atomic<Int64>(0)

    init() {}

    public func set(_ value: Int64) { current.store(value, ordering: .relaxed) }
    public func set(_ value: Int) { set(Int64(value)) }
    @inline(__always)
    public func increment(by amount: Int64 = 1) { current.add(amount, ordering: .relaxed) }
    @inline(__always)
    public func decrement(by amount: Int64 = 1) { current.subtract(amount, ordering: .relaxed) }

    public var value: Int64 { current.load(ordering: .relaxed) }
}

/// A distribution over fixed upper bounds (`le`). Hot path: a short scan of the bounds plus three
/// atomic operations; no lock. A scrape concurrent with observations may see `_count` and the
/// buckets a few observations apart, as with every Prometheus client.
public final class Histogram: Sendable {
    private final class Cell: Sendable {
        let count = Atomic<UInt64>(0)
    }

    /// Sorted, finite upper bounds; `+Inf` is implicit.
    public let bounds: [Double]
    private let cells: [Cell]
    private let total = Atomic<UInt64>(0)
    private let sumBits = Atomic<UInt64>(0.0.bitPattern)

    init(bounds: [Double]) {
        self.bounds = bounds
        cells = (0...bounds.count).map { _ in Cell() }
    }

    public func observe(_ value: Double) {
        var index = 0
        while index < bounds.count && value > bounds[index] { index += 1 }
        cells[index].count.add(1, ordering: .relaxed)
        total.add(1, ordering: .relaxed)
        var old = sumBits.load(ordering: .relaxed)
        while true {
            let new = (Double(bitPattern: old) + value).bitPattern
            let (exchanged, original) = sumBits.compareExchange(expected: old, desired: new, ordering: .relaxed)
            if exchanged { break }
            old = original
        }
    }

    /// Observes a duration in seconds (the Prometheus base unit).
    public func observe(_ duration: Duration) { observe(DurationText.seconds(duration)) }

    public var count: UInt64 { total.load(ordering: .relaxed) }
    public var sum: Double { Double(bitPattern: sumBits.load(ordering: .relaxed)) }

    /// Cumulative counts per bound, the last one for `+Inf`.
    public var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return cells.map { cell in
            running += cell.count.load(ordering: .relaxed)
            return running
        }
    }
}
