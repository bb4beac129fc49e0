/* The CPU's convolution kernels (conv, conv_transpose, conv_grad_w)
 * against their defining sums in double, over random geometries: 1-, 2-
 * and 3-d, strides, dilations, asymmetric padding, groups, depthwise,
 * output padding, channel and position counts that leave partial blocks
 * and vectors, f32 and f64, with and without bias, written over their
 * input.  Each test runs in a process of its own (Criterion forks), so
 * the same cases run on each path the CPU backend has: its own AVX-512
 * kernels (on a processor with AVX-512 F), its own AVX2 ones (on one with
 * AVX2 and FMA; TL_CONV=avx2 where it has AVX-512 too), and the im2col
 * and OpenBLAS path (TL_CONV=blas, on every processor). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/tensor.h"
#include "conv_ref.h"
#include "splitmix.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t next(void) { return splitmix64(&rng_state); }

static int64_t below(int64_t n) { return (int64_t)(next() % (uint64_t)n); }

/* big3d: 3-d with planes of 8 to 16 by 8 to 16 (the own kernels' padded
 * grid takes them; the small ones of the other rounds mostly run on the
 * im2col path) */
static void random_geo(geo *g, int round, bool big3d)
{
    for (;;) {
        tl_attrs_init(&g->a);
        int d = big3d || round % 5 == 4 ? 3 : 1 + round % 2; /* mostly 1-d and 2-d */
        int64_t G = below(4) ? 1 : 2 + below(2);
        bool dw = below(8) == 0;
        g->a.nsp = d;
        g->a.groups = G;
        g->n = 1 + below(3);
        g->cin = G * (dw ? 1 : 1 + below(d == 3 ? 4 : 11));
        g->cout = G * (1 + below(d == 3 ? 5 : 21));
        g->xs[0] = g->ys[0] = g->n;
        g->xs[1] = g->cin;
        g->ys[1] = g->ws[0] = g->cout;
        g->ws[1] = g->cin / G;
        bool ok = true;
        for (int ax = 0; ax < d; ax++) {
            int64_t S = big3d ? (ax ? 8 + below(9) : 1 + below(6)) : 1 + below(d == 3 ? 6 : d == 2 ? 24 : 70);
            int64_t K = 1 + below(d == 3 ? 3 : 4);
            int64_t s = below(3) ? 1 : 2 + below(2), dil = below(3) ? 1 : 2, lo = below(K + 1), hi = below(K + 1);
            g->a.kernel[ax] = K;
            g->a.stride[ax] = s;
            g->a.dilation[ax] = dil;
            g->a.pad_lo[ax] = lo;
            g->a.pad_hi[ax] = hi;
            g->xs[2 + ax] = S;
            g->ws[2 + ax] = K;
            int64_t span = S + lo + hi - dil * (K - 1) - 1;
            ok = ok && span >= 0;
            g->ys[2 + ax] = span >= 0 ? span / s + 1 : 0;
        }
        if (ok)
            return;
    }
}

/* A tensor of values in [-1, 1) (exact in f32), and them in double. */
static tl_tensor *filled(tl_dtype dt, int nd, const int64_t *shape, double **vals)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, nd, shape, &st);
    cr_assert(t, "%s", st.msg);
    *vals = calloc((size_t)t->numel + 1, sizeof **vals);
    for (int64_t i = 0; i < t->numel; i++) {
        double v = (double)((int64_t)below(2048) - 1024) / 1024;
        tl_tensor_set(t, i, v);
        (*vals)[i] = v;
    }
    return t;
}

static void describe(const geo *g, char *buf, size_t len)
{
    int n = snprintf(buf, len, "x [%lld, %lld, ...] w [%lld, %lld] groups %lld:", (long long)g->n,
                     (long long)g->cin, (long long)g->cout, (long long)g->ws[1], (long long)g->a.groups);
    for (int ax = 0; ax < g->a.nsp && n > 0 && (size_t)n < len; ax++)
        n += snprintf(buf + n, len - (size_t)n, " S %lld K %lld s %lld d %lld pad %lld/%lld;",
                      (long long)g->xs[2 + ax], (long long)g->a.kernel[ax], (long long)g->a.stride[ax],
                      (long long)g->a.dilation[ax], (long long)g->a.pad_lo[ax], (long long)g->a.pad_hi[ax]);
}

