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
        Self.apply(to: &views.values[index], event: event, timestamp: timestamp, contentState: contentState)
    }

    /// Mutates the stored view in place (through the dictionary's modify accessor, no copy).
    private static func apply(to view: inout DeviceView, event: LiveActivityPayload.Event, timestamp: Double, contentState: String) {
        if view.ended || (event != .end && timestamp < view.timestamp) {
            view.ignored += 1
            return
        }
        view.event = event.rawValue
        view.timestamp = timestamp
        view.contentState = contentState
        view.ended = event == .end
        view.applied += 1
    }
}
