/* The CUDA backend's host twin, for tests on machines without a GPU: a
 * device backend whose run() does what the kernels of backends/cuda do,
 * with the same device-neutral code (the headers of backends/cuda), each
 * kernel replayed as a host loop over its threads: the same plans, launch
 * shapes, per-element functions, reduction trees, scatter orders and map
 * interpreter.  What it cannot replay is CUDA itself (the API calls,
 * shared memory and warps, the device's libm) and cuBLAS, whose calls it
 * checks through a column-major reference gemm.
 *
 * Its memory is the guarded memory of tests/testdev.h: every buffer is
 * inaccessible except while the twin runs a kernel on it.  twin_open
 * returns a record closed by testdev_close.  Include after <tgmath.h> and
 * with _DEFAULT_SOURCE defined (testdev.h). */
#ifndef TL_TEST_CUDA_TWIN_H
#define TL_TEST_CUDA_TWIN_H

#include <stdlib.h>
#include <string.h>

#include "backends/cuda/errors.h"
#include "backends/cuda/matmul.h"
#include "backends/cuda/mexec.h"
#include "backends/cuda/reduce.h"
#include "backends/cuda/shape.h"
#include "backends/cuda/index.h"
#include "backends/cuda/nn.h"
#include "backends/cuda/support.h"
#include "testdev.h"

/* ---------- elementwise (elementwise.cu) ---------- */

static tl_code twin_cast(const cu_ew *k, const tl_tensor *x, tl_tensor *out, tl_status *st)
{
    if (x->dtype == out->dtype) {
        memcpy(out->data, x->data, tl_tensor_bytes(x));
        return TL_OK;
    }
    int64_t bad = -1; /* the device's atomicMin: the smallest bad position */
    for (int64_t i = k->n - 1; i >= 0; i--)
        if (!cu_ew_cast(k, i))
            bad = i;
    if (bad < 0)
        return TL_OK;
    size_t es = tl_dtype_size(x->dtype);
    return cu_cast_error(st, x->dtype, (const char *)x->data + (size_t)bad * es, bad, out->dtype);
}

static tl_code twin_elementwise(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                                tl_tensor *out, tl_status *st)
{
    if (out->numel == 0)
        return TL_OK;
    cu_ew k;
    cu_ew_prepare(&k, op, n, in, a, out);
    if (op == TL_OP_CAST)
        return twin_cast(&k, in[0], out, st);
    if (op == TL_OP_DETACH) {
        memcpy(out->data, in[0]->data, tl_tensor_bytes(out));
        return TL_OK;
    }
    if (tl_dtype_is_int(out->dtype)) { /* the integer arithmetic */
        bool i32 = out->dtype == TL_I32;
        int64_t bad = -1; /* zero_kernel's atomicMin */
        for (int64_t i = k.nb - 1; TL_INT_DIVIDES(op) && i >= 0; i--)
            if (i32 ? cu_ew_zero_i32(&k, i) : cu_ew_zero_i64(&k, i))
                bad = i;
        if (bad >= 0)
            return cu_int_divisor_error(st, op, k.nb, bad);
        for (int64_t i = 0; i < k.n; i++) {
            if (n == 2)
                i32 ? cu_ew_binary_i32(&k, op, i) : cu_ew_binary_i64(&k, op, i);
            else
                i32 ? cu_ew_unary_i32(&k, op, i) : cu_ew_unary_i64(&k, op, i);
        }
        return TL_OK;
    }
    bool f = out->dtype == TL_F32;
    for (int64_t i = 0; i < k.n; i++) {
        if (op == TL_OP_WHERE)
            f ? cu_ew_where_f(&k, i) : cu_ew_where_d(&k, i);
        else if (op == TL_OP_CLAMP)
            f ? cu_ew_clamp_f(&k, i) : cu_ew_clamp_d(&k, i);
        else if (n == 2)
            f ? cu_ew_binary_f(&k, op, i) : cu_ew_binary_d(&k, op, i);
        else
            f ? cu_ew_unary_f(&k, op, i) : cu_ew_unary_d(&k, op, i);
    }
    return TL_OK;
}

