/* Data movement: reshape-like copies, strided gathers (transpose,
 * broadcast_to, slice), concatenation, take, and the scatters that are
 * their derivatives.  Elements are moved as raw bits, never converted. */
#include <string.h>

#include "cpu.h"

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

static void move_nd(size_t es, bool add, void *dst, const int64_t *dstride, const void *src,
                    const int64_t *sstride, int ndim, const int64_t *shape)
{
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

/* take (gather rows of an axis) and take_grad (scatter-add them back). */
static void take_move(const tl_attrs *a, void *full, const int64_t *full_shape, void *part,
                      int ndim, bool gather, size_t es)
{
    int ax = (int)a->axis;
    int64_t outer = 1, inner = 1, len = full_shape[ax];
    for (int d = 0; d < ax; d++)
        outer *= full_shape[d];
    for (int d = ax + 1; d < ndim; d++)
        inner *= full_shape[d];
    int64_t one[1] = {1}, shape[1] = {inner};
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < a->nindices; j++) {
            int64_t i = a->indices[j] < 0 ? a->indices[j] + len : a->indices[j];
            char *f = (char *)full + (size_t)((o * len + i) * inner) * es;
            char *p = (char *)part + (size_t)((o * a->nindices + j) * inner) * es;
            if (gather)
                memcpy(p, f, (size_t)inner * es);
            else
                move_nd(es, true, f, one, p, one, 1, shape);
        }
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

tl_code cpu_shape_op(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out)
{
    size_t es = tl_dtype_size(out->dtype);
    const tl_tensor *x = in[0];
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
    case TL_OP_TAKE: take_move(a, x->data, x->shape, out->data, x->ndim, true, es); break;
    case TL_OP_TAKE_GRAD:
        memset(out->data, 0, (size_t)out->numel * es);
        take_move(a, out->data, out->shape, x->data, out->ndim, false, es);
        break;
    case TL_OP_CONCAT: concat(n, in, a, out, false, es); break;
    case TL_OP_STACK: concat(n, in, a, out, true, es); break;
    default: /* reshape, expand_dims, squeeze: same bits, new shape */
        memcpy(out->data, x->data, (size_t)out->numel * es);
    }
    return TL_OK;
}
