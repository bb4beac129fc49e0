/* Result sets (formats/results.h) and their comparison (formats/compare.h).
 * Tolerance boundaries are computed, not written down: from a reference
 * value, nextafter finds the last value the rule accepts; that one must
 * match and the next one must not.  The rule is evaluated in double as
 * NumPy evaluates it (for f64, numpy.isclose's answer bit for bit); for
 * f32 the answers must also agree with the rule evaluated exactly, in
 * __float128 where the compiler has it. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/compare.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/results.h"
#include "formats/text.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

/* A tensor from a literal such as "f32:[1, nan]" (formats/text.h). */
static tl_tensor *lit(const char *text)
{
    tl_status st;
    tl_tensor *t = tl_literal_parse(text, &st);
    cr_assert(t, "%s: %s", text, st.msg);
    return t;
}

static tl_tensor *zeros(tl_dtype dt, int ndim, const int64_t *shape)
{
    tl_status st;
    tl_tensor *t = tl_tensor_zeros(dt, ndim, shape, &st);
    cr_assert(t, "%s", st.msg);
    return t;
}

/* Compares A = {t: a} with B = {t: b}; returns t's entry (its tensors are
 * the caller's, so it outlives the report). */
static tl_compare_entry compare1(const tl_tensor *a, const tl_tensor *b, const tl_compare_opts *o)
{
    const char *names[] = {"t"};
    tl_result_set sa = tl_result_set_view(1, names, &a), sb = tl_result_set_view(1, names, &b);
    tl_status st;
    tl_compare_report *r = tl_compare(&sa, &sb, o, &st);
    cr_assert(r, "%s", st.msg);
    cr_assert_eq(r->n, 1);
    cr_assert_eq(tl_compare_all_match(r), r->entries[0].match);
    tl_compare_entry e = r->entries[0];
    tl_compare_free(r);
    return e;
}

/* The same for two literals. */
static tl_compare_entry compare_lits(const char *a, const char *b, const tl_compare_opts *o)
{
    tl_tensor *ta = lit(a), *tb = lit(b);
    tl_compare_entry e = compare1(ta, tb, o);
    tl_tensor_unref(ta);
    tl_tensor_unref(tb);
    return e;
}

/* The same for two 0-d tensors of dtype dt (an f32 passes through double
 * exactly). */
static tl_compare_entry compare_values(tl_dtype dt, double a, double b, const tl_compare_opts *o)
{
    tl_status st;
    tl_tensor *ta = tl_tensor_scalar(dt, a, &st), *tb = tl_tensor_scalar(dt, b, &st);
    cr_assert(ta && tb, "%s", st.msg);
    tl_compare_entry e = compare1(ta, tb, o);
    tl_tensor_unref(ta);
    tl_tensor_unref(tb);
    return e;
}

static bool match_f64(double a, double b, const tl_compare_opts *o) { return compare_values(TL_F64, a, b, o).match; }
static bool match_f32(float a, float b, const tl_compare_opts *o) { return compare_values(TL_F32, a, b, o).match; }
static uint64_t ulps_f64(double a, double b) { return compare_values(TL_F64, a, b, NULL).max_ulp; }
static uint64_t ulps_f32(float a, float b) { return compare_values(TL_F32, a, b, NULL).max_ulp; }

/* What a writer prints, as a string the caller frees. */
static char *report_text(const tl_compare_report *r, bool json, bool mismatches_only)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_status st;
    tl_code c = json ? tl_compare_write_json(f, r, &st) : tl_compare_write_text(f, r, mismatches_only, &st);
    fclose(f);
    cr_assert_eq(c, TL_OK, "%s", st.msg);
    return buf;
}

/* ------------------------------------------------------------------ */
/* tolerance boundaries                                                */

/* The rule as tl evaluates it: in double, a and b widened. */
static bool rule(double a, double b, double rtol, double atol) { return fabs(a - b) <= atol + rtol * fabs(b); }

#ifdef __SIZEOF_FLOAT128__
/* The rule in exact arithmetic: for these magnitudes a - b and rtol * |b|
 * are exact in 113 bits, and adding atol rounds far below a double ulp. */
static bool exact_rule(double a, double b, double rtol, double atol)
{
    __float128 d = (__float128)a - (__float128)b, m = (__float128)b;
    d = d < 0 ? -d : d;
    m = m < 0 ? -m : m;
    return d <= (__float128)atol + (__float128)rtol * m;
}
#else
static bool exact_rule(double a, double b, double rtol, double atol) { return rule(a, b, rtol, atol); }
#endif

/* The next value of dtype dt (f32 or f64) after x, towards to. */
static double next_value(tl_dtype dt, double x, double to)
{
    return dt == TL_F32 ? (double)nextafterf((float)x, (float)to) : nextafter(x, to);
}

/* The last value of dtype dt from b in direction dir (+1, -1) that the
 * rule accepts. */
static double edge(tl_dtype dt, double b, double rtol, double atol, int dir)
{
    double to = dir * INFINITY, a = b + dir * (atol + rtol * fabs(b));
    a = dt == TL_F32 ? (double)(float)a : a;
    while (!rule(a, b, rtol, atol))
        a = next_value(dt, a, -to);
    while (rule(next_value(dt, a, to), b, rtol, atol))
        a = next_value(dt, a, to);
    return a;
}

typedef struct tol_case {
    double rtol, atol;
    bool rtol_set;
} tol_case;

static const tol_case tol_cases[] = {
    {0, 0, false},        /* the defaults: rtol 1e-7 (f64) or 1e-5 (f32), atol 0 */
    {0, 1e-9, true},      /* atol only */
    {1e-3, 1e-6, true},   /* both */
    {0.5, 0, true},
};

static const double refs64[] = {1.0, 3.7, -123.456, 0.1, 6.02e23, 1e-300, -2.5e-3, 0.0};
static const float refs32[] = {1.0f, 3.7f, -123.456f, 0.1f, 6.02e23f, 1e-30f, -2.5e-3f, 0.0f};

/* For every tolerance case and reference b: the edge on both sides of b
 * matches and the value past it does not. */
