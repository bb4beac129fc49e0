/* The CUDA backend's device-neutral code, tested on the host (no GPU
 * needed): index plans against the CPU's walk, launch and reduction
 * shapes, the reduction picks and the scatter order against the CPU bit
 * for bit, error messages in the CPU's words, the caching allocator, and
 * every fixture run forward and backward, and every second-derivative
 * case as hvp and jvp, on the backend's host twin
 * (tests/cuda_twin.h), each op checked against the CPU kernel as it runs:
 * bit for bit where the GPU computes in the CPU's order (elementwise, shape
 * and index ops, scatters, max and min, and the map interpreter, forward
 * and derivative; of the layer ops pools, norms, pad, resize, the line ops
 * and the draws), within a tolerance where the order is the tree's (sums,
 * products, softmax) or cuBLAS's (matmul and the convolutions, here a
 * reference gemm).  The layer ops are also checked against their formulas
 * on random geometries. */
#define _DEFAULT_SOURCE
#include <tgmath.h>

#include "fixture.h"
#include "formats/npz.h"
#include "hvpcase.h"

#include "backends/cuda/pool.h"
#include "conv_ref.h"
#include "cuda_twin.h"

/* ---------- a small deterministic random source ---------- */

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t below(int64_t n) { return (int64_t)(next() % (uint64_t)n); }

/* ---------- plans ---------- */

/* The offset of element i of `shape` in an operand with per-axis strides
 * (unmerged): the multi-index, digit by digit. */
static int64_t naive_offset(int ndim, const int64_t *shape, const int64_t *stride, int64_t i)
{
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        off += i % shape[d] * stride[d];
        i /= shape[d];
    }
    return off;
}

Test(cuda_host, broadcast_plans_decode_as_the_cpu_walks)
{
    int checked = 0;
    for (int round = 0; round < 400; round++) {
        int ndim = (int)below(7), nops = 1 + (int)below(3);
        int64_t shape[TL_MAXDIM], total = 1;
        for (int d = 0; d < ndim; d++) {
            shape[d] = below(4) ? 1 + below(4) : 1;
            total *= shape[d];
        }
        tl_status st = {0};
        tl_tensor out = {.ndim = ndim, .numel = total}, *ops[3];
        memcpy(out.shape, shape, sizeof shape);
        int64_t strides[3][TL_MAXDIM];
        for (int k = 0; k < nops; k++) {
            int nd = (int)below(ndim + 1);
            int64_t s[TL_MAXDIM];
            for (int d = 0; d < nd; d++)
                s[d] = below(3) ? shape[ndim - nd + d] : 1;
            ops[k] = tl_tensor_new(TL_F32, nd, s, &st);
            int64_t own[TL_MAXDIM];
            cpu_strides(nd, s, own);
            for (int d = 0; d < ndim; d++) {
                int od = d - (ndim - nd);
                strides[k][d] = od < 0 || s[od] == 1 ? 0 : own[od];
            }
        }
        cpu_bcast plan;
        cu_plan_broadcast(&plan, &out, nops, (const tl_tensor *const *)ops);
        for (int64_t i = 0; i < total; i++) {
            int64_t off[3];
            cu_plan_offsets(&plan, i, off);
            for (int k = 0; k < nops; k++)
                cr_assert_eq(off[k], naive_offset(ndim, shape, strides[k], i),
                             "round %d, element %lld, operand %d", round, (long long)i, k);
            checked++;
        }
        for (int k = 0; k < nops; k++)
            tl_tensor_unref(ops[k]);
    }
    cr_assert_gt(checked, 1000);
}

Test(cuda_host, strided_plans_merge_without_moving_an_element)
{
    for (int round = 0; round < 300; round++) {
        int ndim = 1 + (int)below(6);
        int64_t shape[TL_MAXDIM], xs[TL_MAXDIM], perm[TL_MAXDIM], total = 1;
        for (int d = 0; d < ndim; d++) {
            shape[d] = 1 + below(4);
            perm[d] = d;
            total *= shape[d];
        }
        if (below(2)) /* a transpose, or the identity (fully mergeable) */
            for (int d = ndim - 1; d > 0; d--) {
                int e = (int)below(d + 1);
                int64_t t = perm[d];
                perm[d] = perm[e];
                perm[e] = t;
            }
        int64_t tshape[TL_MAXDIM], st[2][TL_MAXDIM];
        cpu_strides(ndim, shape, xs);
        for (int d = 0; d < ndim; d++)
            tshape[d] = shape[perm[d]];
        cpu_strides(ndim, tshape, st[0]);
        for (int d = 0; d < ndim; d++)
            st[1][d] = xs[perm[d]];
        cpu_bcast plan;
        cu_plan_strided(&plan, ndim, tshape, 2, (const int64_t(*)[TL_MAXDIM])st);
        for (int64_t i = 0; i < total; i++) {
            int64_t off[3];
            cu_plan_offsets(&plan, i, off);
            cr_assert_eq(off[0], naive_offset(ndim, tshape, st[0], i));
            cr_assert_eq(off[1], naive_offset(ndim, tshape, st[1], i));
        }
        bool identity = true;
        for (int d = 0; d < ndim; d++)
            identity = identity && perm[d] == d;
        if (identity)
            cr_expect_eq(plan.ndim, 1, "a contiguous copy is one axis");
    }
}

/* ---------- launch shapes ---------- */

Test(cuda_host, launch_shapes)
{
    cr_expect_eq(cu_blocks(0), 1);
    cr_expect_eq(cu_blocks(1), 1);
    cr_expect_eq(cu_blocks(CU_THREADS + 1), 2);
    cr_expect_eq(cu_blocks((int64_t)1 << 50), CU_MAX_BLOCKS);
    for (int64_t total = 1; total < ((int64_t)1 << 40); total = total * 3 + 1)
        for (int64_t per = 8; per < (1 << 16); per *= 7) {
            int64_t p = cu_map_threads(total, per);
            cr_assert_eq(p % CU_THREADS, 0);
            cr_assert(p >= CU_THREADS && p <= (int64_t)CU_MAX_BLOCKS * CU_THREADS);
            cr_assert(p * per <= CU_MAP_SCRATCH || p == CU_THREADS, "scratch %lld", (long long)(p * per));
            cr_assert(p < total + CU_THREADS, "no more threads than elements, rounded up");
        }
}

/* Every element of a reduction is folded by exactly one thread of one
 * chunk, in increasing order within the thread. */
Test(cuda_host, reduction_trees_fold_every_element_once)
{
    static unsigned char seen[200000];
    int64_t sizes[] = {0, 1, 2, 15, 16, 17, 31, 32, 33, 255, 1023, 1024, 1025, 4097,
                       32767, 32768, 32769, 70001, 199999};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int contiguous = 0; contiguous < 2; contiguous++) {
            int64_t r = sizes[s];
            cu_redshape sh = cu_red_shape(r, contiguous);
            cr_assert(sh.group == 1 || sh.group == 32 || sh.group == CU_THREADS);
            cr_assert_eq(CU_THREADS % sh.group, 0);
            cr_assert(sh.nchunks >= 1 && sh.chunk * sh.nchunks >= r);
            cr_assert(r == 0 || (sh.nchunks - 1) * sh.chunk < r, "no empty chunk");
            memset(seen, 0, (size_t)r);
            for (int64_t c = 0; c < sh.nchunks; c++)
                for (int t = 0; t < sh.group; t++) {
                    int64_t lo = c * sh.chunk, hi = lo + sh.chunk < r ? lo + sh.chunk : r;
                    for (int64_t k = lo + t; k < hi; k += sh.group)
                        seen[k]++;
                }
            for (int64_t k = 0; k < r; k++)
                cr_assert_eq(seen[k], 1, "r %lld: element %lld folded %d times", (long long)r,
                             (long long)k, seen[k]);
        }
}

