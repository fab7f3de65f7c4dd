import Foundation
import Testing
@testable import FanoutWorker

/// A strict reader of Prometheus text format 0.0.4, enough to check what `render()` writes.
struct ExpositionParser {
    struct Sample: Hashable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    var help: [String: String] = [:]
    var type: [String: String] = [:]
    var samples: [Sample] = []

    init(_ text: String) throws {
        #expect(text.hasSuffix("\n"))
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("# HELP ") {
                let rest = line.dropFirst(7)
                let name = String(rest.prefix { $0 != " " })
                help[name] = String(rest.dropFirst(name.count + 1))
                    .replacingOccurrences(of: "\\n", with: "\n").replacingOccurrences(of: "\\\\", with: "\\")
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ")
                try #require(parts.count == 2)
                type[String(parts[0])] = String(parts[1])
            } else {
                samples.append(try Self.sample(Substring(line)))
            }
        }
    }

    static func sample(_ line: Substring) throws -> Sample {
        var rest = line[...]
        let name = String(rest.prefix { $0 != "{" && $0 != " " })
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let label = String(rest.prefix { $0 != "=" })
                rest = rest.dropFirst(label.count)
                try #require(rest.hasPrefix("=\""), "bad label syntax in \(line)")
                rest = rest.dropFirst(2)
                var value = ""
                while let character = rest.first, character != "\"" {
                    rest = rest.dropFirst()
                    if character == "\\" {
                        let escaped = try #require(rest.first)
                        rest = rest.dropFirst()
                        switch escaped {
                        case "n": value.append("\n")
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        default: Issue.record("invalid escape \\\(escaped) in \(line)")
                        }
                    } else {
                        try #require(character != "\n")
                        value.append(character)
                    }
                }
                rest = rest.dropFirst()  // closing quote
                labels[label] = value
                if rest.first == "," { rest = rest.dropFirst() }
            }
            rest = rest.dropFirst()
        }
        try #require(rest.first == " ", "missing space before value in \(line)")
        let text = rest.dropFirst()
        let value: Double = switch text {
        case "+Inf": .infinity
        case "-Inf": -.infinity
        default: try #require(Double(text), "bad value in \(line)")
        }
        return Sample(name: name, labels: labels, value: value)
    }

    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }
}

@Suite struct MetricsTests {
    @Test func countersAndGaugesRenderWithLabels() throws {
        let registry = MetricsRegistry()
        let sends = registry.counter("fanout_test_sends_total", help: "Sends.", labels: ["lane", "outcome"])
        let delivered = sends.labels("activity", "delivered")
        delivered.increment()
        delivered.increment(by: 41)
        sends.labels("broadcast", "retry").increment()
        #expect(sends.labels("activity", "delivered") === delivered)
        let inFlight = registry.gauge("fanout_test_in_flight", help: "In flight.", labels: ["lane"])
        inFlight.labels("activity").increment(by: 5)
        inFlight.labels("activity").decrement(by: 2)
        inFlight.labels("broadcast").set(-1)
        let plain = registry.gauge("fanout_test_plain", help: "No labels.")
        plain.labels().set(7)

        let parsed = try ExpositionParser(registry.render())
        #expect(parsed.type["fanout_test_sends_total"] == "counter")
        #expect(parsed.type["fanout_test_in_flight"] == "gauge")
        #expect(parsed.help["fanout_test_sends_total"] == "Sends.")
        #expect(parsed.value("fanout_test_sends_total", ["lane": "activity", "outcome": "delivered"]) == 42)
        #expect(parsed.value("fanout_test_sends_total", ["lane": "broadcast", "outcome": "retry"]) == 1)
        #expect(parsed.value("fanout_test_in_flight", ["lane": "activity"]) == 3)
        #expect(parsed.value("fanout_test_in_flight", ["lane": "broadcast"]) == -1)
        #expect(parsed.value("fanout_test_plain") == 7)
        #expect(parsed.samples.count == 5)
    }

