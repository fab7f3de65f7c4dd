#if canImport(Glibc)
import Glibc
#endif

/// Heap allocations made so far by the process, when it runs with `Benchmarks/malloc-counter`
/// preloaded (`scripts/bench-allocations` does that); nil otherwise. A count does not drift with
/// the machine's load the way timings do, so it is the figure to compare across runs.
enum AllocationCounter {
    private typealias Count = @convention(c) () -> UInt64

    static func current() -> UInt64? {
        #if canImport(Glibc)
        guard let symbol = dlsym(nil, "fanout_allocation_count") else { return nil }
        return unsafeBitCast(symbol, to: Count.self)()
        #else
        return nil
        #endif
    }

    /// "N.NN allocations per <unit>" over `count` units since `start`, or a note saying how to count.
    static func report(since start: UInt64?, per count: Int, unit: String) -> String {
        guard let start, let end = current(), count > 0 else {
            return "allocations not counted (run with LD_PRELOAD of Benchmarks/malloc-counter, see scripts/bench-allocations)"
        }
        return String(format: "%.2f allocations per %@", Double(end - start) / Double(count), unit)
    }
}
