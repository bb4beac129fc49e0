/* Running a graph.  tl_run evaluates a loaded graph eagerly on bound input
 * tensors and returns a tl_result that owns the output values and, when
 * gradients were requested, the recording (tape) of the run.
 *
 * Lifecycle: tl_result_pullback / tl_result_backward consume the recording
 * (a second call is an error); tl_result_close releases an unused
 * recording (harmless when repeated); the output values stay readable after
 * either, until tl_result_free.  A result points into its graph: free the
 * result before the graph, and before closing the device it ran on.
 * Outputs and gradients are always host tensors, wherever the run went. */
#ifndef TL_EXEC_H
#define TL_EXEC_H

#include "graph/graph.h"
#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_run_opts {
    bool record;           /* keep a tape for gradients */
    const bool *wrt;       /* per graph input: differentiate it; NULL = all */
    const tl_backend *backend; /* NULL = CPU */
    int64_t max_memory;        /* bytes the run may hold in tensors and tape; 0: no limit */
    bool strict_device;        /* an op the device lacks is an error, not a CPU fallback */
    /* the results: these top-level slots instead of the graph's outputs
     * (NULL: the graph's); a slot out of range or inside a block, or
     * noutputs < 1, is TL_EINPUT */
    const int *outputs;
    int noutputs;
    bool profile;      /* time every op call and keep a per-node log (tl_result_node_log) */
    bool check_finite; /* the first value (or gradient) with a NaN or an infinity is an error */
    /* the tape keeps only the shape of every tensor its rules do not read,
     * small ones too (by default small ones are kept whole: cheaper) */
    bool lean_tape;
    /* how far a run or backward pass got: called before every node (nodes
     * done so far, total -1), after every tape entry (done of total), and
     * every 2^20 steps of a scalar loop; on the running thread, so keep it
     * cheap (the CLI stores the figures for its timer thread) */
    void (*progress)(void *ctx, const char *phase, int64_t done, int64_t total);
    void *progress_ctx;
    /* called after every op and map node with its operands (weak numbers
     * as 0-d tensors) and result, and after every if decision (in = the
     * condition, out = NULL); the tensors may live on a device.  For tools
     * that watch a run (gradcheck's decision fingerprints). */
    void (*observe)(void *ctx, const tl_node *n, int nin, tl_tensor *const *in, const tl_tensor *out);
    void *observe_ctx;
    /* fused elementwise chains (fuse.h): 0 fuses chains over tensors of at
     * least TL_FUSE_MIN_DEFAULT elements, N > 0 of at least N, -1 never.
     * Fused or not, the bits are the same. */
    int64_t fuse_min;
    /* with record: the recording can be pulled back twice
     * (tl_result_pullback_recorded); a fused chain runs as a map
     * (fuse.c), the other fast paths are off */
    bool twice;
    /* non-NULL: the array of inputs given to tl_run, whose references the
     * run takes over, leaving in each entry a header of the same dtype and
     * shape without data (tl_tensor_stub): an input's memory then goes at
     * its last use (forward, or on the tape), not at the caller's end, and
     * a fresh tensor of its size reuses it.  The caller still unrefs the
     * entries. */
    tl_tensor **give_inputs;
} tl_run_opts;

/* What one graph node did (with profile): op calls, the time in them, on
 * which device, and why it fell back to the CPU if it did. */
typedef struct tl_node_log {
    int64_t calls, fallbacks;
    double ms;
    const char *why; /* the device's reason, or NULL */
} tl_node_log;

typedef struct tl_branch_log {
    const char *node; /* graph-owned name of the if node */
    bool then;        /* which block ran */
} tl_branch_log;

typedef struct tl_stats {
    int64_t nodes;    /* graph nodes evaluated (each iterate step counts its body) */
    int64_t ops;      /* op calls made forward */
    int64_t backward_ops;
    int64_t fallbacks; /* op calls a device lacked, run on the CPU (forward and backward) */
    tl_devstats dev;   /* where ops ran, host syncs, bytes copied, kinds of fallback */
    int64_t tape_entries;
    int64_t peak_bytes; /* most bytes held at once in tensors and tape */
    int64_t branches; /* if decisions taken; the first ones are logged */
    int64_t fused;    /* nodes run in fused elementwise chains */
    int64_t chains;   /* and in how many chains */
    int64_t loops;    /* iterate nodes run as scalar loops */
    int nlog;
    tl_branch_log log[64];
} tl_stats;

