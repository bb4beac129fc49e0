/* The CPU's matrix product (backends/cpu/cpu_matmul.c) against a plain
 * triple loop in double, on shapes it cuts into many items: odd edges, a
 * wide product cut by columns, a tall one cut in strips, one cut both ways, batches with broadcasting, 1-D
 * operands, every combination of the transpose flags (backward rules use
 * them), f32 and f64.  A tile at a wrong offset gives errors of the size of
 * the values; rounding, here and in the reference, stays within 2(k + 2)
 * ulps of the sum of |a||b|.  That the bits do not depend on the number of
 * threads is checked end to end, with several TL_NUM_THREADS, by
 * tests/cli/matmul_threads.txt. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/blas.h"
#include "backends/cpu/cpu.h"
#include "backends/cpu/cpu_features.h"

/* a deterministic pseudo-random value in [-1, 1) */
static double value(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 4503599627370496.0 - 1.0;
}

static tl_tensor *filled(tl_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, ndim, shape, &st);
    cr_assert(t, "%s", st.msg);
    for (int64_t i = 0; i < t->numel; i++)
        tl_tensor_set(t, i, value(&seed));
    return t;
}

typedef struct mm_case {
    tl_dtype dt;
    int na, nb;        /* ndim of a and b as stored */
    int64_t as[4], bs[4]; /* shapes as stored (transposed when the flag is) */
    bool ta, tb;
} mm_case;

/* the tensor's values as doubles */
static double *values(const tl_tensor *t)
{
    double *v = malloc(sizeof(double) * (size_t)(t->numel ? t->numel : 1));
    cr_assert(v);
    for (int64_t i = 0; i < t->numel; i++)
        v[i] = tl_tensor_get(t, i);
    return v;
}

static void check(const mm_case *c)
{
    tl_tensor *a = filled(c->dt, c->na, c->as, 1 + (uint64_t)c->as[c->na - 1]);
    tl_tensor *b = filled(c->dt, c->nb, c->bs, 7 + (uint64_t)c->bs[0]);
    /* matrix sizes as stored (1-D: a row on the left, a column on the right) */
    int64_t ar = c->na == 1 ? 1 : c->as[c->na - 2], ac = c->as[c->na - 1];
    int64_t br = c->nb == 1 ? c->bs[0] : c->bs[c->nb - 2], bc = c->nb == 1 ? 1 : c->bs[c->nb - 1];
    int64_t m = c->ta ? ac : ar, k = c->ta ? ar : ac, n = c->tb ? br : bc;
    cr_assert_eq(k, c->tb ? bc : br, "bad case");
    /* batch axes: at most one on each side, broadcasting */
    int64_t ba = c->na > 2 ? c->as[c->na - 3] : 1, bb = c->nb > 2 ? c->bs[c->nb - 3] : 1;
    int64_t a0 = c->na > 3 ? c->as[0] : 1; /* a's outer batch axis */
    int64_t nbatch = ba > bb ? ba : bb;
    int64_t shape[4];
    int nd = 0;
    if (c->na > 3)
        shape[nd++] = a0;
    if (c->na > 2 || c->nb > 2)
        shape[nd++] = nbatch;
    if (c->na > 1)
        shape[nd++] = m;
    if (c->nb > 1)
        shape[nd++] = n;
    tl_status st = {0};
    tl_tensor *out = tl_tensor_new(c->dt, nd, shape, &st);
    cr_assert(out, "%s", st.msg);
    for (int64_t i = 0; i < out->numel; i++) /* every element must be written */
        tl_tensor_set(out, i, NAN);
    tl_attrs at_;
    tl_attrs_init(&at_);
    at_.trans_a = c->ta;
    at_.trans_b = c->tb;
    cr_assert_eq(cpu_matmul(a, b, &at_, out, &st), TL_OK, "%s", st.msg);

    double *av = values(a), *bv = values(b), *ov = values(out);
    double eps = c->dt == TL_F32 ? FLT_EPSILON : DBL_EPSILON;
    int64_t bad = 0;
    for (int64_t o = 0; o < a0; o++)
        for (int64_t q = 0; q < nbatch; q++) {
            const double *A = av + (o * ba + (ba == 1 ? 0 : q)) * ar * ac, *B = bv + (bb == 1 ? 0 : q) * br * bc;
            int64_t obase = (o * nbatch + q) * m * n;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double sum = 0, mag = 0;
                    /* steps between consecutive elements of row i of op(A)
                     * and of column j of op(B) */
                    const double *x = c->ta ? A + i : A + i * ac, *y = c->tb ? B + j * bc : B + j;
                    int64_t dx = c->ta ? ac : 1, dy = c->tb ? 1 : bc;
                    for (int64_t l = 0; l < k; l++) {
                        double p = x[l * dx] * y[l * dy];
                        sum += p;
                        mag += fabs(p);
                    }
                    double got = ov[obase + i * n + j];
                    if (fabs(got - sum) > 2 * (k + 2) * eps * mag + DBL_MIN && bad++ < 5)
                        cr_log_error("%s %s%s batch %lld,%lld [%lld,%lld]: %.17g, expected %.17g",
                                     tl_dtype_name(c->dt), c->ta ? "T" : "N", c->tb ? "T" : "N",
                                     (long long)o, (long long)q, (long long)i, (long long)j, got, sum);
                }
        }
    cr_expect_eq(bad, 0, "%lld elements wrong (m %lld, n %lld, k %lld)", (long long)bad, (long long)m,
                 (long long)n, (long long)k);
    free(av);
    free(bv);
    free(ov);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
    tl_tensor_unref(out);
}

