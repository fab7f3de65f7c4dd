import Foundation

/// The scripted story `fanout demo` plays: three apps' backends publishing what happens, as a real
/// deployment would see it. Pure data: built from a base time, the tokens and the broadcast channel;
/// `DemoPlayer` turns it into Kafka records at the right wall-clock moments.
///
/// Times are *story seconds* after the scene starts. Every event's `timestamp` is `base + at`, so
/// timestamps of one target are whole seconds and strictly increasing, as Fanout requires; the player
/// compresses the story (`DemoPlayer.wallSecondsPerStorySecond`) so the demo takes well under a minute.
struct DemoScene: Sendable {
    static let exportsApp = "com.example.exports"
    static let foodApp = "com.example.food"
    static let sportsApp = "com.example.sports"

    /// Story seconds from the first step to the last.
    static let length = 86
    /// Story second at which the exports app's user deletes the app (export-43's token turns 410).
    static let unregisterAt = 31

    enum Topic: String, Sendable, CaseIterable {
        case activityUpdates = "activity-updates"
        case broadcastUpdates = "broadcast-updates"
        case activityTokens = "activity-tokens"
    }

    enum Action: Sendable {
        /// A producer publishes `value` keyed by `key`.
        case produce(Topic, key: String, value: [UInt8])
        /// APNs starts answering 410 Unregistered for `token` (the simulator is told so).
        case unregister(token: String)
    }

    struct Step: Sendable {
        var at: Int
        var action: Action
        /// What the terminal says about this moment; nil for routine updates.
        var note: String?
    }

    /// One Lock Screen (or every subscriber's, for a channel) the terminal shows.
    struct Card: Sendable, Equatable {
        enum Kind: Sendable, Equatable { case export, delivery, match }
        var name: String
        var kind: Kind
        /// Device tokens whose pushes this activity shows (push-to-start token first, then update token).
        var tokens: [String]
        var channel: String?
    }

    let base: Int64
    let channel: String
    let export42Token: String
    let export43Token: String
    let foodPushToStartToken: String
    let foodUpdateToken: String
    private(set) var steps: [Step] = []

    var cards: [Card] {
        [Card(name: "export-42", kind: .export, tokens: [export42Token]),
         Card(name: "export-43", kind: .export, tokens: [export43Token]),
         Card(name: "food-7", kind: .delivery, tokens: [foodPushToStartToken, foodUpdateToken]),
         Card(name: "match-881", kind: .match, tokens: [], channel: channel)]
    }

    /// - Parameters:
    ///   - base: UNIX seconds of story second 0 (choose it so the last step is not in the future).
    ///   - channel: the broadcast channel id the sports app created for match 881.
    init(base: Int64, channel: String, tokens: DemoTokens = DemoTokens()) {
        self.base = base
        self.channel = channel
        export42Token = tokens.export42
        export43Token = tokens.export43
        foodPushToStartToken = tokens.foodPushToStart
        foodUpdateToken = tokens.foodUpdate
        steps = script().sorted { $0.at < $1.at }
    }

    // MARK: The script

