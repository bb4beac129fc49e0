#define _POSIX_C_SOURCE 200809L
#include "tape.h"

#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int tl_tape_new_var(tl_tape *t) { return t->nvars++; }

static void release(tl_entry *e)
{
    if (e->custom)
        e->custom->free(e->custom);
    e->custom = NULL;
    for (int i = 0; i < e->nin; i++)
        tl_tensor_unref(e->in[i]);
    tl_tensor_unref(e->out);
    if (e->owns_attrs)
        free((void *)e->attrs);
    e->owns_attrs = false;
    e->attrs = NULL;
    if (e->in != e->small_in)
        free(e->in); /* a heap block holds both in and in_var */
    e->in_var = NULL;
    e->in = NULL;
    e->out = NULL;
    e->nin = 0;
}

/* What an entry keeps of a tensor: the tensor when its backward rule
 * reads the values (or it is small), else only its shape, so the memory
 * of intermediates no rule needs goes at their last use.  A host scalar
 * whose value no rule reads shares one header of its dtype, the tape's:
 * a header of its own would cost what the scalar does (a long recorded
 * iterate keeps millions). */
static tl_tensor *keep(tl_tape *tp, tl_tensor *t, bool read, tl_status *st)
{
    if (!read && t->ndim == 0 && tl_tensor_on_host(t)) { /* a host tensor's device is the CPU */
        tl_tensor **s = &tp->scalar_stub[t->dtype];
        if (!*s && !(*s = tl_tensor_stub(t, st)))
            return NULL;
        return tl_tensor_ref(*s);
    }
    if (read || (int64_t)tl_tensor_bytes(t) < tp->keep_below)
        return tl_tensor_ref(t);
    return tl_tensor_stub(t, st);
}

/* The first TAPE_SMALL_CHUNKS chunks are malloc's; the rest are cut from
 * blocks of TAPE_ARENA bytes in huge pages where the machine maps those
 * faster (tl_huge_block), which the tape owns: a recording of millions of
 * entries faulted in a fresh page every 46 entries (on the Zen 5 VM, 13-16
 * us each, a fifth of the 100k-step recurrence's hvp). */
#define TAPE_SMALL_CHUNKS 16
#define TAPE_ARENA ((size_t)4 << 20)
#define CHUNK_BYTES (sizeof(tl_entry) * (size_t)TL_TAPE_CHUNK)

static tl_entry *new_chunk(tl_tape *t, int64_t c, tl_status *st)
{
    if (c < TAPE_SMALL_CHUNKS)
        return malloc(CHUNK_BYTES);
    if (!t->arena_left) {
        char *a = tl_huge_block(TAPE_ARENA);
        if (!a || tl_tape_own(t, a, free, st))
            return NULL;
        t->arena = a;
        t->arena_left = (int)(TAPE_ARENA / CHUNK_BYTES);
    }
    tl_entry *e = (tl_entry *)t->arena;
    t->arena += CHUNK_BYTES;
    t->arena_left--;
    return e;
}

/* Room for one more entry: a new chunk when the last is full. */
static tl_code grow(tl_tape *t, tl_status *st)
{
    if (t->n < t->cap)
        return TL_OK;
    int64_t c = t->cap >> TL_TAPE_CHUNK_BITS;
    if (c == t->nchunk_cap) {
        int64_t ncap = t->nchunk_cap ? 2 * t->nchunk_cap : 16;
        tl_entry **a = realloc(t->chunk, sizeof *a * (size_t)ncap);
        if (!a)
            return tl_fail(st, TL_ERUNTIME, "out of memory growing the tape past %lld entries",
                           (long long)t->cap);
        t->chunk = a;
        t->nchunk_cap = ncap;
    }
    char what[64];
    snprintf(what, sizeof what, "the tape (%lld entries)", (long long)(t->cap + TL_TAPE_CHUNK));
    if (tl_budget_charge(t->budget, TL_TAPE_CHUNK * (int64_t)sizeof(tl_entry), what, st))
        return st->code;
    if (!(t->chunk[c] = new_chunk(t, c, st))) {
        tl_budget_credit(t->budget, TL_TAPE_CHUNK * (int64_t)sizeof(tl_entry));
        return tl_fail(st, TL_ERUNTIME, "out of memory growing the tape past %lld entries",
                       (long long)t->cap);
    }
    t->cap += TL_TAPE_CHUNK;
    return TL_OK;
}

