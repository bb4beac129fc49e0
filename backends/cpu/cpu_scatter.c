/* CPU kernels of scatter, arg-reductions and scans (nn.md).  Each works
 * along one axis: a tensor is [outer, len, inner] around it, and a
 * position (o, k) of the other axes is one line of len elements, inner
 * apart.  Threads take fixed chunks of positions (never the axis itself),
 * and each line is walked in index order by one thread, so scatter_add's
 * additions into one element and cumsum's running sums come in the same
 * order for any thread count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "threads.h"

#define LINE_WORK 16384 /* elements per work item (at least one line) */

typedef struct lines {
    tl_opcode op;
    const tl_attrs *a;
    cpu_ins in;
    tl_tensor *out;
    int64_t outer, len, inner; /* of x */
    int64_t m;                 /* scatter_add: the indices' size on the axis */
    int64_t per_item;          /* positions per work item */
} lines;

static int64_t index_at(const tl_tensor *idx, int64_t j)
{
    return idx->dtype == TL_I32 ? ((const int32_t *)idx->data)[j] : ((const int64_t *)idx->data)[j];
}

/* out[o, idx[o, j, k], k] += src[o, j, k] for j in order (out holds x),
 * for the w lines k, k+1, ... of o at once: each line still takes its j
 * in order and no two lines share an element, so the bits are those of
 * one line at a time, which read a cache line for every element where
 * the lines lie inner apart. */
#define SCATTER_LINES 64
#define SCATTER(T)                                                           \
    do {                                                                     \
        T *y_ = j->out->data;                                                \
        const T *s_ = j->in[2]->data;                                        \
        for (int64_t t = 0; w == 1 && t < j->m; t++) {                       \
            int64_t at = pi + t * j->inner, i = index_at(j->in[1], at);      \
            y_[px + (i < 0 ? i + j->len : i) * j->inner] += s_[at];          \
        }                                                                    \
        for (int64_t t = 0; w > 1 && t < j->m; t++)                          \
            for (int64_t l = 0; l < w; l++) {                                \
                int64_t at = pi + t * j->inner + l, i = index_at(j->in[1], at); \
                y_[px + (i < 0 ? i + j->len : i) * j->inner + l] += s_[at];  \
            }                                                                \
    } while (0)

/* The first (or last) largest/smallest; a NaN beats every number, and NaNs
 * tie among themselves. */
#define ARG(T, BEATS)                                                        \
    do {                                                                     \
        const T *x_ = j->in[0]->data;                                        \
        T best = x_[px];                                                     \
        int64_t bi = 0;                                                      \
        for (int64_t t = 1; t < j->len; t++) {                               \
            T v = x_[px + t * j->inner];                                     \
            bool win = isnan(best) ? last && isnan(v)                        \
                                   : isnan(v) || v BEATS best || (last && v == best); \
            if (win) {                                                       \
                best = v;                                                    \
                bi = t;                                                      \
            }                                                                \
        }                                                                    \
        y[pa] = bi;                                                          \
    } while (0)

/* Running sums along the line, from the far end when reverse; exclusive:
 * each element gets the sum before it (the first 0).  U is the type
 * the sum is kept in: the float itself, or the unsigned twin of an
 * integer type (two's complement wrapping, never undefined). */
#define CUMSUM(T, U)                                                         \
    do {                                                                     \
        const T *x_ = j->in[0]->data;                                        \
        T *y_ = j->out->data;                                                \
        int64_t step = rev ? -j->inner : j->inner;                           \
        int64_t at = rev ? px + (j->len - 1) * j->inner : px;                \
        U acc = (U)x_[at];                                                   \
        y_[at] = excl ? (T)0 : (T)acc;                                       \
        for (int64_t t = 1; t < j->len; t++) {                               \
            at += step;                                                      \
            if (excl)                                                        \
                y_[at] = (T)acc;                                             \
            acc = (U)(acc + (U)x_[at]);                                      \
            if (!excl)                                                       \
                y_[at] = (T)acc;                                             \
        }                                                                    \
    } while (0)

