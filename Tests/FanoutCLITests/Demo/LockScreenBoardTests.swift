import APNsSimulator
import Foundation
import Testing
@testable import FanoutCLI

@Suite struct LockScreenBoardTests {
    let scene = DemoScene(base: 1_780_000_000, channel: "dGVzdC1jaGFubmVsLTg4MQ==")

    private func view(_ target: String, event: String, timestamp: Double, state: String, ended: Bool = false) throws -> DeviceView {
        let json = """
        {"target":"\(target)","event":"\(event)","timestamp":\(timestamp),"content-state":\(try jsonString(state)),
         "ended":\(ended),"applied":1,"ignored":0}
        """
        return try JSONDecoder().decode(DeviceView.self, from: Data(json.utf8))
    }

    private func delivery(token: String? = nil, channel: String? = nil, priority: Int, aps: String) throws -> DeliveryRecord {
        var object: [String: Any] = ["time": 1.0, "kind": token == nil ? "broadcast" : "device", "bundle-id": "b", "priority": priority,
                                     "apns-id": "x", "apns-unique-id": "y", "push-type": "liveactivity", "event": "update",
                                     "timestamp": 1.0, "aps": aps]
        if let token { object["token"] = token }
        if let channel { object["channel"] = channel }
        return try JSONDecoder().decode(DeliveryRecord.self, from: JSONSerialization.data(withJSONObject: object))
    }

    private func jsonString(_ text: String) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast().description
    }

    @Test func rendersEachKindOfCardFromItsContentState() {
        #expect(LockScreenBoard.render(.export, contentState: #"{"phase":"uploading","progress":0.371}"#) == "Uploading · 37%")
        #expect(LockScreenBoard.render(.delivery, contentState: #"{"status":"picked_up","eta_minutes":15,"courier":"Marco"}"#)
                == "Picked up by Marco · 15 min")
        #expect(LockScreenBoard.render(.delivery, contentState: #"{"status":"delivered","eta_minutes":0}"#) == "Delivered")
        #expect(LockScreenBoard.render(.match, contentState: #"{"home":"Lions","away":"Tigers","home_score":2,"away_score":1,"minute":"FT"}"#)
                == "Lions 2–1 Tigers · FT")
        #expect(LockScreenBoard.render(.export, contentState: "not json") == "(unreadable content-state)")
    }

    @Test func showsAChangeOnceAndCountsSendsAndAlerts() throws {
        var board = LockScreenBoard(cards: scene.cards)
        let token = scene.export42Token
        let first = try delivery(token: token, priority: 10, aps: #"{"event":"update","timestamp":1,"content-state":{}}"#)
        let views = [token: try view(token, event: "update", timestamp: 10, state: #"{"phase":"preparing","progress":0}"#)]
        let lines = board.update(views: views, deliveries: [first], goneTokens: [])
        #expect(lines.count == 1)
        guard case let .card(name, face)? = lines.first else { Issue.record("expected a card line"); return }
        #expect(name == "export-42")
        #expect(face.text == "Preparing · 0%")
        #expect(face.sends == 1 && face.lastPriority == 10 && !face.ended)

        // Nothing new: nothing to print.
        #expect(board.update(views: views, deliveries: [first], goneTokens: []).isEmpty)

        let alert = try delivery(token: token, priority: 5,
                                 aps: #"{"event":"end","alert":{"title":"Export ready","body":"done"},"content-state":{}}"#)
        let ended = [token: try view(token, event: "end", timestamp: 20, state: #"{"phase":"ready","progress":1}"#, ended: true)]
        let next = board.update(views: ended, deliveries: [first, alert], goneTokens: [])
        #expect(next.first == .alert(name: "export-42", title: "Export ready", body: "done", priority: 5))
        guard case let .card(_, last)? = next.last else { Issue.record("expected a card line"); return }
        #expect(last.text == "Ready · 100%" && last.ended && last.sends == 2 && last.lastPriority == 5)
    }

    /// food-7 starts on its push-to-start token and continues on its own update token: one card.
    @Test func aPushToStartActivityContinuesOnItsUpdateToken() throws {
        var board = LockScreenBoard(cards: scene.cards)
        let start = try view(scene.foodPushToStartToken, event: "start", timestamp: 8, state: #"{"status":"confirmed","eta_minutes":30}"#)
        let update = try view(scene.foodUpdateToken, event: "update", timestamp: 20, state: #"{"status":"preparing","eta_minutes":25}"#)
        _ = board.update(views: [scene.foodPushToStartToken: start], deliveries: [], goneTokens: [])
        #expect(board.faces["food-7"]?.text == "Order confirmed · 30 min")
        _ = board.update(views: [scene.foodPushToStartToken: start, scene.foodUpdateToken: update], deliveries: [], goneTokens: [])
        #expect(board.faces["food-7"]?.text == "Being prepared · 25 min")
    }

    @Test func marksACardWhoseTokenWasReportedGone() throws {
        var board = LockScreenBoard(cards: scene.cards)
        let token = scene.export43Token
        let views = [token: try view(token, event: "update", timestamp: 10, state: #"{"phase":"uploading","progress":0.5}"#)]
        _ = board.update(views: views, deliveries: [], goneTokens: [])
        #expect(board.faces["export-43"]?.tokenGone == false)
        let lines = board.update(views: views, deliveries: [], goneTokens: [token])
        #expect(lines.count == 1)
        #expect(board.faces["export-43"]?.tokenGone == true)
    }

    @Test func theMatchCardFollowsTheChannelView() throws {
        var board = LockScreenBoard(cards: scene.cards)
        let push = try delivery(channel: scene.channel, priority: 10, aps: #"{"event":"update","content-state":{}}"#)
        let view = try view(scene.channel, event: "update", timestamp: 30,
                            state: #"{"home":"Lions","away":"Tigers","home_score":1,"away_score":1,"minute":"44'"}"#)
        _ = board.update(views: [scene.channel: view], deliveries: [push], goneTokens: [])
        #expect(board.faces["match-881"]?.text == "Lions 1–1 Tigers · 44'")
        #expect(board.faces["match-881"]?.sends == 1)
    }
}
