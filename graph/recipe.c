/* Recipe equality.  Each graph is canonicalised once: a depth-first walk
 * from the outputs, in order, through each node's arguments (then its
 * condition, then each block's results and the block's unused nodes)
 * numbers the nodes in post-order; names never enter it, only positions:
 * input i, block parameter j of the block at depth d, the k-th value of the
 * n-th node of the walk, and constants by their bits.  Nodes that reach no
 * result are walked after the results of their block, ordered by a
 * structural hash (listing order only breaks ties between nodes whose
 * hashes are equal).  Two graphs are the same recipe exactly when their
 * walks give equal records, one by one.  The walk keeps an explicit stack:
 * a chain of a million nodes is a million frames of heap, not of C stack. */
#define _POSIX_C_SOURCE 200809L
#include "recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"

/* ---------- constants, by value ---------- */

typedef enum ckind { C_WEAK, C_FILL, C_DATA } ckind;

/* A constant as its bits: a weak scalar, a tensor whose elements are all
 * the same (a fill, or data that happens to be one), or data. */
typedef struct cval {
    ckind kind;
    bool typed; /* an untyped tensor takes the element type of the call */
    tl_dtype dtype;
    int ndim;
    int64_t shape[TL_MAXDIM];
    double num;             /* C_WEAK */
    unsigned char elem[8];  /* C_FILL: the one element's bytes */
    const unsigned char *data; /* C_DATA */
    size_t bytes;
    tl_tensor *file; /* a file constant, read */
} cval;

static void set_elem(cval *c, double v)
{
    tl_tensor t = {.dtype = c->dtype, .numel = 1, .data = c->elem};
    memset(c->elem, 0, sizeof c->elem);
    tl_tensor_set(&t, 0, v);
}

