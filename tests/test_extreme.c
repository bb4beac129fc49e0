/* max and min, bit for bit: the CPU's max and min reductions and its
 * max_pool and max_pool_grad kernels against their element-by-element
 * definitions (ops.md, nn.md): a fold from the first element that a later
 * one replaces only when greater (smaller), or NaN.  So the result is the
 * last NaN (its payload), else the first element equal to the extreme
 * (its sign, for +0 and -0), and a pool's gradient goes to that element.
 * The kernels find these another way (lanes and blocks on the worker
 * threads, padded planes in phases), so the inputs are made of what tells
 * the ways apart: NaNs with distinct payloads, zeros of both signs, ties,
 * infinities; sizes across the kernels' blocks; pool planes small enough
 * for the padded path and one too large for it. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/tensor.h"
#include "splitmix.h"

static uint64_t rng_state = 0x243f6a8885a308d3u;

static int64_t below(int64_t n) { return (int64_t)(splitmix64(&rng_state) % (uint64_t)n); }

/* A NaN whose payload is k (quiet, positive or negative). */
static double nan_with(tl_dtype dt, uint64_t k, bool neg)
{
    if (dt == TL_F32) {
        uint32_t b = 0x7fc00000u | (uint32_t)(k & 0x3fffff) | (neg ? 0x80000000u : 0);
        float f;
        memcpy(&f, &b, 4);
        return f; /* float to double and back keeps a quiet NaN's payload */
    }
    uint64_t b = 0x7ff8000000000000u | (k & 0x7ffffffffffff) | (neg ? 0x8000000000000000u : 0);
    double d;
    memcpy(&d, &b, 8);
    return d;
}

/* Element i of a tensor of `kind`: 0 plain values, 1 ties and signed
 * zeros, 2 those with NaNs and infinities. */
static void fill_value(tl_tensor *t, int64_t i, int kind, uint64_t *nans)
{
    int64_t r = below(1000);
    double v = (double)(below(7) - 3);
    if (kind == 0)
        v = (double)(below(1 << 20) - (1 << 19)) / 4096;
    else if (r < 300)
        v = r < 150 ? 0.0 : -0.0;
    if (kind == 2 && r >= 990) {
        v = nan_with(t->dtype, ++*nans, r & 1);
        memcpy((char *)t->data + i * (int64_t)tl_dtype_size(t->dtype),
               t->dtype == TL_F32 ? (void *)&(float){(float)v} : (void *)&v, tl_dtype_size(t->dtype));
        return;
    }
    if (kind == 2 && r >= 980)
        v = r & 1 ? INFINITY : -INFINITY;
    tl_tensor_set(t, i, v);
}

static tl_tensor *random_tensor(tl_dtype dt, int nd, const int64_t *shape, int kind)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, nd, shape, &st);
    cr_assert(t, "%s", st.msg);
    uint64_t nans = 0;
    for (int64_t i = 0; i < t->numel; i++)
        fill_value(t, i, kind, &nans);
    return t;
}

static bool same_element(const tl_tensor *a, int64_t i, const tl_tensor *b, int64_t j)
{
    size_t es = tl_dtype_size(a->dtype);
    return !memcmp((const char *)a->data + (size_t)i * es, (const char *)b->data + (size_t)j * es, es);
}

/* The fold's step: does v replace the current extreme c? */
static bool replaces(double v, double c, bool max) { return v != v || (max ? v > c : v < c); }

