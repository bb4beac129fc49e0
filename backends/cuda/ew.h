/* Elementwise kernels, device-neutral half: what one thread computes for
 * one output element.  The math is scalar.h's, instantiated for float and
 * double; the CUDA kernels (elementwise.cu) call these per element with
 * the op as a compile-time constant, the host tests call them in a loop.
 * In C include after <tgmath.h>. */
#ifndef TL_CUDA_EW_H
#define TL_CUDA_EW_H

#include <stdio.h>

#include "plan.h"
#include "backends/cpu/scalar.h"

/* One elementwise call: binary and comparison ops, gelu_grad (x, g),
 * where (c, a, b), unary ops, clamp and cast; the integer arithmetic
 * over i32 and i64 (nb: the divisor's elements, for div, mod, fmod). */
typedef struct cu_ew {
    int op, approx; /* tl_opcode; gelu's attribute */
    cpu_bcast plan; /* output element -> operand offsets */
    int64_t n;      /* output elements */
    int64_t nb;     /* the second operand's elements */
    const void *x[3];
    void *y;
    tl_dtype src, dst;   /* cast */
    bool has_lo, has_hi; /* clamp */
    double lo, hi;
} cu_ew;

/* The call's operands and plan (host side; pointers are the tensors'). */
static inline void cu_ew_prepare(cu_ew *k, tl_opcode op, int n, const tl_tensor *const *in,
                                 const tl_attrs *a, tl_tensor *out)
{
    memset(k, 0, sizeof *k);
    k->op = (int)op;
    k->approx = a->approximate;
    k->n = out->numel;
    k->y = out->data;
    k->src = in[0]->dtype;
    k->dst = out->dtype;
    k->has_lo = a->has_min;
    k->has_hi = a->has_max;
    k->lo = a->min;
    k->hi = a->max;
    for (int i = 0; i < n && i < 3; i++)
        k->x[i] = in[i]->data;
    k->nb = n > 1 ? in[1]->numel : 0;
    cu_plan_broadcast(&k->plan, out, n, in);
}

/* The scalar ops (scalar.h), by opcode: a constant opcode folds the
 * switch away. */
#define CU_UN_CASE(E, EXPR)                                                        \
    case TL_OP_##E: return (EXPR);
#define CU_BIN_CASE(E, EXPR)                                                       \
    case TL_OP_##E: return (EXPR);

#define CU_DEFINE_EW(T, SUF)                                                       \
    TL_HD static inline T cu_unary_##SUF(int op, T v, int approx)                  \
    {                                                                              \
        (void)approx;                                                              \
        switch (op) {                                                              \
            TL_UNARY_EXPRS(CU_UN_CASE)                                             \
        default: return v;                                                         \
        }                                                                          \
    }                                                                              \
    TL_HD static inline T cu_binary_##SUF(int op, T a, T b, int approx)            \
    {                                                                              \
        (void)approx;                                                              \
        switch (op) {                                                              \
            TL_BINARY_EXPRS(CU_BIN_CASE)                                           \
        case TL_OP_GELU_GRAD: return b * TL_GELU_GRAD(a, approx); /* (x, g) */     \
        case TL_OP_RELU_GRAD: return a > (T)0 ? b : (T)0;         /* (x, g) */     \
        default: return a;                                                         \
        }                                                                          \
    }                                                                              \
    TL_HD static inline void cu_ew_binary_##SUF(const cu_ew *k, int op, int64_t i) \
    {                                                                              \
        int64_t off[3];                                                            \
        cu_plan_offsets(&k->plan, i, off);                                         \
        const T *a = (const T *)k->x[0], *b = (const T *)k->x[1];                  \
        ((T *)k->y)[i] = cu_binary_##SUF(op, a[off[0]], b[off[1]], k->approx);     \
    }                                                                              \
    TL_HD static inline void cu_ew_unary_##SUF(const cu_ew *k, int op, int64_t i)  \
    {                                                                              \
        ((T *)k->y)[i] = cu_unary_##SUF(op, ((const T *)k->x[0])[i], k->approx);   \
    }                                                                              \
    TL_HD static inline void cu_ew_where_##SUF(const cu_ew *k, int64_t i)          \
    {                                                                              \
        int64_t off[3];                                                            \
        cu_plan_offsets(&k->plan, i, off);                                         \
        const T *c = (const T *)k->x[0], *a = (const T *)k->x[1];                  \
        const T *b = (const T *)k->x[2];                                           \
        ((T *)k->y)[i] = c[off[0]] != 0 ? a[off[1]] : b[off[2]];                   \
    }                                                                              \
    TL_HD static inline void cu_ew_clamp_##SUF(const cu_ew *k, int64_t i)          \
    {                                                                              \
        T v = ((const T *)k->x[0])[i], lo = (T)k->lo, hi = (T)k->hi;               \
        bool hl = k->has_lo, hh = k->has_hi;                                       \
        ((T *)k->y)[i] = TL_CLAMP(v, lo, hi, hl, hh);                              \
    }

