#include "CNghttp2Shim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Size classes 32, 64, … 4096 bytes; a block is its class's size plus a header holding the class
   (or LARGE for a block that came from the heap at its own size) and its usable size, 16 bytes so
   the block keeps malloc's alignment. */
enum { CLASS_COUNT = 8, SMALLEST_SHIFT = 5, LARGE = 0xff };

typedef struct header {
    size_t size;
    unsigned char size_class;
} __attribute__((aligned(16))) header;

_Static_assert(sizeof(header) == 16, "the header keeps a 16-byte alignment");

typedef struct free_block { struct free_block *next; } free_block;

struct fanout_nghttp2_pool {
    free_block *free_lists[CLASS_COUNT];
    size_t cached[CLASS_COUNT];
    struct fanout_nghttp2_pool_stats stats;
};

static int class_of(size_t size) {
    size_t capacity = (size_t)1 << SMALLEST_SHIFT;
    for (int index = 0; index < CLASS_COUNT; index++, capacity <<= 1) {
        if (size <= capacity) return index;
    }
    return LARGE;
}

static size_t class_size(int index) { return (size_t)1 << (SMALLEST_SHIFT + index); }

static void *pool_malloc(size_t size, void *user) {
    struct fanout_nghttp2_pool *pool = user;
    int index = class_of(size);
    header *block;
    if (index != LARGE && pool->free_lists[index] != NULL) {
        free_block *taken = pool->free_lists[index];
        pool->free_lists[index] = taken->next;
        pool->cached[index] -= 1;
        pool->stats.cached_bytes -= class_size(index);
        pool->stats.recycled += 1;
        block = (header *)taken - 1;
    } else {
        size_t capacity = index == LARGE ? size : class_size(index);
        block = malloc(sizeof(header) + capacity);
        if (block == NULL) return NULL;
        block->size_class = (unsigned char)index;
        block->size = capacity;
    }
    pool->stats.allocations += 1;
    pool->stats.outstanding += 1;
    return block + 1;
}

static void pool_free(void *pointer, void *user) {
    if (pointer == NULL) return;
    struct fanout_nghttp2_pool *pool = user;
    header *block = (header *)pointer - 1;
    int index = block->size_class;
    pool->stats.outstanding -= 1;
    if (index != LARGE && (pool->cached[index] + 1) * class_size(index) <= FANOUT_NGHTTP2_POOL_CLASS_BYTES) {
        free_block *freed = pointer;
        freed->next = pool->free_lists[index];
        pool->free_lists[index] = freed;
        pool->cached[index] += 1;
        pool->stats.cached_bytes += class_size(index);
        return;
    }
    free(block);
}

static void *pool_calloc(size_t count, size_t size, void *user) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *pointer = pool_malloc(count * size, user);
    if (pointer != NULL) memset(pointer, 0, count * size);
    return pointer;
}

static void *pool_realloc(void *pointer, size_t size, void *user) {
    if (pointer == NULL) return pool_malloc(size, user);
    if (size == 0) {
        pool_free(pointer, user);
        return NULL;
    }
    header *block = (header *)pointer - 1;
    if (size <= block->size) return pointer;
    void *moved = pool_malloc(size, user);
    if (moved == NULL) return NULL;
    memcpy(moved, pointer, block->size);
    pool_free(pointer, user);
    return moved;
}

struct fanout_nghttp2_pool *fanout_nghttp2_pool_new(void) {
    return calloc(1, sizeof(struct fanout_nghttp2_pool));
}

void fanout_nghttp2_pool_free(struct fanout_nghttp2_pool *pool) {
    if (pool == NULL) return;
    for (int index = 0; index < CLASS_COUNT; index++) {
        free_block *next = pool->free_lists[index];
        while (next != NULL) {
            free_block *freed = next;
            next = next->next;
            free((header *)freed - 1);
        }
    }
    free(pool);
}

nghttp2_mem fanout_nghttp2_pool_mem(struct fanout_nghttp2_pool *pool) {
    nghttp2_mem mem = { pool, pool_malloc, pool_free, pool_calloc, pool_realloc };
    return mem;
}

struct fanout_nghttp2_pool_stats fanout_nghttp2_pool_stats(const struct fanout_nghttp2_pool *pool) {
    return pool->stats;
}