static void check_boundaries(tl_dtype dt, int nrefs, const double *refs, double default_rtol)
{
    for (size_t c = 0; c < sizeof tol_cases / sizeof tol_cases[0]; c++) {
        tol_case tc = tol_cases[c];
        tl_compare_opts o = {.rtol = tc.rtol, .atol = tc.atol, .rtol_set = tc.rtol_set};
        double rtol = tc.rtol_set ? tc.rtol : default_rtol;
        for (int k = 0; k < nrefs; k++) {
            double b = refs[k];
            if (b == 0 && tc.atol == 0)
                continue; /* only b itself passes: tested in zero_needs_atol */
            for (int dir = -1; dir <= 1; dir += 2) {
                double in = edge(dt, b, rtol, tc.atol, dir), out = next_value(dt, in, dir * INFINITY);
                cr_expect(compare_values(dt, in, b, &o).match, "%s b %a rtol %g atol %g: %a should match",
                          tl_dtype_name(dt), b, rtol, tc.atol, in);
                cr_expect(!compare_values(dt, out, b, &o).match, "%s b %a rtol %g atol %g: %a should not",
                          tl_dtype_name(dt), b, rtol, tc.atol, out);
                /* an f32 step is far above double rounding: exact too */
                cr_expect(dt == TL_F64 || (exact_rule(in, b, rtol, tc.atol) && !exact_rule(out, b, rtol, tc.atol)),
                          "b %a: the double rule and the exact one disagree at %a", b, in);
            }
        }
    }
}

Test(tolerance, boundaries_f64)
{
    check_boundaries(TL_F64, sizeof refs64 / sizeof refs64[0], refs64, 1e-7);
}

Test(tolerance, boundaries_f32)
{
    double refs[sizeof refs32 / sizeof refs32[0]];
    for (size_t k = 0; k < sizeof refs32 / sizeof refs32[0]; k++)
        refs[k] = refs32[k];
    check_boundaries(TL_F32, sizeof refs / sizeof refs[0], refs, 1e-5);
}

/* At the last bit, f64 follows NumPy's double evaluation, not exact
 * arithmetic: 1 - (0.5 - 2^-54) rounds to 0.5, so numpy.isclose(0.5 -
 * 2^-54, 1, rtol=0.5, atol=0) is True, as here. */
Test(tolerance, rounding_as_numpy)
{
    tl_compare_opts o = {.rtol = 0.5, .rtol_set = true};
    double a = nextafter(0.5, 0);
    cr_expect(match_f64(a, 1.0, &o));
#ifdef __SIZEOF_FLOAT128__
    cr_expect(!exact_rule(a, 1.0, 0.5, 0), "exactly, |a - 1| = 0.5 + 2^-54 > 0.5");
#endif
    cr_expect(!match_f64(nextafter(a, 0), 1.0, &o));
}

/* The f32 default is 1e-5, not f64's 1e-7: a value 1e-6 away matches as
 * f32 and not as f64. */
Test(tolerance, default_rtol_per_dtype)
{
    cr_expect(match_f32(1.000001f, 1.0f, NULL));
    cr_expect(!match_f64(1.000001, 1.0, NULL));
    cr_expect(match_f64(1.00000001, 1.0, NULL));
    tl_compare_opts o = {.rtol = 1e-7, .rtol_set = true};
    cr_expect(!match_f32(1.000001f, 1.0f, &o), "--rtol applies to f32 too");
}

/* B is the reference: rtol scales |b|, so the rule is not symmetric. */
Test(tolerance, b_is_the_reference)
{
    tl_compare_opts o = {.rtol = 0.5, .rtol_set = true};
    cr_expect(match_f64(1.0, 2.0, &o));   /* |1-2| = 1 <= 0.5 * 2 */
    cr_expect(!match_f64(2.0, 1.0, &o));  /* |2-1| = 1 >  0.5 * 1 */
}

Test(tolerance, zero_needs_atol)
{
    cr_expect(match_f64(0.0, 0.0, NULL));
    cr_expect(match_f64(-0.0, 0.0, NULL));
    cr_expect(!match_f64(DBL_TRUE_MIN, 0.0, NULL), "rtol * 0 leaves no room");
    tl_compare_opts o = {.atol = DBL_TRUE_MIN};
    cr_expect(match_f64(DBL_TRUE_MIN, 0.0, &o));
    cr_expect(!match_f64(2 * DBL_TRUE_MIN, 0.0, &o));
}

/* A difference of two finite doubles beyond DBL_MAX: the naive double
 * test would read inf <= inf and pass with rtol 1.5. */
Test(tolerance, overflowing_difference)
{
    tl_compare_opts o = {.rtol = 1.5, .rtol_set = true};
    cr_expect(!match_f64(DBL_MAX, -DBL_MAX, &o), "2 MAX > 1.5 MAX");
    o.rtol = 2;
    cr_expect(match_f64(DBL_MAX, -DBL_MAX, &o), "2 MAX <= 2 MAX");
    tl_compare_entry e = compare_values(TL_F64, DBL_MAX, -DBL_MAX, &o);
    cr_expect(isinf(e.max_abs) && e.max_abs > 0, "the error is reported as inf");
}

Test(tolerance, infinities_match_only_themselves)
{
    tl_compare_opts loose = {.atol = INFINITY, .rtol = INFINITY, .rtol_set = true};
    cr_expect(match_f64(INFINITY, INFINITY, NULL));
    cr_expect(match_f64(-INFINITY, -INFINITY, NULL));
    cr_expect(!match_f64(INFINITY, -INFINITY, &loose));
    cr_expect(!match_f64(INFINITY, DBL_MAX, &loose));
    cr_expect(!match_f64(1.0, INFINITY, &loose));
    cr_expect(match_f64(-DBL_MAX, DBL_MAX, &loose), "finite values within an infinite atol");
    cr_expect(!match_f32(INFINITY, FLT_MAX, &loose));
    tl_compare_entry e = compare_values(TL_F64, 1.0, INFINITY, NULL);
    cr_expect(isinf(e.max_abs) && isinf(e.max_rel), "an infinity against a number is an infinite error");
    e = compare_values(TL_F64, INFINITY, INFINITY, NULL);
    cr_expect(e.max_abs == 0 && e.max_rel == 0);
}

Test(tolerance, nan)
{
    tl_compare_opts eq = {.equal_nan = true};
    cr_expect(!match_f64(NAN, NAN, NULL));
    cr_expect(match_f64(NAN, NAN, &eq));
    cr_expect(match_f64(NAN, -NAN, &eq), "sign and payload do not matter");
    cr_expect(!match_f64(NAN, 1.0, &eq));
    cr_expect(!match_f64(1.0, NAN, &eq));
    cr_expect(!match_f64(NAN, INFINITY, &eq));
    cr_expect(match_f32(NAN, NAN, &eq));
    cr_expect(!match_f32(NAN, NAN, NULL));
    tl_compare_opts ulp = {.use_ulp = true, .ulp = INT64_MAX};
    cr_expect(!match_f64(NAN, NAN, &ulp));
    ulp.equal_nan = true;
    cr_expect(match_f64(NAN, NAN, &ulp));
}

