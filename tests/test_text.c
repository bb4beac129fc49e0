#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/tensor.h"
#include "formats/text.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s ^ (*s >> 29);
}

static double bits_f64(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

static float bits_f32(uint32_t b)
{
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

static bool same64(double a, double b) { return isnan(a) ? isnan(b) : !memcmp(&a, &b, sizeof a); }
static bool same32(float a, float b) { return isnan(a) ? isnan(b) : !memcmp(&a, &b, sizeof a); }

/* A double from one of several classes: any bits, subnormal, huge, near 1,
 * integers, short decimals. */
static double random_f64(uint64_t *s)
{
    uint64_t r = lcg(s), m = lcg(s) & 0xfffffffffffffULL, sign = r & (1ULL << 63);
    switch (r % 6) {
    case 0: return bits_f64(lcg(s));
    case 1: return bits_f64(sign | m);                            /* subnormal */
    case 2: return bits_f64(sign | (0x7feULL - r % 8) << 52 | m); /* near max */
    case 3: return bits_f64(sign | (0x3ffULL - 20 + r % 40) << 52 | m);
    case 4: return (double)(int32_t)lcg(s);
    default: return (double)(int32_t)(lcg(s) % 200001 - 100000) / 1000.0;
    }
}

static float random_f32(uint64_t *s)
{
    uint32_t r = (uint32_t)lcg(s), m = (uint32_t)lcg(s) & 0x7fffffu, sign = r & 0x80000000u;
    switch (r % 6) {
    case 0: return bits_f32((uint32_t)lcg(s));
    case 1: return bits_f32(sign | m);
    case 2: return bits_f32(sign | (0xfeu - r % 8) << 23 | m);
    case 3: return bits_f32(sign | (0x7fu - 10 + r % 20) << 23 | m);
    case 4: return (float)(int16_t)lcg(s);
    default: return (float)(int32_t)(lcg(s) % 20001 - 10000) / 100.0f;
    }
}

static const double special64[] = {0.0, -0.0, 1.0, -1.0, 0.1, 1e-7, 1e16, 1e15, 100.0, 123456.789,
                                   DBL_MAX, -DBL_MAX, DBL_MIN, DBL_TRUE_MIN, -DBL_TRUE_MIN,
                                   DBL_EPSILON, 1.0 / 3.0, 2.0 / 3.0, 9007199254740993.0, 5e-324};

static const float special32[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 1e-7f, 16777216.0f, 16777217.0f,
                                  FLT_MAX, -FLT_MAX, FLT_MIN, FLT_TRUE_MIN, FLT_EPSILON,
                                  1.0f / 3.0f, 3.14159265f, 1e10f};

static tl_tensor *make(tl_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    tl_status st;
    tl_tensor *t = tl_tensor_new(dt, ndim, shape, &st);
    cr_assert(t, "%s", st.msg);
    for (int64_t i = 0; v && i < t->numel; i++)
        tl_tensor_set(t, i, v[i]);
    return t;
}

static tl_tensor *iota(tl_dtype dt, int ndim, const int64_t *shape)
{
    tl_tensor *t = make(dt, ndim, shape, NULL);
    for (int64_t i = 0; i < t->numel; i++)
        tl_tensor_set(t, i, (double)i);
    return t;
}

/* Output of tl_text_write (or tl_json_tensor_write when json) as a string
 * the caller frees. */
static char *render(const tl_tensor *t, const char *name, bool full, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_status st;
    tl_status_clear(&st);
    tl_code c = json ? tl_json_tensor_write(f, t, &st) : tl_text_write(f, name, t, full, &st);
    fclose(f);
    cr_assert_eq(c, TL_OK, "%s", st.msg);
    return buf;
}

static void expect_text(const tl_tensor *t, const char *name, const char *want)
{
    char *got = render(t, name, false, false);
    cr_expect_str_eq(got, want, "got:\n%s\nwant:\n%s", got, want);
    free(got);
}

static void expect_same_tensor(const tl_tensor *a, const tl_tensor *b)
{
    cr_assert_eq(a->dtype, b->dtype);
    cr_assert(tl_same_shape(a, b));
    for (int64_t i = 0; i < a->numel; i++)
        cr_assert(same64(tl_tensor_get(a, i), tl_tensor_get(b, i)), "element %lld: %.17g vs %.17g",
                  (long long)i, tl_tensor_get(a, i), tl_tensor_get(b, i));
}

/* ------------------------------------------------------------------ */
/* number formatting                                                   */

static void check_f64(double v)
{
    char buf[TL_FMT_LEN];
    int n = tl_fmt_f64(buf, sizeof buf, v);
    cr_assert(n > 0 && n < TL_FMT_LEN && (size_t)n == strlen(buf), "%s", buf);
    if (isnan(v))
        cr_assert_str_eq(buf, "nan");
    else
        cr_assert(same64(strtod(buf, NULL), v), "%s does not read back as %a", buf, v);
}

static void check_f32(float v)
{
    char buf[TL_FMT_LEN];
    int n = tl_fmt_f32(buf, sizeof buf, v);
    cr_assert(n > 0 && n < TL_FMT_LEN && (size_t)n == strlen(buf), "%s", buf);
    if (isnan(v))
        cr_assert_str_eq(buf, "nan");
    else
        cr_assert(same32(strtof(buf, NULL), v), "%s does not read back as %a", buf, (double)v);
}

/* Significant digits in text like "-1.25e-07" or "100.0". */
static int sig_digits(const char *s)
{
    char d[64];
    int n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            d[n++] = *s;
    int lo = 0;
    while (lo < n - 1 && d[lo] == '0')
        lo++;
    while (n - 1 > lo && d[n - 1] == '0')
        n--;
    return n - lo;
}

/* The linear scan the brief describes, as a reference for the fast one. */
static int shortest_ref(double v, bool f32)
{
    char buf[64];
    for (int p = 1; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (f32 ? same32(strtof(buf, NULL), (float)v) : same64(strtod(buf, NULL), v))
            return p;
    }
    return 17;
}

Test(fmt, known_values)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {{0.0, "0.0"},      {-0.0, "-0.0"},       {2.0, "2.0"},         {1.5, "1.5"},
                 {0.1, "0.1"},      {100.0, "100.0"},     {1e-7, "1e-07"},      {1e-4, "0.0001"},
                 {1.5e-5, "1.5e-05"}, {1e16, "1e+16"},    {1e15, "1000000000000000.0"},
                 {-2.5e300, "-2.5e+300"}, {DBL_MAX, "1.7976931348623157e+308"},
                 {5e-324, "5e-324"}, {1.0 / 3.0, "0.3333333333333333"}, {123.456, "123.456"},
                 {NAN, "nan"},      {-NAN, "nan"},        {INFINITY, "inf"},    {-INFINITY, "-inf"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[TL_FMT_LEN];
        tl_fmt_f64(buf, sizeof buf, cases[i].v);
        cr_expect_str_eq(buf, cases[i].want);
    }
}

Test(fmt, known_values_f32)
{
    static const struct {
        float v;
        const char *want;
    } cases[] = {{0.1f, "0.1"},           {-0.0f, "-0.0"},         {1.0f / 3.0f, "0.33333334"},
                 {FLT_MAX, "3.4028235e+38"}, {FLT_TRUE_MIN, "1e-45"}, {16777216.0f, "16777216.0"},
                 {1e10f, "10000000000.0"}, {NAN, "nan"},          {-INFINITY, "-inf"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[TL_FMT_LEN];
        tl_fmt_f32(buf, sizeof buf, cases[i].v);
        cr_expect_str_eq(buf, cases[i].want);
    }
}

Test(fmt, round_trip_f64)
{
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof special64 / sizeof special64[0]; i++)
        check_f64(special64[i]);
    check_f64(NAN);
    check_f64(INFINITY);
    check_f64(-INFINITY);
    for (int i = 0; i < 200000; i++)
        check_f64(random_f64(&s));
}

Test(fmt, round_trip_f32)
{
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof special32 / sizeof special32[0]; i++)
        check_f32(special32[i]);
    check_f32(NAN);
    check_f32(-INFINITY);
    for (int i = 0; i < 200000; i++)
        check_f32(random_f32(&s));
}

Test(fmt, shortest_f64)
{
    uint64_t s = 99;
    for (int i = 0; i < 50000; i++) {
        double v = random_f64(&s);
        if (!isfinite(v) || v == 0)
            continue;
        char buf[TL_FMT_LEN];
        tl_fmt_f64(buf, sizeof buf, v);
        cr_assert_eq(sig_digits(buf), shortest_ref(v, false), "%s for %a", buf, v);
    }
}

Test(fmt, shortest_f32)
{
    uint64_t s = 5;
    for (int i = 0; i < 50000; i++) {
        float v = random_f32(&s);
        if (!isfinite(v) || v == 0)
            continue;
        char buf[TL_FMT_LEN];
        tl_fmt_f32(buf, sizeof buf, v);
        cr_assert_eq(sig_digits(buf), shortest_ref(v, true), "%s for %a", buf, (double)v);
    }
}

/* Figures for people: rounded to 4 significant digits, tl's layout. */
Test(fmt, significant_digits)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {{0.00030814000872332495, "0.0003081"}, {3.699999999717818e-07, "3.7e-07"},
                 {9.999999999237346e-08, "1e-07"},     {0.0, "0.0"},          {-0.0, "-0.0"},
                 {1.1102230246251565e-16, "1.11e-16"}, {123456.0, "123500.0"}, {0.5, "0.5"},
                 {99995.0, "100000.0"},                {1e20, "1e+20"},        {INFINITY, "inf"},
                 {NAN, "nan"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[TL_FMT_LEN];
        tl_fmt_sig(buf, sizeof buf, cases[i].v, 4);
        cr_expect_str_eq(buf, cases[i].want);
    }
    char buf[TL_FMT_LEN];
    tl_fmt_sig(buf, sizeof buf, 2.0 / 3.0, 17);
    cr_expect_str_eq(buf, "0.66666666666666663");
    tl_fmt_sig(buf, sizeof buf, 2.0 / 3.0, 0); /* at least one digit */
    cr_expect_str_eq(buf, "0.7");
}

Test(fmt, small_buffer)
{
    char buf[4];
    int n = tl_fmt_f64(buf, sizeof buf, 1.25);
    cr_expect_eq(n, 4);
    cr_expect_str_eq(buf, "1.2");
    cr_expect_eq(tl_fmt_f64(NULL, 0, -1e-300), 7);
}

/* ------------------------------------------------------------------ */
/* text output                                                         */

Test(text, zero_d)
{
    tl_tensor *t = make(TL_F64, 0, NULL, (double[]){1.5});
    expect_text(t, "x", "x: f64[]\n1.5\n");
    expect_text(t, NULL, "1.5\n");
    tl_tensor_unref(t);
}

Test(text, one_d_aligned)
{
    tl_tensor *t = make(TL_F64, 1, (int64_t[]){3}, (double[]){1, 2.5, -3});
    expect_text(t, "v", "v: f64[3]\n[ 1.0,  2.5, -3.0]\n");
    tl_tensor_unref(t);
}

Test(text, two_d_f32)
{
    tl_tensor *t = make(TL_F32, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 0.1});
    expect_text(t, "m", "m: f32[2,2]\n[[1.0, 2.0],\n [3.0, 0.1]]\n");
    tl_tensor_unref(t);
}

