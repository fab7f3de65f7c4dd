import APNsModel
import Dispatch
import FanoutCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `fanout bench engine`: microbenchmarks of the pure core. Reports numbers; judges nothing.
struct BenchCommand: Command {
    static let name = "bench"
    static let summary = "Microbenchmarks of the core engine (run with -c release)"
    static let help = """
    Usage: fanout bench engine [options]
           fanout bench tracked [--tracked <n,n,…>] [--active <n>] [--events <n>] [--seed <n>] [--key-bytes <n>]

    Measures, on one core, in virtual time (no network, no Kafka):
      1. events/s through the engine (receive: dedupe, coalesce, meaning, budget, send decision; plus the
         delivered outcomes and timers those events cause) for a realistic mix: skewed traffic over many
         activities and some broadcast channels, bursts, progress-only and status changes, alerts, duplicates;
      2. events/s through EventDecoder (JSON bytes to a validated ActivityEvent), measured separately;
      3. sends/s building and encoding the APNs payload of an event;
      4. bytes of memory per idle tracked target (RSS growth while tracking N targets).
    Run under scripts/bench-allocations to count heap allocations per event and per send as well.
    Build with 'swift run -c release fanout bench engine': debug builds are many times slower.

    'bench tracked' measures what tracking costs, at each count of --tracked (default: 10000,1000000):
      1. bytes per tracked activity with its token registered (RSS growth over that many activities, each
         with a 32-byte token and one delivered update, so each ends idle);
      2. events/s through the same mix as above over --active activities (default: 10000) while the engine
         also tracks the rest of that count as idle activities with tokens (--events, default 2000000);
      3. CPU time of revoking a partition of 100 activities beside all of those.
    --key-bytes <n> makes every idle activity's key n bytes long (12–200; default: keys like idle-123,
    short enough to be stored inline): keys over 15 bytes are on the heap.

    Options:
      --events <n>         events pushed through the engine (default: 2000000)
      --targets <n>        active targets in the mix (default: 50000)
      --idle-targets <n>   targets for the memory measurement (default: 1000000)
      --decode <n>         events decoded, and payloads built (default: 300000)
      --seed <n>           random seed (default: 1)
    """

    static func run(_ arguments: [String]) async throws -> Int32 {
        var args = Arguments(arguments)
        guard let what = args.positional() else { throw UsageError("say what to benchmark: 'engine'") }
        if what == "tracked" { return try await TrackedBenchmark.run(&args) }
        guard what == "engine" else { throw UsageError("unknown benchmark '\(what)'; available: engine, tracked") }
        let events = try args.int("events") ?? 2_000_000
        let targets = try args.int("targets") ?? 50_000
        let idleTargets = try args.int("idle-targets") ?? 1_000_000
        let decodeCount = try args.int("decode") ?? 300_000
        let seed = UInt64(try args.int("seed") ?? 1)
        try args.finish()
        guard events > 0, targets > 0, idleTargets > 0, decodeCount > 0 else { throw UsageError("counts must be positive") }

        // CPU-bound and long: run it on its own thread, not on Swift's cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread.named("fanout-bench") {
                #if DEBUG
                Output.out("note: this is a debug build; use 'swift run -c release fanout bench engine' for real figures")
                #endif
                EngineBenchmark.throughput(events: events, targets: targets, seed: seed)
                EngineBenchmark.decode(count: decodeCount, seed: seed)
                EngineBenchmark.payloads(count: decodeCount)
                EngineBenchmark.idleMemory(targets: idleTargets)
                continuation.resume()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        return 0
    }
}

/// The measurements behind `fanout bench engine`.
enum EngineBenchmark {
    static let app = "com.example.exports"
    static let second: Nanoseconds = 1_000_000_000
    static let partitions = (0..<16).map { PartitionID(topic: "activity-updates", partition: Int32($0)) }
    static let broadcastPartition = PartitionID(topic: "broadcast-updates", partition: 0)

    static func configuration() -> EngineConfiguration {
        var configuration = EngineConfiguration()
        configuration.meaningProfiles["ExportAttributes"] = MeaningProfile(progressFields: ["done"], minProgressDelta: 5, maxQuiet: 30 * second)
        configuration.attributesTypeByApp[app] = "ExportAttributes"
        configuration.maxIncompletePerLane = .max
        configuration.maxIncompletePerPartition = .max
        return configuration
    }

