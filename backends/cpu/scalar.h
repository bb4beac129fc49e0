/* The scalar formulas of the elementwise ops, written once.  Include after
 * <tgmath.h> in C (in C++ and CUDA the math functions are overloaded for
 * float and double): each expression is instantiated for float and double
 * by the CPU kernels (over tensors), by the map engine (per element) and
 * by the CUDA kernels, so the CPU computes the same bits everywhere and
 * the GPU the same formulas.  In the expressions, `v` is the operand of a
 * unary op, `a`/`b` those of a binary one, `approx` gelu's attribute. */
#ifndef TL_SCALAR_H
#define TL_SCALAR_H

#include <stdint.h>

#include "backends/hd.h"

/* The transcendental functions: in C the CPU's (vmath.h: the same bits one
 * element or a vector at a time), in C++ and CUDA the overloads of the
 * platform (CUDA's on the GPU). */
#if defined(__cplusplus) || defined(__CUDACC__)
#define TL_EXP(x) exp(x)
#define TL_EXPM1(x) expm1(x)
#define TL_LOG(x) log(x)
#define TL_LOG1P(x) log1p(x)
#define TL_SIN(x) sin(x)
#define TL_COS(x) cos(x)
#define TL_TAN(x) tan(x)
#define TL_TANH(x) tanh(x)
#define TL_ERF(x) erf(x)
#define TL_SINH(x) sinh(x)
#define TL_COSH(x) cosh(x)
#define TL_ASIN(x) asin(x)
#define TL_ACOS(x) acos(x)
#define TL_ATAN(x) atan(x)
#define TL_ASINH(x) asinh(x)
#define TL_ACOSH(x) acosh(x)
#define TL_ATANH(x) atanh(x)
#define TL_POW(a, b) pow((a), (b))
#define TL_FMOD(a, b) fmod((a), (b))
#else
#include "backends/cpu/vmath.h"
#endif

#define TL_SQRT1_2 0.70710678118654752440     /* 1/sqrt(2) */
#define TL_SQRT_2_PI 0.79788456080286535588   /* sqrt(2/pi) */
#define TL_INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2*pi) */
#define TL_2_SQRTPI 1.12837916709551257390    /* 2/sqrt(pi) */

/* NaN-propagating max/min, as torch.maximum / numpy.maximum. */
#define TL_MAXIMUM(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define TL_MINIMUM(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))

/* GELU and its derivative, in the same formulas as PyTorch. */
#define TL_DEFINE_GELU(T, SUF)                                                     \
    TL_HD static inline T tl_gelu_##SUF(T x, int approx)                           \
    {                                                                              \
        if (!approx)                                                               \
            return x * (T)0.5 * ((T)1 + TL_ERF(x * (T)TL_SQRT1_2));                \
        T inner = (T)TL_SQRT_2_PI * (x + (T)0.044715 * x * x * x);                 \
        return (T)0.5 * x * ((T)1 + TL_TANH(inner));                               \
    }                                                                              \
    TL_HD static inline T tl_gelu_grad_##SUF(T x, int approx)                      \
    {                                                                              \
        if (!approx) {                                                             \
            T cdf = (T)0.5 * ((T)1 + TL_ERF(x * (T)TL_SQRT1_2));                   \
            T pdf = TL_EXP((T)-0.5 * x * x) * (T)TL_INV_SQRT_2PI;                  \
            return cdf + x * pdf;                                                  \
        }                                                                          \
        const T beta = (T)TL_SQRT_2_PI, kappa = (T)0.044715;                       \
        T x2 = x * x, th = TL_TANH(beta * (x + kappa * x2 * x));                   \
        T left = (T)0.5 * x, right = (T)1 + th;                                    \
        return (T)0.5 * right +                                                    \
               left * ((T)1 - th * th) * beta * ((T)1 + (T)3 * kappa * x2);        \
    }
TL_DEFINE_GELU(float, f)
TL_DEFINE_GELU(double, d)
#ifdef __cplusplus
TL_HD static inline float tl_gelu(float x, int ap) { return tl_gelu_f(x, ap); }
TL_HD static inline double tl_gelu(double x, int ap) { return tl_gelu_d(x, ap); }
TL_HD static inline float tl_gelu_grad(float x, int ap) { return tl_gelu_grad_f(x, ap); }
TL_HD static inline double tl_gelu_grad(double x, int ap) { return tl_gelu_grad_d(x, ap); }
#define TL_GELU(x, ap) tl_gelu((x), (ap))
#define TL_GELU_GRAD(x, ap) tl_gelu_grad((x), (ap))
#else
#define TL_GELU(x, ap) _Generic((x), float: tl_gelu_f, double: tl_gelu_d)((x), (ap))
#define TL_GELU_GRAD(x, ap) _Generic((x), float: tl_gelu_grad_f, double: tl_gelu_grad_d)((x), (ap))
#endif