static void line_item(void *ctx, int64_t item)
{
    const lines *j = ctx;
    int64_t npos = j->outer * j->inner, p0 = item * j->per_item;
    int64_t p1 = p0 + j->per_item < npos ? p0 + j->per_item : npos;
    bool last = j->a->select_last, excl = j->a->exclusive, rev = j->a->reverse;
    tl_dtype dt = j->in[0]->dtype;
    int64_t *y = j->out->data;
    for (int64_t p = p0, w = 1; p < p1; p += w) {
        int64_t o = p / j->inner, k = p % j->inner;
        int64_t px = o * j->len * j->inner + k; /* the line's first element in x */
        int64_t pi = o * j->m * j->inner + k;   /* in idx and src */
        int64_t pa = p;                          /* argmax's output */
        switch (j->op) {
        case TL_OP_SCATTER_ADD: /* the lines of o from k on, up to SCATTER_LINES */
            w = j->inner - k < p1 - p ? j->inner - k : p1 - p;
            w = w < SCATTER_LINES ? w : SCATTER_LINES;
            if (dt == TL_F32)
                SCATTER(float);
            else
                SCATTER(double);
            break;
        case TL_OP_ARGMAX:
            if (dt == TL_F32)
                ARG(float, >);
            else
                ARG(double, >);
            break;
        case TL_OP_ARGMIN:
            if (dt == TL_F32)
                ARG(float, <);
            else
                ARG(double, <);
            break;
        default:
            if (dt == TL_F32)
                CUMSUM(float, double); /* kept in f64, each sum rounded once (as PyTorch) */
            else if (dt == TL_F64)
                CUMSUM(double, double);
            else if (dt == TL_I32)
                CUMSUM(int32_t, uint32_t);
            else
                CUMSUM(int64_t, uint64_t);
        }
    }
}

/* Every index lies in [-len, len); the first that does not is named with
 * its position, before anything is added through it. */
static tl_code check_indices(const tl_tensor *idx, const tl_tensor *x, int64_t axis, tl_status *st)
{
    int64_t len = x->shape[axis];
    for (int64_t j = 0; j < idx->numel; j++) {
        int64_t i = index_at(idx, j);
        if (i >= -len && i < len)
            continue;
        char at[TL_MAXDIM * 24], d[96];
        return tl_fail(st, TL_EINPUT, "index %lld out of range for axis %lld of %s (indices%s)", (long long)i,
                       (long long)axis, tl_tensor_desc(x, d, sizeof d), tl_index_desc(idx, j, at, sizeof at));
    }
    return TL_OK;
}

tl_code cpu_scatter(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    (void)n;
    const tl_tensor *x = in[0];
    int ax = (int)a->axis;
    lines j = {op, a, in, out, 1, x->shape[ax], 1, 0, 1};
    for (int d = 0; d < ax; d++)
        j.outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        j.inner *= x->shape[d];
    if (op == TL_OP_SCATTER_ADD) {
        if (check_indices(in[1], x, ax, st))
            return st->code;
        if (out->numel && out->data != x->data) /* (the same: in place, tl_op_over) */
            memcpy(out->data, x->data, tl_tensor_bytes(out));
        j.m = in[1]->shape[ax];
    }
    int64_t along = op == TL_OP_SCATTER_ADD ? j.m : j.len, npos = j.outer * j.inner;
    if (npos == 0 || along == 0)
        return TL_OK; /* nothing to walk (argmax's empty axis is refused by its shape rule) */
    j.per_item = LINE_WORK / along > 1 ? LINE_WORK / along : 1;
    if (op == TL_OP_SCATTER_ADD && j.per_item < j.inner && j.per_item < SCATTER_LINES) /* runs of lines */
        j.per_item = j.inner < SCATTER_LINES ? j.inner : SCATTER_LINES;
    int64_t items = (npos + j.per_item - 1) / j.per_item;
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, line_item, &j);
    return TL_OK;
}
