/* CPU kernels of normalization (nn.md): batch_norm (inference form: the
 * statistics are arguments; training mode is a recipe of ops, exec/eval.c),
 * layer_norm, group_norm and layer_norm_grad, their fused backward, and
 * batch_norm_params_grad and batch_norm_grad, training batch_norm's.
 *
 * Each works on rows: batch_norm's are the [N*C] planes of S elements,
 * layer_norm's the x.shape[:axis] rows of x.shape[axis:], group_norm's
 * the [N*groups] groups of (C/groups)*S.  A row's mean and biased variance
 * are two sums in the one order of psum.h (the mean first, then the
 * squares of x - mean), and each element is
 *   y = (x - mean) / sqrt(var + eps) * scale + bias
 * in that order, in the tensor's dtype.  Rows are cut into items by the
 * shapes alone and each row is computed by one thread, or, for a few long
 * rows, each row's sums by psum.h's tree on every thread and its elements
 * in parts: the bits never depend on the thread count. */
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "cpu.h"
#include "psum.h"
#include "threads.h"

typedef struct njob {
    tl_opcode op;
    bool f32;
    const void *x, *g, *scale, *bias, *mean, *var;
    void *out;
    int64_t rows, len;   /* rows of len elements */
    int64_t per, groups; /* elements per scale entry; rows per sample (group_norm), or channels (batch_norm) */
    int64_t cpr;         /* group_norm: channels per group */
    double eps;
    int64_t per_item;
    void *part; /* layer_norm_params_grad: each item's partial sums [2, len] */
    void *stats; /* layer_norm_params_grad by columns: each row's mean and sqrt(var + eps) */
} njob;

/* The sums a row needs, of elements made as the leaves read them rather
 * than from a scratch copy (which, for rows of a million elements, was a
 * fresh allocation of three times the row for every row): the values,
 * and the order of summing them, that a copy would have.  In a row
 * (offsets from its start): */
#define NK_X 0  /* x */
#define NK_SQ 1 /* (x - m)^2 */
#define NK_H 2  /* g * scale */
#define NK_HX 3 /* g * scale * xhat, xhat = (x - m) / r */
#define NK_GX 4 /* g * xhat */
#define NK_EL(k, c, i)                                                                         \
    ((k) == NK_X    ? (c)->x[i]                                                                \
     : (k) == NK_SQ ? ((c)->x[i] - (c)->m) * ((c)->x[i] - (c)->m)                              \
     : (k) == NK_H  ? (c)->g[i] * (c)->sc[i]                                                   \
     : (k) == NK_HX ? (c)->g[i] * (c)->sc[i] * (((c)->x[i] - (c)->m) / (c)->r)                 \
                    : (c)->g[i] * (((c)->x[i] - (c)->m) / (c)->r))

/* psum.h's leaf and its order, over the elements of kind K; and two runs'
 * leaves at once (two chains of additions keep the adder busy where one
 * waits), each accumulator taking its run's elements in order */
