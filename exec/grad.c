/* Backward rules, each written with the same op interface as the forward
 * (tl_op), so they run wherever the forward ran.  Each rule reads like its
 * formula in ops.md; temporaries are collected in a `bw` scope and dropped
 * at the end, so an error anywhere simply yields NULL down the chain. */
#include <stdlib.h>
#include <string.h>

#include "backends/mprog.h"
#include "nn.h"
#include "shape.h"
#include "tape.h"

static tl_tensor *keep(bw *b, tl_tensor *t)
{
    if (!t) {
        b->failed = true;
        return NULL;
    }
    if (b->ntmp == b->cap) {
        int cap = 2 * b->cap;
        tl_tensor **p = b->tmp == b->small ? malloc(sizeof *p * (size_t)cap)
                                           : realloc(b->tmp, sizeof *p * (size_t)cap);
        if (p && b->tmp == b->small)
            memcpy(p, b->small, sizeof b->small);
        if (!p) {
            tl_fail(b->st, TL_ERUNTIME, "out of memory in a backward rule");
            tl_tensor_unref(t);
            b->failed = true;
            return NULL;
        }
        b->tmp = p;
        b->cap = cap;
    }
    return b->tmp[b->ntmp++] = t;
}

static tl_tensor *call(bw *b, tl_opcode op, int n, tl_tensor **in, const tl_attrs *a)
{
    for (int i = 0; i < n; i++)
        if (!in[i] || b->failed)
            return NULL;
    return keep(b, b->rec ? b->rec->op(b->rec, op, n, in, a, b->st) : tl_op(b->cx, op, n, in, a, b->st));
}

static tl_tensor *op1(bw *b, tl_opcode op, tl_tensor *x) { return call(b, op, 1, &x, NULL); }

static tl_tensor *op2(bw *b, tl_opcode op, tl_tensor *x, tl_tensor *y)
{
    tl_tensor *in[2] = {x, y};
    return call(b, op, 2, in, NULL);
}

static tl_tensor *op3(bw *b, tl_opcode op, tl_tensor *x, tl_tensor *y, tl_tensor *z)
{
    tl_tensor *in[3] = {x, y, z};
    return call(b, op, 3, in, NULL);
}

/* A 0-d constant in the dtype of `like`. */
static tl_tensor *num(bw *b, const tl_tensor *like, double v)
{
    if (!like || b->failed)
        return NULL;
    return keep(b, b->rec ? b->rec->num(b->rec, like->dtype, v, b->st)
                          : tl_ctx_scalar(b->cx, like->dtype, v, b->st));
}

/* reshape or broadcast_to: an op whose attribute is a target shape. */
static tl_tensor *to_shape(bw *b, tl_opcode op, tl_tensor *x, int ndim, const int64_t *shape)
{
    tl_attrs a;
    tl_attrs_init(&a);
    a.nshape = ndim;
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return call(b, op, 1, &x, &a);
}

static tl_tensor *reshape(bw *b, tl_tensor *x, int ndim, const int64_t *shape)
{
    return to_shape(b, TL_OP_RESHAPE, x, ndim, shape);
}

static tl_tensor *sum_axes(bw *b, tl_tensor *x, int naxes, const int64_t *axes, bool keepdims)
{
    tl_attrs a;
    tl_attrs_init(&a);
    a.has_axes = true;
    a.naxes = naxes;
    memcpy(a.axes, axes, sizeof(int64_t) * (size_t)naxes);
    a.keepdims = keepdims;
    return call(b, TL_OP_SUM, 1, &x, &a);
}

/* Sums g over the axes along which x was broadcast, back to x's shape. */
static tl_tensor *sum_to(bw *b, tl_tensor *g, const tl_tensor *x)
{
    if (!g || b->failed)
        return NULL;
    if (tl_same_shape(g, x))
        return g;
    int64_t axes[TL_MAXDIM];
    int n = 0, lead = g->ndim - x->ndim;
    for (int d = 0; d < g->ndim; d++)
        if (d < lead || (x->shape[d - lead] == 1 && g->shape[d] != 1))
            axes[n++] = d;
    return reshape(b, sum_axes(b, g, n, axes, true), x->ndim, x->shape);
}

/* The reduced output's cotangent with the reduced axes kept as size 1. */
static tl_tensor *keepdims(bw *b, tl_tensor *g, const tl_tensor *x, const tl_attrs *a)
{
    int64_t shape[TL_MAXDIM];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < a->naxes; i++)
        shape[a->axes[i]] = 1;
    return reshape(b, g, x->ndim, shape);
}

static tl_tensor *expand(bw *b, tl_tensor *g, const tl_tensor *x, const tl_attrs *a)
{
    return to_shape(b, TL_OP_BROADCAST_TO, keepdims(b, g, x, a), x->ndim, x->shape);
}

static tl_tensor *softmax_sum(bw *b, tl_tensor *t, const tl_attrs *a)
{
    return sum_axes(b, t, 1, &a->axis, true);
}

