/* Shape and backward rules of normalization (nn.md): batch_norm,
 * layer_norm, group_norm, and layer_norm_grad, the fused backward of the
 * last two.  batch_norm in training mode runs as a recipe of ops
 * (exec/eval.c): the batch statistics, then batch_norm in its inference
 * form on them, so its kernel only ever sees the inference form.  On the
 * tape it is either that recipe, op by op (a tape to differentiate twice,
 * the three-value form, a device without the fused kernels), or one entry
 * of batch_norm whose statistics arguments are no variables: its rule is
 * then the gradient through the statistics, from two fused kernels. */
#include "nn.h"

#include <stdio.h>
#include <string.h>

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

/* An argument (named what) must be of x's dtype and have shape dims[0..n). */
static tl_code check_param(const tl_tensor *t, const char *what, const tl_tensor *x, int n,
                           const int64_t *dims, tl_status *st)
{
    if (t->dtype == x->dtype && t->ndim == n && !memcmp(t->shape, dims, sizeof(int64_t) * (size_t)n))
        return TL_OK;
    char w[96];
    tl_shape_desc(x->dtype, n, dims, w, sizeof w);
    return tl_fail(st, TL_EINPUT, "%s is %s, expected %s (x %s)", what, DESC(t), w, DESC(x));
}

static void same_shape(tl_shape *out, const tl_tensor *x)
{
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->dims, x->shape, sizeof(int64_t) * (size_t)x->ndim);
}

/* layer_norm's axis to [0, ndim): the default -1, negative from the end. */
static tl_code norm_axis(const tl_tensor *x, tl_attrs *a, tl_status *st)
{
    if (!a->has_axis)
        a->axis = -1, a->has_axis = true;
    if (x->ndim < 1)
        return tl_fail(st, TL_EINPUT, "x must have at least one axis, got %s", DESC(x));
    if (a->axis < -x->ndim || a->axis >= x->ndim)
        return tl_fail(st, TL_EINPUT, "\"axis\" %lld is out of range for x %s", (long long)a->axis,
                       DESC(x));
    if (a->axis < 0)
        a->axis += x->ndim;
    return TL_OK;
}

tl_code tl_shape_norm(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st)
{
    const char *name = tl_ops[op].name;
    const tl_tensor *x = in[0];
    static const char *const bn_args[] = {"x", "scale", "bias", "mean", "var"};
    if (!(a->epsilon > 0))
        return tl_fail(st, TL_EINPUT, "\"epsilon\" must be above 0, got %g", a->epsilon);
    switch (op) {
    case TL_OP_BATCH_NORM: /* x [N, C, *S], the rest [C] */
        if (x->ndim < 2)
            return tl_fail(st, TL_EINPUT, "x must be [N, C, *spatial], got %s", DESC(x));
        for (int i = 1; i < 5; i++)
            if (check_param(in[i], bn_args[i], x, 1, &x->shape[1], st))
                return st->code;
        break;
    case TL_OP_LAYER_NORM:
    case TL_OP_LAYER_NORM_GRAD: { /* x [, g], [, scale [, bias]] of x.shape[axis:] */
        if (norm_axis(x, a, st))
            return st->code;
        int first = 1;
        if (op == TL_OP_LAYER_NORM_GRAD) {
            first = 2;
            if (check_param(in[1], "g", x, x->ndim, x->shape, st))
                return st->code;
        }
        for (int i = first; i < n; i++)
            if (check_param(in[i], i == first ? "scale" : "bias", x, x->ndim - (int)a->axis, x->shape + a->axis, st))
                return st->code;
        break;
    }
    case TL_OP_LAYER_NORM_PARAMS_GRAD: /* x, g -> [2, x.shape[axis:]] */
        if (norm_axis(x, a, st) || check_param(in[1], "g", x, x->ndim, x->shape, st))
            return st->code;
        if (x->ndim - a->axis + 1 > TL_MAXDIM)
            return tl_fail(st, TL_EINPUT, "more than %d dimensions", TL_MAXDIM);
        out->dtype = x->dtype;
        out->ndim = x->ndim - (int)a->axis + 1;
        out->dims[0] = 2;
        memcpy(out->dims + 1, x->shape + a->axis, sizeof(int64_t) * (size_t)(x->ndim - a->axis));
        return TL_OK;
    case TL_OP_BATCH_NORM_PARAMS_GRAD: /* x, g, mean, var -> [2, C] */
    case TL_OP_BATCH_NORM_GRAD: {      /* x, g, scale, mean, var, p [2, C] -> x's shape */
        static const char *const pg[] = {"x", "g", "mean", "var"}, *gr[] = {"x", "g", "scale", "mean", "var"};
        bool params = op == TL_OP_BATCH_NORM_PARAMS_GRAD;
        if (x->ndim < 2)
            return tl_fail(st, TL_EINPUT, "x must be [N, C, *spatial], got %s", DESC(x));
        if (check_param(in[1], "g", x, x->ndim, x->shape, st))
            return st->code;
        for (int i = 2; i < (params ? 4 : 5); i++)
            if (check_param(in[i], params ? pg[i] : gr[i], x, 1, &x->shape[1], st))
                return st->code;
        if (!params && check_param(in[5], "p", x, 2, (int64_t[]){2, x->shape[1]}, st))
            return st->code;
        if (params) {
            out->dtype = x->dtype;
            out->ndim = 2;
            out->dims[0] = 2;
            out->dims[1] = x->shape[1];
            return TL_OK;
        }
        break;
    }
    case TL_OP_BATCH_NORM_VAR: { /* x [N, C, *S], m [1, C, 1...] -> m's shape */
        if (x->ndim < 2)
            return tl_fail(st, TL_EINPUT, "x must be [N, C, *spatial], got %s", DESC(x));
        int64_t keep[TL_MAXDIM];
        for (int i = 0; i < x->ndim; i++)
            keep[i] = i == 1 ? x->shape[1] : 1;
        if (check_param(in[1], "m", x, x->ndim, keep, st))
            return st->code;
        out->dtype = x->dtype;
        out->ndim = x->ndim;
        memcpy(out->dims, keep, sizeof(int64_t) * (size_t)x->ndim);
        return TL_OK;
    }
    case TL_OP_GROUP_NORM: /* x [N, C, *S], scale and bias [C] */
        if (x->ndim < 2)
            return tl_fail(st, TL_EINPUT, "x must be [N, C, *spatial], got %s", DESC(x));
        if (a->groups < 1 || x->shape[1] % a->groups)
            return tl_fail(st, TL_EINPUT, "\"groups\" %lld does not divide the %lld channels of x %s",
                           (long long)a->groups, (long long)x->shape[1], DESC(x));
        for (int i = 1; i < n; i++)
            if (check_param(in[i], i == 1 ? "scale" : "bias", x, 1, &x->shape[1], st))
                return st->code;
        break;
    default: return tl_fail(st, TL_ERUNTIME, "internal: %s is no normalization", name);
    }
    same_shape(out, x);
    return TL_OK;
}

