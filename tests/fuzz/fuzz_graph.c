/* libFuzzer harness: the graph loader, then (for small graphs) a recorded
 * run and its backward pass.
 *
 * Every input goes through tl_graph_parse, and through
 * tl_graph_parse_dom (one cJSON tree of the whole text): the two must load
 * the same graph (tests/graph_same.h) or fail with the same message.
 * When it loads, the graph is
 * run only if its work is bounded: no file constants (they would read the
 * disk), nested iterate counts whose product is at most FUZZ_MAX_STEPS,
 * reshape/broadcast_to/take/random_* results of at most FUZZ_MAX_ELEMS
 * elements, the layer ops' padding, dilation, transposed strides and
 * resize factors within bounds (their outputs grow by at most about
 * FUZZ_MAX_ELEMS times), and inputs whose declared shapes give at most
 * FUZZ_MAX_ELEMS elements.
 * Each input is bound to a host tensor of its declared dtype (f64 when
 * none; index inputs get small integers, some of them valid indices) and shape (free and variable sizes are 2; no declaration gives
 * shape [2]) filled with a fixed pattern of small values.  A failed run
 * must fail cleanly; a run that loads must also differentiate cleanly. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "graph/graph.h"
#include "tests/graph_same.h"
#include "fuzz_common.h"

/* A graph may legitimately ask for more memory than the fuzzer allows (a
 * "fill" const of shape [1e9], a chain of concats doubling a tensor): let
 * allocations over 256 MiB return NULL so tl reports "out of memory"
 * instead of the sanitizer aborting; libFuzzer's -rss_limit_mb still
 * catches the rest. */
#define FUZZ_ALLOC_MB 256
#define STR_(x) #x
#define STR(x) STR_(x)
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=" STR(FUZZ_ALLOC_MB);
}

#define FUZZ_MAX_STEPS 1000
#define FUZZ_MAX_ELEMS 4096

/* Bad input must give TL_EINPUT.  TL_ERUNTIME is accepted only for out of
 * memory: a graph may legitimately ask for too much (a huge "fill" const,
 * a chain of concats), and allocations over the sanitizer's
 * max_allocation_size_mb fail instead of aborting (__asan_default_options). */
static void check(tl_code c, const tl_status *st)
{
    if (c == TL_OK || c == TL_EINPUT)
        return;
    if (c == TL_ERUNTIME && strstr(st->msg, "out of memory"))
        return;
    FUZZ_FAIL("failed with code %d: %s", (int)c, st->msg);
}

static bool shape_small(int n, const int64_t *shape)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (shape[i] < 0 || shape[i] > FUZZ_MAX_ELEMS)
            return false;
        p *= shape[i] ? shape[i] : 1;
        if (p > FUZZ_MAX_ELEMS)
            return false;
    }
    return true;
}

/* The growth a spatial attribute allows (the layer ops): the product over
 * its axes of 1 + the entries (one entry n == -1 counts for 3 axes), at
 * most FUZZ_MAX_ELEMS; with hi, begin and end both count. */
static bool spatial_small(int n, const int64_t *lo, const int64_t *hi)
{
    int64_t p = 1;
    for (int i = 0; i < (n < 0 ? 3 : n); i++) {
        int64_t l = lo[n < 0 ? 0 : i], h = hi ? hi[n < 0 ? 0 : i] : 0;
        if (l < 0 || l > FUZZ_MAX_ELEMS || h < 0 || h > FUZZ_MAX_ELEMS)
            return false;
        int64_t v = l + h;
        p *= 1 + v;
        if (p > FUZZ_MAX_ELEMS)
            return false;
    }
    return true;
}

static bool block_small(const tl_block *b, int64_t steps);

static bool node_small(const tl_node *n, int64_t steps)
{
    switch (n->op) {
    case TL_OP_RESHAPE:
    case TL_OP_BROADCAST_TO:
        if (!shape_small(n->attrs->nshape, n->attrs->shape))
            return false;
        break;
    case TL_OP_TAKE:
        if (n->attrs->nindices > FUZZ_MAX_ELEMS)
            return false;
        break;
    case TL_OP_ONE_HOT:
        if (n->attrs->depth > FUZZ_MAX_ELEMS)
            return false;
        break;
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL:
        if (!shape_small(n->attrs->nshape, n->attrs->shape))
            return false;
        break;
    case TL_OP_CONV:
    case TL_OP_CONV_TRANSPOSE:
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL: {
        /* padding, dilation and (transposed) stride and output padding make outputs grow */
        const tl_attrs *a = n->attrs;
        if (!spatial_small(a->npadding, a->pad_lo, a->pad_hi) || !spatial_small(a->ndilation, a->dilation, NULL) ||
            (n->op == TL_OP_CONV_TRANSPOSE &&
             (!spatial_small(a->nstride, a->stride, NULL) || !spatial_small(a->nout_pad, a->out_pad, NULL))))
            return false;
        break;
    }
    case TL_OP_PAD: {
        int64_t p = 1;
        for (int i = 0; i < n->attrs->npads; i++) {
            int64_t b = n->attrs->pads[2 * i], e = n->attrs->pads[2 * i + 1];
            if (b > FUZZ_MAX_ELEMS || e > FUZZ_MAX_ELEMS)
                return false;
            if ((p *= 1 + (b > 0 ? b : 0) + (e > 0 ? e : 0)) > FUZZ_MAX_ELEMS)
                return false;
        }
        break;
    }
    case TL_OP_RESIZE: {
        double p = 1;
        for (int i = 0; i < n->attrs->nscale; i++)
            p *= n->attrs->scale[i] > 1 ? n->attrs->scale[i] : 1;
        if (p > 64 || !shape_small(n->attrs->nsize, n->attrs->size))
            return false;
        break;
    }
    case TL_OP_ITERATE:
        if (n->flow->count > FUZZ_MAX_STEPS)
            return false;
        steps *= n->flow->count ? n->flow->count : 1;
        if (steps > FUZZ_MAX_STEPS)
            return false;
        break;
    default:
        break;
    }
    if (n->flow->then_b && !block_small(n->flow->then_b, steps))
        return false;
    if (n->flow->else_b && !block_small(n->flow->else_b, steps))
        return false;
    if (n->flow->body && !block_small(n->flow->body, steps))
        return false;
    return true;
}