    private func script() -> [Step] {
        var s: [Step] = []
        // The exports app started two exports on the phone and uploaded their update tokens.
        s.append(token(0, key: "export-42", token: export42Token, app: Self.exportsApp,
                       note: "exports app uploads the update tokens of export-42 and export-43 (activity-tokens)"))
        s.append(token(0, key: "export-43", token: export43Token, app: Self.exportsApp))

        // export-42: preparing → uploading 0…100 % one small step a second (minor) → rendering → ready.
        s.append(export("export-42", 1, phase: "preparing", progress: 0))
        s.append(export("export-42", 4, phase: "uploading", progress: 0,
                        note: "export-42 starts uploading: one progress event a second, most of them coalesced"))
        for second in 5...64 {
            s.append(export("export-42", second, phase: "uploading", progress: Double(second - 4) / 60))
        }
        s.append(export("export-42", 66, phase: "rendering", progress: 1))
        s.append(export("export-42", 80, phase: "ready", progress: 1, end: true,
                        alert: ("Export ready", "export-42.mp4 is ready to share")))

        // export-43: its user deletes the app halfway; the backend keeps publishing.
        s.append(export("export-43", 2, phase: "preparing", progress: 0))
        s.append(export("export-43", 6, phase: "uploading", progress: 0))
        for (index, second) in stride(from: 10, through: 30, by: 4).enumerated() {
            s.append(export("export-43", second, phase: "uploading", progress: Double(index + 1) / 10))
        }
        s.append(Step(at: Self.unregisterAt, action: .unregister(token: export43Token),
                      note: "export-43's user deletes the app: APNs now answers 410 Unregistered for \(Self.prefix(export43Token))"))
        for (index, second) in stride(from: 34, through: 46, by: 4).enumerated() {
            s.append(export("export-43", second, phase: "uploading", progress: Double(index + 7) / 10))
        }
        s.append(export("export-43", 50, phase: "ready", progress: 1, end: true, alert: ("Export ready", "export-43.mov is ready to share")))

        // food-7: push-to-start, then the activity's own token, courier updates, an alert, delivered.
        s.append(Step(at: 8, action: .produce(.activityUpdates, key: "food-7", value: event([
            "activity": "food-7", "app": Self.foodApp, "event": "start", "timestamp": base + 8,
            "token": foodPushToStartToken, "input_push_token": true,
            "attributes_type": "DeliveryAttributes",
            "attributes": ["restaurant": "Pasta Nostra", "order_number": "A-1042"],
            "alert": ["title": "Order confirmed", "body": "Pasta Nostra is preparing your order", "sound": "default"],
            "content_state": delivery("confirmed", eta: 30),
        ], id: "food-7-start")), note: "food app starts food-7 remotely with push-to-start (token \(Self.prefix(foodPushToStartToken)))"))
        s.append(token(10, key: "food-7", token: foodUpdateToken, app: Self.foodApp,
                       note: "the phone uploads food-7's own update token (activity-tokens)"))
        s.append(food(20, delivery("preparing", eta: 25)))
        s.append(food(40, delivery("picked_up", eta: 15, courier: "Marco"), note: "courier Marco picks up food-7"))
        s.append(food(52, delivery("on_the_way", eta: 10, courier: "Marco")))
        s.append(food(58, delivery("on_the_way", eta: 7, courier: "Marco")))
        s.append(food(64, delivery("on_the_way", eta: 4, courier: "Marco")))
        s.append(food(70, delivery("arriving", eta: 1, courier: "Marco"), importance: "major",
                      alert: ("Your order is arriving", "Marco is around the corner")))
        s.append(food(84, delivery("delivered", eta: 0, courier: "Marco"), end: true))

        // match-881 on a broadcast channel: every subscriber's Lock Screen gets one push per change.
        s.append(match(3, home: 0, away: 0, minute: "1'", note: "match-881 kicks off on broadcast channel \(Self.prefix(channel))"))
        s.append(match(16, home: 1, away: 0, minute: "12'", alert: ("GOAL! Lions 1–0", "Okafor, 12'")))
        s.append(match(36, home: 1, away: 1, minute: "44'", alert: ("Goal Tigers: 1–1", "Lindqvist, 44'")))
        s.append(match(48, home: 1, away: 1, minute: "HT"))
        s.append(match(60, home: 2, away: 1, minute: "71'", alert: ("GOAL! Lions 2–1", "Okafor again, 71'")))
        s.append(match(76, home: 2, away: 1, minute: "90+3'"))
        s.append(match(86, home: 2, away: 1, minute: "FT", end: true))

        // A producer bug: milliseconds where seconds belong. Fanout dead-letters it with a reason.
        var malformed = Self.exportFields("export-42", timestamp: (base + 44) * 1000, phase: "uploading", progress: 0.66)
        malformed["id"] = "export-42-bad-ms"
        s.append(Step(at: 44, action: .produce(.activityUpdates, key: "export-42", value: Self.json(malformed)),
                      note: "a producer bug publishes an export-42 event with its timestamp in milliseconds"))
        return s
    }

    // MARK: Expected outcome (what every Lock Screen must show at the end)

    /// The content state (JSON) each card must finally display, and whether it must be ended.
    /// export-43 is absent: its token is gone mid-story, so its last shown state depends on timing.
    var expectedFinal: [String: (contentState: [UInt8], ended: Bool)] {
        ["export-42": (Self.json(["phase": "ready", "progress": 1]), true),
         "food-7": (Self.json(delivery("delivered", eta: 0, courier: "Marco")), true),
         "match-881": (Self.json(["home": "Lions", "away": "Tigers", "home_score": 2, "away_score": 1, "minute": "FT"]), true)]
    }

