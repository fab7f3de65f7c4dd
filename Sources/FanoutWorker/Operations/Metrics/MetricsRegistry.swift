import Foundation
import Synchronization

/// All metrics of the process, rendered as Prometheus text exposition format 0.0.4 for `/metrics`.
///
/// Registration takes a lock and is meant for startup; registering the same name again with the same
/// kind and labels returns the existing family. Rendering locks each family briefly to list its
/// children; values are read atomically.
public final class MetricsRegistry: Sendable {
    private enum Entry: Sendable {
        case counter(CounterFamily)
        case gauge(GaugeFamily)
        case histogram(HistogramFamily)

        var name: String {
            switch self {
            case .counter(let f): f.name
            case .gauge(let f): f.name
            case .histogram(let f): f.name
            }
        }
    }

    private let entries = Mutex<[Entry]>([])

    public init() {}

    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public func counter(_ name: String, help: String, labels: [String] = []) -> CounterFamily {
        register(name, labels) { .counter(CounterFamily(name: name, help: help, kind: .counter, labelNames: labels, make: { Counter() })) }
            unwrap: { if case .counter(let f) = $0 { f } else { nil } }
    }

    public func gauge(_ name: String, help: String, labels: [String] = []) -> GaugeFamily {
        register(name, labels) { .gauge(GaugeFamily(name: name, help: help, kind: .gauge, labelNames: labels, make: { Gauge() })) }
            unwrap: { if case .gauge(let f) = $0 { f } else { nil } }
    }

    /// `buckets` are upper bounds; they are sorted, and `+Inf` is added implicitly.
    public func histogram(_ name: String, help: String, labels: [String] = [], buckets: [Double]) -> HistogramFamily {
        let bounds = Array(Set(buckets.filter(\.isFinite))).sorted()
        precondition(!labels.contains("le"), "histogram \(name) must not use the label name 'le'")
        return register(name, labels) {
            .histogram(HistogramFamily(name: name, help: help, kind: .histogram, labelNames: labels, make: { Histogram(bounds: bounds) }))
        } unwrap: { if case .histogram(let f) = $0 { f } else { nil } }
    }

    private func register<F>(_ name: String, _ labels: [String], make: () -> Entry, unwrap: (Entry) -> F?) -> F {
        precondition(Self.isValidName(name), "invalid metric name '\(name)'")
        for label in labels {
            precondition(Self.isValidName(label) && !label.contains(":") && !label.hasPrefix("__"), "invalid label name '\(label)' on \(name)")
        }
        return entries.withLock { entries in
            if let existing = entries.first(where: { $0.name == name }) {
                guard let family = unwrap(existing) else { preconditionFailure("metric \(name) registered twice with different kinds") }
                return family
            }
            let entry = make()
            entries.append(entry)
            return unwrap(entry)!
        }
    }

    static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !(("0"..."9").contains(first)) else { return false }
        return name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == ":" }
    }

    // MARK: Exposition

    public func render() -> String {
        let current = entries.withLock { $0 }
        var out = ""
        out.reserveCapacity(4096)
        for entry in current {
            switch entry {
            case .counter(let family):
                header(family.name, family.help, "counter", &out)
                for (values, counter) in family.snapshot() {
                    sample(family.name, family.labelNames, values, nil, String(counter.value), &out)
                }
            case .gauge(let family):
                header(family.name, family.help, "gauge", &out)
                for (values, gauge) in family.snapshot() {
                    sample(family.name, family.labelNames, values, nil, String(gauge.value), &out)
                }
            case .histogram(let family):
                header(family.name, family.help, "histogram", &out)
                for (values, histogram) in family.snapshot() {
                    let cumulative = histogram.cumulativeCounts
                    for (index, bound) in histogram.bounds.enumerated() {
                        sample(family.name + "_bucket", family.labelNames, values, ("le", Self.number(bound)), String(cumulative[index]), &out)
                    }
                    sample(family.name + "_bucket", family.labelNames, values, ("le", "+Inf"), String(cumulative[cumulative.count - 1]), &out)
                    sample(family.name + "_sum", family.labelNames, values, nil, Self.number(histogram.sum), &out)
                    sample(family.name + "_count", family.labelNames, values, nil, String(cumulative[cumulative.count - 1]), &out)
                }
            }
        }
        return out
    }

    private func header(_ name: String, _ help: String, _ type: String, _ out: inout String) {
        out += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    private func sample(_ name: String, _ labelNames: [String], _ values: [String], _ extra: (String, String)?, _ value: String, _ out: inout String) {
        out += name
        if !labelNames.isEmpty || extra != nil {
            out += "{"
            var first = true
            for (label, labelValue) in zip(labelNames, values) {
                if !first { out += "," }
                first = false
                out += label + "=\"" + Self.escapeLabelValue(labelValue) + "\""
            }
            if let (label, labelValue) = extra {
                if !first { out += "," }
                out += label + "=\"" + labelValue + "\""
            }
            out += "}"
        }
        out += " " + value + "\n"
    }

    /// Label values: backslash, double quote and line feed are escaped (format 0.0.4).
    static func escapeLabelValue(_ text: String) -> String { escape(text, quote: true) }

    /// HELP text: backslash and line feed are escaped. Every family's help goes out on every scrape,
    /// so text with neither (all of Fanout's) is returned as it is.
    static func escapeHelp(_ text: String) -> String { escape(text, quote: false) }

    /// By Unicode scalar, not Character: "\r\n" is one Character, and its line feed must be escaped too.
    private static func escape(_ text: String, quote: Bool) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\n") || (quote && $0 == UInt8(ascii: "\"")) })
        else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": out.append(contentsOf: "\\n".unicodeScalars)
            case "\"" where quote: out.append(contentsOf: "\\\"".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        return String(value)
    }
}