static bool block_small(const tl_block *b, int64_t steps)
{
    for (int i = 0; i < b->nnodes; i++)
        if (!node_small(&b->nodes[i], steps))
            return false;
    return true;
}

static bool runnable(const tl_graph *g)
{
    for (int i = 0; i < g->nconsts; i++) {
        if (g->consts[i].kind == TL_CONST_FILE)
            return false;
        if (g->consts[i].kind == TL_CONST_DATA && g->consts[i].tensor &&
            g->consts[i].tensor->numel > FUZZ_MAX_ELEMS)
            return false;
        /* a fill const: small, or beyond the allocator's 256 MiB so that the
         * run fails at once (out of memory); one in between is made and
         * computed on, correct but slow under the sanitizers (115 MB filled
         * and multiplied ran past the fuzzer's 10 s) */
        if (g->consts[i].kind == TL_CONST_FILL && !shape_small(g->consts[i].ndim, g->consts[i].shape)) {
            double bytes = 4; /* f32 at the least */
            for (int k = 0; k < g->consts[i].ndim; k++)
                bytes *= (double)g->consts[i].shape[k];
            if (bytes <= FUZZ_ALLOC_MB * 1024.0 * 1024)
                return false;
        }
    }
    return block_small(&g->top, 1);
}

static void run_graph(const tl_graph *g)
{
    int n = g->ninputs;
    tl_tensor **in = calloc((size_t)n + 1, sizeof *in);
    tl_tensor **grads = calloc((size_t)n + 1, sizeof *grads);
    if (!in || !grads)
        FUZZ_FAIL("out of memory");
    tl_status st = {0};
    int64_t total = 0;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        const tl_input *d = &g->inputs[i];
        int64_t shape[TL_MAXDIM];
        int ndim = d->ndim < 0 ? 1 : d->ndim;
        for (int k = 0; k < ndim; k++)
            shape[k] = d->ndim < 0 || d->dims[k].kind != TL_DIM_FIXED ? 2 : d->dims[k].size;
        if (!shape_small(ndim, shape)) {
            ok = false;
            break;
        }
        in[i] = tl_tensor_new(d->has_dtype ? d->dtype : TL_F64, ndim, shape, &st);
        if (!in[i])
            FUZZ_FAIL("cannot allocate an input: %s", st.msg);
        total += in[i]->numel;
        for (int64_t j = 0; j < in[i]->numel; j++)
            tl_tensor_set(in[i], j, 0.5 + 0.25 * (double)((j + i) % 5) - (j % 2 ? 1.0 : 0.0));
    }
    if (ok && total <= FUZZ_MAX_ELEMS) {
        tl_run_opts o = {.record = true};
        tl_result *r = NULL;
        tl_code c = tl_run(g, in, &o, &r, &st);
        check(c, &st);
        if (c == TL_OK) {
            if (!r)
                FUZZ_FAIL("tl_run succeeded without a result");
            for (int k = 0; k < tl_result_noutputs(r); k++)
                if (!tl_result_output(r, k) || !tl_result_output_name(r, k))
                    FUZZ_FAIL("output %d missing", k);
            tl_status_clear(&st);
            check(tl_result_backward(r, grads, &st), &st);
            tl_result_free(r);
        } else if (r) {
            FUZZ_FAIL("tl_run failed but returned a result");
        }
    }
    for (int i = 0; i < n; i++) {
        tl_tensor_unref(in[i]);
        tl_tensor_unref(grads[i]);
    }
    free(in);
    free(grads);
}

int fuzz_graph_one(const uint8_t *data, size_t size);
int fuzz_graph_one(const uint8_t *data, size_t size)
{
    tl_status st = {0}, st2 = {0};
    tl_graph *g = tl_graph_parse((const char *)data, size, "fuzz.json", &st);
    tl_graph *h = tl_graph_parse_dom((const char *)data, size, "fuzz.json", NULL, &st2);
    graph_diff d;
    const char *why = g && h ? graph_same(g, h, &d) : NULL;
    tl_graph_free(h);
    if (!g != !h || why || (!g && (st.code != st2.code || strcmp(st.msg, st2.msg))))
        FUZZ_FAIL("the two ways of loading differ: %s / %s / %s", why ? why : "-", g ? "loaded" : st.msg,
                  h ? "loaded" : st2.msg);
    if (!g) {
        if (st.code == TL_OK || !st.msg[0])
            FUZZ_FAIL("a failed load must say why (code %d)", (int)st.code);
        check(st.code, &st);
        return 0;
    }
    if (runnable(g))
        run_graph(g);
    tl_graph_free(g);
    return 0;
}

FUZZ_ENTRY(graph)