/* Data whose elements are all one value counts as a fill of it. */
static void from_tensor(cval *c, const tl_tensor *t)
{
    size_t es = tl_dtype_size(t->dtype), n = (size_t)t->numel;
    c->dtype = t->dtype;
    c->ndim = t->ndim;
    memcpy(c->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    c->kind = C_DATA;
    c->data = t->data;
    c->bytes = n * es;
    size_t i = 1;
    while (i < n && !memcmp(c->data, c->data + i * es, es))
        i++;
    if (n && i == n) {
        c->kind = C_FILL;
        memset(c->elem, 0, sizeof c->elem);
        memcpy(c->elem, c->data, es);
    }
}

static tl_code const_value(const tl_graph *g, const tl_const *k, cval *c, tl_status *st)
{
    memset(c, 0, sizeof *c);
    c->typed = true;
    switch (k->kind) {
    case TL_CONST_WEAK:
        c->kind = C_WEAK;
        c->num = k->num;
        return TL_OK;
    case TL_CONST_FILL:
        c->kind = C_FILL;
        c->typed = k->typed;
        c->dtype = k->typed ? k->dtype : TL_F64;
        c->ndim = k->ndim;
        memcpy(c->shape, k->shape, sizeof(int64_t) * (size_t)k->ndim);
        set_elem(c, k->num);
        return TL_OK;
    case TL_CONST_DATA:
        from_tensor(c, k->tensor);
        c->typed = k->typed;
        return TL_OK;
    case TL_CONST_FILE:
        break;
    }
    if (k->key) {
        tl_npz *z = tl_npz_open(k->path, st);
        c->file = z ? tl_npz_get(z, k->key, st) : NULL;
        tl_npz_close(z);
    } else {
        c->file = tl_npy_read_file(k->path, st);
    }
    if (!c->file)
        return tl_wrap(st, "%s: const \"%s\": %s", g->path, k->name, k->path);
    from_tensor(c, c->file);
    return TL_OK;
}

static bool same_bits(double a, double b) { return !memcmp(&a, &b, sizeof a); }

static bool cval_equal(const cval *a, const cval *b)
{
    if (a->kind != b->kind)
        return false;
    if (a->kind == C_WEAK)
        return same_bits(a->num, b->num);
    if (a->typed != b->typed || a->dtype != b->dtype || a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
        return false;
    if (a->kind == C_FILL)
        return !memcmp(a->elem, b->elem, sizeof a->elem);
    return a->bytes == b->bytes && !memcmp(a->data, b->data, a->bytes);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return mix(h, n);
}

static uint64_t cval_hash(const cval *c)
{
    uint64_t h = mix(1, (uint64_t)c->kind);
    if (c->kind == C_WEAK)
        return mix_bytes(h, &c->num, sizeof c->num);
    h = mix(mix(mix(h, c->typed), (uint64_t)c->dtype), (uint64_t)c->ndim);
    h = mix_bytes(h, c->shape, sizeof(int64_t) * (size_t)c->ndim);
    return c->kind == C_FILL ? mix_bytes(h, c->elem, sizeof c->elem) : mix_bytes(h, c->data, c->bytes);
}

/* ---------- attributes ---------- */

/* The attributes of bit `bit` as words to compare and hash; TL_A_INDICES
 * adds a list of its own.  An axis left out is its default (-1 for
 * softmax, else 0): the same call as one written out. */
typedef struct words {
    int n;
    int64_t w[TL_MAXDIM + 2];
    const int64_t *more;
    int64_t nmore;
} words;

/* A spatial attribute in its canonical form, so that a call equals the
 * same call written out: absent is its default (a pool's stride is its
 * kernel), a list of equal entries is that one int (n -1).  padding: the
 * begin entries in v, the end entries in hi (NULL for the others). */
static void spatial_canon(const tl_node *nd, uint64_t bit, int *n, int64_t *v, int64_t *hi)
{
    const tl_attrs *a = nd->attrs;
    bool pool = nd->op == TL_OP_MAX_POOL || nd->op == TL_OP_AVG_POOL;
    int cnt = 0;
    const int64_t *src = NULL, *src_hi = NULL;
    int64_t dflt = bit == TL_A_PADDING || bit == TL_A_OUT_PAD ? 0 : 1;
    switch (bit) {
    case TL_A_KERNEL: cnt = a->nkernel, src = a->kernel; break;
    case TL_A_STRIDE:
        cnt = a->nstride, src = a->stride;
        if (!cnt && pool)
            cnt = a->nkernel, src = a->kernel;
        break;
    case TL_A_DILATION: cnt = a->ndilation, src = a->dilation; break;
    case TL_A_OUT_PAD: cnt = a->nout_pad, src = a->out_pad; break;
    case TL_A_PADDING: cnt = a->npadding, src = a->pad_lo, src_hi = a->pad_hi; break;
    }
    if (!cnt) {
        *n = -1;
        v[0] = dflt;
        if (hi)
            hi[0] = dflt;
        return;
    }
    int k = cnt < 0 ? 1 : cnt;
    bool same = true;
    for (int i = 0; i < k; i++) {
        v[i] = src[i];
        if (hi)
            hi[i] = src_hi ? src_hi[i] : src[i];
        same = same && src[i] == src[0] && (!hi || hi[i] == src[0]);
    }
    *n = same ? -1 : cnt;
}

static void attr_words(const tl_node *nd, uint64_t bit, words *w)
{
    const tl_attrs *a = nd->attrs;
    w->n = 0;
    w->nmore = 0;
    switch (bit) {
    case TL_A_AXES:
    case TL_A_PERM:
        w->w[w->n++] = a->has_axes;
        w->w[w->n++] = a->naxes;
        memcpy(w->w + w->n, a->axes, sizeof(int64_t) * (size_t)a->naxes);
        w->n += a->naxes;
        break;
    case TL_A_SHAPE:
        w->w[w->n++] = a->nshape;
        memcpy(w->w + w->n, a->shape, sizeof(int64_t) * (size_t)a->nshape);
        w->n += a->nshape;
        break;
    case TL_A_KEEPDIMS: w->w[w->n++] = a->keepdims; break;
    case TL_A_AXIS:
        w->w[w->n++] = a->has_axis ? a->axis
                       : nd->op == TL_OP_SOFTMAX || nd->op == TL_OP_LOG_SOFTMAX || nd->op == TL_OP_LAYER_NORM ? -1 : 0;
        break;
    case TL_A_APPROX: w->w[w->n++] = a->approximate; break;
    case TL_A_MIN:
    case TL_A_MAX: {
        bool has = bit == TL_A_MIN ? a->has_min : a->has_max;
        double v = bit == TL_A_MIN ? a->min : a->max;
        w->w[w->n++] = has;
        memcpy(&w->w[w->n++], &v, sizeof v);
        break;
    }
    case TL_A_DTYPE: w->w[w->n++] = a->dtype; break;
    case TL_A_START: w->w[w->n++] = a->has_start, w->w[w->n++] = a->has_start ? a->start : 0; break;
    case TL_A_STOP: w->w[w->n++] = a->has_stop, w->w[w->n++] = a->has_stop ? a->stop : 0; break;
    case TL_A_STEP: w->w[w->n++] = a->step; break;
    case TL_A_INDICES: w->more = a->indices, w->nmore = a->nindices; break;
    case TL_A_DEPTH: w->w[w->n++] = a->depth; break;
    /* the layer ops: every field the attribute sets, as given */
#define WORDS(cnt, arr)                                                   \
    do {                                                                  \
        w->w[w->n++] = (cnt);                                             \
        for (int i_ = 0; i_ < ((cnt) < 0 ? 1 : (cnt)); i_++)              \
            w->w[w->n++] = (arr)[i_];                                     \
    } while (0)
#define DWORD(x) (memcpy(&w->w[w->n], &(double){(x)}, sizeof(double)), w->n++)
    case TL_A_KERNEL:
    case TL_A_STRIDE:
    case TL_A_DILATION:
    case TL_A_OUT_PAD:
    case TL_A_PADDING: {
        int cnt;
        int64_t v[TL_MAXSP], hi[TL_MAXSP];
        spatial_canon(nd, bit, &cnt, v, bit == TL_A_PADDING ? hi : NULL);
        WORDS(cnt, v);
        if (bit == TL_A_PADDING && cnt > 0)
            for (int i = 0; i < cnt; i++)
                w->w[w->n++] = hi[i];
        break;
    }
    case TL_A_GROUPS: w->w[w->n++] = a->groups; break;
    case TL_A_CEIL: w->w[w->n++] = a->ceil_mode; break;
    case TL_A_COUNT_PAD: w->w[w->n++] = a->count_include_pad; break;
    case TL_A_TRAINING: /* left out: batch_norm's false, dropout's true */
        w->w[w->n++] = a->training >= 0 ? a->training : nd->op == TL_OP_DROPOUT;
        break;
    case TL_A_LAST: w->w[w->n++] = a->select_last; break;
    case TL_A_EXCLUSIVE: w->w[w->n++] = a->exclusive; break;
    case TL_A_REVERSE: w->w[w->n++] = a->reverse; break;
    case TL_A_EPS: DWORD(a->epsilon); break;
    case TL_A_VALUE: DWORD(a->value); break;
    case TL_A_CUBIC: DWORD(a->cubic_coeff); break;
    case TL_A_LOW: DWORD(a->low); break;
    case TL_A_HIGH: DWORD(a->high); break;
    case TL_A_MEANV: DWORD(a->mean); break;
    case TL_A_STD: DWORD(a->std); break;
    case TL_A_P: DWORD(a->p); break;
    case TL_A_SEED: w->w[w->n++] = a->seed; break;
    case TL_A_MODE: w->w[w->n++] = a->mode; break;
    case TL_A_COORD: w->w[w->n++] = a->coord; break;
    case TL_A_NEAREST: w->w[w->n++] = a->nearest; break;
    case TL_A_SIZE: WORDS(a->nsize, a->size); break;
    case TL_A_SCALE:
        w->w[w->n++] = a->nscale;
        for (int i = 0; i < a->nscale; i++)
            DWORD(a->scale[i]);
        break;
    case TL_A_PADS: w->w[w->n++] = a->npads, w->more = a->pads, w->nmore = 2 * a->npads; break;
#undef WORDS
#undef DWORD
    }
}

/* The first attribute bit on which x and y differ, or 0. */
static uint64_t attrs_differ(const tl_node *x, const tl_node *y)
{
    for (uint64_t bit = 1; bit && bit <= tl_ops[x->op].attrs; bit <<= 1) {
        if (!(tl_ops[x->op].attrs & bit))
            continue;
        words a, b;
        attr_words(x, bit, &a);
        attr_words(y, bit, &b);
        if (a.n != b.n || memcmp(a.w, b.w, sizeof(int64_t) * (size_t)a.n) || a.nmore != b.nmore ||
            (a.nmore && memcmp(a.more, b.more, sizeof(int64_t) * (size_t)a.nmore)))
            return bit;
    }
    return 0;
}

static uint64_t attrs_hash(const tl_node *n)
{
    uint64_t h = 7;
    for (uint64_t bit = 1; bit && bit <= tl_ops[n->op].attrs; bit <<= 1) {
        if (!(tl_ops[n->op].attrs & bit))
            continue;
        words w;
        attr_words(n, bit, &w);
        h = mix_bytes(mix_bytes(h, w.w, sizeof(int64_t) * (size_t)w.n), w.more, sizeof(int64_t) * (size_t)w.nmore);
    }
    return h;
}

static void write_ints(FILE *f, const int64_t *v, int64_t n)
{
    fputc('[', f);
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)v[i]);
    fputc(']', f);
}

