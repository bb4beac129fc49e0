/* Whether two loaded graphs are the same, field by field (names, slots,
 * inputs, constants, every node of every block with its arguments,
 * attributes, control flow and free list).  For tests that load one text
 * two ways (tl_graph_parse and tl_graph_parse_dom): tests/test_loader.c
 * and the graph fuzzer.  graph_same() returns NULL, or what differs. */
#ifndef TL_TEST_GRAPH_SAME_H
#define TL_TEST_GRAPH_SAME_H

#include <stdio.h>
#include <string.h>

#include "graph/graph.h"

typedef struct graph_diff {
    char why[256];
} graph_diff;

#define GS_CHECK(cond, ...)                                    \
    do {                                                       \
        if (!(cond)) {                                         \
            snprintf(d->why, sizeof d->why, __VA_ARGS__);      \
            return false;                                      \
        }                                                      \
    } while (0)

static bool gs_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool gs_bits(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

static bool gs_ints(const int *a, const int *b, int n)
{
    return n <= 0 || (a && b && !memcmp(a, b, sizeof(int) * (size_t)n));
}

static bool gs_arg(const tl_arg *a, const tl_arg *b)
{
    return a->slot == b->slot && (a->slot >= 0 || (a->num_id == b->num_id && gs_bits(a->num, b->num)));
}

static bool gs_attrs(const tl_attrs *a, const tl_attrs *b)
{
    return a->has_axes == b->has_axes && a->naxes == b->naxes &&
           !memcmp(a->axes, b->axes, sizeof(int64_t) * (size_t)a->naxes) && a->keepdims == b->keepdims &&
           a->has_axis == b->has_axis && a->axis == b->axis && a->nshape == b->nshape &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->nshape) && a->has_min == b->has_min &&
           a->has_max == b->has_max && gs_bits(a->min, b->min) && gs_bits(a->max, b->max) &&
           a->approximate == b->approximate && a->dtype == b->dtype && a->has_start == b->has_start &&
           a->has_stop == b->has_stop && a->start == b->start && a->stop == b->stop && a->step == b->step &&
           a->nindices == b->nindices &&
           (!a->nindices || !memcmp(a->indices, b->indices, sizeof(int64_t) * (size_t)a->nindices)) &&
           a->depth == b->depth && a->trans_a == b->trans_a && a->trans_b == b->trans_b &&
           !a->prog == !b->prog && !a->want == !b->want;
}

static bool gs_block(const tl_block *a, const tl_block *b, graph_diff *d);

static bool gs_sub(const tl_block *a, const tl_block *b, const char *what, const char *node, graph_diff *d)
{
    GS_CHECK(!a == !b, "node \"%s\": %s present in one only", node, what);
    return !a || gs_block(a, b, d);
}

static bool gs_node(const tl_node *x, const tl_node *y, graph_diff *d)
{
    const char *nm = x->name ? x->name : "?";
    GS_CHECK(x->op == y->op && x->index == y->index, "node \"%s\": op or index", nm);
    GS_CHECK(gs_str(x->name, y->name), "node \"%s\": name \"%s\"", nm, y->name ? y->name : "(null)");
    GS_CHECK(x->nout == y->nout && gs_ints(x->out, y->out, x->nout), "node \"%s\": ids", nm);
    GS_CHECK(x->nargs == y->nargs, "node \"%s\": %d args against %d", nm, x->nargs, y->nargs);
    for (int i = 0; i < x->nargs; i++)
        GS_CHECK(gs_arg(&x->args[i], &y->args[i]), "node \"%s\": argument %d", nm, i);
    GS_CHECK(x->attrs && y->attrs && gs_attrs(x->attrs, y->attrs), "node \"%s\": attributes", nm);
    GS_CHECK(x->nfree == y->nfree && gs_ints(x->free_after, y->free_after, x->nfree), "node \"%s\": frees", nm);
    const tl_flow *f = x->flow, *g = y->flow;
    GS_CHECK(f && g, "node \"%s\": no flow record", nm);
    GS_CHECK(gs_arg(&f->cond, &g->cond) && f->count == g->count && f->index_slot == g->index_slot &&
                 f->ncap == g->ncap && gs_ints(f->cap_slots, g->cap_slots, f->ncap) && !f->prog == !g->prog,
             "node \"%s\": control flow", nm);
    if (x->op == TL_OP_ITERATE)
        GS_CHECK(gs_ints(f->state, g->state, x->nargs), "node \"%s\": states", nm);
    if (x->op == TL_OP_MAP)
        GS_CHECK(gs_ints(f->params, g->params, x->nargs), "node \"%s\": params", nm);
    if (f->prog)
        GS_CHECK(f->prog == x->attrs->prog && g->prog == y->attrs->prog, "node \"%s\": the map program", nm);
    return gs_sub(f->then_b, g->then_b, "then", nm, d) && gs_sub(f->else_b, g->else_b, "else", nm, d) &&
           gs_sub(f->body, g->body, "body", nm, d);
}

