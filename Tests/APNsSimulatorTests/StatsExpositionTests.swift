@testable import APNsSimulator
import Foundation
import Testing

@Suite("GET /metrics: the simulator's counters as Prometheus text")
struct StatsExpositionTests {
    static func stats(responses: [String: Int]) -> APNsSimulatorStats {
        APNsSimulatorStats(responses: responses, requests: 7, accepted: 3, connectionsAccepted: 2, connectionsOpen: 1, connectionsRefused: 0,
                           goAwaysSent: 0, connectionsReset: 0, connectionsTimedOut: 0, acceptFailures: 0, untrackedTargets: 0,
                           deliveryLogWriteErrors: 0)
    }

    /// Samples of the text, name with labels → value, and the families in TYPE order; fails on a sample
    /// whose family had no HELP and TYPE before it.
    static func parse(_ text: String) -> (samples: [String: String], types: [String: String]) {
        var samples: [String: String] = [:], types: [String: String] = [:], helped: Set<String> = []
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("# HELP ") { helped.insert(String(line.dropFirst(7).prefix { $0 != " " })); continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ")
                types[String(parts[0])] = String(parts[1])
                continue
            }
            guard let space = line.lastIndex(of: " ") else { Issue.record("not a sample: \(line)"); continue }
            let series = String(line[..<space])
            let name = String(series.prefix { $0 != "{" })
            #expect(types[name] != nil && helped.contains(name), "\(name) sampled before its HELP and TYPE")
            samples[series] = String(line[line.index(after: space)...])
        }
        return (samples, types)
    }

    @Test func everyCounterIsOneFamilyWithHelpTypeAndTotal() {
        let text = StatsExposition.render(Self.stats(responses: ["200": 3, "410 Unregistered": 1, "503 (no reason)": 2]))
        let (samples, types) = Self.parse(text)
        #expect(samples["apns_sim_responses_total{status=\"200\",reason=\"\"}"] == "3")
        #expect(samples["apns_sim_responses_total{status=\"410\",reason=\"Unregistered\"}"] == "1")
        #expect(samples["apns_sim_responses_total{status=\"503\",reason=\"(no reason)\"}"] == "2", "an injected answer without a reason")
        #expect(samples["apns_sim_requests_total"] == "7")
        #expect(samples["apns_sim_pushes_accepted_total"] == "3")
        #expect(samples["apns_sim_connections_open"] == "1")
        for (name, type) in types {
            #expect(name.hasPrefix("apns_sim_"))
            #expect((type == "counter") == name.hasSuffix("_total"), "\(name) is a \(type)")
        }
        #expect(types.count == 12)
    }

    @Test func aReasonIsEscapedAsALabelValue() {
        let text = StatsExposition.render(Self.stats(responses: ["500 say \"no\"\\": 1]))
        #expect(text.contains(#"apns_sim_responses_total{status="500",reason="say \"no\"\\"} 1"#))
    }

    @Test func aCarriageReturnLineFeedInAReasonIsEscaped() {
        #expect(StatsExposition.escape("a\r\nb") == "a\r\\nb")
    }

    /// The control endpoint answers /metrics as text with Prometheus's content type, counting real answers.
    @Test func theControlEndpointServesMetrics() async throws {
        let harness = try SimulatorHarness()
        #expect(try await harness.devicePush().status == 200)
        let result = try await SimulatorHarness.run("/usr/bin/curl", ["--silent", "--show-error", "--include", harness.simulator.controlURL + "/metrics"])
        let (head, body) = try #require(result.stdout.range(of: "\r\n\r\n").map { (result.stdout[..<$0.lowerBound], String(result.stdout[$0.upperBound...])) })
        #expect(head.hasPrefix("HTTP/1.1 200"))
        #expect(head.lowercased().contains("content-type: text/plain; version=0.0.4"))
        let (samples, _) = Self.parse(body)
        #expect(samples["apns_sim_responses_total{status=\"200\",reason=\"\"}"] == "1")
        #expect(samples["apns_sim_pushes_accepted_total"] == "1")
    }
}