static void write_num(FILE *f, double v)
{
    char buf[TL_FMT_LEN];
    tl_fmt_f64(buf, sizeof buf, v);
    fputs(buf, f);
}

static void write_attr(FILE *f, const tl_node *n, uint64_t bit)
{
    const tl_attrs *a = n->attrs;
    fprintf(f, "%s=", tl_attr_name(bit));
    switch (bit) {
    case TL_A_AXES:
    case TL_A_PERM: a->has_axes ? write_ints(f, a->axes, a->naxes) : (void)fputs("(left out)", f); break;
    case TL_A_SHAPE: write_ints(f, a->shape, a->nshape); break;
    case TL_A_INDICES: write_ints(f, a->indices, a->nindices); break;
    case TL_A_KEEPDIMS: fputs(a->keepdims ? "true" : "false", f); break;
    case TL_A_APPROX: fputs(a->approximate ? "\"tanh\"" : "\"none\"", f); break;
    case TL_A_DTYPE: fprintf(f, "\"%s\"", tl_dtype_name(a->dtype)); break;
    case TL_A_EPS: write_num(f, a->epsilon); break;
    case TL_A_VALUE: write_num(f, a->value); break;
    case TL_A_CUBIC: write_num(f, a->cubic_coeff); break;
    case TL_A_LOW: write_num(f, a->low); break;
    case TL_A_HIGH: write_num(f, a->high); break;
    case TL_A_MEANV: write_num(f, a->mean); break;
    case TL_A_STD: write_num(f, a->std); break;
    case TL_A_P: write_num(f, a->p); break;
    case TL_A_KERNEL:
    case TL_A_STRIDE:
    case TL_A_DILATION:
    case TL_A_OUT_PAD: {
        int cnt;
        int64_t v[TL_MAXSP];
        spatial_canon(n, bit, &cnt, v, NULL);
        cnt < 0 ? (void)fprintf(f, "%lld", (long long)v[0]) : write_ints(f, v, cnt);
        break;
    }
    case TL_A_SIZE: write_ints(f, a->size, a->nsize); break;
    case TL_A_PADDING: {
        int cnt;
        int64_t v[TL_MAXSP], hi[TL_MAXSP];
        spatial_canon(n, bit, &cnt, v, hi);
        if (cnt < 0) {
            fprintf(f, "%lld", (long long)v[0]);
            break;
        }
        fputc('[', f);
        for (int i = 0; i < cnt; i++)
            fprintf(f, "%s[%lld, %lld]", i ? ", " : "", (long long)v[i], (long long)hi[i]);
        fputc(']', f);
        break;
    }
    case TL_A_PADS: {
        int np = a->npads;
        fputc('[', f);
        for (int i = 0; i < np; i++)
            fprintf(f, "%s[%lld, %lld]", i ? ", " : "", (long long)a->pads[2 * i], (long long)a->pads[2 * i + 1]);
        fputc(']', f);
        break;
    }
    case TL_A_SCALE:
        fputc('[', f);
        for (int i = 0; i < a->nscale; i++) {
            fputs(i ? ", " : "", f);
            write_num(f, a->scale[i]);
        }
        fputc(']', f);
        break;
    case TL_A_CEIL: fputs(a->ceil_mode ? "true" : "false", f); break;
    case TL_A_COUNT_PAD: fputs(a->count_include_pad ? "true" : "false", f); break;
    case TL_A_TRAINING: fputs(a->training > 0 || (a->training < 0 && n->op == TL_OP_DROPOUT) ? "true" : "false", f); break;
    case TL_A_LAST: fputs(a->select_last ? "true" : "false", f); break;
    case TL_A_EXCLUSIVE: fputs(a->exclusive ? "true" : "false", f); break;
    case TL_A_REVERSE: fputs(a->reverse ? "true" : "false", f); break;
    case TL_A_MIN:
    case TL_A_MAX:
        if (bit == TL_A_MIN ? a->has_min : a->has_max)
            write_num(f, bit == TL_A_MIN ? a->min : a->max);
        else
            fputs("(left out)", f);
        break;
    default: {
        words w;
        attr_words(n, bit, &w);
        bool has = bit != TL_A_START && bit != TL_A_STOP ? true : w.w[0];
        if (has)
            fprintf(f, "%lld", (long long)w.w[w.n - 1]);
        else
            fputs("(left out)", f);
    }
    }
}

