/* ONNX control flow and recurrent layers onto tl's if and iterate (see
 * onnx.h): If becomes if (or, with a condition known at load, the branch
 * it selects); Loop with a trip count and a condition that stays true,
 * Scan, RNN, GRU and LSTM become one iterate over the steps, so that the
 * recipe does not grow with the sequence length.  A subgraph is translated
 * node by node into the block, reading the names of the scopes around it.
 *
 * Per-step outputs (Loop's and Scan's scan outputs, the Y of the
 * recurrent layers) are carried as a state of the whole stacked shape,
 * each step adding its row in (ox_iter_stack). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* ---------- small emitters ---------- */

static val *op1(tx *t, const char *op, val *x, cJSON *a) { return ox_call(t, op, 1, &x, a); }
static val *op2(tx *t, const char *op, val *x, val *y)
{
    val *a[2] = {x, y};
    return x && y ? ox_call(t, op, 2, a, NULL) : NULL;
}
static val *op3(tx *t, const char *op, val *x, val *y, val *z)
{
    val *a[3] = {x, y, z};
    return x && y && z ? ox_call(t, op, 3, a, NULL) : NULL;
}

static cJSON *attr_int(const char *k, int64_t v)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, k, (double)v);
    return a;
}

static cJSON *attr_ints(const char *k, const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateObject(), *r = cJSON_AddArrayToObject(a, k);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(r, cJSON_CreateNumber((double)v[i]));
    return a;
}

static int oty_of(tl_dtype dt)
{
    return dt == TL_F32 ? TL_ONNX_FLOAT : dt == TL_F64 ? TL_ONNX_DOUBLE : dt == TL_I32 ? TL_ONNX_INT32 : TL_ONNX_INT64;
}

/* A float scalar constant of dtype dt. */
static val *num(tx *t, tl_dtype dt, double x)
{
    tl_tensor *k = tl_tensor_scalar(dt, x, t->st);
    return k ? ox_known(t, k, oty_of(dt)) : NULL;
}

static val *zeros(tx *t, tl_dtype dt, int nd, const int64_t *dims)
{
    tl_tensor *k = tl_tensor_zeros(dt, nd, dims, t->st);
    return k ? ox_known(t, k, oty_of(dt)) : NULL;
}

static val *take_at(tx *t, val *x, val *idx, int axis)
{
    val *a[2] = {x, idx};
    return x && idx ? ox_call(t, "take", 2, a, attr_int("axis", axis)) : NULL;
}

/* x[i] along axis 0, i known at load. */
static val *row(tx *t, val *x, int64_t i)
{
    val *k = ox_known_ints(t, 0, NULL, &i, TL_ONNX_INT64);
    return take_at(t, x, k, 0);
}

/* x with its axis 0 reordered: row r of the result is row idx[r] of x. */
static val *take_rows(tx *t, val *x, const int64_t *idx, int64_t n)
{
    val *k = ox_known_ints(t, 1, &n, idx, TL_ONNX_INT64);
    return take_at(t, x, k, 0);
}

static val *slice1(tx *t, val *x, int axis, int64_t start, int64_t stop)
{
    cJSON *a = attr_int("axis", axis);
    cJSON_AddNumberToObject(a, "start", (double)start);
    cJSON_AddNumberToObject(a, "stop", (double)stop);
    return x ? op1(t, "slice", x, a) : (cJSON_Delete(a), NULL);
}

static val *transpose(tx *t, val *x, const int64_t *perm)
{
    return x ? op1(t, "transpose", x, attr_ints("axes", perm, x->ndim)) : NULL;
}

/* Axis ax of x moved to the front (front: true), or the front axis moved
 * to ax. */
static val *move_axis(tx *t, val *x, int ax, bool front)
{
    if (!x || ax == 0)
        return x;
    int64_t p[TL_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        if (front)
            p[d] = d == 0 ? ax : d <= ax ? d - 1 : d;
        else
            p[d] = d < ax ? d + 1 : d == ax ? 0 : d;
    return transpose(t, x, p);
}

static bool same_type(const val *a, const val *b)
{
    return a->dt == b->dt && a->ndim == b->ndim && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
}

static bool desc_fail(tx *t, const char *what, const val *a, const val *b)
{
    char da[96], db[96];
    tl_shape_desc(a->dt, a->ndim, a->dims, da, sizeof da);
    tl_shape_desc(b->dt, b->ndim, b->dims, db, sizeof db);
    return ox_fail(t, "%s: %s, then %s (tl needs the same dtype and shape)", what, da, db);
}

/* ---------- blocks ---------- */

/* Nodes written into a block of their own; the outer list back after. */
static cJSON *block_open(tx *t)
{
    cJSON *outer = t->nodes;
    t->nodes = cJSON_CreateArray();
    return outer;
}

static cJSON *block_close(tx *t, cJSON *outer, val *const *res, int n)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddItemToObject(b, "nodes", t->nodes);
    t->nodes = outer;
    cJSON *r = cJSON_AddArrayToObject(b, "result");
    for (int i = 0; i < n; i++) {
        const char *nm = ox_name(t, res[i]);
        if (!nm)
            return cJSON_Delete(b), NULL;
        cJSON_AddItemToArray(r, cJSON_CreateString(nm));
    }
    return b;
}

static void names_of_block(tx *t, const Onnx__GraphProto *g)
{
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name)
            ox_unbind(t, g->input[i]->name);
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && !ox_init_is_input(t, g->initializer[i]))
            ox_unbind(t, g->initializer[i]->name);
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t j = 0; j < g->node[i]->n_output; j++)
            if (g->node[i]->output[j][0])
                ox_unbind(t, g->node[i]->output[j]);
}

/* The nodes of subgraph g translated where nodes go now, its inputs bound
 * to in (NULL: a value it must not read); its results in res.  Its names
 * are dropped after. */
