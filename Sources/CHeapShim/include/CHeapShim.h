// The process heap's allocator, seen from the worker: jemalloc when the release `fanout` is linked
// with it, glibc malloc otherwise (debug builds, tests, sanitizers). ProcessHeap asks which.
#ifndef FANOUT_CHEAP_SHIM_H
#define FANOUT_CHEAP_SHIM_H

/// 1 when jemalloc is the process's allocator (its `mallctl` is linked), else 0.
int fanout_heap_is_jemalloc(void);

/// jemalloc: bytes resident in its arenas but not allocated to the program (`stats.resident` minus
/// `stats.allocated`, after refreshing its statistics), what a purge can return. -1 without jemalloc.
long long fanout_jemalloc_free_bytes(void);

/// jemalloc: returns every arena's unused dirty pages to the kernel now. 0 on success, -1 without jemalloc.
int fanout_jemalloc_purge(void);

#endif