/* t [C] reshaped to [1, C, 1...] to meet x [N, C, *S]. */
static tl_tensor *per_channel(bw *b, tl_tensor *t, const tl_tensor *x)
{
    int64_t shape[TL_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = d == 1 ? x->shape[1] : 1;
    return bw_reshape(b, t, x->ndim, shape);
}

/* The axes of x [N, C, *S] but the channels: 0, 2, 3... */
static int not_channels(const tl_tensor *x, int64_t *axes)
{
    int k = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != 1)
            axes[k++] = d;
    return k;
}

/* batch_norm (inference form): with r = sqrt(var + eps) and
 * xhat = (x - mean)/r, y = xhat*scale + bias; so
 *   dx = g*scale/r,  dscale = sum(g*xhat),  dbias = sum(g),
 *   dmean = -sum(dx),  dvar = -sum(g*xhat)*scale/(2*(var + eps)),
 * the sums over every axis but the channels. */
static void batch_norm_rule(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                            tl_tensor **out)
{
    tl_tensor *x = e->in[0], *scale = e->in[1], *mean = e->in[3], *var = e->in[4];
    /* training mode as one entry, its statistics constants of the tape:
     * with M = N*S, dscale = sum(g*xhat), dbias = sum(g) and
     *   dx = scale/r * ((g - dbias/M) - xhat*(dscale/M)).
     * (In the recipe's own batch_norm entry, the statistics are variables
     * whenever x is differentiated; where it is not, dscale and dbias are
     * the same sums either way.)  Never on a tape to differentiate twice:
     * the kernels have no rules of their own. */
    if (a->training == 1 && e->in_var[3] < 0 && e->in_var[4] < 0 && !tl_bw_twice(b)) {
        tl_tensor *pin[4] = {x, g, mean, var}, *p = bw_call(b, TL_OP_BATCH_NORM_PARAMS_GRAD, 4, pin, a);
        for (int i = 1; i < 3; i++)
            if (want[i])
                out[i] = bw_reshape(b, bw_slice(b, p, 0, i - 1, i), 1, &x->shape[1]);
        if (want[0]) { /* g's last use, read elementwise */
            tl_tensor *in[6] = {x, g, scale, mean, var, p};
            out[0] = bw_call_over(b, TL_OP_BATCH_NORM_GRAD, 6, in, a, 1);
        }
        return;
    }
    int64_t axes[TL_MAXDIM];
    int na = not_channels(x, axes);
    tl_tensor *ve = bw_op2(b, TL_OP_ADD, var, bw_num(b, var, a->epsilon));
    tl_tensor *r = bw_op1(b, TL_OP_SQRT, ve);
    tl_tensor *sr = per_channel(b, bw_op2(b, TL_OP_DIV, scale, r), x);
    tl_tensor *gxh = NULL;
    if (want[1] || want[4]) {
        tl_tensor *xhat = bw_op2(b, TL_OP_DIV, bw_op2(b, TL_OP_SUB, x, per_channel(b, mean, x)), per_channel(b, r, x));
        gxh = bw_sum_axes(b, bw_op2(b, TL_OP_MUL, g, xhat), na, axes, false);
    }
    tl_tensor *gx = want[0] || want[3] ? bw_op2(b, TL_OP_MUL, g, sr) : NULL;
    if (want[0])
        out[0] = gx;
    if (want[1])
        out[1] = gxh;
    if (want[2])
        out[2] = bw_sum_axes(b, g, na, axes, false);
    if (want[3])
        out[3] = bw_op1(b, TL_OP_NEG, bw_sum_axes(b, gx, na, axes, false));
    if (want[4]) {
        tl_tensor *h = bw_op2(b, TL_OP_DIV, bw_op2(b, TL_OP_MUL, gxh, scale),
                              bw_op2(b, TL_OP_MUL, ve, bw_num(b, ve, -2)));
        out[4] = h;
    }
}