/* ------------------------------------------------------------------ */
/* ulps                                                                */

static double step64(double x, int n)
{
    for (int i = 0; i < abs(n); i++)
        x = nextafter(x, n > 0 ? INFINITY : -INFINITY);
    return x;
}

static float step32(float x, int n)
{
    for (int i = 0; i < abs(n); i++)
        x = nextafterf(x, n > 0 ? INFINITY : -INFINITY);
    return x;
}

Test(ulp, counts_steps_of_the_dtype)
{
    const double refs[] = {1.0, -1.0, 3.7, 1e-300, DBL_MIN, -DBL_TRUE_MIN, 1e300};
    for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
        for (int n = -5; n <= 5; n++) {
            double b = refs[k], a = step64(b, n);
            cr_expect_eq(ulps_f64(a, b), (uint64_t)abs(n), "%a and %a", a, b);
            tl_compare_opts o = {.use_ulp = true, .ulp = abs(n)};
            cr_expect(match_f64(a, b, &o));
            if (n) {
                o.ulp = abs(n) - 1;
                cr_expect(!match_f64(a, b, &o), "%a and %a are %d ulp apart", a, b, abs(n));
            }
        }
    /* in f32, one f32 step is one ulp (2^29 steps of a double) */
    cr_expect_eq(ulps_f32(step32(1.0f, 1), 1.0f), 1);
    cr_expect_eq(ulps_f32(step32(1.0f, -3), 1.0f), 3);
    cr_expect_eq(ulps_f32(step32(-FLT_TRUE_MIN, 4), -FLT_TRUE_MIN), 4);
    tl_compare_opts o = {.use_ulp = true, .ulp = 1};
    cr_expect(match_f32(step32(1.0f, 1), 1.0f, &o));
    cr_expect(!match_f32(step32(1.0f, 2), 1.0f, &o));
}

Test(ulp, across_zero)
{
    cr_expect_eq(ulps_f64(0.0, -0.0), 0);
    cr_expect_eq(ulps_f64(DBL_TRUE_MIN, 0.0), 1);
    cr_expect_eq(ulps_f64(DBL_TRUE_MIN, -0.0), 1);
    cr_expect_eq(ulps_f64(DBL_TRUE_MIN, -DBL_TRUE_MIN), 2);
    cr_expect_eq(ulps_f64(-2 * DBL_TRUE_MIN, 3 * DBL_TRUE_MIN), 5);
    cr_expect_eq(ulps_f32(0.0f, -0.0f), 0);
    cr_expect_eq(ulps_f32(FLT_TRUE_MIN, -FLT_TRUE_MIN), 2);
    tl_compare_opts o = {.use_ulp = true, .ulp = 0};
    cr_expect(match_f64(0.0, -0.0, &o), "+0 and -0 are 0 ulp apart");
    cr_expect(match_f32(-0.0f, 0.0f, &o));
    o.ulp = 1;
    cr_expect(!match_f64(DBL_TRUE_MIN, -DBL_TRUE_MIN, &o));
    o.ulp = 2;
    cr_expect(match_f64(DBL_TRUE_MIN, -DBL_TRUE_MIN, &o));
}

Test(ulp, infinities)
{
    cr_expect_eq(ulps_f64(INFINITY, DBL_MAX), 1, "infinity is the step after the largest finite value");
    cr_expect_eq(ulps_f32(INFINITY, FLT_MAX), 1);
    tl_compare_opts o = {.use_ulp = true, .ulp = INT64_MAX};
    cr_expect(!match_f64(INFINITY, DBL_MAX, &o), "but an infinity matches only itself");
    cr_expect(!match_f64(-INFINITY, INFINITY, &o));
    o.ulp = 0;
    cr_expect(match_f64(INFINITY, INFINITY, &o));
    cr_expect(match_f32(-INFINITY, -INFINITY, &o));
    /* the widest distance, beyond INT64_MAX */
    cr_expect_eq(ulps_f64(-DBL_MAX, DBL_MAX), 2 * 0x7fefffffffffffffULL);
    o.ulp = INT64_MAX;
    cr_expect(!match_f64(-DBL_MAX, DBL_MAX, &o));
    cr_expect(match_f64(0.0, DBL_MAX, &o));
}

/* ------------------------------------------------------------------ */
/* index tensors                                                       */

Test(index, exact_whatever_the_tolerance)
{
    tl_compare_opts loose = {.rtol = 1, .atol = 100, .rtol_set = true};
    tl_compare_entry e = compare_lits("i64:[1, 2, 3]", "i64:[1, 2, 4]", &loose);
    cr_expect(!e.match);
    cr_expect_eq(e.mismatches, 1);
    cr_expect_eq(e.max_abs_int, 1);
    cr_expect_eq(e.worst, 2);
    cr_expect(compare_lits("i64:[1, 2, 3]", "i64:[1, 2, 3]", &loose).match);
}

/* 2^53 + 1 and 2^53 are one apart, though equal as doubles. */
Test(index, all_64_bits)
{
    int64_t shape[] = {2};
    tl_tensor *a = zeros(TL_I64, 1, shape), *b = zeros(TL_I64, 1, shape);
    ((int64_t *)a->data)[0] = (1LL << 53) + 1;
    ((int64_t *)b->data)[0] = 1LL << 53;
    ((int64_t *)a->data)[1] = INT64_MIN;
    ((int64_t *)b->data)[1] = INT64_MAX;
    tl_compare_entry e = compare1(a, b, NULL);
    cr_expect_eq(e.mismatches, 2);
    cr_expect_eq(e.max_abs_int, UINT64_MAX, "INT64_MAX - INT64_MIN, exactly");
    cr_expect_eq(e.worst, 1);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
}

Test(index, i32)
{
    cr_expect(compare_lits("i32:[-5, 7]", "i32:[-5, 7]", NULL).match);
    cr_expect(!compare_lits("i32:[-5, 7]", "i32:[-5, 8]", NULL).match);
}

/* ------------------------------------------------------------------ */
/* per-tensor reports                                                  */

