/* Fused elementwise chains (fuse.h).  A chain is planned when the
 * evaluator reaches its first node, from the values at hand: it grows node
 * by node while every tensor it reads has the chain's shape and dtype (a
 * constant scalar or a number may join in) and stops at the first node that
 * does not fit, or after a sum over every axis.  The unfused path remains
 * for everything else, and for runs that watch single ops (profile,
 * check-finite, observers) or live on a device. */
#include "fuse.h"

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/opdoc.h"
#include "check.h"
#include "eval.h"
#include "prog.h"
#include "shape.h"
#include "graph/mapc.h"
#include "bw.h"

#define FUSE_MAX 48 /* nodes in one chain */
#define ARGS_MAX 8  /* inputs of a node (a map's args and the scalars it captures) */
#define EXT_MAX 16  /* tensors it reads from outside */
#define VAL_MAX (FUSE_MAX * 4)

typedef enum { V_EXT, V_NUM, V_MEMBER } vkind;
typedef struct tl_fused tl_fused;

typedef struct member {
    const tl_node *node;
    tl_opcode op;
    const tl_attrs *attrs;
    int nargs;
    int arg[ARGS_MAX]; /* value ids */
    int val;       /* the id of its value */
    bool rec;      /* recorded on the tape when run unfused */
    bool exported; /* read after the chain: written out */
    int var;       /* exported and recorded: its tape variable */
} member;

struct tl_fused {
    tl_custom entry; /* first: the tape entry */
    tl_dtype dt;
    int ndim;
    int64_t shape[TL_MAXDIM];
    int nmem;
    member m[FUSE_MAX];
    bool sink; /* the last member is a sum over every axis */
    int nval;
    vkind kind[VAL_MAX];
    int index[VAL_MAX]; /* into ext, num or m */
    bool full[VAL_MAX]; /* has the chain's shape (else one element) */
    int next;
    tl_tensor *ext[EXT_MAX]; /* one reference each */
    int ext_var[EXT_MAX];
    int ext_val[EXT_MAX];
    int nnum;
    double num[FUSE_MAX * 3];
};

static void tl_fused_free(tl_fused *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->next; i++)
        tl_tensor_unref(f->ext[i]);
    free(f);
}

/* ---------- planning ---------- */

static bool differentiable(tl_opcode op) { return tl_op_differentiable(op); }

static int new_val(tl_fused *f, vkind k, int index, bool full)
{
    if (f->nval == VAL_MAX)
        return -1;
    f->kind[f->nval] = k;
    f->index[f->nval] = index;
    f->full[f->nval] = full;
    return f->nval++;
}

/* The value id of tensor argument i of node n, adding it to the chain; -1:
 * the chain cannot take it (and stops before n).  Numbers wait for pass 2. */