Test(extreme, reductions_fold_bit_for_bit)
{
    tl_status st = {0};
    for (int round = 0; round < 240; round++) {
        tl_dtype dt = round % 2 ? TL_F64 : TL_F32;
        bool max = round % 4 < 2;
        int kind = round / 4 % 3;
        int nd = 1 + (int)below(3);
        int64_t shape[3];
        for (int d = 0; d < nd; d++)
            shape[d] = 1 + below(round % 5 == 0 ? 40 : 9);
        if (round % 12 == 3) /* one long run: across blocks of 2^16 and lanes */
            nd = 1, shape[0] = 200000 + below(70000);
        if (round % 12 == 7) /* long rows */
            nd = 2, shape[0] = 3, shape[1] = 70000 + below(1000);
        tl_tensor *x = random_tensor(dt, nd, shape, kind);
        /* the last k axes (contiguous runs), or all */
        int k = 1 + (int)below(nd);
        tl_attrs a;
        tl_attrs_init(&a);
        a.naxes = k;
        int64_t run = 1, oshape[3];
        for (int i = 0; i < k; i++) {
            a.axes[i] = nd - k + i;
            run *= shape[nd - k + i];
        }
        for (int d = 0; d < nd - k; d++)
            oshape[d] = shape[d];
        tl_tensor *y = tl_tensor_new(dt, nd - k, oshape, &st);
        cr_assert(y, "%s", st.msg);
        cr_assert(!cpu_reduce(max ? TL_OP_MAX : TL_OP_MIN, x, &a, y, &st), "%s", st.msg);
        for (int64_t o = 0; o < y->numel; o++) {
            int64_t best = o * run;
            for (int64_t i = 1; i < run; i++)
                if (replaces(tl_tensor_get(x, o * run + i), tl_tensor_get(x, best), max))
                    best = o * run + i;
            cr_assert(same_element(y, o, x, best), "round %d (%s %s, kind %d, %lld elements a run): output %lld is "
                      "%.17g, the fold gives %.17g (element %lld)", round, max ? "max" : "min",
                      tl_dtype_name(dt), kind, (long long)run, (long long)o, tl_tensor_get(y, o),
                      tl_tensor_get(x, best), (long long)best);
        }
        tl_tensor_unref(x);
        tl_tensor_unref(y);
    }
}

/* A pool's geometry over d spatial axes, every window with an element
 * inside the input. */
typedef struct pool_geo {
    int d;
    int64_t xs[5], ys[5];
    tl_attrs a;
} pool_geo;

static void random_pool(pool_geo *g, int round)
{
    tl_attrs_init(&g->a);
    g->d = round % 7 == 6 ? 3 : 1 + round % 2;
    g->a.nsp = g->d;
    g->xs[0] = g->ys[0] = 1 + below(2);
    g->xs[1] = g->ys[1] = 1 + below(3);
    for (int i = 0; i < g->d; i++) {
        int64_t k = 1 + below(4), s = 1 + below(3), dl = 1 + below(2), reach = (k - 1) * dl;
        int64_t lo = below(reach / 2 + 1), hi = below(reach / 2 + 1);
        int64_t in = reach + 1 - lo - hi + below(g->d == 3 ? 6 : 60);
        if (in < 1)
            in = 1;
        g->a.kernel[i] = k, g->a.stride[i] = s, g->a.dilation[i] = dl;
        g->a.pad_lo[i] = lo, g->a.pad_hi[i] = hi;
        g->xs[2 + i] = in;
        g->ys[2 + i] = (in + lo + hi - reach - 1) / s + 1;
        if (g->ys[2 + i] < 1) { /* no whole window: try again */
            random_pool(g, round);
            return;
        }
    }
    if (round == 5) { /* one plane of more than 2^20 elements: the bounded path */
        g->d = g->a.nsp = 2;
        g->xs[0] = g->ys[0] = g->xs[1] = g->ys[1] = 1;
        g->xs[2] = 1030, g->xs[3] = 1031;
        for (int i = 0; i < 2; i++) {
            g->a.kernel[i] = 3, g->a.stride[i] = 2, g->a.dilation[i] = 1, g->a.pad_lo[i] = g->a.pad_hi[i] = 1;
            g->ys[2 + i] = (g->xs[2 + i] + 2 - 2 - 1) / 2 + 1;
        }
    }
}

/* the window elements of output o inside the input, in row-major order:
 * the first one whose fold wins, or -1 where none */