Test(report, worst_index_and_counts)
{
    int64_t shape[] = {2, 3, 4};
    tl_tensor *a = zeros(TL_F64, 3, shape), *b = zeros(TL_F64, 3, shape);
    for (int64_t i = 0; i < 24; i++) {
        tl_tensor_set(a, i, (double)i);
        tl_tensor_set(b, i, (double)i);
    }
    tl_tensor_set(a, 5, 5.5);   /* [0,1,1]: off by 0.5 */
    tl_tensor_set(a, 23, 20.0); /* [1,2,3]: off by 3, the worst */
    tl_tensor_set(a, 7, 7.0 + 7e-8); /* within rtol 1e-7: a match, not counted */
    tl_compare_entry e = compare1(a, b, NULL);
    cr_expect(!e.match);
    cr_expect_eq(e.mismatches, 2);
    cr_expect_eq(e.worst, 23);
    cr_expect_eq(e.max_abs, 3.0);
    cr_expect_eq(e.max_rel, 3.0 / 23.0);
    cr_expect_eq(e.rtol, 1e-7);
    cr_expect_eq(e.atol, 0);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
}

/* A NaN that does not match is the worst element, but the errors are
 * those of the other elements. */
Test(report, nan_is_worst_and_not_in_the_errors)
{
    tl_compare_entry e = compare_lits("[1, nan, 10]", "[1.5, 1, 10]", NULL);
    cr_expect_eq(e.mismatches, 2);
    cr_expect_eq(e.worst, 1);
    cr_expect_eq(e.max_abs, 0.5);
}

Test(report, matching_pair_keeps_its_largest_error)
{
    tl_compare_entry e = compare_lits("f32:[1, 2.00001]", "f32:[1, 2]", NULL);
    cr_expect(e.match);
    cr_expect_eq(e.worst, 1);
    cr_expect_eq(e.max_abs, (double)2.00001f - 2.0, "f32 errors are exact in double");
    uint64_t steps = 0;
    for (float x = 2.0f; x < 2.00001f; x = nextafterf(x, 3.0f))
        steps++;
    cr_expect_eq(e.max_ulp, steps);
    e = compare_lits("[1, 2]", "[1, 2]", NULL);
    cr_expect(e.match);
    cr_expect_eq(e.worst, -1, "no error, no worst element");
}

Test(report, empty_tensors_match)
{
    int64_t shape[] = {0, 3};
    tl_tensor *a = zeros(TL_F32, 2, shape), *b = zeros(TL_F32, 2, shape);
    tl_compare_entry e = compare1(a, b, NULL);
    cr_expect(e.match);
    cr_expect_eq(e.worst, -1);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
}

Test(report, dtype_and_shape_differences)
{
    tl_compare_entry e = compare_lits("f32:[1, 2]", "[1, 2]", NULL);
    cr_expect(!e.match);
    cr_expect_eq(e.reason, TL_CMP_DTYPE);
    cr_expect_eq(e.worst, -1);
    e = compare_lits("[[1], [2]]", "[1, 2]", NULL);
    cr_expect(!e.match);
    cr_expect_eq(e.reason, TL_CMP_SHAPE);
    cr_expect_eq(compare_lits("1", "[1]", NULL).reason, TL_CMP_SHAPE, "[] is not [1]");
    cr_expect_eq(compare_lits("i32:[1]", "i64:[1]", NULL).reason, TL_CMP_DTYPE);
}

/* ------------------------------------------------------------------ */
/* pairing and whole reports                                           */

typedef struct two_sets {
    tl_tensor *x, *y, *y2, *z;
    const char *na[2], *nb[2];
    const tl_tensor *ta[2], *tb[2];
    tl_result_set a, b;
} two_sets;

/* A = {x, y}, B = {y (one element off), z}. */
static void two_sets_init(two_sets *s)
{
    s->x = lit("[1, 2]");
    s->y = lit("[3, 4]");
    s->y2 = lit("[3, 4.5]");
    s->z = lit("f32:7");
    s->na[0] = "x", s->na[1] = "y", s->nb[0] = "z", s->nb[1] = "y";
    s->ta[0] = s->x, s->ta[1] = s->y, s->tb[0] = s->z, s->tb[1] = s->y2;
    s->a = tl_result_set_view(2, s->na, s->ta);
    s->b = tl_result_set_view(2, s->nb, s->tb);
}

static void two_sets_fini(two_sets *s)
{
    tl_tensor_unref(s->x);
    tl_tensor_unref(s->y);
    tl_tensor_unref(s->y2);
    tl_tensor_unref(s->z);
}

Test(pairing, missing_keys_both_ways)
{
    two_sets s;
    two_sets_init(&s);
    tl_status st;
    tl_compare_report *r = tl_compare(&s.a, &s.b, NULL, &st);
    cr_assert(r, "%s", st.msg);
    cr_assert_eq(r->n, 3);
    cr_expect_str_eq(r->entries[0].name, "x");
    cr_expect_eq(r->entries[0].reason, TL_CMP_ONLY_A);
    cr_expect_str_eq(r->entries[1].name, "y");
    cr_expect_eq(r->entries[1].reason, TL_CMP_COMPARED);
    cr_expect_eq(r->entries[1].worst, 1);
    cr_expect_str_eq(r->entries[2].name, "z");
    cr_expect_eq(r->entries[2].reason, TL_CMP_ONLY_B);
    cr_expect_eq(r->mismatched, 3);
    cr_expect(!tl_compare_all_match(r));
    tl_compare_free(r);
    two_sets_fini(&s);
}

Test(pairing, anonymous_npy_pairs_with_the_only_tensor)
{
    tl_tensor *y = lit("[1, 2]");
    const char *na[] = {"y"}, *nb[] = {"golden.npy"};
    const tl_tensor *ta[] = {y}, *tb[] = {y};
    tl_result_set a = tl_result_set_view(1, na, ta), b = tl_result_set_view(1, nb, tb);
    b.anonymous = true;
    tl_status st;
    tl_compare_report *r = tl_compare(&a, &b, NULL, &st);
    cr_assert(r, "%s", st.msg);
    cr_expect_eq(r->n, 1);
    cr_expect_str_eq(r->entries[0].name, "y", "the named side names the pair");
    cr_expect(tl_compare_all_match(r));
    tl_compare_free(r);
    b.anonymous = false;
    r = tl_compare(&a, &b, NULL, &st);
    cr_expect_eq(r->n, 2, "without it, names must agree");
    tl_compare_free(r);
    tl_tensor_unref(y);
}

