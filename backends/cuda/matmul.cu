// numpy.matmul through cuBLAS: strided-batched gemm over the innermost
// broadcast batch axis (stride 0 where an operand is broadcast), one call
// per index of the outer batch axes, transposes as gemm flags (never
// materialised).  Row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T.  The handle (plugin.cu) runs in pedantic math
// (no TF32, no reduced-precision reductions), forbids atomics and owns a
// fixed workspace, so a product has the same bits on every run.
#include <limits.h>

#include "common.cuh"

typedef struct mm_operand {
    int64_t rows, cols; // as stored; a 1-D operand is a row (left) or a column (right)
    int nbatch;
    const int64_t *batch;
} mm_operand;

static mm_operand operand(const tl_tensor *t, bool left)
{
    mm_operand o = {1, 1, 0, t->shape};
    if (t->ndim == 1) {
        o.rows = left ? 1 : t->shape[0];
        o.cols = left ? t->shape[0] : 1;
    } else {
        o.rows = t->shape[t->ndim - 2];
        o.cols = t->shape[t->ndim - 1];
        o.nbatch = t->ndim - 2;
    }
    return o;
}

typedef struct mm_call {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb;
    long long sa, sb, sc; // batch strides in elements
    int count;
} mm_call;

static tl_code gemm(cu_state *s, const mm_call *c, const tl_tensor *a, const tl_tensor *b,
                    tl_tensor *out, int64_t oa, int64_t ob, int64_t oc, tl_status *st)
{
    if (out->dtype == TL_F32) {
        const float one = 1, zero = 0;
        BLAS_TRY(cublasSgemmStridedBatched(s->blas, c->tb, c->ta, c->n, c->m, c->k, &one,
                                           (const float *)b->data + ob, c->ldb, c->sb,
                                           (const float *)a->data + oa, c->lda, c->sa, &zero,
                                           (float *)out->data + oc, c->n, c->sc, c->count));
    } else {
        const double one = 1, zero = 0;
        BLAS_TRY(cublasDgemmStridedBatched(s->blas, c->tb, c->ta, c->n, c->m, c->k, &one,
                                           (const double *)b->data + ob, c->ldb, c->sb,
                                           (const double *)a->data + oa, c->lda, c->sa, &zero,
                                           (double *)out->data + oc, c->n, c->sc, c->count));
    }
    return TL_OK;
}

tl_code cu_matmul(cu_state *s, const tl_tensor *a, const tl_tensor *b, const tl_attrs *at,
                  tl_tensor *out, tl_status *st)
{
    mm_operand A = operand(a, true), B = operand(b, false);
    int64_t m = at->trans_a ? A.cols : A.rows, k = at->trans_a ? A.rows : A.cols;
    int64_t n = at->trans_b ? B.rows : B.cols;
    if (out->numel == 0)
        return TL_OK;
    if (k == 0)
        return CU_CHECK(cudaMemsetAsync(out->data, 0, tl_tensor_bytes(out), s->stream));
    // the output's batch axes: everything before its matrix axes
    int onb = out->ndim - (a->ndim == 1 ? 0 : 1) - (b->ndim == 1 ? 0 : 1);
    cpu_bcast plan;
    int nd[2] = {A.nbatch, B.nbatch};
    const int64_t *sh[2] = {A.batch, B.batch};
    cpu_bcast_init(&plan, onb, out->shape, 2, nd, sh);
    int last = plan.ndim - 1;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || A.cols > INT_MAX || B.cols > INT_MAX ||
        plan.shape[last] > INT_MAX)
        return tl_fail(st, TL_ERUNTIME, "matmul: a size beyond cuBLAS's 32-bit int (m %lld, n %lld, k %lld)",
                       (long long)m, (long long)n, (long long)k);
    mm_call c = {at->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, at->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                 (int)m, (int)n, (int)k, (int)A.cols, (int)B.cols,
                 plan.stride[0][last] * A.rows * A.cols, plan.stride[1][last] * B.rows * B.cols,
                 m * n, (int)plan.shape[last]};
    // one call per index of the outer batch axes, in row-major order
    int64_t idx[TL_MAXDIM] = {0}, oa = 0, ob = 0, outer = 1;
    for (int d = 0; d < last; d++)
        outer *= plan.shape[d];
    for (int64_t i = 0; i < outer; i++) {
        if (gemm(s, &c, a, b, out, oa * A.rows * A.cols, ob * B.rows * B.cols, i * c.count * m * n, st))
            return st->code;
        for (int d = last - 1; d >= 0; d--) {
            oa += plan.stride[0][d];
            ob += plan.stride[1][d];
            if (++idx[d] < plan.shape[d])
                break;
            oa -= plan.stride[0][d] * plan.shape[d];
            ob -= plan.stride[1][d] * plan.shape[d];
            idx[d] = 0;
        }
    }
    return TL_OK;
}
