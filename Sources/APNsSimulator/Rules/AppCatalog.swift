import Foundation

/// The configured apps, with their Live Activity topics pre-encoded for byte comparison.
struct AppCatalog: Sendable {
    struct App: Sendable {
        var bundleID: String
        var topic: [UInt8]
        var topicText: String
        var broadcastEnabled: Bool
    }

    let apps: [App]

    init(bundleIDs: [String], broadcastApps: [String]?) {
        apps = bundleIDs.map { bundle in
            App(bundleID: bundle, topic: Array((bundle + ".push-type.liveactivity").utf8), topicText: bundle + ".push-type.liveactivity",
                broadcastEnabled: broadcastApps.map { $0.contains(bundle) } ?? true)
        }
    }

    /// Index of the app whose Live Activity topic is exactly `topic`.
    func appIndex(forTopic topic: UnsafeBufferPointer<UInt8>) -> Int? {
        apps.firstIndex { $0.topic.count == topic.count && $0.topic.withUnsafeBufferPointer { memcmp($0.baseAddress!, topic.baseAddress!, topic.count) == 0 } }
    }

    func appIndex(forBundle bundle: String) -> Int? { apps.firstIndex { $0.bundleID == bundle } }

    /// A broadcast send or channel-management request for an app without the broadcast capability.
    /// Live APNs answers 400 BroadcastFeatureNotEnabled, not the FeatureNotEnabled of Apple's table
    /// (README, "Load testing and benchmarks"); the simulator is as strict as live APNs.
    static let broadcastNotEnabled = Refusal(.broadcastFeatureNotEnabled,
                                             "the app has no broadcast capability (Certificates, IDs & Profiles → Push Notifications)")

    /// Why `topic` (not an exact Live Activity topic) is refused:
    /// malformed → BadTopic; a configured app's bundle, bare or with another suffix → DeviceTokenNotForTopic
    /// (what APNs answers when `.push-type.liveactivity` is missing, F712499); anything else → TopicDisallowed.
    func refusal(forTopic topic: UnsafeBufferPointer<UInt8>) -> Refusal {
        let allowed = topic.allSatisfy { byte in
            byte.isDigit || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
        guard !topic.isEmpty, topic.count <= 255, allowed else { return Refusal(.badTopic, "apns-topic is not a bundle-ID topic") }
        let text = String(decoding: topic, as: UTF8.self)
        if apps.contains(where: { text == $0.bundleID || text.hasPrefix($0.bundleID + ".") }) {
            return Refusal(.deviceTokenNotForTopic, "Live Activity pushes need the topic <bundle>.push-type.liveactivity")
        }
        return Refusal(.topicDisallowed, "apns-topic is not one of the simulator's configured apps")
    }
}
