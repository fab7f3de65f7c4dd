// The process heap's allocator, seen from the worker: jemalloc when the release `fanout` is linked
// with it, glibc malloc otherwise (debug builds, tests, sanitizers). ProcessHeap asks which.
#ifndef FANOUT_CHEAP_SHIM_H
#define FANOUT_CHEAP_SHIM_H

/// 1 when jemalloc is the process's allocator (its `mallctl` is linked), else 0.
int fanout_heap_is_jemalloc(void);

/// jemalloc: bytes in pages the program freed that are still resident (its arenas' dirty and muzzy
/// pages, after refreshing its statistics), what a purge returns. -1 without jemalloc.
long long fanout_jemalloc_free_bytes(void);

/// jemalloc: returns every arena's unused dirty pages to the kernel now. 0 on success, -1 without jemalloc.
int fanout_jemalloc_purge(void);

#endif
