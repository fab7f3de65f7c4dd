import FanoutCore
import Foundation

/// `fanout bench tracked`: what the engine's cost does with the number of activities it tracks —
/// memory per activity (its target state and its registered token) and event throughput over a fixed
/// set of active activities beside many idle ones.
enum TrackedBenchmark {
    static func run(_ args: inout Arguments) async throws -> Int32 {
        let counts = try (args.option("tracked") ?? "10000,1000000").split(separator: ",").map { text -> Int in
            guard let count = Int(text), count > 0 else { throw UsageError("--tracked expects positive whole numbers separated by commas, got '\(text)'") }
            return count
        }
        let active = try args.int("active") ?? 10_000
        let events = try args.int("events") ?? 2_000_000
        let seed = UInt64(try args.int("seed") ?? 1)
        let keyBytes = try args.int("key-bytes") ?? 0
        try args.finish()
        guard active > 0, events > 0 else { throw UsageError("counts must be positive") }
        guard keyBytes == 0 || (12...200).contains(keyBytes) else { throw UsageError("--key-bytes expects 12 to 200 (0: keys like idle-123)") }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread.named("fanout-bench") {
                #if DEBUG
                Output.out("note: this is a debug build; use 'swift run -c release fanout bench tracked' for real figures")
                #endif
                for count in counts {
                    let bytes = memory(activities: count, keyBytes: keyBytes)
                    Output.out(String(format: "tracked %8d: %.0f bytes per activity with its token (RSS growth%@)", count, bytes,
                                      keyBytes == 0 ? "" : ", \(keyBytes)-byte keys"))
                }
                var rates: [Double] = []
                for count in counts {
                    var engine = FanoutEngine(configuration: EngineBenchmark.configuration())
                    let result = throughput(tracked: count, active: active, events: events, seed: seed, keyBytes: keyBytes, engine: &engine)
                    rates.append(result.eventsPerCPUSecond)
                    Output.out(String(format: "tracked %8d: %.0f events/s per CPU-second over %d active activities + %d channels (%.3f s CPU; %d sends)",
                                      count, result.eventsPerCPUSecond, active, result.channels, result.cpuSeconds, result.sends))
                    Output.out(String(format: "                  revoking a partition of %d activities: %.3f ms CPU", revokedActivities,
                                      revokeCost(engine: &engine) * 1e3))
                }
                if let first = rates.first, rates.count > 1, let last = rates.last {
                    Output.out(String(format: "throughput at %d tracked = %.2f × the figure at %d", counts.last!, last / first, counts.first!))
                }
                continuation.resume()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        return 0
    }

    /// Idle activities `idle-<n>` for n in `range` (with `keyBytes` > 0, `n` zero-padded to make keys of
    /// that length), on the benchmark's partitions, each with a token and one delivered update. The
    /// event names its activity with a string of its own, as a decoded record does. Returns the offset
    /// after the last one fed per partition.
    @discardableResult
    static func track(idle range: Range<Int>, keyBytes: Int, engine: inout FanoutEngine, now: inout Nanoseconds) -> Int64 {
        let state = RawJSON(bytes: Array(#"{"done":1}"#.utf8))
        let fields = [ContentField(name: "done", digest: 1, number: 1)]
        let partitions = EngineBenchmark.partitions
        var actions: [EngineAction] = []
        for index in range {
            now += 1_000
            let number = String(index)
            let padding = String(repeating: "0", count: max(0, keyBytes - 5 - number.utf8.count))
            let key = decodedCopy("idle-\(padding)\(number)")
            engine.tokenRegistered(key: key, token: EngineBenchmark.hexToken(index + 1 << 40), environment: .production, at: 1,
                                   partition: Int32(index % partitions.count), now: now, into: &actions)
            let target = decodedCopy(key)
            let event = ActivityEvent(id: "i\(index)", app: EngineBenchmark.app, lane: .activity, target: target, kind: .update,
                                      timestamp: 1_772_788_000, contentState: state, contentFields: fields)
            let source = EventSource(partition: partitions[index % partitions.count], offset: Int64(index / partitions.count))
            engine.receive(event, from: source, now: now, into: &actions)
            for action in actions {
                if case let .send(request) = action { _ = engine.complete(request.sendID, outcome: .delivered, now: now) }
            }
            actions.removeAll(keepingCapacity: true)
        }
        return Int64((range.upperBound + partitions.count - 1) / partitions.count)
    }

    /// `text` in storage of its own, exactly as long as it, as a key decoded from a record is (a string
    /// built by interpolation may keep room to grow).
    static func decodedCopy(_ text: String) -> String { String(decoding: Array(text.utf8), as: UTF8.self) }

    static func memory(activities count: Int, keyBytes: Int) -> Double {
        var engine = FanoutEngine(configuration: EngineBenchmark.configuration())
        var now: Nanoseconds = 1_772_788_200 * EngineBenchmark.second
        // One activity per partition first, so what every partition costs once (its offset tracker and
        // dedupe window) is not counted per activity.
        let warmUp = EngineBenchmark.partitions.count
        track(idle: 0..<warmUp, keyBytes: keyBytes, engine: &engine, now: &now)
        let before = MemoryUsage.current()
        track(idle: warmUp..<(warmUp + count), keyBytes: keyBytes, engine: &engine, now: &now)
        let after = MemoryUsage.current()
        precondition(engine.targetCount == warmUp + count && engine.totalLoad == Load(incomplete: 0, inFlight: 0), "activities must end idle")
        withExtendedLifetime(engine) {}
        return Double(after.rss - before.rss) / Double(count)
    }

    /// The mix over `active` activities while `tracked - active` idle ones are tracked as well.
    static func throughput(tracked: Int, active: Int, events: Int, seed: UInt64, keyBytes: Int,
                           engine: inout FanoutEngine) -> EngineBenchmark.MixResult {
        var now: Nanoseconds = 1_772_788_200 * EngineBenchmark.second
        let offset = track(idle: 0..<max(0, tracked - active), keyBytes: keyBytes, engine: &engine, now: &now)
        let result = EngineBenchmark.runMix(engine: &engine, now: &now, events: events, targets: active, seed: seed, firstOffset: offset)
        lastNow = now
        return result
    }

    nonisolated(unsafe) static var lastNow: Nanoseconds = 0
    static let revokedActivities = 100

    /// CPU time of revoking (and draining) one more partition that holds `revokedActivities` idle
    /// activities with tokens, beside everything `engine` tracks: what a revoke costs should not grow
    /// with the other partitions' targets.
    static func revokeCost(engine: inout FanoutEngine) -> Double {
        let partition = PartitionID(topic: "activity-updates", partition: 99)
        let state = RawJSON(bytes: Array(#"{"done":1}"#.utf8))
        var now = lastNow
        var actions: [EngineAction] = []
        for index in 0..<revokedActivities {
            now += 1_000
            let key = "revoked-\(index)"
            engine.tokenRegistered(key: key, token: EngineBenchmark.hexToken(index + 1 << 48), environment: .production, at: 1,
                                   partition: partition.partition, now: now, into: &actions)
            let event = ActivityEvent(id: "r\(index)", app: EngineBenchmark.app, lane: .activity, target: key, kind: .update,
                                      timestamp: 1_772_788_000, contentState: state, contentFields: [])
            engine.receive(event, from: EventSource(partition: partition, offset: Int64(index)), now: now, into: &actions)
            for action in actions {
                if case let .send(request) = action { _ = engine.complete(request.sendID, outcome: .delivered, now: now) }
            }
            actions.removeAll(keepingCapacity: true)
        }
        let started = ThreadCPUClock.seconds()
        engine.revoke([partition], now: now, into: &actions)
        let cost = ThreadCPUClock.seconds() - started
        precondition(actions.contains { if case .revokeDrained = $0 { true } else { false } }, "the revoke drains at once")
        return cost
    }
}
