// Counts heap allocations of the process it is preloaded into, for `fanout bench` (issue 12 item 5):
// a number that does not drift with the machine's load, as swift-kafka-client's benchmarks use.
//   cc -O2 -shared -fPIC -o libmalloc_counter.so malloc_counter.c -ldl
//   LD_PRELOAD=./libmalloc_counter.so fanout bench engine
// `fanout bench` finds `fanout_allocation_count` with dlsym; without the preload it reports no counts.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

// Each call goes on to the allocator the process would use without the preload (the next definition
// after this library: jemalloc in a release `fanout`, glibc's elsewhere), so a counted run measures
// the shipped allocator, and `malloc_usable_size` (not defined here) agrees with what it allocated.
static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void (*next_free)(void *);
static void *(*next_memalign)(size_t, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);

// dlsym may allocate while the functions above are looked up: those few come from here, never freed.
static _Alignas(16) char bootstrap[8192];
static _Atomic size_t bootstrap_used;
static _Atomic int resolving;

static void *bootstrap_alloc(size_t size) {
    size_t rounded = (size + 15) & ~(size_t)15;
    size_t offset = atomic_fetch_add(&bootstrap_used, rounded);
    return offset + rounded <= sizeof(bootstrap) ? bootstrap + offset : NULL;
}

static int from_bootstrap(const void *pointer) {
    return (const char *)pointer >= bootstrap && (const char *)pointer < bootstrap + sizeof(bootstrap);
}

// Looks every function up once; `next_malloc` is set last, so once it is set all of them are.
static void resolve(void) {
    if (atomic_exchange(&resolving, 1)) return;
    next_calloc = dlsym(RTLD_NEXT, "calloc");
    next_realloc = dlsym(RTLD_NEXT, "realloc");
    next_free = dlsym(RTLD_NEXT, "free");
    next_memalign = dlsym(RTLD_NEXT, "memalign");
    next_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    next_malloc = dlsym(RTLD_NEXT, "malloc");
}

// One counter per thread, each on its own cache line, so counting costs a worker with many threads
// (Kafka, transport, intake) no shared-line traffic; threads past the slots share them atomically.
#define SLOTS 256
struct slot { _Atomic unsigned long long count; char padding[56]; };
static struct slot slots[SLOTS];
static _Atomic int next_slot;
static __thread int my_slot = -1;

unsigned long long fanout_allocation_count(void) {
    unsigned long long total = 0;
    for (int i = 0; i < SLOTS; i++) total += atomic_load_explicit(&slots[i].count, memory_order_relaxed);
    return total;
}

static inline void counted(void) {
    if (my_slot < 0) my_slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % SLOTS;
    atomic_fetch_add_explicit(&slots[my_slot].count, 1, memory_order_relaxed);
}

void *malloc(size_t size) {
    if (next_malloc == NULL) { resolve(); if (next_malloc == NULL) return bootstrap_alloc(size); }
    counted();
    return next_malloc(size);
}

void *calloc(size_t count, size_t size) {
    if (next_malloc == NULL) { resolve(); if (next_malloc == NULL) return bootstrap_alloc(count * size); }
    counted();
    return next_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    if (next_malloc == NULL) resolve();
    counted();
    if (from_bootstrap(pointer)) {
        void *moved = next_malloc(size);
        if (moved != NULL) memcpy(moved, pointer, size);  // a bootstrap block is never larger than the buffer
        return moved;
    }
    return next_realloc(pointer, size);
}

void free(void *pointer) {
    if (pointer == NULL || from_bootstrap(pointer)) return;
    if (next_free == NULL) resolve();
    next_free(pointer);
}

void *memalign(size_t alignment, size_t size) {
    if (next_malloc == NULL) resolve();
    counted();
    return next_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (next_malloc == NULL) resolve();
    counted();
    return next_posix_memalign(result, alignment, size);
}

// With MALLOC_COUNTER_REPORT=<path>, the count at exit is written there: allocations of a whole
// process run (e.g. `fanout run` through a benchmark workload), not only of `fanout bench`.
#include <stdio.h>
#include <stdlib.h>
__attribute__((destructor)) static void report_at_exit(void) {
    const char *path = getenv("MALLOC_COUNTER_REPORT");
    if (path == NULL || path[0] == '\0') return;
    FILE *file = fopen(path, "w");
    if (file == NULL) return;
    fprintf(file, "%llu\n", fanout_allocation_count());
    fclose(file);
}
