/* Checking a graph's tape against finite differences (tl gradcheck).
 * For every element of every differentiated input (or a fixed sample of
 * them), the central difference of <seed, outputs> is compared with the
 * tape's vector-Jacobian product, knowing where the recipe branches: an
 * element whose perturbation flips an `if` decision or a `map` element's
 * branch choice sits on a branch boundary, one whose perturbation straddles
 * a kink of an op (relu, abs, clamp edges, max/min and argmax ties, the
 * jumps of floor or mod...) on a kink;
 * neither is ever counted as a mismatch, since no derivative is claimed
 * there.
 *
 * Ownership: a tl_gradcheck (begin .. end) holds the base run, its
 * recording and the decisions seen; a report belongs to the caller, who
 * frees it with tl_gradcheck_free_report.  Both point into the graph (node
 * and input names): free them before the graph.  Checks run on the CPU. */
#ifndef TL_EXEC_GRADCHECK_H
#define TL_EXEC_GRADCHECK_H

#include "exec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_GRADCHECK_EPS 1e-6
#define TL_GRADCHECK_RTOL 1e-3
#define TL_GRADCHECK_ATOL 1e-5

typedef struct tl_gradcheck_opts {
    const bool *wrt;  /* per graph input: check it; NULL: every float input */
    double eps;       /* the step is eps * max(1, |x|) */
    double rtol, atol; /* an element matches when |tape - fd| <= atol + rtol * |fd| */
    int64_t samples;  /* 0: every element; else at most this many per input, the
                       * same ones on every call */
    int threads;      /* perturbed runs at once; 0: TL_NUM_THREADS, else the
                       * processors online */
    /* 1 (or 0): gradients against differences of <seed, outputs>; 2: for
     * each element j, the Hessian-vector product with the unit tangent
     * e_j (a recorded pullback pulled back again) against the central
     * difference of the gradient in x_j, every component of it */
    int order;
    /* called from the worker threads, one call at a time, as elements finish */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;
} tl_gradcheck_opts;

/* The defaults: eps 1e-6, rtol 1e-3, atol 1e-5, every element, every input. */
void tl_gradcheck_defaults(tl_gradcheck_opts *o);

/* Why an input was not checked. */
typedef enum tl_gradcheck_skip {
    TL_GC_CHECKED = 0,
    TL_GC_SKIP_INDEX, /* an index tensor: never differentiated */
    TL_GC_SKIP_WRT,   /* left out by opts.wrt */
    TL_GC_SKIP_BOOL,  /* a model's bool input (given as 0/1): never differentiated (set by the caller) */
} tl_gradcheck_skip;

/* How many boundary and kink elements a report names per input. */
#define TL_GC_SITES 5

/* An element on a boundary or a kink: where, which node flipped first, and
 * the two values that are not compared there. */
typedef struct tl_gradcheck_site {
    int64_t index; /* flat, row-major */
    const tl_node *node;
    double tape, fd;
} tl_gradcheck_site;

typedef struct tl_gradcheck_input {
    const char *name; /* the graph's */
    tl_gradcheck_skip skip;
    tl_dtype dtype;
    int ndim;
    int64_t shape[TL_MAXDIM];
    int64_t numel;
    int64_t checked;    /* elements perturbed (boundary and kink ones included) */
    int64_t mismatches; /* among the others */
    /* over the elements compared, NaN pairs left out: |tape - fd| and
     * |tape - fd| / |fd| (inf where fd is 0 and tape is not) */
    double max_abs, max_rel;
    /* the compared element furthest past its tolerance (a NaN first), -1:
     * none compared */
    int64_t worst;
    double worst_tape, worst_fd;
    /* order 2: the component of the gradient where that element differs
     * most: an input (its index) and an element of it */
    int worst_of;
    int64_t worst_of_index;
    int64_t nboundary, nkink;
    tl_gradcheck_site boundary[TL_GC_SITES], kink[TL_GC_SITES]; /* the first ones */
} tl_gradcheck_input;

typedef struct tl_gradcheck_report {
    double eps, rtol, atol;
    int order;       /* 1 or 2 */
    int64_t samples; /* as asked: 0 for every element */
    int ninputs;     /* one entry per graph input, in the graph's order */
    tl_gradcheck_input *inputs;
    int64_t checked, mismatches, nboundary, nkink; /* over all inputs */
} tl_gradcheck_report;

typedef struct tl_gradcheck tl_gradcheck;

/* Validates the inputs (a differentiated input must be f64: finite
 * differences in f32 say little and tl never changes precision by itself)
 * and makes the base run, recorded, noting its decisions.  An output that
 * is f32 is refused likewise.  Errors: TL_EINPUT for bad input, as tl_run. */
tl_code tl_gradcheck_begin(const tl_graph *g, tl_tensor *const *inputs, const tl_gradcheck_opts *o,
                           tl_gradcheck **out, tl_status *st);
/* The base run's result: its outputs, for reading seeds against. */
const tl_result *tl_gradcheck_base(const tl_gradcheck *gc);
/* Pulls seeds back (seeds[i] for output i: its dtype and shape, NULL: all
 * ones; seeds NULL: all ones everywhere), runs every perturbed evaluation
 * and returns the report.  Once per tl_gradcheck. */
tl_code tl_gradcheck_run(tl_gradcheck *gc, tl_tensor *const *seeds, tl_gradcheck_report **out,
                         tl_status *st);
void tl_gradcheck_end(tl_gradcheck *gc); /* NULL ok */

/* begin, run and end in one call. */
tl_code tl_gradcheck_graph(const tl_graph *g, tl_tensor *const *inputs, tl_tensor *const *seeds,
                           const tl_gradcheck_opts *o, tl_gradcheck_report **out, tl_status *st);

void tl_gradcheck_free_report(tl_gradcheck_report *r); /* NULL ok */

#ifdef __cplusplus
}
#endif

#endif
