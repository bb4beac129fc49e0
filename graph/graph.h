/* A validated recipe: the JSON graph file turned into nodes over numbered
 * slots.  Every name of the file (inputs, consts, node ids, block
 * parameters) is unique, so it gets one slot; scope rules were checked at
 * load time, so the executor never looks a name up.  The tl_graph owns
 * everything reachable from it (free with tl_graph_free); results computed
 * from a graph point into it and must not outlive it. */
#ifndef TL_GRAPH_H
#define TL_GRAPH_H

#include "backends/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_arg {
    int slot;   /* -1: a weak scalar given as a JSON number */
    int num_id; /* numbers get ids 0..nnums-1, equal numbers (bit for bit) mostly
                 * one id (a run caches them as tensors) */
    double num; /* its value */
} tl_arg;

typedef struct tl_node tl_node;

typedef struct tl_block {
    int nnodes;
    tl_node *nodes;
    int nresult;
    int *result; /* slots */
} tl_block;

/* The parts of an if, iterate or map node.  Every other node points at one
 * shared read-only record with no blocks and cond.slot, index_slot -1. */
typedef struct tl_flow {
    /* if */
    tl_arg cond;
    tl_block *then_b, *else_b;
    /* iterate (init in the node's args) */
    int64_t count;
    int *state;     /* nargs slots bound in body */
    int index_slot; /* -1 when absent */
    /* iterate and map */
    tl_block *body;
    int *params; /* map: nargs slots bound in body */
    struct tl_mprog *prog; /* map: the body compiled (graph/mapc.h) */
    int ncap;
    int *cap_slots; /* map: outer names the body reads */
} tl_flow;

/* 64 bytes: a large graph is mostly nodes.  What they point at lives in
 * the graph's arena (names, arrays, attribute records), except the
 * blocks, arrays and programs of flow nodes. */
struct tl_node {
    tl_opcode op : 16;
    uint16_t nout; /* at most 256 */
    int index; /* 0..g->nnodes-1 over every block, in file order */
    int nargs;
    int nfree;
    char *name; /* the first id, for messages */
    int *out;   /* slots defined by this node */
    tl_arg *args; /* op arguments; map: tensors lifted over; iterate: init */
    const tl_attrs *attrs; /* shared defaults (tl_attrs_init) when the node gives none */
    tl_flow *flow;
    int *free_after; /* names of the enclosing block whose last use is this node */
};

enum tl_slot_kind { TL_SLOT_INPUT, TL_SLOT_CONST, TL_SLOT_NODE, TL_SLOT_PARAM };

typedef enum tl_dim_kind { TL_DIM_ANY, TL_DIM_FIXED, TL_DIM_VAR } tl_dim_kind;

typedef struct tl_dimspec {
    tl_dim_kind kind;
    int64_t size; /* TL_DIM_FIXED */
    int var;      /* TL_DIM_VAR: index into tl_graph.sizevars */
} tl_dimspec;

struct tl_const;

typedef struct tl_input {
    char *name;
    int slot;
    bool has_dtype;
    tl_dtype dtype;
    int ndim; /* -1: any shape */
    tl_dimspec dims[TL_MAXDIM];
    /* "default": the tensor taken when the call site gives none (a data,
     * fill or file constant, typed: its own dtype, else the input's, else
     * f64); NULL: the input must be given.  Owned by the graph. */
    struct tl_const *dflt;
    /* an ONNX model's input whose value the translation took at load (a
     * TopK's k, a Reshape's shape) and that the recipe never reads: a
     * recipe made for that value alone (tl compile leaves it out) */
    bool fixed;
} tl_input;

typedef enum tl_const_kind {
    TL_CONST_WEAK, /* a number: takes the dtype of what it meets */
    TL_CONST_DATA, /* data, already materialised */
    TL_CONST_FILL, /* {"shape", "fill"}: made on first use, charged to the run */
    TL_CONST_FILE, /* .npy / .npz member, read on first use */
} tl_const_kind;

typedef struct tl_const {
    char *name;
    int slot;
    tl_const_kind kind;
    double num;        /* WEAK, FILL */
    bool typed;        /* DATA, FILL: dtype given; else it takes the call's */
    tl_dtype dtype;    /* FILL (when typed) */
    int ndim;          /* FILL */
    int64_t shape[TL_MAXDIM];
    tl_tensor *tensor; /* DATA: f64 when untyped */
    char *path;        /* FILE: resolved against the graph's folder */
    char *key;         /* FILE: npz member, or NULL */
} tl_const;

/* A place in a program: line and column from 1, the column counted in
 * characters of UTF-8 text; 0 and 0 for no place. */
typedef struct tl_srcpos {
    int line, col;
} tl_srcpos;

typedef struct tl_graph {
    char *path; /* as given, for messages */
    /* A graph a program translated to (program.h): the program's text and,
     * per slot, the place in it that made the slot (0:0: none), so that
     * errors point at the text; NULL for a graph file. */
    char *source;
    size_t source_len;
    tl_srcpos *slot_pos;
    char *doc;
    int nslots;
    char **slot_name;
    unsigned char *slot_kind; /* enum tl_slot_kind */
    int *slot_const;          /* slot -> index in consts, or -1 */
    unsigned char *slot_top;  /* slot -> 1 when a top-level node makes it */
    int ninputs;
    tl_input *inputs;
    int nconsts;
    tl_const *consts;
    int nsizevars;
    char **sizevars;
    tl_block top;
    int noutputs;
    int *outputs; /* slots */
    int nnums;    /* ids of number arguments (tl_arg.num_id) */
    int nnodes;   /* nodes in every block */
    int *names;   /* name -> slot, open addressing over tcap entries (-1: free) */
    int tcap;
    struct tl_arena *arena; /* storage of names and per-node arrays (graph.c) */
} tl_graph;