Test(text, three_d)
{
    tl_tensor *t = iota(TL_F64, 3, (int64_t[]){2, 2, 2});
    expect_text(t, "c", "c: f64[2,2,2]\n[[[0.0, 1.0],\n  [2.0, 3.0]],\n\n [[4.0, 5.0],\n  [6.0, 7.0]]]\n");
    tl_tensor_unref(t);
}

Test(text, non_finite)
{
    tl_tensor *t = make(TL_F64, 1, (int64_t[]){3}, (double[]){NAN, INFINITY, -INFINITY});
    expect_text(t, NULL, "[ nan,  inf, -inf]\n");
    tl_tensor_unref(t);
}

Test(text, empty)
{
    tl_tensor *a = make(TL_F64, 1, (int64_t[]){0}, NULL);
    tl_tensor *b = make(TL_F32, 2, (int64_t[]){2, 0}, NULL);
    tl_tensor *c = make(TL_F64, 2, (int64_t[]){0, 3}, NULL);
    tl_tensor *d = make(TL_F64, 2, (int64_t[]){5000, 0}, NULL);
    expect_text(a, "a", "a: f64[0]\n[]\n");
    expect_text(b, "b", "b: f32[2,0]\n[[],\n []]\n");
    expect_text(c, "c", "c: f64[0,3]\n[]\n");
    expect_text(d, NULL, "[[],\n [],\n [],\n ...,\n [],\n [],\n []]\n");
    tl_tensor_unref(a);
    tl_tensor_unref(b);
    tl_tensor_unref(c);
    tl_tensor_unref(d);
}

