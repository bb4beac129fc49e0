/* Data movement: reshape-like copies, strided gathers (transpose,
 * broadcast_to, slice), concatenation, take and gather, one_hot, and the
 * scatters that are their derivatives.  Elements are moved as raw bits,
 * never converted; scatters add in a fixed order (row-major over the
 * indices), so repeated indices accumulate the same way every run. */
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "threads.h"

/* dst[dst_off + sum i_d*dst_stride_d] = src[src_off + sum i_d*src_stride_d]
 * for every index of `shape`; ADD accumulates instead (scatter-add). */
#define MOVE_ND(T, OP)                                                             \
    do {                                                                           \
        T *D_ = dst;                                                               \
        const T *S_ = src;                                                         \
        int64_t idx[TL_MAXDIM] = {0}, so = 0, dof = 0, total = 1;                  \
        for (int d = 0; d < ndim; d++)                                             \
            total *= shape[d];                                                     \
        int64_t inner = ndim ? shape[ndim - 1] : 1;                                \
        int64_t ss = ndim ? sstride[ndim - 1] : 0, ds = ndim ? dstride[ndim - 1] : 0; \
        for (int64_t done = 0; done < total; done += inner) {                      \
            for (int64_t i = 0; i < inner; i++)                                    \
                OP(D_[dof + i * ds], S_[so + i * ss]);                             \
            for (int d = ndim - 2; d >= 0; d--) {                                  \
                so += sstride[d];                                                  \
                dof += dstride[d];                                                 \
                if (++idx[d] < shape[d])                                           \
                    break;                                                         \
                so -= sstride[d] * shape[d];                                       \
                dof -= dstride[d] * shape[d];                                      \
                idx[d] = 0;                                                        \
            }                                                                      \
        }                                                                          \
    } while (0)
#define ASSIGN(d, s) ((d) = (s))
#define ADD_TO(d, s) ((d) += (s))

/* Merges each axis into the next one where both walks run on without a
 * jump (stride[d] == stride[d+1] * shape[d+1] on both sides), so that the
 * innermost loop is as long as it can be: a broadcast of one value is one
 * run of the whole tensor, not a run per row.  The same elements in the
 * same order, fewer loop steps; the inner loop of a copy or a fill then
 * runs at the speed of memory. */
static int merge_axes(int ndim, const int64_t *shape, const int64_t *dstride, const int64_t *sstride,
                      int64_t *mshape, int64_t *mds, int64_t *mss)
{
    int m = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1) /* no step along it */
            continue;
        if (m && mds[m - 1] == dstride[d] * shape[d] && mss[m - 1] == sstride[d] * shape[d]) {
            mshape[m - 1] *= shape[d];
            mds[m - 1] = dstride[d];
            mss[m - 1] = sstride[d];
            continue;
        }
        mshape[m] = shape[d], mds[m] = dstride[d], mss[m] = sstride[d];
        m++;
    }
    return m;
}

static void move_nd(size_t es, bool add, void *dst, const int64_t *dstride_in, const void *src,
                    const int64_t *sstride_in, int ndim_in, const int64_t *shape_in)
{
    int64_t shape[TL_MAXDIM], dstride[TL_MAXDIM], sstride[TL_MAXDIM];
    for (int d = 0; d < ndim_in; d++)
        if (shape_in[d] == 0)
            return;
    int ndim = merge_axes(ndim_in, shape_in, dstride_in, sstride_in, shape, dstride, sstride);
    if (!add && ndim == 1 && dstride[0] == 1 && sstride[0] <= 1) { /* a copy or a fill */
        if (sstride[0])
            memcpy(dst, src, (size_t)shape[0] * es);
        else if (es == 4)
            for (uint32_t v = *(const uint32_t *)src, *d = dst, *e = d + shape[0]; d < e; d++)
                *d = v;
        else
            for (uint64_t v = *(const uint64_t *)src, *d = dst, *e = d + shape[0]; d < e; d++)
                *d = v;
        return;
    }
    if (add && es == 4)
        MOVE_ND(float, ADD_TO);
    else if (add)
        MOVE_ND(double, ADD_TO);
    else if (es == 4)
        MOVE_ND(uint32_t, ASSIGN);
    else
        MOVE_ND(uint64_t, ASSIGN);
}

static void transpose(const tl_tensor *x, const tl_attrs *a, tl_tensor *out, size_t es)
{
    int64_t xs[TL_MAXDIM], ss[TL_MAXDIM], ds[TL_MAXDIM];
    cpu_strides(x->ndim, x->shape, xs);
    cpu_strides(out->ndim, out->shape, ds);
    for (int d = 0; d < out->ndim; d++)
        ss[d] = xs[a->axes[d]];
    move_nd(es, false, out->data, ds, x->data, ss, out->ndim, out->shape);
}

