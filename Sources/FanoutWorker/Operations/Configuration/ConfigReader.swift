import FanoutKafka
import Foundation
/// One knob's final value and where it came from, as `describe()` prints it.
public struct ConfigKnob: Sendable, Hashable {
    public var key: String
    /// The value as text; `<redacted>` for secrets.
    public var value: String
    public var source: ConfigSource
}

/// Shared state of one configuration read: collected issues and knobs.
final class ConfigReadContext {
    /// The librdkafka the properties are checked against (`KafkaGroupProtocol`); a parameter for tests.
    let librdkafka: LibrdkafkaVersion
    var issues: [ConfigurationError.Issue] = []
    var knobs: [ConfigKnob] = []
    /// Every key read, sections and lists included, in the order asked: each one is a knob or holds
    /// knobs, so `--print-config` can be checked against what the loader reads without a second list.
    var asked: [String] = []

    init(librdkafka: LibrdkafkaVersion = .linked) {
        self.librdkafka = librdkafka
    }

    func issue(_ key: String, _ message: String, _ source: ConfigSource?) {
        issues.append(.init(key: key, message: message, source: source))
    }
}

/// Typed reading of one object of the merged tree. Every read records the knob (for `describe()`)
/// and marks the key as known; `finish()` then reports any key nobody asked for, with a suggestion.
/// Bad values become issues and the default is returned, so one pass finds every problem.
final class ConfigReader {
    let path: String
    private let fields: [String: ConfigNode]
    private let objectSource: ConfigSource
    private var known: [String] = []
    let context: ConfigReadContext

    init(path: String, node: ConfigNode?, context: ConfigReadContext) {
        self.path = path
        self.context = context
        switch node {
        case .object(let fields, let source)?:
            self.fields = fields
            self.objectSource = source
        case nil:
            self.fields = [:]
            self.objectSource = .defaultValue
        case let other?:
            self.fields = [:]
            self.objectSource = other.source
            context.issue(path, "expected an object, got \(other.shown)", other.source)
        }
    }

    func key(_ name: String) -> String { path.isEmpty ? name : "\(path).\(name)" }

    private func take(_ name: String) -> ConfigNode? {
        known.append(name)
        context.asked.append(key(name))
        if case .null? = fields[name] { return nil }
        return fields[name]
    }

    private func record(_ name: String, _ value: String, _ source: ConfigSource, secret: Bool = false) {
        context.knobs.append(ConfigKnob(key: key(name), value: secret ? "<redacted>" : value, source: source))
    }

    /// Records `name` as printed `text` where nothing set it (an empty map, a value inherited from
    /// another knob), so `describe()` lists every key the loader reads.
    func recordUnset(_ name: String, as text: String) {
        record(name, text, source(of: name) ?? .defaultValue)
    }

    func child(_ name: String) -> ConfigReader {
        ConfigReader(path: key(name), node: take(name), context: context)
    }

    func has(_ name: String) -> Bool { fields[name] != nil }

    /// Where the value of `name` came from, for issues raised after reading it.
    func source(of name: String) -> ConfigSource? { fields[name]?.source }

    /// Names present in this object, sorted (for maps keyed by free-form names such as attribute types).
    var fieldNames: [String] { fields.keys.sorted() }

    // MARK: Scalars

    func string(_ name: String, default fallback: String, allowEmpty: Bool = false, secret: Bool = false) -> String {
        guard let node = take(name) else {
            record(name, fallback, .defaultValue, secret: secret)
            return fallback
        }
        guard case .string(let text, let source) = node else {
            context.issue(key(name), "expected a string, got \(node.shown)", node.source)
            return fallback
        }
        if !allowEmpty && text.trimmingCharacters(in: .whitespaces).isEmpty {
            context.issue(key(name), "must not be empty", source)
            return fallback
        }
        record(name, text, source, secret: secret)
        return text
    }

    /// An optional string: absent and `null` mean nil; empty is an issue unless `allowEmpty` (the
    /// caller then says what an empty value means).
    func optionalString(_ name: String, allowEmpty: Bool = false) -> String? {
        guard let node = take(name) else {
            record(name, "(none)", .defaultValue)
            return nil
        }
        guard case .string(let text, let source) = node, allowEmpty || !text.isEmpty else {
            context.issue(key(name), "expected a non-empty string, got \(node.shown)", node.source)
            return nil
        }
        record(name, text, source)
        return text
    }

