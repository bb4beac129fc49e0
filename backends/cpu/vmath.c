/* Binds tl_expf and the other functions of vmath.h, and their x86 vector-ABI
 * variants, to SLEEF's deterministic functions, once, when the program is
 * loaded (GNU indirect functions): the "finz" family where the CPU has AVX2
 * and FMA, the "cinz" family elsewhere.  The resolvers return SLEEF's own
 * entry points, whose calling convention is the vector ABI's, so a call
 * costs what a call to SLEEF costs.
 *
 * Some functions leave SLEEF's 1-ulp bound at the edge of their range
 * (tests/test_vmath.c finds them): exp in double just below the overflow
 * threshold (SLEEF says inf), log1p of huge arguments (inf), erf in float
 * near the least normal number (up to 1.09 ulp), sinh and cosh just below
 * their overflow thresholds (inf from |x| > 709 in double, 88.5 in float,
 * where the results are finite up to 710.47 and 89.41), asinh and acosh
 * beyond the square root of the largest number (inf, for about 710 and
 * 89).  Those are wrapped: the
 * wrapper calls SLEEF, and where a lane is in the edge range, which is
 * rare, recomputes that lane by a formula that is exact there.  The scalar
 * wrapper does the same, so vector and scalar still agree bit for bit.
 *
 * The vector-ABI names (see the x86-64 Vector Function ABI): _ZGV, the ISA
 * (b SSE, c AVX, d AVX2, e AVX-512), N (unmasked), the number of lanes,
 * one v per argument, _, the scalar function's name.  This file does not
 * include vmath.h: its `declare simd` would have the compiler build its own
 * clones of the functions defined here. */
#include <math.h>
#include <stdbool.h>

#include "vmath_sleef.h"

const char *tl_vmath_family(void);

/* Resolvers run while the program is being relocated, before a
 * sanitizer's runtime has started: they must not be instrumented. */
#define RESOLVER __attribute__((no_sanitize("address", "undefined")))

