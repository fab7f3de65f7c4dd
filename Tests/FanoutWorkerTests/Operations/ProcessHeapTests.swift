import Foundation
import Testing
@testable import FanoutWorker

/// What the worker's heap trimmer relies on: freed small allocations show up as free heap bytes, and
/// a trim hands their pages back.
@Suite struct ProcessHeapTests {
    @Test func freedSmallChunksAreFreeBytesThatATrimReturns() {
        // 200k chunks of 512 bytes (≈100 MB); every tenth stays allocated, so the freed ones cannot
        // coalesce into the heap's top and be released by free() itself: they are what a drained
        // backlog leaves behind.
        var chunks: [UnsafeMutableRawPointer] = []
        chunks.reserveCapacity(200_000)
        for _ in 0..<200_000 {
            let chunk = malloc(512)!
            memset(chunk, 0xa5, 512)
            chunks.append(chunk)
        }
        let before = ProcessHeap.freeBytes
        for (index, chunk) in chunks.enumerated() where index % 10 != 0 { free(chunk) }
        let after = ProcessHeap.freeBytes
        #expect(after - before > 60 << 20, "≈90 MB freed in small chunks: \(before) → \(after) free heap bytes")
        #expect(after > ProcessHeap.trimThreshold)
        #expect(ProcessHeap.trim(), "malloc_trim returned free pages")
        for (index, chunk) in chunks.enumerated() where index % 10 == 0 { free(chunk) }
    }

    @Test func aUsersArenaSettingIsLeftAlone() {
        #expect(!ProcessHeap.limitArenas(environment: ["MALLOC_ARENA_MAX": "8"]))
        #expect(ProcessHeap.limitArenas(environment: [:]), "glibc accepted M_ARENA_MAX")
    }
}
