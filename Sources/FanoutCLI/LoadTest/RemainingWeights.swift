/// Non-negative integer weights with O(log n) update and weighted draw (a Fenwick tree): the load
/// mix draws the next target in proportion to the events it still has to publish, so every story
/// spreads over the whole run without materializing the run.
struct RemainingWeights: Sendable {
    private var tree: [Int]
    private(set) var total = 0

    init(_ weights: [Int]) {
        tree = [Int](repeating: 0, count: weights.count + 1)
        for (index, weight) in weights.enumerated() where weight > 0 { add(index, weight) }
    }

    mutating func add(_ index: Int, _ delta: Int) {
        total += delta
        var position = index + 1
        while position < tree.count {
            tree[position] += delta
            position += position & -position
        }
    }

    /// The index whose cumulative weight range holds `point` (0 ≤ point < total).
    func index(containing point: Int) -> Int {
        precondition(point >= 0 && point < total, "draw outside the remaining weight")
        var position = 0
        var rest = point
        var step = 1
        while step * 2 < tree.count { step *= 2 }
        while step > 0 {
            let next = position + step
            if next < tree.count && tree[next] <= rest {
                position = next
                rest -= tree[next]
            }
            step /= 2
        }
        return position
    }
}
