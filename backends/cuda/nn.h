/* The layer ops of nn.md on the CUDA backend, device-neutral half: the
 * geometry of a call, what one thread computes for one element of each
 * kernel, and the host-side drivers that order the kernels and cuBLAS
 * calls of an op.  The drivers run against a cu_nn_dev (launch a kernel
 * over n elements, run a gemm, scratch memory): nn.cu gives them the
 * device, the host twin (tests/cuda_twin.h) loops over the same elements
 * and runs a reference gemm, so both run the same kernels in the same
 * order with the same launch sizes.
 *
 * Convolutions are an index transform plus gemm (Caffe's im2col): conv is
 * im2col, one gemm per group and a bias pass; conv_transpose is a gemm per
 * group into columns, then col2im, where each output element sums its own
 * columns in a fixed order (no atomics); conv_grad_w is im2col and the
 * cotangent laid out batch-inner, then one gemm per group over batch and
 * positions.  Pools are one thread per output element (forward) and one
 * per input element (backward: it sums the windows that picked it, in
 * increasing output order, as the CPU's scatter adds them).  Nothing here
 * uses atomics: every result has the same bits on every run.
 *
 * In C include after <tgmath.h>. */
#ifndef TL_CUDA_NN_H
#define TL_CUDA_NN_H

#include <stdlib.h>

#include "errors.h"
#include "plan.h"
#include "backends/philox.h"

/* The geometry of a sliding-window relation between a "wide" side (the
 * input of conv and pools, the result of conv_transpose) and a "narrow"
 * side, one position per window: wide position i of window o on an axis
 * is o * s - lo + k * dil for kernel tap k. */
typedef struct cu_sp {
    int d;                                   /* spatial axes */
    int64_t n, c, co, groups;                /* batch, wide channels, narrow channels */
    int64_t in[TL_MAXSP], out[TL_MAXSP];     /* wide and narrow spatial sizes */
    int64_t k[TL_MAXSP], s[TL_MAXSP], dil[TL_MAXSP], lo[TL_MAXSP], hi[TL_MAXSP];
    int64_t pin, pout, pk;                   /* their products */
} cu_sp;

/* The kernels (cu_nnk.op). */
enum {
    CU_NN_IM2COL,   /* col [nb][c][pk][pout] (or batch-inner [c][pk][nb][pout]) <- x */
    CU_NN_COL2IM,   /* y [nb][c][pin] <- col [nb][c][pk][pout], plus a bias */
    CU_NN_BIAS,     /* y [n][co][pout] += b[co] */
    CU_NN_GTRANS,   /* gt [co][nb][pout] <- g [nb][co][pout] */
    CU_NN_MAXPOOL,  /* y [n][c][pout] and/or the picks idx (wide position, -1: none) */
    CU_NN_MAXGRAD,  /* dx [n][c][pin] <- g, idx */
    CU_NN_MAXPICK,  /* y [n][c][pout] <- v [n][c][pin] at each window's pick of x (0: none) */
    CU_NN_AVGPOOL,  /* y [n][c][pout] */
    CU_NN_AVGGRAD,  /* dx [n][c][pin] <- g */
    CU_NN_PAD,      /* y <- x, any dtype (raw bits) */
    CU_NN_PADGRAD,  /* dx <- g: every copy added up */
    CU_NN_LINE,     /* scatter_add, argmax, argmin, cumsum: one thread per line */
    CU_NN_CHECK,    /* scatter_add's indices: the bad ones flagged */
    CU_NN_RANDOM,   /* random_uniform, dropout: element e's own draw */
    CU_NN_SEP,      /* resize, resize_grad: the separable maps' nested sum */
    CU_NN_NSTATS,   /* layer_norm, group_norm, layer_norm_grad: one thread per row */
    CU_NN_NAPPLY,   /* the norms' elements, from the rows' statistics */
    CU_NN_PPART,    /* layer_norm_params_grad: a chunk of rows' partial sums per column */
    CU_NN_PJOIN,    /* and the chunks' partials added in chunk order */
    CU_NN_BNROWS,   /* batch_norm_params_grad: one thread per leaf of an (n, c) row's sums */
    CU_NN_BNSUMS,   /* and one per channel adding its rows' */
    CU_NN_COUNT     /* (nn.cu instantiates a kernel for each id below this) */
};

/* One kernel launch: its geometry, the batch chunk and the operands. */
typedef struct cu_nnk {
    int op;
    cu_sp g;
    int64_t n0, nb;        /* the chunk of the batch this launch covers */
    bool batch_inner;      /* IM2COL: the [c][pk][nb][pout] layout */
    bool include_pad;      /* AVGPOOL, AVGGRAD: count_include_pad */
    const void *x, *b;     /* the operand (x, col, g), a bias (or NULL) */
    void *y;
    int64_t *idx;          /* MAXPOOL, MAXGRAD */
    const void *v;         /* MAXPICK: the values picked, of x's shape */
    /* pad: any rank */
    int nd, es, mode;
    int64_t pshape[TL_MAXDIM], pout[TL_MAXDIM]; /* x's shape and y's */
    int64_t plo[TL_MAXDIM], crop[TL_MAXDIM], keep[TL_MAXDIM]; /* padding before, crop before, kept */
    uint64_t value;        /* the constant's bits in the dtype */
    /* lines: x as [outer, len, inner] around the axis; scatter_add's idx
     * and src are [outer, m, inner] */
    int sub;               /* the tl_opcode */
    tl_dtype dt, idx_dt;
    int64_t outer, len, inner, m;
    const void *idx_in, *src;
    bool last, exclusive, reverse;
    /* random */
    tl_rng_key key;
    double lo, hi, q;      /* uniform's range (normal's mean and std); dropout's keep probability */
    /* resize: per spatial axis a map (result coordinate i reads source
     * coordinates midx[mstart[i] .. mstart[i+1]) with weights mw) */
    int nsp;
    int64_t sshape[2 + TL_MAXSP], sstride[2 + TL_MAXSP]; /* the result's shape, the source's strides */
    const int64_t *mstart[TL_MAXSP], *midx[TL_MAXSP];
    const double *mw[TL_MAXSP];
    /* norms: rows of len elements (group_norm: cpr channels of per); the
     * rows' statistics in stats (mean, r, m1, m2 per row) */
    const void *g2, *scale, *bias, *mean, *var;
    void *stats;
    int64_t rows, per, groups, cpr;
    double eps;
    int64_t per_item, items; /* layer_norm_params_grad: rows per chunk, chunks */
    void *part;
} cu_nnk;

/* Row-major coordinates of position p in a d-axis shape. */
TL_HD static inline void cu_unravel(int d, const int64_t *shape, int64_t p, int64_t *at)
{
    for (int ax = d - 1; ax >= 0; ax--) {
        at[ax] = p % shape[ax];
        p /= shape[ax];
    }
}

/* ---------- pooling windows ---------- */

/* The avg_pool window of narrow position o on an axis, clipped to the
 * input ([*lo, *hi)), and its size clipped to the padded input only
 * (PyTorch's divisor with count_include_pad). */
TL_HD static inline int64_t cu_avg_window(const cu_sp *g, int ax, int64_t o, int64_t *lo,
                                          int64_t *hi)
{
    int64_t start = o * g->s[ax] - g->lo[ax], end = start + g->k[ax];
    if (end > g->in[ax] + g->hi[ax])
        end = g->in[ax] + g->hi[ax];
    int64_t padded = end - start;
    *lo = start < 0 ? 0 : start;
    *hi = end > g->in[ax] ? g->in[ax] : end;
    return padded;
}

/* The avg_pool divisor of narrow position o (per-axis coordinates). */
TL_HD static inline int64_t cu_avg_count(const cu_sp *g, const int64_t *o, bool include_pad)
{
    int64_t count = 1, lo, hi;
    for (int ax = 0; ax < g->d; ax++) {
        int64_t padded = cu_avg_window(g, ax, o[ax], &lo, &hi);
        count *= include_pad ? padded : hi - lo;
    }
    return count;
}

/* The next window on an axis holding wide position i: the narrow
 * position of the next tap after *tap whose window holds i, or -1.  Down
 * from *tap = k the windows come in increasing narrow order, up from
 * *tap = -1 in decreasing order. */
TL_HD static inline int64_t cu_window_next(const cu_sp *g, int ax, int64_t i, int64_t *tap, bool up)
{
    while (up ? ++*tap < g->k[ax] : --*tap >= 0) { /* the narrow position decreases with the tap */
        int64_t at = i + g->lo[ax] - *tap * g->dil[ax];
        if (at >= 0 && at % g->s[ax] == 0 && at / g->s[ax] < g->out[ax])
            return at / g->s[ax];
    }
    return -1;
}

/* ---------- pad ---------- */

/* Where output coordinate o of an axis reads in x, or -1 for the
 * constant: cropping first (crop, keep), then padding (plo) by mode. */
TL_HD static inline int64_t cu_pad_source(int mode, int64_t o, int64_t plo, int64_t crop,
                                          int64_t keep)
{
    int64_t j = o - plo;
    if (j < 0 || j >= keep) {
        if (mode == TL_PAD_CONSTANT || keep <= 0)
            return -1;
        if (mode == TL_PAD_EDGE || keep == 1)
            j = j < 0 ? 0 : keep - 1;
        else if (mode == TL_PAD_WRAP)
            j = (j % keep + keep) % keep;
        else { /* reflect: the period 2 (keep - 1), without the edges twice */
            int64_t p = 2 * (keep - 1);
            j = (j % p + p) % p;
            j = j < keep ? j : p - j;
        }
    }
    return j + crop;
}

/* The smallest output coordinate above `after` that reads x coordinate
 * i of an axis, or -1: the copies of i in increasing order. */
TL_HD static inline int64_t cu_pad_next(int mode, int64_t i, int64_t after, int64_t out,
                                        int64_t plo, int64_t crop, int64_t keep)
{
    int64_t j = i - crop;
    if (j < 0 || j >= keep)
        return -1;
    for (int64_t o = after + 1 > 0 ? after + 1 : 0; o < out; o++) {
        if (o >= plo && o < plo + keep) { /* the kept part: i itself, once */
            if (o - plo <= j)
                return j + plo;
            o = plo + keep - 1;
        } else if (cu_pad_source(mode, o, plo, crop, keep) == i) {
            return o;
        }
    }
    return -1;
}