#define DEFINE_NSUM(T, SUF, K)                                                                 \
    CPU_KERNEL static T leaf_##K##_##SUF(void *ctx, int64_t lo, int64_t n)                     \
    {                                                                                          \
        const nrow_##SUF *c = ctx;                                                             \
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, rest = 0;                                         \
        int64_t i = lo;                                                                        \
        for (; i + 8 <= lo + n; i += 8)                                                        \
            for (int k = 0; k < 8; k++)                                                        \
                acc[k] += NK_EL(K, c, i + k);                                                  \
        for (; i < lo + n; i++)                                                                \
            rest += NK_EL(K, c, i);                                                            \
        return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + rest; \
    }                                                                                          \
    CPU_KERNEL static void leaf2_##K##_##SUF(const nrow_##SUF *c, int64_t a, int64_t na, int64_t b, \
                                              int64_t nb, T *sa, T *sb)                       \
    {                                                                                          \
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, bcc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ra = 0, rb = 0; \
        int64_t fa = na & ~(int64_t)7, fb = nb & ~(int64_t)7, both = fa < fb ? fa : fb, i = 0; \
        for (; i < both; i += 8)                                                               \
            for (int k = 0; k < 8; k++) {                                                      \
                acc[k] += NK_EL(K, c, a + i + k);                                              \
                bcc[k] += NK_EL(K, c, b + i + k);                                              \
            }                                                                                  \
        for (int64_t j = i; j < fa; j += 8)                                                    \
            for (int k = 0; k < 8; k++)                                                        \
                acc[k] += NK_EL(K, c, a + j + k);                                              \
        for (int64_t j = i; j < fb; j += 8)                                                    \
            for (int k = 0; k < 8; k++)                                                        \
                bcc[k] += NK_EL(K, c, b + j + k);                                              \
        for (int64_t j = fa; j < na; j++)                                                      \
            ra += NK_EL(K, c, a + j);                                                          \
        for (int64_t j = fb; j < nb; j++)                                                      \
            rb += NK_EL(K, c, b + j);                                                          \
        *sa = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + ra; \
        *sb = ((bcc[0] + bcc[1]) + (bcc[2] + bcc[3])) + ((bcc[4] + bcc[5]) + (bcc[6] + bcc[7])) + rb; \
    }                                                                                          \
    /* the psum-ordered sums of runs [a, a + na) and [b, b + nb), at once */                  \
    static void sum2_##K##_##SUF(const nrow_##SUF *c, int64_t a, int64_t na, int64_t b, int64_t nb, T *sa, T *sb) \
    {                                                                                          \
        if (na > CPU_PSUM_LEAF && nb > CPU_PSUM_LEAF) {                                        \
            int64_t ha = cpu_psum_half(na), hb = cpu_psum_half(nb);                            \
            T la, lb, ra, rb;                                                                  \
            sum2_##K##_##SUF(c, a, ha, b, hb, &la, &lb);                                       \
            sum2_##K##_##SUF(c, a + ha, na - ha, b + hb, nb - hb, &ra, &rb);                   \
            *sa = la + ra;                                                                     \
            *sb = lb + rb;                                                                     \
            return;                                                                            \
        }                                                                                      \
        if (na > CPU_PSUM_LEAF || nb > CPU_PSUM_LEAF) {                                        \
            *sa = cpu_psum_seq_##SUF(leaf_##K##_##SUF, (void *)c, a, na);                      \
            *sb = cpu_psum_seq_##SUF(leaf_##K##_##SUF, (void *)c, b, nb);                      \
            return;                                                                            \
        }                                                                                      \
        leaf2_##K##_##SUF(c, a, na, b, nb, sa, sb);                                            \
    }                                                                                          \
    /* the row's sum: on this thread its two halves at once, or the subtrees of \
     * psum.h's tree on `threads` threads (the same bits) */                  \
    static T sum_##K##_##SUF(const nrow_##SUF *c, int64_t n, int threads)                      \
    {                                                                                          \
        if (threads > 1)                                                                       \
            return cpu_psum_tree_##SUF(leaf_##K##_##SUF, (void *)c, n, threads);               \
        if (n <= CPU_PSUM_LEAF)                                                                \
            return leaf_##K##_##SUF((void *)c, 0, n);                                          \
        int64_t h = cpu_psum_half(n);                                                          \
        T l, r;                                                                                \
        sum2_##K##_##SUF(c, 0, h, h, n - h, &l, &r);                                           \
        return l + r;                                                                          \
    }

