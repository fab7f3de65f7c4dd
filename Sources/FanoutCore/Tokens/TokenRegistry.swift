import APNsModel

/// Per-activity update tokens from `activity-tokens` (and inline `token` fields), keyed by activity key.
///
/// A rotation replaces the token for the next send. A token APNs reported gone is kept, marked gone,
/// so no send uses it again until a newer registration arrives.
///
/// Memory per key: one 80-byte slab entry (the key as a `String`, inline up to 15 UTF-8 bytes; the
/// token as bytes, inline up to 32 of them — `PushToken`; registration time, partition, app, flags and
/// the partition list links) and 16–32 bytes of index (8-byte buckets, at most half full).
/// Registrations of one partition are linked into one list, so forgetting a revoked partition's
/// tokens visits those only.
public struct TokenRegistry: Sendable {
    public struct Record: Sendable, Hashable {
        /// Registration time, UNIX seconds.
        public var at: Int64
        /// activity-tokens partition number (equal to the activity-updates partition of the key).
        public var partition: Int32
        /// The engine's index of the app the registration named (`Record.anyApp` when it named none):
        /// a token is issued for one app and APNs refuses it under another app's topic.
        public var appIndex: UInt16 = Record.anyApp
        public var gone: Bool
        /// nil for inline tokens: the worker uses the app's configured environment.
        public var environment: APNsEnvironment?
        public var token: PushToken

        public static let anyApp = UInt16.max

        public init(token: PushToken, at: Int64, partition: Int32, gone: Bool, environment: APNsEnvironment?, appIndex: UInt16 = Record.anyApp) {
            self.at = at
            self.partition = partition
            self.appIndex = appIndex
            self.gone = gone
            self.environment = environment
            self.token = token
        }
    }

    // A slab of (key, record) addressed through a `TargetTable` keyed by the FNV hash of the key: the
    // per-send `usableToken(for:notBefore:)` costs one probe and one key compare, no SipHash. Key and
    // record share one slab element, so the compare and the read touch one cache line, not two arrays.
    private struct Entry {
        var key: String
        /// Neighbours in the list of the record's partition (-1: none).
        var previous: Int32 = -1
        var next: Int32 = -1
        var record: Record?
    }
    private var entries: [Entry] = []
    private var freeEntries: [Int32] = []
    private var index = TargetTable()
    /// First entry of each partition's list.
    private var firstByPartition: [Int32: Int32] = [:]

    public init() {}

    public var count: Int { index.count }

    /// Room for `count` registrations without growing the slab (`FanoutEngine.reserveTrackingCapacity`).
    public mutating func reserveCapacity(_ count: Int) { entries.reserveCapacity(count) }

    public func record(for key: String) -> Record? {
        entry(for: key, hash: TargetHash(lane: .activity, id: key)).flatMap { entries[Int($0)].record }
    }

    @inline(__always)
    private func entry(for key: String, hash: TargetHash) -> Int32? {
        index.find(hash) { entries[Int($0)].key == key }
    }

    /// Applies a registration. Returns true when it changed the usable token (new token, or gone → usable).
    /// An older registration (`at` below the current one's) is ignored: the compacted topic may replay it.
    @discardableResult
    public mutating func register(key: String, token: PushToken, environment: APNsEnvironment?, at: Int64, partition: Int32,
                                  appIndex: UInt16 = Record.anyApp) -> Bool {
        let hash = TargetHash(lane: .activity, id: key)
        guard let entry = entry(for: key, hash: hash), let existing = entries[Int(entry)].record else {
            insert(Record(token: token, at: at, partition: partition, gone: false, environment: environment, appIndex: appIndex),
                   for: key, hash: hash)
            return true
        }
        let replacement: Record
        if existing.token == token {
            // Same token re-published: revives it only when strictly newer than the registration it replaced.
            guard existing.gone && at > existing.at else { return false }
            replacement = Record(token: token, at: at, partition: partition, gone: false, environment: environment ?? existing.environment,
                                 appIndex: appIndex == Record.anyApp ? existing.appIndex : appIndex)
        } else {
            guard at >= existing.at else { return false }
            replacement = Record(token: token, at: at, partition: partition, gone: false, environment: environment, appIndex: appIndex)
        }
        if existing.partition != partition {
            unlink(entry, partition: existing.partition)
            link(entry, partition: partition)
        }
        entries[Int(entry)].record = replacement
        return true
    }

