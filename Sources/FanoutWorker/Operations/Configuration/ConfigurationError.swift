/// Everything wrong with a configuration, found in one pass so a person fixes it in one go.
///
/// Each issue names the exact key (`apns.jwt_refresh_interval`, `apps[0].key_path`), the bad value,
/// what is allowed, and where the value came from (file or environment variable).
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public struct Issue: Sendable, Hashable, CustomStringConvertible {
        /// Dotted key path, e.g. `apps[1].environment`, or the variable name when it maps to no key.
        public var key: String
        public var message: String
        public var source: ConfigSource?

        public init(key: String, message: String, source: ConfigSource?) {
            self.key = key
            self.message = message
            self.source = source
        }

        public var description: String {
            let origin = source.map { $0 == .defaultValue ? "" : " (from \($0))" } ?? ""
            return "\(key): \(message)\(origin)"
        }
    }

    public var issues: [Issue]

    public init(issues: [Issue]) { self.issues = issues }

    public var description: String {
        let header = issues.count == 1 ? "invalid configuration:" : "invalid configuration (\(issues.count) problems):"
        return ([header] + issues.map { "  - \($0)" }).joined(separator: "\n")
    }
}
