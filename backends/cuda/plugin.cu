// The CUDA backend as a tl plugin (backends/plugin.h): device discovery,
// the backend record (memory, copies, sync, supports, run) and its state.
// Only tl_cuda_plugin_v1 is exported.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "support.h"

extern "C" {
#include "backends/plugin.h"
}

#define RING_BYTES ((size_t)4 << 20) // two halves
#define RING_MAX ((size_t)256 << 10) // larger uploads go directly
#define BLAS_WS_BYTES ((size_t)32 << 20)

// ---------- errors ----------

tl_code cu_fail(cudaError_t e, const char *call, const char *file, int line, tl_status *st)
{
    cudaGetLastError(); // a failed call also leaves the error to be read: clear it
    if (e == cudaErrorMemoryAllocation)
        return tl_fail(st, TL_ERUNTIME, "out of device memory (%s:%d: %.160s)", file, line, call);
    return tl_fail(st, TL_ERUNTIME, "CUDA error at %s:%d: %.160s: %s (%s)", file, line, call,
                   cudaGetErrorString(e), cudaGetErrorName(e));
}

tl_code cu_fail_blas(cublasStatus_t e, const char *call, const char *file, int line,
                     tl_status *st)
{
    if (e == CUBLAS_STATUS_ALLOC_FAILED)
        return tl_fail(st, TL_ERUNTIME, "out of device memory (%s:%d: %.160s)", file, line, call);
    return tl_fail(st, TL_ERUNTIME, "cuBLAS error at %s:%d: %.160s: %s", file, line, call,
                   cublasGetStatusString(e));
}

// ---------- memory ----------

// The pool's raw allocator: a failure is a NULL (the pool then gives its
// cache back and tries once more; cu_scratch reports it).
static void *raw_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void raw_free(void *ctx, void *p)
{
    (void)ctx;
    cudaFree(p); // waits for the device: a cached block may still be read by queued work
}

void *cu_scratch(cu_state *s, size_t bytes, const char *what, tl_status *st)
{
    void *p = cu_pool_alloc(&s->pool, bytes ? bytes : 1);
    if (!p) {
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        cudaGetLastError();
        tl_fail(st, TL_ERUNTIME, "out of device memory allocating %s (%zu bytes; %zu MiB free of %zu MiB)",
                what, bytes, free_b >> 20, total >> 20);
    }
    return p;
}

void cu_scratch_free(cu_state *s, void *p) { cu_pool_release(&s->pool, p); }

tl_code cu_put(cu_state *s, void *dst, const void *src, size_t bytes, tl_status *st)
{
    if (!bytes)
        return TL_OK;
    if (bytes > RING_MAX) { // a large upload (graph inputs): the copy is waited for
        CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream));
        return CU_CHECK(cudaStreamSynchronize(s->stream));
    }
    size_t half = RING_BYTES / 2, end = (size_t)(s->ring_half + 1) * half;
    if (s->ring_pos + bytes > end) { // the other half, once its copies are done
        CU_TRY(cudaEventRecord(s->ring_done[s->ring_half], s->stream));
        s->ring_busy[s->ring_half] = true;
        s->ring_half ^= 1;
        s->ring_pos = (size_t)s->ring_half * half;
        if (s->ring_busy[s->ring_half])
            CU_TRY(cudaEventSynchronize(s->ring_done[s->ring_half]));
        s->ring_busy[s->ring_half] = false;
    }
    char *stage = s->ring + s->ring_pos;
    memcpy(stage, src, bytes);
    s->ring_pos += (bytes + 255) & ~(size_t)255;
    return CU_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, s->stream));
}

tl_code cu_get(cu_state *s, void *dst, const void *src, size_t bytes, tl_status *st)
{
    if (bytes)
        CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s->stream));
    return CU_CHECK(cudaStreamSynchronize(s->stream));
}

tl_code cu_flag_reset(cu_state *s, tl_status *st)
{
    return CU_CHECK(cudaMemsetAsync(s->flag, 0xFF, sizeof *s->flag, s->stream));
}

tl_code cu_flag_read(cu_state *s, const tl_tensor *t, int64_t *first, void *bits, tl_status *st)
{
    if (cu_get(s, s->flag_host, s->flag, sizeof *s->flag, st))
        return st->code;
    *first = *s->flag_host == ~0ull ? -1 : (int64_t)*s->flag_host;
    size_t es = tl_dtype_size(t->dtype);
    if (*first < 0)
        return TL_OK;
    return cu_get(s, bits, (const char *)t->data + (size_t)*first * es, es, st);
}

