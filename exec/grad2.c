/* Second derivatives: the backward rules of the kernels that backward
 * rules call (slice_grad, take_grad, gather_grad, gelu_grad, the layer
 * ops' backward kernels), for a backward pass that was itself recorded
 * (exec/record.c), and the compositions of differentiable ops that a
 * recording pullback uses in place of the kernels that have no rule of
 * their own (prod_grad, layer_norm_grad, layer_norm_params_grad).
 * Each kernel here is linear in its cotangent, so its rule is mostly the
 * forward op it undoes. */
#include <string.h>

#include "nn.h"

bool tl_bw_twice(const bw *b) { return b->rec && b->rec->twice; }

/* A backward kernel's attributes without the target shape it carries:
 * those of the forward op it is the backward of. */
static tl_attrs forward_attrs(const tl_attrs *a)
{
    tl_attrs s = *a;
    s.nshape = 0;
    return s;
}

/* gelu''(x): phi(x) * (2 - x^2) exactly; with the tanh approximation
 * gelu(x) = x/2 * (1 + t), t = tanh(u), u = c (x + k x^3):
 * gelu'' = (1 - t^2) * (u' - x t u'^2 + x u''/2). */
static tl_tensor *gelu_second(bw *b, tl_tensor *x, int approx)
{
    tl_tensor *x2 = bw_op1(b, TL_OP_SQUARE, x);
    if (!approx) {
        tl_tensor *phi = bw_op2(b, TL_OP_MUL, bw_num(b, x, 0.39894228040143267794),
                                bw_op1(b, TL_OP_EXP, bw_op2(b, TL_OP_MUL, x2, bw_num(b, x, -0.5))));
        return bw_op2(b, TL_OP_MUL, phi, bw_op2(b, TL_OP_SUB, bw_num(b, x, 2), x2));
    }
    const double c = 0.79788456080286535588, k = 0.044715;
    tl_tensor *u = bw_op2(b, TL_OP_MUL, bw_num(b, x, c),
                          bw_op2(b, TL_OP_ADD, x, bw_op2(b, TL_OP_MUL, bw_num(b, x, k), bw_op2(b, TL_OP_MUL, x2, x))));
    tl_tensor *t = bw_op1(b, TL_OP_TANH, u);
    tl_tensor *up = bw_op2(b, TL_OP_MUL, bw_num(b, x, c),
                           bw_op2(b, TL_OP_ADD, bw_num(b, x, 1), bw_op2(b, TL_OP_MUL, bw_num(b, x, 3 * k), x2)));
    tl_tensor *upp = bw_op2(b, TL_OP_MUL, bw_num(b, x, 6 * c * k), x);
    tl_tensor *in = bw_op2(b, TL_OP_ADD,
                           bw_op2(b, TL_OP_SUB, up, bw_op2(b, TL_OP_MUL, bw_op2(b, TL_OP_MUL, x, t), bw_op1(b, TL_OP_SQUARE, up))),
                           bw_op2(b, TL_OP_MUL, bw_op2(b, TL_OP_MUL, x, upp), bw_num(b, x, 0.5)));
    return bw_op2(b, TL_OP_MUL, bw_op2(b, TL_OP_SUB, bw_num(b, x, 1), bw_op1(b, TL_OP_SQUARE, t)), in);
}

/* conv_grad_w(p, q) = the weight gradient of conv(p, w) = q: bilinear, so
 * with the weight's cotangent gw, <gw, conv_grad_w(p, q)> = <q, conv(p, gw)>:
 * q gets conv(p, gw) (cut to q's size) and p conv's input gradient of q
 * through gw. */
static void conv_grad_w_rule(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *gw,
                             tl_tensor **out)
{
    tl_tensor *p = e->in[0], *q = e->in[1];
    tl_attrs c = forward_attrs(a);
    c.nout_pad = 0;
    memset(c.out_pad, 0, sizeof c.out_pad);
    if (want[0]) {
        /* conv(p, gw) is longer than q where q is a transposed convolution's
         * input and its output padding reached a stride (the rule for q
         * below cuts it): q's cotangent is that output's, zeros past q */
        tl_tensor *qf = q;
        for (int i = 0; qf && i < c.nsp; i++) {
            int64_t n = (p->shape[2 + i] + c.pad_lo[i] + c.pad_hi[i] - c.dilation[i] * (c.kernel[i] - 1) - 1) /
                            c.stride[i] + 1;
            if (n <= qf->shape[2 + i])
                continue;
            tl_attrs s;
            tl_attrs_init(&s);
            s.axis = 2 + i;
            s.has_start = s.has_stop = true;
            s.start = 0;
            s.stop = qf->shape[2 + i];
            s.nshape = qf->ndim;
            memcpy(s.shape, qf->shape, sizeof(int64_t) * (size_t)qf->ndim);
            s.shape[2 + i] = n;
            qf = bw_call(b, TL_OP_SLICE_GRAD, 1, &qf, &s);
        }
        tl_tensor *in[2] = {p, gw};
        tl_entry conv = {.op = TL_OP_CONV, .nin = 2, .in = in};
        bool w[2] = {true, false};
        tl_tensor *r[2] = {NULL, NULL};
        if (qf)
            tl_rule_conv(b, &conv, &c, w, qf, r);
        out[0] = r[0];
    }
    if (want[1]) {
        tl_tensor *in[2] = {p, gw}, *y = bw_call(b, TL_OP_CONV, 2, in, &c);
        for (int i = 2; y && i < q->ndim; i++)
            if (y->shape[i] != q->shape[i])
                y = bw_slice(b, y, i, 0, q->shape[i]);
        out[1] = y;
    }
}

