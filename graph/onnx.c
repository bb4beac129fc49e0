/* ONNX -> recipe; see onnx.h.  A table of op translators keyed by op type
 * and opset range, each a short function emitting tl calls; the integer
 * shape arithmetic is evaluated on host tensors as the nodes come. */
#include "onnx.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/check.h"
#include "exec/op.h"
#include "exec/shape.h"
#include "formats/onnx.h"
#include "formats/text.h"
#include "onnx_int.h"
#include "program.h"

/* ---------- the model ---------- */

struct tl_onnx_model {
    char *path;
    tl_onnx_file *f;
    int opset;
    int ninit;        /* the main graph's initializers, then the subgraphs' (ntop on) */
    int ntop;
    Onnx__TensorProto **init_proto; /* per initializer: its message */
    tl_tensor **init; /* per initializer */
    int *init_type;   /* its ONNX element type */
    struct name_table *init_at; /* name -> initializer */
    /* the signature */
    int nin;
    const char **in_name;
    int *in_init; /* initializer index, or -1 */
    int *in_type; /* ONNX element type declared (0: none) */
    /* per input: the zeros tl_onnx_declared made for it, which stand for
     * a shape alone (their values are never known at load); a reference,
     * so that no other tensor takes its address while the model lives */
    tl_tensor **placeholder;
    bool params;
    char *wrt;
};

bool tl_onnx_is_model(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && !strcmp(path + n - 5, ".onnx");
}

/* Names to numbers, by open addressing (the names are not copied). */
typedef struct name_table {
    const char **key;
    int *val;
    size_t cap; /* a power of two, at least twice the names */
} name_table;

static name_table *nt_new(size_t n, tl_status *st)
{
    name_table *t = tl_calloc(1, sizeof *t, "a name table", st);
    if (!t)
        return NULL;
    for (t->cap = 16; t->cap < 2 * n;)
        t->cap *= 2;
    t->key = tl_calloc(t->cap, sizeof *t->key, "a name table", st);
    t->val = tl_calloc(t->cap, sizeof *t->val, "a name table", st);
    if (!t->key || !t->val)
        return free(t->key), free(t->val), free(t), NULL;
    return t;
}

static void nt_free(name_table *t)
{
    if (t)
        free(t->key), free(t->val), free(t);
}

/* Where name is in t, or the free entry where it goes. */
static size_t nt_place(const name_table *t, const char *name)
{
    size_t p = (size_t)tl_name_hash(name) & (t->cap - 1);
    while (t->key[p] && strcmp(t->key[p], name))
        p = (p + 1) & (t->cap - 1);
    return p;
}

static int nt_find(const name_table *t, const char *name)
{
    size_t p = t ? nt_place(t, name) : 0;
    return t && t->key[p] ? t->val[p] : -1;
}

/* false when name is there already */
static bool nt_put(name_table *t, const char *name, int v)
{
    size_t p = nt_place(t, name);
    if (t->key[p])
        return false;
    t->key[p] = name, t->val[p] = v;
    return true;
}

static int find_init(const tl_onnx_model *m, const char *name) { return nt_find(m->init_at, name); }

static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, name, n))
            return true;
        p += k + (e != NULL);
    }
    return false;
}

static int value_type(const Onnx__ValueInfoProto *v)
{
    const Onnx__TypeProto *t = v->type;
    return t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type &&
                   t->tensor_type->has_elem_type ? t->tensor_type->elem_type : 0;
}

static tl_code read_signature(tl_onnx_model *m, tl_status *st)
{
    const Onnx__GraphProto *g = m->f->model->graph;
    size_t cap = g->n_input + (size_t)m->ninit + 1;
    m->in_name = tl_calloc(cap, sizeof *m->in_name, "the inputs", st);
    m->in_init = tl_calloc(cap, sizeof *m->in_init, "the inputs", st);
    m->in_type = tl_calloc(cap, sizeof *m->in_type, "the inputs", st);
    m->placeholder = tl_calloc(cap, sizeof *m->placeholder, "the inputs", st);
    bool *used = tl_calloc((size_t)m->ninit + 1, 1, "the inputs", st);
    name_table *seen = nt_new(g->n_input, st);
    if (!m->in_name || !m->in_init || !m->in_type || !m->placeholder || !used || !seen)
        return free(used), nt_free(seen), st->code;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < g->n_input; i++) {
            const char *name = g->input[i]->name;
            if (!name || !name[0]) {
                free(used), nt_free(seen);
                return tl_fail(st, TL_EINPUT, "graph input %zu has no name", i);
            }
            int k = find_init(m, name);
            if ((k >= 0) != pass)
                continue;
            if (!nt_put(seen, name, m->nin)) {
                free(used), nt_free(seen);
                return tl_fail(st, TL_EINPUT, "graph input \"%.200s\" is listed twice", name);
            }
            if (k >= 0)
                used[k] = true;
            m->in_name[m->nin] = name;
            m->in_init[m->nin] = k;
            m->in_type[m->nin++] = value_type(g->input[i]);
        }
    for (int k = 0; k < m->ninit; k++) {
        int ty = m->init_type[k];
        const char *name = m->init_proto[k]->name;
        if (used[k] || !((m->params && (ty == TL_ONNX_FLOAT || ty == TL_ONNX_DOUBLE)) || in_list(m->wrt, name)))
            continue;
        m->in_name[m->nin] = name;
        m->in_init[m->nin] = k;
        m->in_type[m->nin++] = ty;
    }
    free(used), nt_free(seen);
    return TL_OK;
}

/* The initializers of node nd's subgraphs (the bodies of Loop and Scan,
 * the branches of If, at any depth), in order: stored into out from n
 * where out is given; the count after them. */
static size_t node_inits(const Onnx__NodeProto *nd, Onnx__TensorProto **out, size_t n)
{
    for (size_t a = 0; a < nd->n_attribute; a++) {
        const Onnx__AttributeProto *at = nd->attribute[a];
        for (size_t k = 0; k < at->n_graphs + (at->g != NULL); k++) {
            const Onnx__GraphProto *b = k < at->n_graphs ? at->graphs[k] : at->g;
            for (size_t j = 0; b && j < b->n_initializer; j++, n++)
                if (out)
                    out[n] = b->initializer[j];
            for (size_t i = 0; b && i < b->n_node; i++)
                n = node_inits(b->node[i], out, n);
        }
    }
    return n;
}

static tl_onnx_model *open_file(tl_onnx_file *f, const char *path, const tl_onnx_options *o, tl_status *st)
{
    size_t *owner = NULL; /* per subgraph initializer */
    tl_onnx_model *m = f ? tl_calloc(1, sizeof *m, "a model", st) : NULL;
    if (!m) {
        tl_onnx_close(f);
        return NULL;
    }
    m->f = f;
    m->params = o && o->params;
    if (!(m->path = tl_strdup(path, st)) || (o && o->wrt && !(m->wrt = tl_strdup(o->wrt, st))))
        goto fail;
    const Onnx__ModelProto *mp = f->model;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !d[0] || !strcmp(d, "ai.onnx"))
            m->opset = (int)(mp->opset_import[i]->version > 1000 ? 1000 : mp->opset_import[i]->version);
    }
    if (!mp->n_opset_import)
        m->opset = 1; /* IR version 2 models name none: opset 1 */
    const Onnx__GraphProto *g = mp->graph;
    size_t nbody = 0;
    for (size_t i = 0; i < g->n_node; i++)
        nbody = node_inits(g->node[i], NULL, nbody);
    if (g->n_initializer + nbody > (1u << 24)) {
        tl_fail(st, TL_EINPUT, "%zu initializers", g->n_initializer + nbody);
        goto fail;
    }
    m->ntop = (int)g->n_initializer;
    size_t all = g->n_initializer + nbody;
    if (!(m->init_proto = tl_calloc(all + 1, sizeof *m->init_proto, "initializers", st)) ||
        !(m->init = tl_calloc(all + 1, sizeof *m->init, "initializers", st)) ||
        !(m->init_type = tl_calloc(all + 1, sizeof *m->init_type, "initializers", st)))
        goto fail;
    if (!(m->init_at = nt_new(all, st)) || !(owner = tl_calloc(nbody + 1, sizeof *owner, "initializers", st)))
        goto fail;
    if (g->n_initializer)
        memcpy(m->init_proto, g->initializer, sizeof *m->init_proto * g->n_initializer);
    for (size_t i = 0, n = 0; i < g->n_node; i++) /* owner: the main graph's node whose subgraph holds it */
        for (size_t e = node_inits(g->node[i], m->init_proto + m->ntop, n); n < e; n++)
            owner[n] = i;
    for (size_t i = 0; i < all; i++) {
        Onnx__TensorProto *t = m->init_proto[i];
        bool top = i < (size_t)m->ntop;
        if (top && (!t->name || !t->name[0])) {
            tl_fail(st, TL_EINPUT, "initializer %zu has no name", i);
            goto fail;
        }
        /* a subgraph's initializer whose name is taken (or that has none)
         * stays its body's constant alone: no weight, not listed */
        if (!top && (!t->name || !t->name[0] || find_init(m, t->name) >= 0))
            continue;
        int k = m->ninit;
        if (!nt_put(m->init_at, t->name, k)) {
            tl_fail(st, TL_EINPUT, "the name \"%.200s\" is used by two initializers", t->name);
            goto fail;
        }
        m->init_proto[k] = t;
        m->init_type[k] = t->has_data_type ? t->data_type : 0;
        m->ninit++;
        if (!(m->init[k] = tl_onnx_tensor(f, t, st))) {
            const Onnx__NodeProto *nd = top ? NULL : g->node[owner[i - (size_t)m->ntop]];
            if (nd && nd->name && nd->name[0]) /* as a node's translation names it */
                tl_wrap(st, "node \"%.200s\" (%.60s, opset %d)", nd->name, nd->op_type, m->opset);
            else if (nd)
                tl_wrap(st, "node %zu (%.60s, opset %d)", owner[i - (size_t)m->ntop], nd->op_type, m->opset);
            goto fail;
        }
    }
    free(owner);
    owner = NULL;
    if (read_signature(m, st))
        goto fail;
    return m;
fail:
    free(owner);
    tl_wrap(st, "%s", path);
    tl_onnx_free(m);
    return NULL;
}

tl_onnx_model *tl_onnx_open_mem(const void *data, size_t len, const char *path, const tl_onnx_options *o,
                                tl_status *st)
{
    tl_onnx_file *f = tl_onnx_read_mem(data, len, path, o && o->allow_outside_files, st);
    if (!f)
        return tl_wrap(st, "%s", path), NULL;
    return open_file(f, path, o, st);
}

tl_onnx_model *tl_onnx_open(const char *path, const tl_onnx_options *o, tl_status *st)
{
    tl_onnx_file *f = tl_onnx_read(path, o && o->allow_outside_files, st);
    if (!f)
        return tl_wrap(st, "%s", path), NULL;
    return open_file(f, path, o, st);
}

void tl_onnx_free(tl_onnx_model *m)
{
    if (!m)
        return;
    for (int i = 0; m->init && i < m->ninit; i++)
        tl_tensor_unref(m->init[i]);
    free(m->init);
    free(m->init_type);
    free(m->init_proto);
    nt_free(m->init_at);
    free(m->in_name);
    free(m->in_init);
    free(m->in_type);
    for (int i = 0; m->placeholder && i < m->nin; i++)
        tl_tensor_unref(m->placeholder[i]);
    free(m->placeholder);
    free(m->wrt);
    free(m->path);
    tl_onnx_close(m->f);
    free(m);
}

tl_tensor *tl_onnx_initializer(const tl_onnx_model *m, const char *name, tl_status *st)
{
    int k = find_init(m, name);
    if (k >= 0 && m->init[k])
        return tl_tensor_ref(m->init[k]);
    if (k >= 0)
        return tl_fail(st, TL_EINPUT, "initializer \"%.200s\": given to a run already", name), NULL;
    char list[400] = "";
    size_t u = 0;
    for (int i = 0; i < m->ninit && u + 4 < sizeof list; i++)
        u += (size_t)snprintf(list + u, sizeof list - u, "%s%s", i ? ", " : "", m->init_proto[i]->name);
    if (u >= sizeof list - 4)
        snprintf(list + sizeof list - 5, 5, "...");
    return tl_fail(st, TL_EINPUT, m->ninit ? "no initializer \"%.200s\" (the model has %s)"
                                            : "no initializer \"%.200s\" (the model has none%s)", name, list), NULL;
}

int tl_onnx_initializer_count(const tl_onnx_model *m) { return m->ninit; }

const char *tl_onnx_initializer_name(const tl_onnx_model *m, int i)
{
    return i >= 0 && i < m->ninit ? m->init_proto[i]->name : NULL;
}

bool tl_onnx_input_is_bool(const tl_onnx_model *m, int i)
{
    return m && i >= 0 && i < m->nin && m->in_type[i] == TL_ONNX_BOOL;
}

tl_tensor *tl_onnx_default(const tl_onnx_model *m, int i)
{
    return i >= 0 && i < m->nin && m->in_init[i] >= 0 ? tl_tensor_ref(m->init[m->in_init[i]]) : NULL;
}

void tl_onnx_drop_inputs(tl_onnx_model *m)
{
    for (int i = 0; m && i < m->nin; i++)
        if (m->in_init[i] >= 0) {
            tl_tensor_unref(m->init[m->in_init[i]]);
            m->init[m->in_init[i]] = NULL;
        }
}

/* ---------- translation state ---------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The entry in scope for name (the latest binding of it: a subgraph's
 * input shadows an outer value of its name), or NULL. */
static ent *in_scope(tx *t, const char *name)
{
    ent *best = NULL;
    if (!t->tcap)
        return NULL;
    for (size_t i = hash_str(name) & (t->tcap - 1); t->tab[i].name; i = (i + 1) & (t->tcap - 1))
        if (!strcmp(t->tab[i].name, name) && (!best || t->tab[i].seq > best->seq))
            best = &t->tab[i];
    return best;
}

static val *lookup(tx *t, const char *name)
{
    ent *e = in_scope(t, name);
    return e ? e->v : NULL;
}

static bool bind(tx *t, const char *name, val *v)
{
    if (2 * (t->tn + 1) > t->tcap) {
        size_t cap = t->tcap ? 2 * t->tcap : 256;
        ent *nt = tl_calloc(cap, sizeof *nt, "the name table", t->st);
        if (!nt)
            return false;
        for (size_t i = 0; i < t->tcap; i++)
            if (t->tab[i].name) {
                size_t j = hash_str(t->tab[i].name) & (cap - 1);
                while (nt[j].name)
                    j = (j + 1) & (cap - 1);
                nt[j] = t->tab[i];
            }
        free(t->tab);
        t->tab = nt;
        t->tcap = cap;
    }
    size_t i = hash_str(name) & (t->tcap - 1);
    while (t->tab[i].name)
        i = (i + 1) & (t->tcap - 1);
    t->tab[i] = (ent){name, v, ++t->seq};
    t->tn++;
    if (!v->user)
        v->user = name;
    return true;
}

static val *new_val(tx *t)
{
    if (t->nall == t->capall) {
        size_t cap = t->capall ? 2 * t->capall : 256;
        val **a = realloc(t->all, cap * sizeof *a);
        if (!a)
            return tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
        t->all = a;
        t->capall = cap;
    }
    val *v = tl_calloc(1, sizeof *v, "a value", t->st);
    if (v)
        t->all[t->nall++] = v;
    return v;
}

/* The name of u's attribute whose subgraph holds node n (If's
 * then_branch or else_branch, a Loop's body), or "subgraph". */
static const char *holder(const Onnx__NodeProto *u, const Onnx__NodeProto *n)
{
    for (size_t a = 0; a < u->n_attribute; a++) {
        const Onnx__GraphProto *g = u->attribute[a]->g;
        for (size_t i = 0; g && i < g->n_node; i++)
            if (g->node[i] == n && u->attribute[a]->name)
                return u->attribute[a]->name;
    }
    return "subgraph";
}

/* The error of the node being translated: "node "NAME" (OP, opset N): ...",
 * after the nodes whose subgraphs hold it */
__attribute__((format(printf, 2, 3))) static bool fail(tx *t, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = t->node;
    if (!n)
        return tl_fail(t->st, TL_EINPUT, "%s", msg), false;
    char where[300], path[700] = "";
    size_t used = 0;
    for (int i = 0; i < t->depth && i < OX_DEPTH && used < sizeof path; i++) { /* the way in, outermost first */
        const Onnx__NodeProto *u = t->up[i];
        if (u->name && u->name[0])
            snprintf(where, sizeof where, "node \"%.120s\"", u->name);
        else
            snprintf(where, sizeof where, "node %d", t->up_index[i]);
        const Onnx__NodeProto *next = i + 1 < t->depth && i + 1 < OX_DEPTH ? t->up[i + 1] : n;
        int k = snprintf(path + used, sizeof path - used, "%s (%.40s), in its %.40s: ", where,
                         u->op_type ? u->op_type : "", holder(u, next));
        used += k > 0 ? (size_t)k : 0;
    }
    if (n->name && n->name[0])
        snprintf(where, sizeof where, "node \"%.200s\"", n->name);
    else
        snprintf(where, sizeof where, "node %d", t->node_index);
    tl_fail(t->st, TL_EINPUT, "%s%s (%.60s, opset %d): %s", path, where, n->op_type, t->m->opset, msg);
    return false;
}

static const char *type_desc(const val *v, char *buf, size_t len)
{
    return tl_shape_desc(v->dt, v->ndim, v->dims, buf, len);
}

/* ---------- attributes ---------- */

static const Onnx__AttributeProto *attr(const tx *t, const char *name)
{
    for (size_t i = 0; i < t->node->n_attribute; i++)
        if (t->node->attribute[i]->name && !strcmp(t->node->attribute[i]->name, name))
            return t->node->attribute[i];
    return NULL;
}

/* Whether attribute a holds another type than type (its declared type, or
 * for a model that declares none, a field of another type set).  Read as
 * absent, such an attribute (Gemm's transA as a float, Softmax's axis as a
 * string) would change the result without a word: it is noted in the
 * translation and refused (translate_node). */
static bool other_type(const tx *t, const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType type,
                       const char *want)
{
    bool other = a->has_type ? a->type != type
                             : (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT && a->has_f) ||
                                   (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && a->has_i) ||
                                   (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING && a->has_s) ||
                                   (type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->n_ints) ||
                                   a->t || a->g || a->n_floats || a->n_strings || a->n_tensors || a->n_graphs;
    if (other && !t->bad_attr) {
        ((tx *)t)->bad_attr = a->name;
        ((tx *)t)->bad_want = want;
    }
    return other;
}

static int64_t attr_i(const tx *t, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(t, name);
    if (a && other_type(t, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "an integer (INT)"))
        return def;
    return a && a->has_i ? a->i : def;
}

static double attr_f(const tx *t, const char *name, double def)
{
    const Onnx__AttributeProto *a = attr(t, name);
    if (a && other_type(t, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "a number (FLOAT)"))
        return def;
    return a && a->has_f ? a->f : def;
}

/* An ints attribute: its count (-1 when absent). */
static int attr_ints(tx *t, const char *name, int64_t *out, int max)
{
    const Onnx__AttributeProto *a = attr(t, name);
    if (!a)
        return -1;
    if (other_type(t, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "a list of integers (INTS)"))
        return fail(t, "attribute \"%s\" must be a list of integers (INTS)", name), -2;
    if ((int)a->n_ints > max || a->n_ints > (size_t)max)
        return fail(t, "attribute \"%s\" has %zu entries (at most %d)", name, a->n_ints, max), -2;
    memcpy(out, a->ints, a->n_ints * sizeof *out);
    return (int)a->n_ints;
}

static const char *attr_s(const tx *t, const char *name, const char *def, char *buf, size_t len)
{
    const Onnx__AttributeProto *a = attr(t, name);
    if (a && other_type(t, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, "a string (STRING)"))
        return def;
    if (!a || !a->has_s)
        return def;
    snprintf(buf, len, "%.*s", (int)(a->s.len < len - 1 ? a->s.len : len - 1), (const char *)a->s.data);
    return buf;
}

/* ---------- known values ---------- */

static int64_t kget(const tl_tensor *k, int64_t i) { return tl_tensor_get_int(k, i); }

static val *known(tx *t, tl_tensor *k, int oty)
{
    val *v = new_val(t);
    if (!v) {
        tl_tensor_unref(k);
        return NULL;
    }
    v->k = k;
    v->oty = oty;
    v->dt = oty == TL_ONNX_BOOL ? t->call : k->dtype;
    v->weight = oty == TL_ONNX_FLOAT || oty == TL_ONNX_DOUBLE;
    v->ndim = k->ndim;
    memcpy(v->dims, k->shape, sizeof(int64_t) * (size_t)k->ndim);
    return v;
}

/* Integer data computed at load is shape arithmetic and index tables:
 * more than this many elements is a model asking for the absurd (an
 * Expand of a known tensor to 2^59 elements), refused as such, not as an
 * allocation that fails. */
#define FOLD_MAX ((int64_t)1 << 24)

/* A new i64 host tensor of this shape, known at load. */
static val *known_ints(tx *t, int ndim, const int64_t *shape, const int64_t *data, int oty)
{
    int64_t n;
    if (tl_shape_numel(ndim, shape, &n, t->st))
        return NULL;
    /* the folds loop over the dims, an empty one among them or not: an
     * empty [2^40, 0] is as absurd as a full one */
    int64_t span = 1;
    for (int d = 0; d < ndim && span <= FOLD_MAX; d++)
        span = shape[d] > FOLD_MAX ? FOLD_MAX + 1 : shape[d] > 1 ? span * shape[d] : span;
    if (n > FOLD_MAX || span > FOLD_MAX) {
        char d[96];
        fail(t, "integer data %s to compute at load (more than %lld %s)",
             tl_shape_desc(TL_I64, ndim, shape, d, sizeof d), (long long)FOLD_MAX,
             n > FOLD_MAX ? "elements" : "positions along its dims");
        return NULL;
    }
    tl_tensor *k = tl_tensor_new(TL_I64, ndim, shape, t->st);
    if (!k)
        return NULL;
    if (data)
        memcpy(k->data, data, tl_tensor_bytes(k));
    return known(t, k, oty);
}

static bool is_int_type(int oty) { return oty != TL_ONNX_FLOAT && oty != TL_ONNX_DOUBLE; }
/* Folded at load: integer (and bool) data known now. */
static bool foldable(const val *v) { return v && v->k && !v->weight && is_int_type(v->oty); }

/* Integer values of a known input for a shape position (Reshape's shape,
 * Slice bounds...): count into n. */
/* Whether v is known at load, with at most max entries. */
static bool known_entries(tx *t, const val *v, const char *what, int max)
{
    if (!v || !v->k)
        return fail(t, "its %s is computed at run time; tl needs it at load (from shapes, integer "
                       "constants or the inputs given)", what);
    if (v->k->numel > max)
        return fail(t, "its %s has %lld entries (at most %d)", what, (long long)v->k->numel, max);
    return true;
}

bool ox_one_element(tx *t, int64_t numel, const char *what)
{
    return numel == 1 || fail(t, "its %s holds %lld elements (one is needed)", what, (long long)numel);
}

/* A load-time value that must be one number (ONNX's scalars: a ratio, a
 * bound, a fill value): *out its element; false (failed) otherwise. */
static bool one_number(tx *t, const val *v, const char *what, double *out)
{
    if (!ox_one_element(t, v->k->numel, what))
        return false;
    *out = tl_dtype_is_int(v->k->dtype) ? (double)kget(v->k, 0) : tl_tensor_get(v->k, 0);
    return true;
}

static bool ints_of(tx *t, const val *v, const char *what, int64_t *out, int *n, int max)
{
    if (!known_entries(t, v, what, max))
        return false;
    for (int64_t i = 0; i < v->k->numel; i++) {
        double d = tl_tensor_get(v->k, i);
        if (!tl_dtype_is_int(v->k->dtype) && !(d > -9.2e18 && d < 9.2e18)) /* no int64: NaN, inf, huge */
            return fail(t, "its %s holds %.17g, not an integer", what, d);
        out[i] = tl_dtype_is_int(v->k->dtype) ? kget(v->k, i) : (int64_t)d;
    }
    *n = (int)v->k->numel;
    return true;
}

/* ---------- JSON emission ---------- */

static cJSON *ints_json(const int64_t *a, int n)
{
    cJSON *r = cJSON_CreateArray();
    for (int i = 0; r && i < n; i++)
        cJSON_AddItemToArray(r, cJSON_CreateNumber((double)a[i]));
    return r;
}

static void put_ints(cJSON *o, const char *k, const int64_t *a, int n) { cJSON_AddItemToObject(o, k, ints_json(a, n)); }
static void put_num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }
static void put_str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }
static void put_bool(cJSON *o, const char *k, bool v) { cJSON_AddBoolToObject(o, k, v); }

static cJSON *patch_json(tx *t, const char *name, tl_tensor *k);

/* A constant holding k (the data comes after the load, or from the npz
 * of tl compile). */
static bool add_const(tx *t, val *v)
{
    tl_tensor *k = v->k;
    if (v->oty == TL_ONNX_BOOL && !tl_dtype_is_int(t->call)) { /* bools live as 0/1 of the call's dtype */
        tl_tensor *f = tl_tensor_new(t->call, k->ndim, k->shape, t->st);
        if (!f)
            return false;
        for (int64_t i = 0; i < k->numel; i++)
            tl_tensor_set(f, i, (double)(kget(k, i) != 0));
        k = f;
    } else if (v->oty == TL_ONNX_INT32 && k->dtype == TL_I64) {
        tl_tensor *f = tl_tensor_new(TL_I32, k->ndim, k->shape, t->st);
        if (!f)
            return false;
        for (int64_t i = 0; i < k->numel; i++)
            ((int32_t *)f->data)[i] = (int32_t)kget(k, i);
        k = f;
    } else {
        tl_tensor_ref(k);
    }
    snprintf(v->tl, sizeof v->tl, "c%d", t->ntl++);
    cJSON *c = patch_json(t, v->tl, k);
    if (!c)
        return false;
    cJSON_AddItemToObject(t->consts, v->tl, c);
    return true;
}

/* Whether tl compile puts constant k in the npz beside the graph rather
 * than inline: more than 16 elements, or data JSON would not give back
 * (an integer of 2^53 or more, which the graph loader refuses inline; a NaN
 * with its sign bit or a payload, where JSON's "nan" is the plain one). */
static bool in_npz(const tl_tensor *k)
{
    if (k->numel > 16)
        return true;
    for (int64_t i = 0; i < k->numel; i++) {
        if (tl_dtype_is_int(k->dtype)) {
            int64_t v = tl_tensor_get_int(k, i);
            if (v >= ((int64_t)1 << 53) || v <= -((int64_t)1 << 53))
                return true;
        } else if (k->dtype == TL_F32) {
            uint32_t b;
            memcpy(&b, (const float *)k->data + i, sizeof b);
            if (isnan(((const float *)k->data)[i]) && b != 0x7fc00000u)
                return true;
        } else {
            uint64_t b;
            memcpy(&b, (const double *)k->data + i, sizeof b);
            if (isnan(((const double *)k->data)[i]) && b != 0x7ff8000000000000u)
                return true;
        }
    }
    return false;
}

/* Data k (a reference taken over) for the recipe name `name`: a placeholder
 * constant's JSON whose data comes after the load (finish), or with tl
 * compile the data itself, inline or as the npz member `name`. */
