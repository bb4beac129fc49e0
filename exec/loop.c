/* Scalar loops (loop.h).  An iterate whose state is scalars (shape [], one
 * float dtype) and whose body is elementwise ops over its state, its step
 * index, numbers and scalars from outside runs as a compiled loop: the
 * body is a register program run once per step on plain values, and the
 * tape is one entry that keeps each step's values (a few bytes a node)
 * instead of a tensor and a tape entry per node.  Backward runs, step by
 * step in reverse and node by node in reverse, the backward rules of
 * grad.c recorded as register programs, and adds gradients in the order
 * the unfused tape does: the bits are those of the loop run node by node.
 * Anything else (tensors in the state, other ops, a device, profile,
 * check-finite, observers) takes the general path. */
#include "loop.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "check.h"
#include "eval.h"
#include "prog.h"

#define LOOP_NODES 64 /* body nodes (one bit each in a step's mask) */
#define LOOP_STATE 16
#define LOOP_EXT 16
#define LOOP_VALS (LOOP_NODES * 4 + LOOP_STATE + 1)
#define LOOP_PROGRESS ((int64_t)1 << 20) /* steps between progress reports */

typedef enum { L_STATE, L_INDEX, L_EXT, L_NUM, L_MEMBER } lkind;

typedef struct lmember {
    const tl_node *node;
    int nargs;
    int arg[3]; /* value ids */
    bool diff;  /* its op has a gradient */
} lmember;

/* A backward rule recorded for one node and one set of wanted inputs. */
typedef struct lrule {
    bool made;
    int start, end; /* its instructions in the loop's backward program */
    int g;          /* the register of the incoming gradient */
    int gin[3];     /* registers of the input gradients (-1: none) */
} lrule;

typedef struct tl_loop {
    tl_custom entry; /* first: the tape entry */
    tl_dtype dt;
    int64_t count;
    int nval;
    lkind kind[LOOP_VALS];
    int index[LOOP_VALS];
    int nstate;
    int result[LOOP_STATE]; /* the node whose value is the next state */
    double init[LOOP_STATE];
    int init_var[LOOP_STATE];
    int out_var[LOOP_STATE];
    int next;
    double ext[LOOP_EXT];
    int ext_var[LOOP_EXT];
    int nnum;
    double num[LOOP_NODES * 3];
    int nmem;
    lmember m[LOOP_NODES];
    tl_pbuild fwd, bwd;
    lrule rule[LOOP_NODES][8];
    void *snap;         /* [count][nmem] values, when recorded */
    uint64_t *recorded; /* [count]: which nodes the unfused run records at that step */
    int64_t charged;
    tl_budget *budget;
} tl_loop;

static void loop_free(tl_loop *l)
{
    if (!l)
        return;
    tl_pb_free(&l->fwd);
    tl_pb_free(&l->bwd);
    free(l->snap);
    free(l->recorded);
    tl_budget_credit(l->budget, l->charged);
    tl_budget_unref(l->budget);
    free(l);
}

static int new_val(tl_loop *l, lkind k, int index)
{
    if (l->nval == LOOP_VALS)
        return -1;
    l->kind[l->nval] = k;
    l->index[l->nval] = index;
    return l->nval++;
}

