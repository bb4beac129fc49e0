#define _DEFAULT_SOURCE
/* tl gradcheck's engine.  The base run is recorded with an observer that
 * notes, in order, a fingerprint of every decision: each `if` decision,
 * each `map` node's per-element branch paths, and for every op with a kink
 * which side of it each element lies on (relu, abs, sign: the sign of the
 * input; clamp: below, inside or above; maximum, minimum: which operand
 * wins or a tie; max, min: which elements are the extreme; max_pool:
 * each window's argmax, its first maximum (or last NaN); argmax, argmin,
 * comparisons, where and casts to an integer: the value they decide;
 * mod and fmod: the integer quotient, whose change is a jump).  Every perturbed
 * run compares its fingerprints with the base's as it goes: the first `if`
 * or `map` path that differs puts the element on a branch boundary (after
 * it the runs part ways), otherwise the first kink that differs puts it on
 * a kink.
 *
 * The perturbed runs are shared out over worker threads; each element's
 * verdict lands in its own slot and the report is summed in element
 * order, so it does not depend on the number of threads.  Workers other
 * than the caller's own run on a view of the graph with private copies of
 * its constant tensors, and on private copies of the inputs: a run takes
 * references to both, and reference counts are not atomic. */
#include <tgmath.h>

#include "gradcheck.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cuda/mexec.h"
#include "nn.h"

void tl_gradcheck_defaults(tl_gradcheck_opts *o)
{
    *o = (tl_gradcheck_opts){.eps = TL_GRADCHECK_EPS, .rtol = TL_GRADCHECK_RTOL,
                             .atol = TL_GRADCHECK_ATOL};
}

/* ---------- fingerprints ---------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    uint64_t z = (h ^ v) + 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Which side of b a lies on: 1 above, 2 below, 3 on it, 0 NaN. */
static uint64_t side(double a, double b) { return a > b ? 1 : a < b ? 2 : a == b ? 3 : 0; }

static uint64_t clamp_side(double x, bool has_lo, double lo, bool has_hi, double hi)
{
    return x != x ? 0 : has_lo && x < lo ? 1 : has_hi && x > hi ? 2 : 3;
}

/* Where element e of out reads operand t (NumPy broadcasting). */
static int64_t operand_at(const tl_tensor *out, const tl_tensor *t, int64_t e)
{
    int64_t off = 0, stride = 1;
    for (int d = out->ndim - 1, k = t->ndim - 1; k >= 0; d--, k--) {
        int64_t i = e % out->shape[d];
        e /= out->shape[d];
        off += t->shape[k] == 1 ? 0 : i * stride;
        stride *= t->shape[k];
    }
    return off;
}

/* max and min: which elements of x equal the extreme of their group. */
static uint64_t extremes(const tl_attrs *a, const tl_tensor *x, const tl_tensor *out)
{
    bool reduced[TL_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        reduced[d] = !a->has_axes;
    for (int i = 0; a->has_axes && i < a->naxes; i++)
        reduced[a->axes[i] < 0 ? a->axes[i] + x->ndim : a->axes[i]] = true;
    uint64_t h = 0;
    for (int64_t e = 0; e < x->numel; e++) {
        int64_t rest = e, group = 0, stride = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            int64_t i = rest % x->shape[d];
            rest /= x->shape[d];
            if (!reduced[d]) {
                group += i * stride;
                stride *= x->shape[d];
            }
        }
        h = mix(h, tl_tensor_get(x, e) == tl_tensor_get(out, group));
    }
    return h;
}

/* The integer a floor, ceil, round or trunc gave, as bits to mix (NaN and
 * the infinities as themselves). */
static uint64_t step_of(double v)
{
    return isfinite(v) && fabs(v) < 0x1p62 ? (uint64_t)(int64_t)v : (uint64_t)(isnan(v) ? 5 : v > 0 ? 6 : 7);
}

/* The integer quotient of mod (floor) or fmod (trunc): a step that
 * changes it crosses a jump. */
static uint64_t quotient_of(int op, double a, double b)
{
    return step_of(op == TL_OP_MOD ? floor(a / b) : trunc(a / b));
}

/* The fingerprint of the kinks an op call decided; false for an op
 * without any. */
static bool kink_print(const tl_node *n, tl_tensor *const *in, const tl_tensor *out, uint64_t *h)
{
    const tl_attrs *a = n->attrs;
    uint64_t z = 0;
    switch (n->op) {
    case TL_OP_RELU:
    case TL_OP_ABS:
    case TL_OP_SIGN:
        for (int64_t e = 0; e < in[0]->numel; e++)
            z = mix(z, side(tl_tensor_get(in[0], e), 0));
        break;
    case TL_OP_CLAMP:
        for (int64_t e = 0; e < in[0]->numel; e++)
            z = mix(z, clamp_side(tl_tensor_get(in[0], e), a->has_min, a->min, a->has_max, a->max));
        break;
    case TL_OP_FLOOR: /* the integer they give: a step that changes it crosses a jump */
    case TL_OP_CEIL:
    case TL_OP_ROUND:
    case TL_OP_TRUNC:
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, step_of(tl_tensor_get(out, e)));
        break;
    case TL_OP_MAXIMUM:
    case TL_OP_MINIMUM:
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, side(tl_tensor_get(in[0], operand_at(out, in[0], e)),
                            tl_tensor_get(in[1], operand_at(out, in[1], e))));
        break;
    case TL_OP_WHERE:
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, tl_tensor_get(in[0], operand_at(out, in[0], e)) != 0);
        break;
    case TL_OP_MOD:
    case TL_OP_FMOD:
        if (tl_dtype_is_int(out->dtype))
            return false;
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, quotient_of(n->op, tl_tensor_get(in[0], operand_at(out, in[0], e)),
                                   tl_tensor_get(in[1], operand_at(out, in[1], e))));
        break;
    case TL_OP_ARGMAX: /* which element wins: a step that moves it crosses a tie */
    case TL_OP_ARGMIN:
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, (uint64_t)tl_tensor_get_int(out, e));
        break;
    case TL_OP_MAX:
    case TL_OP_MIN: z = extremes(a, in[0], out); break;
    case TL_OP_MAX_POOL: z = tl_nn_max_pool_print(in[0], a, mix); break;
    case TL_OP_CAST:
        if (!tl_dtype_is_int(out->dtype))
            return false;
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, (uint64_t)tl_tensor_get_int(out, e));
        break;
    default:
        if (tl_ops[n->op].kind != TL_KIND_CMP)
            return false;
        for (int64_t e = 0; e < out->numel; e++)
            z = mix(z, tl_tensor_get(out, e) != 0);
    }
    *h = z;
    return true;
}