tl_code tl_tape_record_custom(tl_tape *t, tl_custom *c, const struct tl_node *node, tl_status *st)
{
    if (grow(t, st)) {
        c->free(c);
        return st->code;
    }
    *tl_tape_entry(t, t->n++) = (tl_entry){.op = TL_OP_COUNT, .out_var = -1, .node = node, .custom = c};
    return TL_OK;
}

int tl_tape_record(tl_tape *t, tl_opcode op, int nin, tl_tensor *const *in, const int *in_var,
                   tl_tensor *out, const tl_attrs *attrs, const struct tl_node *node, tl_status *st)
{
    if (grow(t, st))
        return -1;
    tl_entry *e = tl_tape_entry(t, t->n);
    if ((t->n & (TL_TAPE_CHUNK - 1)) + 4 < TL_TAPE_CHUNK) /* written soon: on its way */
        __builtin_prefetch(tl_tape_entry(t, t->n + 4), 1);
    void *block = NULL;
    tl_attrs *own = NULL;
    if (nin > TL_ENTRY_SMALL &&
        !(block = tl_malloc((size_t)nin, sizeof(int) + sizeof(tl_tensor *), "a tape entry", st)))
        return -1;
    /* dropout's backward draws its mask again: it needs the key the
     * executor put in a copy of the node's attributes */
    if (op == TL_OP_DROPOUT && attrs && !(own = tl_malloc(1, sizeof *own, "a tape entry", st))) {
        free(block);
        return -1;
    }
    if (own)
        *own = *attrs;
    t->n++;
    e->op = op;
    e->nin = nin;
    e->attrs = own ? own : attrs;
    e->owns_attrs = own != NULL;
    e->node = node;
    e->custom = NULL;
    e->in = block ? block : e->small_in; /* nin pointers, then nin variable ids */
    e->in_var = block ? (int *)((tl_tensor **)block + nin) : e->small_var;
    memcpy(e->in_var, in_var, sizeof(int) * (size_t)nin);
    unsigned reads = tl_grad_reads(op, nin, in_var, attrs);
    bool ok = true;
    for (int i = 0; i < nin; i++)
        ok = (e->in[i] = keep(t, in[i], reads & (1u << (i < 31 ? i : 30)), st)) && ok;
    ok = (e->out = keep(t, out, reads & TL_GRAD_READS_OUT, st)) && ok;
    e->out_var = tl_tape_new_var(t);
    if (!ok) { /* a header could not be made: the entry is dropped again */
        release(e);
        t->n--;
        return -1;
    }
    return e->out_var;
}

int tl_tape_record_copy(tl_tape *t, tl_opcode op, int nin, tl_tensor *const *in, const int *in_var,
                        tl_tensor *out, const tl_attrs *attrs, const struct tl_node *node, tl_status *st)
{
    int v = tl_tape_record(t, op, nin, in, in_var, out, attrs, node, st);
    tl_entry *e = v >= 0 ? tl_tape_entry(t, t->n - 1) : NULL;
    if (!e || !attrs || e->owns_attrs)
        return v;
    tl_attrs *own = tl_malloc(1, sizeof *own, "a tape entry", st);
    if (!own) {
        release(e);
        t->n--;
        return -1;
    }
    *own = *attrs;
    e->attrs = own;
    e->owns_attrs = true;
    return v;
}

static tl_code accumulate(tl_ctx *cx, tl_tensor **slot, tl_tensor *g, tl_status *st)
{
    if (!*slot) {
        *slot = g;
        return TL_OK;
    }
    tl_tensor *pair[2] = {*slot, g};
    tl_tensor *sum = tl_op(cx, TL_OP_ADD, 2, pair, NULL, st);
    tl_tensor_unref(g);
    if (!sum)
        return st->code;
    tl_tensor_unref(*slot);
    *slot = sum;
    return TL_OK;
}

/* ---------- take's (and gather's) gradient added where it lands ----------
 * A take's rule scatters g into zeros of x's shape (take_grad: each
 * place 0 + g), then accumulate adds that to the gradient held so far:
 * acc + (0 + g) where a row was taken, acc + 0 elsewhere.  A step of a
 * recurrence that reads row i of a long input (an ONNX scan input, an
 * RNN's sequence) made and added a whole input's worth each step: the
 * backward pass took time in the square of the steps.  Where the
 * indices are distinct and the gradient held is the slot's alone, the
 * same sums are done in place, on the rows taken only: acc + 0 leaves
 * acc as it is except a -0 (+0) or a signalling NaN (quieted), which a
 * pass over acc does once (the slot's tensor is then "clean", and stays
 * so while no one else replaces it, since acc + (0 + g) makes neither);
 * (0 + g) is g + 0.  The same bits as the rule and the add.  A gather
 * with one index a line (a step's row of a stacked output, which the
 * jvp's second pass pulls back through) likewise. */