/* The value id of argument i of body node n; -1: not a scalar loop. */
static int loop_arg(tl_eval *ev, tl_loop *l, const tl_node *it, const tl_node *n, int i, bool any_value)
{
    const tl_arg *a = &n->args[i];
    if (a->slot >= 0) {
        for (int s = 0; s < l->nstate; s++)
            if (it->flow->state[s] == a->slot)
                for (int v = 0; v < l->nval; v++)
                    if (l->kind[v] == L_STATE && l->index[v] == s)
                        return v;
        if (a->slot == it->flow->index_slot) {
            for (int v = 0; v < l->nval; v++)
                if (l->kind[v] == L_INDEX)
                    return v;
            return new_val(l, L_INDEX, 0);
        }
        for (int k = 0; k < l->nmem; k++)
            if (l->m[k].node->out[0] == a->slot)
                for (int v = 0; v < l->nval; v++)
                    if (l->kind[v] == L_MEMBER && l->index[v] == k)
                        return v;
    }
    tl_value v;
    if (tl_eval_arg(ev, a, &v)) {
        ev->st->code = TL_OK; /* the general path says what is wrong */
        return -1;
    }
    if (v.weak) {
        tl_status quiet = {0};
        tl_dtype dt = tl_weak_dtype(n->op, i, any_value, l->dt, ev->call_dtype);
        if (dt != l->dt || tl_weak_fits(v.num, l->dt, &quiet) ||
            l->nnum == (int)(sizeof l->num / sizeof l->num[0]))
            return -1;
        l->num[l->nnum] = v.num;
        return new_val(l, L_NUM, l->nnum++);
    }
    tl_tensor *t = v.t;
    if (!tl_tensor_on_host(t) || t->dtype != l->dt || t->ndim != 0 || l->next == LOOP_EXT)
        return -1;
    l->ext[l->next] = tl_tensor_get(t, 0);
    l->ext_var[l->next] = v.var;
    return new_val(l, L_EXT, l->next++);
}

/* Whether argument i of n is a value rather than a number (weak). */
static bool is_value(tl_eval *ev, const tl_node *it, const tl_loop *l, const tl_node *n, int i)
{
    const tl_arg *a = &n->args[i];
    if (a->slot < 0 || a->slot == it->flow->index_slot)
        return false;
    for (int s = 0; s < l->nstate; s++)
        if (it->flow->state[s] == a->slot)
            return true;
    for (int k = 0; k < l->nmem; k++)
        if (l->m[k].node->out[0] == a->slot)
            return true;
    tl_value v;
    if (tl_eval_arg(ev, a, &v)) {
        ev->st->code = TL_OK;
        return false;
    }
    return !v.weak;
}

/* The loop of iterate node it, or NULL when it is not a scalar loop. */
static tl_loop *plan(tl_eval *ev, const tl_node *it)
{
    const tl_block *body = it->flow->body;
    if (it->flow->count < 1 || it->nargs > LOOP_STATE || body->nnodes > LOOP_NODES || body->nnodes == 0)
        return NULL;
    tl_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->count = it->flow->count;
    l->nstate = it->nargs;
    for (int s = 0; s < it->nargs; s++) {
        tl_value v;
        if (tl_eval_arg(ev, &it->args[s], &v)) {
            ev->st->code = TL_OK;
            goto no;
        }
        tl_dtype dt = v.weak ? ev->call_dtype : v.t->dtype;
        tl_status quiet = {0};
        if (tl_dtype_is_int(dt) || (s > 0 && dt != l->dt) ||
            (!v.weak && (!tl_tensor_on_host(v.t) || v.t->ndim != 0)) ||
            (v.weak && tl_weak_fits(v.num, dt, &quiet)))
            goto no;
        l->dt = dt;
        l->init[s] = v.weak ? v.num : tl_tensor_get(v.t, 0);
        if (v.weak) /* as the general path makes it: a 0-d tensor of the dtype */
            l->init[s] = l->dt == TL_F32 ? (double)(float)l->init[s] : l->init[s];
        l->init_var[s] = v.var;
        if (new_val(l, L_STATE, s) < 0)
            goto no;
    }
    for (int k = 0; k < body->nnodes; k++) {
        const tl_node *n = &body->nodes[k];
        if (n->nout != 1 || !tl_op_elementwise(n->op))
            goto no;
        lmember *m = &l->m[l->nmem];
        *m = (lmember){n, n->nargs, {-1, -1, -1},
                       tl_ops[n->op].kind != TL_KIND_CMP && n->op != TL_OP_SIGN && n->op != TL_OP_DETACH};
        bool any = false;
        for (int i = 0; i < n->nargs; i++)
            any = any || is_value(ev, it, l, n, i);
        if (!any && ev->call_dtype != l->dt) /* numbers only: the call's dtype */
            goto no;
        for (int i = 0; i < n->nargs; i++)
            if ((m->arg[i] = loop_arg(ev, l, it, n, i, any)) < 0)
                goto no;
        l->nmem++;
        if (new_val(l, L_MEMBER, l->nmem - 1) < 0)
            goto no;
    }
    for (int s = 0; s < l->nstate; s++) { /* each next state: a node's value, a different one each */
        l->result[s] = -1;
        for (int k = 0; k < l->nmem; k++)
            if (l->m[k].node->out[0] == body->result[s])
                l->result[s] = k;
        for (int q = 0; q < s; q++)
            if (l->result[q] == l->result[s])
                goto no;
        if (l->result[s] < 0)
            goto no;
    }
    /* the forward program: registers are value ids */
    l->fwd.p.nregs = l->nval;
    for (int k = 0; k < l->nmem; k++) {
        int dst = -1;
        for (int v = 0; v < l->nval; v++)
            if (l->kind[v] == L_MEMBER && l->index[v] == k)
                dst = v;
        tl_pb_op(&l->fwd, l->m[k].node->op, l->m[k].node->attrs, dst, l->m[k].arg);
    }
    if (l->fwd.oom)
        goto no;
    return l;
no:
    loop_free(l);
    return NULL;
}

