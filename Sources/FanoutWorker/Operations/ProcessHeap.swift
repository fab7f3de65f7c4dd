import CMalloc
import Foundation
import Synchronization

/// The process's heap (glibc malloc), kept from holding memory the worker no longer uses.
///
/// A backlog fills the engine's pending updates and retained records with millions of small
/// allocations and frees them as sends are acknowledged. glibc keeps freed small chunks in its heap
/// (and in one heap per thread arena: up to 8 per core), so without help resident memory only ever
/// rises to the sum of every burst instead of following what is live. Two measures, both measured by
/// `scripts/bench`'s 1M-activity workload (README "Performance"):
/// - `limitArenas()`: at most `arenaLimit` arenas, unless the user set `MALLOC_ARENA_MAX` themselves.
///   The worker's threads take the engine's one lock anyway, so more arenas buy no parallelism.
/// - `HeapTrimmer`: once a second, when more than `trimThreshold` bytes lie free in the heap,
///   `malloc_trim(0)` hands the free pages back to the kernel (`fanout_heap_trims_total`).
public enum ProcessHeap {
    public static let arenaLimit: Int32 = 2
    /// Free heap bytes that make the trimmer return pages: below it a trim is not worth its pass.
    public static let trimThreshold = 32 << 20

    /// Call before threads start: arenas already created are kept. Returns whether the limit was set
    /// (false when the user's `MALLOC_ARENA_MAX` decides).
    @discardableResult
    public static func limitArenas(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard environment["MALLOC_ARENA_MAX"] == nil else { return false }
        return mallopt(M_ARENA_MAX, arenaLimit) == 1
    }

    /// Bytes in free chunks of every arena (`mallinfo2().fordblks`), the part a trim can return.
    public static var freeBytes: Int { Int(mallinfo2().fordblks) }

    /// Resident memory of the process (`/proc/self/statm`'s second field, in pages); nil where the
    /// file cannot be read.
    public static var residentBytes: Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Returns free pages to the kernel; true when any were returned.
    @discardableResult
    public static func trim() -> Bool { malloc_trim(0) == 1 }
}

/// Once per `interval`, on a thread of its own: samples the heap's free bytes and the resident memory
/// (`fanout_heap_free_bytes`, `fanout_resident_memory_bytes`), and runs `ProcessHeap.trim()` when the
/// heap holds more than `ProcessHeap.trimThreshold` free bytes, so a trim (a pass over the free
/// chunks, a few milliseconds with a large heap) never delays the engine's ticker or intake.
final class HeapTrimmer: Sendable {
    static let interval: Duration = .seconds(1)
    private let thread = PeriodicThread(name: "fanout-heap", every: HeapTrimmer.interval)
    private let metrics: FanoutMetrics

    init(metrics: FanoutMetrics) { self.metrics = metrics }

    func start() {
        thread.start { [metrics] in
            let free = ProcessHeap.freeBytes
            metrics.heapFreeBytes.labels().set(free)
            if let resident = ProcessHeap.residentBytes { metrics.residentMemoryBytes.labels().set(resident) }
            if free > ProcessHeap.trimThreshold, ProcessHeap.trim() { metrics.heapTrims.labels().increment() }
        }
    }

    /// Stops the thread and waits for it.
    func stop() { thread.stop() }
}