/* 515 x 701 x 300: five strips of 128 rows, the last one of 3 */
static void odd_edges_every_flag(void)
{
    for (int d = 0; d < 2; d++)
        for (int f = 0; f < 4; f++) {
            bool ta = f & 1, tb = f & 2;
            mm_case c = {d ? TL_F64 : TL_F32, 2, 2, {ta ? 300 : 515, ta ? 515 : 300},
                         {tb ? 701 : 300, tb ? 300 : 701}, ta, tb};
            check(&c);
        }
}

/* 70 x 4000 x 300: cut by columns only (four of 1024, the last 928);
 * 1100 x 65 x 1000: four strips of 320 rows, the last 140; 130 x 4000 x
 * 300: a grid of 3 x 2 (strips of 64 rows, the last of 2, then columns) */
static void wide_and_tall(void)
{
    mm_case wide[] = {{TL_F32, 2, 2, {70, 300}, {300, 4000}, false, false},
                      {TL_F32, 2, 2, {70, 300}, {4000, 300}, false, true},
                      {TL_F64, 2, 2, {300, 70}, {300, 4000}, true, false},
                      {TL_F64, 2, 2, {1100, 1000}, {1000, 65}, false, false},
                      {TL_F32, 2, 2, {1000, 1100}, {65, 1000}, true, true},
                      {TL_F64, 2, 2, {130, 300}, {300, 4000}, false, false},
                      {TL_F32, 2, 2, {300, 130}, {4000, 300}, true, true}};
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
        check(&wide[i]);
}

/* [2, 1, 600, 129] @ [3, 129, 520]: six products, each cut in two
 * strips (320 and 280 rows) */
static void batched_broadcast(void)
{
    mm_case cs[] = {{TL_F64, 4, 3, {2, 1, 600, 129}, {3, 129, 520}, false, false},
                    {TL_F32, 4, 3, {2, 1, 600, 129}, {3, 520, 129}, false, true},
                    {TL_F32, 4, 3, {2, 3, 129, 600}, {1, 129, 520}, true, false}};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        check(&cs[i]);
}

static void vectors(void)
{
    mm_case cs[] = {{TL_F32, 1, 2, {2000}, {2000, 301}, false, false},
                    {TL_F64, 2, 1, {301, 2000}, {2000}, false, false},
                    {TL_F64, 1, 2, {2000}, {301, 2000}, false, true},
                    {TL_F32, 1, 1, {4097}, {4097}, false, false}};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        check(&cs[i]);
}

/* the cuts the comments above describe are those of a machine of 3
 * processors and more; on 1 or 2 a product is cut into as few as 2 items
 * (odd edges: 2 strips of 320 rows, the last 195; wide: 2 pieces of
 * columns; the grid of 3 x 2: 2 strips): both, on every machine */
Test(matmul, odd_edges_every_flag)
{
    cpu_matmul_set_few_items(4);
    odd_edges_every_flag();
    cpu_matmul_set_few_items(2);
    odd_edges_every_flag();
    cpu_matmul_set_few_items(0);
}
Test(matmul, wide_and_tall)
{
    cpu_matmul_set_few_items(4);
    wide_and_tall();
    cpu_matmul_set_few_items(2);
    wide_and_tall();
    cpu_matmul_set_few_items(0);
}
Test(matmul, batched_broadcast) { batched_broadcast(); }
Test(matmul, vectors) { vectors(); }

