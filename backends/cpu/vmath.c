/* Binds tl_expf and the other functions of vmath.h, and their x86 vector-ABI
 * variants, to SLEEF's deterministic functions: the "finz" family where the
 * CPU has AVX2 and FMA, the "cinz" family elsewhere.  SLEEF is loaded at the
 * first call of any of them (dlopen), not when the program starts: a run
 * that computes no transcendental function no longer pays for loading it
 * and binding its symbols at every start (15 page faults and 0.5 ms of a
 * 2.5 ms process on the Zen 5 VM; tl is linked without -lsleef).  Each
 * entry point is a function of tl's that jumps through a pointer to
 * SLEEF's own entry point, whose calling convention is the vector ABI's,
 * so a call costs what a call to a shared library costs (a jump through a
 * pointer); until SLEEF is loaded the pointer is null and the entry point
 * loads it first, once for the process (pthread_once), publishing every
 * pointer of the family before it returns.  A SLEEF that cannot be loaded
 * leaves every pointer null: the entry points return NaN (all bits set),
 * and tl_vmath_check says why, which the executor asks after each kernel
 * and at the end of a run, so the run fails with that line (TL_ERUNTIME)
 * and nothing prints or exits (it ended the process, until the library
 * audit of December 7).
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
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/status.h"

const char *tl_vmath_family(void);
tl_code tl_vmath_check(tl_status *st);

#ifndef TL_SLEEF_LIB
#define TL_SLEEF_LIB "libsleef.so.3" /* Debian's libsleef3 */
#endif

