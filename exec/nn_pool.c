/* Shape and backward rules of pooling (nn.md): max_pool and avg_pool over
 * x [N, C, *S], with PyTorch's output sizes, and their backward kernels
 * max_pool_grad(x, g) -> x's shape (the argmax of each window recomputed
 * from x) and avg_pool_grad(g) -> attrs.shape. */
#include "nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

/* The output size of every spatial axis, PyTorch's rule
 * (pooling_output_shape_pad_lr): floor or ceil of
 * (S + lo + hi - dilation*(K-1) - 1) / stride, plus 1, where in ceil mode
 * the last window must start inside the input or its left padding.
 * Padding above half the kernel, and a kernel (dilated) longer than the
 * padded input, are errors. */
static tl_code out_sizes(const tl_tensor *x, const tl_attrs *a, int64_t *osz, tl_status *st)
{
    for (int i = 0; i < a->nsp; i++) {
        int64_t S = x->shape[2 + i], K = a->kernel[i], s = a->stride[i], dl = a->dilation[i];
        int64_t lo = a->pad_lo[i], hi = a->pad_hi[i], padded, span;
        if (K < 1 || s < 1 || dl < 1)
            return tl_fail(st, TL_EINPUT, "\"%s\" must be at least 1 on every axis, got %lld (spatial axis %d)",
                           K < 1 ? "kernel" : s < 1 ? "stride" : "dilation",
                           (long long)(K < 1 ? K : s < 1 ? s : dl), i);
        if (lo < 0 || hi < 0 || lo > K / 2 || hi > K / 2)
            return tl_fail(st, TL_EINPUT, "\"padding\" [%lld, %lld] on spatial axis %d must be at most half the "
                           "kernel %lld", (long long)lo, (long long)hi, i, (long long)K);
        if (S < 1)
            return tl_fail(st, TL_EINPUT, "x %s has an empty spatial axis %d", DESC(x), i);
        if (__builtin_add_overflow(S, lo + hi, &padded) || __builtin_mul_overflow(dl, K - 1, &span) ||
            span >= padded)
            return tl_fail(st, TL_EINPUT, "the kernel %lld (dilation %lld) is larger than spatial axis %d of x "
                           "%s padded by [%lld, %lld]: the output would be empty", (long long)K, (long long)dl,
                           i, DESC(x), (long long)lo, (long long)hi);
        int64_t num = padded - span - 1, o = num / s + 1;
        if (a->ceil_mode && num % s) {
            o++;
            if ((o - 1) > (S + lo - 1) / s) /* the last window would start in the right padding */
                o--;
        }
        osz[i] = o;
    }
    return TL_OK;
}

/* x (or a tensor of attrs.shape for avg_pool_grad) normalised with its
 * attributes, and the pooled shape into out. */
static tl_code pooled(const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    if (!a->nkernel)
        return tl_fail(st, TL_EINPUT, "missing attribute \"kernel\"");
    if (tl_nn_spatial(x, a, true, st) || out_sizes(x, a, out->dims + 2, st))
        return st->code;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    out->dims[0] = x->shape[0];
    out->dims[1] = x->shape[1];
    return TL_OK;
}

/* g must have the pooled shape of x. */
static tl_code check_g(const tl_tensor *g, const tl_shape *want, const tl_tensor *x, tl_status *st)
{
    char w[96];
    if (g->dtype == want->dtype && g->ndim == want->ndim &&
        !memcmp(g->shape, want->dims, sizeof(int64_t) * (size_t)g->ndim))
        return TL_OK;
    tl_shape_desc(want->dtype, want->ndim, want->dims, w, sizeof w);
    return tl_fail(st, TL_EINPUT, "g is %s, expected %s (x %s)", DESC(g), w, DESC(x));
}