/* The side of a kink a map instruction just executed decided, or 4 when
 * it has none.  floor, ceil, round and trunc: their integer modulo 4 (a
 * step of the checker moves it by one at most, so any change shows). */
static uint64_t mins_side(const tl_mins *in, double a, double b, double dst)
{
    switch (in->code) {
    case TL_M_UN:
        if (in->op == TL_OP_FLOOR || in->op == TL_OP_CEIL || in->op == TL_OP_ROUND || in->op == TL_OP_TRUNC)
            return step_of(dst) & 3;
        return in->op == TL_OP_RELU || in->op == TL_OP_ABS || in->op == TL_OP_SIGN ? side(a, 0) : 4;
    case TL_M_BIN:
        if (in->op == TL_OP_MAXIMUM || in->op == TL_OP_MINIMUM)
            return side(a, b);
        if (in->op == TL_OP_MOD || in->op == TL_OP_FMOD)
            return quotient_of(in->op, a, b) & 3;
        return tl_ops[in->op].kind == TL_KIND_CMP ? dst != 0 : 4;
    case TL_M_WHERE: return a != 0;
    case TL_M_CLAMP: return clamp_side(a, in->has_lo, in->lo, in->has_hi, in->hi);
    default: return 4;
    }
}

/* Element e of a map, replayed on the host by the map interpreter of the
 * CUDA backend (the CPU engine's bits), one instruction at a time: the
 * branches it takes (path) and the sides of the kinks it meets (kinks). */
#define GC_DEFINE_WALK(T, SUF)                                                     \
    static void walk_##SUF(const cu_mapk *k, int64_t e, T *r, int64_t *cnt, uint64_t *path, \
                           uint64_t *kinks)                                        \
    {                                                                              \
        for (int i = 0; i < k->nconst; i++)                                        \
            r[k->const_reg[i]] = (T)k->const_val[i];                               \
        for (int i = 0; i < k->nin; i++)                                           \
            r[k->in_reg[i]] = ((const T *)k->in_data[i])[cu_map_offset(k, i, e)];  \
        cu_mapk one = *k;                                                          \
        one.nins = 1;                                                              \
        for (int pc = 0; pc < k->nins;) {                                          \
            const tl_mins *in = &k->ins[pc];                                       \
            if (in->code == TL_M_JZ) {                                             \
                bool then = r[in->a] != 0;                                         \
                *path = mix(*path, (uint64_t)pc * 2 + then);                       \
                pc = then ? pc + 1 : (int)in->imm;                                 \
                continue;                                                          \
            }                                                                      \
            if (in->code == TL_M_JMP || (in->code == TL_M_LOOP_TEST && cnt[in->c] >= in->b)) { \
                pc = (int)in->imm;                                                 \
                continue;                                                          \
            }                                                                      \
            one.ins = in;                                                          \
            cu_map_exec_##SUF(&one, r, NULL, cnt, 1);                              \
            uint64_t s = mins_side(in, r[in->a], in->code == TL_M_BIN ? r[in->b] : 0, \
                                   r[in->dst]);                                    \
            if (s != 4)                                                            \
                *kinks = mix(*kinks, (uint64_t)pc * 8 + s);                        \
            pc++;                                                                  \
        }                                                                          \
    }
GC_DEFINE_WALK(float, f)
GC_DEFINE_WALK(double, d)

/* One decision of a run: the node, whether it is a branch (if, map paths)
 * or a kink, and its fingerprint. */
typedef struct mark {
    const tl_node *node;
    bool branch;
    uint64_t hash;
} mark;

typedef struct marks {
    mark *m;
    int64_t n, cap;
} marks;

/* The observer's state: recording the base run's marks, or comparing a
 * perturbed run's with them as they come. */
typedef struct watcher {
    marks *rec;        /* recording into; NULL: comparing with base */
    const marks *base;
    int64_t at;        /* the next mark */
    const tl_node *boundary, *kink; /* the first flips */
    int64_t boundary_at, kink_at;
    bool oom;
    void *scratch; /* a map's packed program and registers */
    size_t scratch_bytes;
} watcher;

