import FanoutCore
import FanoutKafka
import Foundation
import Synchronization
import Testing
@testable import FanoutCLI

/// Plays the whole demo in this process (mock Kafka, APNs simulator over HTTP/2+TLS, a real worker)
/// at 6× speed, then checks what the phones show and what Kafka holds. Each expectation is read from
/// the simulator or from Kafka, not from what the scene produced.
@Suite struct DemoRunTests {
    @Test func theSceneEndsWithEveryLockScreenFinalAndEverythingCommitted() async throws {
        let lines = Mutex<[String]>([])
        let console = DemoConsole(color: false, quiet: false) { line in lines.withLock { $0.append(line) } }
        var options = DemoOptions()
        options.speed = 6
        options.timeout = .seconds(55)   // a safety net against hangs; the run reports what was pending
        let outcome = try await DemoRunner.run(options: options, console: console)
        let scene = outcome.scene

        #expect(outcome.problems.isEmpty, "\(outcome.problems.joined(separator: "\n"))")

        // Final Lock Screens, as the simulator's device and channel views show them.
        let export42 = try #require(outcome.faces["export-42"])
        #expect(export42.ended)
        #expect(DemoChecks.sameJSON(export42.contentState, Array(#"{"phase":"ready","progress":1}"#.utf8)))
        let food = try #require(outcome.faces["food-7"])
        #expect(food.ended)
        #expect(food.text == "Delivered")
        let match = try #require(outcome.faces["match-881"])
        #expect(match.ended)
        #expect(DemoChecks.sameJSON(match.contentState,
                                    Array(#"{"home":"Lions","away":"Tigers","home_score":2,"away_score":1,"minute":"FT"}"#.utf8)))
        #expect(match.text == "Lions 2–1 Tigers · FT")

        // The match went out on the broadcast lane, the exports and the delivery on the activity lane.
        #expect(outcome.deliveries.contains { $0.channel == scene.channel && $0.event == "end" })
        #expect(outcome.deliveries.contains { $0.token == scene.foodPushToStartToken && $0.event == "start" })
        #expect(outcome.deliveries.contains { $0.token == scene.foodUpdateToken && $0.event == "end" })
        #expect(outcome.worker.sends.keys.contains { $0.lane == .broadcast })

        // The unregistered token: one attempt answered 410, a feedback record, and nothing accepted after.
        let gone = scene.export43Token
        let goneAt = try #require(outcome.ledger.unregistered[gone])
        // Whether export-43 got a push before its token went depends on timing; that the worker tried the
        // gone token exactly once, then stopped, does not.
        #expect(outcome.simulatorStats.count(status: 410, reason: .unregistered) == 1)
        #expect(!outcome.deliveries.contains { $0.token == gone && $0.time >= goneAt })
        #expect(outcome.feedback.contains { $0.key == "export-43" && $0.token == gone && $0.status == 410 })
        #expect(outcome.faces["export-43"]?.ended != true)

        // The malformed event, dead-lettered with its reason and its source.
        let malformed = outcome.deadLetters.filter { $0.reason == RejectionReason.timestampInMilliseconds.rawValue }
        #expect(malformed.count == 1)
        #expect(malformed.first?.key == "export-42")
        #expect(malformed.first?.source.hasPrefix("activity-updates/") == true)
        #expect(outcome.deadLetters.allSatisfy {
            $0.reason == RejectionReason.timestampInMilliseconds.rawValue || ($0.reason == RejectionReason.noToken.rawValue && $0.key == "export-43")
        })

        // Everything committed: the group's offsets, read back after the worker stopped, reach each partition's end.
        #expect(!outcome.ledger.ends.isEmpty)
        for partition in outcome.eventPartitions {
            let end = outcome.ledger.ends[partition] ?? 0
            guard end > 0 else { continue }
            #expect(outcome.committed[partition] == .some(end), "\(partition)")
        }
        let produced = outcome.ledger.acked[DemoScene.Topic.activityUpdates.rawValue, default: 0]
            + outcome.ledger.acked[DemoScene.Topic.broadcastUpdates.rawValue, default: 0]
        #expect(outcome.worker.eventsIn == produced)
        #expect(outcome.worker.coalesced > 0)

        // The terminal told the story and closed with the summary.
        let text = lines.withLock { $0 }.joined(separator: "\n")
        #expect(text.contains("[match-881]  Lions 2–1 Tigers · FT"))
        #expect(text.contains("timestamp-in-milliseconds"))
        #expect(text.contains("410 Unregistered"))
        let summary = DemoSummary.render(outcome, console: console).joined(separator: "\n")
        #expect(summary.contains("Every Lock Screen shows its final state"))
    }
}
