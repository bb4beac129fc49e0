// The layer ops of nn.md: convolutions (im2col and col2im around cuBLAS
// gemms), pools and their gradients (max_pool_pick too), batch_norm, layer_norm, group_norm
// and layer_norm_grad, pad and pad_grad, resize and resize_grad,
// scatter_add, argmax, argmin, cumsum, random_uniform, random_normal and
// dropout.  nn.h holds what each thread computes and the drivers that
// order the kernels and gemms; here are the kernels and the device those
// drivers run on.  The handle
// runs cuBLAS in pedantic math without atomics (plugin.cu) and no kernel
// here uses atomics, so every result has the same bits on every run.
#include <utility>

#include "common.cuh"
#include "nn.h"

template <typename T> struct nn_t;
template <> struct nn_t<float> {
    __device__ static void element(const cu_nnk *k, int op, int64_t e) { cu_nn_element_f(k, op, e); }
};
template <> struct nn_t<double> {
    __device__ static void element(const cu_nnk *k, int op, int64_t e) { cu_nn_element_d(k, op, e); }
};

// One thread per element; the kernel is a template constant.
template <typename T, int OP> __global__ void nn_kernel(cu_nnk k, int64_t n)
{
    CU_FOR(e, n) nn_t<T>::element(&k, OP, e);
}

// The launch of kernel OP, one for every id of the enum (nn.h): a table
// made by the compiler, so no kernel can be left out of the dispatch.
typedef tl_code (*nn_launcher)(cu_state *, const cu_nnk *, int64_t, tl_status *);

template <typename T, int OP>
static tl_code launch_one(cu_state *s, const cu_nnk *k, int64_t n, tl_status *st)
{
    CU_LAUNCH(s, (nn_kernel<T, OP>), cu_blocks(n), *k, n);
    return TL_OK;
}

template <typename T, int... OPS>
static tl_code launch_typed(cu_state *s, const cu_nnk *k, int64_t n, tl_status *st,
                            std::integer_sequence<int, OPS...>)
{
    static const nn_launcher table[] = {&launch_one<T, OPS>...};
    if (k->op < 0 || k->op >= CU_NN_COUNT)
        return tl_fail(st, TL_ERUNTIME, "internal: layer kernel %d", k->op);
    return table[k->op](s, k, n, st);
}

static tl_code dev_launch(void *ctx, tl_dtype dt, const cu_nnk *k, int64_t n, tl_status *st)
{
    cu_state *s = (cu_state *)ctx;
    if (n == 0)
        return TL_OK;
    if (k->op == CU_NN_PAD) { // raw bits, any dtype
        CU_LAUNCH(s, (nn_kernel<float, CU_NN_PAD>), cu_blocks(n), *k, n);
        return TL_OK;
    }
    auto ops = std::make_integer_sequence<int, CU_NN_COUNT>();
    return dt == TL_F32 ? launch_typed<float>(s, k, n, st, ops) : launch_typed<double>(s, k, n, st, ops);
}

static tl_code dev_gemm(void *ctx, tl_dtype dt, const cu_gemm *g, tl_status *st)
{
    cu_state *s = (cu_state *)ctx;
    cublasOperation_t ta = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int m = (int)g->m, n = (int)g->n, k = (int)g->k;
    int lda = (int)g->lda, ldb = (int)g->ldb, ldc = (int)g->ldc, count = (int)g->count;
    if (dt == TL_F32) {
        const float one = 1, beta = g->accumulate ? 1.0f : 0.0f;
        BLAS_TRY(cublasSgemmStridedBatched(s->blas, ta, tb, m, n, k, &one, (const float *)g->a, lda,
                                           g->sa, (const float *)g->b, ldb, g->sb, &beta,
                                           (float *)g->c, ldc, g->sc, count));
    } else {
        const double one = 1, beta = g->accumulate ? 1.0 : 0.0;
        BLAS_TRY(cublasDgemmStridedBatched(s->blas, ta, tb, m, n, k, &one, (const double *)g->a, lda,
                                           g->sa, (const double *)g->b, ldb, g->sb, &beta,
                                           (double *)g->c, ldc, g->sc, count));
    }
    return TL_OK;
}

static void *dev_alloc(void *ctx, size_t bytes, tl_status *st)
{
    return cu_scratch((cu_state *)ctx, bytes, "layer-op scratch", st);
}

static void dev_release(void *ctx, void *p) { cu_scratch_free((cu_state *)ctx, p); }

static tl_code dev_zero(void *ctx, void *p, size_t bytes, tl_status *st)
{
    cu_state *s = (cu_state *)ctx;
    return bytes ? CU_CHECK(cudaMemsetAsync(p, 0, bytes, s->stream)) : TL_OK;
}

static tl_code dev_copy(void *ctx, void *dst, const void *src, size_t bytes, tl_status *st)
{
    cu_state *s = (cu_state *)ctx;
    return bytes ? CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream))
                 : TL_OK;
}

static tl_code dev_put(void *ctx, void *dst, const void *src, size_t bytes, tl_status *st)
{
    return cu_put((cu_state *)ctx, dst, src, bytes, st);
}

__global__ void check_kernel(cu_nnk k, int64_t n, unsigned long long *bad)
{
    CU_FOR(j, n) if (cu_line_bad(&k, j)) cu_flag_set(bad, j);
}

// The first bad index through the device flag: one host sync.
static tl_code dev_first_bad(void *ctx, const cu_nnk *k, const tl_tensor *idx, int64_t *bad,
                             int64_t *value, tl_status *st)
{
    cu_state *s = (cu_state *)ctx;
    unsigned char v[8];
    if (cu_flag_reset(s, st))
        return st->code;
    CU_LAUNCH(s, check_kernel, cu_blocks(idx->numel), *k, idx->numel, s->flag);
    if (cu_flag_read(s, idx, bad, v, st))
        return st->code;
    int32_t v32;
    memcpy(&v32, v, sizeof v32);
    memcpy(value, v, sizeof *value);
    if (idx->dtype == TL_I32)
        *value = v32;
    return TL_OK;
}

tl_code cu_nn(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a, tl_tensor *out,
              tl_status *st)
{
    cu_nn_dev dev = {s,        dev_launch, dev_gemm, dev_alloc,     dev_release,
                     dev_zero, dev_copy,   dev_put,  dev_first_bad, CU_NN_SCRATCH};
    return cu_nn_run(&dev, op, n, in, a, out, st);
}