static bool fma_family(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const char *tl_vmath_family(void)
{
    return fma_family() ? "sleef-finz" : "sleef-cinz";
}

typedef void (*tl_vmath_fn)(void);

static void *sleef;

static atomic_bool failed;
static char failure[400];

static void unusable(const char *what)
{
    if (!atomic_load(&failed))
        snprintf(failure, sizeof failure, "cannot load SLEEF, which computes exp, log, tanh and the other "
                 "transcendental functions: %s", what ? what : "unknown error");
    atomic_store(&failed, true);
}

tl_code tl_vmath_check(tl_status *st)
{
    return atomic_load(&failed) ? tl_fail(st, TL_ERUNTIME, "%s", failure) : TL_OK;
}

/* SLEEF's entry point of this name (NULL, and said, where it has none) */
static tl_vmath_fn sym(const char *name)
{
    void *p = dlsym(sleef, name);
    if (!p) {
        unusable(dlerror());
        return NULL;
    }
    tl_vmath_fn f;
    _Static_assert(sizeof f == sizeof p, "function and object pointers differ in size");
    __builtin_memcpy(&f, &p, sizeof f);
    return f;
}
#define STR(x) STR_(x)
#define STR_(x) #x
#define SYM(NAME) sym(STR(NAME))

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

/* the functions bound to SLEEF directly: the address of FAM's at width W */
#define SLEEF_exp_f(FAM, W) SYM(SLEEF(FAM, exp, f, W))
#define SLEEF_expm1_f(FAM, W) SYM(SLEEF(FAM, expm1, f, W))
#define SLEEF_expm1_d(FAM, W) SYM(SLEEF(FAM, expm1, d, W))
#define SLEEF_log_f(FAM, W) SYM(SLEEF(FAM, log, f, W))
#define SLEEF_log_d(FAM, W) SYM(SLEEF(FAM, log, d, W))
#define SLEEF_sin_f(FAM, W) SYM(SLEEF(FAM, sin, f, W))
#define SLEEF_sin_d(FAM, W) SYM(SLEEF(FAM, sin, d, W))
#define SLEEF_cos_f(FAM, W) SYM(SLEEF(FAM, cos, f, W))
#define SLEEF_cos_d(FAM, W) SYM(SLEEF(FAM, cos, d, W))
#define SLEEF_tan_f(FAM, W) SYM(SLEEF(FAM, tan, f, W))
#define SLEEF_tan_d(FAM, W) SYM(SLEEF(FAM, tan, d, W))
#define SLEEF_tanh_f(FAM, W) SYM(SLEEF(FAM, tanh, f, W))
#define SLEEF_tanh_d(FAM, W) SYM(SLEEF(FAM, tanh, d, W))
#define SLEEF_erf_d(FAM, W) SYM(SLEEF(FAM, erf, d, W))
#define SLEEF_asin_f(FAM, W) SYM(SLEEF(FAM, asin, f, W))
#define SLEEF_asin_d(FAM, W) SYM(SLEEF(FAM, asin, d, W))
#define SLEEF_acos_f(FAM, W) SYM(SLEEF(FAM, acos, f, W))
#define SLEEF_acos_d(FAM, W) SYM(SLEEF(FAM, acos, d, W))
#define SLEEF_atan_f(FAM, W) SYM(SLEEF(FAM, atan, f, W))
#define SLEEF_atan_d(FAM, W) SYM(SLEEF(FAM, atan, d, W))
#define SLEEF_atanh_f(FAM, W) SYM(SLEEF(FAM, atanh, f, W))
#define SLEEF_atanh_d(FAM, W) SYM(SLEEF(FAM, atanh, d, W))
#define SLEEF_pow_f(FAM, W) SYM(SLEEF(FAM, pow, f, W))
#define SLEEF_pow_d(FAM, W) SYM(SLEEF(FAM, pow, d, W))
/* Sleef_finz_fmodf8_avx2 and the like: exact functions have no ulp in their names */
#define SLEEF_EXACT(FAM, F, T, W) CAT5(Sleef_##FAM##_##F, T, LANES_##T##_##W, _, ISA_##FAM##_##W)

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
/* log1p's fix calls SLEEF's scalar log, through pointers set with the rest */
static tl_vmath_fn log_f1_finz, log_f1_cinz, log_d1_finz, log_d1_cinz;
#define FIX_log1p_f(FAM, x) ((float (*)(float))log_f1_##FAM)(x)
#define FIX_log1p_d(FAM, x) ((double (*)(double))log_d1_##FAM)(x)

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

#define S_f float
#define S_d double

/* FAM's wrapper of F in dtype T at vector width W, compiled for TARGET,
 * over SLEEF's function in the pointer sp_FAM_F_TW */
#define WRAP_VEC(FAM, F, T, W, TARGET)                                             \
    static tl_vmath_fn sp_##FAM##_##F##_##T##W;                                    \
    __attribute__((target(TARGET))) static V_##T##_##W wrap_##FAM##_##F##_##T##W(V_##T##_##W x) \
    {                                                                              \
        V_##T##_##W y = ((V_##T##_##W(*)(V_##T##_##W))sp_##FAM##_##F##_##T##W)(x);  \
        __typeof__(x < x) m = EDGE_##F##_##T(x, y);                                \
        if (__builtin_expect(ANY_##W(m) != 0, 0))                                  \
            for (int i = 0; i < LANES_##T##_##W; i++)                              \
                if (m[i])                                                          \
                    y[i] = FIX_##F##_##T(FAM, x[i]);                               \
        return y;                                                                  \
    }
/* ...at every width, and the function that sets its pointers */
#define WRAP_FAMILY(FAM, F, T)                                                     \
    static tl_vmath_fn sp_##FAM##_##F##_##T##1;                                    \
    static S_##T wrap_##FAM##_##F##_##T##1(S_##T x)                                \
    {                                                                              \
        S_##T y = ((S_##T(*)(S_##T))sp_##FAM##_##F##_##T##1)(x);                   \
        return EDGE_##F##_##T(x, y) ? FIX_##F##_##T(FAM, x) : y;                   \
    }                                                                              \
    WRAP_VEC(FAM, F, T, 128, "sse2")                                               \
    WRAP_VEC(FAM, F, T, 256, "avx")                                                \
    WRAP_VEC(FAM, F, T, 512, "avx512f")                                            \
    static void bind_##FAM##_##F##_##T(void)                                       \
    {                                                                              \
        sp_##FAM##_##F##_##T##1 = SYM(SLEEF(FAM, F, T, 1));                        \
        sp_##FAM##_##F##_##T##128 = SYM(SLEEF(FAM, F, T, 128));                    \
        sp_##FAM##_##F##_##T##256 = SYM(SLEEF(FAM, F, T, 256));                    \
        sp_##FAM##_##F##_##T##512 = SYM(SLEEF(FAM, F, T, 512));                    \
    }
#define WRAP(F, T) WRAP_FAMILY(finz, F, T) WRAP_FAMILY(cinz, F, T)
#define WRAPPED(X) X(exp, d) X(log1p, f) X(log1p, d) X(erf, f) X(sinh, f) X(sinh, d) X(cosh, f) \
    X(cosh, d) X(asinh, f) X(asinh, d) X(acosh, f) X(acosh, d)
WRAPPED(WRAP)
/* the wrappers' addresses, as the entries take them */
#define WRAPPED_exp_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_exp_d##W
#define WRAPPED_log1p_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_log1p_f##W
#define WRAPPED_log1p_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_log1p_d##W
#define WRAPPED_erf_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_erf_f##W
#define WRAPPED_sinh_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_sinh_f##W
#define WRAPPED_sinh_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_sinh_d##W
#define WRAPPED_cosh_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_cosh_f##W
#define WRAPPED_cosh_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_cosh_d##W
#define WRAPPED_asinh_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_asinh_f##W
#define WRAPPED_asinh_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_asinh_d##W
#define WRAPPED_acosh_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_acosh_f##W
#define WRAPPED_acosh_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_acosh_d##W

/* fmod: SLEEF's result is exact (the remainder is a number of the type,
 * and SLEEF's equals the C library's bit for bit wherever it gives one:
 * tests/test_vmath.c), but where the quotient |a/b| is beyond what its
 * loop reduces (about 2^70 in float and 2^1000 in double, and so for any
 * a when b is near the least normal number) SLEEF returns NaN.  Its NaN
 * lanes are recomputed by the C library's fmod, which is exact everywhere
 * (and gives NaN where a is infinite, b zero or either NaN).  glibc 2.36's
 * fmodf alone took 66 ms over 4M floats on two threads, SLEEF's 3. */
#define FIX2_fmod_f(a, b) fmodf(a, b)
#define FIX2_fmod_d(a, b) fmod(a, b)
#define WRAP2_VEC(FAM, F, T, W, TARGET)                                            \
    static tl_vmath_fn sp_##FAM##_##F##_##T##W;                                    \
    __attribute__((target(TARGET))) static V_##T##_##W wrap_##FAM##_##F##_##T##W(V_##T##_##W a, \
                                                                                V_##T##_##W b) \
    {                                                                              \
        V_##T##_##W y = ((V_##T##_##W(*)(V_##T##_##W, V_##T##_##W))sp_##FAM##_##F##_##T##W)(a, b); \
        __typeof__(y < y) m = y != y;                                              \
        if (__builtin_expect(ANY_##W(m) != 0, 0))                                  \
            for (int i = 0; i < LANES_##T##_##W; i++)                              \
                if (m[i])                                                          \
                    y[i] = FIX2_##F##_##T(a[i], b[i]);                             \
        return y;                                                                  \
    }
#define WRAP2_FAMILY(FAM, F, T)                                                    \
    static tl_vmath_fn sp_##FAM##_##F##_##T##1;                                    \
    static S_##T wrap_##FAM##_##F##_##T##1(S_##T a, S_##T b)                       \
    {                                                                              \
        S_##T y = ((S_##T(*)(S_##T, S_##T))sp_##FAM##_##F##_##T##1)(a, b);         \
        return y != y ? FIX2_##F##_##T(a, b) : y;                                  \
    }                                                                              \
    WRAP2_VEC(FAM, F, T, 128, "sse2")                                              \
    WRAP2_VEC(FAM, F, T, 256, "avx")                                               \
    WRAP2_VEC(FAM, F, T, 512, "avx512f")                                           \
    static void bind_##FAM##_##F##_##T(void)                                       \
    {                                                                              \
        sp_##FAM##_##F##_##T##1 = SYM(SLEEF_EXACT(FAM, F, T, 1));                  \
        sp_##FAM##_##F##_##T##128 = SYM(SLEEF_EXACT(FAM, F, T, 128));              \
        sp_##FAM##_##F##_##T##256 = SYM(SLEEF_EXACT(FAM, F, T, 256));              \
        sp_##FAM##_##F##_##T##512 = SYM(SLEEF_EXACT(FAM, F, T, 512));              \
    }
#define WRAP2(F, T) WRAP2_FAMILY(finz, F, T) WRAP2_FAMILY(cinz, F, T)
#define WRAPPED2(X) X(fmod, f) X(fmod, d)
WRAPPED2(WRAP2)
#define WRAPPED_fmod_f(FAM, W) (tl_vmath_fn) wrap_##FAM##_fmod_f##W
#define WRAPPED_fmod_d(FAM, W) (tl_vmath_fn) wrap_##FAM##_fmod_d##W

/* ---- every entry point ---- */

/* The seven entry points of F in float (T f, TY f) or double (T empty,
 * TY d), each M(NAME, TARGET, type, ARGS, finz's address, cinz's): width
 * classes 1 (scalar), 128, 256 (both the AVX and the AVX2 name) and 512;
 * ARGS is v (unary) or vv (binary). */
#define TGT_1
#define TGT_b __attribute__((target("sse2")))
#define TGT_c __attribute__((target("avx")))
#define TGT_d __attribute__((target("avx2")))
#define TGT_e __attribute__((target("avx512f")))
#define ENTRIES(M, F, T, TY, ARGS, N128, N256, N512, IMPL)                                              \
    M(tl_##F##T, TGT_1, S_##TY, ARGS, IMPL(finz, 1), IMPL(cinz, 1))                                    \
    M(_ZGVbN##N128##ARGS##_tl_##F##T, TGT_b, V_##TY##_128, ARGS, IMPL(finz, 128), IMPL(cinz, 128))     \
    M(_ZGVcN##N256##ARGS##_tl_##F##T, TGT_c, V_##TY##_256, ARGS, IMPL(finz, 256), IMPL(cinz, 256))     \
    M(_ZGVdN##N256##ARGS##_tl_##F##T, TGT_d, V_##TY##_256, ARGS, IMPL(finz, 256), IMPL(cinz, 256))     \
    M(_ZGVeN##N512##ARGS##_tl_##F##T, TGT_e, V_##TY##_512, ARGS, IMPL(finz, 512), IMPL(cinz, 512))
#define ENTRIES_F(M, F, IMPL) ENTRIES(M, F, f, f, v, 4, 8, 16, IMPL)
#define ENTRIES_D(M, F, IMPL) ENTRIES(M, F, , d, v, 2, 4, 8, IMPL)
#define EVERY_ENTRY(M)                                                             \
    ENTRIES_F(M, exp, SLEEF_exp_f)                                                 \
    ENTRIES_D(M, exp, WRAPPED_exp_d)                                               \
    ENTRIES_F(M, expm1, SLEEF_expm1_f)                                             \
    ENTRIES_D(M, expm1, SLEEF_expm1_d)                                             \
    ENTRIES_F(M, log, SLEEF_log_f)                                                 \
    ENTRIES_D(M, log, SLEEF_log_d)                                                 \
    ENTRIES_F(M, log1p, WRAPPED_log1p_f)                                           \
    ENTRIES_D(M, log1p, WRAPPED_log1p_d)                                           \
    ENTRIES_F(M, sin, SLEEF_sin_f)                                                 \
    ENTRIES_D(M, sin, SLEEF_sin_d)                                                 \
    ENTRIES_F(M, cos, SLEEF_cos_f)                                                 \
    ENTRIES_D(M, cos, SLEEF_cos_d)                                                 \
    ENTRIES_F(M, tan, SLEEF_tan_f)                                                 \
    ENTRIES_D(M, tan, SLEEF_tan_d)                                                 \
    ENTRIES_F(M, tanh, SLEEF_tanh_f)                                               \
    ENTRIES_D(M, tanh, SLEEF_tanh_d)                                               \
    ENTRIES_F(M, erf, WRAPPED_erf_f)                                               \
    ENTRIES_D(M, erf, SLEEF_erf_d)                                                 \
    ENTRIES_F(M, sinh, WRAPPED_sinh_f)                                             \
    ENTRIES_D(M, sinh, WRAPPED_sinh_d)                                             \
    ENTRIES_F(M, cosh, WRAPPED_cosh_f)                                             \
    ENTRIES_D(M, cosh, WRAPPED_cosh_d)                                             \
    ENTRIES_F(M, asin, SLEEF_asin_f)                                               \
    ENTRIES_D(M, asin, SLEEF_asin_d)                                               \
    ENTRIES_F(M, acos, SLEEF_acos_f)                                               \
    ENTRIES_D(M, acos, SLEEF_acos_d)                                               \
    ENTRIES_F(M, atan, SLEEF_atan_f)                                               \
    ENTRIES_D(M, atan, SLEEF_atan_d)                                               \
    ENTRIES_F(M, asinh, WRAPPED_asinh_f)                                           \
    ENTRIES_D(M, asinh, WRAPPED_asinh_d)                                           \
    ENTRIES_F(M, acosh, WRAPPED_acosh_f)                                           \
    ENTRIES_D(M, acosh, WRAPPED_acosh_d)                                           \
    ENTRIES_F(M, atanh, SLEEF_atanh_f)                                             \
    ENTRIES_D(M, atanh, SLEEF_atanh_d)                                             \
    ENTRIES(M, pow, f, f, vv, 4, 8, 16, SLEEF_pow_f)                               \
    ENTRIES(M, pow, , d, vv, 2, 4, 8, SLEEF_pow_d)                                 \
    ENTRIES(M, fmod, f, f, vv, 4, 8, 16, WRAPPED_fmod_f)                           \
    ENTRIES(M, fmod, , d, vv, 2, 4, 8, WRAPPED_fmod_d)

#define PARAMS_v(TY) (TY a)
#define PARAMS_vv(TY) (TY a, TY b)
#define CALL_v (a)
#define CALL_vv (a, b)

static tl_vmath_fn bound(_Atomic(tl_vmath_fn) *p);

/* NAME: a jump through its pointer, bound at the first call of any */
#define ENTRY(NAME, TARGET, TY, ARGS, FINZ, CINZ)                                  \
    static _Atomic(tl_vmath_fn) to_##NAME;                                         \
    TY NAME PARAMS_##ARGS(TY);                                                     \
    TARGET TY NAME PARAMS_##ARGS(TY)                                               \
    {                                                                              \
        tl_vmath_fn f = atomic_load_explicit(&to_##NAME, memory_order_acquire);    \
        if (__builtin_expect(!f, 0) && !(f = bound(&to_##NAME))) {                 \
            TY nan_; /* SLEEF unusable: NaN, and tl_vmath_check says why */        \
            __builtin_memset(&nan_, 0xff, sizeof nan_);                            \
            return nan_;                                                           \
        }                                                                          \
        return ((TY(*) PARAMS_##ARGS(TY))f) CALL_##ARGS;                           \
    }
EVERY_ENTRY(ENTRY)

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* SLEEF loaded, the wrappers' pointers set, then every entry's published */
static void load(void)
{
    if (!(sleef = dlopen(TL_SLEEF_LIB, RTLD_NOW | RTLD_LOCAL))) {
        unusable(dlerror());
        return;
    }
    bool fma = fma_family();
    if (fma) {
        log_f1_finz = SYM(SLEEF(finz, log, f, 1));
        log_d1_finz = SYM(SLEEF(finz, log, d, 1));
    } else {
        log_f1_cinz = SYM(SLEEF(cinz, log, f, 1));
        log_d1_cinz = SYM(SLEEF(cinz, log, d, 1));
    }
#define BIND_WRAPPED(F, T)                                                         \
    if (fma)                                                                       \
        bind_finz_##F##_##T();                                                     \
    else                                                                           \
        bind_cinz_##F##_##T();
    WRAPPED(BIND_WRAPPED)
    WRAPPED2(BIND_WRAPPED)
    if (atomic_load(&failed)) /* a function missing: none published */
        return;
#define PUBLISH(NAME, TARGET, TY, ARGS, FINZ, CINZ)                                \
    atomic_store_explicit(&to_##NAME, fma ? FINZ : CINZ, memory_order_release);
    EVERY_ENTRY(PUBLISH)
}

static tl_vmath_fn bound(_Atomic(tl_vmath_fn) *p)
{
    pthread_once(&once, load);
    return atomic_load_explicit(p, memory_order_acquire);
}
