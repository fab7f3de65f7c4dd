/// Polls `condition` every 20 ms until it holds or `limit` passes (a liveness bound, not a timing claim).
func eventually(within limit: Duration = .seconds(20), _ condition: () -> Bool) async throws -> Bool {
    let end = ContinuousClock.now + limit
    while ContinuousClock.now < end {
        if condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}