    static func hexToken(_ number: Int) -> String {
        let digits = String(number, radix: 16)
        return String(repeating: "0", count: 64 - digits.count) + digits
    }

    /// Content field variants shared by all events (as the decoder would produce per event).
    static func fieldVariants() -> [[ContentField]] {
        var variants: [[ContentField]] = []
        for status in 0..<8 {
            for done in 0..<100 {
                variants.append([
                    ContentField(name: "status", digest: UInt64(status) &* 0x9e37_79b9_7f4a_7c15, number: nil),
                    ContentField(name: "done", digest: UInt64(done) &* 0xbf58_476d_1ce4_e5b9, number: Double(done)),
                    ContentField(name: "title", digest: 42, number: nil),
                ])
            }
        }
        return variants
    }

    static func throughput(events count: Int, targets: Int, seed: UInt64) {
        var engine = FanoutEngine(configuration: configuration())
        var now: Nanoseconds = 1_772_788_200 * second
        let result = runMix(engine: &engine, now: &now, events: count, targets: targets, seed: seed)
        Output.out(String(format: "engine: %d events over %d activities + %d channels: %.0f events/s per CPU-second (%.3f s CPU, %.3f s wall)",
                          count, targets, result.channels, result.eventsPerCPUSecond, result.cpuSeconds, result.wallSeconds))
        Output.out("        (\(result.sends) sends, \(result.priority10) at priority 10, coalescing ratio \(String(format: "%.2f", Double(count) / Double(max(result.sends, 1)))), \(result.dropped) resolved at once, \(result.deadLetters) dead letters, \(result.commits) commit points)")
        Output.out("        \(result.allocations) (receive, decide, the outcomes and timers it causes)")
    }

    /// What one run of the mix measured.
    struct MixResult {
        var channels: Int
        var eventsPerCPUSecond: Double
        var cpuSeconds: Double
        var wallSeconds: Double
        var sends = 0, priority10 = 0, dropped = 0, deadLetters = 0, commits = 0
        /// Heap allocations per event, or how to count them (`AllocationCounter.report`).
        var allocations = ""
    }

