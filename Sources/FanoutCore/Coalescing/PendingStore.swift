/// The pending updates of all targets, addressed by target slot, readable and mutable in place.
///
/// A slab: `indexBySlot` (4 bytes per target slot) points into `storage`, whose freed entries are
/// reused. Unlike a `Dictionary`, reading one field or absorbing a newer event never copies the whole
/// pending state (an `ActivityEvent` plus offsets), which matters on the per-event hot path.
struct PendingStore: Sendable {
    private var storage: [PendingUpdate?] = []
    private var freeEntries: [Int32] = []
    private var indexBySlot: [Int32] = []
    private(set) var count = 0

    func contains(_ slot: Int32) -> Bool {
        Int(slot) < indexBySlot.count && indexBySlot[Int(slot)] >= 0
    }

    /// The pending update of `slot`, which must exist (`contains`), in place.
    subscript(existing slot: Int32) -> PendingUpdate {
        _read { yield storage[Int(indexBySlot[Int(slot)])]! }
        _modify { yield &storage[Int(indexBySlot[Int(slot)])]! }
    }

    /// A copy, or nil. For cold paths (snapshots).
    subscript(slot: Int32) -> PendingUpdate? {
        contains(slot) ? storage[Int(indexBySlot[Int(slot)])] : nil
    }

    mutating func insert(_ update: PendingUpdate, for slot: Int32) {
        precondition(!contains(slot), "a target has at most one pending update")
        while indexBySlot.count <= Int(slot) { indexBySlot.append(-1) }
        let entry: Int32
        if let free = freeEntries.popLast() {
            entry = free
            storage[Int(free)] = update
        } else {
            entry = Int32(storage.count)
            storage.append(update)
        }
        indexBySlot[Int(slot)] = entry
        count += 1
    }

    /// Moves the pending update of `slot` out (nil when there is none).
    @discardableResult
    mutating func remove(_ slot: Int32) -> PendingUpdate? {
        guard contains(slot) else { return nil }
        let entry = Int(indexBySlot[Int(slot)])
        indexBySlot[Int(slot)] = -1
        freeEntries.append(Int32(entry))
        count -= 1
        return storage[entry].take()
    }
}