#define TAKE_INTO_MAX_M 32 /* indices checked distinct in O(m^2); more: the rule */

static int64_t take_index(const tl_entry *e, int64_t j, int64_t len)
{
    const tl_attrs *a = e->attrs;
    int64_t i = e->nin > 1 ? tl_tensor_get_int(e->in[1], j) : a->indices[j];
    return i < 0 ? i + len : i;
}

#define CLEAN_LOOP(T, U, SIGN, EXP, QUIET)                                                \
    do {                                                                                  \
        U *u = (U *)acc->data;                                                            \
        for (int64_t i = 0; i < acc->numel; i++)                                          \
            if (u[i] == SIGN)                                                             \
                u[i] = 0;                                                                 \
            else if ((u[i] & EXP) == EXP && (u[i] & ~(SIGN | EXP)) && !(u[i] & QUIET))    \
                u[i] |= QUIET;                                                            \
    } while (0)

#define ADD_ROWS(T)                                                                       \
    do {                                                                                  \
        T *A = acc->data;                                                                 \
        const T *G = g->data;                                                             \
        for (int64_t o = 0; o < outer; o++)                                               \
            for (int64_t j = 0; j < m; j++) {                                             \
                T *d = A + (o * len + take_index(e, j, len)) * inner;                     \
                const T *s = G + (o * m + j) * inner;                                     \
                for (int64_t k = 0; k < inner; k++)                                       \
                    d[k] = d[k] + (s[k] + (T)0);                                          \
            }                                                                             \
    } while (0)

/* gather's: g[o, 0, k] into acc[o, idx[o, 0, k], k] */
#define ADD_LINES(T)                                                                      \
    do {                                                                                  \
        T *A = acc->data;                                                                 \
        const T *G = g->data;                                                             \
        const tl_tensor *ix = e->in[1];                                                   \
        for (int64_t o = 0; o < outer; o++)                                               \
            for (int64_t k = 0; k < inner; k++) {                                         \
                int64_t i = tl_tensor_get_int(ix, o * inner + k);                         \
                T *d = A + (o * len + (i < 0 ? i + len : i)) * inner + k;                 \
                *d = *d + (G[o * inner + k] + (T)0);                                      \
            }                                                                             \
    } while (0)

int tl_take_into(tl_ctx *cx, const tl_entry *e, tl_tensor **slot, const tl_tensor *g, const tl_tensor **clean,
                 tl_status *st)
{
    const tl_attrs *a = e->attrs;
    bool gather = e->op == TL_OP_GATHER;
    if ((e->op != TL_OP_TAKE && !gather) || (e->nin > 1 && e->in_var[1] >= 0) || !a || cx->check_finite ||
        (gather && e->nin != 2))
        return 0;
    const tl_tensor *x = e->in[0];
    tl_tensor *acc = *slot;
    if ((g->dtype != TL_F32 && g->dtype != TL_F64) || !tl_tensor_on_host(g) || !g->data ||
        (e->nin > 1 && !tl_tensor_on_host(e->in[1])) ||
        (acc && (!tl_tensor_on_host(acc) || acc->refs != 1 || !acc->data || acc->map || acc->base ||
                 acc->dtype != g->dtype || acc->numel != x->numel)))
        return 0;
    int ax = (int)a->axis;
    int64_t m = e->nin > 1 ? e->in[1]->numel : a->nindices, outer = 1, inner = 1, len = x->shape[ax];
    /* gather: one index on the axis per line (a step's row of a stack,
     * broadcast), so no place gets two */
    if (gather ? e->in[1]->shape[ax] != 1 : m > TAKE_INTO_MAX_M)
        return 0;
    if (gather)
        m = 1;
    for (int64_t j = 1; j < m; j++)
        for (int64_t i = 0; i < j; i++)
            if (take_index(e, i, len) == take_index(e, j, len))
                return 0; /* repeated: each place's sum is (0 + g1) + g2, the rule's */
    for (int d = 0; d < ax; d++)
        outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= x->shape[d];
    struct timespec t0;
    if (cx->profile)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!acc) { /* the first: zeros (take_grad's) */
        if (!(acc = tl_tensor_new_in(cx->budget, g->dtype, x->ndim, x->shape, st)))
            return -1;
        memset(acc->data, 0, (size_t)acc->numel * tl_dtype_size(acc->dtype));
        *slot = acc;
    } else if (*clean != acc) {
        if (acc->dtype == TL_F32)
            CLEAN_LOOP(float, uint32_t, 0x80000000u, 0x7f800000u, 0x00400000u);
        else
            CLEAN_LOOP(double, uint64_t, 0x8000000000000000u, 0x7ff0000000000000u, 0x0008000000000000u);
    }
    if (gather && g->dtype == TL_F32)
        ADD_LINES(float);
    else if (gather)
        ADD_LINES(double);
    else if (g->dtype == TL_F32)
        ADD_ROWS(float);
    else
        ADD_ROWS(double);
    *clean = acc;
    cx->ops++; /* one take_grad (gather_grad), counted and timed as the rule's would be (its add is in it) */
    cx->dev.ops_cpu++;
    if (cx->profile) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        tl_opprof *p = &cx->prof[gather ? TL_OP_GATHER_GRAD : TL_OP_TAKE_GRAD][cx->phase];
        p->calls++;
        p->ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    return 1;
}

