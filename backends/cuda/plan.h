/* Index plans: how a kernel thread finds its operands.  A plan (the CPU's
 * cpu_bcast: a merged shape and up to three operands' strides in elements)
 * maps the linear index of an output element to each operand's offset:
 * the index decodes digit by digit, last axis fastest, exactly the order
 * in which the CPU walks the same plan row by row.  Plans are built on the
 * host, passed to kernels by value and decoded on the device (and by the
 * host tests).  Broadcasting plans are the CPU's own (cpu_bcast_init);
 * strided views (transpose, slice, concat, the two halves of a reduction)
 * are merged here by the same rule: size-1 axes dropped, neighbours fused
 * where every operand steps through them as through one axis. */
#ifndef TL_CUDA_PLAN_H
#define TL_CUDA_PLAN_H

#include "tl_c.h"

/* off[k] = the offset of operand k for output element i.  Every plan
 * built here has the strides of operands it lacks zeroed, so all three
 * are computed: fixed loops that stay in registers. */
TL_HD static inline void cu_plan_offsets(const cpu_bcast *p, int64_t i, int64_t *off)
{
    if (p->ndim == 1) { /* the common case: one merged axis, no division */
        for (int k = 0; k < 3; k++)
            off[k] = i * p->stride[k][0];
        return;
    }
    for (int k = 0; k < 3; k++)
        off[k] = 0;
    for (int d = p->ndim - 1; d >= 0; d--) {
        int64_t q = i / p->shape[d], digit = i - q * p->shape[d];
        for (int k = 0; k < 3; k++)
            off[k] += digit * p->stride[k][d];
        i = q;
    }
}

/* The offset of a one-operand plan. */
TL_HD static inline int64_t cu_plan_offset(const cpu_bcast *p, int64_t i)
{
    int64_t off[3];
    cu_plan_offsets(p, i, off);
    return off[0];
}

/* A plan over `shape` (ndim axes) for nops operands with arbitrary
 * strides: stride[k][d] is operand k's step along axis d. */
static inline void cu_plan_strided(cpu_bcast *p, int ndim, const int64_t *shape, int nops,
                                   const int64_t (*stride)[TL_MAXDIM])
{
    memset(p, 0, sizeof *p);
    p->nops = nops;
    p->ndim = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue;
        int nd = p->ndim++;
        p->shape[nd] = shape[d];
        for (int k = 0; k < nops; k++)
            p->stride[k][nd] = stride[k][d];
    }
    for (int d = p->ndim - 2; d >= 0; d--) {
        bool fuse = true;
        for (int k = 0; k < nops; k++)
            fuse = fuse && p->stride[k][d] == p->stride[k][d + 1] * p->shape[d + 1];
        if (!fuse)
            continue;
        p->shape[d] *= p->shape[d + 1];
        for (int k = 0; k < nops; k++)
            p->stride[k][d] = p->stride[k][d + 1];
        for (int e = d + 1; e + 1 < p->ndim; e++) {
            p->shape[e] = p->shape[e + 1];
            for (int k = 0; k < nops; k++)
                p->stride[k][e] = p->stride[k][e + 1];
        }
        p->ndim--;
    }
    if (p->ndim == 0) {
        p->ndim = 1;
        p->shape[0] = 1;
        for (int k = 0; k < nops; k++)
            p->stride[k][0] = 0;
    }
}

/* Moves one element of es bytes (4 or 8) as raw bits. */
TL_HD static inline void cu_move(int es, void *dst, int64_t d, const void *src, int64_t s)
{
    if (es == 4)
        ((uint32_t *)dst)[d] = ((const uint32_t *)src)[s];
    else
        ((uint64_t *)dst)[d] = ((const uint64_t *)src)[s];
}

/* A strided copy: element i of the plan's shape goes from src at operand
 * 1's offset to dst at operand 0's (transpose, broadcast_to, slice and
 * its derivative, concat, stack). */
typedef struct cu_copy {
    cpu_bcast plan;
    int es;
    void *dst;
    const void *src;
} cu_copy;

TL_HD static inline void cu_copy_element(const cu_copy *k, int64_t i)
{
    int64_t off[3];
    cu_plan_offsets(&k->plan, i, off);
    cu_move(k->es, k->dst, off[0], k->src, off[1]);
}

/* The broadcasting plan of an elementwise op: the output's index space
 * with each input's strides (0 along broadcast axes). */
static inline void cu_plan_broadcast(cpu_bcast *p, const tl_tensor *out, int n,
                                     const tl_tensor *const *in)
{
    int nd[3];
    const int64_t *sh[3];
    for (int k = 0; k < n && k < 3; k++) {
        nd[k] = in[k]->ndim;
        sh[k] = in[k]->shape;
    }
    memset(p, 0, sizeof *p);
    cpu_bcast_init(p, out->ndim, out->shape, n, nd, sh);
}

#endif