    @Test func histogramBucketsAreCumulativeWithSumAndCount() throws {
        let registry = MetricsRegistry()
        let latency = registry.histogram("fanout_test_latency_seconds", help: "Latency.", labels: ["lane"], buckets: [0.1, 0.01, 1])
        let activity = latency.labels("activity")
        for value in [0.005, 0.01, 0.05, 0.5, 2.0] { activity.observe(value) }
        activity.observe(.milliseconds(20))

        let parsed = try ExpositionParser(registry.render())
        #expect(parsed.type["fanout_test_latency_seconds"] == "histogram")
        let bucket = "fanout_test_latency_seconds_bucket"
        #expect(parsed.value(bucket, ["lane": "activity", "le": "0.01"]) == 2)  // 0.005, 0.01 (le is inclusive)
        #expect(parsed.value(bucket, ["lane": "activity", "le": "0.1"]) == 4)
        #expect(parsed.value(bucket, ["lane": "activity", "le": "1.0"]) == 5)
        #expect(parsed.value(bucket, ["lane": "activity", "le": "+Inf"]) == 6)
        #expect(parsed.value("fanout_test_latency_seconds_count", ["lane": "activity"]) == 6)
        let sum = try #require(parsed.value("fanout_test_latency_seconds_sum", ["lane": "activity"]))
        #expect(abs(sum - 2.585) < 1e-9)
        // Buckets appear in increasing order of le, +Inf last.
        let order = parsed.samples.filter { $0.name == bucket }.map { $0.labels["le"]! }
        #expect(order == ["0.01", "0.1", "1.0", "+Inf"])
    }

    @Test func labelValuesAndHelpAreEscaped() throws {
        let registry = MetricsRegistry()
        let errors = registry.counter("fanout_test_errors_total", help: "Back\\slash and\nnewline.", labels: ["reason"])
        let nasty = "quote\" back\\slash\nnewline"
        errors.labels(nasty).increment(by: 3)
        let text = registry.render()
        #expect(text.contains(#"reason="quote\" back\\slash\nnewline""#))
        #expect(text.contains("# HELP fanout_test_errors_total Back\\\\slash and\\nnewline."))
        let parsed = try ExpositionParser(text)
        #expect(parsed.value("fanout_test_errors_total", ["reason": nasty]) == 3)
        #expect(parsed.help["fanout_test_errors_total"] == "Back\\slash and\nnewline.")
    }

    /// "\r\n" is one Swift Character: its line feed is escaped all the same, or the exposition breaks
    /// the line in the middle of a sample.
    @Test func aCarriageReturnLineFeedIsEscapedInLabelsAndHelp() throws {
        let registry = MetricsRegistry()
        let errors = registry.counter("fanout_test_crlf_total", help: "Two\r\nlines.", labels: ["reason"])
        errors.labels("a\r\nb").increment()
        let text = registry.render()
        #expect(text.contains("reason=\"a\r\\nb\""))
        #expect(text.contains("# HELP fanout_test_crlf_total Two\r\\nlines.\n"))
        #expect(!text.contains("\r\n"), "no raw line feed after a carriage return")
    }

    @Test func reRegisteringReturnsTheSameFamily() {
        let registry = MetricsRegistry()
        let first = registry.counter("fanout_test_total", help: "x", labels: ["a"])
        let second = registry.counter("fanout_test_total", help: "x", labels: ["a"])
        #expect(first === second)
    }