/* ---------- lines (scatter_add, argmax, argmin, cumsum) ---------- */

TL_HD static inline int64_t cu_line_index(const cu_nnk *k, int64_t j)
{
    return k->idx_dt == TL_I32 ? (int64_t)((const int32_t *)k->idx_in)[j]
                               : ((const int64_t *)k->idx_in)[j];
}

/* scatter_add's check: index j outside [-len, len). */
TL_HD static inline bool cu_line_bad(const cu_nnk *k, int64_t j)
{
    int64_t i = cu_line_index(k, j);
    return i < -k->len || i >= k->len;
}

/* cumsum: f32 sums kept in f64, integers in the unsigned twin (wrapping, as the
 * CPU's). */
#define CU_DEFINE_CUMSUM(T, U, SUF)                                                \
    TL_HD static inline void cu_cumsum_##SUF(const cu_nnk *k, int64_t px)          \
    {                                                                              \
        const T *x = (const T *)k->x;                                              \
        T *y = (T *)k->y;                                                          \
        int64_t step = k->reverse ? -k->inner : k->inner;                          \
        int64_t at = k->reverse ? px + (k->len - 1) * k->inner : px;               \
        U acc = (U)x[at];                                                          \
        y[at] = k->exclusive ? (T)0 : (T)acc;                                      \
        for (int64_t t = 1; t < k->len; t++) {                                     \
            at += step;                                                            \
            if (k->exclusive)                                                      \
                y[at] = (T)acc;                                                    \
            acc = (U)(acc + (U)x[at]);                                             \
            if (!k->exclusive)                                                     \
                y[at] = (T)acc;                                                    \
        }                                                                          \
    }
CU_DEFINE_CUMSUM(float, double, f) /* f32 kept in f64, as the CPU's */
CU_DEFINE_CUMSUM(double, double, d)
CU_DEFINE_CUMSUM(int32_t, uint32_t, i32)
CU_DEFINE_CUMSUM(int64_t, uint64_t, i64)

/* ---------- norms: psum.h's order, one thread per row ---------- */

/* What a norm row's sums add: x, (x - m)^2, h = g scale, h xhat. */
enum { CU_SUM_X, CU_SUM_SQ, CU_SUM_H, CU_SUM_HX };

/* psum.h's tree over n elements, walked without recursion: the leaves in
 * order (halves of (n/2) & ~7 while n > 256).  Leaf `want`'s start and
 * length; returns the number of leaves when want is past them (-1: count). */
TL_HD static inline int64_t cu_psum_leaf_at(int64_t n, int64_t want, int64_t *lo_out, int64_t *n_out)
{
    int64_t lo[64], len[64], count = 0;
    int sp = 1;
    lo[0] = 0;
    len[0] = n;
    while (sp > 0) {
        sp--;
        int64_t l = lo[sp], m = len[sp];
        if (m > 256) { /* the right half under the left, so the left comes first */
            int64_t h = (m / 2) & ~(int64_t)7;
            lo[sp] = l + h, len[sp] = m - h, sp++;
            lo[sp] = l, len[sp] = h, sp++;
            continue;
        }
        if (count == want) {
            *lo_out = l;
            *n_out = m;
            return count;
        }
        count++;
    }
    return count;
}

/* The per-element kernels and the sums of psum.h, walked without
 * recursion (a stack of halves): the CPU's tree and leaves exactly. */
#define CU_DEFINE_NORM(T, SUF)                                                     \
    /* element i of row `row`'s summand */                                         \
    TL_HD static inline T cu_norm_term_##SUF(const cu_nnk *k, int what, int64_t row, int64_t i, \
                                             T m, T r)                             \
    {                                                                              \
        T x = ((const T *)k->x)[row * k->len + i];                                 \
        if (what == CU_SUM_X)                                                      \
            return x;                                                              \
        if (what == CU_SUM_SQ) {                                                   \
            T c = x - m;                                                           \
            return c * c;                                                          \
        }                                                                          \
        const T *sc = (const T *)k->scale;                                         \
        T g = ((const T *)k->g2)[row * k->len + i], h = sc ? g * sc[i] : g;        \
        return what == CU_SUM_H ? h : h * ((x - m) / r);                           \
    }                                                                              \
    TL_HD static inline T cu_norm_leaf_##SUF(const cu_nnk *k, int what, int64_t row, int64_t lo, \
                                             int64_t n, T m, T r)                  \
    {                                                                              \
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, rest = 0;                             \
        int64_t i = 0;                                                             \
        for (; i + 8 <= n; i += 8)                                                 \
            for (int q = 0; q < 8; q++)                                            \
                acc[q] += cu_norm_term_##SUF(k, what, row, lo + i + q, m, r);      \
        for (; i < n; i++)                                                         \
            rest += cu_norm_term_##SUF(k, what, row, lo + i, m, r);                \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +                           \
               ((acc[4] + acc[5]) + (acc[6] + acc[7])) + rest;                     \
    }                                                                              \
    TL_HD static inline T cu_norm_sum_##SUF(const cu_nnk *k, int what, int64_t row, T m, T r) \
    {                                                                              \
        int64_t lo[64], n[64];                                                     \
        T a[64], ret = 0;                                                          \
        int stage[64], sp = 1;                                                     \
        bool have = false;                                                         \
        lo[0] = 0;                                                                 \
        n[0] = k->len;                                                             \
        stage[0] = 0;                                                              \
        while (sp > 0) {                                                           \
            int f = sp - 1;                                                        \
            int64_t h = (n[f] / 2) & ~(int64_t)7;                                  \
            if (have && stage[f] == 1) { /* the left half's sum: now the right */  \
                a[f] = ret;                                                        \
                stage[f] = 2;                                                      \
                have = false;                                                      \
                lo[sp] = lo[f] + h, n[sp] = n[f] - h, stage[sp++] = 0;             \
            } else if (have) { /* both halves */                                   \
                ret = a[f] + ret;                                                  \
                sp--;                                                              \
            } else if (n[f] <= 256) {                                              \
                ret = cu_norm_leaf_##SUF(k, what, row, lo[f], n[f], m, r);         \
                have = true;                                                       \
                sp--;                                                              \
            } else {                                                               \
                stage[f] = 1;                                                      \
                lo[sp] = lo[f], n[sp] = h, stage[sp++] = 0;                        \
            }                                                                      \
        }                                                                          \
        return ret;                                                                \
    }                                                                              \
    /* the same tree's sum, its leaves' sums given (v[0], v[stride], ...) */     \
    TL_HD static inline T cu_psum_join_##SUF(int64_t len, const T *v, int64_t stride) \
    {                                                                              \
        int64_t n[64], leaf = 0;                                                   \
        T a[64], ret = 0;                                                          \
        int stage[64], sp = 1;                                                     \
        bool have = false;                                                         \
        n[0] = len;                                                                \
        stage[0] = 0;                                                              \
        while (sp > 0) {                                                           \
            int f = sp - 1;                                                        \
            int64_t h = (n[f] / 2) & ~(int64_t)7;                                  \
            if (have && stage[f] == 1) {                                           \
                a[f] = ret;                                                        \
                stage[f] = 2;                                                      \
                have = false;                                                      \
                n[sp] = n[f] - h, stage[sp++] = 0;                                 \
            } else if (have) {                                                     \
                ret = a[f] + ret;                                                  \
                sp--;                                                              \
            } else if (n[f] <= 256) {                                              \
                ret = v[stride * leaf++];                                          \
                have = true;                                                       \
                sp--;                                                              \
            } else {                                                               \
                stage[f] = 1;                                                      \
                n[sp] = h, stage[sp++] = 0;                                        \
            }                                                                      \
        }                                                                          \
        return ret;                                                                \
    }                                                                              \
    /* row's mean and r = sqrt(var + eps), and for the gradient the means of   \
     * h and h xhat */                                                             \
    TL_HD static inline void cu_norm_stats_##SUF(const cu_nnk *k, int64_t row)     \
    {                                                                              \
        T *out = (T *)k->stats + 4 * row, n = (T)k->len, eps = (T)k->eps;          \
        T m = cu_norm_sum_##SUF(k, CU_SUM_X, row, 0, 1) / n;                       \
        T var = cu_norm_sum_##SUF(k, CU_SUM_SQ, row, m, 1) / n;                    \
        T r = sqrt(var + eps);                                                     \
        out[0] = m;                                                                \
        out[1] = r;                                                                \
        if (k->sub == TL_OP_LAYER_NORM_GRAD) {                                     \
            out[2] = cu_norm_sum_##SUF(k, CU_SUM_H, row, m, r) / n;                \
            out[3] = cu_norm_sum_##SUF(k, CU_SUM_HX, row, m, r) / n;               \
        }                                                                          \
    }                                                                              \
    /* batch_norm_params_grad: channel c's sums of g xhat and g over its   \
     * planes (rows are the [N*C] planes of len).  Step 1: leaf i of row      \
     * (n, c)'s two sums (psum.h's tree, k->items leaves a row), e = row *    \
     * items + i, into part [rows][items][2] */                               \
    TL_HD static inline void cu_bn_rows_##SUF(const cu_nnk *k, int64_t e)         \
    {                                                                              \
        int64_t row = e / k->items, c = row % k->groups, lo = 0, n = 0;            \
        cu_psum_leaf_at(k->len, e % k->items, &lo, &n);                            \
        T m = ((const T *)k->mean)[c], r = sqrt(((const T *)k->var)[c] + (T)k->eps); \
        T *p = (T *)k->part;                                                       \
        p[2 * e] = cu_norm_leaf_##SUF(k, CU_SUM_HX, row, lo, n, m, r);             \
        p[2 * e + 1] = cu_norm_leaf_##SUF(k, CU_SUM_H, row, lo, n, m, r);          \
    }                                                                              \
    /* step 2: channel c's rows, each its leaves joined in the tree, added in  \
     * batch order: the CPU's sums exactly */                                     \
    TL_HD static inline void cu_bn_sums_##SUF(const cu_nnk *k, int64_t c)          \
    {                                                                              \
        int64_t C = k->groups, L = k->items;                                       \
        const T *p = (const T *)k->part;                                           \
        T s0 = 0, s1 = 0;                                                          \
        for (int64_t n = 0; n < k->rows / C; n++) {                                \
            const T *q = p + 2 * L * (n * C + c);                                  \
            s0 += cu_psum_join_##SUF(k->len, q, 2);                                \
            s1 += cu_psum_join_##SUF(k->len, q + 1, 2);                            \
        }                                                                          \
        ((T *)k->y)[c] = s0;                                                       \
        ((T *)k->y)[C + c] = s1;                                                   \
    }                                                                              \
    /* element e: the CPU's formula in its order */                                \
    TL_HD static inline void cu_norm_apply_##SUF(const cu_nnk *k, int64_t e)       \
    {                                                                              \
        const T *x = (const T *)k->x, *sc = (const T *)k->scale, *bi = (const T *)k->bias; \
        T *y = (T *)k->y;                                                          \
        if (k->sub == TL_OP_BATCH_NORM_GRAD) { /* part: the params' sums [2, C] */ \
            int64_t C = k->groups, c = e / k->len % C;                             \
            const T *p = (const T *)k->part, *g = (const T *)k->g2;                \
            T M = (T)k->rows / (T)C * (T)k->len, m = ((const T *)k->mean)[c];      \
            T r = sqrt(((const T *)k->var)[c] + (T)k->eps), kk = sc[c] / r;        \
            T m1 = p[C + c] / M, m2 = p[c] / M;                                    \
            y[e] = kk * ((g[e] - m1) - (x[e] - m) / r * m2);          \
            return;                                                                \
        }                                                                          \
        if (k->sub == TL_OP_BATCH_NORM) {                                          \
            int64_t c = e / k->per % k->groups;                                    \
            T r = sqrt(((const T *)k->var)[c] + (T)k->eps);                        \
            y[e] = (x[e] - ((const T *)k->mean)[c]) / r * sc[c] + bi[c];           \
            return;                                                                \
        }                                                                          \
        int64_t row = e / k->len, i = e % k->len;                                  \
        const T *st = (const T *)k->stats + 4 * row;                               \
        T m = st[0], r = st[1];                                                    \
        if (k->sub == TL_OP_LAYER_NORM_GRAD) {                                     \
            T h = cu_norm_term_##SUF(k, CU_SUM_H, row, i, m, r), xh = (x[e] - m) / r; \
            y[e] = ((h - st[2]) - xh * st[3]) / r;                                 \
            return;                                                                \
        }                                                                          \
        if (!sc) {                                                                 \
            y[e] = (x[e] - m) / r;                                                 \
            return;                                                                \
        }                                                                          \
        int64_t c = k->sub == TL_OP_LAYER_NORM ? i : row % k->groups * k->cpr + i / k->per; \
        y[e] = bi ? (x[e] - m) / r * sc[c] + bi[c] : (x[e] - m) / r * sc[c];       \
    }