Test(pairing, bad_options_and_duplicate_names)
{
    two_sets s;
    two_sets_init(&s);
    tl_status st;
    const tl_compare_opts bad[] = {
        {.rtol = -1, .rtol_set = true}, {.atol = -1e-9}, {.atol = NAN}, {.rtol = NAN, .rtol_set = true},
        {.use_ulp = true, .ulp = -1},   {.use_ulp = true, .ulp = 2, .rtol_set = true, .rtol = 1e-3},
        {.use_ulp = true, .atol_set = true},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cr_expect_null(tl_compare(&s.a, &s.b, &bad[k], &st), "options %zu", k);
        cr_expect_eq(st.code, TL_EINPUT, "options %zu: %s", k, st.msg);
    }
    s.na[0] = "y"; /* A = {y, y} */
    cr_expect_null(tl_compare(&s.a, &s.b, NULL, &st));
    cr_expect_eq(st.code, TL_EINPUT);
    cr_expect(strstr(st.msg, "'y'"), "%s", st.msg);
    two_sets_fini(&s);
}

Test(writers, text_report)
{
    two_sets s;
    two_sets_init(&s);
    tl_status st;
    tl_compare_report *r = tl_compare(&s.a, &s.b, NULL, &st);
    char *text = report_text(r, false, false);
    cr_expect(strstr(text, "MISMATCH  x  f64[2]  only in A (missing from B)\n"), "%s", text);
    cr_expect(strstr(text, "MISMATCH  y  f64[2]  max abs 0.5  max rel 0.1111  "
                           "1 of 2 differ, worst [1]: a 4.0, b 4.5\n"), "%s", text);
    cr_expect(strstr(text, "MISMATCH  z  f32[]   only in B (missing from A)\n"), "%s", text);
    cr_expect(strstr(text, "3 of 3 tensors differ (rtol 1e-07 for f64, 1e-05 for f32; atol 0.0)\n"), "%s", text);
    free(text);
    tl_compare_free(r);
    s.b.n = 1; /* B = {z}; A's x and y only in A */
    s.tb[0] = s.x, s.nb[0] = "x";
    r = tl_compare(&s.a, &s.b, NULL, &st);
    text = report_text(r, false, true);
    cr_expect(!strstr(text, "x  "), "matches left out:\n%s", text);
    cr_expect(strstr(text, "MISMATCH  y  f64[2]  only in A (missing from B)\n1 of 2 tensors differs"), "%s", text);
    free(text);
    tl_compare_free(r);
    two_sets_fini(&s);
}

static const cJSON *field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_assert(v, "no field %s", key);
    return v;
}

Test(writers, json_report)
{
    two_sets s;
    two_sets_init(&s);
    tl_status st;
    tl_compare_opts o = {.equal_nan = true, .atol = 1e-9};
    tl_compare_report *r = tl_compare(&s.a, &s.b, &o, &st);
    char *text = report_text(r, true, false);
    cJSON *doc = cJSON_Parse(text);
    cr_assert(doc, "not JSON:\n%s", text);
    cr_expect(cJSON_IsFalse(field(doc, "match")));
    cr_expect_eq(field(doc, "total")->valueint, 3);
    cr_expect_eq(field(doc, "mismatched")->valueint, 3);
    cr_expect(cJSON_IsNull(field(doc, "rtol")));
    cr_expect_eq(field(doc, "atol")->valuedouble, 1e-9);
    cr_expect(cJSON_IsNull(field(doc, "ulp")));
    cr_expect(cJSON_IsTrue(field(doc, "equal_nan")));
    const cJSON *ts = field(doc, "tensors");
    cr_assert_eq(cJSON_GetArraySize(ts), 3);
    const cJSON *x = cJSON_GetArrayItem(ts, 0), *y = cJSON_GetArrayItem(ts, 1), *z = cJSON_GetArrayItem(ts, 2);
    cr_expect_str_eq(field(x, "reason")->valuestring, "only in A");
    cr_expect(cJSON_IsNull(field(x, "b_dtype")));
    cr_expect_str_eq(field(x, "dtype")->valuestring, "f64");
    cr_expect(cJSON_IsNull(field(x, "mismatches")));
    cr_expect_str_eq(field(z, "reason")->valuestring, "only in B");
    cr_expect(cJSON_IsNull(field(z, "dtype")));
    cr_expect_str_eq(field(z, "b_dtype")->valuestring, "f32");
    cr_expect_eq(cJSON_GetArraySize(field(z, "b_shape")), 0);
    cr_expect_str_eq(field(y, "name")->valuestring, "y");
    cr_expect(cJSON_IsFalse(field(y, "match")));
    cr_expect(cJSON_IsNull(field(y, "reason")));
    cr_expect_eq(field(y, "mismatches")->valueint, 1);
    cr_expect_eq(field(y, "max_abs_error")->valuedouble, 0.5);
    cr_expect_eq(field(y, "max_rel_error")->valuedouble, 0.5 / 4.5);
    cr_expect_eq(field(y, "max_ulp_error")->valuedouble, 562949953421312.0, "0.5 in steps of 2^-50");
    cr_expect_eq(field(y, "rtol")->valuedouble, 1e-7);
    cr_expect_eq(field(y, "atol")->valuedouble, 1e-9);
    cr_expect_eq(cJSON_GetArrayItem(field(y, "worst_index"), 0)->valueint, 1);
    cr_expect_eq(field(y, "a")->valuedouble, 4.0);
    cr_expect_eq(field(y, "b")->valuedouble, 4.5);
    cJSON_Delete(doc);
    free(text);
    tl_compare_free(r);
    two_sets_fini(&s);
}

/* Names from an .npz may hold any bytes: the json report stays JSON. */
Test(writers, hostile_names)
{
    tl_tensor *t = lit("nan");
    const char *na[] = {"a\"b\\c\n\x01", "\xff\xfe bad utf-8 \xc3\xa9"};
    const tl_tensor *ta[] = {t, t};
    tl_result_set a = tl_result_set_view(2, na, ta), b = tl_result_set_view(0, NULL, NULL);
    tl_status st;
    tl_compare_report *r = tl_compare(&a, &b, NULL, &st);
    char *text = report_text(r, true, false);
    cJSON *doc = cJSON_Parse(text);
    cr_assert(doc, "not JSON:\n%s", text);
    const cJSON *ts = field(doc, "tensors");
    cr_expect_str_eq(field(cJSON_GetArrayItem(ts, 0), "name")->valuestring, "a\"b\\c\n\x01");
    cr_expect_str_eq(field(cJSON_GetArrayItem(ts, 1), "name")->valuestring,
                     "\xef\xbf\xbd\xef\xbf\xbd bad utf-8 \xc3\xa9");
    cJSON_Delete(doc);
    free(text);
    text = report_text(r, false, false);
    cr_expect(strstr(text, "MISMATCH  a\"b\\c\\x0a\\x01 "), "control characters escaped:\n%s", text);
    free(text);
    tl_compare_free(r);
    tl_tensor_unref(t);
}

