/* Shape and backward rules of seeded randomness (nn.md): random_uniform
 * and random_normal take no arguments and make a tensor of `shape` in
 * `dtype` (the executor sets the call's element type when none is given,
 * and the node's place in rng_node/rng_step); dropout keeps x's shape.
 * The generator is backends/philox.h. */
#include "nn.h"

#include <math.h>
#include <string.h>


/* low and high as the dtype holds them: still low < high, and the width
 * high - low finite, so every draw lies in [low, high). */
static tl_code check_range(const tl_attrs *a, tl_status *st)
{
    double lo = a->low, hi = a->high;
    if (a->dtype == TL_F32) {
        float l = (float)lo, h = (float)hi;
        if (!(l < h) || !isfinite(h - l))
            return tl_fail(st, TL_EINPUT, "\"low\" %.10g and \"high\" %.10g do not make a range of f32 values "
                           "(they round to %.9g and %.9g%s)", lo, hi, (double)l, (double)h,
                           l < h ? ", and high - low is inf in f32" : "");
    } else if (!(lo < hi) || !isfinite(hi - lo)) {
        return tl_fail(st, TL_EINPUT, "\"low\" %.10g and \"high\" %.10g do not make a range of f64 values "
                       "(high - low is %g)", lo, hi, hi - lo);
    }
    return TL_OK;
}

static tl_code draw_shape(tl_opcode op, tl_attrs *a, tl_shape *out, tl_status *st)
{
    int64_t numel;
    if (tl_dtype_is_int(a->dtype))
        return tl_fail(st, TL_EINPUT, "%s draws f32 or f64 values, not %s (cast the draw)",
                       tl_ops[op].name, tl_dtype_name(a->dtype));
    if (tl_shape_numel(a->nshape, a->shape, &numel, st))
        return tl_wrap(st, "attribute \"shape\"");
    if (op == TL_OP_RANDOM_UNIFORM && check_range(a, st))
        return st->code;
    if (op == TL_OP_RANDOM_NORMAL && !(isfinite(a->mean) && a->std > 0 && isfinite(a->std)))
        return tl_fail(st, TL_EINPUT, "\"std\" must be a positive number and \"mean\" finite, got %g and %g",
                       a->std, a->mean);
    if (op == TL_OP_RANDOM_NORMAL && a->dtype == TL_F32 &&
        !(isfinite((float)a->mean) && (float)a->std > 0 && isfinite((float)a->std))) /* (draws of inf or 0) */
        return tl_fail(st, TL_EINPUT, "\"std\" %g and \"mean\" %g must stay a positive and a finite number in f32 "
                       "(they round to %g and %g)", a->std, a->mean, (double)(float)a->std, (double)(float)a->mean);
    out->dtype = a->dtype;
    out->ndim = a->nshape;
    memcpy(out->dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
    return TL_OK;
}

tl_code tl_shape_random(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                        tl_status *st)
{
    (void)n;
    if (op != TL_OP_DROPOUT)
        return draw_shape(op, a, out, st);
    const tl_tensor *x = in[0];
    if (!(a->p >= 0 && a->p < 1))
        return tl_fail(st, TL_EINPUT, "dropout's \"p\" must be in [0, 1), got %g", a->p);
    if (a->training < 0)
        a->training = 1;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->dims, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return TL_OK;
}

/* dropout: g through the same mask, drawn again from the same key (the
 * tape's copy of the attributes keeps the node's place). */
void tl_rule_random(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                    tl_tensor **out)
{
    (void)e;
    if (want[0])
        out[0] = bw_call(b, TL_OP_DROPOUT, 1, &g, a);
}