static bool subgraph(tx *t, const Onnx__GraphProto *g, val **in, int nin, val **res, int nres)
{
    const Onnx__NodeProto *node = t->node;
    const char *gname = g && g->name ? g->name : "";
    if (!g)
        return ox_fail(t, "a subgraph is missing");
    if ((int)g->n_input != nin)
        return ox_fail(t, "subgraph \"%.100s\" has %zu inputs, where %d are given", gname, g->n_input, nin);
    if ((int)g->n_output != nres)
        return ox_fail(t, "subgraph \"%.100s\" has %zu outputs, where %d are expected", gname, g->n_output, nres);
    bool ok = true;
    for (int i = 0; ok && i < nin; i++)
        if (in[i])
            ok = ox_bind(t, g->input[i]->name ? g->input[i]->name : "", in[i]);
    for (size_t i = 0; ok && i < g->n_initializer; i++) {
        if (ox_init_is_input(t, g->initializer[i]))
            continue; /* a weight: the model's input of its name */
        int oty;
        tl_tensor *k = ox_tensor(t, g->initializer[i], &oty);
        val *v = k ? ox_known(t, k, oty) : NULL;
        ok = v && ox_bind(t, g->initializer[i]->name ? g->initializer[i]->name : "", v);
    }
    for (size_t i = 0; ok && i < g->n_node; i++)
        ok = ox_translate_node(t, g->node[i], (int)i);
    for (int i = 0; ok && i < nres; i++) {
        const char *nm = g->output[i]->name ? g->output[i]->name : "";
        if (!(res[i] = ox_lookup(t, nm)))
            ok = ox_fail(t, "subgraph \"%.100s\": output \"%.200s\" is not defined by any node", gname, nm);
    }
    if (ok)
        names_of_block(t, g);
    (void)node;
    return ok;
}

static const Onnx__GraphProto *graph_attr(const tx *t, const char *name)
{
    const Onnx__AttributeProto *a = ox_attr(t, name);
    return a ? a->g : NULL;
}

/* ---------- If ---------- */

static val *result_val(tx *t, const char *name, const val *like)
{
    val *v = ox_new_val(t);
    if (!v)
        return NULL;
    snprintf(v->tl, sizeof v->tl, "%s", name);
    v->oty = like->oty;
    v->dt = like->dt;
    v->ndim = like->ndim;
    memcpy(v->dims, like->dims, sizeof(int64_t) * (size_t)like->ndim);
    return v;
}

bool ox_if(tx *t, val **in, int nin, val **out, int nout)
{
    if (nin < 1 || !in[0])
        return ox_fail(t, "input 1 (cond) is missing");
    val *c = in[0];
    const Onnx__GraphProto *th = graph_attr(t, "then_branch"), *el = graph_attr(t, "else_branch");
    if (!th || !el)
        return ox_fail(t, "the then_branch and else_branch subgraphs are required");
    int64_t n = 1;
    for (int d = 0; d < c->ndim; d++)
        n *= c->dims[d];
    if (!ox_one_element(t, n, "cond"))
        return false;
    if (c->k && !c->weight) /* known at load: the branch it selects, inline */
        return subgraph(t, tl_tensor_get_int(c->k, 0) ? th : el, NULL, 0, out, nout);
    if (c->ndim)
        c = op1(t, "reshape", c, attr_ints("shape", NULL, 0));
    if (c && tl_dtype_is_int(c->dt)) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "dtype", tl_dtype_name(t->call));
        c = op1(t, "cast", c, a);
    }
    const char *cname = c ? ox_name(t, c) : NULL;
    if (!cname)
        return false;
    val *rt[MAXIO], *re[MAXIO];
    cJSON *outer = block_open(t);
    bool ok = subgraph(t, th, NULL, 0, rt, nout);
    cJSON *bt = ok ? block_close(t, outer, rt, nout) : NULL;
    if (!bt) {
        cJSON_Delete(t->nodes);
        t->nodes = outer;
        return false;
    }
    outer = block_open(t);
    ok = subgraph(t, el, NULL, 0, re, nout);
    cJSON *be = ok ? block_close(t, outer, re, nout) : NULL;
    if (!be) {
        cJSON_Delete(t->nodes);
        t->nodes = outer;
        cJSON_Delete(bt);
        return false;
    }
    for (int i = 0; i < nout; i++)
        if (!same_type(rt[i], re[i])) {
            char what[64];
            snprintf(what, sizeof what, "its branches give output %d as", i + 1);
            cJSON_Delete(bt), cJSON_Delete(be);
            return desc_fail(t, what, rt[i], re[i]);
        }
    cJSON *node = cJSON_CreateObject(), *ids = cJSON_AddArrayToObject(node, "id");
    for (int i = 0; i < nout; i++) {
        char nm[24];
        snprintf(nm, sizeof nm, "t%d", t->ntl++);
        cJSON_AddItemToArray(ids, cJSON_CreateString(nm));
        if (!(out[i] = result_val(t, nm, rt[i]))) {
            cJSON_Delete(bt), cJSON_Delete(be), cJSON_Delete(node);
            return false;
        }
    }
    cJSON_AddStringToObject(node, "op", "if");
    cJSON_AddStringToObject(node, "cond", cname);
    cJSON_AddItemToObject(node, "then", bt);
    cJSON_AddItemToObject(node, "else", be);
    cJSON_AddItemToArray(t->nodes, node);
    return true;
}

/* ---------- iterate ---------- */

bool ox_iter_open(tx *t, ox_iter *it, int64_t count)
{
    memset(it, 0, sizeof *it);
    it->count = count;
    snprintf(it->index, sizeof it->index, "n%d", t->ntl++);
    it->iv = ox_new_val(t);
    it->ivf = ox_new_val(t);
    if (!it->iv || !it->ivf)
        return false;
    snprintf(it->iv->tl, sizeof it->iv->tl, "%s", it->index);
    snprintf(it->ivf->tl, sizeof it->ivf->tl, "%s", it->index);
    it->iv->dt = TL_I64;
    it->iv->oty = TL_ONNX_INT64;
    it->ivf->dt = t->call;
    it->ivf->oty = oty_of(t->call);
    it->outer = block_open(t);
    return true;
}

/* A carried value starting at init: the value to read in the body. */
val *ox_iter_state(tx *t, ox_iter *it, val *init)
{
    if (!init)
        return NULL;
    if (it->n == MAXIO)
        return ox_fail(t, "more than %d carried values", MAXIO), NULL;
    char nm[24];
    snprintf(nm, sizeof nm, "s%d", t->ntl++);
    val *s = result_val(t, nm, init);
    if (!s)
        return NULL;
    it->init[it->n] = init;
    it->state[it->n++] = s;
    return s;
}

/* Step i's row of x (the steps on axis 0). */
val *ox_iter_row(tx *t, ox_iter *it, val *x) { return take_at(t, x, it->iv, 0); }

