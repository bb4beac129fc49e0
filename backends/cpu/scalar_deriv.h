/* The derivatives of the scalar formulas of scalar.h, written once, for
 * forward-mode differentiation of map bodies: dun gives d op(v)/dv from the
 * operand v and the value y = op(v); dbin gives both partials of a binary
 * op from a, b and y.  Used by the CPU map engine (cpu_map.c) and by the
 * CUDA map kernel (cuda/mexec.h).  Include after scalar.h. */
#ifndef TL_SCALAR_DERIV_H
#define TL_SCALAR_DERIV_H

#include "backends/hd.h"
#include "backends/ops.h"

/* silu's derivative s * (1 + v * (1 - s)), s = sigmoid(v) */
#define TL_DEFINE_SILU_GRAD(T, SUF)                                                \
    TL_HD static inline T tl_silu_grad_##SUF(T v)                                  \
    {                                                                              \
        T s = 1 / (1 + TL_EXP(-v));                                                \
        return s * (1 + v * (1 - s));                                              \
    }
TL_DEFINE_SILU_GRAD(float, f)
TL_DEFINE_SILU_GRAD(double, d)
#ifdef __cplusplus
TL_HD static inline float tl_silu_grad(float v) { return tl_silu_grad_f(v); }
TL_HD static inline double tl_silu_grad(double v) { return tl_silu_grad_d(v); }
#define TL_SILU_GRAD(v) tl_silu_grad(v)
#else
#define TL_SILU_GRAD(v) _Generic((v), float: tl_silu_grad_f, double: tl_silu_grad_d)(v)
#endif

/* gelu'' (the derivative of gelu_grad(x, c) = c * gelu'(x) in x, over c),
 * in the formulas of the recorded rule (exec/grad2.c: gelu_second). */
#define TL_DEFINE_GELU_SECOND(T, SUF)                                              \
    TL_HD static inline T tl_gelu_second_##SUF(T x, int approx)                    \
    {                                                                              \
        T x2 = x * x;                                                              \
        if (!approx)                                                               \
            return (T)0.39894228040143267794 * TL_EXP(x2 * (T)-0.5) * ((T)2 - x2); \
        const T c = (T)0.79788456080286535588, k = (T)0.044715;                   \
        T t = TL_TANH(c * (x + k * (x2 * x)));                                     \
        T up = c * ((T)1 + (T)(3 * 0.044715) * x2);                                \
        T upp = (T)(6 * 0.79788456080286535588 * 0.044715) * x;                    \
        return ((T)1 - t * t) * (up - x * t * (up * up) + x * upp * (T)0.5);       \
    }
TL_DEFINE_GELU_SECOND(float, f)
TL_DEFINE_GELU_SECOND(double, d)
#ifdef __cplusplus
TL_HD static inline float tl_gelu_second(float v, int ap) { return tl_gelu_second_f(v, ap); }
TL_HD static inline double tl_gelu_second(double v, int ap) { return tl_gelu_second_d(v, ap); }
#define TL_GELU_SECOND(v, ap) tl_gelu_second((v), (ap))
#else
#define TL_GELU_SECOND(v, ap) _Generic((v), float: tl_gelu_second_f, double: tl_gelu_second_d)((v), (ap))
#endif

/* d op(v)/dv in terms of the operand v, the value y = op(v) and gelu's
 * `approx`; ops not listed (sign, detach, floor, ceil, round, trunc,
 * isnan, isinf) have derivative 0. */
