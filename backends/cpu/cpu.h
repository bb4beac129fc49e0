/* CPU kernels, grouped by family.  Each writes into `out`, which the caller
 * allocated with the shape the shape rules computed; none allocates
 * results of its own except short-lived scratch it frees. */
#ifndef TL_CPU_H
#define TL_CPU_H

#include "backends/backend.h"

typedef const tl_tensor *const *cpu_ins;
struct tl_mprog;

/* A kernel compiled three times, for AVX-512 (x86-64-v4), AVX2 with FMA
 * (x86-64-v3) and the baseline, the CPU choosing one when the program
 * loads.  The clones compute the same bits: contraction into FMA is off
 * (-ffp-contract=off), the math functions give the same bits at every
 * vector width (vmath.h), and loops are vectorised only where that does
 * not reorder arithmetic (no reassociation is allowed). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_KERNEL
#endif

tl_code cpu_elementwise(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                        tl_status *st);
/* batch_norm_var: mean(square(x - m)) over every axis of x but 1, with the
 * bits of those three ops (m [1, C, 1...]), without their temporaries */
tl_code cpu_batch_norm_var(const tl_tensor *x, const tl_tensor *m, tl_tensor *out, tl_status *st);
tl_code cpu_reduce(tl_opcode op, const tl_tensor *x, const tl_attrs *a, tl_tensor *out,
                   tl_status *st);
tl_code cpu_softmax(tl_opcode op, const tl_tensor *x, const tl_attrs *a, tl_tensor *out, tl_status *st);
/* The max (max) or min of x[0..n) ignoring NaN (-inf or inf where there
 * is none) and whether x holds a NaN: in any order, in vector lanes. */
float cpu_ext_scan_f(const float *x, int64_t n, bool max, bool *nan);
double cpu_ext_scan_d(const double *x, int64_t n, bool max, bool *nan);
tl_code cpu_prod_grad(const tl_tensor *x, const tl_tensor *g, tl_tensor *out);
tl_code cpu_matmul(const tl_tensor *a, const tl_tensor *b, const tl_attrs *at, tl_tensor *out,
                   tl_status *st);
/* For tests: the fewest items a product with work for them is cut into
 * (cpu_matmul.c), as on a machine of more or fewer processors; 0 restores
 * this machine's own. */
void cpu_matmul_set_few_items(int n);
tl_code cpu_map(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                tl_status *st);
/* Runs a compiled elementwise program (mprog.h) over the elements of
 * `shape`: input i (that many elements, or one, or broadcast) into
 * p->in_reg[i]; register out_reg[o] into out[o] (whole tensors of the
 * shape); with sum_reg >= 0, the sum of that register over all elements,
 * in the order of every other sum (psum.h), into the one-element `sum`.
 * The fused elementwise chains of exec/fuse.c run through it. */
tl_code cpu_prog_run(const struct tl_mprog *p, tl_dtype dt, int ndim, const int64_t *shape, int nin,
                     cpu_ins in, int nout, const int *out_reg, tl_tensor *const *out,
                     int sum_reg, tl_tensor *sum, tl_status *st);
/* A straight-line program (no jumps) over one value per register. */
struct tl_mins;
void cpu_prog_scalar_f(const struct tl_mins *ins, int n, float *r);
void cpu_prog_scalar_d(const struct tl_mins *ins, int n, double *r);
tl_code cpu_shape_op(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                     tl_status *st);

/* The layer ops of nn.md, one family per file (cpu_<family>.c). */
tl_code cpu_conv(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st);
tl_code cpu_pool(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st);
tl_code cpu_norm(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st);
tl_code cpu_resample(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st);
tl_code cpu_scatter(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st);
tl_code cpu_random(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st);

/* Broadcast iteration shared by the families: strides (in elements) of up
 * to three operands over the output's index space, with adjacent axes
 * merged where every operand allows it. */
typedef struct cpu_bcast {
    int ndim;
    int nops;
    int64_t shape[TL_MAXDIM];
    int64_t stride[3][TL_MAXDIM];
} cpu_bcast;

void cpu_bcast_init(cpu_bcast *p, int ndim, const int64_t *shape, int nops, const int *op_ndim,
                    const int64_t *const *op_shape);
/* Row-major element strides of a shape. */
void cpu_strides(int ndim, const int64_t *shape, int64_t *strides);

#endif