tl_code tl_shape_pool(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st)
{
    (void)n;
    const char *name = tl_ops[op].name;
    switch (op) {
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL: return pooled(in[0], a, out, st);
    case TL_OP_MAX_POOL_GRAD: { /* (x, g) -> x's shape */
        if (pooled(in[0], a, out, st) || check_g(in[1], out, in[0], st))
            return st->code;
        out->ndim = in[0]->ndim;
        memcpy(out->dims, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
        return TL_OK;
    }
    case TL_OP_MAX_POOL_PICK: /* (x, v of x's shape) -> the pooled shape */
        if (pooled(in[0], a, out, st))
            return st->code;
        if (in[1]->dtype != in[0]->dtype || !tl_same_shape(in[1], in[0]))
            return tl_fail(st, TL_EINPUT, "v is %s, expected x's shape and dtype (x %s)", DESC(in[1]), DESC(in[0]));
        return TL_OK;
    case TL_OP_AVG_POOL_GRAD: { /* (g) -> attrs.shape */
        tl_tensor x = {.dtype = in[0]->dtype, .ndim = a->nshape};
        memcpy(x.shape, a->shape, sizeof(int64_t) * (size_t)a->nshape);
        if (pooled(&x, a, out, st) || check_g(in[0], out, &x, st))
            return st->code;
        out->ndim = x.ndim;
        memcpy(out->dims, x.shape, sizeof(int64_t) * (size_t)x.ndim);
        return TL_OK;
    }
    default: return tl_fail(st, TL_ERUNTIME, "internal: %s is no pool", name);
    }
}

void tl_rule_pool(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out)
{
    if (!want[0])
        return;
    tl_tensor *x = e->in[0];
    if (e->op == TL_OP_MAX_POOL) { /* all of g to each window's first maximum */
        tl_tensor *in[2] = {x, g};
        /* over x where the tape held its last reference (an input the run
         * was given, or a value no later rule reads): the kernel reads a
         * plane of x whole before it writes that plane of dx */
        out[0] = bw_call_over(b, TL_OP_MAX_POOL_GRAD, 2, in, a, 0);
        return;
    }
    tl_attrs s = *a; /* g spread over each window's counted elements */
    s.nshape = x->ndim;
    memcpy(s.shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    out[0] = bw_call(b, TL_OP_AVG_POOL_GRAD, 1, &g, &s);
}

/* The decisions of a max_pool call for tl gradcheck: each window's
 * argmax (its first maximum, or its last NaN), in window order.  x is a
 * host tensor; a the node's attributes. */
uint64_t tl_nn_max_pool_print(const tl_tensor *x, const tl_attrs *attrs,
                              uint64_t (*mix)(uint64_t, uint64_t))
{
    tl_attrs a = *attrs;
    tl_shape sh;
    tl_status st = {0};
    if (pooled(x, &a, &sh, &st))
        return 0;
    int64_t in[3] = {1, 1, 1}, o[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, dl[3] = {1, 1, 1},
            lo[3] = {0, 0, 0};
    for (int i = 0, j = 3 - a.nsp; i < a.nsp; i++, j++) {
        in[j] = x->shape[2 + i], o[j] = sh.dims[2 + i], k[j] = a.kernel[i], s[j] = a.stride[i];
        dl[j] = a.dilation[i], lo[j] = a.pad_lo[i];
    }
    int64_t planes = x->shape[0] * x->shape[1], plane = in[0] * in[1] * in[2];
    uint64_t h = 0;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t od = 0; od < o[0]; od++)
            for (int64_t oh = 0; oh < o[1]; oh++)
                for (int64_t ow = 0; ow < o[2]; ow++) {
                    double m = -INFINITY;
                    int64_t at = -1;
                    for (int64_t kd = 0; kd < k[0]; kd++)
                        for (int64_t kh = 0; kh < k[1]; kh++)
                            for (int64_t kw = 0; kw < k[2]; kw++) {
                                int64_t id = od * s[0] - lo[0] + kd * dl[0], ih = oh * s[1] - lo[1] + kh * dl[1],
                                        iw = ow * s[2] - lo[2] + kw * dl[2];
                                if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2])
                                    continue;
                                int64_t e = (id * in[1] + ih) * in[2] + iw;
                                double v = tl_tensor_get(x, p * plane + e);
                                if (at < 0 || v > m || v != v)
                                    m = v, at = e;
                            }
                    h = mix(h, (uint64_t)at);
                }
    return h;
}