/* The axes from `axis` to the last, and those before it. */
static int tail_axes(const tl_tensor *x, int64_t axis, int64_t *tail, int64_t *lead, int *nlead)
{
    int n = 0;
    *nlead = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d >= axis)
            tail[n++] = d;
        else
            lead[(*nlead)++] = d;
    return n;
}

/* xhat = (x - mean) / sqrt(var + eps) over the axes from `axis`, and
 * 1/sqrt(var + eps) (keepdims), as ops. */
static tl_tensor *normalized(bw *b, tl_tensor *x, int64_t axis, double eps, tl_tensor **rstd)
{
    int64_t tail[TL_MAXDIM], lead[TL_MAXDIM];
    int nl, nt = tail_axes(x, axis, tail, lead, &nl);
    tl_attrs m;
    tl_attrs_init(&m);
    m.has_axes = m.keepdims = true;
    m.naxes = nt;
    memcpy(m.axes, tail, sizeof(int64_t) * (size_t)nt);
    tl_tensor *xc = bw_op2(b, TL_OP_SUB, x, bw_call(b, TL_OP_MEAN, 1, &x, &m));
    tl_tensor *sq = bw_op1(b, TL_OP_SQUARE, xc);
    tl_tensor *var = bw_call(b, TL_OP_MEAN, 1, &sq, &m);
    *rstd = bw_op1(b, TL_OP_RSQRT, bw_op2(b, TL_OP_ADD, var, bw_num(b, x, eps)));
    return bw_op2(b, TL_OP_MUL, xc, *rstd);
}

tl_tensor *tl_bw_layer_norm_dx(bw *b, tl_tensor *x, tl_tensor *g, tl_tensor *scale, int64_t axis, double eps)
{
    int64_t tail[TL_MAXDIM], lead[TL_MAXDIM];
    int nl, nt = tail_axes(x, axis, tail, lead, &nl);
    tl_tensor *rstd, *xhat = normalized(b, x, axis, eps, &rstd);
    tl_tensor *gh = scale ? bw_op2(b, TL_OP_MUL, g, scale) : g;
    tl_attrs m;
    tl_attrs_init(&m);
    m.has_axes = m.keepdims = true;
    m.naxes = nt;
    memcpy(m.axes, tail, sizeof(int64_t) * (size_t)nt);
    tl_tensor *gx = bw_op2(b, TL_OP_MUL, gh, xhat);
    tl_tensor *mg = bw_call(b, TL_OP_MEAN, 1, &gh, &m), *mgx = bw_call(b, TL_OP_MEAN, 1, &gx, &m);
    return bw_op2(b, TL_OP_MUL, rstd,
                  bw_op2(b, TL_OP_SUB, bw_op2(b, TL_OP_SUB, gh, mg), bw_op2(b, TL_OP_MUL, xhat, mgx)));
}

/* layer_norm's gradients to scale (sum(g*xhat)) and bias (sum(g)) over the
 * leading axes, as ops. */
static void layer_norm_params(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                              tl_tensor **out)
{
    tl_tensor *x = e->in[0];
    int64_t tail[TL_MAXDIM], lead[TL_MAXDIM];
    int nl;
    tail_axes(x, a->axis, tail, lead, &nl);
    if (want[1]) {
        tl_tensor *rstd, *xhat = normalized(b, x, a->axis, a->epsilon, &rstd);
        out[1] = bw_sum_axes(b, bw_op2(b, TL_OP_MUL, g, xhat), nl, lead, false);
    }
    if (e->nin > 2 && want[2])
        out[2] = bw_sum_axes(b, g, nl, lead, false);
}

/* prod_{j != i} x[o, j] for x [outer, r], times g[o]: the product of x
 * with its i-th element replaced by 1, by a mask of the diagonal. */