/* tl_take_into for the plain pass: clean holds a tensor per variable. */
typedef struct take_into_state {
    const tl_tensor **clean; /* per variable: the gradient tensor known clean, or NULL */
} take_into_state;

static int take_into(tl_tape *t, take_into_state *ts, tl_ctx *cx, const tl_entry *e, tl_tensor **grads,
                     tl_tensor *g, tl_status *st)
{
    int v = e->in_var[0];
    if ((e->op != TL_OP_TAKE && e->op != TL_OP_GATHER) || v < 0)
        return 0;
    if (!ts->clean && !(ts->clean = tl_calloc((size_t)t->nvars + 1, sizeof *ts->clean, "gradients", st)))
        return -1;
    return tl_take_into(cx, e, &grads[v], g, &ts->clean[v], st);
}
#undef CLEAN_LOOP
#undef ADD_ROWS
#undef ADD_LINES

/* "f64[2], f64[]": the shapes of an entry's inputs. */
static void describe_inputs(const tl_entry *e, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < e->nin && k + 100 < len; i++) {
        char d[96];
        k += (size_t)snprintf(buf + k, len - k, i ? ", %s" : "%s", tl_tensor_desc(e->in[i], d, sizeof d));
    }
}

static tl_code backward(tl_tape *t, tl_ctx *cx, tl_tensor **grads, tl_progress_fn progress, void *progress_ctx,
                        take_into_state *ts, tl_status *st)
{
    tl_tensor *gin_small[8], **gin = gin_small;
    for (int64_t k = t->n - 1; k >= 0; k--) {
        tl_entry *e = tl_tape_entry(t, k);
        tl_tape_prefetch(t, k);
        if (e->custom) { /* reads and writes the gradients itself */
            tl_code rc = e->custom->backward(e->custom, cx, grads, st);
            release(e);
            if (rc)
                return tl_wrap(st, "backward from node \"%s\"", e->node->name);
            continue;
        }
        tl_tensor *g = grads[e->out_var];
        if (g) /* a page only read stays the shared zero page: no second fault to write it */
            grads[e->out_var] = NULL;
        bool wanted = false; /* by some input (tl_tape_prune may have left none) */
        for (int i = 0; i < e->nin && !wanted; i++)
            wanted = e->in_var[i] >= 0;
        if (!g || !wanted) {
            tl_tensor_unref(g);
            release(e);
            continue;
        }
        int into = take_into(t, ts, cx, e, grads, g, st);
        if (into) {
            tl_tensor_unref(g);
            release(e);
            if (into < 0)
                return e->node ? tl_wrap(st, "backward of node \"%s\" (%s)", e->node->name, tl_ops[e->op].name)
                               : st->code;
            if (progress)
                progress(progress_ctx, "backward", t->n - k, t->n);
            continue;
        }
        if (e->nin > 8 && !(gin = tl_calloc((size_t)e->nin, sizeof *gin, "gradients", st))) {
            tl_tensor_unref(g);
            return st->code;
        }
        memset(gin, 0, sizeof *gin * (size_t)e->nin);
        tl_code rc = tl_grad_rule(cx, e, g, gin, st);
        tl_tensor_unref(g);
        for (int i = 0; i < e->nin; i++) {
            if (rc == TL_OK && gin[i] && e->in_var[i] >= 0 && cx->check_finite) {
                char what[48];
                snprintf(what, sizeof what, "the gradient of argument %d", i + 1);
                rc = tl_ctx_check_finite(cx, gin[i], what, st);
            }
            if (rc == TL_OK && gin[i] && e->in_var[i] >= 0) {
                int v = e->in_var[i];
                const tl_tensor *was = grads[v];
                rc = accumulate(cx, &grads[v], gin[i], st);
                if (ts->clean) /* a sum with a clean gradient is clean (neither -0 nor a signalling NaN) */
                    ts->clean[v] = was && ts->clean[v] == was ? grads[v] : NULL;
            } else
                tl_tensor_unref(gin[i]);
        }
        if (gin != gin_small)
            free(gin);
        gin = gin_small;
        if (rc && e->node) {
            char ins[512];
            describe_inputs(e, ins, sizeof ins);
            tl_wrap(st, "backward of node \"%s\" (%s, inputs %s)", e->node->name, tl_ops[e->op].name, ins);
        } else if (rc) {
            tl_wrap(st, "backward of %s", tl_ops[e->op].name);
        }
        release(e);
        if (rc)
            return rc;
        if (progress)
            progress(progress_ctx, "backward", t->n - k, t->n);
    }
    t->n = 0;
    return TL_OK;
}

