/* Reading what a graph names in files (file constants, input defaults),
 * and the f64 copy of a recipe (tl gradcheck --f64): the same recipe with
 * every f32 in it made f64, so that finite differences say something.
 * Only ever done because a user asked for it: tl never changes precision
 * by itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/sniff.h"

static bool ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), k = strlen(end);
    return n >= k && !strcmp(s + n - k, end);
}

tl_code tl_const_file_kind(const char *path, tl_status *st)
{
    unsigned char head[6] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) /* the reader said why */
        return st->code;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    tl_bytes_kind kind = tl_bytes_kind_of(head, n);
    if (ends_with(path, ".npy") || ends_with(path, ".npz") || kind == TL_BYTES_NPY || kind == TL_BYTES_NPZ)
        return st->code;
    return tl_fail(st, TL_EINPUT, "file constants (file() in a program) are .npy and .npz files only; this is "
                   "neither, by its ending or by its first bytes");
}

static tl_tensor *read_file(const tl_const *c, tl_status *st)
{
    tl_tensor *t = NULL;
    if (!c->key) {
        t = tl_npy_read_file(c->path, st);
    } else {
        tl_npz *z = tl_npz_open(c->path, st);
        t = z ? tl_npz_get(z, c->key, st) : NULL;
        tl_npz_close(z);
    }
    if (!t)
        tl_const_file_kind(c->path, st);
    return t;
}

tl_tensor *tl_const_read_file(const tl_const *c, tl_status *st)
{
    tl_tensor *t = read_file(c, st);
    if (!t)
        tl_wrap(st, "const \"%s\": %s", c->name, c->path);
    return t;
}

tl_tensor *tl_input_default(const tl_graph *g, int i, tl_status *st)
{
    const tl_input *in = &g->inputs[i];
    const tl_const *c = in->dflt;
    tl_tensor *t = NULL;
    if (!c)
        return NULL;
    if (c->kind == TL_CONST_DATA)
        return tl_tensor_ref(c->tensor);
    if (c->kind == TL_CONST_FILL) {
        if ((t = tl_tensor_new(c->dtype, c->ndim, c->shape, st)))
            for (int64_t k = 0; k < t->numel; k++)
                tl_tensor_set(t, k, c->num);
    } else if (!(t = read_file(c, st))) {
        tl_wrap(st, "%s: the default of input \"%s\": %s", g->path, in->name, c->path);
    }
    return t;
}

/* A constant's data, f64 where it was f32; a file constant is read now. */
static tl_code const_to_f64(tl_const *c, tl_status *st)
{
    if (c->kind == TL_CONST_FILL && c->typed && c->dtype == TL_F32)
        c->dtype = TL_F64;
    if (c->kind == TL_CONST_FILE) {
        if (!(c->tensor = tl_const_read_file(c, st)))
            return st->code;
        c->kind = TL_CONST_DATA;
        c->typed = true;
    }
    if (c->kind != TL_CONST_DATA || c->tensor->dtype != TL_F32)
        return TL_OK;
    tl_tensor *d = tl_tensor_f64(c->tensor, st);
    if (!d)
        return st->code;
    tl_tensor_unref(c->tensor);
    c->tensor = d;
    return TL_OK;
}

static void block_to_f64(tl_block *b)
{
    for (int i = 0; b && i < b->nnodes; i++) {
        tl_node *n = &b->nodes[i];
        if (n->attrs != &tl_attrs_default && n->attrs->dtype == TL_F32)
            ((tl_attrs *)n->attrs)->dtype = TL_F64; /* the node's own record, in the graph's arena */
        if (n->flow) {
            block_to_f64(n->flow->then_b);
            block_to_f64(n->flow->else_b);
            block_to_f64(n->flow->body);
        }
    }
}

tl_code tl_graph_to_f64(tl_graph *g, tl_status *st)
{
    for (int k = 0; k < g->ninputs; k++)
        if (g->inputs[k].has_dtype && g->inputs[k].dtype == TL_F32)
            g->inputs[k].dtype = TL_F64;
    for (int k = 0; k < g->nconsts; k++)
        if (const_to_f64(&g->consts[k], st))
            return tl_wrap(st, "%s", g->path);
    block_to_f64(&g->top);
    return TL_OK;
}