/* prod over arbitrary axes: move them last, flatten to [outer, r], use the
 * fused prod_grad kernel, and undo the moves. */
static tl_tensor *prod_rule(bw *b, tl_tensor *g, tl_tensor *x, const tl_attrs *a)
{
    tl_attrs perm;
    tl_attrs_init(&perm);
    bool red[TL_MAXDIM] = {false};
    int64_t outer = 1, r = 1, pshape[TL_MAXDIM];
    for (int i = 0; i < a->naxes; i++)
        red[a->axes[i]] = true;
    perm.has_axes = true;
    perm.naxes = x->ndim;
    for (int pass = 0, k = 0; pass < 2; pass++)
        for (int d = 0; d < x->ndim; d++)
            if (red[d] == (pass == 1)) {
                perm.axes[k] = d;
                pshape[k++] = x->shape[d];
                *(pass ? &r : &outer) *= x->shape[d];
            }
    bool moved = false; /* the reduced axes already last: no moves */
    for (int d = 0; d < x->ndim; d++)
        moved = moved || perm.axes[d] != d;
    tl_tensor *xp = moved ? call(b, TL_OP_TRANSPOSE, 1, &x, &perm) : x;
    tl_tensor *x2 = reshape(b, xp, 2, (int64_t[]){outer, r});
    tl_tensor *g1 = reshape(b, g, 1, &outer);
    tl_tensor *p2 = tl_bw_twice(b) ? tl_bw_prod_others(b, x2, g1) : op2(b, TL_OP_PROD_GRAD, x2, g1);
    tl_tensor *p = reshape(b, p2, x->ndim, pshape);
    tl_attrs inv;
    tl_attrs_init(&inv);
    inv.has_axes = true;
    inv.naxes = x->ndim;
    for (int d = 0; d < x->ndim; d++)
        inv.axes[perm.axes[d]] = d;
    return moved ? call(b, TL_OP_TRANSPOSE, 1, &p, &inv) : p;
}

/* matmul: promote 1-D operands to matrices, then gA = g B^T, gB = A^T g
 * through gemm transpose flags, summed over broadcast batch axes. */
/* A header that carries a dtype and a shape, no data: what sum_to needs
 * of the tensor whose shape it restores. */
static tl_tensor shape_only(const tl_tensor *like, int ndim, const int64_t *shape)
{
    tl_tensor t = {.refs = 1, .dtype = like->dtype, .ndim = ndim};
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return t;
}

/* matmul: promote 1-D operands to matrices, then gA = g B^T, gB = A^T g
 * through gemm transpose flags, summed over broadcast batch axes.  A is
 * read only for gB and B only for gA (the tape may keep just the shape of
 * the other). */
static void matmul_rule(bw *b, tl_tensor *g, tl_tensor *A, tl_tensor *B, const tl_attrs *a,
                        const bool *want, tl_tensor **ga, tl_tensor **gb)
{
    tl_tensor *g2 = g;
    int64_t shape[TL_MAXDIM];
    tl_tensor as = A->ndim == 1 ? shape_only(A, 2, (int64_t[]){1, A->shape[0]}) : shape_only(A, A->ndim, A->shape);
    tl_tensor bs = B->ndim == 1 ? shape_only(B, 2, (int64_t[]){B->shape[0], 1}) : shape_only(B, B->ndim, B->shape);
    if (A->ndim == 1 || B->ndim == 1) {
        int nd = g->ndim;
        memcpy(shape, g->shape, sizeof(int64_t) * (size_t)nd);
        if (A->ndim == 1 && B->ndim == 1) { /* a dot product: g is 0-d */
            shape[0] = shape[1] = 1;
            nd = 2;
        } else if (A->ndim == 1) { /* re-insert the row axis before the last */
            shape[nd] = shape[nd - 1];
            shape[nd - 1] = 1;
            nd++;
        } else {
            shape[nd++] = 1; /* the column axis */
        }
        g2 = reshape(b, g, nd, shape);
    }
    /* with transpose flags (a recorded backward's own products): C =
     * op(A) op(B), so gA = g op(B)^T, or its transpose when A is used
     * transposed, and likewise gB */
    bool ta = a->trans_a, tb = a->trans_b;
    tl_attrs f;
    if (want[0]) {
        tl_tensor *b2 = B->ndim == 1 ? reshape(b, B, bs.ndim, bs.shape) : B;
        tl_tensor *in[2] = {ta ? b2 : g2, ta ? g2 : b2};
        tl_attrs_init(&f);
        f.trans_a = ta && tb;
        f.trans_b = ta || !tb;
        *ga = reshape(b, sum_to(b, call(b, TL_OP_MATMUL, 2, in, &f), &as), A->ndim, A->shape);
    }
    if (want[1]) {
        tl_tensor *a2 = A->ndim == 1 ? reshape(b, A, as.ndim, as.shape) : A;
        tl_tensor *in[2] = {tb ? g2 : a2, tb ? a2 : g2};
        tl_attrs_init(&f);
        f.trans_a = tb || !ta;
        f.trans_b = tb && ta;
        *gb = reshape(b, sum_to(b, call(b, TL_OP_MATMUL, 2, in, &f), &bs), B->ndim, B->shape);
    }
}

