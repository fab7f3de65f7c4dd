import Foundation

/// Where a configuration value came from; shown by `describe()` and in every error.
public enum ConfigSource: Sendable, Hashable, CustomStringConvertible {
    case defaultValue
    case file(path: String)
    case environment(variable: String)

    public var description: String {
        switch self {
        case .defaultValue: "default"
        case .file(let path): "file \(path)"
        case .environment(let variable): "env \(variable)"
        }
    }
}

/// The merged, untyped configuration: the JSON file with `FANOUT_*` variables laid over it.
/// Typed reading and validation happen in `ConfigReader`.
indirect enum ConfigNode {
    case object([String: ConfigNode], ConfigSource)
    case array([ConfigNode], ConfigSource)
    case string(String, ConfigSource)
    case number(Double, ConfigSource)
    case bool(Bool, ConfigSource)
    case null(ConfigSource)

    var source: ConfigSource {
        switch self {
        case .object(_, let s), .array(_, let s), .string(_, let s), .number(_, let s), .bool(_, let s), .null(let s): s
        }
    }

    /// The value as a person wrote it, for error messages.
    var shown: String {
        switch self {
        case .object: "an object"
        case .array: "a list"
        case .string(let text, _): "\"\(text)\""
        case .number(let n, _): n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b, _): String(b)
        case .null: "null"
        }
    }
}

/// Decodes any JSON document into a `ConfigNode` tree (JSONDecoder keeps Bool and numbers apart on Linux).
struct ConfigJSON: Decodable {
    var node: ConfigNode

    init(from decoder: any Decoder) throws {
        node = try Self.decode(decoder, source: decoder.userInfo[Self.sourceKey] as? ConfigSource ?? .defaultValue)
    }

    static let sourceKey = CodingUserInfoKey(rawValue: "fanout.config.source")!

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct Element: Decodable {
        var node: ConfigNode
        init(from decoder: any Decoder) throws {
            node = try ConfigJSON.decode(decoder, source: decoder.userInfo[ConfigJSON.sourceKey] as? ConfigSource ?? .defaultValue)
        }
    }

    fileprivate static func decode(_ decoder: any Decoder, source: ConfigSource) throws -> ConfigNode {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { return .null(source) }
        if let container = try probe(decoder, { try decoder.container(keyedBy: AnyKey.self) }) {
            var fields: [String: ConfigNode] = [:]
            // In name order, so that a file with several problems always reports the same one first.
            for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                fields[key.stringValue] = try container.decode(Element.self, forKey: key).node
            }
            return .object(fields, source)
        }
        if var container = try probe(decoder, { try decoder.unkeyedContainer() }) {
            var items: [ConfigNode] = []
            while !container.isAtEnd { items.append(try container.decode(Element.self).node) }
            return .array(items, source)
        }
        if let b = try probe(decoder, { try single.decode(Bool.self) }) { return .bool(b, source) }
        if let n = try probe(decoder, { try single.decode(Double.self) }) { return .number(n, source) }
        return .string(try single.decode(String.self), source)
    }

    /// The value read as one kind, or nil when it is of another kind. Only a type mismatch means
    /// "another kind": any other error (a malformed number, bad UTF-8) is the file's real problem and
    /// is thrown with where it is, not replaced by the next kind's "expected a string" somewhere else.
    /// (JSONDecoder reports its parser's errors as "not valid JSON" with neither the place nor the reason.)
    private static func probe<T>(_ decoder: any Decoder, _ read: () throws -> T) throws -> T? {
        do {
            return try read()
        } catch DecodingError.typeMismatch {
            return nil
        } catch let error as DecodingError {
            throw error
        } catch {
            let place = decoder.codingPath.isEmpty ? "the top level" : decoder.codingPath.enumerated().map { index, key in
                key.intValue.map { "[\($0)]" } ?? (index == 0 ? key.stringValue : "." + key.stringValue)
            }.joined()
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "at \(place): \(error)"))
        }
    }

    static func parse(_ data: Data, source: ConfigSource) throws -> ConfigNode {
        let decoder = JSONDecoder()
        decoder.userInfo[sourceKey] = source
        return try decoder.decode(ConfigJSON.self, from: data).node
    }
}

/// Lays `FANOUT_*` environment variables over the file's tree. See `FanoutConfiguration` for the scheme.
enum EnvironmentOverlay {
    static let prefix = "FANOUT_"
    /// Variables with the prefix that are not configuration knobs: the CLI's config path, and the
    /// core simulation test's seed (so a shell that exported it can still run the worker).
    static let reserved: Set<String> = ["FANOUT_CONFIG", "FANOUT_SIM_SEED"]
    /// Keys of `kafka` that Fanout owns; any other `FANOUT_KAFKA__*` name is a librdkafka property.
    static let fanoutKafkaKeys: Set<String> = ["bootstrap_servers", "group_id", "group_instance_id", "topics", "commit_interval", "properties"]