Test(writers, nan_values_in_json)
{
    tl_tensor *a = lit("f32:[nan, -inf]"), *b = lit("f32:[1, -inf]");
    const char *n[] = {"t"};
    tl_result_set sa = tl_result_set_view(1, n, (const tl_tensor *const[]){a});
    tl_result_set sb = tl_result_set_view(1, n, (const tl_tensor *const[]){b});
    tl_status st;
    tl_compare_report *r = tl_compare(&sa, &sb, NULL, &st);
    char *text = report_text(r, true, false);
    cr_expect(strstr(text, "\"worst_index\": [0], \"a\": \"nan\", \"b\": 1.0}"), "%s", text);
    cJSON *doc = cJSON_Parse(text);
    cr_expect(doc, "not JSON:\n%s", text);
    cJSON_Delete(doc);
    free(text);
    tl_compare_free(r);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
}

/* ------------------------------------------------------------------ */
/* reading result files                                                */

static tl_result_set *read_text(const char *text, tl_status *st)
{
    return tl_result_set_read_mem(text, strlen(text), "x.npy", st);
}

static tl_result_set *read_ok(const char *text)
{
    tl_status st;
    tl_result_set *s = read_text(text, &st);
    cr_assert(s, "%s: %s", text, st.msg);
    return s;
}

static void expect_bad(const char *text, const char *msg)
{
    tl_status st;
    tl_result_set *s = read_text(text, &st);
    cr_expect_null(s, "accepted: %s", text);
    tl_result_set_free(s);
    cr_expect_eq(st.code, TL_EINPUT, "%s: %s", text, st.msg);
    cr_expect(strstr(st.msg, msg), "%s\n  said: %s\n  want: %s", text, st.msg, msg);
}

Test(read, json_outputs_and_grads)
{
    tl_result_set *s = read_ok("{\"device\": \"cpu\", \"outputs\": {\"y\": {\"dtype\": \"f32\", \"shape\": [2], "
                               "\"data\": [1.5, \"-inf\"]}}, \"grads\": {\"x\": {\"dtype\": \"i64\", \"shape\": "
                               "[], \"data\": [-9223372036854775808]}}}\n");
    cr_assert_eq(s->n, 2);
    cr_expect(!s->anonymous);
    cr_expect_str_eq(s->names[0], "y");
    cr_expect_str_eq(s->names[1], "grad/x");
    cr_expect_eq(s->ts[0]->dtype, TL_F32);
    cr_expect_eq(tl_tensor_get(s->ts[0], 1), -INFINITY);
    cr_expect_eq(s->ts[1]->ndim, 0);
    cr_expect_eq(tl_tensor_get_int(s->ts[1], 0), INT64_MIN);
    tl_result_set_free(s);
}

/* Random bits in n elements of t[0] (f32), t[1] (f64) and t[2] (i64):
 * every kind of number, NaNs and subnormals included. */
static void random_bits(tl_tensor *const t[3], int n, uint64_t s)
{
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t b32 = (uint32_t)(s >> 32);
        uint64_t b64 = s ^ (s << 17);
        memcpy((float *)t[0]->data + i, &b32, 4);
        memcpy((double *)t[1]->data + i, &b64, 8);
        ((int64_t *)t[2]->data)[i] = (int64_t)b64;
    }
}

/* Every f32 and f64 that tl prints reads back to the same bits, and every
 * i64: numbers are read from their digits, not through a double. */
Test(read, json_round_trips_bits)
{
    enum { N = 4000 };
    int64_t n = N;
    tl_tensor *t[3] = {zeros(TL_F32, 1, &n), zeros(TL_F64, 1, &n), zeros(TL_I64, 1, &n)};
    random_bits(t, N, 12345);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_status st;
    fputs("{\"outputs\": {", f);
    for (int k = 0; k < 3; k++) {
        fprintf(f, "%s\"t%d\": ", k ? ", " : "", k);
        cr_assert_eq(tl_json_tensor_write(f, t[k], &st), TL_OK);
    }
    fputs("}}", f);
    fclose(f);
    tl_result_set *r = tl_result_set_read_mem(buf, len, "-", &st);
    cr_assert(r, "%s", st.msg);
    for (int k = 0; k < 3; k++) {
        size_t sz = tl_dtype_size(t[k]->dtype);
        for (int i = 0; i < N; i++) {
            const char *x = (const char *)t[k]->data + i * sz, *y = (const char *)r->ts[k]->data + i * sz;
            double v = tl_tensor_get(t[k], i);
            cr_expect(isnan(v) || !memcmp(x, y, sz), "t%d[%d]: %.17g read back as %.17g", k, i, v,
                      tl_tensor_get(r->ts[k], i));
        }
    }
    tl_result_set_free(r);
    free(buf);
    for (int k = 0; k < 3; k++)
        tl_tensor_unref(t[k]);
}

Test(read, npz_and_npy)
{
    tl_tensor *x = lit("[1, 2]"), *i = lit("i32:[7]");
    const char *keys[] = {"y", "grad/x"};
    const tl_tensor *ts[] = {x, i};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_status st;
    cr_assert_eq(tl_npz_write(f, 2, keys, ts, true, &st), TL_OK, "%s", st.msg);
    fclose(f);
    tl_result_set *s = tl_result_set_read_mem(buf, len, "ignored", &st);
    cr_assert(s, "%s", st.msg);
    cr_expect_eq(s->n, 2);
    cr_expect(!s->anonymous);
    cr_expect_str_eq(s->names[1], "grad/x");
    cr_expect_eq(s->ts[1]->dtype, TL_I32);
    tl_result_set_free(s);
    free(buf);
    unsigned char *npy;
    cr_assert_eq(tl_npy_encode(x, &npy, &len, &st), TL_OK);
    s = tl_result_set_read_mem(npy, len, "golden.npy", &st);
    cr_assert(s, "%s", st.msg);
    cr_expect_eq(s->n, 1);
    cr_expect(s->anonymous);
    cr_expect_str_eq(s->names[0], "golden.npy");
    cr_expect_eq(tl_tensor_get(s->ts[0], 1), 2.0);
    tl_result_set_free(s);
    free(npy);
    tl_tensor_unref(x);
    tl_tensor_unref(i);
}

