import CHeapShim
import CMalloc
import Foundation
import Synchronization

/// The process's heap, kept from holding memory the worker no longer uses.
///
/// A backlog fills the engine's pending updates and retained records with millions of small
/// allocations and frees them as sends are acknowledged. An allocator keeps freed small chunks, so
/// without help resident memory only ever rises to the sum of every burst instead of following what
/// is live. Measured by `scripts/bench`'s 1M-activity workload (README "Performance").
///
/// A release `fanout` allocates with jemalloc (`Package.swift`), configured in `CHeapShim`: two
/// arenas, and freed pages returned by its own background thread about a second later. Elsewhere
/// (debug builds, tests, sanitizers) it is glibc malloc, and two measures do that job:
/// - `limitArenas()`: at most `arenaLimit` arenas, unless the user set `MALLOC_ARENA_MAX` themselves.
///   The worker's threads take the engine's one lock anyway, so more arenas buy no parallelism.
/// - `HeapTrimmer`: once a second, when more than `trimThreshold` bytes lie free in the heap,
///   `malloc_trim(0)` hands the free pages back to the kernel (`fanout_heap_trims_total`).
/// With jemalloc the same thread samples its free bytes and purges above the same threshold, which
/// its decay rarely leaves.
public enum ProcessHeap {
    /// Which allocator serves the process: "jemalloc" or "glibc" (logged at start).
    public static var allocator: String { isJemalloc ? "jemalloc" : "glibc" }
    static let isJemalloc = fanout_heap_is_jemalloc() == 1

    public static let arenaLimit: Int32 = 2
    /// Free heap bytes that make the trimmer return pages: below it a trim is not worth its pass.
    public static let trimThreshold = 32 << 20

    /// Call before threads start: arenas already created are kept. Returns whether the limit was set
    /// (false when the user's `MALLOC_ARENA_MAX` decides).
    @discardableResult
    public static func limitArenas(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard !isJemalloc, environment["MALLOC_ARENA_MAX"] == nil else { return false }
        return mallopt(M_ARENA_MAX, arenaLimit) == 1
    }

    /// Bytes the allocator holds but the program does not use, the part a trim can return: glibc's
    /// free chunks in every arena (`mallinfo2().fordblks`); jemalloc's freed pages not yet returned
    /// (its dirty and muzzy pages).
    public static var freeBytes: Int { isJemalloc ? max(0, Int(fanout_jemalloc_free_bytes())) : Int(mallinfo2().fordblks) }

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
    public static func trim() -> Bool { isJemalloc ? fanout_jemalloc_purge() == 0 : malloc_trim(0) == 1 }
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