/* ---------- reductions and scatters against the CPU ---------- */

static tl_tensor *random_tensor(tl_dtype dt, int ndim, const int64_t *shape, bool specials)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, ndim, shape, &st);
    for (int64_t i = 0; i < t->numel; i++) {
        double v = (double)below(7) - 3; /* many ties */
        if (specials) {
            int64_t k = below(16);
            v = k == 0 ? NAN : k == 1 ? -0.0 : k == 2 ? 0.0 : k == 3 ? -INFINITY : v;
        }
        tl_tensor_set(t, i, v);
        if (specials && dt == TL_F64 && isnan(v)) /* NaNs that differ in payload */
            ((uint64_t *)t->data)[i] |= (uint64_t)below(1000);
        if (specials && dt == TL_F32 && isnan(v))
            ((uint32_t *)t->data)[i] |= (uint32_t)below(1000);
    }
    return t;
}

static bool same_bits(const tl_tensor *a, const tl_tensor *b)
{
    return a->dtype == b->dtype && tl_same_shape(a, b) && !memcmp(a->data, b->data, tl_tensor_bytes(a));
}

/* op over axes of x on the twin and the CPU. */
static void reduce_both(tl_opcode op, const tl_tensor *x, int naxes, const int64_t *axes,
                        tl_tensor **twin, tl_tensor **cpu)
{
    tl_status st = {0};
    tl_attrs a;
    tl_attrs_init(&a);
    a.has_axes = true;
    a.naxes = naxes;
    memcpy(a.axes, axes, sizeof(int64_t) * (size_t)naxes);
    int64_t shape[TL_MAXDIM];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        bool red = false;
        for (int i = 0; i < naxes; i++)
            red = red || axes[i] == d;
        if (!red)
            shape[nd++] = x->shape[d];
    }
    *twin = tl_tensor_new(x->dtype, nd, shape, &st);
    *cpu = tl_tensor_new(x->dtype, nd, shape, &st);
    const tl_tensor *in[1] = {x};
    cr_assert(!twin_kernels(op, 1, in, &a, *twin, &st), "%s", st.msg);
    cr_assert(!tl_cpu_backend.run(&tl_cpu_backend, op, 1, in, &a, *cpu, &st), "%s", st.msg);
}

Test(cuda_host, max_and_min_pick_what_the_cpu_picks)
{
    int64_t shapes[][3] = {{5, 7, 3}, {1, 70000, 1}, {3, 40000, 2}, {2, 3, 9000}, {64, 33, 5}};
    int64_t axes_sets[][3] = {{0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}, {0, 1, 2}};
    int naxes[] = {1, 1, 1, 2, 2, 2, 3};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int dt = 0; dt < 2; dt++) {
            tl_tensor *x = random_tensor((tl_dtype)dt, 3, shapes[s], true);
            for (size_t k = 0; k < sizeof naxes / sizeof *naxes; k++)
                for (int m = 0; m < 2; m++) {
                    tl_tensor *tw, *cpu;
                    reduce_both(m ? TL_OP_MIN : TL_OP_MAX, x, naxes[k], axes_sets[k], &tw, &cpu);
                    cr_assert(same_bits(tw, cpu), "%s over set %zu of shape %zu (%s)", m ? "min" : "max",
                              k, s, dt ? "f64" : "f32");
                    tl_tensor_unref(tw);
                    tl_tensor_unref(cpu);
                }
            tl_tensor_unref(x);
        }
}

Test(cuda_host, sums_agree_with_the_cpu_in_their_own_order)
{
    int64_t shape[3] = {3, 50000, 2}, ax[1] = {1};
    tl_tensor *x = random_tensor(TL_F64, 3, shape, false), *tw, *cpu, *tw2, *cpu2;
    reduce_both(TL_OP_SUM, x, 1, ax, &tw, &cpu);
    reduce_both(TL_OP_SUM, x, 1, ax, &tw2, &cpu2);
    for (int64_t i = 0; i < tw->numel; i++)
        cr_expect_eq(tl_tensor_get(tw, i), tl_tensor_get(cpu, i), "small integers sum exactly");
    cr_expect(same_bits(tw, tw2), "the same bits twice");
    tl_tensor *objs[] = {x, tw, cpu, tw2, cpu2};
    for (int i = 0; i < 5; i++)
        tl_tensor_unref(objs[i]);
    /* reduced elements in runs (batch norm's statistics: all axes but the
     * channels): groups of threads, every element once */
    int64_t runs[][3] = {{5, 3, 700}, {2, 4, 40}, {3, 2, 31}};
    int64_t both[2] = {0, 2};
    for (int s = 0; s < 3; s++) {
        tl_tensor *y = random_tensor(TL_F64, 3, runs[s], false), *a, *b;
        reduce_both(TL_OP_SUM, y, 2, both, &a, &b);
        for (int64_t i = 0; i < a->numel; i++)
            cr_expect_eq(tl_tensor_get(a, i), tl_tensor_get(b, i), "runs of %lld: small integers sum exactly",
                         (long long)runs[s][2]);
        tl_tensor_unref(y);
        tl_tensor_unref(a);
        tl_tensor_unref(b);
    }
}

/* f32 sums round once, from f64: never further from the exact sum than
 * the CPU's pairwise sum (plus the half ulp of the one rounding).  Along
 * an outer axis a thread folds 1024 elements in order; in f32 that was
 * 1.4e-5 off for 1024 values of 0.01, 146 times the CPU's error. */
Test(cuda_host, f32_sums_are_as_close_as_the_cpus)
{
    struct {
        int64_t shape[2], axis;
        double fill; /* 0: random reals */
    } cases[] = {{{1024, 4}, 0, 0.01}, {{3072, 4}, 0, 0.1}, {{5000, 3}, 0, 0}, {{4, 32768}, 1, 0}, {{2, 70001}, 1, 0.01}};
    tl_status st = {0};
    for (int c = 0; c < 5; c++) {
        tl_tensor *x = tl_tensor_new(TL_F32, 2, cases[c].shape, &st);
        cr_assert(x, "%s", st.msg);
        float *xv = x->data;
        for (int64_t i = 0; i < x->numel; i++)
            xv[i] = cases[c].fill ? (float)cases[c].fill : (float)((double)(next() >> 11) / 9007199254740992.0);
        for (int mean = 0; mean < 2; mean++) {
            tl_tensor *tw, *cpu;
            reduce_both(mean ? TL_OP_MEAN : TL_OP_SUM, x, 1, &cases[c].axis, &tw, &cpu);
            int64_t keep = cases[c].shape[1 - cases[c].axis], r = cases[c].shape[cases[c].axis];
            for (int64_t o = 0; o < keep; o++) {
                long double exact = 0;
                for (int64_t k = 0; k < r; k++)
                    exact += xv[cases[c].axis ? o * r + k : k * keep + o];
                if (mean)
                    exact /= r;
                double t = tl_tensor_get(tw, o), u = tl_tensor_get(cpu, o);
                double half_ulp = (double)(nextafterf((float)exact, INFINITY) - (float)exact) / 2;
                cr_expect(fabsl(t - exact) <= fabsl(u - exact) + half_ulp * 1.001,
                          "%s over axis %lld of f32[%lld, %lld], output %lld: the twin is %.3g off, the CPU %.3g",
                          mean ? "mean" : "sum", (long long)cases[c].axis, (long long)cases[c].shape[0],
                          (long long)cases[c].shape[1], (long long)o, (double)fabsl(t - exact),
                          (double)fabsl(u - exact));
            }
            tl_tensor_unref(tw);
            tl_tensor_unref(cpu);
        }
        tl_tensor_unref(x);
    }
}

