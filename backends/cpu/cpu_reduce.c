/* Reductions, softmax and the product's derivative.  Every reduction runs
 * in one fixed order (reduced axes are taken in groups from the last, and
 * contiguous sums are pairwise over fixed blocks), so the bits of a result
 * never depend on the run or on threads.  sum and prod also take i32 and
 * i64 (exact, wrapping). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "cpu.h"
#include "psum.h"
#include "vmath.h"

/* a leaf of psum.h over a plain array (ctx) */
static float leaf_f(void *ctx, int64_t lo, int64_t n) { return cpu_psum_leaf_f((const float *)ctx + lo, n); }
static double leaf_d(void *ctx, int64_t lo, int64_t n) { return cpu_psum_leaf_d((const double *)ctx + lo, n); }
#define PSUM(x, n)                                                                 \
    _Generic((x), const float *: cpu_psum_tree_f(leaf_f, (void *)(x), (n), cpu_nthreads()), \
             const double *: cpu_psum_tree_d(leaf_d, (void *)(x), (n), cpu_nthreads()))

/* One step: [outer, r, inner] -> [outer, inner].  ACC folds v into acc. */
#define REDUCE_STEP(T, INIT, ACC)                                                  \
    do {                                                                           \
        const T *X_ = xin;                                                         \
        T *Y_ = yout;                                                              \
        for (int64_t o = 0; o < outer; o++) {                                      \
            const T *xs = X_ + o * r * inner;                                      \
            T *ys = Y_ + o * inner;                                                \
            for (int64_t j = 0; j < inner; j++)                                    \
                ys[j] = (T)(INIT);                                                 \
            for (int64_t k = 0; k < r; k++)                                        \
                for (int64_t j = 0; j < inner; j++) {                              \
                    T acc = ys[j], v = xs[k * inner + j];                          \
                    ys[j] = (T)(ACC);                                              \
                }                                                                  \
        }                                                                          \
    } while (0)

#define SUM_STEP(T)                                                                \
    do {                                                                           \
        if (inner == 1) {                                                          \
            const T *X_ = xin;                                                     \
            T *Y_ = yout;                                                          \
            for (int64_t o = 0; o < outer; o++)                                    \
                Y_[o] = PSUM(X_ + o * r, r);                                       \
        } else {                                                                   \
            ok = rows_sum(sizeof(T) == 4, xin, yout, outer, r, inner);             \
        }                                                                          \
    } while (0)

/* Sums over axes that are not the last, [outer, r, inner] -> [outer,
 * inner]: each column pairwise over its rows, as psum.h sums a run (halves
 * of (n/2) & ~7 rows, down to RSUM_LEAF rows added in row order), so the
 * error grows with log r, not with r (a running sum over 1e6 f32 rows of
 * 0.1 was 1% off, until tests/cli/cases.txt's case).  Columns go in blocks
 * of RSUM_W; an item is one block of one outer index, cut by the shapes
 * alone, so the bits never depend on the threads. */
#define RSUM_LEAF 32
#define RSUM_W 256
#define RSUM_SPLIT 3 /* 8 subtrees */
/* NAME sums ELEM of each element v of column j (m: per column, for ELEM) */
#define DEFINE_RSUM_AS(T, NAME, ELEM)                                              \
    CPU_KERNEL static void NAME(const T *x, int64_t stride, int64_t n, int64_t w, const T *m, \
                                T *out, T *scratch)                                \
    {                                                                              \
        if (n > RSUM_LEAF) {                                                       \
            int64_t h = cpu_psum_half(n);                                          \
            NAME(x, stride, h, w, m, out, scratch + w);                            \
            NAME(x + h * stride, stride, n - h, w, m, scratch, scratch + w);       \
            for (int64_t j = 0; j < w; j++)                                        \
                out[j] += scratch[j];                                              \
            return;                                                                \
        }                                                                          \
        (void)m;                                                                   \
        for (int64_t j = 0; j < w; j++)                                            \
            out[j] = 0;                                                            \
        for (int64_t k = 0; k < n; k++)                                            \
            for (int64_t j = 0; j < w; j++) {                                      \
                T v = x[k * stride + j];                                           \
                out[j] += ELEM;                                                    \
            }                                                                      \
    }
/* the sums, and the sums of squared deviations from m (batch_norm's
 * variance over [N, C]: the squares made as the leaves read them, the
 * values and the order of summing the squares of a tensor the size of x
 * would have, without it) */