/* y stacked over the steps: a carried [count, y's shape] whose row i step
 * i writes (row count-1-i when reversed).  A float y is added into its
 * row by scatter_add, the stack starting as -0 (so that -0 + y is y, bit
 * for bit): the gradient reaches y through a gather of its row and passes
 * to the stack unchanged, where a where against the step number (still
 * the integers' form, with a product) cost three passes over the whole
 * stack a step in the backward, on top of the forward's one (an LSTM over
 * 100 steps spent most of its time there). */
bool ox_iter_stack(tx *t, ox_iter *it, val *y, bool reversed)
{
    if (!y)
        return false;
    int64_t dims[TL_MAXDIM + 1];
    if (y->ndim >= TL_MAXDIM)
        return ox_fail(t, "a per-step output of %d dims (at most %d)", y->ndim, TL_MAXDIM - 1);
    dims[0] = it->count;
    memcpy(dims + 1, y->dims, sizeof(int64_t) * (size_t)y->ndim);
    bool fl = !tl_dtype_is_int(y->dt);
    tl_tensor *zk = tl_tensor_zeros(y->dt, y->ndim + 1, dims, t->st);
    for (int64_t i = 0; fl && zk && i < zk->numel; i++)
        tl_tensor_set(zk, i, -0.0);
    val *z = zk ? ox_known(t, zk, oty_of(y->dt)) : NULL;
    if (!z)
        return false;
    z->oty = y->oty;
    val *acc = ox_iter_state(t, it, z), *r;
    if (!acc)
        return false;
    if (fl) { /* the row's index, as a tensor of y's shape and one more axis */
        int64_t ones[TL_MAXDIM + 1];
        for (int d = 0; d <= y->ndim; d++)
            ones[d] = 1;
        int64_t *rows = malloc(sizeof *rows * (size_t)(it->count > 0 ? it->count : 1));
        for (int64_t i = 0; rows && i < it->count; i++)
            rows[i] = reversed ? it->count - 1 - i : i;
        val *table = rows ? ox_known_ints(t, 1, &it->count, rows, TL_ONNX_INT64) : NULL;
        free(rows);
        if (table)
            table->weight = true; /* never folded: the body takes its row per step */
        val *at = take_at(t, table, it->iv, 0); /* an i64 scalar */
        at = at ? op1(t, "reshape", at, attr_ints("shape", ones, y->ndim + 1)) : NULL;
        dims[0] = 1;
        at = at ? op1(t, "broadcast_to", at, attr_ints("shape", dims, y->ndim + 1)) : NULL;
        val *row = op1(t, "expand_dims", y, attr_int("axis", 0)), *args[3] = {acc, at, row};
        r = at && row ? ox_call(t, "scatter_add", 3, args, attr_int("axis", 0)) : NULL;
    } else {
        int64_t sd[TL_MAXDIM + 1];
        for (int d = 0; d <= y->ndim; d++)
            sd[d] = d ? 1 : it->count;
        tl_tensor *k = tl_tensor_new(TL_I64, y->ndim + 1, sd, t->st);
        if (!k)
            return false;
        for (int64_t i = 0; i < it->count; i++)
            tl_tensor_set(k, i, (double)(reversed ? it->count - 1 - i : i));
        val *steps = ox_known(t, k, TL_ONNX_INT64);
        if (steps)
            steps->weight = true; /* not folded: compared with the step */
        val *sel = op2(t, "eq", steps, it->iv);
        if (sel && sel->dt != y->dt) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "dtype", tl_dtype_name(y->dt));
            sel = op1(t, "cast", sel, a);
        }
        r = op2(t, "add", acc, op2(t, "mul", sel, y));
    }
    if (!r)
        return false;
    r->oty = y->oty;
    it->res[it->n - 1] = r;
    return true;
}

/* Emits the iterate; the final values in out (one per carried value). */
bool ox_iter_close(tx *t, ox_iter *it, val **out)
{
    for (int i = 0; i < it->n; i++) {
        if (!it->res[i]) {
            cJSON_Delete(t->nodes);
            t->nodes = it->outer;
            return t->st->code ? false : ox_fail(t, "carried value %d has no result", i + 1);
        }
        if (!same_type(it->state[i], it->res[i])) {
            cJSON_Delete(t->nodes);
            t->nodes = it->outer;
            char what[80];
            snprintf(what, sizeof what, "carried value %d changes type from one step to the next", i + 1);
            return desc_fail(t, what, it->state[i], it->res[i]);
        }
    }
    cJSON *body = block_close(t, it->outer, it->res, it->n);
    if (!body)
        return false;
    cJSON *node = cJSON_CreateObject(), *ids = cJSON_AddArrayToObject(node, "id");
    cJSON_AddStringToObject(node, "op", "iterate");
    cJSON_AddNumberToObject(node, "count", (double)it->count);
    cJSON *init = cJSON_AddArrayToObject(node, "init"), *state = cJSON_AddArrayToObject(node, "state");
    cJSON_AddStringToObject(node, "index", it->index);
    cJSON_AddItemToObject(node, "body", body);
    for (int i = 0; i < it->n; i++) {
        char nm[24];
        const char *in = ox_name(t, it->init[i]);
        snprintf(nm, sizeof nm, "t%d", t->ntl++);
        if (!in || !(out[i] = result_val(t, nm, it->state[i])))
            return cJSON_Delete(node), false;
        cJSON_AddItemToArray(ids, cJSON_CreateString(nm));
        cJSON_AddItemToArray(init, cJSON_CreateString(in));
        cJSON_AddItemToArray(state, cJSON_CreateString(it->state[i]->tl));
    }
    cJSON_AddItemToArray(t->nodes, node);
    return true;
}

void ox_iter_abort(tx *t, ox_iter *it)
{
    cJSON_Delete(t->nodes);
    t->nodes = it->outer;
}

/* ---------- Loop ---------- */

/* The most steps of a Loop: each is recorded on the tape, and the step
 * numbers are a table of that many (a trip count of 2^62 is a model asking
 * for the absurd, refused as such) */
#define LOOP_MAX ((int64_t)1 << 24)

