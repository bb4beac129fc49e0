/* The math functions of the CPU kernels (backends/cpu/vmath.h), proved:
 *   - within 1 ulp of the exact result, for float and double, over more
 *     than a million arguments per function (random bit patterns over the
 *     whole range, and uniform draws where the function is interesting),
 *     measured against glibc's long double functions (64-bit significand:
 *     their own error is a few thousandths of a double's ulp);
 *   - the C99 values at the special arguments (zeros, infinities, NaN,
 *     subnormals, overflow and underflow thresholds, huge trig arguments);
 *   - the vector-ABI variants (SSE, AVX2, AVX-512, whichever this CPU runs)
 *     giving the scalar function's bits on every argument. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/vmath.h"
#include "splitmix.h"

#define NARGS (1 << 20) /* random arguments per function and dtype, besides the specials */

/* the same arguments every run */
static uint64_t rng_state;
static uint64_t next64(void) { return splitmix64(&rng_state); }
static double uniform(double lo, double hi) { return lo + (hi - lo) * ((double)(next64() >> 11) / 9007199254740992.0); }

/* ---- the functions under test, with their references and domains ---- */

typedef struct {
    const char *name;
    float (*f)(float);
    double (*d)(double);
    long double (*ref)(long double);
    double lo, hi; /* where half of the draws fall; the rest are random bit patterns */
} unary_fn;

static const unary_fn unary[] = {
    {"exp", tl_expf, tl_exp, expl, -110, 110},
    {"expm1", tl_expm1f, tl_expm1, expm1l, -20, 20},
    {"log", tl_logf, tl_log, logl, 0, 4},
    {"log1p", tl_log1pf, tl_log1p, log1pl, -1, 4},
    {"sin", tl_sinf, tl_sin, sinl, -20, 20},
    {"cos", tl_cosf, tl_cos, cosl, -20, 20},
    {"tan", tl_tanf, tl_tan, tanl, -20, 20},
    {"tanh", tl_tanhf, tl_tanh, tanhl, -12, 12},
    {"erf", tl_erff, tl_erf, erfl, -6, 6},
    {"sinh", tl_sinhf, tl_sinh, sinhl, -12, 12},
    {"cosh", tl_coshf, tl_cosh, coshl, -12, 12},
    {"asin", tl_asinf, tl_asin, asinl, -1, 1},
    {"acos", tl_acosf, tl_acos, acosl, -1, 1},
    {"atan", tl_atanf, tl_atan, atanl, -20, 20},
    {"asinh", tl_asinhf, tl_asinh, asinhl, -20, 20},
    {"acosh", tl_acoshf, tl_acosh, acoshl, 1, 20},
    {"atanh", tl_atanhf, tl_atanh, atanhl, -1, 1},
};

/* ---- ulp distance from the exact result ---- */

/* |y - r| in ulps of the format (MANT significand bits, EMIN the least
 * normal exponent, MAX the largest finite value) at r, r exact; an r
 * beyond MAX counts as MAX, so a correctly overflowing result measures
 * the distance from infinity as if it were one more ulp. */
static long double ulps(long double y, long double r, int mant, int emin, long double max)
{
    if (isinf(y) && fabsl(r) > max)
        return (signbit(y) == signbit(r)) ? 0 : INFINITY;
    long double ar = fabsl(r) > max ? max : fabsl(r);
    int e = ar == 0 ? emin : ilogbl(ar);
    if (e < emin)
        e = emin;
    long double ulp = ldexpl(1.0L, e - (mant - 1));
    return fabsl(y - r) / ulp;
}
static long double ulps_f(float y, long double r) { return ulps(y, r, 24, -126, FLT_MAX); }
static long double ulps_d(double y, long double r) { return ulps(y, r, 53, -1022, DBL_MAX); }

/* Same class as the exact result: NaN for NaN, the same infinity, a zero
 * of the same sign for an exact zero. */
static bool special_ok(long double y, long double r)
{
    if (isnan(r))
        return isnan(y);
    if (isinf(r))
        return y == r;
    if (r == 0)
        return y == 0 && signbit(y) == signbit(r);
    return true;
}

/* the error bound: 1 ulp, plus what the long double reference may be off
 * (2^-10 ulp of a double is 2^3 long double ulps; of a float, 2^32) */
