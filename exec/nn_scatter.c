/* Shape and backward rules of scatter, arg-reductions and scans (nn.md):
 * scatter_add(x, idx, src), argmax/argmin(x) and cumsum(x), each along a
 * required axis, normalised here to [0, ndim). */
#include "nn.h"

#include <string.h>

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

static tl_code axis_of(tl_opcode op, const tl_tensor *x, tl_attrs *a, tl_status *st)
{
    if (x->ndim == 0)
        return tl_fail(st, TL_EINPUT, "%s of a scalar %s: it needs an axis", tl_ops[op].name, DESC(x));
    if (a->axis < -x->ndim || a->axis >= x->ndim)
        return tl_fail(st, TL_EINPUT, "axis %lld out of range for %s", (long long)a->axis, DESC(x));
    if (a->axis < 0)
        a->axis += x->ndim;
    return TL_OK;
}

static void set_like(tl_shape *out, const tl_tensor *t)
{
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->dims, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memset(out->dims + t->ndim, 0, sizeof(int64_t) * (size_t)(TL_MAXDIM - t->ndim));
}

/* idx has x's rank and x's sizes except on the axis; src has idx's shape
 * and x's dtype.  The indices themselves are checked by the kernel. */
static tl_code scatter_add(const tl_tensor *const *in, tl_attrs *a, tl_shape *out, tl_status *st)
{
    const tl_tensor *x = in[0], *idx = in[1], *src = in[2];
    if (axis_of(TL_OP_SCATTER_ADD, x, a, st))
        return st->code;
    bool ok = idx->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == a->axis || idx->shape[d] == x->shape[d];
    if (!ok)
        return tl_fail(st, TL_EINPUT, "indices %s do not fit %s: same rank and sizes except on axis %lld",
                       DESC(idx), DESC(x), (long long)a->axis);
    if (src->dtype != x->dtype)
        return tl_fail(st, TL_EINPUT, "operands differ in dtype: %s and %s (use cast)", DESC(x), DESC(src));
    if (!tl_same_shape(src, idx))
        return tl_fail(st, TL_EINPUT, "src %s must have the shape of the indices %s", DESC(src), DESC(idx));
    set_like(out, x);
    return TL_OK;
}

static tl_code arg_reduce(tl_opcode op, const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    if (axis_of(op, x, a, st))
        return st->code;
    if (x->shape[a->axis] == 0)
        return tl_fail(st, TL_EINPUT, "%s over an empty axis %lld of %s", tl_ops[op].name, (long long)a->axis,
                       DESC(x));
    out->dtype = TL_I64;
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != a->axis || a->keepdims)
            out->dims[out->ndim++] = d == a->axis ? 1 : x->shape[d];
    return TL_OK;
}

tl_code tl_shape_scatter(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                         tl_status *st)
{
    (void)n;
    switch (op) {
    case TL_OP_SCATTER_ADD: return scatter_add(in, a, out, st);
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN: return arg_reduce(op, in[0], a, out, st);
    default: /* cumsum: floats, and i32/i64 exactly (wrapping) where the op table lets them in */
        if (axis_of(op, in[0], a, st))
            return st->code;
        set_like(out, in[0]);
        return TL_OK;
    }
}

/* scatter_add: g to x, gather(g, idx) to src; cumsum: the cumsum of g the
 * other way (same exclusive, reverse flipped). */
void tl_rule_scatter(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                     tl_tensor **out)
{
    if (e->op == TL_OP_CUMSUM) {
        tl_attrs c = *a;
        c.reverse = !a->reverse;
        if (want[0])
            out[0] = bw_call(b, TL_OP_CUMSUM, 1, &g, &c);
        return;
    }
    if (want[0])
        out[0] = g;
    if (want[2]) {
        tl_attrs ga;
        tl_attrs_init(&ga);
        ga.has_axis = true;
        ga.axis = a->axis;
        tl_tensor *in[2] = {g, e->in[1]};
        out[2] = bw_call(b, TL_OP_GATHER, 2, in, &ga);
    }
}
