#define _POSIX_C_SOURCE 200809L
/* The evaluator: walks the recipe in order, one op call per node, records
 * differentiable calls on the tape, runs only the selected block of an
 * `if` and each step of an `iterate` in turn.  Blocks nest by recursion on
 * the graph's nesting depth only; steps and nodes are loops. */
#include "eval.h"

#include "check.h"
#include "fuse.h"
#include "loop.h"
#include "shape.h"
#include "backends/cpu/blas.h"
#include "backends/opdoc.h"
#include "backends/philox.h"
#include "formats/text.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backends/cpu/vmath.h"


struct tl_result {
    const tl_graph *g;
    tl_ctx cx;
    tl_stats stats;
    int noutputs;
    int *out_slot;        /* the graph's outputs, or those asked for */
    tl_node_log *log;     /* per node, with profile */
    tl_progress_fn progress;
    void *progress_ctx;
    tl_tensor **outputs;
    int *out_var;
    int ninputs;
    int *in_var;          /* -1: not differentiated */
    tl_tensor **inputs;   /* for the shapes of zero gradients */
    tl_tape tape;
    enum { REC_NONE, REC_LIVE, REC_CONSUMED, REC_CLOSED, REC_RECORDED } rec;
    tl_tensor **grad2;   /* after a recording pullback: the gradients, by variable */
    int *gvar;           /* and their variables */
    int nvars0;          /* the variables of the forward */
    int *seed_var;       /* per output: its seed's variable, or -1 */
    tl_budget *budget;
    int64_t input_bytes; /* charged while the result holds the inputs */
    bool twice;          /* recorded for tl_result_pullback_recorded */
    bool seeds_only;     /* recorded as a function of the seeds alone (vary_seeds) */
};

/* ---------- environment ---------- */

static tl_code load_const(tl_eval *ev, const tl_const *c, tl_value *v)
{
    tl_status *st = ev->st;
    if (c->kind == TL_CONST_WEAK) {
        *v = (tl_value){NULL, -1, true, c->num};
        return TL_OK;
    }
    tl_tensor *t = NULL;
    if (c->kind == TL_CONST_FILE) {
        if (!(t = tl_const_read_file(c, st)))
            return st->code;
    } else if (c->kind == TL_CONST_FILL) {
        tl_dtype dt = c->typed ? c->dtype : ev->call_dtype;
        if (!(t = tl_tensor_new_in(ev->cx->budget, dt, c->ndim, c->shape, st)))
            return tl_wrap(st, "const \"%s\"", c->name);
        for (int64_t i = 0; i < t->numel; i++)
            tl_tensor_set(t, i, c->num);
    } else if (c->typed || ev->call_dtype == TL_F64) {
        t = tl_tensor_ref(c->tensor);
    } else { /* untyped data takes the call's element type */
        for (int64_t i = 0; ev->call_dtype == TL_F32 && i < c->tensor->numel; i++) {
            double d = tl_tensor_get(c->tensor, i);
            if (tl_f32_overflows(d)) { /* written inf stays inf */
                char num[TL_FMT_LEN];
                tl_fmt_f64(num, sizeof num, d);
                return tl_fail(st, TL_EINPUT, "const \"%s\": data[%lld] is %s, too large for f32 (write \"inf\")",
                               c->name, (long long)i, num);
            }
        }
        tl_tensor *in[1] = {c->tensor};
        tl_attrs a;
        tl_attrs_init(&a);
        a.dtype = ev->call_dtype;
        if (!(t = tl_op(ev->cx, TL_OP_CAST, 1, in, &a, st)))
            return tl_wrap(st, "const \"%s\"", c->name);
    }
    *v = (tl_value){t, -1, false, 0};
    return TL_OK;
}

tl_code tl_eval_get(tl_eval *ev, int slot, tl_value *out)
{
    tl_value *v = &ev->env[slot];
    if (!v->t && !v->weak) {
        int ci = ev->g->slot_const[slot];
        if (ci < 0)
            return tl_fail(ev->st, TL_ERUNTIME, "internal: \"%s\" has no value",
                           ev->g->slot_name[slot]);
        if (load_const(ev, &ev->g->consts[ci], v))
            return ev->st->code;
    }
    *out = *v;
    return TL_OK;
}

tl_code tl_eval_arg(tl_eval *ev, const tl_arg *a, tl_value *out)
{
    if (a->slot < 0) {
        *out = (tl_value){NULL, -1, true, a->num};
        return TL_OK;
    }
    return tl_eval_get(ev, a->slot, out);
}

void tl_eval_clear(tl_eval *ev, int slot)
{
    tl_tensor_unref(ev->env[slot].t);
    ev->env[slot] = (tl_value){NULL, -1, false, 0};
}

void tl_eval_set(tl_eval *ev, int slot, tl_tensor *t, int var)
{
    tl_eval_clear(ev, slot);
    ev->env[slot] = (tl_value){t, var, false, 0};
}

static void set_value(tl_eval *ev, int slot, const tl_value *v)
{
    tl_tensor_ref(v->t);
    tl_eval_clear(ev, slot);
    ev->env[slot] = *v;
}

tl_tensor *tl_eval_materialize(tl_eval *ev, const tl_arg *a, const tl_value *v, tl_dtype dt)
{
    if (!v->weak)
        return tl_tensor_ref(v->t);
    tl_tensor **cache = NULL;
    if (a && a->slot < 0)
        cache = &ev->num_cache[dt][a->num_id];
    else if (a && ev->g->slot_const[a->slot] >= 0)
        cache = &ev->const_cache[dt][a->slot];
    if (cache && *cache)
        return tl_tensor_ref(*cache);
    if (tl_weak_fits(v->num, dt, ev->st))
        return NULL;
    tl_tensor *t = tl_tensor_scalar(dt, v->num, ev->st);
    if (cache && t)
        *cache = tl_tensor_ref(t);
    return t;
}

/* ---------- nodes ---------- */

static tl_code eval_block(tl_eval *ev, const tl_block *b);

static bool differentiable(tl_opcode op, const tl_tensor *out)
{
    return tl_op_differentiable(op) && !tl_dtype_is_int(out->dtype);
}

/* The dtype a plain number takes as argument i (tl_weak_dtype); the
 * check before the run made sure it fits. */
static tl_dtype weak_dtype(tl_eval *ev, const tl_node *n, int i)
{
    tl_value u;
    bool have = false;
    tl_dtype first = ev->call_dtype;
    int at = tl_ops[n->op].index_arg;
    for (int k = n->nargs - 1; k >= 0; k--)
        if (k != at && n->args[k].slot >= 0 && !tl_eval_get(ev, n->args[k].slot, &u) && !u.weak) {
            have = true;
            first = u.t->dtype;
        }
    return tl_weak_dtype(n->op, i, have, first, ev->call_dtype);
}

/* One op of a node's recipe, recorded on the tape like a node of its own
 * when an input is differentiated: the result into *out (a new
 * reference) and its variable into *var. */
