#include "CHeapShim.h"
#include <stddef.h>
#include <stdint.h>

// jemalloc reads its options from this symbol when the process starts (a release `fanout` links
// jemalloc; elsewhere the symbol is unused). Two arenas, as glibc is limited to (ProcessHeap), and
// pages freed by the program handed back to the kernel about a second later by jemalloc's own
// background thread, so resident memory follows what is live (README "Memory", under Operating it).
// The environment's MALLOC_CONF still overrides it, option by option.
const char *malloc_conf = "narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true";

// Weak: resolved when jemalloc is linked, NULL when glibc malloc is the allocator.
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));

int fanout_heap_is_jemalloc(void) { return mallctl != NULL; }

static int read_size(const char *name, size_t *value) {
    size_t length = sizeof(*value);
    return mallctl(name, value, &length, NULL, 0);
}

long long fanout_jemalloc_free_bytes(void) {
    if (mallctl == NULL) return -1;
    uint64_t epoch = 1;
    size_t epoch_length = sizeof(epoch);
    if (mallctl("epoch", &epoch, &epoch_length, &epoch, sizeof(epoch)) != 0) return -1;
    // Dirty and muzzy pages of every arena (MALLCTL_ARENAS_ALL, 4096): freed by the program, still resident.
    size_t dirty = 0, muzzy = 0, page = 0;
    if (read_size("stats.arenas.4096.pdirty", &dirty) != 0 || read_size("stats.arenas.4096.pmuzzy", &muzzy) != 0
        || read_size("arenas.page", &page) != 0) return -1;
    return (long long)((dirty + muzzy) * page);
}

int fanout_jemalloc_purge(void) {
    if (mallctl == NULL) return -1;
    // MALLCTL_ARENAS_ALL (4096): every arena.
    return mallctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0 ? 0 : -1;
}
