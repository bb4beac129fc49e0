/* Reductions, device-neutral half.  An output element o reduces the r
 * elements x[keep(o) + red(k)], k = 0..r-1 in row-major order of the
 * reduced axes, in the fixed tree that launch.h describes (cu_red_shape):
 * what a thread folds, how two partials combine, and what is stored are
 * defined here, so the host tests replay the kernels' order exactly.
 *
 * max and min keep the position of their pick: NaN wins over numbers and
 * the last NaN over earlier ones; between equal numbers (+0 and -0
 * included) the first wins.  That is what the CPU's left-to-right fold
 * picks, and as a choice among distinct (value, position) pairs it does
 * not depend on the tree, so max and min have the CPU's bits exactly.
 * Sums and products go in the tree's order, the same on every run.  An f32
 * sum accumulates in f64 and rounds once, at the store: a thread folds up
 * to 1024 elements in order, which in f32 was up to 146 times the error
 * of the CPU's pairwise sum of runs of 32 (1.4e-5 for 1024 values of 0.01
 * along axis 0, past tl compare's f32 tolerance).  A product rounds to T
 * at every step (exact in f64, then one rounding: T's own product), so it
 * overflows and underflows as T's would. */
#ifndef TL_CUDA_REDUCE_H
#define TL_CUDA_REDUCE_H

#include "launch.h"
#include "plan.h"

typedef enum cu_redmode {
    CU_R_SUM,
    CU_R_PROD,
    CU_R_MAX,
    CU_R_MIN,
    CU_R_SUMEXP, /* sum of exp(x - m[o]): softmax and logsumexp */
    CU_R_PRODZ,  /* prod_grad: the count of zeros, the product, the product of the nonzeros */
} cu_redmode;

/* One pass of a reduction.  Pass 1 reads x through the plans; a later
 * pass reads the accumulators of the previous one, [nout, r]. */
typedef struct cu_red {
    int mode;
    cpu_bcast keep, red; /* one operand each: x's offset of output o, of element k */
    int64_t nout, r;
    cu_redshape sh;
    const void *x;       /* pass 1 */
    const void *acc_in;  /* later passes */
    const void *m;       /* CU_R_SUMEXP: per output */
    void *y;             /* the last pass of a value reduction: y[o] */
    void *acc_out;       /* otherwise: accumulators [nout, sh.nchunks] */
} cu_red;

/* PRODZ's counts in one int64: the zeros below bit 61, and above it the
 * infinities and NaNs, up to 2 (whether one is among the others of any
 * element) */
#define CU_PRODZ_ODD ((int64_t)1 << 61)
TL_HD static inline int64_t cu_prodz_add(int64_t a, int64_t b)
{
    int64_t odd = (a >> 61) + (b >> 61);
    return ((a & (CU_PRODZ_ODD - 1)) + (b & (CU_PRODZ_ODD - 1))) | (odd > 2 ? 2 : odd) << 61;
}

