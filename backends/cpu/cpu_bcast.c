/* Broadcast plans (cpu.h): the strides of each operand over the output's
 * index space, size-1 axes dropped and adjacent axes merged where every
 * operand allows it.  Shared by the CPU kernels and the CUDA backend. */
#include "cpu.h"

void cpu_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

static bool mergeable(const cpu_bcast *p, int d)
{
    for (int k = 0; k < p->nops; k++) {
        int64_t hi = p->stride[k][d], lo = p->stride[k][d + 1];
        if (!(hi == lo * p->shape[d + 1] || (hi == 0 && lo == 0)))
            return false;
    }
    return true;
}

void cpu_bcast_init(cpu_bcast *p, int ndim, const int64_t *shape, int nops, const int *op_ndim,
                    const int64_t *const *op_shape)
{
    p->nops = nops;
    p->ndim = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue; /* size-1 axes move nothing */
        int nd = p->ndim++;
        p->shape[nd] = shape[d];
        for (int k = 0; k < nops; k++) {
            int od = d - (ndim - op_ndim[k]);
            int64_t st[TL_MAXDIM];
            cpu_strides(op_ndim[k], op_shape[k], st);
            p->stride[k][nd] = (od < 0 || op_shape[k][od] == 1) ? 0 : st[od];
        }
    }
    for (int d = p->ndim - 2; d >= 0; d--) {
        if (!mergeable(p, d))
            continue;
        p->shape[d] *= p->shape[d + 1];
        for (int k = 0; k < nops; k++)
            p->stride[k][d] = p->stride[k][d + 1];
        for (int e = d + 1; e < p->ndim - 1; e++) {
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
