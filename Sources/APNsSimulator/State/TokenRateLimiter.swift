/// Requests per device token per wall-clock second; more than `limit` → 429 TooManyRequests.
/// Remembers at most `capacity` tokens: when full it forgets tokens not seen this second.
struct TokenRateLimiter {
    let limit: Int
    let capacity: Int
    private var windows: [String: (second: Int64, count: Int)] = [:]

    init(limit: Int, capacity: Int) {
        self.limit = limit
        self.capacity = capacity
    }

    /// Counts one request; false when it exceeds the limit.
    mutating func allow(_ token: String, now: Double) -> Bool {
        guard limit > 0 else { return true }
        let second = Int64(now.rounded(.down))
        if var window = windows[token] {
            if window.second != second { window = (second, 0) }
            window.count += 1
            windows[token] = window
            return window.count <= limit
        }
        if windows.count >= capacity {
            windows = windows.filter { $0.value.second == second }
            if windows.count >= capacity { windows.removeAll(keepingCapacity: true) }
        }
        windows[token] = (second, 1)
        return true
    }
}
