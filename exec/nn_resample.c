/* Shape and backward rules of padding and resampling (nn.md): pad, resize
 * and their backward kernels pad_grad, resize_grad.  The shape rules
 * leave the kernels nothing to check: pads fit the axes they crop and
 * pad, resize's output sizes are in a->size (one per spatial axis, from
 * `size` or from floor(size * scale)), and every size stays far below
 * what would overflow an int64. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

/* No axis of a result may pass this (tensors stop at 2^60 elements). */
#define SIZE_LIMIT ((int64_t)1 << 60)

static const char *const pad_mode_names[] = {"constant", "reflect", "edge", "wrap"};

/* The output size of pad along an axis of `size` with pads (lo, hi), or
 * -1 after an error. */
static int64_t pad_axis(int64_t size, int64_t lo, int64_t hi, int axis, int mode, const tl_tensor *x,
                        tl_status *st)
{
    int64_t cut_lo = lo < 0 ? lo : 0, cut_hi = hi < 0 ? hi : 0; /* negative: a crop */
    if (cut_lo < -size || cut_hi < -size || cut_lo + cut_hi < -size) {
        tl_fail(st, TL_EINPUT, "pads [%lld, %lld] on axis %d crop more than its %lld elements (x %s)",
                (long long)lo, (long long)hi, axis, (long long)size, DESC(x));
        return -1;
    }
    int64_t kept = size + cut_lo + cut_hi, add_lo = lo > 0 ? lo : 0, add_hi = hi > 0 ? hi : 0;
    if (add_lo > SIZE_LIMIT || add_hi > SIZE_LIMIT || kept + add_lo + add_hi > SIZE_LIMIT) {
        tl_fail(st, TL_EINPUT, "pads [%lld, %lld] on axis %d make an absurd size (x %s)", (long long)lo,
                (long long)hi, axis, DESC(x));
        return -1;
    }
    int64_t most = add_lo > add_hi ? add_lo : add_hi;
    if (most > 0 && mode == TL_PAD_REFLECT && most >= kept) {
        tl_fail(st, TL_EINPUT,
                "\"reflect\" pads [%lld, %lld] on axis %d must each be below the axis size %lld "
                "(after cropping) of x %s",
                (long long)lo, (long long)hi, axis, (long long)kept, DESC(x));
        return -1;
    }
    if (most > 0 && kept == 0 && mode != TL_PAD_CONSTANT) {
        tl_fail(st, TL_EINPUT, "\"%s\" padding of axis %d, which is empty (after cropping), of x %s",
                pad_mode_names[mode], axis, DESC(x));
        return -1;
    }
    return kept + add_lo + add_hi;
}

/* pad's result shape from x's shape (dims, ndim), or an error. */
static tl_code pad_shape(const tl_tensor *x, int ndim, const int64_t *dims, const tl_attrs *a,
                         tl_shape *out, tl_status *st)
{
    if (a->npads != ndim)
        return tl_fail(st, TL_EINPUT, "\"pads\" has %d [begin, end] pairs, x %s has %d axes", a->npads,
                       DESC(x), ndim);
    out->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        if ((out->dims[d] = pad_axis(dims[d], a->pads[2 * d], a->pads[2 * d + 1], d, a->mode, x, st)) < 0)
            return st->code;
    int64_t numel;
    if (!tl_shape_numel(out->ndim, out->dims, &numel, st))
        return TL_OK;
    char o[160], p[400] = "[";
    for (int d = 0; d < ndim; d++)
        snprintf(p + strlen(p), sizeof p - strlen(p), "%s[%lld, %lld]", d ? ", " : "", (long long)a->pads[2 * d],
                 (long long)a->pads[2 * d + 1]);
    strcat(p, "]");
    return tl_append(st, ": the result %s, from x %s with pads %s",
                     tl_shape_desc(out->dtype, out->ndim, out->dims, o, sizeof o), DESC(x), p);
}

/* pad's constant must be a value of an index tensor's dtype. */
static tl_code pad_value(const tl_tensor *x, const tl_attrs *a, tl_status *st)
{
    if (a->mode != TL_PAD_CONSTANT || !tl_dtype_is_int(x->dtype))
        return TL_OK;
    if (a->value != floor(a->value) ||
        (x->dtype == TL_I32 ? !(a->value >= -2147483648.0 && a->value <= 2147483647.0)
                            : !(fabs(a->value) < 9007199254740992.0))) /* 2^53 + 1 reads as 2^53 */
        return tl_fail(st, TL_EINPUT, "\"value\" %.17g is not an integer of x's dtype%s (x %s)", a->value,
                       x->dtype == TL_I64 ? " below 2^53 in magnitude" : "", DESC(x));
    return TL_OK;
}