typedef struct tl_graph_options {
    /* file constants may name absolute paths or climb out of the graph's
     * folder with ".." (off by default: a graph names only its own files) */
    bool allow_outside_files;
} tl_graph_options;

/* Loads and validates a graph file.  Errors: TL_EINPUT with a message
 * starting with the path ("g.json:3:7: ..." for JSON syntax, "g.json: node
 * "h" (matmul): ..." for meaning).  A path ending in .tl is a program,
 * loaded as tl_program_load loads its text (program.h; errors at
 * "p.tl:LINE:COL: ...", and tl_program_place puts a run's errors there);
 * one ending in .onnx is an error: a model is translated for its inputs
 * (tl_onnx_open, tl_onnx_translate: onnx.h). */
tl_graph *tl_graph_load(const char *path, tl_status *st);
/* The same from text in memory; `path` names it in messages and anchors
 * relative file constants. */
tl_graph *tl_graph_parse(const char *text, size_t len, const char *path, tl_status *st);
/* The same with options (NULL: defaults). */
tl_graph *tl_graph_load_with(const char *path, const tl_graph_options *o, tl_status *st);
tl_graph *tl_graph_parse_with(const char *text, size_t len, const char *path,
                              const tl_graph_options *o, tl_status *st);
/* The same always through one cJSON tree of the whole text: the path that
 * gives every error message.  The others read the top-level nodes one at
 * a time (in memory, the text and the graph, not a tree of the text) and
 * take this path where that fails, so for tests that compare the two. */
tl_graph *tl_graph_parse_dom(const char *text, size_t len, const char *path,
                             const tl_graph_options *o, tl_status *st);
/* Removes the inputs marked fixed (an ONNX model's, tl_input.fixed): the
 * graph as tl compile writes it, for comparing with one. */
void tl_graph_drop_fixed_inputs(tl_graph *g);
/* How many loads in this process went the whole-document way (those that
 * failed, and texts the fast path does not take).  Not thread-safe: for
 * tests that a large graph takes the fast path. */
unsigned long tl_graph_dom_loads(void);
void tl_graph_free(tl_graph *g);

/* For translators that point at their own source (graph/program.c): checks
 * one call of a plain op as the loader checks a node (attribute names,
 * types and values, required attributes, the number of arguments).
 * `node` is a node object ({"op", "args", attributes...}) whose args may
 * all be numbers.  On TL_EINPUT *bad_key is the attribute at fault, or
 * NULL when the fault is the call's. */
struct cJSON;
tl_code tl_graph_check_call(const struct cJSON *node, const char **bad_key, tl_status *st);
/* The attributes of one call (a node object as above; its args are not
 * read) as the loader parses them, into *out (its `indices` left empty).
 * For translators that need the result types of what they emit. */
tl_code tl_graph_call_attrs(const struct cJSON *node, tl_attrs *out, tl_status *st);
/* Gives slots new names (names[slot], NULL: kept), for translators whose
 * source names are not graph-file names (graph/onnx.c): node, input and
 * constant names follow, and lookups by name find the new ones. */
tl_code tl_graph_rename(tl_graph *g, const char *const *names, tl_status *st);
/* The key a graph file writes for attribute bit A_* ("axes", "keepdims"...). */
const char *tl_attr_name(uint64_t bit);

/* Drops the inputs' defaults that hold data (an ONNX model's weights):
 * for a run given its inputs (tl_run_opts.give_inputs), whose tensors
 * then go at their last use.  Those inputs have no default after. */
void tl_graph_drop_default_data(tl_graph *g);
/* "f32[n,3]": what the graph declares of input i, its dtype, its shape or
 * both (a dim of any size: _), as tl check writes a type; "" where it
 * declares neither. */
void tl_input_type_text(const tl_graph *g, int i, char *buf, size_t len);
/* Input i's default as a tensor (a new reference, tl_input.dflt), or NULL:
 * with st untouched when it has none, with the error (naming the input and
 * its file) when it cannot be read. */
tl_tensor *tl_input_default(const tl_graph *g, int i, tl_status *st);
/* Reads a file constant's tensor (a new reference); errors name the
 * constant and its file (f64.c). */
tl_tensor *tl_const_read_file(const tl_const *c, tl_status *st);
/* After reading the file at path failed: st as it is, unless the file is
 * no .npy or .npz by its ending nor by its first bytes; then TL_EINPUT
 * saying what file constants read. */
tl_code tl_const_file_kind(const char *path, tl_status *st);
/* Makes g its own f64 copy (what tl gradcheck --f64 checks): every f32 of
 * the recipe becomes f64, the declared dtypes of inputs, typed and file
 * constants (read now, then cast) and the dtype of cast and random ops;
 * nothing else changes.  The caller casts the inputs (tl_tensor_f64). */
tl_code tl_graph_to_f64(tl_graph *g, tl_status *st);
/* The slot of any name of the graph (in any block), or -1. */
int tl_graph_slot(const tl_graph *g, const char *name);
/* Input index by name, or -1. */
int tl_graph_input_index(const tl_graph *g, const char *name);
/* The slot of a name of the top scope (an input, a constant or a node of
 * the top block), or -1. */
int tl_graph_top_slot(const tl_graph *g, const char *name);
/* The hash of a name that the graph's name table uses (for other tables
 * of names: its low bits are well mixed). */
uint64_t tl_name_hash(const char *s);

#ifdef __cplusplus
}
#endif

#endif