static void run_rounds(int rounds, bool big3d)
{
    tl_status st = {0};
    for (int round = 0; round < rounds; round++) {
        geo g;
        random_geo(&g, round, big3d);
        char what[400];
        describe(&g, what, sizeof what);
        tl_dtype dt = round % 3 == 1 ? TL_F64 : TL_F32;
        double tol = dt == TL_F32 ? 1e-5 : 1e-12;
        int nd = 2 + g.a.nsp;
        double *xv, *wv, *yv, *bv, *btv;
        tl_tensor *x = filled(dt, nd, g.xs, &xv), *w = filled(dt, nd, g.ws, &wv);
        tl_tensor *y = filled(dt, nd, g.ys, &yv), *b = filled(dt, 1, &g.cout, &bv);
        tl_tensor *bt = filled(dt, 1, &g.cin, &btv);
        bool bias = round % 4 < 2;
        int64_t S = prod(g.xs + 2, g.a.nsp), O = prod(g.ys + 2, g.a.nsp);
        double *want = calloc((size_t)(x->numel + w->numel + y->numel) + 1, sizeof *want);

        /* conv */
        for (int64_t i = 0; i < y->numel; i++)
            want[i] = bias ? bv[i / O % g.cout] : 0;
        relation(&g, 0, xv, wv, want);
        tl_tensor *got = tl_tensor_new(dt, nd, g.ys, &st);
        const tl_tensor *in[3] = {x, w, b};
        cr_assert(!cpu_conv(TL_OP_CONV, bias ? 3 : 2, in, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), tol, "conv, round %d, %s: off by %g", round, what, worst_of(got, want));
        tl_tensor_unref(got);

        /* conv_transpose, y into x's shape (the kernel reads the geometry
         * from the shapes; the output padding is what makes it so) */
        for (int64_t i = 0; i < x->numel; i++)
            want[i] = bias ? btv[i / S % g.cin] : 0;
        double *xt = calloc((size_t)x->numel, sizeof *xt);
        relation(&g, 1, xt, wv, yv);
        for (int64_t i = 0; i < x->numel; i++)
            want[i] += xt[i];
        free(xt);
        got = tl_tensor_new(dt, nd, g.xs, &st);
        const tl_tensor *tin[3] = {y, w, bt};
        cr_assert(!cpu_conv(TL_OP_CONV_TRANSPOSE, bias ? 3 : 2, tin, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), tol, "conv_transpose, round %d, %s: off by %g", round, what,
                      worst_of(got, want));
        /* written over its input where the shapes allow (as tl_op_over may) */
        if (y->numel == x->numel && !memcmp(g.xs, g.ys, sizeof g.xs)) {
            tl_tensor *over = tl_tensor_new(dt, nd, g.ys, &st);
            memcpy(over->data, y->data, tl_dtype_size(dt) * (size_t)y->numel);
            const tl_tensor *oin[3] = {over, w, bt};
            cr_assert(!cpu_conv(TL_OP_CONV_TRANSPOSE, bias ? 3 : 2, oin, &g.a, over, &st), "%s", st.msg);
            cr_assert(!memcmp(over->data, got->data, tl_dtype_size(dt) * (size_t)y->numel),
                      "conv_transpose over its input differs, round %d, %s", round, what);
            tl_tensor_unref(over);
        }
        tl_tensor_unref(got);

        /* conv_grad_w(x, y) */
        memset(want, 0, sizeof *want * (size_t)w->numel);
        relation(&g, 2, xv, want, yv);
        got = tl_tensor_new(dt, nd, g.ws, &st);
        const tl_tensor *gin[2] = {x, y};
        cr_assert(!cpu_conv(TL_OP_CONV_GRAD_W, 2, gin, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), tol, "conv_grad_w, round %d, %s: off by %g", round, what,
                      worst_of(got, want));
        tl_tensor_unref(got);

        tl_tensor *objs[] = {x, w, y, b, bt};
        for (int i = 0; i < 5; i++)
            tl_tensor_unref(objs[i]);
        free(xv), free(wv), free(yv), free(bv), free(btv), free(want);
    }
}

Test(conv, kernels_match_their_formula) { run_rounds(400, false); }

/* 3-d convolutions big enough for the own kernels' grid (a plane of
 * depth a tap of it), on each path */
Test(conv, three_d_kernels_match_their_formula) { run_rounds(24, true); }

Test(conv, three_d_avx2_kernels_match_their_formula)
{
    setenv("TL_CONV", "avx2", 1);
    run_rounds(24, true);
}

Test(conv, three_d_blas_path_matches_its_formula)
{
    setenv("TL_CONV", "blas", 1);
    run_rounds(24, true);
}

Test(conv, blas_path_matches_its_formula)
{
    setenv("TL_CONV", "blas", 1);
    run_rounds(400, false);
}

Test(conv, grid_path_matches_its_formula)
{
    setenv("TL_CONV", "grid", 1);
    run_rounds(400, false);
}