static bool gs_block(const tl_block *a, const tl_block *b, graph_diff *d)
{
    GS_CHECK(a->nnodes == b->nnodes, "a block of %d nodes against %d", a->nnodes, b->nnodes);
    GS_CHECK(a->nresult == b->nresult && gs_ints(a->result, b->result, a->nresult), "block results");
    for (int i = 0; i < a->nnodes; i++)
        if (!gs_node(&a->nodes[i], &b->nodes[i], d))
            return false;
    return true;
}

static bool gs_tensor(const tl_tensor *a, const tl_tensor *b)
{
    if (!a || !b)
        return !a && !b;
    return a->dtype == b->dtype && a->ndim == b->ndim && a->numel == b->numel &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) &&
           !memcmp(a->data, b->data, (size_t)a->numel * tl_dtype_size(a->dtype));
}

/* NULL when a and b are the same graph, else what differs first. */
static const char *graph_same(const tl_graph *a, const tl_graph *b, graph_diff *d)
{
#define GS_TOP(cond, ...)                                      \
    do {                                                       \
        if (!(cond)) {                                         \
            snprintf(d->why, sizeof d->why, __VA_ARGS__);      \
            return d->why;                                     \
        }                                                      \
    } while (0)
    GS_TOP(gs_str(a->path, b->path) && gs_str(a->doc, b->doc), "path or doc");
    GS_TOP(a->nslots == b->nslots, "%d slots against %d", a->nslots, b->nslots);
    for (int s = 0; s < a->nslots; s++)
        GS_TOP(gs_str(a->slot_name[s], b->slot_name[s]) && a->slot_kind[s] == b->slot_kind[s] &&
                   a->slot_const[s] == b->slot_const[s],
               "slot %d (\"%s\")", s, a->slot_name[s]);
    GS_TOP(a->ninputs == b->ninputs, "inputs");
    for (int i = 0; i < a->ninputs; i++) {
        const tl_input *x = &a->inputs[i], *y = &b->inputs[i];
        GS_TOP(gs_str(x->name, y->name) && x->slot == y->slot && x->has_dtype == y->has_dtype &&
                   (!x->has_dtype || x->dtype == y->dtype) && x->ndim == y->ndim,
               "input %d", i);
        for (int k = 0; k < x->ndim; k++)
            GS_TOP(x->dims[k].kind == y->dims[k].kind && x->dims[k].size == y->dims[k].size &&
                       x->dims[k].var == y->dims[k].var,
                   "input %d: axis %d", i, k);
    }
    GS_TOP(a->nsizevars == b->nsizevars, "size names");
    for (int i = 0; i < a->nsizevars; i++)
        GS_TOP(gs_str(a->sizevars[i], b->sizevars[i]), "size name %d", i);
    GS_TOP(a->nconsts == b->nconsts, "constants");
    for (int i = 0; i < a->nconsts; i++) {
        const tl_const *x = &a->consts[i], *y = &b->consts[i];
        GS_TOP(gs_str(x->name, y->name) && x->slot == y->slot && x->kind == y->kind && gs_bits(x->num, y->num) &&
                   x->typed == y->typed && x->dtype == y->dtype && x->ndim == y->ndim &&
                   !memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) && gs_tensor(x->tensor, y->tensor) &&
                   gs_str(x->path, y->path) && gs_str(x->key, y->key),
               "const \"%s\"", x->name);
    }
    GS_TOP(a->noutputs == b->noutputs && gs_ints(a->outputs, b->outputs, a->noutputs), "outputs");
    GS_TOP(a->nnums == b->nnums && a->nnodes == b->nnodes, "%d numbers and %d nodes against %d and %d", a->nnums,
           a->nnodes, b->nnums, b->nnodes);
    return gs_block(&a->top, &b->top, d) ? NULL : d->why;
#undef GS_TOP
}

#undef GS_CHECK

#endif