/* take_grad and gather_grad with repeated and negative indices: the CPU's
 * bits. */
Test(cuda_host, scatters_add_in_the_cpu_order)
{
    tl_status st = {0};
    for (int dt = 0; dt < 2; dt++)
        for (int round = 0; round < 20; round++) {
            int64_t len = 1 + below(6), outer = 1 + below(4), inner = 1 + below(5), m = 1 + below(40);
            int ax = 1;
            tl_attrs a;
            tl_attrs_init(&a);
            a.axis = ax;
            a.nshape = 3;
            a.shape[0] = outer;
            a.shape[1] = len;
            a.shape[2] = inner;
            int64_t full[3] = {outer, len, inner};
            bool gather = round % 2;
            int64_t ishape[3] = {outer, m, inner}, tshape[1] = {m};
            tl_tensor *idx = gather ? tl_tensor_new(round % 4 == 1 ? TL_I32 : TL_I64, 3, ishape, &st)
                                    : tl_tensor_new(round % 4 == 0 ? TL_I32 : TL_I64, 1, tshape, &st);
            for (int64_t j = 0; j < idx->numel; j++)
                tl_tensor_set(idx, j, (double)(below(2 * len) - len));
            int64_t gshape[3] = {outer, m, inner};
            tl_tensor *g = tl_tensor_new((tl_dtype)dt, 3, gshape, &st);
            for (int64_t j = 0; j < g->numel; j++) /* sums that round differently by order */
                tl_tensor_set(g, j, ((double)below(2000) - 1000) / 7.0 * pow(10.0, (double)below(12) - 6));
            tl_tensor *tw = tl_tensor_new((tl_dtype)dt, 3, full, &st);
            tl_tensor *cpu = tl_tensor_new((tl_dtype)dt, 3, full, &st);
            const tl_tensor *in[2] = {g, idx};
            tl_opcode op = gather ? TL_OP_GATHER_GRAD : TL_OP_TAKE_GRAD;
            cr_assert(!twin_kernels(op, 2, in, &a, tw, &st), "%s", st.msg);
            cr_assert(!tl_cpu_backend.run(&tl_cpu_backend, op, 2, in, &a, cpu, &st), "%s", st.msg);
            cr_assert(same_bits(tw, cpu), "%s round %d", tl_ops[op].name, round);
            tl_tensor *objs[] = {idx, g, tw, cpu};
            for (int i = 0; i < 4; i++)
                tl_tensor_unref(objs[i]);
        }
}

/* ---------- errors in the CPU's words ---------- */

/* op on the twin and on the CPU must fail alike. */
static void fails_alike(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                        tl_dtype dt, int ndim, const int64_t *shape)
{
    tl_status s1 = {0}, s2 = {0};
    tl_tensor *o1 = tl_tensor_new(dt, ndim, shape, &s1), *o2 = tl_tensor_new(dt, ndim, shape, &s2);
    tl_code r1 = twin_kernels(op, n, in, a, o1, &s1);
    tl_code r2 = tl_cpu_backend.run(&tl_cpu_backend, op, n, in, a, o2, &s2);
    cr_expect_eq(r2, TL_EINPUT, "%s: the CPU refuses", tl_ops[op].name);
    cr_expect_eq(r1, r2, "%s", tl_ops[op].name);
    cr_expect_str_eq(s1.msg, s2.msg, "%s", tl_ops[op].name);
    tl_tensor_unref(o1);
    tl_tensor_unref(o2);
}

Test(cuda_host, index_and_cast_errors_in_the_cpu_words)
{
    tl_status st = {0};
    int64_t xs[2] = {3, 4}, is[2] = {2, 3};
    tl_tensor *x = random_tensor(TL_F32, 2, xs, false);
    tl_tensor *idx = tl_tensor_new(TL_I64, 2, is, &st);
    for (int64_t j = 0; j < 6; j++)
        tl_tensor_set(idx, j, (double)j - 3);
    tl_tensor_set(idx, 4, 9); /* [1,1] */
    tl_tensor_set(idx, 5, -7);
    tl_attrs a;
    tl_attrs_init(&a);
    a.axis = 1;
    const tl_tensor *in[2] = {x, idx};
    int64_t take_shape[3] = {3, 2, 3};
    fails_alike(TL_OP_TAKE, 2, in, &a, TL_F32, 3, take_shape);
    int64_t gshape[2] = {2, 3};
    fails_alike(TL_OP_GATHER, 2, in, &a, TL_F32, 2, gshape);
    a.depth = 4;
    a.dtype = TL_F64;
    const tl_tensor *oh[1] = {idx};
    int64_t ohshape[3] = {2, 3, 4};
    fails_alike(TL_OP_ONE_HOT, 1, oh, &a, TL_F64, 3, ohshape);
    /* take_grad: the cotangent of take along axis 0 of an f32[4,3] */
    tl_attrs g;
    tl_attrs_init(&g);
    g.axis = 0;
    tl_tensor *cot = random_tensor(TL_F32, 3, (int64_t[]){2, 3, 3}, false);
    const tl_tensor *tg[2] = {cot, idx};
    fails_alike(TL_OP_TAKE_GRAD, 2, tg, &g, TL_F32, 2, (int64_t[]){4, 3});
    /* casts out of range */
    int64_t cs[1] = {5};
    tl_tensor *f = tl_tensor_new(TL_F64, 1, cs, &st), *big = tl_tensor_new(TL_I64, 1, cs, &st);
    double vals[5] = {1.5, -2.5, 3e9, NAN, 0};
    for (int i = 0; i < 5; i++) {
        tl_tensor_set(f, i, vals[i]);
        tl_tensor_set(big, i, i == 3 ? -3e9 : i);
    }
    tl_attrs c;
    tl_attrs_init(&c);
    c.dtype = TL_I32;
    const tl_tensor *cf[1] = {f}, *cb[1] = {big};
    fails_alike(TL_OP_CAST, 1, cf, &c, TL_I32, 1, cs);
    fails_alike(TL_OP_CAST, 1, cb, &c, TL_I32, 1, cs);
    tl_tensor_set(f, 2, 1);
    c.dtype = TL_I64;
    fails_alike(TL_OP_CAST, 1, cf, &c, TL_I64, 1, cs); /* the NaN */
    /* integer division and remainders by zero (the divisor broadcast) */
    int64_t ns[2] = {2, 3}, ds[1] = {3};
    tl_tensor *num = tl_tensor_new(TL_I64, 2, ns, &st), *den = tl_tensor_new(TL_I64, 1, ds, &st);
    for (int64_t j = 0; j < 6; j++)
        tl_tensor_set(num, j, (double)j - 2);
    tl_tensor_set(den, 0, -3);
    tl_tensor_set(den, 1, 0);
    tl_tensor_set(den, 2, 0);
    tl_attrs none;
    tl_attrs_init(&none);
    const tl_tensor *nd[2] = {num, den};
    fails_alike(TL_OP_DIV, 2, nd, &none, TL_I64, 2, ns);
    fails_alike(TL_OP_MOD, 2, nd, &none, TL_I64, 2, ns);
    fails_alike(TL_OP_FMOD, 2, nd, &none, TL_I64, 2, ns);
    tl_tensor *objs[] = {x, idx, cot, f, big, num, den};
    for (int i = 0; i < 7; i++)
        tl_tensor_unref(objs[i]);
}

/* ---------- layer ops against their formulas ---------- */

/* A random convolution geometry (conv_ref.h). */