/* The registers of values by kind. */
static void registers(const tl_loop *l, int *member_reg, int *state_reg, int *index_reg)
{
    *index_reg = -1;
    for (int v = 0; v < l->nval; v++) {
        if (l->kind[v] == L_MEMBER)
            member_reg[l->index[v]] = v;
        else if (l->kind[v] == L_STATE)
            state_reg[l->index[v]] = v;
        else if (l->kind[v] == L_INDEX)
            *index_reg = v;
    }
}

/* Which nodes the unfused run records at a step, given which states are
 * recorded values: a node with a gradient and a recorded argument. */
static uint64_t recorded_at(const tl_loop *l, const bool *state_rec)
{
    uint64_t mask = 0;
    for (int k = 0; k < l->nmem; k++) {
        const lmember *m = &l->m[k];
        bool any = false;
        for (int i = 0; i < m->nargs; i++) {
            int v = m->arg[i], x = l->index[v];
            any = any || (l->kind[v] == L_STATE && state_rec[x]) ||
                  (l->kind[v] == L_EXT && l->ext_var[x] >= 0) ||
                  (l->kind[v] == L_MEMBER && (mask >> x & 1));
        }
        if (any && m->diff)
            mask |= (uint64_t)1 << k;
    }
    return mask;
}

/* The inputs of node k that want a gradient at a step: rec and prev are
 * the step's and the step before's recorded nodes. */
static unsigned want_of(const tl_loop *l, int k, uint64_t rec, uint64_t prev, int64_t step)
{
    const lmember *m = &l->m[k];
    unsigned want = 0;
    for (int i = 0; i < m->nargs; i++) {
        int v = m->arg[i], x = l->index[v];
        bool w = (l->kind[v] == L_STATE && (step ? (prev >> l->result[x] & 1) : l->init_var[x] >= 0)) ||
                 (l->kind[v] == L_EXT && l->ext_var[x] >= 0) ||
                 (l->kind[v] == L_MEMBER && (rec >> x & 1));
        want |= (unsigned)w << i;
    }
    return want;
}

/* Node k's rule for the wanted inputs (bit i: input i), recorded into the
 * backward program. */
