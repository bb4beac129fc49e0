/* The operation enum, its table (backends/ops.def) and the attribute record
 * every op call carries.  Read-only data; nothing here owns memory except
 * that tl_attrs.indices points at storage owned by whoever built the attrs
 * (the graph, for graph nodes). */
#ifndef TL_OPS_H
#define TL_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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
#define TL_A_AXES (UINT64_C(1) << 0)      /* int or list of ints (reductions, squeeze) */
#define TL_A_KEEPDIMS (UINT64_C(1) << 1)  /* bool */
#define TL_A_AXIS (UINT64_C(1) << 2)      /* int */
#define TL_A_APPROX (UINT64_C(1) << 3)    /* "none" | "tanh" */
#define TL_A_MIN (UINT64_C(1) << 4)       /* number */
#define TL_A_MAX (UINT64_C(1) << 5)       /* number */
#define TL_A_DTYPE (UINT64_C(1) << 6)     /* "f32" | "f64" */
#define TL_A_SHAPE (UINT64_C(1) << 7)     /* list of ints */
#define TL_A_PERM (UINT64_C(1) << 8)      /* "axes": a permutation (transpose) */
#define TL_A_START (UINT64_C(1) << 9)     /* int or null */
#define TL_A_STOP (UINT64_C(1) << 10)     /* int or null */
#define TL_A_STEP (UINT64_C(1) << 11)     /* int > 0 */
#define TL_A_INDICES (UINT64_C(1) << 12)  /* list of ints */
#define TL_A_DEPTH (UINT64_C(1) << 13)    /* int >= 0 (one_hot) */
/* the layer ops (nn.md) */
#define TL_A_KERNEL (UINT64_C(1) << 14)   /* int or list of d ints >= 1 */
#define TL_A_STRIDE (UINT64_C(1) << 15)   /* int or list of d ints >= 1 */
#define TL_A_PADDING (UINT64_C(1) << 16)  /* int, list of d ints or of d [begin, end] pairs, >= 0 */
#define TL_A_DILATION (UINT64_C(1) << 17) /* int or list of d ints >= 1 */
#define TL_A_GROUPS (UINT64_C(1) << 18)   /* int >= 1 */
#define TL_A_OUT_PAD (UINT64_C(1) << 19)  /* "output_padding": int or list of d ints >= 0 */
#define TL_A_CEIL (UINT64_C(1) << 20)     /* "ceil_mode": bool */
#define TL_A_COUNT_PAD (UINT64_C(1) << 21) /* "count_include_pad": bool */
#define TL_A_EPS (UINT64_C(1) << 22)      /* "epsilon": number > 0 */
#define TL_A_TRAINING (UINT64_C(1) << 23) /* bool */
#define TL_A_PADS (UINT64_C(1) << 24)     /* list of [begin, end] pairs, one per axis */
#define TL_A_MODE (UINT64_C(1) << 25)     /* pad: "constant" "reflect" "edge" "wrap"; resize: "nearest" "linear" "cubic" */
#define TL_A_VALUE (UINT64_C(1) << 26)    /* number (pad's constant) */
#define TL_A_SIZE (UINT64_C(1) << 27)     /* list of d ints >= 1 (resize) */
#define TL_A_SCALE (UINT64_C(1) << 28)    /* list of d numbers > 0 (resize) */
#define TL_A_COORD (UINT64_C(1) << 29)    /* "coordinate": resize's coordinate transform */
#define TL_A_NEAREST (UINT64_C(1) << 30)  /* "nearest": resize's rounding */
#define TL_A_CUBIC (UINT64_C(1) << 31)    /* "cubic_coeff": number */
#define TL_A_LAST (UINT64_C(1) << 32)     /* "select_last_index": bool */
#define TL_A_EXCLUSIVE (UINT64_C(1) << 33) /* bool */
#define TL_A_REVERSE (UINT64_C(1) << 34)  /* bool */
#define TL_A_SEED (UINT64_C(1) << 35)     /* int */
#define TL_A_LOW (UINT64_C(1) << 36)      /* number */
#define TL_A_HIGH (UINT64_C(1) << 37)     /* number */
#define TL_A_MEANV (UINT64_C(1) << 38)    /* "mean": number (random_normal) */
#define TL_A_STD (UINT64_C(1) << 39)      /* number > 0 */
#define TL_A_P (UINT64_C(1) << 40)        /* number in [0, 1) */

