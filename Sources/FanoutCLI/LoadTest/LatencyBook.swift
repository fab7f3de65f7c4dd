/// Produce times of published states per target, matched to the pushes that carry them: a push's
/// latency is its simulator arrival time minus the moment the generator handed the event whose
/// `(target, timestamp)` it carries to the Kafka producer. Events coalesced away have no push of
/// their own and are dropped from the book when a newer state of their target arrives; memory is
/// bounded by the events published and not yet delivered or superseded.
struct LatencyBook: Sendable {
    private struct Queue: Sendable {
        var items: [(timestamp: Int64, producedAt: Double)] = []
        var head = 0
    }

    private var queues: [Queue]
    /// Seconds, one per push matched to its event.
    private(set) var latencies: [Double] = []
    /// Pushes whose state was not in the book (published before it, or a replay): not measured.
    private(set) var unmatched = 0

    init(targets: Int) { queues = [Queue](repeating: Queue(), count: targets) }

    mutating func produced(target: Int, timestamp: Int64, at time: Double) {
        queues[target].items.append((timestamp, time))
    }

    mutating func delivered(target: Int, timestamp: Int64, at time: Double) {
        var queue = queues[target]
        queues[target] = Queue()   // unique, so the edits below do not copy the array
        while queue.head < queue.items.count && queue.items[queue.head].timestamp < timestamp { queue.head += 1 }
        if queue.head < queue.items.count && queue.items[queue.head].timestamp == timestamp {
            latencies.append(max(0, time - queue.items[queue.head].producedAt))
            queue.head += 1
        } else {
            unmatched += 1
        }
        if queue.head > 32 && queue.head * 2 > queue.items.count {
            queue.items.removeFirst(queue.head)
            queue.head = 0
        }
        queues[target] = queue
    }

    /// Nearest-rank percentiles (0...100) of the measured latencies, in seconds.
    func percentiles(_ ranks: [Double]) -> [Double]? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        return ranks.map { rank in
            let position = Int((rank / 100 * Double(sorted.count)).rounded(.up)) - 1
            return sorted[min(sorted.count - 1, max(0, position))]
        }
    }
}
