/* The layer ops of nn.md: their shape rules and backward rules, one file
 * per family (exec/nn_<family>.c), called from exec/shape.c and
 * exec/grad.c.  The kernels are in backends/cpu/cpu_<family>.c and
 * backends/cuda. */
#ifndef TL_NN_H
#define TL_NN_H

#include "bw.h"
#include "shape.h"

/* Normalises the spatial attributes of a call on x [N, C, *S] (1 to 3
 * spatial axes) in a: every list to one entry per axis, an int to every
 * axis, defaults filled in (stride: the kernel when `pool`, else 1;
 * dilation 1; padding 0 on both sides; output_padding 0), a->nsp = d.
 * The kernel must be set already (conv sets it from w's shape).  Errors
 * name the attribute at fault and x. */
tl_code tl_nn_spatial(const tl_tensor *x, tl_attrs *a, bool pool, tl_status *st);
/* x must be [N, C, *S] with 1 to 3 spatial axes. */
tl_code tl_nn_check_layout(const tl_tensor *x, const char *what, tl_status *st);

/* Shape rules (exec/shape.c sends each op of the family here). */
tl_code tl_shape_conv(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st);
tl_code tl_shape_pool(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st);
tl_code tl_shape_norm(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st);
tl_code tl_shape_resample(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a,
                          tl_shape *out, tl_status *st);
tl_code tl_shape_scatter(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a,
                         tl_shape *out, tl_status *st);
tl_code tl_shape_random(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a,
                        tl_shape *out, tl_status *st);

/* Backward rules (exec/grad.c sends each op of the family here): fill
 * out[i] for every input i with want[i]; `a` is the forward's attributes
 * after its shape rule. */
void tl_rule_conv(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out);
void tl_rule_pool(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out);
void tl_rule_norm(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out);
void tl_rule_resample(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                      tl_tensor **out);
void tl_rule_scatter(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                     tl_tensor **out);
void tl_rule_random(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                    tl_tensor **out);

/* tl gradcheck's fingerprint of the decisions of a max_pool call on the
 * host tensor x (its node's attributes a): each window's argmax, mixed in
 * window order (exec/nn_pool.c). */
uint64_t tl_nn_max_pool_print(const tl_tensor *x, const tl_attrs *a, uint64_t (*mix)(uint64_t, uint64_t));

#endif