/* Whether only the last of n inputs wants a gradient. */
static bool only_last(const bool *want, int n)
{
    for (int i = 0; i < n - 1; i++)
        if (want[i])
            return false;
    return n > 1 && want[n - 1];
}

static tl_tensor *slice_along(bw *b, tl_tensor *g, int64_t axis, int64_t start, int64_t stop)
{
    tl_attrs a;
    tl_attrs_init(&a);
    a.axis = axis;
    a.has_start = a.has_stop = true;
    a.start = start;
    a.stop = stop;
    return call(b, TL_OP_SLICE, 1, &g, &a);
}

/* ---------- the scope's helpers for the rules of other files (bw.h) ---------- */

tl_tensor *bw_call(bw *b, tl_opcode op, int n, tl_tensor **in, const tl_attrs *a) { return call(b, op, n, in, a); }
tl_tensor *bw_call_over(bw *b, tl_opcode op, int n, tl_tensor **in, const tl_attrs *a, int k)
{
    if (b->rec) /* a recording keeps every value it was given */
        return call(b, op, n, in, a);
    for (int i = 0; i < n; i++)
        if (!in[i] || b->failed)
            return NULL;
    return keep(b, tl_op_over(b->cx, op, n, in, a, k, b->st));
}
tl_tensor *bw_op1(bw *b, tl_opcode op, tl_tensor *x) { return op1(b, op, x); }
tl_tensor *bw_op2(bw *b, tl_opcode op, tl_tensor *x, tl_tensor *y) { return op2(b, op, x, y); }
tl_tensor *bw_op3(bw *b, tl_opcode op, tl_tensor *x, tl_tensor *y, tl_tensor *z) { return op3(b, op, x, y, z); }
tl_tensor *bw_num(bw *b, const tl_tensor *like, double v) { return num(b, like, v); }
tl_tensor *bw_reshape(bw *b, tl_tensor *x, int ndim, const int64_t *shape) { return reshape(b, x, ndim, shape); }
tl_tensor *bw_broadcast(bw *b, tl_tensor *x, int ndim, const int64_t *shape)
{
    return to_shape(b, TL_OP_BROADCAST_TO, x, ndim, shape);
}
tl_tensor *bw_sum_axes(bw *b, tl_tensor *x, int naxes, const int64_t *axes, bool keepdims)
{
    return sum_axes(b, x, naxes, axes, keepdims);
}
tl_tensor *bw_sum_to(bw *b, tl_tensor *g, const tl_tensor *x) { return sum_to(b, g, x); }
tl_tensor *bw_slice(bw *b, tl_tensor *g, int64_t axis, int64_t start, int64_t stop)
{
    return slice_along(b, g, axis, start, stop);
}
tl_tensor *bw_transpose(bw *b, tl_tensor *x, int naxes, const int64_t *perm)
{
    tl_attrs t;
    tl_attrs_init(&t);
    t.has_axes = true;
    t.naxes = naxes;
    memcpy(t.axes, perm, sizeof(int64_t) * (size_t)naxes);
    return call(b, TL_OP_TRANSPOSE, 1, &x, &t);
}