Test(text, elided_1d)
{
    tl_tensor *t = iota(TL_F64, 1, (int64_t[]){2000});
    expect_text(t, "r", "r: f64[2000]\n[   0.0,    1.0,    2.0, ..., 1997.0, 1998.0, 1999.0]\n");
    tl_tensor_unref(t);
}

Test(text, not_elided_at_1000)
{
    tl_tensor *t = iota(TL_F64, 1, (int64_t[]){1000});
    char *got = render(t, NULL, false, false);
    cr_expect_null(strstr(got, "..."));
    free(got);
    tl_tensor_unref(t);
}

Test(text, elided_2d)
{
    tl_tensor *t = iota(TL_F64, 2, (int64_t[]){100, 100});
    expect_text(t, NULL,
                "[[   0.0,    1.0,    2.0, ...,   97.0,   98.0,   99.0],\n"
                " [ 100.0,  101.0,  102.0, ...,  197.0,  198.0,  199.0],\n"
                " [ 200.0,  201.0,  202.0, ...,  297.0,  298.0,  299.0],\n"
                " ...,\n"
                " [9700.0, 9701.0, 9702.0, ..., 9797.0, 9798.0, 9799.0],\n"
                " [9800.0, 9801.0, 9802.0, ..., 9897.0, 9898.0, 9899.0],\n"
                " [9900.0, 9901.0, 9902.0, ..., 9997.0, 9998.0, 9999.0]]\n");
    tl_tensor_unref(t);
}