/* layer_norm_params_grad, the CPU's chunks (cpu_norm.c): element e of
 * [items, len] sums column i of its chunk's rows, row after row from 0,
 * g xhat into part[item][0][i] and g into part[item][1][i]; then each of
 * the 2 len results adds the chunks' partials in chunk order. */
#define CU_DEFINE_PARAMS(T, SUF)                                                   \
    TL_HD static inline void cu_params_part_##SUF(const cu_nnk *k, int64_t e)      \
    {                                                                              \
        int64_t n = k->len, item = e / n, i = e % n, r0 = item * k->per_item;      \
        int64_t r1 = r0 + k->per_item < k->rows ? r0 + k->per_item : k->rows;      \
        const T *x = (const T *)k->x, *g = (const T *)k->g2, *st = (const T *)k->stats; \
        T ps = 0, pb = 0;                                                          \
        for (int64_t row = r0; row < r1; row++) {                                  \
            T m = st[4 * row], r = st[4 * row + 1], gv = g[row * n + i];           \
            ps += gv * ((x[row * n + i] - m) / r);                                 \
            pb += gv;                                                              \
        }                                                                          \
        T *part = (T *)k->part + item * 2 * n;                                     \
        part[i] = ps;                                                              \
        part[n + i] = pb;                                                          \
    }                                                                              \
    TL_HD static inline void cu_params_join_##SUF(const cu_nnk *k, int64_t j)      \
    {                                                                              \
        const T *part = (const T *)k->part;                                        \
        T v = part[j];                                                             \
        for (int64_t c = 1; c < k->items; c++)                                     \
            v += part[c * 2 * k->len + j];                                         \
        ((T *)k->y)[j] = v;                                                        \
    }

CU_DEFINE_NORM(float, f)
CU_DEFINE_NORM(double, d)
CU_DEFINE_PARAMS(float, f)
CU_DEFINE_PARAMS(double, d)

/* ---------- per-element kernels ---------- */

/* One level of resize's nested sum (spatial axis L), over level NEXT. */
#define CU_SEP_LEVEL(T, SUF, L, NEXT)                                              \
    TL_HD static inline T cu_sep_l##L##_##SUF(const cu_nnk *k, const int64_t *c, int64_t off) \
    {                                                                              \
        if (L == k->nsp)                                                           \
            return ((const T *)k->x)[off];                                         \
        int64_t e0 = k->mstart[L][c[2 + L]], e1 = k->mstart[L][c[2 + L] + 1];      \
        T acc = 0;                                                                 \
        for (int64_t e = e0; e < e1; e++) {                                        \
            T t = cu_sep_l##NEXT##_##SUF(k, c, off + k->midx[L][e] * k->sstride[2 + L]); \
            t = (T)k->mw[L][e] * t;                                                \
            acc = e == e0 ? t : acc + t;                                           \
        }                                                                          \
        return acc;                                                                \
    }

