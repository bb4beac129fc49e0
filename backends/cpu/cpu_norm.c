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
 * shapes alone and each row is computed by one thread, so the bits never
 * depend on the thread count. */
#include <stdatomic.h>
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
    atomic_int oom;
} njob;

/* psum.h's leaves, in the kernels' vector widths */
CPU_KERNEL static float leaf_f(void *ctx, int64_t lo, int64_t n) { return cpu_psum_leaf_f((const float *)ctx + lo, n); }
CPU_KERNEL static double leaf_d(void *ctx, int64_t lo, int64_t n) { return cpu_psum_leaf_d((const double *)ctx + lo, n); }

#define DEFINE_NORM(T, SUF)                                                                    \
    static T sum_##SUF(const T *x, int64_t n) { return cpu_psum_seq_##SUF(leaf_##SUF, (void *)x, 0, n); } \
    /* the sums of a[0..na) and b[0..nb) at once, each in psum.h's order: two               \
     * independent chains of additions keep the adder busy where one waits */              \
    CPU_KERNEL static void sum2_##SUF(const T *a, int64_t na, const T *b, int64_t nb, T *sa, T *sb) \
    {                                                                                          \
        if (na > CPU_PSUM_LEAF && nb > CPU_PSUM_LEAF) {                                        \
            int64_t ha = cpu_psum_half(na), hb = cpu_psum_half(nb);                            \
            T la, lb, ra, rb;                                                                  \
            sum2_##SUF(a, ha, b, hb, &la, &lb);                                                \
            sum2_##SUF(a + ha, na - ha, b + hb, nb - hb, &ra, &rb);                            \
            *sa = la + ra;                                                                     \
            *sb = lb + rb;                                                                     \
            return;                                                                            \
        }                                                                                      \
        if (na > CPU_PSUM_LEAF || nb > CPU_PSUM_LEAF) {                                        \
            *sa = sum_##SUF(a, na);                                                            \
            *sb = sum_##SUF(b, nb);                                                            \
            return;                                                                            \
        }                                                                                      \
        /* two leaves: each accumulator takes its array's elements in order */                \
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, bcc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ra = 0, rb = 0; \
        int64_t fa = na & ~(int64_t)7, fb = nb & ~(int64_t)7, both = fa < fb ? fa : fb, i = 0; \
        for (; i < both; i += 8)                                                               \
            for (int k = 0; k < 8; k++) {                                                      \
                acc[k] += a[i + k];                                                            \
                bcc[k] += b[i + k];                                                            \
            }                                                                                  \
        for (int64_t j = i; j < fa; j += 8)                                                    \
            for (int k = 0; k < 8; k++)                                                        \
                acc[k] += a[j + k];                                                            \
        for (int64_t j = i; j < fb; j += 8)                                                    \
            for (int k = 0; k < 8; k++)                                                        \
                bcc[k] += b[j + k];                                                            \
        for (int64_t j = fa; j < na; j++)                                                      \
            ra += a[j];                                                                        \
        for (int64_t j = fb; j < nb; j++)                                                      \
            rb += b[j];                                                                        \
        *sa = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + ra; \
        *sb = ((bcc[0] + bcc[1]) + (bcc[2] + bcc[3])) + ((bcc[4] + bcc[5]) + (bcc[6] + bcc[7])) + rb; \
    }                                                                                          \
    /* psum(x, n), its two halves summed at once */                                            \
    static T fsum_##SUF(const T *x, int64_t n)                                                 \
    {                                                                                          \
        if (n <= CPU_PSUM_LEAF)                                                                \
            return sum_##SUF(x, n);                                                            \
        int64_t h = cpu_psum_half(n);                                                          \
        T l, r;                                                                                \
        sum2_##SUF(x, h, x + h, n - h, &l, &r);                                                \
        return l + r;                                                                          \
    }                                                                                          \
    /* the mean and the biased variance of x[0..n), d the scratch for x - mean */                \
    CPU_KERNEL static void stats_##SUF(const T *x, int64_t n, T *d, T *mean, T *var)           \
    {                                                                                          \
        T m = fsum_##SUF(x, n) / (T)n;                                                         \
        for (int64_t i = 0; i < n; i++) {                                                      \
            T c = x[i] - m;                                                                    \
            d[i] = c * c;                                                                      \
        }                                                                                      \
        *mean = m;                                                                             \
        *var = fsum_##SUF(d, n) / (T)n;                                                        \
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
    /* layer_norm_grad of one row: with xhat = (x - mean)/r and h = g*scale,                   \
     * dx = ((h - sum(h)/n) - xhat*(sum(h*xhat)/n)) / r */                                     \
    CPU_KERNEL static void grad_row_##SUF(const T *x, const T *g, const T *sc, T *dx, int64_t n, T *xh, T *h, \
                                          T *hx, T eps)                                        \
    {                                                                                          \
        T mean, var;                                                                           \
        stats_##SUF(x, n, hx, &mean, &var);                                                    \
        T r = sqrt(var + eps);                                                                 \
        for (int64_t i = 0; i < n; i++)                                                        \
            xh[i] = (x[i] - mean) / r;                                                         \
        if (sc)                                                                                \
            for (int64_t i = 0; i < n; i++)                                                    \
                h[i] = g[i] * sc[i];                                                           \
        else                                                                                   \
            memcpy(h, g, sizeof(T) * (size_t)n);                                               \
        for (int64_t i = 0; i < n; i++)                                                        \
            hx[i] = h[i] * xh[i];                                                              \
        T s1, s2;                                                                              \
        sum2_##SUF(h, n, hx, n, &s1, &s2);                                                     \
        T m1 = s1 / (T)n, m2 = s2 / (T)n;                                                      \
        for (int64_t i = 0; i < n; i++)                                                        \
            dx[i] = ((h[i] - m1) - xh[i] * m2) / r;                                            \
    }                                                                                          \
    /* layer_norm_params_grad over rows [r0, r1): sum(g*xhat) and sum(g) into                   \
     * part[0..len) and part[len..2 len), row after row */                                     \
    CPU_KERNEL static void params_##SUF(const njob *j, int64_t r0, int64_t r1, T *part, T *scratch) \
    {                                                                                          \
        int64_t n = j->len;                                                                    \
        T *ps = part, *pb = part + n, eps = (T)j->eps;                                         \
        for (int64_t i = 0; i < 2 * n; i++)                                                    \
            part[i] = 0;                                                                       \
        for (int64_t row = r0; row < r1; row++) {                                              \
            const T *x = (const T *)j->x + row * n, *g = (const T *)j->g + row * n;            \
            T mean, var;                                                                       \
            stats_##SUF(x, n, scratch, &mean, &var);                                           \
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
    /* a row's mean and sqrt(var + eps), as params computes them */                           \
    CPU_KERNEL static void row_stats_##SUF(const njob *j, int64_t row, T *scratch)           \
    {                                                                                          \
        T mean, var, *st = j->stats;                                                           \
        stats_##SUF((const T *)j->x + row * j->len, j->len, scratch, &mean, &var);            \
        st[2 * row] = mean;                                                                    \
        st[2 * row + 1] = sqrt(var + (T)j->eps);                                               \
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
    CPU_KERNEL static void bn_params_##SUF(const njob *j, int64_t c, T *out, T *scratch)       \
    {                                                                                          \
        int64_t len = j->len, C = j->groups;                                                   \
        T mean = ((const T *)j->mean)[c], r = sqrt(((const T *)j->var)[c] + (T)j->eps);         \
        T s0 = 0, s1 = 0;                                                                      \
        for (int64_t n = 0; n < j->rows / C; n++) {                                            \
            const T *x = (const T *)j->x + (n * C + c) * len, *g = (const T *)j->g + (n * C + c) * len; \
            for (int64_t i = 0; i < len; i++)                                                  \
                scratch[i] = g[i] * ((x[i] - mean) / r);                                       \
            T a, b;                                                                            \
            sum2_##SUF(scratch, len, g, len, &a, &b);                                          \
            s0 += a;                                                                           \
            s1 += b;                                                                           \
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
    static void row_##SUF(const njob *j, int64_t row, T *scratch)                              \
    {                                                                                          \
        int64_t n = j->len;                                                                    \
        const T *x = (const T *)j->x + row * n, *sc = j->scale, *bi = j->bias;                 \
        T *y = (T *)j->out + row * n, eps = (T)j->eps;                                         \
        if (j->op == TL_OP_LAYER_NORM_GRAD) {                                                  \
            grad_row_##SUF(x, (const T *)j->g + row * n, sc, y, n, scratch, scratch + n, scratch + 2 * n, eps); \
            return;                                                                            \
        }                                                                                      \
        if (j->op == TL_OP_BATCH_NORM) {                                                       \
            int64_t c = row % j->groups;                                                       \
            T r = sqrt(((const T *)j->var)[c] + eps);                                          \
            apply_##SUF(x, y, n, ((const T *)j->mean)[c], r, sc + c, bi + c);                  \
            return;                                                                            \
        }                                                                                      \
        T mean, var;                                                                           \
        stats_##SUF(x, n, scratch, &mean, &var);                                               \
        T r = sqrt(var + eps);                                                                 \
        if (j->op == TL_OP_LAYER_NORM && sc) {                                                 \
            apply_each_##SUF(x, y, n, mean, r, sc, bi);                                        \
            return;                                                                            \
        }                                                                                      \
        if (j->op == TL_OP_LAYER_NORM || !sc) {                                                \
            apply_##SUF(x, y, n, mean, r, NULL, NULL);                                         \
            return;                                                                            \
        }                                                                                      \
        int64_t c0 = (row % j->groups) * j->cpr; /* group_norm: per channel */                 \
        for (int64_t k = 0; k < j->cpr; k++)                                                   \
            apply_##SUF(x + k * j->per, y + k * j->per, j->per, mean, r, sc + c0 + k, bi ? bi + c0 + k : NULL); \
    }

DEFINE_NORM(float, f)
DEFINE_NORM(double, d)

static void norm_item(void *ctx, int64_t item)
{
    njob *j = ctx;
    size_t es = j->f32 ? sizeof(float) : sizeof(double);
    void *scratch = NULL;
    bool elementwise = j->op == TL_OP_BATCH_NORM || j->op == TL_OP_BATCH_NORM_GRAD;
    if (!elementwise && !(scratch = malloc(es * (size_t)j->len * 3 + 1))) {
        atomic_store(&j->oom, 1);
        return;
    }
    int64_t r0 = item * j->per_item, r1 = r0 + j->per_item < j->rows ? r0 + j->per_item : j->rows;
    if (j->op == TL_OP_BATCH_NORM_PARAMS_GRAD) { /* an item is a channel */
        if (j->f32)
            bn_params_f(j, item, j->out, scratch);
        else
            bn_params_d(j, item, j->out, scratch);
        free(scratch);
        return;
    }
    if (j->op == TL_OP_BATCH_NORM_GRAD) {
        for (int64_t r = r0; r < r1; r++)
            if (j->f32)
                bn_grad_f(j, r);
            else
                bn_grad_d(j, r);
        free(scratch);
        return;
    }
    if (j->op == TL_OP_LAYER_NORM_PARAMS_GRAD) { /* this chunk's partial sums */
        if (j->f32)
            params_f(j, r0, r1, (float *)j->part + item * 2 * j->len, scratch);
        else
            params_d(j, r0, r1, (double *)j->part + item * 2 * j->len, scratch);
        free(scratch);
        return;
    }
    for (int64_t r = r0; r < r1; r++)
        if (j->f32)
            row_f(j, r, scratch);
        else
            row_d(j, r, scratch);
    free(scratch);
}

/* layer_norm_params_grad by columns: the rows' statistics (items of rows),
 * then the sums over columns of PCOL_W (an item each). */
#define PCOL_W 512
static void stats_item(void *ctx, int64_t item)
{
    njob *j = ctx;
    void *scratch = malloc((j->f32 ? sizeof(float) : sizeof(double)) * (size_t)j->len + 1);
    if (!scratch) {
        atomic_store(&j->oom, 1);
        return;
    }
    int64_t r0 = item * j->per_item, r1 = r0 + j->per_item < j->rows ? r0 + j->per_item : j->rows;
    for (int64_t r = r0; r < r1; r++)
        if (j->f32)
            row_stats_f(j, r, scratch);
        else
            row_stats_d(j, r, scratch);
    free(scratch);
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
    atomic_init(&j.oom, 0);
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
    if (op == TL_OP_BATCH_NORM_PARAMS_GRAD) { /* an item per channel, whatever the threads */
        cpu_parallel(j.groups, j.groups > 1 ? cpu_nthreads() : 1, norm_item, &j);
        return atomic_load(&j.oom) ? tl_fail(st, TL_ERUNTIME, "out of memory for %s's scratch", tl_ops[op].name)
                                   : TL_OK;
    }
    /* items of whole rows, about 16K elements each (64K for the partial
     * sums of the parameters' gradients, fewer partials to add) */
    int64_t want = params ? 65536 : 16384;
    j.per_item = j.len >= want ? 1 : want / j.len;
    int64_t items = (j.rows + j.per_item - 1) / j.per_item;
    size_t es = tl_dtype_size(x->dtype);
    if (params && j.len >= 4 * PCOL_W) { /* long rows: by columns, the same sums in the same order */
        if (!(j.stats = malloc(es * 2 * (size_t)j.rows)))
            return tl_fail(st, TL_ERUNTIME, "out of memory for %s's statistics", tl_ops[op].name);
        cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, stats_item, &j);
        int64_t cols = (j.len + PCOL_W - 1) / PCOL_W;
        if (!atomic_load(&j.oom))
            cpu_parallel(cols, cpu_nthreads(), cols_item, &j);
        free(j.stats);
        return atomic_load(&j.oom) ? tl_fail(st, TL_ERUNTIME, "out of memory for %s's scratch", tl_ops[op].name)
                                   : TL_OK;
    }
    if (params && !(j.part = malloc(es * 2 * (size_t)j.len * (size_t)items)))
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's partial sums", tl_ops[op].name);
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, norm_item, &j);
    if (params && !atomic_load(&j.oom)) {
        if (j.f32)
            params_join_f(j.part, items, j.len, out->data);
        else
            params_join_d(j.part, items, j.len, out->data);
    }
    if (params)
        free(j.part);
    if (atomic_load(&j.oom))
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's scratch", tl_ops[op].name);
    return TL_OK;
}