static cJSON *patch_json(tx *t, const char *name, tl_tensor *k)
{
    if (t->npatch == t->cappatch) {
        int cap = t->cappatch ? 2 * t->cappatch : 64;
        void *a = realloc(t->patch_name, (size_t)cap * sizeof *t->patch_name), *b = a ? realloc(t->patch, (size_t)cap * sizeof *t->patch) : NULL;
        if (a)
            t->patch_name = a;
        if (!b) {
            tl_tensor_unref(k);
            return tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
        }
        t->patch = b;
        t->cappatch = cap;
    }
    snprintf(t->patch_name[t->npatch], sizeof t->patch_name[t->npatch], "%s", name);
    t->patch[t->npatch++] = k;
    cJSON *c = cJSON_CreateObject();
    if (t->compile && in_npz(k)) {
        put_str(c, "file", t->npz);
        put_str(c, "key", name);
    } else if (t->compile) {
        put_str(c, "dtype", tl_dtype_name(k->dtype));
        put_ints(c, "shape", k->shape, k->ndim);
        cJSON *d = cJSON_CreateArray();
        for (int64_t i = 0; i < k->numel; i++) {
            double x = tl_tensor_get(k, i);
            cJSON_AddItemToArray(d, isfinite(x) ? cJSON_CreateNumber(x)
                                                : cJSON_CreateString(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"));
        }
        cJSON_AddItemToObject(c, "data", d);
    } else {
        put_str(c, "dtype", tl_dtype_name(k->dtype));
        put_ints(c, "shape", k->shape, k->ndim);
        put_num(c, "fill", 0);
    }
    return c;
}

/* The name of v in the recipe (a constant made for it when it is known). */
static const char *name_of(tx *t, val *v)
{
    if (!v->tl[0] && !add_const(t, v))
        return NULL;
    return v->tl;
}

static void fake(const val *v, tl_tensor *f)
{
    tl_type ty = {v->dt, v->ndim, {0}, false};
    memcpy(ty.dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
    tl_type_tensor(&ty, f);
}

/* Emits one call; its value, typed by tl's own shape rules. */
/* A value whose arguments are all known at load, small ones, gets its
 * value at load too (k, with weight set: never folded, the call stays in
 * the recipe), for the nodes that need numbers at load computed from float
 * data the call site gives (Range bounds, a Loop's trip count); shadow
 * when that data is an input's.  Draws are
 * not computed; a failure leaves the value unknown (the call reports it
 * when it runs). */
static void shadow(val *r, tl_opcode op, int nargs, val *const *args, const tl_attrs *at)
{
    int64_t n = 1;
    for (int d = 0; d < r->ndim; d++)
        n *= r->dims[d];
    if (n > 16 || op == TL_OP_COUNT || tl_ops[op].kind == TL_KIND_FLOW || tl_ops[op].kind == TL_KIND_INT ||
        op == TL_OP_RANDOM_UNIFORM || op == TL_OP_RANDOM_NORMAL || op == TL_OP_DROPOUT)
        return;
    for (int i = 0; i < nargs; i++)
        if (!args[i]->k || args[i]->k->numel > 64)
            return;
    tl_tensor *in[MAXIO] = {0}, *y = NULL;
    tl_status st = {0};
    bool ok = true;
    for (int i = 0; ok && i < nargs; i++) { /* k holds i64 for every integer and bool: in the value's dtype */
        const tl_tensor *k = args[i]->k;
        if (k->dtype == args[i]->dt) {
            in[i] = tl_tensor_ref((tl_tensor *)k);
            continue;
        }
        ok = (in[i] = tl_tensor_new(args[i]->dt, k->ndim, k->shape, &st)) != NULL;
        for (int64_t j = 0; ok && j < k->numel; j++)
            tl_tensor_set(in[i], j, tl_tensor_get(k, j));
    }
    if (ok) {
        tl_ctx cx;
        tl_ctx_init(&cx, &tl_cpu_backend);
        y = tl_op(&cx, op, nargs, in, at, &st);
        tl_ctx_release(&cx);
    }
    for (int i = 0; i < nargs; i++)
        tl_tensor_unref(in[i]);
    if (y && tl_dtype_is_int(y->dtype) && y->dtype != TL_I64) {
        tl_tensor *w = tl_tensor_new(TL_I64, y->ndim, y->shape, &st);
        for (int64_t j = 0; w && j < y->numel; j++)
            ((int64_t *)w->data)[j] = tl_tensor_get_int(y, j);
        tl_tensor_unref(y);
        y = w;
    } else if (y && !tl_tensor_on_host(y)) {
        tl_tensor_unref(y), y = NULL;
    }
    if (y && y->numel == n) {
        r->k = y;
        r->weight = true;
        for (int i = 0; i < nargs; i++) /* from the call site's data, not from constants only */
            r->shadow = r->shadow || args[i]->shadow;
    } else {
        tl_tensor_unref(y);
    }
}

static val *call(tx *t, const char *op, int nargs, val *const *args, cJSON *attrs)
{
    cJSON *node = attrs ? attrs : cJSON_CreateObject();
    val *r = new_val(t);
    if (!r || !node)
        return cJSON_Delete(node), NULL;
    snprintf(r->tl, sizeof r->tl, "t%d", t->ntl++);
    cJSON_AddStringToObject(node, "id", r->tl);
    cJSON_AddStringToObject(node, "op", op);
    cJSON *a = cJSON_AddArrayToObject(node, "args");
    tl_tensor fk[MAXIO];
    const tl_tensor *ptr[MAXIO];
    if (nargs > MAXIO)
        return cJSON_Delete(node), fail(t, "%d arguments (at most %d)", nargs, MAXIO), NULL;
    for (int i = 0; i < nargs; i++) {
        if (!args[i]) { /* an input left out, or a call before that failed */
            cJSON_Delete(node);
            return t->st->code ? NULL : (fail(t, "input %d is missing", i + 1), NULL);
        }
        const char *nm = name_of(t, args[i]);
        if (!nm)
            return cJSON_Delete(node), NULL;
        cJSON_AddItemToArray(a, cJSON_CreateString(nm));
        fake(args[i], &fk[i]);
        ptr[i] = &fk[i];
    }
    tl_attrs at;
    tl_shape sh;
    tl_status st = {0};
    if (tl_graph_call_attrs(node, &at, &st) || tl_shape_infer(tl_op_lookup(op), nargs, ptr, &at, &sh, &st)) {
        cJSON_Delete(node);
        return fail(t, "%s: %s", op, st.msg), NULL;
    }
    cJSON_AddItemToArray(t->nodes, node);
    r->dt = sh.dtype;
    r->ndim = sh.ndim;
    memcpy(r->dims, sh.dims, sizeof(int64_t) * (size_t)sh.ndim);
    r->oty = sh.dtype == TL_F32 ? TL_ONNX_FLOAT : sh.dtype == TL_F64 ? TL_ONNX_DOUBLE
             : sh.dtype == TL_I32 ? TL_ONNX_INT32 : TL_ONNX_INT64;
    r->user = NULL;
    shadow(r, tl_op_lookup(op), nargs, args, &at);
    return r;
}

static val *call1(tx *t, const char *op, val *x, cJSON *attrs) { return call(t, op, 1, &x, attrs); }
static val *call2(tx *t, const char *op, val *x, val *y)
{
    if (!x || !y) /* a failed call (its error set), or an input missing that a check let by */
        return t->st->code ? NULL : (fail(t, "an input of %s is missing", op), NULL);
    val *a[2] = {x, y};
    return call(t, op, 2, a, NULL);
}

/* r with the ONNX element type oty (calls are typed by tl's dtypes). */
static val *typed(val *r, int oty)
{
    if (!r)
        return r;
    r->oty = oty;
    if (r->k && is_int_type(oty) && !tl_dtype_is_int(r->k->dtype)) { /* a value known at load: k in i64 */
        tl_status st = {0};
        tl_tensor *k = tl_tensor_new(TL_I64, r->k->ndim, r->k->shape, &st);
        for (int64_t i = 0; k && i < k->numel; i++) {
            double x = tl_tensor_get(r->k, i);
            ((int64_t *)k->data)[i] = oty == TL_ONNX_BOOL ? x != 0 : (int64_t)x;
        }
        tl_tensor_unref(r->k);
        r->k = k;
    }
    return r;
}

/* A scalar constant of dtype dt (a float constant: never folded). */
static val *scalar(tx *t, tl_dtype dt, double x)
{
    tl_tensor *k = tl_tensor_scalar(dt, x, t->st);
    if (!k)
        return NULL;
    val *v = known(t, k, dt == TL_F32 ? TL_ONNX_FLOAT : dt == TL_F64 ? TL_ONNX_DOUBLE : dt == TL_I32 ? TL_ONNX_INT32 : TL_ONNX_INT64);
    return v;
}

static val *reshape(tx *t, val *x, int nd, const int64_t *shape)
{
    if (x->ndim == nd && !memcmp(x->dims, shape, sizeof(int64_t) * (size_t)nd))
        return x;
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "shape", shape, nd);
    return call1(t, "reshape", x, a);
}

/* x's elements from start to stop along axis */
static val *slice_of(tx *t, val *x, int axis, int64_t start, int64_t stop)
{
    cJSON *c = cJSON_CreateObject();
    put_num(c, "axis", axis), put_num(c, "start", (double)start), put_num(c, "stop", (double)stop);
    return call1(t, "slice", x, c);
}

/* x again as a value of its own (a name of its own in the recipe). */
static val *copy_of(tx *t, val *x)
{
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "shape", x->dims, x->ndim);
    return typed(call1(t, "reshape", x, a), x->oty);
}

static val *bool_result(val *v) { return typed(v, TL_ONNX_BOOL); }

/* ---------- folding: integer arithmetic on values known at load ---------- */

static int64_t fold_bin(int op, int64_t a, int64_t b, bool *bad)
{
    switch (op) {
    case 0: return (int64_t)((uint64_t)a + (uint64_t)b);
    case 1: return (int64_t)((uint64_t)a - (uint64_t)b);
    case 2: return (int64_t)((uint64_t)a * (uint64_t)b);
    case 3: if (!b || (a == INT64_MIN && b == -1)) { *bad = true; return 0; } return a / b;
    case 4: { if (!b) { *bad = true; return 0; } int64_t r = b == -1 ? 0 : a % b; return r && ((r < 0) != (b < 0)) ? r + b : r; }
    case 5: return a == b;
    case 6: return a < b;
    case 7: return a > b;
    case 8: return a <= b;
    case 9: return a >= b;
    case 10: return a > b ? a : b;
    case 11: return a < b ? a : b;
    case 12: return (a != 0) && (b != 0);
    case 13: return (a != 0) || (b != 0);
    case 14: return (a != 0) != (b != 0);
    case 15: if (!b) { *bad = true; return 0; } return b == -1 ? 0 : a % b; /* fmod: sign of the dividend */
    default: { /* pow */
        int64_t r = 1;
        for (int64_t i = 0; i < b && i < 64; i++)
            r = (int64_t)((uint64_t)r * (uint64_t)a);
        return b < 0 ? 0 : r;
    }
    }
}

/* Broadcast strides of shape (nd dims) seen in an out shape of od dims. */
static void bstrides(const val *v, int od, const int64_t *out, int64_t *str)
{
    int64_t s = 1;
    for (int d = od - 1; d >= 0; d--) {
        int k = d - (od - v->ndim);
        if (k < 0 || v->dims[k] == 1) {
            str[d] = 0;
        } else {
            str[d] = s;
        }
        if (k >= 0)
            s *= v->dims[k];
        (void)out;
    }
}

static int64_t bindex(int64_t i, int od, const int64_t *out, const int64_t *str)
{
    int64_t r = 0;
    for (int d = od - 1; d >= 0; d--) {
        r += (i % out[d]) * str[d];
        i /= out[d];
    }
    return r;
}

static val *fold_binary(tx *t, int op, val *a, val *b, int oty)
{
    int od;
    int64_t out[TL_MAXDIM], sa[TL_MAXDIM], sb[TL_MAXDIM];
    if (!tl_broadcast_shapes(a->ndim, a->dims, b->ndim, b->dims, &od, out))
        return fail(t, "shapes do not broadcast"), NULL;
    val *r = known_ints(t, od, out, NULL, oty);
    if (!r)
        return NULL;
    bstrides(a, od, out, sa);
    bstrides(b, od, out, sb);
    bool bad = false;
    for (int64_t i = 0; i < r->k->numel; i++)
        ((int64_t *)r->k->data)[i] = fold_bin(op, kget(a->k, bindex(i, od, out, sa)), kget(b->k, bindex(i, od, out, sb)), &bad);
    if (bad)
        return fail(t, "integer division by zero"), NULL;
    return r;
}

static val *known_reshape(tx *t, val *x, int nd, const int64_t *shape);
static val *filled(tx *t, tl_dtype dt, int nd, const int64_t *shape, double c);

/* ---------- translators ---------- */

static int opset(const tx *t) { return t->m->opset; }

static int norm_axis(tx *t, int64_t ax, int nd, bool *ok)
{
    if (ax < -nd || ax >= (nd ? nd : 1)) {
        *ok = fail(t, "axis %lld is out of range for %d dims", (long long)ax, nd);
        return 0;
    }
    *ok = true;
    return (int)(ax < 0 ? ax + nd : ax);
}

static bool need(tx *t, val **in, int nin, int lo)
{
    for (int i = 0; i < lo; i++)
        if (i >= nin || !in[i])
            return fail(t, "input %d is missing", i + 1);
    return true;
}

/* No input past the first hi (an optional one left out, "", does not count). */
static bool at_most(tx *t, val **in, int nin, int hi)
{
    for (int i = hi; i < nin; i++)
        if (in[i])
            return fail(t, "%d inputs, where it takes %d", nin, hi);
    return true;
}

static bool not_int(tx *t, val *x)
{
    if (is_int_type(x->oty) && x->oty != TL_ONNX_BOOL)
        return fail(t, "the input is %s, where tl computes this op on float data", tl_onnx_type_name(x->oty));
    return true;
}

/* elementwise, one tl op */
static const struct {
    const char *onnx, *tl;
} unary_ops[] = {
    {"Abs", "abs"},   {"Neg", "neg"},       {"Exp", "exp"},     {"Log", "log"},     {"Sqrt", "sqrt"},
    {"Reciprocal", "reciprocal"}, {"Sin", "sin"}, {"Cos", "cos"}, {"Tan", "tan"}, {"Tanh", "tanh"},
    {"Sigmoid", "sigmoid"}, {"Erf", "erf"}, {"Relu", "relu"}, {"Floor", "floor"}, {"Ceil", "ceil"},
    {"Round", "round"}, {"Sign", "sign"}, {"Sinh", "sinh"}, {"Cosh", "cosh"}, {"Asin", "asin"},
    {"Acos", "acos"}, {"Atan", "atan"}, {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"},
    {"Softplus", "softplus"},
};

static const char *unary_tl(const char *op)
{
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (!strcmp(unary_ops[i].onnx, op))
            return unary_ops[i].tl;
    return NULL;
}

static bool x_unary(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1) || !at_most(t, in, nin, 1))
        return false;
    const char *op = unary_tl(t->node->op_type);
    if (foldable(in[0]) && (!strcmp(op, "neg") || !strcmp(op, "abs") || !strcmp(op, "sign"))) {
        val *r = known_ints(t, in[0]->ndim, in[0]->dims, NULL, in[0]->oty);
        for (int64_t i = 0; r && i < r->k->numel; i++) {
            int64_t x = kget(in[0]->k, i);
            ((int64_t *)r->k->data)[i] = op[0] == 'n' ? (int64_t)(0 - (uint64_t)x) : op[0] == 'a' ? (x < 0 ? (int64_t)(0 - (uint64_t)x) : x) : (x > 0) - (x < 0);
        }
        return (out[0] = r) != NULL;
    }
    if (!strcmp(op, "relu") && tl_dtype_is_int(in[0]->dt)) /* Relu of integers (opset 14): exact */
        return (out[0] = typed(call2(t, "maximum", in[0], scalar(t, in[0]->dt, 0)), in[0]->oty)) != NULL;
    return (out[0] = call1(t, op, in[0], NULL)) != NULL;
}

static const struct {
    const char *onnx, *tl;
    int fold;
    bool cmp;
} binary_ops[] = {
    {"Add", "add", 0, false}, {"Sub", "sub", 1, false}, {"Mul", "mul", 2, false}, {"Div", "div", 3, false},
    {"Equal", "eq", 5, true}, {"Less", "lt", 6, true}, {"Greater", "gt", 7, true},
    {"LessOrEqual", "le", 8, true}, {"GreaterOrEqual", "ge", 9, true}, {"Pow", "pow", 16, false},
    {"And", "mul", 12, true}, {"Or", "maximum", 13, true}, {"Xor", "ne", 14, true},
};

/* Runtime comparisons of integers give 0/1 in their integer type: cast
 * into the call's dtype, where bools live. */
static val *as_bool(tx *t, val *v)
{
    if (!v)
        return NULL;
    if (tl_dtype_is_int(v->dt) && !tl_dtype_is_int(t->call)) {
        cJSON *a = cJSON_CreateObject();
        put_str(a, "dtype", tl_dtype_name(t->call));
        v = call1(t, "cast", v, a);
    }
    return bool_result(v);
}

static bool x_binary(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2) || !at_most(t, in, nin, 2))
        return false;
    size_t i = 0;
    while (strcmp(binary_ops[i].onnx, t->node->op_type))
        i++;
    val *a = in[0], *b = in[1];
    if (opset(t) < 7 && attr_i(t, "broadcast", 0) && attr(t, "axis") && b->ndim < a->ndim) {
        bool ok;
        int ax = norm_axis(t, attr_i(t, "axis", 0), a->ndim, &ok);
        int64_t sh[TL_MAXDIM];
        if (!ok || ax + b->ndim > a->ndim)
            return ok ? fail(t, "B does not fit A at axis %d", ax) : false;
        for (int i = 0; i < a->ndim - ax; i++)
            sh[i] = i < b->ndim ? b->dims[i] : 1;
        if (foldable(b) ? !(b = known_reshape(t, b, a->ndim - ax, sh)) : !(b = reshape(t, b, a->ndim - ax, sh)))
            return false;
    }
    if (foldable(a) && foldable(b)) {
        int oty = binary_ops[i].cmp ? TL_ONNX_BOOL : a->oty;
        return (out[0] = fold_binary(t, binary_ops[i].fold, a, b, oty)) != NULL;
    }
    if (!strcmp(binary_ops[i].tl, "pow") && a->dt != b->dt) {
        /* the result has the base's type: an integer base is raised in the
         * exponent's float type and the power truncated back (ONNX's
         * reference: power(x, y).astype(x.dtype)) */
        bool int_base = tl_dtype_is_int(a->dt) && !tl_dtype_is_int(b->dt);
        val *base = a;
        cJSON *c = cJSON_CreateObject();
        put_str(c, "dtype", tl_dtype_name(int_base ? b->dt : a->dt));
        if (!(int_base ? (base = call1(t, "cast", a, c)) : (b = call1(t, "cast", b, c))))
            return false;
        val *r = call2(t, "pow", base, b);
        if (r && int_base) {
            cJSON *d = cJSON_CreateObject();
            put_str(d, "dtype", tl_dtype_name(a->dt));
            r = call1(t, "cast", r, d);
        }
        return (out[0] = typed(r, a->oty)) != NULL;
    }
    val *r = call2(t, binary_ops[i].tl, a, b);
    return (out[0] = binary_ops[i].cmp ? as_bool(t, r) : r) != NULL;
}

static bool x_not(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    if (foldable(in[0])) {
        val *r = known_ints(t, in[0]->ndim, in[0]->dims, NULL, TL_ONNX_BOOL);
        for (int64_t i = 0; r && i < r->k->numel; i++)
            ((int64_t *)r->k->data)[i] = !kget(in[0]->k, i);
        return (out[0] = r) != NULL;
    }
    val *z = scalar(t, in[0]->dt, 0);
    return z && (out[0] = as_bool(t, call2(t, "eq", in[0], z))) != NULL;
}

static bool x_mod(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    bool f = attr_i(t, "fmod", 0);
    if (foldable(in[0]) && foldable(in[1]))
        return (out[0] = fold_binary(t, f ? 15 : 4, in[0], in[1], in[0]->oty)) != NULL;
    return (out[0] = call2(t, f ? "fmod" : "mod", in[0], in[1])) != NULL;
}

/* Max, Min, Sum, Mean: variadic, left to right */
static bool x_variadic(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    const char *op = t->node->op_type;
    const char *tl = !strcmp(op, "Max") ? "maximum" : !strcmp(op, "Min") ? "minimum" : "add";
    int fo = !strcmp(op, "Max") ? 10 : !strcmp(op, "Min") ? 11 : 0;
    val *r = in[0];
    bool all = true;
    for (int i = 0; i < nin; i++)
        all = all && foldable(in[i]);
    for (int i = 1; r && i < nin; i++)
        r = all ? fold_binary(t, fo, r, in[i], r->oty) : call2(t, tl, r, in[i]);
    if (r && !strcmp(op, "Mean") && nin > 1)
        r = call2(t, "div", r, scalar(t, r->dt, nin));
    if (r && nin == 1 && !all)
        r = copy_of(t, r);
    return (out[0] = r) != NULL;
}

static bool x_identity(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    out[0] = in[0];
    return true;
}

/* Whether any node of g (or of a subgraph in it) reads name, or g gives it
 * as an output. */
static bool name_read(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; g && i < g->n_output; i++)
        if (g->output[i]->name && !strcmp(g->output[i]->name, name))
            return true;
    for (size_t i = 0; g && i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t j = 0; j < n->n_input; j++)
            if (!strcmp(n->input[j], name))
                return true;
        for (size_t j = 0; j < n->n_attribute; j++) {
            const Onnx__AttributeProto *a = n->attribute[j];
            if (a->g && name_read(a->g, name))
                return true;
            for (size_t k = 0; k < a->n_graphs; k++)
                if (name_read(a->graphs[k], name))
                    return true;
        }
    }
    return false;
}

static bool x_dropout(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 1))
        return false;
    if (nin > 2 && in[2] && !in[2]->k)
        return fail(t, "its training_mode is computed at run time; tl needs it at load");
    double mode = 0;
    if (opset(t) >= 12 && nin > 2 && in[2] && !one_number(t, in[2], "training_mode", &mode))
        return false;
    bool training = mode != 0;
    if (opset(t) < 7 && !attr_i(t, "is_test", 0) && nout > 1)
        training = true;
    double p = attr_f(t, "ratio", 0.5);
    if (opset(t) >= 12 && nin > 1 && in[1]) {
        if (!in[1]->k)
            return fail(t, "its ratio is computed at run time; tl needs it at load");
        if (!one_number(t, in[1], "ratio", &p))
            return false;
    }
    val *x = in[0];
    /* the mask: exporters declare it and mostly leave it unread; any value
     * serves to bind an unread one */
    bool mask = nout > 1 && name_read(t->m->f->model->graph, t->node->output[1]);
    if (!training) {
        out[0] = x;
        if (nout > 1) /* all true */
            out[1] = mask ? bool_result(filled(t, t->call, x->ndim, x->dims, 1)) : x;
        return nout < 2 || out[1];
    }
    cJSON *a = cJSON_CreateObject();
    put_num(a, "p", p);
    put_num(a, "seed", (double)attr_i(t, "seed", 0));
    if (!mask) {
        out[0] = call1(t, "dropout", x, a);
        if (nout > 1)
            out[1] = out[0];
        return out[0] != NULL;
    }
    /* the dropout of ones is mask / (1 - p); x times it the value */
    val *m = call1(t, "dropout", filled(t, x->dt, x->ndim, x->dims, 1), a);
    return m && (out[0] = call2(t, "mul", x, m)) &&
           (out[1] = as_bool(t, call2(t, "ne", m, scalar(t, x->dt, 0)))) != NULL;
}

/* x + b for integers x, the exact sum truncated toward zero (ONNX's
 * integer Shrink: NumPy's float sum cast back), in x's integer type:
 * y = x + trunc(b), then one step toward zero where b's fraction carries y
 * across it (y < 0 < frac, or frac < 0 < y). */
static val *int_plus(tx *t, val *x, double b, const char *what)
{
    double bi = trunc(b), frac = b - bi, top = x->dt == TL_I32 ? 0x1p31 : 0x1p63;
    if (!(bi >= -top && bi < top))
        return fail(t, "%s %g is outside %s's range", what, b, tl_dtype_name(x->dt)), NULL;
    val *y = bi ? call2(t, "add", x, scalar(t, x->dt, bi)) : x;
    if (y && frac > 0)
        y = call2(t, "add", y, call2(t, "lt", y, scalar(t, x->dt, 0)));
    else if (y && frac < 0)
        y = call2(t, "sub", y, call2(t, "gt", y, scalar(t, x->dt, 0)));
    return y;
}

/* Shrink of integers, exactly: x + bias where x < -lambd, x - bias where
 * x > lambd (the first wins), else 0.  For an integer x, x < -lambd is x <
 * ceil(-lambd) and x > lambd is x > floor(lambd); a bound outside the
 * type's range makes its test always or never true.  Comparisons give 0/1
 * in x's type, so the choice is products by them. */
static val *int_shrink(tx *t, val *x)
{
    double lambd = attr_f(t, "lambd", 0.5), bias = attr_f(t, "bias", 0);
    double mn = x->dt == TL_I32 ? -0x1p31 : -0x1p63, mx = -mn; /* mx: one past the largest */
    double lo = ceil(-lambd), hi = floor(lambd);
    val *zero = scalar(t, x->dt, 0), *one = scalar(t, x->dt, 1);
    /* the 0/1 tests: NULL where never true, one where always */
    val *tl = lo <= mn ? NULL : lo >= mx ? one : call2(t, "lt", x, scalar(t, x->dt, lo));
    val *th = hi >= mx - 1 ? NULL : hi < mn ? one : call2(t, "gt", x, scalar(t, x->dt, hi));
    val *r = zero;
    if (th)
        r = call2(t, "mul", th, int_plus(t, x, -bias, "-bias"));
    if (r && tl) {
        val *rest = call2(t, "mul", call2(t, "sub", one, tl), r);
        r = call2(t, "add", call2(t, "mul", tl, int_plus(t, x, bias, "bias")), rest);
    }
    if (r == zero) /* never either: zeros of x's shape */
        r = call2(t, "mul", x, zero);
    return r;
}

/* activations made of a few calls */
static bool x_act(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    bool prelu = !strcmp(t->node->op_type, "PRelu");
    if (!need(t, in, nin, prelu ? 2 : 1) || !at_most(t, in, nin, prelu ? 2 : 1))
        return false;
    if (!strcmp(t->node->op_type, "Shrink") && tl_dtype_is_int(in[0]->dt))
        return (out[0] = typed(int_shrink(t, in[0]), in[0]->oty)) != NULL;
    if (!((prelu && nin > 1 && tl_dtype_is_int(in[0]->dt)) || not_int(t, in[0])))
        return false;
    const char *op = t->node->op_type;
    val *x = in[0], *r = NULL;
    tl_dtype dt = x->dt;
    val *zero = scalar(t, dt, 0);
    if (prelu && tl_dtype_is_int(dt)) { /* integers (opset 16): max(x, 0) + min(x, 0) slope, exact */
        val *p = call2(t, "maximum", x, zero), *q = call2(t, "minimum", x, zero);
        val *qs = q ? call2(t, "mul", q, in[1]) : NULL;
        return (out[0] = typed(p && qs ? call2(t, "add", p, qs) : NULL, x->oty)) != NULL;
    }
    if (!strcmp(op, "LeakyRelu")) {
        val *neg = call2(t, "lt", x, zero);
        val *ax = call2(t, "mul", x, scalar(t, dt, attr_f(t, "alpha", 0.01)));
        val *a3[3] = {neg, ax, x};
        r = neg && ax ? call(t, "where", 3, a3, NULL) : NULL;
    } else if (!strcmp(op, "PRelu")) {
        val *slope = in[1];
        if (opset(t) < 7 && slope->ndim == 1 && x->ndim > 2 && slope->dims[0] == x->dims[1] && slope->dims[0] != 1) {
            int64_t sh[TL_MAXDIM]; /* before opset 7: one slope per channel */
            for (int i = 0; i < x->ndim - 1; i++)
                sh[i] = i ? 1 : slope->dims[0];
            if (!(slope = reshape(t, slope, x->ndim - 1, sh)))
                return false;
        }
        val *neg = call2(t, "lt", x, zero);
        val *ax = call2(t, "mul", x, slope);
        val *a3[3] = {neg, ax, x};
        r = neg && ax ? call(t, "where", 3, a3, NULL) : NULL;
    } else if (!strcmp(op, "Elu") || !strcmp(op, "Celu") || !strcmp(op, "Selu")) {
        bool celu = !strcmp(op, "Celu"), selu = !strcmp(op, "Selu");
        double alpha = attr_f(t, "alpha", celu ? 1.0 : selu ? 1.67326319217681884765625 : 1.0);
        val *neg = call2(t, "lt", x, zero);
        /* alpha * (exp(x) - 1), celu: alpha * (exp(x / alpha) - 1) */
        val *e = celu ? call1(t, "exp", call2(t, "div", x, scalar(t, dt, alpha)), NULL) : call1(t, "exp", x, NULL);
        val *em = e ? call2(t, "sub", e, scalar(t, dt, 1)) : NULL;
        val *an = em ? call2(t, "mul", scalar(t, dt, alpha), em) : NULL;
        if (celu) { /* max(0,x) + min(0, alpha*(exp(x/alpha)-1)) */
            val *p = call2(t, "maximum", zero, x), *q = an ? call2(t, "minimum", zero, an) : NULL;
            r = p && q ? call2(t, "add", p, q) : NULL;
        } else {
            val *a3[3] = {neg, an, x};
            r = neg && an ? call(t, "where", 3, a3, NULL) : NULL;
            if (r && selu)
                r = call2(t, "mul", scalar(t, dt, attr_f(t, "gamma", 1.05070102214813232421875)), r);
        }
    } else if (!strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish")) {
        bool sw = !strcmp(op, "HardSwish");
        double alpha = sw ? 1.0 / 6 : attr_f(t, "alpha", 0.2), beta = sw ? 0.5 : attr_f(t, "beta", 0.5);
        val *y = call2(t, "add", call2(t, "mul", scalar(t, dt, alpha), x), scalar(t, dt, beta));
        cJSON *a = cJSON_CreateObject();
        put_num(a, "min", 0);
        put_num(a, "max", 1);
        r = y ? call1(t, "clamp", y, a) : (cJSON_Delete(a), NULL);
        if (r && sw)
            r = call2(t, "mul", x, r);
    } else if (!strcmp(op, "Softsign")) {
        r = call2(t, "div", x, call2(t, "add", scalar(t, dt, 1), call1(t, "abs", x, NULL)));
    } else if (!strcmp(op, "ThresholdedRelu")) {
        val *g = call2(t, "gt", x, scalar(t, dt, attr_f(t, "alpha", 1.0)));
        val *a3[3] = {g, x, zero};
        r = g ? call(t, "where", 3, a3, NULL) : NULL;
    } else if (!strcmp(op, "Shrink")) {
        double lambd = attr_f(t, "lambd", 0.5), bias = attr_f(t, "bias", 0);
        val *lo = call2(t, "lt", x, scalar(t, dt, -lambd)), *hi = call2(t, "gt", x, scalar(t, dt, lambd));
        val *xp = call2(t, "add", x, scalar(t, dt, bias)), *xm = call2(t, "sub", x, scalar(t, dt, bias));
        val *a3[3] = {hi, xm, zero};
        val *inner = hi && xm ? call(t, "where", 3, a3, NULL) : NULL;
        val *b3[3] = {lo, xp, inner};
        r = lo && xp && inner ? call(t, "where", 3, b3, NULL) : NULL;
    } else if (!strcmp(op, "IsNaN")) {
        r = bool_result(call1(t, "isnan", x, NULL));
    } else if (!strcmp(op, "IsInf")) {
        int64_t pos = attr_i(t, "detect_positive", 1), neg = attr_i(t, "detect_negative", 1);
        r = call1(t, "isinf", x, NULL);
        if (r && !(pos && neg)) {
            val *side = call2(t, pos ? "gt" : "lt", x, zero);
            r = side && (pos || neg) ? call2(t, "mul", r, side) : side ? call2(t, "mul", r, zero) : NULL;
        }
        r = bool_result(r);
    }
    if (r && (r->oty == TL_ONNX_FLOAT || r->oty == TL_ONNX_DOUBLE) && strcmp(op, "IsNaN") && strcmp(op, "IsInf"))
        r->oty = x->oty;
    return (out[0] = r) != NULL;
}

static bool x_clip(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    bool has_lo, has_hi;
    double lo = -INFINITY, hi = INFINITY;
    val *x = in[0];
    if (opset(t) < 11) {
        has_lo = attr(t, "min") != NULL;
        has_hi = attr(t, "max") != NULL;
        lo = attr_f(t, "min", -INFINITY);
        hi = attr_f(t, "max", INFINITY);
    } else {
        has_lo = nin > 1 && in[1];
        has_hi = nin > 2 && in[2];
        /* bounds computed at run time (or inputs): maximum and minimum */
        if ((has_lo && (!in[1]->k || in[1]->shadow)) || (has_hi && (!in[2]->k || in[2]->shadow)) ||
            is_int_type(x->oty)) {
            val *r = x;
            if (has_lo)
                r = call2(t, "maximum", r, in[1]);
            if (r && has_hi)
                r = call2(t, "minimum", r, in[2]);
            if (r == x)
                r = copy_of(t, x);
            return (out[0] = r) != NULL;
        }
        if ((has_lo && !one_number(t, in[1], "min", &lo)) || (has_hi && !one_number(t, in[2], "max", &hi)))
            return false;
    }
    cJSON *a = cJSON_CreateObject();
    if (has_lo || !has_hi)
        put_num(a, "min", isfinite(lo) ? lo : -1.7976931348623157e308);
    if (has_hi)
        put_num(a, "max", isfinite(hi) ? hi : 1.7976931348623157e308);
    return (out[0] = call1(t, "clamp", x, a)) != NULL;
}

/* a where c is nonzero, else b, for float or integer values (tl's where
 * takes floats). */
static val *select_of(tx *t, val *c, val *a, val *b)
{
    if (c && a && c->dt != a->dt) { /* the condition in the values' dtype */
        cJSON *o = cJSON_CreateObject();
        put_str(o, "dtype", tl_dtype_name(a->dt));
        c = call1(t, "cast", c, o);
    }
    if (!c || !a || !b)
        return NULL;
    if (tl_dtype_is_int(a->dt)) /* integers: b + c * (a - b), exact in wrapping arithmetic */
        return call2(t, "add", b, call2(t, "mul", c, call2(t, "sub", a, b)));
    val *a3[3] = {c, a, b};
    return call(t, "where", 3, a3, NULL);
}

static bool x_where(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 3))
        return false;
    if (foldable(in[0]) && foldable(in[1]) && foldable(in[2])) {
        int od;
        int64_t sh[TL_MAXDIM], s0[TL_MAXDIM], s1[TL_MAXDIM], s2[TL_MAXDIM];
        if (!tl_broadcast_shapes(in[0]->ndim, in[0]->dims, in[1]->ndim, in[1]->dims, &od, sh) ||
            !tl_broadcast_shapes(od, sh, in[2]->ndim, in[2]->dims, &od, sh))
            return fail(t, "shapes do not broadcast");
        val *r = known_ints(t, od, sh, NULL, in[1]->oty);
        if (!r)
            return false;
        bstrides(in[0], od, sh, s0);
        bstrides(in[1], od, sh, s1);
        bstrides(in[2], od, sh, s2);
        for (int64_t i = 0; i < r->k->numel; i++)
            ((int64_t *)r->k->data)[i] = kget(in[0]->k, bindex(i, od, sh, s0)) ? kget(in[1]->k, bindex(i, od, sh, s1))
                                                                              : kget(in[2]->k, bindex(i, od, sh, s2));
        return (out[0] = r) != NULL;
    }
    return (out[0] = typed(select_of(t, in[0], in[1], in[2]), in[1]->oty)) != NULL;
}

/* ---------- products ---------- */

static val *transpose2(tx *t, val *x)
{
    cJSON *a = cJSON_CreateObject();
    int64_t p[2] = {1, 0};
    put_ints(a, "axes", p, 2);
    return call1(t, "transpose", x, a);
}

static val *axes_call(tx *t, const char *op, val *x, int n, const int64_t *axes, bool keep);
static val *axis_call(tx *t, const char *op, val *x, int ax);

/* MatMul of integers (tl's matmul takes floats): the products of every
 * row and column broadcast out, [..., M, K, 1] * [..., 1, K, N], summed
 * over K, exact and wrapping as ONNX's integers are.  It holds M*K*N
 * elements at once, so it is for the small products integer models make. */
