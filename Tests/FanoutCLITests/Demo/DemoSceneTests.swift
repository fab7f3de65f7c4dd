import FanoutCore
import Foundation
import Testing
@testable import FanoutCLI

/// The scripted scene must be what a careful producer would publish (apart from its one deliberate bug),
/// judged by the worker's own decoder.
@Suite struct DemoSceneTests {
    let scene = DemoScene(base: 1_780_000_000, channel: "dGVzdC1jaGFubmVsLTg4MQ==")
    let apps: Set<String> = [DemoScene.exportsApp, DemoScene.foodApp, DemoScene.sportsApp]

    @Test func everyEventButTheDeliberateBugPassesTheWorkersDecoder() throws {
        let decoder = EventDecoder(policy: EventPolicy(apps: apps))
        var rejections: [String: RejectionReason] = [:]
        var accepted = 0
        for step in scene.steps {
            guard case let .produce(topic, key, value) = step.action, topic != .activityTokens else { continue }
            let lane: Lane = topic == .broadcastUpdates ? .broadcast : .activity
            switch decoder.decode(value, key: key, lane: lane, now: scene.base + Int64(DemoScene.length)) {
            case .success: accepted += 1
            case .failure(let rejection): rejections[key + "@\(step.at)"] = rejection.reason
            }
        }
        #expect(rejections == ["export-42@44": .timestampInMilliseconds])
        #expect(accepted == scene.recordCounts.filter { $0.key != .activityTokens }.values.reduce(0, +) - 1)
    }

    @Test func tokenRecordsAreValidRegistrations() {
        let tokenSteps = scene.steps.compactMap { step -> (String, [UInt8])? in
            guard case let .produce(.activityTokens, key, value) = step.action else { return nil }
            return (key, value)
        }
        #expect(tokenSteps.map(\.0).sorted() == ["export-42", "export-43", "food-7"])
        for (key, value) in tokenSteps {
            guard case .register(let record) = TokenRecord.update(from: value, apps: apps) else {
                Issue.record("token record for \(key) was not a registration")
                continue
            }
            #expect(record.environment == .production)
        }
    }

    /// Fanout drops a state whose timestamp is not newer than the last one: each target's timestamps must rise.
    @Test func timestampsRiseStrictlyPerTarget() throws {
        var last: [String: Int64] = [:]
        for step in scene.steps {
            guard case let .produce(topic, key, value) = step.action, topic != .activityTokens else { continue }
            let object = try #require(try JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
            let timestamp = try #require((object["timestamp"] as? NSNumber)?.int64Value)
            if timestamp > 100_000_000_000 { continue }   // the deliberate milliseconds bug
            #expect(timestamp > last[key] ?? 0, "\(key) at story second \(step.at)")
            #expect(timestamp == scene.base + Int64(step.at))
            last[key] = timestamp
        }
        #expect(scene.steps.map(\.at).max() == DemoScene.length)
    }

    @Test func theUserDeletesTheAppWhileExport43IsStillPublishing() {
        let export43 = scene.steps.filter {
            if case .produce(.activityUpdates, "export-43", _) = $0.action { return true }
            return false
        }
        #expect(export43.contains { $0.at < DemoScene.unregisterAt })
        #expect(export43.contains { $0.at > DemoScene.unregisterAt })
        #expect(scene.steps.contains {
            if case .unregister(let token) = $0.action { return token == scene.export43Token && $0.at == DemoScene.unregisterAt }
            return false
        })
    }
}