    public mutating func remove(key: String) {
        let hash = TargetHash(lane: .activity, id: key)
        guard let entry = entry(for: key, hash: hash) else { return }
        remove(entry, hash: hash)
    }

    /// APNs said `token` is gone: stop using it (if it is still the registered one).
    public mutating func markGone(key: String, token: PushToken) {
        guard let entry = entry(for: key, hash: TargetHash(lane: .activity, id: key)),
              entries[Int(entry)].record?.token == token else { return }
        entries[Int(entry)].record!.gone = true
    }

    /// The activity of `key` ended at `timestamp` and the engine forgets it: a token registered for it
    /// (at or before the end) is never used again, as if APNs had reported it gone; a later one (a new
    /// activity under the same key) stays usable.
    mutating func retire(key: String, endedAt timestamp: Int64) {
        guard let entry = entry(for: key, hash: TargetHash(lane: .activity, id: key)),
              let record = entries[Int(entry)].record, record.at <= timestamp else { return }
        entries[Int(entry)].record!.gone = true
    }

    /// The key as the registry holds it, and its slab entry: a target tracked under the same key
    /// keeps this string, so a key too long to be stored inline (over 15 UTF-8 bytes) is on the heap
    /// once, not twice, and the entry becomes the target's first `usableToken(for:notBefore:hint:)` hint.
    /// `hash`: the key's activity-lane hash.
    func storedKey(_ key: String, hash: TargetHash) -> (key: String, entry: Int32)? {
        guard let entry = entry(for: key, hash: hash) else { return nil }
        return (entries[Int(entry)].key, entry)
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

    /// Forgets every registration read from `partition` (it was revoked): visits that partition's
    /// registrations only.
    public mutating func removeAll(partition: Int32) {
        while let first = firstByPartition[partition] {
            remove(first, hash: TargetHash(lane: .activity, id: entries[Int(first)].key))
        }
    }

    /// Registrations held for `partition` (walks its list: for tests and diagnostics).
    public func count(partition: Int32) -> Int {
        var count = 0
        var entry = firstByPartition[partition] ?? -1
        while entry >= 0 {
            count += 1
            entry = entries[Int(entry)].next
        }
        return count
    }

    // MARK: Slab and lists

    private mutating func insert(_ record: Record, for key: String, hash: TargetHash) {
        let entry: Int32
        if let free = freeEntries.popLast() {
            entry = free
            entries[Int(free)] = Entry(key: key, record: record)
        } else {
            entry = Int32(entries.count)
            entries.append(Entry(key: key, record: record))
        }
        link(entry, partition: record.partition)
        index.insert(hash, slot: entry)
    }

    private mutating func remove(_ entry: Int32, hash: TargetHash) {
        if let partition = entries[Int(entry)].record?.partition { unlink(entry, partition: partition) }
        index.remove(hash, slot: entry)
        entries[Int(entry)] = Entry(key: "", record: nil)
        freeEntries.append(entry)
    }

    private mutating func link(_ entry: Int32, partition: Int32) {
        let first = firstByPartition[partition] ?? -1
        entries[Int(entry)].previous = -1
        entries[Int(entry)].next = first
        if first >= 0 { entries[Int(first)].previous = entry }
        firstByPartition[partition] = entry
    }

    private mutating func unlink(_ entry: Int32, partition: Int32) {
        let previous = entries[Int(entry)].previous, next = entries[Int(entry)].next
        if next >= 0 { entries[Int(next)].previous = previous }
        if previous >= 0 {
            entries[Int(previous)].next = next
        } else {
            firstByPartition[partition] = next >= 0 ? next : nil
        }
        entries[Int(entry)].previous = -1
        entries[Int(entry)].next = -1
    }
}