#define DEFINE_RSUM(T, SUF)                                                        \
    DEFINE_RSUM_AS(T, rsum_##SUF, v)                                               \
    DEFINE_RSUM_AS(T, rsumsq_##SUF, (v - m[j]) * (v - m[j]))
DEFINE_RSUM(float, f)
DEFINE_RSUM(double, d)

typedef struct rsum_job {
    bool f32;
    const void *x, *m; /* m: sums of squared deviations from m[column] */
    void *y;
    int64_t r, inner, nblk, levels;
    /* few blocks over many rows: the subtrees at depth RSUM_SPLIT of each
     * block's tree, an item each, into part [blocks][nsub][RSUM_W], then
     * joined as the tree joins them (the same bits, on the threads) */
    int nsub;
    int64_t sub_at[1 << RSUM_SPLIT], sub_n[1 << RSUM_SPLIT];
    void *part;
    atomic_bool oom;
} rsum_job;

/* The subtrees of a tree over rows [lo, lo + n) at depth d (a leaf above
 * it: itself), in order. */
static int rsum_subtrees(int64_t lo, int64_t n, int d, int64_t *at, int64_t *len)
{
    if (d == 0 || n <= RSUM_LEAF) {
        at[0] = lo;
        len[0] = n;
        return 1;
    }
    int64_t h = cpu_psum_half(n);
    int k = rsum_subtrees(lo, h, d - 1, at, len);
    return k + rsum_subtrees(lo + h, n - h, d - 1, at + k, len + k);
}

/* The subtrees' sums (part, RSUM_W apart) joined into out as the tree
 * joins its halves; the number of subtrees taken. */
#define DEFINE_RJOIN(T, SUF)                                                       \
    static int rjoin_##SUF(const T *part, int64_t n, int d, int64_t w, T *out)     \
    {                                                                              \
        if (d == 0 || n <= RSUM_LEAF) {                                            \
            memcpy(out, part, sizeof(T) * (size_t)w);                              \
            return 1;                                                              \
        }                                                                          \
        int64_t h = cpu_psum_half(n);                                              \
        T right[RSUM_W];                                                           \
        int k = rjoin_##SUF(part, h, d - 1, w, out);                               \
        k += rjoin_##SUF(part + (int64_t)k * RSUM_W, n - h, d - 1, w, right);      \
        for (int64_t j = 0; j < w; j++)                                            \
            out[j] += right[j];                                                    \
        return k;                                                                  \
    }
DEFINE_RJOIN(float, f)
DEFINE_RJOIN(double, d)

static void rsum_item(void *ctx, int64_t item)
{
    rsum_job *j = ctx;
    int64_t blk = item / j->nsub, sub = item % j->nsub;
    int64_t o = blk / j->nblk, c0 = blk % j->nblk * RSUM_W;
    int64_t w = j->inner - c0 < RSUM_W ? j->inner - c0 : RSUM_W;
    size_t es = j->f32 ? 4 : 8;
    double small[4 * RSUM_W];
    void *scratch = j->levels <= 4 ? small : malloc(es * (size_t)(j->levels * RSUM_W));
    if (!scratch) {
        atomic_store(&j->oom, true);
        return;
    }
    int64_t r0 = j->nsub > 1 ? j->sub_at[sub] : 0, n = j->nsub > 1 ? j->sub_n[sub] : j->r;
    const char *x = (const char *)j->x + es * (size_t)((o * j->r + r0) * j->inner + c0);
    char *y = j->nsub > 1 ? (char *)j->part + es * (size_t)(item * RSUM_W)
                          : (char *)j->y + es * (size_t)(o * j->inner + c0);
    if (j->f32 && j->m)
        rsumsq_f((const float *)x, j->inner, n, w, (const float *)j->m + c0, (float *)y, scratch);
    else if (j->f32)
        rsum_f((const float *)x, j->inner, n, w, NULL, (float *)y, scratch);
    else if (j->m)
        rsumsq_d((const double *)x, j->inner, n, w, (const double *)j->m + c0, (double *)y, scratch);
    else
        rsum_d((const double *)x, j->inner, n, w, NULL, (double *)y, scratch);
    if (scratch != small)
        free(scratch);
}

static bool rows_sum_of(bool f32, const void *x, const void *m, void *y, int64_t outer, int64_t r, int64_t inner)
{
    rsum_job j = {.f32 = f32, .x = x, .m = m, .y = y, .r = r, .inner = inner, .nblk = (inner + RSUM_W - 1) / RSUM_W,
                  .nsub = 1};
    for (int64_t n = r; n > RSUM_LEAF; n -= cpu_psum_half(n)) /* the scratch: a block a level */
        j.levels++;
    atomic_init(&j.oom, false);
    int64_t blocks = outer * j.nblk;
    bool threads = outer * r * inner >= CPU_PSUM_PARALLEL;
    size_t es = f32 ? 4 : 8;
    if (threads && blocks < 2 * cpu_nthreads() && r > 64 * RSUM_LEAF &&
        (j.part = malloc(es * RSUM_W * (size_t)(blocks << RSUM_SPLIT))))
        j.nsub = rsum_subtrees(0, r, RSUM_SPLIT, j.sub_at, j.sub_n);
    int64_t items = blocks * j.nsub;
    cpu_parallel(items, threads && items > 1 ? cpu_nthreads() : 1, rsum_item, &j);
    for (int64_t b = 0; j.nsub > 1 && b < blocks && !atomic_load(&j.oom); b++) {
        int64_t o = b / j.nblk, c0 = b % j.nblk * RSUM_W, w = inner - c0 < RSUM_W ? inner - c0 : RSUM_W;
        if (f32)
            rjoin_f((const float *)j.part + b * j.nsub * RSUM_W, r, RSUM_SPLIT, w, (float *)y + o * inner + c0);
        else
            rjoin_d((const double *)j.part + b * j.nsub * RSUM_W, r, RSUM_SPLIT, w, (double *)y + o * inner + c0);
    }
    free(j.part);
    return !atomic_load(&j.oom);
}

static bool rows_sum(bool f32, const void *x, void *y, int64_t outer, int64_t r, int64_t inner)
{
    return rows_sum_of(f32, x, NULL, y, outer, r, inner);
}

#define NANMAX(acc, v) ((v) != (v) || (v) > (acc) ? (v) : (acc))
#define NANMIN(acc, v) ((v) != (v) || (v) < (acc) ? (v) : (acc))

/* max and min of contiguous runs (inner 1): the fold of NANMAX (NANMIN)
 * from the first element on is the last NaN where there is one, else the
 * first element equal to the extreme.  Equal elements have the same bits
 * but for +0 and -0, so the extreme's bits are the first zero's where the
 * extreme is zero, and the extreme's own otherwise: the extreme and
 * whether there is a NaN are found in any order (in lanes that vectorise,
 * by blocks on the worker threads), and the rare cases then looked up in
 * order.  The same bits as the element-by-element fold, which ran at one
 * element a few nanoseconds (a max over 6.4M f32: 19.8 ms against 0.6 ms
 * for their sum).  Blocks of EXT_BLOCK elements, cut by the size alone. */
#define EXT_LANES 16
#define EXT_BLOCK ((int64_t)1 << 16)
#define EXT_PICK(max, v, e) ((max) ? ((v) > (e) ? (v) : (e)) : ((v) < (e) ? (v) : (e)))
#define DEFINE_EXTREME(T, SUF)                                                                 \
    /* the extreme of x[0..n) ignoring NaN (-inf/inf where none), and whether a NaN */        \
    CPU_KERNEL T cpu_ext_scan_##SUF(const T *x, int64_t n, bool max, bool *nan)             \
    {                                                                                          \
        T lane[EXT_LANES];                                                                     \
        int nl[EXT_LANES] = {0};                                                               \
        for (int l = 0; l < EXT_LANES; l++)                                                    \
            lane[l] = max ? (T)-INFINITY : (T)INFINITY;                                        \
        int64_t full = n / EXT_LANES * EXT_LANES;                                              \
        if (max)                                                                               \
            for (int64_t i = 0; i < full; i += EXT_LANES)                                      \
                for (int l = 0; l < EXT_LANES; l++) {                                          \
                    T v = x[i + l];                                                            \
                    nl[l] |= v != v;                                                           \
                    lane[l] = v > lane[l] ? v : lane[l];                                       \
                }                                                                              \
        else                                                                                   \
            for (int64_t i = 0; i < full; i += EXT_LANES)                                      \
                for (int l = 0; l < EXT_LANES; l++) {                                          \
                    T v = x[i + l];                                                            \
                    nl[l] |= v != v;                                                           \
                    lane[l] = v < lane[l] ? v : lane[l];                                       \
                }                                                                              \
        T e = max ? (T)-INFINITY : (T)INFINITY;                                                \
        bool any = false;                                                                      \
        for (int64_t i = full; i < n; i++) {                                                   \
            any = any || x[i] != x[i];                                                         \
            e = EXT_PICK(max, x[i], e);                                                        \
        }                                                                                      \
        for (int l = 0; l < EXT_LANES; l++) {                                                  \
            any = any || nl[l];                                                                \
            e = EXT_PICK(max, lane[l], e);                                                     \
        }                                                                                      \
        *nan = any;                                                                            \
        return e;                                                                              \
    }                                                                                          \
    /* the fold's result from the scan's extreme e and NaN flag */                            \
    static T ext_settle_##SUF(const T *x, int64_t n, T e, bool nan)                            \
    {                                                                                          \
        if (nan) {                                                                             \
            for (int64_t i = n - 1; i >= 0; i--)                                               \
                if (x[i] != x[i])                                                              \
                    return x[i];                                                               \
        }                                                                                      \
        if (e == 0)                                                                            \
            for (int64_t i = 0; i < n; i++)                                                    \
                if (x[i] == 0)                                                                 \
                    return x[i];                                                               \
        return e;                                                                              \
    }                                                                                          \
    /* the fold's result over a row of n from its blocks' scans */                             \
    static T ext_join_##SUF(const T *x, int64_t n, const T *part, const bool *nans, int64_t items, bool max) \
    {                                                                                          \
        T e = max ? (T)-INFINITY : (T)INFINITY;                                                \
        bool nan = false;                                                                      \
        for (int64_t i = 0; i < items; i++) {                                                  \
            nan = nan || nans[i];                                                              \
            e = EXT_PICK(max, part[i], e);                                                     \
        }                                                                                      \
        return ext_settle_##SUF(x, n, e, nan);                                                 \
    }

DEFINE_EXTREME(float, f)
DEFINE_EXTREME(double, d)

typedef struct ext_job {
    const void *x;
    void *y;
    bool f32, max;
    int64_t outer, r, per; /* rows of r; per: rows (outer > 1) or elements (one row) per item */
    void *part;            /* one row: each block's extreme */
    bool *nan;             /* one row: each block's NaN flag */
} ext_job;

static void ext_item(void *ctx, int64_t item)
{
    ext_job *j = ctx;
    bool nan;
    if (j->outer == 1) { /* a block of the row */
        int64_t lo = item * j->per, n = lo + j->per < j->r ? j->per : j->r - lo;
        if (j->f32)
            ((float *)j->part)[item] = cpu_ext_scan_f((const float *)j->x + lo, n, j->max, &j->nan[item]);
        else
            ((double *)j->part)[item] = cpu_ext_scan_d((const double *)j->x + lo, n, j->max, &j->nan[item]);
        return;
    }
    int64_t o1 = (item + 1) * j->per < j->outer ? (item + 1) * j->per : j->outer;
    for (int64_t o = item * j->per; o < o1; o++)
        if (j->f32) {
            const float *x = (const float *)j->x + o * j->r;
            float e = cpu_ext_scan_f(x, j->r, j->max, &nan);
            ((float *)j->y)[o] = ext_settle_f(x, j->r, e, nan);
        } else {
            const double *x = (const double *)j->x + o * j->r;
            double e = cpu_ext_scan_d(x, j->r, j->max, &nan);
            ((double *)j->y)[o] = ext_settle_d(x, j->r, e, nan);
        }
}

/* max or min of each of `outer` contiguous rows of r (r >= 1) into y */
static bool extreme_rows(bool max, bool f32, const void *x, void *y, int64_t outer, int64_t r)
{
    ext_job j = {x, y, f32, max, outer, r, 1, NULL, NULL};
    size_t es = f32 ? sizeof(float) : sizeof(double);
    if (outer > 1) {
        j.per = r >= EXT_BLOCK ? 1 : EXT_BLOCK / r;
        int64_t items = (outer + j.per - 1) / j.per;
        cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, ext_item, &j);
        return true;
    }
    int64_t items = (r + EXT_BLOCK - 1) / EXT_BLOCK;
    j.per = EXT_BLOCK;
    if (!(j.part = malloc(es * (size_t)items)) || !(j.nan = malloc((size_t)items))) {
        free(j.part);
        return false;
    }
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, ext_item, &j);
    if (f32)
        *(float *)y = ext_join_f(x, r, j.part, j.nan, items, max);
    else
        *(double *)y = ext_join_d(x, r, j.part, j.nan, items, max);
    free(j.part);
    free(j.nan);
    return true;
}