static void note(watcher *w, const tl_node *n, bool branch, uint64_t hash)
{
    if (w->rec) {
        marks *m = w->rec;
        if (m->n == m->cap) {
            int64_t cap = m->cap ? 2 * m->cap : 256;
            mark *more = realloc(m->m, sizeof *more * (size_t)cap);
            if (!more) {
                w->oom = true;
                return;
            }
            m->m = more;
            m->cap = cap;
        }
        m->m[m->n++] = (mark){n, branch, hash};
        return;
    }
    if (w->boundary)
        return; /* after a flipped decision the runs part ways */
    const mark *b = w->at < w->base->n ? &w->base->m[w->at] : NULL;
    int64_t at = w->at++;
    if (b && b->node == n && b->hash == hash)
        return;
    if (!b || b->node != n || branch) {
        w->boundary = n;
        w->boundary_at = at;
    } else if (!w->kink) {
        w->kink = n;
        w->kink_at = at;
    }
}

static void map_marks(watcher *w, const tl_node *n, int nin, tl_tensor *const *in, const tl_tensor *out)
{
    const tl_mprog *p = n->attrs->prog;
    cu_map_layout l = cu_map_layout_of(p, nin);
    size_t es = tl_dtype_size(out->dtype), need = l.total + es * (size_t)p->nregs +
                                                     sizeof(int64_t) * (size_t)p->ncounters + 8;
    if (need > w->scratch_bytes) {
        void *more = realloc(w->scratch, need);
        if (!more) {
            w->oom = true;
            return;
        }
        w->scratch = more;
        w->scratch_bytes = need;
    }
    char *blob = w->scratch, *regs = blob + l.total;
    int64_t *cnt = (int64_t *)(regs + CU_ALIGN8(es * (size_t)p->nregs));
    cu_mapk k;
    /* the result is only read (its shape): the walk writes nothing there */
    cu_map_pack(&k, blob, blob, TL_OP_MAP, nin, (const tl_tensor *const *)in, n->attrs,
                (tl_tensor *)out);
    uint64_t paths = 0, kinks = 0;
    for (int64_t e = 0; e < k.total; e++) {
        uint64_t path = 0, kink = 0;
        if (out->dtype == TL_F32)
            walk_f(&k, e, (float *)regs, cnt, &path, &kink);
        else
            walk_d(&k, e, (double *)regs, cnt, &path, &kink);
        paths = mix(paths, path);
        kinks = mix(kinks, kink);
    }
    note(w, n, true, paths);
    note(w, n, false, kinks);
}

/* tl_run_opts.observe: every op node, map node and if decision. */
static void observe(void *ctx, const tl_node *n, int nin, tl_tensor *const *in, const tl_tensor *out)
{
    watcher *w = ctx;
    uint64_t h;
    if (n->op == TL_OP_IF) /* a plain-number condition never changes */
        note(w, n, true, nin ? tl_tensor_get(in[0], 0) != 0 : 2);
    else if (n->op == TL_OP_MAP)
        map_marks(w, n, nin, in, out);
    else if (kink_print(n, in, out, &h))
        note(w, n, false, h);
}

/* Ends a comparison: a run that stopped short of the base's marks parted
 * ways with it (one that went past them has a boundary already). */
static void compare_end(watcher *w)
{
    if (!w->boundary && w->at < w->base->n) {
        w->boundary = w->base->m[w->at].node;
        w->boundary_at = w->at;
    }
}

/* ---------- the check ---------- */

struct tl_gradcheck {
    const tl_graph *g;
    tl_gradcheck_opts o;
    tl_tensor **in;    /* the caller's, referenced */
    bool *check;       /* per input */
    tl_result *base;
    marks decisions;   /* the base run's */
    tl_tensor *const *seeds; /* during tl_gradcheck_run: per output, NULL: ones */
    bool ran;
};

enum { V_COMPARED, V_BOUNDARY, V_KINK };

/* One element to check and, once done, its verdict. */
typedef struct job {
    int k;
    int64_t i;
    double tape, fd;
    int of;          /* order 2: the gradient component of tape and fd */
    int64_t of_index;
    int verdict;
    const tl_node *node; /* boundary and kink: the node that flipped first */
} job;

typedef struct pool {
    tl_gradcheck *gc;
    job *jobs;
    int64_t njobs, next, done;
    int64_t failed_at; /* the earliest job that failed; njobs while none has */
    pthread_mutex_t lock;
} pool;

typedef struct worker {
    pool *p;
    const tl_graph *g;
    tl_graph view; /* workers but the first: the graph with their own constants */
    bool viewed;
    tl_tensor **in; /* private copies */
    watcher watch;
    double *minus;  /* the outputs of the run one step down */
    int64_t nminus;
    int64_t failed; /* the job that failed, -1 */
    tl_status st;
    pthread_t thread;
} worker;

static tl_tensor *copy_tensor(const tl_tensor *t, tl_status *st)
{
    tl_tensor *c = tl_tensor_new(t->dtype, t->ndim, t->shape, st);
    if (c)
        memcpy(c->data, t->data, tl_tensor_bytes(t));
    return c;
}

static void unview(tl_graph *v)
{
    for (int i = 0; v->consts && i < v->nconsts; i++)
        if (v->consts[i].kind == TL_CONST_DATA)
            tl_tensor_unref(v->consts[i].tensor);
    free(v->consts);
}