    /// Registers a token for each of `targets` activities (keys `act-<n>`), then pushes `count` events of
    /// the mix through `engine` (which may already track other targets) and times the loop.
    /// `firstOffset`: where the mix starts reading every partition (past what was fed before it).
    static func runMix(engine: inout FanoutEngine, now: inout Nanoseconds, events count: Int, targets: Int, seed: UInt64,
                       firstOffset: Int64 = 0) -> MixResult {
        var random = SeededRandom(seed: seed)
        var actions: [EngineAction] = []
        actions.reserveCapacity(64)
        let broadcastTargets = max(1, targets / 250)
        for target in 0..<targets {
            engine.tokenRegistered(key: "act-\(target)", token: hexToken(target), environment: .production,
                                   at: 1, partition: Int32(target % partitions.count), now: now, into: &actions)
        }
        actions.removeAll()

        // Build the mix up front so the timed loop measures the engine only.
        let variants = fieldVariants()
        let state = RawJSON(bytes: Array(#"{"status":"rendering","done":37,"title":"Export 42"}"#.utf8))
        let alert = RawJSON(bytes: Array(#"{"title":"Export ready","body":"Tap to open"}"#.utf8))
        var progress = [Int](repeating: 0, count: targets + broadcastTargets)
        var status = [Int](repeating: 0, count: targets + broadcastTargets)
        var timestamps = [Int64](repeating: 1_772_788_000, count: targets + broadcastTargets)
        // Two plain arrays, read in place below: an array of (event, source) tuples made the timed loop copy
        // each tuple through generic value witnesses (memmove plus retains) before the engine saw it.
        var mixEvents: [ActivityEvent] = []
        var mixSources: [EventSource] = []
        mixEvents.reserveCapacity(count)
        mixSources.reserveCapacity(count)
        var offsets = [Int64](repeating: firstOffset, count: partitions.count + 1)
        var previous: ActivityEvent?
        var previousPartition = 0
        for index in 0..<count {
            let source: EventSource
            if let last = previous, random.next() % 100 < 2 {  // producer duplicate
                // A producer retry lands on the same partition as the original (same key), so the
                // partition's dedupe window is what catches it.
                let partition = previousPartition
                source = EventSource(partition: partition == partitions.count ? broadcastPartition : partitions[partition], offset: offsets[partition])
                offsets[partition] += 1
                mixEvents.append(last)
                mixSources.append(source)
                continue
            }
            // Skewed: a fifth of the targets get most events.
            let hot = random.next() % 100 < 80
            let pool = UInt64(hot ? max(1, (targets + broadcastTargets) / 5) : targets + broadcastTargets)
            let target = Int(random.next() % pool)
            let broadcast = target >= targets
            timestamps[target] += Int64(random.next() % 3)
            if random.next() % 100 < 10 { status[target] = (status[target] + 1) % 8 }
            progress[target] = min(99, progress[target] + Int(random.next() % 4))
            let key = broadcast ? "Y2hhbm5lbC0\(target)" : "act-\(target)"
            let partition = broadcast ? partitions.count : target % partitions.count
            source = EventSource(partition: broadcast ? broadcastPartition : partitions[partition], offset: offsets[partition])
            offsets[partition] += 1
            let event = ActivityEvent(
                id: "e\(index)", app: app, lane: broadcast ? .broadcast : .activity, target: key, kind: .update,
                timestamp: timestamps[target], contentState: state, contentFields: variants[status[target] * 100 + progress[target]],
                importance: random.next() % 100 < 3 ? .major : nil, alert: random.next() % 100 < 1 ? alert : nil)
            previous = event
            previousPartition = partition
            mixEvents.append(event)
            mixSources.append(source)
        }

        // Virtual time: the mix arrives at 20k events/s; APNs answers each send after 40 ms.
        let step: Nanoseconds = 50_000
        let latency: Nanoseconds = 40 * 1_000_000
        var completions: [(at: Nanoseconds, sendID: UInt64)] = []
        completions.reserveCapacity(1 << 16)
        var head = 0
        var sends = 0, priority10 = 0, dropped = 0, deadLetters = 0, commits = 0
        let clock = ContinuousClock()
        let started = clock.now
        let allocationsStarted = AllocationCounter.current()
        let cpuStarted = ThreadCPUClock.seconds()
        for index in 0..<count {
            now += step
            mixEvents.withUnsafeBufferPointer { events in
                mixSources.withUnsafeBufferPointer { sources in
                    engine.receive(events[index], from: sources[index], now: now, into: &actions)
                }
            }
            while head < completions.count && completions[head].at <= now {
                engine.complete(completions[head].sendID, outcome: .delivered, now: now, into: &actions)
                head += 1
            }
            if head >= 4096 {
                // Drop answered sends so the harness's queue stays small (a few hundred in flight) instead of
                // growing to every send of the run, reallocating and page-faulting inside the timed loop.
                completions.removeFirst(head)
                head = 0
            }
            if index & 1023 == 0 {
                engine.tick(now: now, into: &actions)
                commits += engine.commitPoints().count
            }
            for action in actions {
                switch action {
                case let .send(request):
                    sends += 1
                    if request.priority == 10 { priority10 += 1 }
                    completions.append((now + latency, request.sendID))
                case .dropped: dropped += 1
                case .deadLetter: deadLetters += 1
                default: break
                }
            }
            actions.removeAll(keepingCapacity: true)
        }
        let cpu = ThreadCPUClock.seconds() - cpuStarted
        let allocations = AllocationCounter.report(since: allocationsStarted, per: count, unit: "event")
        let elapsed = clock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return MixResult(channels: broadcastTargets, eventsPerCPUSecond: Double(count) / cpu, cpuSeconds: cpu, wallSeconds: seconds,
                         sends: sends, priority10: priority10, dropped: dropped, deadLetters: deadLetters, commits: commits,
                         allocations: allocations)
    }

    static func decode(count: Int, seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let decoder = EventDecoder(policy: EventPolicy(apps: [app]))
        let now: Int64 = 1_772_788_200
        var payloads: [[UInt8]] = []
        for index in 0..<4096 {
            let alert = random.next() % 100 < 5 ? #","alert":{"title":"Export ready","body":"Tap to open","sound":"default"}"# : ""
            let json = #"{"v":1,"id":"evt-\#(index)","app":"\#(app)","activity":"act-\#(index)","event":"update","timestamp":\#(now - 5),"content_state":{"status":"rendering","done":\#(random.next() % 100),"total":100,"title":"Export \#(index)"},"stale_date":\#(now + 600)\#(alert)}"#
            payloads.append(Array(json.utf8))
        }
        var valid = 0
        var firstFailure: String?
        let allocationsStarted = AllocationCounter.current()
        let cpuStarted = ThreadCPUClock.seconds()
        for index in 0..<count {
            let payload = payloads[index & 4095]
            switch decoder.decode(payload, key: nil, lane: .activity, now: now) {
            case .success: valid += 1
            case let .failure(rejection): if firstFailure == nil { firstFailure = rejection.description }
            }
        }
        let cpu = ThreadCPUClock.seconds() - cpuStarted
        let allocations = AllocationCounter.report(since: allocationsStarted, per: count, unit: "event")
        let bytes = payloads.reduce(0) { $0 + $1.count } / payloads.count
        Output.out(String(format: "decode: %d events (~%d bytes each): %.0f events/s per CPU-second (%.3f s CPU; %d valid)",
                          count, bytes, Double(count) / cpu, cpu, valid))
        Output.out("        \(allocations)")
        if let firstFailure { Output.out("        first rejection: \(firstFailure)") }
    }

    /// Tracks `targets` targets (one delivered update each, so each ends idle) and reports the growth of
    /// RSS per target. Token registrations are measured separately.
    static func idleMemory(targets: Int) {
        let state = RawJSON(bytes: Array(#"{"done":1}"#.utf8))
        let fields = [ContentField(name: "done", digest: 1, number: 1)]
        var engine = FanoutEngine(configuration: configuration())
        var actions: [EngineAction] = []
        var now: Nanoseconds = 1_772_788_200 * second
        let before = MemoryUsage.current()
        for index in 0..<targets {
            now += 1_000
            let event = ActivityEvent(id: "e", app: app, lane: .broadcast, target: "ch-\(index)", kind: .update,
                                      timestamp: 1_772_788_000, contentState: state, contentFields: fields)
            let source = EventSource(partition: partitions[index & 15], offset: Int64(index >> 4))
            engine.receive(event, from: source, now: now, into: &actions)
            for action in actions {
                if case let .send(request) = action { _ = engine.complete(request.sendID, outcome: .delivered, now: now) }
            }
            actions.removeAll(keepingCapacity: true)
        }
        let after = MemoryUsage.current()
        precondition(engine.targetCount == targets && engine.totalLoad == Load(incomplete: 0, inFlight: 0), "targets must end idle")
        Output.out(String(format: "memory: %d idle targets (keys like 'ch-123456'): %.0f bytes/target (RSS growth)",
                          targets, Double(after.rss - before.rss) / Double(targets)))
        let beforeTokens = MemoryUsage.current()
        for index in 0..<targets {
            _ = engine.tokenRegistered(key: "act-\(index)", token: hexToken(index), environment: .production,
                                       at: 1, partition: Int32(index & 15), now: now)
        }
        let afterTokens = MemoryUsage.current()
        Output.out(String(format: "        plus %.0f bytes/activity for its registered token (64 hex chars; RSS growth)",
                          Double(afterTokens.rss - beforeTokens.rss) / Double(targets)))
        withExtendedLifetime(engine) {}
    }
}

/// CPU time consumed by the calling thread, so figures stay honest on a machine shared with other work.
enum ThreadCPUClock {
    static func seconds() -> Double {
        #if canImport(Glibc)
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
        #else
        return 0
        #endif
    }
}

/// Resident set size of the process (from /proc/self/statm). glibc's mallinfo2 is not visible to
/// Swift's Glibc module, and mallinfo is deprecated (a warning, so an error here).
struct MemoryUsage {
    var rss: Int

    /// Hands freed heap pages back to the kernel first (`malloc_trim`), so memory that an earlier
    /// phase freed and a later one reuses is not counted for one and missed for the other.
    static func current() -> MemoryUsage {
        #if canImport(Glibc)
        trimHeap()
        var rss = 0
        if let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
            let fields = text.split(separator: " ")
            if fields.count > 1, let pages = Int(fields[1]) { rss = pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
        }
        return MemoryUsage(rss: rss)
        #else
        return MemoryUsage(rss: 0)
        #endif
    }

    /// glibc's `malloc_trim(0)`, looked up at run time: Swift's Glibc module does not declare <malloc.h>.
    private static func trimHeap() {
        #if canImport(Glibc)
        typealias Trim = @convention(c) (Int) -> Int32
        guard let symbol = dlsym(nil, "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
        #endif
    }
}
