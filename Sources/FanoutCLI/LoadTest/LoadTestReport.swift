import Foundation

/// What `fanout loadtest` measured and checked; printed as a table or, with `--json`, as this value.
struct LoadTestReport: Sendable, Codable {
    struct Setup: Sendable, Codable {
        var seed: UInt64
        var workers: Int
        var activities: Int
        var channels: Int
        var partitions: Int
        var rate: Double
        var build: String
    }

    struct Produced: Sendable, Codable {
        /// Records published to activity-updates and broadcast-updates (all kinds).
        var events = 0
        var storyEvents = 0
        var malformed = 0
        var duplicates = 0
        var tokenRegistrations = 0
        /// Records Kafka acknowledged / refused.
        var acknowledged = 0
        var failed = 0
        /// From the first event handed to the producer to the last.
        var seconds = 0.0
        var perSecond = 0.0
    }

    struct Consumed: Sendable, Codable {
        /// Records the workers read from the event topics (replays after a rebalance count again).
        var events = 0
        /// From the first event produced until every offset was committed and every final state delivered.
        var seconds = 0.0
        var perSecond = 0.0
    }

    struct Sends: Sendable, Codable {
        var lane: String
        var priority: Int
        /// Sends the workers made, and those APNs (the simulator) answered 200.
        var attempted: Int
        var delivered: Int
    }

    struct Latency: Sendable, Codable {
        var measured: String
        var pushes: Int
        var unmatched: Int
        var p50Millis: Double?
        var p90Millis: Double?
        var p99Millis: Double?
        var maxMillis: Double?
    }

    struct Check: Sendable, Codable {
        var name: String
        var description: String
        var passed: Bool
        var count: Int
        var example: String?
    }

    var setup: Setup
    var produced = Produced()
    var consumed = Consumed()
    var sends: [Sends] = []
    /// Pushes the simulator accepted, by priority, as the audit saw them.
    var acceptedByPriority: [String: Int] = [:]
    /// Valid events the workers took in per push APNs accepted.
    var coalescingRatio: Double?
    var deadLetters: [String: Int] = [:]
    var malformedByReason: [String: Int] = [:]
    var latency: Latency
    var checks: [Check] = []
    /// Why the run could not finish (timeout, interrupt, a worker that never got ready); empty when it did.
    var problems: [String] = []
    var workerLogDirectory: String?

    var passed: Bool { problems.isEmpty && checks.allSatisfy(\.passed) }

    func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var object = try JSONSerialization.jsonObject(with: encoder.encode(self)) as? [String: Any] ?? [:]
        object["passed"] = passed
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self)
    }

    /// The human-readable table.
    func render() -> [String] {
        var lines: [String] = []
        func row(_ name: String, _ value: String) { lines.append("  " + name.padding(toLength: 30, withPad: " ", startingAt: 0) + value) }
        func rate(_ value: Double) -> String { String(format: "%.0f/s", value) }
        lines.append("fanout loadtest — seed \(setup.seed), \(setup.workers) worker(s), \(setup.activities) activities, "
                     + "\(setup.channels) channels, \(setup.partitions) partitions, rate \(setup.rate == 0 ? "as fast as possible" : rate(setup.rate)) (\(setup.build) build)")
        row("events produced", "\(produced.events) in \(String(format: "%.2f", produced.seconds)) s = \(rate(produced.perSecond))"
            + " (\(produced.storyEvents) story, \(produced.malformed) malformed, \(produced.duplicates) duplicates; "
            + "+\(produced.tokenRegistrations) token registrations)")
        if produced.failed > 0 { row("refused by Kafka", "\(produced.failed)") }
        row("events consumed", "\(consumed.events) in \(String(format: "%.2f", consumed.seconds)) s = \(rate(consumed.perSecond))"
            + " (until all committed and delivered)")
        for send in sends {
            row("sends \(send.lane) p\(send.priority)", "\(send.delivered) delivered of \(send.attempted) attempted")
        }
        row("pushes accepted by simulator", acceptedByPriority.sorted { $0.key < $1.key }.map { "p\($0.key): \($0.value)" }.joined(separator: ", "))
        row("coalescing ratio", coalescingRatio.map { String(format: "%.2f valid events per accepted push", $0) } ?? "n/a (no push)")
        row("dead letters", deadLetters.isEmpty ? "none" : deadLetters.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        row("malformed produced", malformedByReason.isEmpty ? "none" : malformedByReason.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        if let p50 = latency.p50Millis, let p90 = latency.p90Millis, let p99 = latency.p99Millis, let max = latency.maxMillis {
            row("latency p50/p90/p99/max", String(format: "%.1f / %.1f / %.1f / %.1f ms over %d pushes", p50, p90, p99, max, latency.pushes)
                + (latency.unmatched > 0 ? " (\(latency.unmatched) not matched)" : ""))
        } else {
            row("latency", "no push measured")
        }
        lines.append("  (latency: \(latency.measured))")
        lines.append("checks:")
        for check in checks {
            lines.append("  \(check.passed ? "✓" : "✗") \(check.description)" + (check.passed ? "" : " — \(check.count) violation(s)"))
            if !check.passed, let example = check.example { lines.append("      e.g. \(example)") }
        }
        for problem in problems { lines.append("✗ \(problem)") }
        if let directory = workerLogDirectory { lines.append("worker logs: \(directory)") }
        lines.append(passed ? "PASS: every check passed" : "FAIL: " + (problems.isEmpty ? "\(checks.filter { !$0.passed }.count) check(s) failed" : "the run did not complete"))
        return lines
    }
}