    static func apply(_ environment: [String: String], to root: inout ConfigNode, issues: inout [ConfigurationError.Issue]) {
        for name in environment.keys.sorted() where name.hasPrefix(prefix) && !reserved.contains(name) {
            let value = environment[name]!
            let rest = name.dropFirst(prefix.count)
            let segments = rest.components(separatedBy: "__").map { $0.lowercased() }
            if segments.contains(where: \.isEmpty) {
                issues.append(.init(key: name, message: "cannot map \(name) to a key: empty segment (use '__' only between keys, e.g. FANOUT_APNS__ACTIVITY__CONNECTIONS)", source: .environment(variable: name)))
                continue
            }
            let source = ConfigSource.environment(variable: name)
            var path = segments
            var node: ConfigNode = .string(value, source)
            if let property = librdkafkaProperty(segments) {
                path = ["kafka", "properties", property]
            } else if let first = value.trimmingCharacters(in: .whitespaces).first, first == "{" || first == "[" {
                do {
                    node = try ConfigJSON.parse(Data(value.utf8), source: source)
                } catch {
                    issues.append(.init(key: segments.joined(separator: "."), message: "\(name) starts like JSON but is not valid JSON", source: source))
                    continue
                }
            }
            if let problem = set(node, at: path[...], in: &root, source: source) {
                issues.append(.init(key: path.joined(separator: "."), message: problem, source: source))
            }
        }
    }

    /// The librdkafka property a variable names, if it names one: `FANOUT_KAFKA__PROPERTIES__<NAME>`, or
    /// `FANOUT_KAFKA__<NAME>` when NAME is not one of Fanout's kafka keys. A single `_` stands for `.`
    /// (`SASL_MECHANISM` → `sasl.mechanism`).
    private static func librdkafkaProperty(_ segments: [String]) -> String? {
        guard segments.count >= 2, segments[0] == "kafka" else { return nil }
        let nameParts: ArraySlice<String>
        if segments[1] == "properties" {
            guard segments.count > 2 else { return nil }  // FANOUT_KAFKA__PROPERTIES='{…}' is the JSON form
            nameParts = segments.dropFirst(2)
        } else if fanoutKafkaKeys.contains(segments[1]) {
            return nil
        } else {
            nameParts = segments.dropFirst(1)
        }
        return nameParts.joined(separator: ".").replacingOccurrences(of: "_", with: ".")
    }

    /// A list index in a variable name: decimal digits only (`FANOUT_APPS__0__…`). With a sign it is no
    /// index: `-1` would point before the list's start.
    private static func listIndex(_ segment: String) -> Int? {
        guard !segment.isEmpty, segment.utf8.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) else { return nil }
        return Int(segment)
    }

    /// Sets `node` at `path`, creating objects on the way; numeric segments index lists
    /// (`FANOUT_APPS__0__KEY_PATH`), and the index one past the end appends.
    private static func set(_ node: ConfigNode, at path: ArraySlice<String>, in tree: inout ConfigNode, source: ConfigSource) -> String? {
        guard let head = path.first else {
            if case .object(let new, _) = node, case .object(var old, let oldSource) = tree {
                for (key, value) in new { old[key] = value }
                tree = .object(old, oldSource)
            } else {
                tree = node
            }
            return nil
        }
        switch tree {
        case .array(var items, let arraySource):
            guard let index = listIndex(head) else { return "'\(head)' is not a list index (this key is a list; use FANOUT_…__0__…)" }
            guard index <= items.count else { return "list index \(index) skips index \(items.count); indices must be contiguous from 0" }
            var child: ConfigNode = index < items.count ? items[index] : .object([:], source)
            if let problem = set(node, at: path.dropFirst(), in: &child, source: source) { return problem }
            if index < items.count { items[index] = child } else { items.append(child) }
            tree = .array(items, arraySource)
            return nil
        case .object(var fields, let objectSource):
            var child: ConfigNode
            if let existing = fields[head] {
                child = existing
            } else if listIndex(path.dropFirst().first ?? "") != nil {
                child = .array([], source)
            } else {
                child = .object([:], source)
            }
            if let problem = set(node, at: path.dropFirst(), in: &child, source: source) { return problem }
            fields[head] = child
            tree = .object(fields, objectSource)
            return nil
        default:
            return "cannot set a key below a value that is not an object"
        }
    }
}
