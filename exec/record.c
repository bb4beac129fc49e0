/* The recording pullback (tape.h): the backward rules run with a recorder
 * that makes each op call (tl_op, so it runs where the forward ran) and
 * puts it on the tape as an entry of its own whenever an operand is a
 * variable, so the gradients it returns are values of the tape. */
#include "tape.h"

#include "backends/opdoc.h"
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rec {
    tl_grad_recorder base;
    tl_tape *t;
    tl_ctx *cx;
    const struct tl_node *node; /* of the entry whose rule runs */
    const tl_tensor **known;    /* the tensors of that rule with their variables */
    int *var;
    int n, cap;
    /* from HASH_FROM tensors on (a concat of n arguments remembers n
     * slices, and a search of them all per slice was quadratic): each
     * tensor's latest index in known, open addressing, -1 empty */
    int *at;
    int hcap, hmax; /* in use (a power of two), allocated */
} rec;

#define HASH_FROM 32

static size_t hash_ptr(const tl_tensor *t, int hcap)
{
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15u;
    return (size_t)(h >> 32) & (size_t)(hcap - 1);
}

/* known[i] into the table: a tensor's latest index wins, as the search
 * from the end finds it. */
static void hash_put(rec *r, int i)
{
    size_t h = hash_ptr(r->known[i], r->hcap);
    while (r->at[h] >= 0 && r->known[r->at[h]] != r->known[i])
        h = (h + 1) & (size_t)(r->hcap - 1);
    r->at[h] = i;
}

/* A table of known[0..n) at four times n (false: out of memory, and the
 * search stays linear: only slower). */
static bool hash_build(rec *r)
{
    int hcap = 64;
    while (hcap < 4 * r->n)
        hcap *= 2;
    if (hcap > r->hmax) {
        int *at = realloc(r->at, sizeof *at * (size_t)hcap);
        if (!at) {
            r->hcap = 0; /* none: a stale one would answer wrong */
            return false;
        }
        r->at = at;
        r->hmax = hcap;
    }
    r->hcap = hcap;
    memset(r->at, 0xff, sizeof *r->at * (size_t)hcap);
    for (int i = 0; i < r->n; i++)
        hash_put(r, i);
    return true;
}

/* Whether the table holds known[0..n): built when the rule reached
 * HASH_FROM tensors, rebuilt larger before it is half full. */
static bool hashed(const rec *r) { return r->n >= HASH_FROM && 2 * r->n <= r->hcap; }

static bool remember(rec *r, const tl_tensor *t, int var, tl_status *st)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        const tl_tensor **k = realloc(r->known, sizeof *k * (size_t)cap);
        if (k)
            r->known = k;
        int *v = k ? realloc(r->var, sizeof *v * (size_t)cap) : NULL;
        if (!v) {
            tl_fail(st, TL_ERUNTIME, "out of memory recording a backward pass");
            return false;
        }
        r->var = v;
        r->cap = cap;
    }
    r->known[r->n] = t;
    r->var[r->n++] = var;
    if (r->n == HASH_FROM || (r->n > HASH_FROM && !hashed(r))) /* a new rule's table is stale */
        hash_build(r);
    else if (r->n > HASH_FROM)
        hash_put(r, r->n - 1);
    return true;
}

/* The variable of a tensor the rule was given or made (-1: a constant). */
static int var_of(const rec *r, const tl_tensor *t)
{
    if (hashed(r)) {
        for (size_t h = hash_ptr(t, r->hcap); r->at[h] >= 0; h = (h + 1) & (size_t)(r->hcap - 1))
            if (r->known[r->at[h]] == t)
                return r->var[r->at[h]];
        return -1;
    }
    for (int i = r->n - 1; i >= 0; i--)
        if (r->known[i] == t)
            return r->var[i];
    return -1;
}

/* Kernels with a rule of their own for a recorded backward (grad2.c). */
static bool has_rule(tl_opcode op)
{
    switch (op) {
    case TL_OP_SLICE_GRAD:
    case TL_OP_TAKE_GRAD:
    case TL_OP_GATHER_GRAD:
    case TL_OP_GELU_GRAD:
    case TL_OP_RELU_GRAD:
    case TL_OP_AVG_POOL_GRAD:
    case TL_OP_PAD_GRAD:
    case TL_OP_RESIZE_GRAD:
    case TL_OP_CONV_GRAD_W:
    case TL_OP_MAX_POOL_GRAD:
    case TL_OP_MAX_POOL_PICK: return true;
    default: return tl_op_differentiable(op) && op != TL_OP_MAP;
    }
}

/* Whether an op without a rule has no derivative at all (comparisons,
 * sign, rounding...) rather than one not written yet. */
