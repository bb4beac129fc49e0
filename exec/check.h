/* Checking a graph without running it: every node's dtype and shape,
 * inferred from the types of the inputs with the same shape rules the
 * evaluator uses, through every block (both branches of each `if`, an
 * `iterate` body once, `map` bodies as compiled).  File constants are read
 * (their headers at least), nothing is computed, nothing large is
 * allocated: a graph whose run would take hours is checked at once.
 * tl_run checks this way before its first kernel, so an error hiding in a
 * branch the data does not take is still an error. */
#ifndef TL_CHECK_H
#define TL_CHECK_H

#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A value's type: dtype and shape (weak: a plain number, no shape yet). */
typedef struct tl_type {
    tl_dtype dtype;
    int ndim;
    int64_t dims[TL_MAXDIM];
    bool weak;
} tl_type;

/* Called for every node checked, in order, blocks included: the node, how
 * deep in blocks it sits, the block it is in ("" at the top, "then",
 * "else", "body") and the types of its results. */
typedef void (*tl_check_visit)(void *ctx, const tl_node *n, int depth, const char *block,
                               const tl_type *out);

/* inputs[i] types g->inputs[i] (checked against the declarations as
 * tl_run checks tensors).  visit may be NULL.  Errors read like tl_run's:
 * "g.json: node "h" (matmul): inner sizes differ: f32[2,3] @ f32[4,5]",
 * with "then branch: " / "else branch: " / "body: " on the way out. */
tl_code tl_check(const tl_graph *g, const tl_type *inputs, tl_check_visit visit, void *ctx,
                 tl_status *st);

/* The type of a tensor. */
tl_type tl_type_of(const tl_tensor *t);

/* A header-only tensor (no data) of type t, for shape rules, which read
 * dtype and shape only; its element count saturates. */
void tl_type_tensor(const tl_type *t, tl_tensor *f);

/* The dtype a plain number takes as argument i of op: an index argument's
 * is i64; a value argument takes the dtype of the first tensor among the
 * value arguments (have_value), else the element type of the call. */
tl_dtype tl_weak_dtype(tl_opcode op, int i, bool have_value, tl_dtype first_value, tl_dtype call);
/* TL_EINPUT unless the number v can become dtype dt (integers: integral,
 * in range, below 2^53 in magnitude; f32: a finite number stays finite). */
tl_code tl_weak_fits(double v, tl_dtype dt, tl_status *st);

/* The message for an if whose cond is not a scalar (%s: its type), the
 * check's and the run's alike. */
#define TL_IF_COND_NOT_SCALAR                                                                  \
    "cond must be a scalar (shape []), got %s: an if takes one branch for the whole tensor; " \
    "to choose per element use where(cond, a, b), or map with an if in its body"

#ifdef __cplusplus
}
#endif

#endif