static tl_code record_rule(tl_loop *l, int k, unsigned want, tl_status *st)
{
    lrule *ru = &l->rule[k][want];
    const lmember *m = &l->m[k];
    tl_pbuild *b = &l->bwd;
    if (b->p.nregs < l->nval)
        b->p.nregs = l->nval;
    tl_precorder r;
    tl_pr_init(&r, b);
    ru->start = b->p.nins;
    ru->g = tl_pb_reg(b);
    tl_tensor *in[3] = {NULL, NULL, NULL}, *gin[3] = {NULL, NULL, NULL};
    int in_var[3] = {-1, -1, -1}, self = -1;
    tl_code rc = TL_OK;
    for (int v = 0; v < l->nval; v++)
        if (l->kind[v] == L_MEMBER && l->index[v] == k)
            self = v;
    for (int i = 0; i < m->nargs && !rc; i++) {
        in[i] = tl_pr_symbol(&r, m->arg[i], l->dt, 0, NULL, st);
        in_var[i] = want >> i & 1 ? 0 : -1;
        rc = in[i] ? TL_OK : st->code;
    }
    tl_tensor *out = rc ? NULL : tl_pr_symbol(&r, self, l->dt, 0, NULL, st);
    tl_tensor *g = out ? tl_pr_symbol(&r, ru->g, l->dt, 0, NULL, st) : NULL;
    if (!rc && !g)
        rc = st->code;
    if (!rc) {
        tl_entry e = {.op = m->node->op, .nin = m->nargs, .attrs = m->node->attrs, .node = m->node,
                      .out = out, .in_var = in_var, .in = in};
        rc = tl_grad_rule_with(NULL, &r.base, &e, g, gin, st);
    }
    for (int i = 0; i < 3; i++) {
        ru->gin[i] = rc || !gin[i] ? -1 : tl_pr_reg(&r, gin[i]);
        if (!rc && gin[i] && (ru->gin[i] < 0 || gin[i]->ndim != 0))
            rc = tl_fail(st, TL_ERUNTIME, "internal: a scalar loop's backward rule changed shape");
        tl_tensor_unref(gin[i]);
    }
    tl_pr_free(&r);
    if (!rc && (b->oom || r.failed))
        rc = st->code ? st->code : tl_fail(st, TL_ERUNTIME, "out of memory writing a loop's backward program");
    ru->end = b->p.nins;
    ru->made = !rc;
    return rc;
}

/* Every rule the backward sweep will run, recorded before it. */
static tl_code record_rules(tl_loop *l, tl_status *st)
{
    uint64_t last_rec = 0, last_prev = 0;
    for (int64_t step = l->count - 1; step >= 0; step--) {
        uint64_t rec = l->recorded[step], prev = step ? l->recorded[step - 1] : 0;
        if (step && step != l->count - 1 && rec == last_rec && prev == last_prev)
            continue; /* the same as the step after: nothing new */
        last_rec = rec;
        last_prev = prev;
        for (int k = 0; k < l->nmem; k++) {
            if (!(rec >> k & 1))
                continue;
            unsigned want = want_of(l, k, rec, prev, step);
            if (!l->rule[k][want].made && record_rule(l, k, want, st))
                return st->code;
        }
    }
    return TL_OK;
}

/* The outer variables the loop adds to: its inputs' and scalars' from
 * outside, their gradients as T values. */
typedef struct accs {
    int n;
    int var[LOOP_EXT + LOOP_STATE];
    double val[LOOP_EXT + LOOP_STATE];
    bool has[LOOP_EXT + LOOP_STATE], changed[LOOP_EXT + LOOP_STATE];
} accs;

static int acc_of(const accs *a, int var)
{
    for (int i = 0; i < a->n; i++)
        if (a->var[i] == var)
            return i;
    return -1;
}

/* Adds g to a gradient that may be absent (then it becomes g), as the
 * tape does. */
#define ADD_TO(T, has, val, g)                                                     \
    do {                                                                           \
        if (!(has)) {                                                              \
            (val) = (g);                                                           \
            (has) = true;                                                          \
        } else {                                                                   \
            (val) = (T)((val) + (g));                                              \
        }                                                                          \
    } while (0)

