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

static _Atomic unsigned long long allocations;

unsigned long long fanout_allocation_count(void) {
    return atomic_load_explicit(&allocations, memory_order_relaxed);
}

static inline void counted(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

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