/* Products of contiguous rows (inner 1), each the fold from 1 in order,
 * as REDUCE_STEP takes it: FOLD_ROWS rows at once, so that their chains
 * of multiplies overlap instead of waiting on each other, and blocks of
 * rows on the threads (a row's bits are its own fold's, whoever runs it).
 * Integer sums and products (i32, i64) wrap: unsigned arithmetic, exact,
 * in any order, so their rows fold the same way. */
#define FOLD_ROWS 8
#define FOLD_BLOCK ((int64_t)1 << 15) /* elements an item, at least a row */
#define DEFINE_FOLD_ROWS(T, SUF, INIT, ACC)                                        \
    CPU_KERNEL static void fold_rows_##SUF(const T *x, T *y, int64_t rows, int64_t r) \
    {                                                                              \
        int64_t o = 0;                                                             \
        for (; o + FOLD_ROWS <= rows; o += FOLD_ROWS) {                            \
            T a[FOLD_ROWS];                                                        \
            const T *xs = x + o * r;                                               \
            for (int l = 0; l < FOLD_ROWS; l++)                                    \
                a[l] = (T)(INIT);                                                  \
            for (int64_t k = 0; k < r; k++)                                        \
                for (int l = 0; l < FOLD_ROWS; l++) {                              \
                    T acc = a[l], v = xs[l * r + k];                               \
                    a[l] = (T)(ACC);                                               \
                }                                                                  \
            for (int l = 0; l < FOLD_ROWS; l++)                                    \
                y[o + l] = a[l];                                                   \
        }                                                                          \
        for (; o < rows; o++) {                                                    \
            T acc = (T)(INIT);                                                     \
            for (int64_t k = 0; k < r; k++) {                                      \
                T v = x[o * r + k];                                                \
                acc = (T)(ACC);                                                    \
            }                                                                      \
            y[o] = acc;                                                            \
        }                                                                          \
    }