#define CU_DEFINE_RED(T, A, SUF)                                                   \
    typedef struct cu_acc_##SUF {                                                  \
        A v, v2;   /* the value; PRODZ: the product of the nonzeros */             \
        int64_t i; /* MAX/MIN: the position of the pick; PRODZ: cu_prodz counts */ \
    } cu_acc_##SUF;                                                                \
                                                                                   \
    TL_HD static inline cu_acc_##SUF cu_acc_init_##SUF(int mode)                   \
    {                                                                              \
        cu_acc_##SUF a;                                                            \
        a.v = mode == CU_R_MAX ? (A)-INFINITY : mode == CU_R_MIN ? (A)INFINITY     \
              : mode == CU_R_PROD || mode == CU_R_PRODZ ? (A)1 : (A)0;             \
        a.v2 = 1;                                                                  \
        a.i = mode == CU_R_PRODZ ? 0 : INT64_MAX;                                  \
        return a;                                                                  \
    }                                                                              \
                                                                                   \
    /* Whether (b, ib) is picked over (a, ia) by max (or min, when lower). */      \
    TL_HD static inline bool cu_pick_##SUF(A a, int64_t ia, A b, int64_t ib, bool lower) \
    {                                                                              \
        bool an = a != a, bn = b != b;                                             \
        if (an || bn)                                                              \
            return bn && (!an || ib > ia);                                         \
        if (a != b)                                                                \
            return lower ? b < a : b > a;                                          \
        return ib < ia;                                                            \
    }                                                                              \
                                                                                   \
    TL_HD static inline cu_acc_##SUF cu_acc_combine_##SUF(int mode, cu_acc_##SUF a, \
                                                          cu_acc_##SUF b)          \
    {                                                                              \
        switch (mode) {                                                            \
        case CU_R_MAX:                                                             \
        case CU_R_MIN:                                                             \
            return cu_pick_##SUF(a.v, a.i, b.v, b.i, mode == CU_R_MIN) ? b : a;    \
        case CU_R_PROD: a.v = (T)(a.v * b.v); return a; /* exact in A: T's product */ \
        case CU_R_PRODZ:                                                           \
            a.i = cu_prodz_add(a.i, b.i);                                          \
            a.v = (T)(a.v * b.v);                                                  \
            a.v2 = (T)(a.v2 * b.v2);                                               \
            return a;                                                              \
        default: a.v = a.v + b.v; return a; /* SUM, SUMEXP */                      \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* Folds element (v, k) of output o into a. */                                 \
    TL_HD static inline cu_acc_##SUF cu_acc_fold_##SUF(const cu_red *p, cu_acc_##SUF a, \
                                                       T v, int64_t k, int64_t o)  \
    {                                                                              \
        cu_acc_##SUF e;                                                            \
        switch (p->mode) {                                                         \
        case CU_R_SUMEXP: a.v = a.v + exp(v - ((const T *)p->m)[o]); return a;     \
        case CU_R_PRODZ:                                                           \
            a.i = cu_prodz_add(a.i, (int64_t)(v == 0) | (isfinite(v) ? 0 : CU_PRODZ_ODD)); \
            a.v = (T)(a.v * v);                                                    \
            if (v != 0)                                                            \
                a.v2 = (T)(a.v2 * v);                                              \
            return a;                                                              \
        case CU_R_MAX:                                                             \
        case CU_R_MIN:                                                             \
            e.v = v;                                                               \
            e.v2 = 1;                                                              \
            e.i = k;                                                               \
            return cu_acc_combine_##SUF(p->mode, a, e);                            \
        default: e = a; e.v = v; return cu_acc_combine_##SUF(p->mode, a, e);      \
        }                                                                          \
    }

/* What a thread folds and what a group stores, for any accumulator type
 * cu_acc_SUF (cu_acc_init, cu_acc_fold, cu_acc_combine of SUF). */
#define CU_DEFINE_RED_PASS(T, SUF)                                                 \
    /* What thread t of the group of (output o, chunk c) folds, in order. */       \
    TL_HD static inline cu_acc_##SUF cu_red_thread_##SUF(const cu_red *p, int64_t o, \
                                                         int64_t c, int t)         \
    {                                                                              \
        cu_acc_##SUF a = cu_acc_init_##SUF(p->mode);                               \
        int64_t lo = c * p->sh.chunk, hi = lo + p->sh.chunk;                       \
        if (hi > p->r)                                                             \
            hi = p->r;                                                             \
        if (p->acc_in) {                                                           \
            const cu_acc_##SUF *in = (const cu_acc_##SUF *)p->acc_in + o * p->r;   \
            for (int64_t k = lo + t; k < hi; k += p->sh.group)                     \
                a = cu_acc_combine_##SUF(p->mode, a, in[k]);                       \
            return a;                                                              \
        }                                                                          \
        const T *x = (const T *)p->x + cu_plan_offset(&p->keep, o);                \
        for (int64_t k = lo + t; k < hi; k += p->sh.group)                         \
            a = cu_acc_fold_##SUF(p, a, x[cu_plan_offset(&p->red, k)], k, o);      \
        return a;                                                                  \
    }                                                                              \
                                                                                   \
    /* The group's result for (o, c), after the tree. */                           \
    TL_HD static inline void cu_red_store_##SUF(const cu_red *p, int64_t o, int64_t c, \
                                                cu_acc_##SUF a)                    \
    {                                                                              \
        if (p->y)                                                                  \
            ((T *)p->y)[o] = (T)a.v;                                               \
        else                                                                       \
            ((cu_acc_##SUF *)p->acc_out)[o * p->sh.nchunks + c] = a;               \
    }

CU_DEFINE_RED(float, double, f)
CU_DEFINE_RED(double, double, d)
CU_DEFINE_RED_PASS(float, f)
CU_DEFINE_RED_PASS(double, d)

/* sum and prod of i32 and i64 (TT, its unsigned twin UU): exact and
 * wrapping, so the tree's order does not matter. */
#define CU_DEFINE_IRED(TT, UU, SUF)                                                \
    typedef struct cu_acc_##SUF {                                                  \
        TT v;                                                                      \
    } cu_acc_##SUF;                                                                \
    TL_HD static inline cu_acc_##SUF cu_acc_init_##SUF(int mode)                   \
    {                                                                              \
        cu_acc_##SUF a;                                                            \
        a.v = mode == CU_R_PROD ? 1 : 0;                                           \
        return a;                                                                  \
    }                                                                              \
    TL_HD static inline cu_acc_##SUF cu_acc_combine_##SUF(int mode, cu_acc_##SUF a, \
                                                          cu_acc_##SUF b)          \
    {                                                                              \
        a.v = mode == CU_R_PROD ? (TT)((UU)a.v * (UU)b.v) : (TT)((UU)a.v + (UU)b.v); \
        return a;                                                                  \
    }                                                                              \
    TL_HD static inline cu_acc_##SUF cu_acc_fold_##SUF(const cu_red *p, cu_acc_##SUF a, \
                                                       TT v, int64_t k, int64_t o) \
    {                                                                              \
        cu_acc_##SUF e;                                                            \
        (void)k, (void)o;                                                          \
        e.v = v;                                                                   \
        return cu_acc_combine_##SUF(p->mode, a, e);                                \
    }