static bool flat(tl_opcode op)
{
    return tl_ops[op].kind != TL_KIND_INT && op != TL_OP_MAP;
}

static tl_tensor *rec_op(tl_grad_recorder *base, tl_opcode op, int n, tl_tensor *const *in,
                         const tl_attrs *a, tl_status *st)
{
    rec *r = (rec *)base;
    int small[8], *vars = n <= 8 ? small : tl_malloc((size_t)n, sizeof(int), "a recorded op", st);
    if (!vars)
        return NULL;
    bool any = false;
    for (int i = 0; i < n; i++)
        any = (vars[i] = var_of(r, in[i])) >= 0 || any;
    tl_tensor *out = tl_op(r->cx, op, n, in, a, st);
    int v = -1;
    if (out && any && !tl_dtype_is_int(out->dtype)) {
        if (has_rule(op) || (op == TL_OP_MAP && a && a->prog))
            v = tl_tape_record_copy(r->t, op, n, in, vars, out, a, r->node, st);
        else if (!flat(op))
            tl_fail(st, TL_EINPUT, "second derivatives through %s are not available yet",
                    tl_ops[op].name);
        if (v < 0 && st->code) {
            tl_tensor_unref(out);
            out = NULL;
        }
    }
    if (vars != small)
        free(vars);
    if (out && !remember(r, out, v, st)) {
        tl_tensor_unref(out);
        return NULL;
    }
    return out;
}

static tl_tensor *rec_num(tl_grad_recorder *base, tl_dtype dt, double v, tl_status *st)
{
    rec *r = (rec *)base;
    return tl_ctx_scalar(r->cx, dt, v, st);
}

tl_code tl_tape_add_recorded(tl_tape *t, tl_ctx *cx, tl_tensor **slot, int *svar, tl_tensor *g, int gv,
                             const struct tl_node *node, tl_status *st)
{
    if (!*slot) {
        *slot = g;
        *svar = gv;
        return TL_OK;
    }
    tl_tensor *pair[2] = {*slot, g};
    tl_tensor *sum = tl_op(cx, TL_OP_ADD, 2, pair, NULL, st);
    int v = -1;
    if (sum && t && (*svar >= 0 || gv >= 0) &&
        (v = tl_tape_record(t, TL_OP_ADD, 2, pair, (int[]){*svar, gv}, sum, NULL, node, st)) < 0) {
        tl_tensor_unref(sum);
        sum = NULL;
    }
    tl_tensor_unref(g);
    if (!sum)
        return st->code;
    tl_tensor_unref(*slot);
    *slot = sum;
    *svar = v;
    return TL_OK;
}

/* A take's (gather's) gradient added in place (tl_take_into), recorded as
 * the rule and the sum would be: take_grad(g) (gather_grad) then the add,
 * whose values no rule reads (the tape keeps their shapes), so the tape
 * is the same and only the work is less.  1 done, 0 not this entry, -1
 * error (st set). */
static int take_into_recorded(tl_tape *t, tl_ctx *cx, const tl_entry *e, tl_tensor **grads, int *gvar, tl_tensor *g,
                              int g_var, const tl_tensor **clean, tl_status *st)
{
    int v = e->in_var[0], was_var = gvar[v];
    bool had = grads[v] != NULL;
    int into = tl_take_into(cx, e, &grads[v], g, clean, st);
    if (into <= 0)
        return into;
    /* z: take_grad(g, idx), its shape only (a variable where g is one) */
    tl_tensor *z = g_var >= 0 || had ? tl_tensor_stub(grads[v], st) : NULL, *was = NULL;
    int vz = -1;
    if ((g_var >= 0 || had) && !z)
        return -1;
    if (g_var >= 0) {
        tl_attrs s = *e->attrs;
        s.nshape = e->in[0]->ndim;
        memcpy(s.shape, e->in[0]->shape, sizeof(int64_t) * (size_t)s.nshape);
        tl_tensor *in[2] = {g, e->nin > 1 ? e->in[1] : NULL};
        tl_opcode op = e->op == TL_OP_TAKE ? TL_OP_TAKE_GRAD : TL_OP_GATHER_GRAD;
        vz = tl_tape_record_copy(t, op, e->nin, in, (int[]){g_var, -1}, had ? z : grads[v], &s, e->node, st);
        if (vz < 0) {
            tl_tensor_unref(z);
            return -1;
        }
    }
    if (!had) {
        gvar[v] = vz;
    } else if (was_var >= 0 || vz >= 0) { /* grads[v] = was + z */
        if (!(was = tl_tensor_stub(grads[v], st))) {
            tl_tensor_unref(z);
            return -1;
        }
        tl_tensor *pair[2] = {was, z};
        gvar[v] = tl_tape_record(t, TL_OP_ADD, 2, pair, (int[]){was_var, vz}, grads[v], NULL, e->node, st);
        if (gvar[v] < 0) {
            tl_tensor_unref(was);
            tl_tensor_unref(z);
            return -1;
        }
    }
    tl_tensor_unref(was);
    tl_tensor_unref(z);
    return 1;
}