Test(text, elided_3d_keeps_short_axes)
{
    tl_tensor *t = iota(TL_F32, 3, (int64_t[]){20, 2, 30});
    char *got = render(t, NULL, false, false);
    cr_expect_not_null(strstr(got, "]],\n\n ...,\n\n [["), "%s", got);
    cr_expect_not_null(strstr(got, "[[[   0.0,    1.0,    2.0, ...,   27.0,   28.0,   29.0],\n"
                                   "  [  30.0,   31.0,   32.0, ...,   57.0,   58.0,   59.0]],\n\n"
                                   " [[  60.0,"), "%s", got);
    free(got);
    tl_tensor_unref(t);
}

static void check_lines_fit(const char *s)
{
    for (const char *line = s; *line;) {
        const char *nl = strchr(line, '\n');
        cr_expect_leq(nl - line, 75, "line too long: %.*s", (int)(nl - line), line);
        line = nl + 1;
    }
}

Test(text, full_reads_back)
{
    tl_tensor *t = iota(TL_F64, 2, (int64_t[]){40, 50});
    char *got = render(t, "t", true, false);
    cr_assert_null(strstr(got, "..."));
    check_lines_fit(got);
    tl_status st;
    tl_tensor *back = tl_literal_parse(strchr(got, '\n') + 1, &st);
    cr_assert(back, "%s", st.msg);
    expect_same_tensor(t, back);
    tl_tensor_unref(back);
    free(got);
    tl_tensor_unref(t);
}

/* The printed values (all of a tensor under 1000 elements) read back as a
 * literal to the same bits, nan and infinities included. */
Test(text, random_reads_back)
{
    uint64_t s = 3;
    for (int round = 0; round < 50; round++) {
        tl_dtype dt = round % 2 ? TL_F32 : TL_F64;
        int64_t shape[3] = {1 + (int64_t)(lcg(&s) % 7), 1 + (int64_t)(lcg(&s) % 5), 1 + (int64_t)(lcg(&s) % 20)};
        int ndim = 1 + round % 3;
        tl_tensor *t = make(dt, ndim, shape, NULL);
        for (int64_t i = 0; i < t->numel; i++)
            tl_tensor_set(t, i, dt == TL_F32 ? (double)random_f32(&s) : random_f64(&s));
        char *got = render(t, NULL, false, false);
        check_lines_fit(got);
        char lit[16 + 40 * 1000];
        snprintf(lit, sizeof lit, "%s:%s", tl_dtype_name(dt), got);
        tl_status st;
        tl_tensor *back = tl_literal_parse(lit, &st);
        cr_assert(back, "%s\n%s", st.msg, got);
        expect_same_tensor(t, back);
        tl_tensor_unref(back);
        free(got);
        tl_tensor_unref(t);
    }
}

Test(text, write_error)
{
    tl_tensor *t = iota(TL_F64, 1, (int64_t[]){3});
    FILE *f = fopen("/dev/null", "r"); /* writes fail */
    tl_status st;
    cr_assert_not_null(f);
    cr_expect_eq(tl_text_write(f, "x", t, false, &st), TL_ERUNTIME);
    fclose(f);
    tl_tensor_unref(t);
}

/* ------------------------------------------------------------------ */
/* JSON output                                                         */

Test(json, exact_text)
{
    tl_tensor *t = make(TL_F32, 1, (int64_t[]){4}, (double[]){1, NAN, -INFINITY, 0.1});
    char *got = render(t, NULL, false, true);
    cr_expect_str_eq(got, "{\"dtype\": \"f32\", \"shape\": [4], \"data\": [1.0, \"nan\", \"-inf\", 0.1]}");
    free(got);
    tl_tensor_unref(t);
    t = make(TL_F64, 0, NULL, (double[]){2.5});
    got = render(t, NULL, false, true);
    cr_expect_str_eq(got, "{\"dtype\": \"f64\", \"shape\": [], \"data\": [2.5]}");
    free(got);
    tl_tensor_unref(t);
}

