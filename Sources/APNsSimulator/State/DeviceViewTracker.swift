/// Applies accepted pushes per target the way ActivityKit does (see `DeviceView`), bounded to
/// `capacity` targets.
struct DeviceViewTracker {
    let capacity: Int
    private(set) var views: [String: DeviceView] = [:]
    private(set) var untracked = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func apply(target: String, event: LiveActivityPayload.Event, timestamp: Double, contentState: String) {
        guard let index = views.index(forKey: target) else {
            guard views.count < capacity else { untracked += 1; return }
            views[target] = DeviceView(target: target, event: event.rawValue, timestamp: timestamp, contentState: contentState,
                                       ended: event == .end, applied: 1, ignored: 0)
            return
        }
        // Mutate in place (no copy of the stored view).
        if views.values[index].ended || (event != .end && timestamp < views.values[index].timestamp) {
            views.values[index].ignored += 1
        } else {
            views.values[index].event = event.rawValue
            views.values[index].timestamp = timestamp
            views.values[index].contentState = contentState
            views.values[index].ended = event == .end
            views.values[index].applied += 1
        }
    }
}
