// Elementwise kernels: binary and comparison ops with NumPy broadcasting,
// gelu_grad, where, unary ops, clamp and cast; the integer arithmetic.  One thread per output
// element (ew.h computes it); the op is a template constant, so each
// kernel is the op's formula from scalar.h and nothing else.
#include "common.cuh"
#include "errors.h"
#include "typed.cuh"

template <typename T, int OP> __global__ void binary_kernel(cu_ew k)
{
    CU_FOR(i, k.n) cu_t<T>::binary(&k, OP, i);
}

template <typename T, int OP> __global__ void unary_kernel(cu_ew k)
{
    CU_FOR(i, k.n) cu_t<T>::unary(&k, OP, i);
}

template <typename T> __global__ void where_kernel(cu_ew k) { CU_FOR(i, k.n) cu_t<T>::where(&k, i); }

template <typename T> __global__ void clamp_kernel(cu_ew k) { CU_FOR(i, k.n) cu_t<T>::clamp(&k, i); }

template <typename T, int OP> __global__ void ibinary_kernel(cu_ew k)
{
    CU_FOR(i, k.n) cu_t<T>::binary(&k, OP, i);
}

template <typename T, int OP> __global__ void iunary_kernel(cu_ew k)
{
    CU_FOR(i, k.n) cu_t<T>::unary(&k, OP, i);
}

// the first 0 of an integer divisor (one thread per divisor element)
template <typename T> __global__ void zero_kernel(cu_ew k, unsigned long long *bad)
{
    CU_FOR(i, k.nb) if (cu_t<T>::zero(&k, i)) cu_flag_set(bad, i);
}

__global__ void cast_kernel(cu_ew k, unsigned long long *bad)
{
    CU_FOR(i, k.n) if (!cu_ew_cast(&k, i)) cu_flag_set(bad, i);
}

#define BIN_LAUNCH(E, EXPR)                                                             \
    case TL_OP_##E: CU_LAUNCH(s, (binary_kernel<T, TL_OP_##E>), b, *k); break;
#define UN_LAUNCH(E, EXPR)                                                              \
    case TL_OP_##E: CU_LAUNCH(s, (unary_kernel<T, TL_OP_##E>), b, *k); break;

template <typename T> static tl_code launch(cu_state *s, const cu_ew *k, tl_status *st)
{
    unsigned b = cu_blocks(k->n);
    switch (k->op) {
        TL_BINARY_EXPRS(BIN_LAUNCH)
        TL_UNARY_EXPRS(UN_LAUNCH)
    case TL_OP_GELU_GRAD: CU_LAUNCH(s, (binary_kernel<T, TL_OP_GELU_GRAD>), b, *k); break;
    case TL_OP_RELU_GRAD: CU_LAUNCH(s, (binary_kernel<T, TL_OP_RELU_GRAD>), b, *k); break;
    case TL_OP_WHERE: CU_LAUNCH(s, where_kernel<T>, b, *k); break;
    case TL_OP_CLAMP: CU_LAUNCH(s, clamp_kernel<T>, b, *k); break;
    default: return tl_fail(st, TL_ERUNTIME, "internal: %s is not elementwise", tl_ops[k->op].name);
    }
    return TL_OK;
}

#define IBIN_LAUNCH(E, EXPR)                                                            \
    case TL_OP_##E: CU_LAUNCH(s, (ibinary_kernel<T, TL_OP_##E>), b, *k); break;
#define IUN_LAUNCH(E, EXPR)                                                             \
    case TL_OP_##E: CU_LAUNCH(s, (iunary_kernel<T, TL_OP_##E>), b, *k); break;

// The integer arithmetic: a zero divisor of div, mod or fmod is an error,
// which needs the flag read back (a host sync) before the op runs.
template <typename T> static tl_code launch_int(cu_state *s, const cu_ew *k, const tl_tensor *divisor,
                                                tl_status *st)
{
    if (TL_INT_DIVIDES(k->op)) {
        int64_t bad;
        unsigned char v[8];
        if (cu_flag_reset(s, st))
            return st->code;
        CU_LAUNCH(s, zero_kernel<T>, cu_blocks(k->nb), *k, s->flag);
        if (cu_flag_read(s, divisor, &bad, v, st))
            return st->code;
        if (bad >= 0)
            return cu_int_divisor_error(st, (tl_opcode)k->op, k->nb, bad);
    }
    unsigned b = cu_blocks(k->n);
    switch (k->op) {
        TL_INT_BINARY_EXPRS(IBIN_LAUNCH)
        TL_INT_UNARY_EXPRS(IUN_LAUNCH)
    default: return tl_fail(st, TL_ERUNTIME, "internal: %s has no integer kernel", tl_ops[k->op].name);
    }
    return TL_OK;
}

// cast: into an integer dtype the first element out of range is an error,
// which needs its flag read back (a host sync).
static tl_code cast(cu_state *s, const cu_ew *k, const tl_tensor *x, tl_tensor *out,
                    tl_status *st)
{
    if (x->dtype == out->dtype)
        return CU_CHECK(cudaMemcpyAsync(out->data, x->data, tl_tensor_bytes(x),
                                        cudaMemcpyDeviceToDevice, s->stream));
    bool checked = out->dtype == TL_I32 || (out->dtype == TL_I64 && !tl_dtype_is_int(x->dtype));
    if (checked && cu_flag_reset(s, st))
        return st->code;
    CU_LAUNCH(s, cast_kernel, cu_blocks(k->n), *k, s->flag);
    int64_t bad;
    unsigned char v[8];
    if (!checked)
        return TL_OK;
    if (cu_flag_read(s, x, &bad, v, st))
        return st->code;
    return bad < 0 ? TL_OK : cu_cast_error(st, x->dtype, v, bad, out->dtype);
}

tl_code cu_elementwise(cu_state *s, tl_opcode op, int n, cu_ins in, const tl_attrs *a,
                       tl_tensor *out, tl_status *st)
{
    if (out->numel == 0)
        return TL_OK;
    cu_ew k;
    cu_ew_prepare(&k, op, n, in, a, out);
    if (op == TL_OP_CAST)
        return cast(s, &k, in[0], out, st);
    if (op == TL_OP_DETACH)
        return CU_CHECK(cudaMemcpyAsync(out->data, in[0]->data, tl_tensor_bytes(out),
                                        cudaMemcpyDeviceToDevice, s->stream));
    if (tl_dtype_is_int(out->dtype))
        return CU_BY_INT_DTYPE(out->dtype, launch_int, s, &k, n > 1 ? in[1] : NULL, st);
    return CU_BY_DTYPE(out->dtype, launch, s, &k, st);
}
