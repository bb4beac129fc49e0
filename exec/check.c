/* The checker: a walk of the recipe over types instead of tensors.  Each op
 * call goes through the same shape rules as the evaluator (exec/shape.c),
 * given header-only tensors that carry a dtype and a shape but no data. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/mprog.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"
#include "shape.h"

typedef struct checker {
    const tl_graph *g;
    int *env; /* per slot: an index into types, -1 until set */
    /* the distinct types met, each once (a large graph has few) */
    tl_type *types;
    int ntypes, types_cap;
    int *lookup; /* open addressing over lookup_cap entries: a type's index, -1 free */
    int lookup_cap;
    tl_dtype call;
    tl_check_visit visit;
    void *ctx;
    tl_status *st;
} checker;

tl_type tl_type_of(const tl_tensor *t)
{
    tl_type y = {t->dtype, t->ndim, {0}, false};
    memcpy(y.dims, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return y;
}

tl_dtype tl_weak_dtype(tl_opcode op, int i, bool have_value, tl_dtype first_value, tl_dtype call)
{
    if (i == tl_ops[op].index_arg)
        return TL_I64;
    return have_value ? first_value : call;
}

tl_code tl_weak_fits(double v, tl_dtype dt, tl_status *st)
{
    if (dt == TL_F32 && tl_f32_overflows(v)) { /* written inf stays inf */
        char num[TL_FMT_LEN];
        tl_fmt_f64(num, sizeof num, v);
        return tl_fail(st, TL_EINPUT, "the number %s meets an f32 tensor and is too large for f32 (write inf)", num);
    }
    if (!tl_dtype_is_int(dt) ||
        (v == floor(v) && fabs(v) < 9007199254740992.0 && (dt == TL_I64 || fabs(v) <= 2147483647.0)))
        return TL_OK;
    char num[32];
    snprintf(num, sizeof num, v == floor(v) && fabs(v) < 1e19 ? "%.0f" : "%.17g", v);
    if (v == floor(v) && dt == TL_I64 && fabs(v) <= 9223372036854775807.0)
        return tl_fail(st, TL_EINPUT, "the number %s meets an i64 tensor, and integers written as numbers must be "
                       "below 2^53 in magnitude to be exact (read larger ones from a .npy file)", num);
    return tl_fail(st, TL_EINPUT, "the number %s meets an %s tensor and is not an integer of that dtype",
                   num, tl_dtype_name(dt));
}

/* A header-only tensor of type t: shape rules read dtype and shape only.
 * Element counts saturate (a check never allocates). */
void tl_type_tensor(const tl_type *t, tl_tensor *f)
{
    memset(f, 0, sizeof *f);
    f->refs = 1;
    f->dtype = t->dtype;
    f->ndim = t->ndim;
    memcpy(f->shape, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    f->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t s = t->dims[d];
        f->numel = s == 0 ? 0 : f->numel > INT64_MAX / s ? INT64_MAX : f->numel * s;
        if (!s)
            break;
    }
}

static tl_type scalar_type(tl_dtype dt) { return (tl_type){dt, 0, {0}, false}; }

/* ---------- constants and inputs ---------- */

static tl_code const_type(checker *c, const tl_const *k, tl_type *t)
{
    tl_status *st = c->st;
    switch (k->kind) {
    case TL_CONST_WEAK: *t = (tl_type){c->call, 0, {0}, true}; return TL_OK;
    case TL_CONST_DATA:
        *t = tl_type_of(k->tensor);
        if (!k->typed)
            t->dtype = c->call;
        return TL_OK;
    case TL_CONST_FILL:
        *t = (tl_type){k->typed ? k->dtype : c->call, k->ndim, {0}, false};
        memcpy(t->dims, k->shape, sizeof(int64_t) * (size_t)k->ndim);
        return TL_OK;
    case TL_CONST_FILE:
        break;
    }
    tl_code rc;
    if (k->key) { /* the member is read whole: its data is checked too */
        tl_npz *z = tl_npz_open(k->path, st);
        tl_tensor *x = z ? tl_npz_get(z, k->key, st) : NULL;
        tl_npz_close(z);
        if (x)
            *t = tl_type_of(x);
        tl_tensor_unref(x);
        rc = x ? TL_OK : st->code;
    } else {
        *t = (tl_type){0};
        rc = tl_npy_peek_file(k->path, &t->dtype, &t->ndim, t->dims, st);
    }
    if (rc)
        tl_const_file_kind(k->path, st);
    return rc ? tl_wrap(st, "const \"%s\": %s", k->name, k->path) : TL_OK;
}

static uint64_t type_hash(const tl_type *t)
{
    uint64_t h = (uint64_t)t->dtype * 31 + (uint64_t)t->ndim * 7 + t->weak;
    for (int d = 0; d < t->ndim; d++)
        h = (h ^ (uint64_t)t->dims[d]) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static bool type_eq(const tl_type *a, const tl_type *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->weak == b->weak &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
}

/* The index of type t among those met (added if new), or -1 (error set). */
static int intern(checker *c, const tl_type *t)
{
    uint64_t h = type_hash(t);
    if (c->lookup_cap) {
        for (uint64_t i = h & (uint64_t)(c->lookup_cap - 1);; i = (i + 1) & (uint64_t)(c->lookup_cap - 1)) {
            int k = c->lookup[i];
            if (k < 0)
                break;
            if (type_eq(&c->types[k], t))
                return k;
        }
    }
    if (c->ntypes == c->types_cap) {
        int cap = c->types_cap ? 2 * c->types_cap : 16;
        tl_type *ty = realloc(c->types, sizeof *ty * (size_t)cap);
        int *lk = malloc(sizeof *lk * (size_t)cap * 2);
        if (!ty || !lk) {
            if (ty)
                c->types = ty;
            free(lk);
            return tl_fail(c->st, TL_ERUNTIME, "out of memory checking types"), -1;
        }
        c->types = ty;
        c->types_cap = cap;
        free(c->lookup);
        c->lookup = lk;
        c->lookup_cap = 2 * cap;
        for (int i = 0; i < c->lookup_cap; i++)
            lk[i] = -1;
        for (int k = 0; k < c->ntypes; k++) {
            uint64_t i = type_hash(&c->types[k]) & (uint64_t)(c->lookup_cap - 1);
            while (lk[i] >= 0)
                i = (i + 1) & (uint64_t)(c->lookup_cap - 1);
            lk[i] = k;
        }
    }
    tl_type *n = &c->types[c->ntypes];
    memset(n, 0, sizeof *n);
    n->dtype = t->dtype;
    n->ndim = t->ndim;
    n->weak = t->weak;
    memcpy(n->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim);
    uint64_t i = h & (uint64_t)(c->lookup_cap - 1);
    while (c->lookup[i] >= 0)
        i = (i + 1) & (uint64_t)(c->lookup_cap - 1);
    c->lookup[i] = c->ntypes;
    return c->ntypes++;
}

static tl_code define(checker *c, int slot, const tl_type *t)
{
    int k = intern(c, t);
    if (k < 0)
        return c->st->code;
    c->env[slot] = k;
    return TL_OK;
}

static tl_code slot_type(checker *c, int slot, tl_type *t)
{
    if (c->env[slot] < 0) {
        int ci = c->g->slot_const[slot];
        if (ci < 0)
            return tl_fail(c->st, TL_ERUNTIME, "internal: \"%s\" has no type", c->g->slot_name[slot]);
        tl_type k;
        if (const_type(c, &c->g->consts[ci], &k) || define(c, slot, &k))
            return c->st->code;
    }
    *t = c->types[c->env[slot]];
    return TL_OK;
}

static tl_code arg_type(checker *c, const tl_arg *a, tl_type *t)
{
    if (a->slot < 0) {
        *t = (tl_type){c->call, 0, {0}, true};
        return TL_OK;
    }
    return slot_type(c, a->slot, t);
}

static tl_code check_input(checker *c, const tl_input *in, const tl_type *t, int64_t *sizes)
{
    char have[96];
    tl_shape_desc(t->dtype, t->ndim, t->dims, have, sizeof have);
    if (in->has_dtype && t->dtype != in->dtype)
        return tl_fail(c->st, TL_EINPUT, "input \"%s\": expected dtype %s, got %s", in->name,
                       tl_dtype_name(in->dtype), have);
    if (in->ndim >= 0 && in->ndim != t->ndim)
        return tl_fail(c->st, TL_EINPUT, "input \"%s\": expected %d dimensions, got %s", in->name,
                       in->ndim, have);
    for (int d = 0; d < in->ndim; d++) {
        const tl_dimspec *s = &in->dims[d];
        if (s->kind == TL_DIM_FIXED && s->size != t->dims[d])
            return tl_fail(c->st, TL_EINPUT, "input \"%s\": axis %d must have size %lld, got %s",
                           in->name, d, (long long)s->size, have);
        if (s->kind != TL_DIM_VAR)
            continue;
        if (sizes[2 * s->var] >= 0 && sizes[2 * s->var] != t->dims[d]) {
            const tl_input *by = &c->g->inputs[sizes[2 * s->var + 1] >> 8];
            return tl_fail(c->st, TL_EINPUT, "input \"%s\": axis %d is size \"%s\", which input \"%s\" "
                           "axis %d set to %lld; got %s", in->name, d, c->g->sizevars[s->var], by->name,
                           (int)(sizes[2 * s->var + 1] & 0xff), (long long)sizes[2 * s->var], have);
        }
        sizes[2 * s->var] = t->dims[d];
        sizes[2 * s->var + 1] = (int64_t)(in - c->g->inputs) << 8 | d;
    }
    return TL_OK;
}

/* ---------- nodes ---------- */

static tl_code check_block(checker *c, const tl_block *b, int depth, const char *name);

static bool same_type(const tl_type *a, const tl_type *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
}

/* A weak value where a tensor is needed: a 0-d tensor of the call's type. */
static tl_type solid(const tl_type *t) { return t->weak ? scalar_type(t->dtype) : *t; }

static const char *desc(const tl_type *t, char *buf)
{
    return tl_shape_desc(t->dtype, t->ndim, t->dims, buf, 96);
}

static tl_code check_op(checker *c, const tl_node *n, tl_type *out)
{
    tl_tensor small[8], *fk = n->nargs <= 8 ? small : tl_calloc((size_t)n->nargs, sizeof *fk, "a check", c->st);
    const tl_tensor *ptr_small[8], **ptr = n->nargs <= 8 ? ptr_small : tl_calloc((size_t)n->nargs, sizeof *ptr, "a check", c->st);
    tl_type *ty = tl_calloc((size_t)n->nargs + 1, sizeof *ty, "a check", c->st);
    tl_code rc = fk && ptr && ty ? TL_OK : c->st->code;
    bool have = false;
    tl_dtype first = c->call;
    for (int i = n->nargs - 1; !rc && i >= 0; i--)
        if (!(rc = arg_type(c, &n->args[i], &ty[i])) && !ty[i].weak && i != tl_ops[n->op].index_arg) {
            have = true;
            first = ty[i].dtype;
        }
    for (int i = 0; !rc && i < n->nargs; i++) {
        if (ty[i].weak) {
            /* a number, a number const, or (value known only when running:
             * an iterate index, always an integer) a weak block value */
            int s = n->args[i].slot, k = s < 0 ? -1 : c->g->slot_const[s];
            double v = s < 0 ? n->args[i].num : k >= 0 ? c->g->consts[k].num : 0;
            ty[i] = scalar_type(tl_weak_dtype(n->op, i, have, first, c->call));
            if (i == tl_ops[n->op].index_arg && tl_weak_fits(v, TL_I64, c->st))
                rc = tl_fail(c->st, TL_EINPUT, "argument %d: %.17g is not an integer index", i + 1, v);
            else
                rc = tl_weak_fits(v, ty[i].dtype, c->st);
        }
        tl_type_tensor(&ty[i], &fk[i]);
        ptr[i] = &fk[i];
    }
    tl_attrs a = *n->attrs;
    if ((n->op == TL_OP_ONE_HOT || n->op == TL_OP_RANDOM_UNIFORM || n->op == TL_OP_RANDOM_NORMAL) && !a.has_dtype)
        a.dtype = c->call; /* the element type of the call */
    tl_shape sh;
    if (!rc && !(rc = tl_shape_infer(n->op, n->nargs, ptr, &a, &sh, c->st))) {
        *out = (tl_type){sh.dtype, sh.ndim, {0}, false};
        memcpy(out->dims, sh.dims, sizeof(int64_t) * (size_t)sh.ndim);
        if (n->op == TL_OP_BATCH_NORM && n->nout == 3) /* training: the batch mean and variance [C] */
            out[1] = out[2] = (tl_type){sh.dtype, 1, {sh.dims[1]}, false};
    }
    if (fk != small)
        free(fk);
    if (ptr != ptr_small)
        free(ptr);
    free(ty);
    return rc;
}

static tl_code block_results(checker *c, const tl_block *b, tl_type *r)
{
    for (int i = 0; i < b->nresult; i++)
        if (slot_type(c, b->result[i], &r[i]))
            return c->st->code;
    return TL_OK;
}

/* The cond, then both branches: the same results, type for type. */
static tl_code check_branches(checker *c, const tl_node *n, int depth, tl_type *out, tl_type *e)
{
    tl_type cond;
    char d[96], d2[96];
    if (arg_type(c, &n->flow->cond, &cond))
        return c->st->code;
    if (!cond.weak && cond.ndim != 0)
        return tl_fail(c->st, TL_EINPUT, TL_IF_COND_NOT_SCALAR, desc(&cond, d));
    if (!cond.weak && tl_dtype_is_int(cond.dtype))
        return tl_fail(c->st, TL_EINPUT, "cond must be f32 or f64 (cast the index tensor), got %s",
                       desc(&cond, d));
    if (check_block(c, n->flow->then_b, depth + 1, "then") || block_results(c, n->flow->then_b, out))
        return tl_wrap(c->st, "then branch");
    if (check_block(c, n->flow->else_b, depth + 1, "else") || block_results(c, n->flow->else_b, e))
        return tl_wrap(c->st, "else branch");
    for (int i = 0; i < n->nout; i++) {
        if (out[i].weak && e[i].weak)
            continue;
        tl_type t = solid(&out[i]), u = solid(&e[i]);
        if (!same_type(&t, &u))
            return tl_fail(c->st, TL_EINPUT, "the branches give \"%s\" different types: %s (then) and %s (else)",
                           c->g->slot_name[n->out[i]], desc(&t, d), desc(&u, d2));
        out[i] = t;
    }
    return TL_OK;
}

static tl_code check_if(checker *c, const tl_node *n, int depth, tl_type *out)
{
    tl_type *e = tl_calloc((size_t)n->nout, sizeof *e, "a check", c->st);
    if (!e)
        return c->st->code;
    tl_code rc = check_branches(c, n, depth, out, e);
    free(e);
    return rc;
}

/* The body once, from the init types: each result keeps its state's type. */
static tl_code check_steps(checker *c, const tl_node *n, int depth, tl_type *out, tl_type *r)
{
    char d[96], d2[96];
    for (int i = 0; i < n->nargs; i++) {
        if (arg_type(c, &n->args[i], &out[i]))
            return c->st->code;
        out[i] = solid(&out[i]);
        if (define(c, n->flow->state[i], &out[i]))
            return c->st->code;
    }
    if (n->flow->index_slot >= 0 && define(c, n->flow->index_slot, &(tl_type){c->call, 0, {0}, true}))
        return c->st->code;
    if (check_block(c, n->flow->body, depth + 1, "body") || block_results(c, n->flow->body, r))
        return tl_wrap(c->st, "body");
    for (int i = 0; i < n->nargs; i++) {
        tl_type t = solid(&r[i]);
        if (!same_type(&t, &out[i]))
            return tl_fail(c->st, TL_EINPUT, "step 0: state \"%s\" changed from %s to %s",
                           c->g->slot_name[n->flow->state[i]], desc(&out[i], d), desc(&t, d2));
    }
    return TL_OK;
}

static tl_code check_iterate(checker *c, const tl_node *n, int depth, tl_type *out)
{
    tl_type *r = tl_calloc((size_t)n->nout, sizeof *r, "a check", c->st);
    if (!r)
        return c->st->code;
    tl_code rc = check_steps(c, n, depth, out, r);
    free(r);
    return rc;
}

/* A map runs its compiled body per element: the op's own rule checks the
 * arguments (and captured scalars) together. */
static tl_code check_map(checker *c, const tl_node *n, tl_type *out)
{
    int nin = n->nargs + n->flow->ncap;
    tl_tensor *fk = tl_calloc((size_t)nin + 1, sizeof *fk + sizeof(tl_tensor *), "a check", c->st);
    if (!fk)
        return c->st->code;
    const tl_tensor **ptr = (const tl_tensor **)(fk + nin + 1);
    tl_code rc = TL_OK;
    bool have = false;
    tl_dtype first = c->call;
    tl_type t;
    for (int i = n->nargs - 1; !rc && i >= 0; i--)
        if (!(rc = arg_type(c, &n->args[i], &t)) && !t.weak) {
            have = true;
            first = t.dtype;
        }
    for (int i = 0; i < nin && !rc; i++) {
        bool cap = i >= n->nargs;
        rc = cap ? slot_type(c, n->flow->cap_slots[i - n->nargs], &t) : arg_type(c, &n->args[i], &t);
        char d[96];
        if (!rc && cap && !t.weak && t.ndim != 0)
            rc = tl_fail(c->st, TL_EINPUT, "the body reads \"%s\", which is %s: a map body may "
                         "capture scalars only", c->g->slot_name[n->flow->cap_slots[i - n->nargs]], desc(&t, d));
        if (t.weak)
            t = scalar_type(have ? first : c->call);
        tl_type_tensor(&t, &fk[i]);
        ptr[i] = &fk[i];
    }
    tl_attrs a = *n->attrs;
    tl_shape sh;
    if (!rc && !(rc = tl_shape_infer(TL_OP_MAP, nin, ptr, &a, &sh, c->st))) {
        *out = (tl_type){sh.dtype, sh.ndim, {0}, false};
        memcpy(out->dims, sh.dims, sizeof(int64_t) * (size_t)sh.ndim);
        if (n->op == TL_OP_BATCH_NORM && n->nout == 3) /* training: the batch mean and variance [C] */
            out[1] = out[2] = (tl_type){sh.dtype, 1, {sh.dims[1]}, false};
    }
    /* the body's numbers meet f32 data as any call's do (each is its
     * element's dtype there): one too large for f32 is an error, not inf */
    const struct tl_mprog *p = n->flow->prog;
    for (int k = 0; !rc && p && sh.dtype == TL_F32 && k < p->nconst; k++)
        if (tl_f32_overflows(p->const_val[k])) {
            char num[TL_FMT_LEN];
            tl_fmt_f64(num, sizeof num, p->const_val[k]);
            rc = tl_fail(c->st, TL_EINPUT, "the number %s in its body meets f32 data and is too large for f32 "
                         "(write inf)", num);
        }
    free(fk);
    return rc;
}

static tl_code check_node(checker *c, const tl_node *n, int depth, tl_type *out)
{
    switch (n->op) {
    case TL_OP_IF: return check_if(c, n, depth, out);
    case TL_OP_ITERATE: return check_iterate(c, n, depth, out);
    case TL_OP_MAP: return check_map(c, n, out);
    default: return check_op(c, n, out);
    }
}

static tl_code check_block(checker *c, const tl_block *b, int depth, const char *name)
{
    tl_type small[4];
    for (int i = 0; i < b->nnodes; i++) {
        const tl_node *n = &b->nodes[i];
        tl_type *out = n->nout <= 4 ? small : tl_calloc((size_t)n->nout, sizeof *out, "a check", c->st);
        tl_code rc = out ? check_node(c, n, depth, out) : c->st->code;
        for (int k = 0; !rc && k < n->nout; k++)
            rc = define(c, n->out[k], &out[k]);
        if (!rc && c->visit)
            c->visit(c->ctx, n, depth, name, out);
        if (out != small)
            free(out);
        if (rc)
            return tl_wrap(c->st, "node \"%s\" (%s)", n->name, tl_ops[n->op].name);
    }
    return TL_OK;
}

tl_code tl_check(const tl_graph *g, const tl_type *inputs, tl_check_visit visit, void *ctx,
                 tl_status *st)
{
    checker c = {.g = g, .call = TL_F64, .visit = visit, .ctx = ctx, .st = st};
    for (int i = 0; i < g->ninputs; i++)
        if (!tl_dtype_is_int(inputs[i].dtype)) {
            c.call = inputs[i].dtype;
            break;
        }
    c.env = tl_malloc((size_t)g->nslots + 1, sizeof *c.env, "a check", st);
    int64_t *sizes = tl_malloc((size_t)g->nsizevars * 2 + 1, sizeof *sizes, "size table", st);
    tl_code rc = c.env && sizes ? TL_OK : st->code;
    if (!rc) {
        for (int i = 0; i < g->nslots; i++)
            c.env[i] = -1;
        for (int i = 0; i < 2 * g->nsizevars; i++)
            sizes[i] = -1;
    }
    for (int i = 0; i < g->ninputs && !rc; i++)
        if (!(rc = check_input(&c, &g->inputs[i], &inputs[i], sizes)))
            rc = define(&c, g->inputs[i].slot, &inputs[i]);
    if (!rc)
        rc = check_block(&c, &g->top, 0, "");
    for (int i = 0; i < g->noutputs && !rc; i++) {
        tl_type t;
        rc = slot_type(&c, g->outputs[i], &t);
    }
    if (rc && strncmp(st->msg, g->path, strlen(g->path)))
        tl_wrap(st, "%s", g->path);
    free(c.env);
    free(c.types);
    free(c.lookup);
    free(sizes);
    return rc;
}
