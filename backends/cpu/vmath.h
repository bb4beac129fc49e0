/* The transcendental functions of the CPU kernels: SLEEF's deterministic
 * ("finz"/"cinz") functions, each within 1 ulp of the correctly rounded
 * result, and giving the same bits one element at a time and 4, 8 or 16 at
 * a time.  So a loop over a tensor, the map engine's element-at-a-time
 * path and a fused chain all compute the same bits.
 *
 * Every function is declared `omp declare simd` (compile with
 * -fopenmp-simd): GCC vectorises loops that call them and calls the x86
 * vector-ABI variants (_ZGVbN4v_tl_expf and so on) that vmath.c binds to
 * SLEEF's SSE, AVX2 and AVX-512 code.  Which family runs is fixed once per
 * process by the CPU: with FMA (x86-64-v3 and later) the "finz" functions,
 * without it the "cinz" ones; the two families differ in the last bit on
 * some arguments, so bits are reproducible run after run on one machine
 * and across machines of the same family.  tests/test_vmath.c checks the
 * 1-ulp bound against long double and the scalar/vector agreement.
 *
 * The formulas of scalar.h call them through TL_EXP(x) and the like, which
 * pick the float or double function by the argument's type. */
#ifndef TL_VMATH_H
#define TL_VMATH_H

#include "backends/status.h"

#define TL_VMATH_ATTR __attribute__((const, nothrow, leaf))
#define TL_VMATH_SIMD _Pragma("omp declare simd notinbranch")

/* name, the one-argument functions */
#define TL_VMATH_UNARY(X)                                                          \
    X(exp) X(expm1) X(log) X(log1p) X(sin) X(cos) X(tan) X(tanh) X(erf) X(sinh) X(cosh) \
    X(asin) X(acos) X(atan) X(asinh) X(acosh) X(atanh)

#define TL_VMATH_DECLARE(F)                                                        \
    TL_VMATH_SIMD TL_VMATH_ATTR float tl_##F##f(float);                            \
    TL_VMATH_SIMD TL_VMATH_ATTR double tl_##F(double);
TL_VMATH_UNARY(TL_VMATH_DECLARE)
#undef TL_VMATH_DECLARE
TL_VMATH_SIMD TL_VMATH_ATTR float tl_powf(float, float);
TL_VMATH_SIMD TL_VMATH_ATTR double tl_pow(double, double);
/* C's fmod, exact, as the C library's bit for bit (vmath.c) */
TL_VMATH_SIMD TL_VMATH_ATTR float tl_fmodf(float, float);
TL_VMATH_SIMD TL_VMATH_ATTR double tl_fmod(double, double);

/* the name of the family bound in this process: "sleef-finz" or "sleef-cinz" */
const char *tl_vmath_family(void);

/* TL_ERUNTIME "cannot load SLEEF ..." once a function was called and SLEEF
 * could not be loaded (its results were NaN); else TL_OK */
tl_code tl_vmath_check(tl_status *st);

#define TL_VMATH_GENERIC(F, x) _Generic((x), float: tl_##F##f, double: tl_##F)(x)
#define TL_EXP(x) TL_VMATH_GENERIC(exp, x)
#define TL_EXPM1(x) TL_VMATH_GENERIC(expm1, x)
#define TL_LOG(x) TL_VMATH_GENERIC(log, x)
#define TL_LOG1P(x) TL_VMATH_GENERIC(log1p, x)
#define TL_SIN(x) TL_VMATH_GENERIC(sin, x)
#define TL_COS(x) TL_VMATH_GENERIC(cos, x)
#define TL_TAN(x) TL_VMATH_GENERIC(tan, x)
#define TL_TANH(x) TL_VMATH_GENERIC(tanh, x)
#define TL_ERF(x) TL_VMATH_GENERIC(erf, x)
#define TL_SINH(x) TL_VMATH_GENERIC(sinh, x)
#define TL_COSH(x) TL_VMATH_GENERIC(cosh, x)
#define TL_ASIN(x) TL_VMATH_GENERIC(asin, x)
#define TL_ACOS(x) TL_VMATH_GENERIC(acos, x)
#define TL_ATAN(x) TL_VMATH_GENERIC(atan, x)
#define TL_ASINH(x) TL_VMATH_GENERIC(asinh, x)
#define TL_ACOSH(x) TL_VMATH_GENERIC(acosh, x)
#define TL_ATANH(x) TL_VMATH_GENERIC(atanh, x)
#define TL_POW(a, b) _Generic((a), float: tl_powf, double: tl_pow)((a), (b))
#define TL_FMOD(a, b) _Generic((a), float: tl_fmodf, double: tl_fmod)((a), (b))

#endif
