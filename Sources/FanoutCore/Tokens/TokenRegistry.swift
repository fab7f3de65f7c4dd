import APNsModel

/// Per-activity update tokens from `activity-tokens` (and inline `token` fields), keyed by activity key.
///
/// A rotation replaces the token for the next send. A token APNs reported gone is kept, marked gone,
/// so no send uses it again until a newer registration arrives. Memory per key: the key, the token
/// string and 16 bytes (the app as the engine's 2-byte index).
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
        /// The engine's index of the app the registration named (`Record.anyApp` when it named none):
        /// a token is issued for one app and APNs refuses it under another app's topic.
        public var appIndex: UInt16 = Record.anyApp

        public static let anyApp = UInt16.max
    }

    // A slab of (key, record) addressed through a `TargetTable` keyed by the FNV hash of the key: the
    // per-send `usableToken(for:notBefore:)` costs one probe and one key compare, no SipHash. Key and
    // record share one slab element, so the compare and the read touch one cache line, not two arrays.
    private struct Entry {
        var key: String
        var record: Record?
    }
    private var entries: [Entry] = []
    private var freeEntries: [Int32] = []
    private var index = TargetTable()

    public init() {}

    public var count: Int { index.count }

    public func record(for key: String) -> Record? {
        entry(for: key, hash: TargetHash(lane: .activity, id: key)).flatMap { entries[Int($0)].record }
    }

    @inline(__always)
    private func entry(for key: String, hash: TargetHash) -> Int32? {
        index.find(hash) { entries[Int($0)].key == key }
    }

    private mutating func store(_ record: Record, for key: String, hash: TargetHash) {
        if let entry = entry(for: key, hash: hash) {
            entries[Int(entry)].record = record
            return
        }
        let entry: Int32
        if let free = freeEntries.popLast() {
            entry = free
            entries[Int(free)] = Entry(key: key, record: record)
        } else {
            entry = Int32(entries.count)
            entries.append(Entry(key: key, record: record))
        }
        index.insert(hash, slot: entry)
    }

    /// Applies a registration. Returns true when it changed the usable token (new token, or gone → usable).
    /// An older registration (`at` below the current one's) is ignored: the compacted topic may replay it.
    @discardableResult
    public mutating func register(key: String, token: String, environment: APNsEnvironment?, at: Int64, partition: Int32,
                                  appIndex: UInt16 = Record.anyApp) -> Bool {
        let hash = TargetHash(lane: .activity, id: key)
        if let entry = entry(for: key, hash: hash), let existing = entries[Int(entry)].record {
            if existing.token == token {
                // Same token re-published: revives it only when strictly newer than the registration it replaced.
                if existing.gone && at > existing.at {
                    entries[Int(entry)].record = Record(token: token, at: at, partition: partition, gone: false,
                                                        environment: environment ?? existing.environment,
                                                        appIndex: appIndex == Record.anyApp ? existing.appIndex : appIndex)
                    return true
                }
                return false
            }
            guard at >= existing.at else { return false }
            entries[Int(entry)].record = Record(token: token, at: at, partition: partition, gone: false, environment: environment, appIndex: appIndex)
            return true
        }
        store(Record(token: token, at: at, partition: partition, gone: false, environment: environment, appIndex: appIndex), for: key, hash: hash)
        return true
    }

    public mutating func remove(key: String) {
        let hash = TargetHash(lane: .activity, id: key)
        guard let entry = entry(for: key, hash: hash) else { return }
        index.remove(hash, slot: entry)
        entries[Int(entry)] = Entry(key: "", record: nil)
        freeEntries.append(entry)
    }

    /// APNs said `token` is gone: stop using it (if it is still the registered one).
    public mutating func markGone(key: String, token: String) {
        guard let entry = entry(for: key, hash: TargetHash(lane: .activity, id: key)),
              entries[Int(entry)].record?.token == token else { return }
        entries[Int(entry)].record!.gone = true
    }

    /// The token to send to, if one is usable: present, not gone, registered at or after `notBefore`.
    public func usableToken(for key: String, notBefore: Int64) -> Record? {
        guard let entry = entry(for: key, hash: TargetHash(lane: .activity, id: key)),
              let record = entries[Int(entry)].record, !record.gone, record.at >= notBefore else { return nil }
        return record
    }

    /// `usableToken(for:notBefore:)` for the per-send path: `hint` is the slab entry where the key was
    /// found last time (or -1). A hint still holding the key skips hashing the key and probing the
    /// index; a stale one (entry removed or reused) falls back to the lookup and is updated.
    func usableToken(for key: String, notBefore: Int64, hint: inout Int32) -> Record? {
        let entry: Int32
        if hint >= 0 && Int(hint) < entries.count && entries[Int(hint)].key == key {
            entry = hint
        } else {
            guard let found = self.entry(for: key, hash: TargetHash(lane: .activity, id: key)) else { return nil }
            entry = found
            hint = found
        }
        guard let record = entries[Int(entry)].record, !record.gone, record.at >= notBefore else { return nil }
        return record
    }

    /// Forgets every registration read from `partition` (it was revoked).
    public mutating func removeAll(partition: Int32) {
        for entry in entries.indices where entries[entry].record?.partition == partition { remove(key: entries[entry].key) }
    }
}