// ---------- the backend record ----------

static void *cu_alloc(const tl_backend *be, size_t bytes, tl_status *st)
{
    cu_state *s = cu_of(be);
    if (CU_CHECK(cudaSetDevice(s->device)))
        return NULL;
    return cu_scratch(s, bytes, "a tensor", st);
}

static void cu_release(const tl_backend *be, void *p) { cu_scratch_free(cu_of(be), p); }

static tl_code cu_upload(const tl_backend *be, void *dst, const void *src, size_t bytes,
                         tl_status *st)
{
    cu_state *s = cu_of(be);
    CU_TRY(cudaSetDevice(s->device));
    return cu_put(s, dst, src, bytes, st);
}

static tl_code cu_download(const tl_backend *be, void *dst, const void *src, size_t bytes,
                           tl_status *st)
{
    cu_state *s = cu_of(be);
    CU_TRY(cudaSetDevice(s->device));
    return cu_get(s, dst, src, bytes, st);
}

static tl_code cu_sync(const tl_backend *be, tl_status *st)
{
    cu_state *s = cu_of(be);
    CU_TRY(cudaSetDevice(s->device));
    return CU_CHECK(cudaStreamSynchronize(s->stream));
}

// Every op of the table but the control flow that tl runs op by op (if,
// iterate), in every dtype the shape rules let through.
static bool cu_supports(const tl_backend *be, tl_opcode op, int n, const tl_dtype *in,
                        tl_dtype out, const char **why)
{
    (void)be, (void)n, (void)in, (void)out;
    if (op >= TL_OP_COUNT || (tl_ops[op].kind == TL_KIND_FLOW && op != TL_OP_MAP)) {
        if (why)
            *why = "not a kernel";
        return false;
    }
    if (!cu_has_kernel(op)) {
        if (why)
            *why = "no CUDA kernel yet";
        return false;
    }
    return true;
}

static tl_code cu_run(const tl_backend *be, tl_opcode op, int n, const tl_tensor *const *in,
                      const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    cu_state *s = cu_of(be);
    CU_TRY(cudaSetDevice(s->device));
    switch (tl_ops[op].kind) {
    case TL_KIND_BIN:
    case TL_KIND_CMP:
    case TL_KIND_UN: return cu_elementwise(s, op, n, in, a, out, st);
    case TL_KIND_RED: return out->numel ? cu_reduce(s, op, in[0], a, out, st) : TL_OK;
    default: break;
    }
    if (cu_is_nn_op(op))
        return cu_nn(s, op, n, in, a, out, st);
    switch (op) {
    case TL_OP_CAST:
    case TL_OP_WHERE:
    case TL_OP_GELU_GRAD:
    case TL_OP_RELU_GRAD: return cu_elementwise(s, op, n, in, a, out, st);
    case TL_OP_SOFTMAX:
    case TL_OP_LOG_SOFTMAX: return out->numel ? cu_softmax(s, op, in[0], a, out, st) : TL_OK;
    case TL_OP_MATMUL: return cu_matmul(s, in[0], in[1], a, out, st);
    case TL_OP_MAP:
    case TL_OP_MAP_GRAD: return cu_map(s, op, n, in, a, out, st);
    case TL_OP_PROD_GRAD: return out->numel ? cu_prod_grad(s, in[0], in[1], out, st) : TL_OK;
    default: return cu_shape_op(s, op, n, in, a, out, st);
    }
}

// Releases everything; close returns nothing, so errors here (a device
// already lost) have no one to go to and are cleared, not checked.
static void cu_close(tl_backend *be)
{
    cu_state *s = cu_of(be);
    cudaSetDevice(s->device);
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    cu_pool_destroy(&s->pool);
    if (s->blas)
        cublasDestroy(s->blas);
    cudaFree(s->blas_ws);
    cudaFree(s->flag);
    for (int h = 0; h < 2; h++)
        if (s->ring_done[h])
            cudaEventDestroy(s->ring_done[h]);
    cudaFreeHost(s->ring);
    cudaFreeHost(s->flag_host);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    cudaGetLastError();
    free(s);
}

// ---------- the plugin ----------

