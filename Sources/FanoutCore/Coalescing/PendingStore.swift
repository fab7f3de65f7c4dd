/// The pending updates of the targets that have one, out of line from `TargetState`.
///
/// Most tracked targets are idle at any moment; kept apart, an idle target's record carries a 4-byte
/// index (`TargetState.pendingIndex`) instead of ~90 bytes of room for a pending state, and the
/// pending states of the busy targets sit together in one small slab that stays in cache.
/// Entries are reused through a free list; a removed entry holds nothing (its event and offsets are
/// released at once).
struct PendingStore: Sendable {
    private var entries: [PendingUpdate?] = []
    private var freeEntries: [Int32] = []

    /// Pending updates held.
    var count: Int { entries.count - freeEntries.count }

    /// Stores `update`; returns its index.
    mutating func insert(_ update: PendingUpdate) -> Int32 {
        if let free = freeEntries.popLast() {
            entries[Int(free)] = update
            return free
        }
        entries.append(update)
        return Int32(entries.count - 1)
    }

    /// Moves the update at `index` out and frees the entry.
    mutating func take(_ index: Int32) -> PendingUpdate {
        let update = entries[Int(index)].take()!
        freeEntries.append(index)
        return update
    }

    /// The update at `index`, read and changed in place (no copy of its event or offsets).
    subscript(index: Int32) -> PendingUpdate {
        _read { yield entries[Int(index)]! }
        _modify { yield &entries[Int(index)]! }
    }

    /// What the send decision reads of the update at `index`, without touching its references.
    func facts(_ index: Int32) -> PendingFacts {
        entries.withUnsafeBufferPointer { $0[Int(index)]!.facts }
    }
}