/* Python's remainder (torch.remainder): the sign of the divisor, a zero
 * result too (copysign), from the exact fmod (TL_FMOD: vmath.h in C).
 * r = fmod(a, b); where r is not zero and its sign is not b's, r + b; a
 * zero takes b's sign.  In C the choice is made on the bits (U: the
 * unsigned integer of T's size, SIGN its sign bit), every value computed
 * and chosen without a branch, so loops of it vectorise: r + (b or -0),
 * -0 being the sum's identity (r + -0 is r, a zero's sign kept).  GCC
 * kept the formula of the other branch (the compare of two signs) as a
 * branch around the trapping add: an element at a time, 60 ms over 4M
 * floats.  NaN stays NaN either way. */
#if defined(__cplusplus) || defined(__CUDACC__)
#define TL_DEFINE_MOD(T, SUF, U, SIGN)                                             \
    TL_HD static inline T tl_mod_##SUF(T a, T b)                                   \
    {                                                                              \
        T r = TL_FMOD(a, b);                                                       \
        if (r != 0)                                                                \
            return (r < 0) != (b < 0) ? r + b : r;                                 \
        return copysign((T)0, b);                                                  \
    }
#else
#define TL_DEFINE_MOD(T, SUF, U, SIGN)                                             \
    static inline T tl_mod_##SUF(T a, T b)                                         \
    {                                                                              \
        T r = TL_FMOD(a, b), s, z = copysign((T)0, b);                             \
        U ur, ub, ns = SIGN;                                                       \
        __builtin_memcpy(&ur, &r, sizeof r);                                       \
        __builtin_memcpy(&ub, &b, sizeof b);                                       \
        U nz = (ur << 1) != 0, m = (U)0 - (((ur ^ ub) >> (sizeof(U) * 8 - 1)) & nz); \
        U sb = (ub & m) | (ns & ~m);                                               \
        __builtin_memcpy(&s, &sb, sizeof s);                                       \
        return (nz ? r : z) + s;                                                   \
    }
#endif
TL_DEFINE_MOD(float, f, uint32_t, 0x80000000u)
TL_DEFINE_MOD(double, d, uint64_t, 0x8000000000000000u)
#ifdef __cplusplus
TL_HD static inline float tl_mod(float a, float b) { return tl_mod_f(a, b); }
TL_HD static inline double tl_mod(double a, double b) { return tl_mod_d(a, b); }
#define TL_MOD(a, b) tl_mod((a), (b))
#else
#define TL_MOD(a, b) _Generic((a), float: tl_mod_f, double: tl_mod_d)((a), (b))
#endif

#define TL_BINARY_EXPRS(X)                                                         \
    X(ADD, a + b)                                                                  \
    X(SUB, a - b)                                                                  \
    X(MUL, a * b)                                                                  \
    X(DIV, a / b)                                                                  \
    X(POW, TL_POW(a, b))                                                           \
    X(MAXIMUM, TL_MAXIMUM(a, b))                                                   \
    X(MINIMUM, TL_MINIMUM(a, b))                                                   \
    X(EQ, a == b)                                                                  \
    X(NE, a != b)                                                                  \
    X(LT, a < b)                                                                   \
    X(LE, a <= b)                                                                  \
    X(GT, a > b)                                                                   \
    X(GE, a >= b)                                                                  \
    X(FMOD, TL_FMOD(a, b))                                                         \
    X(MOD, TL_MOD(a, b))