/* ---------- reductions (reduce.cu) ---------- */

#define TWIN_DEFINE_RED(T, SUF)                                                    \
    /* reduce_kernel: every group's threads, then the halving tree */              \
    static void twin_kernel_##SUF(const cu_red *p)                                 \
    {                                                                              \
        cu_acc_##SUF part[CU_THREADS];                                             \
        int g = p->sh.group;                                                       \
        for (int64_t gi = 0; gi < p->nout * p->sh.nchunks; gi++) {                 \
            int64_t o = gi / p->sh.nchunks, c = gi % p->sh.nchunks;                \
            for (int t = 0; t < g; t++)                                            \
                part[t] = cu_red_thread_##SUF(p, o, c, t);                         \
            for (int half = g / 2; half > 0; half /= 2)                            \
                for (int t = 0; t < half; t++)                                     \
                    part[t] = cu_acc_combine_##SUF(p->mode, part[t], part[t + half]); \
            cu_red_store_##SUF(p, o, c, part[0]);                                  \
        }                                                                          \
    }                                                                              \
    /* passes<T> */                                                                \
    static void twin_passes_##SUF(cu_red p, void *y, void *acc_out)                \
    {                                                                              \
        void *prev = NULL;                                                         \
        for (;;) {                                                                 \
            bool last = p.sh.nchunks == 1;                                         \
            void *mine = last ? acc_out                                            \
                              : malloc(sizeof(cu_acc_##SUF) * (size_t)(p.nout * p.sh.nchunks)); \
            p.y = last ? y : NULL;                                                 \
            p.acc_out = mine;                                                      \
            twin_kernel_##SUF(&p);                                                 \
            free(prev);                                                            \
            if (last)                                                              \
                return;                                                            \
            prev = mine;                                                           \
            cu_red_next(&p, prev);                                                 \
        }                                                                          \
    }                                                                              \
    static void twin_reduce_##SUF(tl_opcode op, const tl_tensor *x, const bool *mask, \
                                  int64_t count, tl_tensor *out)                   \
    {                                                                              \
        cu_red p;                                                                  \
        int mode = op == TL_OP_PROD ? CU_R_PROD : op == TL_OP_MAX ? CU_R_MAX       \
                 : op == TL_OP_MIN ? CU_R_MIN : CU_R_SUM;                          \
        T *y = (T *)out->data;                                                     \
        cu_red_plan(&p, mode, x->ndim, x->shape, mask);                            \
        p.x = x->data;                                                             \
        if (op != TL_OP_LOGSUMEXP) {                                               \
            twin_passes_##SUF(p, y, NULL);                                         \
            for (int64_t i = 0; op == TL_OP_MEAN && i < out->numel; i++)           \
                y[i] = y[i] / (T)count;                                            \
            return;                                                                \
        }                                                                          \
        p.mode = CU_R_MAX;                                                         \
        twin_passes_##SUF(p, y, NULL);                                             \
        for (int64_t i = 0; i < out->numel; i++)                                   \
            if (isinf(y[i]))                                                       \
                y[i] = 0;                                                          \
        T *sum = (T *)malloc(sizeof(T) * (size_t)out->numel);                      \
        p.mode = CU_R_SUMEXP;                                                      \
        p.m = y;                                                                   \
        twin_passes_##SUF(p, sum, NULL);                                           \
        for (int64_t i = 0; i < out->numel; i++)                                   \
            y[i] = log(sum[i]) + y[i];                                             \
        free(sum);                                                                 \
    }                                                                              \
    static void twin_softmax_##SUF(tl_opcode op, const tl_tensor *x, const tl_attrs *a, \
                                   tl_tensor *out)                                 \
    {                                                                              \
        bool mask[TL_MAXDIM] = {false};                                            \
        int ax = (int)a->axis;                                                     \
        int64_t inner = 1, r = x->shape[ax];                                       \
        mask[ax] = true;                                                           \
        for (int d = ax + 1; d < x->ndim; d++)                                     \
            inner *= x->shape[d];                                                  \
        cu_red p;                                                                  \
        cu_red_plan(&p, CU_R_MAX, x->ndim, x->shape, mask);                        \
        p.x = x->data;                                                             \
        T *m = (T *)malloc(2 * sizeof(T) * (size_t)p.nout), *sum = m + p.nout;     \
        twin_passes_##SUF(p, m, NULL);                                             \
        p.mode = CU_R_SUMEXP;                                                      \
        p.m = m;                                                                   \
        twin_passes_##SUF(p, sum, NULL);                                           \
        const T *X = (const T *)x->data;                                           \
        for (int64_t i = 0; i < x->numel; i++) {                                   \
            int64_t o = i / (r * inner) * inner + i % inner;                       \
            ((T *)out->data)[i] = cu_softmax_##SUF(op == TL_OP_LOG_SOFTMAX, X[i], m[o], sum[o]); \
        }                                                                          \
        free(m);                                                                   \
    }                                                                              \
    static void twin_prod_grad_##SUF(const tl_tensor *x, const tl_tensor *g, tl_tensor *out) \
    {                                                                              \
        bool mask[2] = {false, true};                                              \
        cu_red p;                                                                  \
        cu_red_plan(&p, CU_R_PRODZ, 2, x->shape, mask);                            \
        p.x = x->data;                                                             \
        cu_acc_##SUF *rows = (cu_acc_##SUF *)malloc(sizeof *rows * (size_t)p.nout); \
        twin_passes_##SUF(p, NULL, rows);                                          \
        const T *X = (const T *)x->data, *G = (const T *)g->data;                  \
        int64_t r = x->shape[1];                                                   \
        for (int64_t i = 0; i < x->numel; i++)                                     \
            ((T *)out->data)[i] = cu_prod_grad_##SUF(X[i], G[i / r], rows[i / r]); \
        free(rows);                                                                \
    }