static tl_code recipe_op(tl_eval *ev, const tl_node *n, tl_opcode op, int nin, tl_tensor **in,
                         const int *vars, const tl_attrs *a, tl_tensor **out, int *var)
{
    bool any = false;
    for (int i = 0; i < nin; i++)
        any = any || vars[i] >= 0;
    *var = -1;
    if (!(*out = tl_op(ev->cx, op, nin, in, a, ev->st)))
        return ev->st->code;
    if (ev->tape && any && differentiable(op, *out) &&
        (*var = tl_tape_record(ev->tape, op, nin, in, vars, *out, a, n, ev->st)) < 0) {
        tl_tensor_unref(*out);
        *out = NULL;
        return ev->st->code;
    }
    return TL_OK;
}

/* mean over every axis but the channels (1) of an ndim-axis x, keeping
 * them, and the squeeze of those axes: the attributes of batch_norm's
 * statistics, which tape entries point at (so static). */
static tl_attrs bn_mean[TL_MAXDIM + 1], bn_squeeze[TL_MAXDIM + 1];
static pthread_once_t bn_once = PTHREAD_ONCE_INIT;

static void bn_attrs_init(void)
{
    for (int d = 2; d <= TL_MAXDIM; d++) {
        tl_attrs_init(&bn_mean[d]);
        bn_mean[d].has_axes = bn_mean[d].keepdims = true;
        for (int k = 0; k < d; k++)
            if (k != 1)
                bn_mean[d].axes[bn_mean[d].naxes++] = k;
        bn_squeeze[d] = bn_mean[d];
        bn_squeeze[d].keepdims = false;
    }
}

/* Whether training batch_norm's gradient may come from its fused kernels:
 * one tape entry, with one value, on a tape that is not differentiated
 * twice (the kernels have no rules of their own), where the device runs
 * them (else the recipe stays on the device, op by op). */
static bool bn_fused(tl_eval *ev, const tl_node *n, tl_tensor **in, const int *vars)
{
    if (!ev->tape || n->nout != 1 || ev->opts->twice ||
        (vars[0] < 0 && vars[1] < 0 && vars[2] < 0))
        return false;
    const tl_backend *be = ev->cx->backend;
    if (!tl_backend_is_device(be))
        return true;
    tl_dtype d = in[0]->dtype, dt[6] = {d, d, d, d, d, d};
    const char *why = NULL;
    return be->supports(be, TL_OP_BATCH_NORM_PARAMS_GRAD, 4, dt, d, &why) &&
           be->supports(be, TL_OP_BATCH_NORM_GRAD, 6, dt, d, &why);
}

/* batch_norm_var (the variance with the recipe's bits, without the
 * temporaries x - m1 and its square: in the ResNet block 2 x 6.4 MB of
 * fresh memory, and 1.3 of its 20 ms forward warm on the Zen 5 VM) where
 * the context's backend runs it: the CPU's; a device keeps the recipe's
 * ops. */
static bool bn_var_here(tl_eval *ev)
{
    const tl_backend *be = ev->cx->backend;
    return !tl_backend_is_device(be);
}

/* batch_norm in training mode: the recipe of ops that normalises x with
 * its batch's statistics,
 *   m1 = mean(x) and v1 = mean(square(x - m1)) over N and S (keepdims),
 *   mean = squeeze(m1), var = squeeze(v1),
 *   y = batch_norm(x, scale, bias, mean, var) in its inference form,
 * each op on the tape, so that the chain rule gives the gradient through
 * them; or, where bn_fused, the same ops off the tape and one entry of
 * batch_norm on it, its statistics constants there (exec/nn_norm.c's rule
 * for it is the gradient through them).  Off the tape (fused, or nothing
 * recorded), v1 is one batch_norm_var on the CPU.  The values are the
 * same bits every way.  The node's mean and var arguments are not read.  Its
 * values: y, and with three ids mean and var (biased). */
static tl_code batch_norm_training(tl_eval *ev, const tl_node *n, tl_tensor **in, const int *vars_in)
{
    int none[3] = {-1, -1, -1};
    bool fused = bn_fused(ev, n, in, vars_in);
    const int *vars = fused ? none : vars_in;
    tl_attrs a = *n->attrs;
    tl_shape sh;
    if (tl_shape_infer(TL_OP_BATCH_NORM, n->nargs, (const tl_tensor *const *)in, &a, &sh, ev->st))
        return ev->st->code;
    pthread_once(&bn_once, bn_attrs_init);
    int d = in[0]->ndim, v[6] = {-1, -1, -1, -1, -1, -1};
    tl_tensor *t[6] = {NULL}, *y = NULL;
    const tl_attrs *am = &bn_mean[d], *as = &bn_squeeze[d];
    tl_code rc = recipe_op(ev, n, TL_OP_MEAN, 1, in, vars, am, &t[0], &v[0]);
    if (!rc && v[0] < 0 && bn_var_here(ev)) /* off the tape: the variance in one op */
        rc = recipe_op(ev, n, TL_OP_BATCH_NORM_VAR, 2, (tl_tensor *[]){in[0], t[0]}, (int[]){-1, -1}, NULL, &t[3],
                       &v[3]);
    else {
        if (!rc)
            rc = recipe_op(ev, n, TL_OP_SUB, 2, (tl_tensor *[]){in[0], t[0]}, (int[]){vars[0], v[0]}, NULL, &t[1],
                           &v[1]);
        if (!rc)
            rc = recipe_op(ev, n, TL_OP_SQUARE, 1, &t[1], &v[1], NULL, &t[2], &v[2]);
        if (!rc)
            rc = recipe_op(ev, n, TL_OP_MEAN, 1, &t[2], &v[2], am, &t[3], &v[3]);
    }
    for (int i = 1; i < 3; i++) { /* x - m1 and its square: the tape holds what it needs of them */
        tl_tensor_unref(t[i]);
        t[i] = NULL;
    }
    if (!rc)
        rc = recipe_op(ev, n, TL_OP_SQUEEZE, 1, &t[0], &v[0], as, &t[4], &v[4]);
    if (!rc)
        rc = recipe_op(ev, n, TL_OP_SQUEEZE, 1, &t[3], &v[3], as, &t[5], &v[5]);
    tl_tensor *bn[5] = {in[0], in[1], in[2], t[4], t[5]};
    int bv[5] = {vars[0], vars[1], vars[2], v[4], v[5]}, yv = -1;
    if (!rc)
        rc = recipe_op(ev, n, TL_OP_BATCH_NORM, 5, bn, bv, n->attrs, &y, &yv);
    if (!rc && fused && differentiable(TL_OP_BATCH_NORM, y)) {
        int fv[5] = {vars_in[0], vars_in[1], vars_in[2], -1, -1};
        if ((yv = tl_tape_record(ev->tape, TL_OP_BATCH_NORM, 5, bn, fv, y, n->attrs, n, ev->st)) < 0)
            rc = ev->st->code;
    }
    if (!rc && ev->opts->observe)
        ev->opts->observe(ev->opts->observe_ctx, n, 5, bn, y);
    if (!rc) {
        tl_eval_set(ev, n->out[0], y, yv);
        if (n->nout == 3) {
            tl_eval_set(ev, n->out[1], t[4], v[4]);
            tl_eval_set(ev, n->out[2], t[5], v[5]);
            t[4] = t[5] = NULL;
        }
    }
    for (int i = 0; i < 6; i++)
        tl_tensor_unref(t[i]);
    return rc;
}

