import Foundation
@testable import FanoutCore

/// Builds event JSON for tests from dictionaries, so each case states only what it changes.
enum EventFixtures {
    static let now: Int64 = 1_772_788_260
    static let timestamp: Int64 = 1_772_788_200
    static let app = "com.example.exports"
    static let token = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"
    static let channel = "dHN0LXNyY2gtY2hubA=="

    static func update(_ changes: [String: Any?] = [:]) -> [String: Any] {
        apply(changes, to: [
            "v": 1, "id": "evt-1", "app": app, "activity": "export-42", "event": "update",
            "timestamp": timestamp, "content_state": ["progress": 37, "status": "rendering"],
        ])
    }

    static func start(_ changes: [String: Any?] = [:]) -> [String: Any] {
        apply(changes, to: [
            "v": 1, "id": "evt-0", "app": app, "activity": "export-42", "event": "start",
            "timestamp": timestamp, "content_state": ["progress": 0, "status": "queued"],
            "alert": ["title": "Export started", "body": "We'll keep you posted", "sound": "default"],
            "token": token, "attributes_type": "ExportAttributes", "attributes": ["name": "Q3 report"],
        ])
    }

    static func broadcast(_ changes: [String: Any?] = [:]) -> [String: Any] {
        apply(changes, to: [
            "v": 1, "id": "evt-b1", "app": app, "channel": channel, "event": "update",
            "timestamp": timestamp, "content_state": ["home": 2, "away": 1],
        ])
    }

    static func apply(_ changes: [String: Any?], to base: [String: Any]) -> [String: Any] {
        var event = base
        for (key, value) in changes {
            if let value { event[key] = value } else { event.removeValue(forKey: key) }
        }
        return event
    }

    static func bytes(_ object: [String: Any]) -> [UInt8] {
        [UInt8](try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func decoder(apps: Set<String> = [app]) -> EventDecoder {
        EventDecoder(policy: EventPolicy(apps: apps))
    }

    static func decode(_ object: [String: Any], lane: Lane = .activity, key: String? = nil,
                       apps: Set<String> = [app]) -> Result<ActivityEvent, EventRejection> {
        decoder(apps: apps).decode(bytes(object), key: key, lane: lane, now: now)
    }

    static func decode(_ text: String, lane: Lane = .activity, key: String? = nil,
                       apps: Set<String> = [app]) -> Result<ActivityEvent, EventRejection> {
        decoder(apps: apps).decode(Array(text.utf8), key: key, lane: lane, now: now)
    }

    static func reason(_ result: Result<ActivityEvent, EventRejection>) -> RejectionReason? {
        if case let .failure(rejection) = result { return rejection.reason }
        return nil
    }
}
