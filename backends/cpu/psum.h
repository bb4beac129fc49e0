/* The one summation order of tl's sums over contiguous elements, written
 * once: psum(x, n) = psum(x, h) + psum(x + h, n - h) with h = (n/2) & ~7
 * while n > 256, and below that eight interleaved accumulators combined as
 * ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)), then the rest.  A plain sum
 * (cpu_reduce.c) and the sum at the end of a fused chain (cpu_map.c) both
 * go through it, so they give the same bits; large sums evaluate the
 * subtrees of the top levels on several threads and combine them in the
 * same tree, so the bits never depend on the thread count. */
#ifndef TL_CPU_PSUM_H
#define TL_CPU_PSUM_H

#include <stdint.h>
#include <stdlib.h>

#include "threads.h"

#define CPU_PSUM_LEAF 256
#define CPU_PSUM_DEPTH 6          /* 64 subtrees for the threads */
#define CPU_PSUM_PARALLEL 65536   /* from this many elements */

static inline int64_t cpu_psum_half(int64_t n) { return (n / 2) & ~(int64_t)7; }

/* LEAF(ctx, lo, n) gives the leaf sum of elements [lo, lo + n), n <= 256 */
#define CPU_DEFINE_PSUM(T, SUF)                                                    \
    static inline T cpu_psum_leaf_##SUF(const T *x, int64_t n)                     \
    {                                                                              \
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, rest = 0;                             \
        int64_t i = 0;                                                             \
        for (; i + 8 <= n; i += 8)                                                 \
            for (int k = 0; k < 8; k++)                                            \
                acc[k] += x[i + k];                                                \
        for (; i < n; i++)                                                         \
            rest += x[i];                                                          \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +                           \
               ((acc[4] + acc[5]) + (acc[6] + acc[7])) + rest;                     \
    }                                                                              \
    typedef T (*cpu_psum_leaf_fn_##SUF)(void *ctx, int64_t lo, int64_t n);         \
    static inline T cpu_psum_seq_##SUF(cpu_psum_leaf_fn_##SUF leaf, void *ctx, int64_t lo, \
                                       int64_t n)                                  \
    {                                                                              \
        if (n > CPU_PSUM_LEAF) {                                                   \
            int64_t h = cpu_psum_half(n);                                          \
            T a = cpu_psum_seq_##SUF(leaf, ctx, lo, h);                            \
            return a + cpu_psum_seq_##SUF(leaf, ctx, lo + h, n - h);               \
        }                                                                          \
        return leaf(ctx, lo, n);                                                   \
    }                                                                              \
    typedef struct cpu_psum_job_##SUF {                                            \
        cpu_psum_leaf_fn_##SUF leaf;                                               \
        void *ctx;                                                                 \
        int64_t *lo, *n;                                                           \
        T *part;                                                                   \
        int count;                                                                 \
    } cpu_psum_job_##SUF;                                                          \
    static inline void cpu_psum_cut_##SUF(cpu_psum_job_##SUF *j, int64_t lo, int64_t n, int d) \
    {                                                                              \
        if (n > CPU_PSUM_LEAF && d < CPU_PSUM_DEPTH) {                             \
            int64_t h = cpu_psum_half(n);                                          \
            cpu_psum_cut_##SUF(j, lo, h, d + 1);                                   \
            cpu_psum_cut_##SUF(j, lo + h, n - h, d + 1);                           \
            return;                                                                \
        }                                                                          \
        if (j->lo) {                                                               \
            j->lo[j->count] = lo;                                                  \
            j->n[j->count] = n;                                                    \
        }                                                                          \
        j->count++;                                                                \
    }                                                                              \
    static inline T cpu_psum_join_##SUF(const cpu_psum_job_##SUF *j, int64_t n, int d, int *at) \
    {                                                                              \
        if (n > CPU_PSUM_LEAF && d < CPU_PSUM_DEPTH) {                             \
            int64_t h = cpu_psum_half(n);                                          \
            T a = cpu_psum_join_##SUF(j, h, d + 1, at);                            \
            return a + cpu_psum_join_##SUF(j, n - h, d + 1, at);                   \
        }                                                                          \
        return j->part[(*at)++];                                                   \
    }                                                                              \
    static inline void cpu_psum_item_##SUF(void *ctx, int64_t i)                   \
    {                                                                              \
        cpu_psum_job_##SUF *j = ctx;                                               \
        j->part[i] = cpu_psum_seq_##SUF(j->leaf, j->ctx, j->lo[i], j->n[i]);       \
    }                                                                              \
    /* The sum of elements [0, n) whose leaves LEAF gives, on up to `threads` \
     * threads; *ok turns false when scratch cannot be had (then the sum is \
     * computed on this thread alone, with the same bits). */                     \
    static inline T cpu_psum_tree_##SUF(cpu_psum_leaf_fn_##SUF leaf, void *ctx, int64_t n, \
                                        int threads)                               \
    {                                                                              \
        if (n < CPU_PSUM_PARALLEL || threads < 2)                                  \
            return cpu_psum_seq_##SUF(leaf, ctx, 0, n);                            \
        cpu_psum_job_##SUF j = {leaf, ctx, NULL, NULL, NULL, 0};                   \
        cpu_psum_cut_##SUF(&j, 0, n, 0);                                           \
        int count = j.count;                                                       \
        void *mem = malloc((size_t)count * (2 * sizeof(int64_t) + sizeof(T)));     \
        if (!mem)                                                                  \
            return cpu_psum_seq_##SUF(leaf, ctx, 0, n);                            \
        j.lo = mem;                                                                \
        j.n = j.lo + count;                                                        \
        j.part = (T *)(j.n + count);                                               \
        j.count = 0;                                                               \
        cpu_psum_cut_##SUF(&j, 0, n, 0);                                           \
        cpu_parallel(count, threads, cpu_psum_item_##SUF, &j);                     \
        int at = 0;                                                                \
        T s = cpu_psum_join_##SUF(&j, n, 0, &at);                                  \
        free(mem);                                                                 \
        return s;                                                                  \
    }

CPU_DEFINE_PSUM(float, f)
CPU_DEFINE_PSUM(double, d)

#endif