/* The seeded draws: their key takes the node's place in the recipe. */
static bool draws(tl_opcode op)
{
    return op == TL_OP_RANDOM_UNIFORM || op == TL_OP_RANDOM_NORMAL || op == TL_OP_DROPOUT;
}

/* scatter_add whose first argument dies here (this node reads it last,
 * as a step's stacked outputs do: onnx_flow.c) adds into it in place:
 * its value is released first, so that the argument's reference is the
 * only one, and tl_op_over writes over it where that is safe.  Its rule
 * reads the indices only.  Else a whole copy a step: the steps took time
 * in their square. */
static bool over_first(tl_eval *ev, const tl_node *n)
{
    int s = n->args[0].slot;
    if (n->op != TL_OP_SCATTER_ADD || s < 0 || ev->opts->observe || (ev->keep && ev->keep[s]))
        return false;
    for (int k = 0; k < n->nfree; k++)
        if (n->free_after[k] == s) {
            for (int i = 1; i < n->nargs; i++)
                if (n->args[i].slot == s)
                    return false;
            tl_eval_clear(ev, s);
            return true;
        }
    return false;
}

static tl_code eval_op(tl_eval *ev, const tl_node *n)
{
    tl_tensor *small[8], **in = small;
    int vsmall[8], *vars = vsmall;
    tl_value v;
    if (n->nargs > 8) {
        in = tl_calloc((size_t)n->nargs, sizeof *in + sizeof *vars, "op arguments", ev->st);
        if (!in)
            return ev->st->code;
        vars = (int *)(in + n->nargs);
    }
    tl_code rc = TL_OK;
    bool any = false;
    int made = 0;
    tl_dtype dt = ev->call_dtype;
    for (; made < n->nargs && !rc; made++) {
        if (!(rc = tl_eval_arg(ev, &n->args[made], &v))) {
            if (v.weak)
                dt = weak_dtype(ev, n, made);
            in[made] = tl_eval_materialize(ev, &n->args[made], &v, dt);
            rc = in[made] ? TL_OK : ev->st->code;
            vars[made] = v.var;
            any = any || v.var >= 0;
        }
    }
    if (rc)
        made--;
    const tl_attrs *attrs = n->attrs;
    tl_attrs typed;
    if (n->op == TL_OP_ONE_HOT && !n->attrs->has_dtype) { /* its result takes the element type of the call */
        typed = *n->attrs;
        typed.dtype = ev->call_dtype;
        attrs = &typed;
    }
    if (!rc && n->op == TL_OP_BATCH_NORM && n->attrs->training == 1) {
        rc = batch_norm_training(ev, n, in, vars);
        for (int i = 0; i < made; i++)
            tl_tensor_unref(in[i]);
        if (in != small)
            free(in);
        return rc;
    }
    if (draws(n->op)) { /* the key: the node's place; a draw's default dtype: the call's */
        typed = *n->attrs;
        typed.rng_node = (uint64_t)n->index;
        typed.rng_step = ev->rng_step;
        if (!typed.has_dtype && n->op != TL_OP_DROPOUT)
            typed.dtype = ev->call_dtype;
        attrs = &typed;
    }
    tl_tensor *out = NULL;
    if (!rc && over_first(ev, n))
        out = tl_op_over(ev->cx, n->op, n->nargs, in, attrs, 0, ev->st);
    else if (!rc)
        out = tl_op(ev->cx, n->op, n->nargs, in, attrs, ev->st);
    if (out && ev->opts->observe)
        ev->opts->observe(ev->opts->observe_ctx, n, n->nargs, in, out);
    int var = -1;
    if (out && ev->tape && any && differentiable(n->op, out)) {
        var = tl_tape_record(ev->tape, n->op, n->nargs, in, vars, out, attrs, n, ev->st);
        if (var < 0) {
            tl_tensor_unref(out);
            out = NULL;
        }
    }
    for (int i = 0; i < made; i++)
        tl_tensor_unref(in[i]);
    if (in != small)
        free(in);
    if (!out)
        return ev->st->code;
    tl_eval_set(ev, n->out[0], out, var);
    return TL_OK;
}

/* Releases every name a block defined (its results have been taken). */
static void leave_block(tl_eval *ev, const tl_block *b)
{
    for (int i = 0; i < b->nnodes; i++)
        for (int k = 0; k < b->nodes[i].nout; k++)
            tl_eval_clear(ev, b->nodes[i].out[k]);
}

static tl_code eval_if(tl_eval *ev, const tl_node *n)
{
    tl_value c;
    if (tl_eval_arg(ev, &n->flow->cond, &c))
        return ev->st->code;
    char d[96];
    if (!c.weak && c.t->ndim != 0)
        return tl_fail(ev->st, TL_EINPUT, TL_IF_COND_NOT_SCALAR, tl_tensor_desc(c.t, d, sizeof d));
    if (!c.weak && tl_dtype_is_int(c.t->dtype))
        return tl_fail(ev->st, TL_EINPUT, "cond must be f32 or f64 (cast the index tensor), got %s",
                       tl_tensor_desc(c.t, d, sizeof d));
    double x = c.num; /* on a device, the decision reads the scalar back */
    if (!c.weak && tl_ctx_item(ev->cx, c.t, &x, ev->st))
        return ev->st->code;
    bool then = x != 0; /* NaN selects then, as in C */
    if (ev->opts->observe) {
        tl_tensor *ct = c.weak ? NULL : c.t;
        ev->opts->observe(ev->opts->observe_ctx, n, ct ? 1 : 0, &ct, NULL);
    }
    const tl_block *b = then ? n->flow->then_b : n->flow->else_b;
    tl_stats *s = ev->stats;
    if (s->nlog < (int)(sizeof s->log / sizeof s->log[0]))
        s->log[s->nlog++] = (tl_branch_log){n->name, then};
    s->branches++;
    if (eval_block(ev, b))
        return tl_wrap(ev->st, "%s branch", then ? "then" : "else");
    tl_value r[256];
    for (int i = 0; i < n->nout; i++)
        if (tl_eval_get(ev, b->result[i], &r[i]))
            return ev->st->code;
    for (int i = 0; i < n->nout; i++)
        tl_tensor_ref(r[i].t);
    leave_block(ev, b);
    for (int i = 0; i < n->nout; i++) {
        set_value(ev, n->out[i], &r[i]);
        tl_tensor_unref(r[i].t);
    }
    return TL_OK;
}

static tl_code check_state(tl_eval *ev, const tl_node *n, int i, const tl_tensor *init,
                           const tl_tensor *now, int64_t step)
{
    char a[96], b[96];
    if (init->dtype == now->dtype && tl_same_shape(init, now))
        return TL_OK;
    return tl_fail(ev->st, TL_EINPUT, "step %lld: state \"%s\" changed from %s to %s",
                   (long long)step, ev->g->slot_name[n->flow->state[i]], tl_tensor_desc(init, a, sizeof a),
                   tl_tensor_desc(now, b, sizeof b));
}

