/* Fused elementwise chains.  A run of consecutive elementwise nodes over
 * tensors of one shape and dtype (numbers and constant scalars may join
 * in), optionally ending in a sum over every axis, runs as one pass over
 * memory instead of one pass per node: the chain becomes a register
 * program (backends/mprog.h) that the CPU runs over blocks of elements
 * held in cache, writing out only the values used after the chain.
 * Every element goes through the same operations in the same order as
 * unfused, and the sum adds in the same tree, so the bits are those of the
 * recipe run node by node.
 *
 * The chain is one tape entry.  Its backward program is written by the
 * backward rules themselves (grad.c, with their op calls recorded rather
 * than run), preceded by the chain's forward program: the values the
 * rules read are computed again from the chain's inputs instead of being
 * kept, and gradients are added up in the unfused order.  Only the
 * chain's inputs stay on the tape.
 *
 * On a tape to differentiate twice (tl_run_opts.twice) the chain, cut at
 * its first value read after it and never with a sum, is one `map` entry
 * over its inputs instead, its body the chain's forward program: the
 * map's rules (a map of the body's derivative) are ops that record and
 * differentiate again. */
#ifndef TL_FUSE_H
#define TL_FUSE_H

#include "op.h"

struct tl_eval;
struct tl_block;
struct tl_fused;

/* Elements below which a chain is not fused (tl_run_opts.fuse_min 0). */
#define TL_FUSE_MIN_DEFAULT 32768

/* Runs the chain that starts at node i of b fused, when it can: returns
 * the number of nodes it ran (0: none; the caller runs node i as usual),
 * or -1 with ev->st set. */
int tl_fuse_try(struct tl_eval *ev, const struct tl_block *b, int i);

#endif