bool ox_loop(tx *t, val **in, int nin, val **out, int nout)
{
    const Onnx__GraphProto *g = graph_attr(t, "body");
    if (!g)
        return ox_fail(t, "the body subgraph is required");
    if (nin < 2)
        return ox_fail(t, "inputs M and cond are required (either may be left out as \"\")");
    val *m = in[0], *c = in[1];
    /* M and cond known at load: from shapes, integer constants, or (a value
     * known at load but still computed in the recipe) float data given */
    if (m && !m->k)
        return ox_fail(t, "its trip count M is computed at run time; tl needs it at load (from shapes, integer "
                          "constants or the inputs given) to make the loop a fixed-count iterate");
    if (!m)
        return ox_fail(t, "it has no trip count M: a loop that runs while a condition holds is not translated "
                          "(tl translates loops of a count known at load)");
    if (c && !c->k)
        return ox_fail(t, "its condition is computed at run time; tl translates loops whose condition stays "
                          "true (a count known at load)");
    if (!ox_one_element(t, m->k->numel, "trip count M") || (c && !ox_one_element(t, c->k->numel, "condition")))
        return false;
    int64_t count = tl_tensor_get_int(m->k, 0);
    if (count < 0 || (c && !tl_tensor_get_int(c->k, 0)))
        count = 0;
    int nst = nin - 2, nscan = nout - nst;
    if (nscan < 0)
        return ox_fail(t, "%d loop-carried inputs but %d outputs", nst, nout);
    ox_iter it;
    if (!ox_iter_open(t, &it, count))
        return false;
    val *bin[MAXIO] = {0}, *res[MAXIO] = {0};
    int64_t one = 1;
    bool ok = true;
    if (count > LOOP_MAX) {
        ox_iter_abort(t, &it);
        return ox_fail(t, "its trip count M is %lld: tl translates loops of at most %lld steps", (long long)count,
                       (long long)LOOP_MAX);
    }
    if (count > 0) {
        int64_t n = count;
        val *steps = ox_known_ints(t, 1, &n, NULL, TL_ONNX_INT64);
        for (int64_t i = 0; steps && i < n; i++)
            ((int64_t *)steps->k->data)[i] = i;
        if (steps)
            steps->weight = true; /* never folded: the body reads its row per step */
        ok = (bin[0] = take_at(t, steps, it.iv, 0)) != NULL;
        if (ok) { /* the step number, for bounds that follow it (Slice) */
            bin[0]->step = bin[0];
            bin[0]->lo = 0;
            bin[0]->hi = count - 1;
        }
    } else {
        ok = (bin[0] = ox_known_ints(t, 0, NULL, &(int64_t){0}, TL_ONNX_INT64)) != NULL;
        if (ok)
            bin[0]->weight = true;
    }
    ok = ok && (bin[1] = ox_known_ints(t, 0, NULL, &one, TL_ONNX_BOOL)) != NULL;
    for (int i = 0; ok && i < nst; i++) {
        if (!in[2 + i])
            ok = ox_fail(t, "loop-carried input %d is missing", i + 1);
        else
            ok = (bin[2 + i] = ox_iter_state(t, &it, in[2 + i])) != NULL;
    }
    ok = ok && subgraph(t, g, bin, 2 + nst, res, 1 + nst + nscan);
    if (ok && res[0]->k)
        ok = ox_one_element(t, res[0]->k->numel, "body's condition output");
    if (ok && !(res[0]->k && !res[0]->weight && tl_tensor_get_int(res[0]->k, 0)))
        ok = ox_fail(t, "its body's condition output is computed from data at run time (a while loop); tl "
                        "translates loops whose condition stays true, into a fixed-count iterate");
    for (int i = 0; ok && i < nst; i++)
        it.res[i] = res[1 + i];
    for (int i = 0; ok && i < nscan; i++)
        ok = ox_iter_stack(t, &it, res[1 + nst + i], false);
    if (!ok) {
        ox_iter_abort(t, &it);
        return false;
    }
    return ox_iter_close(t, &it, out);
}

/* ---------- Scan ---------- */

/* Scan's body over the steps: states (N), scan inputs with the steps on
 * axis 0 (M, reversed where asked); out: N final states then the scan
 * outputs, steps on axis 0 in the order asked. */
static bool scan_core(tx *t, const Onnx__GraphProto *g, int N, val **st, int M, val **xs, int K,
                      const int64_t *odir, val **out)
{
    int64_t T = -1;
    for (int j = 0; j < M; j++) {
        if (!xs[j] || !xs[j]->ndim)
            return xs[j] ? ox_fail(t, "scan input %d is a scalar", j + 1) : false;
        if (T >= 0 && xs[j]->dims[0] != T)
            return ox_fail(t, "scan inputs have %lld and %lld steps", (long long)T, (long long)xs[j]->dims[0]);
        T = xs[j]->dims[0];
    }
    if (T < 0)
        return ox_fail(t, "no scan input");
    ox_iter it;
    if (!ox_iter_open(t, &it, T))
        return false;
    val *bin[MAXIO] = {0}, *res[MAXIO] = {0};
    bool ok = true;
    for (int i = 0; ok && i < N; i++)
        ok = (bin[i] = ox_iter_state(t, &it, st[i])) != NULL;
    for (int j = 0; ok && j < M; j++)
        ok = (bin[N + j] = ox_iter_row(t, &it, xs[j])) != NULL;
    ok = ok && subgraph(t, g, bin, N + M, res, N + K);
    for (int i = 0; ok && i < N; i++)
        it.res[i] = res[i];
    for (int k = 0; ok && k < K; k++)
        ok = ox_iter_stack(t, &it, res[N + k], odir && odir[k]);
    if (!ok) {
        ox_iter_abort(t, &it);
        return false;
    }
    return ox_iter_close(t, &it, out);
}

static bool scan_ints(tx *t, const char *name, int64_t *v, int n)
{
    const Onnx__AttributeProto *a = ox_attr(t, name);
    for (int i = 0; i < n; i++)
        v[i] = 0;
    if (!a)
        return true;
    if ((int)a->n_ints != n)
        return ox_fail(t, "attribute \"%s\" has %zu entries, where there are %d", name, a->n_ints, n);
    memcpy(v, a->ints, sizeof *v * (size_t)n);
    return true;
}

static val *reversed(tx *t, val *x)
{
    if (!x)
        return NULL;
    int64_t T = x->dims[0];
    int64_t *idx = malloc(sizeof *idx * (size_t)(T ? T : 1));
    if (!idx)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
    for (int64_t i = 0; i < T; i++)
        idx[i] = T - 1 - i;
    val *r = take_rows(t, x, idx, T);
    free(idx);
    return r;
}

