/* Internals shared by the evaluator (eval.c) and the map engine (map.c).
 * The environment holds one value per graph slot; it owns one reference
 * to each tensor in it. */
#ifndef TL_EVAL_H
#define TL_EVAL_H

#include "exec.h"
#include "tape.h"

typedef struct tl_value {
    tl_tensor *t; /* NULL for a weak scalar or an unset slot */
    int var;      /* tape variable, -1: constant */
    bool weak;
    double num;
} tl_value;

typedef struct tl_eval {
    const tl_graph *g;
    tl_ctx *cx;
    tl_tape *tape; /* NULL: nothing is recorded */
    tl_value *env;
    tl_dtype call_dtype;
    tl_stats *stats;
    tl_status *st;
    /* weak numbers as 0-d tensors, made once per run: [dtype][num_id], and
     * [dtype][slot] for weak consts */
    tl_tensor **num_cache[TL_NDTYPES], **const_cache[TL_NDTYPES];
    const bool *keep;    /* per slot: never freed early (asked-for results); NULL: none */
    tl_node_log *log;    /* per node (profile); NULL: no log */
    const tl_run_opts *opts;
    /* the step word of the iterates around the node running (0 at the top;
     * backends/philox.h): seeded draws take it into their key */
    uint32_t rng_step;
} tl_eval;

/* The value of a slot (loading a file constant on first use). */
tl_code tl_eval_get(tl_eval *ev, int slot, tl_value *out);
tl_code tl_eval_arg(tl_eval *ev, const tl_arg *a, tl_value *out);
/* Binds a slot to a tensor; takes over the caller's reference. */
void tl_eval_set(tl_eval *ev, int slot, tl_tensor *t, int var);
void tl_eval_clear(tl_eval *ev, int slot);
/* A value as a tensor (new reference); a weak scalar becomes a 0-d tensor
 * of dtype dt, cached for the run when it comes from the graph (a number
 * argument or a weak const). */
tl_tensor *tl_eval_materialize(tl_eval *ev, const tl_arg *a, const tl_value *v, tl_dtype dt);

/* map nodes (map.c); their backward rule is in grad.c */
tl_code tl_eval_map(tl_eval *ev, const tl_node *n);

#endif
