import Foundation
import Testing
@testable import FanoutWorker

/// What the worker's heap trimmer relies on: freed small allocations show up as free heap bytes, and
/// a trim hands their pages back. The suite runs on glibc malloc; run it with jemalloc preloaded
/// (`LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2`) and the same tests check the release
/// build's allocator.
@Suite struct ProcessHeapTests {
    @Test func freedSmallChunksAreFreeBytesThatATrimReturns() {
        // 200k chunks of 512 bytes (≈100 MB); the last tenth stays allocated, so the freed ones cannot
        // coalesce into the heap's top and be released by free() itself: they are what a drained
        // backlog leaves behind (whole pages of them, which jemalloc counts as dirty).
        var chunks: [UnsafeMutableRawPointer] = []
        chunks.reserveCapacity(200_000)
        for _ in 0..<200_000 {
            let chunk = malloc(512)!
            memset(chunk, 0xa5, 512)
            chunks.append(chunk)
        }
        let before = ProcessHeap.freeBytes
        for (index, chunk) in chunks.enumerated() where index < 180_000 { free(chunk) }
        let after = ProcessHeap.freeBytes
        #expect(after - before > 60 << 20, "≈90 MB freed in small chunks: \(before) → \(after) free heap bytes")
        #expect(after > ProcessHeap.trimThreshold)
        #expect(ProcessHeap.trim(), "\(ProcessHeap.allocator) returned free pages")
        for (index, chunk) in chunks.enumerated() where index >= 180_000 { free(chunk) }
    }

    /// `fanout_resident_memory_bytes` reads statm; the kernel's VmRSS line in status is the same figure
    /// in kB. Read around it, so memory moving meanwhile (other tests) widens the bounds, not the test.
    @Test func residentBytesAreTheKernelsResidentSetSize() throws {
        func vmRSS() throws -> Int {
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
            let kilobytes = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
            return kilobytes * 1024
        }
        let low = try vmRSS()
        let resident = try #require(ProcessHeap.residentBytes)
        let high = try vmRSS()
        let slack = 8 << 20
        #expect(resident > 1 << 20)
        #expect(resident >= min(low, high) - slack && resident <= max(low, high) + slack, "statm \(resident), VmRSS \(low)…\(high)")
    }

    /// glibc's arenas are limited unless the user set their own; with jemalloc (a release build, or
    /// this suite run with it preloaded) its own options decide, and glibc's are left alone.
    @Test func aUsersArenaSettingIsLeftAlone() {
        #expect(!ProcessHeap.limitArenas(environment: ["MALLOC_ARENA_MAX": "8"]))
        #expect(ProcessHeap.limitArenas(environment: [:]) == (ProcessHeap.allocator == "glibc"), "M_ARENA_MAX set for glibc only")
    }
}
