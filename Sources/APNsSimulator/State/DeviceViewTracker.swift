/// Applies accepted pushes per target the way ActivityKit does (see `DeviceView`), bounded to
/// `capacity` targets.
struct DeviceViewTracker {
    let capacity: Int
    private var views = TargetMap<DeviceView>()
    private(set) var untracked = 0

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { views.count }

    func view(_ target: String) -> DeviceView? { views[TargetKey(target)] }

    mutating func apply(target: String, event: LiveActivityPayload.Event, timestamp: Double, contentState: String) {
        let key = TargetKey(target)
        if views.update(key, { Self.apply(to: &$0, event: event, timestamp: timestamp, contentState: contentState) }) {
            return
        }
        guard views.count < capacity else { untracked += 1; return }
        views.insert(key, DeviceView(target: target, event: event.rawValue, timestamp: timestamp, contentState: contentState,
                                        ended: event == .end, applied: 1, ignored: 0))
    }

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
