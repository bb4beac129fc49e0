/* numpy.matmul as strided-batched gemm calls, device-neutral: the sizes,
 * transposes, leading dimensions and batch strides of each call.  Row-major
 * C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so each call
 * is gemm(op_b, op_a, n, m, k, B, ldb, A, lda, C, ldc = n) in BLAS's
 * column-major terms.  The innermost broadcast batch axis is the call's
 * batch (stride 0 where an operand is broadcast); there is one call per
 * index of the outer batch axes, in row-major order. */
#ifndef TL_CUDA_MATMUL_H
#define TL_CUDA_MATMUL_H

#include "plan.h"

typedef struct cu_mm {
    bool trans_a, trans_b; /* op(A) = A^T, op(B) = B^T */
    int64_t m, n, k;       /* C is m x n, the inner size k */
    int64_t lda, ldb;      /* row lengths of A and B as stored */
    int64_t sa, sb, sc;    /* batch strides of one call, in elements */
    int64_t count, calls;  /* batch elements per call; calls */
    int64_t asz, bsz;      /* elements of one matrix of A, of B */
    cpu_bcast plan;        /* the output's batch axes -> A's and B's matrices */
} cu_mm;

static inline void cu_mm_prepare(cu_mm *p, const tl_tensor *a, const tl_tensor *b,
                                 const tl_attrs *at, const tl_tensor *out)
{
    /* as stored: a 1-D operand is a row (left) or a column (right) */
    int64_t ar = a->ndim == 1 ? 1 : a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1];
    int64_t br = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    int64_t bc = b->ndim == 1 ? 1 : b->shape[b->ndim - 1];
    int nd[2] = {a->ndim > 2 ? a->ndim - 2 : 0, b->ndim > 2 ? b->ndim - 2 : 0};
    const int64_t *sh[2] = {a->shape, b->shape};
    int onb = out->ndim - (a->ndim == 1 ? 0 : 1) - (b->ndim == 1 ? 0 : 1);
    memset(p, 0, sizeof *p);
    p->trans_a = at->trans_a;
    p->trans_b = at->trans_b;
    p->m = at->trans_a ? ac : ar;
    p->k = at->trans_a ? ar : ac;
    p->n = at->trans_b ? br : bc;
    p->lda = ac;
    p->ldb = bc;
    p->asz = ar * ac;
    p->bsz = br * bc;
    cpu_bcast_init(&p->plan, onb, out->shape, 2, nd, sh);
    int last = p->plan.ndim - 1;
    p->sa = p->plan.stride[0][last] * p->asz;
    p->sb = p->plan.stride[1][last] * p->bsz;
    p->sc = p->m * p->n;
    p->count = p->plan.shape[last];
    p->calls = 1;
    for (int d = 0; d < last; d++)
        p->calls *= p->plan.shape[d];
}

/* Where call i's first matrices start, in elements of A, B and C. */
TL_HD static inline void cu_mm_offsets(const cu_mm *p, int64_t i, int64_t *oa, int64_t *ob,
                                       int64_t *oc)
{
    int64_t ia = 0, ib = 0, rest = i;
    for (int d = p->plan.ndim - 2; d >= 0; d--) {
        int64_t q = rest / p->plan.shape[d], digit = rest - q * p->plan.shape[d];
        ia += digit * p->plan.stride[0][d];
        ib += digit * p->plan.stride[1][d];
        rest = q;
    }
    *oa = ia * p->asz;
    *ob = ib * p->bsz;
    *oc = i * p->count * p->sc;
}

#endif