static int take_tensor(tl_eval *ev, tl_fused *f, const tl_arg *a, int64_t min, bool *has_grad)
{
    *has_grad = false;
    for (int k = 0; a->slot >= 0 && k < f->nmem; k++) /* a value of the chain */
        if (f->m[k].node->out[0] == a->slot) {
            *has_grad = f->m[k].rec;
            return f->m[k].val;
        }
    tl_value v;
    if (tl_eval_arg(ev, a, &v)) {
        ev->st->code = TL_OK; /* the unfused run will say what is wrong */
        return -1;
    }
    tl_tensor *t = v.t;
    if (v.weak || !tl_tensor_on_host(t) || tl_dtype_is_int(t->dtype))
        return -1;
    if (f->ndim < 0) { /* the chain's first tensor: its shape and dtype */
        if (t->numel < min)
            return -1;
        f->dt = t->dtype;
        f->ndim = t->ndim;
        memcpy(f->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
    bool full = t->dtype == f->dt && t->ndim == f->ndim &&
                !memcmp(t->shape, f->shape, sizeof(int64_t) * (size_t)f->ndim);
    bool scalar = t->dtype == f->dt && t->ndim == 0 && v.var < 0;
    if (!full && !scalar)
        return -1;
    for (int k = 0; k < f->next; k++)
        if (f->ext[k] == t) {
            if (f->ext_var[k] != v.var)
                return -1;
            *has_grad = v.var >= 0;
            return f->ext_val[k];
        }
    if (f->next == EXT_MAX)
        return -1;
    int id = new_val(f, V_EXT, f->next, full);
    if (id < 0)
        return -1;
    f->ext[f->next] = tl_tensor_ref(t);
    f->ext_var[f->next] = v.var;
    f->ext_val[f->next++] = id;
    *has_grad = v.var >= 0;
    return id;
}

/* Whether an argument is a plain number (a literal or a weak const). */
static bool is_number(tl_eval *ev, const tl_fused *f, const tl_arg *a, double *num)
{
    for (int k = 0; a->slot >= 0 && k < f->nmem; k++)
        if (f->m[k].node->out[0] == a->slot)
            return false;
    tl_value v;
    if (tl_eval_arg(ev, a, &v)) {
        ev->st->code = TL_OK;
        return false;
    }
    *num = v.num;
    return v.weak;
}

/* Adds node n to the chain; false: it does not fit (the chain ends before
 * it, as it was). */
static bool add_member(tl_eval *ev, tl_fused *f, const tl_node *n, int64_t min)
{
    bool sum = n->op == TL_OP_SUM, map = n->op == TL_OP_MAP;
    int nin = map ? n->nargs + n->flow->ncap : n->nargs;
    if (n->nout != 1 || (!tl_op_elementwise(n->op) && !sum && !map) || (sum && f->nmem == 0) ||
        nin > ARGS_MAX)
        return false;
    member *m = &f->m[f->nmem];
    int nval0 = f->nval, next0 = f->next, nnum0 = f->nnum;
    bool grad = false, any_full = false, number[ARGS_MAX] = {false};
    double num[ARGS_MAX];
    tl_arg args[ARGS_MAX]; /* a map's: its args, then the scalars its body reads */
    for (int i = 0; i < nin; i++)
        args[i] = i < n->nargs ? n->args[i] : (tl_arg){.slot = n->flow->cap_slots[i - n->nargs]};
    *m = (member){n, n->op, n->attrs, nin, {-1, -1, -1, -1, -1, -1, -1, -1}, -1, false, false, -1};
    for (int i = 0; i < nin; i++) { /* tensors first: they fix the chain's dtype */
        if ((number[i] = is_number(ev, f, &args[i], &num[i])))
            continue;
        bool g;
        int id = take_tensor(ev, f, &args[i], min, &g);
        if (id < 0 || (sum && f->kind[id] != V_MEMBER) || (map && i >= n->nargs && f->full[id]))
            goto undo;
        m->arg[i] = id;
        grad = grad || g;
        any_full = any_full || f->full[id];
    }
    if (!any_full) /* a number op a number, or scalars only: not the chain's shape */
        goto undo;
    for (int i = 0; i < nin; i++) {
        if (!number[i])
            continue;
        /* the unfused run makes the number a 0-d tensor of this dtype */
        tl_status quiet = {0};
        if ((!map && tl_weak_dtype(n->op, i, true, f->dt, ev->call_dtype) != f->dt) ||
            tl_weak_fits(num[i], f->dt, &quiet) || f->nnum == (int)(sizeof f->num / sizeof f->num[0]))
            goto undo;
        f->num[f->nnum] = num[i];
        if ((m->arg[i] = new_val(f, V_NUM, f->nnum++, false)) < 0)
            goto undo;
    }
    if (sum) { /* only over every axis: one tree */
        const tl_attrs *a = n->attrs;
        if (a->has_axes && a->naxes != f->ndim)
            goto undo;
        f->sink = true;
    }
    m->rec = ev->tape && grad && differentiable(n->op);
    if ((m->val = new_val(f, V_MEMBER, f->nmem, !sum)) < 0)
        goto undo;
    f->nmem++;
    return true;
undo:
    for (int k = next0; k < f->next; k++)
        tl_tensor_unref(f->ext[k]);
    f->nval = nval0;
    f->next = next0;
    f->nnum = nnum0;
    f->sink = false;
    return false;
}

/* ---------- programs ---------- */

/* The chain's forward program: a register per value (its id), the chain's
 * tensors as inputs, its numbers as constants. */
static void build_forward(const tl_fused *f, tl_pbuild *b)
{
    b->p.nregs = f->nval;
    for (int v = 0; v < f->nval; v++) {
        if (f->kind[v] == V_EXT)
            tl_pb_input(b, f->ext[f->index[v]], v);
        else if (f->kind[v] == V_NUM) {
            int cap = b->ccap; /* a constant in the value's own register */
            b->p.const_reg = tl_pb_grow(b->p.const_reg, &cap, b->p.nconst + 1, sizeof(int), &b->oom);
            b->p.const_val = tl_pb_grow(b->p.const_val, &b->ccap, b->p.nconst + 1, sizeof(double), &b->oom);
            if (!b->oom) {
                b->p.const_reg[b->p.nconst] = v;
                b->p.const_val[b->p.nconst++] = f->num[f->index[v]];
            }
        }
    }
    for (int k = 0; k < f->nmem - (f->sink ? 1 : 0); k++) {
        const member *m = &f->m[k];
        if (m->op == TL_OP_MAP)
            tl_pb_call(b, m->attrs->prog, m->nargs, m->arg, -1, 0, m->val);
        else
            tl_pb_op(b, m->op, m->attrs, m->val, m->arg);
    }
}

/* Whether the unfused run would want a gradient for value v. */
static bool wants_grad(const tl_fused *f, int v)
{
    return (f->kind[v] == V_EXT && f->ext_var[f->index[v]] >= 0) ||
           (f->kind[v] == V_MEMBER && f->m[f->index[v]].rec);
}

/* Appends the backward sweep to b (which holds the forward program).
 * gcot[k]: the gradient arriving at member k's value (NULL: none); gext[e]:
 * the gradient ext[e] has so far (NULL: none).  out_reg[e] receives the
 * register of ext[e]'s new gradient, or -1 when the chain adds nothing.
 * A dry run (gcot, gext NULL) assumes every exported value gets a gradient. */
static tl_code build_backward(const tl_fused *f, tl_pbuild *b, tl_tensor *const *gcot,
                              tl_tensor *const *gext, int *out_reg, tl_status *st)
{
    int cot[VAL_MAX], base[EXT_MAX];
    for (int v = 0; v < f->nval; v++)
        cot[v] = -1;
    for (int k = 0; k < f->nmem; k++)
        if (f->m[k].exported && f->m[k].rec && (gcot ? gcot[k] != NULL : true))
            cot[f->m[k].val] = tl_pb_input(b, gcot ? gcot[k] : NULL, -1);
    for (int e = 0; e < f->next; e++) {
        base[e] = -1;
        if (f->ext_var[e] >= 0 && gext && gext[e])
            base[e] = cot[f->ext_val[e]] = tl_pb_input(b, gext[e], -1);
    }
    tl_precorder r;
    tl_pr_init(&r, b);
    tl_code rc = TL_OK;
    int last = f->nmem - 1;
    if (f->sink && f->m[last].rec && cot[f->m[last].val] >= 0) /* sum's rule: g everywhere */
        tl_pb_accumulate(b, &cot[f->m[last].arg[0]], cot[f->m[last].val]);
    for (int k = last - (f->sink ? 1 : 0); k >= 0 && !rc; k--) {
        const member *m = &f->m[k];
        if (!m->rec || cot[m->val] < 0)
            continue;
        tl_tensor *in[ARGS_MAX] = {NULL}, *gin[ARGS_MAX] = {NULL};
        int in_var[ARGS_MAX];
        for (int i = 0; i < m->nargs && !rc; i++) {
            int v = m->arg[i];
            in[i] = tl_pr_symbol(&r, v, f->dt, f->full[v] ? f->ndim : 0, f->shape, st);
            in_var[i] = wants_grad(f, v) ? 0 : -1;
            rc = in[i] ? TL_OK : st->code;
        }
        tl_tensor *out = rc ? NULL : tl_pr_symbol(&r, m->val, f->dt, f->ndim, f->shape, st);
        tl_tensor *g = out ? tl_pr_symbol(&r, cot[m->val], f->dt, f->ndim, f->shape, st) : NULL;
        if (!g) {
            rc = st->code;
            break;
        }
        tl_entry e = {.op = m->op, .nin = m->nargs, .out_var = 0, .attrs = m->attrs, .node = m->node,
                      .out = out, .in_var = in_var, .in = in};
        rc = tl_grad_rule_with(NULL, &r.base, &e, g, gin, st);
        for (int i = 0; i < m->nargs && !rc; i++) {
            if (in_var[i] < 0 || !gin[i])
                continue;
            int gr = tl_pr_reg(&r, gin[i]);
            if (gr < 0 || gin[i]->numel != out->numel) { /* a rule that does not stay elementwise */
                rc = tl_fail(st, TL_ERUNTIME, "internal: a fused backward rule changed shape");
                break;
            }
            tl_pb_accumulate(b, &cot[m->arg[i]], gr);
        }
        for (int i = 0; i < m->nargs; i++)
            tl_tensor_unref(gin[i]);
    }
    for (int e = 0; e < f->next; e++) {
        int c = cot[f->ext_val[e]];
        out_reg[e] = f->ext_var[e] >= 0 && c >= 0 && c != base[e] ? c : -1;
    }
    tl_pr_free(&r);
    if (!rc && (b->oom || r.failed))
        rc = st->code ? st->code : tl_fail(st, TL_ERUNTIME, "out of memory writing a fused backward program");
    return rc;
}

/* ---------- running a chain ---------- */

static tl_code run_forward(tl_eval *ev, tl_fused *f, tl_tensor **outs)
{
    tl_status *st = ev->st;
    tl_pbuild b = {0};
    build_forward(f, &b);
    int out_reg[FUSE_MAX + 1], nout = 0;
    tl_tensor *wr[FUSE_MAX], *sum = NULL;
    tl_code rc = b.oom ? tl_fail(st, TL_ERUNTIME, "out of memory planning a fused chain") : TL_OK;
    int last = f->nmem - 1;
    for (int k = 0; k < f->nmem; k++)
        outs[k] = NULL;
    for (int k = 0; k < f->nmem && !rc; k++) {
        const member *m = &f->m[k];
        if (f->sink && k == last) {
            tl_attrs a = *m->attrs;
            tl_shape sh;
            tl_tensor like = {.dtype = f->dt, .ndim = f->ndim};
            memcpy(like.shape, f->shape, sizeof like.shape);
            const tl_tensor *x = &like;
            if (tl_shape_infer(TL_OP_SUM, 1, &x, &a, &sh, st) ||
                !(sum = outs[k] = tl_tensor_new_in(ev->cx->budget, f->dt, sh.ndim, sh.dims, st)))
                rc = st->code;
            continue;
        }
        if (!m->exported)
            continue;
        if (!(outs[k] = tl_tensor_new_in(ev->cx->budget, f->dt, f->ndim, f->shape, st))) {
            rc = st->code;
            break;
        }
        out_reg[nout] = m->val;
        wr[nout++] = outs[k];
    }
    if (!rc) {
        int sum_reg = f->sink ? f->m[last].arg[0] : -1;
        out_reg[nout] = sum_reg; /* what the pass must compute: its outputs and the sum */
        tl_pb_prune(&b, out_reg, nout + 1);
        rc = cpu_prog_run(&b.p, f->dt, f->ndim, f->shape, b.p.nin, b.in, nout, out_reg, wr, sum_reg,
                          sum, st);
    }
    ev->cx->ops += f->nmem;
    tl_pb_free(&b);
    return rc;
}

static void fused_free(tl_custom *c) { tl_fused_free((tl_fused *)c); }

static tl_code fused_backward(tl_custom *c, tl_ctx *cx, tl_tensor **grads, tl_status *st)
{
    tl_fused *f = (tl_fused *)c;
    tl_tensor *gcot[FUSE_MAX] = {NULL}, *gext[EXT_MAX] = {NULL}, *res[EXT_MAX] = {NULL};
    bool any = false;
    for (int k = 0; k < f->nmem; k++)
        if (f->m[k].var >= 0) {
            gcot[k] = grads[f->m[k].var];
            grads[f->m[k].var] = NULL;
            any = any || gcot[k];
        }
    tl_code rc = TL_OK;
    if (any) {
        for (int e = 0; e < f->next; e++)
            if (f->ext_var[e] >= 0)
                gext[e] = grads[f->ext_var[e]];
        tl_pbuild b = {0};
        int out_reg[EXT_MAX], nout = 0, reg[EXT_MAX], which[EXT_MAX];
        build_forward(f, &b);
        rc = build_backward(f, &b, gcot, gext, out_reg, st);
        for (int e = 0; e < f->next && !rc; e++) {
            if (out_reg[e] < 0)
                continue;
            if (!(res[nout] = tl_tensor_new_in(cx->budget, f->dt, f->ndim, f->shape, st)))
                rc = st->code;
            reg[nout] = out_reg[e];
            which[nout++] = e;
        }
        if (!rc) {
            tl_pb_prune(&b, reg, nout); /* the forward values no rule reads */
            rc = cpu_prog_run(&b.p, f->dt, f->ndim, f->shape, b.p.nin, b.in, nout, reg, res, -1,
                              NULL, st);
        }
        cx->ops += b.p.nins;
        tl_pb_free(&b);
        for (int o = 0; o < nout; o++) {
            int v = f->ext_var[which[o]];
            if (!rc) {
                tl_tensor_unref(grads[v]);
                grads[v] = res[o];
            } else {
                tl_tensor_unref(res[o]);
            }
        }
    }
    for (int k = 0; k < f->nmem; k++)
        tl_tensor_unref(gcot[k]);
    return rc;
}

/* Whether node n could start or continue a chain (by its op alone). */
static bool candidate(const tl_node *n, bool first)
{
    return n->nout == 1 &&
           (tl_op_elementwise(n->op) || n->op == TL_OP_MAP || (!first && n->op == TL_OP_SUM));
}

/* The elements a chain's tensors must have (tl_run_opts.fuse_min). */
static int64_t min_elements(const tl_run_opts *o) { return o->fuse_min ? o->fuse_min : TL_FUSE_MIN_DEFAULT; }

/* The chain from node i of b, of at most limit members; NULL when fewer
 * than two fit.  *end: the node after it.  twice (a tape to differentiate
 * twice, where the chain becomes a map: as_map): no sum and no map joins. */
static tl_fused *plan(tl_eval *ev, const tl_block *b, int i, int limit, bool twice, int *end)
{
    int64_t min = min_elements(ev->opts);
    tl_fused *f = calloc(1, sizeof *f);
    if (!f)
        return NULL; /* the unfused run needs less memory than this */
    f->ndim = -1;
    int j = i;
    while (j < b->nnodes && f->nmem < limit && !f->sink &&
           !(twice && (b->nodes[j].op == TL_OP_SUM || b->nodes[j].op == TL_OP_MAP)) &&
           add_member(ev, f, &b->nodes[j], min))
        j++;
    if (f->nmem < 2) {
        tl_fused_free(f);
        return NULL;
    }
    /* exported: read after the chain (or kept, or never freed) */
    bool internal[FUSE_MAX] = {false};
    for (int k = i; k < j; k++)
        for (int q = 0; q < b->nodes[k].nfree; q++) {
            int s = b->nodes[k].free_after[q];
            for (int m = 0; m < f->nmem; m++)
                if (f->m[m].node->out[0] == s && !(ev->keep && ev->keep[s]))
                    internal[m] = true;
        }
    for (int m = 0; m < f->nmem; m++)
        f->m[m].exported = !internal[m];
    *end = j;
    return f;
}

static void free_prog(void *p) { tl_mprog_free(p); }

/* A chain on a tape to differentiate twice runs as one `map` over its
 * inputs, its body the chain's forward program, recorded as a map node
 * would be: the map's rule (grad.c) is a map of the body's derivative
 * (mapderiv.c), itself a map, so the backward pass is one pass over memory
 * where node by node it was an op for every rule's call, and the second
 * pullback is too.  The chain exports its last value only (plan's caller
 * cuts it there).  The values are the fused chain's, so the recipe's;
 * the derivatives are forward mode's over the same operations, not
 * reverse mode's, and so may differ from node by node in the last bits,
 * as a map's do.  Returns 0 (the chain's nodes to run unfused: a body the
 * map derivative cannot take), 1 with the last node's value set, or -1
 * with st set. */
static int as_map(tl_eval *ev, tl_fused *f, const tl_node *last, tl_status *st)
{
    tl_pbuild pb = {0};
    build_forward(f, &pb);
    int res = f->m[f->nmem - 1].val;
    pb.p.result = res;
    tl_pb_prune(&pb, &res, 1);
    tl_mprog *p = pb.oom ? NULL : malloc(sizeof *p);
    if (!p) {
        tl_pb_free(&pb);
        return 0;
    }
    *p = pb.p;
    free(pb.in);
    tl_status quiet = {0};
    for (int e = 0; e < f->next; e++)
        if (f->ext_var[e] >= 0 && !tl_map_derivative(p, e, &quiet)) {
            tl_mprog_free(p);
            return 0;
        }
    if (tl_tape_own(ev->tape, p, free_prog, st))
        return -1;
    tl_attrs a;
    tl_attrs_init(&a);
    a.prog = p;
    tl_tensor *out = tl_op(ev->cx, TL_OP_MAP, f->next, f->ext, &a, st);
    int var = out ? tl_tape_record_copy(ev->tape, TL_OP_MAP, f->next, f->ext, f->ext_var, out, &a, last, st) : -1;
    if (var < 0) {
        tl_tensor_unref(out);
        return -1;
    }
    tl_eval_set(ev, last->out[0], out, var);
    return 1;
}

/* Whether node n might start a chain by its arguments' sizes: one of them
 * has min elements or more, or is a constant not read yet (plan reads
 * it).  Planning costs a cleared tl_fused (some 7 KB): a 200k-node graph
 * of scalars spent half its run clearing them. */
static bool big_enough(const tl_eval *ev, const tl_node *n, int64_t min)
{
    for (int i = 0; i < n->nargs; i++) {
        int s = n->args[i].slot;
        const tl_value *v = s >= 0 ? &ev->env[s] : NULL;
        if (v && (v->t ? v->t->numel >= min : !v->weak))
            return true;
    }
    return false;
}

int tl_fuse_try(tl_eval *ev, const tl_block *b, int i)
{
    const tl_run_opts *o = ev->opts;
    if (o->fuse_min < 0 || o->observe || o->profile || o->check_finite || ev->log ||
        tl_ctx_on_device(ev->cx) || i + 1 >= b->nnodes || !candidate(&b->nodes[i], true) ||
        !candidate(&b->nodes[i + 1], false) ||
        !big_enough(ev, &b->nodes[i], min_elements(o)))
        return 0;
    bool twice = o->twice, rec = false;
    int j = i, limit = FUSE_MAX;
    tl_fused *f;
    for (;;) {
        if (!(f = plan(ev, b, i, limit, twice, &j)))
            return 0;
        int first = 0;
        rec = false;
        for (int m = 0; m < f->nmem; m++)
            rec = rec || f->m[m].rec;
        while (first < f->nmem - 1 && !f->m[first].exported)
            first++;
        if (!twice || !rec || first == f->nmem - 1)
            break;
        /* twice: a map has one value, the chain ends at its first exported one */
        tl_fused_free(f);
        limit = first + 1;
    }
    tl_status *st = ev->st;
    int done = 0;
    if (twice && rec) {
        done = as_map(ev, f, &b->nodes[j - 1], st);
        tl_fused_free(f);
        if (done == 0)
            return 0;
    } else {
        if (rec) { /* every rule must record as elementwise ops, or no fusion */
            tl_pbuild dry = {0};
            int out_reg[EXT_MAX];
            tl_status quiet = {0};
            build_forward(f, &dry);
            tl_code rc = build_backward(f, &dry, NULL, NULL, out_reg, &quiet);
            tl_pb_free(&dry);
            if (rc) {
                tl_fused_free(f);
                return 0;
            }
        }
        tl_tensor *outs[FUSE_MAX];
        tl_code rc = run_forward(ev, f, outs);
        for (int m = 0; m < f->nmem; m++) {
            member *mm = &f->m[m];
            if (rc || !outs[m])
                continue;
            mm->var = mm->rec ? tl_tape_new_var(ev->tape) : -1;
            tl_eval_set(ev, mm->node->out[0], outs[m], mm->var);
            outs[m] = NULL;
        }
        for (int m = 0; rc && m < f->nmem; m++)
            tl_tensor_unref(outs[m]);
        if (!rc && rec) {
            f->entry = (tl_custom){fused_backward, fused_free};
            rc = tl_tape_record_custom(ev->tape, &f->entry, &b->nodes[i], st);
        } else {
            tl_fused_free(f);
        }
        done = rc ? -1 : 1;
    }
    if (done < 0)
        return -1;
    for (int k = i; k < j; k++)
        for (int q = 0; q < b->nodes[k].nfree; q++)
            if (!ev->keep || !ev->keep[b->nodes[k].free_after[q]])
                tl_eval_clear(ev, b->nodes[k].free_after[q]);
    ev->stats->nodes += j - i;
    ev->stats->fused += j - i;
    ev->stats->chains++;
    return j - i;
}