/* Opset-8 Scan: axis 0 of every input is the batch, axis 1 of the scan
 * inputs the steps.  Each batch entry b is a scan of its own (ONNX's
 * definition is that loop over the batch): its rows of the states and of
 * the first lens[b] steps of the scan inputs (reversed where asked), its
 * scan outputs padded with zeros to the longest sequence, then the
 * entries stacked again.  The graph grows with the batch, not with the
 * sequence. */
static bool scan8(tx *t, const Onnx__GraphProto *g, val *lens, int N, val **in, int M, const int64_t *idir,
                  int K, val **out)
{
    int64_t B = in[0]->ndim ? in[0]->dims[0] : -1, T = -1;
    for (int i = 0; i < N + M; i++) {
        if (in[i]->ndim < (i < N ? 1 : 2))
            return ox_fail(t, "input %d has %d dims: opset-8 Scan's inputs hold the batch on axis 0, and its scan "
                              "inputs their steps on axis 1", i + 2, in[i]->ndim);
        if (in[i]->dims[0] != B)
            return ox_fail(t, "input %d holds a batch of %lld, input 2 of %lld", i + 2, (long long)in[i]->dims[0],
                           (long long)B);
        if (i >= N && T >= 0 && in[i]->dims[1] != T)
            return ox_fail(t, "scan inputs have %lld and %lld steps", (long long)T, (long long)in[i]->dims[1]);
        if (i >= N)
            T = in[i]->dims[1];
    }
    if (lens && !lens->k)
        return ox_fail(t, "its sequence_lens is computed at run time; tl needs it at load");
    if (lens && lens->k->numel != B)
        return ox_fail(t, "sequence_lens holds %lld entries, for a batch of %lld", (long long)lens->k->numel,
                       (long long)B);
    if (B < 1 || T < 1)
        return ox_fail(t, B < 1 ? "an empty batch" : "the scan inputs have no steps");
    val **parts = calloc((size_t)((N + K) * B), sizeof *parts);
    if (!parts)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
    bool ok = true;
    for (int64_t b = 0; ok && b < B; b++) {
        int64_t L = lens ? tl_tensor_get_int(lens->k, b) : T;
        if (L < 1 || L > T) {
            ok = ox_fail(t, "sequence_lens[%lld] is %lld, where tl takes 1 to the %lld steps", (long long)b,
                         (long long)L, (long long)T);
            break;
        }
        val *st[MAXIO], *xs[MAXIO], *res[MAXIO];
        for (int i = 0; i < N; i++)
            ok = ok && (st[i] = row(t, in[i], b)) != NULL;
        for (int j = 0; ok && j < M; j++) {
            val *x = row(t, in[N + j], b);
            x = L < T ? slice1(t, x, 0, 0, L) : x;
            ok = (xs[j] = idir[j] ? reversed(t, x) : x) != NULL;
        }
        ok = ok && scan_core(t, g, N, st, M, xs, K, NULL, res);
        for (int i = 0; ok && i < N + K; i++) {
            val *r = res[i];
            if (i >= N && L < T) { /* the steps past the sequence: zeros */
                cJSON *a = cJSON_CreateObject(), *pairs = cJSON_AddArrayToObject(a, "pads");
                for (int d = 0; d < r->ndim; d++) {
                    cJSON *pr = cJSON_CreateArray();
                    cJSON_AddItemToArray(pr, cJSON_CreateNumber(0));
                    cJSON_AddItemToArray(pr, cJSON_CreateNumber(d ? 0 : (double)(T - L)));
                    cJSON_AddItemToArray(pairs, pr);
                }
                r = op1(t, "pad", r, a);
            }
            ok = (parts[i * B + b] = B > 1 ? op1(t, "expand_dims", r, attr_int("axis", 0)) : r) != NULL;
        }
    }
    for (int i = 0; ok && i < N + K; i++) { /* joined MAXIO at a time (a call's most arguments) */
        val **p = parts + i * B;
        int64_t n = B;
        if (n == 1)
            p[0] = op1(t, "expand_dims", p[0], attr_int("axis", 0));
        while (n > 1 && ok) {
            int64_t m = 0;
            for (int64_t s = 0; ok && s < n; s += MAXIO, m++) {
                int c = (int)(n - s < MAXIO ? n - s : MAXIO);
                ok = (p[m] = c > 1 ? ox_call(t, "concat", c, p + s, attr_int("axis", 0)) : p[s]) != NULL;
            }
            n = m;
        }
        ok = ok && (out[i] = p[0]) != NULL;
    }
    free(parts);
    return ok;
}

bool ox_scan(tx *t, val **in, int nin, val **out, int nout)
{
    const Onnx__GraphProto *g = graph_attr(t, "body");
    int M = (int)ox_attr_i(t, "num_scan_inputs", -1);
    bool v8 = ox_opset(t) < 9;
    int first = v8 ? 1 : 0, N = nin - first - M, K = nout - N;
    if (!g)
        return ox_fail(t, "the body subgraph is required");
    if (M < 1 || N < 0 || K < 0)
        return ox_fail(t, "num_scan_inputs %d does not fit its %d inputs and %d outputs", M, nin, nout);
    for (int i = first; i < nin; i++)
        if (!in[i])
            return ox_fail(t, "input %d is missing", i + 1);
    int64_t iax[MAXIO], idir[MAXIO], oax[MAXIO], odir[MAXIO];
    if (!scan_ints(t, v8 ? "directions" : "scan_input_directions", idir, M) ||
        !(v8 || scan_ints(t, "scan_input_axes", iax, M)) || !(v8 || scan_ints(t, "scan_output_axes", oax, K)) ||
        !(v8 || scan_ints(t, "scan_output_directions", odir, K)))
        return false;
    if (v8)
        return scan8(t, g, in[0], N, in + 1, M, idir, K, out);
    val *xs[MAXIO], *res[MAXIO];
    for (int j = 0; j < M; j++) {
        val *x = in[N + j];
        bool okax = iax[j] >= -x->ndim && iax[j] < x->ndim;
        if (!okax)
            return ox_fail(t, "scan_input_axes[%d] = %lld is out of range", j, (long long)iax[j]);
        x = move_axis(t, x, (int)(iax[j] < 0 ? iax[j] + x->ndim : iax[j]), true);
        xs[j] = idir[j] ? reversed(t, x) : x;
    }
    if (!scan_core(t, g, N, in, M, xs, K, odir, res))
        return false;
    for (int i = 0; i < N + K; i++) {
        val *r = res[i];
        if (i >= N) {
            int64_t a = oax[i - N];
            if (a < -r->ndim || a >= r->ndim)
                return ox_fail(t, "scan_output_axes[%d] = %lld is out of range", i - N, (long long)a);
            r = move_axis(t, r, (int)(a < 0 ? a + r->ndim : a), false);
        }
        if (!(out[i] = r))
            return false;
    }
    return true;
}

