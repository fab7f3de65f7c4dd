// Counts heap allocations of the process it is preloaded into, for `fanout bench` (issue 12 item 5):
// a number that does not drift with the machine's load, as swift-kafka-client's benchmarks use.
//   cc -O2 -shared -fPIC -o libmalloc_counter.so malloc_counter.c
//   LD_PRELOAD=./libmalloc_counter.so fanout bench engine
// `fanout bench` finds `fanout_allocation_count` with dlsym; without the preload it reports no counts.
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

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

void *malloc(size_t size) { counted(); return __libc_malloc(size); }
void *calloc(size_t count, size_t size) { counted(); return __libc_calloc(count, size); }
void *realloc(void *pointer, size_t size) { counted(); return __libc_realloc(pointer, size); }
void free(void *pointer) { __libc_free(pointer); }
void *memalign(size_t alignment, size_t size) { counted(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { counted(); return __libc_memalign(alignment, size); }
int posix_memalign(void **result, size_t alignment, size_t size) {
    counted();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) return ENOMEM;
    *result = pointer;
    return 0;
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