/* ---------- one graph, canonicalised ---------- */

enum { R_ARG, R_COND, R_RESULT, R_UNUSED = R_RESULT + 3 }; /* how a node was reached; + block */

typedef struct nrec {
    const tl_node *n;
    int block;  /* the block holding it */
    int sub[3]; /* its blocks: then, else, body (-1: none) */
    int from;   /* the node it was reached from, -1: the top */
    int rel, k; /* R_*: as argument k, condition, result k or unused node of block rel - R_RESULT... */
    bool seen;
    int canon; /* place in the walk's order, -1 before */
    uint64_t hash;
} nrec;

typedef struct brec {
    const tl_block *b; /* NULL: the top, whose results are the outputs */
    int depth;
    int first, n; /* its nodes */
    int canon;    /* number in the walk's order of blocks, -1 before */
} brec;

typedef struct canon {
    const tl_graph *g;
    nrec *nodes;
    int nn;
    brec *blocks;
    int nblocks, seen_blocks;
    int *slot_node, *slot_out, *slot_depth, *slot_index, *slot_input;
    uint64_t *slot_hash;
    cval *consts;
    cval *defaults; /* per input: its default (kind C_WEAK and num 1: none) */
    int *order; /* nodes in the walk's order */
    int norder;
} canon;

static int count_nodes(const tl_block *b, int *nblocks)
{
    int n = b->nnodes;
    ++*nblocks;
    for (int i = 0; i < b->nnodes; i++) {
        const tl_node *nd = &b->nodes[i];
        const tl_block *sub[3] = {nd->flow->then_b, nd->flow->else_b, nd->flow->body};
        for (int j = 0; j < 3; j++)
            n += sub[j] ? count_nodes(sub[j], nblocks) : 0;
    }
    return n;
}

/* Numbers blocks and nodes (a block's nodes contiguous) and records where
 * each slot comes from. */
static int enumerate(canon *C, const tl_block *b, int depth, int *params, int nparams, int index_slot)
{
    int bi = C->nblocks++, first = C->nn;
    C->blocks[bi] = (brec){b == &C->g->top ? NULL : b, depth, first, b->nnodes, -1};
    for (int j = 0; j < nparams; j++)
        C->slot_depth[params[j]] = depth, C->slot_index[params[j]] = j;
    if (index_slot >= 0)
        C->slot_depth[index_slot] = depth, C->slot_index[index_slot] = -1;
    for (int i = 0; i < b->nnodes; i++) {
        const tl_node *nd = &b->nodes[i];
        C->nodes[C->nn] = (nrec){nd, bi, {-1, -1, -1}, -1, 0, 0, false, -1, 0};
        for (int k = 0; k < nd->nout; k++)
            C->slot_node[nd->out[k]] = C->nn, C->slot_out[nd->out[k]] = k;
        C->nn++;
    }
    for (int i = 0; i < b->nnodes; i++) {
        const tl_node *nd = &b->nodes[i];
        nrec *r = &C->nodes[first + i];
        if (nd->flow->then_b)
            r->sub[0] = enumerate(C, nd->flow->then_b, depth + 1, NULL, 0, -1);
        if (nd->flow->else_b)
            r->sub[1] = enumerate(C, nd->flow->else_b, depth + 1, NULL, 0, -1);
        if (nd->flow->body)
            r->sub[2] = enumerate(C, nd->flow->body, depth + 1, nd->op == TL_OP_MAP ? nd->flow->params : nd->flow->state, nd->nargs,
                                  nd->op == TL_OP_ITERATE ? nd->flow->index_slot : -1);
    }
    return bi;
}

/* ---------- references ---------- */

enum { F_INPUT, F_WEAK, F_CONST, F_PARAM, F_NODE };

typedef struct ref {
    int kind;
    int64_t a, b; /* input index; param depth and index; node's walk number and value */
    double num;   /* F_WEAK */
    const cval *c;
    int slot;     /* for messages, -1: a number written inline */
} ref;

static ref ref_of(const canon *C, const tl_arg *arg)
{
    int s = arg->slot;
    ref r = {.slot = s};
    if (s < 0)
        return r.kind = F_WEAK, r.num = arg->num, r;
    switch (C->g->slot_kind[s]) {
    case TL_SLOT_INPUT: r.kind = F_INPUT, r.a = C->slot_input[s]; break;
    case TL_SLOT_PARAM: r.kind = F_PARAM, r.a = C->slot_depth[s], r.b = C->slot_index[s]; break;
    case TL_SLOT_NODE: r.kind = F_NODE, r.a = C->nodes[C->slot_node[s]].canon, r.b = C->slot_out[s]; break;
    default:
        r.c = &C->consts[C->g->slot_const[s]];
        if (r.c->kind == C_WEAK)
            r.kind = F_WEAK, r.num = r.c->num;
        else
            r.kind = F_CONST;
    }
    return r;
}

static ref ref_slot(const canon *C, int slot)
{
    tl_arg a = {slot, 0, 0};
    return ref_of(C, &a);
}

static bool ref_equal(const ref *x, const ref *y)
{
    if (x->kind != y->kind)
        return false;
    if (x->kind == F_WEAK)
        return same_bits(x->num, y->num);
    if (x->kind == F_CONST)
        return cval_equal(x->c, y->c);
    return x->a == y->a && x->b == y->b;
}

/* The structural hash of a slot (for ordering unused nodes only). */
static uint64_t slot_hash(const canon *C, const tl_arg *arg)
{
    if (arg->slot < 0)
        return mix_bytes(F_WEAK, &arg->num, sizeof arg->num);
    ref r = ref_of(C, arg);
    switch (r.kind) {
    case F_WEAK: return mix_bytes(F_WEAK, &r.num, sizeof r.num);
    case F_CONST: return cval_hash(r.c);
    case F_NODE: return C->slot_hash[arg->slot];
    default: return mix(mix((uint64_t)r.kind, (uint64_t)r.a), (uint64_t)r.b);
    }
}