static void random_geo(geo *g, bool pool)
{
    tl_attrs_init(&g->a);
    for (;;) {
        int d = 1 + (int)below(3);
        int64_t G = pool ? 1 : 1 + below(3);
        g->a.nsp = d;
        g->a.groups = G;
        g->n = 1 + below(2);
        g->cin = G * (1 + below(3));
        g->cout = pool ? g->cin : G * (1 + below(3));
        g->xs[0] = g->ys[0] = g->n;
        g->xs[1] = g->ws[1 - pool] = g->cin;
        g->ys[1] = g->ws[0] = g->cout;
        g->ws[1] = g->cin / G;
        bool ok = true;
        for (int ax = 0; ax < d; ax++) {
            int64_t S = 1 + below(d == 3 ? 4 : 7), K = 1 + below(3), s = 1 + below(3);
            int64_t dil = 1 + below(2), lo = below(K), hi = below(K);
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

static tl_tensor *filled(tl_dtype dt, int nd, const int64_t *shape, double **vals)
{
    tl_tensor *t = random_tensor(dt, nd, shape, false);
    *vals = calloc((size_t)t->numel + 1, sizeof **vals);
    for (int64_t i = 0; i < t->numel; i++) {
        tl_tensor_set(t, i, tl_tensor_get(t, i) + (double)below(1000) / 1000);
        (*vals)[i] = tl_tensor_get(t, i);
    }
    return t;
}

Test(cuda_host, convolutions_match_their_formula)
{
    tl_status st = {0};
    for (int round = 0; round < 300; round++) {
        geo g;
        random_geo(&g, false);
        g.n = g.xs[0] = g.ys[0] = 1 + below(3);
        twin_nn_cap = round % 3 ? CU_NN_SCRATCH : 1; /* every third round: one image a chunk */
        tl_dtype dt = round % 2 ? TL_F64 : TL_F32;
        double tol = dt == TL_F32 ? 1e-5 : 1e-12;
        int nd = 2 + g.a.nsp;
        double *xv, *wv, *yv, *bv;
        tl_tensor *x = filled(dt, nd, g.xs, &xv), *w = filled(dt, nd, g.ws, &wv);
        tl_tensor *y = filled(dt, nd, g.ys, &yv), *b = filled(dt, 1, &g.cout, &bv);
        /* conv, with a bias every other round */
        bool bias = round % 4 < 2;
        int64_t S = prod(g.xs + 2, g.a.nsp), O = prod(g.ys + 2, g.a.nsp);
        double *want = calloc((size_t)(x->numel + w->numel + y->numel) + 1, sizeof *want);
        for (int64_t i = 0; i < y->numel; i++)
            want[i] = bias ? bv[i / O % g.cout] : 0;
        relation(&g, 0, xv, wv, want);
        tl_tensor *got = tl_tensor_new(dt, nd, g.ys, &st);
        const tl_tensor *in[3] = {x, w, b};
        cr_assert(!twin_kernels(TL_OP_CONV, bias ? 3 : 2, in, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), tol, "conv, round %d", round);
        tl_tensor_unref(got);
        /* conv_transpose: y into x's shape; its w is [cout, cin/groups, *K] read as
         * [cin_t, cout_t/groups, *K] with cin_t = cout */
        double *btv;
        tl_tensor *bt = filled(dt, 1, &g.cin, &btv);
        for (int64_t i = 0; i < x->numel; i++)
            want[i] = bias ? btv[i / S % g.cin] : 0;
        double *xt = calloc((size_t)x->numel, sizeof *xt);
        relation(&g, 1, xt, wv, yv);
        for (int64_t i = 0; i < x->numel; i++)
            want[i] += xt[i];
        free(xt);
        got = tl_tensor_new(dt, nd, g.xs, &st);
        const tl_tensor *tin[3] = {y, w, bt};
        cr_assert(!twin_kernels(TL_OP_CONV_TRANSPOSE, bias ? 3 : 2, tin, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), tol, "conv_transpose, round %d", round);
        tl_tensor_unref(got);
        /* conv_grad_w(x, g) */
        memset(want, 0, sizeof *want * (size_t)w->numel);
        relation(&g, 2, xv, want, yv);
        got = tl_tensor_new(dt, nd, g.ws, &st);
        const tl_tensor *gin[2] = {x, y};
        cr_assert(!twin_kernels(TL_OP_CONV_GRAD_W, 2, gin, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), tol, "conv_grad_w, round %d", round);
        tl_tensor_unref(got);
        tl_tensor *objs[] = {x, w, y, b, bt};
        for (int i = 0; i < 5; i++)
            tl_tensor_unref(objs[i]);
        free(xv), free(wv), free(yv), free(bv), free(btv), free(want);
    }
    twin_nn_cap = CU_NN_SCRATCH;
}

Test(cuda_host, pools_match_their_formula)
{
    tl_status st = {0};
    for (int round = 0; round < 400; round++) {
        geo g;
        random_geo(&g, true);
        bool avg = round % 2;
        tl_dtype dt = round % 4 < 2 ? TL_F32 : TL_F64;
        int d = g.a.nsp, nd = 2 + d;
        if (avg) /* PyTorch's avg_pool: no dilation, padding at most half the kernel */
            for (int ax = 0; ax < d; ax++) {
                g.a.dilation[ax] = 1;
                g.a.pad_lo[ax] = g.a.pad_hi[ax] = below(g.a.kernel[ax] / 2 + 1);
                int64_t span = g.xs[2 + ax] + 2 * g.a.pad_lo[ax] - g.a.kernel[ax];
                if (span < 0) {
                    g.a.pad_lo[ax] = g.a.pad_hi[ax] = 0;
                    g.a.kernel[ax] = g.ws[2 + ax] = 1;
                    span = g.xs[2 + ax] - 1;
                }
                g.ys[2 + ax] = span / g.a.stride[ax] + 1;
            }
        g.a.count_include_pad = round % 8 < 4;
        double *xv, *yv;
        tl_tensor *x = filled(dt, nd, g.xs, &xv), *gr = filled(dt, nd, g.ys, &yv);
        int64_t S = prod(g.xs + 2, d), O = prod(g.ys + 2, d), K = prod(g.a.kernel, d);
        memcpy(g.ws + 2, g.a.kernel, sizeof(int64_t) * (size_t)d);
        double *vv, *want = calloc((size_t)(2 * gr->numel + x->numel), sizeof *want), *dx = want + gr->numel;
        double *picked = dx + x->numel;
        tl_tensor *v = tl_tensor_new(dt, nd, g.xs, &st); /* distinct values, no draws */
        vv = calloc((size_t)v->numel + 1, sizeof *vv);
        for (int64_t i = 0; i < v->numel; i++)
            tl_tensor_set(v, i, vv[i] = 0.25 * (double)i - 3);
        for (int64_t pl = 0; pl < g.n * g.cin; pl++)
            for (int64_t o = 0; o < O; o++) {
                double best = -INFINITY, sum = 0;
                int64_t pick = -1, count = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t i = wide_at(&g, o, k);
                    if (i < 0)
                        continue;
                    double v = xv[pl * S + i];
                    sum += v;
                    count++;
                    if (pick < 0 || v > best)
                        best = v, pick = i;
                }
                if (avg && g.a.count_include_pad) { /* the window clipped to the padded input */
                    int64_t oi[TL_MAXSP];
                    cu_unravel(d, g.ys + 2, o, oi);
                    count = 1;
                    for (int ax = 0; ax < d; ax++) {
                        int64_t st0 = oi[ax] * g.a.stride[ax] - g.a.pad_lo[ax];
                        int64_t end = st0 + g.a.kernel[ax];
                        end = end < g.xs[2 + ax] + g.a.pad_hi[ax] ? end : g.xs[2 + ax] + g.a.pad_hi[ax];
                        count *= end - st0;
                    }
                }
                want[pl * O + o] = avg ? sum / (double)count : best;
                double gv = yv[pl * O + o];
                if (avg)
                    for (int64_t k = 0; k < K; k++) {
                        int64_t i = wide_at(&g, o, k);
                        if (i >= 0)
                            dx[pl * S + i] += gv / (double)count;
                    }
                else if (pick >= 0)
                    dx[pl * S + pick] += gv;
                if (!avg) /* max_pool_pick(x, v): v at the pick */
                    picked[pl * O + o] = pick >= 0 ? vv[pl * S + pick] : 0;
            }
        tl_tensor *got = tl_tensor_new(dt, nd, g.ys, &st);
        const tl_tensor *in[2] = {x, gr};
        cr_assert(!twin_kernels(avg ? TL_OP_AVG_POOL : TL_OP_MAX_POOL, 1, in, &g.a, got, &st), "%s", st.msg);
        cr_assert_leq(worst_of(got, want), avg ? 1e-6 : 0, "%s, round %d", avg ? "avg_pool" : "max_pool", round);
        tl_tensor_unref(got);
        got = tl_tensor_new(dt, nd, g.xs, &st);
        if (avg) {
            const tl_tensor *gin[1] = {gr};
            cr_assert(!twin_kernels(TL_OP_AVG_POOL_GRAD, 1, gin, &g.a, got, &st), "%s", st.msg);
        } else {
            cr_assert(!twin_kernels(TL_OP_MAX_POOL_GRAD, 2, in, &g.a, got, &st), "%s", st.msg);
        }
        cr_assert_leq(worst_of(got, dx), 1e-6, "%s_grad, round %d", avg ? "avg_pool" : "max_pool", round);
        tl_tensor_unref(got);
        if (!avg) { /* a copy: exact */
            const tl_tensor *pin[2] = {x, v};
            got = tl_tensor_new(dt, nd, g.ys, &st);
            cr_assert(!twin_kernels(TL_OP_MAX_POOL_PICK, 2, pin, &g.a, got, &st), "%s", st.msg);
            cr_assert_eq(worst_of(got, picked), 0, "max_pool_pick, round %d", round);
            tl_tensor_unref(got);
        }
        tl_tensor_unref(x);
        tl_tensor_unref(gr);
        tl_tensor_unref(v);
        free(xv), free(yv), free(vv), free(want);
    }
}

/* pad_grad is pad's adjoint: <pad(x), g> = <x, pad_grad(g)>, and pad
 * itself is numpy.pad on a few cases. */
Test(cuda_host, pad_grad_is_the_adjoint_of_pad)
{
    tl_status st = {0};
    for (int round = 0; round < 300; round++) {
        int nd = 1 + (int)below(3);
        tl_attrs a;
        tl_attrs_init(&a);
        a.mode = (int)below(4);
        a.npads = nd;
        a.value = 0;
        int64_t xs[TL_MAXDIM], ys[TL_MAXDIM];
        for (int ax = 0; ax < nd; ax++) {
            xs[ax] = 1 + below(5);
            int64_t lo = below(7) - 2, hi = below(7) - 2;
            if (xs[ax] + (lo < 0 ? lo : 0) + (hi < 0 ? hi : 0) < 1)
                lo = hi = 0;
            a.pads[2 * ax] = lo;
            a.pads[2 * ax + 1] = hi;
            ys[ax] = xs[ax] + lo + hi;
        }
        double *xv, *gv;
        tl_tensor *x = filled(TL_F64, nd, xs, &xv), *g = filled(TL_F64, nd, ys, &gv);
        tl_tensor *y = tl_tensor_new(TL_F64, nd, ys, &st), *dx = tl_tensor_new(TL_F64, nd, xs, &st);
        const tl_tensor *in[1] = {x}, *gin[1] = {g};
        cr_assert(!twin_kernels(TL_OP_PAD, 1, in, &a, y, &st), "%s", st.msg);
        cr_assert(!twin_kernels(TL_OP_PAD_GRAD, 1, gin, &a, dx, &st), "%s", st.msg);
        double l = 0, r = 0;
        for (int64_t i = 0; i < y->numel; i++)
            l += tl_tensor_get(y, i) * gv[i];
        for (int64_t i = 0; i < x->numel; i++)
            r += xv[i] * tl_tensor_get(dx, i);
        cr_assert(fabs(l - r) <= 1e-9 * (fabs(l) + 1), "round %d mode %d: %g against %g", round, a.mode, l, r);
        tl_tensor *objs[] = {x, g, y, dx};
        for (int i = 0; i < 4; i++)
            tl_tensor_unref(objs[i]);
        free(xv), free(gv);
    }
    /* numpy.pad(np.arange(4), (6, 5), mode) */
    static const double want[3][15] = {
        {0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2},
        {0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3},
        {2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0},
    };
    int64_t xs = 4, ys = 15;
    tl_tensor *x = tl_tensor_new(TL_I32, 1, &xs, &st), *y = tl_tensor_new(TL_I32, 1, &ys, &st);
    for (int i = 0; i < 4; i++)
        tl_tensor_set(x, i, i);
    for (int m = 0; m < 3; m++) {
        tl_attrs a;
        tl_attrs_init(&a);
        a.mode = m + 1;
        a.npads = 1;
        a.pads[0] = 6;
        a.pads[1] = 5;
        const tl_tensor *in[1] = {x};
        cr_assert(!twin_kernels(TL_OP_PAD, 1, in, &a, y, &st), "%s", st.msg);
        for (int i = 0; i < 15; i++)
            cr_expect_eq(tl_tensor_get(y, i), want[m][i], "mode %d, element %d", m + 1, i);
    }
    tl_tensor_unref(x);
    tl_tensor_unref(y);
}

/* op on the twin and on the CPU: the same bits (or the same error). */
static void same_as_cpu(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                        tl_dtype dt, int ndim, const int64_t *shape, const char *what)
{
    tl_status s1 = {0}, s2 = {0};
    tl_tensor *o1 = tl_tensor_new(dt, ndim, shape, &s1), *o2 = tl_tensor_new(dt, ndim, shape, &s2);
    tl_code r1 = twin_kernels(op, n, in, a, o1, &s1);
    tl_code r2 = tl_cpu_backend.run(&tl_cpu_backend, op, n, in, a, o2, &s2);
    cr_assert_eq(r1, r2, "%s (%s): %s / %s", tl_ops[op].name, what, s1.msg, s2.msg);
    if (r1)
        cr_assert_str_eq(s1.msg, s2.msg, "%s (%s)", tl_ops[op].name, what);
    else
        cr_assert(same_bits(o1, o2), "%s (%s)", tl_ops[op].name, what);
    tl_tensor_unref(o1);
    tl_tensor_unref(o2);
}

Test(cuda_host, lines_and_draws_have_the_cpu_bits)
{
    tl_status st = {0};
    for (int round = 0; round < 200; round++) {
        int nd = 1 + (int)below(3), ax = (int)below(nd);
        int64_t shape[3], rshape[3], ishape[3];
        for (int d = 0; d < nd; d++)
            shape[d] = ishape[d] = 1 + below(5);
        ishape[ax] = below(6);
        tl_dtype dt = round % 2 ? TL_F64 : TL_F32;
        tl_tensor *x = random_tensor(dt, nd, shape, true), *src = random_tensor(dt, nd, ishape, false);
        tl_tensor *idx = tl_tensor_new(round % 3 ? TL_I64 : TL_I32, nd, ishape, &st);
        for (int64_t j = 0; j < idx->numel; j++) /* a bad one now and then */
            tl_tensor_set(idx, j, (double)(below(2 * shape[ax] + (round % 10 == 0)) - shape[ax]));
        tl_attrs a;
        tl_attrs_init(&a);
        a.axis = ax;
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        const tl_tensor *sin[3] = {x, idx, src}, *xin[1] = {x};
        same_as_cpu(TL_OP_SCATTER_ADD, 3, sin, &a, dt, nd, shape, what);
        for (int last = 0; last < 2; last++) {
            a.select_last = last;
            int r = 0;
            for (int d = 0; d < nd; d++)
                if (d != ax)
                    rshape[r++] = shape[d];
            same_as_cpu(TL_OP_ARGMAX, 1, xin, &a, TL_I64, r, rshape, what);
            same_as_cpu(TL_OP_ARGMIN, 1, xin, &a, TL_I64, r, rshape, what);
        }
        a.exclusive = round % 4 < 2;
        a.reverse = round % 8 < 4;
        tl_tensor *xi = random_tensor(round % 3 ? TL_I64 : TL_I32, nd, shape, false);
        const tl_tensor *iin[1] = {xi};
        same_as_cpu(TL_OP_CUMSUM, 1, xin, &a, dt, nd, shape, what);
        same_as_cpu(TL_OP_CUMSUM, 1, iin, &a, xi->dtype, nd, shape, what);
        a.seed = (int64_t)next();
        a.rng_node = (uint64_t)below(100);
        a.rng_step = (uint64_t)below(3);
        a.low = -1.5;
        a.high = 2.25;
        a.p = (double)below(10) / 10;
        a.training = 1;
        same_as_cpu(TL_OP_RANDOM_UNIFORM, 0, xin, &a, dt, nd, shape, what);
        a.mean = -0.75;
        a.std = 1.5;
        same_as_cpu(TL_OP_RANDOM_NORMAL, 0, xin, &a, dt, nd, shape, what);
        same_as_cpu(TL_OP_DROPOUT, 1, xin, &a, dt, nd, shape, what);
        a.training = 0;
        same_as_cpu(TL_OP_DROPOUT, 1, xin, &a, dt, nd, shape, what);
        tl_tensor *objs[] = {x, src, idx, xi};
        for (int i = 0; i < 4; i++)
            tl_tensor_unref(objs[i]);
    }
}

/* Long rows: the norms' sums through psum.h's whole tree, the CPU's bits. */
/* n variances: random magnitudes, at least 0.5 */
static tl_tensor *variances(tl_dtype dt, int64_t n)
{
    tl_tensor *v = random_tensor(dt, 1, &n, false);
    for (int64_t i = 0; i < n; i++)
        tl_tensor_set(v, i, fabs(tl_tensor_get(v, i)) + 0.5);
    return v;
}

Test(cuda_host, norms_of_long_rows_have_the_cpu_bits)
{
    for (int dt = 0; dt < 2; dt++) {
        int64_t shape[3] = {2, 6, 701 + 350 * dt}, cs[1] = {6}, ls[2] = {6, shape[2]};
        tl_tensor *x = random_tensor((tl_dtype)dt, 3, shape, false);
        tl_tensor *g = random_tensor((tl_dtype)dt, 3, shape, false);
        tl_tensor *sc = random_tensor((tl_dtype)dt, 1, cs, false), *bi = random_tensor((tl_dtype)dt, 1, cs, false);
        tl_tensor *lsc = random_tensor((tl_dtype)dt, 2, ls, false), *lbi = random_tensor((tl_dtype)dt, 2, ls, false);
        for (int64_t i = 0; i < x->numel; i++)
            tl_tensor_set(x, i, tl_tensor_get(x, i) * 0.37 + (double)(i % 11) / 3);
        tl_attrs a;
        tl_attrs_init(&a);
        a.epsilon = 1e-5;
        a.groups = 3;
        a.axis = 1;
        const tl_tensor *gn[3] = {x, sc, bi}, *ln[3] = {x, lsc, lbi}, *lg[3] = {x, g, lsc};
        same_as_cpu(TL_OP_GROUP_NORM, 3, gn, &a, (tl_dtype)dt, 3, shape, "group_norm");
        same_as_cpu(TL_OP_GROUP_NORM, 1, gn, &a, (tl_dtype)dt, 3, shape, "group_norm, no scale");
        same_as_cpu(TL_OP_LAYER_NORM, 3, ln, &a, (tl_dtype)dt, 3, shape, "layer_norm");
        same_as_cpu(TL_OP_LAYER_NORM_GRAD, 3, lg, &a, (tl_dtype)dt, 3, shape, "layer_norm_grad");
        same_as_cpu(TL_OP_LAYER_NORM_GRAD, 2, lg, &a, (tl_dtype)dt, 3, shape, "layer_norm_grad, no scale");
        int64_t ps[3] = {2, 6, shape[2]};
        same_as_cpu(TL_OP_LAYER_NORM_PARAMS_GRAD, 2, lg, &a, (tl_dtype)dt, 3, ps, "layer_norm_params_grad");
        a.axis = 2; /* rows of one axis: many rows to a chunk */
        ps[1] = shape[2];
        same_as_cpu(TL_OP_LAYER_NORM_PARAMS_GRAD, 2, lg, &a, (tl_dtype)dt, 2, ps + 1, "layer_norm_params_grad, axis 2");
        a.axis = 1;
        /* rows long enough that the CPU sums them by columns (chunks of 15
         * rows, a last block of columns short; and a row a chunk) */
        for (int k = 0; k < 2; k++) {
            int64_t lshape[2] = {k ? 3 : 40, k ? 70001 : 4100}, pshape[2] = {2, lshape[1]};
            tl_tensor *lx = random_tensor((tl_dtype)dt, 2, lshape, false), *lgr = random_tensor((tl_dtype)dt, 2, lshape, false);
            const tl_tensor *lp[2] = {lx, lgr};
            same_as_cpu(TL_OP_LAYER_NORM_PARAMS_GRAD, 2, lp, &a, (tl_dtype)dt, 2, pshape, "layer_norm_params_grad, long rows");
            tl_tensor_unref(lx);
            tl_tensor_unref(lgr);
        }
        /* batch norm's weight gradient: each (n, c) row's leaves on threads
         * of their own, joined in psum.h's tree */
        tl_tensor *bm = random_tensor((tl_dtype)dt, 1, cs, false), *bv = variances((tl_dtype)dt, 6);
        const tl_tensor *bn[4] = {x, g, bm, bv};
        int64_t bs[2] = {2, 6};
        same_as_cpu(TL_OP_BATCH_NORM_PARAMS_GRAD, 4, bn, &a, (tl_dtype)dt, 2, bs, "batch_norm_params_grad");
        int64_t wide[4] = {3, 2, 61, 83}, c2[1] = {2}; /* 5063 elements a row: a deeper tree */
        tl_tensor *wx = random_tensor((tl_dtype)dt, 4, wide, false), *wg = random_tensor((tl_dtype)dt, 4, wide, false);
        tl_tensor *bm2 = random_tensor((tl_dtype)dt, 1, c2, false), *bv2 = variances((tl_dtype)dt, 2);
        const tl_tensor *wbn[4] = {wx, wg, bm2, bv2};
        int64_t ws[2] = {2, 2};
        same_as_cpu(TL_OP_BATCH_NORM_PARAMS_GRAD, 4, wbn, &a, (tl_dtype)dt, 2, ws, "batch_norm_params_grad, 5063 a row");
        tl_tensor *objs[] = {x, g, sc, bi, lsc, lbi, bm, bv, wx, wg, bm2, bv2};
        for (int i = 0; i < 12; i++)
            tl_tensor_unref(objs[i]);
    }
}

/* ---------- the caching allocator ---------- */

typedef struct fake_mem {
    int64_t live, allocs, frees;
    int64_t fail_after; /* raw allocations that succeed; -1: all */
} fake_mem;

static void *fake_alloc(void *ctx, size_t bytes)
{
    fake_mem *m = ctx;
    if (m->fail_after >= 0 && m->allocs >= m->fail_after)
        return NULL;
    m->allocs++;
    m->live++;
    return malloc(bytes);
}

static void fake_free(void *ctx, void *p)
{
    fake_mem *m = ctx;
    m->frees++;
    m->live--;
    free(p);
}

Test(cuda_host, pool_classes)
{
    size_t prev = 0;
    for (int c = 0; c < 300; c++) {
        size_t b = cu_pool_class_bytes(c);
        cr_assert_gt(b, prev, "class sizes grow");
        cr_assert_eq(cu_pool_class(b), c, "a class's own size is in it");
        cr_assert_eq(cu_pool_class(prev + 1), c, "so is one byte more than the last class");
        if (c > 8)
            cr_assert_leq((double)b / (double)(prev + 1), 1.125 + 1e-9, "at most 12.5%% slack");
        prev = b;
    }
    cr_expect_eq(cu_pool_class(1), 0);
    cr_expect_eq(cu_pool_class(512), 0);
    cr_expect_eq(cu_pool_class(513), 1);
}

Test(cuda_host, pool_reuses_and_trims)
{
    fake_mem m = {0, 0, 0, -1};
    cu_pool p;
    cu_pool_init(&p, fake_alloc, fake_free, &m);
    void *a = cu_pool_alloc(&p, 1000), *b = cu_pool_alloc(&p, 1000);
    cr_assert(a && b && a != b);
    cu_pool_release(&p, a);
    cr_expect_eq(cu_pool_alloc(&p, 990), a, "the same class comes back from the cache");
    cr_expect_eq(m.allocs, 2);
    cu_pool_release(&p, (void *)&m); /* not the pool's: ignored */
    cu_pool_release(&p, NULL);
    void *many[1000];
    for (int i = 0; i < 1000; i++)
        many[i] = cu_pool_alloc(&p, (size_t)(i % 50) * 4096 + 1);
    for (int i = 0; i < 1000; i += 2)
        cu_pool_release(&p, many[i]);
    int64_t raw = m.allocs;
    for (int i = 0; i < 1000; i += 2)
        cr_assert(many[i] = cu_pool_alloc(&p, (size_t)(i % 50) * 4096 + 1));
    cr_expect_eq(m.allocs, raw, "every one of them from the cache");
    /* out of memory: the cache is given back and the request retried */
    for (int i = 0; i < 1000; i += 2)
        cu_pool_release(&p, many[i]);
    m.fail_after = m.allocs;
    void *big = cu_pool_alloc(&p, (size_t)1 << 24);
    cr_expect_null(big, "the raw allocator refuses");
    cr_expect_eq(p.cached, 0, "after giving back the whole cache");
    m.fail_after = -1;
    cr_expect_not_null(cu_pool_alloc(&p, (size_t)1 << 24));
    cu_pool_destroy(&p);
    cr_expect_eq(m.live, 0, "destroy gives everything back");
}

/* ---------- every fixture on the twin ---------- */

/* Ops whose order of rounding on the GPU is not the CPU's. */
static bool reordered(tl_opcode op)
{
    switch (op) {
    case TL_OP_SUM:
    case TL_OP_MEAN:
    case TL_OP_PROD:
    case TL_OP_LOGSUMEXP:
    case TL_OP_SOFTMAX:
    case TL_OP_LOG_SOFTMAX:
    case TL_OP_PROD_GRAD:
    case TL_OP_MATMUL:
    case TL_OP_CONV: /* gemms */
    case TL_OP_CONV_TRANSPOSE:
    case TL_OP_CONV_GRAD_W: return true;
    default: return false;
    }
}

static struct {
    int64_t ops[TL_OP_COUNT], bad[TL_OP_COUNT];
    double worst[TL_OP_COUNT]; /* reordered ops: the largest scaled difference */
} seen;

/* |got - want| / (tol scale): NaN and infinities must match exactly. */
static double distance(const tl_tensor *got, const tl_tensor *want)
{
    double scale = 1, worst = 0;
    for (int64_t i = 0; i < want->numel; i++) {
        double w = fabs(tl_tensor_get(want, i));
        if (isfinite(w) && w > scale)
            scale = w;
    }
    for (int64_t i = 0; i < want->numel; i++) {
        double x = tl_tensor_get(got, i), y = tl_tensor_get(want, i);
        if (isnan(y) || isinf(y)) {
            if (!(isnan(y) ? isnan(x) : x == y))
                return INFINITY;
            continue;
        }
        double d = fabs(x - y) / (fabs(y) + scale);
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

static void observe(tl_opcode op, int n, const tl_tensor *const *in, const tl_tensor *got, tl_code rc,
                    const tl_status *st, const tl_tensor *cpu, tl_code cpu_rc, const tl_status *cpu_st)
{
    (void)n, (void)in;
    seen.ops[op]++;
    bool ok;
    if (rc || cpu_rc)
        ok = rc == cpu_rc && !strcmp(st->msg, cpu_st->msg);
    else if (!reordered(op))
        ok = same_bits(got, cpu);
    else {
        double d = distance(got, cpu);
        seen.worst[op] = d > seen.worst[op] || isnan(d) ? d : seen.worst[op];
        ok = d <= (got->dtype == TL_F32 ? 1e-5 : 1e-13);
    }
    if (!ok) {
        seen.bad[op]++;
        cr_log_error("%s on %s differs from the CPU", tl_ops[op].name, tl_dtype_name(got->dtype));
    }
}

static tl_backend *twin;

/* Both missing, or close (by dtype). */
static bool near(const tl_tensor *got, const tl_tensor *want)
{
    if (!got || !want)
        return got == want;
    return distance(got, want) <= (want->dtype == TL_F32 ? 1e-4 : 1e-10);
}

/* The fixture on the twin, forward and backward: results close to the
 * CPU's (each op was checked as it ran). */
static int on_twin(const char *dir, const char *name)
{
    fixture f;
    tl_status st = {0};
    if (!load(dir, name, &f)) {
        unload(&f);
        return 1;
    }
    tl_tensor *cpu[128] = {0}, *tw[128] = {0}; /* outputs, then gradients from 64 */
    cr_assert(eval(&f, f.in, cpu, cpu + 64, &st), "%s on the CPU: %s", name, st.msg);
    int bad = !eval_on(twin, &f, f.in, tw, tw + 64, &st);
    if (bad)
        cr_log_error("%s on the twin: %s", name, st.msg);
    for (int i = 0; i < 128; i++) {
        if (!bad && !near(tw[i], cpu[i])) {
            cr_log_error("%s: %s %d differs from the CPU's", name, i < 64 ? "output" : "the gradient of input",
                         i % 64);
            bad = 1;
        }
        tl_tensor_unref(cpu[i]);
        tl_tensor_unref(tw[i]);
    }
    unload(&f);
    return bad;
}

static int on_twin_if_map(const char *dir, const char *name)
{
    return strstr(name, "map") ? on_twin(dir, name) : 0;
}

/* Second derivatives on the twin, each op call of the recorded backward
 * checked as it runs like every other: through max_pool (padded, strided,
 * dilated: max_pool_pick among its kernels), and through a map whose body
 * holds gelu with approximate="tanh" (the backward is a map of the body's
 * derivative program, whose gelu_grad the device's interpreter ran in the
 * erf form: 4.2424 for 4.2458 at x = 2). f32 and f64. */
static int second_on_twin(void)
{
    static const char *json[] = {
        "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": ["
        "{\"id\": \"a\", \"op\": \"sin\", \"args\": [\"x\"]},"
        "{\"id\": \"p\", \"op\": \"max_pool\", \"args\": [\"a\"], \"kernel\": [2, 3], "
        "\"stride\": [1, 2], \"padding\": 1, \"dilation\": [2, 1]},"
        "{\"id\": \"y\", \"op\": \"square\", \"args\": [\"p\"]}], \"outputs\": \"y\"}",
        "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": ["
        "{\"id\": \"z\", \"op\": \"map\", \"args\": [\"x\"], \"params\": [\"a\"], \"body\": {\"nodes\": ["
        "{\"id\": \"q\", \"op\": \"gelu\", \"args\": [\"a\"], \"approximate\": \"tanh\"},"
        "{\"id\": \"r\", \"op\": \"gelu\", \"args\": [\"a\"]},"
        "{\"id\": \"s\", \"op\": \"mul\", \"args\": [\"q\", \"r\"]}], \"result\": \"s\"}},"
        "{\"id\": \"y\", \"op\": \"square\", \"args\": [\"z\"]}], \"outputs\": \"y\"}"};
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        tl_status st = {0};
        tl_graph *g = tl_graph_parse(json[k], strlen(json[k]), k ? "gelu_map.json" : "pick.json", &st);
        cr_assert(g, "%s", st.msg);
        for (int f64 = 0; f64 < 2; f64++) {
            int64_t shape[4] = {2, 3, 5, 6};
            double *xv, *tv;
            tl_tensor *x = filled(f64 ? TL_F64 : TL_F32, 4, shape, &xv), *t = filled(x->dtype, 4, shape, &tv);
            tl_tensor *grad[2] = {NULL}, *h[2] = {NULL};
            for (int dev = 0; dev < 2; dev++) {
                tl_run_opts o = {.record = true, .twice = true, .backend = dev ? twin : NULL};
                tl_result *r = NULL;
                if (tl_run(g, &x, &o, &r, &st) || tl_result_pullback_recorded(r, NULL, false, &grad[dev], &st) ||
                    tl_result_pullback_again(r, &t, &h[dev], NULL, &st)) {
                    cr_log_error("hvp of %s on the %s: %s", g->path, dev ? "twin" : "CPU", st.msg);
                    bad = 1;
                }
                tl_result_free(r);
            }
            if (!near(grad[1], grad[0]) || !near(h[1], h[0])) {
                cr_log_error("hvp of %s (%s) on the twin differs from the CPU's", g->path, tl_dtype_name(x->dtype));
                bad = 1;
            }
            for (int dev = 0; dev < 2; dev++) {
                tl_tensor_unref(grad[dev]);
                tl_tensor_unref(h[dev]);
            }
            tl_tensor_unref(x);
            tl_tensor_unref(t);
            free(xv), free(tv);
        }
        tl_graph_free(g);
    }
    return bad;
}

static void run_fixtures(checker check, int *fails, int *count)
{
    const char *dirs[] = {"tests/fixtures/ops", "tests/fixtures/flow", "tests/fixtures/nn"};
    memset(&seen, 0, sizeof seen);
    twin = twin_open();
    twin_watch = observe;
    *fails = *count = 0;
    for (int d = 0; d < 3; d++) {
        int f, c;
        DIR *there = opendir(dirs[d]); /* the layer ops' fixtures come with their families */
        if (!there)
            continue;
        closedir(there);
        each_case(dirs[d], check, false, &f, &c);
        *fails += f;
        *count += c;
    }
    if (check == on_twin)
        *fails += second_on_twin();
    twin_watch = NULL;
    testdev_close(twin); /* every buffer released */
}

/* The op calls the observer saw; each op's that differed from the CPU's
 * fail the test. */
static int64_t calls_checked(void)
{
    int64_t total = 0;
    for (int op = 0; op < TL_OP_COUNT; op++) {
        total += seen.ops[op];
        cr_expect_eq(seen.bad[op], 0, "%s: %lld of %lld calls differ from the CPU", tl_ops[op].name,
                     (long long)seen.bad[op], (long long)seen.ops[op]);
    }
    return total;
}

Test(cuda_host, every_fixture_on_the_twin)
{
    int fails, count;
    run_fixtures(on_twin, &fails, &count);
    cr_assert_geq(count, 697, "only %d fixtures", count);
    cr_expect_eq(fails, 0, "%d of %d fixtures differ on the twin", fails, count);
    int64_t total = calls_checked();
    for (int op = 0; op < TL_OP_COUNT; op++) {
        bool kernel = cu_has_kernel((tl_opcode)op);
        cr_expect(!kernel || seen.ops[op] > 0, "%s never ran on the twin", tl_ops[op].name);
        if (reordered(op))
            cr_log_info("%-12s %6lld calls, largest scaled difference from the CPU %.3g", tl_ops[op].name,
                        (long long)seen.ops[op], seen.worst[op]);
    }
    cr_log_info("%d fixtures, %lld op calls on the twin", count, (long long)total);
}

/* Every second-derivative case (tests/fixtures/hvp/cases.npz: the op and
 * control-flow fixtures and compositions of every op family) as hvp and
 * jvp on the twin: each op call of the recorded forward and backward
 * checked against the CPU as it runs, and the products close to the CPU's. */
static void hvp_on_twin(const tl_npz *z, const char *dir, const char *name, int *fails, int *count)
{
    (void)count;
    hcase h;
    load_case(z, dir, name, &h);
    int n = h.g->ninputs + h.g->noutputs;
    for (int jvp = 0; jvp < 2; jvp++) {
        tl_tensor **a = calloc((size_t)n + 1, sizeof *a), **b = calloc((size_t)n + 1, sizeof *b);
        bool ok = products(&h, NULL, jvp, a) && products(&h, twin, jvp, b);
        for (int i = 0; ok && i < n; i++)
            if (!near(b[i], a[i])) {
                cr_log_error("%s/%s: %s %d differs on the twin", dir, name, jvp ? "jvp" : "hvp", i);
                ok = false;
            }
        *fails += !ok;
        for (int i = 0; i < n; i++) {
            tl_tensor_unref(a[i]);
            tl_tensor_unref(b[i]);
        }
        free(a);
        free(b);
    }
    free_case(&h);
}

Test(cuda_host, every_second_derivative_case_on_the_twin)
{
    int fails, count;
    memset(&seen, 0, sizeof seen);
    twin = twin_open();
    twin_watch = observe;
    each(hvp_on_twin, &fails, &count);
    twin_watch = NULL;
    testdev_close(twin);
    cr_assert_geq(count, 300, "only %d cases", count);
    cr_expect_eq(fails, 0, "%d of %d cases differ on the twin", fails, count);
    int64_t total = calls_checked();
    cr_expect_gt(seen.ops[TL_OP_MAX_POOL_PICK], 0, "max_pool_pick never ran");
    cr_log_info("%d cases, %lld op calls on the twin", count, (long long)total);
}

Test(cuda_host, map_interpreter_matches_the_cpu_engine_bit_for_bit)
{
    int fails, count;
    run_fixtures(on_twin_if_map, &fails, &count);
    cr_expect_eq(fails, 0);
    cr_expect_gt(seen.ops[TL_OP_MAP], 15, "map calls: %lld", (long long)seen.ops[TL_OP_MAP]);
    cr_expect_gt(seen.ops[TL_OP_MAP_GRAD], 10, "map_grad calls: %lld", (long long)seen.ops[TL_OP_MAP_GRAD]);
    cr_expect_eq(seen.bad[TL_OP_MAP], 0);
    cr_expect_eq(seen.bad[TL_OP_MAP_GRAD], 0);
}