static void json_round_trip(tl_dtype dt, uint64_t seed)
{
    uint64_t s = seed;
    tl_tensor *t = make(dt, 2, (int64_t[]){100, 30}, NULL);
    for (int64_t i = 0; i < t->numel; i++)
        tl_tensor_set(t, i, dt == TL_F32 ? (double)random_f32(&s) : random_f64(&s));
    char *got = render(t, NULL, false, true);
    cJSON *j = cJSON_Parse(got);
    cr_assert_not_null(j, "not JSON: %.200s", got);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "dtype")->valuestring, tl_dtype_name(dt));
    cJSON *shape = cJSON_GetObjectItem(j, "shape"), *data = cJSON_GetObjectItem(j, "data");
    cr_expect_eq(cJSON_GetArraySize(shape), 2);
    cr_expect_eq(cJSON_GetArrayItem(shape, 0)->valueint, 100);
    cr_expect_eq(cJSON_GetArrayItem(shape, 1)->valueint, 30);
    cr_assert_eq(cJSON_GetArraySize(data), 3000);
    tl_tensor *back = make(dt, 2, (int64_t[]){100, 30}, NULL);
    tl_status st;
    cr_assert_eq(tl_json_fill(back, data, &st), TL_OK, "%s", st.msg);
    expect_same_tensor(t, back);
    tl_tensor_unref(back);
    cJSON_Delete(j);
    free(got);
    tl_tensor_unref(t);
}

Test(json, round_trip_f64) { json_round_trip(TL_F64, 11); }
Test(json, round_trip_f32) { json_round_trip(TL_F32, 12); }

/* ------------------------------------------------------------------ */
/* literals                                                            */

static tl_tensor *parse_ok(const char *text)
{
    tl_status st;
    tl_status_clear(&st);
    tl_tensor *t = tl_literal_parse(text, &st);
    cr_assert_not_null(t, "%s: %s", text, st.msg);
    return t;
}

static void parse_fails(const char *text, const char *msg_part)
{
    tl_status st;
    tl_status_clear(&st);
    tl_tensor *t = tl_literal_parse(text, &st);
    cr_assert_null(t, "%.60s parsed", text);
    cr_expect_eq(st.code, TL_EINPUT, "%.60s: %s", text, st.msg);
    cr_expect_not_null(strstr(st.msg, msg_part), "%.60s: message '%s' lacks '%s'", text, st.msg, msg_part);
}