/* Fills out[i] for each input that wants a gradient. */
static void rule(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                 tl_tensor **out)
{
    tl_tensor *x = e->in[0], *y = e->out, *w = e->nin > 1 ? e->in[1] : NULL;
    if (tl_rule_twice(b, e, a, want, g, out))
        return;
    tl_tensor *zero = num(b, g, 0), *ga = NULL, *gb = NULL;
    switch (e->op) {
    /* a binary rule computes only the gradients wanted: the tape may have
     * kept only the shape of an operand the other one does not need */
    case TL_OP_ADD: ga = g; gb = g; break;
    case TL_OP_SUB:
        ga = g;
        if (want[1])
            gb = op1(b, TL_OP_NEG, g);
        break;
    case TL_OP_MUL:
        if (want[0])
            ga = op2(b, TL_OP_MUL, g, w);
        if (want[1])
            gb = op2(b, TL_OP_MUL, g, x);
        break;
    case TL_OP_DIV: /* -g * ((a/b)/b), as torch */
        if (want[0])
            ga = op2(b, TL_OP_DIV, g, w);
        if (want[1])
            gb = op2(b, TL_OP_MUL, op1(b, TL_OP_NEG, g), op2(b, TL_OP_DIV, y, w));
        break;
    case TL_OP_POW: {
        /* recorded to be differentiated again, the masked places read a
         * base of 1: the where sends them a cotangent of 0, and 0 times the
         * infinite partial of a^(b-1) or log a at a = 0 would be NaN */
        bool twice = tl_bw_twice(b);
        if (want[0]) { /* g * b * a^(b-1), 0 where b == 0 */
            tl_tensor *b0 = op2(b, TL_OP_EQ, w, zero), *base = twice ? op3(b, TL_OP_WHERE, b0, num(b, x, 1), x) : x;
            ga = op3(b, TL_OP_WHERE, b0, zero,
                     op2(b, TL_OP_MUL, g,
                         op2(b, TL_OP_MUL, w, op2(b, TL_OP_POW, base, op2(b, TL_OP_SUB, w, num(b, w, 1))))));
        }
        if (want[1]) { /* g * a^b * log a, 0 where a == 0 and b >= 0 */
            tl_tensor *a0 = op2(b, TL_OP_MUL, op2(b, TL_OP_EQ, x, zero), op2(b, TL_OP_GE, w, zero));
            tl_tensor *base = twice ? op3(b, TL_OP_WHERE, a0, num(b, x, 1), x) : x;
            gb = op3(b, TL_OP_WHERE, a0, zero, op2(b, TL_OP_MUL, g, op2(b, TL_OP_MUL, y, op1(b, TL_OP_LOG, base))));
        }
        break;
    }
    case TL_OP_MAXIMUM:
    case TL_OP_MINIMUM: { /* winner takes g, a tie gives each g/2 */
        tl_opcode lose_a = e->op == TL_OP_MAXIMUM ? TL_OP_LT : TL_OP_GT;
        tl_opcode lose_b = e->op == TL_OP_MAXIMUM ? TL_OP_GT : TL_OP_LT;
        tl_tensor *tie = op2(b, TL_OP_EQ, x, w), *half = op2(b, TL_OP_DIV, g, num(b, g, 2));
        ga = op3(b, TL_OP_WHERE, tie, half, op3(b, TL_OP_WHERE, op2(b, lose_a, x, w), zero, g));
        gb = op3(b, TL_OP_WHERE, tie, half, op3(b, TL_OP_WHERE, op2(b, lose_b, x, w), zero, g));
        break;
    }
    case TL_OP_NEG: ga = op1(b, TL_OP_NEG, g); break;
    case TL_OP_ABS: ga = op2(b, TL_OP_MUL, g, op1(b, TL_OP_SIGN, x)); break;
    case TL_OP_EXP: ga = op2(b, TL_OP_MUL, g, y); break;
    case TL_OP_EXPM1: ga = op2(b, TL_OP_MUL, g, op2(b, TL_OP_ADD, y, num(b, y, 1))); break;
    case TL_OP_LOG: ga = op2(b, TL_OP_DIV, g, x); break;
    case TL_OP_LOG1P: ga = op2(b, TL_OP_DIV, g, op2(b, TL_OP_ADD, x, num(b, x, 1))); break;
    case TL_OP_SQRT: ga = op2(b, TL_OP_DIV, g, op2(b, TL_OP_MUL, y, num(b, y, 2))); break;
    case TL_OP_RSQRT: /* -g/2 * y^3 */
        ga = op2(b, TL_OP_MUL, op2(b, TL_OP_MUL, g, num(b, g, -0.5)),
                 op2(b, TL_OP_MUL, op1(b, TL_OP_SQUARE, y), y));
        break;
    case TL_OP_RECIPROCAL: ga = op2(b, TL_OP_MUL, op1(b, TL_OP_NEG, g), op1(b, TL_OP_SQUARE, y)); break;
    case TL_OP_SQUARE: ga = op2(b, TL_OP_MUL, g, op2(b, TL_OP_MUL, x, num(b, x, 2))); break;
    case TL_OP_SIN: ga = op2(b, TL_OP_MUL, g, op1(b, TL_OP_COS, x)); break;
    case TL_OP_COS: ga = op2(b, TL_OP_MUL, g, op1(b, TL_OP_NEG, op1(b, TL_OP_SIN, x))); break;
    case TL_OP_TAN: ga = op2(b, TL_OP_MUL, g, op2(b, TL_OP_ADD, num(b, y, 1), op1(b, TL_OP_SQUARE, y))); break;
    case TL_OP_TANH: ga = op2(b, TL_OP_MUL, g, op2(b, TL_OP_SUB, num(b, y, 1), op1(b, TL_OP_SQUARE, y))); break;
    case TL_OP_SIGMOID:
        ga = op2(b, TL_OP_MUL, op2(b, TL_OP_MUL, g, op2(b, TL_OP_SUB, num(b, y, 1), y)), y);
        break;
    case TL_OP_ERF: /* g * 2/sqrt(pi) * exp(-x^2) */
        ga = op2(b, TL_OP_MUL, g,
                 op2(b, TL_OP_MUL, num(b, x, 1.12837916709551257390),
                     op1(b, TL_OP_EXP, op1(b, TL_OP_NEG, op1(b, TL_OP_SQUARE, x)))));
        break;
    case TL_OP_RELU: { /* from y: y > 0 exactly where x > 0 (a NaN neither), so x may go */
        tl_tensor *in[2] = {y, g};
        if (b->rec && !b->rec->twice) /* a fused backward program: elementwise ops only */
            ga = op3(b, TL_OP_WHERE, op2(b, TL_OP_GT, y, zero), g, zero);
        else /* g's last use, read elementwise */
            ga = bw_call_over(b, TL_OP_RELU_GRAD, 2, in, NULL, 1);
        break;
    }
    case TL_OP_SOFTPLUS: ga = op2(b, TL_OP_MUL, g, op1(b, TL_OP_SIGMOID, x)); break;
    case TL_OP_GELU: {
        tl_tensor *in[2] = {x, g};
        ga = call(b, TL_OP_GELU_GRAD, 2, in, a);
        break;
    }
    case TL_OP_SILU: { /* g * s * (1 + x * (1 - s)) */
        tl_tensor *s = op1(b, TL_OP_SIGMOID, x), *one = num(b, x, 1);
        ga = op2(b, TL_OP_MUL, g,
                 op2(b, TL_OP_MUL, s, op2(b, TL_OP_ADD, one, op2(b, TL_OP_MUL, x, op2(b, TL_OP_SUB, one, s)))));
        break;
    }
    case TL_OP_FMOD: /* a - trunc(a/b)*b: g to a, -g*trunc(a/b) to b, as torch.fmod */
    case TL_OP_MOD:  /* a - floor(a/b)*b: g to a, -g*floor(a/b) to b, as torch.remainder */
        ga = g;
        if (want[1])
            gb = op2(b, TL_OP_MUL, op1(b, TL_OP_NEG, g),
                     op1(b, e->op == TL_OP_FMOD ? TL_OP_TRUNC : TL_OP_FLOOR, op2(b, TL_OP_DIV, x, w)));
        break;
    case TL_OP_SINH: ga = op2(b, TL_OP_MUL, g, op1(b, TL_OP_COSH, x)); break;
    case TL_OP_COSH: ga = op2(b, TL_OP_MUL, g, op1(b, TL_OP_SINH, x)); break;
    case TL_OP_ASIN: /* g/sqrt(1 - x^2) */
    case TL_OP_ACOS: { /* -g/sqrt(1 - x^2) */
        tl_tensor *d = op1(b, TL_OP_SQRT, op2(b, TL_OP_SUB, num(b, x, 1), op1(b, TL_OP_SQUARE, x)));
        ga = op2(b, TL_OP_DIV, e->op == TL_OP_ASIN ? g : op1(b, TL_OP_NEG, g), d);
        break;
    }
    /* atan and acosh square x as x*x, as torch does: the same value, but
     * its derivative g*x + g*x stays 0 where g is 0 and x beyond sqrt of
     * the largest number (square's g*(2x) is 0*inf = NaN there; torch's
     * asinh has square's) */
    case TL_OP_ATAN: ga = op2(b, TL_OP_DIV, g, op2(b, TL_OP_ADD, op2(b, TL_OP_MUL, x, x), num(b, x, 1))); break;
    case TL_OP_ASINH: /* g/sqrt(x^2 + 1) */
    case TL_OP_ACOSH: /* g/sqrt(x^2 - 1) */
        ga = op2(b, TL_OP_DIV, g,
                 op1(b, TL_OP_SQRT, op2(b, e->op == TL_OP_ASINH ? TL_OP_ADD : TL_OP_SUB,
                                        e->op == TL_OP_ASINH ? op1(b, TL_OP_SQUARE, x) : op2(b, TL_OP_MUL, x, x),
                                        num(b, x, 1))));
        break;
    case TL_OP_ATANH: ga = op2(b, TL_OP_DIV, g, op2(b, TL_OP_SUB, num(b, x, 1), op1(b, TL_OP_SQUARE, x))); break;
    case TL_OP_CLAMP: { /* g where min <= x <= max, and x is not NaN */
        /* a bound's comparison is already false at NaN: eq(x, x), the
         * NaN test, only where there is none (two passes fewer in each
         * ReLU6's backward; the same mask, 1 or 0) */
        tl_tensor *in = a->has_min ? op2(b, TL_OP_GE, x, num(b, x, a->min)) : NULL;
        if (a->has_max) {
            tl_tensor *le = op2(b, TL_OP_LE, x, num(b, x, a->max));
            in = in ? op2(b, TL_OP_MUL, in, le) : le;
        }
        if (!in)
            in = op2(b, TL_OP_EQ, x, x); /* 1 except at NaN */
        ga = op3(b, TL_OP_WHERE, in, g, zero);
        break;
    }
    case TL_OP_CAST: {
        tl_attrs c;
        tl_attrs_init(&c);
        c.dtype = x->dtype;
        ga = call(b, TL_OP_CAST, 1, &g, &c);
        break;
    }
    case TL_OP_WHERE: {
        tl_tensor *z = num(b, g, 0);
        if (want[1])
            out[1] = sum_to(b, op3(b, TL_OP_WHERE, x, g, z), w);
        if (want[2])
            out[2] = sum_to(b, op3(b, TL_OP_WHERE, x, z, g), e->in[2]);
        return;
    }
    case TL_OP_SUM: ga = expand(b, g, x, a); break;
    case TL_OP_MEAN: {
        double count = 1;
        for (int i = 0; i < a->naxes; i++)
            count *= (double)x->shape[a->axes[i]];
        ga = op2(b, TL_OP_DIV, expand(b, g, x, a), num(b, g, count));
        break;
    }
    case TL_OP_MAX:
    case TL_OP_MIN: { /* split evenly among the tied extremes */
        tl_tensor *mask = op2(b, TL_OP_EQ, x, keepdims(b, y, x, a));
        tl_tensor *cnt = sum_axes(b, mask, a->naxes, a->axes, true);
        ga = op2(b, TL_OP_MUL, mask, op2(b, TL_OP_DIV, keepdims(b, g, x, a), cnt));
        break;
    }
    case TL_OP_PROD: ga = prod_rule(b, g, x, a); break;
    case TL_OP_LOGSUMEXP:
        ga = op2(b, TL_OP_MUL, keepdims(b, g, x, a),
                 op1(b, TL_OP_EXP, op2(b, TL_OP_SUB, x, keepdims(b, y, x, a))));
        break;
    case TL_OP_SOFTMAX: /* y * (g - sum(g*y)) */
        ga = op2(b, TL_OP_MUL, y, op2(b, TL_OP_SUB, g, softmax_sum(b, op2(b, TL_OP_MUL, g, y), a)));
        break;
    case TL_OP_LOG_SOFTMAX: /* g - exp(y) * sum(g) */
        ga = op2(b, TL_OP_SUB, g, op2(b, TL_OP_MUL, op1(b, TL_OP_EXP, y), softmax_sum(b, g, a)));
        break;
    case TL_OP_MATMUL: matmul_rule(b, g, x, w, a, want, &out[0], &out[1]); return;
    case TL_OP_RESHAPE:
    case TL_OP_EXPAND_DIMS:
    case TL_OP_SQUEEZE: ga = reshape(b, g, x->ndim, x->shape); break;
    case TL_OP_TRANSPOSE: {
        tl_attrs inv;
        tl_attrs_init(&inv);
        inv.has_axes = true;
        inv.naxes = a->naxes;
        for (int d = 0; d < a->naxes; d++)
            inv.axes[a->axes[d]] = d;
        ga = call(b, TL_OP_TRANSPOSE, 1, &g, &inv);
        break;
    }
    case TL_OP_BROADCAST_TO: ga = sum_to(b, g, x); break;
    case TL_OP_CONCAT:
    case TL_OP_STACK:
        for (int i = 0, at = 0; i < e->nin; i++) {
            int64_t len = e->op == TL_OP_STACK ? 1 : e->in[i]->shape[a->axis];
            if (want[i]) {
                tl_tensor *s = slice_along(b, g, a->axis, at, at + len);
                out[i] = reshape(b, s, e->in[i]->ndim, e->in[i]->shape);
            }
            at += (int)len;
        }
        return;
    case TL_OP_SLICE:
    case TL_OP_TAKE:
    case TL_OP_GATHER: { /* scatter g back into zeros of x's shape (with the indices) */
        static const tl_opcode scatter[] = {[TL_OP_SLICE] = TL_OP_SLICE_GRAD,
                                            [TL_OP_TAKE] = TL_OP_TAKE_GRAD,
                                            [TL_OP_GATHER] = TL_OP_GATHER_GRAD};
        tl_attrs s = *a;
        s.nshape = x->ndim;
        memcpy(s.shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        tl_tensor *in[2] = {g, w};
        ga = call(b, scatter[e->op], e->nin, in, &s);
        break;
    }
    case TL_OP_MAP:
        if (a->prog && a->prog->linear_last && only_last(want, e->nin)) {
            /* g * f'(x) again with the cotangent for g: the same map */
            tl_tensor *small[8], **in = e->nin <= 8 ? small : tl_malloc((size_t)e->nin, sizeof *in, "map gradients", b->st);
            if (!in) {
                b->failed = true;
                return;
            }
            memcpy(in, e->in, sizeof *in * (size_t)(e->nin - 1));
            in[e->nin - 1] = g;
            out[e->nin - 1] = sum_to(b, call(b, TL_OP_MAP, e->nin, in, a), e->in[e->nin - 1]);
            if (in != small)
                free(in);
            return;
        }
        if (tl_bw_twice(b)) { /* for each input, a map of g * the body's derivative */
            tl_attrs m = *a;
            m.want = NULL;
            tl_tensor *small[8], **in = e->nin < 8 ? small : tl_malloc((size_t)e->nin + 1, sizeof *in, "map gradients", b->st);
            if (!in) {
                b->failed = true;
                return;
            }
            memcpy(in, e->in, sizeof *in * (size_t)e->nin);
            in[e->nin] = g;
            for (int i = 0; i < e->nin; i++)
                if (want[i]) {
                    if (!(m.prog = tl_map_derivative_times(a->prog, i, b->st))) {
                        b->failed = true;
                        break;
                    }
                    out[i] = sum_to(b, call(b, TL_OP_MAP, e->nin + 1, in, &m), e->in[i]);
                }
            if (in != small)
                free(in);
            return;
        }
        { /* one derivative kernel: [k, shape], row j for the j-th wanted input */
        tl_tensor **in = tl_malloc((size_t)e->nin + 1, sizeof *in + sizeof(bool), "map gradients", b->st);
        if (!in) {
            b->failed = true;
            return;
        }
        bool *want_in = (bool *)(in + e->nin + 1);
        tl_attrs m = *a;
        m.want = want_in;
        for (int i = 0; i < e->nin; i++) {
            want_in[i] = want[i];
            in[i] = e->in[i];
        }
        in[e->nin] = g;
        tl_tensor *d = call(b, TL_OP_MAP_GRAD, e->nin + 1, in, &m);
        int nwant = 0;
        for (int i = 0; i < e->nin; i++)
            nwant += want_in[i];
        for (int i = 0, j = 0; i < e->nin; i++)
            if (want_in[i]) { /* one row: d's data as it is (a reshape copies nothing) */
                tl_tensor *row = reshape(b, nwant == 1 ? d : slice_along(b, d, 0, j, j + 1), g->ndim, g->shape);
                out[i] = sum_to(b, row, e->in[i]);
                j++;
            }
        free(in);
        return;
    }
    case TL_OP_CONV:
    case TL_OP_CONV_TRANSPOSE: tl_rule_conv(b, e, a, want, g, out); return;
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL: tl_rule_pool(b, e, a, want, g, out); return;
    case TL_OP_BATCH_NORM:
    case TL_OP_LAYER_NORM:
    case TL_OP_GROUP_NORM: tl_rule_norm(b, e, a, want, g, out); return;
    case TL_OP_PAD:
    case TL_OP_RESIZE: tl_rule_resample(b, e, a, want, g, out); return;
    case TL_OP_SCATTER_ADD:
    case TL_OP_CUMSUM: tl_rule_scatter(b, e, a, want, g, out); return;
    case TL_OP_DROPOUT: tl_rule_random(b, e, a, want, g, out); return;
    default: /* comparisons, sign, detach, floor, ceil, round, trunc, isnan, isinf,
              * argmax, draws: no gradient */
        return;
    }
    if (want[0])
        out[0] = sum_to(b, ga, x);
    if (e->nin > 1 && want[1])
        out[1] = sum_to(b, gb, w);
}

unsigned tl_grad_reads(tl_opcode op, int nin, const int *in_var, const tl_attrs *attrs)
{
    enum { IN0 = 1, IN1 = 2, IN2 = 4, OUT = TL_GRAD_READS_OUT };
    bool w0 = in_var[0] >= 0, w1 = nin > 1 && in_var[1] >= 0;
    switch (op) {
    case TL_OP_ADD:
    case TL_OP_SUB:
    case TL_OP_NEG:
    case TL_OP_CAST:
    case TL_OP_SUM:
    case TL_OP_MEAN:
    case TL_OP_RESHAPE:
    case TL_OP_EXPAND_DIMS:
    case TL_OP_SQUEEZE:
    case TL_OP_TRANSPOSE:
    case TL_OP_BROADCAST_TO:
    case TL_OP_CONCAT:
    case TL_OP_STACK:
    case TL_OP_SLICE: return 0;
    case TL_OP_MUL: return (w0 ? IN1 : 0) | (w1 ? IN0 : 0);
    case TL_OP_MATMUL: return (w0 ? IN1 : 0) | (w1 ? IN0 : 0);
    case TL_OP_DROPOUT: /* the mask is drawn again from the key */
    case TL_OP_CUMSUM: return 0;
    case TL_OP_SCATTER_ADD: return IN1; /* the indices, for gather */
    case TL_OP_CONV: /* gx reads w, gw reads x, gb neither */
    case TL_OP_CONV_TRANSPOSE: return (w0 ? IN1 : 0) | (w1 ? IN0 : 0);
    case TL_OP_DIV: return IN1 | (w1 ? OUT : 0);
    case TL_OP_POW: return IN0 | IN1 | (w1 ? OUT : 0);
    case TL_OP_MAXIMUM:
    case TL_OP_MINIMUM: return IN0 | IN1;
    case TL_OP_FMOD:
    case TL_OP_MOD: return w1 ? IN0 | IN1 : 0;
    case TL_OP_SINH:
    case TL_OP_COSH:
    case TL_OP_ASIN:
    case TL_OP_ACOS:
    case TL_OP_ATAN:
    case TL_OP_ASINH:
    case TL_OP_ACOSH:
    case TL_OP_ATANH:
    case TL_OP_ABS:
    case TL_OP_LOG:
    case TL_OP_LOG1P:
    case TL_OP_SQUARE:
    case TL_OP_SIN:
    case TL_OP_COS:
    case TL_OP_ERF:
    case TL_OP_SOFTPLUS:
    case TL_OP_GELU:
    case TL_OP_SILU:
    case TL_OP_CLAMP:
    case TL_OP_PROD:
    case TL_OP_WHERE: return IN0;
    case TL_OP_RELU:
    case TL_OP_EXP:
    case TL_OP_EXPM1:
    case TL_OP_SQRT:
    case TL_OP_RSQRT:
    case TL_OP_RECIPROCAL:
    case TL_OP_TAN:
    case TL_OP_TANH:
    case TL_OP_SIGMOID:
    case TL_OP_SOFTMAX:
    case TL_OP_LOG_SOFTMAX: return OUT;
    case TL_OP_MAX:
    case TL_OP_MIN:
    case TL_OP_LOGSUMEXP: return IN0 | OUT;
    case TL_OP_TAKE:
    case TL_OP_GATHER: return nin > 1 ? IN1 : 0;
    /* the kernels a recorded backward calls (their rules: grad2.c); a
     * scatter's adjoint reads its indices alone, so a per-step take in a
     * long iterate keeps no full-size cotangent per step */
    case TL_OP_TAKE_GRAD:
    case TL_OP_GATHER_GRAD: return nin > 1 ? IN1 : 0;
    case TL_OP_SLICE_GRAD:
    case TL_OP_AVG_POOL_GRAD:
    case TL_OP_PAD_GRAD:
    case TL_OP_RESIZE_GRAD: return 0;
    case TL_OP_RELU_GRAD:
    case TL_OP_MAX_POOL_GRAD:
    case TL_OP_MAX_POOL_PICK: return IN0;
    case TL_OP_GELU_GRAD: return IN0 | IN1;
    case TL_OP_CONV_GRAD_W: return (w0 ? IN1 : 0) | (w1 ? IN0 : 0);
    /* the layer ops (exec/nn_*.c): never their output, nor a bias */
    case TL_OP_LAYER_NORM:
    case TL_OP_GROUP_NORM: return IN0 | IN1;
    case TL_OP_BATCH_NORM: return IN0 | IN1 | 8 | 16; /* x, scale, mean, var */
    case TL_OP_MAX_POOL: return IN0;
    case TL_OP_AVG_POOL:
    case TL_OP_PAD:
    case TL_OP_RESIZE: return 0; /* x's shape alone */
    case TL_OP_MAP: /* its inputs (never its output); a derivative times a
                     * cotangent wanted only for the cotangent, the others */
        if (attrs && attrs->prog && attrs->prog->linear_last && nin > 1 && nin - 1 < 30) {
            bool others = false;
            for (int i = 0; i < nin - 1; i++)
                others = others || in_var[i] >= 0;
            if (!others)
                return ~(unsigned)TL_GRAD_READS_OUT & ~(1u << (nin - 1));
        }
        return ~(unsigned)TL_GRAD_READS_OUT;
    default: return ~0u; /* the rest: everything */
    }
}

tl_code tl_grad_rule(tl_ctx *cx, const tl_entry *e, tl_tensor *g, tl_tensor **gin, tl_status *st)
{
    return tl_grad_rule_with(cx, NULL, e, g, gin, st);
}

tl_code tl_grad_rule_with(tl_ctx *cx, tl_grad_recorder *rec, const tl_entry *e, tl_tensor *g,
                          tl_tensor **gin, tl_status *st)
{
    bw b = {.cx = cx, .rec = rec, .st = st, .cap = (int)(sizeof b.small / sizeof *b.small)};
    b.tmp = b.small;
    tl_attrs a;
    const tl_attrs *use = e->attrs ? e->attrs : &tl_attrs_default;
    tl_shape sh;
    /* the attributes as the forward saw them, after normalisation (none
     * for the elementwise ops, the most common by far) */
    if (!tl_shape_reads_no_attrs(e->op)) {
        a = *use;
        if (tl_shape_infer(e->op, e->nin, (const tl_tensor *const *)e->in, &a, &sh, st))
            return st->code;
        use = &a;
    }
    bool small[16] = {false}, *want = e->nin <= 16 ? small : tl_malloc((size_t)e->nin, 1, "a mask", st);
    if (!want)
        return st->code;
    for (int i = 0; i < e->nin; i++)
        want[i] = e->in_var[i] >= 0;
    rule(&b, e, use, want, g, gin);
    if (want != small)
        free(want);
    for (int i = 0; i < e->nin; i++)
        gin[i] = b.failed ? NULL : tl_tensor_ref(gin[i]);
    for (int i = 0; i < b.ntmp; i++)
        tl_tensor_unref(b.tmp[i]);
    if (b.tmp != b.small)
        free(b.tmp);
    if (b.failed)
        return st->code ? st->code : tl_fail(st, TL_ERUNTIME, "internal: backward rule failed");
    return TL_OK;
}