tl_tensor *tl_bw_prod_others(bw *b, tl_tensor *x2, tl_tensor *g1)
{
    if (!x2 || b->failed)
        return NULL;
    int64_t outer = x2->shape[0], r = x2->shape[1];
    tl_tensor *ones = bw_broadcast(b, bw_num(b, x2, 1), 1, &r);
    tl_attrs cs;
    tl_attrs_init(&cs);
    cs.has_axis = true;
    cs.axis = 0;
    cs.exclusive = true;
    tl_tensor *iota = bw_call(b, TL_OP_CUMSUM, 1, &ones, &cs);
    tl_tensor *eye = bw_op2(b, TL_OP_EQ, bw_reshape(b, iota, 2, (int64_t[]){r, 1}),
                            bw_reshape(b, iota, 2, (int64_t[]){1, r}));
    tl_tensor *x3 = bw_broadcast(b, bw_reshape(b, x2, 3, (int64_t[]){outer, 1, r}), 3, (int64_t[]){outer, r, r});
    tl_tensor *m = bw_op3(b, TL_OP_WHERE, eye, bw_num(b, x2, 1), x3);
    tl_attrs last;
    tl_attrs_init(&last);
    last.has_axes = true;
    last.naxes = 1;
    last.axes[0] = 2;
    tl_tensor *pe = bw_call(b, TL_OP_PROD, 1, &m, &last);
    return bw_op2(b, TL_OP_MUL, bw_reshape(b, g1, 2, (int64_t[]){outer, 1}), pe);
}

/* The ops tl_rule_twice has a rule for (the rest: false at once, before
 * an attribute record is copied: most calls are for other ops). */
static bool has_twice_rule(tl_opcode op)
{
    switch (op) {
    case TL_OP_SLICE_GRAD:
    case TL_OP_TAKE_GRAD:
    case TL_OP_GATHER_GRAD:
    case TL_OP_RELU_GRAD:
    case TL_OP_GELU_GRAD:
    case TL_OP_AVG_POOL_GRAD:
    case TL_OP_PAD_GRAD:
    case TL_OP_RESIZE_GRAD:
    case TL_OP_CONV_GRAD_W:
    case TL_OP_MAX_POOL_GRAD:
    case TL_OP_MAX_POOL_PICK:
    case TL_OP_LAYER_NORM: return true;
    default: return false;
    }
}

bool tl_rule_twice(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g, tl_tensor **out)
{
    if (!has_twice_rule(e->op))
        return false;
    tl_attrs s = forward_attrs(a);
    switch (e->op) {
    case TL_OP_SLICE_GRAD: /* a scatter into zeros: its adjoint is the slice */
        if (want[0])
            out[0] = bw_call(b, TL_OP_SLICE, 1, &g, &s);
        return true;
    case TL_OP_TAKE_GRAD:
    case TL_OP_GATHER_GRAD: /* scatter-adds: their adjoints are take and gather */
        if (want[0]) {
            tl_tensor *in[2] = {g, e->nin > 1 ? e->in[1] : NULL};
            out[0] = bw_call(b, e->op == TL_OP_TAKE_GRAD ? TL_OP_TAKE : TL_OP_GATHER, e->nin, in, &s);
        }
        return true;
    case TL_OP_RELU_GRAD: /* (x, g): linear in g, piecewise constant in x */
        if (want[1]) {
            tl_tensor *in[2] = {e->in[0], g};
            out[1] = bw_sum_to(b, bw_call(b, TL_OP_RELU_GRAD, 2, in, a), e->in[1]);
        }
        return true;
    case TL_OP_GELU_GRAD: { /* gelu_grad(x, c) = c * gelu'(x) */
        tl_tensor *x = e->in[0], *c = e->in[1];
        if (want[0])
            out[0] = bw_sum_to(b, bw_op2(b, TL_OP_MUL, bw_op2(b, TL_OP_MUL, g, c), gelu_second(b, x, a->approximate)), x);
        if (want[1]) {
            tl_tensor *in[2] = {x, g};
            out[1] = bw_sum_to(b, bw_call(b, TL_OP_GELU_GRAD, 2, in, a), c);
        }
        return true;
    }
    case TL_OP_AVG_POOL_GRAD: /* the transpose of a linear map: the map */
        if (want[0])
            out[0] = bw_call(b, TL_OP_AVG_POOL, 1, &g, &s);
        return true;
    case TL_OP_PAD_GRAD:
        s.value = 0;
        if (want[0])
            out[0] = bw_call(b, TL_OP_PAD, 1, &g, &s);
        return true;
    case TL_OP_RESIZE_GRAD:
        if (want[0])
            out[0] = bw_call(b, TL_OP_RESIZE, 1, &g, &s);
        return true;
    case TL_OP_CONV_GRAD_W: conv_grad_w_rule(b, e, a, want, g, out); return true;
    case TL_OP_MAX_POOL_GRAD: /* (x, g): linear in g, piecewise constant in x */
    case TL_OP_MAX_POOL_PICK: /* (x, v): the same selection, transposed */
        if (want[1]) {
            tl_tensor *in[2] = {e->in[0], g};
            out[1] = bw_call(b, e->op == TL_OP_MAX_POOL_GRAD ? TL_OP_MAX_POOL_PICK : TL_OP_MAX_POOL_GRAD, 2, in, a);
        }
        return true;
    case TL_OP_LAYER_NORM:
        if (!tl_bw_twice(b))
            return false;
        if (want[0])
            out[0] = tl_bw_layer_norm_dx(b, e->in[0], g, e->nin > 1 ? e->in[1] : NULL, a->axis, a->epsilon);
        if (e->nin > 1)
            layer_norm_params(b, e, a, want, g, out);
        return true;
    default: return false;
    }
}
