// Data movement: reshape-like copies, strided copies (transpose,
// broadcast_to, slice, slice_grad, concat, stack), and the index ops (take,
// gather, one_hot) with their scatters (take_grad, gather_grad).  Elements
// move as raw bits.  Index tensors are checked on the device; reading the
// check back is one host sync per op that takes an index tensor.  Scatters
// sort the cotangent's positions by target (CUB's stable radix sort) and
// let each target sum its own contributions in order: no atomics, the
// CPU's bits (index.h).
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"
#include "errors.h"
#include "shape.h"
#include "typed.cuh"

__global__ void copy_kernel(cu_copy k, int64_t n) { CU_FOR(i, n) cu_copy_element(&k, i); }

__global__ void check_kernel(cu_idx k, unsigned long long *bad)
{
    CU_FOR(j, k.nidx) if (!cu_index_ok(cu_index_raw(&k, j), k.len, k.negative)) cu_flag_set(bad, j);
}

__global__ void take_kernel(cu_idx k, int64_t n) { CU_FOR(e, n) cu_take_element(&k, e); }

__global__ void gather_kernel(cu_idx k, int64_t n) { CU_FOR(e, n) cu_gather_element(&k, e); }

__global__ void one_hot_kernel(cu_idx k, int64_t n) { CU_FOR(e, n) cu_one_hot_element(&k, e); }

__global__ void keys_kernel(cu_idx k, int64_t n, uint64_t *keys, int64_t *pos)
{
    CU_FOR(p, n)
    {
        keys[p] = cu_scatter_key(&k, p);
        pos[p] = p;
    }
}

template <typename T> __global__ void scatter_kernel(cu_idx k, int64_t npos, int64_t n)
{
    CU_FOR(e, n) cu_t<T>::scatter(&k, npos, e);
}

static tl_code copy(cu_state *s, const cu_copy *k, int64_t n, tl_status *st)
{
    if (n)
        CU_LAUNCH(s, copy_kernel, cu_blocks(n), *k, n);
    return TL_OK;
}

// take_grad, gather_grad: keys, a stable sort of the positions by key,
// then every output element sums its run.
static tl_code scatter(cu_state *s, cu_idx *k, tl_tensor *out, tl_status *st)
{
    int64_t npos = cu_scatter_positions(k), n = out->numel;
    if (npos == 0 || n == 0)
        return n ? CU_CHECK(cudaMemsetAsync(out->data, 0, tl_tensor_bytes(out), s->stream)) : TL_OK;
    int end_bit = 64 - __builtin_clzll((unsigned long long)cu_scatter_nokey(k));
    size_t temp = 0;
    CU_TRY(cub::DeviceRadixSort::SortPairs(NULL, temp, (const uint64_t *)NULL, (uint64_t *)NULL,
                                           (const int64_t *)NULL, (int64_t *)NULL, npos, 0,
                                           end_bit, s->stream));
    size_t arrays = sizeof(uint64_t) * 4 * (size_t)npos;
    char *buf = (char *)cu_scratch(s, arrays + temp, "scatter keys", st);
    if (!buf)
        return st->code;
    uint64_t *keys = (uint64_t *)buf, *sorted = keys + npos;
    int64_t *pos = (int64_t *)(sorted + npos), *order = pos + npos;
    tl_code rc = TL_OK;
    keys_kernel<<<cu_blocks(npos), CU_THREADS, 0, s->stream>>>(*k, npos, keys, pos);
    if (!(rc = CU_CHECK(cudaGetLastError())))
        rc = CU_CHECK(cub::DeviceRadixSort::SortPairs(buf + arrays, temp, keys, sorted, pos, order,
                                                      npos, 0, end_bit, s->stream));
    k->keys = sorted;
    k->order = order;
    if (!rc && out->dtype == TL_F32)
        scatter_kernel<float><<<cu_blocks(n), CU_THREADS, 0, s->stream>>>(*k, npos, n);
    else if (!rc)
        scatter_kernel<double><<<cu_blocks(n), CU_THREADS, 0, s->stream>>>(*k, npos, n);
    if (!rc)
        rc = CU_CHECK(cudaGetLastError());
    cu_scratch_free(s, buf);
    return rc;
}