#define DEFINE_LOOP(T, SUF)                                                        \
    static void load_##SUF(const tl_loop *l, T *r)                                 \
    {                                                                              \
        for (int v = 0; v < l->nval; v++) {                                        \
            int i = l->index[v];                                                   \
            if (l->kind[v] == L_EXT)                                               \
                r[v] = (T)l->ext[i];                                               \
            else if (l->kind[v] == L_NUM)                                          \
                r[v] = (T)l->num[i];                                               \
            else if (l->kind[v] == L_STATE)                                        \
                r[v] = (T)l->init[i];                                              \
        }                                                                          \
    }                                                                              \
    /* Steps [from, to); with snap, each step's node values kept.  Leaves the \
     * states in their registers for the next steps. */                         \
    static void forward_##SUF(const tl_loop *l, T *r, T *snap, int64_t from, int64_t to) \
    {                                                                              \
        int member_reg[LOOP_NODES], state_reg[LOOP_STATE], index_reg;             \
        registers(l, member_reg, state_reg, &index_reg);                           \
        const tl_mins *ins = l->fwd.p.ins;                                         \
        int nins = l->fwd.p.nins, nm = l->nmem;                                    \
        if (from == 0)                                                             \
            load_##SUF(l, r);                                                      \
        for (int64_t step = from; step < to; step++) {                             \
            if (index_reg >= 0)                                                    \
                r[index_reg] = (T)step;                                            \
            cpu_prog_scalar_##SUF(ins, nins, r);                                   \
            if (snap)                                                              \
                for (int k = 0; k < nm; k++)                                       \
                    snap[step * nm + k] = r[member_reg[k]];                        \
            for (int s = 0; s < l->nstate; s++)                                    \
                r[state_reg[s]] = r[member_reg[l->result[s]]];                     \
        }                                                                          \
    }                                                                              \
    /* The backward sweep: state_cot/state_has enter with the final states'    \
     * gradients; acc holds the outer variables'. */                              \
    static void sweep_##SUF(const tl_loop *l, T *r, T *state_cot, bool *state_has, accs *acc) \
    {                                                                              \
        int member_reg[LOOP_NODES], state_reg[LOOP_STATE], index_reg;             \
        registers(l, member_reg, state_reg, &index_reg);                           \
        int nm = l->nmem, ns = l->nstate;                                          \
        T cot[LOOP_NODES], accv[LOOP_EXT + LOOP_STATE];                            \
        bool has[LOOP_NODES];                                                      \
        const T *snap = l->snap;                                                   \
        for (int i = 0; i < acc->n; i++)                                           \
            accv[i] = (T)acc->val[i];                                              \
        load_##SUF(l, r);                                                          \
        for (int i = 0; i < l->bwd.p.nconst; i++)                                  \
            r[l->bwd.p.const_reg[i]] = (T)l->bwd.p.const_val[i];                   \
        for (int64_t step = l->count - 1; step >= 0; step--) {                     \
            uint64_t rec = l->recorded[step], prev = step ? l->recorded[step - 1] : 0; \
            bool any = false;                                                      \
            for (int k = 0; k < nm; k++)                                           \
                has[k] = false;                                                    \
            for (int s = 0; s < ns; s++)                                           \
                if (state_has[s]) {                                                \
                    cot[l->result[s]] = state_cot[s];                              \
                    has[l->result[s]] = true;                                      \
                    state_has[s] = false;                                          \
                    any = true;                                                    \
                }                                                                  \
            if (!any)                                                              \
                break; /* nothing reaches the earlier steps */                     \
            for (int k = 0; k < nm; k++)                                           \
                r[member_reg[k]] = snap[step * nm + k];                            \
            for (int s = 0; s < ns; s++)                                           \
                r[state_reg[s]] = step ? snap[(step - 1) * nm + l->result[s]] : (T)l->init[s]; \
            if (index_reg >= 0)                                                    \
                r[index_reg] = (T)step;                                            \
            for (int k = nm - 1; k >= 0; k--) {                                    \
                if (!(rec >> k & 1) || !has[k])                                    \
                    continue;                                                      \
                const lmember *m = &l->m[k];                                       \
                unsigned want = want_of(l, k, rec, prev, step);                    \
                const lrule *ru = &l->rule[k][want];                               \
                r[ru->g] = cot[k];                                                 \
                cpu_prog_scalar_##SUF(l->bwd.p.ins + ru->start, ru->end - ru->start, r); \
                for (int i = 0; i < m->nargs; i++) {                               \
                    if (!(want >> i & 1) || ru->gin[i] < 0)                        \
                        continue;                                                  \
                    T g = r[ru->gin[i]];                                           \
                    int v = m->arg[i], x = l->index[v], a;                         \
                    if (l->kind[v] == L_MEMBER) {                                  \
                        ADD_TO(T, has[x], cot[x], g);                              \
                    } else if (l->kind[v] == L_STATE && step) {                    \
                        ADD_TO(T, state_has[x], state_cot[x], g);                  \
                    } else {                                                       \
                        a = acc_of(acc, l->kind[v] == L_STATE ? l->init_var[x] : l->ext_var[x]); \
                        ADD_TO(T, acc->has[a], accv[a], g);                        \
                        acc->changed[a] = true;                                    \
                    }                                                              \
                }                                                                  \
            }                                                                      \
        }                                                                          \
        for (int i = 0; i < acc->n; i++)                                           \
            acc->val[i] = (double)accv[i];                                         \
    }
