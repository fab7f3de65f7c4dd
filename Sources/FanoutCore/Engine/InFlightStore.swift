/// The sends handed out and not yet answered, by send id.
///
/// A slab of `InFlightSend` plus an open-addressing index (linear probing, backward-shift deletion)
/// from send id to slab entry. Send ids are sequential, so a multiplicative hash spreads them well;
/// unlike `Dictionary<UInt64, …>` no `Hasher` (SipHash) runs per send and per outcome, and the large
/// send value is moved in and out of the slab once each.
struct InFlightStore: Sendable {
    private var sends: [InFlightSend?] = []
    private var freeEntries: [Int32] = []
    /// Send id per bucket (0 = free; send ids start at 1) and the slab entry it points to.
    private var ids: [UInt64]
    private var entries: [Int32]
    private var mask: Int
    private(set) var count = 0

    init() {
        ids = [UInt64](repeating: 0, count: 16)
        entries = [Int32](repeating: -1, count: 16)
        mask = 15
    }

    mutating func insert(_ send: InFlightSend, id: UInt64) {
        precondition(id != 0, "send ids start at 1")
        if (count + 1) * 2 > ids.count { grow() }
        let entry: Int32
        if let free = freeEntries.popLast() {
            entry = free
            sends[Int(free)] = send
        } else {
            entry = Int32(sends.count)
            sends.append(send)
        }
        var index = home(id)
        while ids[index] != 0 { index = (index + 1) & mask }
        ids[index] = id
        entries[index] = entry
        count += 1
    }

    /// The send with this id, left in place; nil for an unknown id.
    func send(_ id: UInt64) -> InFlightSend? {
        guard id != 0 else { return nil }
        var index = home(id)
        while ids[index] != id {
            guard ids[index] != 0 else { return nil }
            index = (index + 1) & mask
        }
        return sends[Int(entries[index])]
    }

    /// Moves the send out; nil for an unknown id.
    mutating func remove(_ id: UInt64) -> InFlightSend? {
        guard id != 0 else { return nil }
        var index = home(id)
        while ids[index] != id {
            guard ids[index] != 0 else { return nil }
            index = (index + 1) & mask
        }
        let entry = Int(entries[index])
        ids[index] = 0
        count -= 1
        var hole = index
        var probe = (index + 1) & mask
        while ids[probe] != 0 {
            let want = home(ids[probe])
            if (probe - want) & mask >= (probe - hole) & mask {
                ids[hole] = ids[probe]
                entries[hole] = entries[probe]
                ids[probe] = 0
                hole = probe
            }
            probe = (probe + 1) & mask
        }
        freeEntries.append(Int32(entry))
        return sends[entry].take()
    }

    @inline(__always)
    private func home(_ id: UInt64) -> Int {
        Int(truncatingIfNeeded: (id &* 0x9e37_79b9_7f4a_7c15) >> 32) & mask
    }

    private mutating func grow() {
        let oldIDs = ids, oldEntries = entries
        ids = [UInt64](repeating: 0, count: oldIDs.count * 2)
        entries = [Int32](repeating: -1, count: oldIDs.count * 2)
        mask = ids.count - 1
        for index in oldIDs.indices where oldIDs[index] != 0 {
            var probe = home(oldIDs[index])
            while ids[probe] != 0 { probe = (probe + 1) & mask }
            ids[probe] = oldIDs[index]
            entries[probe] = oldEntries[index]
        }
    }
}