/* ---------- RNN, GRU, LSTM ---------- */

typedef struct act {
    char name[24];
    double alpha, beta;
} act;

static bool same_ci(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if ((*a | 32) != (*b | 32))
            return false;
    return !*a && !*b;
}

/* The activation functions of the node (per direction, G of each) with
 * the alphas and betas they consume, in order. */
static bool activations(tx *t, const char *const *defs, int G, int D, act *fs)
{
    static const struct {
        const char *name;
        int na, nb;
        double alpha, beta;
    } known[] = {
        {"Relu", 0, 0, 0, 0},          {"Tanh", 0, 0, 0, 0},       {"Sigmoid", 0, 0, 0, 0},
        {"Affine", 1, 1, 1, 0},        {"LeakyRelu", 1, 0, 0.01, 0}, {"ThresholdedRelu", 1, 0, 1, 0},
        {"ScaledTanh", 1, 1, 1, 1},    {"HardSigmoid", 1, 1, 0.2, 0.5}, {"Elu", 1, 0, 1, 0},
        {"Softsign", 0, 0, 0, 0},      {"Softplus", 0, 0, 0, 0},
    };
    const Onnx__AttributeProto *a = ox_attr(t, "activations"), *al = ox_attr(t, "activation_alpha"),
                               *be = ox_attr(t, "activation_beta");
    int n = a ? (int)a->n_strings : 0;
    if (a && n != G && n != G * D)
        return ox_fail(t, "%d activations, where %d per direction are needed", n, G);
    size_t ia = 0, ib = 0;
    for (int i = 0; i < G * D; i++) {
        char nm[24];
        if (a) {
            const ProtobufCBinaryData *s = &a->strings[i % n];
            snprintf(nm, sizeof nm, "%.*s", (int)(s->len < 23 ? s->len : 23), (const char *)s->data);
        } else {
            snprintf(nm, sizeof nm, "%s", defs[i % G]);
        }
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && !same_ci(known[k].name, nm))
            k++;
        if (k == sizeof known / sizeof known[0])
            return ox_fail(t, "activation \"%s\" is not one ONNX defines for recurrent layers", nm);
        snprintf(fs[i].name, sizeof fs[i].name, "%s", known[k].name);
        fs[i].alpha = known[k].alpha;
        fs[i].beta = known[k].beta;
        if (known[k].na && al && ia < al->n_floats)
            fs[i].alpha = al->floats[ia++];
        if (known[k].nb && be && ib < be->n_floats)
            fs[i].beta = be->floats[ib++];
    }
    return true;
}

static val *apply(tx *t, const act *f, val *x, double clip)
{
    if (!x)
        return NULL;
    tl_dtype dt = x->dt;
    if (clip > 0) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "min", -clip);
        cJSON_AddNumberToObject(a, "max", clip);
        x = op1(t, "clamp", x, a);
    }
    const char *n = f->name;
    if (!strcmp(n, "Relu") || !strcmp(n, "Tanh") || !strcmp(n, "Sigmoid") || !strcmp(n, "Softplus")) {
        char low[24];
        snprintf(low, sizeof low, "%s", n);
        low[0] = (char)(low[0] | 32);
        return op1(t, low, x, NULL);
    }
    if (!strcmp(n, "Affine"))
        return op2(t, "add", op2(t, "mul", num(t, dt, f->alpha), x), num(t, dt, f->beta));
    if (!strcmp(n, "LeakyRelu"))
        return op3(t, "where", op2(t, "lt", x, num(t, dt, 0)), op2(t, "mul", num(t, dt, f->alpha), x), x);
    if (!strcmp(n, "ThresholdedRelu"))
        return op3(t, "where", op2(t, "gt", x, num(t, dt, f->alpha)), x, num(t, dt, 0));
    if (!strcmp(n, "ScaledTanh"))
        return op2(t, "mul", num(t, dt, f->alpha), op1(t, "tanh", op2(t, "mul", num(t, dt, f->beta), x), NULL));
    if (!strcmp(n, "HardSigmoid")) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "min", 0);
        cJSON_AddNumberToObject(a, "max", 1);
        val *y = op2(t, "add", op2(t, "mul", num(t, dt, f->alpha), x), num(t, dt, f->beta));
        return y ? op1(t, "clamp", y, a) : (cJSON_Delete(a), NULL);
    }
    if (!strcmp(n, "Elu"))
        return op3(t, "where", op2(t, "lt", x, num(t, dt, 0)),
                   op2(t, "mul", num(t, dt, f->alpha), op1(t, "expm1", x, NULL)), x);
    /* Softsign */
    return op2(t, "div", x, op2(t, "add", num(t, dt, 1), op1(t, "abs", x, NULL)));
}

typedef struct rnn {
    int kind; /* 0 RNN, 1 GRU, 2 LSTM */
    int G;    /* gates */
    int64_t T, B, H;
    double clip;
    bool lbr, coupled;
    const int64_t *lens; /* per batch, NULL: the whole sequence */
    val *mask;           /* [T, B, 1], 1 where step t is inside batch b's sequence */
} rnn;

/* The time steps of batch b in the order a reverse pass reads them (an
 * involution on the steps inside each sequence), as rows of [T*B, ...]. */
static int64_t *reverse_rows(tx *t, const rnn *r)
{
    int64_t n = r->T * r->B, *idx = malloc(sizeof *idx * (size_t)(n > 0 ? n : 1));
    if (!idx)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
    for (int64_t i = 0; i < r->T; i++)
        for (int64_t b = 0; b < r->B; b++) {
            int64_t len = r->lens ? r->lens[b] : r->T;
            idx[i * r->B + b] = (i < len ? len - 1 - i : i) * r->B + b;
        }
    return idx;
}

/* x [T, B, K] with each sequence read backwards. */
static val *reverse_seq(tx *t, const rnn *r, val *x)
{
    if (!x)
        return NULL;
    int64_t K = x->dims[2], flat[2] = {r->T * r->B, K}, back[3] = {r->T, r->B, K};
    int64_t *idx = reverse_rows(t, r);
    if (!idx)
        return NULL;
    val *y = op1(t, "reshape", x, attr_ints("shape", flat, 2));
    y = y ? take_rows(t, y, idx, r->T * r->B) : NULL;
    free(idx);
    return y ? op1(t, "reshape", y, attr_ints("shape", back, 3)) : NULL;
}

