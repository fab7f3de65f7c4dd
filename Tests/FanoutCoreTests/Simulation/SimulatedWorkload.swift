import APNsModel
@testable import FanoutCore

extension SeededRandom {
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(bound, 1))) }
    mutating func chance(_ probability: Double) -> Bool { Double(next() % 1_000_000) < probability * 1_000_000 }
    mutating func between(_ low: Int64, _ high: Int64) -> Int64 { low + Int64(next() % UInt64(high - low + 1)) }
}

/// One record in a simulated partition log.
struct LogRecord {
    var event: ActivityEvent
    /// Virtual time the producer wrote it.
    var arrival: Nanoseconds
    /// The worker's decoder would reject it (dead-lettered by the worker itself).
    var rejected: Bool
}

/// A seeded random workload: targets, their event streams laid into partition logs, token plans.
struct SimulatedWorkload {
    static let apps = ["com.sim.a", "com.sim.b"]
    static let activityTopic = "activity-updates"
    static let broadcastTopic = "broadcast-updates"
    static let partitionCount: Int32 = 2

    var logs: [PartitionID: [LogRecord]] = [:]
    /// Activity keys whose token is published before their first event (time, at), or never when absent.
    var initialTokens: [(key: String, time: Nanoseconds, at: Int64)] = []
    /// Activity keys started by push-to-start: the device publishes its token this long after the start is delivered (nil: never).
    var tokenDelayAfterStart: [String: Nanoseconds?] = [:]
    var targets: [(lane: Lane, key: String)] = []

    static func partition(for key: String, lane: Lane) -> PartitionID {
        let hash = DedupeWindow.digest(target: key, id: "")
        return PartitionID(topic: lane == .activity ? activityTopic : broadcastTopic, partition: Int32(hash % UInt64(partitionCount)))
    }

    init(random: inout SeededRandom, start: Nanoseconds, horizon: Nanoseconds) {
        var unordered: [PartitionID: [LogRecord]] = [:]
        let targetCount = 3 + random.below(16)
        for number in 0..<targetCount {
            let lane: Lane = random.chance(0.2) ? .broadcast : .activity
            let key = lane == .activity ? "act-\(number)" : "Y2hhbm5lbC0\(number)"
            targets.append((lane, key))
            let app = Self.apps[random.below(2)]
            let partition = Self.partition(for: key, lane: lane)
            var time = start + random.between(0, horizon / 2)
            var timestamp = time / Nanoseconds.nanosecondsPerSecond
            let startsByPush = lane == .activity && random.chance(0.3)
            if lane == .activity {
                if startsByPush {
                    tokenDelayAfterStart[key] = random.chance(0.85) ? random.between(100_000_000, 45 * 1_000_000_000) : nil
                } else if random.chance(0.9) {
                    initialTokens.append((key, time + random.between(-20, 40) * 1_000_000_000, timestamp - 100))
                }
            }
            let pushToStart = random.chance(0.5) ? "p2s-shared" : "p2s-\(number)"
            var status = 0
            var done = 0.0
            let updates = 1 + random.below(random.chance(0.2) ? 60 : 15)
            var events: [ActivityEvent] = []
            func event(_ kind: EventKind) -> ActivityEvent {
                let fields = [ContentField(name: "status", digest: UInt64(status) &* 0x9e37_79b9, number: nil),
                              ContentField(name: "done", digest: UInt64(done * 100), number: done)]
                return ActivityEvent(id: "\(key)-\(events.count)", app: app, lane: lane, target: key, kind: kind,
                                     timestamp: timestamp, contentState: RawJSON(bytes: [123, 125]), contentFields: fields,
                                     importance: random.chance(0.1) ? (random.chance(0.5) ? .major : .minor) : nil,
                                     alert: kind == .start || random.chance(0.05) ? RawJSON(bytes: [123, 125]) : nil,
                                     token: kind == .start ? PushToken(simulated: pushToStart) : nil,
                                     attributesType: kind == .start ? "SimAttributes" : nil,
                                     attributes: kind == .start ? RawJSON(bytes: [123, 125]) : nil)
            }
            var arrivals: [Nanoseconds] = []
            if startsByPush { events.append(event(.start)); arrivals.append(time) }
            for _ in 0..<updates {
                let burst = random.chance(0.3)
                time += burst ? random.between(1_000_000, 300_000_000) : random.between(200_000_000, 20_000_000_000)
                timestamp += random.chance(0.05) ? 0 : random.between(1, burst ? 1 : 10)  // some equal timestamps
                if random.chance(0.2) { status += 1 }
                done += Double(random.below(8))
                events.append(event(.update))
                arrivals.append(time)
            }
            if random.chance(0.8) {
                time += random.between(100_000_000, 10_000_000_000)
                timestamp += random.between(1, 5)
                events.append(event(.end))
                arrivals.append(time)
                if random.chance(0.35) {  // a straggler after the end: soon, or late enough for the end to be committed and handed over first
                    time += random.chance(0.4) ? random.between(1_000_000, 2_000_000_000) : random.between(5_000_000_000, 60_000_000_000)
                    timestamp += 1
                    events.append(event(.update))
                    arrivals.append(time)
                }
            }
            for (index, event) in events.enumerated() {
                var arrival = arrivals[index]
                if random.chance(0.1) { arrival += random.between(0, 3_000_000_000) }  // reordering
                unordered[partition, default: []].append(LogRecord(event: event, arrival: arrival, rejected: random.chance(0.02)))
                if random.chance(0.05) {  // duplicate delivery by the producer
                    unordered[partition, default: []].append(LogRecord(event: event, arrival: arrival + random.between(0, 5_000_000_000), rejected: false))
                }
            }
        }
        for (partition, records) in unordered {
            // Offsets follow arrival order, as a broker appends.
            logs[partition] = records.enumerated().sorted { ($0.element.arrival, $0.offset) < ($1.element.arrival, $1.offset) }.map(\.element)
        }
    }
}

extension PushToken {
    /// The simulation names its tokens (`tok-<key>-0`); the engine holds them as bytes: the label's UTF-8.
    init(simulated label: String) { self.init(bytes: Array(label.utf8)) }

    var simulatedLabel: String { String(decoding: bytes, as: UTF8.self) }
}
