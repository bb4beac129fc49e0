/* Scalar loops: an iterate over scalars (shape []) whose body is
 * elementwise ops runs as a compiled loop with a compact tape (loop.c),
 * the bits those of the loop run node by node. */
#ifndef TL_LOOP_H
#define TL_LOOP_H

struct tl_eval;
struct tl_node;

/* Runs iterate node `it` as a scalar loop when it is one: 1 done, 0 not a
 * scalar loop (the caller runs it), -1 failed with ev->st set. */
int tl_loop_try(struct tl_eval *ev, const struct tl_node *it);

#endif