#define TL_UNARY_DERIVS(X)                                                         \
    X(NEG, -1)                                                                     \
    X(ABS, v > 0 ? 1 : v < 0 ? -1 : v == 0 ? 0 : v)                                \
    X(EXP, y)                                                                      \
    X(EXPM1, y + 1)                                                                \
    X(LOG, 1 / v)                                                                  \
    X(LOG1P, 1 / (v + 1))                                                          \
    X(SQRT, 1 / (y * 2))                                                           \
    X(RSQRT, (T)-0.5 * (y * y * y))                                                \
    X(RECIPROCAL, -(y * y))                                                        \
    X(SQUARE, v * 2)                                                               \
    X(SIN, TL_COS(v))                                                              \
    X(COS, -TL_SIN(v))                                                             \
    X(TAN, 1 + y * y)                                                              \
    X(TANH, 1 - y * y)                                                             \
    X(SIGMOID, (1 - y) * y)                                                        \
    X(ERF, (T)TL_2_SQRTPI * TL_EXP(-(v * v)))                                      \
    X(RELU, v > 0 ? 1 : 0)                                                         \
    X(SOFTPLUS, 1 / (1 + TL_EXP(-v)))                                              \
    X(GELU, TL_GELU_GRAD(v, approx))                                               \
    X(SILU, TL_SILU_GRAD(v))                                                       \
    X(SINH, TL_COSH(v))                                                            \
    X(COSH, TL_SINH(v))                                                            \
    X(ASIN, 1 / sqrt(1 - v * v))                                                   \
    X(ACOS, -(1 / sqrt(1 - v * v)))                                                \
    X(ATAN, 1 / (1 + v * v))                                                       \
    X(ASINH, 1 / sqrt(v * v + 1))                                                  \
    X(ACOSH, 1 / sqrt(v * v - 1))                                                  \
    X(ATANH, 1 / (1 - v * v))

/* both partials of a binary op, from a, b and y = op(a, b) (and gelu's
 * `approx`, for gelu_grad(x, c) in the derivative programs of map bodies:
 * exec/mapderiv.c); comparisons have none (0) */
#define TL_BINARY_DERIVS(X)                                                        \
    X(ADD, 1, 1)                                                                   \
    X(SUB, 1, -1)                                                                  \
    X(MUL, b, a)                                                                   \
    X(DIV, 1 / b, -(y / b))                                                        \
    X(POW, b == 0 ? 0 : b * TL_POW(a, b - 1), a == 0 && b >= 0 ? 0 : y * TL_LOG(a)) \
    X(MAXIMUM, a == b ? (T)0.5 : a < b ? 0 : 1, a == b ? (T)0.5 : a > b ? 0 : 1)   \
    X(MINIMUM, a == b ? (T)0.5 : a > b ? 0 : 1, a == b ? (T)0.5 : a < b ? 0 : 1)   \
    X(FMOD, 1, -trunc(a / b))                                                      \
    X(MOD, 1, -floor(a / b))                                                       \
    X(GELU_GRAD, b * TL_GELU_SECOND(a, approx), TL_GELU_GRAD(a, approx))

#define TL_DUN_CASE(E, EXPR)                                                       \
    case TL_OP_##E: return (T)(EXPR);
#define TL_DBIN_CASE(E, DA, DB)                                                    \
    case TL_OP_##E:                                                                \
        *da = (T)(DA);                                                             \
        *db = (T)(DB);                                                             \
        break;

#define TL_DEFINE_DERIVS(T, SUF)                                                   \
    TL_HD static inline T dun_##SUF(int op, T v, T y, int approx)                  \
    {                                                                              \
        (void)approx;                                                              \
        switch (op) {                                                              \
            TL_UNARY_DERIVS(TL_DUN_CASE)                                           \
        default: return 0; /* sign, detach, rounding, isnan, isinf */                                      \
        }                                                                          \
    }                                                                              \
    TL_HD static inline void dbin_##SUF(int op, T a, T b, T y, int approx, T *da, T *db) \
    {                                                                              \
        (void)approx;                                                              \
        *da = *db = 0;                                                             \
        switch (op) {                                                              \
            TL_BINARY_DERIVS(TL_DBIN_CASE)                                         \
        default: break; /* comparisons */                                          \
        }                                                                          \
    }

/* the lists name the element type T */
#define T float
TL_DEFINE_DERIVS(float, f)
#undef T
#define T double
TL_DEFINE_DERIVS(double, d)
#undef T

#endif