static bool int_matmul(tx *t, val *a, val *b, val **out)
{
    if (a->ndim < 1 || b->ndim < 1)
        return fail(t, "a 0-d operand");
    int64_t m = a->ndim > 1 ? a->dims[a->ndim - 2] : 1, n = b->ndim > 1 ? b->dims[b->ndim - 1] : 1;
    double na = 1, nb = 1; /* the broadcast products: at most numel(a) * N and numel(b) * M elements */
    for (int d = 0; d < a->ndim; d++)
        na *= (double)a->dims[d];
    for (int d = 0; d < b->ndim; d++)
        nb *= (double)b->dims[d];
    if (na * (double)n > 0x1p26 || nb * (double)m > 0x1p26)
        return fail(t, "an integer product of %s by %s: tl multiplies integers elementwise, every product at once "
                       "(here over 2^26); cast the operands to float first",
                    type_desc(a, (char[96]){0}, 96), type_desc(b, (char[96]){0}, 96));
    val *a2 = a->ndim == 1 ? axis_call(t, "expand_dims", a, 0) : a; /* [K] -> [1, K] */
    val *b2 = b->ndim == 1 ? axis_call(t, "expand_dims", b, 1) : b; /* [K] -> [K, 1] */
    val *p = a2 && b2 ? call2(t, "mul", axis_call(t, "expand_dims", a2, -1), axis_call(t, "expand_dims", b2, -3))
                      : NULL;
    int64_t kax = -2;
    val *r = p ? axes_call(t, "sum", p, 1, &kax, false) : NULL;
    for (int s = 0; r && s < 2; s++) /* a 1-d operand's axis goes again: b's (last), then a's */
        if (s == 0 ? b->ndim == 1 : a->ndim == 1) {
            cJSON *q = cJSON_CreateObject();
            int64_t ax = s == 0 ? -1 : (b->ndim == 1 ? -1 : -2);
            put_ints(q, "axes", &ax, 1);
            r = call1(t, "squeeze", r, q);
        }
    return (*out = r ? typed(r, a->oty) : NULL) != NULL;
}

static bool x_matmul(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2) || !at_most(t, in, nin, 2))
        return false;
    if (is_int_type(in[0]->oty) && in[0]->oty != TL_ONNX_BOOL)
        return int_matmul(t, in[0], in[1], &out[0]);
    return (out[0] = call2(t, "matmul", in[0], in[1])) != NULL;
}

static bool x_gemm(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    val *a = in[0], *b = in[1];
    if (a->ndim != 2 || b->ndim != 2)
        return fail(t, "A and B must be matrices");
    if (attr_i(t, "transA", 0) && !(a = transpose2(t, a)))
        return false;
    if (attr_i(t, "transB", 0) && !(b = transpose2(t, b)))
        return false;
    double alpha = attr_f(t, "alpha", 1), beta = attr_f(t, "beta", 1);
    bool ints = is_int_type(a->oty) && a->oty != TL_ONNX_BOOL;
    if (ints) { /* integers (opset 11): exact and wrapping, so whole scales only */
        double top = a->dt == TL_I32 ? 0x1p31 : 0x1p63;
        for (int i = 0; i < 2; i++) {
            double v = i ? beta : alpha;
            if (v != trunc(v) || !(v >= -top && v < top))
                return fail(t, "%s is %g: tl scales an integer Gemm by whole numbers of %s's range only",
                            i ? "beta" : "alpha", v, tl_dtype_name(a->dt));
        }
    }
    val *y = NULL;
    if (ints ? !int_matmul(t, a, b, &y) : !(y = call2(t, "matmul", a, b)))
        return false;
    if (alpha != 1)
        y = call2(t, "mul", scalar(t, y->dt, alpha), y);
    if (y && nin > 2 && in[2]) {
        val *c = in[2];
        if (beta != 1)
            c = call2(t, "mul", scalar(t, y->dt, beta), c);
        y = call2(t, "add", y, c);
    }
    return (out[0] = ints ? typed(y, a->oty) : y) != NULL;
}

/* ---------- layers ---------- */

static bool spatial_attr(tx *t, const char *name, int d, int64_t def, int64_t *out);

/* Spatial padding pairs from pads / auto_pad, for x with d spatial axes,
 * kernel k (dilated), strides s. */
static bool spatial_pads(tx *t, const val *x, int d, const int64_t *k, const int64_t *s, const int64_t *dil,
                         int64_t *lo, int64_t *hi, bool transposed)
{
    int64_t pads[2 * TL_MAXSP];
    int np = attr_ints(t, "pads", pads, 2 * TL_MAXSP);
    if (np == -2)
        return false;
    for (int i = 0; i < d; i++)
        lo[i] = hi[i] = 0;
    if (np > 0) {
        if (np != 2 * d)
            return fail(t, "pads has %d entries for %d spatial axes", np, d);
        for (int i = 0; i < d; i++) {
            lo[i] = pads[i];
            hi[i] = pads[i + d];
        }
    }
    char buf[32];
    const char *ap = attr_s(t, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "NOTSET") || !strcmp(ap, "VALID"))
        return true;
    if (strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER"))
        return fail(t, "auto_pad \"%s\" is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", ap);
    /* a transposed convolution's output is in * stride: its output padding
     * is part of the total padding (it was added on top, until
     * tests/cli/onnx.txt's case) */
    int64_t opad[TL_MAXSP];
    if (transposed && !spatial_attr(t, "output_padding", d, 0, opad))
        return false;
    for (int i = 0; i < d; i++) {
        int64_t in = x->dims[2 + i], ke = (k[i] - 1) * dil[i] + 1, total;
        if (transposed) {
            total = s[i] * (in - 1) + opad[i] + ke - in * s[i];
            if (total < 0)
                total = 0;
        } else {
            int64_t o = (in + s[i] - 1) / s[i];
            total = (o - 1) * s[i] + ke - in;
            if (total < 0)
                total = 0;
        }
        bool upper = !strcmp(ap, "SAME_UPPER");
        lo[i] = upper ? total / 2 : total - total / 2;
        hi[i] = total - lo[i];
    }
    return true;
}

static void put_pairs(cJSON *a, const int64_t *lo, const int64_t *hi, int d)
{
    cJSON *p = cJSON_CreateArray();
    for (int i = 0; i < d; i++) {
        int64_t pr[2] = {lo[i], hi[i]};
        cJSON_AddItemToArray(p, ints_json(pr, 2));
    }
    cJSON_AddItemToObject(a, "padding", p);
}

static bool spatial_attr(tx *t, const char *name, int d, int64_t def, int64_t *out)
{
    int n = attr_ints(t, name, out, TL_MAXSP);
    if (n == -2)
        return false;
    if (n < 0)
        for (int i = 0; i < d; i++)
            out[i] = def;
    else if (n != d)
        return fail(t, "%s has %d entries for %d spatial axes", name, n, d);
    return true;
}

static bool x_conv(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    val *x = in[0], *w = in[1];
    int d = x->ndim - 2;
    if (d < 1 || d > TL_MAXSP || w->ndim != x->ndim)
        return fail(t, "x and w must be [N, C, *S] with 1 to 3 spatial axes and of one rank");
    bool tr = !strcmp(t->node->op_type, "ConvTranspose");
    int64_t s[TL_MAXSP], dil[TL_MAXSP], lo[TL_MAXSP], hi[TL_MAXSP], op[TL_MAXSP], k[TL_MAXSP], os[TL_MAXSP];
    for (int i = 0; i < d; i++)
        k[i] = w->dims[2 + i];
    if (!spatial_attr(t, "strides", d, 1, s) || !spatial_attr(t, "dilations", d, 1, dil) ||
        !spatial_pads(t, x, d, k, s, dil, lo, hi, tr) || !spatial_attr(t, "output_padding", d, 0, op))
        return false;
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "stride", s, d);
    put_ints(a, "dilation", dil, d);
    put_num(a, "groups", (double)attr_i(t, "group", 1));
    int nos = attr_ints(t, "output_shape", os, TL_MAXSP);
    if (tr && nos > 0) { /* the pads that give this output shape */
        if (nos != d)
            return cJSON_Delete(a), fail(t, "output_shape has %d entries for %d spatial axes", nos, d);
        char buf[32];
        bool upper = strcmp(attr_s(t, "auto_pad", "NOTSET", buf, sizeof buf), "SAME_LOWER") != 0;
        for (int i = 0; i < d; i++) {
            int64_t total = s[i] * (x->dims[2 + i] - 1) + op[i] + (k[i] - 1) * dil[i] + 1 - os[i];
            if (total < 0) {
                op[i] += -total;
                total = 0;
            }
            lo[i] = upper ? total / 2 : total - total / 2;
            hi[i] = total - lo[i];
        }
    }
    put_pairs(a, lo, hi, d);
    if (tr)
        put_ints(a, "output_padding", op, d);
    val *args[3] = {x, w, nin > 2 ? in[2] : NULL};
    return (out[0] = call(t, tr ? "conv_transpose" : "conv", args[2] ? 3 : 2, args, a)) != NULL;
}

/* MaxPool's Indices: for each output element, the flat index into x
 * ([N, C, *S], the spatial part column-major under storage_order 1) of the
 * first largest element of its window.  Each window's K elements are taken
 * from x flattened to [N*C, S] (padding: a -inf column after it), into
 * [N*C, K, P] (P output positions); argmax over K picks the kernel offset,
 * and a gather from a table of offsets by positions gives the index. */
static val *pool_indices(tx *t, val *x, const val *y, const int64_t *k, const int64_t *s, const int64_t *dil,
                         const int64_t *lo, bool colmajor)
{
    int d = x->ndim - 2;
    int64_t NC = x->dims[0] * x->dims[1], S = 1, K = 1, P = 1;
    for (int i = 0; i < d; i++)
        S *= x->dims[2 + i], K *= k[i], P *= y->dims[2 + i];
    if (P && K > ((int64_t)1 << 26) / P)
        return fail(t, "Indices of %lld windows of %lld elements (at most 2^26 in all)", (long long)P, (long long)K), NULL;
    size_t nt = (size_t)(K * P > 0 ? K * P : 1);
    int64_t *ti = malloc(sizeof *ti * nt), *tv = malloc(sizeof *tv * nt);
    if (!ti || !tv)
        return free(ti), free(tv), tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
    for (int64_t o = 0; o < K; o++)
        for (int64_t p = 0; p < P; p++) {
            int64_t po = p, oo = o, c[TL_MAXSP], row = 0, col = 0, st = 1;
            bool ok = true;
            for (int i = d - 1; i >= 0; i--) { /* the coordinates, last axis fastest */
                c[i] = (po % y->dims[2 + i]) * s[i] - lo[i] + (oo % k[i]) * dil[i];
                po /= y->dims[2 + i], oo /= k[i];
                ok = ok && c[i] >= 0 && c[i] < x->dims[2 + i];
            }
            for (int i = 0; i < d; i++)
                row = row * x->dims[2 + i] + c[i];
            for (int i = 0; i < d; i++) /* column-major: the first axis fastest */
                col += c[i] * st, st *= x->dims[2 + i];
            ti[o * P + p] = ok ? row : S;
            tv[o * P + p] = ok ? (colmajor ? col : row) : 0;
        }
    int64_t fs[2] = {NC, S}, ps[2] = {NC, 1}, kp = K * P, ts[3] = {1, K, P}, gs[3] = {NC, K, P}, os[2] = {NC, P};
    val *tiv = known_ints(t, 1, &kp, ti, TL_ONNX_INT64), *tvv = known_ints(t, 3, ts, tv, TL_ONNX_INT64);
    free(ti), free(tv);
    if (!tiv || !tvv)
        return NULL;
    tvv->weight = true; /* a table gathered at run time, not folded */
    val *cat[2] = {reshape(t, x, 2, fs), filled(t, x->dt, 2, ps, -INFINITY)}, *w;
    cJSON *ca = cJSON_CreateObject(), *ta = cJSON_CreateObject(), *aa = cJSON_CreateObject(), *ga = cJSON_CreateObject(),
          *ba = cJSON_CreateObject();
    put_num(ca, "axis", 1), put_num(ta, "axis", 1), put_num(aa, "axis", 1), put_bool(aa, "keepdims", true);
    put_num(ga, "axis", 1), put_ints(ba, "shape", gs, 3);
    val *f = cat[0] && cat[1] ? call(t, "concat", 2, cat, ca) : (cJSON_Delete(ca), NULL), *tk[2] = {f, tiv};
    w = f ? call(t, "take", 2, tk, ta) : (cJSON_Delete(ta), NULL);
    val *am = w ? call1(t, "argmax", reshape(t, w, 3, gs), aa) : (cJSON_Delete(aa), NULL);
    val *tb = am ? call1(t, "broadcast_to", tvv, ba) : (cJSON_Delete(ba), NULL), *g[2] = {tb, am};
    val *sp = tb ? call(t, "gather", 2, g, ga) : (cJSON_Delete(ga), NULL);
    int64_t *off = malloc(sizeof *off * (size_t)(NC ? NC : 1));
    if (!off)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
    for (int64_t i = 0; i < NC; i++)
        off[i] = i * S;
    val *ov = known_ints(t, 2, ps, off, TL_ONNX_INT64);
    free(off);
    val *r = sp && ov ? call2(t, "add", reshape(t, sp, 2, os), ov) : NULL;
    return r ? typed(reshape(t, r, y->ndim, y->dims), TL_ONNX_INT64) : NULL;
}

static bool x_pool(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int d = x->ndim - 2;
    bool max = !strcmp(t->node->op_type, "MaxPool");
    if (d < 1 || d > TL_MAXSP)
        return fail(t, "x must be [N, C, *S] with 1 to 3 spatial axes");
    int64_t k[TL_MAXSP], s[TL_MAXSP], dil[TL_MAXSP], lo[TL_MAXSP], hi[TL_MAXSP];
    int nk = attr_ints(t, "kernel_shape", k, TL_MAXSP);
    if (nk != d)
        return nk == -2 ? false : fail(t, "kernel_shape must have %d entries", d);
    if (!spatial_attr(t, "strides", d, 1, s) || !spatial_attr(t, "dilations", d, 1, dil) ||
        !spatial_pads(t, x, d, k, s, dil, lo, hi, false))
        return false;
    bool wide = false, include = attr_i(t, "count_include_pad", 0) != 0;
    int64_t lo0[TL_MAXSP];
    memcpy(lo0, lo, sizeof lo0);
    for (int i = 0; i < d; i++)
        wide = wide || 2 * lo[i] > k[i] || 2 * hi[i] > k[i];
    val *count = NULL;
    if (wide) { /* pads past half the kernel: padded first (max: with the lowest value) */
        cJSON *p = cJSON_CreateObject(), *pairs = cJSON_CreateArray();
        for (int i = 0; i < x->ndim; i++) {
            int64_t pr[2] = {i < 2 ? 0 : lo[i - 2], i < 2 ? 0 : hi[i - 2]};
            cJSON_AddItemToArray(pairs, ints_json(pr, 2));
        }
        cJSON_AddItemToObject(p, "pads", pairs);
        put_num(p, "value", max ? -1.7976931348623157e308 : 0);
        cJSON *p1 = max || include ? NULL : cJSON_Duplicate(p, true);
        if (!(x = call1(t, "pad", x, p)))
            return cJSON_Delete(p1), false;
        if (p1) { /* without the pads in the count: the padded sums over the padded count of ones */
            int64_t one[TL_MAXDIM];
            for (int i = 0; i < in[0]->ndim; i++)
                one[i] = i < 2 ? 1 : in[0]->dims[i];
            if (!(count = call1(t, "pad", filled(t, x->dt, in[0]->ndim, one, 1), p1)))
                return false;
            include = true;
        }
        for (int i = 0; i < d; i++)
            lo[i] = hi[i] = 0;
    }
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "kernel", k, d);
    put_ints(a, "stride", s, d);
    if (max)
        put_ints(a, "dilation", dil, d);
    put_pairs(a, lo, hi, d);
    put_bool(a, "ceil_mode", attr_i(t, "ceil_mode", 0) != 0);
    if (!max)
        put_bool(a, "count_include_pad", include);
    cJSON *ca = count ? cJSON_Duplicate(a, true) : NULL;
    if (!(out[0] = call1(t, max ? "max_pool" : "avg_pool", x, a)))
        return cJSON_Delete(ca), false;
    if (count && !(out[0] = call2(t, "div", out[0], call1(t, "avg_pool", count, ca))))
        return false;
    /* padded first, a last window of ceil mode may start in the padding
     * after the input: it is dropped, as the pool ops drop it (PyTorch,
     * and ONNX from opset 19); it was kept, -DBL_MAX or NaN, until
     * tests/cli/onnx.txt's case */
    for (int i = 0; wide && attr_i(t, "ceil_mode", 0) && i < d; i++) {
        /* x: the input padded on both sides */
        int64_t n = in[0]->dims[2 + i], ke = (k[i] - 1) * dil[i] + 1, o = (x->dims[2 + i] - ke + s[i] - 1) / s[i] + 1;
        if (o > 1 && (o - 1) * s[i] >= n + lo0[i])
            o--;
        if (out[0]->dims[2 + i] > o && !(out[0] = slice_of(t, out[0], 2 + i, 0, o)))
            return false;
    }
    if (nout > 1 && max && !(out[1] = pool_indices(t, in[0], out[0], k, s, dil, lo0, attr_i(t, "storage_order", 0))))
        return false;
    return true;
}

static bool x_global_pool(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    if (x->ndim < 3)
        return fail(t, "x must be [N, C, *S]");
    int64_t axes[TL_MAXDIM];
    for (int i = 2; i < x->ndim; i++)
        axes[i - 2] = i;
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "axes", axes, x->ndim - 2);
    put_bool(a, "keepdims", true);
    return (out[0] = call1(t, !strcmp(t->node->op_type, "GlobalMaxPool") ? "max" : "mean", x, a)) != NULL;
}

static bool x_batchnorm(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 5))
        return false;
    if (opset(t) < 9 && attr_i(t, "spatial", 1) == 0) /* (it failed inside batch_norm's shape rule) */
        return fail(t, "spatial=0 (statistics per element, not per channel) is not translated");
    bool training = opset(t) >= 14 ? attr_i(t, "training_mode", 0) != 0 : nout > 1;
    if (opset(t) < 7 && attr_i(t, "is_test", 0))
        training = false;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "epsilon", attr_f(t, "epsilon", 1e-5));
    if (training)
        put_bool(a, "training", true);
    if (!training)
        return (out[0] = call(t, "batch_norm", 5, in, a)) != NULL;
    /* training: the value, then running statistics as ONNX defines them */
    cJSON_AddStringToObject(a, "id", "");
    val *args[5] = {in[0], in[1], in[2], in[3], in[4]};
    cJSON *ids = cJSON_CreateArray();
    val *r = new_val(t), *bm = new_val(t), *bv = new_val(t);
    if (!r || !bm || !bv)
        return cJSON_Delete(a), cJSON_Delete(ids), false;
    snprintf(r->tl, sizeof r->tl, "t%d", t->ntl++);
    snprintf(bm->tl, sizeof bm->tl, "t%d", t->ntl++);
    snprintf(bv->tl, sizeof bv->tl, "t%d", t->ntl++);
    cJSON_AddItemToArray(ids, cJSON_CreateString(r->tl));
    cJSON_AddItemToArray(ids, cJSON_CreateString(bm->tl));
    cJSON_AddItemToArray(ids, cJSON_CreateString(bv->tl));
    cJSON_ReplaceItemInObject(a, "id", ids);
    cJSON_AddStringToObject(a, "op", "batch_norm");
    cJSON *al = cJSON_AddArrayToObject(a, "args");
    for (int i = 0; i < 5; i++) {
        const char *nm = name_of(t, args[i]);
        if (!nm)
            return cJSON_Delete(a), false;
        cJSON_AddItemToArray(al, cJSON_CreateString(nm));
    }
    cJSON_AddItemToArray(t->nodes, a);
    /* the three ids as named above (naming the arguments may have taken
     * more numbers since) */
    val *ids3[3] = {r, bm, bv};
    for (int j = 0; j < 3; j++) {
        char tl[sizeof r->tl];
        memcpy(tl, ids3[j]->tl, sizeof tl);
        *ids3[j] = (val){.oty = in[0]->oty, .dt = in[0]->dt, .ndim = j ? 1 : in[0]->ndim};
        if (j)
            ids3[j]->dims[0] = in[0]->dims[1];
        else
            memcpy(r->dims, in[0]->dims, sizeof r->dims);
        memcpy(ids3[j]->tl, tl, sizeof tl);
    }
    out[0] = r;
    double mom = attr_f(t, "momentum", 0.9);
    for (int j = 1; j < nout && j < 3; j++) {
        val *run = in[2 + j], *batch = j == 1 ? bm : bv; /* running = running * momentum + batch * (1 - momentum) */
        val *p = call2(t, "mul", run, scalar(t, run->dt, mom)), *q = call2(t, "mul", batch, scalar(t, run->dt, 1 - mom));
        if (!p || !q || !(out[j] = call2(t, "add", p, q)))
            return false;
    }
    /* saved_mean and saved_var (opsets before 14): the batch's mean and
     * biased variance */
    if (nout > 3)
        out[3] = bm;
    if (nout > 4)
        out[4] = bv;
    return true;
}

static bool x_instnorm(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 3))
        return false;
    if (in[0]->ndim < 3)
        return fail(t, "x must be [N, C, *S]");
    cJSON *a = cJSON_CreateObject();
    put_num(a, "groups", (double)in[0]->dims[1]);
    put_num(a, "epsilon", attr_f(t, "epsilon", 1e-5));
    return (out[0] = call(t, "group_norm", 3, in, a)) != NULL;
}

/* LayerNormalization's Scale or B in the normalized shape: of its size,
 * reshaped; broadcastable to it (a 0-d scale), broadcast. */
static val *norm_shaped(tx *t, val *v, int nd, const int64_t *dims, const char *what)
{
    int64_t n = 1, want = 1;
    for (int i = 0; i < v->ndim; i++)
        n *= v->dims[i];
    for (int i = 0; i < nd; i++)
        want *= dims[i];
    if (n == want)
        return reshape(t, v, nd, dims);
    int od;
    int64_t sh[TL_MAXDIM];
    if (v->ndim > nd || !tl_broadcast_shapes(v->ndim, v->dims, nd, dims, &od, sh) || memcmp(sh, dims, sizeof *sh * (size_t)nd))
        return fail(t, "%s has %lld elements, and the normalized axes hold %lld", what, (long long)n, (long long)want),
               NULL;
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "shape", dims, nd);
    return call1(t, "broadcast_to", v, a);
}

static bool x_layernorm(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 2))
        return false;
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", -1), in[0]->ndim, &ok);
    if (!ok)
        return false;
    int nd = in[0]->ndim - ax;
    val *s = norm_shaped(t, in[1], nd, in[0]->dims + ax, "Scale");
    val *b = s && nin > 2 && in[2] ? norm_shaped(t, in[2], nd, in[0]->dims + ax, "B") : NULL;
    if (!s || (nin > 2 && in[2] && !b))
        return false;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    put_num(a, "epsilon", attr_f(t, "epsilon", 1e-5));
    val *args[3] = {in[0], s, b};
    if (!(out[0] = call(t, "layer_norm", b ? 3 : 2, args, a)))
        return false;
    if (nout > 1) { /* Mean and InvStdDev: over the axes normalized, kept */
        int64_t axes[TL_MAXDIM];
        for (int i = ax; i < in[0]->ndim; i++)
            axes[i - ax] = i;
        cJSON *m1 = cJSON_CreateObject(), *m2 = cJSON_CreateObject();
        put_ints(m1, "axes", axes, nd);
        put_bool(m1, "keepdims", true);
        put_ints(m2, "axes", axes, nd);
        put_bool(m2, "keepdims", true);
        val *mean = call1(t, "mean", in[0], m1), *d = mean ? call2(t, "sub", in[0], mean) : NULL;
        val *var = d ? call1(t, "mean", call1(t, "square", d, NULL), m2) : (cJSON_Delete(m2), NULL);
        val *e = var ? call2(t, "add", var, scalar(t, var->dt, attr_f(t, "epsilon", 1e-5))) : NULL;
        if (!e || !(out[1] = mean) || (nout > 2 && !(out[2] = call1(t, "rsqrt", e, NULL))))
            return false;
    }
    return true;
}

/* Softmax, LogSoftmax: from opset 13 along one axis; before, over the
 * axes from `axis` on, flattened. */
static bool x_softmax(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    const char *op = !strcmp(t->node->op_type, "Softmax") ? "softmax" : "log_softmax";
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", opset(t) >= 13 ? -1 : 1), x->ndim, &ok);
    if (!ok)
        return false;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", opset(t) >= 13 ? ax : 1);
    if (opset(t) >= 13)
        return (out[0] = call1(t, op, x, a)) != NULL;
    int64_t sh[2] = {1, 1};
    for (int i = 0; i < x->ndim; i++)
        sh[i >= ax] *= x->dims[i];
    val *f = reshape(t, x, 2, sh), *y = f ? call1(t, op, f, a) : (cJSON_Delete(a), NULL);
    return y && (out[0] = reshape(t, y, x->ndim, x->dims)) != NULL;
}

/* ---------- shapes ---------- */

static bool x_shape(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    int nd = in[0]->ndim;
    int64_t lo = attr_i(t, "start", 0), hi = attr_i(t, "end", nd);
    lo = lo < 0 ? lo + nd : lo;
    hi = hi < 0 ? hi + nd : hi;
    lo = lo < 0 ? 0 : lo > nd ? nd : lo;
    hi = hi < 0 ? 0 : hi > nd ? nd : hi;
    int64_t n = hi > lo ? hi - lo : 0;
    return (out[0] = known_ints(t, 1, &n, in[0]->dims + lo, TL_ONNX_INT64)) != NULL;
}

static bool x_size(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    int64_t n = 1;
    for (int i = 0; i < in[0]->ndim; i++)
        n *= in[0]->dims[i];
    return (out[0] = known_ints(t, 0, NULL, &n, TL_ONNX_INT64)) != NULL;
}

/* A known tensor in a new shape (same data; an int32 initializer's k is
 * int32: read as int64 it was other numbers, and past its end, until
 * tests/cli/onnx.txt's case). */
static val *known_reshape(tx *t, val *x, int nd, const int64_t *shape)
{
    val *r = known_ints(t, nd, shape, NULL, x->oty);
    for (int64_t i = 0; r && i < r->k->numel; i++)
        ((int64_t *)r->k->data)[i] = kget(x->k, i);
    return r;
}

static bool reshape_to(tx *t, val *x, int nd, const int64_t *sh, val **out)
{
    if (foldable(x))
        return (*out = known_reshape(t, x, nd, sh)) != NULL;
    if (!(*out = reshape(t, x, nd, sh)))
        return false;
    if (*out == x)
        *out = copy_of(t, x);
    return typed(*out, x->oty) != NULL;
}

static bool x_reshape(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t sh[TL_MAXDIM];
    int n;
    if (opset(t) < 5) {
        if ((n = attr_ints(t, "shape", sh, TL_MAXDIM)) < 0)
            return n == -2 ? false : fail(t, "attribute \"shape\" is missing");
    } else if (!need(t, in, nin, 2) || !ints_of(t, in[1], "shape", sh, &n, TL_MAXDIM)) {
        return false;
    }
    bool allowzero = attr_i(t, "allowzero", 0) != 0;
    int64_t numel = 1, known_p = 1;
    int neg = -1;
    for (int i = 0; i < x->ndim; i++)
        numel *= x->dims[i];
    for (int i = 0; i < n; i++) {
        if (sh[i] == 0 && !allowzero) {
            if (i >= x->ndim)
                return fail(t, "shape entry %d is 0 (copy) past the input's %d dims", i, x->ndim);
            sh[i] = x->dims[i];
        }
        if (sh[i] == -1) {
            if (neg >= 0)
                return fail(t, "shape has two -1 entries");
            neg = i;
        } else if (sh[i] < 0) {
            return fail(t, "shape entry %lld is negative", (long long)sh[i]);
        } else {
            if (sh[i] && known_p > INT64_MAX / sh[i])
                return fail(t, "shape entry %lld makes too many elements", (long long)sh[i]);
            known_p *= sh[i];
        }
    }
    if (neg >= 0) {
        if (!known_p || numel % known_p)
            return fail(t, "cannot reshape %lld elements into the shape given", (long long)numel);
        sh[neg] = numel / known_p;
    } else if (known_p != numel) {
        char d[96];
        return fail(t, "cannot reshape %s into %lld elements", type_desc(x, d, sizeof d), (long long)known_p);
    }
    return reshape_to(t, x, n, sh, out);
}

static bool x_flatten(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t ax = attr_i(t, "axis", 1);
    if (ax < 0)
        ax += x->ndim;
    if (ax < 0 || ax > x->ndim)
        return fail(t, "axis %lld is out of range", (long long)attr_i(t, "axis", 1));
    int64_t sh[2] = {1, 1};
    for (int i = 0; i < x->ndim; i++)
        sh[i >= ax] *= x->dims[i];
    return reshape_to(t, x, 2, sh, out);
}

/* Squeeze / Unsqueeze: the axes from the attribute (before opset 13) or
 * the second input. */
static bool axes_of(tx *t, val **in, int nin, int64_t *axes, int *n, bool *given)
{
    *given = true;
    if (opset(t) < 13) {
        *n = attr_ints(t, "axes", axes, TL_MAXDIM);
        if (*n == -2)
            return false;
        if (*n < 0) {
            *n = 0;
            *given = false;
        }
        return true;
    }
    if (nin < 2 || !in[1]) {
        *n = 0;
        *given = false;
        return true;
    }
    return ints_of(t, in[1], "axes", axes, n, TL_MAXDIM);
}

static bool x_squeeze(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t axes[TL_MAXDIM], sh[TL_MAXDIM];
    int n, nd = 0;
    bool given, drop[TL_MAXDIM] = {0}, ok;
    if (!axes_of(t, in, nin, axes, &n, &given))
        return false;
    for (int i = 0; i < n; i++) {
        int a = norm_axis(t, axes[i], x->ndim, &ok);
        if (!ok)
            return false;
        if (x->dims[a] != 1)
            return fail(t, "axis %d has size %lld, not 1", a, (long long)x->dims[a]);
        drop[a] = true;
    }
    for (int i = 0; i < x->ndim; i++)
        if (!(given ? drop[i] : x->dims[i] == 1))
            sh[nd++] = x->dims[i];
    return reshape_to(t, x, nd, sh, out);
}

static bool x_unsqueeze(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t axes[TL_MAXDIM], sh[TL_MAXDIM];
    int n;
    bool given, ins[TL_MAXDIM] = {0}, ok;
    if (!axes_of(t, in, nin, axes, &n, &given))
        return false;
    int od = x->ndim + n;
    if (od > TL_MAXDIM)
        return fail(t, "the result would have %d dims (at most %d)", od, TL_MAXDIM);
    for (int i = 0; i < n; i++) {
        int a = norm_axis(t, axes[i], od, &ok);
        if (!ok)
            return false;
        if (ins[a])
            return fail(t, "axis %d is given twice", a);
        ins[a] = true;
    }
    for (int i = 0, j = 0; i < od; i++)
        sh[i] = ins[i] ? 1 : x->dims[j++];
    return reshape_to(t, x, od, sh, out);
}

static bool x_transpose(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t perm[TL_MAXDIM];
    int n = attr_ints(t, "perm", perm, TL_MAXDIM);
    if (n == -2)
        return false;
    if (n < 0)
        for (n = 0; n < x->ndim; n++)
            perm[n] = x->ndim - 1 - n;
    if (foldable(x)) {
        if (n != x->ndim)
            return fail(t, "perm has %d entries for %d dims", n, x->ndim);
        int64_t sh[TL_MAXDIM], str[TL_MAXDIM], s = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            str[d] = s;
            s *= x->dims[d];
        }
        for (int d = 0; d < n; d++) {
            if (perm[d] < 0 || perm[d] >= n)
                return fail(t, "perm entry %lld is out of range", (long long)perm[d]);
            sh[d] = x->dims[perm[d]];
        }
        val *r = known_ints(t, n, sh, NULL, x->oty);
        for (int64_t i = 0; r && i < r->k->numel; i++) {
            int64_t rem = i, src = 0;
            for (int d = n - 1; d >= 0; d--) {
                src += (rem % sh[d]) * str[perm[d]];
                rem /= sh[d];
            }
            ((int64_t *)r->k->data)[i] = kget(x->k, src);
        }
        return (out[0] = r) != NULL;
    }
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "axes", perm, n);
    return (out[0] = typed(call1(t, "transpose", x, a), x->oty)) != NULL;
}