tl_code tl_tape_backward(tl_tape *t, tl_ctx *cx, tl_tensor **grads, tl_progress_fn progress,
                         void *progress_ctx, tl_status *st)
{
    take_into_state ts = {NULL};
    tl_code rc = backward(t, cx, grads, progress, progress_ctx, &ts, st);
    free(ts.clean);
    return rc;
}

void tl_tape_prune(tl_tape *t, const bool *target)
{
    for (int64_t k = 0; k < t->n; k++)
        if (tl_tape_entry(t, k)->custom)
            return; /* its inputs' dependence is its own */
    bool *need = malloc((size_t)t->nvars + 1);
    if (!need)
        return; /* only work saved */
    memcpy(need, target, (size_t)t->nvars);
    for (int64_t k = 0; k < t->n; k++) {
        tl_entry *e = tl_tape_entry(t, k);
        bool any = false;
        for (int i = 0; i < e->nin; i++) {
            if (e->in_var[i] < 0)
                continue;
            if (need[e->in_var[i]])
                any = true;
            else
                e->in_var[i] = -1;
        }
        if (any && e->out_var >= 0)
            need[e->out_var] = true;
    }
    free(need);
}

typedef struct tl_tape_owned {
    struct tl_tape_owned *next;
    void *p;
    void (*free_fn)(void *);
} tl_tape_owned;

tl_code tl_tape_own(tl_tape *t, void *p, void (*free_fn)(void *), tl_status *st)
{
    tl_tape_owned *o = tl_malloc(1, sizeof *o, "a tape", st);
    if (!o) {
        free_fn(p);
        return st->code;
    }
    *o = (tl_tape_owned){t->owned, p, free_fn};
    t->owned = o;
    return TL_OK;
}

void tl_tape_free(tl_tape *t)
{
    for (int64_t k = 0; k < t->n; k++)
        release(tl_tape_entry(t, k));
    for (tl_tape_owned *o = t->owned, *next; o; o = next) { /* after the entries that point to them */
        next = o->next;
        o->free_fn(o->p);
        free(o);
    }
    for (int64_t c = 0; c < t->cap >> TL_TAPE_CHUNK_BITS && c < TAPE_SMALL_CHUNKS; c++)
        free(t->chunk[c]); /* the rest are in the arenas, owned */
    free(t->chunk);
    for (int d = 0; d < TL_NDTYPES; d++)
        tl_tensor_unref(t->scalar_stub[d]);
    tl_budget_credit(t->budget, t->cap * (int64_t)sizeof(tl_entry));
    tl_budget *b = t->budget;
    int64_t below = t->keep_below;
    memset(t, 0, sizeof *t);
    t->budget = b;
    t->keep_below = below;
}