/* The same recipe as g with its own copies of the constant tensors. */
static tl_code view(const tl_graph *g, tl_graph *v, tl_status *st)
{
    *v = *g;
    v->consts = tl_calloc((size_t)g->nconsts + 1, sizeof *v->consts, "a worker's constants", st);
    if (!v->consts)
        return st->code;
    for (int i = 0; i < g->nconsts; i++) {
        v->consts[i] = g->consts[i];
        if (g->consts[i].kind != TL_CONST_DATA)
            continue;
        if (!(v->consts[i].tensor = copy_tensor(g->consts[i].tensor, st))) {
            v->nconsts = i;
            return st->code;
        }
    }
    return TL_OK;
}

/* The float outputs of a run, in output and element order, into w->minus
 * (a run's outputs may be its inputs themselves, which the next run
 * perturbs). */
static tl_code keep_outputs(worker *w, const tl_result *r, tl_status *st)
{
    int64_t n = 0;
    for (int o = 0; o < tl_result_noutputs(r); o++)
        n += tl_dtype_is_int(tl_result_output(r, o)->dtype) ? 0 : tl_result_output(r, o)->numel;
    if (n > w->nminus) {
        double *more = tl_malloc((size_t)n, sizeof *more, "a run's outputs", st);
        if (!more)
            return st->code;
        free(w->minus);
        w->minus = more;
        w->nminus = n;
    }
    n = 0;
    for (int o = 0; o < tl_result_noutputs(r); o++) {
        const tl_tensor *y = tl_result_output(r, o);
        for (int64_t e = 0; !tl_dtype_is_int(y->dtype) && e < y->numel; e++)
            w->minus[n++] = tl_tensor_get(y, e);
    }
    return TL_OK;
}

/* <seed, plus - minus> over the float outputs, in output and element order.
 * An entry that did not change, or whose seed is 0, contributes nothing,
 * even an infinity or a NaN (which would make every difference NaN). */
static double seeded_difference(const tl_gradcheck *gc, const tl_result *plus, const double *minus)
{
    double s = 0;
    for (int o = 0; o < tl_result_noutputs(plus); o++) {
        const tl_tensor *p = tl_result_output(plus, o);
        const tl_tensor *seed = gc->seeds ? gc->seeds[o] : NULL;
        for (int64_t e = 0; !tl_dtype_is_int(p->dtype) && e < p->numel; e++, minus++) {
            double y = tl_tensor_get(p, e), w = seed ? tl_tensor_get(seed, e) : 1.0;
            if (w != 0 && y != *minus && !(isnan(y) && isnan(*minus)))
                s += w * (y - *minus);
        }
    }
    return s;
}

/* One forward run with input element j->i at v, its decisions compared
 * with the base's. */
static tl_code probe(worker *w, const job *j, double v, bool up, tl_result **r, tl_status *st)
{
    tl_gradcheck *gc = w->p->gc;
    ((double *)w->in[j->k]->data)[j->i] = v;
    watcher *a = &w->watch;
    a->at = 0;
    a->boundary = a->kink = NULL;
    tl_run_opts o = {.observe = observe, .observe_ctx = a};
    if (tl_run(w->g, w->in, &o, r, st)) {
        char at[TL_MAXDIM * 24];
        return tl_wrap(st, "input \"%s\" at %s %s the step", gc->g->inputs[j->k].name,
                       tl_index_desc(w->in[j->k], j->i, at, sizeof at), up ? "plus" : "minus");
    }
    if (a->oom)
        return tl_fail(st, TL_ERUNTIME, "out of memory noting the decisions of a run");
    compare_end(a);
    return TL_OK;
}

/* The earlier of two flips (mark positions), the first run's on a tie. */
static const tl_node *first_flip(const tl_node *a, int64_t a_at, const tl_node *b, int64_t b_at)
{
    return !b || (a && a_at <= b_at) ? a : b;
}

/* The element's verdict from the flips of its two runs: the first run's
 * (mb, mk at their marks) and the second's (in the watcher). */
static void verdict(const worker *w, job *j, const tl_node *mb, int64_t mb_at, const tl_node *mk, int64_t mk_at)
{
    const watcher *p = &w->watch;
    const tl_node *b = first_flip(mb, mb_at, p->boundary, p->boundary_at);
    const tl_node *k = first_flip(mk, mk_at, p->kink, p->kink_at);
    j->node = b ? b : k;
    if (b || k)
        j->verdict = b ? V_BOUNDARY : V_KINK;
}

/* How far past its tolerance a pair is (0: within); *match whether it
 * matches: an infinity matches only itself, NaN only NaN. */
static double score_of(double tape, double fd, double rtol, double atol, bool *match)
{
    double err = fabs(tape - fd), tol = atol + rtol * fabs(fd);
    bool finite = isfinite(tape) && isfinite(fd);
    *match = (finite && err <= tol) || tape == fd || (isnan(tape) && isnan(fd));
    return !*match ? (finite ? err / tol : INFINITY) : finite && err > 0 ? err / tol : 0;
}

/* The gradients of the checked inputs, flattened in input order, into v
 * (n of them); grads[k] NULL: zeros. */
static void flatten(const tl_gradcheck *gc, tl_tensor *const *grads, double *v)
{
    int64_t n = 0;
    for (int k = 0; k < gc->g->ninputs; k++)
        for (int64_t e = 0; gc->check[k] && e < gc->in[k]->numel; e++)
            v[n++] = grads[k] ? tl_tensor_get(grads[k], e) : 0;
}