CU_DEFINE_IRED(int32_t, uint32_t, i32)
CU_DEFINE_IRED(int64_t, uint64_t, i64)
CU_DEFINE_RED_PASS(int32_t, i32)
CU_DEFINE_RED_PASS(int64_t, i64)

/* The plans of pass 1: x (ndim, shape) reduced over the axes set in
 * mask; keep walks the kept axes, red the reduced ones. */
static inline void cu_red_plan(cu_red *p, int mode, int ndim, const int64_t *shape,
                               const bool *mask)
{
    int64_t xs[TL_MAXDIM], ks[1][TL_MAXDIM], rs[1][TL_MAXDIM], kshape[TL_MAXDIM],
        rshape[TL_MAXDIM];
    int nk = 0, nr = 0;
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->nout = p->r = 1;
    cpu_strides(ndim, shape, xs);
    for (int d = 0; d < ndim; d++) {
        if (mask[d]) {
            rshape[nr] = shape[d];
            rs[0][nr++] = xs[d];
            p->r *= shape[d];
        } else {
            kshape[nk] = shape[d];
            ks[0][nk++] = xs[d];
            p->nout *= shape[d];
        }
    }
    cu_plan_strided(&p->keep, nk, kshape, 1, (const int64_t(*)[TL_MAXDIM])ks);
    cu_plan_strided(&p->red, nr, rshape, 1, (const int64_t(*)[TL_MAXDIM])rs);
    /* side by side: the reduced elements adjacent, or in runs of at least
     * 32 (batch norm's statistics, over [N, C, H, W] but C: runs of H W),
     * which a group of threads reads a run at a time */
    int last = p->red.ndim - 1;
    bool contiguous = p->red.ndim >= 1 && p->red.stride[0][last] == 1 &&
                      (p->red.ndim == 1 || p->red.shape[last] >= 32);
    p->sh = cu_red_shape(p->r, contiguous);
}

/* The next pass: reduces the previous pass's accumulators, [nout, r]. */
static inline void cu_red_next(cu_red *p, const void *acc_in)
{
    p->r = p->sh.nchunks;
    p->acc_in = acc_in;
    p->x = NULL;
    p->sh = cu_red_shape(p->r, true);
}

/* softmax and log_softmax of element i of x ([outer, r, inner] around the
 * axis) from its row's max m and sum s of exp(x - m), as the CPU's. */
#define CU_DEFINE_SOFTMAX(T, SUF)                                                  \
    TL_HD static inline T cu_softmax_##SUF(bool log_form, T x, T m, T s)           \
    {                                                                              \
        return log_form ? x - m - log(s) : exp(x - m) / s;                         \
    }                                                                              \
    /* prod_grad of element k of a row from the row's accumulator */               \
    /* (the CPU's rule: a product of others holding a zero is 0, or NaN with  \
     * an infinity or NaN among them) */                                          \
    TL_HD static inline T cu_prod_grad_##SUF(T x, T g, cu_acc_##SUF a)             \
    {                                                                              \
        int64_t zeros = a.i & (CU_PRODZ_ODD - 1), odd = a.i >> 61;                 \
        if (zeros == 0)                                                            \
            return g * ((T)a.v / x);                                               \
        if (zeros == 1 && x == 0)                                                  \
            return g * (T)a.v2;                                                    \
        return odd - !isfinite(x) > 0 ? g * (T)NAN : g * (T)0;                     \
    }
CU_DEFINE_SOFTMAX(float, f)
CU_DEFINE_SOFTMAX(double, d)

#endif
