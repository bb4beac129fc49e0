/* Shape and backward rules of convolution (nn.md): conv, conv_transpose
 * and the weight-gradient kernel conv_grad_w.
 *
 * conv_grad_w(a, b) is the one weight gradient of both: with a the tensor
 * on the convolution's input side [N, Ca, *Sa] and b the one on its output
 * side [N, Cb, *Sb],
 *     gw[o, c, k] = sum over n, p of b[n, o, p] * a[n, G(o) Ca/groups + c, p*stride - pad_lo + k*dilation]
 * (zero outside a), gw of shape attrs.shape = [Cb, Ca/groups, *K] and G(o)
 * the group of output channel o.  conv's weight gradient is
 * conv_grad_w(x, g); conv_transpose's, whose input x is on the output side
 * of the convolution it transposes, is conv_grad_w(g, x).  So no flag is
 * needed: the roles are in the order of the arguments. */
#include "nn.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

/* "[2, 2]": n integers, for messages. */
static const char *ints_text(const int64_t *v, int n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}

/* Sizes past this are absurd (tl_shape_numel's limit): refused before any
 * arithmetic on them can overflow. */
#define SIZE_LIMIT ((int64_t)1 << 60)

static tl_code same_dtypes(int n, const tl_tensor *const *in, const char *const *names, tl_status *st)
{
    for (int i = 1; i < n; i++)
        if (in[i]->dtype != in[0]->dtype)
            return tl_fail(st, TL_EINPUT, "dtypes differ: %s %s, %s %s", names[0], DESC(in[0]), names[i],
                           DESC(in[i]));
    return TL_OK;
}

/* The convolution's output size along one axis from its input size s. */
static tl_code conv_size(const tl_attrs *a, int i, int64_t s, int64_t k, int64_t *o, const char *what,
                         const tl_tensor *x, tl_status *st)
{
    __int128 padded = (__int128)s + a->pad_lo[i] + a->pad_hi[i];
    __int128 span = (__int128)a->dilation[i] * (k - 1) + 1; /* the dilated kernel */
    if (padded < span)
        return tl_fail(st, TL_EINPUT,
                       "the kernel (%lld with dilation %lld) is larger than the padded %s %s on spatial axis %d "
                       "(%lld + padding %lld + %lld)",
                       (long long)k, (long long)a->dilation[i], what, DESC(x), i, (long long)s,
                       (long long)a->pad_lo[i], (long long)a->pad_hi[i]);
    *o = (int64_t)((padded - span) / a->stride[i] + 1);
    return TL_OK;
}

/* conv_transpose's output size along one axis. */
static tl_code transposed_size(const tl_attrs *a, int i, int64_t s, int64_t k, int64_t *o,
                               const tl_tensor *x, tl_status *st)
{
    __int128 v = ((__int128)s - 1) * a->stride[i] - a->pad_lo[i] - a->pad_hi[i] +
                 (__int128)a->dilation[i] * (k - 1) + a->out_pad[i] + 1;
    if (v < 1)
        return tl_fail(st, TL_EINPUT,
                       "output size %lld below 1 on spatial axis %d of x %s (stride %lld, padding %lld + %lld, "
                       "kernel %lld, dilation %lld, output_padding %lld)",
                       (long long)(v < -SIZE_LIMIT ? -SIZE_LIMIT : v), i, DESC(x), (long long)a->stride[i],
                       (long long)a->pad_lo[i], (long long)a->pad_hi[i], (long long)k,
                       (long long)a->dilation[i], (long long)a->out_pad[i]);
    if (v > SIZE_LIMIT)
        return tl_fail(st, TL_EINPUT, "output size too large on spatial axis %d of x %s", i, DESC(x));
    *o = (int64_t)v;
    return TL_OK;
}

/* Every spatial attribute within SIZE_LIMIT (so sizes in __int128 stay
 * exact and the results are checked against the limit). */
static tl_code check_limits(const tl_attrs *a, tl_status *st)
{
    static const char *const names[] = {"stride", "dilation", "output_padding", "padding", "padding"};
    for (int i = 0; i < a->nsp; i++) {
        const int64_t v[] = {a->stride[i], a->dilation[i], a->out_pad[i], a->pad_lo[i], a->pad_hi[i]};
        for (int j = 0; j < 5; j++)
            if (v[j] > SIZE_LIMIT)
                return tl_fail(st, TL_EINPUT, "attribute \"%s\" %lld is too large", names[j], (long long)v[j]);
    }
    return TL_OK;
}