static void expect_shape(const tl_tensor *t, tl_dtype dt, int ndim, const int64_t *shape)
{
    cr_assert_eq(t->dtype, dt);
    cr_assert_eq(t->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        cr_assert_eq(t->shape[i], shape[i], "dim %d", i);
}

Test(literal, scalars_and_arrays)
{
    tl_tensor *t = parse_ok("3.5");
    expect_shape(t, TL_F64, 0, NULL);
    cr_expect_eq(tl_tensor_get(t, 0), 3.5);
    tl_tensor_unref(t);

    t = parse_ok(" [[1, 2],\n [3, -4e2]] ");
    expect_shape(t, TL_F64, 2, (int64_t[]){2, 2});
    cr_expect_eq(tl_tensor_get(t, 3), -400.0);
    tl_tensor_unref(t);

    t = parse_ok("f32:[1,2,3]");
    expect_shape(t, TL_F32, 1, (int64_t[]){3});
    cr_expect_eq(((float *)t->data)[2], 3.0f);
    tl_tensor_unref(t);

    t = parse_ok("f64:2");
    expect_shape(t, TL_F64, 0, NULL);
    tl_tensor_unref(t);

    t = parse_ok("float32:[[0.5],[-1.0]]");
    expect_shape(t, TL_F32, 2, (int64_t[]){2, 1});
    cr_expect_eq(((float *)t->data)[0], 0.5f);
    tl_tensor_unref(t);
}

Test(literal, numpy_numbers)
{
    /* NumPy prints 1. and .5; tl reads them as JSON's 1.0 and 0.5 */
    tl_tensor *t = parse_ok("[1., .5, -.25, 2.e1, -0., 0.]");
    expect_shape(t, TL_F64, 1, (int64_t[]){6});
    const double *d = t->data;
    cr_expect(d[0] == 1.0 && d[1] == 0.5 && d[2] == -0.25 && d[3] == 20.0);
    cr_expect(d[4] == 0.0 && signbit(d[4]) && d[5] == 0.0 && !signbit(d[5]));
    tl_tensor_unref(t);
    t = parse_ok("f32:.1");
    cr_expect_eq(((float *)t->data)[0], 0.1f);
    tl_tensor_unref(t);
    parse_fails("i64:[1.]", "not an integer");
}

Test(literal, json_numbers_only)
{
    /* strtod would take all of these; JSON and NumPy (and so tl) do not */
    const char *bad[] = {"01", ".", "+1", "-.", "0x10", "1e", "-", "NaN", "Infinity", "+inf", "[1, .e5]", "1..5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tl_status st = {0};
        tl_tensor *t = tl_literal_parse(bad[i], &st);
        cr_expect_null(t, "'%s' was accepted", bad[i]);
        cr_expect_eq(st.code, TL_EINPUT, "'%s'", bad[i]);
        tl_tensor_unref(t);
    }
}

Test(literal, non_finite)
{
    tl_tensor *t = parse_ok("[nan, inf, -inf, \"nan\", \"-inf\", \"inf\"]");
    expect_shape(t, TL_F64, 1, (int64_t[]){6});
    const double *d = t->data;
    cr_expect(isnan(d[0]) && isnan(d[3]));
    cr_expect(d[1] == INFINITY && d[5] == INFINITY);
    cr_expect(d[2] == -INFINITY && d[4] == -INFINITY);
    tl_tensor_unref(t);
    t = parse_ok("f32:-inf");
    cr_expect(((float *)t->data)[0] == -INFINITY);
    tl_tensor_unref(t);
}

Test(literal, f32_rounds_once)
{
    /* just above the midpoint between 1 and the next float, closer to it
     * than half a double ulp: via double it would tie to 1.0f */
    tl_tensor *t = parse_ok("f32:1.0000000596046448");
    cr_expect(same32(((float *)t->data)[0], bits_f32(0x3f800001u)));
    cr_expect(same32((float)strtod("1.0000000596046448", NULL), 1.0f)); /* the trap avoided */
    tl_tensor_unref(t);
    t = parse_ok("f32:[0.1, 3.4028235e38, 1e-45]");
    cr_expect(same32(((float *)t->data)[0], 0.1f));
    cr_expect(same32(((float *)t->data)[1], FLT_MAX));
    cr_expect(same32(((float *)t->data)[2], FLT_TRUE_MIN));
    tl_tensor_unref(t);
}

Test(literal, empty_arrays)
{
    tl_tensor *t = parse_ok("[]");
    expect_shape(t, TL_F64, 1, (int64_t[]){0});
    tl_tensor_unref(t);
    t = parse_ok("f32:[[],[]]");
    expect_shape(t, TL_F32, 2, (int64_t[]){2, 0});
    tl_tensor_unref(t);
    t = parse_ok("[[[ ]]]");
    expect_shape(t, TL_F64, 3, (int64_t[]){1, 1, 0});
    tl_tensor_unref(t);
}

Test(literal, max_depth)
{
    char text[200] = "", msg[64];
    for (int i = 0; i < TL_MAXDIM; i++)
        strcat(text, "[");
    strcat(text, "7");
    for (int i = 0; i < TL_MAXDIM; i++)
        strcat(text, "]");
    tl_tensor *t = parse_ok(text);
    cr_expect_eq(t->ndim, TL_MAXDIM);
    cr_expect_eq(t->numel, 1);
    tl_tensor_unref(t);
    char deeper[200] = "[";
    strcat(deeper, text);
    strcat(deeper, "]");
    snprintf(msg, sizeof msg, "more than %d nested dimensions at column %d", TL_MAXDIM, TL_MAXDIM + 1);
    parse_fails(deeper, msg);
}

Test(literal, deep_input_does_not_recurse)
{
    size_t n = 100000;
    char *text = malloc(n + 1), msg[64];
    memset(text, '[', n);
    text[n] = '\0';
    snprintf(msg, sizeof msg, "more than %d nested dimensions at column %d", TL_MAXDIM, TL_MAXDIM + 1);
    parse_fails(text, msg);
    free(text);
}

Test(literal, errors)
{
    parse_fails("[[1,2],[3,4,5]]", "ragged nested array: row 1 has 3 elements, expected 2");
    parse_fails("[[[1],[2]],[[3],[4,5]]]", "row [1][1] has 2 elements, expected 1");
    parse_fails("[[1],[]]", "row 1 has 0 elements, expected 1");
    parse_fails("[[],[1]]", "row 1 has 1 element, expected 0");
    parse_fails("[1,[2]]", "an array at column 4 where a number was expected");
    parse_fails("[[1],2]", "a number at column 6 where an array was expected");
    parse_fails("[1,2,]", "expected a number, '[', nan or inf at column 6, found ']'");
    parse_fails("[1 2]", "expected ',' or ']' at column 4, found '2'");
    parse_fails("[1,2", "found the end of the text");
    parse_fails("abc", "'abc' at column 1 is not a number");
    parse_fails("[\"abc\"]", "'abc' at column 2 is not a number");
    parse_fails("[\"nan]", "unterminated string");
    parse_fails("[true]", "'true' at column 2 is not a number");
    parse_fails("f16:[1]", "unknown dtype prefix 'f16'");
    parse_fails(":1", "unknown dtype prefix ''");
    parse_fails("", "empty tensor literal");
    parse_fails("f32:  ", "empty tensor literal");
    parse_fails("1e999", "too large for f64");
    parse_fails("f32:[1e39]", "number 1e39 at column 6 is too large for f32");
    parse_fails("1x", "unexpected 'x' at column 2 after the value");
    parse_fails("0x10", "malformed number"); /* no hex, though strtod has it */
    parse_fails("1e", "malformed number at column 1");
    parse_fails("--1", "malformed number");
    parse_fails("[1]]", "unexpected ']'");
    parse_fails("{}", "found '{'");
}

/* ------------------------------------------------------------------ */
/* JSON data arrays                                                    */

static tl_code fill(tl_tensor *t, const char *json, tl_status *st)
{
    cJSON *j = cJSON_Parse(json);
    cr_assert_not_null(j, "bad test JSON %s", json);
    tl_status_clear(st);
    tl_code c = tl_json_fill(t, j, st);
    cJSON_Delete(j);
    return c;
}

Test(fill, nested_and_flat)
{
    tl_status st;
    tl_tensor *t = make(TL_F64, 2, (int64_t[]){2, 3}, NULL);
    cr_assert_eq(fill(t, "[[1,2,3],[4,5,\"-inf\"]]", &st), TL_OK, "%s", st.msg);
    cr_expect_eq(tl_tensor_get(t, 4), 5.0);
    cr_expect_eq(tl_tensor_get(t, 5), -INFINITY);
    cr_assert_eq(fill(t, "[6,5,4,3,2,\"nan\"]", &st), TL_OK, "%s", st.msg);
    cr_expect_eq(tl_tensor_get(t, 0), 6.0);
    cr_expect(isnan(tl_tensor_get(t, 5)));
    tl_tensor_unref(t);

    t = make(TL_F32, 0, NULL, NULL);
    cr_assert_eq(fill(t, "0.1", &st), TL_OK, "%s", st.msg);
    cr_expect(same32(((float *)t->data)[0], 0.1f));
    cr_assert_eq(fill(t, "[\"inf\"]", &st), TL_OK, "%s", st.msg);
    cr_expect(((float *)t->data)[0] == INFINITY);
    tl_tensor_unref(t);

    t = make(TL_F64, 2, (int64_t[]){2, 0}, NULL);
    cr_expect_eq(fill(t, "[[],[]]", &st), TL_OK, "%s", st.msg);
    cr_expect_eq(fill(t, "[]", &st), TL_OK, "%s", st.msg);
    tl_tensor_unref(t);
}

static void fill_fails(tl_tensor *t, const char *json, const char *msg_part)
{
    tl_status st;
    cr_expect_eq(fill(t, json, &st), TL_EINPUT, "%s", json);
    cr_expect_not_null(strstr(st.msg, msg_part), "%s: message '%s' lacks '%s'", json, st.msg, msg_part);
}

Test(fill, errors)
{
    tl_tensor *t = make(TL_F64, 2, (int64_t[]){2, 2}, NULL);
    fill_fails(t, "[[1,2],[3,4,5]]", "data[1] has 3 elements, expected 2");
    fill_fails(t, "[[1,2]]", "data has 1 element, expected 2");
    fill_fails(t, "[[1,2],3]", "data[1] is a number, expected an array of 2");
    fill_fails(t, "[[1,[2]],[3,4]]", "data[0][1] is an array, expected a number");
    fill_fails(t, "[1,2,3]", "data has 3 values, expected 4 for f64[2,2]");
    fill_fails(t, "[1,2,3,null]", "data[3] is null, expected a number");
    fill_fails(t, "[[1,true],[3,4]]", "data[0][1] is a boolean");
    fill_fails(t, "[[1,\"x\"],[3,4]]", "data[0][1] is the string \"x\"");
    fill_fails(t, "[1,2,3,{}]", "data[3] is an object");
    fill_fails(t, "5", "data is a number, expected an array for f64[2,2]");
    tl_tensor_unref(t);
    t = make(TL_F64, 1, (int64_t[]){2}, NULL);
    fill_fails(t, "[[1],[2]]", "data[0] is an array, expected a number");
    tl_tensor_unref(t);
}

/* ------------------------------------------------------------------ */
/* index tensors (i32, i64)                                            */

Test(literal, index_tensors)
{
    tl_tensor *t = parse_ok("i64:[[0, -2], [9223372036854775807, -9223372036854775808]]");
    expect_shape(t, TL_I64, 2, (int64_t[]){2, 2});
    const int64_t *v = t->data;
    cr_expect(v[0] == 0 && v[1] == -2 && v[2] == INT64_MAX && v[3] == INT64_MIN);
    tl_tensor_unref(t);
    t = parse_ok("int32:[2147483647, -2147483648]");
    expect_shape(t, TL_I32, 1, (int64_t[]){2});
    cr_expect(((int32_t *)t->data)[0] == INT32_MAX && ((int32_t *)t->data)[1] == INT32_MIN);
    tl_tensor_unref(t);
    t = parse_ok("i32:7");
    expect_shape(t, TL_I32, 0, NULL);
    tl_tensor_unref(t);
    t = parse_ok("i64:[]");
    expect_shape(t, TL_I64, 1, (int64_t[]){0});
    tl_tensor_unref(t);
    parse_fails("i32:[2147483648]", "integer 2147483648 at column 6 is out of range for i32");
    parse_fails("i32:[-2147483649]", "out of range for i32");
    parse_fails("i64:[9223372036854775808]", "out of range for i64");
    parse_fails("i64:[1.0]", "1.0 at column 6 is not an integer (an i64 literal holds indices)");
    parse_fails("i64:[1e2]", "is not an integer");
    parse_fails("i64:nan", "'nan' at column 5 is not an integer");
    parse_fails("i64:[\"inf\"]", "is not an integer");
    parse_fails("i64:[01]", "malformed number");
    parse_fails("u8:[1]", "unknown dtype prefix 'u8' (expected f32:, f64:, i32: or i64:)");
}

Test(text, index_tensors)
{
    tl_tensor *t = make(TL_I64, 2, (int64_t[]){2, 3}, (double[]){0, -12, 3, 400, 5, -6});
    expect_text(t, "k", "k: i64[2,3]\n[[  0, -12,   3],\n [400,   5,  -6]]\n");
    char *json = render(t, NULL, false, true);
    cr_expect_str_eq(json, "{\"dtype\": \"i64\", \"shape\": [2, 3], \"data\": [0, -12, 3, 400, 5, -6]}");
    free(json);
    tl_tensor_unref(t);
    t = make(TL_I32, 0, NULL, (double[]){-7});
    expect_text(t, NULL, "-7\n");
    tl_tensor_unref(t);
    /* all 64 bits survive (a double would round these) */
    tl_status st = {0};
    t = tl_tensor_new(TL_I64, 1, (int64_t[]){2}, &st);
    ((int64_t *)t->data)[0] = INT64_MIN;
    ((int64_t *)t->data)[1] = ((int64_t)1 << 53) + 1;
    json = render(t, NULL, false, true);
    cr_expect_str_eq(json, "{\"dtype\": \"i64\", \"shape\": [2], \"data\": [-9223372036854775808, 9007199254740993]}");
    free(json);
    char *text = render(t, NULL, true, false), lit[128];
    snprintf(lit, sizeof lit, "i64:%s", text); /* the text output reads back */
    tl_tensor *u = parse_ok(lit);
    cr_expect(u->numel == 2 && !memcmp(t->data, u->data, 16), "%s", text);
    free(text);
    tl_tensor_unref(u);
    tl_tensor_unref(t);
}

static tl_code fill_from(tl_tensor *t, const char *json, tl_status *st)
{
    cJSON *v = cJSON_Parse(json);
    cr_assert(v, "bad test JSON %s", json);
    tl_code rc = tl_json_fill(t, v, st);
    cJSON_Delete(v);
    return rc;
}

Test(json, fill_index_tensors)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(TL_I64, 2, (int64_t[]){2, 2}, &st);
    cr_assert_eq(fill_from(t, "[[0, -1], [9007199254740991, 2]]", &st), TL_OK, "%s", st.msg);
    cr_expect(((int64_t *)t->data)[2] == 9007199254740991);
    cr_expect_eq(fill_from(t, "[0, 1.5, 2, 3]", &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "data[1] is 1.5, expected an integer below 2^53 in magnitude"), "%s", st.msg);
    cr_expect_eq(fill_from(t, "[0, 9007199254740992, 2, 3]", &st), TL_EINPUT);
    cr_expect_eq(fill_from(t, "[0, \"nan\", 2, 3]", &st), TL_EINPUT);
    tl_tensor_unref(t);
    t = tl_tensor_new(TL_I32, 1, (int64_t[]){2}, &st);
    cr_assert_eq(fill_from(t, "[-2147483648, 2147483647]", &st), TL_OK, "%s", st.msg);
    cr_expect_eq(fill_from(t, "[0, 2147483648]", &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "expected an integer in the i32 range"), "%s", st.msg);
    tl_tensor_unref(t);
}