TWIN_DEFINE_RED(float, f)
TWIN_DEFINE_RED(double, d)

/* int_reduce: sum and prod of integers through the same passes */
#define TWIN_DEFINE_IRED(T, SUF)                                                   \
    static void twin_kernel_##SUF(const cu_red *p)                                 \
    {                                                                              \
        cu_acc_##SUF part[CU_THREADS];                                             \
        int g = p->sh.group;                                                       \
        for (int64_t gi = 0; gi < p->nout * p->sh.nchunks; gi++) {                 \
            int64_t o = gi / p->sh.nchunks, c = gi % p->sh.nchunks;                \
            for (int t = 0; t < g; t++)                                            \
                part[t] = cu_red_thread_##SUF(p, o, c, t);                         \
            for (int half = g / 2; half > 0; half /= 2)                            \
                for (int t = 0; t < half; t++)                                     \
                    part[t] = cu_acc_combine_##SUF(p->mode, part[t], part[t + half]); \
            cu_red_store_##SUF(p, o, c, part[0]);                                  \
        }                                                                          \
    }                                                                              \
    static void twin_reduce_##SUF(tl_opcode op, const tl_tensor *x, const bool *mask, \
                                  tl_tensor *out)                                  \
    {                                                                              \
        cu_red p;                                                                  \
        void *prev = NULL;                                                         \
        cu_red_plan(&p, op == TL_OP_PROD ? CU_R_PROD : CU_R_SUM, x->ndim, x->shape, mask); \
        p.x = x->data;                                                             \
        for (;;) {                                                                 \
            bool last = p.sh.nchunks == 1;                                         \
            void *mine = last ? NULL                                               \
                              : malloc(sizeof(cu_acc_##SUF) * (size_t)(p.nout * p.sh.nchunks)); \
            p.y = last ? out->data : NULL;                                         \
            p.acc_out = mine;                                                      \
            twin_kernel_##SUF(&p);                                                 \
            free(prev);                                                            \
            if (last)                                                              \
                return;                                                            \
            prev = mine;                                                           \
            cu_red_next(&p, prev);                                                 \
        }                                                                          \
    }
TWIN_DEFINE_IRED(int32_t, i32)
TWIN_DEFINE_IRED(int64_t, i64)

static tl_code twin_reduce(tl_opcode op, const tl_tensor *x, const tl_attrs *a, tl_tensor *out)
{
    bool mask[TL_MAXDIM] = {false};
    int64_t count = 1;
    for (int i = 0; i < a->naxes; i++) {
        mask[a->axes[i]] = true;
        count *= x->shape[a->axes[i]];
    }
    if (a->naxes == 0 && op != TL_OP_LOGSUMEXP)
        memcpy(out->data, x->data, tl_tensor_bytes(out));
    else if (x->dtype == TL_I32)
        twin_reduce_i32(op, x, mask, out);
    else if (x->dtype == TL_I64)
        twin_reduce_i64(op, x, mask, out);
    else if (x->dtype == TL_F32)
        twin_reduce_f(op, x, mask, count, out);
    else
        twin_reduce_d(op, x, mask, count, out);
    return TL_OK;
}

/* ---------- matmul (matmul.cu): cuBLAS's column-major gemm ---------- */

/* C[i + j ldc] = sum_p op(X)[i, p] op(Y)[p, j], X M x K, Y K x N, column-major. */
#define TWIN_DEFINE_GEMM(T, SUF)                                                   \
    static void twin_gemm_##SUF(bool tx, bool ty, int64_t M, int64_t N, int64_t K, const T *X, \
                                int64_t ldx, const T *Y, int64_t ldy, T *C, int64_t ldc) \
    {                                                                              \
        for (int64_t j = 0; j < N; j++)                                            \
            for (int64_t i = 0; i < M; i++) {                                      \
                double s = 0;                                                      \
                for (int64_t p = 0; p < K; p++)                                    \
                    s += (double)(tx ? X[p + i * ldx] : X[i + p * ldx]) *          \
                         (double)(ty ? Y[j + p * ldy] : Y[p + j * ldy]);           \
                C[i + j * ldc] = (T)s;                                             \
            }                                                                      \
    }
TWIN_DEFINE_GEMM(float, f)
TWIN_DEFINE_GEMM(double, d)

static tl_code twin_matmul(const tl_tensor *a, const tl_tensor *b, const tl_attrs *at, tl_tensor *out)
{
    if (out->numel == 0)
        return TL_OK;
    cu_mm p;
    cu_mm_prepare(&p, a, b, at, out);
    if (p.k == 0) {
        memset(out->data, 0, tl_tensor_bytes(out));
        return TL_OK;
    }
    /* gemm(op_b, op_a, n, m, k, B, ldb, A, lda, C, n), batched */
    for (int64_t call = 0; call < p.calls; call++) {
        int64_t oa, ob, oc;
        cu_mm_offsets(&p, call, &oa, &ob, &oc);
        for (int64_t e = 0; e < p.count; e++) {
            if (out->dtype == TL_F32)
                twin_gemm_f(p.trans_b, p.trans_a, p.n, p.m, p.k, (const float *)b->data + ob + e * p.sb,
                            p.ldb, (const float *)a->data + oa + e * p.sa, p.lda,
                            (float *)out->data + oc + e * p.sc, p.n);
            else
                twin_gemm_d(p.trans_b, p.trans_a, p.n, p.m, p.k, (const double *)b->data + ob + e * p.sb,
                            p.ldb, (const double *)a->data + oa + e * p.sa, p.lda,
                            (double *)out->data + oc + e * p.sc, p.n);
        }
    }
    return TL_OK;
}

/* ---------- shape and index ops (shape.cu) ---------- */

static void twin_copy(const cu_copy *k, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        cu_copy_element(k, i);
}

typedef struct twin_pair {
    uint64_t key;
    int64_t pos;
} twin_pair;

static int twin_pair_cmp(const void *x, const void *y)
{
    const twin_pair *a = (const twin_pair *)x, *b = (const twin_pair *)y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos; /* positions are distinct: a stable sort */
}

static void twin_scatter(cu_idx *k, tl_tensor *out)
{
    int64_t npos = cu_scatter_positions(k), n = out->numel;
    if (npos == 0 || n == 0) {
        memset(out->data, 0, tl_tensor_bytes(out));
        return;
    }
    twin_pair *pairs = (twin_pair *)malloc(sizeof *pairs * (size_t)npos);
    uint64_t *keys = (uint64_t *)malloc(sizeof *keys * (size_t)npos);
    int64_t *order = (int64_t *)malloc(sizeof *order * (size_t)npos);
    for (int64_t p = 0; p < npos; p++)
        pairs[p] = (twin_pair){cu_scatter_key(k, p), p};
    qsort(pairs, (size_t)npos, sizeof *pairs, twin_pair_cmp);
    for (int64_t p = 0; p < npos; p++) {
        keys[p] = pairs[p].key;
        order[p] = pairs[p].pos;
    }
    k->keys = keys;
    k->order = order;
    for (int64_t e = 0; e < n; e++)
        out->dtype == TL_F32 ? cu_scatter_element_f(k, npos, e) : cu_scatter_element_d(k, npos, e);
    free(pairs);
    free(keys);
    free(order);
}

static tl_code twin_index_op(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                             tl_tensor *out, tl_status *st)
{
    int at = tl_ops[op].index_arg;
    const tl_tensor *x = in[0], *idx = n > at ? in[at] : NULL;
    cu_idx k;
    cu_idx_prepare(&k, op, x, idx, a->indices, a, out);
    int64_t bad = -1;
    for (int64_t j = idx ? k.nidx - 1 : -1; j >= 0; j--)
        if (!cu_index_ok(cu_index_raw(&k, j), k.len, k.negative))
            bad = j;
    switch (op) {
    case TL_OP_ONE_HOT:
        for (int64_t e = 0; e < out->numel; e++)
            cu_one_hot_element(&k, e);
        break;
    case TL_OP_TAKE:
        for (int64_t e = 0; e < out->numel; e++)
            cu_take_element(&k, e);
        break;
    case TL_OP_GATHER:
        for (int64_t e = 0; e < out->numel; e++)
            cu_gather_element(&k, e);
        break;
    default: twin_scatter(&k, out);
    }
    if (bad < 0)
        return TL_OK;
    const tl_tensor *full = op == TL_OP_TAKE_GRAD || op == TL_OP_GATHER_GRAD ? out : x;
    return cu_index_error(st, op, a, full, idx, bad, tl_tensor_get_int(idx, bad));
}

static tl_code twin_shape_op(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                             tl_tensor *out, tl_status *st)
{
    size_t es = tl_dtype_size(out->dtype);
    const tl_tensor *x = in[0];
    cu_copy k;
    if (tl_ops[op].index_arg >= 0)
        return twin_index_op(op, n, in, a, out, st);
    if (out->numel == 0)
        return TL_OK;
    switch (op) {
    case TL_OP_TRANSPOSE: cu_copy_transpose(&k, x, a, out); twin_copy(&k, out->numel); break;
    case TL_OP_BROADCAST_TO: cu_copy_broadcast(&k, x, out); twin_copy(&k, out->numel); break;
    case TL_OP_SLICE:
        cu_copy_slice(&k, a, x->data, x->shape, out->data, x->ndim, out->shape, true, es);
        twin_copy(&k, out->numel);
        break;
    case TL_OP_SLICE_GRAD:
        memset(out->data, 0, tl_tensor_bytes(out));
        cu_copy_slice(&k, a, out->data, out->shape, x->data, x->ndim, x->shape, false, es);
        twin_copy(&k, x->numel);
        break;
    case TL_OP_CONCAT:
    case TL_OP_STACK:
        for (int64_t i = 0, at = 0; i < n; i++) {
            cu_copy_concat(&k, in[i], a, out, at, op == TL_OP_STACK);
            twin_copy(&k, in[i]->numel);
            at += op == TL_OP_STACK ? 1 : in[i]->shape[a->axis];
        }
        break;
    default: memcpy(out->data, x->data, tl_tensor_bytes(out));
    }
    return TL_OK;
}

/* ---------- map (map.cu) ---------- */

static tl_code twin_map(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                        tl_tensor *out)
{
    bool grad = op == TL_OP_MAP_GRAD;
    cu_map_layout l = cu_map_layout_of(a->prog, grad ? n - 1 : n);
    void *blob = malloc(l.total);
    cu_mapk k;
    cu_map_pack(&k, blob, blob, op, n, in, a, out);
    if (k.total > 0 && !(grad && k.k == 0)) {
        size_t es = tl_dtype_size(out->dtype);
        int64_t per = cu_map_thread_bytes(&k, es);
        k.nthreads = cu_map_threads(k.total, per);
        k.scratch = malloc((size_t)(k.nthreads * per));
        for (int64_t t = 0; t < k.nthreads; t++)
            out->dtype == TL_F32 ? cu_map_thread_f(&k, t) : cu_map_thread_d(&k, t);
        free(k.scratch);
    }
    free(blob);
    return TL_OK;
}

/* ---------- layer ops (nn.cu): nn.h's drivers on the host ---------- */

static tl_code twin_nn_launch(void *ctx, tl_dtype dt, const cu_nnk *k, int64_t n, tl_status *st)
{
    (void)ctx, (void)st;
    for (int64_t e = 0; e < n; e++) {
        if (k->op == CU_NN_PAD)
            cu_pad_element(k, e);
        else if (dt == TL_F32)
            cu_nn_element_f(k, k->op, e);
        else
            cu_nn_element_d(k, k->op, e);
    }
    return TL_OK;
}

/* cuBLAS's strided-batched gemm: the reference gemm, then beta 0 or 1. */
#define TWIN_DEFINE_NN_GEMM(T, SUF)                                                \
    static void twin_nn_gemm_##SUF(const cu_gemm *g)                               \
    {                                                                              \
        int64_t ld = g->ldc;                                                       \
        T *tmp = (T *)malloc(sizeof(T) * (size_t)(ld * g->n));                     \
        for (int64_t e = 0; e < g->count; e++) {                                   \
            T *c = (T *)g->c + e * g->sc;                                          \
            twin_gemm_##SUF(g->ta, g->tb, g->m, g->n, g->k, (const T *)g->a + e * g->sa, \
                            g->lda, (const T *)g->b + e * g->sb, g->ldb, tmp, ld); \
            for (int64_t j = 0; j < g->n; j++)                                     \
                for (int64_t i = 0; i < g->m; i++)                                 \
                    c[i + j * ld] = g->accumulate ? tmp[i + j * ld] + c[i + j * ld] \
                                                  : tmp[i + j * ld];               \
        }                                                                          \
        free(tmp);                                                                 \
    }