#define BOUND (1.0L + 0x1p-10L)

/* random float and double bit patterns: every sign and exponent alike */
static float random_float(void)
{
    uint32_t u = (uint32_t)next64();
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static double random_double(void)
{
    uint64_t u = next64();
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static const double specials[] = {
    0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-300, -1e-300, 5e-324, -5e-324,
    1e-45, -1e-45, 1.1754943508222875e-38, 2.2250738585072014e-308, 88.72283172607422, 88.7228317260742,
    89.0, -87.33654, -103.97, -104.0, 709.782712893384, 709.79, -708.4, -745.2, -745.14, 1e10, -1e10,
    1e22, 1e30, -1e30, 3.4028234663852886e38, 1.7976931348623157e308, -1.7976931348623157e308,
    3.141592653589793, 1.5707963267948966, -1.5707963267948966, 6.283185307179586, 0.7853981633974483,
    1e-8, -1e-8, 1e-20, 0.9999999, -0.9999999, -1.0000001, 4.0, 9.0, 10.0, 20.0, -20.0, 30.0, 1e5,
    FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, DBL_MIN, DBL_TRUE_MIN,
    /* the edges of sinh, cosh (overflow), asinh, acosh (huge arguments) */
    88.4, 88.6, 89.2, 89.41, -89.41, 89.42, 709.5, 710.0, 710.47, -710.47, 710.48, 1e18, 1.8e19,
    1.9e19, -1.9e19, 1e150, 1.3e154, 1.4e154, -1.4e154, 1e300, 1.0000001, 1.00000001,
};
#define NSPECIALS (sizeof specials / sizeof specials[0])

typedef struct {
    long double worst;
    double worst_at;
    long fails;
    char first[200];
} tally;

/* One result y of a function at x (pow: at x and b), exact value r: its
 * class must be right and its error within BOUND ulps (of float's or double's). */
static void record(tally *t, const char *fn, bool is_float, double x, double b, bool binary,
                   long double y, long double r)
{
    long double e = isnan(r) || (isinf(r) && y == r) ? 0
                    : is_float                       ? ulps_f((float)y, r)
                                                     : ulps_d((double)y, r);
    if ((!special_ok(y, r) || !(e <= BOUND)) && !t->fails++) {
        char args[80];
        if (binary)
            snprintf(args, sizeof args, "%a, %a", x, b);
        else
            snprintf(args, sizeof args, "%a", x);
        snprintf(t->first, sizeof t->first, "%s%s(%s) = %La, exact %.12La: %.3Lf ulp", fn,
                 is_float ? "f" : "", args, y, r, e);
    }
    if (e > t->worst)
        t->worst = e, t->worst_at = x;
}

static void check_unary(const unary_fn *fn)
{
    tally tf = {0}, td = {0};
    rng_state = 0x5eed0000ull + (uint64_t)(fn - unary);
    for (long i = 0; i < NARGS + (long)NSPECIALS; i++) {
        double x;
        float xf;
        if (i < (long)NSPECIALS) {
            x = specials[i];
            xf = (float)x;
        } else if (i % 2) {
            x = random_double();
            xf = random_float();
        } else {
            x = uniform(fn->lo, fn->hi);
            xf = (float)uniform(fn->lo, fn->hi);
        }
        record(&tf, fn->name, true, xf, 0, false, fn->f(xf), fn->ref(xf));
        record(&td, fn->name, false, x, 0, false, fn->d(x), fn->ref(x));
    }
    cr_log_info("%-6s float worst %.3Lf ulp at %a; double worst %.3Lf ulp at %a", fn->name, tf.worst,
                tf.worst_at, td.worst, td.worst_at);
    cr_expect(tf.fails == 0, "%ld float failures, the first: %s", tf.fails, tf.first);
    cr_expect(td.fails == 0, "%ld double failures, the first: %s", td.fails, td.first);
}

Test(vmath, exp) { check_unary(&unary[0]); }
Test(vmath, expm1) { check_unary(&unary[1]); }
Test(vmath, log) { check_unary(&unary[2]); }
Test(vmath, log1p) { check_unary(&unary[3]); }
Test(vmath, sin) { check_unary(&unary[4]); }
Test(vmath, cos) { check_unary(&unary[5]); }
Test(vmath, tan) { check_unary(&unary[6]); }
Test(vmath, tanh) { check_unary(&unary[7]); }
Test(vmath, erf) { check_unary(&unary[8]); }
Test(vmath, sinh) { check_unary(&unary[9]); }
Test(vmath, cosh) { check_unary(&unary[10]); }
Test(vmath, asin) { check_unary(&unary[11]); }
Test(vmath, acos) { check_unary(&unary[12]); }
Test(vmath, atan) { check_unary(&unary[13]); }
Test(vmath, asinh) { check_unary(&unary[14]); }
Test(vmath, acosh) { check_unary(&unary[15]); }
Test(vmath, atanh) { check_unary(&unary[16]); }

/* pow: positive bases over the whole range with exponents that keep the
 * result near the representable range, negative bases with integer
 * exponents, and the special pairs of C99 (Annex F.10.4.4). */
Test(vmath, pow)
{
    static const double sp[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, INFINITY, -INFINITY, NAN, 1e-310};
    tally tf = {0}, td = {0};
    rng_state = 0x5eed0100ull;
    long nsp = (long)(sizeof sp / sizeof sp[0]);
    for (long i = 0; i < NARGS + nsp * nsp; i++) {
        double a, b;
        if (i < nsp * nsp) {
            a = sp[i / nsp];
            b = sp[i % nsp];
        } else if (i % 3 == 0) {
            a = -uniform(0, 100);
            b = floor(uniform(-60, 60));
        } else if (i % 3 == 1) {
            a = uniform(0, 10);
            b = uniform(-30, 30);
        } else {
            a = fabs(random_double());
            if (isnan(a) || a == 0 || isinf(a))
                a = 1.5;
            b = uniform(-1, 1) * 1000 / fabs((double)ilogb(a) + 0.5);
        }
        float af = (float)a, bf = (float)b;
        if (i >= nsp * nsp && i % 3 == 2) {
            af = fabsf(random_float());
            if (isnan(af) || af == 0 || isinf(af))
                af = 1.5f;
            bf = (float)(uniform(-1, 1) * 120 / fabs((double)ilogbf(af) + 0.5));
        }
        record(&tf, "pow", true, af, bf, true, tl_powf(af, bf), powl(af, bf));
        record(&td, "pow", false, a, b, true, tl_pow(a, b), powl(a, b));
    }
    cr_log_info("pow    float worst %.3Lf ulp; double worst %.3Lf ulp", tf.worst, td.worst);
    cr_expect(tf.fails == 0, "%ld float failures, the first: %s", tf.fails, tf.first);
    cr_expect(td.fails == 0, "%ld double failures, the first: %s", td.fails, td.first);
}

/* ---- the vector variants against the scalar functions, bit for bit ---- */

/* The vector-ABI entry points (vmath.c), declared with their vector types
 * where those types pass in vector registers. */
#define VT __attribute__((target("avx2,fma,avx512f")))
#define VEC_DECLARE(F)                                                             \
    VT __m128 _ZGVbN4v_tl_##F##f(__m128);                                          \
    VT __m128d _ZGVbN2v_tl_##F(__m128d);                                           \
    VT __m256 _ZGVcN8v_tl_##F##f(__m256);                                          \
    VT __m256d _ZGVcN4v_tl_##F(__m256d);                                           \
    VT __m256 _ZGVdN8v_tl_##F##f(__m256);                                          \
    VT __m256d _ZGVdN4v_tl_##F(__m256d);                                           \
    VT __m512 _ZGVeN16v_tl_##F##f(__m512);                                         \
    VT __m512d _ZGVeN8v_tl_##F(__m512d);
TL_VMATH_UNARY(VEC_DECLARE)
#define VEC2_DECLARE(F)                                                            \
    VT __m128 _ZGVbN4vv_tl_##F##f(__m128, __m128);                                 \
    VT __m128d _ZGVbN2vv_tl_##F(__m128d, __m128d);                                 \
    VT __m256 _ZGVcN8vv_tl_##F##f(__m256, __m256);                                 \
    VT __m256d _ZGVcN4vv_tl_##F(__m256d, __m256d);                                 \
    VT __m256 _ZGVdN8vv_tl_##F##f(__m256, __m256);                                 \
    VT __m256d _ZGVdN4vv_tl_##F(__m256d, __m256d);                                 \
    VT __m512 _ZGVeN16vv_tl_##F##f(__m512, __m512);                                \
    VT __m512d _ZGVeN8vv_tl_##F(__m512d, __m512d);
VEC2_DECLARE(pow)
VEC2_DECLARE(fmod)

/* one ISA's runners: y = f(x) (and y = f(x, b)) LANES at a time */
#define RUNNERS(ISA, TARGET, VF, VD, LF, LD, LDF, STF, LDD, STD)                   \
    __attribute__((target(TARGET))) static void run_##ISA##_f(int k, const float *x, const float *b, \
                                                                 float *y, long n)   \
    {                                                                              \
        for (long i = 0; i + LF <= n; i += LF)                                     \
            STF(y + i, k < 0 ? _ZGV##ISA##N##LF##vv_tl_powf(LDF(x + i), LDF(b + i)) \
                             : VEC_UNARY_F(ISA, LF, k, LDF(x + i)));               \
    }                                                                              \
    __attribute__((target(TARGET))) static void run_##ISA##_d(int k, const double *x, const double *b, \
                                                                 double *y, long n)  \
    {                                                                              \
        for (long i = 0; i + LD <= n; i += LD)                                     \
            STD(y + i, k < 0 ? _ZGV##ISA##N##LD##vv_tl_pow(LDD(x + i), LDD(b + i)) \
                             : VEC_UNARY_D(ISA, LD, k, LDD(x + i)));               \
    }