DEFINE_FOLD_ROWS(float, prod_f, 1, acc * v)
DEFINE_FOLD_ROWS(double, prod_d, 1, acc * v)
DEFINE_FOLD_ROWS(int32_t, prod_i32, 1, (uint32_t)acc * (uint32_t)v)
DEFINE_FOLD_ROWS(int64_t, prod_i64, 1, (uint64_t)acc * (uint64_t)v)
DEFINE_FOLD_ROWS(int32_t, sum_i32, 0, (uint32_t)acc + (uint32_t)v)
DEFINE_FOLD_ROWS(int64_t, sum_i64, 0, (uint64_t)acc + (uint64_t)v)

typedef void (*fold_fn)(const void *x, void *y, int64_t rows, int64_t r);
typedef struct fold_job {
    fold_fn fn;
    const char *x;
    char *y;
    size_t es;
    int64_t outer, r, per; /* rows an item */
} fold_job;

static void fold_item(void *ctx, int64_t item)
{
    fold_job *j = ctx;
    int64_t o = item * j->per, n = o + j->per < j->outer ? j->per : j->outer - o;
    j->fn(j->x + j->es * (size_t)(o * j->r), j->y + j->es * (size_t)o, n, j->r);
}

/* false: not a case for it (another step takes it) */
static bool fold_rows(tl_opcode op, tl_dtype dt, const void *x, void *y, int64_t outer, int64_t r)
{
    fold_fn fn = NULL;
    if (op == TL_OP_PROD)
        fn = dt == TL_F32 ? (fold_fn)fold_rows_prod_f : dt == TL_F64 ? (fold_fn)fold_rows_prod_d
           : dt == TL_I32 ? (fold_fn)fold_rows_prod_i32 : (fold_fn)fold_rows_prod_i64;
    else if (op == TL_OP_SUM && (dt == TL_I32 || dt == TL_I64))
        fn = dt == TL_I32 ? (fold_fn)fold_rows_sum_i32 : (fold_fn)fold_rows_sum_i64;
    if (!fn || r < 1)
        return false;
    fold_job j = {fn, x, y, tl_dtype_size(dt), outer, r, r >= FOLD_BLOCK ? 1 : FOLD_BLOCK / r};
    if (j.per > FOLD_ROWS)
        j.per -= j.per % FOLD_ROWS;
    int64_t items = (outer + j.per - 1) / j.per;
    cpu_parallel(items, items > 1 && outer * r >= CPU_PSUM_PARALLEL ? cpu_nthreads() : 1, fold_item, &j);
    return true;
}

/* The other integer steps: unsigned arithmetic, as above. */
#define INT_STEP(T, U)                                                             \
    do {                                                                           \
        if (op == TL_OP_PROD)                                                      \
            REDUCE_STEP(T, 1, (T)((U)acc * (U)v));                                 \
        else                                                                       \
            REDUCE_STEP(T, 0, (T)((U)acc + (U)v));                                 \
    } while (0)

