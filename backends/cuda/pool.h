/* The caching allocator of the CUDA backend: eager ops make and drop a
 * tensor per call, and a cudaMalloc/cudaFree pair per tensor would cost
 * more than most kernels (cudaFree also waits for the device).  Freed
 * blocks are kept per size class (8 classes per power of two, so at most
 * 12.5% of a block is slack) and handed out again; the raw allocator is
 * called only on a miss.  When it fails, every cached block is given back
 * and the call retried once.
 *
 * Safe without events because the backend runs all its work on one
 * stream: a block released while kernels that read it are still queued is
 * reused only by work queued after them.
 *
 * Host code, independent of CUDA: the raw allocator is a pair of
 * functions, so the host tests drive it with malloc.  The pool owns its
 * blocks and its bookkeeping until cu_pool_destroy. */
#ifndef TL_CUDA_POOL_H
#define TL_CUDA_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CU_POOL_CLASSES 512

typedef struct cu_pool_block {
    void *p;
    size_t bytes; /* the class's size */
    struct cu_pool_block *next;
} cu_pool_block;

typedef struct cu_pool {
    void *(*raw_alloc)(void *ctx, size_t bytes); /* NULL when out of memory */
    void (*raw_free)(void *ctx, void *p);
    void *ctx;
    cu_pool_block *free[CU_POOL_CLASSES]; /* cached blocks per class */
    cu_pool_block **live;                 /* open addressing by address */
    size_t cap, nlive;
    size_t cached, in_use, peak; /* bytes */
    int64_t raw_allocs, hits;
} cu_pool;

/* The class of a request, and the bytes a block of that class has. */
int cu_pool_class(size_t bytes);
size_t cu_pool_class_bytes(int cls);

void cu_pool_init(cu_pool *p, void *(*raw_alloc)(void *, size_t), void (*raw_free)(void *, void *),
                  void *ctx);
/* A block of at least `bytes`; NULL when the raw allocator fails even
 * after the cache was emptied (or the bookkeeping cannot grow). */
void *cu_pool_alloc(cu_pool *p, size_t bytes);
/* Returns a block to the cache (NULL and unknown addresses: ignored). */
void cu_pool_release(cu_pool *p, void *ptr);
/* Gives every cached block back to the raw allocator. */
void cu_pool_trim(cu_pool *p);
/* Trims and frees the bookkeeping; blocks still in use are given back too. */
void cu_pool_destroy(cu_pool *p);

#ifdef __cplusplus
}
#endif

#endif
