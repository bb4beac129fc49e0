/* The defining sums of convolution in double, for the tests that check
 * kernels against them (test_conv.c: the CPU's; test_cuda_host.c: the
 * CUDA plugin's host twin).  A geometry: x [n, cin, *S],
 * w [cout, cin/groups, *K], y [n, cout, *O]; output position o reads
 * through tap k the input at o stride - pad_lo + k dilation on each axis. */
#ifndef TL_TESTS_CONV_REF_H
#define TL_TESTS_CONV_REF_H

#include <math.h>

#include "backends/tensor.h"

typedef struct geo {
    tl_attrs a;
    int64_t n, cin, cout, xs[2 + TL_MAXSP], ws[2 + TL_MAXSP], ys[2 + TL_MAXSP];
} geo;

static inline int64_t prod(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

/* x's spatial offset that output position o reads through tap k, or -1
 * outside x */
static inline int64_t wide_at(const geo *g, int64_t o, int64_t k)
{
    int d = g->a.nsp;
    int64_t off = 0, orest = o, krest = k, oi[TL_MAXSP], ki[TL_MAXSP];
    for (int ax = d - 1; ax >= 0; ax--) {
        oi[ax] = orest % g->ys[2 + ax], orest /= g->ys[2 + ax];
        ki[ax] = krest % g->ws[2 + ax], krest /= g->ws[2 + ax];
    }
    for (int ax = 0; ax < d; ax++) {
        int64_t i = oi[ax] * g->a.stride[ax] - g->a.pad_lo[ax] + ki[ax] * g->a.dilation[ax];
        if (i < 0 || i >= g->xs[2 + ax])
            return -1;
        off = off * g->xs[2 + ax] + i;
    }
    return off;
}

/* The three products of the relation, added into their target: mode 0
 * y += conv(x, w), 1 x += conv_transpose(y, w), 2 w += conv_grad_w(x, y). */
static inline void relation(const geo *g, int mode, double *x, double *w, double *y)
{
    int d = g->a.nsp;
    int64_t G = g->a.groups, cin_g = g->cin / G, cout_g = g->cout / G;
    int64_t S = prod(g->xs + 2, d), O = prod(g->ys + 2, d), K = prod(g->ws + 2, d);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t co = 0; co < g->cout; co++)
            for (int64_t cl = 0; cl < cin_g; cl++)
                for (int64_t k = 0; k < K; k++)
                    for (int64_t o = 0; o < O; o++) {
                        int64_t i = wide_at(g, o, k), ci = co / cout_g * cin_g + cl;
                        if (i < 0)
                            continue;
                        double *xv = &x[(n * g->cin + ci) * S + i], *wv = &w[(co * cin_g + cl) * K + k];
                        double *yv = &y[(n * g->cout + co) * O + o];
                        if (mode == 0)
                            *yv += *wv * *xv;
                        else if (mode == 1)
                            *xv += *wv * *yv;
                        else
                            *wv += *yv * *xv;
                    }
}

/* The largest difference from want, relative to its largest magnitude
 * (at least 1); NaN where any is. */
static inline double worst_of(const tl_tensor *t, const double *want)
{
    double scale = 1, worst = 0;
    for (int64_t i = 0; i < t->numel; i++)
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
    for (int64_t i = 0; i < t->numel; i++) {
        double e = fabs(tl_tensor_get(t, i) - want[i]) / scale;
        worst = e > worst || isnan(e) ? e : worst;
    }
    return worst;
}

#endif