/* Hashes every node of block bi and those of its blocks, in listing order
 * (each defined before it is used). */
static uint64_t hash_block(canon *C, int bi, const int *results, int nresults)
{
    const brec *B = &C->blocks[bi];
    for (int i = 0; i < B->n; i++) {
        nrec *r = &C->nodes[B->first + i];
        const tl_node *n = r->n;
        uint64_t h = mix(mix(mix((uint64_t)n->op + 1, attrs_hash(n)), (uint64_t)n->flow->count), (uint64_t)n->nout);
        for (int k = 0; k < n->nargs; k++)
            h = mix(h, slot_hash(C, &n->args[k]));
        if (n->op == TL_OP_IF)
            h = mix(h, slot_hash(C, &n->flow->cond));
        for (int j = 0; j < 3; j++)
            if (r->sub[j] >= 0) {
                const tl_block *sb = C->blocks[r->sub[j]].b;
                h = mix(h, hash_block(C, r->sub[j], sb->result, sb->nresult));
            }
        r->hash = h;
        for (int k = 0; k < n->nout; k++)
            C->slot_hash[n->out[k]] = mix(h, (uint64_t)k);
    }
    uint64_t h = 11;
    for (int k = 0; k < nresults; k++)
        h = mix(h, slot_hash(C, &(tl_arg){results[k], 0, 0}));
    return h;
}

/* ---------- the walk ---------- */

typedef struct frame {
    int node;  /* -1: the top */
    int stage; /* 0 arguments, 1 condition, 2 + 2j results of block j, 3 + 2j its unused nodes, 8 done */
    int k;
    int *unused, nunused;
} frame;

typedef struct hashed {
    uint64_t hash;
    int node;
} hashed;