static int64_t pool_argmax(const pool_geo *g, const tl_tensor *x, int64_t plane, const int64_t *op)
{
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
    for (int i = 0, j = 3 - g->d; i < g->d; i++, j++)
        in[j] = g->xs[2 + i], k[j] = g->a.kernel[i], s[j] = g->a.stride[i], dl[j] = g->a.dilation[i],
        lo[j] = g->a.pad_lo[i];
    int64_t best = -1, isz = in[0] * in[1] * in[2];
    for (int64_t a = 0; a < k[0]; a++)
        for (int64_t b = 0; b < k[1]; b++)
            for (int64_t c = 0; c < k[2]; c++) {
                int64_t p[3] = {op[0] * s[0] - lo[0] + a * dl[0], op[1] * s[1] - lo[1] + b * dl[1],
                                op[2] * s[2] - lo[2] + c * dl[2]};
                if (p[0] < 0 || p[0] >= in[0] || p[1] < 0 || p[1] >= in[1] || p[2] < 0 || p[2] >= in[2])
                    continue;
                int64_t at = plane * isz + (p[0] * in[1] + p[1]) * in[2] + p[2];
                if (best < 0 || replaces(tl_tensor_get(x, at), tl_tensor_get(x, best), true))
                    best = at;
            }
    return best;
}

Test(extreme, max_pool_and_its_gradient_bit_for_bit)
{
    tl_status st = {0};
    for (int round = 0; round < 160; round++) {
        pool_geo g;
        random_pool(&g, round);
        tl_dtype dt = round % 3 == 1 ? TL_F64 : TL_F32;
        int nd = 2 + g.d, kind = round % 3;
        tl_tensor *x = random_tensor(dt, nd, g.xs, kind), *gy = random_tensor(dt, nd, g.ys, 0);
        tl_tensor *y = tl_tensor_new(dt, nd, g.ys, &st), *dx = tl_tensor_new(dt, nd, g.xs, &st);
        cr_assert(y && dx, "%s", st.msg);
        const tl_tensor *in[2] = {x, gy};
        cr_assert(!cpu_pool(TL_OP_MAX_POOL, 1, in, &g.a, y, &st), "%s", st.msg);
        cr_assert(!cpu_pool(TL_OP_MAX_POOL_GRAD, 2, in, &g.a, dx, &st), "%s", st.msg);
        /* the definition: each output its window's fold; each gradient
         * added to its argmax in the order of the outputs */
        tl_tensor *want = tl_tensor_zeros(dt, nd, g.xs, &st);
        int64_t O[3] = {1, 1, 1};
        for (int i = 0, j = 3 - g.d; i < g.d; i++, j++)
            O[j] = g.ys[2 + i];
        int64_t planes = g.xs[0] * g.xs[1], osz = O[0] * O[1] * O[2];
        for (int64_t p = 0; p < planes; p++)
            for (int64_t o = 0; o < osz; o++) {
                int64_t op[3] = {o / (O[1] * O[2]), o / O[2] % O[1], o % O[2]};
                int64_t best = pool_argmax(&g, x, p, op);
                cr_assert(best >= 0);
                cr_assert(same_element(y, p * osz + o, x, best),
                          "round %d (%dd, %s, kind %d): output %lld is %.17g, the fold gives %.17g", round, g.d,
                          tl_dtype_name(dt), kind, (long long)(p * osz + o), tl_tensor_get(y, p * osz + o),
                          tl_tensor_get(x, best));
                tl_tensor_set(want, best, tl_tensor_get(want, best) + tl_tensor_get(gy, p * osz + o));
            }
        if (dt == TL_F32) /* the sums in f32, as the kernel adds them */
            for (int64_t p = 0; p < planes; p++) {
                float *w = want->data;
                memset(w + p * (x->numel / planes), 0, sizeof(float) * (size_t)(x->numel / planes));
                for (int64_t o = 0; o < osz; o++) {
                    int64_t op[3] = {o / (O[1] * O[2]), o / O[2] % O[1], o % O[2]};
                    int64_t best = pool_argmax(&g, x, p, op);
                    w[best] += ((const float *)gy->data)[p * osz + o];
                }
            }
        for (int64_t i = 0; i < x->numel; i++)
            cr_assert(same_element(dx, i, want, i), "round %d (%dd, %s, kind %d): dx[%lld] is %.17g, expected %.17g",
                      round, g.d, tl_dtype_name(dt), kind, (long long)i, tl_tensor_get(dx, i),
                      tl_tensor_get(want, i));
        tl_tensor *objs[] = {x, gy, y, dx, want};
        for (int i = 0; i < 5; i++)
            tl_tensor_unref(objs[i]);
    }
}
