import APNsModel
import Testing
@testable import FanoutCore

/// The engine's hand-rolled hash tables against a `Dictionary` model, through growth and removals
/// (backward-shift deletion is where open addressing usually goes wrong).
struct LookupTableTests {
    @Test func targetTableMatchesADictionaryModel() {
        var random = SeededRandom(seed: 7)
        var table = TargetTable()
        var keys: [Int32: String] = [:]  // slot -> key
        var model: [String: Int32] = [:]
        var nextSlot: Int32 = 0
        func find(_ key: String) -> Int32? {
            table.find(TargetHash(lane: .activity, id: key)) { keys[$0] == key }
        }
        for _ in 0..<20_000 {
            let key = "act-\(random.next() % 3_000)"
            if let slot = model[key], random.next() % 3 == 0 {
                table.remove(TargetHash(lane: .activity, id: key), slot: slot)
                model[key] = nil
                keys[slot] = nil
            } else if model[key] == nil {
                table.insert(TargetHash(lane: .activity, id: key), slot: nextSlot)
                model[key] = nextSlot
                keys[nextSlot] = key
                nextSlot += 1
            }
            #expect(find(key) == model[key])
        }
        #expect(table.count == model.count)
        for index in 0..<3_000 { #expect(find("act-\(index)") == model["act-\(index)"]) }
        // The lane is part of the key.
        #expect(table.find(TargetHash(lane: .broadcast, id: "act-1")) { _ in false } == nil)
    }

    @Test func inFlightStoreMatchesADictionaryModel() {
        var random = SeededRandom(seed: 11)
        var store = InFlightStore()
        var model: [UInt64: Int32] = [:]
        let event = ActivityEvent(id: "e", app: "a", lane: .activity, target: "t", kind: .update, timestamp: 1,
                                  contentState: RawJSON(bytes: Array("{}".utf8)))
        let update = PendingUpdate(event: event, summary: ContentSummary.empty, offset: 0)
        var nextID: UInt64 = 1
        for _ in 0..<20_000 {
            if !model.isEmpty && random.next() % 2 == 0 {
                let id = model.keys.min()! + random.next() % 64
                let removed = store.remove(id)
                #expect(removed?.slot == model[id])
                model[id] = nil
            } else {
                let slot = Int32(truncatingIfNeeded: random.next() % 1_000)
                store.insert(InFlightSend(slot: slot, incarnation: 0, update: update, destination: .channel("c"),
                                          priority: 5, isProbe: false, partitionSlot: slot % 4), id: nextID)
                model[nextID] = slot
                nextID += 1
            }
        }
        #expect(store.count == model.count)
        #expect(store.remove(0) == nil && store.remove(nextID) == nil)
        for id in model.keys.sorted() { #expect(store.remove(id)?.slot == model[id]) }
        #expect(store.count == 0)
    }
}