static bool x_concat(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    bool ok, all = true;
    int nd = in[0]->ndim;
    int ax = norm_axis(t, attr_i(t, "axis", opset(t) < 4 ? 1 : 0), nd, &ok);
    if (!ok)
        return false;
    for (int i = 0; i < nin; i++) {
        if (!in[i])
            return fail(t, "input %d is missing", i + 1);
        all = all && foldable(in[i]);
    }
    if (all) {
        int64_t sh[TL_MAXDIM];
        memcpy(sh, in[0]->dims, sizeof sh);
        sh[ax] = 0;
        for (int i = 0; i < nin; i++) {
            if (in[i]->ndim != nd)
                return fail(t, "inputs of different ranks");
            for (int d = 0; d < nd; d++)
                if (d != ax && in[i]->dims[d] != sh[d])
                    return fail(t, "input %d has %lld along axis %d where input 1 has %lld: only the "
                                   "concatenation axis (%d) may differ", i + 1, (long long)in[i]->dims[d], d,
                                (long long)sh[d], ax);
            sh[ax] += in[i]->dims[ax];
        }
        val *r = known_ints(t, nd, sh, NULL, in[0]->oty);
        if (!r)
            return false;
        int64_t outer = 1, inner = 1, pos = 0;
        for (int d = 0; d < ax; d++)
            outer *= sh[d];
        for (int d = ax + 1; d < nd; d++)
            inner *= sh[d];
        for (int i = 0; i < nin; i++) {
            int64_t w = in[i]->dims[ax] * inner;
            for (int64_t o = 0; w && o < outer; o++)
                for (int64_t j = 0; j < w; j++)
                    ((int64_t *)r->k->data)[o * sh[ax] * inner + pos + j] = kget(in[i]->k, o * w + j);
            pos += w;
        }
        return (out[0] = r) != NULL;
    }
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    val *r = typed(call(t, "concat", nin, in, a), in[0]->oty);
    bool data = r && !r->k; /* (small ones are known already) */
    for (int i = 0; i < nin && data; i++)
        data = in[i]->k && in[i]->k->dtype == r->dt;
    /* float constants joined: still a call, its value known too, for the
     * shape positions that read it (Resize's scales) */
    int64_t outer = 1, inner = 1, pos = 0;
    tl_tensor *k = data && r->ndim ? tl_tensor_new(r->dt, r->ndim, r->dims, t->st) : NULL;
    for (int d = 0; k && d < r->ndim; d++) {
        if (d < ax)
            outer *= r->dims[d];
        else if (d > ax)
            inner *= r->dims[d];
    }
    for (int i = 0; k && i < nin; i++) {
        int64_t len = in[i]->dims[ax] * inner;
        for (int64_t o = 0; len && o < outer; o++)
            for (int64_t j = 0; j < len; j++)
                tl_tensor_set(k, o * r->dims[ax] * inner + pos + j, tl_tensor_get(in[i]->k, o * len + j));
        pos += len;
    }
    if (k) {
        r->k = k;
        r->weight = true;
    }
    return (out[0] = r) != NULL;
}

/* Known index data: [n] i64 taken along axis of x (host). */
static val *fold_take(tx *t, val *x, val *idx, int ax)
{
    int nd = x->ndim - 1 + idx->ndim;
    if (nd > TL_MAXDIM)
        return fail(t, "the result would have %d dims", nd), NULL;
    int64_t sh[TL_MAXDIM], outer = 1, inner = 1, n = x->dims[ax];
    int k = 0;
    for (int d = 0; d < ax; d++)
        outer *= (sh[k++] = x->dims[d]);
    for (int d = 0; d < idx->ndim; d++)
        sh[k++] = idx->dims[d];
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= (sh[k++] = x->dims[d]);
    val *r = known_ints(t, nd, sh, NULL, x->oty);
    if (!r)
        return NULL;
    int64_t m = idx->k->numel, *o = r->k->data;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < m; j++) {
            int64_t i = kget(idx->k, j);
            if (i < -n || i >= n)
                return fail(t, "index %lld is out of range for size %lld", (long long)i, (long long)n), NULL;
            i = i < 0 ? i + n : i;
            for (int64_t b = 0; b < inner; b++)
                o[(a * m + j) * inner + b] = kget(x->k, (a * n + i) * inner + b);
        }
    return r;
}

/* NonZero and Compress, whose result's shape follows the values of their
 * data: evaluated at load where those values are known there (constants,
 * small inputs given, integers from shapes), else an error naming the node. */
static bool load_values(tx *t, const val *v, const char *what)
{
    if (!v->k)
        return fail(t, "its %s is computed at run time, and the shape of its result depends on its values: tl "
                       "needs them at load (constants, or inputs of at most 16 elements given)", what);
    return true;
}

static bool x_nonzero(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1) || !at_most(t, in, nin, 1) || !load_values(t, in[0], "input"))
        return false;
    const val *x = in[0];
    if (x->ndim < 1)
        return fail(t, "a 0-d input (NonZero takes 1 dim or more)");
    int64_t n = x->k->numel, nz = 0;
    for (int64_t i = 0; i < n; i++)
        nz += tl_tensor_get(x->k, i) != 0; /* NaN counts, as NumPy's nonzero counts it */
    int64_t sh[2] = {x->ndim, nz};
    val *r = known_ints(t, 2, sh, NULL, TL_ONNX_INT64);
    if (!r)
        return false;
    int64_t *o = r->k->data;
    for (int64_t i = 0, j = 0; i < n; i++) {
        if (!(tl_tensor_get(x->k, i) != 0))
            continue;
        for (int64_t d = x->ndim - 1, rem = i; d >= 0; d--) { /* row d: the coordinates along axis d */
            o[d * nz + j] = rem % x->dims[d];
            rem /= x->dims[d];
        }
        j++;
    }
    return (out[0] = r) != NULL;
}

static val *fold_take(tx *t, val *x, val *idx, int ax);

static bool x_compress(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2) || !at_most(t, in, nin, 2) || !load_values(t, in[1], "condition"))
        return false;
    val *x = in[0], *c = in[1];
    if (c->ndim != 1)
        return fail(t, "its condition has %d dims, where it takes 1", c->ndim);
    int ax = 0;
    if (!attr(t, "axis")) { /* the input flattened */
        int64_t n = 1;
        for (int d = 0; d < x->ndim; d++)
            n *= x->dims[d];
        if (!(x = reshape(t, x, 1, &n)))
            return false;
    } else {
        bool ok;
        ax = norm_axis(t, attr_i(t, "axis", 0), x->ndim, &ok);
        if (!ok)
            return false;
    }
    if (c->dims[0] > x->dims[ax])
        return fail(t, "its condition has %lld entries for %lld along the axis", (long long)c->dims[0],
                    (long long)x->dims[ax]);
    int64_t nz = 0, *pos = tl_malloc((size_t)c->dims[0] + 1, sizeof *pos, "Compress's positions", t->st);
    if (!pos)
        return false;
    for (int64_t i = 0; i < c->dims[0]; i++) /* entries past the condition are dropped */
        if (tl_tensor_get(c->k, i) != 0)
            pos[nz++] = i;
    val *idx = known_ints(t, 1, &nz, pos, TL_ONNX_INT64);
    free(pos);
    if (!idx)
        return false;
    if (foldable(x))
        return (out[0] = fold_take(t, x, idx, ax)) != NULL;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    val *args[2] = {x, idx};
    return (out[0] = typed(call(t, "take", 2, args, a), x->oty)) != NULL;
}

static bool x_gather(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", 0), in[0]->ndim, &ok);
    if (!ok)
        return false;
    if (!is_int_type(in[1]->oty) || in[1]->oty == TL_ONNX_BOOL)
        return fail(t, "its indices are %s, not integers", tl_onnx_type_name(in[1]->oty));
    if (foldable(in[0]) && foldable(in[1]))
        return (out[0] = fold_take(t, in[0], in[1], ax)) != NULL;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    return (out[0] = typed(call(t, "take", 2, in, a), in[0]->oty)) != NULL;
}

static bool x_gather_elements(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", 0), in[0]->ndim, &ok);
    if (!ok)
        return false;
    /* indices smaller than the data on another axis read its first
     * elements there (as ONNX Runtime and torch.gather do; refused, until
     * tests/cli/onnx.txt's case): the data cut to them */
    val *args[2] = {in[0], in[1]};
    for (int d = 0; d < args[0]->ndim && args[0]->ndim == in[1]->ndim; d++)
        if (d != ax && in[1]->dims[d] < args[0]->dims[d] &&
            !(args[0] = typed(slice_of(t, args[0], d, 0, in[1]->dims[d]), in[0]->oty)))
            return false;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    return (out[0] = typed(call(t, "gather", 2, args, a), in[0]->oty)) != NULL;
}

/* One axis of a Slice with step != 0: Python's clamping, as ONNX defines. */
static void slice_bounds(int64_t n, int64_t *start, int64_t *end, int64_t step)
{
    int64_t s = *start, e = *end;
    s = s < 0 ? s + n : s;
    e = e < 0 ? e + n : e;
    if (step > 0) {
        s = s < 0 ? 0 : s > n ? n : s;
        e = e < 0 ? 0 : e > n ? n : e;
    } else {
        s = s < 0 ? -1 : s > n - 1 ? n - 1 : s;
        e = e < -1 ? -1 : e > n - 1 ? n - 1 : e;
    }
    *start = s;
    *end = e;
}

/* A Slice whose starts and ends follow a loop's step (start = step + a,
 * end = step + b, one axis: x[i:i+1] in a loop): b - a elements at a
 * place that moves, a take of start + [0, 1, ..., b - a - 1] along the
 * axis, where every step's bounds lie inside it (ONNX's clamping then
 * changes nothing). */
static bool slice_moving(tx *t, val **in, int nin, val **out)
{
    val *x = in[0], *s = in[1], *e = in[2];
    int64_t ax[TL_MAXDIM] = {0}, sp[TL_MAXDIM] = {1};
    int na = 1, np = 1;
    if (nin > 3 && in[3] && !ints_of(t, in[3], "axes", ax, &na, TL_MAXDIM))
        return false;
    if (nin > 4 && in[4] && !ints_of(t, in[4], "steps", sp, &np, TL_MAXDIM))
        return false;
    if (na != 1 || np != 1)
        return fail(t, "starts, ends, axes and steps differ in length");
    bool ok;
    int a = norm_axis(t, ax[0], x->ndim, &ok);
    if (!ok)
        return false;
    int64_t n = x->dims[a], cnt = e->step_add - s->step_add, lo = s->step->lo + s->step_add,
            hi = s->step->hi + e->step_add;
    if (sp[0] != 1 || cnt < 1 || lo < 0 || hi > n)
        return fail(t, "its starts and ends follow the loop's step (step + %lld to step + %lld, steps %lld to %lld, "
                       "axis of %lld): tl translates such a slice when it takes at least one element with step 1 and "
                       "every step's bounds lie inside the axis", (long long)s->step_add, (long long)e->step_add,
                    (long long)s->step->lo, (long long)s->step->hi, (long long)n);
    val *ar = known_ints(t, 1, &cnt, NULL, TL_ONNX_INT64);
    if (!ar)
        return false;
    for (int64_t j = 0; j < cnt; j++)
        ((int64_t *)ar->k->data)[j] = j;
    ar->weight = true; /* added to a value of the run: never folded */
    val *sum[2] = {s, ar}, *idx = call(t, "add", 2, sum, NULL);
    if (!idx)
        return false;
    idx->oty = TL_ONNX_INT64;
    cJSON *o = cJSON_CreateObject();
    put_num(o, "axis", a);
    val *args[2] = {x, idx};
    if (!(out[0] = call(t, "take", 2, args, o)))
        return false;
    out[0]->oty = x->oty;
    return true;
}

static bool x_slice(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    if (opset(t) >= 10 && nin >= 3 && in[1] && in[2] && in[1]->step && in[1]->step == in[2]->step)
        return slice_moving(t, in, nin, out);
    val *x = in[0];
    int64_t st[TL_MAXDIM], en[TL_MAXDIM], ax[TL_MAXDIM], sp[TL_MAXDIM];
    int ns, ne, na = -1, np = -1;
    if (opset(t) < 10) {
        if ((ns = attr_ints(t, "starts", st, TL_MAXDIM)) < 0 || (ne = attr_ints(t, "ends", en, TL_MAXDIM)) < 0)
            return fail(t, "starts and ends are required");
        if ((na = attr_ints(t, "axes", ax, TL_MAXDIM)) == -2)
            return false;
    } else {
        if (!need(t, in, nin, 3) || !ints_of(t, in[1], "starts", st, &ns, TL_MAXDIM) ||
            !ints_of(t, in[2], "ends", en, &ne, TL_MAXDIM))
            return false;
        if (nin > 3 && in[3] && !ints_of(t, in[3], "axes", ax, &na, TL_MAXDIM))
            return false;
        if (nin > 4 && in[4] && !ints_of(t, in[4], "steps", sp, &np, TL_MAXDIM))
            return false;
    }
    if (ns != ne || (na >= 0 && na != ns) || (np >= 0 && np != ns))
        return fail(t, "starts, ends, axes and steps differ in length");
    val *r = x;
    for (int i = 0; i < ns; i++) {
        bool ok;
        int a = norm_axis(t, na >= 0 ? ax[i] : i, x->ndim, &ok);
        if (!ok)
            return false;
        int64_t step = np >= 0 ? sp[i] : 1, s = st[i], e = en[i], n = r->dims[a];
        if (!step)
            return fail(t, "a step of 0");
        slice_bounds(n, &s, &e, step);
        int64_t cnt = step > 0 ? (e > s ? (e - s + step - 1) / step : 0) : (s > e ? (s - e - step - 1) / -step : 0);
        if (step > 0 && !foldable(r)) {
            if (s == 0 && e == n && step == 1)
                continue;
            cJSON *o = cJSON_CreateObject();
            put_num(o, "axis", a);
            put_num(o, "start", (double)s);
            put_num(o, "stop", (double)e);
            put_num(o, "step", (double)step);
            val *y = call1(t, "slice", r, o);
            if (!y)
                return false;
            y->oty = r->oty;
            r = y;
            continue;
        }
        /* negative steps, or known data: the indices taken */
        val *idx = known_ints(t, 1, &cnt, NULL, TL_ONNX_INT64);
        if (!idx)
            return false;
        for (int64_t j = 0; j < cnt; j++)
            ((int64_t *)idx->k->data)[j] = s + j * step;
        if (foldable(r)) {
            r = fold_take(t, r, idx, a);
        } else {
            cJSON *o = cJSON_CreateObject();
            put_num(o, "axis", a);
            val *args[2] = {r, idx}, *y = call(t, "take", 2, args, o);
            if (y)
                y->oty = r->oty;
            r = y;
        }
        if (!r)
            return false;
    }
    if (r == x)
        return reshape_to(t, x, x->ndim, x->dims, out);
    return (out[0] = r) != NULL;
}

/* Expand: bidirectional broadcast to the shape given. */
static bool x_expand(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    int64_t sh[TL_MAXDIM], os[TL_MAXDIM];
    int n, od;
    if (!ints_of(t, in[1], "shape", sh, &n, TL_MAXDIM))
        return false;
    if (!tl_broadcast_shapes(in[0]->ndim, in[0]->dims, n, sh, &od, os))
        return fail(t, "the input does not broadcast to the shape given");
    if (foldable(in[0])) {
        val *r = known_ints(t, od, os, NULL, in[0]->oty);
        int64_t str[TL_MAXDIM];
        bstrides(in[0], od, os, str);
        for (int64_t i = 0; r && i < r->k->numel; i++)
            ((int64_t *)r->k->data)[i] = kget(in[0]->k, bindex(i, od, os, str));
        return (out[0] = r) != NULL;
    }
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "shape", os, od);
    return (out[0] = typed(call1(t, "broadcast_to", in[0], a), in[0]->oty)) != NULL;
}

/* Tile: x as [1, d0, 1, d1...] broadcast to [r0, d0, r1, d1...], merged. */
static bool x_tile(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    val *x = in[0];
    int64_t rep[TL_MAXDIM], s1[TL_MAXDIM], s2[TL_MAXDIM], s3[TL_MAXDIM];
    int n;
    if (!ints_of(t, in[1], "repeats", rep, &n, TL_MAXDIM))
        return false;
    if (n != x->ndim || 2 * n > TL_MAXDIM)
        return fail(t, "repeats has %d entries for %d dims", n, x->ndim);
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0 || (x->dims[i] && rep[i] > INT64_MAX / x->dims[i] / 2))
            return fail(t, "repeats entry %lld is negative or too large", (long long)rep[i]);
        s1[2 * i] = 1;
        s1[2 * i + 1] = x->dims[i];
        s2[2 * i] = rep[i];
        s2[2 * i + 1] = x->dims[i];
        s3[i] = rep[i] * x->dims[i];
    }
    val *a = reshape(t, x, 2 * n, s1);
    cJSON *o = cJSON_CreateObject();
    put_ints(o, "shape", s2, 2 * n);
    val *b = a ? call1(t, "broadcast_to", a, o) : (cJSON_Delete(o), NULL);
    return (out[0] = typed(b ? reshape(t, b, n, s3) : NULL, x->oty)) != NULL;
}

static bool x_constant(tx *t, val **in, int nin, val **out, int nout)
{
    (void)in, (void)nin, (void)nout;
    for (size_t i = 0; i < t->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = t->node->attribute[i];
        const char *nm = a->name ? a->name : "";
        tl_tensor *k = NULL;
        int oty = TL_ONNX_FLOAT;
        if (!strcmp(nm, "value") && a->t) {
            tl_status st = {0};
            oty = a->t->has_data_type ? a->t->data_type : 0;
            if (!(k = tl_onnx_tensor(t->m->f, a->t, &st)))
                return fail(t, "%s", st.msg);
        } else if (!strcmp(nm, "value_float") || !strcmp(nm, "value_floats")) {
            int64_t n = nm[11] ? (int64_t)a->n_floats : -1;
            k = tl_tensor_new(TL_F32, n >= 0, &n, t->st);
            for (int64_t j = 0; k && j < k->numel; j++)
                ((float *)k->data)[j] = n >= 0 ? a->floats[j] : a->f;
        } else if (!strcmp(nm, "value_int") || !strcmp(nm, "value_ints")) {
            int64_t n = nm[9] ? (int64_t)a->n_ints : -1;
            oty = TL_ONNX_INT64;
            k = tl_tensor_new(TL_I64, n >= 0, &n, t->st);
            for (int64_t j = 0; k && j < k->numel; j++)
                ((int64_t *)k->data)[j] = n >= 0 ? a->ints[j] : a->i;
        } else {
            continue;
        }
        if (!k)
            return false;
        return (out[0] = known(t, k, oty)) != NULL;
    }
    return fail(t, "no value attribute tl reads (value, value_float(s), value_int(s))");
}

static bool x_constant_of_shape(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    int64_t sh[TL_MAXDIM];
    int n;
    if (!need(t, in, nin, 1) || !ints_of(t, in[0], "shape", sh, &n, TL_MAXDIM))
        return false;
    const Onnx__AttributeProto *a = attr(t, "value");
    int oty = TL_ONNX_FLOAT;
    double v = 0;
    if (a && a->t) {
        tl_status st = {0};
        oty = a->t->has_data_type ? a->t->data_type : 0;
        tl_tensor *k = tl_onnx_tensor(t->m->f, a->t, &st);
        if (!k)
            return fail(t, "%s", st.msg);
        if (!ox_one_element(t, k->numel, "value")) {
            tl_tensor_unref(k);
            return false;
        }
        v = tl_tensor_get(k, 0);
        if (tl_dtype_is_int(k->dtype))
            v = (double)kget(k, 0);
        tl_tensor_unref(k);
    }
    tl_dtype dt = oty == TL_ONNX_FLOAT ? TL_F32 : oty == TL_ONNX_DOUBLE ? TL_F64 : TL_I64;
    tl_tensor *k = tl_tensor_new(dt, n, sh, t->st);
    for (int64_t i = 0; k && i < k->numel; i++) {
        if (dt == TL_I64)
            ((int64_t *)k->data)[i] = (int64_t)v;
        else
            tl_tensor_set(k, i, v);
    }
    return k && (out[0] = known(t, k, oty)) != NULL;
}

static bool x_range(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 3))
        return false;
    for (int i = 0; i < 3; i++)
        if (!in[i]->k)
            return fail(t, "its bounds are computed at run time; tl needs them at load");
    int oty = in[0]->oty;
    double s, e, d;
    if (!one_number(t, in[0], "start", &s) || !one_number(t, in[1], "limit", &e) || !one_number(t, in[2], "delta", &d))
        return false;
    if (!d)
        return fail(t, "a delta of 0");
    double c = ceil((e - s) / d);
    if (c > (double)((int64_t)1 << 32)) /* infinity too */
        return fail(t, "%.0f elements", c);
    int64_t n = c > 0 ? (int64_t)c : 0;
    if (is_int_type(oty)) {
        val *r = known_ints(t, 1, &n, NULL, oty);
        int64_t si = kget(in[0]->k, 0), di = kget(in[2]->k, 0);
        for (int64_t i = 0; r && i < n; i++)
            ((int64_t *)r->k->data)[i] = si + i * di;
        return (out[0] = r) != NULL;
    }
    tl_tensor *k = tl_tensor_new(in[0]->k->dtype, 1, &n, t->st);
    for (int64_t i = 0; k && i < n; i++)
        tl_tensor_set(k, i, in[0]->k->dtype == TL_F32 ? (double)((float)s + (float)i * (float)d) : s + (double)i * d);
    return k && (out[0] = known(t, k, oty)) != NULL;
}

static bool onnx_dtype(int oty, tl_dtype call, tl_dtype *dt)
{
    switch (oty) {
    case TL_ONNX_FLOAT: *dt = TL_F32; return true;
    case TL_ONNX_DOUBLE: *dt = TL_F64; return true;
    case TL_ONNX_INT32: *dt = TL_I32; return true;
    case TL_ONNX_INT64: *dt = TL_I64; return true;
    case TL_ONNX_BOOL: *dt = call; return true;
    default: return false;
    }
}

static bool cast_to(tx *t, val *x, int to, val **out)
{
    tl_dtype dt;
    if (!onnx_dtype(to, t->call, &dt))
        return fail(t, "a cast to %s, which tl does not compute in", tl_onnx_type_name(to));
    if (foldable(x) && is_int_type(to)) {
        val *r = known_ints(t, x->ndim, x->dims, NULL, to);
        for (int64_t i = 0; r && i < r->k->numel; i++) {
            int64_t v = kget(x->k, i);
            ((int64_t *)r->k->data)[i] = to == TL_ONNX_BOOL ? v != 0 : to == TL_ONNX_INT32 ? (int32_t)v : v;
        }
        return (*out = r) != NULL;
    }
    val *r = x;
    if (to == TL_ONNX_BOOL && x->oty != TL_ONNX_BOOL) {
        if (!(r = call2(t, "ne", x, scalar(t, x->dt, 0))))
            return false;
        return (*out = as_bool(t, r)) != NULL;
    }
    if (r->dt != dt) {
        cJSON *a = cJSON_CreateObject();
        put_str(a, "dtype", tl_dtype_name(dt));
        if (!(r = call1(t, "cast", r, a)))
            return false;
    } else if (!(r = copy_of(t, x))) {
        return false;
    }
    return (*out = typed(r, to)) != NULL;
}

static bool x_cast(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    return cast_to(t, in[0], (int)attr_i(t, "to", 0), out);
}

static bool x_castlike(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    return need(t, in, nin, 2) && cast_to(t, in[0], in[1]->oty, out);
}

static bool x_split(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", 0), x->ndim, &ok);
    if (!ok)
        return false;
    int64_t sp[MAXIO];
    int n = -1;
    if (opset(t) < 13) {
        if ((n = attr_ints(t, "split", sp, MAXIO)) == -2)
            return false;
        if (n < 0 && opset(t) < 2 && nin > 1 && in[1] && !ints_of(t, in[1], "split", sp, &n, MAXIO))
            return false;
    } else if (nin > 1 && in[1] && !ints_of(t, in[1], "split", sp, &n, MAXIO)) {
        return false;
    }
    int64_t len = x->dims[ax];
    if (n < 0) {
        int parts = opset(t) >= 18 && attr(t, "num_outputs") ? (int)attr_i(t, "num_outputs", nout) : nout;
        if (parts < 1 || parts > MAXIO)
            return fail(t, "%d outputs", parts);
        if (opset(t) < 18 && len % parts) /* equal parts only (it split unevenly, until tests/cli/onnx.txt's case) */
            return fail(t, "axis %d of size %lld does not split into %d equal parts (a shorter last part takes "
                        "opset 18's num_outputs, or give the sizes)", ax, (long long)len, parts);
        int64_t each = (len + parts - 1) / parts;
        for (n = 0; n < parts; n++)
            sp[n] = each * (n + 1) <= len ? each : len - each * n > 0 ? len - each * n : 0;
    }
    if (n != nout)
        return fail(t, "%d parts for %d outputs", n, nout);
    int64_t pos = 0;
    for (int i = 0; i < n; i++)
        if (sp[i] < 0) /* [4, -1] of 3 added up, and was cut, until tests/cli/onnx.txt's case */
            return fail(t, "split size %d is %lld: sizes are 0 or more", i + 1, (long long)sp[i]);
    for (int i = 0; i < n; i++) {
        out[i] = slice_of(t, x, ax, pos, pos + sp[i]);
        pos += sp[i];
        if (!out[i])
            return false;
        out[i]->oty = x->oty;
    }
    if (pos != len)
        return fail(t, "the parts add up to %lld, not %lld", (long long)pos, (long long)len);
    return true;
}

static bool x_pad(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t p[2 * TL_MAXDIM], axes[TL_MAXDIM];
    int n, na = -1;
    double value = attr_f(t, "value", 0);
    val *cv = NULL; /* a constant_value given at run time (an input's, or computed from one) */
    if (opset(t) < 11) {
        if ((n = attr_ints(t, opset(t) < 2 ? "paddings" : "pads", p, 2 * TL_MAXDIM)) < 0)
            return n == -2 ? false : fail(t, "pads are required");
    } else {
        if (!need(t, in, nin, 2) || !ints_of(t, in[1], "pads", p, &n, 2 * TL_MAXDIM))
            return false;
        if (nin > 2 && in[2] && (!in[2]->k || in[2]->shadow)) {
            int64_t n1 = 1;
            for (int d = 0; d < in[2]->ndim; d++)
                n1 *= in[2]->dims[d];
            if (n1 != 1 || in[2]->ndim > 1)
                return fail(t, "constant_value must hold one value, got %d dims", in[2]->ndim);
            cv = in[2];
        } else if (nin > 2 && in[2] && !one_number(t, in[2], "constant_value", &value)) {
            return false;
        }
        if (nin > 3 && in[3] && !ints_of(t, in[3], "axes", axes, &na, TL_MAXDIM))
            return false;
    }
    int nd = x->ndim;
    int64_t full[2 * TL_MAXDIM] = {0};
    if (na < 0) {
        if (n != 2 * nd)
            return fail(t, "pads has %d entries for %d dims", n, nd);
        for (int i = 0; i < nd; i++) {
            full[2 * i] = p[i];
            full[2 * i + 1] = p[i + nd];
        }
    } else {
        if (n != 2 * na)
            return fail(t, "pads has %d entries for %d axes", n, na);
        for (int i = 0; i < na; i++) {
            bool ok;
            int a = norm_axis(t, axes[i], nd, &ok);
            if (!ok)
                return false;
            full[2 * a] = p[i];
            full[2 * a + 1] = p[i + na];
        }
    }
    char buf[32];
    const char *mode = attr_s(t, "mode", "constant", buf, sizeof buf);
    cJSON *a = cJSON_CreateObject(), *pairs = cJSON_CreateArray();
    for (int i = 0; i < nd; i++)
        cJSON_AddItemToArray(pairs, ints_json(full + 2 * i, 2));
    cJSON_AddItemToObject(a, "pads", pairs);
    put_str(a, "mode", mode);
    if (!strcmp(mode, "constant") && cv) {
        /* a value known only at run time, differentiated like any input:
         * pad(x, 0) + c * pad(zeros, 1), the second a mask of the pad cells */
        cJSON *b = cJSON_Duplicate(a, true);
        put_num(a, "value", 0);
        put_num(b, "value", 1);
        val *zeros = filled(t, x->dt, x->ndim, x->dims, 0);
        val *mask = zeros ? call1(t, "pad", zeros, b) : (cJSON_Delete(b), NULL);
        val *px = mask ? call1(t, "pad", x, a) : (cJSON_Delete(a), NULL);
        int64_t none[1] = {0};
        val *c = px && cv->ndim ? reshape(t, cv, 0, none) : cv;
        val *cm = px && c ? call2(t, "mul", mask, c) : NULL;
        return (out[0] = cm ? typed(call2(t, "add", px, cm), x->oty) : NULL) != NULL;
    }
    if (!strcmp(mode, "constant"))
        put_num(a, "value", value);
    return (out[0] = typed(call1(t, "pad", x, a), x->oty)) != NULL;
}

/* The maximum (or minimum) of integer x over the n axes given (n <= 0:
 * every axis), as ReduceMax does: the elementwise maximum of the two
 * halves of an axis, until one element is left.  (tl's max and min
 * reductions take floats, and int64 values past 2^53 have no exact
 * float; the halves give exact values in about 3 log2(length) calls.) */
static val *int_extreme(tx *t, val *x, bool max, const int64_t *axes, int n, bool keep)
{
    int64_t all[TL_MAXDIM];
    if (n <= 0) {
        for (int i = 0; i < x->ndim; i++)
            all[i] = i;
        axes = all, n = x->ndim;
    }
    for (int i = 0; i < n && x; i++) {
        int ax = (int)axes[i];
        if (x->dims[ax] == 0)
            return fail(t, "axis %d of the input is empty: an integer maximum or minimum of nothing has no value",
                        ax), NULL;
        while (x && x->dims[ax] > 1) {
            int64_t len = x->dims[ax], h = len / 2;
            val *lo = slice_of(t, x, ax, 0, h), *hi = lo ? slice_of(t, x, ax, h, 2 * h) : NULL;
            val *m = hi ? call2(t, max ? "maximum" : "minimum", lo, hi) : NULL;
            if (m && len % 2) {
                val *two[2] = {m, slice_of(t, x, ax, 2 * h, len)};
                cJSON *c = cJSON_CreateObject();
                put_num(c, "axis", ax);
                m = two[1] ? call(t, "concat", 2, two, c) : (cJSON_Delete(c), NULL);
            }
            x = m;
        }
    }
    if (!x || keep)
        return x;
    int64_t sh[TL_MAXDIM];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        bool gone = false;
        for (int i = 0; i < n; i++)
            gone = gone || axes[i] == d;
        if (!gone)
            sh[nd++] = x->dims[d];
    }
    return reshape(t, x, nd, sh);
}

/* Reductions: axes from the attribute, or (ReduceSum from 13, the others
 * from 18) the second input. */