/* The products above under every kernel family of OpenBLAS that this
 * processor can run: the one tl chooses (cpu_features.c) and those a user
 * may name in OPENBLAS_CORETYPE.  Each family in a process of its own
 * (Criterion runs each test in one), the variable set before the library
 * is loaded, which reads it once; the library must say it runs that
 * family.  A family the processor cannot run is skipped, saying why (tl
 * never runs it: blas.c puts its own choice in its place). */
typedef struct family {
    char name[16]; /* by value: a test's process may be a fresh start of the binary */
} family;
static family families[] = {{"Prescott"}, {"Core2"}, {"Nehalem"},  {"Sandybridge"},
                            {"Haswell"},  {"Zen"},   {"SkylakeX"}, {"Cooperlake"}};

ParameterizedTestParameters(matmul, every_kernel_family)
{
    return cr_make_param_array(family, families, sizeof families / sizeof *families);
}

ParameterizedTest(family *fam, matmul, every_kernel_family)
{
    const char *const *family = &(const char *){fam->name};
    cpu_features f;
    cpu_features_read(&f);
    char why[256], d[640], want[64];
    if (!cpu_blas_family_runs(*family, &f, why, sizeof why))
        cr_skip_test("%s", why);
    setenv("OPENBLAS_CORETYPE", *family, 1);
    cpu_blas_describe(d, sizeof d);
    snprintf(want, sizeof want, ": %s kernels, ", *family);
    cr_assert(strstr(d, want), "%s (wanted%s)", d, want);
    /* smaller than the cases above (their cuts are tl's, the same for
     * every family), odd in every dimension, with an inner size past the
     * kernels' panel depth (256 to 384) */
    for (int dt = 0; dt < 2; dt++)
        for (int fl = 0; fl < 4; fl++) {
            bool ta = fl & 1, tb = fl & 2;
            mm_case c[] = {{dt ? TL_F64 : TL_F32, 2, 2, {ta ? 45 : 97, ta ? 97 : 45}, {tb ? 71 : 45, tb ? 45 : 71}, ta, tb},
                           {dt ? TL_F64 : TL_F32, 2, 2, {ta ? 403 : 61, ta ? 61 : 403}, {tb ? 37 : 403, tb ? 403 : 37}, ta, tb},
                           {dt ? TL_F64 : TL_F32, 4, 3, {2, 1, ta ? 29 : 61, ta ? 61 : 29}, {3, tb ? 47 : 29, tb ? 29 : 47}, ta, tb}};
            for (size_t i = 0; i < sizeof c / sizeof *c; i++)
                check(&c[i]);
        }
    vectors();
}

/* k = 0: a matrix of zeros (no BLAS call) */
Test(matmul, empty_inner)
{
    tl_status st = {0};
    tl_tensor *a = tl_tensor_new(TL_F64, 2, (int64_t[]){3, 0}, &st);
    tl_tensor *b = tl_tensor_new(TL_F64, 2, (int64_t[]){0, 4}, &st);
    tl_tensor *out = tl_tensor_new(TL_F64, 2, (int64_t[]){3, 4}, &st);
    cr_assert(a && b && out);
    for (int64_t i = 0; i < out->numel; i++)
        tl_tensor_set(out, i, NAN);
    tl_attrs at_;
    tl_attrs_init(&at_);
    cr_assert_eq(cpu_matmul(a, b, &at_, out, &st), TL_OK);
    for (int64_t i = 0; i < out->numel; i++)
        cr_expect_eq(tl_tensor_get(out, i), 0.0);
    tl_tensor_unref(a);
    tl_tensor_unref(b);
    tl_tensor_unref(out);
}

/* This program links libtl.a without OpenBLAS (the tl program links it
 * in): the weak references are NULL here, so every product in this file
 * ran on the library loaded at the first one, and says so. */
Test(matmul, blas_loaded_where_not_linked)
{
    char d[256];
    cpu_blas_describe(d, sizeof d);
    cr_expect(!strncmp(d, "OpenBLAS ", 9), "%s", d);
    cr_expect(strstr(d, ", loaded ") != NULL && strstr(d, " kernels, ") != NULL, "%s", d);
}
