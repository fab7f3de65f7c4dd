/// Per-activity update tokens from `activity-tokens` (and inline `token` fields), keyed by activity key.
///
/// A rotation replaces the token for the next send. A token APNs reported gone is kept, marked gone,
/// so no send uses it again until a newer registration arrives.
public struct TokenRegistry: Sendable {
    public struct Record: Sendable, Hashable {
        public var token: String
        public var app: String?
        public var environment: String?
        /// Registration time, UNIX seconds.
        public var at: Int64
        public var gone: Bool
        /// activity-tokens partition number (equal to the activity-updates partition of the key).
        public var partition: Int32
    }

    private var records: [String: Record] = [:]

    public init() {}

    public var count: Int { records.count }

    public func record(for key: String) -> Record? { records[key] }

    /// Applies a registration. Returns true when it changed the usable token (new token, or gone → usable).
    /// An older registration (`at` below the current one's) is ignored: the compacted topic may replay it.
    @discardableResult
    public mutating func register(key: String, token: String, app: String?, environment: String?, at: Int64, partition: Int32) -> Bool {
        if let existing = records[key] {
            if existing.token == token {
                // Same token re-published: refreshes nothing unless it is strictly newer than the gone report.
                if existing.gone && at > existing.at {
                    records[key] = Record(token: token, app: app ?? existing.app, environment: environment ?? existing.environment, at: at, gone: false, partition: partition)
                    return true
                }
                return false
            }
            guard at >= existing.at else { return false }
        }
        records[key] = Record(token: token, app: app, environment: environment, at: at, gone: false, partition: partition)
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