static bool x_reduce(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    const char *op = t->node->op_type + 6;
    val *x = in[0];
    int64_t axes[TL_MAXDIM];
    int n = -1;
    bool from_input = opset(t) >= (strcmp(op, "Sum") ? 18 : 13);
    if (!from_input) {
        if ((n = attr_ints(t, "axes", axes, TL_MAXDIM)) == -2)
            return false;
    } else if (nin > 1 && in[1]) {
        if (!ints_of(t, in[1], "axes", axes, &n, TL_MAXDIM))
            return false;
    }
    bool keep = attr_i(t, "keepdims", 1) != 0;
    if (n <= 0 && from_input && attr_i(t, "noop_with_empty_axes", 0))
        return reshape_to(t, x, x->ndim, x->dims, out);
    cJSON *a = cJSON_CreateObject();
    if (n > 0) {
        for (int i = 0; i < n; i++) {
            bool ok;
            axes[i] = norm_axis(t, axes[i], x->ndim, &ok);
            if (!ok)
                return cJSON_Delete(a), false;
        }
        put_ints(a, "axes", axes, n);
    }
    put_bool(a, "keepdims", keep);
    if (tl_dtype_is_int(x->dt) && (!strcmp(op, "Max") || !strcmp(op, "Min"))) {
        cJSON_Delete(a);
        val *y = typed(int_extreme(t, x, op[1] == 'a', axes, n, keep), x->oty);
        return (out[0] = y) != NULL;
    }
    if (tl_dtype_is_int(x->dt) && (!strcmp(op, "LogSum") || !strcmp(op, "LogSumExp") || !strcmp(op, "L2") ||
                                   !strcmp(op, "Mean")))
        return cJSON_Delete(a), fail(t, "the input is %s: tl computes Reduce%s on float data (ONNX leaves "
                                        "its integer rounding to the runtime)", tl_onnx_type_name(x->oty), op);
    val *y = NULL, *pre = x;
    const char *tl;
    if (!strcmp(op, "L1"))
        pre = call1(t, "abs", x, NULL), tl = "sum";
    else if (!strcmp(op, "L2") || !strcmp(op, "SumSquare"))
        pre = tl_dtype_is_int(x->dt) ? call2(t, "mul", x, x) : call1(t, "square", x, NULL), tl = "sum";
    else if (!strcmp(op, "LogSum") || !strcmp(op, "Sum"))
        tl = "sum";
    else if (!strcmp(op, "LogSumExp"))
        tl = "logsumexp";
    else if (!strcmp(op, "Mean"))
        tl = "mean";
    else if (!strcmp(op, "Max"))
        tl = "max";
    else if (!strcmp(op, "Min"))
        tl = "min";
    else
        tl = "prod";
    if (pre)
        y = call1(t, tl, pre, a);
    else
        cJSON_Delete(a);
    if (y && !strcmp(op, "L2"))
        y = call1(t, "sqrt", y, NULL);
    if (y && !strcmp(op, "LogSum"))
        y = call1(t, "log", y, NULL);
    if (y)
        y->oty = x->oty;
    return (out[0] = y) != NULL;
}

static val *cast_dt(tx *t, val *x, tl_dtype dt);

static bool x_argmax(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", 0), in[0]->ndim, &ok);
    if (!ok)
        return false;
    val *x = in[0];
    bool max = !strcmp(t->node->op_type, "ArgMax"), mask = x->dt == TL_I64;
    if (mask) { /* past 2^53 no exact float: the first (or last) place equal to the maximum (minimum) */
        int64_t axv = ax;
        val *m = int_extreme(t, x, max, &axv, 1, true);
        if (!m || !(x = cast_dt(t, call2(t, "eq", x, m), TL_F64)))
            return false;
    }
    if (x->dt == TL_I32 && !(x = cast_dt(t, x, TL_F64))) /* int32 values are exact f64 values */
        return false;
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    put_bool(a, "keepdims", attr_i(t, "keepdims", 1) != 0);
    put_bool(a, "select_last_index", attr_i(t, "select_last_index", 0) != 0);
    return (out[0] = call1(t, max || mask ? "argmax" : "argmin", x, a)) != NULL;
}

static bool x_cumsum(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    int64_t ax;
    int n;
    if (!need(t, in, nin, 2) || !ints_of(t, in[1], "axis", &ax, &n, 1))
        return false;
    bool ok;
    int a = norm_axis(t, ax, in[0]->ndim, &ok);
    if (!ok)
        return false;
    cJSON *o = cJSON_CreateObject();
    put_num(o, "axis", a);
    put_bool(o, "exclusive", attr_i(t, "exclusive", 0) != 0);
    put_bool(o, "reverse", attr_i(t, "reverse", 0) != 0);
    return (out[0] = typed(call1(t, "cumsum", in[0], o), in[0]->oty)) != NULL;
}

static bool x_depth_space(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    if (x->ndim != 4)
        return fail(t, "x must be [N, C, H, W]");
    int64_t b = attr_i(t, "blocksize", 0), N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (b < 1)
        return fail(t, "blocksize must be positive");
    int64_t s1[6], p[6], s2[4];
    if (!strcmp(t->node->op_type, "DepthToSpace")) {
        char buf[8];
        bool crd = !strcmp(attr_s(t, "mode", "DCR", buf, sizeof buf), "CRD");
        if (C % (b * b))
            return fail(t, "channels %lld are not a multiple of blocksize^2", (long long)C);
        int64_t c = C / (b * b);
        int64_t a1[6] = {N, b, b, c, H, W}, a2[6] = {N, c, b, b, H, W}, q1[6] = {0, 3, 4, 1, 5, 2}, q2[6] = {0, 1, 4, 2, 5, 3};
        memcpy(s1, crd ? a2 : a1, sizeof s1);
        memcpy(p, crd ? q2 : q1, sizeof p);
        int64_t o[4] = {N, c, H * b, W * b};
        memcpy(s2, o, sizeof s2);
    } else {
        if (H % b || W % b)
            return fail(t, "spatial sizes are not multiples of blocksize");
        int64_t a1[6] = {N, C, H / b, b, W / b, b}, q1[6] = {0, 3, 5, 1, 2, 4}, o[4] = {N, C * b * b, H / b, W / b};
        memcpy(s1, a1, sizeof s1);
        memcpy(p, q1, sizeof p);
        memcpy(s2, o, sizeof s2);
    }
    val *r = reshape(t, x, 6, s1);
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "axes", p, 6);
    r = r ? call1(t, "transpose", r, a) : (cJSON_Delete(a), NULL);
    return r && (out[0] = reshape(t, r, 4, s2)) != NULL;
}

/* ---------- layers, losses, indexing and draws (more) ---------- */

static val *cast_dt(tx *t, val *x, tl_dtype dt)
{
    if (!x || x->dt == dt)
        return x;
    cJSON *a = cJSON_CreateObject();
    put_str(a, "dtype", tl_dtype_name(dt));
    return call1(t, "cast", x, a);
}

static val *permute(tx *t, val *x, int n, const int64_t *perm)
{
    bool id = true;
    for (int i = 0; i < n; i++)
        id = id && perm[i] == i;
    if (!x || id)
        return x;
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "axes", perm, n);
    return typed(call1(t, "transpose", x, a), x->oty);
}

/* x's last axis moved to axis ax. */
static val *last_to(tx *t, val *x, int ax)
{
    int64_t p[TL_MAXDIM];
    if (!x)
        return NULL;
    for (int i = 0, k = 0; i < x->ndim; i++)
        p[i] = i == ax ? x->ndim - 1 : k++;
    return permute(t, x, x->ndim, p);
}

static val *axes_call(tx *t, const char *op, val *x, int n, const int64_t *axes, bool keep)
{
    cJSON *a = cJSON_CreateObject();
    if (n >= 0)
        put_ints(a, "axes", axes, n);
    put_bool(a, "keepdims", keep);
    return x ? call1(t, op, x, a) : (cJSON_Delete(a), NULL);
}

static val *axis_call(tx *t, const char *op, val *x, int ax)
{
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    return x ? call1(t, op, x, a) : (cJSON_Delete(a), NULL);
}

/* A value of this shape filled with c (a broadcast scalar: no big constant). */
static val *filled(tx *t, tl_dtype dt, int nd, const int64_t *shape, double c)
{
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "shape", shape, nd);
    return call1(t, "broadcast_to", scalar(t, dt, c), a);
}

/* Float values of a known input for a shape position (Resize's scales). */
static bool floats_of(tx *t, const val *v, const char *what, double *out, int *n, int max)
{
    if (!known_entries(t, v, what, max))
        return false;
    for (int64_t i = 0; i < v->k->numel; i++)
        out[i] = tl_dtype_is_int(v->k->dtype) ? (double)kget(v->k, i) : tl_tensor_get(v->k, i);
    *n = (int)v->k->numel;
    return true;
}

/* Resize (10..18) and Upsample (7, 9): tl's resize over the spatial axes;
 * N and C keep their sizes. */
/* Resize as ONNX's reference computes it, for what tl's resize does not
 * do (tf_half_pixel_for_nn and tf_crop_and_resize coordinates,
 * exclude_outside, antialias, align_corners where input size x scale is
 * fractional): each spatial axis on its own, output o reading the n input
 * positions nearest its source coordinate (edge values past the ends)
 * with the mode's weights: a take where each output copies one input, else
 * a matmul by the [in, out] weights; outputs whose coordinate falls
 * outside tf_crop_and_resize's box are the extrapolation value. */
typedef struct rzspec {
    const char *mode, *coord, *near;
    double A, ext;
    bool exclude, antialias;
} rzspec;

static double cubic_w(double x, double A)
{
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    return x < 2 ? ((A * x - 5 * A) * x + 8 * A) * x - 4 * A : 0;
}

/* The weights for a source coordinate ratio past the tap before it
 * (ratio in (0, 1]); their count. */
static int rz_coeffs(const rzspec *z, double ratio, double scale, double *c, int max)
{
    if (!strcmp(z->mode, "nearest")) {
        bool second = ratio == 1 || !strcmp(z->near, "ceil") ||
                      (!strcmp(z->near, "round_prefer_floor") && ratio > 0.5) ||
                      (!strcmp(z->near, "round_prefer_ceil") && ratio >= 0.5);
        c[0] = !second, c[1] = second;
        return 2;
    }
    bool lin = !strcmp(z->mode, "linear");
    if (!z->antialias) {
        if (lin)
            return c[0] = 1 - ratio, c[1] = ratio, 2;
        c[0] = cubic_w(ratio + 1, z->A), c[1] = cubic_w(ratio, z->A);
        c[2] = cubic_w(1 - ratio, z->A), c[3] = cubic_w(2 - ratio, z->A);
        return 4;
    }
    scale = scale < 1 ? scale : 1; /* the kernel widened by 1/scale when shrinking */
    int64_t start = (int64_t)floor((lin ? -1 : -2) / scale) + 1, n = 2 - 2 * start;
    if (n > max)
        return -1;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = ((double)(start + i) - ratio) * scale;
        c[i] = lin ? fmax(0, fmin(1, 1 - fabs(a))) : cubic_w(a, z->A);
        sum += c[i];
    }
    for (int64_t i = 0; i < n; i++)
        c[i] /= sum;
    return (int)n;
}

/* Axis of input size n, output size m: w [m, n] row-major (zeroed by the
 * caller), ext[o] set where output o is outside the crop box. */
static bool rz_axis(tx *t, const rzspec *z, int64_t n, int64_t m, double scale, double r0, double r1, double *w,
                    bool *ext)
{
    int max = 4 + 4 * (int)fmin(1e6, ceil(2 / fmin(scale, 1)));
    double *c = malloc(sizeof *c * (size_t)max);
    if (!c)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
    double ow = scale * (double)n;
    for (int64_t o = 0; o < m; o++) {
        double x, xo = (double)o;
        const char *cm = z->coord;
        if (!strcmp(cm, "align_corners"))
            x = ow == 1 ? 0 : xo * (double)(n - 1) / (ow - 1);
        else if (!strcmp(cm, "asymmetric"))
            x = xo / scale;
        else if (!strcmp(cm, "tf_crop_and_resize"))
            x = (ow == 1 ? (r1 - r0) * (double)(n - 1) / 2 : xo * (r1 - r0) * (double)(n - 1) / (ow - 1)) +
                r0 * (double)(n - 1);
        else if (!strcmp(cm, "pytorch_half_pixel"))
            x = ow == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
        else if (!strcmp(cm, "tf_half_pixel_for_nn"))
            x = (xo + 0.5) / scale;
        else
            x = (xo + 0.5) / scale - 0.5;
        ext[o] = !strcmp(cm, "tf_crop_and_resize") && (x < 0 || x > (double)(n - 1));
        if (ext[o])
            continue;
        double fl = floor(x), ratio = x == fl ? 1 : x - fl;
        int k = rz_coeffs(z, ratio, scale, c, max);
        if (k < 0)
            return free(c), fail(t, "an antialiasing kernel of over %d taps", max);
        /* the k nearest positions (ties: the lower) among the input padded
         * by ceil(k / 2) edge copies on each side */
        int64_t pw = (k + 1) / 2, lo = -pw, hi = n + pw - 1;
        int64_t a = x - fl <= 0.5 ? (int64_t)fl : (int64_t)fl + 1;
        a = a < lo ? lo : a > hi ? hi : a;
        int64_t b = a;
        for (int j = 1; j < k; j++) {
            bool left = a > lo && (b >= hi || x - (double)(a - 1) <= (double)(b + 1) - x);
            if (left)
                a--;
            else
                b++;
        }
        double sum = 0;
        for (int j = 0; j < k; j++) {
            if (z->exclude && (a + j < 0 || a + j >= n))
                c[j] = 0;
            sum += c[j];
        }
        for (int j = 0; j < k; j++) {
            int64_t i = a + j < 0 ? 0 : a + j >= n ? n - 1 : a + j;
            w[o * n + i] += z->exclude ? c[j] / sum : c[j];
        }
    }
    free(c);
    return true;
}

static val *resize_ref(tx *t, val *x, const rzspec *z, const double *scale, const int64_t *size, const double *roi)
{
    int nd = x->ndim;
    int64_t msh[TL_MAXDIM];
    bool any_ext = false;
    tl_tensor *mask = NULL;
    for (int i = 0; i < nd; i++)
        msh[i] = i < 2 ? 1 : size[i];
    for (int ax = 2; x && ax < nd; ax++) {
        int64_t n = x->dims[ax], m = size[ax];
        if (n > ((int64_t)1 << 26) / m)
            return fail(t, "axis %d from %lld to %lld: %lld interpolation weights (at most 2^26)", ax, (long long)n,
                        (long long)m, (long long)(n * m)), NULL;
        double *w = calloc((size_t)(n * m > 0 ? n * m : 1), sizeof *w);
        bool *ext = calloc((size_t)(m ? m : 1), sizeof *ext);
        if (!w || !ext || !rz_axis(t, z, n, m, scale[ax], roi[ax], roi[nd + ax], w, ext)) {
            free(w), free(ext);
            return w && ext ? NULL : (tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL);
        }
        bool copy = true, ident = n == m;
        for (int64_t o = 0; o < m; o++) {
            int nz = 0;
            for (int64_t i = 0; i < n; i++)
                if (w[o * n + i] != 0)
                    nz++, copy = copy && w[o * n + i] == 1, ident = ident && i == o;
            copy = copy && (nz == 1 || ext[o]);
            ident = ident && nz == 1;
            if (ext[o] && !any_ext) {
                any_ext = true;
                if (!(mask = tl_tensor_zeros(x->dt, nd, msh, t->st)))
                    return free(w), free(ext), NULL;
            }
        }
        if (any_ext) /* the mask: 1 where any axis's coordinate is outside the box */
            for (int64_t e = 0; e < mask->numel; e++) {
                int64_t r = e;
                for (int j = nd - 1; j > ax; j--)
                    r /= msh[j];
                if (ext[r % m])
                    tl_tensor_set(mask, e, 1);
            }
        if (!ident && copy) {
            int64_t *idx = malloc(sizeof *idx * (size_t)(m ? m : 1));
            for (int64_t o = 0; idx && o < m; o++) {
                idx[o] = 0;
                for (int64_t i = 0; i < n; i++)
                    if (w[o * n + i] != 0)
                        idx[o] = i;
            }
            val *iv = idx ? known_ints(t, 1, &m, idx, TL_ONNX_INT64) : NULL, *a[2] = {x, iv};
            free(idx);
            cJSON *ta = cJSON_CreateObject();
            put_num(ta, "axis", ax);
            x = iv ? call(t, "take", 2, a, ta) : (cJSON_Delete(ta), NULL);
        } else if (!ident) {
            int64_t ws[2] = {n, m}, p[TL_MAXDIM];
            tl_tensor *wt = tl_tensor_new(x->dt, 2, ws, t->st);
            for (int64_t o = 0; wt && o < m; o++)
                for (int64_t i = 0; i < n; i++)
                    tl_tensor_set(wt, i * m + o, w[o * n + i]);
            val *wv = wt ? known(t, wt, x->oty) : NULL;
            if (wv)
                wv->weight = true;
            for (int j = 0; j < nd; j++)
                p[j] = j < ax ? j : j == nd - 1 ? ax : j + 1;
            val *y = wv ? permute(t, x, nd, p) : NULL;
            y = y ? call2(t, "matmul", y, wv) : NULL;
            for (int j = 0; j < nd; j++)
                p[j] = j < ax ? j : j == ax ? nd - 1 : j - 1;
            x = y ? permute(t, y, nd, p) : NULL;
        }
        free(w), free(ext);
    }
    if (x && any_ext) {
        val *mv = known(t, mask, x->oty);
        if (mv)
            mv->weight = true;
        val *wh[3] = {mv, scalar(t, x->dt, z->ext), x};
        x = mv && wh[1] ? call(t, "where", 3, wh, NULL) : NULL;
    } else {
        tl_tensor_unref(mask);
    }
    return x;
}

static bool x_resize(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    bool up = !strcmp(t->node->op_type, "Upsample");
    int nd = x->ndim, d = nd - 2;
    if (d < 1 || d > TL_MAXSP)
        return fail(t, "x must be [N, C, *S] with 1 to 3 spatial axes");
    double sc[TL_MAXDIM];
    int64_t sz[TL_MAXDIM], axes[TL_MAXDIM];
    int nsc = -1, nsz = -1, na = -1;
    if (up && opset(t) < 9) {
        const Onnx__AttributeProto *a = attr(t, "scales");
        if (!a || (int)a->n_floats != nd)
            return fail(t, "attribute \"scales\" must have %d entries", nd);
        for (nsc = 0; nsc < nd; nsc++)
            sc[nsc] = a->floats[nsc];
    } else {
        int si = up || opset(t) < 11 ? 1 : 2;
        if (nin > si && in[si] && (!in[si]->k || in[si]->k->numel) && !floats_of(t, in[si], "scales", sc, &nsc, TL_MAXDIM))
            return false;
        if (nin > 3 && !up && opset(t) >= 11 && in[3] && !ints_of(t, in[3], "sizes", sz, &nsz, TL_MAXDIM))
            return false;
        if (nsc > 0 && nsz > 0)
            return fail(t, "scales and sizes are both given");
        if (nsc <= 0 && nsz <= 0)
            return fail(t, "neither scales nor sizes is given");
    }
    if (opset(t) >= 18 && (na = attr_ints(t, "axes", axes, TL_MAXDIM)) == -2)
        return false;
    /* every axis: a scale (1 where axes leave it out) or a size */
    double fs[TL_MAXDIM];
    int64_t fz[TL_MAXDIM];
    int cnt = nsc > 0 ? nsc : nsz;
    if (na < 0) {
        na = nd;
        for (int i = 0; i < nd; i++)
            axes[i] = i;
    }
    if (cnt != na)
        return fail(t, "%s has %d entries for %d axes", nsc > 0 ? "scales" : "sizes", cnt, na);
    for (int i = 0; i < nd; i++)
        fs[i] = 1, fz[i] = x->dims[i];
    for (int i = 0; i < na; i++) {
        bool ok;
        int a = norm_axis(t, axes[i], nd, &ok);
        if (!ok)
            return false;
        if (nsc > 0)
            fs[a] = sc[i];
        else
            fz[a] = sz[i];
    }
    char buf[40], mb[16], nb[24];
    const char *pol = opset(t) >= 18 ? attr_s(t, "keep_aspect_ratio_policy", "stretch", buf, sizeof buf) : "stretch";
    if (nsz > 0 && strcmp(pol, "stretch")) { /* not_larger / not_smaller: one scale for the axes given */
        bool smaller = !strcmp(pol, "not_smaller");
        if (!smaller && strcmp(pol, "not_larger"))
            return fail(t, "keep_aspect_ratio_policy \"%s\" is not one of stretch, not_larger, not_smaller", pol);
        double s = smaller ? 0 : INFINITY;
        for (int i = 0; i < na; i++) {
            int a = (int)(axes[i] < 0 ? axes[i] + nd : axes[i]);
            double r = (double)sz[i] / (double)x->dims[a];
            s = smaller ? (r > s ? r : s) : (r < s ? r : s);
        }
        for (int i = 0; i < na; i++) {
            int a = (int)(axes[i] < 0 ? axes[i] + nd : axes[i]);
            fz[a] = (int64_t)floor(s * (double)x->dims[a] + 0.5);
            fs[a] = s;
        }
    }
    for (int i = 0; i < 2; i++)
        if ((nsc > 0 && fs[i] != 1) || (nsz > 0 && fz[i] != x->dims[i]))
            return fail(t, "it resizes axis %d (N or C): tl resizes the spatial axes only", i);
    const char *mode = attr_s(t, "mode", "nearest", mb, sizeof mb);
    if (!strcmp(mode, "bilinear") || !strcmp(mode, "trilinear"))
        mode = "linear"; /* Upsample 7's names */
    bool old = up || opset(t) < 11; /* Upsample and Resize 10: asymmetric, floor */
    const char *coord = old ? "asymmetric" : attr_s(t, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf);
    const char *near = old ? "floor" : attr_s(t, "nearest_mode", "round_prefer_floor", nb, sizeof nb);
    bool tf = !strcmp(coord, "tf_half_pixel_for_nn") || !strcmp(coord, "tf_crop_and_resize");
    if (strcmp(coord, "half_pixel") && strcmp(coord, "pytorch_half_pixel") && strcmp(coord, "align_corners") &&
        strcmp(coord, "asymmetric") && !tf)
        return fail(t, "coordinate_transformation_mode \"%s\" is not one of half_pixel, pytorch_half_pixel, "
                       "align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize", coord);
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return fail(t, "mode \"%s\" is not one of nearest, linear, cubic", mode);
    rzspec z = {mode, coord, near, attr_f(t, "cubic_coeff_a", -0.75), attr_f(t, "extrapolation_value", 0),
                attr_i(t, "exclude_outside", 0) != 0, opset(t) >= 18 && attr_i(t, "antialias", 0) && strcmp(mode, "nearest")};
    bool ref = tf || z.exclude || z.antialias;
    for (int i = 2; i < nd; i++) { /* ONNX's align_corners divides by input size x scale - 1 */
        if (nsc > 0)
            fz[i] = (int64_t)floor(fs[i] * (double)x->dims[i]);
        else if (nsz > 0 && !strcmp(pol, "stretch"))
            fs[i] = (double)fz[i] / (double)x->dims[i];
        if (nsc > 0 && (double)fz[i] != fs[i] * (double)x->dims[i] && !strcmp(coord, "align_corners"))
            ref = true;
    }
    if (ref) {
        double roi[2 * TL_MAXDIM], rv[2 * TL_MAXDIM];
        int nr = -1;
        for (int i = 0; i < nd; i++)
            roi[i] = 0, roi[nd + i] = 1;
        if (!strcmp(coord, "tf_crop_and_resize") && nin > 1 && in[1] && (!in[1]->k || in[1]->k->numel)) {
            if (!floats_of(t, in[1], "roi", rv, &nr, 2 * TL_MAXDIM))
                return false;
            if (nr != 2 * na)
                return fail(t, "roi has %d entries for %d axes", nr, na);
            for (int i = 0; i < na; i++) {
                int ax = (int)(axes[i] < 0 ? axes[i] + nd : axes[i]);
                roi[ax] = rv[i], roi[nd + ax] = rv[na + i];
            }
        }
        for (int i = 2; i < nd; i++)
            if (fz[i] < 1 || !x->dims[i])
                return fail(t, "spatial axis %d would be %lld from %lld", i, (long long)fz[i], (long long)x->dims[i]);
        return (out[0] = typed(resize_ref(t, x, &z, fs, fz, roi), x->oty)) != NULL;
    }
    cJSON *a = cJSON_CreateObject();
    if (nsc > 0) {
        cJSON *s = cJSON_CreateArray();
        for (int i = 2; i < nd; i++)
            cJSON_AddItemToArray(s, cJSON_CreateNumber(fs[i]));
        cJSON_AddItemToObject(a, "scale", s);
    } else {
        put_ints(a, "size", fz + 2, d);
    }
    put_str(a, "mode", mode);
    put_str(a, "coordinate", coord);
    if (!strcmp(mode, "nearest"))
        put_str(a, "nearest", near);
    if (!strcmp(mode, "cubic"))
        put_num(a, "cubic_coeff", attr_f(t, "cubic_coeff_a", -0.75));
    return (out[0] = typed(call1(t, "resize", x, a), x->oty)) != NULL;
}

/* GroupNormalization 18: scale and bias per group, spread over its channels. */
static bool x_groupnorm(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 3))
        return false;
    val *x = in[0];
    int64_t g = attr_i(t, "num_groups", 0);
    if (x->ndim < 3 || g < 1 || x->dims[1] % g)
        return fail(t, "x must be [N, C, *S] and num_groups (%lld) divide C", (long long)g);
    int64_t c = x->dims[1], g1[2] = {g, 1}, gc[2] = {g, c / g};
    val *sb[2];
    for (int i = 0; i < 2; i++) {
        val *p = reshape(t, in[1 + i], 2, g1);
        cJSON *a = cJSON_CreateObject();
        put_ints(a, "shape", gc, 2);
        p = p ? call1(t, "broadcast_to", p, a) : (cJSON_Delete(a), NULL);
        if (!(sb[i] = reshape(t, p, 1, &c)))
            return false;
    }
    cJSON *a = cJSON_CreateObject();
    put_num(a, "groups", (double)g);
    put_num(a, "epsilon", attr_f(t, "epsilon", 1e-5));
    val *args[3] = {x, sb[0], sb[1]};
    return (out[0] = call(t, "group_norm", 3, args, a)) != NULL;
}

/* LRN: x / (bias + alpha / size * (sum of squares over the channel
 * window))^beta, the window sum an average pool over C of the squares. */
static bool x_lrn(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t size = attr_i(t, "size", 0);
    if (x->ndim < 3 || size < 1)
        return fail(t, "x must be [N, C, *S] and size positive");
    int64_t rest = 1;
    for (int i = 2; i < x->ndim; i++)
        rest *= x->dims[i];
    int64_t sh[4] = {x->dims[0], 1, x->dims[1], rest}, k[2] = {size, 1}, one[2] = {1, 1};
    int64_t lo[2] = {(size - 1) / 2, 0}, hi[2] = {size - 1 - (size - 1) / 2, 0};
    val *sq = reshape(t, call1(t, "square", x, NULL), 4, sh);
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "kernel", k, 2);
    put_ints(a, "stride", one, 2);
    put_pairs(a, lo, hi, 2);
    put_bool(a, "count_include_pad", true);
    val *m = sq ? call1(t, "avg_pool", sq, a) : (cJSON_Delete(a), NULL);
    m = m ? reshape(t, m, x->ndim, x->dims) : NULL;
    val *dn = m ? call2(t, "add", scalar(t, x->dt, attr_f(t, "bias", 1)),
                        call2(t, "mul", scalar(t, x->dt, attr_f(t, "alpha", 1e-4)), m)) : NULL;
    dn = dn ? call2(t, "pow", dn, scalar(t, x->dt, attr_f(t, "beta", 0.75))) : NULL;
    return dn && (out[0] = call2(t, "div", x, dn)) != NULL;
}

/* MeanVarianceNormalization, as its function body: (X - E[X]) /
 * (sqrt(E[X^2] - E[X]^2) + 1e-9). */
static bool x_mvn(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t axes[TL_MAXDIM] = {0, 2, 3};
    int n = attr_ints(t, "axes", axes, TL_MAXDIM);
    if (n == -2)
        return false;
    if (n < 0)
        n = 3;
    for (int i = 0; i < n; i++) {
        bool ok;
        axes[i] = norm_axis(t, axes[i], x->ndim, &ok);
        if (!ok)
            return false;
    }
    val *m = axes_call(t, "mean", x, n, axes, true);
    val *e2 = axes_call(t, "mean", call1(t, "square", x, NULL), n, axes, true);
    val *var = m && e2 ? call2(t, "sub", e2, call1(t, "square", m, NULL)) : NULL;
    val *sd = var ? call2(t, "add", call1(t, "sqrt", var, NULL), scalar(t, x->dt, 1e-9)) : NULL;
    return sd && (out[0] = call2(t, "div", call2(t, "sub", x, m), sd)) != NULL;
}

/* Hardmax: 1 at the first maximum along the axis (before opset 13: of the
 * axes from `axis` on, flattened). */
static bool x_hardmax(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1) || !not_int(t, in[0]))
        return false;
    val *x = in[0];
    bool ok, flat = opset(t) < 13;
    int ax = norm_axis(t, attr_i(t, "axis", flat ? 1 : -1), x->ndim, &ok);
    if (!ok)
        return false;
    val *f = x;
    if (flat) {
        int64_t sh[2] = {1, 1};
        for (int i = 0; i < x->ndim; i++)
            sh[i >= ax] *= x->dims[i];
        f = reshape(t, x, 2, sh);
        ax = 1;
    }
    if (!f)
        return false;
    cJSON *a = cJSON_CreateObject(), *o = cJSON_CreateObject();
    put_num(a, "axis", ax);
    put_num(o, "depth", (double)f->dims[ax]);
    put_str(o, "dtype", tl_dtype_name(t->load_call)); /* the call's, whatever inputs tl compile fixes */
    val *i = call1(t, "argmax", f, a);
    val *h = i ? call1(t, "one_hot", i, o) : (cJSON_Delete(o), NULL);
    h = last_to(t, cast_dt(t, h, x->dt), ax);
    return h && (out[0] = typed(reshape(t, h, x->ndim, x->dims), x->oty)) != NULL;
}

/* The loss of NegativeLogLikelihoodLoss over log-probabilities lp [N, C,
 * *D] and targets [N, *D]: -lp[n, target] * weight[target], with
 * ignore_index masked out of the values and the mean's divisor. */
static val *nll(tx *t, val *lp, val *tgt, val *w)
{
    if (!lp || !tgt)
        return NULL;
    if (lp->ndim < 2 || tgt->ndim != lp->ndim - 1 || !is_int_type(tgt->oty))
        return fail(t, "input must be [N, C, *D] and target integer [N, *D]"), NULL;
    char buf[16];
    const char *red = attr_s(t, "reduction", "mean", buf, sizeof buf);
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none"))
        return fail(t, "reduction \"%s\" is not one of none, sum, mean", red), NULL;
    const Onnx__AttributeProto *ii = attr(t, "ignore_index");
    val *safe = tgt, *valid = NULL;
    if (ii && ii->has_i) {
        valid = call2(t, "ne", tgt, scalar(t, tgt->dt, (double)ii->i));
        safe = valid ? call2(t, "mul", tgt, valid) : NULL; /* ignored targets read class 0 */
        valid = cast_dt(t, valid, lp->dt);
    }
    cJSON *e = cJSON_CreateObject();
    put_num(e, "axis", 1);
    val *idx = safe ? call1(t, "expand_dims", safe, e) : (cJSON_Delete(e), NULL);
    val *ga[2] = {lp, idx};
    cJSON *g = cJSON_CreateObject();
    put_num(g, "axis", 1);
    val *picked = idx ? call(t, "gather", 2, ga, g) : (cJSON_Delete(g), NULL);
    cJSON *q = cJSON_CreateObject();
    put_num(q, "axes", 1);
    val *loss = picked ? call1(t, "neg", call1(t, "squeeze", picked, q), NULL) : (cJSON_Delete(q), NULL);
    val *wt = valid;
    if (w) {
        val *ta[2] = {w, safe};
        cJSON *k = cJSON_CreateObject();
        put_num(k, "axis", 0);
        wt = safe ? call(t, "take", 2, ta, k) : (cJSON_Delete(k), NULL);
        if (wt && valid)
            wt = call2(t, "mul", wt, valid);
    }
    if (loss && wt)
        loss = call2(t, "mul", loss, wt);
    if (!loss || !strcmp(red, "none"))
        return loss;
    val *s = axes_call(t, "sum", loss, -1, NULL, false);
    if (!strcmp(red, "sum"))
        return s;
    return wt ? call2(t, "div", s, axes_call(t, "sum", wt, -1, NULL, false)) : axes_call(t, "mean", loss, -1, NULL, false);
}

static bool x_nll(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    return need(t, in, nin, 2) && not_int(t, in[0]) && (out[0] = nll(t, in[0], in[1], nin > 2 ? in[2] : NULL)) != NULL;
}