#define BN_COLS 64 /* channels an item of batch_norm_params_grad over [N, C] */
#define DEFINE_NORM(T, SUF)                                                                    \
    typedef struct nrow_##SUF {                                                                \
        const T *x, *g, *sc;                                                                   \
        T m, r;                                                                                \
    } nrow_##SUF;                                                                              \
    DEFINE_NSUM(T, SUF, NK_X)                                                                  \
    DEFINE_NSUM(T, SUF, NK_SQ)                                                                 \
    DEFINE_NSUM(T, SUF, NK_H)                                                                  \
    DEFINE_NSUM(T, SUF, NK_HX)                                                                 \
    DEFINE_NSUM(T, SUF, NK_GX)                                                                 \
    /* the mean and the biased variance of x[0..n) */                                          \
    static void stats_##SUF(const T *x, int64_t n, int threads, T *mean, T *var)               \
    {                                                                                          \
        nrow_##SUF c = {.x = x};                                                               \
        c.m = sum_NK_X_##SUF(&c, n, threads) / (T)n;                                           \
        *mean = c.m;                                                                           \
        *var = sum_NK_SQ_##SUF(&c, n, threads) / (T)n;                                         \
    }                                                                                          \
    /* y = (x - mean)/r * scale + bias over n elements, scale and bias one value (or none) */  \
    CPU_KERNEL static void apply_##SUF(const T *x, T *y, int64_t n, T mean, T r, const T *sc, const T *bi) \
    {                                                                                          \
        if (sc && bi) {                                                                        \
            T s = *sc, b = *bi;                                                                \
            for (int64_t i = 0; i < n; i++)                                                    \
                y[i] = (x[i] - mean) / r * s + b;                                              \
        } else if (sc) {                                                                       \
            T s = *sc;                                                                         \
            for (int64_t i = 0; i < n; i++)                                                    \
                y[i] = (x[i] - mean) / r * s;                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++)                                                    \
                y[i] = (x[i] - mean) / r;                                                      \
        }                                                                                      \
    }                                                                                          \
    /* the same with a scale and bias per element (layer_norm) */                              \
    CPU_KERNEL static void apply_each_##SUF(const T *x, T *y, int64_t n, T mean, T r, const T *sc, const T *bi) \
    {                                                                                          \
        if (bi)                                                                                \
            for (int64_t i = 0; i < n; i++)                                                    \
                y[i] = (x[i] - mean) / r * sc[i] + bi[i];                                      \
        else                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                    \
                y[i] = (x[i] - mean) / r * sc[i];                                              \
    }                                                                                          \
    /* layer_norm_grad's dx over n elements, with xhat = (x - mean)/r and h = g*scale:         \
     * dx = ((h - sum(h)/n) - xhat*(sum(h*xhat)/n)) / r, m1 and m2 those means */             \
    CPU_KERNEL static void grad_apply_##SUF(const T *x, const T *g, const T *sc, T *dx, int64_t n, T mean, \
                                            T r, T m1, T m2)                                   \
    {                                                                                          \
        if (sc)                                                                                \
            for (int64_t i = 0; i < n; i++)                                                    \
                dx[i] = ((g[i] * sc[i] - m1) - (x[i] - mean) / r * m2) / r;                    \
        else                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                    \
                dx[i] = ((g[i] - m1) - (x[i] - mean) / r * m2) / r;                            \
    }                                                                                          \
    /* a row's statistics for its elementwise part: mean, r = sqrt(var + eps),                \
     * and for layer_norm_grad m1 and m2 */                                                    \
    static void row_prep_##SUF(const njob *j, int64_t row, int threads, T *st)                 \
    {                                                                                          \
        int64_t n = j->len;                                                                    \
        const T *x = (const T *)j->x + row * n;                                                \
        T mean, var;                                                                           \
        stats_##SUF(x, n, threads, &mean, &var);                                               \
        T r = sqrt(var + (T)j->eps);                                                           \
        st[0] = mean, st[1] = r;                                                               \
        if (j->op != TL_OP_LAYER_NORM_GRAD)                                                    \
            return;                                                                            \
        nrow_##SUF c = {x, (const T *)j->g + row * n, j->scale, mean, r};                      \
        T s1 = c.sc ? sum_NK_H_##SUF(&c, n, threads) : sum_NK_X_##SUF(&(nrow_##SUF){.x = c.g}, n, threads); \
        T s2 = c.sc ? sum_NK_HX_##SUF(&c, n, threads) : sum_NK_GX_##SUF(&c, n, threads);      \
        st[2] = s1 / (T)n, st[3] = s2 / (T)n;                                                  \
    }                                                                                          \
    /* the elementwise part of row `row` over its elements [lo, hi) */                        \
    static void row_part_##SUF(const njob *j, int64_t row, const T *st, int64_t lo, int64_t hi) \
    {                                                                                          \
        int64_t n = j->len;                                                                    \
        const T *x = (const T *)j->x + row * n, *sc = j->scale, *bi = j->bias;                 \
        T *y = (T *)j->out + row * n, mean = st[0], r = st[1];                                 \
        if (j->op == TL_OP_LAYER_NORM_GRAD) {                                                  \
            grad_apply_##SUF(x + lo, (const T *)j->g + row * n + lo, sc ? sc + lo : NULL, y + lo, hi - lo, \
                             mean, r, st[2], st[3]);                                           \
        } else if (j->op == TL_OP_LAYER_NORM && sc) {                                          \
            apply_each_##SUF(x + lo, y + lo, hi - lo, mean, r, sc + lo, bi ? bi + lo : NULL);  \
        } else if (j->op == TL_OP_LAYER_NORM || !sc) {                                         \
            apply_##SUF(x + lo, y + lo, hi - lo, mean, r, NULL, NULL);                         \
        } else { /* group_norm: a scale and bias per channel of per elements */                \
            int64_t c0 = (row % j->groups) * j->cpr;                                           \
            for (int64_t i = lo; i < hi;) {                                                    \
                int64_t k = i / j->per, e = (k + 1) * j->per < hi ? (k + 1) * j->per : hi;     \
                apply_##SUF(x + i, y + i, e - i, mean, r, sc + c0 + k, bi ? bi + c0 + k : NULL); \
                i = e;                                                                         \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* layer_norm_params_grad over rows [r0, r1): sum(g*xhat) and sum(g) into                   \
     * part[0..len) and part[len..2 len), row after row */                                     \
    CPU_KERNEL static void params_##SUF(const njob *j, int64_t r0, int64_t r1, T *part)        \
    {                                                                                          \
        int64_t n = j->len;                                                                    \
        T *ps = part, *pb = part + n, eps = (T)j->eps;                                         \
        for (int64_t i = 0; i < 2 * n; i++)                                                    \
            part[i] = 0;                                                                       \
        for (int64_t row = r0; row < r1; row++) {                                              \
            const T *x = (const T *)j->x + row * n, *g = (const T *)j->g + row * n;            \
            T mean, var;                                                                       \
            stats_##SUF(x, n, 1, &mean, &var);                                                 \
            T r = sqrt(var + eps);                                                             \
            for (int64_t i = 0; i < n; i++) {                                                  \
                ps[i] += g[i] * ((x[i] - mean) / r);                                           \
                pb[i] += g[i];                                                                 \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* the same sums for columns [c0, c1), every row: each chunk of per_item rows summed      \
     * from 0 row after row, the chunks' sums added in chunk order, as params and            \
     * params_join give them, without a partial sum of every chunk in memory at once           \
     * (rows of 65536 or more were an item each: partials twice x's size) */                   \
    CPU_KERNEL static void params_cols_##SUF(const njob *j, int64_t c0, int64_t c1, T *t)     \
    {                                                                                          \
        int64_t n = j->len, w = c1 - c0;                                                       \
        T *ps = (T *)j->out + c0, *pb = (T *)j->out + n + c0, *ts = t, *tb = t + w;             \
        const T *st = j->stats;                                                                \
        for (int64_t r0 = 0; r0 < j->rows; r0 += j->per_item) {                                \
            int64_t r1 = r0 + j->per_item < j->rows ? r0 + j->per_item : j->rows;              \
            for (int64_t i = 0; i < 2 * w; i++)                                                \
                t[i] = 0;                                                                      \
            for (int64_t row = r0; row < r1; row++) {                                          \
                const T *x = (const T *)j->x + row * n + c0, *g = (const T *)j->g + row * n + c0; \
                T mean = st[2 * row], r = st[2 * row + 1];                                     \
                for (int64_t i = 0; i < w; i++) {                                              \
                    ts[i] += g[i] * ((x[i] - mean) / r);                                       \
                    tb[i] += g[i];                                                             \
                }                                                                              \
            }                                                                                  \
            for (int64_t i = 0; i < w; i++) {                                                  \
                ps[i] = r0 ? ps[i] + ts[i] : ts[i];                                            \
                pb[i] = r0 ? pb[i] + tb[i] : tb[i];                                            \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* the chunks' partial sums added in chunk order */                                       \
    static void params_join_##SUF(const T *part, int64_t chunks, int64_t n, T *out)            \
    {                                                                                          \
        for (int64_t i = 0; i < 2 * n; i++)                                                    \
            out[i] = part[i];                                                                  \
        for (int64_t c = 1; c < chunks; c++)                                                   \
            for (int64_t i = 0; i < 2 * n; i++)                                                \
                out[i] += part[c * 2 * n + i];                                                 \
    }                                                                                          \
    /* batch_norm_params_grad of channel c: sum(g*xhat) and sum(g) over its N planes of       \
     * `len`, each plane's in psum.h's order, the planes' sums added in plane order */          \
    static void bn_params_##SUF(const njob *j, int64_t c, T *out)                              \
    {                                                                                          \
        int64_t len = j->len, C = j->groups;                                                   \
        T mean = ((const T *)j->mean)[c], r = sqrt(((const T *)j->var)[c] + (T)j->eps);         \
        T s0 = 0, s1 = 0;                                                                      \
        for (int64_t n = 0; n < j->rows / C; n++) {                                            \
            const T *x = (const T *)j->x + (n * C + c) * len, *g = (const T *)j->g + (n * C + c) * len; \
            nrow_##SUF rc = {x, g, NULL, mean, r};                                             \
            s0 += sum_NK_GX_##SUF(&rc, len, 1);                                                \
            s1 += sum_NK_X_##SUF(&(nrow_##SUF){.x = g}, len, 1);                               \
        }                                                                                      \
        out[c] = s0;                                                                           \
        out[C + c] = s1;                                                                       \
    }                                                                                          \
    /* batch_norm_grad of one plane of channel c: with xhat = (x - mean)/r and                 \
     * M = N*len, dx = scale/r * ((g - sum(g)/M) - xhat * (sum(g*xhat)/M)) */                   \
    CPU_KERNEL static void bn_grad_##SUF(const njob *j, int64_t row)                            \
    {                                                                                          \
        int64_t len = j->len, C = j->groups, c = row % C;                                      \
        const T *x = (const T *)j->x + row * len, *g = (const T *)j->g + row * len, *p = j->part; \
        T *dx = (T *)j->out + row * len, M = (T)j->rows / (T)C * (T)len;                       \
        T mean = ((const T *)j->mean)[c], r = sqrt(((const T *)j->var)[c] + (T)j->eps);         \
        T k = ((const T *)j->scale)[c] / r, m1 = p[C + c] / M, m2 = p[c] / M;                   \
        for (int64_t i = 0; i < len; i++)                                                      \
            dx[i] = k * ((g[i] - m1) - (x[i] - mean) / r * m2);                                \
    }                                                                                          \
    /* batch_norm, batch_norm_grad and batch_norm_params_grad over [N, C]                    \
     * (planes of one element): the rows' loops, over the channels, for samples                \
     * [n0, n1), or the params' sums of channels [n0, n1) over every sample; ch:               \
     * each channel's mean, r = sqrt(var + eps) and (batch_norm_grad) k = scale/r,             \
     * m1 and m2, as the plane kernels compute them.  The params add each plane's              \
     * sum as the leaf gives it, 0 + (0 + e), in sample order: the same bits. */               \
    CPU_KERNEL static void bn_cols_##SUF(const njob *j, const T *ch, int64_t n0, int64_t n1)  \
    {                                                                                          \
        int64_t C = j->groups;                                                                 \
        const T *mean = ch, *r = ch + C, *k = ch + 2 * C, *m1 = ch + 3 * C, *m2 = ch + 4 * C;  \
        const T *X = j->x, *G = j->g, *sc = j->scale, *bi = j->bias;                           \
        T *Y = j->out;                                                                         \
        if (j->op == TL_OP_BATCH_NORM_PARAMS_GRAD) {                                           \
            T s0[BN_COLS], s1[BN_COLS];                                                        \
            int64_t w = n1 - n0;                                                               \
            for (int64_t c = 0; c < w; c++)                                                    \
                s0[c] = s1[c] = 0;                                                             \
            for (int64_t n = 0; n < j->rows / C; n++) {                                        \
                const T *x = X + n * C + n0, *g = G + n * C + n0;                              \
                for (int64_t c = 0; c < w; c++) {                                              \
                    s0[c] += (T)0 + ((T)0 + g[c] * ((x[c] - mean[n0 + c]) / r[n0 + c]));      \
                    s1[c] += (T)0 + ((T)0 + g[c]);                                             \
                }                                                                              \
            }                                                                                  \
            for (int64_t c = 0; c < w; c++)                                                    \
                Y[n0 + c] = s0[c];                                                             \
            for (int64_t c = 0; c < w; c++)                                                    \
                Y[C + n0 + c] = s1[c];                                                         \
            return;                                                                            \
        }                                                                                      \
        for (int64_t n = n0; n < n1; n++) {                                                    \
            const T *x = X + n * C;                                                            \
            T *y = Y + n * C;                                                                  \
            if (j->op == TL_OP_BATCH_NORM)                                                     \
                for (int64_t c = 0; c < C; c++)                                                \
                    y[c] = (x[c] - mean[c]) / r[c] * sc[c] + bi[c];                            \
            else                                                                               \
                for (int64_t c = 0; c < C; c++)                                                \
                    y[c] = k[c] * ((G[n * C + c] - m1[c]) - (x[c] - mean[c]) / r[c] * m2[c]);  \
        }                                                                                      \
    }                                                                                          \
    static void bn_channels_##SUF(const njob *j, T *ch)                                        \
    {                                                                                          \
        int64_t C = j->groups;                                                                 \
        T M = (T)j->rows / (T)C * (T)j->len;                                                   \
        for (int64_t c = 0; c < C; c++) {                                                      \
            ch[c] = ((const T *)j->mean)[c];                                                   \
            ch[C + c] = sqrt(((const T *)j->var)[c] + (T)j->eps);                              \
            if (j->op != TL_OP_BATCH_NORM_GRAD)                                                \
                continue;                                                                      \
            const T *p = j->part;                                                              \
            ch[2 * C + c] = ((const T *)j->scale)[c] / ch[C + c];                              \
            ch[3 * C + c] = p[C + c] / M;                                                      \
            ch[4 * C + c] = p[c] / M;                                                          \
        }                                                                                      \
    }                                                                                          \
    static void row_##SUF(const njob *j, int64_t row)                                          \
    {                                                                                          \
        if (j->op == TL_OP_BATCH_NORM) {                                                       \
            int64_t c = row % j->groups;                                                       \
            T r = sqrt(((const T *)j->var)[c] + (T)j->eps);                                    \
            apply_##SUF((const T *)j->x + row * j->len, (T *)j->out + row * j->len, j->len,    \
                        ((const T *)j->mean)[c], r, (const T *)j->scale + c, (const T *)j->bias + c); \
            return;                                                                            \
        }                                                                                      \
        T st[4];                                                                               \
        row_prep_##SUF(j, row, 1, st);                                                         \
        row_part_##SUF(j, row, st, 0, j->len);                                                 \
    }

DEFINE_NORM(float, f)
DEFINE_NORM(double, d)

static void norm_item(void *ctx, int64_t item)
{
    njob *j = ctx;
    int64_t r0 = item * j->per_item, r1 = r0 + j->per_item < j->rows ? r0 + j->per_item : j->rows;
    if (j->op == TL_OP_BATCH_NORM_PARAMS_GRAD) { /* an item is a channel */
        if (j->f32)
            bn_params_f(j, item, j->out);
        else
            bn_params_d(j, item, j->out);
    } else if (j->op == TL_OP_BATCH_NORM_GRAD) {
        for (int64_t r = r0; r < r1; r++)
            if (j->f32)
                bn_grad_f(j, r);
            else
                bn_grad_d(j, r);
    } else if (j->op == TL_OP_LAYER_NORM_PARAMS_GRAD) { /* this chunk's partial sums */
        if (j->f32)
            params_f(j, r0, r1, (float *)j->part + item * 2 * j->len);
        else
            params_d(j, r0, r1, (double *)j->part + item * 2 * j->len);
    } else {
        for (int64_t r = r0; r < r1; r++)
            if (j->f32)
                row_f(j, r);
            else
                row_d(j, r);
    }
}

/* batch_norm's three kernels over [N, C]: items of samples (of channels
 * for the params' sums), each channel's numbers made once */
typedef struct bncol_job {
    const njob *j;
    const void *ch;
    int64_t per; /* samples an item */
} bncol_job;

static void bncol_item(void *ctx, int64_t item)
{
    const bncol_job *b = ctx;
    const njob *j = b->j;
    bool params = j->op == TL_OP_BATCH_NORM_PARAMS_GRAD;
    int64_t total = params ? j->groups : j->rows / j->groups, per = params ? BN_COLS : b->per;
    int64_t n0 = item * per, n1 = n0 + per < total ? n0 + per : total;
    if (j->f32)
        bn_cols_f(j, b->ch, n0, n1);
    else
        bn_cols_d(j, b->ch, n0, n1);
}

static tl_code bn_columns(const njob *j, tl_status *st)
{
    size_t es = j->f32 ? sizeof(float) : sizeof(double);
    bncol_job b = {j, malloc(es * 5 * (size_t)j->groups), 1};
    if (!b.ch)
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's channels", tl_ops[j->op].name);
    if (j->f32)
        bn_channels_f(j, (float *)b.ch);
    else
        bn_channels_d(j, (double *)b.ch);
    int64_t n = j->rows / j->groups, items;
    if (j->op == TL_OP_BATCH_NORM_PARAMS_GRAD) {
        items = (j->groups + BN_COLS - 1) / BN_COLS;
    } else {
        b.per = j->groups >= 16384 ? 1 : 16384 / j->groups;
        items = (n + b.per - 1) / b.per;
    }
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, bncol_item, &b);
    free((void *)b.ch);
    return TL_OK;
}

/* A row's statistics (layer_norm_params_grad: its mean and sqrt(var +
 * eps) into stats; the others: st, for the row's parts) on `threads`. */
static void prep(const njob *j, int64_t row, int threads, void *st)
{
    if (j->f32)
        row_prep_f(j, row, threads, (float *)st);
    else
        row_prep_d(j, row, threads, (double *)st);
}

/* Few long rows (wide): each row's sums on every thread in turn (psum.h's
 * tree, the same bits as one thread's), then its elements in parts of
 * WIDE_PART, an item each. */
#define WIDE_MIN 65536
#define WIDE_PART 16384
typedef struct wide_job {
    const njob *j;
    int64_t row;
    double st[4];
} wide_job;

static void wide_item(void *ctx, int64_t item)
{
    wide_job *w = ctx;
    int64_t lo = item * WIDE_PART, hi = lo + WIDE_PART < w->j->len ? lo + WIDE_PART : w->j->len;
    if (w->j->f32)
        row_part_f(w->j, w->row, (const float *)w->st, lo, hi);
    else
        row_part_d(w->j, w->row, (const double *)w->st, lo, hi);
}

static void wide_rows(const njob *j)
{
    wide_job w = {.j = j};
    int64_t parts = (j->len + WIDE_PART - 1) / WIDE_PART;
    for (w.row = 0; w.row < j->rows; w.row++) {
        prep(j, w.row, cpu_nthreads(), w.st);
        cpu_parallel(parts, cpu_nthreads(), wide_item, &w);
    }
}

/* layer_norm_params_grad by columns: the rows' statistics (items of rows,
 * or each row on every thread), then the sums over columns of PCOL_W (an
 * item each). */
#define PCOL_W 512
static void stats_item(void *ctx, int64_t item)
{
    njob *j = ctx;
    size_t es = j->f32 ? sizeof(float) : sizeof(double);
    int64_t r0 = item * j->per_item, r1 = r0 + j->per_item < j->rows ? r0 + j->per_item : j->rows;
    for (int64_t r = r0; r < r1; r++)
        prep(j, r, 1, (char *)j->stats + 2 * es * (size_t)r);
}

static void cols_item(void *ctx, int64_t item)
{
    const njob *j = ctx;
    int64_t c0 = item * PCOL_W, c1 = c0 + PCOL_W < j->len ? c0 + PCOL_W : j->len;
    if (j->f32) {
        float t[2 * PCOL_W];
        params_cols_f(j, c0, c1, t);
    } else {
        double t[2 * PCOL_W];
        params_cols_d(j, c0, c1, t);
    }
}

tl_code cpu_norm(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const tl_tensor *x = in[0];
    njob j = {.op = op, .f32 = x->dtype == TL_F32, .x = x->data, .out = out->data, .eps = a->epsilon};
    int64_t S = 1;
    for (int d = 2; d < x->ndim; d++)
        S *= x->shape[d];
    switch (op) {
    case TL_OP_BATCH_NORM:
        j.scale = in[1]->data, j.bias = in[2]->data, j.mean = in[3]->data, j.var = in[4]->data;
        j.rows = x->shape[0] * x->shape[1], j.len = S, j.groups = x->shape[1];
        break;
    case TL_OP_BATCH_NORM_PARAMS_GRAD: /* x, g, mean, var */
    case TL_OP_BATCH_NORM_GRAD:        /* x, g, scale, mean, var, the params' sums */
        j.g = in[1]->data;
        j.mean = in[op == TL_OP_BATCH_NORM_GRAD ? 3 : 2]->data;
        j.var = in[op == TL_OP_BATCH_NORM_GRAD ? 4 : 3]->data;
        if (op == TL_OP_BATCH_NORM_GRAD)
            j.scale = in[2]->data, j.part = (void *)in[5]->data;
        j.rows = x->shape[0] * x->shape[1], j.len = S, j.groups = x->shape[1];
        break;
    case TL_OP_LAYER_NORM:
    case TL_OP_LAYER_NORM_GRAD:
    case TL_OP_LAYER_NORM_PARAMS_GRAD: {
        int first = op == TL_OP_LAYER_NORM ? 1 : 2;
        if (op != TL_OP_LAYER_NORM)
            j.g = in[1]->data;
        j.scale = n > first ? in[first]->data : NULL;
        j.bias = n > first + 1 ? in[first + 1]->data : NULL;
        j.len = 1;
        for (int d = (int)a->axis; d < x->ndim; d++)
            j.len *= x->shape[d];
        j.rows = j.len ? x->numel / j.len : 0;
        break;
    }
    default: /* group_norm */
        j.scale = n > 1 ? in[1]->data : NULL, j.bias = n > 2 ? in[2]->data : NULL;
        j.groups = a->groups, j.cpr = x->shape[1] / a->groups, j.per = S;
        j.rows = x->shape[0] * a->groups, j.len = j.cpr * S;
        break;
    }
    bool params = op == TL_OP_LAYER_NORM_PARAMS_GRAD;
    if ((params || op == TL_OP_BATCH_NORM_PARAMS_GRAD) && (j.rows == 0 || j.len == 0)) { /* sums of nothing */
        memset(out->data, 0, tl_dtype_size(out->dtype) * (size_t)out->numel);
        return TL_OK;
    }
    if (j.rows == 0 || out->numel == 0)
        return TL_OK;
    if (j.len == 1 && (op == TL_OP_BATCH_NORM || op == TL_OP_BATCH_NORM_GRAD || op == TL_OP_BATCH_NORM_PARAMS_GRAD))
        return bn_columns(&j, st);
    if (op == TL_OP_BATCH_NORM_PARAMS_GRAD) { /* an item per channel, whatever the threads */
        cpu_parallel(j.groups, j.groups > 1 ? cpu_nthreads() : 1, norm_item, &j);
        return TL_OK;
    }
    /* items of whole rows, about 16K elements each (64K for the partial
     * sums of the parameters' gradients, fewer partials to add) */
    int64_t want = params ? 65536 : 16384;
    j.per_item = j.len >= want ? 1 : want / j.len;
    int64_t items = (j.rows + j.per_item - 1) / j.per_item;
    size_t es = tl_dtype_size(x->dtype);
    bool wide = j.len >= WIDE_MIN && j.rows < 2 * cpu_nthreads() && cpu_nthreads() > 1;
    if (params && j.len >= 4 * PCOL_W) { /* long rows: by columns, the same sums in the same order */
        if (!(j.stats = malloc(es * 2 * (size_t)j.rows)))
            return tl_fail(st, TL_ERUNTIME, "out of memory for %s's statistics", tl_ops[op].name);
        for (int64_t r = 0; wide && r < j.rows; r++)
            prep(&j, r, cpu_nthreads(), (char *)j.stats + 2 * es * (size_t)r);
        if (!wide)
            cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, stats_item, &j);
        cpu_parallel((j.len + PCOL_W - 1) / PCOL_W, cpu_nthreads(), cols_item, &j);
        free(j.stats);
        return TL_OK;
    }
    if (wide && op != TL_OP_BATCH_NORM && op != TL_OP_BATCH_NORM_GRAD && !params) {
        wide_rows(&j);
        return TL_OK;
    }
    if (params && !(j.part = malloc(es * 2 * (size_t)j.len * (size_t)items)))
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's partial sums", tl_ops[op].name);
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, norm_item, &j);
    if (params) {
        if (j.f32)
            params_join_f(j.part, items, j.len, out->data);
        else
            params_join_d(j.part, items, j.len, out->data);
        free(j.part);
    }
    return TL_OK;
}