static val *gate(tx *t, val *x, int64_t H, int k) { return slice1(t, x, x->ndim - 1, k * H, (k + 1) * H); }

/* One direction: XW [T, B, G*H] (inputs times W plus the biases that do
 * not meet the state), RT [H, G*H], h0 (c0) [B, H]; Y [T, B, H] (or NULL)
 * and the final states. */
static bool direction(tx *t, const rnn *r, const act *f, val *XW, val *RT, val *Rbh, val *P, val *h0, val *c0,
                      bool wantY, val **Y, val **hT, val **cT)
{
    ox_iter it;
    if (!ox_iter_open(t, &it, r->T))
        return false;
    int64_t H = r->H;
    val *h = ox_iter_state(t, &it, h0), *c = r->kind == 2 ? ox_iter_state(t, &it, c0) : NULL;
    val *x = ox_iter_row(t, &it, XW), *hn = NULL, *cn = NULL;
    if (!h || !x || (r->kind == 2 && !c))
        goto fail;
    if (r->kind == 0) {
        hn = apply(t, &f[0], op2(t, "add", x, op2(t, "matmul", h, RT)), r->clip);
    } else if (r->kind == 1) { /* zrh */
        val *rzr = slice1(t, RT, 1, 0, 2 * H), *rh = slice1(t, RT, 1, 2 * H, 3 * H);
        val *zr = op2(t, "add", slice1(t, x, 1, 0, 2 * H), op2(t, "matmul", h, rzr));
        val *z = zr ? apply(t, &f[0], gate(t, zr, H, 0), r->clip) : NULL;
        val *rr = zr ? apply(t, &f[0], gate(t, zr, H, 1), r->clip) : NULL;
        val *hh = r->lbr ? op2(t, "mul", rr, op2(t, "add", op2(t, "matmul", h, rh), Rbh))
                         : op2(t, "matmul", op2(t, "mul", rr, h), rh);
        val *ht = apply(t, &f[1], op2(t, "add", gate(t, x, H, 2), hh), r->clip);
        hn = op2(t, "add", op2(t, "mul", op2(t, "sub", num(t, h->dt, 1), z), ht), op2(t, "mul", z, h));
    } else { /* iofc */
        val *g = op2(t, "add", x, op2(t, "matmul", h, RT));
        if (!g)
            goto fail;
        val *pi = gate(t, g, H, 0), *po = gate(t, g, H, 1), *pf = gate(t, g, H, 2), *pc = gate(t, g, H, 3);
        if (P) {
            pi = op2(t, "add", pi, op2(t, "mul", slice1(t, P, 0, 0, H), c));
            pf = op2(t, "add", pf, op2(t, "mul", slice1(t, P, 0, 2 * H, 3 * H), c));
        }
        val *i = apply(t, &f[0], pi, r->clip);
        val *ff = r->coupled ? op2(t, "sub", num(t, h->dt, 1), i) : apply(t, &f[0], pf, r->clip);
        val *cc = apply(t, &f[1], pc, r->clip);
        cn = op2(t, "add", op2(t, "mul", ff, c), op2(t, "mul", i, cc));
        if (P && cn)
            po = op2(t, "add", po, op2(t, "mul", slice1(t, P, 0, H, 2 * H), cn));
        val *o = apply(t, &f[0], po, r->clip);
        hn = op2(t, "mul", o, apply(t, &f[2], cn, 0));
    }
    if (!hn || (r->kind == 2 && !cn))
        goto fail;
    val *y = hn;
    if (r->mask) { /* past a sequence's end: the state holds, Y is 0 */
        val *m = ox_iter_row(t, &it, r->mask);
        y = op3(t, "where", m, hn, num(t, h->dt, 0));
        hn = op3(t, "where", m, hn, h);
        if (cn)
            cn = op3(t, "where", m, cn, c);
        if (!y || !hn || (c && !cn))
            goto fail;
    }
    it.res[0] = hn;
    if (c)
        it.res[1] = cn;
    if (wantY && !ox_iter_stack(t, &it, y, false))
        goto fail;
    val *o[4];
    if (!ox_iter_close(t, &it, o))
        return false;
    *hT = o[0];
    *cT = c ? o[1] : NULL;
    *Y = wantY ? o[c ? 2 : 1] : NULL;
    return true;
fail:
    ox_iter_abort(t, &it);
    return false;
}

static val *stack(tx *t, val **v, int n, int axis)
{
    for (int i = 0; i < n; i++)
        if (!v[i])
            return NULL;
    if (n == 1)
        return op1(t, "expand_dims", v[0], attr_int("axis", axis));
    return ox_call(t, "stack", n, v, attr_int("axis", axis));
}