/* SoftmaxCrossEntropyLoss: the NLL of log_softmax over C; log_prob second. */
static bool x_sce(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 2) || !not_int(t, in[0]))
        return false;
    val *x = in[0];
    if (x->ndim < 2)
        return fail(t, "scores must be [N, C, *D]");
    val *lp = axis_call(t, "log_softmax", x, 1);
    if (!lp || !(out[0] = nll(t, lp, in[1], nin > 2 ? in[2] : NULL)))
        return false;
    if (nout > 1)
        out[1] = lp;
    return true;
}

/* Linear indices into the first k axes of data (dims) from index tuples
 * idx [..., k] (negative entries count from the end): a [..] int value. */
static val *linear_index(tx *t, val *idx, const int64_t *dims, int k)
{
    int64_t str[TL_MAXDIM], kk = k, s = 1;
    for (int j = k - 1; j >= 0; j--)
        str[j] = s, s *= dims[j];
    val *dv = known_ints(t, 1, &kk, dims, idx->oty), *sv = known_ints(t, 1, &kk, str, idx->oty);
    val *neg = dv ? call2(t, "lt", idx, scalar(t, idx->dt, 0)) : NULL;
    val *i = neg ? call2(t, "add", idx, call2(t, "mul", neg, dv)) : NULL;
    val *l = i && sv ? call2(t, "mul", i, sv) : NULL;
    int64_t last = idx->ndim - 1;
    return axes_call(t, "sum", l, 1, &last, false);
}

static bool x_gather_nd(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    val *x = in[0], *idx = in[1];
    int b = (int)attr_i(t, "batch_dims", 0), q = idx->ndim;
    if (!is_int_type(idx->oty) || q < 1 || b < 0 || b >= q || b > x->ndim)
        return fail(t, "indices must be integers of rank above batch_dims");
    int k = (int)idx->dims[q - 1];
    if (b + k > x->ndim)
        return fail(t, "index tuples of %d entries past batch_dims %d for data of %d dims", k, b, x->ndim);
    int64_t B = 1, P = 1, M = 1, sh[TL_MAXDIM], osh[TL_MAXDIM];
    for (int i = 0; i < b; i++)
        B *= x->dims[i];
    for (int i = b; i < b + k; i++)
        P *= x->dims[i];
    for (int i = b; i < q - 1; i++)
        M *= idx->dims[i];
    int64_t i3[3] = {B, M, k};
    val *lin = linear_index(t, reshape(t, idx, 3, i3), x->dims + b, k);
    if (lin && B > 1) {
        int64_t bs[2] = {B, 1}, off[TL_MAXDIM * 64];
        if (B > (int64_t)(sizeof off / sizeof off[0]))
            return fail(t, "%lld batches (at most %zu)", (long long)B, sizeof off / sizeof off[0]);
        for (int64_t i = 0; i < B; i++)
            off[i] = i * P;
        lin = call2(t, "add", lin, known_ints(t, 2, bs, off, idx->oty));
    }
    int nr = x->ndim - b - k, no = 0;
    sh[0] = B * P;
    memcpy(sh + 1, x->dims + b + k, sizeof(int64_t) * (size_t)nr);
    val *f = reshape(t, x, 1 + nr, sh);
    val *ta[2] = {f, lin};
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", 0);
    val *r = f && lin ? call(t, "take", 2, ta, a) : (cJSON_Delete(a), NULL);
    for (int i = 0; i < q - 1; i++)
        osh[no++] = idx->dims[i];
    for (int i = 0; i < nr; i++)
        osh[no++] = x->dims[b + k + i];
    return r && (out[0] = typed(reshape(t, r, no, osh), x->oty)) != NULL;
}

static val *scatter(tx *t, val *x, val *idx, val *src, int ax, const char *red);

/* x[..., j, ...] along axis ax (j: the step number of the iterate it),
 * the axis kept (size 1). */
static val *step_slab(tx *t, ox_iter *it, val *x, int ax)
{
    val *a[2] = {x, it->iv};
    cJSON *ta = cJSON_CreateObject(), *ea = cJSON_CreateObject();
    put_num(ta, "axis", ax);
    put_num(ea, "axis", ax);
    val *r = call(t, "take", 2, a, ta);
    return r ? call1(t, "expand_dims", r, ea) : (cJSON_Delete(ea), NULL);
}

/* Reduction mul, max or min: an iterate over the positions j along axis
 * ax of the indices, in order (ONNX's), step j scattering the updates at
 * j (one per line of x along ax, so none collide) onto zeros, and
 * combining them with what x holds where they land. */
static val *scatter_steps(tx *t, val *x, val *idx, val *src, int ax, const char *red)
{
    if (!idx->dims[ax])
        return copy_of(t, x);
    ox_iter it;
    if (!ox_iter_open(t, &it, idx->dims[ax]))
        return NULL;
    val *acc = ox_iter_state(t, &it, x), *ij = acc ? step_slab(t, &it, idx, ax) : NULL;
    val *uj = ij ? step_slab(t, &it, src, ax) : NULL, *r = NULL;
    val *put = uj ? scatter(t, filled(t, x->dt, x->ndim, x->dims, 0), ij, uj, ax, "add") : NULL;
    val *hit = put ? scatter(t, filled(t, x->dt, x->ndim, x->dims, 0), ij, filled(t, x->dt, uj->ndim, uj->dims, 1),
                             ax, "add")
                   : NULL;
    val *c = !hit ? NULL : !strcmp(red, "mul") ? call2(t, "mul", acc, put)
                         : call2(t, !strcmp(red, "max") ? "maximum" : "minimum", acc, put);
    if (!c || !(r = select_of(t, call2(t, "gt", hit, scalar(t, x->dt, 0)), c, acc)))
        return ox_iter_abort(t, &it), NULL;
    it.res[0] = typed(r, acc->oty);
    val *o = NULL;
    return ox_iter_close(t, &it, &o) ? o : NULL;
}

/* tl's scatter_add: x with src added at idx along axis ax (floats). */
static val *scatter_add_of(tx *t, val *x, val *idx, val *src, int ax)
{
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ax);
    val *s[3] = {x, idx, src};
    return x && idx && src ? call(t, "scatter_add", 3, s, a) : (cJSON_Delete(a), NULL);
}

/* The same for integers, exactly (tl's scatter_add takes floats): each
 * update split into its high and low 32 bits, each part scatter-added in
 * f64 (exact while fewer than 2^21 updates land on one element), and the
 * sums joined in wrapping 64-bit arithmetic; int32 data wraps to 32 bits. */
static val *int_scatter_add(tx *t, val *x, val *idx, val *src, int ax)
{
    val *x64 = x->dt == TL_I64 ? x : cast_dt(t, x, TL_I64), *s64 = src->dt == TL_I64 ? src : cast_dt(t, src, TL_I64);
    val *b32 = scalar(t, TL_I64, 0x1p32), *lo = s64 ? call2(t, "mod", s64, b32) : NULL;
    val *hi = lo ? call2(t, "div", call2(t, "sub", s64, lo), b32) : NULL;
    val *z = filled(t, TL_F64, x->ndim, x->dims, 0);
    val *shi = hi ? scatter_add_of(t, z, idx, cast_dt(t, hi, TL_F64), ax) : NULL;
    val *slo = shi ? scatter_add_of(t, z, idx, cast_dt(t, lo, TL_F64), ax) : NULL;
    val *r = slo ? call2(t, "add", x64, call2(t, "add", call2(t, "mul", cast_dt(t, shi, TL_I64), b32),
                                                 cast_dt(t, slo, TL_I64)))
                 : NULL;
    if (!r || x->dt == TL_I64)
        return r;
    val *b31 = scalar(t, TL_I64, 0x1p31); /* to int32, wrapping */
    return cast_dt(t, call2(t, "sub", call2(t, "mod", call2(t, "add", r, b31), b32), b31), x->dt);
}

/* scatter_add of src into x at idx along axis; reduction "none" writes
 * the updates over x where an index lands. */
static val *scatter(tx *t, val *x, val *idx, val *src, int ax, const char *red)
{
    if (strcmp(red, "add") && strcmp(red, "none"))
        return scatter_steps(t, x, idx, src, ax, red);
    bool isint = tl_dtype_is_int(x->dt);
    if (!strcmp(red, "add"))
        return (isint ? int_scatter_add : scatter_add_of)(t, x, idx, src, ax);
    val *z = filled(t, x->dt, x->ndim, x->dims, 0), *o = filled(t, x->dt, src->ndim, src->dims, 1);
    val *put = z && o ? (isint ? int_scatter_add : scatter_add_of)(t, z, idx, src, ax) : NULL;
    val *hit = put ? (isint ? int_scatter_add : scatter_add_of)(t, z, idx, o, ax) : NULL;
    return hit ? select_of(t, call2(t, "gt", hit, scalar(t, x->dt, 0)), put, x) : NULL;
}

static const char *scatter_reduction(tx *t, char *buf, size_t len)
{
    const char *red = attr_s(t, "reduction", "none", buf, len);
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return fail(t, "reduction \"%s\" is not an ONNX reduction (none, add, mul, max or min)", red), NULL;
    return red;
}

/* ScatterElements of integers known at load: computed here, in ONNX's
 * order, wrapping as integers do. */
static val *fold_scatter(tx *t, val *x, val *idx, val *u, int ax, const char *red)
{
    for (int d = 0; d < idx->ndim; d++)
        if (u->ndim != idx->ndim || u->dims[d] != idx->dims[d])
            return fail(t, "updates of a shape other than the indices'"), NULL;
    val *r = known_ints(t, x->ndim, x->dims, x->k->data, x->oty);
    if (!r)
        return NULL;
    int64_t *rd = r->k->data, pos[TL_MAXDIM] = {0};
    for (int64_t e = 0; e < idx->k->numel; e++) {
        int64_t at = 0, j = kget(idx->k, e), v = kget(u->k, e), n = x->dims[ax];
        if (j < -n || j >= n)
            return fail(t, "index %lld is outside [%lld, %lld) on axis %d", (long long)j, (long long)-n,
                        (long long)n, ax), NULL;
        for (int d = 0; d < x->ndim; d++)
            at = at * x->dims[d] + (d == ax ? (j < 0 ? j + n : j) : pos[d]);
        int64_t *o = rd + at;
        *o = !strcmp(red, "add") ? (int64_t)((uint64_t)*o + (uint64_t)v)
           : !strcmp(red, "mul") ? (int64_t)((uint64_t)*o * (uint64_t)v)
           : !strcmp(red, "max") ? (*o > v ? *o : v)
           : !strcmp(red, "min") ? (*o < v ? *o : v) : v;
        for (int d = idx->ndim - 1; d >= 0 && ++pos[d] == idx->dims[d]; d--) /* the next index, row-major */
            pos[d] = 0;
    }
    return r;
}

static bool x_scatter_elements(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    char buf[16];
    const char *red;
    if (!need(t, in, nin, 3) || !(red = scatter_reduction(t, buf, sizeof buf)))
        return false;
    bool ok;
    val *x = in[0], *idx = in[1];
    int ax = norm_axis(t, attr_i(t, "axis", 0), x->ndim, &ok);
    if (!ok)
        return false;
    if (idx->ndim != x->ndim)
        return fail(t, "indices of rank %d for data of rank %d", idx->ndim, x->ndim);
    bool smaller = false;
    for (int d = 0; d < x->ndim; d++) {
        if (d != ax && idx->dims[d] > x->dims[d])
            return fail(t, "indices of size %lld on axis %d, past the data's %lld", (long long)idx->dims[d], d,
                        (long long)x->dims[d]);
        smaller |= d != ax && idx->dims[d] < x->dims[d];
    }
    if (foldable(x) && foldable(idx) && foldable(in[2]))
        return (out[0] = fold_scatter(t, x, idx, in[2], ax, red)) != NULL;
    if (!smaller)
        return (out[0] = typed(scatter(t, x, idx, in[2], ax, red), x->oty)) != NULL;
    /* indices smaller than the data off the axis (ONNX and PyTorch allow
     * it): scatter into the leading block they cover, and keep the rest */
    val *blk = x;
    int64_t bd[TL_MAXDIM], pads[2 * TL_MAXDIM];
    for (int d = 0; d < x->ndim; d++) {
        bd[d] = d == ax ? x->dims[d] : idx->dims[d];
        pads[2 * d] = 0;
        pads[2 * d + 1] = x->dims[d] - bd[d];
        if (blk && bd[d] < x->dims[d])
            blk = slice_of(t, blk, d, 0, bd[d]);
    }
    val *r = blk ? scatter(t, blk, idx, in[2], ax, red) : NULL;
    cJSON *a = cJSON_CreateObject(), *b, *pairs = cJSON_CreateArray();
    for (int d = 0; d < x->ndim; d++)
        cJSON_AddItemToArray(pairs, ints_json(pads + 2 * d, 2));
    cJSON_AddItemToObject(a, "pads", pairs);
    b = cJSON_Duplicate(a, true);
    put_num(a, "value", 0);
    put_num(b, "value", 1);
    val *rp = r ? call1(t, "pad", r, a) : (cJSON_Delete(a), NULL);
    val *outside = rp ? call1(t, "pad", filled(t, x->dt, x->ndim, bd, 0), b) : (cJSON_Delete(b), NULL);
    val *keep = outside ? call2(t, "gt", outside, scalar(t, x->dt, 0)) : NULL;
    return keep && (out[0] = typed(select_of(t, keep, x, rp), x->oty)) != NULL;
}

static bool x_scatter_nd(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    char buf[16];
    const char *red;
    if (!need(t, in, nin, 3) || !(red = scatter_reduction(t, buf, sizeof buf)))
        return false;
    val *x = in[0], *idx = in[1], *u = in[2];
    int q = idx->ndim, k = q ? (int)idx->dims[q - 1] : 0;
    if (!is_int_type(idx->oty) || q < 1 || k > x->ndim || u->ndim != q - 1 + x->ndim - k)
        return fail(t, "indices [..., k] and updates of rank q - 1 + r - k");
    int64_t P = 1, M = 1, sh[TL_MAXDIM], ish[TL_MAXDIM], two[2];
    for (int i = 0; i < k; i++)
        P *= x->dims[i];
    for (int i = 0; i < q - 1; i++)
        M *= idx->dims[i];
    int nr = x->ndim - k;
    sh[0] = P;
    ish[0] = M;
    for (int i = 0; i < nr; i++)
        sh[1 + i] = ish[1 + i] = x->dims[k + i];
    two[0] = M, two[1] = k;
    val *lin = linear_index(t, reshape(t, idx, 2, two), x->dims, k);
    int64_t col[TL_MAXDIM];
    col[0] = M;
    for (int i = 0; i < nr; i++)
        col[1 + i] = 1;
    cJSON *b = cJSON_CreateObject();
    put_ints(b, "shape", ish, 1 + nr);
    val *bi = lin ? call1(t, "broadcast_to", reshape(t, lin, 1 + nr, col), b) : (cJSON_Delete(b), NULL);
    val *f = reshape(t, x, 1 + nr, sh), *uf = reshape(t, u, 1 + nr, ish);
    val *r = bi && f && uf ? scatter(t, f, bi, uf, 0, red) : NULL;
    return r && (out[0] = typed(reshape(t, r, x->ndim, x->dims), x->oty)) != NULL;
}

static bool x_onehot(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 3))
        return false;
    int64_t depth;
    int n;
    double dd;
    if (!floats_of(t, in[1], "depth", &dd, &n, 1))
        return false;
    depth = (int64_t)dd;
    if (n != 1 || depth < 1)
        return fail(t, "depth must be one positive number");
    val *idx = in[0], *vals = in[2];
    if (!is_int_type(idx->oty) && !(idx = typed(cast_dt(t, idx, TL_I64), TL_ONNX_INT64)))
        return false;
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", -1), idx->ndim + 1, &ok);
    if (!ok)
        return false;
    /* negative indices count from the end; others outside [0, depth) give all off */
    val *neg = call2(t, "lt", idx, scalar(t, idx->dt, 0));
    val *i = neg ? call2(t, "add", idx, call2(t, "mul", neg, scalar(t, idx->dt, (double)depth))) : NULL;
    val *lo = i ? call2(t, "ge", i, scalar(t, idx->dt, 0)) : NULL, *hi = i ? call2(t, "lt", i, scalar(t, idx->dt, (double)depth)) : NULL;
    val *valid = lo && hi ? call2(t, "mul", lo, hi) : NULL;
    cJSON *o = cJSON_CreateObject();
    put_num(o, "depth", (double)depth);
    put_str(o, "dtype", tl_dtype_name(t->load_call)); /* the call's, whatever inputs tl compile fixes */
    val *h = valid ? call1(t, "one_hot", call2(t, "mul", i, valid), o) : (cJSON_Delete(o), NULL);
    cJSON *e = cJSON_CreateObject();
    put_num(e, "axis", -1);
    /* in one_hot's dtype (f64 where the model's only inputs are integers) */
    val *vm = valid && h ? call1(t, "expand_dims", cast_dt(t, valid, h->dt), e) : (cJSON_Delete(e), NULL);
    h = h && vm ? call2(t, "mul", h, vm) : NULL;
    if (!h || vals->ndim != 1 || vals->dims[0] != 2)
        return h ? fail(t, "values must be [off, on]") : false;
    val *off = slice_of(t, vals, 0, 0, 1), *on = slice_of(t, vals, 0, 1, 2), *r;
    if (!off || !on)
        return false;
    if (tl_dtype_is_int(vals->dt)) { /* off + (on - off) * hot, exactly */
        val *hi2 = cast_dt(t, h, vals->dt);
        r = hi2 ? call2(t, "add", off, call2(t, "mul", call2(t, "sub", on, off), hi2)) : NULL;
    } else {
        val *w[3] = {cast_dt(t, h, vals->dt), on, off};
        r = w[0] ? call(t, "where", 3, w, NULL) : NULL;
    }
    return (out[0] = typed(last_to(t, r, ax), vals->oty)) != NULL;
}

static bool x_trilu(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t k = 0;
    int n;
    if (nin > 1 && in[1] && !ints_of(t, in[1], "k", &k, &n, 1))
        return false;
    if (x->ndim < 2)
        return fail(t, "x must have at least 2 dims");
    bool upper = attr_i(t, "upper", 1) != 0;
    int64_t sh[2] = {x->dims[x->ndim - 2], x->dims[x->ndim - 1]};
    tl_tensor *m = tl_tensor_new(x->dt, 2, sh, t->st);
    if (!m)
        return false;
    for (int64_t i = 0; i < sh[0]; i++)
        for (int64_t j = 0; j < sh[1]; j++)
            tl_tensor_set(m, i * sh[1] + j, upper ? j - i >= k : j - i <= k);
    val *mv = known(t, m, tl_dtype_is_int(x->dt) ? x->oty : x->oty == TL_ONNX_BOOL ? TL_ONNX_FLOAT : x->oty);
    if (!mv)
        return false;
    mv->weight = true; /* a mask: a constant of the graph */
    val *r;
    if (tl_dtype_is_int(x->dt)) {
        r = call2(t, "mul", x, mv);
    } else {
        val *w[3] = {mv, x, scalar(t, x->dt, 0)};
        r = call(t, "where", 3, w, NULL);
    }
    return (out[0] = typed(r, x->oty)) != NULL;
}

static bool x_eyelike(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    if (x->ndim != 2)
        return fail(t, "the input must be a matrix");
    int oty = (int)attr_i(t, "dtype", x->oty);
    tl_dtype dt;
    if (!onnx_dtype(oty, t->call, &dt))
        return fail(t, "dtype %s, which tl does not compute in", tl_onnx_type_name(oty));
    int64_t k = attr_i(t, "k", 0);
    tl_tensor *e = tl_tensor_zeros(is_int_type(oty) ? TL_I64 : dt, 2, x->dims, t->st);
    for (int64_t i = 0; e && i < x->dims[0]; i++)
        if (i + k >= 0 && i + k < x->dims[1])
            tl_tensor_set(e, i * x->dims[1] + i + k, 1);
    return e && (out[0] = known(t, e, oty)) != NULL;
}

/* ReverseSequence: along the time axis, the first sequence_lens[b]
 * entries of batch b reversed: a gather with index t < L ? L - 1 - t : t. */
static bool x_reverse_sequence(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    if (!need(t, in, nin, 2))
        return false;
    val *x = in[0], *len = in[1];
    int ta = (int)attr_i(t, "time_axis", 0), ba = (int)attr_i(t, "batch_axis", 1);
    if (x->ndim < 2 || (ta | ba) > 1 || ta < 0 || ba < 0 || ta == ba || len->ndim != 1 || !is_int_type(len->oty) ||
        len->dims[0] != x->dims[ba])
        return fail(t, "time_axis and batch_axis must be 0 and 1, and sequence_lens [batch] integers");
    int64_t T = x->dims[ta], B = x->dims[ba], tsh[2], lsh[2], st[TL_MAXDIM];
    tsh[ta] = T, tsh[ba] = 1, lsh[ta] = 1, lsh[ba] = B;
    int64_t *ts = malloc(sizeof *ts * (size_t)(T ? T : 1));
    if (!ts)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
    for (int64_t i = 0; i < T; i++)
        ts[i] = i;
    val *tt = known_ints(t, 2, tsh, ts, len->oty);
    free(ts);
    val *L = tt ? reshape(t, len, 2, lsh) : NULL;
    val *in_seq = L ? call2(t, "lt", tt, L) : NULL;
    val *rev = in_seq ? call2(t, "sub", call2(t, "sub", L, scalar(t, len->dt, 1)), tt) : NULL;
    val *idx = rev ? call2(t, "add", tt, call2(t, "mul", in_seq, call2(t, "sub", rev, tt))) : NULL;
    for (int i = 0; i < x->ndim; i++)
        st[i] = i < 2 ? x->dims[i] : 1;
    cJSON *b = cJSON_CreateObject();
    put_ints(b, "shape", x->dims, x->ndim);
    idx = idx ? call1(t, "broadcast_to", reshape(t, idx, x->ndim, st), b) : (cJSON_Delete(b), NULL);
    val *g[2] = {x, idx};
    cJSON *a = cJSON_CreateObject();
    put_num(a, "axis", ta);
    return idx && (out[0] = typed(call(t, "gather", 2, g, a), x->oty)) != NULL;
}

/* TopK with k known at load: an iterate of k steps, each an argmax
 * (argmin) of what is left, its element then masked out for the next;
 * ties go to the lower index.  The recipe does not grow with k. */
/* An element and its position along an axis, for a fold's sort. */
typedef struct kpos {
    int64_t v, j;
} kpos;

static int kpos_desc(const void *a, const void *b)
{
    const kpos *p = a, *q = b;
    return p->v != q->v ? (p->v < q->v ? 1 : -1) : (p->j > q->j) - (p->j < q->j);
}

static int kpos_asc(const void *a, const void *b)
{
    const kpos *p = a, *q = b;
    return p->v != q->v ? (p->v > q->v ? 1 : -1) : (p->j > q->j) - (p->j < q->j);
}

/* TopK of integers known at load (lengths given with the call, as
 * pack_padded_sequence sorts them): computed here, ties to the lower
 * index, so what depends on them (an LSTM's sequence_lens) is known too. */
static bool fold_topk(tx *t, val *x, int64_t k, int ax, bool largest, val **out, int nout)
{
    int64_t n = x->dims[ax], outer = 1, inner = 1, sh[TL_MAXDIM];
    for (int d = 0; d < x->ndim; d++) {
        sh[d] = d == ax ? k : x->dims[d];
        if (d < ax)
            outer *= x->dims[d];
        else if (d > ax)
            inner *= x->dims[d];
    }
    val *v = known_ints(t, x->ndim, sh, NULL, x->oty), *ix = v ? known_ints(t, x->ndim, sh, NULL, TL_ONNX_INT64) : NULL;
    kpos *line = ix ? malloc(sizeof *line * (size_t)(n ? n : 1)) : NULL;
    if (!line)
        return ix ? tl_fail(t->st, TL_ERUNTIME, "out of memory"), false : false;
    int64_t *vd = v->k->data, *id = ix->k->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++)
                line[j] = (kpos){kget(x->k, (o * n + j) * inner + i), j};
            qsort(line, (size_t)n, sizeof *line, largest ? kpos_desc : kpos_asc);
            for (int64_t j = 0; j < k; j++) {
                vd[(o * k + j) * inner + i] = line[j].v;
                id[(o * k + j) * inner + i] = line[j].j;
            }
        }
    free(line);
    out[0] = v;
    if (nout > 1)
        out[1] = ix;
    return true;
}

/* max (or min) of x along axis ax, the axis kept. */
static val *extreme_along(tx *t, val *x, int ax, bool largest)
{
    int64_t axes[1] = {ax};
    if (x && tl_dtype_is_int(x->dt)) /* tl's max takes floats */
        return int_extreme(t, x, largest, axes, 1, true);
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "axes", axes, 1);
    put_bool(a, "keepdims", true);
    return call1(t, largest ? "max" : "min", x, a);
}

/* TopK: an iterate of k steps, each picking along the axis the first
 * element not yet taken that holds the extreme of those not taken, NaN
 * counted the largest (PyTorch's order); taken elements are a mask, not
 * a value written over them, so infinities and the integer extremes in
 * the data are picked like any other value. */
static bool x_topk(tx *t, val **in, int nin, val **out, int nout)
{
    if (!need(t, in, nin, 1))
        return false;
    val *x = in[0];
    int64_t k;
    int n = 1;
    if (opset(t) < 10)
        k = attr_i(t, "k", -1);
    else if (!need(t, in, nin, 2) || !ints_of(t, in[1], "k", &k, &n, 1))
        return false;
    bool ok;
    int ax = norm_axis(t, attr_i(t, "axis", -1), x->ndim, &ok);
    if (!ok)
        return false;
    if (n != 1 || k < 0 || k > x->dims[ax])
        return fail(t, "k must be one number in [0, %lld]", (long long)x->dims[ax]);
    if (k == 0) {
        int64_t sh[TL_MAXDIM];
        memcpy(sh, x->dims, sizeof sh);
        sh[ax] = 0;
        out[0] = typed(slice_of(t, x, ax, 0, 0), x->oty);
        out[1] = nout > 1 ? known_ints(t, x->ndim, sh, NULL, TL_ONNX_INT64) : NULL;
        return out[0] && (nout < 2 || out[1]);
    }
    bool largest = opset(t) < 11 || attr_i(t, "largest", 1), isint = tl_dtype_is_int(x->dt);
    if (foldable(x))
        return fold_topk(t, x, k, ax, largest, out, nout);
    tl_dtype sd = isint ? TL_F64 : x->dt; /* the masks' and scores' dtype */
    int64_t ish[TL_MAXDIM], rsh[TL_MAXDIM], perm[TL_MAXDIM], *io = malloc(sizeof *io * (size_t)x->dims[ax]);
    if (!io)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
    int nr = 0;
    for (int i = 0; i < x->ndim; i++) {
        ish[i] = i == ax ? x->dims[ax] : 1;
        if (i != ax)
            rsh[nr++] = x->dims[i];
    }
    for (int64_t i = 0; i < x->dims[ax]; i++)
        io[i] = i;
    val *iota = known_ints(t, x->ndim, ish, io, TL_ONNX_INT64);
    free(io);
    /* what stands for an excluded element when the extreme is sought: the
     * opposite infinity, or for integers the line's opposite extreme */
    val *nanx = isint ? NULL : call1(t, "isnan", x, NULL);
    val *sent = isint ? extreme_along(t, x, ax, !largest) : scalar(t, x->dt, largest ? -INFINITY : INFINITY);
    val *none = filled(t, sd, x->ndim, x->dims, 0); /* nothing taken yet */
    ox_iter it;
    if (!iota || !sent || (!isint && !nanx) || !none || !ox_iter_open(t, &it, k))
        return false;
    val *taken = ox_iter_state(t, &it, none);
    val *untaken = taken ? call2(t, "sub", scalar(t, sd, 1), taken) : NULL;
    val *excl = isint ? taken : call2(t, "add", taken, nanx); /* NaN apart */
    val *m = extreme_along(t, select_of(t, excl, sent, x), ax, largest);
    val *eq = m ? call2(t, "eq", x, m) : NULL;
    val *c1 = eq ? call2(t, "mul", isint ? cast_dt(t, eq, sd) : eq, untaken) : NULL, *score = c1;
    if (!isint && c1) { /* the first NaN not taken: before the extreme when largest, after it when not */
        val *nu = call2(t, "mul", nanx, untaken);
        score = call2(t, "add", call2(t, "mul", scalar(t, sd, 2), largest ? nu : c1), largest ? c1 : nu);
    }
    cJSON *a = cJSON_CreateObject(), *b = cJSON_CreateObject();
    put_num(a, "axis", ax);
    put_bool(a, "keepdims", true);
    put_num(b, "axis", ax);
    val *i = score ? call1(t, "argmax", score, a) : (cJSON_Delete(a), NULL);
    val *g[2] = {x, i}, *v = i ? call(t, "gather", 2, g, b) : (cJSON_Delete(b), NULL);
    val *hit = v ? cast_dt(t, call2(t, "eq", iota, i), sd) : NULL;
    if (!hit || !(it.res[0] = call2(t, "add", taken, hit)) || !ox_iter_stack(t, &it, reshape(t, v, nr, rsh), false) ||
        !ox_iter_stack(t, &it, reshape(t, i, nr, rsh), false))
        return ox_iter_abort(t, &it), false;
    val *r[3];
    if (!ox_iter_close(t, &it, r))
        return false;
    for (int d = 0; d < x->ndim; d++) /* the steps' axis to ax */
        perm[d] = d < ax ? d + 1 : d == ax ? 0 : d;
    out[0] = typed(permute(t, r[1], x->ndim, perm), x->oty);
    if (nout > 1)
        out[1] = typed(permute(t, r[2], x->ndim, perm), TL_ONNX_INT64);
    return out[0] && (nout < 2 || out[1]);
}

/* Einsum: an index repeated in a term takes that diagonal first (a take
 * from the two axes flattened); then the operands are contracted
 * pairwise in the order written, each pair by sums over the indices only
 * one of them has and nothing later needs, then a batched matmul of
 * [batch, kept of A, contracted] by [batch, contracted, kept of B]
 * (transposes and reshapes around it); the last result is summed over
 * what the output lacks and transposed to it. */
typedef struct eterm {
    char ix[128]; /* a term's indices; or a set of them (kept ones) */
    int n;
} eterm;

/* A term's indices; its ne broadcast axes ("...") are the last ne of all
 * nell, aligned to the right as NumPy's broadcasting aligns them. */
static bool eparse(tx *t, const char *s, size_t len, int ndim, int nell, int ne, eterm *e)
{
    e->n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (i + 2 >= len + 0 || s[i + 1] != '.' || s[i + 2] != '.')
                return fail(t, "a lone '.' in the equation");
            for (int j = 0; j < ne && e->n < TL_MAXDIM; j++)
                e->ix[e->n++] = (char)(1 + nell - ne + j); /* the broadcast axes */
            i += 2;
        } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')) {
            if (e->n == TL_MAXDIM)
                return fail(t, "a term with over %d indices", TL_MAXDIM);
            if (ndim < 0 && memchr(e->ix, s[i], (size_t)e->n))
                return fail(t, "the index '%c' repeats in the output", s[i]);
            e->ix[e->n++] = s[i];
        } else {
            return fail(t, "the character '%c' in the equation", s[i]);
        }
    }
    if (ndim >= 0 && e->n != ndim)
        return fail(t, "a term of %d indices for an operand of %d dims", e->n, ndim);
    return true;
}

static int ells(const char *s, size_t len, int ndim)
{
    int letters = 0;
    bool dots = false;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '.')
            dots = true;
        else
            letters++;
    return dots ? ndim - letters : 0;
}

static int epos(const eterm *e, char c)
{
    const char *p = memchr(e->ix, c, (size_t)e->n);
    return p ? (int)(p - e->ix) : -1;
}

