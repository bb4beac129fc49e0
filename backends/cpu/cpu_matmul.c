/* numpy.matmul through BLAS gemm: one gemm per output batch element, with
 * broadcast batch offsets and transpose flags (never a materialised
 * transpose).  1-D operands are read as a row (left) or column (right). */
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Parallel and deterministic: each batch element's output is cut into a
 * grid of tiles, a cut that depends on the shapes (and on whether the
 * machine has more than 2 processors: few_items), never on the threads
 * that run it; an item is one tile, computed by one single-threaded gemm,
 * and threads only decide who runs which item.  So the bits never depend
 * on the number of threads (OpenBLAS's own threading rounds differently
 * with 1 and 2 threads: measured on an f32 256x512x256 product).  The f32
 * bits do depend on the cut: OpenBLAS's sgemm rounds an element
 * differently by where it falls in its register blocks, so a tile is not
 * bit-identical to the same part of the whole product (its dgemm was, on
 * every cut tried); that is why the cut must never follow the threads.
 *
 * Items are strips of whole rows where they can be: two threads running
 * one gemm each over strips of 256 rows of a 1024^3 product reach 250
 * GFLOP/s in f32 and 117 in f64 here, against 217 and 103 over tiles of
 * 256x256 and 244 and 95 over strips of 64 rows (each strip packs all of
 * op(B), each tile a slice of both operands, and thin strips pack B too
 * often).  The cut: the product's work asks for one
 * item per ITEM_FLOPS, at most MAX_ITEMS counting batch elements; rows are
 * halved into strips of no fewer than STRIP_ROWS while items are wanted,
 * then, while fewer than few_items(), into strips down to EDGE_ALIGN rows,
 * and only then are columns halved (down to STRIP_COLS), for products of
 * few rows.  Edges are multiples of EDGE_ALIGN elements (whole cache
 * lines, so no two threads write one) and never below it, but where the
 * matrix itself is narrower. */
#define EDGE_ALIGN 64
#define STRIP_ROWS 256
#define STRIP_COLS 256
#define FEW_ITEMS 4
#define ITEM_FLOPS (1 << 25)
#define MAX_ITEMS 16
#define MIN_FLOPS_PER_THREAD (1 << 22)

typedef struct mm_job {
    const cpu_blas *blas;
    const tl_tensor *a, *b;
    tl_tensor *out;
    CBLAS_TRANSPOSE ta, tb;
    int64_t m, n, k, lda, ldb, asz, bsz;
    const int64_t *offa, *offb; /* per batch element */
    int64_t tm, tn;             /* tile edges: rows, columns */
    int64_t pm, pn;             /* tiles down and across one batch element */
} mm_job;

static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* FEW_ITEMS, but 2 on a machine of at most 2 processors: there two strips
 * keep both threads busy, and each packs the other operand once, not
 * twice (the MLP benchmark's nine 512x1024x1024 and 1024x512x1024 f32
 * products: 37.0 -> 34.6 ms on the Sapphire Rapids VM, medians of 4).
 * The processors the system has, never the threads tl runs
 * (TL_NUM_THREADS): the cut, and with it every bit, stays the same for
 * any thread count on a machine; across machines OpenBLAS's kernels
 * differ in rounding anyway. */
static _Atomic int few;

static int few_items(void)
{
    int f = few;
    if (!f) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        few = f = n > 0 && n <= 2 ? 2 : FEW_ITEMS;
    }
    return f;
}

void cpu_matmul_set_few_items(int n) { few = n > 0 ? n : 0; }

/* the tile edge that cuts `dim` into about `parts` pieces */
static int64_t edge_for(int64_t dim, int64_t parts)
{
    int64_t e = (dim + parts - 1) / parts;
    e = (e + EDGE_ALIGN - 1) / EDGE_ALIGN * EDGE_ALIGN;
    return e < dim ? e : dim;
}

/* Cuts `dim` into about twice `*parts` pieces of `*edge`: false when the
 * alignment leaves it as it was. */
static bool halve(int64_t dim, int64_t *parts, int64_t *edge)
{
    int64_t e = edge_for(dim, 2 * *parts), p = (dim + e - 1) / e;
    if (p <= *parts)
        return false;
    *parts = p;
    *edge = e;
    return true;
}

/* The grid of one product: tile edges and counts from m, n, k and the
 * number of batch elements alone. */
static void tile_grid(mm_job *j, int64_t nb)
{
    double flops = 2.0 * (double)j->m * (double)j->n * (double)j->k * (double)nb;
    double goal = flops / ITEM_FLOPS;
    goal = goal > MAX_ITEMS ? MAX_ITEMS : goal;
    double few = goal < few_items() ? goal : few_items();
    int64_t pm = 1, pn = 1, tm = j->m, tn = j->n;
    /* strips of at least STRIP_ROWS rows while items are wanted, thinner
     * ones while there are few, then columns */
    while ((double)(nb * pm) < goal && edge_for(j->m, 2 * pm) >= STRIP_ROWS && halve(j->m, &pm, &tm))
        ;
    while ((double)(nb * pm) < few && tm >= 2 * EDGE_ALIGN && halve(j->m, &pm, &tm))
        ;
    while ((double)(nb * pm * pn) < few && edge_for(j->n, 2 * pn) >= STRIP_COLS && halve(j->n, &pn, &tn))
        ;
    j->tm = tm;
    j->tn = tn;
    j->pm = pm;
    j->pn = pn;
}

static void run_item(const mm_job *j, int64_t item)
{
    int64_t per = j->pm * j->pn, bi = item / per, t = item % per;
    int64_t r0 = t / j->pn * j->tm, c0 = t % j->pn * j->tn;
    int64_t rows = min64(j->tm, j->m - r0), cols = min64(j->tn, j->n - c0);
    /* rows r0.. of op(A): rows of A, or columns when A is used transposed;
     * columns c0.. of op(B): columns of B, or rows when B is transposed */
    int64_t aoff = j->offa[bi] * j->asz + (j->ta == CblasTrans ? r0 : r0 * j->lda);
    int64_t boff = j->offb[bi] * j->bsz + (j->tb == CblasTrans ? c0 * j->ldb : c0);
    int64_t coff = bi * j->m * j->n + r0 * j->n + c0;
    if (j->out->dtype == TL_F32)
        j->blas->sgemm(CblasRowMajor, j->ta, j->tb, (int)rows, (int)cols, (int)j->k, 1.0f,
                    (const float *)j->a->data + aoff, (int)j->lda,
                    (const float *)j->b->data + boff, (int)j->ldb, 0.0f,
                    (float *)j->out->data + coff, (int)j->n);
    else
        j->blas->dgemm(CblasRowMajor, j->ta, j->tb, (int)rows, (int)cols, (int)j->k, 1.0,
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
    if (out->numel == 0)
        return TL_OK;
    if (k == 0) { /* sums of nothing; otherwise gemm writes every element */
        memset(out->data, 0, (size_t)out->numel * tl_dtype_size(out->dtype));
        return TL_OK;
    }
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
    mm_job j = {blas, a, b, out, at->trans_a ? CblasTrans : CblasNoTrans,
                at->trans_b ? CblasTrans : CblasNoTrans, m, n, k, A.cols, B.cols,
                A.rows * A.cols, B.rows * B.cols, offa, offb, 0, 0, 0, 0};
    tile_grid(&j, nb);
    cpu_parallel(nb * j.pm * j.pn, thread_count(2.0 * (double)m * (double)n * (double)k * (double)nb),
                 item_fn, &j);
    free(offa);
    return TL_OK;
}
