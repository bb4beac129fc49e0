/* The scope a backward rule runs in (exec/grad.c), for the rules of other
 * files (exec/nn_*.c): every call goes through the op interface (tl_op,
 * or the recorder when the backward pass is itself recorded), every
 * result is kept in the scope and dropped at its end, and a NULL anywhere
 * simply yields NULL down the chain (the first error is in b->st). */
#ifndef TL_BW_H
#define TL_BW_H

#include "tape.h"

typedef struct bw {
    tl_ctx *cx;
    tl_grad_recorder *rec; /* non-NULL: ops are recorded, not run */
    tl_status *st;
    tl_tensor **tmp; /* the rule's temporaries: first in small, then on the heap */
    int ntmp, cap;
    bool failed;
    tl_tensor *small[16];
} bw;

/* op(in[0..n-1]) with attributes a (NULL: defaults). */
tl_tensor *bw_call(bw *b, tl_opcode op, int n, tl_tensor **in, const tl_attrs *a);
/* bw_call, the result written over in[k] where tl_op_over can: for a
 * rule's last use of in[k] (its cotangent g), with a kernel that reads
 * each element of it before writing the same one */
tl_tensor *bw_call_over(bw *b, tl_opcode op, int n, tl_tensor **in, const tl_attrs *a, int k);
tl_tensor *bw_op1(bw *b, tl_opcode op, tl_tensor *x);
tl_tensor *bw_op2(bw *b, tl_opcode op, tl_tensor *x, tl_tensor *y);
tl_tensor *bw_op3(bw *b, tl_opcode op, tl_tensor *x, tl_tensor *y, tl_tensor *z);
/* A 0-d constant in the dtype of `like`. */
tl_tensor *bw_num(bw *b, const tl_tensor *like, double v);
tl_tensor *bw_reshape(bw *b, tl_tensor *x, int ndim, const int64_t *shape);
tl_tensor *bw_broadcast(bw *b, tl_tensor *x, int ndim, const int64_t *shape);
tl_tensor *bw_sum_axes(bw *b, tl_tensor *x, int naxes, const int64_t *axes, bool keepdims);
/* g summed over the axes along which x was broadcast, back to x's shape. */
tl_tensor *bw_sum_to(bw *b, tl_tensor *g, const tl_tensor *x);
tl_tensor *bw_slice(bw *b, tl_tensor *g, int64_t axis, int64_t start, int64_t stop);
tl_tensor *bw_transpose(bw *b, tl_tensor *x, int naxes, const int64_t *perm);


/* Second derivatives (exec/grad2.c). */
/* Whether the rules must stay differentiable: a recording pullback's. */
bool tl_bw_twice(const bw *b);
/* The rules of the backward kernels, and with tl_bw_twice the
 * compositions used in place of kernels without one: true when it
 * handled e (out filled as a rule fills it). */
bool tl_rule_twice(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                   tl_tensor **out);
/* g[o] * prod_{j != i} x2[o, j] for x2 [outer, r], g1 [outer], as ops. */
tl_tensor *tl_bw_prod_others(bw *b, tl_tensor *x2, tl_tensor *g1);
/* The derivative of a map body with respect to its input `input`, as a
 * map body over the same inputs (made once, kept with p; NULL with st
 * set), so that a map's gradient is a map again (exec/mapderiv.c). */
const struct tl_mprog *tl_map_derivative(const struct tl_mprog *p, int input, tl_status *st);
/* The same times one more input g (the body's inputs, then g): g * d
 * body / d input, as one map (mul(g, derivative)'s bits). */
const struct tl_mprog *tl_map_derivative_times(const struct tl_mprog *p, int input, tl_status *st);
/* layer_norm's gradient to x over the axes from axis (scale may be
 * NULL), as ops. */
tl_tensor *tl_bw_layer_norm_dx(bw *b, tl_tensor *x, tl_tensor *g, tl_tensor *scale, int64_t axis,
                               double eps);

#endif
