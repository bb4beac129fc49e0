// numpy.matmul through cuBLAS, one strided-batched gemm per call of the
// plan in matmul.h (never a materialised transpose).  The handle
// (plugin.cu) runs in pedantic math (no TF32, no reduced-precision
// reductions), forbids atomics and owns a fixed workspace, so a product
// has the same bits on every run.
#include <limits.h>

#include "common.cuh"
#include "matmul.h"

static tl_code gemm(cu_state *s, const cu_mm *p, const tl_tensor *a, const tl_tensor *b,
                    tl_tensor *out, int64_t call, tl_status *st)
{
    int64_t oa, ob, oc;
    cu_mm_offsets(p, call, &oa, &ob, &oc);
    cublasOperation_t ta = p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    int m = (int)p->m, n = (int)p->n, k = (int)p->k, lda = (int)p->lda, ldb = (int)p->ldb;
    if (out->dtype == TL_F32) {
        const float one = 1, zero = 0;
        BLAS_TRY(cublasSgemmStridedBatched(s->blas, tb, ta, n, m, k, &one, (const float *)b->data + ob,
                                           ldb, p->sb, (const float *)a->data + oa, lda, p->sa,
                                           &zero, (float *)out->data + oc, n, p->sc, (int)p->count));
    } else {
        const double one = 1, zero = 0;
        BLAS_TRY(cublasDgemmStridedBatched(s->blas, tb, ta, n, m, k, &one, (const double *)b->data + ob,
                                           ldb, p->sb, (const double *)a->data + oa, lda, p->sa,
                                           &zero, (double *)out->data + oc, n, p->sc, (int)p->count));
    }
    return TL_OK;
}

tl_code cu_matmul(cu_state *s, const tl_tensor *a, const tl_tensor *b, const tl_attrs *at,
                  tl_tensor *out, tl_status *st)
{
    if (out->numel == 0)
        return TL_OK;
    cu_mm p;
    cu_mm_prepare(&p, a, b, at, out);
    if (p.k == 0)
        return CU_CHECK(cudaMemsetAsync(out->data, 0, tl_tensor_bytes(out), s->stream));
    if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.lda > INT_MAX || p.ldb > INT_MAX ||
        p.count > INT_MAX)
        return tl_fail(st, TL_ERUNTIME, "matmul: a size beyond cuBLAS's 32-bit int (m %lld, n %lld, k %lld)",
                       (long long)p.m, (long long)p.n, (long long)p.k);
    for (int64_t call = 0; call < p.calls; call++)
        if (gemm(s, &p, a, b, out, call, st))
            return st->code;
    return TL_OK;
}