    @Test func concurrentUpdatesAreNotLost() async {
        let registry = MetricsRegistry()
        let counter = registry.counter("fanout_test_concurrent_total", help: "x").labels()
        let histogram = registry.histogram("fanout_test_concurrent_seconds", help: "x", buckets: [1]).labels()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<10_000 {
                        counter.increment()
                        histogram.observe(0.5)
                    }
                }
            }
        }
        #expect(counter.value == 80_000)
        #expect(histogram.count == 80_000)
        #expect(histogram.sum == 40_000)
        #expect(histogram.cumulativeCounts == [80_000, 80_000])
    }

    /// A counter that mirrors a count kept elsewhere (librdkafka's fetch nudges) only rises, and two
    /// scrapes that bring it up at once add nothing twice.
    @Test func aMirroredCounterRisesToItsSourceAndNoFurther() async {
        let counter = MetricsRegistry().counter("fanout_test_mirrored_total", help: "x").labels()
        counter.advance(to: 5)
        #expect(counter.value == 5)
        counter.advance(to: 3)
        #expect(counter.value == 5)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { for total in 6...1_000 { counter.advance(to: UInt64(total)) } } }
        }
        #expect(counter.value == 1_000)
    }

    @Test func fanoutMetricsRenderValidExposition() throws {
        let metrics = FanoutMetrics()
        metrics.eventsConsumed.labels("activity-updates").increment(by: 10)
        metrics.eventDecisions.labels("activity", FanoutMetrics.Decision.coalesced.rawValue).increment(by: 4)
        metrics.sends.labels("activity", "10", FanoutMetrics.SendResult.delivered.rawValue).increment()
        metrics.apnsLatency.labels("activity").observe(.milliseconds(12))
        metrics.consumerLag.labels("activity-updates", "3").set(17)
        metrics.tokenRegistrySize.labels().set(1234)
        let parsed = try ExpositionParser(metrics.registry.render())
        #expect(parsed.value("fanout_events_consumed_total", ["topic": "activity-updates"]) == 10)
        #expect(parsed.value("fanout_event_decisions_total", ["lane": "activity", "decision": "coalesced"]) == 4)
        #expect(parsed.value("fanout_apns_sends_total", ["lane": "activity", "priority": "10", "outcome": "delivered"]) == 1)
        #expect(parsed.value("fanout_apns_latency_seconds_count", ["lane": "activity"]) == 1)
        #expect(parsed.value("fanout_apns_latency_seconds_bucket", ["lane": "activity", "le": "0.025"]) == 1)
        #expect(parsed.value("fanout_apns_latency_seconds_bucket", ["lane": "activity", "le": "0.01"]) == 0)
        #expect(parsed.value("fanout_consumer_lag", ["topic": "activity-updates", "partition": "3"]) == 17)
        #expect(parsed.value("fanout_token_registry_size") == 1234)
        // Exported at 0 from the start, so an alert on any increase needs no absent() clause.
        #expect(parsed.value("fanout_apns_unmatched_ends_total", ["lane": "activity"]) == 0)
        #expect(parsed.value("fanout_apns_unmatched_ends_total", ["lane": "broadcast"]) == 0)
        #expect(parsed.value("fanout_apns_connection_backoffs_total", ["lane": "activity"]) == 0)
        #expect(parsed.value("fanout_apns_connection_backoffs_total", ["lane": "broadcast"]) == 0)
        #expect(parsed.value("fanout_heap_trims_total") == 0)
        // Not ready and no lane failing until the worker says otherwise; memory 0 until the first sample.
        #expect(parsed.value("fanout_ready") == 0)
        #expect(parsed.value("fanout_apns_lane_failing", ["lane": "activity"]) == 0)
        #expect(parsed.value("fanout_apns_lane_failing", ["lane": "broadcast"]) == 0)
        #expect(parsed.value("fanout_resident_memory_bytes") == 0)
        #expect(parsed.type["fanout_committed_offset"] == "gauge")
        // A revoked partition's lag series goes away rather than lingering at a stale value.
        metrics.consumerLag.labels("activity-updates", "4").set(5)
        metrics.committedOffset.labels("activity-updates", "3").set(120)
        #expect(try ExpositionParser(metrics.registry.render()).value("fanout_committed_offset", ["topic": "activity-updates", "partition": "3"]) == 120)
        metrics.consumerLag.remove("activity-updates", "3")
        metrics.committedOffset.remove("activity-updates", "3")
        let afterRevoke = try ExpositionParser(metrics.registry.render())
        #expect(afterRevoke.value("fanout_consumer_lag", ["topic": "activity-updates", "partition": "3"]) == nil)
        #expect(afterRevoke.value("fanout_committed_offset", ["topic": "activity-updates", "partition": "3"]) == nil)
        #expect(afterRevoke.value("fanout_consumer_lag", ["topic": "activity-updates", "partition": "4"]) == 5)
        #expect(afterRevoke.type["fanout_consumer_lag"] != nil)
        // Every family has HELP and TYPE, even before it has samples.
        for name in ["fanout_dead_letters_total", "fanout_paused_partitions", "fanout_app_blocked", "fanout_jwt_refreshes_total"] {
            #expect(parsed.type[name] != nil, "\(name) missing TYPE")
            #expect(parsed.help[name] != nil, "\(name) missing HELP")
        }
    }
}