/* Order 2, a probe: the gradient at input element j->i = v, flattened. */
static tl_code probe_grad(worker *w, const job *j, double v, bool up, double *out, tl_status *st)
{
    tl_gradcheck *gc = w->p->gc;
    const tl_graph *g = gc->g;
    ((double *)w->in[j->k]->data)[j->i] = v;
    watcher *a = &w->watch;
    a->at = 0;
    a->boundary = a->kink = NULL;
    tl_run_opts o = {.record = true, .wrt = gc->check, .observe = observe, .observe_ctx = a};
    tl_result *r = NULL;
    tl_tensor **grads = tl_calloc((size_t)g->ninputs + 1, sizeof *grads, "gradients", st);
    tl_code rc = grads ? tl_run(w->g, w->in, &o, &r, st) : st->code;
    if (!rc && !(rc = tl_result_pullback(r, gc->seeds, grads, st)))
        flatten(gc, grads, out);
    for (int k = 0; grads && k < g->ninputs; k++)
        tl_tensor_unref(grads[k]);
    free(grads);
    tl_result_free(r);
    if (rc) {
        char at[TL_MAXDIM * 24];
        return tl_wrap(st, "input \"%s\" at %s %s the step", g->inputs[j->k].name,
                       tl_index_desc(w->in[j->k], j->i, at, sizeof at), up ? "plus" : "minus");
    }
    if (a->oom)
        return tl_fail(st, TL_ERUNTIME, "out of memory noting the decisions of a run");
    compare_end(a);
    return TL_OK;
}

/* Order 2, the tape: the Hessian-vector product with the unit tangent of
 * element j->i, flattened. */
static tl_code tape_hvp(worker *w, const job *j, double *out, tl_status *st)
{
    tl_gradcheck *gc = w->p->gc;
    int ni = gc->g->ninputs;
    tl_run_opts o = {.record = true, .twice = true, .wrt = gc->check};
    tl_result *r = NULL;
    tl_tensor **t = tl_calloc((size_t)2 * ni + 1, sizeof *t, "tangents", st), **h = t ? t + ni : NULL;
    if (!t)
        return st->code;
    const tl_tensor *x = w->in[j->k];
    tl_code rc = (t[j->k] = tl_tensor_zeros(x->dtype, x->ndim, x->shape, st)) ? TL_OK : st->code;
    if (!rc) {
        tl_tensor_set(t[j->k], j->i, 1.0);
        rc = tl_run(w->g, w->in, &o, &r, st);
    }
    if (!rc && !(rc = tl_result_pullback_recorded(r, gc->seeds, false, h, st))) {
        for (int k = 0; k < ni; k++) { /* the gradients themselves are not needed */
            tl_tensor_unref(h[k]);
            h[k] = NULL;
        }
        if (!(rc = tl_result_pullback_again(r, t, h, NULL, st)))
            flatten(gc, h, out);
    }
    for (int k = 0; k < 2 * ni; k++)
        tl_tensor_unref(t[k]);
    free(t);
    tl_result_free(r);
    return rc;
}

static tl_code check_element2(worker *w, job *j, tl_status *st)
{
    tl_gradcheck *gc = w->p->gc;
    int64_t n = 0;
    for (int k = 0; k < gc->g->ninputs; k++)
        n += gc->check[k] ? gc->in[k]->numel : 0;
    double *lo = tl_malloc((size_t)(3 * n) + 1, sizeof *lo, "gradients", st), *hi = lo + n, *tape = hi + n;
    if (!lo)
        return st->code;
    double x0 = ((double *)w->in[j->k]->data)[j->i], h = gc->o.eps * fmax(1.0, fabs(x0));
    const tl_node *mb = NULL, *mk = NULL;
    int64_t mb_at = 0, mk_at = 0;
    tl_code rc = probe_grad(w, j, x0 - h, false, lo, st);
    if (!rc) {
        mb = w->watch.boundary, mk = w->watch.kink;
        mb_at = w->watch.boundary_at, mk_at = w->watch.kink_at;
        rc = probe_grad(w, j, x0 + h, true, hi, st);
    }
    ((double *)w->in[j->k]->data)[j->i] = x0;
    if (!rc)
        rc = tape_hvp(w, j, tape, st);
    double worst = -1;
    bool worst_miss = false;
    for (int64_t c = 0; !rc && c < n; c++) { /* the component furthest past its tolerance */
        double fd = (hi[c] - lo[c]) / (2 * h);
        bool match;
        double s = score_of(tape[c], fd, gc->o.rtol, gc->o.atol, &match);
        if (worst < 0 || (!match && !worst_miss) || (!match == worst_miss && s > worst)) {
            worst = s;
            worst_miss = !match;
            j->tape = tape[c];
            j->fd = fd;
            int64_t at = c;
            for (j->of = 0; at >= (gc->check[j->of] ? gc->in[j->of]->numel : 0); j->of++)
                at -= gc->check[j->of] ? gc->in[j->of]->numel : 0;
            j->of_index = at;
        }
    }
    free(lo);
    if (rc)
        return rc;
    verdict(w, j, mb, mb_at, mk, mk_at);
    return TL_OK;
}