/* the k-th unary function of unary[] (the same order as TL_VMATH_UNARY) */
#define VEC_UNARY_F(ISA, L, k, v)                                                  \
    ((k) == 0 ? _ZGV##ISA##N##L##v_tl_expf(v) : (k) == 1 ? _ZGV##ISA##N##L##v_tl_expm1f(v) \
     : (k) == 2 ? _ZGV##ISA##N##L##v_tl_logf(v) : (k) == 3 ? _ZGV##ISA##N##L##v_tl_log1pf(v) \
     : (k) == 4 ? _ZGV##ISA##N##L##v_tl_sinf(v) : (k) == 5 ? _ZGV##ISA##N##L##v_tl_cosf(v) \
     : (k) == 6 ? _ZGV##ISA##N##L##v_tl_tanf(v) : (k) == 7 ? _ZGV##ISA##N##L##v_tl_tanhf(v) \
     : (k) == 8 ? _ZGV##ISA##N##L##v_tl_erff(v) : (k) == 9 ? _ZGV##ISA##N##L##v_tl_sinhf(v) \
     : (k) == 10 ? _ZGV##ISA##N##L##v_tl_coshf(v) : (k) == 11 ? _ZGV##ISA##N##L##v_tl_asinf(v) \
     : (k) == 12 ? _ZGV##ISA##N##L##v_tl_acosf(v) : (k) == 13 ? _ZGV##ISA##N##L##v_tl_atanf(v) \
     : (k) == 14 ? _ZGV##ISA##N##L##v_tl_asinhf(v) : (k) == 15 ? _ZGV##ISA##N##L##v_tl_acoshf(v) \
                 : _ZGV##ISA##N##L##v_tl_atanhf(v))
#define VEC_UNARY_D(ISA, L, k, v)                                                  \
    ((k) == 0 ? _ZGV##ISA##N##L##v_tl_exp(v) : (k) == 1 ? _ZGV##ISA##N##L##v_tl_expm1(v) \
     : (k) == 2 ? _ZGV##ISA##N##L##v_tl_log(v) : (k) == 3 ? _ZGV##ISA##N##L##v_tl_log1p(v) \
     : (k) == 4 ? _ZGV##ISA##N##L##v_tl_sin(v) : (k) == 5 ? _ZGV##ISA##N##L##v_tl_cos(v) \
     : (k) == 6 ? _ZGV##ISA##N##L##v_tl_tan(v) : (k) == 7 ? _ZGV##ISA##N##L##v_tl_tanh(v) \
     : (k) == 8 ? _ZGV##ISA##N##L##v_tl_erf(v) : (k) == 9 ? _ZGV##ISA##N##L##v_tl_sinh(v) \
     : (k) == 10 ? _ZGV##ISA##N##L##v_tl_cosh(v) : (k) == 11 ? _ZGV##ISA##N##L##v_tl_asin(v) \
     : (k) == 12 ? _ZGV##ISA##N##L##v_tl_acos(v) : (k) == 13 ? _ZGV##ISA##N##L##v_tl_atan(v) \
     : (k) == 14 ? _ZGV##ISA##N##L##v_tl_asinh(v) : (k) == 15 ? _ZGV##ISA##N##L##v_tl_acosh(v) \
                 : _ZGV##ISA##N##L##v_tl_atanh(v))

RUNNERS(b, "sse2", __m128, __m128d, 4, 2, _mm_loadu_ps, _mm_storeu_ps, _mm_loadu_pd, _mm_storeu_pd)
RUNNERS(c, "avx", __m256, __m256d, 8, 4, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_loadu_pd,
        _mm256_storeu_pd)
RUNNERS(d, "avx2,fma", __m256, __m256d, 8, 4, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_loadu_pd,
        _mm256_storeu_pd)
RUNNERS(e, "avx512f", __m512, __m512d, 16, 8, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_loadu_pd,
        _mm512_storeu_pd)

/* the same value, or both NaN */
static bool same_f(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }
static bool same_d(double a, double b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }

#define NVEC (1 << 20)

/* Function k (unary[k], or pow for k = -1) at every ISA this CPU has,
 * against the scalar function. */
static void check_vectors(int k)
{
    float *xf = malloc(NVEC * sizeof *xf), *bf = malloc(NVEC * sizeof *bf), *yf = malloc(NVEC * sizeof *yf);
    double *xd = malloc(NVEC * sizeof *xd), *bd = malloc(NVEC * sizeof *bd), *yd = malloc(NVEC * sizeof *yd);
    cr_assert(xf && bf && yf && xd && bd && yd);
    rng_state = 0x7ec0000ull + (uint64_t)(k + 1);
    for (long i = 0; i < NVEC; i++) {
        bool sp = i < (long)NSPECIALS;
        double lo = k < 0 ? -10 : unary[k].lo, hi = k < 0 ? 10 : unary[k].hi;
        xd[i] = sp ? specials[i] : i % 2 ? random_double() : uniform(lo, hi);
        xf[i] = sp ? (float)specials[i] : i % 2 ? random_float() : (float)uniform(lo, hi);
        bd[i] = i % 4 == 1 ? random_double() : uniform(-20, 20);
        bf[i] = i % 4 == 1 ? random_float() : (float)uniform(-20, 20);
        if (i % 8 == 3)
            bd[i] = floor(bd[i]), bf[i] = floorf(bf[i]);
    }
    struct {
        const char *isa;
        bool have;
        void (*f)(int, const float *, const float *, float *, long);
        void (*d)(int, const double *, const double *, double *, long);
    } isas[] = {
        {"sse2", __builtin_cpu_supports("sse2"), run_b_f, run_b_d},
        {"avx", __builtin_cpu_supports("avx"), run_c_f, run_c_d},
        {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), run_d_f, run_d_d},
        {"avx512f", __builtin_cpu_supports("avx512f"), run_e_f, run_e_d},
    };
    const char *name = k < 0 ? "pow" : unary[k].name;
    for (size_t v = 0; v < sizeof isas / sizeof isas[0]; v++) {
        if (!isas[v].have) {
            cr_log_info("%s: this CPU has no %s; its variant is not checked here", name, isas[v].isa);
            continue;
        }
        isas[v].f(k, xf, bf, yf, NVEC);
        isas[v].d(k, xd, bd, yd, NVEC);
        long bad = 0;
        for (long i = 0; i < NVEC; i++) {
            float sf = k < 0 ? tl_powf(xf[i], bf[i]) : unary[k].f(xf[i]);
            double sd = k < 0 ? tl_pow(xd[i], bd[i]) : unary[k].d(xd[i]);
            if (!same_f(sf, yf[i]) && !bad++)
                cr_log_error("%s %s: %sf(%a) = %a, scalar %a", isas[v].isa, name, name, xf[i], yf[i], sf);
            if (!same_d(sd, yd[i]) && !bad++)
                cr_log_error("%s %s: %s(%a) = %a, scalar %a", isas[v].isa, name, name, xd[i], yd[i], sd);
        }
        cr_expect(bad == 0, "%s %s: %ld elements differ from the scalar function", isas[v].isa, name, bad);
    }
    free(xf), free(bf), free(yf), free(xd), free(bd), free(yd);
}

Test(vmath_vector, exp) { check_vectors(0); }
Test(vmath_vector, expm1) { check_vectors(1); }
Test(vmath_vector, log) { check_vectors(2); }
Test(vmath_vector, log1p) { check_vectors(3); }
Test(vmath_vector, sin) { check_vectors(4); }
Test(vmath_vector, cos) { check_vectors(5); }
Test(vmath_vector, tan) { check_vectors(6); }
Test(vmath_vector, tanh) { check_vectors(7); }
Test(vmath_vector, erf) { check_vectors(8); }
Test(vmath_vector, sinh) { check_vectors(9); }
Test(vmath_vector, cosh) { check_vectors(10); }
Test(vmath_vector, asin) { check_vectors(11); }
Test(vmath_vector, acos) { check_vectors(12); }
Test(vmath_vector, atan) { check_vectors(13); }
Test(vmath_vector, asinh) { check_vectors(14); }
Test(vmath_vector, acosh) { check_vectors(15); }
Test(vmath_vector, atanh) { check_vectors(16); }
Test(vmath_vector, pow) { check_vectors(-1); }

/* The family this process bound: the one its CPU selects. */
Test(vmath, family)
{
    __builtin_cpu_init();
    bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    cr_expect_str_eq(tl_vmath_family(), fma ? "sleef-finz" : "sleef-cinz");
}

/* ---- fmod: exact, so the C library's bits ---- */

#define FMOD_RUNNERS(ISA, TARGET, LF, LD, LDF, STF, LDD, STD)                      \
    __attribute__((target(TARGET))) static void fmod_##ISA##_f(const float *a, const float *b, float *y, \
                                                                long n)            \
    {                                                                              \
        for (long i = 0; i + LF <= n; i += LF)                                     \
            STF(y + i, _ZGV##ISA##N##LF##vv_tl_fmodf(LDF(a + i), LDF(b + i)));     \
    }                                                                              \
    __attribute__((target(TARGET))) static void fmod_##ISA##_d(const double *a, const double *b, double *y, \
                                                                long n)            \
    {                                                                              \
        for (long i = 0; i + LD <= n; i += LD)                                     \
            STD(y + i, _ZGV##ISA##N##LD##vv_tl_fmod(LDD(a + i), LDD(b + i)));      \
    }
FMOD_RUNNERS(b, "sse2", 4, 2, _mm_loadu_ps, _mm_storeu_ps, _mm_loadu_pd, _mm_storeu_pd)
FMOD_RUNNERS(c, "avx", 8, 4, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_loadu_pd, _mm256_storeu_pd)
FMOD_RUNNERS(d, "avx2,fma", 8, 4, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_loadu_pd, _mm256_storeu_pd)
FMOD_RUNNERS(e, "avx512f", 16, 8, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_loadu_pd, _mm512_storeu_pd)

/* a random number of every sign with its exponent in [lo, hi] (binary) */
static double scaled(int lo, int hi) { return ldexp(uniform(-1, 1), lo + (int)(next64() % (uint64_t)(hi - lo + 1))); }

/* tl_fmodf and tl_fmod, one at a time and at every width this CPU runs,
 * against the C library's fmod bit for bit: ordinary operands, random bit
 * patterns, every pair of the specials, divisors near the least normal
 * number and quotients far past 2^70 (float) and 2^1000 (double), where
 * SLEEF's own fmod gives NaN and vmath.c asks the C library instead. */
Test(vmath, fmod_exact)
{
    float *af = malloc(NVEC * sizeof *af), *bf = malloc(NVEC * sizeof *bf), *yf = malloc(NVEC * sizeof *yf);
    double *ad = malloc(NVEC * sizeof *ad), *bd = malloc(NVEC * sizeof *bd), *yd = malloc(NVEC * sizeof *yd);
    cr_assert(af && bf && yf && ad && bd && yd);
    rng_state = 0xf30dull;
    long i = 0, far_f = 0, far_d = 0;
    for (size_t p = 0; p < NSPECIALS; p++)
        for (size_t q = 0; q < NSPECIALS; q++, i++)
            ad[i] = specials[p], bd[i] = specials[q], af[i] = (float)specials[p], bf[i] = (float)specials[q];
    for (; i < NVEC; i++) {
        switch (i % 5) {
        case 0: /* ordinary */
            ad[i] = uniform(-1000, 1000), bd[i] = uniform(-20, 20);
            af[i] = (float)uniform(-1000, 1000), bf[i] = (float)uniform(-20, 20);
            break;
        case 1: /* any bits */
            ad[i] = random_double(), bd[i] = random_double(), af[i] = random_float(), bf[i] = random_float();
            break;
        case 2: /* divisors about the least normal number */
            ad[i] = scaled(-20, 60), bd[i] = scaled(-1074, -1000);
            af[i] = (float)scaled(-20, 60), bf[i] = (float)scaled(-149, -110);
            break;
        default: /* quotients from 2^40 to beyond the loop's reach */
            ad[i] = scaled(0, 1023), bd[i] = scaled(-1000, 0);
            af[i] = (float)scaled(0, 127), bf[i] = (float)scaled(-100, 0);
            break;
        }
        far_f += isfinite(af[i]) && fabsf(af[i]) > 0x1p80f * fabsf(bf[i]);
        far_d += isfinite(ad[i]) && bd[i] != 0 && fabs(ad[i]) > 0x1p1010 * fabs(bd[i]);
    }
    cr_assert(far_f > 10000 && far_d > 10000, "too few far quotients: %ld, %ld", far_f, far_d);
    long bad = 0;
    for (i = 0; i < NVEC; i++) {
        float sf = tl_fmodf(af[i], bf[i]);
        double sd = tl_fmod(ad[i], bd[i]);
        if (!same_f(sf, fmodf(af[i], bf[i])) && !bad++)
            cr_log_error("fmodf(%a, %a) = %a, the C library %a", af[i], bf[i], sf, fmodf(af[i], bf[i]));
        if (!same_d(sd, fmod(ad[i], bd[i])) && !bad++)
            cr_log_error("fmod(%a, %a) = %a, the C library %a", ad[i], bd[i], sd, fmod(ad[i], bd[i]));
    }
    cr_expect(bad == 0, "one at a time: %ld results differ from the C library's", bad);
    struct {
        const char *isa;
        bool have;
        void (*f)(const float *, const float *, float *, long);
        void (*d)(const double *, const double *, double *, long);
    } isas[] = {
        {"sse2", __builtin_cpu_supports("sse2"), fmod_b_f, fmod_b_d},
        {"avx", __builtin_cpu_supports("avx"), fmod_c_f, fmod_c_d},
        {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), fmod_d_f, fmod_d_d},
        {"avx512f", __builtin_cpu_supports("avx512f"), fmod_e_f, fmod_e_d},
    };
    for (size_t v = 0; v < sizeof isas / sizeof isas[0]; v++) {
        if (!isas[v].have) {
            cr_log_info("fmod: this CPU has no %s; its variant is not checked here", isas[v].isa);
            continue;
        }
        isas[v].f(af, bf, yf, NVEC);
        isas[v].d(ad, bd, yd, NVEC);
        bad = 0;
        for (i = 0; i < NVEC; i++) {
            if (!same_f(yf[i], fmodf(af[i], bf[i])) && !bad++)
                cr_log_error("%s fmodf(%a, %a) = %a, the C library %a", isas[v].isa, af[i], bf[i], yf[i],
                             fmodf(af[i], bf[i]));
            if (!same_d(yd[i], fmod(ad[i], bd[i])) && !bad++)
                cr_log_error("%s fmod(%a, %a) = %a, the C library %a", isas[v].isa, ad[i], bd[i], yd[i],
                             fmod(ad[i], bd[i]));
        }
        cr_expect(bad == 0, "%s: %ld results differ from the C library's", isas[v].isa, bad);
    }
    free(af), free(bf), free(yf), free(ad), free(bd), free(yd);
}
