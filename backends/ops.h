/* The operation enum, its table (backends/ops.def) and the attribute record
 * every op call carries.  Read-only data; nothing here owns memory except
 * that tl_attrs.indices points at storage owned by whoever built the attrs
 * (the graph, for graph nodes). */
#ifndef TL_OPS_H
#define TL_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

typedef enum tl_opkind {
    TL_KIND_BIN,
    TL_KIND_CMP,
    TL_KIND_UN,
    TL_KIND_RED,
    TL_KIND_MISC,
    TL_KIND_FLOW,
    TL_KIND_INT,
} tl_opkind;

/* Attribute bits: which attributes an op accepts in a graph file. */
enum {
    A_AXES = 1 << 0,     /* int or list of ints (reductions, squeeze) */
    A_KEEPDIMS = 1 << 1, /* bool */
    A_AXIS = 1 << 2,     /* int */
    A_APPROX = 1 << 3,   /* "none" | "tanh" */
    A_MIN = 1 << 4,      /* number */
    A_MAX = 1 << 5,      /* number */
    A_DTYPE = 1 << 6,    /* "f32" | "f64" */
    A_SHAPE = 1 << 7,    /* list of ints */
    A_PERM = 1 << 8,     /* "axes": a permutation (transpose) */
    A_START = 1 << 9,    /* int or null */
    A_STOP = 1 << 10,    /* int or null */
    A_STEP = 1 << 11,    /* int > 0 */
    A_INDICES = 1 << 12, /* list of ints */
    A_DEPTH = 1 << 13,   /* int >= 0 (one_hot) */
};

/* Which dtypes an op's value arguments take (ops.def). */
typedef enum tl_opdtypes {
    TL_DT_FLOAT, /* f32, f64 */
    TL_DT_ANY,   /* index tensors too */
} tl_opdtypes;

typedef enum tl_opcode {
#define OP(e, name, lo, hi, kind, dtypes, idx, attrs) TL_OP_##e,
#include "ops.def"
#undef OP
    TL_OP_COUNT
} tl_opcode;

typedef struct tl_opinfo {
    const char *name;
    int min_args, max_args; /* max -1: any number */
    tl_opkind kind;
    tl_opdtypes dtypes;
    int index_arg; /* the argument that is an index tensor, or -1 */
    unsigned attrs;
} tl_opinfo;

extern const tl_opinfo tl_ops[TL_OP_COUNT];

/* TL_EINPUT "takes 2 arguments, got 3" unless n fits op's arity. */
tl_code tl_op_check_arity(tl_opcode op, int n, tl_status *st);

/* Edit distance between two short strings (insertions, deletions,
 * substitutions, swaps of neighbours), capped at 9. */
int tl_edit_distance(const char *a, const char *b);
/* The name among candidates[0..n-1] nearest to name (at most 2 edits, or
 * one a third of its length), or NULL. */
const char *tl_nearest(const char *name, const char *const *candidates, int n);
/* The op a mistyped op name most likely meant, or NULL. */
const char *tl_op_suggest(const char *name);

/* TL_OP_COUNT when name is not an op a graph may use. */
tl_opcode tl_op_lookup(const char *name);

typedef struct tl_attrs {
    bool has_axes;
    int naxes;
    int64_t axes[TL_MAXDIM]; /* reductions, squeeze, transpose (perm) */
    bool keepdims;
    bool has_axis;
    int64_t axis;
    int nshape;
    int64_t shape[TL_MAXDIM]; /* reshape, broadcast_to; *_grad: input shape */
    bool has_min, has_max;
    double min, max;
    int approximate; /* gelu: 0 none, 1 tanh */
    tl_dtype dtype;  /* cast; one_hot: the element type of the call */
    bool has_start, has_stop;
    int64_t start, stop, step;
    int64_t nindices;
    const int64_t *indices;
    int64_t depth; /* one_hot */
    bool trans_a, trans_b; /* matmul: use the operand transposed (gemm flags) */
    const struct tl_mprog *prog; /* map, map_grad: the compiled scalar program */
    const bool *want;            /* map_grad: which inputs get a derivative */
} tl_attrs;

/* Attributes with every default set (step 1, axis -1 for softmax...). */
void tl_attrs_init(tl_attrs *a);
/* The same defaults as a record (graph nodes without attributes share it). */
extern const tl_attrs tl_attrs_default;

#endif
