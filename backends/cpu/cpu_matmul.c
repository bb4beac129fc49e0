/* numpy.matmul through BLAS gemm: one gemm per output batch element, with
 * broadcast batch offsets and transpose flags (never a materialised
 * transpose).  1-D operands are read as a row (left) or column (right). */
#include <cblas.h>
#include <pthread.h>
#include <string.h>

#include "cpu.h"

typedef struct mm_operand {
    int64_t rows, cols; /* as stored */
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

/* OpenBLAS partitions a product differently with more threads and then
 * rounds differently (measured: 1 vs 2 threads give other bits for an f32
 * 256x512x256 product).  tl promises the same bits whatever the machine's
 * thread count, so BLAS runs single-threaded. */
static void blas_single_thread(void) { openblas_set_num_threads(1); }

tl_code cpu_matmul(const tl_tensor *a, const tl_tensor *b, const tl_attrs *at, tl_tensor *out)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_single_thread);
    mm_operand A = operand(a, true), B = operand(b, false);
    int64_t m = at->trans_a ? A.cols : A.rows, k = at->trans_a ? A.rows : A.cols;
    int64_t n = at->trans_b ? B.rows : B.cols;
    size_t es = tl_dtype_size(out->dtype);
    memset(out->data, 0, (size_t)out->numel * es);
    if (m == 0 || n == 0 || k == 0 || out->numel == 0)
        return TL_OK;

    /* Batch shape of the output: everything before its matrix axes. */
    int onb = out->ndim - (a->ndim == 1 ? 0 : 1) - (b->ndim == 1 ? 0 : 1);
    cpu_bcast plan;
    int nd[2] = {A.nbatch, B.nbatch};
    const int64_t *sh[2] = {A.batch, B.batch};
    cpu_bcast_init(&plan, onb, out->shape, 2, nd, sh);
    int64_t nb = 1;
    for (int d = 0; d < onb; d++)
        nb *= out->shape[d];

    int64_t asz = A.rows * A.cols, bsz = B.rows * B.cols, csz = m * n;
    CBLAS_TRANSPOSE ta = at->trans_a ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE tb = at->trans_b ? CblasTrans : CblasNoTrans;
    int64_t idx[TL_MAXDIM] = {0}, offa = 0, offb = 0;
    for (int64_t bi = 0; bi < nb; bi++) {
        if (out->dtype == TL_F32)
            cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f,
                        (const float *)a->data + offa * asz, (int)A.cols,
                        (const float *)b->data + offb * bsz, (int)B.cols, 0.0f,
                        (float *)out->data + bi * csz, (int)n);
        else
            cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0,
                        (const double *)a->data + offa * asz, (int)A.cols,
                        (const double *)b->data + offb * bsz, (int)B.cols, 0.0,
                        (double *)out->data + bi * csz, (int)n);
        /* advance the batch counters over the merged plan */
        for (int d = plan.ndim - 1; d >= 0; d--) {
            offa += plan.stride[0][d];
            offb += plan.stride[1][d];
            if (++idx[d] < plan.shape[d])
                break;
            offa -= plan.stride[0][d] * plan.shape[d];
            offb -= plan.stride[1][d] * plan.shape[d];
            idx[d] = 0;
        }
    }
    return TL_OK;
}