/* x, w and b of conv or conv_transpose. */
static tl_code shape_forward(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                             tl_status *st)
{
    static const char *const names[] = {"x", "w", "b"};
    bool tr = op == TL_OP_CONV_TRANSPOSE;
    const tl_tensor *x = in[0], *w = in[1], *b = n > 2 ? in[2] : NULL;
    if (tl_nn_check_layout(x, "x", st) || same_dtypes(n, in, names, st))
        return st->code;
    int d = x->ndim - 2;
    int64_t cin = x->shape[1], groups = a->groups;
    if (w->ndim != x->ndim)
        return tl_fail(st, TL_EINPUT, "w must be [%s, %s/groups, *kernel] with the %d spatial axes of x %s, got %s",
                       tr ? "Cin" : "Cout", tr ? "Cout" : "Cin", d, DESC(x), DESC(w));
    for (int i = 0; i < w->ndim; i++)
        if (w->shape[i] == 0)
            return tl_fail(st, TL_EINPUT, "w %s has a zero size", DESC(w));
    if (cin % groups)
        return tl_fail(st, TL_EINPUT, "groups=%lld does not divide the %lld channels of x %s", (long long)groups,
                       (long long)cin, DESC(x));
    int64_t cout;
    if (!tr) {
        if (w->shape[1] != cin / groups)
            return tl_fail(st, TL_EINPUT, "w %s must have Cin/groups = %lld/%lld = %lld on axis 1 (x %s)", DESC(w),
                           (long long)cin, (long long)groups, (long long)(cin / groups), DESC(x));
        if (w->shape[0] % groups)
            return tl_fail(st, TL_EINPUT, "groups=%lld does not divide the %lld output channels of w %s",
                           (long long)groups, (long long)w->shape[0], DESC(w));
        cout = w->shape[0];
    } else {
        if (w->shape[0] != cin)
            return tl_fail(st, TL_EINPUT, "w %s must have the %lld channels of x %s on axis 0", DESC(w),
                           (long long)cin, DESC(x));
        if (w->shape[1] > SIZE_LIMIT / groups)
            return tl_fail(st, TL_EINPUT, "w %s with groups=%lld: too many output channels", DESC(w),
                           (long long)groups);
        cout = w->shape[1] * groups;
    }
    if (b && (b->ndim != 1 || b->shape[0] != cout))
        return tl_fail(st, TL_EINPUT, "b must be [%lld] (the output channels), got %s", (long long)cout, DESC(b));
    a->nkernel = d;
    for (int i = 0; i < d; i++)
        a->kernel[i] = w->shape[2 + i];
    if (tl_nn_spatial(x, a, false, st) || check_limits(a, st))
        return st->code;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    out->dims[0] = x->shape[0];
    out->dims[1] = cout;
    for (int i = 0; i < d; i++) {
        if (!tr) {
            a->out_pad[i] = 0; /* not conv's: a rule's copy of conv_transpose's */
            if (conv_size(a, i, x->shape[2 + i], a->kernel[i], &out->dims[2 + i], "x", x, st))
                return st->code;
        } else {
            if (a->out_pad[i] >= a->stride[i] && a->out_pad[i] >= a->dilation[i])
                return tl_fail(st, TL_EINPUT,
                               "output_padding %lld on spatial axis %d must be smaller than the stride (%lld) "
                               "or the dilation (%lld)",
                               (long long)a->out_pad[i], i, (long long)a->stride[i], (long long)a->dilation[i]);
            if (transposed_size(a, i, x->shape[2 + i], a->kernel[i], &out->dims[2 + i], x, st))
                return st->code;
        }
    }
    int64_t numel;
    if (!tl_shape_numel(out->ndim, out->dims, &numel, st))
        return TL_OK;
    char o[160], p[320] = "[", s[160], dl[160];
    for (int i = 0; i < d; i++)
        snprintf(p + strlen(p), sizeof p - strlen(p), "%s[%lld, %lld]", i ? ", " : "", (long long)a->pad_lo[i],
                 (long long)a->pad_hi[i]);
    strcat(p, "]");
    return tl_append(st, ": the result %s, from x %s with padding %s, stride %s and dilation %s",
                     tl_shape_desc(out->dtype, out->ndim, out->dims, o, sizeof o), DESC(x), p,
                     ints_text(a->stride, d, s, sizeof s), ints_text(a->dilation, d, dl, sizeof dl));
}

