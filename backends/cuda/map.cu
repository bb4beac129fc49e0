// map and map_grad: one kernel per call, in which every thread runs the
// compiled scalar program for its own elements and takes its own branches
// (mexec.h).  The program and the inputs' addresses and strides go up in
// one small buffer through the staging ring (no sync); the threads'
// registers live in device scratch (launch.h: cu_map_threads).
#include <stdlib.h>

#include "common.cuh"
#include "typed.cuh"

template <typename T> __global__ void map_kernel(cu_mapk k)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < k.nthreads)
        cu_t<T>::map_thread(&k, t);
}

tl_code cu_map(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a, tl_tensor *out,
               tl_status *st)
{
    bool grad = op == TL_OP_MAP_GRAD;
    cu_map_layout l = cu_map_layout_of(a->prog, grad ? n - 1 : n);
    void *blob = malloc(l.total), *dev = cu_scratch(s, l.total, "a map program", st);
    if (!blob || !dev) {
        free(blob);
        cu_scratch_free(s, dev);
        return dev ? tl_fail(st, TL_ERUNTIME, "out of memory packing a map program") : st->code;
    }
    cu_mapk k;
    cu_map_pack(&k, blob, dev, op, n, in, a, out);
    tl_code rc = TL_OK;
    if (k.total == 0 || (grad && k.k == 0)) {
        free(blob);
        cu_scratch_free(s, dev);
        return TL_OK;
    }
    size_t es = tl_dtype_size(out->dtype);
    int64_t per = cu_map_thread_bytes(&k, es);
    k.nthreads = cu_map_threads(k.total, per);
    k.scratch = cu_scratch(s, (size_t)(k.nthreads * per), "map registers", st);
    rc = k.scratch ? cu_put(s, dev, blob, l.total, st) : st->code;
    free(blob);
    if (!rc) {
        unsigned blocks = (unsigned)(k.nthreads / CU_THREADS);
        if (out->dtype == TL_F32)
            map_kernel<float><<<blocks, CU_THREADS, 0, s->stream>>>(k);
        else
            map_kernel<double><<<blocks, CU_THREADS, 0, s->stream>>>(k);
        rc = CU_CHECK(cudaGetLastError());
    }
    cu_scratch_free(s, k.scratch);
    cu_scratch_free(s, dev);
    return rc;
}