CU_DEFINE_EW(float, f)
CU_DEFINE_EW(double, d)

/* The integer arithmetic (scalar.h's TL_INT_* formulas) for TT int32_t or
 * int64_t; a divisor of 0 never reaches these (cu_int_divisor_error). */
#define CU_DEFINE_IEW(TT, UU, SUF)                                                 \
    TL_HD static inline TT cu_iunary_##SUF(int op, TT v)                           \
    {                                                                              \
        typedef TT T;                                                              \
        typedef UU U;                                                              \
        switch (op) {                                                              \
            TL_INT_UNARY_EXPRS(CU_UN_CASE)                                         \
        default: return v;                                                         \
        }                                                                          \
    }                                                                              \
    TL_HD static inline TT cu_ibinary_##SUF(int op, TT a, TT b)                    \
    {                                                                              \
        typedef TT T;                                                              \
        typedef UU U;                                                              \
        switch (op) {                                                              \
            TL_INT_BINARY_EXPRS(CU_BIN_CASE)                                       \
        default: return a;                                                         \
        }                                                                          \
    }                                                                              \
    TL_HD static inline void cu_ew_binary_##SUF(const cu_ew *k, int op, int64_t i) \
    {                                                                              \
        int64_t off[3];                                                            \
        cu_plan_offsets(&k->plan, i, off);                                         \
        const TT *a = (const TT *)k->x[0], *b = (const TT *)k->x[1];               \
        ((TT *)k->y)[i] = cu_ibinary_##SUF(op, a[off[0]], b[off[1]]);              \
    }                                                                              \
    TL_HD static inline void cu_ew_unary_##SUF(const cu_ew *k, int op, int64_t i)  \
    {                                                                              \
        ((TT *)k->y)[i] = cu_iunary_##SUF(op, ((const TT *)k->x[0])[i]);           \
    }                                                                              \
    /* the divisor's element i is 0 (a thread per element of the divisor) */      \
    TL_HD static inline bool cu_ew_zero_##SUF(const cu_ew *k, int64_t i)           \
    {                                                                              \
        return ((const TT *)k->x[1])[i] == 0;                                      \
    }

CU_DEFINE_IEW(int32_t, uint32_t, i32)
CU_DEFINE_IEW(int64_t, uint64_t, i64)

/* An integer div, mod or fmod whose divisor (nb elements) has a 0 at
 * element i: the CPU's error (cpu_elementwise.c). */
static inline tl_code cu_int_divisor_error(tl_status *st, tl_opcode op, int64_t nb, int64_t i)
{
    char pos[48] = "";
    if (nb > 1)
        snprintf(pos, sizeof pos, " (element %lld of the divisor)", (long long)i);
    return tl_fail(st, TL_EINPUT, "integer %s by zero%s", op == TL_OP_DIV ? "division" : "remainder",
                   pos);
}

/* cast element i from k->src to k->dst; into an integer dtype only values
 * in [LO, HI) convert, as on the CPU (cpu_elementwise.c): false, and
 * nothing written, for one that does not. */
#define CU_CAST_TO(TD, CHECK, LO, HI)                                              \
    do {                                                                           \
        switch (k->src) {                                                          \
        case TL_F32: CU_CAST_ONE(float, TD, CHECK, LO, HI);                        \
        case TL_F64: CU_CAST_ONE(double, TD, CHECK, LO, HI);                       \
        case TL_I32: CU_CAST_ONE(int32_t, TD, CHECK, LO, HI);                      \
        default: CU_CAST_ONE(int64_t, TD, CHECK, LO, HI);                          \
        }                                                                          \
    } while (0)
#define CU_CAST_ONE(TS, TD, CHECK, LO, HI)                                         \
    do {                                                                           \
        TS s_ = ((const TS *)k->x[0])[i];                                          \
        if (CHECK && !(s_ >= LO && s_ < HI))                                       \
            return false;                                                          \
        ((TD *)k->y)[i] = (TD)s_;                                                  \
        return true;                                                               \
    } while (0)

TL_HD static inline bool cu_ew_cast(const cu_ew *k, int64_t i)
{
    bool from_float = k->src == TL_F32 || k->src == TL_F64;
    switch (k->dst) {
    case TL_F32: CU_CAST_TO(float, false, 0, 0); break;
    case TL_F64: CU_CAST_TO(double, false, 0, 0); break;
    case TL_I32: CU_CAST_TO(int32_t, true, -0x1.00000001fffffp+31, 2147483648.0); break; /* above -2^31 - 1: -2147483648.5 truncates into range */
    default:
        if (from_float)
            CU_CAST_TO(int64_t, true, -9223372036854775808.0, 9223372036854775808.0);
        else
            CU_CAST_TO(int64_t, false, 0, 0);
    }
    return true;
}

#endif