tl_code tl_tape_backward_recording(tl_tape *t, int64_t nentries, bool seeds_only, tl_ctx *cx, tl_tensor **grads,
                                   int *gvar, tl_status *st)
{
    const tl_tensor **clean = NULL; /* tl_take_into's, per variable */
    rec r = {.base = {.op = rec_op, .num = rec_num, .twice = true}, .t = t, .cx = cx};
    tl_code rc = TL_OK;
    tl_tensor *gin_small[8], **gin = gin_small;
    int gv_small[8], *gv = gv_small;
    for (int64_t k = nentries - 1; k >= 0 && !rc; k--) {
        tl_tape_prefetch(t, k);
        /* a copy, its arrays still the entry's (entries never move) */
        tl_entry e = *tl_tape_entry(t, k);
        if (e.custom) {
            rc = tl_fail(st, TL_ERUNTIME, "internal: a fast path's entry in a tape to differentiate twice");
            break;
        }
        tl_tensor *g = grads[e.out_var];
        int g_var = gvar[e.out_var];
        if (!g)
            continue;
        grads[e.out_var] = NULL;
        if (e.nin > 8 && (!(gin = tl_calloc((size_t)e.nin, sizeof *gin, "gradients", st)) ||
                          !(gv = tl_calloc((size_t)e.nin, sizeof *gv, "gradients", st)))) {
            tl_tensor_unref(g);
            if (gin != gin_small)
                free(gin);
            rc = st->code;
            break;
        }
        bool into_op = e.op == TL_OP_TAKE || e.op == TL_OP_GATHER;
        if (into_op && e.in_var[0] >= 0 &&
            (clean || (clean = tl_calloc((size_t)t->nvars + 1, sizeof *clean, "gradients", st)))) {
            int into = take_into_recorded(t, cx, &e, grads, gvar, g, g_var, clean + e.in_var[0], st);
            if (into) {
                tl_tensor_unref(g);
                if (into < 0) {
                    rc = st->code ? st->code : tl_fail(st, TL_ERUNTIME, "internal: an in-place gradient failed");
                    if (e.node)
                        tl_wrap(st, "second derivatives: backward of node \"%s\" (%s)", e.node->name,
                                tl_ops[e.op].name);
                }
                continue;
            }
        } else if (into_op && e.in_var[0] >= 0) {
            tl_tensor_unref(g);
            rc = st->code;
            break;
        }
        memset(gin, 0, sizeof *gin * (size_t)e.nin);
        r.n = 0; /* hash_build empties the table when a rule reaches HASH_FROM */
        r.node = e.node;
        bool ok = remember(&r, g, g_var, st);
        /* seeds_only: the forward's values are constants, as every tensor
         * not remembered is (and a seed that is also a forward value
         * stays the seed) */
        for (int i = 0; i < e.nin && ok && !seeds_only; i++)
            ok = remember(&r, e.in[i], e.in_var[i], st);
        ok = ok && (seeds_only || remember(&r, e.out, e.out_var, st));
        rc = ok ? tl_grad_rule_with(cx, &r.base, &e, g, gin, st) : st->code;
        for (int i = 0; i < e.nin; i++) /* before the sums make new tensors */
            gv[i] = gin[i] ? var_of(&r, gin[i]) : -1;
        tl_tensor_unref(g);
        for (int i = 0; i < e.nin; i++) {
            int v = e.in_var[i];
            if (rc == TL_OK && gin[i] && v >= 0 && cx->check_finite) { /* as tl_tape_backward */
                char what[48];
                snprintf(what, sizeof what, "the gradient of argument %d", i + 1);
                rc = tl_ctx_check_finite(cx, gin[i], what, st);
            }
            if (rc == TL_OK && gin[i] && v >= 0) {
                const tl_tensor *was = grads[v];
                rc = tl_tape_add_recorded(t, cx, &grads[v], &gvar[v], gin[i], gv[i], e.node, st);
                if (clean) /* a sum with a clean gradient is clean */
                    clean[v] = was && clean[v] == was ? grads[v] : NULL;
            } else
                tl_tensor_unref(gin[i]);
        }
        if (gin != gin_small) {
            free(gin);
            free(gv);
        }
        gin = gin_small;
        gv = gv_small;
        if (rc && e.node)
            tl_wrap(st, "second derivatives: backward of node \"%s\" (%s)", e.node->name, tl_ops[e.op].name);
    }
    free(r.known);
    free(r.var);
    free(r.at);
    free(clean);
    return rc;
}
