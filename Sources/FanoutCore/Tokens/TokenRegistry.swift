import APNsModel

/// Per-activity update tokens from `activity-tokens` (and inline `token` fields), keyed by activity key.
///
/// A rotation replaces the token for the next send. A token APNs reported gone is kept, marked gone,
/// so no send uses it again until a newer registration arrives. Memory per key: the key, the token
/// string and 16 bytes (the app is not kept: the target knows its app).
public struct TokenRegistry: Sendable {
    public struct Record: Sendable, Hashable {
        public var token: String
        /// Registration time, UNIX seconds.
        public var at: Int64
        /// activity-tokens partition number (equal to the activity-updates partition of the key).
        public var partition: Int32
        public var gone: Bool
        /// nil for inline tokens: the worker uses the app's configured environment.
        public var environment: APNsEnvironment?
    }

    private var records: [String: Record] = [:]

    public init() {}

    public var count: Int { records.count }

    public func record(for key: String) -> Record? { records[key] }

    /// Applies a registration. Returns true when it changed the usable token (new token, or gone → usable).
    /// An older registration (`at` below the current one's) is ignored: the compacted topic may replay it.
    @discardableResult
    public mutating func register(key: String, token: String, environment: APNsEnvironment?, at: Int64, partition: Int32) -> Bool {
        if let existing = records[key] {
            if existing.token == token {
                // Same token re-published: revives it only when strictly newer than the registration it replaced.
                if existing.gone && at > existing.at {
                    records[key] = Record(token: token, at: at, partition: partition, gone: false, environment: environment ?? existing.environment)
                    return true
                }
                return false
            }
            guard at >= existing.at else { return false }
        }
        records[key] = Record(token: token, at: at, partition: partition, gone: false, environment: environment)
        return true
    }

    public mutating func remove(key: String) { records[key] = nil }

    /// APNs said `token` is gone: stop using it (if it is still the registered one).
    public mutating func markGone(key: String, token: String) {
        guard var record = records[key], record.token == token else { return }
        record.gone = true
        records[key] = record
    }

    /// The token to send to, if one is usable: present, not gone, registered at or after `notBefore`.
    public func usableToken(for key: String, notBefore: Int64) -> Record? {
        guard let record = records[key], !record.gone, record.at >= notBefore else { return nil }
        return record
    }

    /// Forgets every registration read from `partition` (it was revoked).
    public mutating func removeAll(partition: Int32) {
        records = records.filter { $0.value.partition != partition }
    }
}