DEFINE_LOOP(float, f)
DEFINE_LOOP(double, d)

static void loop_entry_free(tl_custom *c) { loop_free((tl_loop *)c); }

static tl_code loop_backward(tl_custom *c, tl_ctx *cx, tl_tensor **grads, tl_status *st)
{
    tl_loop *l = (tl_loop *)c;
    accs acc = {0};
    double state_cot[LOOP_STATE];
    bool state_has[LOOP_STATE] = {false}, any = false;
    for (int s = 0; s < l->nstate; s++) {
        tl_tensor *g = l->out_var[s] >= 0 ? grads[l->out_var[s]] : NULL;
        if (g) {
            state_cot[s] = tl_tensor_get(g, 0);
            state_has[s] = any = true;
            grads[l->out_var[s]] = NULL;
            tl_tensor_unref(g);
        }
    }
    if (!any)
        return TL_OK;
    for (int i = 0; i < l->next + l->nstate; i++) {
        int var = i < l->next ? l->ext_var[i] : l->init_var[i - l->next];
        if (var < 0 || acc_of(&acc, var) >= 0)
            continue;
        acc.var[acc.n] = var;
        if (grads[var]) {
            acc.val[acc.n] = tl_tensor_get(grads[var], 0);
            acc.has[acc.n] = true;
        }
        acc.n++;
    }
    if (record_rules(l, st))
        return st->code;
    int nregs = l->bwd.p.nregs > l->nval ? l->bwd.p.nregs : l->nval;
    void *r = tl_malloc((size_t)nregs + 1, 8, "a loop's registers", st);
    if (!r)
        return st->code;
    if (l->dt == TL_F32) {
        float sc[LOOP_STATE];
        for (int s = 0; s < l->nstate; s++)
            sc[s] = (float)state_cot[s];
        sweep_f(l, r, sc, state_has, &acc);
    } else {
        sweep_d(l, r, state_cot, state_has, &acc);
    }
    free(r);
    tl_code rc = TL_OK;
    for (int i = 0; i < acc.n && !rc; i++) {
        if (!acc.changed[i])
            continue;
        tl_tensor *t = tl_tensor_new_in(cx->budget, l->dt, 0, NULL, st);
        if (!t) {
            rc = st->code;
            break;
        }
        tl_tensor_set(t, 0, acc.val[i]);
        tl_tensor_unref(grads[acc.var[i]]);
        grads[acc.var[i]] = t;
    }
    return rc;
}