/* false: out of memory for the scratch */
static bool reduce_step(tl_opcode op, tl_dtype dt, const void *xin, void *yout, int64_t outer,
                        int64_t r, int64_t inner)
{
    bool f = dt == TL_F32, ok = true;
    if (inner == 1 && fold_rows(op, dt, xin, yout, outer, r))
        return true;
    if (dt == TL_I32) {
        INT_STEP(int32_t, uint32_t);
        return true;
    }
    if (dt == TL_I64) {
        INT_STEP(int64_t, uint64_t);
        return true;
    }
    if ((op == TL_OP_MAX || op == TL_OP_MIN) && inner == 1 && r >= 1 &&
        extreme_rows(op == TL_OP_MAX, f, xin, yout, outer, r))
        return true;
    switch (op) {
    case TL_OP_MAX:
        if (f) REDUCE_STEP(float, -INFINITY, NANMAX(acc, v));
        else REDUCE_STEP(double, -INFINITY, NANMAX(acc, v));
        break;
    case TL_OP_MIN:
        if (f) REDUCE_STEP(float, INFINITY, NANMIN(acc, v));
        else REDUCE_STEP(double, INFINITY, NANMIN(acc, v));
        break;
    case TL_OP_PROD:
        if (f) REDUCE_STEP(float, 1, acc * v);
        else REDUCE_STEP(double, 1, acc * v);
        break;
    default: /* sum */
        if (f) SUM_STEP(float);
        else SUM_STEP(double);
    }
    return ok;
}

/* Reduces x (ndim, shape) over the axes set in mask into y, whose element
 * count is the product of the kept sizes. */
static tl_code reduce_buf(tl_opcode op, tl_dtype dt, const void *x, int ndim,
                          const int64_t *shape, const bool *mask, void *y, tl_status *st)
{
    int64_t cur[TL_MAXDIM], n = 1;
    size_t es = tl_dtype_size(dt);
    memcpy(cur, shape, sizeof(int64_t) * (size_t)ndim);
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    const void *src = x;
    void *tmp = NULL;
    int d = ndim - 1;
    bool any = false;
    for (;;) {
        while (d >= 0 && !mask[d])
            d--;
        if (d < 0)
            break;
        int hi = d;
        while (d >= 0 && mask[d])
            d--;
        int lo = d + 1; /* axes lo..hi form one group */
        int64_t outer = 1, r = 1, inner = 1;
        for (int e = 0; e < lo; e++)
            outer *= cur[e];
        for (int e = lo; e <= hi; e++)
            r *= cur[e];
        for (int e = hi + 1; e < ndim; e++)
            inner *= cur[e];
        bool last = true;
        for (int e = 0; e < lo; e++)
            last = last && !mask[e];
        void *dst = y;
        if (!last) {
            dst = tl_malloc((size_t)(outer * inner), es, "reduction scratch", st);
            if (!dst) {
                free(tmp);
                return st->code;
            }
        }
        if (!reduce_step(op, dt, src, dst, outer, r, inner)) {
            free(tmp);
            if (!last)
                free(dst);
            return tl_fail(st, TL_ERUNTIME, "out of memory for a sum's scratch");
        }
        free(tmp);
        tmp = last ? NULL : dst;
        src = dst;
        for (int e = lo; e <= hi; e++)
            cur[e] = 1;
        any = true;
    }
    if (!any)
        memcpy(y, x, (size_t)n * es);
    return TL_OK;
}

/* Output shape with the reduced axes kept as size 1. */
static tl_tensor keepdims_view(const tl_tensor *x, const bool *mask, void *data)
{
    tl_tensor v;
    tl_tensor_copy_header(&v, x);
    for (int d = 0; d < x->ndim; d++)
        if (mask[d])
            v.shape[d] = 1;
    v.numel = 1;
    for (int d = 0; d < v.ndim; d++)
        v.numel *= v.shape[d];
    v.data = data;
    return v;
}

/* log(sum(exp(x - m))) + m with m the max, infinite maxima replaced by 0:
 * the same steps as PyTorch's logsumexp. */
static tl_code logsumexp(const tl_tensor *x, const bool *mask, tl_tensor *out, tl_status *st)
{
    tl_status ignore;
    tl_attrs none;
    tl_attrs_init(&none);
    tl_tensor *t = tl_tensor_new(x->dtype, x->ndim, x->shape, st);
    if (!t)
        return st->code;
    tl_tensor m = keepdims_view(x, mask, out->data);
    if (reduce_buf(TL_OP_MAX, x->dtype, x->data, x->ndim, x->shape, mask, out->data, st)) {
        tl_tensor_unref(t);
        return st->code;
    }
    for (int64_t i = 0; i < m.numel; i++) {
        double v = tl_tensor_get(&m, i);
        if (isinf(v))
            tl_tensor_set(&m, i, 0);
    }
    const tl_tensor *sub[2] = {x, &m};
    cpu_elementwise(TL_OP_SUB, 2, sub, &none, t, &ignore);
    const tl_tensor *ex[1] = {t};
    cpu_elementwise(TL_OP_EXP, 1, ex, &none, t, &ignore);
    tl_tensor s = m;
    s.data = tl_malloc((size_t)m.numel, tl_dtype_size(x->dtype), "logsumexp scratch", st);
    if (!s.data || reduce_buf(TL_OP_SUM, x->dtype, t->data, x->ndim, x->shape, mask, s.data, st)) {
        free(s.data);
        tl_tensor_unref(t);
        return st->code;
    }
    if (x->dtype == TL_F32) {
        float *y = out->data, *sv = s.data;
        for (int64_t i = 0; i < m.numel; i++)
            y[i] = TL_LOG(sv[i]) + y[i];
    } else {
        double *y = out->data, *sv = s.data;
        for (int64_t i = 0; i < m.numel; i++)
            y[i] = TL_LOG(sv[i]) + y[i];
    }
    free(s.data);
    tl_tensor_unref(t);
    return TL_OK;
}