static void broadcast(const tl_tensor *x, tl_tensor *out, size_t es)
{
    int64_t xs[TL_MAXDIM], ss[TL_MAXDIM], ds[TL_MAXDIM];
    cpu_strides(x->ndim, x->shape, xs);
    cpu_strides(out->ndim, out->shape, ds);
    for (int d = 0; d < out->ndim; d++) {
        int xd = d - (out->ndim - x->ndim);
        ss[d] = xd < 0 || x->shape[xd] == 1 ? 0 : xs[xd];
    }
    move_nd(es, false, out->data, ds, x->data, ss, out->ndim, out->shape);
}

/* slice (gather) and slice_grad (scatter into zeros) share one layout: the
 * big tensor `full` and the sliced view of shape `part`. */
static void slice_move(const tl_attrs *a, void *full, const int64_t *full_shape, void *part,
                       int ndim, const int64_t *part_shape, bool gather, size_t es)
{
    int64_t fs[TL_MAXDIM], vs[TL_MAXDIM], ps[TL_MAXDIM];
    int ax = (int)a->axis;
    cpu_strides(ndim, full_shape, fs);
    cpu_strides(ndim, part_shape, ps);
    memcpy(vs, fs, sizeof(int64_t) * (size_t)ndim);
    vs[ax] = fs[ax] * a->step;
    char *base = (char *)full + (size_t)(a->start * fs[ax]) * es;
    if (gather)
        move_nd(es, false, part, ps, base, vs, ndim, part_shape);
    else
        move_nd(es, false, base, vs, part, ps, ndim, part_shape);
}

/* ---- index tensors: take, gather, one_hot and their scatters ---- */

/* Every index lies in [-len, len) ([0, len) without negatives); the first
 * that does not is named, before anything is read through it. */
static tl_code check_indices(const tl_tensor *idx, int64_t len, bool negative, const char *what,
                             tl_status *st)
{
    for (int64_t j = 0; j < idx->numel; j++) {
        int64_t i = tl_tensor_get_int(idx, j);
        if (i < len && (negative ? i >= -len : i >= 0))
            continue;
        char at[TL_MAXDIM * 24];
        return tl_fail(st, TL_EINPUT, "index %lld out of range for %s (indices%s)", (long long)i,
                       what, tl_index_desc(idx, j, at, sizeof at));
    }
    return TL_OK;
}

/* Indices from an index tensor, or from take's "indices" attribute. */
typedef struct indices {
    const tl_tensor *t; /* NULL: the list */
    const int64_t *list;
    int64_t n;
} indices;

static int64_t index_at(const indices *ix, int64_t j, int64_t len)
{
    int64_t i = ix->t ? tl_tensor_get_int(ix->t, j) : ix->list[j];
    return i < 0 ? i + len : i;
}

/* Sizes of the axes before, at and after `axis`. */
static void split_at(const tl_tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++)
        *outer *= t->shape[d];
    for (int d = axis + 1; d < t->ndim; d++)
        *inner *= t->shape[d];
    *len = t->shape[axis];
}

static void add_row(size_t es, void *dst, const void *src, int64_t n)
{
    int64_t one[1] = {1};
    move_nd(es, true, dst, one, src, one, 1, &n);
}

/* take (gather rows of `full` along the axis into `part`), or its
 * scatter-add back. */
static void take_rows(const indices *idx, int ax, void *full, const tl_tensor *shape_of,
                      void *part, bool gather, size_t es)
{
    int64_t outer, len, inner, m = idx->n;
    split_at(shape_of, ax, &outer, &len, &inner);
    size_t row = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++) {
            char *f = (char *)full + (size_t)(o * len + index_at(idx, j, len)) * row;
            char *p = (char *)part + (size_t)(o * m + j) * row;
            if (gather)
                memcpy(p, f, row);
            else
                add_row(es, f, p, inner);
        }
}

/* gather (take_along_axis): part[o, j, k] = full[o, idx[o, j, k], k], or its
 * scatter-add back, in row-major order of idx.  An outer index o reads
 * and writes only its own slices, so blocks of them go on the threads
 * (each place still adds in idx's order: the same bits); the loops are
 * typed, for the element and the index (one element a generic copy or
 * add was 7 ns). */
typedef struct gjob {
    const tl_tensor *idx;
    char *full, *part;
    int64_t len, inner, m, per; /* per: outer indices an item */
    size_t es;
    bool gather;
} gjob;

#define GATHER_LOOP(T, I, BODY)                                                    \
    do {                                                                           \
        const I *ix = j->idx->data;                                                \
        T *full = (T *)j->full, *part = (T *)j->part;                              \
        for (int64_t o = o0; o < o1; o++)                                          \
            for (int64_t jj = 0; jj < j->m; jj++) {                                \
                int64_t p = (o * j->m + jj) * j->inner;                            \
                for (int64_t k = 0; k < j->inner; k++) {                           \
                    int64_t i = ix[p + k];                                         \
                    T *f = full + (o * j->len + (i < 0 ? i + j->len : i)) * j->inner + k; \
                    BODY;                                                          \
                }                                                                  \
            }                                                                      \
    } while (0)
#define GATHER_IDX(T, BODY)                                                        \
    do {                                                                           \
        if (j->idx->dtype == TL_I32)                                               \
            GATHER_LOOP(T, int32_t, BODY);                                         \
        else                                                                       \
            GATHER_LOOP(T, int64_t, BODY);                                         \
    } while (0)

