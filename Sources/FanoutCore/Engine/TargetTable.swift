import APNsModel

/// Target key → target slot, for the per-event lookup (`TokenRegistry` uses it the same way, key → slab entry).
///
/// An open-addressing table (linear probing, backward-shift deletion) of (hash tag, slot) words. The
/// key itself is not stored: a tag match is confirmed against `TargetState.key`/`.lane` by the caller's
/// `matches` closure, so a 64-bit collision can never merge two targets. The hash is `TargetHash`,
/// computed once per event and shared with the dedupe digest, so no `Hasher` (SipHash) runs per event.
struct TargetTable: Sendable {
    /// One word per bucket, so a probe costs one cache miss: the upper 32 bits of the key's hash (a
    /// tag that rules out almost every non-matching bucket without touching the target) and the slot
    /// in the lower 32 bits. `empty` marks a free bucket.
    private var buckets: [UInt64]
    private var mask: Int
    private(set) var count = 0
    private static let empty = UInt64.max

    init() {
        buckets = [UInt64](repeating: Self.empty, count: 16)
        mask = 15
    }

    var isEmpty: Bool { count == 0 }

    /// The slot whose key has `hash` and satisfies `matches`, if any.
    @inline(__always)
    func find(_ hash: TargetHash, matches: (Int32) -> Bool) -> Int32? {
        let stored = hash.stored
        let tag = stored & 0xffff_ffff_0000_0000
        var index = home(stored)
        while true {
            let bucket = buckets[index]
            if bucket == Self.empty { return nil }
            if bucket & 0xffff_ffff_0000_0000 == tag {
                let slot = Int32(truncatingIfNeeded: bucket)
                if matches(slot) { return slot }
            }
            index = (index + 1) & mask
        }
    }

    /// Adds a key known to be absent.
    mutating func insert(_ hash: TargetHash, slot: Int32) {
        precondition(slot >= 0)
        if (count + 1) * 2 > buckets.count { grow() }
        let stored = hash.stored
        var index = home(stored)
        while buckets[index] != Self.empty { index = (index + 1) & mask }
        buckets[index] = (stored & 0xffff_ffff_0000_0000) | UInt64(UInt32(slot))
        count += 1
    }

    /// Removes the entry of `slot` (whose key has `hash`); nothing when it is not there.
    mutating func remove(_ hash: TargetHash, slot: Int32) {
        let stored = hash.stored
        let entry = (stored & 0xffff_ffff_0000_0000) | UInt64(UInt32(slot))
        var index = home(stored)
        while buckets[index] != entry {
            guard buckets[index] != Self.empty else { return }
            index = (index + 1) & mask
        }
        buckets[index] = Self.empty
        count -= 1
        // Backward shift: pull later entries of the probe run into the hole when that brings them closer home.
        var hole = index
        var probe = (index + 1) & mask
        while buckets[probe] != Self.empty {
            let want = home(buckets[probe])
            if (probe - want) & mask >= (probe - hole) & mask {
                buckets[hole] = buckets[probe]
                buckets[probe] = Self.empty
                hole = probe
            }
            probe = (probe + 1) & mask
        }
    }

    /// Home bucket from the hash's upper 32 bits (which the bucket word keeps, so it can be recomputed).
    @inline(__always)
    private func home(_ stored: UInt64) -> Int {
        Int(truncatingIfNeeded: stored >> 32) & mask
    }

    private mutating func grow() {
        let old = buckets
        buckets = [UInt64](repeating: Self.empty, count: old.count * 2)
        mask = buckets.count - 1
        for bucket in old where bucket != Self.empty {
            var probe = home(bucket)
            while buckets[probe] != Self.empty { probe = (probe + 1) & mask }
            buckets[probe] = bucket
        }
    }
}

/// FNV-1a state over a target's UTF-8 bytes: the table hash (mixed with the lane) and the prefix of
/// `DedupeWindow.digest(target:id:)`, so one pass over the key serves both.
struct TargetHash: Sendable {
    /// FNV-1a of the target bytes alone (the dedupe digest continues from it).
    var fnv: UInt64
    var lane: Lane

    @inline(__always)
    init(lane: Lane, id: String) {
        self.lane = lane
        self.fnv = FNV1a.hash(id)
    }

    /// Well-mixed table hash (FNV's high bits alone are weak for short keys).
    @inline(__always)
    var stored: UInt64 { MeaningProfile.mix(fnv ^ (lane == .broadcast ? 0x5bd1_e995 : 0)) }
}