tl_code cpu_reduce(tl_opcode op, const tl_tensor *x, const tl_attrs *a, tl_tensor *out,
                   tl_status *st)
{
    bool mask[TL_MAXDIM] = {false};
    int64_t count = 1;
    for (int i = 0; i < a->naxes; i++) {
        mask[a->axes[i]] = true;
        count *= x->shape[a->axes[i]];
    }
    if (op == TL_OP_LOGSUMEXP)
        return logsumexp(x, mask, out, st);
    tl_opcode base = op == TL_OP_MEAN ? TL_OP_SUM : op;
    if (reduce_buf(base, x->dtype, x->data, x->ndim, x->shape, mask, out->data, st))
        return st->code;
    if (op == TL_OP_MEAN) {
        if (x->dtype == TL_F32) {
            float *y = out->data;
            for (int64_t i = 0; i < out->numel; i++)
                y[i] = y[i] / (float)count;
        } else {
            double *y = out->data;
            for (int64_t i = 0; i < out->numel; i++)
                y[i] = y[i] / (double)count;
        }
    }
    return TL_OK;
}

/* softmax and log_softmax along an axis, x as [outer, r, inner]: on each
 * line the max m (the NaN-keeping fold), e = exp(x - m) written into y
 * once, their sum s pairwise (psum.h's order along a contiguous line,
 * rsum's over the rows of e otherwise; a running sum over a 4M-element
 * f32 line was 0.8% off), then y = e / s, or x - m - log s.  Items of
 * whole outer indices, cut by the shapes alone: the same bits for any
 * number of threads. */
typedef struct sm_job {
    tl_opcode op;
    const tl_tensor *x;
    tl_tensor *out;
    int64_t outer, r, inner, per, levels;
    atomic_bool oom;
} sm_job;

/* A line along the last axis: the same steps, as loops along it that
 * vectorise at the CPU's width (nested in a loop over one column, exp ran
 * an element at a time; in the baseline's clone alone, at SSE2's), the
 * max the fold's own (cpu_ext_scan, then ext_settle) */
#define SOFTMAX_LAST(T, SUF)                                                                   \
    CPU_KERNEL static void softmax_last_##SUF(tl_opcode op, const T *xs, T *ys, int64_t r)    \
    {                                                                                          \
        bool nan;                                                                              \
        T mx = cpu_ext_scan_##SUF(xs, r, true, &nan);                                          \
        mx = ext_settle_##SUF(xs, r, mx, nan);                                                 \
        for (int64_t k = 0; k < r; k++)                                                        \
            ys[k] = TL_EXP(xs[k] - mx);                                                        \
        T sum = cpu_psum_seq_##SUF(leaf_##SUF, ys, 0, r);                                      \
        if (op == TL_OP_SOFTMAX) {                                                             \
            for (int64_t k = 0; k < r; k++)                                                    \
                ys[k] = ys[k] / sum;                                                           \
        } else {                                                                               \
            T ls = TL_LOG(sum);                                                                \
            for (int64_t k = 0; k < r; k++)                                                    \
                ys[k] = xs[k] - mx - ls;                                                       \
        }                                                                                      \
    }
SOFTMAX_LAST(float, f)
SOFTMAX_LAST(double, d)

#define SOFTMAX_LINES(T, SUF)                                                                  \
    static void softmax_lines_##SUF(const sm_job *j, int64_t o, T *m, T *s, T *scratch)       \
    {                                                                                          \
        int64_t r = j->r, inner = j->inner;                                                    \
        const T *xs = (const T *)j->x->data + o * r * inner;                                   \
        T *ys = (T *)j->out->data + o * r * inner;                                             \
        if (inner == 1) {                                                                      \
            softmax_last_##SUF(j->op, xs, ys, r);                                              \
            return;                                                                            \
        }                                                                                      \
        for (int64_t c = 0; c < inner; c++)                                                    \
            m[c] = -INFINITY;                                                                  \
        for (int64_t k = 0; k < r; k++)                                                        \
            for (int64_t c = 0; c < inner; c++)                                                \
                m[c] = NANMAX(m[c], xs[k * inner + c]);                                        \
        for (int64_t k = 0; k < r; k++)                                                        \
            for (int64_t c = 0; c < inner; c++)                                                \
                ys[k * inner + c] = TL_EXP(xs[k * inner + c] - m[c]);                          \
        for (int64_t c0 = 0; c0 < inner; c0 += RSUM_W)                                         \
            rsum_##SUF(ys + c0, inner, r, inner - c0 < RSUM_W ? inner - c0 : RSUM_W, NULL, s + c0, scratch); \
        if (j->op == TL_OP_SOFTMAX)                                                            \
            for (int64_t k = 0; k < r; k++)                                                    \
                for (int64_t c = 0; c < inner; c++)                                            \
                    ys[k * inner + c] = ys[k * inner + c] / s[c];                              \
        else {                                                                                 \
            for (int64_t c = 0; c < inner; c++)                                                \
                s[c] = TL_LOG(s[c]);                                                           \
            for (int64_t k = 0; k < r; k++)                                                    \
                for (int64_t c = 0; c < inner; c++)                                            \
                    ys[k * inner + c] = xs[k * inner + c] - m[c] - s[c];                       \
        }                                                                                      \
    }