typedef struct tl_result tl_result;

/* inputs[i] binds g->inputs[i]; each is checked against its declaration.
 * A NULL entry takes the input's default (TL_EINPUT where it has none);
 * inputs may be NULL for a graph without inputs.  The inputs stay the
 * caller's (the run takes references of its own, unless
 * opts->give_inputs).  opts NULL: the defaults, a CPU run without a tape.
 * On an error *out is NULL. */
tl_code tl_run(const tl_graph *g, tl_tensor *const *inputs, const tl_run_opts *opts,
               tl_result **out, tl_status *st);

/* Optional: starts in the background what running g will need, so that
 * it overlaps reading the inputs (today: loading OpenBLAS, 2 ms, when a
 * matrix product is anywhere in g).  tl_run works the same without it. */
void tl_prepare(const tl_graph *g);

/* The element type of the call: the dtype of the first floating-point
 * input (f64 when there is none); untyped constants and one_hot take it. */
tl_dtype tl_call_dtype(const tl_graph *g, tl_tensor *const *inputs);

/* The outputs, by index: values and names borrowed from r (valid until
 * tl_result_free), host tensors wherever the run went; NULL for an index
 * outside [0, tl_result_noutputs). */
int tl_result_noutputs(const tl_result *r);
const tl_tensor *tl_result_output(const tl_result *r, int i);
const char *tl_result_output_name(const tl_result *r, int i);
tl_device tl_result_device(const tl_result *r);
/* The effective device: "cpu", the device's name ("cuda:0") when every op
 * ran there, or "mixed" when some fell back to the CPU. */
const char *tl_result_device_name(const tl_result *r);
/* The backend the run asked for (its name: "cpu", "cuda:0"). */
const tl_backend *tl_result_backend(const tl_result *r);
const tl_stats *tl_result_stats(const tl_result *r);
/* Per-op times [op][0 forward, 1 backward] (all zero without profile). */
const tl_opprof (*tl_result_profile(const tl_result *r))[2];
/* One entry per graph node (g->nnodes, by tl_node.index); NULL without
 * profile. */
const tl_node_log *tl_result_node_log(const tl_result *r);

/* Vector-Jacobian product: cotangents[i] seeds output i (NULL: all ones;
 * shape and dtype must equal the output's).  grads[k] receives a new
 * reference to the gradient of input k, or NULL for inputs not
 * differentiated (wrt false).  Consumes the recording; a seed refused
 * (TL_EINPUT) leaves it as it was, for another call. */
tl_code tl_result_pullback(tl_result *r, tl_tensor *const *cotangents, tl_tensor **grads,
                           tl_status *st);
/* The same with every seed all ones: the gradient of the sum of outputs. */
tl_code tl_result_backward(tl_result *r, tl_tensor **grads, tl_status *st);
/* Second derivatives, on the same tape.  tl_result_pullback_recorded
 * pulls back like tl_result_pullback (a run made with twice), but
 * records the backward pass's op calls on the tape, so that the gradients
 * are values of the tape; with vary_seeds the cotangents are the
 * variables instead of the inputs (only the pass's dependence on them is
 * recorded: a Jacobian-vector product needs no more).
 * tl_result_pullback_again then pulls back the gradients: with
 * grad_cot[k] the cotangent of input k's gradient (NULL: none; the
 * input's dtype and shape), d_inputs[k] receives the gradient of
 * sum_k <grad_cot[k], grad_k> with respect to input k (a Hessian-vector
 * product: NULL for inputs not differentiated; without vary_seeds) or,
 * with vary_seeds, d_seeds[i] that with respect to output i's cotangent
 * (the backward pass is linear in it: the Jacobian-vector product J_i
 * grad_cot).  Either array may be NULL; d_inputs after vary_seeds is an
 * error.  The second consumes the recording. */
tl_code tl_result_pullback_recorded(tl_result *r, tl_tensor *const *cotangents, bool vary_seeds,
                                    tl_tensor **grads, tl_status *st);
tl_code tl_result_pullback_again(tl_result *r, tl_tensor *const *grad_cot, tl_tensor **d_inputs,
                                 tl_tensor **d_seeds, tl_status *st);
/* Releases the recording; harmless when repeated or after a pullback. */
void tl_result_close(tl_result *r);
void tl_result_free(tl_result *r);

#ifdef __cplusplus
}
#endif

#endif