TWIN_DEFINE_NN_GEMM(float, f)
TWIN_DEFINE_NN_GEMM(double, d)

static tl_code twin_nn_gemm(void *ctx, tl_dtype dt, const cu_gemm *g, tl_status *st)
{
    (void)ctx, (void)st;
    dt == TL_F32 ? twin_nn_gemm_f(g) : twin_nn_gemm_d(g);
    return TL_OK;
}

static void *twin_nn_alloc(void *ctx, size_t bytes, tl_status *st)
{
    (void)ctx;
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        tl_fail(st, TL_ERUNTIME, "twin: out of memory");
    return p;
}

static void twin_nn_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static tl_code twin_nn_zero(void *ctx, void *p, size_t bytes, tl_status *st)
{
    (void)ctx, (void)st;
    memset(p, 0, bytes);
    return TL_OK;
}

static tl_code twin_nn_copy(void *ctx, void *dst, const void *src, size_t bytes, tl_status *st)
{
    (void)ctx, (void)st;
    memcpy(dst, src, bytes);
    return TL_OK;
}

static tl_code twin_nn_first_bad(void *ctx, const cu_nnk *k, const tl_tensor *idx, int64_t *bad,
                                 int64_t *value, tl_status *st)
{
    (void)ctx, (void)st;
    *bad = -1; /* the device's atomicMin: the smallest bad position */
    for (int64_t j = idx->numel - 1; j >= 0; j--)
        if (cu_line_bad(k, j))
            *bad = j;
    *value = *bad >= 0 ? tl_tensor_get_int(idx, *bad) : 0;
    return TL_OK;
}