SOFTMAX_LINES(float, f)
SOFTMAX_LINES(double, d)

static void softmax_item(void *ctx, int64_t item)
{
    sm_job *j = ctx;
    size_t es = tl_dtype_size(j->x->dtype);
    void *mem = malloc(es * (size_t)(2 * j->inner + j->levels * RSUM_W));
    if (!mem) {
        atomic_store(&j->oom, true);
        return;
    }
    char *m = mem, *s = m + es * (size_t)j->inner, *scratch = s + es * (size_t)j->inner;
    for (int64_t o = item * j->per; o < j->outer && o < (item + 1) * j->per; o++)
        if (j->x->dtype == TL_F32)
            softmax_lines_f(j, o, (float *)m, (float *)s, (float *)scratch);
        else
            softmax_lines_d(j, o, (double *)m, (double *)s, (double *)scratch);
    free(mem);
}

tl_code cpu_softmax(tl_opcode op, const tl_tensor *x, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    int ax = (int)a->axis;
    sm_job j = {.op = op, .x = x, .out = out, .outer = 1, .r = x->shape[ax], .inner = 1};
    for (int d = 0; d < ax; d++)
        j.outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        j.inner *= x->shape[d];
    if (x->numel == 0)
        return TL_OK;
    for (int64_t n = j.inner > 1 ? j.r : 0; n > RSUM_LEAF; n -= cpu_psum_half(n))
        j.levels++;
    int64_t line = j.r * j.inner;
    j.per = line >= 16384 ? 1 : 16384 / line;
    int64_t items = (j.outer + j.per - 1) / j.per;
    atomic_init(&j.oom, false);
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, softmax_item, &j);
    if (atomic_load(&j.oom))
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's scratch", tl_ops[op].name);
    return TL_OK;
}

#define PGRAD_ROWS 4 /* rows whose chains of products overlap */
/* row l's counts and products take element V */
#define PGRAD_TAKE(T, V)                                                           \
    do {                                                                           \
        T v = (V);                                                                 \
        zeros[l] += v == 0;                                                        \
        odd[l] += !isfinite(v);                                                    \
        p[l] *= v;                                                                 \
        nz[l] = v == 0 ? nz[l] : nz[l] * v;                                        \
    } while (0)
#define DEFINE_PROD_GRAD(T, SUF)                                                   \
    CPU_KERNEL static void prod_grad_##SUF(const T *x, const T *g, T *y, int64_t rows, int64_t r) \
    {                                                                              \
        for (int64_t o0 = 0; o0 < rows; o0 += PGRAD_ROWS) {                        \
            int nr = rows - o0 < PGRAD_ROWS ? (int)(rows - o0) : PGRAD_ROWS;       \
            int64_t zeros[PGRAD_ROWS] = {0}, odd[PGRAD_ROWS] = {0}; /* infinities and NaNs */ \
            T p[PGRAD_ROWS], nz[PGRAD_ROWS]; /* the product; of the nonzeros */    \
            for (int l = 0; l < PGRAD_ROWS; l++)                                   \
                p[l] = nz[l] = 1;                                                  \
            if (nr == PGRAD_ROWS)                                                  \
                for (int64_t k = 0; k < r; k++)                                    \
                    for (int l = 0; l < PGRAD_ROWS; l++)                           \
                        PGRAD_TAKE(T, x[(o0 + l) * r + k]);                        \
            else                                                                   \
                for (int l = 0; l < nr; l++)                                       \
                    for (int64_t k = 0; k < r; k++)                                \
                        PGRAD_TAKE(T, x[(o0 + l) * r + k]);                        \
            for (int l = 0; l < nr; l++) {                                         \
                const T *xs = x + (o0 + l) * r;                                    \
                T *ys = y + (o0 + l) * r, go = g[o0 + l], pl = p[l];               \
                if (zeros[l] == 0) {                                               \
                    for (int64_t k = 0; k < r; k++)                                \
                        ys[k] = go * (pl / xs[k]);                                 \
                    continue;                                                      \
                }                                                                  \
                for (int64_t k = 0; k < r; k++)                                    \
                    ys[k] = zeros[l] == 1 && xs[k] == 0          ? go * nz[l]      \
                            : odd[l] - !isfinite(xs[k]) > 0      ? go * (T)NAN     \
                                                                 : go * (T)0;      \
            }                                                                      \
        }                                                                          \
    }
DEFINE_PROD_GRAD(float, f)
DEFINE_PROD_GRAD(double, d)

typedef struct pgrad_job {
    const tl_tensor *x, *g;
    tl_tensor *out;
    int64_t r, per; /* rows an item */
} pgrad_job;

static void pgrad_item(void *ctx, int64_t item)
{
    pgrad_job *j = ctx;
    int64_t outer = j->x->shape[0], o = item * j->per, n = o + j->per < outer ? j->per : outer - o;
    if (j->x->dtype == TL_F32)
        prod_grad_f((const float *)j->x->data + o * j->r, (const float *)j->g->data + o,
                    (float *)j->out->data + o * j->r, n, j->r);
    else
        prod_grad_d((const double *)j->x->data + o * j->r, (const double *)j->g->data + o,
                    (double *)j->out->data + o * j->r, n, j->r);
}

/* x: [outer, r], g: [outer] -> g times the product of the other entries of
 * each row, as PyTorch's: g (prod / x) where the row has no zero; with
 * zeros, the row's one zero gets g times the product of the rest, and
 * every other place g times a product that holds a zero: 0, or NaN where
 * an infinity or NaN is among the others (0 inf is NaN; they were 0 until
 * tests/cli/cases.txt's case).  The products fold each row in order;
 * blocks of rows, cut by the shapes alone, on the threads. */