#define TL_UNARY_EXPRS(X)                                                          \
    X(NEG, -v)                                                                     \
    X(ABS, fabs(v))                                                                \
    X(SIGN, v > 0 ? 1 : v < 0 ? -1 : v == 0 ? 0 : v)                               \
    X(EXP, TL_EXP(v))                                                              \
    X(EXPM1, TL_EXPM1(v))                                                          \
    X(LOG, TL_LOG(v))                                                              \
    X(LOG1P, TL_LOG1P(v))                                                          \
    X(SQRT, sqrt(v))                                                               \
    X(RSQRT, 1 / sqrt(v))                                                          \
    X(RECIPROCAL, 1 / v)                                                           \
    X(SQUARE, v * v)                                                               \
    X(SIN, TL_SIN(v))                                                              \
    X(COS, TL_COS(v))                                                              \
    X(TAN, TL_TAN(v))                                                              \
    X(TANH, TL_TANH(v))                                                            \
    X(SIGMOID, 1 / (1 + TL_EXP(-v)))                                               \
    X(ERF, TL_ERF(v))                                                              \
    X(RELU, v > 0 || v != v ? v : 0)                                               \
    /* log(1+e^x) without overflow: max(x,0) + log1p(e^-|x|) */                    \
    X(SOFTPLUS, (v > 0 ? v : 0) + TL_LOG1P(TL_EXP(-fabs(v))))                      \
    X(GELU, TL_GELU(v, approx))                                                    \
    X(SILU, v / (1 + TL_EXP(-v)))                                                  \
    X(DETACH, v)                                                                   \
    X(FLOOR, floor(v))                                                             \
    X(CEIL, ceil(v))                                                               \
    /* half to even: the default rounding mode, which tl never changes */         \
    X(ROUND, rint(v))                                                              \
    X(TRUNC, trunc(v))                                                             \
    X(SINH, TL_SINH(v))                                                            \
    X(COSH, TL_COSH(v))                                                            \
    X(ASIN, TL_ASIN(v))                                                            \
    X(ACOS, TL_ACOS(v))                                                            \
    X(ATAN, TL_ATAN(v))                                                            \
    X(ASINH, TL_ASINH(v))                                                          \
    X(ACOSH, TL_ACOSH(v))                                                          \
    X(ATANH, TL_ATANH(v))                                                          \
    X(ISNAN, v != v)                                                               \
    X(ISINF, fabs(v) == INFINITY)

/* The integer arithmetic (nn.md), for T int32_t or int64_t and U its
 * unsigned twin: exact, wrapping on overflow (two's complement through
 * unsigned arithmetic, never undefined behaviour).  div truncates toward
 * zero and fmod has the dividend's sign, as C; mod has the divisor's, as
 * Python.  The kernels refuse a zero divisor before they run; b == -1 is
 * taken apart, so INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0.
 * Comparisons give 0 or 1 in T; `a`, `b` and `v` as above. */
#define TL_INEG(v) ((T)((U)0 - (U)(v)))
#define TL_IMOD(a, b)                                                              \
    ((b) == -1 ? (T)0                                                              \
     : (a) % (b) != 0 && ((a) % (b) < 0) != ((b) < 0) ? (T)((a) % (b) + (b))      \
                                                      : (T)((a) % (b)))
#define TL_INT_BINARY_EXPRS(X)                                                     \
    X(ADD, (T)((U)a + (U)b))                                                       \
    X(SUB, (T)((U)a - (U)b))                                                       \
    X(MUL, (T)((U)a * (U)b))                                                       \
    X(DIV, b == -1 ? TL_INEG(a) : (T)(a / b))                                      \
    X(FMOD, b == -1 ? (T)0 : (T)(a % b))                                           \
    X(MOD, TL_IMOD(a, b))                                                          \
    X(MAXIMUM, a > b ? a : b)                                                      \
    X(MINIMUM, a < b ? a : b)                                                      \
    X(EQ, a == b)                                                                  \
    X(NE, a != b)                                                                  \
    X(LT, a < b)                                                                   \
    X(LE, a <= b)                                                                  \
    X(GT, a > b)                                                                   \
    X(GE, a >= b)
#define TL_INT_UNARY_EXPRS(X)                                                      \
    X(NEG, TL_INEG(v))                                                             \
    X(ABS, v < 0 ? TL_INEG(v) : v)                                                 \
    X(SIGN, (T)((v > 0) - (v < 0)))
/* the ops of the lists: whether a divisor of 0 is refused */
#define TL_INT_DIVIDES(op) ((op) == TL_OP_DIV || (op) == TL_OP_FMOD || (op) == TL_OP_MOD)

/* clamp with optional bounds; NaN stays NaN */
#define TL_CLAMP(v, lo, hi, has_lo, has_hi)                                        \
    ((has_hi) && ((has_lo) && (v) < (lo) ? (lo) : (v)) > (hi)                      \
         ? (hi)                                                                    \
         : ((has_lo) && (v) < (lo) ? (lo) : (v)))

#endif
