#ifndef FANOUT_CNGHTTP2SHIM_H
#define FANOUT_CNGHTTP2SHIM_H
/* A recycling allocator for one nghttp2 session (nghttp2_mem), so the streams, header copies and
   frame items nghttp2 makes for every request come from the session's own free lists instead of
   the process heap: about eight malloc/free pairs per request, and the heap's arena lock they took
   against every other thread of the worker.

   Blocks of up to FANOUT_NGHTTP2_POOL_LARGEST bytes are kept in power-of-two size classes; a
   freed block goes back to its class's list while the list holds less than
   FANOUT_NGHTTP2_POOL_CLASS_BYTES, else to the heap. Larger blocks go to the heap directly. So a
   pool never keeps more than 8 × 256 KiB free, whatever the session did.

   Not thread-safe, like the session it serves: one thread drives both. Free the pool only after
   nghttp2_session_del of its session (nghttp2 frees its last blocks there). */
#include <stddef.h>
#include <nghttp2/nghttp2.h>

#define FANOUT_NGHTTP2_POOL_LARGEST 4096
#define FANOUT_NGHTTP2_POOL_CLASS_BYTES (256 * 1024)

struct fanout_nghttp2_pool;

/* NULL when out of memory. */
struct fanout_nghttp2_pool *fanout_nghttp2_pool_new(void);
/* Frees the cached blocks and the pool. Every block it handed out must have been freed before. */
void fanout_nghttp2_pool_free(struct fanout_nghttp2_pool *pool);
/* The nghttp2_mem that allocates from `pool`, for nghttp2_session_client_new3/server_new3. */
nghttp2_mem fanout_nghttp2_pool_mem(struct fanout_nghttp2_pool *pool);

/* What the pool did, for tests and benchmarks. */
struct fanout_nghttp2_pool_stats {
    size_t allocations;   /* blocks handed out */
    size_t recycled;      /* of them, taken from a free list */
    size_t outstanding;   /* handed out and not yet freed */
    size_t cached_bytes;  /* held in free lists now */
};
struct fanout_nghttp2_pool_stats fanout_nghttp2_pool_stats(const struct fanout_nghttp2_pool *pool);

#endif