tl_code cpu_prod_grad(const tl_tensor *x, const tl_tensor *g, tl_tensor *out)
{
    int64_t outer = x->shape[0], r = x->shape[1];
    if (r < 1 || outer < 1)
        return TL_OK;
    pgrad_job j = {x, g, out, r, r >= FOLD_BLOCK ? 1 : FOLD_BLOCK / r};
    if (j.per > PGRAD_ROWS)
        j.per -= j.per % PGRAD_ROWS;
    int64_t items = (outer + j.per - 1) / j.per;
    cpu_parallel(items, items > 1 && outer * r >= CPU_PSUM_PARALLEL ? cpu_nthreads() : 1, pgrad_item, &j);
    return TL_OK;
}

/* ---------- batch_norm_var ----------
 * Training batch_norm's variance, mean(square(x - m)) over every axis of
 * x [N, C, *S] but the channels (m [1, C, 1...]): the same bits as those
 * three ops, which reduce_buf would take in two steps (each plane's S
 * elements by psum, then the N plane sums of a channel in order, or by
 * psum for one channel), with x - m and its square made as each leaf of
 * the sums reads them instead of as two tensors the size of x (with two
 * axes, [N, C], too: rsumsq, the columns' pairwise sums over N).  The
 * planes' sums are independent: items of planes on the threads. */
typedef struct bnv_job {
    const void *x, *m;
    void *sums;     /* [N, C] */
    int64_t n, c, s; /* N, C and the plane's S */
    int64_t per;    /* planes an item */
} bnv_job;

typedef struct bnv_plane {
    const void *x; /* the plane (or, with 2 axes, the column of one channel) */
    double m;      /* as T: exact */
} bnv_plane;

#define BNV(T, SUF)                                                                  \
    static T bnv_leaf_##SUF(void *ctx, int64_t lo, int64_t n)                        \
    {                                                                                \
        const bnv_plane *p = ctx;                                                    \
        const T *x = (const T *)p->x + lo, m = (T)p->m;                              \
        T sq[CPU_PSUM_LEAF];                                                         \
        for (int64_t i = 0; i < n; i++) {                                            \
            T d = x[i] - m;                                                          \
            sq[i] = d * d;                                                           \
        }                                                                            \
        return cpu_psum_leaf_##SUF(sq, n);                                           \
    }                                                                                \
    static void bnv_item_##SUF(void *ctx, int64_t item)                              \
    {                                                                                \
        const bnv_job *j = ctx;                                                      \
        int64_t p0 = item * j->per, p1 = p0 + j->per < j->n * j->c ? p0 + j->per : j->n * j->c; \
        for (int64_t p = p0; p < p1; p++) {                                          \
            bnv_plane pl = {(const T *)j->x + p * j->s, ((const T *)j->m)[p % j->c]}; \
            ((T *)j->sums)[p] = cpu_psum_tree_##SUF(bnv_leaf_##SUF, &pl, j->s, cpu_nthreads()); \
        }                                                                            \
    }
BNV(float, f)
BNV(double, d)

tl_code cpu_batch_norm_var(const tl_tensor *x, const tl_tensor *m, tl_tensor *out, tl_status *st)
{
    bool f = x->dtype == TL_F32;
    bnv_job j = {.x = x->data, .m = m->data, .n = x->shape[0], .c = x->shape[1], .s = 1};
    for (int d = 2; d < x->ndim; d++)
        j.s *= x->shape[d];
    int64_t count = j.n * j.s;
    if (j.c == 0)
        return TL_OK;
    if (x->ndim == 2 && j.c == 1) { /* one psum over the column */
        bnv_plane pl = {x->data, f ? (double)((const float *)m->data)[0] : ((const double *)m->data)[0]};
        if (f)
            ((float *)out->data)[0] = cpu_psum_tree_f(bnv_leaf_f, &pl, j.n, cpu_nthreads());
        else
            ((double *)out->data)[0] = cpu_psum_tree_d(bnv_leaf_d, &pl, j.n, cpu_nthreads());
    } else if (x->ndim == 2) { /* the channels' columns of squares summed pairwise over the samples */
        if (!rows_sum_of(f, x->data, m->data, out->data, 1, j.n, j.c))
            return tl_fail(st, TL_ERUNTIME, "out of memory for batch_norm's scratch");
    } else { /* each plane's sum by psum, then the channels' columns summed
              * pairwise over the samples */
        size_t es = tl_dtype_size(x->dtype);
        if (!(j.sums = tl_malloc((size_t)(j.n * j.c), es, "reduction scratch", st)))
            return st->code;
        {
            int64_t planes = j.n * j.c, want = CPU_PSUM_PARALLEL / (j.s ? j.s : 1);
            j.per = want < 1 ? 1 : want > planes && planes > 0 ? planes : want;
            int64_t items = (planes + j.per - 1) / j.per; /* none for no samples: the sums are 0, the mean 0 / 0 */
            cpu_parallel(items, cpu_nthreads(), f ? bnv_item_f : bnv_item_d, &j);
        }
        bool ok = rows_sum(f, j.sums, out->data, 1, j.n, j.c);
        free(j.sums);
        if (!ok)
            return tl_fail(st, TL_ERUNTIME, "out of memory for batch_norm's scratch");
    }
    if (f) {
        float *y = out->data;
        for (int64_t i = 0; i < j.c; i++)
            y[i] = y[i] / (float)count;
    } else {
        double *y = out->data;
        for (int64_t i = 0; i < j.c; i++)
            y[i] = y[i] / (double)count;
    }
    return TL_OK;
}
