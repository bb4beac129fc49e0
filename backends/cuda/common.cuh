// The CUDA backend's shared state and helpers: the per-device record, the
// checker every CUDA and cuBLAS call goes through (it names file and line
// in the tl_status, never prints or exits), device scratch from the
// caching allocator, small uploads through a pinned staging ring, the error
// flag, and the entry points of the kernel families (one .cu file each).
#ifndef TL_CUDA_COMMON_CUH
#define TL_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "launch.h"
#include "pool.h"
#include "tl_c.h"

// One open device.  The backend record is the first member, so a record
// and its state are one allocation, freed by close.
typedef struct cu_state {
    tl_backend be;
    char name[24];
    int device;
    cudaStream_t stream; // every kernel, copy and cuBLAS call of the device
    cublasHandle_t blas;
    void *blas_ws; // cuBLAS's workspace, fixed (no allocation inside calls)
    cu_pool pool;
    char *ring; // pinned staging for small uploads, in two halves
    size_t ring_pos;
    int ring_half;
    cudaEvent_t ring_done[2];
    bool ring_busy[2];
    unsigned long long *flag;      // device: the first bad position of a check
    unsigned long long *flag_host; // pinned: where it is read back
} cu_state;

static inline cu_state *cu_of(const tl_backend *be) { return (cu_state *)be->state; }

tl_code cu_fail(cudaError_t e, const char *call, const char *file, int line, tl_status *st);
tl_code cu_fail_blas(cublasStatus_t e, const char *call, const char *file, int line,
                     tl_status *st);

static inline tl_code cu_check(cudaError_t e, const char *call, const char *file, int line,
                               tl_status *st)
{
    return e == cudaSuccess ? TL_OK : cu_fail(e, call, file, line, st);
}

static inline tl_code cu_check_blas(cublasStatus_t e, const char *call, const char *file,
                                    int line, tl_status *st)
{
    return e == CUBLAS_STATUS_SUCCESS ? TL_OK : cu_fail_blas(e, call, file, line, st);
}

// Checked calls: each needs a `tl_status *st` in scope.  CU_TRY and
// BLAS_TRY return the error code from the enclosing function.
#define CU_CHECK(call) cu_check((call), #call, __FILE__, __LINE__, st)
#define CU_TRY(call)                                                                    \
    do {                                                                                \
        if (CU_CHECK(call))                                                             \
            return st->code;                                                            \
    } while (0)
#define BLAS_TRY(call)                                                                  \
    do {                                                                                \
        if (cu_check_blas((call), #call, __FILE__, __LINE__, st))                       \
            return st->code;                                                            \
    } while (0)

// Launches a kernel on the device's stream with CU_THREADS threads per
// block and checks the launch (errors while it runs surface at the next
// sync, with the call that waited).
#define CU_LAUNCH(s, kernel, blocks, ...)                                               \
    do {                                                                                \
        kernel<<<(blocks), CU_THREADS, 0, (s)->stream>>>(__VA_ARGS__);                  \
        if (cu_check(cudaGetLastError(), #kernel "<<<>>>", __FILE__, __LINE__, st))     \
            return st->code;                                                            \
    } while (0)

// A grid-stride loop over n items.
#define CU_FOR(i, n)                                                                    \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);           \
         i += (int64_t)gridDim.x * blockDim.x)

// Device scratch from the pool; released blocks go back to the pool at
// once (work queued later on the stream runs after the work using them).
void *cu_scratch(cu_state *s, size_t bytes, const char *what, tl_status *st);
void cu_scratch_free(cu_state *s, void *p);
// Copies host bytes to the device in stream order; src may be reused as
// soon as this returns (small copies are staged in pinned memory, large
// ones wait for the copy).
tl_code cu_put(cu_state *s, void *dst, const void *src, size_t bytes, tl_status *st);
// Copies device bytes to the host and waits for them (a host sync).
tl_code cu_get(cu_state *s, void *dst, const void *src, size_t bytes, tl_status *st);
// The error flag: reset it before a checking kernel; reading it waits for
// the stream and gives the first bad position of tensor t, or -1, and that
// element's bytes (at most 8) in bits.
tl_code cu_flag_reset(cu_state *s, tl_status *st);
tl_code cu_flag_read(cu_state *s, const tl_tensor *t, int64_t *first, void *bits, tl_status *st);

// Records position i as bad (the smallest one wins).
__device__ static inline void cu_flag_set(unsigned long long *flag, int64_t i)
{
    atomicMin(flag, (unsigned long long)i);
}

typedef const tl_tensor *const *cu_ins;

// The kernel families.
tl_code cu_elementwise(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a,
                       tl_tensor *out, tl_status *st);
tl_code cu_reduce(cu_state *s, tl_opcode op, const tl_tensor *x, const tl_attrs *a,
                  tl_tensor *out, tl_status *st);
tl_code cu_softmax(cu_state *s, tl_opcode op, const tl_tensor *x, const tl_attrs *a,
                   tl_tensor *out, tl_status *st);
tl_code cu_prod_grad(cu_state *s, const tl_tensor *x, const tl_tensor *g, tl_tensor *out,
                     tl_status *st);
tl_code cu_matmul(cu_state *s, const tl_tensor *a, const tl_tensor *b, const tl_attrs *at,
                  tl_tensor *out, tl_status *st);
tl_code cu_map(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a, tl_tensor *out,
               tl_status *st);
tl_code cu_shape_op(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a,
                    tl_tensor *out, tl_status *st);
// The layer ops of nn.md (nn.cu): convolutions, pools, pad.
tl_code cu_nn(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a, tl_tensor *out,
              tl_status *st);

#endif