static tl_code iterate_steps(tl_eval *ev, const tl_node *n, tl_tensor *const *type);

static tl_code eval_iterate(tl_eval *ev, const tl_node *n)
{
    int fast = tl_loop_try(ev, n);
    if (fast)
        return fast < 0 ? ev->st->code : TL_OK;
    for (int i = 0; i < n->nargs; i++) {
        tl_value v;
        if (tl_eval_arg(ev, &n->args[i], &v))
            return ev->st->code;
        tl_tensor *t = tl_eval_materialize(ev, &n->args[i], &v, ev->call_dtype);
        if (!t)
            return ev->st->code;
        tl_eval_set(ev, n->flow->state[i], t, v.var);
    }
    /* each state's type, to hold the steps to (a step may release its
     * state at its last reader: graph.c's plan_frees) */
    tl_tensor *type[256] = {NULL};
    for (int i = 0; i < n->nargs; i++)
        if (!(type[i] = tl_tensor_stub(ev->env[n->flow->state[i]].t, ev->st))) {
            while (i--)
                tl_tensor_unref(type[i]);
            return ev->st->code;
        }
    tl_code rc = iterate_steps(ev, n, type);
    for (int i = 0; i < n->nargs; i++)
        tl_tensor_unref(type[i]);
    return rc;
}

static tl_code iterate_steps(tl_eval *ev, const tl_node *n, tl_tensor *const *type)
{
    const tl_block *body = n->flow->body;
    tl_value next[256];
    uint32_t outer = ev->rng_step;
    for (int64_t step = 0; step < n->flow->count; step++) {
        if (n->flow->index_slot >= 0)
            ev->env[n->flow->index_slot] = (tl_value){NULL, -1, true, (double)step};
        ev->rng_step = tl_rng_step_word(outer, step);
        tl_code brc = eval_block(ev, body);
        ev->rng_step = outer;
        if (brc)
            return tl_wrap(ev->st, "step %lld", (long long)step);
        for (int i = 0; i < n->nargs; i++) {
            if (tl_eval_get(ev, body->result[i], &next[i]))
                return ev->st->code;
            if (next[i].weak) {
                next[i].t = tl_tensor_scalar(ev->call_dtype, next[i].num, ev->st);
                if (!next[i].t)
                    return ev->st->code;
                next[i].weak = false;
            } else {
                tl_tensor_ref(next[i].t);
            }
        }
        tl_code rc = TL_OK;
        for (int i = 0; i < n->nargs && !rc; i++)
            rc = check_state(ev, n, i, type[i], next[i].t, step);
        leave_block(ev, body);
        for (int i = 0; i < n->nargs; i++)
            tl_eval_set(ev, n->flow->state[i], next[i].t, next[i].var);
        if (rc)
            return rc;
    }
    for (int i = 0; i < n->nargs; i++) {
        set_value(ev, n->out[i], &ev->env[n->flow->state[i]]);
        tl_eval_clear(ev, n->flow->state[i]);
    }
    if (n->flow->index_slot >= 0)
        tl_eval_clear(ev, n->flow->index_slot);
    return TL_OK;
}