/* resize's output sizes into a->size (one per spatial axis), a->nsp = d. */
static tl_code resize_sizes(const tl_tensor *x, tl_attrs *a, tl_status *st)
{
    if (tl_nn_check_layout(x, "x", st))
        return st->code;
    int d = x->ndim - 2;
    int given = a->nsize ? a->nsize : a->nscale;
    if (!a->nsize == !a->nscale)
        return tl_fail(st, TL_EINPUT, "give \"size\" or \"scale\", not %s", a->nsize ? "both" : "neither");
    if (given != d)
        return tl_fail(st, TL_EINPUT, "\"%s\" has %d entries for the %d spatial axes of x %s",
                       a->nsize ? "size" : "scale", given, d, DESC(x));
    for (int k = 0; k < d; k++) {
        int64_t in = x->shape[2 + k];
        if (in == 0)
            return tl_fail(st, TL_EINPUT, "axis %d of x %s is empty: nothing to resize", 2 + k, DESC(x));
        if (a->nscale) {
            double o = floor((double)in * a->scale[k]);
            if (!(o < (double)SIZE_LIMIT))
                return tl_fail(st, TL_EINPUT, "\"scale\" %g makes an absurd size of axis %d of x %s",
                               a->scale[k], 2 + k, DESC(x));
            if (o < 1)
                return tl_fail(st, TL_EINPUT, "\"scale\" %g gives axis %d of x %s the size floor(%lld * %g) = 0",
                               a->scale[k], 2 + k, DESC(x), (long long)in, a->scale[k]);
            a->size[k] = (int64_t)o;
        } else if (a->size[k] < 1 || a->size[k] > SIZE_LIMIT) {
            return tl_fail(st, TL_EINPUT, "\"size\" %lld for axis %d of x %s", (long long)a->size[k], 2 + k,
                           DESC(x));
        }
    }
    a->nsp = d; /* nsize stays as given: the rule may run again on this record */
    return TL_OK;
}

tl_code tl_shape_resample(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                          tl_status *st)
{
    (void)n;
    const tl_tensor *x = in[0];
    int64_t numel;
    out->dtype = x->dtype;
    switch (op) {
    case TL_OP_PAD:
        return pad_value(x, a, st) ? st->code : pad_shape(x, x->ndim, x->shape, a, out, st);
    case TL_OP_PAD_GRAD: { /* g -> attrs.shape, the x g was padded from */
        tl_shape fwd;
        if (pad_shape(x, a->nshape, a->shape, a, &fwd, st))
            return st->code;
        if (fwd.ndim != x->ndim || memcmp(fwd.dims, x->shape, sizeof(int64_t) * (size_t)x->ndim))
            return tl_fail(st, TL_EINPUT, "g %s is not the shape pad gives", DESC(x));
        break;
    }
    case TL_OP_RESIZE:
        if (resize_sizes(x, a, st))
            return st->code;
        out->ndim = x->ndim;
        out->dims[0] = x->shape[0];
        out->dims[1] = x->shape[1];
        memcpy(out->dims + 2, a->size, sizeof(int64_t) * (size_t)a->nsp);
        if (tl_shape_numel(out->ndim, out->dims, &numel, st)) {
            char o[160];
            return tl_append(st, ": the result %s, from x %s and the %s given",
                             tl_shape_desc(out->dtype, out->ndim, out->dims, o, sizeof o), DESC(x),
                             a->nscale ? "scale" : "size");
        }
        return TL_OK;
    case TL_OP_RESIZE_GRAD: { /* g [N, C, *size] -> attrs.shape */
        bool ok = a->nshape == x->ndim && a->nsp == x->ndim - 2 && x->ndim >= 3 && a->shape[0] == x->shape[0] &&
                  a->shape[1] == x->shape[1];
        for (int k = 0; ok && k < a->nsp; k++)
            ok = a->size[k] == x->shape[2 + k] && a->shape[2 + k] > 0;
        if (!ok)
            return tl_fail(st, TL_EINPUT, "g %s is not the shape resize gives", DESC(x));
        break;
    }
    default: return tl_fail(st, TL_ERUNTIME, "internal: %s is not a resampling op", tl_ops[op].name);
    }
    out->ndim = a->nshape;
    memcpy(out->dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
    return tl_shape_numel(out->ndim, out->dims, &numel, st);
}

/* pad: constant padding gives back the slice of g that holds x, which is
 * pad(g) with the pads negated (crops become zeros, pads are cut off);
 * reflect, edge and wrap add up every copy of an element (pad_grad).
 * resize: resize_grad adds each output's g to the inputs it read, with
 * the weights it read them with. */
void tl_rule_resample(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                      tl_tensor **out)
{
    const tl_tensor *x = e->in[0];
    if (!want[0] || tl_dtype_is_int(x->dtype))
        return;
    tl_attrs s;
    if (e->op == TL_OP_PAD && a->mode == TL_PAD_CONSTANT) {
        tl_attrs_init(&s);
        s.npads = a->npads;
        for (int i = 0; i < 2 * a->npads; i++)
            s.pads[i] = -a->pads[i]; /* the shape rule bounded them: no overflow */
        s.mode = TL_PAD_CONSTANT;
        s.value = 0;
        out[0] = bw_call(b, TL_OP_PAD, 1, &g, &s);
        return;
    }
    s = *a;
    s.nshape = x->ndim;
    memcpy(s.shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    out[0] = bw_call(b, e->op == TL_OP_PAD ? TL_OP_PAD_GRAD : TL_OP_RESIZE_GRAD, 1, &g, &s);
}