/* The columns' scratch per chunk, the device's; a test may lower it to
 * cut the batch into chunks. */
static int64_t twin_nn_cap = CU_NN_SCRATCH;

static tl_code twin_nn(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                       tl_tensor *out, tl_status *st)
{
    cu_nn_dev dev = {NULL,         twin_nn_launch, twin_nn_gemm,      twin_nn_alloc, twin_nn_release,
                     twin_nn_zero, twin_nn_copy,   twin_nn_copy,      twin_nn_first_bad, twin_nn_cap};
    return cu_nn_run(&dev, op, n, in, a, out, st);
}

/* ---------- the record (plugin.cu's cu_run) ---------- */

static tl_code twin_kernels(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                            tl_tensor *out, tl_status *st)
{
    switch (tl_ops[op].kind) {
    case TL_KIND_BIN:
    case TL_KIND_CMP:
    case TL_KIND_UN: return twin_elementwise(op, n, in, a, out, st);
    case TL_KIND_RED: return out->numel ? twin_reduce(op, in[0], a, out) : TL_OK;
    default: break;
    }
    if (cu_is_nn_op(op))
        return twin_nn(op, n, in, a, out, st);
    switch (op) {
    case TL_OP_CAST:
    case TL_OP_WHERE:
    case TL_OP_GELU_GRAD:
    case TL_OP_RELU_GRAD: return twin_elementwise(op, n, in, a, out, st);
    case TL_OP_SOFTMAX:
    case TL_OP_LOG_SOFTMAX:
        if (out->numel)
            in[0]->dtype == TL_F32 ? twin_softmax_f(op, in[0], a, out) : twin_softmax_d(op, in[0], a, out);
        return TL_OK;
    case TL_OP_MATMUL: return twin_matmul(in[0], in[1], a, out);
    case TL_OP_MAP:
    case TL_OP_MAP_GRAD: return twin_map(op, n, in, a, out);
    case TL_OP_PROD_GRAD:
        if (out->numel)
            in[0]->dtype == TL_F32 ? twin_prod_grad_f(in[0], in[1], out) : twin_prod_grad_d(in[0], in[1], out);
        return TL_OK;
    default: return twin_shape_op(op, n, in, a, out, st);
    }
}