static tl_code check_element(worker *w, job *j, tl_status *st)
{
    tl_gradcheck *gc = w->p->gc;
    if (gc->o.order == 2)
        return check_element2(w, j, st);
    double x0 = ((double *)w->in[j->k]->data)[j->i], h = gc->o.eps * fmax(1.0, fabs(x0));
    double lo = x0 - h, hi = x0 + h;
    tl_result *r = NULL;
    const tl_node *mb = NULL, *mk = NULL;
    int64_t mb_at = 0, mk_at = 0;
    tl_code rc = probe(w, j, lo, false, &r, st);
    if (!rc) {
        mb = w->watch.boundary, mk = w->watch.kink;
        mb_at = w->watch.boundary_at, mk_at = w->watch.kink_at;
        rc = keep_outputs(w, r, st);
    }
    tl_result_free(r);
    r = NULL;
    if (!rc && !(rc = probe(w, j, hi, true, &r, st)))
        j->fd = seeded_difference(gc, r, w->minus) / (hi - lo);
    tl_result_free(r);
    ((double *)w->in[j->k]->data)[j->i] = x0;
    if (rc)
        return rc;
    verdict(w, j, mb, mb_at, mk, mk_at);
    return TL_OK;
}

/* ---------- workers ---------- */

static void *work(void *arg)
{
    worker *w = arg;
    pool *p = w->p;
    const tl_gradcheck_opts *o = &p->gc->o;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int64_t j = p->next < p->failed_at ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (j < 0)
            return NULL;
        tl_code rc = check_element(w, &p->jobs[j], &w->st);
        pthread_mutex_lock(&p->lock);
        p->done++;
        if (rc && j < p->failed_at)
            p->failed_at = j;
        if (o->progress)
            o->progress(o->progress_ctx, p->done, p->njobs);
        pthread_mutex_unlock(&p->lock);
        if (rc) {
            w->failed = j;
            return NULL;
        }
    }
}

static void worker_free(worker *w, int ninputs)
{
    for (int k = 0; w->in && k < ninputs; k++)
        tl_tensor_unref(w->in[k]);
    free(w->in);
    free(w->minus);
    free(w->watch.scratch);
    if (w->viewed)
        unview(&w->view);
}

/* Worker `id`: the caller's thread (0) runs the graph itself, the others
 * a view of it; each perturbs its own copies of the inputs. */
static tl_code worker_init(worker *w, pool *p, int id, tl_status *st)
{
    const tl_graph *g = p->gc->g;
    *w = (worker){.p = p, .g = g, .failed = -1};
    w->watch.base = &p->gc->decisions;
    if (id > 0) {
        w->viewed = true;
        if (view(g, &w->view, st))
            return st->code;
        w->g = &w->view;
    }
    if (!(w->in = tl_calloc((size_t)g->ninputs + 1, sizeof *w->in, "a worker's inputs", st)))
        return st->code;
    for (int k = 0; k < g->ninputs; k++)
        if (!(w->in[k] = copy_tensor(p->gc->in[k], st)))
            return st->code;
    return TL_OK;
}

/* opts.threads, else TL_NUM_THREADS, else the processors online; at most
 * 64, no more than there are elements. */
static int thread_count(const tl_gradcheck *gc, int64_t njobs)
{
    const tl_gradcheck_opts *o = &gc->o;
    const char *env = getenv("TL_NUM_THREADS");
    long n = o->threads > 0             ? o->threads
             : env && atol(env) > 0     ? atol(env)
                                        : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > 64 ? 64 : n;
    return (int)(n > njobs ? (njobs > 0 ? njobs : 1) : n);
}

/* Checks every job, in threads; on failure st is that of the earliest job
 * that failed (every job before it ran, whatever the thread count). */
static tl_code run_jobs(tl_gradcheck *gc, job *jobs, int64_t njobs, tl_status *st)
{
    pool p = {.gc = gc, .jobs = jobs, .njobs = njobs, .failed_at = njobs};
    int nw = thread_count(gc, njobs), ready = 0, ni = gc->g->ninputs;
    worker *w = tl_calloc((size_t)nw, sizeof *w, "the workers", st);
    if (!w)
        return st->code;
    tl_code rc = TL_OK;
    for (; ready < nw && !rc; ready++)
        rc = worker_init(&w[ready], &p, ready, st);
    bool *started = rc ? NULL : tl_calloc((size_t)nw, sizeof *started, "the workers", st);
    if (started) {
        pthread_mutex_init(&p.lock, NULL);
        for (int i = 1; i < nw; i++)
            started[i] = pthread_create(&w[i].thread, NULL, work, &w[i]) == 0;
        work(&w[0]); /* with no helpers this thread does it all */
        for (int i = 1; i < nw; i++)
            if (started[i])
                pthread_join(w[i].thread, NULL);
        pthread_mutex_destroy(&p.lock);
        for (int i = 0; i < nw; i++)
            if (w[i].failed >= 0 && w[i].failed == p.failed_at)
                *st = w[i].st;
        rc = p.failed_at < njobs ? st->code : TL_OK;
    } else {
        rc = st->code;
    }
    for (int i = 0; i < ready; i++)
        worker_free(&w[i], ni);
    free(started);
    free(w);
    return rc;
}

/* ---------- which elements ---------- */

/* How many elements of an input of n the check takes. */
static int64_t sample_size(int64_t n, int64_t samples) { return samples && samples < n ? samples : n; }

/* The elements of input k to check, in order: all n, or `want` of them by
 * selection sampling (Knuth's algorithm S) from a random source that
 * depends on k alone, so the same ones every time. */
static void pick(int k, int64_t n, int64_t want, const tl_tensor *grad, job *jobs)
{
    int64_t chosen = 0;
    for (int64_t t = 0; t < n && chosen < want; t++) {
        double u = (double)(mix(0x6772616463686bu + (uint64_t)k, (uint64_t)t) >> 11) * 0x1.0p-53;
        if ((double)(n - t) * u < (double)(want - chosen))
            jobs[chosen++] = (job){.k = k, .i = t, .tape = tl_tensor_get(grad, t)};
    }
}