RESOLVER static bool fma_family(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const char *tl_vmath_family(void)
{
    return fma_family() ? "sleef-finz" : "sleef-cinz";
}

typedef void (*tl_vmath_fn)(void);

/* NAME bound to FINZ with FMA, to CINZ without */
#define BIND(NAME, FINZ, CINZ)                                                     \
    RESOLVER __attribute__((used)) static tl_vmath_fn resolve_##NAME(void)         \
    {                                                                              \
        return fma_family() ? (tl_vmath_fn)FINZ : (tl_vmath_fn)CINZ;               \
    }                                                                              \
    void NAME(void) __attribute__((ifunc("resolve_" #NAME)));

/* The seven entry points of F in float (T f) or double (T d), bound to
 * IMPL(family, width class), width classes 1 (scalar), 128, 256 (both the
 * AVX and the AVX2 name) and 512; ARGS is v (unary) or vv (binary). */
#define BIND_TYPE(F, T, ARGS, N128, N256, N512, IMPL)                              \
    BIND(tl_##F##T, IMPL(finz, 1), IMPL(cinz, 1))                                  \
    BIND(_ZGVbN##N128##ARGS##_tl_##F##T, IMPL(finz, 128), IMPL(cinz, 128))         \
    BIND(_ZGVcN##N256##ARGS##_tl_##F##T, IMPL(finz, 256), IMPL(cinz, 256))         \
    BIND(_ZGVdN##N256##ARGS##_tl_##F##T, IMPL(finz, 256), IMPL(cinz, 256))         \
    BIND(_ZGVeN##N512##ARGS##_tl_##F##T, IMPL(finz, 512), IMPL(cinz, 512))

/* SLEEF's names: each family's ISA at each width class */
#define ISA_finz_1 purecfma
#define ISA_finz_128 avx2128
#define ISA_finz_256 avx2
#define ISA_finz_512 avx512f
#define ISA_cinz_1 purec
#define ISA_cinz_128 sse2
#define ISA_cinz_256 avx
#define ISA_cinz_512 avx512fnofma
#define LANES_f_1 1
#define LANES_f_128 4
#define LANES_f_256 8
#define LANES_f_512 16
#define LANES_d_1 1
#define LANES_d_128 2
#define LANES_d_256 4
#define LANES_d_512 8
#define CAT5(a, b, c, d, e) CAT5_(a, b, c, d, e)
#define CAT5_(a, b, c, d, e) a##b##c##d##e
/* Sleef_finz_expf8_u10avx2 and the like */
#define SLEEF(FAM, F, T, W) CAT5(Sleef_##FAM##_##F, T, LANES_##T##_##W, _u10, ISA_##FAM##_##W)

/* the functions bound to SLEEF directly */
#define SLEEF_exp_f(FAM, W) SLEEF(FAM, exp, f, W)
#define SLEEF_expm1_f(FAM, W) SLEEF(FAM, expm1, f, W)
#define SLEEF_expm1_d(FAM, W) SLEEF(FAM, expm1, d, W)
#define SLEEF_log_f(FAM, W) SLEEF(FAM, log, f, W)
#define SLEEF_log_d(FAM, W) SLEEF(FAM, log, d, W)
#define SLEEF_sin_f(FAM, W) SLEEF(FAM, sin, f, W)
#define SLEEF_sin_d(FAM, W) SLEEF(FAM, sin, d, W)
#define SLEEF_cos_f(FAM, W) SLEEF(FAM, cos, f, W)
#define SLEEF_cos_d(FAM, W) SLEEF(FAM, cos, d, W)
#define SLEEF_tan_f(FAM, W) SLEEF(FAM, tan, f, W)
#define SLEEF_tan_d(FAM, W) SLEEF(FAM, tan, d, W)
#define SLEEF_tanh_f(FAM, W) SLEEF(FAM, tanh, f, W)
#define SLEEF_tanh_d(FAM, W) SLEEF(FAM, tanh, d, W)
#define SLEEF_erf_d(FAM, W) SLEEF(FAM, erf, d, W)
#define SLEEF_asin_f(FAM, W) SLEEF(FAM, asin, f, W)
#define SLEEF_asin_d(FAM, W) SLEEF(FAM, asin, d, W)
#define SLEEF_acos_f(FAM, W) SLEEF(FAM, acos, f, W)
#define SLEEF_acos_d(FAM, W) SLEEF(FAM, acos, d, W)
#define SLEEF_atan_f(FAM, W) SLEEF(FAM, atan, f, W)
#define SLEEF_atan_d(FAM, W) SLEEF(FAM, atan, d, W)
#define SLEEF_atanh_f(FAM, W) SLEEF(FAM, atanh, f, W)
#define SLEEF_atanh_d(FAM, W) SLEEF(FAM, atanh, d, W)
#define SLEEF_pow_f(FAM, W) SLEEF(FAM, pow, f, W)
#define SLEEF_pow_d(FAM, W) SLEEF(FAM, pow, d, W)

/* ---- the wrapped functions ---- */

/* Edge ranges, for a scalar or (GCC vector extensions) a vector x and
 * SLEEF's result y: lanes that are nonzero need the fix. */
#define EDGE_exp_d(x, y) (((y) == INFINITY) & ((x) <= 0x1.62e42fefa39efp+9))
#define EDGE_log1p_f(x, y) ((x) > 1e30f)
#define EDGE_log1p_d(x, y) ((x) > 1e300)
#define EDGE_erf_f(x, y) (((x) < 0x1p-100f) & ((x) > -0x1p-100f))
#define EDGE_sinh_d(x, y) (((x) > 709.0) | ((x) < -709.0))
#define EDGE_sinh_f(x, y) (((x) > 88.0f) | ((x) < -88.0f))
#define EDGE_cosh_d(x, y) EDGE_sinh_d(x, y)
#define EDGE_cosh_f(x, y) EDGE_sinh_f(x, y)
#define EDGE_asinh_d(x, y) (((x) > 1e150) | ((x) < -1e150))
#define EDGE_asinh_f(x, y) (((x) > 1e18f) | ((x) < -1e18f))
#define EDGE_acosh_d(x, y) ((x) > 1e150)
#define EDGE_acosh_f(x, y) ((x) > 1e18f)

/* The fixes.  exp: long double's exp, rounded once (its error is 2^-11 of
 * a double's ulp).  log1p(x) = log(x) + log1p(1/x), the second term below
 * 1e-30 of the first: log's own bits.  erf(x) = 2x/sqrt(pi) (1 - x^2/3 ...)
 * with x^2 below 2^-200: the product in double, rounded once. */
static double fix_exp_d(double x) { return (double)expl(x); }
static float fix_erf_f(float x) { return (float)((double)x * 0x1.20dd750429b6dp+0); }
/* sinh, cosh, asinh, acosh there: long double's, rounded once (their
 * arguments and results are in its range) */
static double fix_sinh_d(double x) { return (double)sinhl(x); }
static float fix_sinh_f(float x) { return (float)sinhl(x); }
static double fix_cosh_d(double x) { return (double)coshl(x); }
static float fix_cosh_f(float x) { return (float)coshl(x); }
static double fix_asinh_d(double x) { return (double)asinhl(x); }
static float fix_asinh_f(float x) { return (float)asinhl(x); }
static double fix_acosh_d(double x) { return (double)acoshl(x); }
static float fix_acosh_f(float x) { return (float)acoshl(x); }
#define FIX_sinh_d(FAM, x) fix_sinh_d(x)
#define FIX_sinh_f(FAM, x) fix_sinh_f(x)
#define FIX_cosh_d(FAM, x) fix_cosh_d(x)
#define FIX_cosh_f(FAM, x) fix_cosh_f(x)
#define FIX_asinh_d(FAM, x) fix_asinh_d(x)
#define FIX_asinh_f(FAM, x) fix_asinh_f(x)
#define FIX_acosh_d(FAM, x) fix_acosh_d(x)
#define FIX_acosh_f(FAM, x) fix_acosh_f(x)
#define FIX_exp_d(FAM, x) fix_exp_d(x)
#define FIX_erf_f(FAM, x) fix_erf_f(x)
#define FIX_log1p_f(FAM, x) SLEEF(FAM, log, f, 1)(x)
#define FIX_log1p_d(FAM, x) SLEEF(FAM, log, d, 1)(x)

/* whether any lane of a comparison's result is set */
#define ANY_128(m) _mm_movemask_ps((__m128)(m))
#define ANY_256(m) _mm256_movemask_ps((__m256)(m))
#define ANY_512(m) _mm512_test_epi32_mask((__m512i)(m), (__m512i)(m))

#define V_f_128 __m128
#define V_f_256 __m256
#define V_f_512 __m512
#define V_d_128 __m128d
#define V_d_256 __m256d
#define V_d_512 __m512d

/* FAM's wrapper of F in dtype T at vector width W, compiled for TARGET */
#define WRAP_VEC(FAM, F, T, W, TARGET)                                             \
    __attribute__((target(TARGET))) static V_##T##_##W wrap_##FAM##_##F##_##T##W(V_##T##_##W x) \
    {                                                                              \
        V_##T##_##W y = SLEEF(FAM, F, T, W)(x);                                    \
        __typeof__(x < x) m = EDGE_##F##_##T(x, y);                                \
        if (__builtin_expect(ANY_##W(m) != 0, 0))                                  \
            for (int i = 0; i < LANES_##T##_##W; i++)                              \
                if (m[i])                                                          \
                    y[i] = FIX_##F##_##T(FAM, x[i]);                               \
        return y;                                                                  \
    }
#define WRAP_FAMILY(FAM, F, T, S)                                                  \
    static S wrap_##FAM##_##F##_##T##1(S x)                                        \
    {                                                                              \
        S y = SLEEF(FAM, F, T, 1)(x);                                              \
        return EDGE_##F##_##T(x, y) ? FIX_##F##_##T(FAM, x) : y;                   \
    }                                                                              \
    WRAP_VEC(FAM, F, T, 128, "sse2")                                               \
    WRAP_VEC(FAM, F, T, 256, "avx")                                                \
    WRAP_VEC(FAM, F, T, 512, "avx512f")
#define WRAP(F, T, S) WRAP_FAMILY(finz, F, T, S) WRAP_FAMILY(cinz, F, T, S)
WRAP(exp, d, double)
WRAP(log1p, f, float)
WRAP(log1p, d, double)
WRAP(erf, f, float)
WRAP(sinh, f, float)
WRAP(sinh, d, double)
WRAP(cosh, f, float)
WRAP(cosh, d, double)
WRAP(asinh, f, float)
WRAP(asinh, d, double)
WRAP(acosh, f, float)
WRAP(acosh, d, double)
#define WRAPPED_exp_d(FAM, W) wrap_##FAM##_exp_d##W
#define WRAPPED_log1p_f(FAM, W) wrap_##FAM##_log1p_f##W
#define WRAPPED_log1p_d(FAM, W) wrap_##FAM##_log1p_d##W
#define WRAPPED_erf_f(FAM, W) wrap_##FAM##_erf_f##W
#define WRAPPED_sinh_f(FAM, W) wrap_##FAM##_sinh_f##W
#define WRAPPED_sinh_d(FAM, W) wrap_##FAM##_sinh_d##W
#define WRAPPED_cosh_f(FAM, W) wrap_##FAM##_cosh_f##W
#define WRAPPED_cosh_d(FAM, W) wrap_##FAM##_cosh_d##W
#define WRAPPED_asinh_f(FAM, W) wrap_##FAM##_asinh_f##W
#define WRAPPED_asinh_d(FAM, W) wrap_##FAM##_asinh_d##W
#define WRAPPED_acosh_f(FAM, W) wrap_##FAM##_acosh_f##W
#define WRAPPED_acosh_d(FAM, W) wrap_##FAM##_acosh_d##W

/* ---- every entry point ---- */
#define BIND_F(F, IMPL) BIND_TYPE(F, f, v, 4, 8, 16, IMPL)
#define BIND_D(F, IMPL) BIND_TYPE(F, , v, 2, 4, 8, IMPL)
BIND_F(exp, SLEEF_exp_f)
BIND_D(exp, WRAPPED_exp_d)
BIND_F(expm1, SLEEF_expm1_f)
BIND_D(expm1, SLEEF_expm1_d)
BIND_F(log, SLEEF_log_f)
BIND_D(log, SLEEF_log_d)
BIND_F(log1p, WRAPPED_log1p_f)
BIND_D(log1p, WRAPPED_log1p_d)
BIND_F(sin, SLEEF_sin_f)
BIND_D(sin, SLEEF_sin_d)
BIND_F(cos, SLEEF_cos_f)
BIND_D(cos, SLEEF_cos_d)
BIND_F(tan, SLEEF_tan_f)
BIND_D(tan, SLEEF_tan_d)
BIND_F(tanh, SLEEF_tanh_f)
BIND_D(tanh, SLEEF_tanh_d)
BIND_F(erf, WRAPPED_erf_f)
BIND_D(erf, SLEEF_erf_d)
BIND_F(sinh, WRAPPED_sinh_f)
BIND_D(sinh, WRAPPED_sinh_d)
BIND_F(cosh, WRAPPED_cosh_f)
BIND_D(cosh, WRAPPED_cosh_d)
BIND_F(asin, SLEEF_asin_f)
BIND_D(asin, SLEEF_asin_d)
BIND_F(acos, SLEEF_acos_f)
BIND_D(acos, SLEEF_acos_d)
BIND_F(atan, SLEEF_atan_f)
BIND_D(atan, SLEEF_atan_d)
BIND_F(asinh, WRAPPED_asinh_f)
BIND_D(asinh, WRAPPED_asinh_d)
BIND_F(acosh, WRAPPED_acosh_f)
BIND_D(acosh, WRAPPED_acosh_d)
BIND_F(atanh, SLEEF_atanh_f)
BIND_D(atanh, SLEEF_atanh_d)
BIND_TYPE(pow, f, vv, 4, 8, 16, SLEEF_pow_f)
BIND_TYPE(pow, , vv, 2, 4, 8, SLEEF_pow_d)
