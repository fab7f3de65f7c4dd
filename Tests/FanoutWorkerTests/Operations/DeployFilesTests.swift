import Foundation
import Testing
@testable import FanoutWorker

/// The alert rules and the dashboard in deploy/ read only series the worker exports: the names come
/// from a fresh `FanoutMetrics` registry rendered as `/metrics` renders it (every family has HELP and
/// TYPE before its first sample). `scripts/check-deploy` runs this beside promtool's checks.
@Suite struct DeployFilesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let rules = root.appendingPathComponent("deploy/prometheus/fanout-rules.yml").path
    static let ruleTests = root.appendingPathComponent("deploy/prometheus/fanout-rules.test.yml").path
    static let dashboard = root.appendingPathComponent("deploy/grafana/fanout-dashboard.json").path
    /// Series Prometheus makes itself (the scrape's `up`), which the rules may read.
    static let prometheusSeries: Set<String> = ["up"]

    /// Family name → TYPE, as `/metrics` shows them.
    static func exportedFamilies() -> [String: String] {
        var families: [String: String] = [:]
        for line in FanoutMetrics().registry.render().split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.dropFirst(7).split(separator: " ")
            families[String(parts[0])] = String(parts[1])
        }
        return families
    }

    /// Sample names a query may use: gauges and counters by name, histograms by their three series.
    static func exportedSeries() -> Set<String> {
        var names: Set<String> = []
        for (name, type) in exportedFamilies() {
            if type == "histogram" { names.formUnion([name + "_bucket", name + "_sum", name + "_count"]) } else { names.insert(name) }
        }
        return names
    }

    /// Values of `key:` in a YAML file, inline or as a `>`/`|` block (joined by spaces), unquoted.
    static func values(of key: String, inYAML text: String) -> [String] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var values: [String] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.drop { $0 == " " || $0 == "-" }
            index += 1
            guard trimmed.hasPrefix(key + ":") else { continue }
            var value = trimmed.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces)
            if value.hasPrefix(">") || value.hasPrefix("|") {
                let indent = line.prefix { $0 == " " }.count
                var block: [String] = []
                while index < lines.count, lines[index].prefix(while: { $0 == " " }).count > indent || lines[index].isEmpty {
                    block.append(lines[index].trimmingCharacters(in: .whitespaces))
                    index += 1
                }
                value = block.joined(separator: " ").trimmingCharacters(in: .whitespaces)
            } else if value.count >= 2, let first = value.first, first == "'" || first == "\"", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            values.append(value)
        }
        return values
    }

    /// Every `expr` of the dashboard's panels, and the selector of each `label_values(…, label)` variable query.
    static func dashboardQueries() throws -> (expressions: [String], variables: [String]) {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dashboard))) as? [String: Any])
        var expressions: [String] = []
        func walk(_ value: Any) {
            if let object = value as? [String: Any] {
                for (key, child) in object {
                    if key == "expr", let text = child as? String { expressions.append(text) } else { walk(child) }
                }
            } else if let array = value as? [Any] {
                array.forEach(walk)
            }
        }
        walk(json["panels"] ?? [])
        var variables: [String] = []
        for variable in (json["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? [] where variable["type"] as? String == "query" {
            let query = (variable["query"] as? [String: Any])?["query"] as? String ?? variable["query"] as? String ?? ""
            guard query.hasPrefix("label_values("), let comma = query.lastIndex(of: ",") else {
                Issue.record("variable \(variable["name"] ?? "?") is not a label_values(selector, label) query: \(query)")
                continue
            }
            variables.append(String(query[query.index(query.startIndex, offsetBy: 13)..<comma]))
        }
        return (expressions, variables)
    }

    @Test func everyNameInTheRulesAndTheDashboardIsExported() throws {
        let rules = try String(contentsOfFile: Self.rules, encoding: .utf8)
        let ruleExpressions = Self.values(of: "expr", inYAML: rules)
        let recorded = Set(Self.values(of: "record", inYAML: rules))
        #expect(ruleExpressions.count == 12, "3 recording rules and 9 alerts")
        #expect(recorded == ["fanout:dead_letters:rate5m", "fanout:token_feedback:rate5m", "fanout:consumer_lag:sum"])
        let testSeries = Self.values(of: "series", inYAML: try String(contentsOfFile: Self.ruleTests, encoding: .utf8))
            .map { String($0.prefix { $0 != "{" }) }
        #expect(testSeries.count >= 30)
        let (panelExpressions, variables) = try Self.dashboardQueries()
        #expect(panelExpressions.count >= 40)
        #expect(variables.count == 2)

        let known = Self.exportedSeries().union(recorded).union(Self.prometheusSeries)
        for (source, expressions) in [("rules", ruleExpressions), ("dashboard", panelExpressions + variables)] {
            for expression in expressions {
                let names = PromQLNames.metricNames(in: expression)
                #expect(!names.isEmpty, "\(source): no metric in \(expression)")
                let unknown = names.subtracting(known).sorted()
                #expect(unknown.isEmpty, "\(source): \(unknown) not exported, in \(expression)")
            }
        }
        let unknownTestSeries = Set(testSeries).subtracting(known).sorted()
        #expect(unknownTestSeries.isEmpty, "rule tests feed \(unknownTestSeries)")
        // The rules read only the raw series they need; recorded series only where defined.
        let ruleNames = ruleExpressions.reduce(into: Set<String>()) { $0.formUnion(PromQLNames.metricNames(in: $1)) }
        let undefined = ruleNames.filter { $0.contains(":") }.subtracting(recorded)
        #expect(undefined.isEmpty, "recorded series read but not defined: \(undefined.sorted())")
    }

    /// Each family the worker exports has a panel: a new metric is shown, or its absence is decided here.
    @Test func everyExportedFamilyIsOnTheDashboard() throws {
        let used = try Self.dashboardQueries().expressions.reduce(into: Set<String>()) { $0.formUnion(PromQLNames.metricNames(in: $1)) }
        for (family, type) in Self.exportedFamilies() {
            let shown = type == "histogram" ? used.contains(family + "_bucket") : used.contains(family)
            #expect(shown, "\(family) (\(type)) has no panel")
        }
        #expect(Self.exportedFamilies().count >= 30)
    }

    @Test func theNameReaderFindsMetricsAndNothingElse() {
        let cases: [(String, Set<String>)] = [
            (#"sum by (lane, le) (rate(fanout_apns_latency_seconds_bucket{le="0.1",lane=~"$lane"}[$__rate_interval]))"#,
             ["fanout_apns_latency_seconds_bucket"]),
            ("fanout_consumer_lag > 0 and changes(fanout_committed_offset[10m] offset 5m) == 0",
             ["fanout_consumer_lag", "fanout_committed_offset"]),
            (#"label_replace(up, "dst", "$1", "src", "(.*)")"#, ["up"]),
            ("a / ignoring (code) group_left b", ["a", "b"]),
            ("5 * (avg_over_time(fanout:x:rate5m[1h:1m] offset 15m) or fanout:x:rate5m * 0)", ["fanout:x:rate5m"]),
            ("count(c > bool 1) or vector(0)", ["c"]),
            ("sum without (instance) (d) / on(job) group_right(app) e", ["d", "e"]),
            ("max by (app) (g) + topk by (lane) (3, h)", ["g", "h"]),
            (#"f{reason="}and{"} @ 1.5e3 + Inf - time()"#, ["f"]),
            ("sum(rate(fanout_apns_sends_totl[5m]))", ["fanout_apns_sends_totl"]),
        ]
        for (expression, names) in cases {
            #expect(PromQLNames.metricNames(in: expression) == names, "\(expression)")
        }
        #expect(!PromQLNames.metricNames(in: "sum(rate(fanout_apns_sends_totl[5m]))").isSubset(of: Self.exportedSeries()),
                "a misspelt name is caught")
    }
}
