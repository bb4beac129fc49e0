/* ONNX models as graphs: a ModelProto (formats/onnx.h) translated node by
 * node into the recipe a JSON graph loads into, specialized to the types
 * of the tensors supplied at the call site.
 *
 * How: each node becomes tl calls written as graph-file JSON (names made
 * up, weights as placeholders), which the graph loader validates like any
 * graph file; the loaded graph then gets the model's own names back
 * (tl_graph_rename) and its weights as data constants holding the tensors
 * read from the model (no copy, no text).  Integer shape arithmetic
 * (Shape, Gather, Concat... on int64 data from shapes and integer
 * constants) is evaluated here, into the attributes of the calls that use
 * it; float values are never folded.
 *
 * Ownership: a tl_onnx_model owns the file and its initializers; graphs
 * made from it are independent of it (tl_graph_free them). */
#ifndef TL_GRAPH_ONNX_H
#define TL_GRAPH_ONNX_H

#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_onnx_model tl_onnx_model;

typedef struct tl_onnx_options {
    bool params;     /* every float initializer an input (its stored value by default) */
    const char *wrt; /* comma-separated names: initializers among them become inputs too */
    bool allow_outside_files; /* external data outside the model's folder */
} tl_onnx_options;

/* Whether a GRAPH argument names an ONNX model (ends in .onnx). */
bool tl_onnx_is_model(const char *path);

/* Reads a model and its initializers.  Errors (TL_EINPUT) start with the
 * path. */
tl_onnx_model *tl_onnx_open(const char *path, const tl_onnx_options *o, tl_status *st);
tl_onnx_model *tl_onnx_open_mem(const void *data, size_t len, const char *path, const tl_onnx_options *o,
                                tl_status *st);
void tl_onnx_free(tl_onnx_model *m);

/* The initializer of that name (a reference the caller drops); an error
 * listing the names when there is none. */
tl_tensor *tl_onnx_initializer(const tl_onnx_model *m, const char *name, tl_status *st);

/* The inputs of the translated graph, in order: the graph inputs that are
 * not initializers, those that are (inputs with a default), then (with
 * --params or --wrt) the other initializers made inputs.  A graph with
 * just these inputs (under the model's names), for binding tensors. */
tl_graph *tl_onnx_signature(tl_onnx_model *m, tl_status *st);
/* The model's initializers, by name (for hints at a name mistyped): how
 * many, and the name of initializer i. */
int tl_onnx_initializer_count(const tl_onnx_model *m);
const char *tl_onnx_initializer_name(const tl_onnx_model *m, int i);
/* The default of signature input i (a reference the caller drops), or
 * NULL when it has none and must be supplied. */
tl_tensor *tl_onnx_default(const tl_onnx_model *m, int i);
/* Drops the model's own references to the initializers that are
 * signature inputs, for a run given its inputs (tl_run_opts.give_inputs):
 * each weight then goes at its last use.  The model then no longer gives
 * those as defaults or initializers. */
void tl_onnx_drop_inputs(tl_onnx_model *m);

/* The recipe for these inputs (one tensor per signature input; their
 * dtypes, shapes and, where a node needs them at load, values fix the
 * translation, and the recipe's inputs declare those dtypes and shapes).
 * Any shape is taken: tl_onnx_check_input holds one to the model's
 * declaration. */
tl_graph *tl_onnx_translate(tl_onnx_model *m, tl_tensor *const *in, tl_status *st);
/* tl diff: the float inputs of g (m translated for in) marked fixed whose
 * values shape nothing after all (translated with other values, the
 * recipe is the same: an input no node reads, or one read through Shape
 * alone) are inputs again, as tl compile keeps them. */
tl_code tl_onnx_refine_fixed(tl_onnx_model *m, tl_tensor *const *in, tl_graph *g, tl_status *st);

/* A model translated for the inputs it declares (their fixed shapes, zeros
 * as values, the defaults of inputs with one), for commands given no
 * tensors (tl check, dot, diff...).  A dynamic dim is an error asking for
 * the input, and so is a node that needs such an input's values at load
 * (tl_onnx_declared's zeros stand for a shape, never for values). */
tl_graph *tl_onnx_load_declared(const char *path, const tl_onnx_options *o, tl_status *st);
/* The same for an open model, with the tensors given (NULL, or one per
 * signature input: NULL where none is given) taken first. */
tl_graph *tl_onnx_translate_declared(tl_onnx_model *m, tl_tensor *const *given, tl_status *st);

/* Input i as the model declares it: zeros of its fixed shape (a dynamic
 * dim is an error asking for the input), which a translation of m takes
 * for the shape alone: a node that needs the input's values at load asks
 * for the input. */
tl_tensor *tl_onnx_declared(const tl_onnx_model *m, int i, tl_status *st);
/* Whether x fits the shape the model declares for signature input i, as
 * the graph loader checks a graph file's declared inputs and ONNX Runtime
 * a model's: the rank, where a shape is declared, and each size given as
 * a number (dim_value; 0 or less, which some exporters write for a
 * dynamic dim, stands for any size, as a named dim_param and a dim with
 * neither do); a weight made an input (params, wrt), that is no graph
 * input, to the shape it is stored with.  The model's own default of an
 * input is not checked.
 * Translating does not check it (it takes whatever tensors it is given);
 * the command line does, before translating.  TL_EINPUT: "input "x":
 * axis 0 must have size 3, got f32[1,2] (the model declares f32[3,2])". */
tl_code tl_onnx_check_input(const tl_onnx_model *m, int i, const tl_tensor *x, tl_status *st);
/* Whether the model declares signature input i bool: given as numbers
 * (0/1, nonzero as true, of an integer or float dtype), it is a
 * condition or a mask, never differentiated (no gradient, no tangent),
 * whatever dtype its numbers came in. */
bool tl_onnx_input_is_bool(const tl_onnx_model *m, int i);
/* "f32[batch,3,224,224]": the type the model declares for signature
 * input i, as tl check writes a type (a dim without a size or name: _),
 * for a message; "" where it declares none. */
void tl_onnx_input_text(const tl_onnx_model *m, int i, char *buf, size_t len);

/* The same recipe as graph-file JSON for `tl compile`, in its layout
 * (tl_graph_layout, program.h; each input declared with the dtype and
 * shape of the tensor given for it): weights of more
 * than 16 elements as members of the .npz `npz_name` (beside the JSON),
 * given back in *keys / *tensors (*n of them; the caller frees the arrays
 * and unrefs the tensors); the model's names mapped to graph-file names,
 * the mapping in "doc".  The inputs whose values the translation took at
 * load and that the recipe never reads are left out (their values in
 * "doc"); those that it also reads, for which the recipe holds with the
 * values given only, are named in *pinned ("\"s\", \"t\"", the caller's to
 * free; NULL: none).  The text is the caller's to free. */
char *tl_onnx_compile(tl_onnx_model *m, tl_tensor *const *in, const char *npz_name, int *n, char ***keys,
                      tl_tensor ***tensors, char **pinned, tl_status *st);

/* One line per ONNX op translated: "Name opsets A-B" (for tl ops --onnx);
 * i counts from 0, NULL past the end. */
const char *tl_onnx_op_name(int i, int *lo, int *hi);

#ifdef __cplusplus
}
#endif

#endif