    /// Records this scene publishes per topic.
    var recordCounts: [Topic: Int] {
        var counts: [Topic: Int] = [:]
        for step in steps { if case .produce(let topic, _, _) = step.action { counts[topic, default: 0] += 1 } }
        return counts
    }

    // MARK: Builders

    static func prefix(_ token: String) -> String { String(token.prefix(8)) + "…" }

    private func token(_ at: Int, key: String, token: String, app: String, note: String? = nil) -> Step {
        let record: [String: Any] = ["token": token, "app": app, "environment": "production", "at": base + Int64(at)]
        return Step(at: at, action: .produce(.activityTokens, key: key, value: Self.json(record)), note: note)
    }

    private static func exportFields(_ key: String, timestamp: Int64, phase: String, progress: Double) -> [String: Any] {
        ["v": 1, "id": "\(key)-\(timestamp)", "app": exportsApp, "activity": key, "event": "update",
         "timestamp": timestamp, "content_state": ["phase": phase, "progress": progress]]
    }

    private func export(_ key: String, _ at: Int, phase: String, progress: Double, end: Bool = false,
                        alert: (String, String)? = nil, note: String? = nil) -> Step {
        var fields = Self.exportFields(key, timestamp: base + Int64(at), phase: phase, progress: (progress * 1000).rounded() / 1000)
        if end {
            fields["event"] = "end"
            fields["dismissal_date"] = base + Int64(at) + 900
        }
        if let alert { fields["alert"] = ["title": alert.0, "body": alert.1, "sound": "default"] }
        return Step(at: at, action: .produce(.activityUpdates, key: key, value: Self.json(fields)), note: note)
    }

    private func delivery(_ status: String, eta: Int, courier: String? = nil) -> [String: Any] {
        var state: [String: Any] = ["status": status, "eta_minutes": eta]
        if let courier { state["courier"] = courier }
        return state
    }

    private func food(_ at: Int, _ state: [String: Any], importance: String? = nil, end: Bool = false,
                      alert: (String, String)? = nil, note: String? = nil) -> Step {
        var fields: [String: Any] = ["activity": "food-7", "app": Self.foodApp, "event": end ? "end" : "update",
                                     "timestamp": base + Int64(at), "content_state": state]
        if let importance { fields["importance"] = importance }
        if let alert { fields["alert"] = ["title": alert.0, "body": alert.1, "sound": "default"] }
        if end { fields["dismissal_date"] = base + Int64(at) + 900 }
        return Step(at: at, action: .produce(.activityUpdates, key: "food-7", value: event(fields, id: "food-7-\(at)")), note: note)
    }

    private func match(_ at: Int, home: Int, away: Int, minute: String, end: Bool = false,
                       alert: (String, String)? = nil, note: String? = nil) -> Step {
        var fields: [String: Any] = ["channel": channel, "app": Self.sportsApp, "event": end ? "end" : "update",
                                     "timestamp": base + Int64(at),
                                     "content_state": ["home": "Lions", "away": "Tigers", "home_score": home,
                                                       "away_score": away, "minute": minute]]
        if let alert { fields["alert"] = ["title": alert.0, "body": alert.1] }
        if end { fields["dismissal_date"] = base + Int64(at) + 900 }
        return Step(at: at, action: .produce(.broadcastUpdates, key: channel, value: event(fields, id: "match-881-\(at)")), note: note)
    }

    private func event(_ fields: [String: Any], id: String) -> [UInt8] {
        var fields = fields
        fields["v"] = 1
        fields["id"] = id
        return Self.json(fields)
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        // The scene's own literals are always valid JSON objects; a failure here is a bug in the script.
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            preconditionFailure("demo scene: not JSON-serializable: \(object)")
        }
        return Array(data)
    }
}

/// The push tokens of the scene's phones: random 32-byte hex strings, like real APNs tokens.
struct DemoTokens: Sendable {
    var export42 = DemoTokens.random()
    var export43 = DemoTokens.random()
    var foodPushToStart = DemoTokens.random()
    var foodUpdate = DemoTokens.random()

    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef")
        var text = ""
        for _ in 0..<32 {
            let byte = Int(UInt8.random(in: 0...255, using: &generator))
            text.append(digits[byte >> 4])
            text.append(digits[byte & 0xF])
        }
        return text
    }
}