Test(read, order_and_lookup)
{
    tl_result_set *s = read_ok("{\"outputs\": {\"b\": {\"dtype\": \"f64\", \"shape\": [], \"data\": [1]},"
                               " \"a\": {\"dtype\": \"f64\", \"shape\": [], \"data\": [2]}},"
                               " \"grads\": {\"a\": {\"dtype\": \"f64\", \"shape\": [], \"data\": [3]}}}");
    tl_status st;
    int *order = tl_result_set_order(s, &st);
    cr_assert(order);
    cr_expect_eq(tl_result_set_lookup(s, order, "a"), 1);
    cr_expect_eq(tl_result_set_lookup(s, order, "b"), 0);
    cr_expect_eq(tl_result_set_lookup(s, order, "grad/a"), 2);
    cr_expect_eq(tl_result_set_lookup(s, order, "c"), -1);
    free(order);
    tl_result_set_free(s);
}

#define T1(dtype, shape, data) \
    "{\"outputs\": {\"y\": {\"dtype\": " dtype ", \"shape\": " shape ", \"data\": " data "}}}"

Test(read, hostile_json)
{
    expect_bad("", "empty file");
    expect_bad("   \n", "not a result file");
    expect_bad("[1, 2]", "not a result file");
    expect_bad("{\"outputs\": {\"y\": ", "line 1, column 19: malformed JSON (unexpected end of the text)");
    expect_bad("{\"outputs\": {\"y\": \n\n", "line 3, column 1: malformed JSON (unexpected end of the text)");
    expect_bad("{\"outputs\": {}}\n{}", "line 2, column 1: text after the result object");
    expect_bad("{\n  \"outputs\": {,}}", "line 2, column ");
    expect_bad("{\n  \"outputs\": {,}}", ": malformed JSON");
    expect_bad("{\"device\": \"cpu\"}", "not tl's json result format");
    expect_bad("{\"outputs\": [1]}", "\"outputs\" is an array, expected an object of tensors");
    expect_bad("{\"outputs\": {}, \"grads\": 3}", "\"grads\" is 3, expected an object");
    expect_bad("{\"outputs\": {\"y\": [1, 2]}}", "outputs \"y\": is an array, expected an object");
    expect_bad("{\"grads\": {\"x\": {\"dtype\": \"f64\", \"shape\": [1]}}}", "grads \"x\": no \"data\"");
    expect_bad("{\"outputs\": {\"y\": {\"shape\": [1], \"data\": [1]}}}", "outputs \"y\": no \"dtype\"");
    expect_bad(T1("\"c64\"", "[1]", "[1]"), "\"dtype\" is \"c64\", expected \"f32\", \"f64\", \"i32\" or \"i64\"");
    expect_bad(T1("64", "[1]", "[1]"), "\"dtype\" is 64, expected");
    expect_bad(T1("\"f64\"", "3", "[1, 2, 3]"), "\"shape\" is 3, expected an array of at most 16 sizes");
    expect_bad(T1("\"f64\"", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]", "[1]"), "at most 16 sizes");
    expect_bad(T1("\"f64\"", "[-1]", "[]"), "shape[0] is -1: negative");
    expect_bad(T1("\"f64\"", "[2.5]", "[1, 2]"), "shape[0] is 2.5: not an integer");
    expect_bad(T1("\"f64\"", "[\"2\"]", "[1, 2]"), "shape[0] is \"2\": not an integer");
    expect_bad(T1("\"f64\"", "[99999999999999999999]", "[1]"), "shape[0] is 99999999999999999999: out of range");
    expect_bad(T1("\"f64\"", "[4294967296, 4294967296, 4294967296]", "[1]"), "outputs \"y\": ");
    expect_bad(T1("\"f64\"", "[3]", "[1, 2]"), "\"data\" has 2 values, expected the 3 of f64[3]");
    expect_bad(T1("\"f64\"", "[2, 2]", "[[1, 2], [3, 4]]"), "\"data\" has 2 values, expected the 4 of f64[2,2]");
    expect_bad(T1("\"f64\"", "[]", "1"), "\"data\" is 1, expected a flat array of the 1 values of f64[]");
    expect_bad(T1("\"f64\"", "[2]", "[1, \"NaN\"]"), "data[1] is \"NaN\": not a number, \"nan\", \"inf\" or \"-inf\"");
    expect_bad(T1("\"f64\"", "[1]", "[\"Infinity\"]"), "data[0] is \"Infinity\": not a number");
    expect_bad(T1("\"f64\"", "[1]", "[null]"), "data[0] is null: not a number");
    expect_bad(T1("\"f64\"", "[1]", "[true]"), "data[0] is true: not a number");
    expect_bad(T1("\"f64\"", "[1]", "[1e999]"), "data[0] is 1e999: out of range for f64");
    expect_bad(T1("\"f32\"", "[1]", "[3.5e38]"), "data[0] is 3.5e38: out of range for f32");
    expect_bad(T1("\"i64\"", "[1]", "[9223372036854775808]"), "data[0] is 9223372036854775808: out of range for i64");
    expect_bad(T1("\"i32\"", "[1]", "[2147483648]"), "data[0] is 2147483648: out of range for i32");
    expect_bad(T1("\"i64\"", "[1]", "[1.0]"), "data[0] is 1.0: not an integer");
    expect_bad(T1("\"i64\"", "[1]", "[1e3]"), "data[0] is 1e3: not an integer");
    expect_bad(T1("\"i64\"", "[1]", "[\"nan\"]"), "data[0] is \"nan\": not an integer");
    expect_bad("{\"outputs\": {\"grad/x\": " "{\"dtype\": \"f64\", \"shape\": [], \"data\": [1]}}, "
               "\"grads\": {\"x\": {\"dtype\": \"f64\", \"shape\": [], \"data\": [1]}}}",
               "the name 'grad/x' is given twice");
    expect_bad("\x93NUMPY\x01", "");
    expect_bad("PK\x03\x04garbage", "");
}

/* Numbers the reader must not trip over: strings holding digits and
 * brackets, escapes, numbers in fields it ignores. */
Test(read, numbers_among_strings)
{
    tl_result_set *s = read_ok("{\"device\": \"cpu -1 \\\" [2, 3]\", \"extra\": [1, -2.5e3, {\"k\": 4}],"
                               " \"outputs\": {\"y\\\"1\": {\"note\": 17, \"dtype\": \"i64\", \"shape\": [2],"
                               " \"data\": [-12345678901234567, 9007199254740993]}}}");
    cr_expect_str_eq(s->names[0], "y\"1");
    cr_expect_eq(tl_tensor_get_int(s->ts[0], 0), -12345678901234567LL);
    cr_expect_eq(tl_tensor_get_int(s->ts[0], 1), 9007199254740993LL);
    tl_result_set_free(s);
}

/* Every byte of a valid file changed, dropped or doubled, many times
 * over: the reader accepts or says TL_EINPUT, and never loses track of
 * which digits belong to which number. */
Test(read, mutations)
{
    const char *good = "{\"device\": \"cpu\", \"outputs\": {\"y\": {\"dtype\": \"f32\", \"shape\": [2, 1], "
                       "\"data\": [-1.5e-3, \"nan\"]}}, \"grads\": {\"x\\\"\": {\"dtype\": \"i64\", "
                       "\"shape\": [], \"data\": [12]}}}";
    const char alphabet[] = "{}[]\",:\\-+.eE0123456789 nfiatrul\x01\x80";
    size_t n = strlen(good);
    char *buf = malloc(2 * n + 1);
    cr_assert(buf);
    uint64_t s = 99;
    for (int round = 0; round < 20000; round++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t at = (size_t)(s >> 33) % n, len = n;
        memcpy(buf, good, n);
        int how = (int)((s >> 20) % 3);
        if (how == 0)
            buf[at] = alphabet[(s >> 8) % (sizeof alphabet - 1)];
        else if (how == 1)
            memmove(buf + at, buf + at + 1, n - at - 1), len--;
        else
            memmove(buf + at + 1, buf + at, n - at), len++;
        tl_status st = {0};
        tl_result_set *r = tl_result_set_read_mem(buf, len, "x", &st);
        cr_assert(r || st.code == TL_EINPUT, "%.*s\n  -> %s", (int)len, buf, st.msg);
        tl_result_set_free(r);
    }
    free(buf);
}

/* ---------- the text output read back ---------- */

/* Every f32, f64 and i64 that the text output prints whole reads back to
 * the same bits, in the header's shape. */
Test(read, text_round_trips_bits)
{
    enum { N = 3000 };
    int64_t shape[2] = {N / 3, 3}, empty[2] = {0, 3};
    tl_tensor *t[4] = {zeros(TL_F32, 2, shape), zeros(TL_F64, 2, shape), zeros(TL_I64, 2, shape),
                       zeros(TL_I32, 2, empty)};
    random_bits(t, N, 777);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_status st;
    const char *names[4] = {"a", "b", "grad/c", "d"};
    for (int k = 0; k < 4; k++)
        cr_assert_eq(tl_text_write(f, names[k], t[k], true, &st), TL_OK);
    fclose(f);
    tl_result_set *r = tl_result_set_read_mem(buf, len, "-", &st);
    cr_assert(r, "%s", st.msg);
    cr_assert_eq(r->n, 4);
    for (int k = 0; k < 4; k++) {
        cr_expect_str_eq(r->names[k], names[k]);
        cr_expect(r->ts[k]->dtype == t[k]->dtype && tl_same_shape(r->ts[k], t[k]), "%s", names[k]);
        size_t sz = tl_dtype_size(t[k]->dtype);
        for (int64_t i = 0; i < t[k]->numel; i++) {
            const char *x = (const char *)t[k]->data + i * sz, *y = (const char *)r->ts[k]->data + i * sz;
            cr_expect(isnan(tl_tensor_get(t[k], i)) || !memcmp(x, y, sz), "%s[%lld]", names[k], (long long)i);
        }
    }
    tl_result_set_free(r);
    free(buf);
    for (int k = 0; k < 4; k++)
        tl_tensor_unref(t[k]);
}

Test(read, hostile_text)
{
    tl_result_set *s = read_ok("y: f64[]\n1.5\ngrad/x: f32[2]\n[nan, -inf]\n");
    cr_assert_eq(s->n, 2);
    cr_expect_str_eq(s->names[1], "grad/x");
    cr_expect(isnan(tl_tensor_get(s->ts[1], 0)));
    tl_result_set_free(s);
    expect_bad("y: f64[2]\n[1.0, ...]\n", "line 1: \"y\": f64[2] is elided (\"...\"); print it whole with --full");
    expect_bad("y: f64[3]\n[1.0, 2.0]\n", "the values are f64[2], the header says f64[3]");
    expect_bad("y: f64[]\n1\ny: f64[]\n2\n", "the name 'y' is given twice");
    expect_bad("y: f16[2]\n[1, 2]\n", "not a result file");
    expect_bad("y: i32[1]\n[2147483648]\n", "line 1: \"y\"");
    expect_bad("y: f64[1]\n[1]\nz: f64\n", "line 3: expected values or a header \"NAME: DTYPE[DIMS]\"");
}

/* ---------- result files, tensor by tensor ---------- */

Test(read, result_file_by_key)
{
    const char *json = "{\"outputs\": {\"y\": {\"dtype\": \"f64\", \"shape\": [2], \"data\": [1, 2]}}, "
                       "\"grads\": {\"x\": {\"dtype\": \"i32\", \"shape\": [], \"data\": [-3]}}}";
    tl_status st = {0};
    tl_result_file *f = tl_result_file_open_mem(json, strlen(json), &st);
    cr_assert(f, "%s", st.msg);
    cr_expect(!tl_result_file_anonymous(f));
    cr_expect_eq(tl_result_file_count(f), 2);
    cr_expect(tl_result_file_has(f, "grad/x") && !tl_result_file_has(f, "x"));
    cr_expect_eq(tl_result_file_size(f, "y"), 16);
    tl_tensor *a = tl_result_file_get(f, "y", &st), *b = tl_result_file_get(f, "y", &st);
    cr_assert(a && b && a != b && a->refs == 1, "each get is a tensor of the caller's");
    ((double *)a->data)[0] = 9;
    cr_expect_eq(tl_tensor_get(b, 0), 1);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
    cr_expect_null(tl_result_file_get(f, "z", &st));
    cr_expect_str_eq(st.msg, "no key 'z' (the file has 'grad/x', 'y')");
    tl_status_clear(&st);
    cr_expect_null(tl_result_file_get(f, NULL, &st));
    cr_expect(strstr(st.msg, "holds named tensors ('grad/x', 'y')"), "%s", st.msg);
    tl_result_file_close(f);
}