Test(conv, avx2_kernels_match_their_formula)
{
    setenv("TL_CONV", "avx2", 1);
    run_rounds(400, false);
}

/* A tensor of random values with every bit of the mantissa used, so that
 * a sum in another order would show in the bits. */
static tl_tensor *noisy(tl_dtype dt, int nd, const int64_t *shape)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, nd, shape, &st);
    cr_assert(t, "%s", st.msg);
    for (int64_t i = 0; i < t->numel; i++)
        tl_tensor_set(t, i, (double)(next() >> 11) * 0x1p-52 - 1.0);
    return t;
}

/* conv, and conv_transpose with stride 1 (a conv of the kernel flipped),
 * over columns of every sample where a sample has few output positions
 * (the padded grid's blocks of 32 f32 or 16 f64 positions then mostly
 * junk: every geometry below has at most 6x6 positions a sample) give the
 * bits of the padded grid's way (TL_CONV=grid): each output element is
 * the same chain of multiply-adds over the channels and taps in order. */
/* base: TL_CONV as the run's kernels are chosen (NULL: unset); the
 * kernels' set is chosen at the first call, so toggling TL_CONV to grid
 * after it keeps the set */
static void columns_give_the_grids_bits(const char *base)
{
    tl_status st = {0};
    for (int round = 0; round < 300; round++) {
        geo g;
        tl_attrs_init(&g.a);
        int d = 1 + round % 2;
        g.a.nsp = d;
        g.a.groups = below(4) ? 1 : 2;
        g.n = 1 + below(9);
        g.cin = g.a.groups * (1 + below(40));
        g.cout = g.a.groups * (1 + below(70));
        g.xs[0] = g.ys[0] = g.n;
        g.xs[1] = g.cin;
        g.ys[1] = g.ws[0] = g.cout;
        g.ws[1] = g.cin / g.a.groups;
        bool unit = true;
        for (int ax = 0; ax < d; ax++) {
            int64_t K = 1 + below(3), s = below(3) ? 1 : 2, dil = below(4) ? 1 : 2;
            int64_t O = 1 + below(6), lo = below(K), hi = below(K);
            int64_t S = (O - 1) * s + dil * (K - 1) + 1 - lo - hi;
            if (S < 1) { /* less padding, the same output */
                S = (O - 1) * s + dil * (K - 1) + 1;
                lo = hi = 0;
            }
            g.a.kernel[ax] = K, g.a.stride[ax] = s, g.a.dilation[ax] = dil;
            g.a.pad_lo[ax] = lo, g.a.pad_hi[ax] = hi;
            g.xs[2 + ax] = S, g.ws[2 + ax] = K, g.ys[2 + ax] = O;
            unit = unit && s == 1;
        }
        char what[400];
        describe(&g, what, sizeof what);
        tl_dtype dt = round % 3 == 1 ? TL_F64 : TL_F32;
        int nd = 2 + d;
        bool bias = round % 4 < 2;
        tl_tensor *x = noisy(dt, nd, g.xs), *w = noisy(dt, nd, g.ws), *y = noisy(dt, nd, g.ys);
        tl_tensor *b = noisy(dt, 1, &g.cout), *bt = noisy(dt, 1, &g.cin);
        for (int op = 0; op < (unit ? 2 : 1); op++) {
            const int64_t *shape = op ? g.xs : g.ys;
            const tl_tensor *in[3] = {op ? y : x, w, op ? bt : b};
            tl_tensor *got[2];
            for (int way = 0; way < 2; way++) {
                if (way)
                    setenv("TL_CONV", "grid", 1);
                else if (base)
                    setenv("TL_CONV", base, 1);
                else
                    unsetenv("TL_CONV");
                got[way] = tl_tensor_new(dt, nd, shape, &st);
                cr_assert(!cpu_conv(op ? TL_OP_CONV_TRANSPOSE : TL_OP_CONV, bias ? 3 : 2, in, &g.a, got[way], &st),
                          "%s", st.msg);
            }
            unsetenv("TL_CONV");
            cr_assert(!memcmp(got[0]->data, got[1]->data, tl_dtype_size(dt) * (size_t)got[0]->numel),
                      "%s over columns and over the grid differ, round %d, %s", op ? "conv_transpose" : "conv", round,
                      what);
            tl_tensor_unref(got[0]);
            tl_tensor_unref(got[1]);
        }
        tl_tensor *objs[] = {x, w, y, b, bt};
        for (int i = 0; i < 5; i++)
            tl_tensor_unref(objs[i]);
    }
}

Test(conv, columns_give_the_grids_bits) { columns_give_the_grids_bits(NULL); }

Test(conv, avx2_columns_give_the_grids_bits) { columns_give_the_grids_bits("avx2"); }