static void gather_item(void *ctx, int64_t item)
{
    const gjob *j = ctx;
    int64_t outer = j->idx->numel / (j->m * j->inner), o0 = item * j->per;
    int64_t o1 = o0 + j->per < outer ? o0 + j->per : outer;
    if (j->gather && j->es == 4)
        GATHER_IDX(uint32_t, part[p + k] = *f);
    else if (j->gather)
        GATHER_IDX(uint64_t, part[p + k] = *f);
    else if (j->es == 4) /* the scatter: gradients, f32 or f64 */
        GATHER_IDX(float, *f += part[p + k]);
    else
        GATHER_IDX(double, *f += part[p + k]);
}

static void gather_elems(const indices *idx, int ax, void *full, const tl_tensor *shape_of,
                         void *part, bool gather, size_t es)
{
    int64_t outer, len, inner, m = idx->t->shape[ax];
    split_at(shape_of, ax, &outer, &len, &inner);
    if (outer == 0 || m == 0 || inner == 0)
        return;
    gjob j = {idx->t, full, part, len, inner, m, 1, es, gather};
    int64_t row = m * inner; /* elements an outer index */
    j.per = row >= 16384 ? 1 : 16384 / row;
    int64_t items = (outer + j.per - 1) / j.per;
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, gather_item, &j);
}

static void one_hot(const tl_tensor *idx, tl_tensor *out)
{
    int64_t depth = out->shape[out->ndim - 1];
    memset(out->data, 0, (size_t)out->numel * tl_dtype_size(out->dtype));
    for (int64_t j = 0; j < idx->numel; j++)
        tl_tensor_set(out, j * depth + tl_tensor_get_int(idx, j), 1.0);
}

/* take, gather, their scatters and one_hot.  take's "indices" attribute
 * was checked by the shape rules; index tensors are checked here. */
static tl_code index_op(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                        size_t es, tl_status *st)
{
    int at = tl_ops[op].index_arg;
    const tl_tensor *x = in[0], *idx = n > at ? in[at] : NULL;
    int ax = (int)a->axis;
    char what[128], d[96];
    if (op == TL_OP_ONE_HOT) {
        snprintf(what, sizeof what, "one_hot with depth %lld", (long long)a->depth);
        if (check_indices(idx, a->depth, false, what, st))
            return st->code;
        one_hot(idx, out);
        return TL_OK;
    }
    bool scatter = op == TL_OP_TAKE_GRAD || op == TL_OP_GATHER_GRAD;
    const tl_tensor *full = scatter ? out : x;
    snprintf(what, sizeof what, "axis %d of %s", ax, tl_tensor_desc(full, d, sizeof d));
    if (idx && check_indices(idx, full->shape[ax], true, what, st))
        return st->code;
    if (scatter)
        memset(out->data, 0, (size_t)out->numel * es);
    indices ix = {idx, a->indices, idx ? idx->numel : a->nindices};
    void *part = scatter ? x->data : out->data;
    if (op == TL_OP_TAKE || op == TL_OP_TAKE_GRAD)
        take_rows(&ix, ax, full->data, full, part, !scatter, es);
    else
        gather_elems(&ix, ax, full->data, full, part, !scatter, es);
    return TL_OK;
}

/* concat and stack: each input contributes a block of `rows[i] * inner`
 * elements to every outer index. */
static void concat(int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, bool stack, size_t es)
{
    int ax = (int)a->axis;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= out->shape[d];
    for (int d = ax + 1; d < out->ndim; d++)
        inner *= out->shape[d];
    char *dst = out->data;
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            int64_t rows = stack ? 1 : in[i]->shape[ax];
            size_t bytes = (size_t)(rows * inner) * es;
            memcpy(dst, (const char *)in[i]->data + (size_t)o * bytes, bytes);
            dst += bytes;
        }
}

tl_code cpu_shape_op(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                     tl_status *st)
{
    size_t es = tl_dtype_size(out->dtype);
    const tl_tensor *x = in[0];
    if (tl_ops[op].index_arg >= 0) /* indices are checked even for an empty result */
        return index_op(op, n, in, a, out, es, st);
    if (out->numel == 0)
        return TL_OK;
    switch (op) {
    case TL_OP_TRANSPOSE: transpose(x, a, out, es); break;
    case TL_OP_BROADCAST_TO: broadcast(x, out, es); break;
    case TL_OP_SLICE:
        slice_move(a, x->data, x->shape, out->data, x->ndim, out->shape, true, es);
        break;
    case TL_OP_SLICE_GRAD:
        memset(out->data, 0, (size_t)out->numel * es);
        if (x->numel)
            slice_move(a, out->data, out->shape, x->data, x->ndim, x->shape, false, es);
        break;
    case TL_OP_CONCAT: concat(n, in, a, out, false, es); break;
    case TL_OP_STACK: concat(n, in, a, out, true, es); break;
    default: /* reshape, expand_dims, squeeze: same bits, new shape */
        memcpy(out->data, x->data, (size_t)out->numel * es);
    }
    return TL_OK;
}
