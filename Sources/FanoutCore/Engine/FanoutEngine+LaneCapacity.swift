/// Sends held back while a lane carries `sendCapacityPerLane` (issue 12: bounded buffering ahead of
/// the APNs client instead of a queue that refuses sends into retry backoffs).
extension FanoutEngine {
    /// Evaluates the targets waiting for room in `laneSlot`, oldest first, while the lane has room.
    /// Entries of targets freed or re-used since are skipped; each target is listed at most once.
    mutating func admitWaiting(_ laneSlot: Int, now: Nanoseconds, into actions: inout [EngineAction]) {
        while laneInFlight[laneSlot] < configuration.sendCapacityPerLane[laneSlot], let entry = laneWaiting[laneSlot].pop() {
            let index = Int(entry.slot)
            guard targets[index].live, targets[index].incarnation == entry.incarnation, targets[index].waitingForLane else { continue }
            targets[index].waitingForLane = false
            evaluate(entry.slot, now: now, into: &actions)
        }
    }

    /// Every lane with room and waiting targets (after sends ended without an outcome: a forgotten partition).
    mutating func admitWaitingInEveryLane(now: Nanoseconds, into actions: inout [EngineAction]) {
        for laneSlot in laneWaiting.indices where !laneWaiting[laneSlot].isEmpty {
            admitWaiting(laneSlot, now: now, into: &actions)
        }
    }
}

/// A FIFO of (slot, incarnation) that pops in O(1) and compacts as it drains.
struct SlotQueue: Sendable {
    private var entries: [(slot: Int32, incarnation: UInt32)] = []
    private var head = 0

    var isEmpty: Bool { head == entries.count }
    var count: Int { entries.count - head }

    mutating func push(_ slot: Int32, incarnation: UInt32) {
        entries.append((slot, incarnation))
    }

    mutating func pop() -> (slot: Int32, incarnation: UInt32)? {
        guard head < entries.count else { return nil }
        let entry = entries[head]
        head += 1
        if head == entries.count {
            entries.removeAll(keepingCapacity: entries.count <= 4096)
            head = 0
        } else if head >= 4096 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return entry
    }
}