/* By structural hash; listing order only between equal hashes. */
static int by_hash(const void *a, const void *b)
{
    const hashed *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

/* The nodes of block B the walk has not reached, in the order it takes them. */
static int *unused_nodes(const canon *C, const brec *B, int *n)
{
    hashed *h = malloc(sizeof(hashed) * (size_t)(B->n + 1));
    int *out = malloc(sizeof(int) * (size_t)(B->n + 1));
    *n = 0;
    for (int i = 0; h && out && i < B->n; i++)
        if (!C->nodes[B->first + i].seen)
            h[(*n)++] = (hashed){C->nodes[B->first + i].hash, B->first + i};
    if (h && out) {
        qsort(h, (size_t)*n, sizeof(hashed), by_hash);
        for (int i = 0; i < *n; i++)
            out[i] = h[i].node;
    } else {
        free(out);
        out = NULL;
    }
    free(h);
    return out;
}

/* The node behind a slot, when the walk has not reached it yet; else -1. */
static int unreached(const canon *C, int slot)
{
    if (slot < 0 || C->g->slot_kind[slot] != TL_SLOT_NODE)
        return -1;
    int x = C->slot_node[slot];
    return C->nodes[x].seen ? -1 : x;
}

static int reach(canon *C, int x, int from, int rel, int k)
{
    C->nodes[x].seen = true;
    C->nodes[x].from = from;
    C->nodes[x].rel = rel;
    C->nodes[x].k = k;
    return x;
}

/* The next node the frame's node leads to that the walk has not reached,
 * or -1 when the frame is done; NULL *ok when out of memory. */
static int next_child(canon *C, frame *f, bool *ok)
{
    const tl_node *n = f->node >= 0 ? C->nodes[f->node].n : NULL;
    for (;;) {
        int x, bi, j = (f->stage - 2) / 2;
        switch (f->stage) {
        case 0:
            if (n && f->k < n->nargs) {
                if ((x = unreached(C, n->args[f->k++].slot)) >= 0)
                    return reach(C, x, f->node, R_ARG, f->k - 1);
                continue;
            }
            f->stage = 1;
            continue;
        case 1:
            f->stage = 2, f->k = 0;
            if (n && (x = unreached(C, n->flow->cond.slot)) >= 0)
                return reach(C, x, f->node, R_COND, 0);
            continue;
        case 8: return -1;
        }
        bi = f->node >= 0 ? C->nodes[f->node].sub[j] : j == 0 ? 0 : -1;
        if (bi < 0) {
            f->stage = 2 + 2 * (j + 1), f->k = 0;
            continue;
        }
        brec *B = &C->blocks[bi];
        if (f->stage % 2 == 0) {
            if (B->canon < 0)
                B->canon = C->seen_blocks++;
            int nres = B->b ? B->b->nresult : C->g->noutputs;
            const int *res = B->b ? B->b->result : C->g->outputs;
            if (f->k < nres) {
                if ((x = unreached(C, res[f->k++])) >= 0)
                    return reach(C, x, f->node, R_RESULT + j, f->k - 1);
                continue;
            }
            f->stage++, f->k = 0;
            if (!(f->unused = unused_nodes(C, B, &f->nunused)))
                return *ok = false, -1;
            continue;
        }
        while (f->k < f->nunused)
            if (!C->nodes[x = f->unused[f->k++]].seen)
                return reach(C, x, f->node, R_UNUSED + j, 0);
        free(f->unused);
        f->unused = NULL;
        f->stage++, f->k = 0;
    }
}

static bool walk(canon *C)
{
    frame *stack = malloc(sizeof(frame) * (size_t)(C->nn + 1));
    int sp = 0;
    bool ok = stack != NULL;
    if (ok)
        stack[sp++] = (frame){-1, 2, 0, NULL, 0};
    while (ok && sp) {
        frame *f = &stack[sp - 1];
        int x = next_child(C, f, &ok);
        if (x >= 0) {
            stack[sp++] = (frame){x, 0, 0, NULL, 0};
            continue;
        }
        if (f->node >= 0) {
            C->nodes[f->node].canon = C->norder;
            C->order[C->norder++] = f->node;
        }
        sp--;
    }
    for (int i = 0; stack && i < sp; i++)
        free(stack[i].unused);
    free(stack);
    return ok;
}

static void canon_free(canon *C)
{
    for (int i = 0; C->consts && i < C->g->nconsts; i++)
        tl_tensor_unref(C->consts[i].file);
    for (int i = 0; C->defaults && i < C->g->ninputs; i++)
        tl_tensor_unref(C->defaults[i].file);
    free(C->defaults);
    free(C->nodes);
    free(C->blocks);
    free(C->slot_node);
    free(C->slot_out);
    free(C->slot_depth);
    free(C->slot_index);
    free(C->slot_input);
    free(C->slot_hash);
    free(C->consts);
    free(C->order);
}

static tl_code canonicalise(const tl_graph *g, canon *C, tl_status *st)
{
    int nblocks = 0, nn = count_nodes(&g->top, &nblocks);
    size_t ns = (size_t)g->nslots + 1;
    *C = (canon){.g = g};
    C->nodes = calloc((size_t)nn + 1, sizeof(nrec));
    C->blocks = calloc((size_t)nblocks, sizeof(brec));
    C->slot_node = calloc(ns, sizeof(int));
    C->slot_out = calloc(ns, sizeof(int));
    C->slot_depth = calloc(ns, sizeof(int));
    C->slot_index = calloc(ns, sizeof(int));
    C->slot_input = calloc(ns, sizeof(int));
    C->slot_hash = calloc(ns, sizeof(uint64_t));
    C->consts = calloc((size_t)g->nconsts + 1, sizeof(cval));
    C->order = calloc((size_t)nn + 1, sizeof(int));
    C->defaults = calloc((size_t)g->ninputs + 1, sizeof(cval));
    if (!C->nodes || !C->blocks || !C->slot_node || !C->slot_out || !C->slot_depth || !C->slot_index ||
        !C->slot_input || !C->slot_hash || !C->consts || !C->order || !C->defaults)
        return tl_fail(st, TL_ERUNTIME, "out of memory comparing recipes");
    for (int i = 0; i < g->ninputs; i++) {
        C->slot_input[g->inputs[i].slot] = i;
        tl_const d = g->inputs[i].dflt ? *g->inputs[i].dflt : (tl_const){.kind = TL_CONST_WEAK, .num = 1};
        d.name = g->inputs[i].name;
        if (const_value(g, &d, &C->defaults[i], st))
            return st->code;
    }
    for (int i = 0; i < g->nconsts; i++)
        if (const_value(g, &g->consts[i], &C->consts[i], st))
            return st->code;
    enumerate(C, &g->top, 0, NULL, 0, -1);
    hash_block(C, 0, g->outputs, g->noutputs);
    return walk(C) ? TL_OK : tl_fail(st, TL_ERUNTIME, "out of memory comparing recipes");
}

/* ---------- describing a difference ---------- */

static const char *block_name(const tl_node *n, int j)
{
    return n->op == TL_OP_IF ? (j == 0 ? "then" : "else") : "body";
}

static void write_node(FILE *f, const tl_node *n)
{
    fprintf(f, "node \"%s\" (%s)", n->name, tl_ops[n->op].name);
}

/* How x was reached from the node above it (or from the top). */
static void write_step(FILE *f, const canon *C, int x)
{
    const nrec *r = &C->nodes[x];
    if (r->from < 0) {
        if (r->rel == R_RESULT)
            fprintf(f, "output \"%s\" <- ", C->g->slot_name[C->g->outputs[r->k]]);
        else
            fputs("unused ", f);
        return;
    }
    const tl_node *p = C->nodes[r->from].n;
    if (r->rel == R_ARG)
        fprintf(f, " arg %d <- ", r->k + 1);
    else if (r->rel == R_COND)
        fputs(" cond <- ", f);
    else if (r->rel < R_UNUSED && C->blocks[C->nodes[r->from].sub[r->rel - R_RESULT]].b->nresult > 1)
        fprintf(f, " %s result %d <- ", block_name(p, r->rel - R_RESULT), r->k + 1);
    else if (r->rel < R_UNUSED)
        fprintf(f, " %s <- ", block_name(p, r->rel - R_RESULT));
    else
        fprintf(f, " %s: unused ", block_name(p, r->rel - R_UNUSED));
}

/* The path from an output (or an unused node) down to node x; a long one
 * keeps its first and last steps. */
static void write_path(FILE *f, const canon *C, int x)
{
    enum { KEEP = 6 };
    int len = 0;
    for (int y = x; y >= 0; y = C->nodes[y].from)
        len++;
    int *chain = malloc(sizeof(int) * (size_t)len);
    if (!chain)
        return;
    int i = len;
    for (int y = x; y >= 0; y = C->nodes[y].from)
        chain[--i] = y;
    for (i = 0; i < len; i++) {
        if (len > 2 * KEEP && i == KEEP) {
            fprintf(f, " ... (%d more) ...", len - 2 * KEEP);
            i = len - KEEP - 1;
            continue;
        }
        write_step(f, C, chain[i]);
        write_node(f, C->nodes[chain[i]].n);
    }
    free(chain);
}

static void write_ref(FILE *f, const canon *C, const ref *r)
{
    const tl_graph *g = C->g;
    switch (r->kind) {
    case F_INPUT: fprintf(f, "input %lld \"%s\"", (long long)r->a + 1, g->inputs[r->a].name); return;
    case F_WEAK:
        if (r->slot >= 0)
            fprintf(f, "const \"%s\" = ", g->slot_name[r->slot]);
        write_num(f, r->num);
        return;
    case F_PARAM:
        if (r->b < 0)
            fprintf(f, "step index \"%s\"", g->slot_name[r->slot]);
        else /* by place: (a, b) -> a - b and (b, a) -> a - b differ there */
            fprintf(f, "parameter %lld \"%s\"", (long long)r->b + 1, g->slot_name[r->slot]);
        return;
    case F_NODE:
        write_node(f, C->nodes[C->slot_node[r->slot]].n);
        if (C->nodes[C->slot_node[r->slot]].n->nout > 1)
            fprintf(f, " value %lld", (long long)r->b + 1);
        return;
    }
    char d[96];
    fprintf(f, "const \"%s\" %s%s", g->slot_name[r->slot],
            r->c->typed ? "" : "(untyped) ", tl_shape_desc(r->c->dtype, r->c->ndim, r->c->shape, d, sizeof d));
    if (r->c->kind == C_FILL) {
        tl_tensor t = {.dtype = r->c->dtype, .numel = 1, .data = (void *)r->c->elem};
        fputs(" all ", f);
        write_num(f, tl_tensor_get(&t, 0));
    }
    if (r->c->file)
        fprintf(f, " from %s", g->consts[g->slot_const[r->slot]].path);
}

/* One side of a difference: "PATH" then what is said of it. */
typedef struct side {
    char *text;
    size_t len;
    FILE *f;
} side;

static bool side_open(side *s)
{
    s->text = NULL;
    s->f = open_memstream(&s->text, &s->len);
    return s->f != NULL;
}

static bool side_close(side *s, char **out)
{
    bool ok = s->f && !ferror(s->f);
    if (s->f && fclose(s->f))
        ok = false;
    if (!ok)
        free(s->text), s->text = NULL;
    *out = s->text;
    return ok;
}

/* ---------- comparing ---------- */

typedef struct cmp {
    const canon *A, *B;
    side a, b; /* what differs */
    int at;    /* the place in the walks of the node at fault, -1 */
} cmp;

static bool refs_differ(cmp *m, const ref *x, const ref *y, const char *what, int k)
{
    if (ref_equal(x, y))
        return false;
    fprintf(m->a.f, " %s", what);
    fprintf(m->b.f, " %s", what);
    if (k >= 0) {
        fprintf(m->a.f, " %d", k + 1);
        fprintf(m->b.f, " %d", k + 1);
    }
    fputs(": ", m->a.f);
    fputs(": ", m->b.f);
    write_ref(m->a.f, m->A, x);
    write_ref(m->b.f, m->B, y);
    return true;
}

static bool counts_differ(cmp *m, int x, int y, const char *what)
{
    if (x == y)
        return false;
    fprintf(m->a.f, " %s %d", what, x);
    fprintf(m->b.f, " %s %d", what, y);
    return true;
}

static bool blocks_differ(cmp *m, const nrec *x, const nrec *y)
{
    for (int j = 0; j < 3; j++) {
        if (x->sub[j] < 0)
            continue;
        const brec *p = &m->A->blocks[x->sub[j]], *q = &m->B->blocks[y->sub[j]];
        const char *name = block_name(x->n, j);
        char what[32];
        snprintf(what, sizeof what, "%s result", name);
        if (p->canon != q->canon || counts_differ(m, p->b->nresult, q->b->nresult, what))
            return true;
        for (int k = 0; k < p->b->nresult; k++) {
            ref r = ref_slot(m->A, p->b->result[k]), s = ref_slot(m->B, q->b->result[k]);
            if (refs_differ(m, &r, &s, what, k))
                return true;
        }
    }
    return false;
}

/* Whether the walks' nodes at place i differ; the difference goes after
 * the paths already written. */
static bool nodes_differ(cmp *m, int i)
{
    const nrec *x = &m->A->nodes[m->A->order[i]], *y = &m->B->nodes[m->B->order[i]];
    const tl_node *p = x->n, *q = y->n;
    if (p->op != q->op)
        return true;
    if (m->A->blocks[x->block].canon != m->B->blocks[y->block].canon) /* the paths say which */
        return true;
    if (counts_differ(m, p->nout, q->nout, "values") || counts_differ(m, p->nargs, q->nargs, "arguments") ||
        (p->op == TL_OP_ITERATE && counts_differ(m, (int)p->flow->count, (int)q->flow->count, "count")))
        return true;
    /* a step index named on one side only is no difference unless the
     * body reads it, which its references then show */
    uint64_t bit = attrs_differ(p, q);
    if (bit) {
        fputc(' ', m->a.f);
        fputc(' ', m->b.f);
        write_attr(m->a.f, p, bit);
        write_attr(m->b.f, q, bit);
        return true;
    }
    for (int k = 0; k < p->nargs; k++) {
        ref r = ref_of(m->A, &p->args[k]), s = ref_of(m->B, &q->args[k]);
        if (refs_differ(m, &r, &s, "arg", k))
            return true;
    }
    ref r = ref_of(m->A, &p->flow->cond), s = ref_of(m->B, &q->flow->cond);
    return (p->op == TL_OP_IF && refs_differ(m, &r, &s, "cond", -1)) || blocks_differ(m, x, y);
}

static void write_input(FILE *f, const tl_graph *g, int i)
{
    char type[TL_MAXDIM * 48 + 16];
    tl_input_type_text(g, i, type, sizeof type);
    fprintf(f, "input %d \"%s\": %s", i + 1, g->inputs[i].name, type[0] ? type : "any");
}

static bool inputs_differ(const tl_input *x, const tl_input *y)
{
    if (x->has_dtype != y->has_dtype || (x->has_dtype && x->dtype != y->dtype) || x->ndim != y->ndim)
        return true;
    for (int d = 0; d < x->ndim; d++) {
        const tl_dimspec *p = &x->dims[d], *q = &y->dims[d];
        if (p->kind != q->kind || (p->kind == TL_DIM_FIXED && p->size != q->size) ||
            (p->kind == TL_DIM_VAR && p->var != q->var))
            return true;
    }
    return false;
}

/* Input i's default, as a difference is told ("no default" for none). */
static void write_default(FILE *f, const canon *C, int i)
{
    const cval *c = &C->defaults[i];
    char d[96];
    fprintf(f, "input %d \"%s\": ", i + 1, C->g->inputs[i].name);
    if (!C->g->inputs[i].dflt) {
        fputs("no default", f);
        return;
    }
    fprintf(f, "default %s", tl_shape_desc(c->dtype, c->ndim, c->shape, d, sizeof d));
    if (c->kind == C_FILL) {
        tl_tensor t = {.dtype = c->dtype, .numel = 1, .data = (void *)c->elem};
        fputs(" all ", f);
        write_num(f, tl_tensor_get(&t, 0));
    }
    if (c->file)
        fprintf(f, " from %s", C->g->inputs[i].dflt->path);
}

static void write_names(FILE *f, const tl_graph *g, int n, const int *slots, const tl_input *in, const char *what)
{
    fprintf(f, "%d %s%s (", n, what, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", in ? in[i].name : g->slot_name[slots[i]]);
    fputc(')', f);
}

/* Writes the first difference into m's sides; false when there is none.
 * A difference at a node is written as the path to it in each graph, then
 * what differs there (nodes_differ writes only that, and only then). */
static bool first_difference(cmp *m)
{
    const tl_graph *ga = m->A->g, *gb = m->B->g;
    FILE *a = m->a.f, *b = m->b.f;
    if (ga->ninputs != gb->ninputs) {
        write_names(a, ga, ga->ninputs, NULL, ga->inputs, "input");
        write_names(b, gb, gb->ninputs, NULL, gb->inputs, "input");
        return true;
    }
    for (int i = 0; i < ga->ninputs; i++)
        if (inputs_differ(&ga->inputs[i], &gb->inputs[i])) {
            write_input(a, ga, i);
            write_input(b, gb, i);
            return true;
        } else if (!cval_equal(&m->A->defaults[i], &m->B->defaults[i])) {
            const cval *x = &m->A->defaults[i], *y = &m->B->defaults[i];
            write_default(a, m->A, i);
            write_default(b, m->B, i);
            if (ga->inputs[i].dflt && gb->inputs[i].dflt && x->dtype == y->dtype && x->ndim == y->ndim &&
                !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim))
                fputs(" (other values)", a), fputs(" (other values)", b);
            return true;
        }
    if (ga->noutputs != gb->noutputs) {
        write_names(a, ga, ga->noutputs, ga->outputs, NULL, "output");
        write_names(b, gb, gb->noutputs, gb->outputs, NULL, "output");
        return true;
    }
    int n = m->A->norder < m->B->norder ? m->A->norder : m->B->norder;
    for (int i = 0; i < n; i++) {
        if (!nodes_differ(m, i))
            continue;
        m->at = i;
        return true;
    }
    if (m->A->norder != m->B->norder) {
        m->at = n;
        int more = m->A->norder > n ? m->A->norder : m->B->norder;
        fprintf(m->A->norder > n ? b : a, "no such node (%d node%s in all, where the other has %d)", n,
                n == 1 ? "" : "s", more);
        return true;
    }
    for (int k = 0; k < ga->noutputs; k++) {
        ref r = ref_slot(m->A, ga->outputs[k]), s = ref_slot(m->B, gb->outputs[k]);
        if (!ref_equal(&r, &s)) {
            fprintf(a, "output \"%s\": ", ga->slot_name[ga->outputs[k]]);
            fprintf(b, "output \"%s\": ", gb->slot_name[gb->outputs[k]]);
            write_ref(a, m->A, &r);
            write_ref(b, m->B, &s);
            return true;
        }
    }
    return false;
}

/* One side's text: the path to the node at fault (when there is one on
 * this side), then what was written about it. */
static char *side_text(const canon *C, int at, char *detail, tl_status *st)
{
    side s;
    if (!side_open(&s))
        return tl_fail(st, TL_ERUNTIME, "out of memory comparing recipes"), NULL;
    if (at >= 0 && at < C->norder)
        write_path(s.f, C, C->order[at]);
    fputs(detail ? detail : "", s.f);
    fputc('\0', s.f);
    char *out;
    if (!side_close(&s, &out))
        tl_fail(st, TL_ERUNTIME, "out of memory comparing recipes");
    return out;
}

tl_code tl_recipe_compare(const tl_graph *a, const tl_graph *b, tl_recipe_diff *d, tl_status *st)
{
    canon A, B = {.g = b};
    cmp m = {&A, &B, {0}, {0}, -1};
    char *da = NULL, *db = NULL;
    *d = (tl_recipe_diff){false, NULL, NULL};
    tl_code rc = canonicalise(a, &A, st);
    if (!rc)
        rc = canonicalise(b, &B, st);
    if (!rc && (!side_open(&m.a) || !side_open(&m.b)))
        rc = tl_fail(st, TL_ERUNTIME, "out of memory comparing recipes");
    if (!rc) {
        d->equal = !first_difference(&m);
        fputc('\0', m.a.f), fputc('\0', m.b.f);
    }
    bool ok = side_close(&m.a, &da);
    ok = side_close(&m.b, &db) && ok;
    if (!rc && !ok)
        rc = tl_fail(st, TL_ERUNTIME, "out of memory comparing recipes");
    if (!rc && !d->equal && (!(d->a = side_text(&A, m.at, da, st)) || !(d->b = side_text(&B, m.at, db, st))))
        rc = st->code;
    if (rc || d->equal)
        tl_recipe_diff_free(d);
    free(da);
    free(db);
    canon_free(&A);
    canon_free(&B);
    return rc;
}

void tl_recipe_diff_free(tl_recipe_diff *d)
{
    free(d->a);
    free(d->b);
    d->a = d->b = NULL;
}