/* Called after each op with its result on the twin and the CPU's (both
 * readable; cpu NULL when the CPU failed, with its status). */
typedef void (*twin_observer)(tl_opcode op, int n, const tl_tensor *const *in, const tl_tensor *got,
                              tl_code rc, const tl_status *st, const tl_tensor *cpu, tl_code cpu_rc,
                              const tl_status *cpu_st);

static twin_observer twin_watch;

static tl_code twin_run(const tl_backend *be, tl_opcode op, int n, const tl_tensor *const *in,
                        const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    testdev *d = testdev_of(be);
    for (int i = 0; i < n; i++)
        testdev_protect(d, in[i]->data, PROT_READ);
    testdev_protect(d, out->data, PROT_READ | PROT_WRITE);
    tl_code rc = twin_kernels(op, n, in, a, out, st);
    if (twin_watch) {
        tl_status cst = {0};
        tl_tensor *cpu = tl_tensor_new(out->dtype, out->ndim, out->shape, &cst);
        tl_code crc = tl_cpu_backend.run(&tl_cpu_backend, op, n, in, a, cpu, &cst);
        twin_watch(op, n, in, out, rc, st, cpu, crc, &cst);
        tl_tensor_unref(cpu);
    }
    for (int i = 0; i < n; i++)
        testdev_protect(d, in[i]->data, PROT_NONE);
    testdev_protect(d, out->data, PROT_NONE);
    d->kernels++;
    return rc;
}

static bool twin_want_all(tl_opcode op, int n, const tl_dtype *in, tl_dtype out)
{
    (void)n, (void)in, (void)out;
    return cu_has_kernel(op);
}

/* A twin device; what it supports is the CUDA backend's answer (every op
 * but if and iterate). */
static inline tl_backend *twin_open(void)
{
    tl_backend *be = testdev_open(twin_want_all);
    be->name = "cudatwin:0";
    be->run = twin_run;
    return be;
}

#endif