/* layer_norm: dx from one fused kernel; dscale = sum(g*xhat) and
 * dbias = sum(g) over the leading axes from another, without a tensor of
 * x's size in between. */
static void layer_norm_rule(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                            tl_tensor **out)
{
    tl_tensor *x = e->in[0];
    if (e->nin > 1 && (want[1] || (e->nin > 2 && want[2]))) {
        tl_tensor *in[2] = {x, g}, *p = bw_call(b, TL_OP_LAYER_NORM_PARAMS_GRAD, 2, in, a);
        int nd = x->ndim - (int)a->axis;
        for (int i = 1; i < e->nin; i++)
            if (want[i])
                out[i] = bw_reshape(b, bw_slice(b, p, 0, i - 1, i), nd, x->shape + a->axis);
    }
    if (want[0]) { /* g's last use: a row of it is read whole before dx's is written */
        tl_tensor *in[3] = {x, g, e->nin > 1 ? e->in[1] : NULL};
        out[0] = bw_call_over(b, TL_OP_LAYER_NORM_GRAD, e->nin > 1 ? 3 : 2, in, a, 1);
    }
}

/* group_norm is layer_norm over x viewed as [N*groups, rest], then a
 * scale and bias per channel: dx is layer_norm_grad there of g*scale;
 * dscale and dbias are sums over every axis but the channels. */
static void group_norm_rule(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                            tl_tensor **out)
{
    tl_tensor *x = e->in[0];
    int64_t axes[TL_MAXDIM];
    int na = not_channels(x, axes);
    if (want[0]) {
        tl_tensor *gs = e->nin > 1 ? bw_op2(b, TL_OP_MUL, g, per_channel(b, e->in[1], x)) : g;
        int64_t ng = x->shape[0] * a->groups, rows[2] = {ng, ng ? x->numel / ng : 0};
        tl_attrs ln;
        tl_attrs_init(&ln);
        ln.has_axis = true;
        ln.axis = 1;
        ln.epsilon = a->epsilon;
        tl_tensor *in[2] = {bw_reshape(b, x, 2, rows), bw_reshape(b, gs, 2, rows)};
        tl_tensor *dx = tl_bw_twice(b) ? tl_bw_layer_norm_dx(b, in[0], in[1], NULL, 1, a->epsilon)
                                       : bw_call(b, TL_OP_LAYER_NORM_GRAD, 2, in, &ln);
        out[0] = bw_reshape(b, dx, x->ndim, x->shape);
    }
    if (e->nin > 1 && want[1])
        out[1] = bw_sum_axes(b, bw_op2(b, TL_OP_MUL, g, bw_call(b, TL_OP_GROUP_NORM, 1, &x, a)), na, axes, false);
    if (e->nin > 2 && want[2])
        out[2] = bw_sum_axes(b, g, na, axes, false);
}

void tl_rule_norm(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out)
{
    switch (e->op) {
    case TL_OP_BATCH_NORM: batch_norm_rule(b, e, a, want, g, out); return;
    case TL_OP_LAYER_NORM: layer_norm_rule(b, e, a, want, g, out); return;
    default: group_norm_rule(b, e, a, want, g, out); return;
    }
}
