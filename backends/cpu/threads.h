/* The CPU's worker threads, shared by every kernel that runs in parallel
 * (matrix products, elementwise ops, reductions, map).  Work is cut into
 * items by the caller, in a way that depends on the shapes alone; threads
 * only decide who runs which item, so results never depend on how many
 * threads there are. */
#ifndef TL_CPU_THREADS_H
#define TL_CPU_THREADS_H

#include <stdint.h>

/* TL_NUM_THREADS when set (1 to 64), else the processors online, at most 64. */
int cpu_nthreads(void);

typedef void (*cpu_item_fn)(void *ctx, int64_t item);

/* Runs fn(ctx, i) once for every i in [0, nitems) on up to `want` threads,
 * the calling thread among them, and returns when all have run.  Called
 * from inside a running item, it runs the items on the calling thread. */
void cpu_parallel(int64_t nitems, int want, cpu_item_fn fn, void *ctx);

#endif