/* ---------- the report ---------- */

typedef struct tally {
    bool worst_nan;
    double worst_score; /* |tape - fd| / (atol + rtol * |fd|) */
} tally;

static void count_site(tl_gradcheck_site *sites, int64_t *n, const job *j)
{
    if (*n < TL_GC_SITES)
        sites[*n] = (tl_gradcheck_site){j->i, j->node, j->tape, j->fd};
    ++*n;
}

static void count(tl_gradcheck_input *r, tally *t, const job *j, double rtol, double atol)
{
    r->checked++;
    if (j->verdict == V_BOUNDARY || j->verdict == V_KINK) {
        bool b = j->verdict == V_BOUNDARY;
        count_site(b ? r->boundary : r->kink, b ? &r->nboundary : &r->nkink, j);
        return;
    }
    double err = fabs(j->tape - j->fd);
    bool nan = isnan(j->tape) || isnan(j->fd), match;
    double score = score_of(j->tape, j->fd, rtol, atol, &match);
    bool nan_mismatch = nan && !match;
    r->mismatches += !match;
    if (!nan) {
        r->max_abs = fmax(r->max_abs, err);
        r->max_rel = fmax(r->max_rel, err > 0 ? err / fabs(j->fd) : 0);
    }
    if (r->worst < 0 || (nan_mismatch && !t->worst_nan) ||
        (nan_mismatch == t->worst_nan && score > t->worst_score)) {
        r->worst = j->i;
        r->worst_tape = j->tape;
        r->worst_fd = j->fd;
        r->worst_of = j->of;
        r->worst_of_index = j->of_index;
        t->worst_nan = nan_mismatch;
        t->worst_score = score;
    }
}