/* x (indices e) summed over the indices neither keep nor other has. */
static val *esum_own(tx *t, val *x, eterm *e, const eterm *keep, const eterm *other)
{
    int64_t ax[TL_MAXDIM];
    int n = 0;
    eterm r = {.n = 0};
    for (int i = 0; i < e->n; i++)
        if (epos(keep, e->ix[i]) < 0 && (!other || epos(other, e->ix[i]) < 0))
            ax[n++] = i;
        else
            r.ix[r.n++] = e->ix[i];
    if (!n)
        return x;
    *e = r;
    return typed(axes_call(t, "sum", x, n, ax, false), x->oty);
}

/* x (indices e) with each index that repeats in e taken once: the
 * diagonal of its two axes (moved last, flattened, every n+1-th entry
 * taken), that index last in e. */
static val *ediag(tx *t, val *x, eterm *e)
{
    for (int p = 0; x && p < e->n; p++) {
        const char *dup = memchr(e->ix + p + 1, e->ix[p], (size_t)(e->n - p - 1));
        if (!dup)
            continue;
        int q = (int)(dup - e->ix), k = 0;
        int64_t perm[TL_MAXDIM], sh[TL_MAXDIM], n = x->dims[p];
        eterm r = {.n = 0};
        for (int j = 0; j < e->n; j++)
            if (j != p && j != q) {
                sh[k] = x->dims[j];
                perm[k++] = j;
                r.ix[r.n++] = e->ix[j];
            }
        perm[k] = p, perm[k + 1] = q;
        sh[k] = n * n;
        r.ix[r.n++] = e->ix[p];
        int64_t *d = malloc(sizeof *d * (size_t)(n ? n : 1));
        if (!d)
            return tl_fail(t->st, TL_ERUNTIME, "out of memory"), NULL;
        for (int64_t i = 0; i < n; i++)
            d[i] = i * (n + 1);
        val *y = permute(t, x, e->n, perm), *di = known_ints(t, 1, &n, d, TL_ONNX_INT64), *a[2];
        free(d);
        y = y && di ? reshape(t, y, k + 1, sh) : NULL;
        a[0] = y, a[1] = di;
        cJSON *ta = cJSON_CreateObject();
        put_num(ta, "axis", k);
        x = y ? typed(call(t, "take", 2, a, ta), x->oty) : (cJSON_Delete(ta), NULL);
        *e = r;
        p = -1; /* again from the start: the indices moved */
    }
    return x;
}

/* a (indices ea) and b (eb) contracted over the indices keep lacks; the
 * result's indices in ea: the kept ones both have, a's, then b's. */
static val *epair(tx *t, val *a, eterm *ea, val *b, eterm *eb, const eterm *keep, const int64_t *size)
{
    a = esum_own(t, a, ea, keep, eb);
    b = a ? esum_own(t, b, eb, keep, ea) : NULL;
    if (!a || !b)
        return NULL;
    eterm bat = {.n = 0}, ao = {.n = 0}, bo = {.n = 0}, ct = {.n = 0}, cur = {.n = 0};
    for (int j = 0; j < keep->n; j++) {
        bool ia = epos(ea, keep->ix[j]) >= 0, ib = epos(eb, keep->ix[j]) >= 0;
        eterm *d = ia && ib ? &bat : ia ? &ao : &bo;
        if (ia || ib)
            d->ix[d->n++] = keep->ix[j];
    }
    for (int j = 0; j < ea->n; j++)
        if (epos(keep, ea->ix[j]) < 0)
            ct.ix[ct.n++] = ea->ix[j];
    int64_t pa[TL_MAXDIM], pb[TL_MAXDIM], P[4] = {1, 1, 1, 1}, sh[TL_MAXDIM];
    int k = 0;
    const eterm *ga[3] = {&bat, &ao, &ct}, *gb[3] = {&bat, &ct, &bo};
    for (int g = 0; g < 3; g++)
        for (int j = 0; j < ga[g]->n; j++)
            pa[k++] = epos(ea, ga[g]->ix[j]);
    k = 0;
    for (int g = 0; g < 3; g++)
        for (int j = 0; j < gb[g]->n; j++)
            pb[k++] = epos(eb, gb[g]->ix[j]);
    const eterm *gs[4] = {&bat, &ao, &ct, &bo};
    for (int g = 0; g < 4; g++)
        for (int j = 0; j < gs[g]->n; j++)
            P[g] *= size[(unsigned char)gs[g]->ix[j]];
    int64_t sa[3] = {P[0], P[1], P[2]}, sb[3] = {P[0], P[2], P[3]};
    a = permute(t, a, ea->n, pa);
    b = permute(t, b, eb->n, pb);
    a = a ? reshape(t, a, 3, sa) : NULL;
    b = b ? reshape(t, b, 3, sb) : NULL;
    val *r = NULL;
    if (a && b && tl_dtype_is_int(a->dt)) { /* integers: exact, as MatMul's */
        if (!int_matmul(t, a, b, &r))
            return NULL;
    } else {
        r = call2(t, "matmul", a, b);
    }
    const eterm *gr[3] = {&bat, &ao, &bo};
    for (int g = 0; g < 3; g++)
        for (int j = 0; j < gr[g]->n; j++) {
            if (cur.n == TL_MAXDIM)
                return fail(t, "a product of over %d indices", TL_MAXDIM), NULL;
            sh[cur.n] = size[(unsigned char)gr[g]->ix[j]];
            cur.ix[cur.n++] = gr[g]->ix[j];
        }
    *ea = cur;
    return r ? reshape(t, r, cur.n, sh) : NULL;
}

static bool x_einsum(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    char buf[512], eq[512];
    const char *q = attr_s(t, "equation", "", buf, sizeof buf);
    size_t m = 0;
    for (; *q && m + 1 < sizeof eq; q++)
        if (*q != ' ')
            eq[m++] = *q;
    eq[m] = '\0';
    if (nin < 1 || nin > MAXIO)
        return fail(t, "%d operands (1 to %d)", nin, MAXIO);
    if (!need(t, in, nin, nin))
        return false;
    for (int i = 0; i < nin; i++)
        if (in[i]->oty == TL_ONNX_BOOL)
            return fail(t, "operand %d is bool: Einsum takes numbers", i + 1);
        else if (is_int_type(in[i]->oty) != is_int_type(in[0]->oty))
            return fail(t, "operand %d is %s and operand 1 %s: Einsum takes numbers of one type", i + 1,
                        tl_onnx_type_name(in[i]->oty), tl_onnx_type_name(in[0]->oty));
    const char *arrow = strstr(eq, "->");
    size_t lhs = arrow ? (size_t)(arrow - eq) : m, st = 0;
    int nt = 1;
    for (size_t i = 0; i < lhs; i++)
        nt += eq[i] == ',';
    if (nt != nin)
        return fail(t, "the equation \"%s\" has %d terms for %d operands", eq, nt, nin);
    eterm e[MAXIO], o;
    int nell = 0, ne[MAXIO];
    size_t at[MAXIO], len[MAXIO];
    for (int i = 0; i < nin; i++) { /* the broadcast axes of each term, and of all */
        const char *c = memchr(eq + st, ',', lhs - st);
        at[i] = st;
        len[i] = c ? (size_t)(c - eq) - st : lhs - st;
        if ((ne[i] = ells(eq + st, len[i], in[i]->ndim)) < 0)
            return fail(t, "operand %d has %d dims, fewer than its term", i + 1, in[i]->ndim);
        nell = ne[i] > nell ? ne[i] : nell;
        st += len[i] + 1;
    }
    for (int i = 0; i < nin; i++)
        if (!eparse(t, eq + at[i], len[i], in[i]->ndim, nell, ne[i], &e[i]))
            return false;
    if (arrow) {
        if (!eparse(t, arrow + 2, strlen(arrow + 2), -1, nell, nell, &o))
            return false;
    } else { /* implicit: the broadcast axes, then the indices seen once, sorted */
        o.n = 0;
        for (int j = 0; j < nell; j++)
            o.ix[o.n++] = (char)(1 + j);
        for (int c = 'A'; c <= 'z'; c++) {
            int seen = 0;
            for (int i = 0; i < nin; i++)
                for (int j = 0; j < e[i].n; j++)
                    seen += e[i].ix[j] == c;
            if (seen == 1 && o.n < TL_MAXDIM)
                o.ix[o.n++] = (char)c;
        }
    }
    int64_t size[128] = {0};
    for (int i = 0; i < nin; i++)
        for (int j = 0; j < e[i].n; j++) {
            int c = (unsigned char)e[i].ix[j];
            int64_t d = in[i]->dims[j];
            bool bc = c < 32 && (size[c] == 1 || d == 1); /* a broadcast axis of size 1 takes the other size */
            if (size[c] && size[c] != d && !bc)
                return fail(t, "the index '%c' has sizes %lld and %lld", c < 32 ? '.' : c, (long long)size[c],
                            (long long)d);
            if (!size[c] || size[c] == 1)
                size[c] = d;
        }
    for (int i = 0; i < nin; i++) { /* those of size 1 broadcast to it */
        int64_t sh[TL_MAXDIM];
        bool grow = false;
        for (int j = 0; j < e[i].n; j++) {
            sh[j] = size[(unsigned char)e[i].ix[j]];
            grow = grow || sh[j] != in[i]->dims[j];
        }
        if (grow) {
            cJSON *a = cJSON_CreateObject();
            put_ints(a, "shape", sh, e[i].n);
            if (!(in[i] = typed(call1(t, "broadcast_to", in[i], a), in[i]->oty)))
                return false;
        }
    }
    for (int j = 0; j < o.n; j++)
        if (!size[(unsigned char)o.ix[j]])
            return fail(t, "the output index '%c' is in no operand", o.ix[j] < 32 ? '.' : o.ix[j]);
    val *r = ediag(t, in[0], &e[0]);
    eterm cur = e[0];
    for (int i = 1; r && i < nin; i++) {
        eterm keep = o; /* the output's indices and those of the operands after i */
        for (int l = i + 1; l < nin; l++)
            for (int j = 0; j < e[l].n; j++)
                if (epos(&keep, e[l].ix[j]) < 0)
                    keep.ix[keep.n++] = e[l].ix[j];
        val *b = ediag(t, in[i], &e[i]);
        r = b ? epair(t, r, &cur, b, &e[i], &keep, size) : NULL;
    }
    r = r ? esum_own(t, r, &cur, &o, NULL) : NULL;
    int64_t p[TL_MAXDIM];
    for (int j = 0; j < o.n; j++)
        p[j] = epos(&cur, o.ix[j]);
    if (r && cur.n != o.n)
        return fail(t, "the output's indices do not match the operands'");
    r = permute(t, r, o.n, p);
    if (r && r == in[0])
        r = copy_of(t, r);
    return (out[0] = typed(r, in[0]->oty)) != NULL;
}

/* RandomUniform, RandomNormal (and ...Like), Bernoulli: tl's seeded draws. */
static bool x_random(tx *t, val **in, int nin, val **out, int nout)
{
    (void)nout;
    const char *op = t->node->op_type;
    bool like = strstr(op, "Like") != NULL, bern = !strcmp(op, "Bernoulli"), normal = strstr(op, "Normal") != NULL;
    if ((like || bern) && !need(t, in, nin, 1))
        return false;
    int64_t sh[TL_MAXDIM];
    int nd;
    if (like || bern) {
        nd = in[0]->ndim;
        memcpy(sh, in[0]->dims, sizeof sh);
    } else if ((nd = attr_ints(t, "shape", sh, TL_MAXDIM)) < 0) {
        return nd == -2 ? false : fail(t, "attribute \"shape\" is missing");
    }
    int oty = (int)attr_i(t, "dtype", like || bern ? in[0]->oty : TL_ONNX_FLOAT);
    tl_dtype dt, draw;
    if (!onnx_dtype(oty, t->call, &dt))
        return fail(t, "dtype %s, which tl does not compute in", tl_onnx_type_name(oty));
    draw = bern ? in[0]->dt : dt;
    if (tl_dtype_is_int(draw))
        return fail(t, "draws of %s: tl draws floats", tl_dtype_name(draw));
    cJSON *a = cJSON_CreateObject();
    put_ints(a, "shape", sh, nd);
    put_num(a, "seed", (double)(int64_t)attr_f(t, "seed", 0));
    put_str(a, "dtype", tl_dtype_name(draw));
    if (normal) {
        put_num(a, "mean", attr_f(t, "mean", 0));
        put_num(a, "std", attr_f(t, "scale", 1));
    } else if (!bern) {
        put_num(a, "low", attr_f(t, "low", 0));
        put_num(a, "high", attr_f(t, "high", 1));
    }
    val *r = call(t, normal ? "random_normal" : "random_uniform", 0, NULL, a);
    if (bern) /* 1 where the uniform draw is below p */
        r = r ? cast_dt(t, call2(t, "lt", r, in[0]), dt) : NULL;
    return (out[0] = typed(r, oty)) != NULL;
}

/* ---------- the op table ---------- */

static const struct op_entry {
    const char *name;
    int lo, hi; /* opsets */
    xlate fn;
} op_table[] = {
    {"Abs", 1, 18, x_unary}, {"Acos", 7, 18, x_unary}, {"Acosh", 9, 18, x_unary}, {"Add", 1, 18, x_binary},
    {"And", 1, 18, x_binary}, {"ArgMax", 1, 18, x_argmax}, {"ArgMin", 1, 18, x_argmax}, {"Asin", 7, 18, x_unary},
    {"Asinh", 9, 18, x_unary}, {"Atan", 7, 18, x_unary}, {"Atanh", 9, 18, x_unary},
    {"AveragePool", 1, 18, x_pool}, {"BatchNormalization", 1, 18, x_batchnorm}, {"Cast", 1, 18, x_cast},
    {"CastLike", 15, 18, x_castlike}, {"Ceil", 1, 18, x_unary}, {"Celu", 12, 18, x_act}, {"Clip", 1, 18, x_clip},
    {"Compress", 9, 18, x_compress}, {"Concat", 4, 18, x_concat}, {"Constant", 1, 18, x_constant}, {"ConstantOfShape", 9, 18, x_constant_of_shape},
    {"Conv", 1, 18, x_conv}, {"ConvTranspose", 1, 18, x_conv}, {"Cos", 7, 18, x_unary}, {"Cosh", 9, 18, x_unary},
    {"CumSum", 11, 18, x_cumsum}, {"DepthToSpace", 1, 18, x_depth_space}, {"Div", 1, 18, x_binary},
    {"Dropout", 1, 18, x_dropout}, {"Elu", 1, 18, x_act}, {"Equal", 1, 18, x_binary}, {"Erf", 9, 18, x_unary},
    {"Exp", 1, 18, x_unary}, {"Expand", 8, 18, x_expand}, {"Flatten", 1, 18, x_flatten}, {"Floor", 1, 18, x_unary},
    {"GRU", 7, 18, ox_rnn}, {"Gather", 1, 18, x_gather}, {"GatherElements", 11, 18, x_gather_elements}, {"Gemm", 1, 18, x_gemm},
    {"GlobalAveragePool", 1, 18, x_global_pool}, {"GlobalMaxPool", 1, 18, x_global_pool},
    {"Greater", 1, 18, x_binary}, {"GreaterOrEqual", 12, 18, x_binary}, {"HardSigmoid", 1, 18, x_act},
    {"HardSwish", 14, 18, x_act}, {"Identity", 1, 18, x_identity}, {"If", 1, 18, ox_if}, {"InstanceNormalization", 1, 18, x_instnorm},
    {"IsInf", 10, 18, x_act}, {"IsNaN", 9, 18, x_act}, {"LayerNormalization", 17, 18, x_layernorm},
    {"LeakyRelu", 1, 18, x_act}, {"Less", 1, 18, x_binary}, {"LessOrEqual", 12, 18, x_binary},
    {"LSTM", 7, 18, ox_rnn}, {"Log", 1, 18, x_unary}, {"Loop", 1, 18, ox_loop}, {"LogSoftmax", 1, 18, x_softmax}, {"MatMul", 1, 18, x_matmul},
    {"Max", 1, 18, x_variadic}, {"MaxPool", 1, 18, x_pool}, {"Mean", 1, 18, x_variadic},
    {"Min", 1, 18, x_variadic}, {"Mod", 10, 18, x_mod}, {"Mul", 1, 18, x_binary}, {"Neg", 1, 18, x_unary},
    {"NonZero", 9, 18, x_nonzero}, {"Not", 1, 18, x_not}, {"Or", 1, 18, x_binary}, {"Pad", 2, 18, x_pad}, {"Pow", 1, 18, x_binary},
    {"PRelu", 1, 18, x_act}, {"RNN", 7, 18, ox_rnn}, {"Range", 11, 18, x_range}, {"Reciprocal", 1, 18, x_unary},
    {"ReduceL1", 1, 18, x_reduce}, {"ReduceL2", 1, 18, x_reduce}, {"ReduceLogSum", 1, 18, x_reduce},
    {"ReduceLogSumExp", 1, 18, x_reduce}, {"ReduceMax", 1, 18, x_reduce}, {"ReduceMean", 1, 18, x_reduce},
    {"ReduceMin", 1, 18, x_reduce}, {"ReduceProd", 1, 18, x_reduce}, {"ReduceSum", 1, 18, x_reduce},
    {"ReduceSumSquare", 1, 18, x_reduce}, {"Relu", 1, 18, x_unary}, {"Reshape", 5, 18, x_reshape},
    {"Round", 11, 18, x_unary}, {"Scan", 8, 18, ox_scan}, {"Selu", 1, 18, x_act}, {"Shape", 1, 18, x_shape}, {"Shrink", 9, 18, x_act},
    {"Sigmoid", 1, 18, x_unary}, {"Sign", 9, 18, x_unary}, {"Sin", 7, 18, x_unary}, {"Sinh", 9, 18, x_unary},
    {"Size", 1, 18, x_size}, {"Slice", 1, 18, x_slice}, {"Softmax", 1, 18, x_softmax},
    {"Softplus", 1, 18, x_unary}, {"Softsign", 1, 18, x_act}, {"SpaceToDepth", 1, 18, x_depth_space},
    {"Split", 2, 18, x_split}, {"Sqrt", 1, 18, x_unary}, {"Squeeze", 1, 18, x_squeeze}, {"Sub", 1, 18, x_binary},
    {"Sum", 1, 18, x_variadic}, {"Tan", 7, 18, x_unary}, {"Tanh", 1, 18, x_unary},
    {"ThresholdedRelu", 10, 18, x_act}, {"Tile", 1, 18, x_tile}, {"Transpose", 1, 18, x_transpose},
    {"Unsqueeze", 1, 18, x_unsqueeze}, {"Where", 9, 18, x_where}, {"Xor", 1, 18, x_binary},
    /* layers, losses, indexing and draws */
    {"Bernoulli", 15, 18, x_random}, {"Einsum", 12, 18, x_einsum}, {"EyeLike", 9, 18, x_eyelike},
    {"GatherND", 11, 18, x_gather_nd}, {"GroupNormalization", 18, 18, x_groupnorm}, {"Hardmax", 1, 18, x_hardmax},
    {"LRN", 1, 18, x_lrn}, {"MeanVarianceNormalization", 9, 18, x_mvn},
    {"NegativeLogLikelihoodLoss", 12, 18, x_nll}, {"OneHot", 9, 18, x_onehot},
    {"RandomNormal", 1, 18, x_random}, {"RandomNormalLike", 1, 18, x_random}, {"RandomUniform", 1, 18, x_random},
    {"RandomUniformLike", 1, 18, x_random}, {"Resize", 10, 18, x_resize},
    {"ReverseSequence", 10, 18, x_reverse_sequence}, {"Scatter", 9, 10, x_scatter_elements},
    {"ScatterElements", 11, 18, x_scatter_elements}, {"ScatterND", 11, 18, x_scatter_nd},
    {"SoftmaxCrossEntropyLoss", 12, 18, x_sce}, {"TopK", 1, 18, x_topk}, {"Trilu", 14, 18, x_trilu},
    {"Upsample", 7, 9, x_resize},
};

/* In the order of the names: the i-th is the row with i names before it. */
const char *tl_onnx_op_name(int i, int *lo, int *hi)
{
    int n = (int)(sizeof op_table / sizeof op_table[0]);
    for (int r = 0; i >= 0 && i < n && r < n; r++) {
        int before = 0;
        for (int j = 0; j < n; j++)
            before += strcmp(op_table[j].name, op_table[r].name) < 0;
        if (before != i)
            continue;
        *lo = op_table[r].lo < 6 ? 6 : op_table[r].lo;
        *hi = op_table[r].hi;
        return op_table[r].name;
    }
    return NULL;
}

static const struct op_entry *find_op(const char *name, int ver)
{
    for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
        if (!strcmp(op_table[i].name, name))
            return ver >= op_table[i].lo && ver <= op_table[i].hi ? &op_table[i] : NULL;
    return NULL;
}

/* ---------- the graph ---------- */

static void tx_free(tx *t)
{
    cJSON_Delete(t->root);
    free(t->fixed);
    for (size_t i = 0; i < t->nall; i++) {
        tl_tensor_unref(t->all[i]->k);
        free(t->all[i]->own);
        free(t->all[i]);
    }
    free(t->all);
    free(t->tab);
    for (int i = 0; i < t->npatch; i++)
        tl_tensor_unref(t->patch[i]);
    free(t->patch);
    free(t->patch_name);
}

/* A single integer value known at load, into *v. */
static bool one_int(const val *x, int64_t *v)
{
    if (!foldable(x) || x->k->numel != 1)
        return false;
    *v = kget(x->k, 0);
    return true;
}

/* The value a node made from a loop's step number (val.step): what moves a
 * single integer without changing it (Identity, Unsqueeze, Squeeze,
 * Reshape, Flatten, a Cast between integer types), or adds or subtracts a
 * constant. */
static void follow_step(const char *op, val **in, int nin, val *y)
{
    if (!y || y->k || y->step || !is_int_type(y->oty) || nin < 1)
        return;
    int64_t n = 1, c;
    for (int d = 0; d < y->ndim; d++)
        n *= y->dims[d];
    if (n != 1)
        return;
    val *a = in[0], *b = nin > 1 ? in[1] : NULL, *from = NULL;
    int64_t add = 0;
    if (!strcmp(op, "Identity") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Reshape") ||
        !strcmp(op, "Flatten") || (!strcmp(op, "Cast") && a && is_int_type(a->oty)))
        from = a;
    else if ((!strcmp(op, "Add") || !strcmp(op, "Sub")) && a && b && a->step && one_int(b, &c))
        from = a, add = !strcmp(op, "Add") ? c : -c;
    else if (!strcmp(op, "Add") && a && b && b->step && one_int(a, &c))
        from = b, add = c;
    if (!from || !from->step || __builtin_add_overflow(from->step_add, add, &add))
        return;
    y->step = from->step;
    y->step_add = add;
}

static bool translate_node(tx *t, const Onnx__NodeProto *n)
{
    const char *dom = n->domain && n->domain[0] ? n->domain : "ai.onnx";
    const char *op = n->op_type ? n->op_type : "";
    if (strcmp(dom, "ai.onnx"))
        return fail(t, "the domain \"%.60s\" is not translated: tl translates ai.onnx ops, opsets 6 to 18 "
                       "(tl ops --onnx lists them)", dom);
    const struct op_entry *e = find_op(op, opset(t));
    if (!e) {
        bool known = false;
        for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
            known = known || !strcmp(op_table[i].name, op);
        return fail(t, known ? "not translated at this opset (tl ops --onnx lists the ops and opsets tl translates)"
                             : "an op tl does not translate (domain ai.onnx; tl ops --onnx lists the ops and opsets "
                               "it translates)");
    }
    if (n->n_input > MAXIO || n->n_output > MAXIO || !n->n_output)
        return fail(t, "%zu inputs and %zu outputs", n->n_input, n->n_output);
    val *in[MAXIO] = {0}, *out[MAXIO] = {0};
    int nin = (int)n->n_input, nout = (int)n->n_output;
    for (int i = 0; i < nin; i++) {
        if (!n->input[i][0])
            continue; /* an optional input left out */
        if (!(in[i] = lookup(t, n->input[i])))
            return fail(t, "input \"%.200s\" is not defined before it (nothing defines it, or the graph has a cycle)",
                        n->input[i]);
    }
    while (nout > 1 && !n->output[nout - 1][0])
        nout--;
    for (int i = 0; i < nout; i++)
        if (n->output[i][0] && lookup(t, n->output[i]))
            return fail(t, "output \"%.200s\" is already defined (a name used twice)", n->output[i]);
    for (size_t i = 0; i < n->n_attribute; i++) /* one value per name, as the checker wants */
        for (size_t j = 0; j < i; j++)
            if (n->attribute[i]->name && n->attribute[j]->name && !strcmp(n->attribute[i]->name, n->attribute[j]->name))
                return fail(t, "attribute \"%.100s\" is given twice", n->attribute[i]->name);
    size_t before = t->nall;
    const char *outer = t->bad_attr, *outer_want = t->bad_want; /* an If's, while its branches translate */
    t->bad_attr = NULL;
    if (!e->fn(t, in, nin, out, nout))
        return false;
    if (t->bad_attr)
        return fail(t, "attribute \"%.100s\" must be %s", t->bad_attr, t->bad_want);
    t->bad_attr = outer;
    t->bad_want = outer_want;
    follow_step(op, in, nin, out[0]);
    for (int i = 0; i < nout; i++) {
        if (!n->output[i][0])
            continue;
        if (!out[i])
            return fail(t, "output %d is not translated", i + 1);
        if (!bind(t, n->output[i], out[i]))
            return false;
    }
    /* values made on the way get names after the node's first output */
    for (size_t i = before, k = 1; i < t->nall; i++)
        if (!t->all[i]->user && t->all[i]->tl[0]) {
            size_t len = strlen(n->output[0]) + 24;
            char *nm = malloc(len);
            if (!nm)
                return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
            snprintf(nm, len, "%s~%zu", n->output[0], k++);
            t->all[i]->user = t->all[i]->own = nm;
        }
    return true;
}

static bool add_input(tx *t, int i, const tl_tensor *x)
{
    tl_onnx_model *m = t->m;
    val *v = new_val(t);
    if (!v)
        return false;
    snprintf(v->tl, sizeof v->tl, "i%d", i);
    v->dt = x->dtype;
    v->ndim = x->ndim;
    memcpy(v->dims, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    int decl = m->in_type[i];
    v->oty = decl == TL_ONNX_BOOL ? TL_ONNX_BOOL
             : x->dtype == TL_F32 ? TL_ONNX_FLOAT : x->dtype == TL_F64 ? TL_ONNX_DOUBLE
             : x->dtype == TL_I32 ? TL_ONNX_INT32 : TL_ONNX_INT64;
    tl_dtype want;
    if (decl && decl != TL_ONNX_BOOL && onnx_dtype(decl, t->call, &want) && want != x->dtype)
        return tl_fail(t->st, TL_EINPUT, "input \"%.200s\" is %s, where the model declares %s (expected dtype %s)",
                       m->in_name[i], tl_dtype_name(x->dtype), tl_onnx_type_name(decl), tl_dtype_name(want)), false;
    /* integer inputs are data a node may need at load (a Reshape's shape);
     * not a declared shape's placeholder, whose zeros are no one's values
     * (a node that needs them asks for the input) */
    bool shape_only = m->placeholder[i] == x;
    if (!shape_only && tl_dtype_is_int(x->dtype) && x->numel <= 64) {
        tl_tensor *k = tl_tensor_new(TL_I64, x->ndim, x->shape, t->st);
        if (!k)
            return false;
        for (int64_t j = 0; j < x->numel; j++)
            ((int64_t *)k->data)[j] = tl_tensor_get_int(x, j);
        v->k = k;
    } else if (!shape_only && !tl_dtype_is_int(x->dtype) && x->numel <= 16) {
        v->k = tl_tensor_ref((tl_tensor *)x);
        v->weight = v->shadow = true;
    }
    /* declared with the dtype and shape the recipe is for, so that another
     * is the loader's error about the input, not one deep in a node; an
     * input with a default keeps it, where the recipe is for its type
     * (and, for integers, which nodes may read at load, its values) */
    tl_tensor *d = tl_onnx_default(m, i);
    bool fits = d && d->dtype == x->dtype && d->ndim == x->ndim &&
                !memcmp(d->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) &&
                (!tl_dtype_is_int(x->dtype) || !memcmp(d->data, x->data, (size_t)x->numel * tl_dtype_size(x->dtype)));
    cJSON *o = cJSON_CreateObject(), *dj = fits ? patch_json(t, v->tl, d) : NULL;
    if (!fits)
        tl_tensor_unref(d);
    if (!o || (fits && !dj)) {
        cJSON_Delete(o);
        cJSON_Delete(dj);
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
    }
    put_str(o, "name", v->tl);
    put_str(o, "dtype", tl_dtype_name(x->dtype));
    put_ints(o, "shape", x->shape, x->ndim);
    if (dj)
        cJSON_AddItemToObject(o, "default", dj);
    cJSON_AddItemToArray(t->inputs, o);
    /* a bool given as a float of the other width: bools live in the call's */
    if (decl == TL_ONNX_BOOL && !tl_dtype_is_int(x->dtype) && x->dtype != t->call) {
        cJSON *a = cJSON_CreateObject();
        put_str(a, "dtype", tl_dtype_name(t->call));
        v->user = m->in_name[i]; /* the input keeps the model's name (grad/NAME) */
        val *c = call1(t, "cast", v, a);
        if (!c)
            return false;
        c->oty = TL_ONNX_BOOL;
        v = c;
    }
    return bind(t, m->in_name[i], v);
}

/* Marks in used[i] each input name "i<i>" that a string of j (a node's
 * arguments, a body's, the outputs) holds: one walk, whatever the count of
 * inputs. */
/* The input number of a recipe name "i<n>", or -1. */
static long input_number(const char *v)
{
    char *end;
    long i = v[0] == 'i' && v[1] >= '0' && v[1] <= '9' ? strtol(v + 1, &end, 10) : -1;
    return i >= 0 && !*end ? i : -1;
}

static void mark_inputs(const cJSON *j, bool *used, int nin)
{
    if (cJSON_IsString(j)) {
        long i = input_number(j->valuestring);
        if (i >= 0 && i < nin)
            used[i] = true;
        return;
    }
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next)
        mark_inputs(c, used, nin);
}

/* The inputs known at load that no node reads (their values went into
 * attributes and shapes): fixed. */
static bool find_fixed(tx *t)
{
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(t->root, "outputs");
    bool *used = tl_calloc((size_t)t->m->nin + 1, sizeof *used, "inputs", t->st);
    if (!used || !(t->fixed = tl_calloc((size_t)t->m->nin + 1, sizeof *t->fixed, "inputs", t->st)))
        return free(used), false;
    mark_inputs(t->nodes, used, t->m->nin);
    mark_inputs(outs, used, t->m->nin);
    for (size_t a = 0; a < t->nall; a++) {
        const val *v = t->all[a];
        long i = input_number(v->tl);
        if (i >= 0 && i < t->m->nin && v->k && !used[i])
            t->fixed[i] = true;
    }
    free(used);
    return true;
}

/* tl compile leaves the fixed inputs out, their values in its doc, so that
 * giving one is an error ("not an input", with that value: common.c) */
static bool drop_fixed_inputs(tx *t, char **by_i, char **doc, size_t *doclen, size_t *used)
{
    cJSON *ins = cJSON_GetObjectItemCaseSensitive(t->root, "inputs");
    bool first = true;
    for (size_t a = 0; a < t->nall; a++) {
        const val *v = t->all[a];
        long i = v->tl[0] == 'i' ? strtol(v->tl + 1, NULL, 10) : -1;
        const char *nm = i >= 0 && t->fixed[i] ? by_i[i] : NULL;
        if (!nm)
            continue;
        for (cJSON *c = ins ? ins->child : NULL; c; c = c->next) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
            if (cJSON_IsString(n) && !strcmp(n->valuestring, nm)) {
                cJSON_Delete(cJSON_DetachItemViaPointer(ins, c));
                break;
            }
        }
        /* its values: at most 64 integers or 16 floats */
        size_t need = strlen(nm) + 64 * 26 + 256;
        if (*used + need >= *doclen) {
            char *d = realloc(*doc, *doclen = 2 * (*used + need));
            if (!d)
                return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
            *doc = d;
        }
        if (first)
            *used += (size_t)snprintf(*doc + *used, *doclen - *used,
                                      "\nfixed by tl compile, no longer inputs (the recipe's shapes and "
                                      "attributes were computed from these values; another value needs "
                                      "another tl compile):");
        first = false;
        *used += (size_t)snprintf(*doc + *used, *doclen - *used, "\n%s = %s", nm, v->k->ndim ? "[" : "");
        for (int64_t e = 0; e < v->k->numel; e++)
            *used += tl_dtype_is_int(v->k->dtype)
                         ? (size_t)snprintf(*doc + *used, *doclen - *used, "%s%lld", e ? ", " : "",
                                            (long long)tl_tensor_get_int(v->k, e))
                         : (size_t)snprintf(*doc + *used, *doclen - *used, "%s%.17g", e ? ", " : "",
                                            tl_tensor_get(v->k, e));
        if (v->k->ndim)
            *used += (size_t)snprintf(*doc + *used, *doclen - *used, "]");
    }
    return true;
}

