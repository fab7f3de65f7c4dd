import Foundation
import Synchronization
import Testing
@testable import FanoutCLI

/// A small seeded load test through the real embedded pipeline (mock Kafka, APNs simulator over
/// HTTP/2+TLS, two workers in one group): every check passes and the numbers agree with what was published.
@Suite struct LoadTestRunTests {
    @Test func aSmallSeededRunPassesEveryCheckWithConsistentNumbers() async throws {
        var options = try LoadTestOptions.parse(["--events", "400", "--activities", "30", "--channels", "3", "--workers", "2",
                                                 "--seed", "11", "--malformed", "0.03", "--duplicates", "0.02", "--partitions", "4",
                                                 // This runs beside the whole suite on 2 cores: arrivals at the simulator
                                                 // can lag their send decisions more than on a quiet machine.
                                                 "--interval-tolerance-ms", "500"])
        options.timeout = .seconds(90)   // a safety net against hangs; the report says what was pending
        let plan = try LoadPlan(options: options)
        let progress = Mutex<[String]>([])
        let report = try await LoadTestRunner.run(options: options) { line in progress.withLock { $0.append(line) } }

        #expect(report.problems.isEmpty, "\(report.problems)")
        for check in report.checks { #expect(check.passed, "\(check.name): \(check.example ?? "")") }
        #expect(report.passed)

        // What was published: exactly the plan.
        #expect(report.produced.events == 400)
        #expect(report.produced.malformed == plan.malformed && plan.malformed == 12)
        #expect(report.produced.duplicates == plan.duplicates)
        #expect(report.produced.storyEvents == plan.activityStoryEvents + plan.channelStoryEvents)
        #expect(report.produced.acknowledged == 400 + 30)
        #expect(report.produced.tokenRegistrations == 30)

        // What the workers did with it: everything read once, the malformed share dead-lettered by reason.
        #expect(report.consumed.events == report.produced.events)
        #expect(report.deadLetters.values.reduce(0, +) == plan.malformed)
        #expect(report.deadLetters == report.malformedByReason)

        // Pushes: the workers' delivered sends are what the simulator accepted; never more pushes than events.
        let delivered = report.sends.reduce(0) { $0 + $1.delivered }
        let accepted = report.acceptedByPriority.values.reduce(0, +)
        #expect(delivered == accepted)
        #expect(accepted <= report.produced.storyEvents)
        #expect(accepted >= 30 + 3)   // at least every target's end
        #expect(report.sends.contains { $0.lane == "broadcast" } && report.sends.contains { $0.lane == "activity" })
        #expect((report.coalescingRatio ?? 0) >= 1)
        #expect(report.latency.pushes == accepted)
        #expect(report.latency.unmatched == 0)
        let p50 = try #require(report.latency.p50Millis), p99 = try #require(report.latency.p99Millis)
        #expect(p50 <= p99 && p99 <= (report.latency.maxMillis ?? 0))

        // Both renderings carry the verdict.
        #expect(report.render().last == "PASS: every check passed")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
        #expect(json["passed"] as? Bool == true)
        #expect((json["produced"] as? [String: Any])?["events"] as? Int == 400)
    }
}
