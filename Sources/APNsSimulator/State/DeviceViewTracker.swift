/// Applies accepted pushes per target the way ActivityKit does (see `DeviceView`), bounded to
/// `capacity` targets.
struct DeviceViewTracker {
    let capacity: Int
    private var views: [TargetKey: DeviceView] = [:]
    private(set) var untracked = 0

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { views.count }

    func view(_ target: String) -> DeviceView? { views[TargetKey(target)] }

    mutating func apply(target: String, event: LiveActivityPayload.Event, timestamp: Double, contentState: String) {
        let key = TargetKey(target)
        guard let index = views.index(forKey: key) else {
            guard views.count < capacity else { untracked += 1; return }
            views[key] = DeviceView(target: target, event: event.rawValue, timestamp: timestamp, contentState: contentState,
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

/// A token or channel ID as a dictionary key, hashed over all its UTF-8 bytes (no Unicode normalization,
/// which `String`'s own hash pays for). Hashing only part of the bytes let tokens that share that part
/// (e.g. the same tail) collide into one probe chain of full string compares under the state lock.
private struct TargetKey: Hashable {
    let text: String

    init(_ text: String) { self.text = text }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    static func == (lhs: TargetKey, rhs: TargetKey) -> Bool { lhs.text == rhs.text }
}
