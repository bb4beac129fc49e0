/* numpy.matmul through BLAS gemm: one gemm per output batch element, with
 * broadcast batch offsets and transpose flags (never a materialised
 * transpose).  1-D operands are read as a row (left) or column (right). */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu.h"
#include "threads.h"

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

/* Parallel and deterministic: the product is cut into items of at most
 * ROWS_PER_ITEM output rows of one batch element, a cut that depends on the
 * shapes alone; each item is one single-threaded gemm, and threads only
 * decide who runs which item.  So the bits never depend on the number of
 * threads (OpenBLAS's own threading rounds differently with 1 and 2
 * threads: measured on an f32 256x512x256 product). */
#define ROWS_PER_ITEM 64
#define MIN_FLOPS_PER_THREAD (1 << 22)

typedef struct mm_job {
    const cpu_blas *blas;
    const tl_tensor *a, *b;
    tl_tensor *out;
    CBLAS_TRANSPOSE ta, tb;
    int64_t m, n, k, lda, ldb, asz, bsz;
    const int64_t *offa, *offb; /* per batch element */
    int64_t items, blocks;      /* blocks: row blocks per batch element */
} mm_job;

static void run_item(const mm_job *j, int64_t item)
{
    int64_t bi = item / j->blocks, r0 = item % j->blocks * ROWS_PER_ITEM;
    int64_t rows = j->m - r0 < ROWS_PER_ITEM ? j->m - r0 : ROWS_PER_ITEM;
    /* rows r0.. of op(A): rows of A, or columns when A is used transposed */
    int64_t ashift = j->ta == CblasTrans ? r0 : r0 * j->lda;
    int64_t aoff = j->offa[bi] * j->asz + ashift, boff = j->offb[bi] * j->bsz;
    int64_t coff = bi * j->m * j->n + r0 * j->n;
    if (j->out->dtype == TL_F32)
        j->blas->sgemm(CblasRowMajor, j->ta, j->tb, (int)rows, (int)j->n, (int)j->k, 1.0f,
                    (const float *)j->a->data + aoff, (int)j->lda,
                    (const float *)j->b->data + boff, (int)j->ldb, 0.0f,
                    (float *)j->out->data + coff, (int)j->n);
    else
        j->blas->dgemm(CblasRowMajor, j->ta, j->tb, (int)rows, (int)j->n, (int)j->k, 1.0,
                    (const double *)j->a->data + aoff, (int)j->lda,
                    (const double *)j->b->data + boff, (int)j->ldb, 0.0,
                    (double *)j->out->data + coff, (int)j->n);
}

static void item_fn(void *ctx, int64_t item) { run_item(ctx, item); }

/* threads: one per MIN_FLOPS_PER_THREAD of work, at most cpu_nthreads() */
static int thread_count(double flops)
{
    double by_work = flops / MIN_FLOPS_PER_THREAD;
    int n = cpu_nthreads();
    return by_work < n ? (by_work < 1 ? 1 : (int)by_work) : n;
}

tl_code cpu_matmul(const tl_tensor *a, const tl_tensor *b, const tl_attrs *at, tl_tensor *out,
                   tl_status *st)
{
    mm_operand A = operand(a, true), B = operand(b, false);
    int64_t m = at->trans_a ? A.cols : A.rows, k = at->trans_a ? A.rows : A.cols;
    int64_t n = at->trans_b ? B.rows : B.cols;
    size_t es = tl_dtype_size(out->dtype);
    memset(out->data, 0, (size_t)out->numel * es);
    if (m == 0 || n == 0 || k == 0 || out->numel == 0)
        return TL_OK;
    const cpu_blas *blas = cpu_blas_get(st);
    if (!blas)
        return st->code;

    /* Batch shape of the output: everything before its matrix axes. */
    int onb = out->ndim - (a->ndim == 1 ? 0 : 1) - (b->ndim == 1 ? 0 : 1);
    cpu_bcast plan;
    int nd[2] = {A.nbatch, B.nbatch};
    const int64_t *sh[2] = {A.batch, B.batch};
    cpu_bcast_init(&plan, onb, out->shape, 2, nd, sh);
    int64_t nb = 1;
    for (int d = 0; d < onb; d++)
        nb *= out->shape[d];
    int64_t *offa = tl_malloc((size_t)nb * 2, sizeof(int64_t), "matmul batch offsets", st);
    if (!offa)
        return st->code;
    int64_t *offb = offa + nb, idx[TL_MAXDIM] = {0}, oa = 0, ob = 0;
    for (int64_t bi = 0; bi < nb; bi++) {
        offa[bi] = oa;
        offb[bi] = ob;
        for (int d = plan.ndim - 1; d >= 0; d--) { /* the next batch element */
            oa += plan.stride[0][d];
            ob += plan.stride[1][d];
            if (++idx[d] < plan.shape[d])
                break;
            oa -= plan.stride[0][d] * plan.shape[d];
            ob -= plan.stride[1][d] * plan.shape[d];
            idx[d] = 0;
        }
    }
    int64_t blocks = (m + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM;
    mm_job j = {blas, a, b, out, at->trans_a ? CblasTrans : CblasNoTrans,
                at->trans_b ? CblasTrans : CblasNoTrans, m, n, k, A.cols, B.cols,
                A.rows * A.cols, B.rows * B.cols, offa, offb, nb * blocks, blocks};
    cpu_parallel(j.items, thread_count(2.0 * (double)m * (double)n * (double)k * (double)nb), item_fn, &j);
    free(offa);
    return TL_OK;
}
