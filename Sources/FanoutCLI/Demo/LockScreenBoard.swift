import APNsSimulator
import Foundation

/// What each Lock Screen of the scene shows, derived only from what the APNs simulator accepted
/// (its device and channel views and its delivery log), never from what was produced.
/// Feed it snapshots; it returns the lines to print for what changed since the last snapshot.
/// A value type with no I/O: the demo's poll loop owns one and calls `update` from one task.
struct LockScreenBoard {
    /// One card as a phone would render it.
    struct Face: Equatable, Sendable {
        var text: String
        var ended: Bool
        var sends: Int
        var lastPriority: Int?
        var tokenGone: Bool
        /// `content-state` last applied, as received.
        var contentState: String
    }

    enum Line: Equatable, Sendable {
        case card(name: String, face: Face)
        case alert(name: String, title: String, body: String, priority: Int)
    }

    let cards: [DemoScene.Card]
    private(set) var faces: [String: Face] = [:]
    private var seenDeliveries = 0
    private var sendCounts: [String: Int] = [:]
    private var lastPriorities: [String: Int] = [:]
    private var goneTokens: Set<String> = []

    init(cards: [DemoScene.Card]) { self.cards = cards }

    /// - Parameters:
    ///   - views: the simulator's view per token / channel id of the scene's cards.
    ///   - deliveries: every accepted push so far, oldest first (the simulator's list; only new ones are read).
    ///   - goneTokens: tokens reported on activity-token-feedback.
    mutating func update(views: [String: DeviceView], deliveries: [DeliveryRecord], goneTokens gone: Set<String>) -> [Line] {
        var lines: [Line] = []
        if deliveries.count > seenDeliveries {
            for record in deliveries[seenDeliveries...] {
                guard let card = card(for: record) else { continue }
                sendCounts[card.name, default: 0] += 1
                lastPriorities[card.name] = record.priority
                if let alert = Self.alert(inAPS: record.aps) {
                    lines.append(.alert(name: card.name, title: alert.title, body: alert.body, priority: record.priority))
                }
            }
            seenDeliveries = deliveries.count
        }
        goneTokens.formUnion(gone)
        for card in cards {
            guard let face = face(of: card, views: views), face != faces[card.name] else { continue }
            faces[card.name] = face
            lines.append(.card(name: card.name, face: face))
        }
        return lines
    }

    private func card(for record: DeliveryRecord) -> DemoScene.Card? {
        if let token = record.token { return cards.first { $0.tokens.contains(token) } }
        if let channel = record.channel { return cards.first { $0.channel == channel } }
        return nil
    }

    /// The view a phone shows for the card: the most recent applied view among its targets (a
    /// push-to-start token's view until the activity's own token takes over).
    private func face(of card: DemoScene.Card, views: [String: DeviceView]) -> Face? {
        let targets = card.tokens + (card.channel.map { [$0] } ?? [])
        let candidates = targets.compactMap { views[$0] }
        guard let view = candidates.max(by: { ($0.ended ? 1 : 0, $0.timestamp) < ($1.ended ? 1 : 0, $1.timestamp) }) else { return nil }
        return Face(text: Self.render(card.kind, contentState: view.contentState), ended: view.ended,
                    sends: sendCounts[card.name] ?? 0, lastPriority: lastPriorities[card.name],
                    tokenGone: card.tokens.contains { goneTokens.contains($0) }, contentState: view.contentState)
    }

    // MARK: Rendering a content state the way the app's widget would

    static func render(_ kind: DemoScene.Card.Kind, contentState: String) -> String {
        guard let state = (try? JSONSerialization.jsonObject(with: Data(contentState.utf8))) as? [String: Any] else {
            return "(unreadable content-state)"
        }
        switch kind {
        case .export:
            let phase = (state["phase"] as? String ?? "?").capitalized
            let progress = (state["progress"] as? NSNumber)?.doubleValue ?? 0
            return "\(phase) · \(Int((progress * 100).rounded()))%"
        case .delivery:
            let courier = state["courier"] as? String
            let eta = (state["eta_minutes"] as? NSNumber)?.intValue ?? 0
            let status: String
            switch state["status"] as? String {
            case "confirmed": status = "Order confirmed"
            case "preparing": status = "Being prepared"
            case "picked_up": status = "Picked up by \(courier ?? "the courier")"
            case "on_the_way": status = "\(courier ?? "Courier") is on the way"
            case "arriving": status = "Arriving"
            case "delivered": status = "Delivered"
            case let other: status = other ?? "?"
            }
            return eta > 0 ? "\(status) · \(eta) min" : status
        case .match:
            let home = state["home"] as? String ?? "?", away = state["away"] as? String ?? "?"
            let homeScore = (state["home_score"] as? NSNumber)?.intValue ?? 0
            let awayScore = (state["away_score"] as? NSNumber)?.intValue ?? 0
            let minute = state["minute"] as? String ?? ""
            return "\(home) \(homeScore)–\(awayScore) \(away) · \(minute)"
        }
    }

    /// `aps.alert` title and body, when the push carried an alert.
    static func alert(inAPS aps: String) -> (title: String, body: String)? {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(aps.utf8))) as? [String: Any],
              let alert = object["alert"] as? [String: Any] else { return nil }
        return (text(alert["title"]), text(alert["body"]))
    }

    private static func text(_ value: Any?) -> String {
        if let string = value as? String { return string }
        if let localized = value as? [String: Any], let key = localized["loc-key"] as? String { return key }
        return ""
    }
}