static tl_gradcheck_report *make_report(const tl_gradcheck *gc, const job *jobs, int64_t njobs,
                                        tl_status *st)
{
    const tl_graph *g = gc->g;
    tl_gradcheck_report *r = tl_calloc(1, sizeof *r, "a report", st);
    tally *t = tl_calloc((size_t)g->ninputs + 1, sizeof *t, "a report", st);
    tl_gradcheck_input *in = tl_calloc((size_t)g->ninputs + 1, sizeof *in, "a report", st);
    if (!r || !t || !in) {
        free(r);
        free(t);
        free(in);
        return NULL;
    }
    *r = (tl_gradcheck_report){.eps = gc->o.eps, .rtol = gc->o.rtol, .atol = gc->o.atol,
                               .order = gc->o.order == 2 ? 2 : 1, .samples = gc->o.samples, .ninputs = g->ninputs, .inputs = in};
    for (int k = 0; k < g->ninputs; k++) {
        tl_gradcheck_input *e = &r->inputs[k];
        const tl_tensor *x = gc->in[k];
        *e = (tl_gradcheck_input){.name = g->inputs[k].name, .dtype = x->dtype, .ndim = x->ndim,
                                  .numel = x->numel, .worst = -1};
        memcpy(e->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
        e->skip = gc->check[k] ? TL_GC_CHECKED : tl_dtype_is_int(x->dtype) ? TL_GC_SKIP_INDEX : TL_GC_SKIP_WRT;
    }
    for (int64_t j = 0; j < njobs; j++)
        count(&r->inputs[jobs[j].k], &t[jobs[j].k], &jobs[j], gc->o.rtol, gc->o.atol);
    for (int k = 0; k < g->ninputs; k++) {
        r->checked += r->inputs[k].checked;
        r->mismatches += r->inputs[k].mismatches;
        r->nboundary += r->inputs[k].nboundary;
        r->nkink += r->inputs[k].nkink;
    }
    free(t);
    return r;
}

void tl_gradcheck_free_report(tl_gradcheck_report *r)
{
    if (r)
        free(r->inputs);
    free(r);
}

/* ---------- the API ---------- */

static tl_code check_opts(const tl_gradcheck_opts *o, tl_status *st)
{
    if (!(o->eps > 0) || isinf(o->eps))
        return tl_fail(st, TL_EINPUT, "the step eps must be a number > 0");
    if (!(o->rtol >= 0) || !(o->atol >= 0))
        return tl_fail(st, TL_EINPUT, "rtol and atol must be numbers >= 0");
    if (o->samples < 0)
        return tl_fail(st, TL_EINPUT, "samples must be >= 0 (0: every element)");
    if (o->order < 0 || o->order > 2)
        return tl_fail(st, TL_EINPUT, "the order must be 1 or 2, not %d", o->order);
    return TL_OK;
}

/* f64 wherever a finite difference is taken or read. */
static tl_code check_dtypes(const tl_gradcheck *gc, tl_status *st)
{
    const tl_graph *g = gc->g;
    char d[96];
    for (int k = 0; k < g->ninputs; k++)
        if (gc->check[k] && gc->in[k]->dtype != TL_F64)
            return tl_fail(st, TL_EINPUT, "input \"%s\" is %s: gradcheck needs f64 inputs (finite "
                           "differences in f32 say little, and tl never changes precision by "
                           "itself); cast the inputs to f64: a literal without the f32: prefix, "
                           "an array saved as float64", g->inputs[k].name,
                           tl_tensor_desc(gc->in[k], d, sizeof d));
    int nint = 0, nout = gc->base ? tl_result_noutputs(gc->base) : 0;
    for (int i = 0; i < nout; i++)
        nint += tl_dtype_is_int(tl_result_output(gc->base, i)->dtype);
    if (nout && nint == nout)
        return tl_fail(st, TL_EINPUT, "nothing to check: every output is an index tensor, with no gradient "
                       "(\"%s\" is %s)", tl_result_output_name(gc->base, 0),
                       tl_tensor_desc(tl_result_output(gc->base, 0), d, sizeof d));
    for (int i = 0; i < nout; i++)
        if (tl_result_output(gc->base, i)->dtype == TL_F32)
            return tl_fail(st, TL_EINPUT, "output \"%s\" is %s: gradcheck needs f64 outputs (finite "
                           "differences in f32 say little); keep the graph in f64 up to its outputs",
                           tl_result_output_name(gc->base, i),
                           tl_tensor_desc(tl_result_output(gc->base, i), d, sizeof d));
    return TL_OK;
}

tl_code tl_gradcheck_begin(const tl_graph *g, tl_tensor *const *inputs, const tl_gradcheck_opts *o,
                           tl_gradcheck **out, tl_status *st)
{
    tl_gradcheck_opts defaults;
    tl_gradcheck_defaults(&defaults);
    *out = NULL;
    if (check_opts(o ? o : &defaults, st))
        return st->code;
    tl_gradcheck *gc = tl_calloc(1, sizeof *gc, "a gradcheck", st);
    if (!gc)
        return st->code;
    gc->g = g;
    gc->o = o ? *o : defaults;
    gc->in = tl_calloc((size_t)g->ninputs + 1, sizeof *gc->in, "a gradcheck", st);
    gc->check = tl_calloc((size_t)g->ninputs + 1, sizeof *gc->check, "a gradcheck", st);
    tl_code rc = gc->in && gc->check ? TL_OK : st->code;
    for (int k = 0; !rc && k < g->ninputs; k++) {
        gc->in[k] = tl_tensor_ref(inputs[k]);
        gc->check[k] = (!gc->o.wrt || gc->o.wrt[k]) && !tl_dtype_is_int(inputs[k]->dtype);
    }
    gc->o.wrt = NULL; /* the caller's array: not kept */
    watcher w = {.rec = &gc->decisions};
    tl_run_opts ro = {.record = true, .wrt = gc->check, .observe = observe, .observe_ctx = &w};
    if (!rc && !(rc = check_dtypes(gc, st)) && !(rc = tl_run(g, gc->in, &ro, &gc->base, st))) {
        if (w.oom)
            rc = tl_fail(st, TL_ERUNTIME, "out of memory noting the decisions of the run");
        else
            rc = check_dtypes(gc, st);
    }
    free(w.scratch);
    if (rc) {
        tl_gradcheck_end(gc);
        return rc;
    }
    *out = gc;
    return TL_OK;
}

const tl_result *tl_gradcheck_base(const tl_gradcheck *gc) { return gc->base; }

tl_code tl_gradcheck_run(tl_gradcheck *gc, tl_tensor *const *seeds, tl_gradcheck_report **out,
                         tl_status *st)
{
    const tl_graph *g = gc->g;
    *out = NULL;
    if (gc->ran)
        return tl_fail(st, TL_EINPUT, "a gradcheck runs once");
    gc->ran = true;
    tl_tensor **grads = tl_calloc((size_t)g->ninputs + 1, sizeof *grads, "gradients", st);
    if (!grads || tl_result_pullback(gc->base, seeds, grads, st)) {
        free(grads);
        return st->code;
    }
    int64_t njobs = 0, at = 0;
    for (int k = 0; k < g->ninputs; k++)
        njobs += gc->check[k] ? sample_size(gc->in[k]->numel, gc->o.samples) : 0;
    job *jobs = tl_calloc((size_t)njobs + 1, sizeof *jobs, "the elements to check", st);
    tl_code rc = jobs ? TL_OK : st->code;
    for (int k = 0; !rc && k < g->ninputs; k++) {
        if (!gc->check[k])
            continue;
        int64_t want = sample_size(gc->in[k]->numel, gc->o.samples);
        pick(k, gc->in[k]->numel, want, grads[k], jobs + at);
        at += want;
    }
    gc->seeds = seeds;
    if (!rc && !(rc = run_jobs(gc, jobs, njobs, st)) && !(*out = make_report(gc, jobs, njobs, st)))
        rc = st->code;
    gc->seeds = NULL;
    for (int k = 0; k < g->ninputs; k++)
        tl_tensor_unref(grads[k]);
    free(grads);
    free(jobs);
    return rc;
}

void tl_gradcheck_end(tl_gradcheck *gc)
{
    if (!gc)
        return;
    tl_result_free(gc->base);
    for (int k = 0; gc->in && k < gc->g->ninputs; k++)
        tl_tensor_unref(gc->in[k]);
    free(gc->in);
    free(gc->check);
    free(gc->decisions.m);
    free(gc);
}

tl_code tl_gradcheck_graph(const tl_graph *g, tl_tensor *const *inputs, tl_tensor *const *seeds,
                           const tl_gradcheck_opts *o, tl_gradcheck_report **out, tl_status *st)
{
    tl_gradcheck *gc;
    *out = NULL;
    if (tl_gradcheck_begin(g, inputs, o, &gc, st))
        return st->code;
    tl_code rc = tl_gradcheck_run(gc, seeds, out, st);
    tl_gradcheck_end(gc);
    return rc;
}