/* The JSON of the recipe for these inputs. */
static bool build(tx *t, tl_tensor *const *in)
{
    tl_onnx_model *m = t->m;
    const Onnx__GraphProto *g = m->f->model->graph;
    /* the call's float type: the first float input's, a bool input's (a
     * number given for it) only where there is no other */
    t->call = TL_F32;
    for (int pass = 0, found = 0; pass < 2 && !found; pass++)
        for (int i = 0; i < m->nin && !found; i++)
            if (!tl_dtype_is_int(in[i]->dtype) && (pass || m->in_type[i] != TL_ONNX_BOOL))
                t->call = in[i]->dtype, found = 1;
    t->load_call = TL_F64;
    for (int i = m->nin - 1; i >= 0; i--)
        if (!tl_dtype_is_int(in[i]->dtype))
            t->load_call = in[i]->dtype;
    if (m->opset < 6 || m->opset > 18)
        return tl_fail(t->st, TL_EINPUT, "opset %d of ai.onnx: tl translates opsets 6 to 18 (tl ops --onnx "
                       "lists the ops)", m->opset), false;
    t->root = cJSON_CreateObject();
    cJSON_AddNumberToObject(t->root, "version", 1);
    t->inputs = cJSON_AddArrayToObject(t->root, "inputs");
    t->consts = cJSON_AddObjectToObject(t->root, "consts");
    t->nodes = cJSON_AddArrayToObject(t->root, "nodes");
    if (!t->root || !t->nodes)
        return tl_fail(t->st, TL_ERUNTIME, "out of memory"), false;
    for (int i = 0; i < m->nin; i++)
        if (!add_input(t, i, in[i]))
            return false;
    for (int k = 0; k < m->ntop; k++) { /* a subgraph binds its own where it is translated */
        const char *name = m->init_proto[k]->name;
        if (lookup(t, name))
            continue; /* an input (with a default) */
        val *v = known(t, tl_tensor_ref(m->init[k]), m->init_type[k]);
        if (!v || !bind(t, name, v))
            return false;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        t->node = g->node[i];
        t->node_index = (int)i;
        if (!translate_node(t, g->node[i]))
            return false;
    }
    t->node = NULL;
    if (!g->n_output)
        return tl_fail(t->st, TL_EINPUT, "the graph has no outputs"), false;
    cJSON *outs = cJSON_AddArrayToObject(t->root, "outputs");
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i]->name ? g->output[i]->name : "";
        val *v = lookup(t, name);
        if (!v)
            return tl_fail(t->st, TL_EINPUT, "graph output \"%.200s\" is not defined by any node", name), false;
        /* an output under another name (Identity, an input): a value of its own */
        if (v->user && strcmp(v->user, name)) {
            val *r = v->tl[0] || !foldable(v) ? copy_of(t, v) : NULL;
            if (!r && !foldable(v))
                return false;
            if (!r) { /* known data: a constant of that name */
                r = known(t, tl_tensor_ref(v->k), v->oty);
                if (!r || !name_of(t, r))
                    return false;
            }
            r->user = name;
            v = r;
        }
        const char *nm = name_of(t, v);
        if (!nm)
            return false;
        for (int j = 0; j < cJSON_GetArraySize(outs); j++)
            if (!strcmp(cJSON_GetArrayItem(outs, j)->valuestring, nm))
                return tl_fail(t->st, TL_EINPUT, "graph output \"%.200s\" is listed twice", name), false;
        cJSON_AddItemToArray(outs, cJSON_CreateString(nm));
    }
    return find_fixed(t);
}

/* cJSON prints a number with 15 significant digits wherever its own check,
 * an approximate one, lets it, which can move the last bit (0.07172611806186011
 * printed 0.0717261180618601): the recipe's numbers that are not whole are
 * written as the shortest text that reads back exactly, as tl prints
 * tensors.  False when memory ran out. */
static bool exact_numbers(cJSON *j)
{
    for (cJSON *c = j->child; c; c = c->next) {
        if (cJSON_IsNumber(c)) {
            double v = c->valuedouble;
            if (fabs(v) < 1e15 && v == trunc(v))
                continue; /* whole numbers print exactly */
            char buf[TL_FMT_LEN];
            tl_fmt_f64(buf, sizeof buf, v);
            char *r = malloc(strlen(buf) + 1);
            if (!r)
                return false;
            strcpy(r, buf);
            c->type = cJSON_Raw;
            c->valuestring = r;
        } else if (c->child && !exact_numbers(c)) {
            return false;
        }
    }
    return true;
}

/* The loaded graph gets the model's names and its weights' data. */
static tl_graph *finish(tx *t, tl_status *st)
{
    char *text = exact_numbers(t->root) ? cJSON_PrintUnformatted(t->root) : NULL;
    tl_graph *g = NULL;
    if (!text) {
        tl_fail(st, TL_ERUNTIME, "out of memory");
        goto done;
    }
    tl_graph_options go = {0};
    if (!(g = tl_graph_parse_with(text, strlen(text), t->m->path, &go, st))) {
        tl_wrap(st, "translating the model (a fault of tl's translator)");
        goto done;
    }
    const char **nm = tl_calloc((size_t)g->nslots + 1, sizeof *nm, "names", st);
    if (!nm) {
        tl_graph_free(g);
        g = NULL;
        goto done;
    }
    for (int i = 0; i < g->ninputs && i < t->m->nin; i++)
        g->inputs[i].fixed = t->fixed[i];
    for (size_t i = 0; i < t->nall; i++) {
        val *v = t->all[i];
        int s = v->tl[0] && v->user ? tl_graph_top_slot(g, v->tl) : -1;
        if (s >= 0 && !nm[s])
            nm[s] = v->user;
    }
    for (int i = 0; i < t->npatch; i++) {
        int s = tl_graph_top_slot(g, t->patch_name[i]), c = s >= 0 ? g->slot_const[s] : -1;
        int in = s >= 0 && g->slot_kind[s] == TL_SLOT_INPUT ? tl_graph_input_index(g, t->patch_name[i]) : -1;
        if (in >= 0 && g->inputs[in].dflt) { /* an input's default */
            tl_tensor_unref(g->inputs[in].dflt->tensor);
            g->inputs[in].dflt->kind = TL_CONST_DATA;
            g->inputs[in].dflt->tensor = t->patch[i];
            t->patch[i] = NULL;
        }
        if (c < 0)
            continue;
        g->consts[c].kind = TL_CONST_DATA;
        g->consts[c].typed = true;
        g->consts[c].tensor = t->patch[i];
        t->patch[i] = NULL;
    }
    tl_code rc = tl_graph_rename(g, nm, st);
    free(nm);
    if (rc) {
        tl_graph_free(g);
        g = NULL;
    }
done:
    free(text);
    return g;
}

tl_graph *tl_onnx_translate(tl_onnx_model *m, tl_tensor *const *in, tl_status *st)
{
    tx t = {.m = m, .st = st};
    tl_graph *g = NULL;
    if (build(&t, in))
        g = finish(&t, st);
    else
        tl_wrap(st, "%s", m->path);
    tx_free(&t);
    return g;
}

tl_graph *tl_onnx_signature(tl_onnx_model *m, tl_status *st)
{
    cJSON *root = cJSON_CreateObject(), *ins = cJSON_AddArrayToObject(root, "inputs");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON *c = cJSON_AddObjectToObject(root, "consts");
    cJSON_AddNumberToObject(c, "none", 0);
    cJSON_AddArrayToObject(root, "nodes");
    cJSON_AddStringToObject(root, "outputs", "none");
    for (int i = 0; i < m->nin; i++) {
        char nm[24];
        snprintf(nm, sizeof nm, "i%d", i);
        cJSON_AddItemToArray(ins, cJSON_CreateString(nm));
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), NULL;
    tl_graph *g = tl_graph_parse_with(text, strlen(text), m->path, NULL, st);
    free(text);
    if (!g)
        return NULL;
    const char **nm = tl_calloc((size_t)g->nslots + 1, sizeof *nm, "names", st);
    if (!nm || (memcpy(nm, m->in_name, sizeof *nm * (size_t)m->nin), tl_graph_rename(g, nm, st))) {
        free(nm);
        tl_graph_free(g);
        return NULL;
    }
    free(nm);
    return g;
}


/* ---------- without a call site: the shapes the model declares ---------- */

/* The shape the model declares for signature input i, or NULL. */
static const Onnx__TensorShapeProto *declared_shape(const tl_onnx_model *m, int i)
{
    const Onnx__GraphProto *g = m->f->model->graph;
    const Onnx__ValueInfoProto *v = NULL;
    for (size_t k = 0; k < g->n_input && !v; k++)
        if (!strcmp(g->input[k]->name, m->in_name[i]))
            v = g->input[k];
    const Onnx__TypeProto *tp = v ? v->type : NULL;
    return tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->shape
                                                                                          : NULL;
}

void tl_onnx_input_text(const tl_onnx_model *m, int i, char *buf, size_t len)
{
    const Onnx__TensorShapeProto *sh = declared_shape(m, i);
    tl_dtype dt;
    int ty = m->in_type[i];
    buf[0] = '\0';
    if (!ty && !sh)
        return;
    size_t k = (size_t)snprintf(buf, len, "%s", !ty                               ? ""
                                                  : ty != TL_ONNX_BOOL && onnx_dtype(ty, TL_F32, &dt) ? tl_dtype_name(dt)
                                                                                   : tl_onnx_type_name(ty));
    for (size_t d = 0; sh && d < sh->n_dim && k < len; d++) {
        const Onnx__TensorShapeProto__Dimension *x = sh->dim[d];
        const char *sep = d ? "," : "[";
        if (x->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            k += (size_t)snprintf(buf + k, len - k, "%s%lld", sep, (long long)x->dim_value);
        else
            k += (size_t)snprintf(buf + k, len - k, "%s%.40s", sep,
                                  x->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && x->dim_param &&
                                          x->dim_param[0] ? x->dim_param : "_");
    }
    if (k < len)
        snprintf(buf + k, len - k, "%s", !sh ? "" : sh->n_dim ? "]" : "[]");
}

static tl_tensor *declared(const tl_onnx_model *m, int i, tl_status *st)
{
    const Onnx__TensorShapeProto *sh = declared_shape(m, i);
    if (!sh)
        return tl_fail(st, TL_EINPUT, "input \"%.200s\" declares no shape: give it (NAME=TENSOR) to fix the "
                       "shapes", m->in_name[i]), NULL;
    if (sh->n_dim > TL_MAXDIM)
        return tl_fail(st, TL_EINPUT, "input \"%.200s\" has %zu dims (at most %d)", m->in_name[i], sh->n_dim, TL_MAXDIM), NULL;
    int64_t dims[TL_MAXDIM];
    for (size_t d = 0; d < sh->n_dim; d++) {
        if (sh->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            return tl_fail(st, TL_EINPUT, "input \"%.200s\" has a dynamic dim %zu%s%.100s: give the input "
                           "(NAME=TENSOR) to fix the shapes", m->in_name[i], d,
                           sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? " " : "",
                           sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? sh->dim[d]->dim_param : ""), NULL;
        dims[d] = sh->dim[d]->dim_value;
    }
    tl_dtype dt = TL_F32;
    if (!onnx_dtype(m->in_type[i] ? m->in_type[i] : TL_ONNX_FLOAT, TL_F32, &dt))
        return tl_fail(st, TL_EINPUT, "input \"%.200s\" is %s, which tl does not compute in", m->in_name[i],
                       tl_onnx_type_name(m->in_type[i])), NULL;
    int64_t n;
    if (tl_shape_numel((int)sh->n_dim, dims, &n, st))
        return tl_wrap(st, "input \"%.200s\"", m->in_name[i]), NULL;
    tl_tensor *z = tl_tensor_zeros(dt, (int)sh->n_dim, dims, st);
    if (z) { /* a shape: compile and diff must not take its zeros for values */
        tl_tensor_unref(m->placeholder[i]);
        m->placeholder[i] = tl_tensor_ref(z);
    }
    return z;
}

tl_graph *tl_onnx_translate_declared(tl_onnx_model *m, tl_tensor *const *given, tl_status *st)
{
    tl_tensor **in = tl_calloc((size_t)m->nin + 1, sizeof *in, "the inputs", st);
    tl_graph *g = NULL;
    bool ok = in != NULL;
    for (int i = 0; ok && i < m->nin; i++)
        if (!(in[i] = given && given[i] ? tl_tensor_ref(given[i]) : tl_onnx_default(m, i)) &&
            !(in[i] = declared(m, i, st)))
            ok = (tl_wrap(st, "%s", m->path), false);
    if (ok)
        g = tl_onnx_translate(m, in, st);
    for (int i = 0; in && i < m->nin; i++)
        tl_tensor_unref(in[i]);
    free(in);
    return g;
}

tl_graph *tl_onnx_load_declared(const char *path, const tl_onnx_options *o, tl_status *st)
{
    tl_onnx_model *m = tl_onnx_open(path, o, st);
    tl_graph *g = m ? tl_onnx_translate_declared(m, NULL, st) : NULL;
    tl_onnx_free(m);
    return g;
}

/* ---------- for onnx_flow.c (onnx_int.h) ---------- */

bool ox_fail(tx *t, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(t, "%s", msg);
}

val *ox_lookup(tx *t, const char *name) { return lookup(t, name); }
bool ox_bind(tx *t, const char *name, val *v) { return bind(t, name, v); }

/* The name's latest binding gone (a subgraph's names, after it: an outer
 * value its input shadowed is in scope again): its entry stays, under a
 * name no node uses, so that probing goes past it. */
void ox_unbind(tx *t, const char *name)
{
    ent *e = in_scope(t, name);
    if (e)
        e->name = "";
}

val *ox_new_val(tx *t) { return new_val(t); }
val *ox_known(tx *t, tl_tensor *k, int oty) { return known(t, k, oty); }
val *ox_known_ints(tx *t, int ndim, const int64_t *shape, const int64_t *data, int oty)
{
    return known_ints(t, ndim, shape, data, oty);
}
val *ox_call(tx *t, const char *op, int nargs, val *const *args, cJSON *attrs) { return call(t, op, nargs, args, attrs); }
val *ox_copy(tx *t, val *x) { return copy_of(t, x); }
const char *ox_name(tx *t, val *v) { return name_of(t, v); }
int ox_opset(const tx *t) { return opset(t); }
const Onnx__AttributeProto *ox_attr(const tx *t, const char *name) { return attr(t, name); }
int64_t ox_attr_i(const tx *t, const char *name, int64_t def) { return attr_i(t, name, def); }

bool ox_init_is_input(tx *t, const Onnx__TensorProto *p)
{
    const tl_onnx_model *m = t->m;
    int k = p->name ? find_init(m, p->name) : -1;
    if (k < 0 || m->init_proto[k] != p)
        return false;
    for (int i = 0; i < m->nin; i++)
        if (m->in_init[i] == k)
            return true;
    return false;
}

tl_tensor *ox_tensor(tx *t, Onnx__TensorProto *p, int *oty)
{
    tl_status st = {0};
    *oty = p->has_data_type ? p->data_type : 0;
    const tl_onnx_model *m = t->m;
    int i = p->name ? find_init(m, p->name) : -1;
    if (i >= 0 && m->init_proto[i] == p && m->init[i]) /* read at open (its data taken over then) */
        return tl_tensor_ref(m->init[i]);
    tl_tensor *k = tl_onnx_tensor(t->m->f, p, &st);
    if (!k)
        fail(t, "%s", st.msg);
    return k;
}

bool ox_translate_node(tx *t, const Onnx__NodeProto *n, int index)
{
    const Onnx__NodeProto *outer = t->node;
    int oi = t->node_index;
    if (outer && t->depth < OX_DEPTH) { /* a node of outer's subgraph: the way in, for errors */
        t->up[t->depth] = outer;
        t->up_index[t->depth] = oi;
    }
    t->depth += outer != NULL;
    t->node = n;
    t->node_index = index;
    bool ok = translate_node(t, n);
    if (ok) {
        t->depth -= outer != NULL;
        t->node = outer;
        t->node_index = oi;
    }
    return ok;
}

tl_tensor *tl_onnx_declared(const tl_onnx_model *m, int i, tl_status *st) { return declared(m, i, st); }

/* x given for signature input i, an initializer that is no graph input:
 * the stored shape, which every node reading it was made for. */
static tl_code check_weight(const tl_onnx_model *m, int i, const tl_tensor *x, tl_status *st)
{
    const Onnx__TensorProto *p = m->init_proto[m->in_init[i]];
    bool same = (int)p->n_dims == x->ndim;
    for (size_t d = 0; same && d < p->n_dims; d++)
        same = p->dims[d] == x->shape[d];
    if (same || p->n_dims > TL_MAXDIM)
        return TL_OK;
    tl_dtype dt = x->dtype;
    onnx_dtype(m->init_type[m->in_init[i]], TL_F32, &dt);
    char have[96], want[96];
    tl_shape_desc(x->dtype, x->ndim, x->shape, have, sizeof have);
    tl_shape_desc(dt, (int)p->n_dims, p->dims, want, sizeof want);
    return tl_fail(st, TL_EINPUT, "input \"%.200s\": the model's initializer is %s, got %s (a weight given a "
                   "value keeps its shape)", m->in_name[i], want, have);
}

tl_code tl_onnx_check_input(const tl_onnx_model *m, int i, const tl_tensor *x, tl_status *st)
{
    const Onnx__TensorShapeProto *sh = declared_shape(m, i);
    if (!x || (m->in_init[i] >= 0 && x == m->init[m->in_init[i]]))
        return TL_OK;
    if (!sh && m->in_init[i] >= 0) /* a weight made an input (--params, --wrt): the shape it is stored with */
        return check_weight(m, i, x, st);
    if (!sh)
        return TL_OK;
    int bad = -1;
    for (size_t d = 0; bad < 0 && d < sh->n_dim && (int)sh->n_dim == x->ndim; d++)
        if (sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            sh->dim[d]->dim_value > 0 && sh->dim[d]->dim_value != x->shape[d])
            bad = (int)d;
    if ((int)sh->n_dim == x->ndim && bad < 0)
        return TL_OK;
    char have[96], decl[160];
    tl_shape_desc(x->dtype, x->ndim, x->shape, have, sizeof have);
    tl_onnx_input_text(m, i, decl, sizeof decl);
    if (bad < 0)
        return tl_fail(st, TL_EINPUT, "input \"%.200s\": expected %zu dimensions, got %s (the model declares %s)",
                       m->in_name[i], sh->n_dim, have, decl);
    return tl_fail(st, TL_EINPUT, "input \"%.200s\": axis %d must have size %lld, got %s (the model declares %s)",
                   m->in_name[i], bad, (long long)sh->dim[bad]->dim_value, have, decl);
}

/* ---------- tl compile: the recipe as graph-file JSON ---------- */

/* A graph-file name for a model's name: other characters as '_', '_'
 * before a leading digit, and _2, _3... until it is not taken. */
typedef struct nameset {
    char **s;
    size_t cap, n;
} nameset;

static bool taken(const nameset *ns, const char *s)
{
    for (size_t i = hash_str(s) & (ns->cap - 1); ns->s[i]; i = (i + 1) & (ns->cap - 1))
        if (!strcmp(ns->s[i], s))
            return true;
    return false;
}

static char *claim(nameset *ns, const char *want, tl_status *st)
{
    size_t n = strlen(want);
    if (n > 200)
        n = 200;
    char *s = malloc(n + 24);
    if (!s)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), NULL;
    size_t k = 0;
    if (!n || (want[0] >= '0' && want[0] <= '9'))
        s[k++] = '_';
    for (size_t i = 0; i < n; i++) {
        char c = want[i];
        s[k++] = (c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) ? c : '_';
    }
    s[k] = '\0';
    for (int j = 2; taken(ns, s); j++)
        snprintf(s + k, 24, "_%d", j);
    size_t i = hash_str(s) & (ns->cap - 1);
    while (ns->s[i])
        i = (i + 1) & (ns->cap - 1);
    ns->s[i] = s;
    ns->n++;
    return s;
}

/* The new name of a recipe name ("t12", "c3", "i0"), or NULL. */
static const char *new_name(char **by_t, int ntl, char **by_i, int nin, const char *s)
{
    if ((s[0] != 't' && s[0] != 'c' && s[0] != 'i') || !s[1])
        return NULL;
    char *end;
    long k = strtol(s + 1, &end, 10);
    if (*end || k < 0)
        return NULL;
    return s[0] == 'i' ? (k < nin ? by_i[k] : NULL) : (k < ntl ? by_t[k] : NULL);
}

typedef struct renamer {
    char **by_t, **by_i;
    int ntl, nin;
} renamer;

static void rename_strings(const renamer *r, cJSON *j)
{
    if (cJSON_IsString(j)) {
        const char *n = new_name(r->by_t, r->ntl, r->by_i, r->nin, j->valuestring);
        if (n)
            cJSON_SetValuestring(j, n);
        return;
    }
    for (cJSON *c = j->child; c; c = c->next)
        if (cJSON_IsString(c))
            rename_strings(r, c);
        else if (cJSON_IsObject(c) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "name")))
            rename_strings(r, cJSON_GetObjectItemCaseSensitive(c, "name")); /* an input with a default */
}

/* Every name in the graph's JSON (ids, args, inputs, outputs, constant
 * names and npz keys; an iterate's init and a block's result, an if's
 * cond; in nested graphs too) to its new name. */
static void rename_json(const renamer *r, cJSON *j)
{
    static const char *const named[] = {"id", "args", "inputs", "outputs", "key", "init", "result", "cond"};
    for (cJSON *c = j->child; c; c = c->next) {
        const char *k = c->string;
        for (size_t i = 0; k && i < sizeof named / sizeof named[0]; i++)
            if (!strcmp(k, named[i]))
                rename_strings(r, c);
        if (k && !strcmp(k, "consts"))
            for (cJSON *d = c->child; d; d = d->next) {
                const char *n = new_name(r->by_t, r->ntl, r->by_i, r->nin, d->string);
                char *s = n ? malloc(strlen(n) + 1) : NULL;
                if (s) {
                    strcpy(s, n);
                    free(d->string);
                    d->string = s;
                }
            }
        if (cJSON_IsObject(c) || cJSON_IsArray(c))
            rename_json(r, c);
    }
}

/* The recipe's computation as text (nodes, constants, outputs: not the
 * inputs, whose defaults follow the values given). */
static char *recipe_text(const cJSON *root)
{
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return NULL;
    const char *keys[] = {"consts", "nodes", "outputs"};
    for (int i = 0; i < 3; i++) {
        cJSON *c = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, keys[i]), true);
        if (c)
            cJSON_AddItemToObject(r, keys[i], c);
    }
    char *text = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return text;
}

/* Whether input i's values shape the recipe: translated again with other
 * values (integers + 1, floats 2x + 1; in2: room for the inputs), the
 * recipe differs from base.  A translation that fails with them counts as
 * different; out of memory as not. */
static bool shapes_recipe(tl_onnx_model *m, tl_tensor *const *in, const tx *t, int i, const char *base,
                          tl_tensor **in2)
{
    tl_status st = {0};
    tl_tensor *p = tl_tensor_new(in[i]->dtype, in[i]->ndim, in[i]->shape, &st);
    if (!p)
        return false;
    for (int64_t e = 0; e < p->numel; e++)
        tl_tensor_set(p, e, tl_dtype_is_int(p->dtype) ? (double)(tl_tensor_get_int(in[i], e) + 1)
                                                      : 2 * tl_tensor_get(in[i], e) + 1);
    memcpy(in2, in, sizeof *in2 * (size_t)m->nin);
    in2[i] = p;
    /* a model of its own: a translation takes over its constants' data */
    tl_onnx_options o = {m->params, m->wrt, m->f->allow_outside};
    tl_onnx_model *m2 = tl_onnx_open(m->path, &o, &st);
    tx t2 = {.m = m2, .st = &st, .compile = true, .npz = t->npz};
    char *other = m2 && m2->nin == m->nin && build(&t2, in2) ? recipe_text(t2.root) : NULL;
    bool same = !m2 || m2->nin != m->nin || (other && !strcmp(other, base));
    free(other);
    tx_free(&t2);
    tl_onnx_free(m2);
    tl_tensor_unref(p);
    return !same;
}

/* The val of input i. */
static const val *input_val(const tx *t, int i)
{
    char nm[24];
    snprintf(nm, sizeof nm, "i%d", i);
    for (size_t a = 0; a < t->nall; a++)
        if (!strcmp(t->all[a]->tl, nm))
            return t->all[a];
    return NULL;
}

/* The inputs the recipe reads whose values also shaped it at load (a
 * shape input also added to data): translated again with other values,
 * the recipe differs, so the compiled graph holds for these values only.
 * A note naming them for tl compile's warning, or NULL.  And the float
 * inputs no node reads that were taken for fixed (known at load) whose
 * values shape nothing (an unused input, one read through Shape alone):
 * inputs of the compiled graph again, not fixed.  A fixed integer stays
 * fixed: its value may select an If's branch at load, which one other
 * value need not show (float values never do; they reach the recipe at
 * load only as sizes and counts). */
static char *pinned_note(tl_onnx_model *m, tl_tensor *const *in, tx *t)
{
    char *base = recipe_text(t->root), *note = NULL;
    size_t used = 0, cap = 0;
    tl_tensor **in2 = base ? calloc((size_t)m->nin + 1, sizeof *in2) : NULL;
    for (int i = 0; in2 && i < m->nin; i++) {
        const val *v = input_val(t, i);
        if (!v || !v->k || (t->fixed[i] && tl_dtype_is_int(in[i]->dtype)))
            continue;
        bool shapes = shapes_recipe(m, in, t, i, base, in2);
        if (t->fixed[i]) {
            t->fixed[i] = shapes;
            continue;
        }
        size_t need = strlen(m->in_name[i]) + 8;
        if (shapes && used + need >= cap) {
            char *more = realloc(note, 2 * (used + need) + 64);
            if (!more)
                break; /* out of memory: the names so far */
            note = more;
            cap = 2 * (used + need) + 64;
        }
        if (shapes)
            used += (size_t)snprintf(note + used, cap - used, "%s\"%s\"", used ? ", " : "", m->in_name[i]);
    }
    free(in2);
    free(base);
    return note;
}

tl_code tl_onnx_refine_fixed(tl_onnx_model *m, tl_tensor *const *in, tl_graph *g, tl_status *st)
{
    bool any = false;
    for (int i = 0; i < g->ninputs && i < m->nin; i++)
        any = any || g->inputs[i].fixed;
    if (!any)
        return TL_OK;
    /* the base recipe from a model of its own, as shapes_recipe's */
    tl_onnx_options o = {m->params, m->wrt, m->f->allow_outside};
    tl_onnx_model *m1 = tl_onnx_open(m->path, &o, st);
    tx t = {.m = m1, .st = st, .compile = true, .npz = "m.npz"};
    char *base = m1 && m1->nin == m->nin && build(&t, in) ? recipe_text(t.root) : NULL;
    tl_tensor **in2 = base ? calloc((size_t)m->nin + 1, sizeof *in2) : NULL;
    for (int i = 0; in2 && i < g->ninputs && i < m->nin; i++)
        if (g->inputs[i].fixed && !tl_dtype_is_int(in[i]->dtype) && !shapes_recipe(m, in, &t, i, base, in2))
            g->inputs[i].fixed = false;
    tl_code rc = in2 ? TL_OK : st->code ? st->code : tl_fail(st, TL_ERUNTIME, "out of memory");
    free(in2);
    free(base);
    tx_free(&t);
    tl_onnx_free(m1);
    return rc;
}

char *tl_onnx_compile(tl_onnx_model *m, tl_tensor *const *in, const char *npz_name, int *n, char ***keys,
                      tl_tensor ***tensors, char **pinned, tl_status *st)
{
    tx t = {.m = m, .st = st, .compile = true, .npz = npz_name};
    char *text = NULL, **by_t = NULL, **by_i = NULL, *doc = NULL;
    nameset ns = {0};
    *n = 0;
    *keys = NULL;
    *tensors = NULL;
    if (!build(&t, in)) {
        tl_wrap(st, "%s", m->path);
        goto done;
    }
    *pinned = pinned_note(m, in, &t);
    ns.cap = 64;
    while (ns.cap < 2 * (t.nall + 1))
        ns.cap *= 2;
    size_t doclen = 256, used = 0;
    if (!(ns.s = tl_calloc(ns.cap, sizeof *ns.s, "names", st)) ||
        !(by_t = tl_calloc((size_t)t.ntl + 1, sizeof *by_t, "names", st)) ||
        !(by_i = tl_calloc((size_t)m->nin + 1, sizeof *by_i, "names", st)) || !(doc = malloc(doclen)))
        goto done;
    used = (size_t)snprintf(doc, doclen, "translated from %s; the model's names as graph names (graph name: "
                            "model name), where they differ:", m->path);
    /* the model's names first (inputs, then in order), then tl's own */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < t.nall; i++) {
            val *v = t.all[i];
            if (!v->tl[0] || (pass == 0) != (v->user != NULL))
                continue;
            long k = strtol(v->tl + 1, NULL, 10);
            char **slot = v->tl[0] == 'i' ? &by_i[k] : &by_t[k];
            if (*slot || !(*slot = claim(&ns, v->user ? v->user : v->tl, st)))
                continue;
            if (v->user && strcmp(v->user, *slot)) {
                size_t need = strlen(v->user) + strlen(*slot) + 8;
                if (used + need >= doclen) {
                    char *d = realloc(doc, doclen = 2 * (used + need));
                    if (!d) {
                        tl_fail(st, TL_ERUNTIME, "out of memory");
                        goto done;
                    }
                    doc = d;
                }
                used += (size_t)snprintf(doc + used, doclen - used, "\n%s: %s", *slot, v->user);
            }
        }
    if (st->code)
        goto done;
    renamer r = {by_t, by_i, t.ntl, m->nin};
    rename_json(&r, t.root);
    if (!drop_fixed_inputs(&t, by_i, &doc, &doclen, &used))
        goto done;
    cJSON_AddStringToObject(t.root, "doc", doc);
    /* the npz members: the constants in_npz puts there */
    int nk = 0;
    for (int i = 0; i < t.npatch; i++)
        nk += in_npz(t.patch[i]);
    if (!(*keys = tl_calloc((size_t)nk + 1, sizeof **keys, "keys", st)) ||
        !(*tensors = tl_calloc((size_t)nk + 1, sizeof **tensors, "keys", st)))
        goto done;
    for (int i = 0; i < t.npatch; i++) {
        if (!in_npz(t.patch[i]))
            continue;
        const char *nm = new_name(by_t, t.ntl, by_i, m->nin, t.patch_name[i]);
        if (!((*keys)[*n] = tl_strdup(nm ? nm : t.patch_name[i], st)))
            goto done;
        (*tensors)[(*n)++] = t.patch[i];
        t.patch[i] = NULL;
    }
    text = tl_graph_layout(t.root, st); /* as tl compile lays out a graph file */
done:
    if (!text && *keys) {
        for (int i = 0; i < *n; i++) {
            free((*keys)[i]);
            tl_tensor_unref((*tensors)[i]);
        }
        free(*keys);
        free(*tensors);
        *keys = NULL;
        *tensors = NULL;
        *n = 0;
    }
    for (size_t i = 0; ns.s && i < ns.cap; i++)
        free(ns.s[i]);
    free(ns.s);
    free(by_t);
    free(by_i);
    free(doc);
    tx_free(&t);
    return text;
}
