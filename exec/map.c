/* Evaluating a `map` node: its compiled body (graph/mapc.c) runs as one op
 * over all elements, recorded as one tape entry whose inputs are the map's
 * args followed by the scalars the body captures. */
#include "eval.h"

#include <stdlib.h>

tl_code tl_eval_map(tl_eval *ev, const tl_node *n)
{
    int nin = n->nargs + n->flow->ncap;
    tl_value v;
    tl_dtype dt = ev->call_dtype;
    for (int i = n->nargs - 1; i >= 0; i--)
        if (n->args[i].slot >= 0 && !tl_eval_get(ev, n->args[i].slot, &v) && !v.weak)
            dt = v.t->dtype;
    tl_tensor **in = tl_calloc((size_t)nin + 1, sizeof *in + sizeof(int), "map inputs", ev->st);
    if (!in)
        return ev->st->code;
    int *vars = (int *)(in + nin + 1);
    bool any = false;
    tl_code rc = TL_OK;
    for (int i = 0; i < nin && !rc; i++) {
        bool cap = i >= n->nargs;
        rc = cap ? tl_eval_get(ev, n->flow->cap_slots[i - n->nargs], &v) : tl_eval_arg(ev, &n->args[i], &v);
        if (!rc && cap && !v.weak && v.t->ndim != 0) {
            char d[96];
            rc = tl_fail(ev->st, TL_EINPUT, "the body reads \"%s\", which is %s: a map body "
                         "may capture scalars only", ev->g->slot_name[n->flow->cap_slots[i - n->nargs]],
                         tl_tensor_desc(v.t, d, sizeof d));
        }
        const tl_arg *a = cap ? &(tl_arg){n->flow->cap_slots[i - n->nargs], 0, 0} : &n->args[i];
        if (!rc && !(in[i] = tl_eval_materialize(ev, a, &v, dt)))
            rc = ev->st->code;
        vars[i] = v.var;
        any = any || v.var >= 0;
    }
    tl_tensor *out = rc ? NULL : tl_op(ev->cx, TL_OP_MAP, nin, in, n->attrs, ev->st);
    if (out && ev->opts->observe)
        ev->opts->observe(ev->opts->observe_ctx, n, nin, in, out);
    int var = -1;
    if (out && ev->tape && any &&
        (var = tl_tape_record(ev->tape, TL_OP_MAP, nin, in, vars, out, n->attrs, n, ev->st)) < 0) {
        tl_tensor_unref(out);
        out = NULL;
    }
    for (int i = 0; i < nin; i++)
        tl_tensor_unref(in[i]);
    free(in);
    if (!out)
        return ev->st->code;
    tl_eval_set(ev, n->out[0], out, var);
    return TL_OK;
}
