/* Data movement as strided copies (plan.h's cu_copy): the plans of
 * transpose, broadcast_to, slice, slice_grad, concat and stack, in the
 * CPU's layouts (cpu_shape.c).  Host side; the copy itself is
 * cu_copy_element, one thread per element. */
#ifndef TL_CUDA_SHAPE_H
#define TL_CUDA_SHAPE_H

#include "plan.h"

/* dst[dstride . i] = src[sstride . i] for every index i of shape. */
static inline void cu_copy_init(cu_copy *k, int ndim, const int64_t *shape, void *dst,
                                const int64_t *dstride, const void *src, const int64_t *sstride,
                                size_t es)
{
    int64_t st[2][TL_MAXDIM];
    memcpy(st[0], dstride, sizeof(int64_t) * (size_t)ndim);
    memcpy(st[1], sstride, sizeof(int64_t) * (size_t)ndim);
    cu_plan_strided(&k->plan, ndim, shape, 2, (const int64_t(*)[TL_MAXDIM])st);
    k->es = (int)es;
    k->dst = dst;
    k->src = src;
}

static inline void cu_copy_transpose(cu_copy *k, const tl_tensor *x, const tl_attrs *a,
                                     tl_tensor *out)
{
    int64_t xs[TL_MAXDIM], ss[TL_MAXDIM], ds[TL_MAXDIM];
    cpu_strides(x->ndim, x->shape, xs);
    cpu_strides(out->ndim, out->shape, ds);
    for (int d = 0; d < out->ndim; d++)
        ss[d] = xs[a->axes[d]];
    cu_copy_init(k, out->ndim, out->shape, out->data, ds, x->data, ss, tl_dtype_size(x->dtype));
}

static inline void cu_copy_broadcast(cu_copy *k, const tl_tensor *x, tl_tensor *out)
{
    int64_t xs[TL_MAXDIM], ss[TL_MAXDIM], ds[TL_MAXDIM];
    cpu_strides(x->ndim, x->shape, xs);
    cpu_strides(out->ndim, out->shape, ds);
    for (int d = 0; d < out->ndim; d++) {
        int xd = d - (out->ndim - x->ndim);
        ss[d] = xd < 0 || x->shape[xd] == 1 ? 0 : xs[xd];
    }
    cu_copy_init(k, out->ndim, out->shape, out->data, ds, x->data, ss, tl_dtype_size(x->dtype));
}

/* slice (gather from the view of `full` into `part`) or slice_grad
 * (scatter `part` into the view; the rest of full is zeroed first). */
static inline void cu_copy_slice(cu_copy *k, const tl_attrs *a, void *full, const int64_t *full_shape,
                                 void *part, int ndim, const int64_t *part_shape, bool gather,
                                 size_t es)
{
    int64_t fs[TL_MAXDIM], vs[TL_MAXDIM], ps[TL_MAXDIM];
    int ax = (int)a->axis;
    cpu_strides(ndim, full_shape, fs);
    cpu_strides(ndim, part_shape, ps);
    memcpy(vs, fs, sizeof(int64_t) * (size_t)ndim);
    vs[ax] = fs[ax] * a->step;
    char *base = (char *)full + (size_t)(a->start * fs[ax]) * es;
    if (gather)
        cu_copy_init(k, ndim, part_shape, part, ps, base, vs, es);
    else
        cu_copy_init(k, ndim, part_shape, base, vs, part, ps, es);
}

/* Input `in` of a concat (stack: one row) at row `at` of out's axis. */
static inline void cu_copy_concat(cu_copy *k, const tl_tensor *in, const tl_attrs *a,
                                  tl_tensor *out, int64_t at, bool stack)
{
    int ax = (int)a->axis;
    int64_t outer = 1, inner = 1, rows = stack ? 1 : in->shape[ax];
    for (int d = 0; d < ax; d++)
        outer *= out->shape[d];
    for (int d = ax + 1; d < out->ndim; d++)
        inner *= out->shape[d];
    size_t es = tl_dtype_size(out->dtype);
    int64_t shape[2] = {outer, rows * inner}, ds[2] = {out->shape[ax] * inner, 1},
            ss[2] = {rows * inner, 1};
    cu_copy_init(k, 2, shape, (char *)out->data + (size_t)(at * inner) * es, ds, in->data, ss, es);
}

#endif