/* conv_grad_w(a, b): attrs are conv's, normalised, with shape = w's. */
static tl_code shape_grad_w(const tl_tensor *const *in, tl_attrs *a, tl_shape *out, tl_status *st)
{
    static const char *const names[] = {"a", "g"};
    const tl_tensor *x = in[0], *g = in[1];
    if (tl_nn_check_layout(x, "a", st) || tl_nn_check_layout(g, "g", st) || same_dtypes(2, in, names, st))
        return st->code;
    int d = x->ndim - 2;
    if (g->ndim != x->ndim || g->shape[0] != x->shape[0] || a->nshape != x->ndim || a->groups < 1 ||
        a->shape[0] != g->shape[1] || x->shape[1] % a->groups || a->shape[1] != x->shape[1] / a->groups ||
        g->shape[1] % a->groups)
        return tl_fail(st, TL_EINPUT, "conv_grad_w: a %s and g %s do not fit a weight of %d dimensions, groups=%lld",
                       DESC(x), DESC(g), a->nshape, (long long)a->groups);
    a->nkernel = d;
    for (int i = 0; i < d; i++)
        a->kernel[i] = a->shape[2 + i];
    if (tl_nn_spatial(x, a, false, st) || check_limits(a, st))
        return st->code;
    for (int i = 0; i < d; i++) {
        int64_t o;
        if (conv_size(a, i, x->shape[2 + i], a->kernel[i], &o, "a", x, st))
            return st->code;
        if (g->shape[2 + i] > o)
            return tl_fail(st, TL_EINPUT, "conv_grad_w: g %s has more positions than the convolution of a %s gives",
                           DESC(g), DESC(x));
    }
    out->dtype = x->dtype;
    out->ndim = a->nshape;
    memcpy(out->dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
    int64_t numel;
    return tl_shape_numel(out->ndim, out->dims, &numel, st);
}

tl_code tl_shape_conv(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st)
{
    if (op == TL_OP_CONV_GRAD_W)
        return shape_grad_w(in, a, out, st);
    return shape_forward(op, n, in, a, out, st);
}

/* 1x1, stride 1, no padding */
static bool pointwise(const tl_attrs *a)
{
    for (int i = 0; i < a->nsp; i++)
        if (a->kernel[i] != 1 || a->stride[i] != 1 || a->pad_lo[i] || a->pad_hi[i])
            return false;
    return true;
}

/* conv:  gx = conv_transpose(g, w) with the output_padding that gives x's
 *        size back, gw = conv_grad_w(x, g);
 * conv_transpose: gx = conv(g, w) (cut to x's size where output_padding
 *        reached past the stride), gw = conv_grad_w(g, x);
 * both:  gb = g summed over the batch and the spatial axes. */
void tl_rule_conv(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out)
{
    tl_tensor *x = e->in[0], *w = e->in[1];
    bool tr = e->op == TL_OP_CONV_TRANSPOSE;
    int d = a->nsp;
    /* no elements on one side: nothing to add up (and the convolutions
     * back may have no valid size) */
    bool empty = x->numel == 0 || g->numel == 0;
    if (empty) {
        tl_tensor *zero = bw_num(b, g, 0);
        if (want[0])
            out[0] = bw_broadcast(b, zero, x->ndim, x->shape);
        if (want[1])
            out[1] = bw_broadcast(b, zero, w->ndim, w->shape);
    }
    if (want[1] && !empty) {
        tl_attrs t = *a;
        tl_tensor *in[2] = {tr ? g : x, tr ? x : g};
        t.nshape = w->ndim;
        memcpy(t.shape, w->shape, sizeof(int64_t) * (size_t)w->ndim);
        out[1] = bw_call(b, TL_OP_CONV_GRAD_W, 2, in, &t);
    }
    if (e->nin > 2 && want[2]) {
        int64_t axes[TL_MAXDIM];
        int na = 0;
        for (int i = 0; i < g->ndim; i++)
            if (i != 1)
                axes[na++] = i;
        out[2] = bw_sum_axes(b, g, na, axes, false);
    }
    if (want[0] && !empty) {
        tl_attrs t = *a;
        tl_tensor *in[2] = {g, w};
        t.nout_pad = d;
        for (int i = 0; i < d; i++) /* conv: what the floor of the output size dropped */
            t.out_pad[i] = tr ? 0
                              : (x->shape[2 + i] + a->pad_lo[i] + a->pad_hi[i] - a->dilation[i] * (a->kernel[i] - 1) - 1) %
                                    a->stride[i];
        /* a pointwise conv's gx over g, g's last use (gw and gb have read
         * it): the kernel copies each sample's g before writing there */
        tl_tensor *gx = !tr && pointwise(a) ? bw_call_over(b, TL_OP_CONV_TRANSPOSE, 2, in, &t, 0)
                                            : bw_call(b, tr ? TL_OP_CONV : TL_OP_CONV_TRANSPOSE, 2, in, &t);
        for (int i = 0; gx && i < d; i++)
            if (gx->shape[2 + i] != x->shape[2 + i])
                gx = bw_slice(b, gx, 2 + i, 0, x->shape[2 + i]);
        out[0] = gx;
    }
}