int tl_loop_try(tl_eval *ev, const tl_node *it)
{
    const tl_run_opts *o = ev->opts;
    if (o->fuse_min < 0 || o->twice || o->observe || o->profile || o->check_finite || ev->log ||
        tl_ctx_on_device(ev->cx)) /* twice: its entry is not recorded twice */
        return 0;
    tl_loop *l = plan(ev, it);
    if (!l)
        return 0;
    tl_status *st = ev->st;
    bool record = ev->tape != NULL;
    size_t es = tl_dtype_size(l->dt);
    bool state_rec[LOOP_STATE];
    uint64_t all = 0;
    for (int s = 0; s < l->nstate; s++)
        state_rec[s] = record && l->init_var[s] >= 0;
    if (record) { /* the loop itself stays on the tape too (23 KB: an iterate nested in another's
                   * body took them at every outer step uncounted, until tests/cli/hostile.txt's case) */
        int64_t bytes = l->count * (int64_t)(l->nmem * es + sizeof(uint64_t)) + (int64_t)sizeof *l +
                        tl_pb_bytes(&l->fwd) + tl_pb_bytes(&l->bwd);
        if (tl_budget_charge(ev->cx->budget, bytes, "the tape of a scalar iterate", st)) {
            loop_free(l);
            return -1;
        }
        l->charged = bytes;
        l->budget = tl_budget_ref(ev->cx->budget);
        l->snap = tl_malloc((size_t)l->count * (size_t)l->nmem, es, "the tape of a scalar iterate", st);
        l->recorded = l->snap ? tl_malloc((size_t)l->count, sizeof(uint64_t), "the tape of a scalar iterate", st) : NULL;
        if (!l->recorded) {
            loop_free(l);
            return -1;
        }
        for (int64_t step = 0; step < l->count; step++) {
            uint64_t rec = recorded_at(l, state_rec);
            l->recorded[step] = rec;
            all |= rec;
            for (int s = 0; s < l->nstate; s++)
                state_rec[s] = rec >> l->result[s] & 1;
        }
    }
    double *r = tl_malloc((size_t)l->nval + 1, sizeof(double), "a loop's registers", st);
    if (!r) {
        loop_free(l);
        return -1;
    }
    int member_reg[LOOP_NODES], state_reg[LOOP_STATE], index_reg;
    registers(l, member_reg, state_reg, &index_reg);
    tl_code rc = TL_OK;
    tl_tensor *outs[LOOP_STATE] = {NULL};
    for (int64_t from = 0; from < l->count; from += LOOP_PROGRESS) { /* a long loop says how far */
        int64_t to = l->count - from < LOOP_PROGRESS ? l->count : from + LOOP_PROGRESS;
        if (l->dt == TL_F32)
            forward_f(l, (float *)r, all ? l->snap : NULL, from, to);
        else
            forward_d(l, r, all ? l->snap : NULL, from, to);
        if (o->progress && to < l->count)
            o->progress(o->progress_ctx, "forward", ev->stats->nodes + to * l->nmem, -1);
    }
    for (int s = 0; s < l->nstate && !rc; s++) {
        if (!(outs[s] = tl_tensor_new_in(ev->cx->budget, l->dt, 0, NULL, st))) {
            rc = st->code;
            break;
        }
        double v = l->dt == TL_F32 ? (double)((float *)r)[state_reg[s]] : r[state_reg[s]];
        tl_tensor_set(outs[s], 0, v);
    }
    free(r);
    for (int s = 0; s < l->nstate; s++) {
        l->out_var[s] = -1;
        if (!rc && all && state_rec[s])
            l->out_var[s] = tl_tape_new_var(ev->tape);
        if (!rc)
            tl_eval_set(ev, it->out[s], outs[s], l->out_var[s]);
        else
            tl_tensor_unref(outs[s]);
    }
    ev->stats->nodes += l->count * l->nmem;
    ev->stats->loops++;
    if (!rc && all) {
        l->entry = (tl_custom){loop_backward, loop_entry_free};
        rc = tl_tape_record_custom(ev->tape, &l->entry, it, st);
    } else {
        loop_free(l);
    }
    return rc ? -1 : 1;
}