/* pad's modes */
enum { TL_PAD_CONSTANT, TL_PAD_REFLECT, TL_PAD_EDGE, TL_PAD_WRAP };
/* resize's modes, coordinate transforms and nearest roundings */
enum { TL_RESIZE_NEAREST, TL_RESIZE_LINEAR, TL_RESIZE_CUBIC };
enum { TL_COORD_HALF_PIXEL, TL_COORD_PYTORCH_HALF_PIXEL, TL_COORD_ALIGN_CORNERS, TL_COORD_ASYMMETRIC };
enum { TL_NEAREST_ROUND_PREFER_FLOOR, TL_NEAREST_ROUND_PREFER_CEIL, TL_NEAREST_FLOOR, TL_NEAREST_CEIL };

/* At most 3 spatial axes (conv, pools, resize). */
#define TL_MAXSP 3

/* Which dtypes an op's value arguments take (ops.def). */
typedef enum tl_opdtypes {
    TL_DT_FLOAT, /* f32, f64 */
    TL_DT_NUM,   /* f32, f64, i32, i64: the integer arithmetic (one dtype per call) */
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
    uint64_t attrs;
} tl_opinfo;

extern const tl_opinfo tl_ops[TL_OP_COUNT];

/* TL_EINPUT "takes 2 arguments, got 3" unless n fits op's arity. */
tl_code tl_op_check_arity(tl_opcode op, int n, tl_status *st);

/* Edit distance between two short strings (insertions, deletions,
 * substitutions, swaps of neighbours), capped at 9. */
int tl_edit_distance(const char *a, const char *b);
/* The name among candidates[0..n-1] nearest to name (at most 2 edits, or
 * one a third of its length, and at most half its length), or NULL.  Of
 * names as near, the one sharing most letters with name (a swap keeps
 * them all, a dropped or doubled letter all but one), else the first. */
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
    bool has_dtype;  /* dtype was given (random_*: else the call's) */
    bool has_start, has_stop;
    int64_t start, stop, step;
    int64_t nindices;
    const int64_t *indices;
    int64_t depth; /* one_hot */
    bool trans_a, trans_b; /* matmul: use the operand transposed (gemm flags) */
    const struct tl_mprog *prog; /* map, map_grad: the compiled scalar program */
    const bool *want;            /* map_grad: which inputs get a derivative */
    /* ---- the layer ops (nn.md) ----
     * Spatial attributes as the graph gives them: n 0 when absent, -1 for
     * one int meaning every axis (in [0]), else that many entries.  The
     * shape rules normalise them in their copy of the record: n = d (the
     * spatial axes of x), defaults filled in (stride of a pool: its
     * kernel), padding as begin/end pairs in pad_lo/pad_hi (npadding = d). */
    int nkernel, nstride, ndilation, npadding, nout_pad;
    bool padding_pairs; /* padding was given as [begin, end] pairs */
    int nsp;            /* after the shape rules: the spatial axes d */
    int64_t kernel[TL_MAXSP], stride[TL_MAXSP], dilation[TL_MAXSP], out_pad[TL_MAXSP];
    int64_t pad_lo[TL_MAXSP], pad_hi[TL_MAXSP];
    int64_t groups;           /* 1 */
    bool ceil_mode;           /* false */
    bool count_include_pad;   /* true */
    int training;             /* -1 not given (batch_norm: false; dropout: true) */
    double epsilon;           /* 1e-5 */
    int npads;                /* pad: pairs given (one per axis) */
    int64_t pads[2 * TL_MAXDIM]; /* pad: begin0, end0, begin1, end1... */
    int mode;                 /* pad: TL_PAD_*; resize: TL_RESIZE_* */
    double value;             /* pad: the constant, 0 */
    int nsize;                /* resize: output sizes given (0: none) */
    int64_t size[TL_MAXSP];
    int nscale;               /* resize: scales given (0: none) */
    double scale[TL_MAXSP];
    int coord;                /* resize: TL_COORD_*, half_pixel */
    int nearest;              /* resize: TL_NEAREST_*, round_prefer_floor */
    double cubic_coeff;       /* resize: -0.75 */
    bool select_last;         /* argmax, argmin: select_last_index */
    bool exclusive, reverse;  /* cumsum */
    bool has_seed;
    int64_t seed;             /* random_*, dropout: 0 */
    double low, high;         /* random_uniform: 0, 1 */
    double mean, std;         /* random_normal: 0, 1 */
    double p;                 /* dropout */
    /* set by the executor for random_*, dropout: the node's place in the
     * recipe and the steps of the iterates around it (nn.md) */
    uint64_t rng_node, rng_step;
} tl_attrs;

/* Attributes with every default set (step 1, axis -1 for softmax...). */
void tl_attrs_init(tl_attrs *a);
/* The same defaults as a record (graph nodes without attributes share it). */
extern const tl_attrs tl_attrs_default;

#ifdef __cplusplus
}
#endif

#endif