#define CU_DEFINE_NN(T, SUF)                                                       \
    /* im2col: element e of the columns, in the layout's order */                  \
    TL_HD static inline void cu_im2col_##SUF(const cu_nnk *k, int64_t e)           \
    {                                                                              \
        const cu_sp *g = &k->g;                                                    \
        int64_t p = e % g->pout, r = e / g->pout, nn, c, kk;                       \
        if (k->batch_inner) { /* [c][pk][nb][pout] */                              \
            nn = r % k->nb;                                                        \
            kk = r / k->nb % g->pk;                                                \
            c = r / k->nb / g->pk;                                                 \
        } else { /* [nb][c][pk][pout] */                                           \
            kk = r % g->pk;                                                        \
            c = r / g->pk % g->c;                                                  \
            nn = r / g->pk / g->c;                                                 \
        }                                                                          \
        int64_t o[TL_MAXSP], t[TL_MAXSP], off = 0;                                 \
        cu_unravel(g->d, g->out, p, o);                                            \
        cu_unravel(g->d, g->k, kk, t);                                             \
        for (int ax = 0; ax < g->d; ax++) {                                        \
            int64_t i = o[ax] * g->s[ax] - g->lo[ax] + t[ax] * g->dil[ax];         \
            if (i < 0 || i >= g->in[ax]) {                                         \
                ((T *)k->y)[e] = 0;                                                \
                return;                                                            \
            }                                                                      \
            off = off * g->in[ax] + i;                                             \
        }                                                                          \
        ((T *)k->y)[e] = ((const T *)k->x)[((k->n0 + nn) * g->c + c) * g->pin + off]; \
    }                                                                              \
                                                                                   \
    /* col2im: wide element e of the chunk sums its taps in row-major order */     \
    TL_HD static inline void cu_col2im_##SUF(const cu_nnk *k, int64_t e)           \
    {                                                                              \
        const cu_sp *g = &k->g;                                                    \
        int64_t p = e % g->pin, c = e / g->pin % g->c, nn = e / g->pin / g->c;     \
        int64_t i[TL_MAXSP], t[TL_MAXSP];                                          \
        const T *col = (const T *)k->x + (nn * g->c + c) * g->pk * g->pout;        \
        T sum = 0;                                                                 \
        cu_unravel(g->d, g->in, p, i);                                             \
        for (int64_t kk = 0; kk < g->pk; kk++) {                                   \
            int64_t off = 0;                                                       \
            bool hit = true;                                                       \
            cu_unravel(g->d, g->k, kk, t);                                         \
            for (int ax = 0; ax < g->d && hit; ax++) {                             \
                int64_t at = i[ax] + g->lo[ax] - t[ax] * g->dil[ax];               \
                hit = at >= 0 && at % g->s[ax] == 0 && at / g->s[ax] < g->out[ax]; \
                off = off * g->out[ax] + at / g->s[ax];                            \
            }                                                                      \
            if (hit)                                                               \
                sum += col[kk * g->pout + off];                                    \
        }                                                                          \
        if (k->b)                                                                  \
            sum = sum + ((const T *)k->b)[c];                                      \
        ((T *)k->y)[(k->n0 * g->c) * g->pin + e] = sum;                            \
    }                                                                              \
                                                                                   \
    TL_HD static inline void cu_bias_##SUF(const cu_nnk *k, int64_t e)             \
    {                                                                              \
        T *y = (T *)k->y;                                                          \
        y[e] = y[e] + ((const T *)k->b)[e / k->g.pout % k->g.co];                  \
    }                                                                              \
                                                                                   \
    /* gt [co][nb][pout] <- g [n0 + nb][co][pout] */                               \
    TL_HD static inline void cu_gtrans_##SUF(const cu_nnk *k, int64_t e)           \
    {                                                                              \
        const cu_sp *g = &k->g;                                                    \
        int64_t p = e % g->pout, nn = e / g->pout % k->nb, co = e / g->pout / k->nb; \
        ((T *)k->y)[e] = ((const T *)k->x)[((k->n0 + nn) * g->co + co) * g->pout + p]; \
    }                                                                              \
                                                                                   \
    /* max_pool of narrow element e: the first maximum in row-major window         \
     * order, padding never; a NaN wins, the last of several. */                   \
    /* Window e's maximum (*best) and its wide position in the plane (-1:     \
     * an empty window): the first NaN, else the first largest. */               \
    TL_HD static inline int64_t cu_maxpick_at_##SUF(const cu_nnk *k, int64_t e, T *best_out) \
    {                                                                              \
        const cu_sp *g = &k->g;                                                    \
        int64_t p = e % g->pout, plane = e / g->pout, o[TL_MAXSP], t[TL_MAXSP];    \
        const T *x = (const T *)k->x + plane * g->pin;                             \
        T best = (T)-INFINITY;                                                     \
        int64_t pick = -1;                                                         \
        cu_unravel(g->d, g->out, p, o);                                            \
        for (int64_t kk = 0; kk < g->pk; kk++) {                                   \
            int64_t off = 0;                                                       \
            bool in = true;                                                        \
            cu_unravel(g->d, g->k, kk, t);                                         \
            for (int ax = 0; ax < g->d && in; ax++) {                              \
                int64_t i = o[ax] * g->s[ax] - g->lo[ax] + t[ax] * g->dil[ax];     \
                in = i >= 0 && i < g->in[ax];                                      \
                off = off * g->in[ax] + i;                                         \
            }                                                                      \
            if (!in)                                                               \
                continue;                                                          \
            T v = x[off];                                                          \
            if (v != v || (best == best && (pick < 0 || v > best))) {              \
                best = v;                                                          \
                pick = off;                                                        \
            }                                                                      \
        }                                                                          \
        *best_out = best;                                                          \
        return pick;                                                               \
    }                                                                              \
                                                                                   \
    TL_HD static inline void cu_maxpool_##SUF(const cu_nnk *k, int64_t e)          \
    {                                                                              \
        T best;                                                                    \
        int64_t pick = cu_maxpick_at_##SUF(k, e, &best);                           \
        if (k->y)                                                                  \
            ((T *)k->y)[e] = best;                                                 \
        if (k->idx)                                                                \
            k->idx[e] = pick;                                                      \
    }                                                                              \
                                                                                   \
    /* max_pool_pick: v at window e's pick, as cpu_pool.c (0 for none). */        \
    TL_HD static inline void cu_maxpick_##SUF(const cu_nnk *k, int64_t e)          \
    {                                                                              \
        T best;                                                                    \
        int64_t pick = cu_maxpick_at_##SUF(k, e, &best);                           \
        const T *v = (const T *)k->v + e / k->g.pout * k->g.pin;                   \
        ((T *)k->y)[e] = pick >= 0 ? v[pick] : (T)0;                               \
    }                                                                              \
                                                                                   \
    /* The windows holding wide element e, in the CPU's order (cpu_pool.c):        \
     * increasing narrow order, but for avg decreasing along the last axis (the    \
     * CPU spreads each window tap by tap); the sum of g over those that picked    \
     * it (max) or of each g / its count (avg). */                                 \
    TL_HD static inline void cu_poolgrad_##SUF(const cu_nnk *k, int64_t e, bool avg) \
    {                                                                              \
        const cu_sp *g = &k->g;                                                    \
        int64_t p = e % g->pin, plane = e / g->pin, i[TL_MAXSP];                   \
        int64_t o[TL_MAXSP], tap[TL_MAXSP];                                        \
        const T *gr = (const T *)k->x + plane * g->pout;                           \
        const int64_t *idx = avg ? NULL : k->idx + plane * g->pout;                \
        T sum = 0;                                                                 \
        int ax;                                                                    \
        cu_unravel(g->d, g->in, p, i);                                             \
        for (ax = 0; ax < g->d; ax++) {                                            \
            tap[ax] = avg && ax == g->d - 1 ? -1 : g->k[ax];                       \
            if ((o[ax] = cu_window_next(g, ax, i[ax], &tap[ax], avg && ax == g->d - 1)) < 0) \
                break;                                                             \
        }                                                                          \
        while (ax == g->d) { /* the windows, row-major over the axes */            \
            int64_t q = 0;                                                         \
            for (int a = 0; a < g->d; a++)                                         \
                q = q * g->out[a] + o[a];                                          \
            if (avg)                                                               \
                sum += gr[q] / (T)cu_avg_count(g, o, k->include_pad);              \
            else if (idx[q] == p)                                                  \
                sum += gr[q];                                                      \
            for (ax = g->d - 1; ax >= 0; ax--) {                                   \
                bool up = avg && ax == g->d - 1;                                   \
                if ((o[ax] = cu_window_next(g, ax, i[ax], &tap[ax], up)) >= 0)     \
                    break;                                                         \
                tap[ax] = up ? -1 : g->k[ax];                                      \
                o[ax] = cu_window_next(g, ax, i[ax], &tap[ax], up);                \
            }                                                                      \
            ax = ax < 0 ? -1 : g->d;                                               \
        }                                                                          \
        ((T *)k->y)[e] = sum;                                                      \
    }                                                                              \
                                                                                   \
    TL_HD static inline void cu_avgpool_##SUF(const cu_nnk *k, int64_t e)          \
    {                                                                              \
        const cu_sp *g = &k->g;                                                    \
        int64_t p = e % g->pout, plane = e / g->pout, o[TL_MAXSP];                 \
        int64_t lo[TL_MAXSP], hi[TL_MAXSP], i[TL_MAXSP];                           \
        const T *x = (const T *)k->x + plane * g->pin;                             \
        T sum = 0;                                                                 \
        cu_unravel(g->d, g->out, p, o);                                            \
        for (int ax = 0; ax < g->d; ax++) {                                        \
            cu_avg_window(g, ax, o[ax], &lo[ax], &hi[ax]);                         \
            if (lo[ax] >= hi[ax]) {                                                \
                ((T *)k->y)[e] = (T)NAN; /* no element: 0 / 0 */                   \
                return;                                                            \
            }                                                                      \
            i[ax] = lo[ax];                                                        \
        }                                                                          \
        for (;;) {                                                                 \
            int64_t off = 0;                                                       \
            for (int ax = 0; ax < g->d; ax++)                                      \
                off = off * g->in[ax] + i[ax];                                     \
            sum += x[off];                                                         \
            int ax = g->d - 1;                                                     \
            for (; ax >= 0 && ++i[ax] == hi[ax]; ax--)                             \
                i[ax] = lo[ax];                                                    \
            if (ax < 0)                                                            \
                break;                                                             \
        }                                                                          \
        ((T *)k->y)[e] = sum / (T)cu_avg_count(g, o, k->include_pad);              \
    }                                                                              \
                                                                                   \
    /* pad_grad of x element e: its copies in row-major output order, summed      \
     * nested as the CPU's separable loop does (cpu_resample.c): axis by axis,     \
     * the innermost first, each level's first term not added to a zero. */        \
    TL_HD static inline void cu_padgrad_##SUF(const cu_nnk *k, int64_t e)          \
    {                                                                              \
        int64_t i[TL_MAXDIM], o[TL_MAXDIM];                                        \
        T acc[TL_MAXDIM];                                                          \
        bool first[TL_MAXDIM];                                                     \
        const T *gr = (const T *)k->x;                                             \
        int nd = k->nd, ax;                                                        \
        cu_unravel(nd, k->pshape, e, i);                                           \
        for (ax = 0; ax < nd; ax++) {                                              \
            o[ax] = cu_pad_next(k->mode, i[ax], -1, k->pout[ax], k->plo[ax], k->crop[ax], \
                                k->keep[ax]);                                      \
            first[ax] = true;                                                      \
            acc[ax] = 0;                                                           \
            if (o[ax] < 0) {                                                       \
                ((T *)k->y)[e] = 0;                                                \
                return;                                                            \
            }                                                                      \
        }                                                                          \
        for (;;) {                                                                 \
            int64_t q = 0;                                                         \
            for (ax = 0; ax < nd; ax++)                                            \
                q = q * k->pout[ax] + o[ax];                                       \
            T t = gr[q];                                                           \
            for (ax = nd - 1;; ax--) { /* fold t in, then close finished levels */ \
                acc[ax] = first[ax] ? t : acc[ax] + t;                             \
                first[ax] = false;                                                 \
                int64_t nx = cu_pad_next(k->mode, i[ax], o[ax], k->pout[ax], k->plo[ax], \
                                         k->crop[ax], k->keep[ax]);                \
                if (nx >= 0) {                                                     \
                    o[ax] = nx;                                                    \
                    break;                                                         \
                }                                                                  \
                if (ax == 0) {                                                     \
                    ((T *)k->y)[e] = acc[0];                                       \
                    return;                                                        \
                }                                                                  \
                t = acc[ax];                                                       \
                first[ax] = true;                                                  \
                o[ax] = cu_pad_next(k->mode, i[ax], -1, k->pout[ax], k->plo[ax],   \
                                    k->crop[ax], k->keep[ax]);                     \
            }                                                                      \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* Line p = (o, k) of scatter_add, argmax, argmin or a float cumsum,           \
     * walked in index order by one thread: the CPU's order exactly. */            \
    TL_HD static inline void cu_line_##SUF(const cu_nnk *k, int64_t p)             \
    {                                                                              \
        int64_t o = p / k->inner, c = p % k->inner;                                \
        int64_t px = o * k->len * k->inner + c, pi = o * k->m * k->inner + c;      \
        const T *x = (const T *)k->x;                                              \
        if (k->sub == TL_OP_CUMSUM) {                                              \
            cu_cumsum_##SUF(k, px);                                                \
        } else if (k->sub == TL_OP_SCATTER_ADD) { /* y = x, then the adds */       \
            T *y = (T *)k->y;                                                      \
            const T *src = (const T *)k->src;                                      \
            for (int64_t t = 0; t < k->len; t++)                                   \
                y[px + t * k->inner] = x[px + t * k->inner];                       \
            for (int64_t t = 0; t < k->m; t++) {                                   \
                int64_t at = pi + t * k->inner, i = cu_line_index(k, at);          \
                if (i >= -k->len && i < k->len)                                    \
                    y[px + (i < 0 ? i + k->len : i) * k->inner] += src[at];        \
            }                                                                      \
        } else { /* the first (or last) extreme; a NaN beats every number */       \
            bool lower = k->sub == TL_OP_ARGMIN;                                   \
            T best = x[px];                                                        \
            int64_t bi = 0;                                                        \
            for (int64_t t = 1; t < k->len; t++) {                                 \
                T v = x[px + t * k->inner];                                        \
                bool beats = lower ? v < best : v > best;                          \
                bool win = best != best ? k->last && v != v                        \
                                        : v != v || beats || (k->last && v == best); \
                if (win) {                                                         \
                    best = v;                                                      \
                    bi = t;                                                        \
                }                                                                  \
            }                                                                      \
            ((int64_t *)k->y)[p] = bi;                                             \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* random_uniform, random_normal and dropout: element e's Philox block      \
     * (backends/philox.h), the CPU's formula. */                                  \
    TL_HD static inline void cu_random_##SUF(const cu_nnk *k, int64_t e)           \
    {                                                                              \
        uint32_t w[4];                                                             \
        tl_rng_block(&k->key, (uint64_t)e, w);                                     \
        if (k->sub == TL_OP_RANDOM_UNIFORM) {                                      \
            ((T *)k->y)[e] = tl_rng_uniform_##SUF(w, (T)k->lo, (T)k->hi);          \
        } else if (k->sub == TL_OP_RANDOM_NORMAL) {                                \
            ((T *)k->y)[e] = (T)k->lo + (T)k->hi * (T)tl_rng_normal(w);            \
        } else {                                                                   \
            T q = (T)k->q, s = (T)1 / q;                                           \
            ((T *)k->y)[e] = ((const T *)k->x)[e] * (tl_rng_unit_##SUF(w) < q ? s : (T)0); \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* resize: the nested sum of the CPU's separable loop (cpu_resample.c),     \
     * spatial axis L at level L: each term weighted (the weight rounded to T),    \
     * the first term of a level not added to a zero, an empty level 0. */        \
    TL_HD static inline T cu_sep_l3_##SUF(const cu_nnk *k, const int64_t *c, int64_t off) \
    {                                                                              \
        (void)c;                                                                   \
        return ((const T *)k->x)[off];                                             \
    }                                                                              \
    CU_SEP_LEVEL(T, SUF, 2, 3)                                                     \
    CU_SEP_LEVEL(T, SUF, 1, 2)                                                     \
    CU_SEP_LEVEL(T, SUF, 0, 1)                                                     \
    TL_HD static inline void cu_sep_##SUF(const cu_nnk *k, int64_t e)              \
    {                                                                              \
        int64_t c[2 + TL_MAXSP];                                                   \
        cu_unravel(2 + k->nsp, k->sshape, e, c);                                   \
        ((T *)k->y)[e] = cu_sep_l0_##SUF(k, c, c[0] * k->sstride[0] + c[1] * k->sstride[1]); \
    }                                                                              \
                                                                                   \
    /* Element e of kernel op (a constant op folds the switch away). */           \
    TL_HD static inline void cu_nn_element_##SUF(const cu_nnk *k, int op, int64_t e) \
    {                                                                              \
        switch (op) {                                                              \
        case CU_NN_IM2COL: cu_im2col_##SUF(k, e); break;                           \
        case CU_NN_COL2IM: cu_col2im_##SUF(k, e); break;                           \
        case CU_NN_BIAS: cu_bias_##SUF(k, e); break;                               \
        case CU_NN_GTRANS: cu_gtrans_##SUF(k, e); break;                           \
        case CU_NN_MAXPOOL: cu_maxpool_##SUF(k, e); break;                         \
        case CU_NN_MAXGRAD: cu_poolgrad_##SUF(k, e, false); break;                 \
        case CU_NN_MAXPICK: cu_maxpick_##SUF(k, e); break;                         \
        case CU_NN_AVGPOOL: cu_avgpool_##SUF(k, e); break;                         \
        case CU_NN_AVGGRAD: cu_poolgrad_##SUF(k, e, true); break;                  \
        case CU_NN_PAD: cu_pad_element(k, e); break;                               \
        case CU_NN_PADGRAD: cu_padgrad_##SUF(k, e); break;                         \
        case CU_NN_RANDOM: cu_random_##SUF(k, e); break;                           \
        case CU_NN_SEP: cu_sep_##SUF(k, e); break;                                 \
        case CU_NN_NSTATS: cu_norm_stats_##SUF(k, e); break;                       \
        case CU_NN_NAPPLY: cu_norm_apply_##SUF(k, e); break;                       \
        case CU_NN_PPART: cu_params_part_##SUF(k, e); break;                       \
        case CU_NN_PJOIN: cu_params_join_##SUF(k, e); break;                       \
        case CU_NN_BNROWS: cu_bn_rows_##SUF(k, e); break;                          \
        case CU_NN_BNSUMS: cu_bn_sums_##SUF(k, e); break;                          \
        case CU_NN_LINE:                                                           \
            if (k->dt == TL_I32 || k->dt == TL_I64) {                              \
                int64_t o_ = e / k->inner, px_ = o_ * k->len * k->inner + e % k->inner; \
                k->dt == TL_I32 ? cu_cumsum_i32(k, px_) : cu_cumsum_i64(k, px_);  \
            } else {                                                               \
                cu_line_##SUF(k, e);                                               \
            }                                                                      \
            break;                                                                 \
        default: break;                                                            \
        }                                                                          \
    }

/* pad: output element e, raw bits (any dtype). */
TL_HD static inline void cu_pad_element(const cu_nnk *k, int64_t e)
{
    int64_t o[TL_MAXDIM], off = 0;
    cu_unravel(k->nd, k->pout, e, o);
    for (int ax = 0; ax < k->nd; ax++) {
        int64_t i = cu_pad_source(k->mode, o[ax], k->plo[ax], k->crop[ax], k->keep[ax]);
        if (i < 0) {
            if (k->es == 4)
                ((uint32_t *)k->y)[e] = (uint32_t)k->value;
            else
                ((uint64_t *)k->y)[e] = k->value;
            return;
        }
        off = off * k->pshape[ax] + i;
    }
    cu_move(k->es, k->y, e, k->x, off);
}

CU_DEFINE_NN(float, f)
CU_DEFINE_NN(double, d)

/* ---------- the drivers (host side) ---------- */

/* A column-major gemm call as cuBLAS's strided-batched gemm takes it:
 * C = op(A) op(B) (+ C when accumulate), count times at the strides. */
typedef struct cu_gemm {
    bool ta, tb, accumulate;
    int64_t m, n, k, lda, ldb, ldc, sa, sb, sc, count;
    const void *a, *b;
    void *c;
} cu_gemm;

/* What the drivers run on: the device (nn.cu) or the host twin. */
typedef struct cu_nn_dev {
    void *ctx;
    tl_code (*launch)(void *ctx, tl_dtype dt, const cu_nnk *k, int64_t n, tl_status *st);
    tl_code (*gemm)(void *ctx, tl_dtype dt, const cu_gemm *g, tl_status *st);
    void *(*alloc)(void *ctx, size_t bytes, tl_status *st); /* NULL: failed, st says why */
    void (*release)(void *ctx, void *p);
    tl_code (*zero)(void *ctx, void *p, size_t bytes, tl_status *st);
    tl_code (*copy)(void *ctx, void *dst, const void *src, size_t bytes, tl_status *st);
    /* host bytes to device memory, in stream order (src reusable at once) */
    tl_code (*put)(void *ctx, void *dst, const void *src, size_t bytes, tl_status *st);
    /* CU_NN_CHECK over the n indices of idx: the first bad position (-1:
     * none) and its value (a host sync on the device) */
    tl_code (*first_bad)(void *ctx, const cu_nnk *k, const tl_tensor *idx, int64_t *bad,
                         int64_t *value, tl_status *st);
    int64_t cap; /* bytes of columns per chunk of images (CU_NN_SCRATCH) */
} cu_nn_dev;

/* Scratch for columns, per chunk of the batch (at least one image). */
#define CU_NN_SCRATCH ((int64_t)256 << 20)

static inline void cu_sp_init(cu_sp *g, const tl_attrs *a, int64_t n, int64_t c, int64_t co,
                              const int64_t *wide, const int64_t *narrow, const int64_t *kernel)
{
    memset(g, 0, sizeof *g);
    g->d = a->nsp;
    g->n = n;
    g->c = c;
    g->co = co;
    g->groups = a->groups > 0 ? a->groups : 1;
    g->pin = g->pout = g->pk = 1;
    for (int ax = 0; ax < g->d; ax++) {
        g->in[ax] = wide[ax];
        g->out[ax] = narrow[ax];
        g->k[ax] = kernel[ax];
        g->s[ax] = a->stride[ax] > 0 ? a->stride[ax] : 1;
        g->dil[ax] = a->dilation[ax] > 0 ? a->dilation[ax] : 1;
        g->lo[ax] = a->pad_lo[ax];
        g->hi[ax] = a->pad_hi[ax];
        g->pin *= wide[ax];
        g->pout *= narrow[ax];
        g->pk *= kernel[ax];
    }
}

static inline void cu_nnk_init(cu_nnk *k, int op, const cu_sp *g)
{
    memset(k, 0, sizeof *k);
    k->op = op;
    k->g = *g;
    k->nb = g->n;
}

/* Images per chunk: columns of `per_image` elements within the scratch. */
static inline int64_t cu_nn_chunk(const cu_nn_dev *dev, int64_t n, int64_t per_image, size_t es)
{
    int64_t bytes = per_image * (int64_t)es, nb = bytes > 0 ? dev->cap / bytes : n;
    return nb < 1 ? 1 : nb > n ? n : nb;
}

static inline bool cu_gemm_fits(const cu_gemm *g)
{
    const int64_t big = 2147483647;
    return g->m <= big && g->n <= big && g->k <= big && g->lda <= big && g->ldb <= big &&
           g->ldc <= big && g->count <= big;
}

static inline tl_code cu_nn_gemm(const cu_nn_dev *dev, tl_dtype dt, const cu_gemm *g,
                                 tl_status *st)
{
    if (!cu_gemm_fits(g))
        return tl_fail(st, TL_ERUNTIME, "convolution: a size beyond cuBLAS's 32-bit int (m %lld, n %lld, k %lld)",
                       (long long)g->m, (long long)g->n, (long long)g->k);
    return g->count ? dev->gemm(dev->ctx, dt, g, st) : TL_OK;
}

#define CU_AT(p, off) ((void *)((char *)(p) + (size_t)(off) * es))

/* conv(x, w, b): per chunk of images, im2col (none for a 1x1 convolution
 * of stride 1 without padding, whose columns are x itself), then
 * Y_g = W_g col_g per group, batched over the images (or over the groups,
 * when there are more of them); then the bias. */
static inline tl_code cu_conv_run(const cu_nn_dev *dev, int n, const tl_tensor *const *in,
                                  const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = in[0], *w = in[1], *b = n > 2 ? in[2] : NULL;
    size_t es = tl_dtype_size(out->dtype);
    cu_sp g;
    cu_sp_init(&g, a, x->shape[0], x->shape[1], out->shape[1], x->shape + 2, out->shape + 2,
               w->shape + 2);
    int64_t G = g.groups, cin_g = g.c / G, cout_g = g.co / G, R = cin_g * g.pk, P = g.pout;
    if (R == 0)
        return dev->zero(dev->ctx, out->data, tl_tensor_bytes(out), st);
    bool direct = g.pk == 1;
    for (int ax = 0; ax < g.d; ax++)
        direct = direct && g.s[ax] == 1 && g.lo[ax] == 0 && g.hi[ax] == 0;
    int64_t per = g.c * g.pk * P, nb = direct ? g.n : cu_nn_chunk(dev, g.n, per, es);
    void *col = direct ? NULL : dev->alloc(dev->ctx, (size_t)(nb * per) * es, st);
    if (!direct && !col)
        return st->code;
    tl_code rc = TL_OK;
    for (int64_t n0 = 0; n0 < g.n && !rc; n0 += nb) {
        int64_t cb = g.n - n0 < nb ? g.n - n0 : nb;
        const void *cols = direct ? CU_AT(x->data, n0 * per) : col;
        if (!direct) {
            cu_nnk k;
            cu_nnk_init(&k, CU_NN_IM2COL, &g);
            k.n0 = n0;
            k.nb = cb;
            k.x = x->data;
            k.y = col;
            if ((rc = dev->launch(dev->ctx, out->dtype, &k, cb * per, st)))
                break;
        }
        cu_gemm m;
        memset(&m, 0, sizeof m);
        m.m = P;
        m.n = cout_g;
        m.k = R;
        m.lda = P;
        m.ldb = R;
        m.ldc = P;
        if (G <= cb) { /* one call per group, batched over the chunk's images */
            m.sa = per;
            m.sb = 0;
            m.sc = g.co * P;
            m.count = cb;
            for (int64_t gi = 0; gi < G && !rc; gi++) {
                m.a = CU_AT(cols, gi * R * P);
                m.b = CU_AT(w->data, gi * cout_g * R);
                m.c = CU_AT(out->data, (n0 * g.co + gi * cout_g) * P);
                rc = cu_nn_gemm(dev, out->dtype, &m, st);
            }
        } else { /* one call per image, batched over the groups */
            m.sa = R * P;
            m.sb = cout_g * R;
            m.sc = cout_g * P;
            m.count = G;
            for (int64_t nn = 0; nn < cb && !rc; nn++) {
                m.a = CU_AT(cols, nn * per);
                m.b = w->data;
                m.c = CU_AT(out->data, (n0 + nn) * g.co * P);
                rc = cu_nn_gemm(dev, out->dtype, &m, st);
            }
        }
    }
    dev->release(dev->ctx, col);
    if (!rc && b) {
        cu_nnk k;
        cu_nnk_init(&k, CU_NN_BIAS, &g);
        k.b = b->data;
        k.y = out->data;
        rc = dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    }
    return rc;
}

/* conv_transpose(x, w, b): per chunk of images, the columns
 * col_g = W_g^T X_g (one call per group, batched over the images), then
 * col2im, which adds the bias. */
static inline tl_code cu_conv_transpose_run(const cu_nn_dev *dev, int n, const tl_tensor *const *in,
                                            const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = in[0], *w = in[1], *b = n > 2 ? in[2] : NULL;
    size_t es = tl_dtype_size(out->dtype);
    cu_sp g; /* the wide side is the result, the narrow one x */
    cu_sp_init(&g, a, x->shape[0], out->shape[1], x->shape[1], out->shape + 2, x->shape + 2,
               w->shape + 2);
    int64_t G = g.groups, cin_g = g.co / G, cout_g = g.c / G, M = cout_g * g.pk, P = g.pout;
    int64_t per = g.c * g.pk * P, nb = cu_nn_chunk(dev, g.n, per, es);
    void *col = dev->alloc(dev->ctx, (size_t)(nb * per) * es, st);
    if (!col)
        return st->code;
    tl_code rc = TL_OK;
    for (int64_t n0 = 0; n0 < g.n && !rc; n0 += nb) {
        int64_t cb = g.n - n0 < nb ? g.n - n0 : nb;
        if (cin_g == 0 || P == 0) {
            rc = dev->zero(dev->ctx, col, (size_t)(cb * per) * es, st);
        } else {
            cu_gemm m;
            memset(&m, 0, sizeof m);
            m.tb = true;
            m.m = P;
            m.n = M;
            m.k = cin_g;
            m.lda = P;
            m.ldb = M;
            m.ldc = P;
            m.sa = g.co * P;
            m.sb = 0;
            m.sc = per;
            m.count = cb;
            for (int64_t gi = 0; gi < G && !rc; gi++) {
                m.a = CU_AT(x->data, (n0 * g.co + gi * cin_g) * P);
                m.b = CU_AT(w->data, gi * cin_g * M);
                m.c = CU_AT(col, gi * M * P);
                rc = cu_nn_gemm(dev, out->dtype, &m, st);
            }
        }
        cu_nnk k;
        cu_nnk_init(&k, CU_NN_COL2IM, &g);
        k.n0 = n0;
        k.nb = cb;
        k.x = col;
        k.b = b ? b->data : NULL;
        k.y = out->data;
        if (!rc)
            rc = dev->launch(dev->ctx, out->dtype, &k, cb * g.c * g.pin, st);
    }
    dev->release(dev->ctx, col);
    return rc;
}

/* conv_grad_w(x, g) -> w's shape: per chunk of images, x's columns and
 * g batch-inner ([c][pk][nb][pout], [co][nb][pout]), then
 * dW_g (+)= G_g col_g^T over the chunk's positions, one call batched over
 * the groups; chunks after the first accumulate. */
static inline tl_code cu_conv_grad_w_run(const cu_nn_dev *dev, const tl_tensor *const *in,
                                         const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = in[0], *gr = in[1];
    size_t es = tl_dtype_size(out->dtype);
    cu_sp g;
    cu_sp_init(&g, a, x->shape[0], x->shape[1], gr->shape[1], x->shape + 2, gr->shape + 2,
               out->shape + 2);
    int64_t G = g.groups, cin_g = g.c / G, cout_g = g.co / G, R = cin_g * g.pk, P = g.pout;
    if (g.n * P == 0)
        return dev->zero(dev->ctx, out->data, tl_tensor_bytes(out), st);
    int64_t per = (g.c * g.pk + g.co) * P, nb = cu_nn_chunk(dev, g.n, per, es);
    void *col = dev->alloc(dev->ctx, (size_t)(nb * per) * es, st);
    if (!col)
        return st->code;
    tl_code rc = TL_OK;
    for (int64_t n0 = 0; n0 < g.n && !rc; n0 += nb) {
        int64_t cb = g.n - n0 < nb ? g.n - n0 : nb, Q = cb * P;
        void *gt = CU_AT(col, g.c * g.pk * Q);
        cu_nnk k;
        cu_nnk_init(&k, CU_NN_IM2COL, &g);
        k.n0 = n0;
        k.nb = cb;
        k.batch_inner = true;
        k.x = x->data;
        k.y = col;
        rc = dev->launch(dev->ctx, out->dtype, &k, g.c * g.pk * Q, st);
        k.op = CU_NN_GTRANS;
        k.x = gr->data;
        k.y = gt;
        if (!rc)
            rc = dev->launch(dev->ctx, out->dtype, &k, g.co * Q, st);
        cu_gemm m;
        memset(&m, 0, sizeof m);
        m.ta = true;
        m.accumulate = n0 > 0;
        m.m = R;
        m.n = cout_g;
        m.k = Q;
        m.lda = Q;
        m.ldb = Q;
        m.ldc = R;
        m.sa = R * Q;
        m.sb = cout_g * Q;
        m.sc = cout_g * R;
        m.count = G;
        m.a = col;
        m.b = gt;
        m.c = out->data;
        if (!rc)
            rc = cu_nn_gemm(dev, out->dtype, &m, st);
    }
    dev->release(dev->ctx, col);
    return rc;
}

/* Pools: max_pool, avg_pool and their gradients.  max_pool_grad(x, g)
 * first finds every window's pick, then each input element sums the g of
 * the windows that picked it; max_pool_pick(x, v) (its adjoint) reads v at
 * each window's pick. */
static inline tl_code cu_pool_run(const cu_nn_dev *dev, tl_opcode op, const tl_tensor *const *in,
                                  const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = op == TL_OP_AVG_POOL_GRAD ? out : in[0];
    const tl_tensor *y = op == TL_OP_MAX_POOL || op == TL_OP_AVG_POOL || op == TL_OP_MAX_POOL_PICK
                             ? out
                             : in[op == TL_OP_MAX_POOL_GRAD];
    cu_sp g;
    cu_sp_init(&g, a, x->shape[0], x->shape[1], x->shape[1], x->shape + 2, y->shape + 2, a->kernel);
    for (int ax = 0; ax < g.d; ax++)
        if (op == TL_OP_AVG_POOL || op == TL_OP_AVG_POOL_GRAD)
            g.dil[ax] = 1;
    cu_nnk k;
    cu_nnk_init(&k, 0, &g);
    k.include_pad = a->count_include_pad;
    k.y = out->data;
    if (out->numel == 0)
        return TL_OK;
    switch (op) {
    case TL_OP_MAX_POOL:
        k.op = CU_NN_MAXPOOL;
        k.x = x->data;
        return dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    case TL_OP_AVG_POOL:
        k.op = CU_NN_AVGPOOL;
        k.x = x->data;
        return dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    case TL_OP_AVG_POOL_GRAD:
        k.op = CU_NN_AVGGRAD;
        k.x = in[0]->data;
        return dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    case TL_OP_MAX_POOL_PICK:
        k.op = CU_NN_MAXPICK;
        k.x = x->data;
        k.v = in[1]->data;
        return dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    default: break;
    }
    if (y->numel == 0)
        return dev->zero(dev->ctx, out->data, tl_tensor_bytes(out), st);
    int64_t *idx = (int64_t *)dev->alloc(dev->ctx, sizeof(int64_t) * (size_t)y->numel, st);
    if (!idx)
        return st->code;
    k.op = CU_NN_MAXPOOL;
    k.x = x->data;
    k.y = NULL;
    k.idx = idx;
    tl_code rc = dev->launch(dev->ctx, out->dtype, &k, y->numel, st);
    k.op = CU_NN_MAXGRAD;
    k.x = y->data;
    k.y = out->data;
    if (!rc)
        rc = dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    dev->release(dev->ctx, idx);
    return rc;
}

/* pad(x) and pad_grad(g) -> attrs.shape: the geometry of each axis. */
static inline void cu_pad_prepare(cu_nnk *k, const tl_tensor *x, const tl_tensor *y,
                                  const tl_attrs *a)
{
    memset(k, 0, sizeof *k);
    k->nd = x->ndim;
    k->es = (int)tl_dtype_size(x->dtype);
    k->mode = a->mode;
    for (int ax = 0; ax < x->ndim; ax++) {
        int64_t lo = a->pads[2 * ax], hi = a->pads[2 * ax + 1];
        k->pshape[ax] = x->shape[ax];
        k->pout[ax] = y->shape[ax];
        k->plo[ax] = lo > 0 ? lo : 0;
        k->crop[ax] = lo < 0 ? -lo : 0;
        k->keep[ax] = x->shape[ax] - k->crop[ax] - (hi < 0 ? -hi : 0);
    }
    double v = a->value;
    float f = (float)v;
    int32_t i32 = (int32_t)v;
    int64_t i64 = (int64_t)v;
    switch (x->dtype) {
    case TL_F32: memcpy(&k->value, &f, sizeof f); break;
    case TL_F64: memcpy(&k->value, &v, sizeof v); break;
    case TL_I32: memcpy(&k->value, &i32, sizeof i32); break;
    default: memcpy(&k->value, &i64, sizeof i64); break;
    }
}

static inline tl_code cu_pad_run(const cu_nn_dev *dev, tl_opcode op, const tl_tensor *x,
                                 const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    cu_nnk k;
    if (op == TL_OP_PAD)
        cu_pad_prepare(&k, x, out, a);
    else
        cu_pad_prepare(&k, out, x, a);
    k.op = op == TL_OP_PAD ? CU_NN_PAD : CU_NN_PADGRAD;
    k.x = x->data;
    k.y = out->data;
    return out->numel ? dev->launch(dev->ctx, out->dtype, &k, out->numel, st) : TL_OK;
}

/* scatter_add, argmax, argmin, cumsum: one thread per line, walking it in
 * index order as the CPU does (cpu_scatter.c), so the results are the
 * CPU's bits.  scatter_add's indices are checked first. */
static inline tl_code cu_lines_run(const cu_nn_dev *dev, tl_opcode op, const tl_tensor *const *in,
                                   const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = in[0];
    int ax = (int)a->axis;
    cu_nnk k;
    memset(&k, 0, sizeof k);
    k.op = CU_NN_LINE;
    k.sub = (int)op;
    k.dt = x->dtype;
    k.outer = k.inner = 1;
    for (int d = 0; d < ax; d++)
        k.outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        k.inner *= x->shape[d];
    k.len = x->shape[ax];
    k.last = a->select_last;
    k.exclusive = a->exclusive;
    k.reverse = a->reverse;
    k.x = x->data;
    k.y = out->data;
    if (op == TL_OP_SCATTER_ADD) {
        const tl_tensor *idx = in[1];
        int64_t bad = -1, value = 0;
        k.idx_in = idx->data;
        k.idx_dt = idx->dtype;
        k.m = idx->shape[ax];
        k.src = in[2]->data;
        k.op = CU_NN_CHECK;
        if (idx->numel && dev->first_bad(dev->ctx, &k, idx, &bad, &value, st))
            return st->code;
        if (bad >= 0)
            return cu_index_error(st, op, a, x, idx, bad, value);
        k.op = CU_NN_LINE;
    }
    int64_t npos = k.outer * k.inner;
    if (out->numel == 0 || npos == 0 || k.len == 0)
        return TL_OK;
    return dev->launch(dev->ctx, x->dtype, &k, npos, st);
}

/* random_uniform, random_normal and dropout: element e's draw from the
 * node's key, the CPU's bits (random_normal's log and cos are tl's own
 * formulas, the same on both). */
static inline tl_code cu_random_run(const cu_nn_dev *dev, tl_opcode op, const tl_tensor *const *in,
                                    const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    if (op == TL_OP_DROPOUT && a->training == 0)
        return dev->copy(dev->ctx, out->data, in[0]->data, tl_tensor_bytes(out), st);
    cu_nnk k;
    memset(&k, 0, sizeof k);
    k.op = CU_NN_RANDOM;
    k.sub = (int)op;
    k.key = tl_rng_key_make(a->seed, a->rng_node, a->rng_step);
    k.lo = op == TL_OP_RANDOM_NORMAL ? a->mean : a->low;
    k.hi = op == TL_OP_RANDOM_NORMAL ? a->std : a->high;
    k.q = 1.0 - a->p;
    k.x = op == TL_OP_DROPOUT ? in[0]->data : NULL;
    k.y = out->data;
    return dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
}

/* ---- resize's maps: the CPU's construction (cpu_resample.c), step for
 * step, so that the device reads the CPU's indices and weights ---- */

typedef struct cu_rmap {
    int64_t n, entries;
    int64_t *start, *idx;
    double *w;
} cu_rmap;

static inline void cu_rmap_free(cu_rmap *m)
{
    free(m->start);
    free(m->idx);
    free(m->w);
    memset(m, 0, sizeof *m);
}

static inline bool cu_rmap_alloc(cu_rmap *m, int64_t n, int64_t entries)
{
    m->n = n;
    m->entries = entries;
    m->start = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
    m->idx = (int64_t *)malloc(sizeof(int64_t) * (size_t)(entries ? entries : 1));
    m->w = (double *)malloc(sizeof(double) * (size_t)(entries ? entries : 1));
    if (m->start && m->idx && m->w)
        return true;
    cu_rmap_free(m);
    return false;
}

static inline double cu_resize_coord(int coord, int64_t o, int64_t in, int64_t out, double s)
{
    switch (coord) {
    case TL_COORD_HALF_PIXEL: return ((double)o + 0.5) / s - 0.5;
    case TL_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
    case TL_COORD_ALIGN_CORNERS: return out == 1 ? 0 : (double)o * (double)(in - 1) / (double)(out - 1);
    default: return (double)o / s; /* asymmetric */
    }
}

static inline int64_t cu_resize_clamp(int64_t i, int64_t in) { return i < 0 ? 0 : i >= in ? in - 1 : i; }

static inline int64_t cu_resize_nearest(int rounding, double x)
{
    double f = floor(x), r = x - f;
    bool up;
    switch (rounding) {
    case TL_NEAREST_ROUND_PREFER_FLOOR: up = r > 0.5; break;
    case TL_NEAREST_ROUND_PREFER_CEIL: up = r >= 0.5; break;
    case TL_NEAREST_FLOOR: up = false; break;
    default: up = r > 0; break;
    }
    return (int64_t)f + up;
}

static inline bool cu_resize_map(const tl_attrs *a, int64_t in, int64_t out, double s, cu_rmap *m)
{
    int taps = a->mode == TL_RESIZE_NEAREST ? 1 : a->mode == TL_RESIZE_LINEAR ? 2 : 4;
    if (!cu_rmap_alloc(m, out, out * taps))
        return false;
    double A = a->cubic_coeff;
    for (int64_t o = 0; o < out; o++) {
        double x = cu_resize_coord(a->coord, o, in, out, s), w[4] = {1, 0, 0, 0};
        int64_t *idx = m->idx + o * taps;
        m->start[o] = o * taps;
        if (taps == 1) {
            idx[0] = cu_resize_clamp(cu_resize_nearest(a->nearest, x), in);
            m->w[o] = 1;
            continue;
        }
        double f = floor(x), t = x - f;
        if (t == 0) {
            f -= 1;
            t = 1;
        }
        int64_t i0 = (int64_t)f;
        if (taps == 2) {
            w[0] = 1 - t;
            w[1] = t;
            idx[0] = cu_resize_clamp(i0, in);
            idx[1] = cu_resize_clamp(i0 + 1, in);
        } else {
            double u = 1 - t;
            w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
            w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
            w[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
            w[3] = ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A;
            for (int q = 0; q < 4; q++)
                idx[q] = cu_resize_clamp(i0 - 1 + q, in);
        }
        memcpy(m->w + o * taps, w, sizeof(double) * (size_t)taps);
    }
    m->start[out] = out * taps;
    return true;
}

/* For each source coordinate the result coordinates that read it, in
 * increasing order (resize_grad). */
static inline bool cu_rmap_transpose(const cu_rmap *f, int64_t nsrc, cu_rmap *t)
{
    int64_t entries = f->start[f->n];
    if (!cu_rmap_alloc(t, nsrc, entries))
        return false;
    memset(t->start, 0, sizeof *t->start * (size_t)(nsrc + 1));
    for (int64_t e = 0; e < entries; e++)
        t->start[f->idx[e] + 1]++;
    for (int64_t q = 0; q < nsrc; q++)
        t->start[q + 1] += t->start[q];
    int64_t *at = (int64_t *)malloc(sizeof *at * (size_t)(nsrc + 1));
    if (!at) {
        cu_rmap_free(t);
        return false;
    }
    memcpy(at, t->start, sizeof *at * (size_t)nsrc);
    for (int64_t i = 0; i < f->n; i++)
        for (int64_t e = f->start[i]; e < f->start[i + 1]; e++) {
            int64_t q = f->idx[e];
            t->idx[at[q]] = i;
            t->w[at[q]] = f->w[e];
            at[q]++;
        }
    free(at);
    return true;
}

/* resize (x -> out) and resize_grad (g -> out, x's shape): the maps built
 * here, put on the device in one buffer, then one thread per result
 * element. */
static inline tl_code cu_resize_run(const cu_nn_dev *dev, tl_opcode op, const tl_tensor *src,
                                    const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const int64_t *xs = op == TL_OP_RESIZE ? src->shape : out->shape;
    cu_rmap fwd[TL_MAXSP], back[TL_MAXSP];
    const cu_rmap *maps[TL_MAXSP];
    memset(fwd, 0, sizeof fwd);
    memset(back, 0, sizeof back);
    bool ok = true;
    size_t bytes = 0;
    for (int q = 0; ok && q < a->nsp; q++) {
        int64_t in = xs[2 + q], o = a->size[q];
        double sc = a->nscale ? a->scale[q] : (double)o / (double)in;
        ok = cu_resize_map(a, in, o, sc, &fwd[q]);
        if (ok && op == TL_OP_RESIZE_GRAD)
            ok = cu_rmap_transpose(&fwd[q], in, &back[q]);
        maps[q] = op == TL_OP_RESIZE ? &fwd[q] : &back[q];
        if (ok)
            bytes += sizeof(int64_t) * (size_t)(maps[q]->n + 1 + 2 * maps[q]->entries);
    }
    tl_code rc = ok ? TL_OK : tl_fail(st, TL_ERUNTIME, "out of memory building resize's maps");
    char *host = ok ? (char *)malloc(bytes ? bytes : 1) : NULL;
    char *buf = ok && host ? (char *)dev->alloc(dev->ctx, bytes ? bytes : 1, st) : NULL;
    if (ok && !host)
        rc = tl_fail(st, TL_ERUNTIME, "out of memory building resize's maps");
    else if (ok && !buf)
        rc = st->code;
    cu_nnk k;
    memset(&k, 0, sizeof k);
    if (!rc) {
        size_t at = 0;
        for (int q = 0; q < a->nsp; q++) { /* start, idx, then the weights (8 bytes each) */
            const cu_rmap *m = maps[q];
            size_t ns = sizeof(int64_t) * (size_t)(m->n + 1), ne = sizeof(int64_t) * (size_t)m->entries;
            memcpy(host + at, m->start, ns);
            k.mstart[q] = (const int64_t *)(buf + at);
            at += ns;
            memcpy(host + at, m->idx, ne);
            k.midx[q] = (const int64_t *)(buf + at);
            at += ne;
            memcpy(host + at, m->w, ne);
            k.mw[q] = (const double *)(buf + at);
            at += ne;
        }
        rc = dev->put(dev->ctx, buf, host, bytes, st);
    }
    if (!rc) {
        int64_t ss[2 + TL_MAXSP];
        k.op = CU_NN_SEP;
        k.nsp = a->nsp;
        k.x = src->data;
        k.y = out->data;
        cpu_strides(src->ndim, src->shape, ss);
        for (int d = 0; d < out->ndim; d++) {
            k.sshape[d] = out->shape[d];
            k.sstride[d] = ss[d];
        }
        rc = dev->launch(dev->ctx, out->dtype, &k, out->numel, st);
    }
    dev->release(dev->ctx, buf);
    free(host);
    for (int q = 0; q < a->nsp; q++) {
        cu_rmap_free(&fwd[q]);
        cu_rmap_free(&back[q]);
    }
    return rc;
}

/* batch_norm (inference: elementwise), layer_norm, group_norm,
 * layer_norm_grad and layer_norm_params_grad: a row's statistics by one
 * thread in psum.h's order, then one thread per element (or per column
 * of a chunk of rows); the CPU's bits (cpu_norm.c). */
static inline tl_code cu_norm_run(const cu_nn_dev *dev, tl_opcode op, int n, const tl_tensor *const *in,
                                  const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = in[0];
    cu_nnk k;
    memset(&k, 0, sizeof k);
    k.sub = (int)op;
    k.x = x->data;
    k.y = out->data;
    k.eps = a->epsilon;
    int64_t S = 1;
    for (int d = 2; d < x->ndim; d++)
        S *= x->shape[d];
    switch (op) {
    case TL_OP_BATCH_NORM:
        k.scale = in[1]->data, k.bias = in[2]->data, k.mean = in[3]->data, k.var = in[4]->data;
        k.per = S, k.groups = x->shape[1];
        k.op = CU_NN_NAPPLY;
        return dev->launch(dev->ctx, x->dtype, &k, out->numel, st);
    case TL_OP_BATCH_NORM_PARAMS_GRAD: /* x, g, mean, var: a thread per leaf, then per channel */
    case TL_OP_BATCH_NORM_GRAD: {      /* x, g, scale, mean, var, those sums: per element */
        bool grad = op == TL_OP_BATCH_NORM_GRAD;
        k.g2 = in[1]->data, k.mean = in[grad ? 3 : 2]->data, k.var = in[grad ? 4 : 3]->data;
        k.rows = x->shape[0] * x->shape[1], k.len = S, k.groups = x->shape[1];
        if (grad) {
            k.scale = in[2]->data, k.part = (void *)in[5]->data;
            k.op = CU_NN_NAPPLY;
            return dev->launch(dev->ctx, x->dtype, &k, out->numel, st);
        }
        if (k.rows == 0 || k.len == 0) /* sums of nothing */
            return dev->zero(dev->ctx, out->data, tl_tensor_bytes(out), st);
        int64_t lo, len;
        k.items = cu_psum_leaf_at(k.len, -1, &lo, &len); /* leaves a row */
        if (!(k.part = dev->alloc(dev->ctx, 2 * tl_dtype_size(x->dtype) * (size_t)(k.rows * k.items), st)))
            return st->code;
        k.op = CU_NN_BNROWS;
        tl_code rc = dev->launch(dev->ctx, x->dtype, &k, k.rows * k.items, st);
        k.op = CU_NN_BNSUMS;
        if (!rc)
            rc = dev->launch(dev->ctx, x->dtype, &k, k.groups, st);
        dev->release(dev->ctx, k.part);
        return rc;
    }
    case TL_OP_LAYER_NORM:
    case TL_OP_LAYER_NORM_GRAD:
    case TL_OP_LAYER_NORM_PARAMS_GRAD: {
        int first = op == TL_OP_LAYER_NORM ? 1 : 2;
        if (op != TL_OP_LAYER_NORM)
            k.g2 = in[1]->data;
        k.scale = n > first ? in[first]->data : NULL;
        k.bias = n > first + 1 ? in[first + 1]->data : NULL;
        k.len = 1;
        for (int d = (int)a->axis; d < x->ndim; d++)
            k.len *= x->shape[d];
        k.rows = k.len ? x->numel / k.len : 0;
        break;
    }
    default: /* group_norm */
        k.scale = n > 1 ? in[1]->data : NULL, k.bias = n > 2 ? in[2]->data : NULL;
        k.groups = a->groups, k.cpr = x->shape[1] / a->groups, k.per = S;
        k.rows = x->shape[0] * a->groups, k.len = k.cpr * S;
        break;
    }
    bool params = op == TL_OP_LAYER_NORM_PARAMS_GRAD;
    if (params && (k.rows == 0 || k.len == 0)) /* sums of nothing */
        return dev->zero(dev->ctx, out->data, tl_tensor_bytes(out), st);
    if (k.rows == 0)
        return TL_OK;
    size_t es = tl_dtype_size(x->dtype);
    if (params) { /* the CPU's chunks of rows, about 64K elements each */
        k.per_item = k.len >= 65536 ? 1 : 65536 / k.len;
        k.items = (k.rows + k.per_item - 1) / k.per_item;
        k.sub = TL_OP_LAYER_NORM; /* the statistics only */
    }
    size_t bytes = 4 * es * (size_t)k.rows, pbytes = params ? 2 * es * (size_t)(k.len * k.items) : 0;
    if (!(k.stats = dev->alloc(dev->ctx, bytes + pbytes, st)))
        return st->code;
    k.part = (char *)k.stats + bytes;
    k.op = CU_NN_NSTATS;
    tl_code rc = dev->launch(dev->ctx, x->dtype, &k, k.rows, st);
    k.op = params ? CU_NN_PPART : CU_NN_NAPPLY;
    if (!rc)
        rc = dev->launch(dev->ctx, x->dtype, &k, params ? k.items * k.len : out->numel, st);
    k.op = CU_NN_PJOIN;
    if (!rc && params)
        rc = dev->launch(dev->ctx, x->dtype, &k, 2 * k.len, st);
    dev->release(dev->ctx, k.stats);
    return rc;
}

/* Every layer op with a kernel here. */
static inline tl_code cu_nn_run(const cu_nn_dev *dev, tl_opcode op, int n, const tl_tensor *const *in,
                                const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    if (op == TL_OP_SCATTER_ADD) /* its indices are checked even for an empty result */
        return cu_lines_run(dev, op, in, a, out, st);
    if (out->numel == 0)
        return TL_OK;
    switch (op) {
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN:
    case TL_OP_CUMSUM: return cu_lines_run(dev, op, in, a, out, st);
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL:
    case TL_OP_DROPOUT: return cu_random_run(dev, op, in, a, out, st);
    case TL_OP_RESIZE:
    case TL_OP_RESIZE_GRAD: return cu_resize_run(dev, op, in[0], a, out, st);
    case TL_OP_BATCH_NORM:
    case TL_OP_LAYER_NORM:
    case TL_OP_GROUP_NORM:
    case TL_OP_LAYER_NORM_GRAD:
    case TL_OP_LAYER_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_GRAD: return cu_norm_run(dev, op, n, in, a, out, st);
    case TL_OP_CONV: return cu_conv_run(dev, n, in, a, out, st);
    case TL_OP_CONV_TRANSPOSE: return cu_conv_transpose_run(dev, n, in, a, out, st);
    case TL_OP_CONV_GRAD_W: return cu_conv_grad_w_run(dev, in, a, out, st);
    case TL_OP_PAD:
    case TL_OP_PAD_GRAD: return cu_pad_run(dev, op, in[0], a, out, st);
    default: return cu_pool_run(dev, op, in, a, out, st);
    }
}

#undef CU_AT

#endif