static tl_code index_kernels(cu_state *s, tl_opcode op, cu_idx *k, tl_tensor *out, tl_status *st)
{
    int64_t n = out->numel;
    switch (op) {
    case TL_OP_ONE_HOT:
        if (n)
            CU_LAUNCH(s, one_hot_kernel, cu_blocks(n), *k, n);
        return TL_OK;
    case TL_OP_TAKE:
        if (n)
            CU_LAUNCH(s, take_kernel, cu_blocks(n), *k, n);
        return TL_OK;
    case TL_OP_GATHER:
        if (n)
            CU_LAUNCH(s, gather_kernel, cu_blocks(n), *k, n);
        return TL_OK;
    default: return scatter(s, k, out, st);
    }
}

// take, gather, one_hot and the scatters.  take's "indices" attribute was
// checked by the shape rules and goes up as i64; an index tensor is
// checked here, even for an empty result.
static tl_code index_op(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a,
                        tl_tensor *out, tl_status *st)
{
    int at = tl_ops[op].index_arg;
    const tl_tensor *x = in[0], *idx = n > at ? in[at] : NULL;
    void *list = NULL;
    if (!idx && a->nindices) {
        size_t bytes = sizeof(int64_t) * (size_t)a->nindices;
        if (!(list = cu_scratch(s, bytes, "take's indices", st)) ||
            cu_put(s, list, a->indices, bytes, st)) {
            cu_scratch_free(s, list);
            return st->code;
        }
    }
    cu_idx k;
    cu_idx_prepare(&k, op, x, idx, list, a, out);
    tl_code rc = idx ? cu_flag_reset(s, st) : TL_OK;
    if (!rc && idx && idx->numel) {
        check_kernel<<<cu_blocks(idx->numel), CU_THREADS, 0, s->stream>>>(k, s->flag);
        rc = CU_CHECK(cudaGetLastError());
    }
    if (!rc)
        rc = index_kernels(s, op, &k, out, st);
    cu_scratch_free(s, list);
    if (rc || !idx)
        return rc;
    int64_t bad;
    unsigned char v[8];
    if (cu_flag_read(s, idx, &bad, v, st))
        return st->code;
    if (bad < 0)
        return TL_OK;
    int32_t v32;
    int64_t value;
    memcpy(&v32, v, sizeof v32);
    memcpy(&value, v, sizeof value);
    if (idx->dtype == TL_I32)
        value = v32;
    const tl_tensor *full = op == TL_OP_TAKE_GRAD || op == TL_OP_GATHER_GRAD ? out : x;
    return cu_index_error(st, op, a, full, idx, bad, value);
}

tl_code cu_shape_op(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a,
                    tl_tensor *out, tl_status *st)
{
    size_t es = tl_dtype_size(out->dtype);
    const tl_tensor *x = in[0];
    cu_copy k;
    if (tl_ops[op].index_arg >= 0)
        return index_op(s, op, n, in, a, out, st);
    if (out->numel == 0)
        return TL_OK;
    switch (op) {
    case TL_OP_TRANSPOSE:
        cu_copy_transpose(&k, x, a, out);
        return copy(s, &k, out->numel, st);
    case TL_OP_BROADCAST_TO:
        cu_copy_broadcast(&k, x, out);
        return copy(s, &k, out->numel, st);
    case TL_OP_SLICE:
        cu_copy_slice(&k, a, x->data, x->shape, out->data, x->ndim, out->shape, true, es);
        return copy(s, &k, out->numel, st);
    case TL_OP_SLICE_GRAD:
        CU_TRY(cudaMemsetAsync(out->data, 0, tl_tensor_bytes(out), s->stream));
        cu_copy_slice(&k, a, out->data, out->shape, x->data, x->ndim, x->shape, false, es);
        return copy(s, &k, x->numel, st);
    case TL_OP_CONCAT:
    case TL_OP_STACK:
        for (int64_t i = 0, at = 0; i < n; i++) {
            cu_copy_concat(&k, in[i], a, out, at, op == TL_OP_STACK);
            if (copy(s, &k, in[i]->numel, st))
                return st->code;
            at += op == TL_OP_STACK ? 1 : in[i]->shape[a->axis];
        }
        return TL_OK;
    default: // reshape, expand_dims, squeeze: the same bits, a new shape
        return CU_CHECK(cudaMemcpyAsync(out->data, x->data, tl_tensor_bytes(out),
                                        cudaMemcpyDeviceToDevice, s->stream));
    }
}