bool ox_rnn(tx *t, val **in, int nin, val **out, int nout)
{
    static const char *const defs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    const char *op = t->node->op_type;
    rnn r = {.kind = !strcmp(op, "RNN") ? 0 : !strcmp(op, "GRU") ? 1 : 2};
    r.G = r.kind == 0 ? 1 : r.kind == 1 ? 3 : 4;
    int nact = r.kind + 1;
    if (nin < 3 || !in[0] || !in[1] || !in[2])
        return ox_fail(t, "inputs X, W and R are required");
    val *X = in[0], *W = in[1], *R = in[2], *Bi = nin > 3 ? in[3] : NULL, *L = nin > 4 ? in[4] : NULL;
    val *h0 = nin > 5 ? in[5] : NULL, *c0 = r.kind == 2 && nin > 6 ? in[6] : NULL;
    val *P = r.kind == 2 && nin > 7 ? in[7] : NULL;
    char dirs[24] = "forward";
    const Onnx__AttributeProto *da = ox_attr(t, "direction");
    if (da && da->has_s)
        snprintf(dirs, sizeof dirs, "%.*s", (int)(da->s.len < 23 ? da->s.len : 23), (const char *)da->s.data);
    bool bidi = !strcmp(dirs, "bidirectional"), rev = !strcmp(dirs, "reverse");
    if (!bidi && !rev && strcmp(dirs, "forward"))
        return ox_fail(t, "direction \"%s\" (forward, reverse or bidirectional)", dirs);
    int D = bidi ? 2 : 1;
    int layout = (int)ox_attr_i(t, "layout", 0);
    r.lbr = ox_attr_i(t, "linear_before_reset", 0) != 0;
    r.coupled = ox_attr_i(t, "input_forget", 0) != 0;
    const Onnx__AttributeProto *ca = ox_attr(t, "clip");
    r.clip = ca && ca->has_f ? ca->f : 0;
    if (X->ndim != 3 || W->ndim != 3 || R->ndim != 3)
        return ox_fail(t, "X, W and R must have 3 dims");
    if (layout == 1) {
        int64_t p[3] = {1, 0, 2};
        X = transpose(t, X, p);
        h0 = h0 ? transpose(t, h0, p) : NULL;
        c0 = c0 ? transpose(t, c0, p) : NULL;
        if (!X || (nin > 5 && in[5] && !h0) || (c0 == NULL && r.kind == 2 && nin > 6 && in[6]))
            return false;
    } else if (layout != 0) {
        return ox_fail(t, "layout %d (0 or 1)", layout);
    }
    r.T = X->dims[0], r.B = X->dims[1];
    r.H = R->dims[2];
    int64_t GH = r.G * r.H, hs = ox_attr_i(t, "hidden_size", r.H);
    if (hs != r.H || W->dims[0] != D || R->dims[0] != D || W->dims[1] != GH || R->dims[1] != GH ||
        W->dims[2] != X->dims[2])
        return ox_fail(t, "W, R (and hidden_size %lld) do not fit X with %d direction(s) and %d gate(s)",
                       (long long)hs, D, r.G);
    if (Bi && (Bi->ndim != 2 || Bi->dims[0] != D || Bi->dims[1] != 2 * GH))
        return ox_fail(t, "B must be [%d, %lld]", D, (long long)(2 * GH));
    if (P && (P->ndim != 2 || P->dims[0] != D || P->dims[1] != 3 * r.H))
        return ox_fail(t, "P must be [%d, %lld]", D, (long long)(3 * r.H));
    int64_t lens[4096];
    if (L) {
        if (!L->k || L->weight)
            return ox_fail(t, "its sequence_lens is computed at run time; tl needs it at load");
        if (L->k->numel != r.B || r.B > 4096)
            return ox_fail(t, "sequence_lens has %lld entries for a batch of %lld", (long long)L->k->numel,
                           (long long)r.B);
        bool full = true;
        for (int64_t b = 0; b < r.B; b++) {
            lens[b] = tl_tensor_get_int(L->k, b);
            if (lens[b] < 0 || lens[b] > r.T)
                return ox_fail(t, "sequence_lens[%lld] = %lld is outside 0..%lld", (long long)b,
                               (long long)lens[b], (long long)r.T);
            full = full && lens[b] == r.T;
        }
        if (!full) {
            r.lens = lens;
            int64_t md[3] = {r.T, r.B, 1};
            tl_tensor *mk = tl_tensor_new(X->dt, 3, md, t->st);
            for (int64_t i = 0; mk && i < r.T * r.B; i++)
                tl_tensor_set(mk, i, i / r.B < lens[i % r.B] ? 1.0 : 0.0);
            if (!mk || !(r.mask = ox_known(t, mk, oty_of(X->dt))))
                return false;
        }
    }
    act f[6];
    if (!activations(t, defs[r.kind], nact, D, f))
        return false;
    bool wantY = nout > 0 && t->node->n_output > 0 && t->node->output[0][0];
    val *Y[2] = {0}, *hT[2] = {0}, *cT[2] = {0};
    int64_t bh[2] = {r.B, r.H};
    for (int d = 0; d < D; d++) {
        bool back = rev || d == 1;
        val *Wd = row(t, W, d), *Rd = row(t, R, d);
        val *XW = op2(t, "matmul", X, op1(t, "transpose", Wd, NULL));
        val *RT = Rd ? op1(t, "transpose", Rd, NULL) : NULL, *Rbh = NULL, *Pd = P ? row(t, P, d) : NULL;
        if (Bi) {
            val *bd = row(t, Bi, d), *wb = slice1(t, bd, 0, 0, GH), *rb = slice1(t, bd, 0, GH, 2 * GH);
            if (r.kind == 1) { /* the h gate's recurrent bias meets r */
                Rbh = slice1(t, rb, 0, 2 * r.H, 3 * r.H);
                val *rz = slice1(t, rb, 0, 0, 2 * r.H);
                val *pre = r.lbr ? zeros(t, X->dt, 1, &r.H) : Rbh;
                val *parts[2] = {rz, pre};
                rb = rz && pre ? ox_call(t, "concat", 2, parts, attr_int("axis", 0)) : NULL;
            }
            XW = op2(t, "add", XW, op2(t, "add", wb, rb));
        } else if (r.kind == 1 && r.lbr) {
            Rbh = zeros(t, X->dt, 1, &r.H);
        }
        if (back)
            XW = reverse_seq(t, &r, XW);
        val *hd = h0 ? row(t, h0, d) : zeros(t, X->dt, 2, bh);
        val *cd = r.kind != 2 ? NULL : c0 ? row(t, c0, d) : zeros(t, X->dt, 2, bh);
        if (!XW || !RT || !hd || (r.kind == 2 && !cd) || (P && !Pd))
            return false;
        if (!direction(t, &r, f + d * nact, XW, RT, Rbh, Pd, hd, cd, wantY, &Y[d], &hT[d], &cT[d]))
            return false;
        if (wantY && back && !(Y[d] = reverse_seq(t, &r, Y[d])))
            return false;
    }
    val *yh = stack(t, hT, D, 0), *yc = r.kind == 2 ? stack(t, cT, D, 0) : NULL, *y = wantY ? stack(t, Y, D, 1) : NULL;
    if (!yh || (r.kind == 2 && !yc) || (wantY && !y))
        return false;
    if (layout == 1) {
        int64_t p3[3] = {1, 0, 2}, p4[4] = {2, 0, 1, 3};
        yh = transpose(t, yh, p3);
        yc = yc ? transpose(t, yc, p3) : NULL;
        y = y ? transpose(t, y, p4) : NULL;
    }
    val *res[3] = {y, yh, yc};
    for (int i = 0; i < nout && i < 3; i++)
        out[i] = res[i];
    return nout <= (r.kind == 2 ? 3 : 2) || ox_fail(t, "%d outputs (at most %d)", nout, r.kind == 2 ? 3 : 2);
}