// Why no device can be used, in a few words for `tl devices` and warnings.
static void no_device_why(cudaError_t e, char *why, size_t len)
{
    int drv = 0;
    if (e == cudaSuccess || e == cudaErrorNoDevice) {
        snprintf(why, len, "no CUDA device");
    } else if (e == cudaErrorInsufficientDriver) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        cudaDriverGetVersion(&drv);
        if (!h)
            snprintf(why, len, "no NVIDIA driver (libcuda.so.1 cannot be loaded)");
        else
            snprintf(why, len, "the NVIDIA driver supports CUDA %d.%d; the plugin needs %d.%d",
                     drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
        if (h)
            dlclose(h);
    } else {
        snprintf(why, len, "CUDA: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    }
    cudaGetLastError();
}

static int cu_count(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return n;
    no_device_why(e, why, len);
    return 0;
}

static tl_code cu_describe(int index, tl_plugin_device *d, tl_status *st)
{
    cudaDeviceProp p;
    size_t free_b = 0, total = 0;
    CU_TRY(cudaGetDeviceProperties(&p, index));
    snprintf(d->model, sizeof d->model, "%.127s", p.name);
    d->memory = (int64_t)p.totalGlobalMem;
    d->cc_major = p.major;
    d->cc_minor = p.minor;
    CU_TRY(cudaSetDevice(index));
    CU_TRY(cudaMemGetInfo(&free_b, &total));
    d->free = (int64_t)free_b;
    return TL_OK;
}

static tl_code start(cu_state *s, tl_status *st)
{
    CU_TRY(cudaSetDevice(s->device));
    CU_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    // The first device allocation: a device that cannot give these few
    // MiB is refused at once rather than failing at the first op.
    if (cudaMalloc(&s->blas_ws, BLAS_WS_BYTES) != cudaSuccess) {
        size_t free_b = 0, total = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total);
        cudaGetLastError();
        return tl_fail(st, TL_ERUNTIME, "out of device memory at start (%zu MiB free of %zu MiB)",
                       free_b >> 20, total >> 20);
    }
    CU_TRY(cudaMalloc(&s->flag, sizeof *s->flag));
    CU_TRY(cudaHostAlloc((void **)&s->ring, RING_BYTES, cudaHostAllocDefault));
    CU_TRY(cudaHostAlloc((void **)&s->flag_host, sizeof *s->flag_host, cudaHostAllocDefault));
    for (int h = 0; h < 2; h++)
        CU_TRY(cudaEventCreateWithFlags(&s->ring_done[h], cudaEventDisableTiming));
    // cuBLAS: on our stream, with a fixed workspace; pedantic math (no
    // TF32, no reduced-precision reductions) and no atomics, so that a
    // product has the same bits on every run.
    BLAS_TRY(cublasCreate(&s->blas));
    BLAS_TRY(cublasSetStream(s->blas, s->stream));
    BLAS_TRY(cublasSetWorkspace(s->blas, s->blas_ws, BLAS_WS_BYTES));
    BLAS_TRY(cublasSetMathMode(s->blas, CUBLAS_PEDANTIC_MATH));
    BLAS_TRY(cublasSetAtomicsMode(s->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
    BLAS_TRY(cublasSetPointerMode(s->blas, CUBLAS_POINTER_MODE_HOST));
    return TL_OK;
}

static tl_backend *cu_open(int index, tl_status *st)
{
    cu_state *s = (cu_state *)calloc(1, sizeof *s);
    if (!s)
        return tl_fail(st, TL_ERUNTIME, "out of memory opening cuda:%d", index), (tl_backend *)NULL;
    s->device = index;
    cu_pool_init(&s->pool, raw_alloc, raw_free, NULL);
    snprintf(s->name, sizeof s->name, "cuda:%d", index);
    s->be.abi = TL_BACKEND_ABI;
    s->be.name = s->name;
    s->be.kind = TL_DEV_CUDA;
    s->be.index = index;
    s->be.state = s;
    s->be.supports = cu_supports;
    s->be.run = cu_run;
    s->be.alloc = cu_alloc;
    s->be.release = cu_release;
    s->be.upload = cu_upload;
    s->be.download = cu_download;
    s->be.sync = cu_sync;
    s->be.close = cu_close;
    if (start(s, st)) {
        cu_close(&s->be);
        return NULL;
    }
    return &s->be;
}

static const tl_plugin plugin = {TL_BACKEND_ABI, cu_count, cu_describe, cu_open};

extern "C" __attribute__((visibility("default"))) const tl_plugin *tl_cuda_plugin_v1(void)
{
    return &plugin;
}