static tl_code eval_node(tl_eval *ev, const tl_node *n)
{
    switch (n->op) {
    case TL_OP_IF: return eval_if(ev, n);
    case TL_OP_ITERATE: return eval_iterate(ev, n);
    case TL_OP_MAP: return tl_eval_map(ev, n);
    default: return eval_op(ev, n);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* "f64[2], a number": what a node was given, for messages. */
static void describe_args(tl_eval *ev, const tl_node *n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n->nargs && k + 100 < len; i++) {
        tl_value v;
        char d[96] = "a number";
        if (!tl_eval_arg(ev, &n->args[i], &v) && !v.weak)
            tl_tensor_desc(v.t, d, sizeof d);
        k += (size_t)snprintf(buf + k, len - k, i ? ", %s" : "%s", d);
    }
}

/* After an op or map node: its log entry, and with check_finite its value. */
static tl_code after_node(tl_eval *ev, const tl_node *n, int64_t ops0, int64_t fb0, double t0)
{
    if (ev->log) {
        tl_node_log *l = &ev->log[n->index];
        l->calls += ev->cx->ops - ops0;
        l->fallbacks += ev->cx->fallbacks - fb0;
        if (ev->cx->fallbacks > fb0)
            l->why = ev->cx->last_why;
        l->ms += now_ms() - t0;
    }
    tl_value v;
    if (!ev->cx->check_finite)
        return TL_OK;
    if (tl_eval_get(ev, n->out[0], &v))
        return ev->st->code;
    if (v.weak || !tl_ctx_check_finite(ev->cx, v.t, "its value", ev->st))
        return TL_OK;
    char ins[512];
    describe_args(ev, n, ins, sizeof ins);
    size_t k = strlen(ev->st->msg);
    snprintf(ev->st->msg + k, sizeof ev->st->msg - k, " (inputs %s)", ins);
    return ev->st->code;
}

static tl_code eval_block(tl_eval *ev, const tl_block *b)
{
    for (int i = 0; i < b->nnodes; i++) {
        const tl_node *n = &b->nodes[i];
        int fused = tl_fuse_try(ev, b, i);
        if (fused < 0)
            return tl_wrap(ev->st, "the fused chain from node \"%s\" (%s)", n->name, tl_ops[n->op].name);
        if (fused > 0) {
            if (ev->opts->progress)
                ev->opts->progress(ev->opts->progress_ctx, "forward", ev->stats->nodes, -1);
            i += fused - 1;
            continue;
        }
        bool composite = n->op == TL_OP_IF || n->op == TL_OP_ITERATE;
        int64_t ops0 = ev->cx->ops, fb0 = ev->cx->fallbacks;
        double t0 = ev->log ? now_ms() : 0;
        if (ev->opts->progress)
            ev->opts->progress(ev->opts->progress_ctx, "forward", ev->stats->nodes, -1);
        ev->stats->nodes++;
        if (eval_node(ev, n) || (!composite && after_node(ev, n, ops0, fb0, t0)))
            return tl_wrap(ev->st, "node \"%s\" (%s)", n->name, tl_ops[n->op].name);
        for (int k = 0; k < n->nfree; k++)
            if (!ev->keep || !ev->keep[n->free_after[k]])
                tl_eval_clear(ev, n->free_after[k]);
    }
    return TL_OK;
}

/* ---------- results ---------- */

tl_dtype tl_call_dtype(const tl_graph *g, tl_tensor *const *inputs)
{
    for (int i = 0; i < g->ninputs; i++)
        if (!tl_dtype_is_int(inputs[i]->dtype))
            return inputs[i]->dtype;
    return TL_F64;
}

static tl_code run(tl_result *r, tl_eval *ev, tl_tensor *const *inputs, const tl_run_opts *o)
{
    const tl_graph *g = r->g;
    tl_status *st = ev->st;
    tl_type *types = tl_calloc((size_t)g->ninputs + 1, sizeof *types, "input types", st);
    if (!types)
        return st->code;
    tl_code rc = TL_OK;
    for (int i = 0; i < g->ninputs && !rc; i++) {
        if (!tl_tensor_on_host(inputs[i]))
            rc = tl_fail(st, TL_EINPUT, "input \"%s\": not a host tensor", g->inputs[i].name);
        types[i] = tl_type_of(inputs[i]);
    }
    /* every node of every block is checked before the first kernel */
    if (!rc)
        rc = tl_check(g, types, NULL, NULL, st);
    free(types);
    for (int i = 0; i < g->ninputs && !rc; i++) {
        int64_t bytes = inputs[i]->numel * (int64_t)tl_dtype_size(inputs[i]->dtype);
        if (!(rc = tl_budget_charge(r->budget, bytes, "reading the inputs", st)))
            r->input_bytes += bytes;
        bool want = o->record && (!o->wrt || o->wrt[i]) && !tl_dtype_is_int(inputs[i]->dtype);
        r->in_var[i] = want ? tl_tape_new_var(&r->tape) : -1;
        r->inputs[i] = tl_tensor_ref(inputs[i]);
        if (!rc)
            tl_eval_set(ev, g->inputs[i].slot, tl_tensor_ref(inputs[i]), r->in_var[i]);
    }
    /* given: the run holds the only references to the data (the env's,
     * and the tape's later); the caller's entry and r->inputs keep the type */
    for (int i = 0; i < g->ninputs && !rc && o->give_inputs; i++) {
        /* and the budget counts each until its last use, not to the end */
        int64_t bytes = inputs[i]->numel * (int64_t)tl_dtype_size(inputs[i]->dtype);
        if (tl_tensor_onto_budget(inputs[i], r->budget, bytes))
            r->input_bytes -= bytes;
        tl_tensor *s = tl_tensor_stub(inputs[i], st);
        if (!s)
            return st->code;
        tl_tensor_unref(r->inputs[i]);
        r->inputs[i] = tl_tensor_ref(s);
        tl_tensor_unref(o->give_inputs[i]);
        o->give_inputs[i] = s;
    }
    if (rc || (rc = eval_block(ev, &g->top)) || (rc = tl_vmath_check(st))) /* (and the scalar loops') */
        return rc;
    for (int i = 0; i < r->noutputs; i++) {
        tl_value v;
        if ((rc = tl_eval_get(ev, r->out_slot[i], &v)))
            return rc;
        tl_tensor *t = tl_eval_materialize(ev, NULL, &v, ev->call_dtype);
        r->outputs[i] = t ? tl_ctx_to_host(ev->cx, t, st) : NULL;
        tl_tensor_unref(t);
        if (!r->outputs[i])
            return st->code;
        r->out_var[i] = v.var;
    }
    return TL_OK;
}

/* What the caller gave tl_run, checked before anything is made: the
 * graph, where the result goes, the output slots (top-level values). */
static tl_code check_call(const tl_graph *g, tl_tensor *const *inputs, const tl_run_opts *o, tl_result **out,
                          tl_status *st)
{
    if (!g || !out)
        return tl_fail(st, TL_EINPUT, "tl_run: %s is NULL", g ? "the result pointer" : "the graph");
    if (!inputs && g->ninputs)
        return tl_fail(st, TL_EINPUT, "%s: no inputs given (NULL), where the graph has %d", g->path, g->ninputs);
    if (o->outputs && o->noutputs < 1)
        return tl_fail(st, TL_EINPUT, "%s: %d outputs asked for", g->path, o->noutputs);
    for (int i = 0; o->outputs && i < o->noutputs; i++) {
        int s = o->outputs[i];
        if (s < 0 || s >= g->nslots || tl_graph_top_slot(g, g->slot_name[s]) != s)
            return tl_fail(st, TL_EINPUT, "%s: output %d is slot %d, not a value of the graph's top level", g->path,
                           i, s);
    }
    return TL_OK;
}

static tl_code run_with(const tl_graph *g, tl_tensor *const *inputs, const tl_run_opts *o, tl_result **out,
                        tl_status *st);

/* Inputs left NULL take their defaults (tl-graph(5): "the tensor taken
 * when the call site gives none"); one without is an error. */
tl_code tl_run(const tl_graph *g, tl_tensor *const *inputs, const tl_run_opts *opts,
               tl_result **out, tl_status *st)
{
    tl_run_opts none = {0};
    const tl_run_opts *o = opts ? opts : &none;
    if (out)
        *out = NULL;
    if (check_call(g, inputs, o, out, st))
        return st->code;
    bool all = true;
    for (int i = 0; i < g->ninputs; i++)
        all = all && inputs[i];
    if (all)
        return run_with(g, inputs, o, out, st);
    tl_tensor **in = tl_calloc((size_t)g->ninputs + 1, sizeof *in, "inputs", st);
    tl_code rc = in ? TL_OK : st->code;
    for (int i = 0; i < g->ninputs && !rc; i++)
        if (!(in[i] = inputs[i] ? tl_tensor_ref(inputs[i]) : tl_input_default(g, i, st)))
            rc = st->code ? st->code
                          : tl_fail(st, TL_EINPUT, "%s: missing input \"%s\" (NULL, and it has no default)", g->path,
                                    g->inputs[i].name);
    if (!rc)
        rc = run_with(g, in, o, out, st);
    for (int i = 0; in && i < g->ninputs; i++)
        tl_tensor_unref(in[i]);
    free(in);
    return rc;
}

static tl_code run_with(const tl_graph *g, tl_tensor *const *inputs, const tl_run_opts *opts, tl_result **out,
                        tl_status *st)
{
    tl_run_opts local = *opts;
    const tl_run_opts *o = &local;
    tl_result *r = tl_calloc(1, sizeof *r, "a result", st);
    if (!r)
        return st->code;
    r->g = g;
    tl_ctx_init(&r->cx, o->backend);
    r->cx.strict = o->strict_device;
    if (!(r->budget = tl_budget_new(o->max_memory, st))) {
        free(r);
        return st->code;
    }
    r->cx.budget = r->budget;
    r->cx.profile = o->profile;
    r->cx.check_finite = o->check_finite;
    r->tape.budget = r->budget;
    r->tape.keep_below = o->lean_tape ? 0 : 4096;
    r->progress = o->progress;
    r->progress_ctx = o->progress_ctx;
    r->noutputs = o->outputs ? o->noutputs : g->noutputs;
    r->ninputs = g->ninputs;
    r->out_slot = tl_malloc((size_t)r->noutputs + 1, sizeof(int), "outputs", st);
    if (r->out_slot)
        memcpy(r->out_slot, o->outputs ? o->outputs : g->outputs, sizeof(int) * (size_t)r->noutputs);
    r->outputs = tl_calloc((size_t)r->noutputs + 1, sizeof(tl_tensor *), "outputs", st);
    r->out_var = tl_calloc((size_t)r->noutputs + 1, sizeof(int), "outputs", st);
    r->in_var = tl_calloc((size_t)g->ninputs + 1, sizeof(int), "inputs", st);
    r->inputs = tl_calloc((size_t)g->ninputs + 1, sizeof(tl_tensor *), "inputs", st);
    if (o->profile)
        r->log = tl_calloc((size_t)g->nnodes + 1, sizeof *r->log, "a node log", st);
    tl_eval ev = {g, &r->cx, o->record ? &r->tape : NULL, NULL, tl_call_dtype(g, inputs),
                  &r->stats, st, {NULL}, {NULL}, NULL, r->log, o, 0};
    bool *keep = NULL;
    if (o->outputs && (keep = tl_calloc((size_t)g->nslots + 1, sizeof *keep, "kept values", st)))
        for (int i = 0; i < o->noutputs; i++)
            keep[o->outputs[i]] = true;
    ev.keep = keep;
    ev.env = tl_calloc((size_t)g->nslots + 1, sizeof(tl_value), "the environment", st);
    bool ready = r->out_slot && r->outputs && r->out_var && r->in_var && r->inputs && ev.env &&
                 (!o->profile || r->log) && (!o->outputs || keep);
    for (int d = 0; d < TL_NDTYPES; d++) {
        ev.num_cache[d] = tl_calloc((size_t)g->nnums + 1, sizeof(tl_tensor *), "a cache", st);
        ev.const_cache[d] = tl_calloc((size_t)g->nslots + 1, sizeof(tl_tensor *), "a cache", st);
        ready = ready && ev.num_cache[d] && ev.const_cache[d];
    }
    tl_code rc = ready ? run(r, &ev, inputs, o) : st->code;
    for (int s = 0; ev.env && s < g->nslots; s++)
        tl_tensor_unref(ev.env[s].t);
    for (int d = 0; d < TL_NDTYPES; d++) {
        for (int k = 0; ev.num_cache[d] && k < g->nnums; k++)
            tl_tensor_unref(ev.num_cache[d][k]);
        for (int k = 0; ev.const_cache[d] && k < g->nslots; k++)
            tl_tensor_unref(ev.const_cache[d][k]);
        free(ev.num_cache[d]);
        free(ev.const_cache[d]);
    }
    free(ev.env);
    free(keep);
    if (rc && strncmp(st->msg, g->path, strlen(g->path)))
        tl_wrap(st, "%s", g->path);
    r->stats.peak_bytes = r->budget->peak;
    r->stats.ops = r->cx.ops;
    r->stats.fallbacks = r->cx.fallbacks;
    r->stats.dev = r->cx.dev;
    r->stats.tape_entries = r->tape.n;
    r->rec = o->record ? REC_LIVE : REC_NONE;
    r->twice = o->record && o->twice;
    if (rc) {
        tl_result_free(r);
        return rc;
    }
    *out = r;
    return TL_OK;
}

int tl_result_noutputs(const tl_result *r) { return r->noutputs; }
const tl_tensor *tl_result_output(const tl_result *r, int i)
{
    return r && i >= 0 && i < r->noutputs ? r->outputs[i] : NULL;
}
const char *tl_result_output_name(const tl_result *r, int i)
{
    return r && i >= 0 && i < r->noutputs ? r->g->slot_name[r->out_slot[i]] : NULL;
}

const tl_opprof (*tl_result_profile(const tl_result *r))[2] { return r->cx.prof; }
const tl_node_log *tl_result_node_log(const tl_result *r) { return r->log; }
tl_device tl_result_device(const tl_result *r)
{
    return (tl_device){r->cx.backend->kind, r->cx.backend->index};
}

const tl_backend *tl_result_backend(const tl_result *r) { return r->cx.backend; }

const char *tl_result_device_name(const tl_result *r)
{
    return r->cx.fallbacks && tl_ctx_on_device(&r->cx) ? "mixed" : r->cx.backend->name;
}
const tl_stats *tl_result_stats(const tl_result *r) { return &r->stats; }

/* Each seed given against its output, before a pullback consumes anything
 * (a refused seed leaves the recording as it was). */
static tl_code check_seeds(const tl_result *r, tl_tensor *const *cotangents, tl_status *st)
{
    for (int i = 0; cotangents && i < r->noutputs; i++) {
        const tl_tensor *y = r->outputs[i], *c = cotangents[i];
        char want[96], got[96];
        if (c && tl_dtype_is_int(y->dtype))
            return tl_fail(st, TL_EINPUT, "seed for output \"%s\": it is an index tensor %s, which has no gradient",
                           tl_result_output_name(r, i), tl_tensor_desc(y, want, sizeof want));
        if (c && (c->dtype != y->dtype || !tl_same_shape(c, y)))
            return tl_fail(st, TL_EINPUT, "seed for output \"%s\": expected %s, got %s",
                           tl_result_output_name(r, i), tl_tensor_desc(y, want, sizeof want),
                           tl_tensor_desc(c, got, sizeof got));
    }
    return TL_OK;
}

static tl_code seed(tl_result *r, int i, tl_tensor *c, tl_tensor **grads, tl_status *st)
{
    const tl_tensor *y = r->outputs[i];
    if (r->out_var[i] < 0)
        return TL_OK; /* a constant output: nothing to pull back */
    tl_tensor *s = c ? tl_tensor_ref(c) : tl_tensor_new_in(r->budget, y->dtype, y->ndim, y->shape, st);
    if (!s)
        return st->code;
    if (!c)
        for (int64_t k = 0; k < s->numel; k++)
            tl_tensor_set(s, k, 1.0);
    tl_tensor **slot = &grads[r->out_var[i]];
    if (!*slot) {
        *slot = s;
        return TL_OK;
    }
    tl_tensor *pair[2] = {*slot, s};
    tl_tensor *sum = tl_op(&r->cx, TL_OP_ADD, 2, pair, NULL, st);
    tl_tensor_unref(s);
    if (!sum)
        return st->code;
    tl_tensor_unref(*slot);
    *slot = sum;
    return TL_OK;
}

static tl_code tl_pullback_refused(const tl_result *r, tl_status *st)
{
    static const char *why[] = {"the run was not recorded (gradients off)", "",
                                "the recording was already consumed by a pullback",
                                "the recording was closed",
                                "the recording was already pulled back"};
    return tl_fail(st, TL_EINPUT, "cannot pull back: %s", why[r->rec]);
}

/* The gradient of each of n variables, all NULL; freed with free().  A
 * long recording has millions: those arrays come in pages mapped at once
 * (tl_huge_block), not one fault at a time as a backward pass reaches
 * them, each of which traps into the host of a VM where that is dear. */
static tl_tensor **gradient_slots(size_t n, tl_status *st)
{
    size_t bytes = n * sizeof(tl_tensor *);
    tl_tensor **g = bytes >= ((size_t)2 << 20) ? tl_huge_block(bytes) : NULL;
    if (g)
        memset(g, 0, bytes);
    return g ? g : tl_calloc(n, sizeof *g, "gradients", st);
}

tl_code tl_result_pullback(tl_result *r, tl_tensor *const *cotangents, tl_tensor **grads,
                           tl_status *st)
{
    if (!r || !grads)
        return tl_fail(st, TL_EINPUT, "tl_result_pullback: %s is NULL", r ? "grads" : "the result");
    for (int k = 0; k < r->ninputs; k++)
        grads[k] = NULL;
    if (r->rec != REC_LIVE)
        return tl_pullback_refused(r, st);
    if (check_seeds(r, cotangents, st))
        return st->code;
    r->rec = REC_CONSUMED;
    tl_tensor **g = gradient_slots((size_t)r->tape.nvars + 1, st);
    if (!g) {
        tl_tape_free(&r->tape);
        return st->code;
    }
    int64_t ops0 = r->cx.ops;
    tl_code rc = TL_OK;
    for (int i = 0; i < r->noutputs && !rc; i++)
        rc = seed(r, i, cotangents ? cotangents[i] : NULL, g, st);
    r->cx.phase = 1; /* profile times go to backward */
    if (!rc)
        rc = tl_tape_backward(&r->tape, &r->cx, g, r->progress, r->progress_ctx, st);
    if (!rc)
        rc = tl_vmath_check(st);
    r->cx.phase = 0;
    int nvars = r->tape.nvars;
    tl_tape_free(&r->tape);
    for (int k = 0; k < r->ninputs && !rc; k++) {
        int v = r->in_var[k];
        if (v < 0)
            continue;
        const tl_tensor *x = r->inputs[k];
        if (g[v])
            grads[k] = tl_ctx_to_host(&r->cx, g[v], st);
        else if ((grads[k] = tl_tensor_new_in(r->budget, x->dtype, x->ndim, x->shape, st)))
            memset(grads[k]->data, 0, (size_t)x->numel * tl_dtype_size(x->dtype));
        if (!grads[k])
            rc = st->code;
    }
    for (int v = 0; v < nvars; v++)
        tl_tensor_unref(g[v]);
    free(g);
    if (rc && strncmp(st->msg, r->g->path, strlen(r->g->path)))
        tl_wrap(st, "%s", r->g->path);
    r->stats.backward_ops = r->cx.ops - ops0;
    r->stats.fallbacks = r->cx.fallbacks;
    r->stats.dev = r->cx.dev;
    if (r->budget->peak > r->stats.peak_bytes)
        r->stats.peak_bytes = r->budget->peak;
    if (rc)
        for (int k = 0; k < r->ninputs; k++) {
            tl_tensor_unref(grads[k]);
            grads[k] = NULL;
        }
    return rc;
}

tl_code tl_result_backward(tl_result *r, tl_tensor **grads, tl_status *st)
{
    return tl_result_pullback(r, NULL, grads, st);
}

/* ---------- second derivatives ---------- */

static void drop_recorded(tl_result *r);

static tl_tensor *zeros(tl_result *r, const tl_tensor *like, tl_status *st)
{
    tl_tensor *z = tl_tensor_new_in(r->budget, like->dtype, like->ndim, like->shape, st);
    if (z)
        memset(z->data, 0, (size_t)like->numel * tl_dtype_size(like->dtype));
    return z;
}

/* After a pass: the figures of the run, and a failure named by the graph. */
static tl_code after_pass(tl_result *r, tl_code rc, int64_t ops0, tl_status *st)
{
    if (rc && strncmp(st->msg, r->g->path, strlen(r->g->path)))
        tl_wrap(st, "%s", r->g->path);
    r->stats.backward_ops += r->cx.ops - ops0;
    r->stats.fallbacks = r->cx.fallbacks;
    r->stats.dev = r->cx.dev;
    r->stats.tape_entries = r->tape.n > r->stats.tape_entries ? r->tape.n : r->stats.tape_entries;
    if (r->budget->peak > r->stats.peak_bytes)
        r->stats.peak_bytes = r->budget->peak;
    return rc;
}

static tl_code check_like(const char *what, const char *name, const tl_tensor *t, const tl_tensor *like,
                          tl_status *st)
{
    char want[96], got[96];
    if (t->dtype == like->dtype && tl_same_shape(t, like))
        return TL_OK;
    return tl_fail(st, TL_EINPUT, "%s \"%s\": expected %s, got %s", what, name,
                   tl_tensor_desc(like, want, sizeof want), tl_tensor_desc(t, got, sizeof got));
}

tl_code tl_result_pullback_recorded(tl_result *r, tl_tensor *const *cotangents, bool vary_seeds,
                                    tl_tensor **grads, tl_status *st)
{
    if (!r || !grads)
        return tl_fail(st, TL_EINPUT, "tl_result_pullback_recorded: %s is NULL", r ? "grads" : "the result");
    for (int k = 0; k < r->ninputs; k++)
        grads[k] = NULL;
    if (r->rec == REC_LIVE && !r->twice)
        return tl_fail(st, TL_EINPUT, "cannot pull back recording: the run was not recorded for "
                                      "second derivatives (twice off)");
    if (r->rec != REC_LIVE)
        return tl_pullback_refused(r, st);
    if (check_seeds(r, cotangents, st))
        return st->code;
    r->rec = REC_RECORDED;
    r->seeds_only = vary_seeds;
    int nv = r->nvars0 = r->tape.nvars;
    r->grad2 = gradient_slots((size_t)nv + 1, st);
    r->gvar = tl_malloc((size_t)nv + 1, sizeof *r->gvar, "gradients", st);
    r->seed_var = tl_malloc((size_t)r->noutputs + 1, sizeof *r->seed_var, "seeds", st);
    if (!r->grad2 || !r->gvar || !r->seed_var)
        return st->code;
    for (int v = 0; v < nv; v++)
        r->gvar[v] = -1;
    int64_t ops0 = r->cx.ops, nentries = r->tape.n;
    tl_code rc = TL_OK;
    for (int i = 0; i < r->noutputs && !rc; i++) {
        r->seed_var[i] = -1;
        tl_tensor *c = cotangents ? cotangents[i] : NULL;
        const tl_tensor *y = r->outputs[i];
        const char *name = tl_result_output_name(r, i);
        if (c && tl_dtype_is_int(y->dtype)) {
            char d[96];
            rc = tl_fail(st, TL_EINPUT, "seed for output \"%s\": it is an index tensor %s, which has no gradient",
                         name, tl_tensor_desc(y, d, sizeof d));
            break;
        }
        if ((c && (rc = check_like("seed for output", name, c, y, st))) || r->out_var[i] < 0)
            continue;
        /* a header of its own: the recording knows tensors by their address,
         * and a caller's seed may be one of the run's own tensors too */
        tl_tensor *s = c ? tl_tensor_view(c, c->ndim, c->shape, st)
                         : tl_tensor_new_in(r->budget, y->dtype, y->ndim, y->shape, st);
        if (!s) {
            rc = st->code;
            break;
        }
        if (!c)
            for (int64_t k = 0; k < s->numel; k++)
                tl_tensor_set(s, k, 1.0);
        int sv = vary_seeds ? (r->seed_var[i] = tl_tape_new_var(&r->tape)) : -1;
        int o = r->out_var[i];
        rc = tl_tape_add_recorded(&r->tape, &r->cx, &r->grad2[o], &r->gvar[o], s, sv, NULL, st);
    }
    r->cx.phase = 1;
    if (!rc)
        rc = tl_tape_backward_recording(&r->tape, nentries, vary_seeds, &r->cx, r->grad2, r->gvar, st);
    if (!rc)
        rc = tl_vmath_check(st);
    r->cx.phase = 0;
    for (int k = 0; k < r->ninputs && !rc; k++) {
        int v = r->in_var[k];
        if (v < 0)
            continue;
        grads[k] = r->grad2[v] ? tl_ctx_to_host(&r->cx, r->grad2[v], st) : zeros(r, r->inputs[k], st);
        if (!grads[k])
            rc = st->code;
    }
    if (rc)
        for (int k = 0; k < r->ninputs; k++) {
            tl_tensor_unref(grads[k]);
            grads[k] = NULL;
        }
    return after_pass(r, rc, ops0, st);
}

tl_code tl_result_pullback_again(tl_result *r, tl_tensor *const *grad_cot, tl_tensor **d_inputs,
                                 tl_tensor **d_seeds, tl_status *st)
{
    if (!r)
        return tl_fail(st, TL_EINPUT, "tl_result_pullback_again: the result is NULL");
    for (int k = 0; d_inputs && k < r->ninputs; k++)
        d_inputs[k] = NULL;
    for (int i = 0; d_seeds && i < r->noutputs; i++)
        d_seeds[i] = NULL;
    if (r->rec != REC_RECORDED)
        return tl_fail(st, TL_EINPUT, "cannot pull back again: %s",
                       r->rec == REC_LIVE ? "the recording was not pulled back with tl_result_pullback_recorded"
                                          : "there is no recorded pullback");
    if (r->seeds_only && d_inputs) /* (refused before anything is consumed) */
        return tl_fail(st, TL_EINPUT, "cannot pull back again to the inputs: the pullback was recorded "
                                      "with vary_seeds, as a function of the seeds alone");
    for (int k = 0; grad_cot && k < r->ninputs; k++)
        if (grad_cot[k] && check_like("tangent for input", r->g->inputs[k].name, grad_cot[k], r->inputs[k], st))
            return st->code;
    r->rec = REC_CONSUMED;
    int nv = r->tape.nvars;
    tl_tensor **g = gradient_slots((size_t)nv + 1, st);
    if (!g)
        return st->code;
    int64_t ops0 = r->cx.ops;
    tl_code rc = TL_OK;
    for (int k = 0; k < r->ninputs && !rc; k++) {
        tl_tensor *c = grad_cot ? grad_cot[k] : NULL;
        if (!c || (rc = check_like("tangent for input", r->g->inputs[k].name, c, r->inputs[k], st)))
            continue;
        int v = r->in_var[k] >= 0 ? r->gvar[r->in_var[k]] : -1;
        if (v < 0) /* the gradient is a constant: nothing depends on it */
            continue;
        tl_tensor *t = tl_tensor_ref(c);
        int none = -1;
        rc = tl_tape_add_recorded(NULL, &r->cx, &g[v], &none, t, -1, NULL, st);
    }
    for (int v = 0; v < r->nvars0; v++) { /* their variables stay: the values are the caller's now */
        tl_tensor_unref(r->grad2[v]);
        r->grad2[v] = NULL;
    }
    bool *target = rc ? NULL : calloc((size_t)nv + 1, 1);
    if (target) { /* only the gradients asked for, and what they depend on */
        for (int k = 0; d_inputs && k < r->ninputs; k++)
            if (r->in_var[k] >= 0)
                target[r->in_var[k]] = true;
        for (int i = 0; d_seeds && i < r->noutputs; i++)
            if (r->seed_var[i] >= 0)
                target[r->seed_var[i]] = true;
        tl_tape_prune(&r->tape, target);
        free(target);
    }
    r->cx.phase = 1;
    if (!rc)
        rc = tl_tape_backward(&r->tape, &r->cx, g, r->progress, r->progress_ctx, st);
    if (!rc)
        rc = tl_vmath_check(st);
    r->cx.phase = 0;
    for (int k = 0; d_inputs && k < r->ninputs && !rc; k++) {
        int v = r->in_var[k];
        if (v >= 0 && !(d_inputs[k] = g[v] ? tl_ctx_to_host(&r->cx, g[v], st) : zeros(r, r->inputs[k], st)))
            rc = st->code;
    }
    for (int i = 0; d_seeds && i < r->noutputs && !rc; i++) {
        int v = r->seed_var[i];
        if (!(d_seeds[i] = v >= 0 && g[v] ? tl_ctx_to_host(&r->cx, g[v], st) : zeros(r, r->outputs[i], st)))
            rc = st->code;
    }
    for (int v = 0; v < nv; v++)
        tl_tensor_unref(g[v]);
    free(g);
    drop_recorded(r);
    tl_tape_free(&r->tape);
    if (rc) {
        for (int k = 0; d_inputs && k < r->ninputs; k++) {
            tl_tensor_unref(d_inputs[k]);
            d_inputs[k] = NULL;
        }
        for (int i = 0; d_seeds && i < r->noutputs; i++) {
            tl_tensor_unref(d_seeds[i]);
            d_seeds[i] = NULL;
        }
    }
    return after_pass(r, rc, ops0, st);
}

void tl_result_close(tl_result *r)
{
    if (!r)
        return;
    drop_recorded(r);
    tl_tape_free(&r->tape);
    if (r->rec == REC_LIVE || r->rec == REC_RECORDED)
        r->rec = REC_CLOSED;
}

static void drop_recorded(tl_result *r)
{
    for (int v = 0; r->grad2 && v < r->nvars0; v++)
        tl_tensor_unref(r->grad2[v]);
    free(r->grad2);
    free(r->gvar);
    free(r->seed_var);
    r->grad2 = NULL;
    r->gvar = r->seed_var = NULL;
}

void tl_result_free(tl_result *r)
{
    if (!r)
        return;
    drop_recorded(r);
    tl_tape_free(&r->tape);
    for (int i = 0; r->outputs && i < r->noutputs; i++)
        tl_tensor_unref(r->outputs[i]);
    for (int i = 0; r->inputs && i < r->ninputs; i++)
        tl_tensor_unref(r->inputs[i]);
    free(r->outputs);
    free(r->out_slot);
    free(r->log);
    free(r->out_var);
    free(r->in_var);
    free(r->inputs);
    tl_ctx_release(&r->cx);
    tl_budget_credit(r->budget, r->input_bytes);
    tl_budget_unref(r->budget);
    free(r);
}

static bool uses(const tl_block *b, tl_opcode op)
{
    for (int i = 0; b && i < b->nnodes; i++) {
        const tl_node *n = &b->nodes[i];
        if (n->op == op || uses(n->flow->then_b, op) || uses(n->flow->else_b, op) ||
            uses(n->flow->body, op))
            return true;
    }
    return false;
}

void tl_prepare(const tl_graph *g)
{
    if (uses(&g->top, TL_OP_MATMUL))
        cpu_blas_preload();
}