    /// A string that must be present.
    func requiredString(_ name: String, what: String) -> String? {
        guard let node = take(name) else {
            context.issue(key(name), "is required (\(what))", objectSource == .defaultValue ? nil : objectSource)
            return nil
        }
        guard case .string(let text, let source) = node, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            context.issue(key(name), "expected a non-empty string (\(what)), got \(node.shown)", node.source)
            return nil
        }
        record(name, text, source)
        return text
    }

    func int(_ name: String, default fallback: Int, range: ClosedRange<Int>, unit: String = "") -> Int {
        guard let node = take(name) else {
            record(name, String(fallback), .defaultValue)
            return fallback
        }
        let value: Int?
        switch node {
        case .number(let n, _) where n == n.rounded() && abs(n) < 1e15: value = Int(n)
        case .string(let text, _): value = Int(text.trimmingCharacters(in: .whitespaces))
        default: value = nil
        }
        guard let value else {
            context.issue(key(name), "expected a whole number, got \(node.shown)", node.source)
            return fallback
        }
        guard range.contains(value) else {
            context.issue(key(name), "\(value) is out of range; allowed \(range.lowerBound)…\(range.upperBound)\(unit)", node.source)
            return fallback
        }
        record(name, String(value), node.source)
        return value
    }

    func double(_ name: String, default fallback: Double, range: ClosedRange<Double>) -> Double {
        guard let node = take(name) else {
            record(name, String(fallback), .defaultValue)
            return fallback
        }
        let value: Double?
        switch node {
        case .number(let n, _): value = n
        case .string(let text, _): value = Double(text.trimmingCharacters(in: .whitespaces))
        default: value = nil
        }
        guard let value, value.isFinite else {
            context.issue(key(name), "expected a number, got \(node.shown)", node.source)
            return fallback
        }
        guard range.contains(value) else {
            context.issue(key(name), "\(value) is out of range; allowed \(range.lowerBound)…\(range.upperBound)", node.source)
            return fallback
        }
        record(name, String(value), node.source)
        return value
    }

    func bool(_ name: String, default fallback: Bool) -> Bool {
        guard let node = take(name) else {
            record(name, String(fallback), .defaultValue)
            return fallback
        }
        let value: Bool?
        switch node {
        case .bool(let b, _): value = b
        case .string(let text, _):
            switch text.lowercased() {
            case "true", "1", "yes", "on": value = true
            case "false", "0", "no", "off": value = false
            default: value = nil
            }
        default: value = nil
        }
        guard let value else {
            context.issue(key(name), "expected true or false, got \(node.shown)", node.source)
            return fallback
        }
        record(name, String(value), node.source)
        return value
    }

    func duration(_ name: String, default fallback: Duration, range: ClosedRange<Duration>, why: String = "") -> Duration {
        guard let node = take(name) else {
            record(name, DurationText.format(fallback), .defaultValue)
            return fallback
        }
        let value: Duration?
        switch node {
        case .number(let n, _): value = DurationText.fromSeconds(n)
        case .string(let text, _): value = DurationText.parse(text)
        default: value = nil
        }
        guard let value else {
            context.issue(key(name), "\(node.shown) is not a duration; write seconds (30) or a string like \"250ms\", \"30s\", \"50m\", \"1h\"", node.source)
            return fallback
        }
        guard range.contains(value) else {
            context.issue(key(name), "\(DurationText.format(value)) is out of range; allowed \(DurationText.format(range.lowerBound))…\(DurationText.format(range.upperBound))\(why)", node.source)
            return fallback
        }
        record(name, DurationText.format(value), node.source)
        return value
    }

    func choice<T: RawRepresentable & CaseIterable>(_ name: String, default fallback: T) -> T where T.RawValue == String {
        guard let node = take(name) else {
            record(name, fallback.rawValue, .defaultValue)
            return fallback
        }
        guard case .string(let text, let source) = node, let value = T(rawValue: text.lowercased()) else {
            let allowed = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            context.issue(key(name), "\(node.shown) is not allowed; use one of \(allowed)", node.source)
            return fallback
        }
        record(name, value.rawValue, source)
        return value
    }

    func stringList(_ name: String, default fallback: [String]) -> [String] {
        guard let node = take(name) else {
            record(name, "[" + fallback.joined(separator: ", ") + "]", .defaultValue)
            return fallback
        }
        var values: [String] = []
        switch node {
        case .array(let items, _):
            for (index, item) in items.enumerated() {
                guard case .string(let text, _) = item, !text.isEmpty else {
                    context.issue("\(key(name))[\(index)]", "expected a non-empty string, got \(item.shown)", item.source)
                    return fallback
                }
                values.append(text)
            }
        case .string(let text, .environment):
            // Environment variables may list values comma-separated: FANOUT_…=a,b
            values = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        default:
            context.issue(key(name), "expected a list of strings, got \(node.shown)", node.source)
            return fallback
        }
        record(name, "[" + values.joined(separator: ", ") + "]", node.source)
        return values
    }

    // MARK: Collections

    /// Elements of a list of objects (for `apps`); nil when absent.
    func objectList(_ name: String) -> [ConfigReader]? {
        guard let node = take(name) else { return nil }
        guard case .array(let items, _) = node else {
            context.issue(key(name), "expected a list, got \(node.shown)", node.source)
            return []
        }
        return items.enumerated().map { ConfigReader(path: "\(key(name))[\($0.offset)]", node: $0.element, context: context) }
    }

    /// Free-form names of an object (attribute type names, librdkafka property names).
    func entries(_ name: String) -> [(name: String, node: ConfigNode)] {
        guard let node = take(name) else { return [] }
        guard case .object(let fields, _) = node else {
            context.issue(key(name), "expected an object, got \(node.shown)", node.source)
            return []
        }
        return fields.keys.sorted().map { ($0, fields[$0]!) }
    }

    /// Reports keys nobody read, suggesting the closest known key.
    func finish() {
        for name in fields.keys.sorted() where !known.contains(name) {
            var message = "unknown key"
            if let suggestion = Self.closest(to: name, in: known) { message += " (did you mean \"\(key(suggestion))\"?)" }
            else { message += "; known keys here: " + known.joined(separator: ", ") }
            context.issue(key(Self.shown(name)), message, fields[name]!.source)
        }
    }

    /// A key as a problem names it: quoted when it is empty or holds more than letters, digits, `_` and `-`,
    /// so `""` or `"a.b"` cannot read as no key or as a path.
    static func shown(_ name: String) -> String {
        let plain = !name.isEmpty && name.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" }
        if plain { return name }
        var quoted = "\""
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F: quoted += "\\u{\(String(scalar.value, radix: 16))}"
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }

    static func closest(to word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, editDistance(word.lowercased(), $0)) }.min { $0.1 < $1.1 }
        guard let (best, distance) = scored else { return nil }
        return distance <= max(2, best.count / 3) ? best : nil
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
