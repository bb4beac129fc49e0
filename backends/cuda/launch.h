/* Launch shapes, computed in one place.  Every kernel runs blocks of
 * CU_THREADS threads over a grid-stride loop, so a grid never needs more
 * than CU_MAX_BLOCKS blocks.  Elementwise results never depend on the
 * launch shape (each element is computed alone); the order in which a
 * reduction combines its elements depends on the shapes of the operands
 * only, never on the device, so a result has the same bits on every run
 * (and on every GPU with the same math library). */
#ifndef TL_CUDA_LAUNCH_H
#define TL_CUDA_LAUNCH_H

#include "tl_c.h"

#define CU_THREADS 256
#define CU_MAX_BLOCKS 65536

/* Blocks for n independent items, one per thread. */
static inline unsigned cu_blocks(int64_t n)
{
    int64_t b = (n + CU_THREADS - 1) / CU_THREADS;
    return (unsigned)(b < 1 ? 1 : b > CU_MAX_BLOCKS ? CU_MAX_BLOCKS : b);
}

/* map: each thread keeps a register file of bytes_per_thread in device
 * scratch and walks the elements i, i + P, ... for its index i; P, the
 * number of threads, is a multiple of CU_THREADS: `total` rounded up, but
 * no more than keeps the scratch within CU_MAP_SCRATCH bytes (and at least
 * one block, whatever a thread needs). */
#define CU_MAP_SCRATCH ((int64_t)64 << 20)

static inline int64_t cu_map_threads(int64_t total, int64_t bytes_per_thread)
{
    int64_t cap = CU_MAP_SCRATCH / (bytes_per_thread > 0 ? bytes_per_thread : 1);
    int64_t p = (total + CU_THREADS - 1) / CU_THREADS * CU_THREADS;
    cap = cap / CU_THREADS * CU_THREADS;
    if (cap > (int64_t)CU_MAX_BLOCKS * CU_THREADS)
        cap = (int64_t)CU_MAX_BLOCKS * CU_THREADS;
    p = p < cap ? p : cap;
    return p < CU_THREADS ? CU_THREADS : p;
}

/* A reduction of r elements into each output: `group` threads (1, 32 or
 * 256, dividing CU_THREADS) share one output's chunk of at most `chunk`
 * elements; thread t of a group folds elements t, t + group, t + 2 group,
 * ... of its chunk in that order, then the group's partials combine in a
 * halving tree (t with t + group/2, then t with t + group/4, ... down to
 * t = 0).  With several chunks, their results (in chunk order) are reduced
 * again the same way, as a contiguous reduction of nchunks elements.
 * Contiguous reductions (the reduced elements of an output adjacent in
 * memory, or in runs of 32 and more) give each output a group of threads
 * reading side by side; strided ones give each output one thread, so that
 * neighbouring threads read neighbouring outputs. */
#define CU_RED_CHUNK 32768    /* elements per chunk, groups of 32 or 256 */
#define CU_RED_CHUNK_SEQ 1024 /* elements per chunk, one thread per output */

typedef struct cu_redshape {
    int group;
    int64_t chunk, nchunks;
} cu_redshape;

static inline cu_redshape cu_red_shape(int64_t r, bool contiguous)
{
    cu_redshape s;
    if (contiguous && r > 16) {
        s.group = r <= 1024 ? 32 : CU_THREADS;
        s.chunk = r < CU_RED_CHUNK ? r : CU_RED_CHUNK;
    } else {
        s.group = 1;
        s.chunk = r < CU_RED_CHUNK_SEQ ? r : CU_RED_CHUNK_SEQ;
    }
    s.nchunks = s.chunk ? (r + s.chunk - 1) / s.chunk : 1;
    return s;
}

/* Blocks for n groups of `group` threads (CU_THREADS / group per block). */
static inline unsigned cu_group_blocks(int64_t n, int group)
{
    return cu_blocks(n * group);
}

#endif
