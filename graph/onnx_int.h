/* The ONNX translator's state, shared by graph/onnx.c (the plain ops) and
 * graph/onnx_flow.c (If, Loop, Scan and the recurrent layers, which
 * translate subgraphs into the blocks of tl's if and iterate).  Private to
 * those two files. */
#ifndef TL_GRAPH_ONNX_INT_H
#define TL_GRAPH_ONNX_INT_H

#include <cjson/cJSON.h>

#include "formats/onnx.h"
#include "onnx.h"

#define MAXIO 64 /* inputs and outputs of one node handled here */

/* A value of the model: in the recipe (tl: its name there), or known at
 * load (k), or both. */
typedef struct val {
    char tl[24];    /* "" until it is in the recipe */
    int oty;        /* ONNX element type */
    tl_dtype dt;    /* tl's: bool is 0/1 of the call's float dtype */
    int ndim;
    int64_t dims[TL_MAXDIM];
    tl_tensor *k;   /* known at load: i64 for every integer and bool type */
    bool weight;    /* k is a float constant (never folded) */
    bool shadow;    /* k is known at load, but computed in the recipe from the call site's data */
    const char *user; /* the model's name for it, or NULL */
    char *own;        /* user, when made here */
    /* An integer computed at run time from a loop's step number: a single
     * element equal to step->(its value) + step_add, where step is the
     * body's iteration count, which runs over lo..hi (its own step, add 0).
     * Slice reads its bounds from it: sym_len of the bounds known at load. */
    struct val *step;
    int64_t step_add, lo, hi;
} val;

/* A name bound to a value; a subgraph's input may take a name of an
 * outer graph (ONNX allows it: inside, the name is the input), so a name
 * can be bound more than once: the binding with the highest seq is the
 * one in scope, until it is unbound. */
typedef struct ent {
    const char *name;
    val *v;
    size_t seq;
} ent;

typedef struct tx {
    tl_onnx_model *m;
    tl_status *st;
    size_t seq; /* bindings made (ent.seq) */
    tl_dtype call; /* the element type of the call: bools live in it */
    tl_dtype load_call; /* the loader's (exec/check.c): the first float input's, else f64; one_hot's */
    cJSON *root, *inputs, *consts, *nodes; /* nodes: of the block being written */
    int ntl;
    /* ONNX name -> value */
    ent *tab;
    size_t tcap, tn;
    val **all;
    size_t nall, capall;
    /* constants whose data comes after the load */
    int npatch, cappatch;
    char (*patch_name)[24];
    tl_tensor **patch;
    const char *user_of_new; /* names given to values made for the node being translated */
    int part;
    const Onnx__NodeProto *node;
    int node_index;
    /* the nodes whose subgraphs hold the node being translated, outermost
     * first (an error names the way in: "node 1 (Loop), in its subgraph
     * \"body\": node 0 (Det, opset 13): ..."); deeper ones are counted */
#define OX_DEPTH 8
    int depth;
    const Onnx__NodeProto *up[OX_DEPTH];
    int up_index[OX_DEPTH];
    bool compile; /* tl_onnx_compile: placeholders as npz members */
    /* per input of the model: its value was taken at load and the recipe
     * never reads it (build: find_fixed) */
    bool *fixed;
    const char *npz;
    /* an attribute of the node being translated that holds another type
     * than the op defines (transA as a float): refused once it is read */
    const char *bad_attr, *bad_want;
} tx;

typedef bool (*xlate)(tx *t, val **in, int nin, val **out, int nout);

/* graph/onnx.c, for onnx_flow.c */
bool ox_fail(tx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A value ONNX defines as one element (a Loop's M and conditions, If's
 * cond, a load-time scalar: a ratio, a bound, a fill value): true where
 * numel is 1; false, failed ("its WHAT holds N elements"), otherwise. */
bool ox_one_element(tx *t, int64_t numel, const char *what);
val *ox_lookup(tx *t, const char *name);
bool ox_bind(tx *t, const char *name, val *v);
void ox_unbind(tx *t, const char *name);
val *ox_new_val(tx *t);
val *ox_known(tx *t, tl_tensor *k, int oty);
val *ox_known_ints(tx *t, int ndim, const int64_t *shape, const int64_t *data, int oty);
val *ox_call(tx *t, const char *op, int nargs, val *const *args, cJSON *attrs);
val *ox_copy(tx *t, val *x);
const char *ox_name(tx *t, val *v);
bool ox_translate_node(tx *t, const Onnx__NodeProto *n, int index);
int ox_opset(const tx *t);
/* The node's attribute of that name, or NULL; an int one's value, or def. */
const Onnx__AttributeProto *ox_attr(const tx *t, const char *name);
int64_t ox_attr_i(const tx *t, const char *name, int64_t def);
/* A subgraph's initializer (read once: its bytes are released). */
tl_tensor *ox_tensor(tx *t, Onnx__TensorProto *p, int *oty);
/* whether p, a subgraph's initializer, is an input of the model (--params,
 * --wrt): its name then stands for that input, bound at the top */
bool ox_init_is_input(tx *t, const Onnx__TensorProto *p);

/* graph/onnx_flow.c: a fixed-count iterate being written.  Open it, declare
 * the carried values (ox_iter_state: the value to read in the body), write
 * the body's nodes (the step number is iv, or ivf as a float of the call),
 * set res[i] to each carried value's next value (ox_iter_stack: a carried
 * [count, ...] of per-step rows), then close it (out: the final values, in
 * the order declared) or abort it. */
typedef struct ox_iter {
    int64_t count;
    char index[24];
    val *iv, *ivf; /* the step number: an index, and a float of the call */
    cJSON *outer;
    int n;
    val *init[MAXIO], *state[MAXIO], *res[MAXIO];
} ox_iter;

bool ox_iter_open(tx *t, ox_iter *it, int64_t count);
val *ox_iter_state(tx *t, ox_iter *it, val *init);
/* Step i's row of x (the steps on axis 0). */
val *ox_iter_row(tx *t, ox_iter *it, val *x);
bool ox_iter_stack(tx *t, ox_iter *it, val *y, bool reversed);
bool ox_iter_close(tx *t, ox_iter *it, val **out);
void ox_iter_abort(tx *t, ox_iter *it);

/* graph/onnx_flow.c: its rows of the op table */
bool ox_if(tx *t, val **in, int nin, val **out, int nout);
bool ox_loop(tx *t, val **in, int nin, val **out, int nout);
bool ox_scan(tx *t, val **in, int nin, val **out, int nout);
bool ox_rnn(tx *t, val **in, int nin, val **out, int nout);

#endif
