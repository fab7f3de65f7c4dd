@testable import FanoutCore

/// What the devices have been shown, built only from pushes that reached them: those APNs acknowledged
/// and those it delivered although Fanout never heard the answer (written, then the connection dropped
/// or the request timed out). Knows nothing of the engine's state; the final checks judge by it.
struct DeviceView {
    /// One activity (or channel) as its device sees it.
    struct Activity {
        /// aps.timestamp of every state that reached the device.
        var timestamps: Set<Int64> = []
        /// A start reached the device: the activity is on the Lock Screen until an end reaches it.
        var started = false
        var ended = false
        /// How many of the pushes that reached it Fanout saw answered with something other than 200.
        var unacknowledged = 0
    }

    private(set) var activities: [String: Activity] = [:]

    /// Records that `request` reached its device; `acknowledged` is false when Fanout saw a failure.
    mutating func received(_ request: SendRequest, acknowledged: Bool) {
        var activity = activities[request.target] ?? Activity()
        activity.timestamps.insert(request.event.timestamp)
        switch (request.event.kind, request.destination) {
        case (.start, .pushToStartToken): activity.started = true
        case (.end, .activityToken): activity.ended = true
        default: break
        }
        if !acknowledged { activity.unacknowledged += 1 }
        activities[request.target] = activity
    }

    func shown(_ target: String, timestamp: Int64) -> Bool { activities[target]?.timestamps.contains(timestamp) == true }

    /// Timestamps every target was shown, for comparing two runs of one seed.
    var timestampsByTarget: [String: Set<Int64>] { activities.mapValues(\.timestamps) }
}
