/* The GPU check of the bundle (make gpu-bundle; run by tests/gpu/run.sh).
 *
 *   gpu_check [--device D] DIR...   every fixture of the folders (ops and
 *       control flow) on device D (default cuda) with --strict-device,
 *       forward and backward, against the PyTorch references; each fixture
 *       runs twice and the two runs must give the same bits.  Prints the
 *       failures, then the max abs and rel error per op and dtype, and last
 *       "gpu_check: N passed, M failed".  Exit 0 when all pass, 1 when any
 *       fails, 2 when the device cannot be opened (every fixture counts as
 *       failed).  --device cpu runs the same check on the CPU: a control
 *       that tests the checker and its tolerances on any machine.
 *   gpu_check bench-ew [--device D]   elementwise throughput as a fraction
 *       of the device's copy bandwidth, measured side by side.
 *   --fallback: ops without a kernel on the device run on the CPU (the
 *       layer ops' fixtures: not every one has a CUDA kernel).
 *   gpu_check bench-conv GRAPH [--device D]   one 3x3 convolution layer's
 *       training step (x, w, b and their gradients), timed.
 *   gpu_check bench-mlp GRAPH [--device D]   one MLP training step (inputs
 *       up, forward, backward, gradients down) timed.
 *   gpu_check bench GRAPH INPUTS.npz [--device D]   any graph's training
 *       step (every float input's gradient), its inputs from the .npz.
 *   gpu_check compare GOT.npz WANT.npz   every tensor of WANT in GOT, within
 *       the f32 tolerance of whole graphs (1e-4); exit 1 on a difference.
 *
 * Tolerances: |got - want| <= rtol |want| + atol max(1, max|want|) with
 * atol = rtol, NaN and infinities exactly, signed zeros where the fixture
 * is about them (neg_zero), index tensors exactly.  f64: rtol 1e-12 (the
 * GPU's libm is within 2 ulp; sums and products run in another order);
 * wider only where the math amplifies an ulp (see f64_tolerance).  f32: by
 * op (f32_tolerance): 1e-5 for elementwise ops and data movement, 1e-4
 * where f32 rounding accumulates (reductions, products, softmax, control
 * flow, whole graphs). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/device.h"
#include "exec/exec.h"
#include "formats/npz.h"

/* ---------- tolerances ---------- */

/* Fixture groups: the op a fixture is named after (ops.def), else its
 * first word (if, iterate, map, kink, graph, xent). */
static void group_of(const char *name, char *group, size_t len)
{
    size_t best = 0;
    for (int i = 0; i < TL_OP_COUNT; i++) {
        size_t n = strlen(tl_ops[i].name);
        if (n > best && !strncmp(name, tl_ops[i].name, n) && name[n] == '_')
            best = n;
    }
    if (!best)
        best = strcspn(name, "_");
    snprintf(group, len, "%.*s", (int)best, name);
}

static bool in_list(const char *group, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(group, *list))
            return true;
    return false;
}

/* Reordered sums and products, and chains of ops. */
static const char *const accumulating[] = {"sum", "mean", "prod", "logsumexp", "softmax",
                                           "log_softmax", "matmul", "graph", "xent", "if",
                                           "iterate", "map", "kink", "conv", "conv_transpose",
                                           "max_pool", "avg_pool", "batch_norm", "layer_norm",
                                           "group_norm", "pad", "resize", "scatter_add",
                                           "cumsum", "dropout", NULL};
/* Where one ulp of an input is amplified (tan near its poles, pow, long
 * recurrences), f64 gets more room. */
static const char *const amplifying[] = {"pow", "tan", "iterate", "map", "kink", "graph", NULL};

static double f32_tolerance(const char *group) { return in_list(group, accumulating) ? 1e-4 : 1e-5; }

static double f64_tolerance(const char *group) { return in_list(group, amplifying) ? 1e-10 : 1e-12; }

/* ---------- statistics per op and dtype ---------- */

typedef struct stat {
    char group[48];
    tl_dtype dtype;
    int cases, failed;
    double max_abs, max_rel, tol;
} stat;

static stat stats[512];
static int nstats;

static stat *stat_for(const char *group, tl_dtype dt)
{
    for (int i = 0; i < nstats; i++)
        if (stats[i].dtype == dt && !strcmp(stats[i].group, group))
            return &stats[i];
    stat *s = &stats[nstats < 511 ? nstats++ : 511];
    memset(s, 0, sizeof *s);
    snprintf(s->group, sizeof s->group, "%s", group);
    s->dtype = dt;
    s->tol = dt == TL_F32 ? f32_tolerance(group) : f64_tolerance(group);
    return s;
}

/* Compares got with the reference; records the errors in s.  Returns
 * false with why filled in on a mismatch. */
static bool close_enough(const tl_tensor *got, const tl_tensor *want, stat *s, bool signed_zero,
                         char *why, size_t len)
{
    char a[96], b[96];
    if (!tl_same_shape(got, want)) {
        snprintf(why, len, "shape %s, expected %s", tl_tensor_desc(got, a, 96), tl_tensor_desc(want, b, 96));
        return false;
    }
    bool exact = tl_dtype_is_int(got->dtype);
    double scale = 1, tol = s->tol;
    for (int64_t i = 0; i < want->numel; i++) {
        double w = fabs(tl_tensor_get(want, i));
        if (isfinite(w) && w > scale)
            scale = w;
    }
    bool ok = true;
    for (int64_t i = 0; i < want->numel; i++) {
        double x = tl_tensor_get(got, i), y = tl_tensor_get(want, i), d = fabs(x - y);
        bool fine;
        if (exact || isnan(y) || isinf(y))
            fine = exact ? tl_dtype_is_int(want->dtype) && tl_tensor_get_int(got, i) == tl_tensor_get_int(want, i)
                         : isnan(y) ? isnan(x) : x == y;
        else {
            fine = d <= tol * fabs(y) + tol * scale;
            if (d > s->max_abs)
                s->max_abs = d;
            if (y != 0 && d / fabs(y) > s->max_rel)
                s->max_rel = d / fabs(y);
        }
        if (fine && signed_zero && y == 0)
            fine = signbit(x) == signbit(y);
        if (!fine && ok) {
            snprintf(why, len, "[%lld]: got %.17g, expected %.17g", (long long)i, x, y);
            ok = false;
        }
    }
    return ok;
}

/* --fallback: ops without a device kernel run on the CPU (else
 * --strict-device refuses them). */
static bool fallback;

/* ---------- one fixture ---------- */

typedef struct run_out {
    int no, ni;
    tl_tensor *out[64], *grad[64];
} run_out;

static void run_free(run_out *r)
{
    for (int i = 0; i < r->no; i++)
        tl_tensor_unref(r->out[i]);
    for (int i = 0; i < r->ni; i++)
        tl_tensor_unref(r->grad[i]);
    memset(r, 0, sizeof *r);
}

static bool run_once(const tl_backend *be, const tl_graph *g, tl_tensor *const *in,
                     tl_tensor *const *seed, run_out *r, tl_status *st)
{
    tl_run_opts o = {.record = true, .backend = be, .strict_device = !fallback};
    tl_result *res;
    memset(r, 0, sizeof *r);
    if (g->noutputs > 64 || g->ninputs > 64)
        return tl_fail(st, TL_EINPUT, "too many outputs or inputs"), false;
    if (tl_run(g, in, &o, &res, st))
        return false;
    r->no = g->noutputs;
    r->ni = g->ninputs;
    for (int i = 0; i < r->no; i++)
        r->out[i] = tl_tensor_ref((tl_tensor *)tl_result_output(res, i));
    bool ok = !tl_result_pullback(res, seed, r->grad, st);
    tl_result_free(res);
    return ok;
}

static bool same_bits(const tl_tensor *a, const tl_tensor *b)
{
    if (!a || !b)
        return a == b;
    return a->dtype == b->dtype && tl_same_shape(a, b) && !memcmp(a->data, b->data, tl_tensor_bytes(a));
}

/* Runs the fixture DIR/NAME twice; prints a line for each failure. */
static bool check_fixture(const tl_backend *be, const char *dir, const char *name)
{
    char path[1024], key[320], why[1100] = "", group[48];
    tl_status st = {0};
    group_of(name, group, sizeof group);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    tl_graph *g = tl_graph_load(path, &st);
    snprintf(path, sizeof path, "%s/%s.npz", dir, name);
    tl_npz *z = g ? tl_npz_open(path, &st) : NULL;
    tl_tensor *in[65] = {0}, *seed[65] = {0};
    run_out r1 = {0}, r2 = {0};
    bool ok = z != NULL;
    for (int i = 0; ok && i < g->ninputs && i < 64; i++) {
        snprintf(key, sizeof key, "in/%s", g->inputs[i].name);
        ok = (in[i] = tl_npz_get(z, key, &st)) != NULL;
    }
    for (int i = 0; ok && i < g->noutputs && i < 64; i++) {
        snprintf(key, sizeof key, "seed/%s", g->slot_name[g->outputs[i]]);
        ok = (seed[i] = tl_npz_get(z, key, &st)) != NULL;
        if (ok && tl_dtype_is_int(seed[i]->dtype)) { /* an index output: nothing to seed */
            tl_tensor_unref(seed[i]);
            seed[i] = NULL;
        }
    }
    ok = ok && run_once(be, g, in, seed, &r1, &st) && run_once(be, g, in, seed, &r2, &st);
    if (!ok)
        snprintf(why, sizeof why, "%s", st.msg);
    bool sz = strstr(name, "neg_zero") != NULL;
    for (int i = 0; ok && i < r1.no; i++) {
        const char *oname = g->slot_name[g->outputs[i]];
        snprintf(key, sizeof key, "out/%s", oname);
        tl_tensor *want = tl_npz_get(z, key, &st);
        stat *s = stat_for(group, r1.out[i]->dtype);
        char w[200];
        if (!want || !close_enough(r1.out[i], want, s, sz, w, sizeof w)) {
            snprintf(why, sizeof why, "output %s%s", oname, want ? w : ": no reference");
            ok = false;
        } else if (!same_bits(r1.out[i], r2.out[i])) {
            snprintf(why, sizeof why, "output %s: a second run gave other bits", oname);
            ok = false;
        }
        tl_tensor_unref(want);
    }
    for (int k = 0; ok && k < r1.ni; k++) {
        const char *iname = g->inputs[k].name;
        if (tl_dtype_is_int(in[k]->dtype)) {
            if (r1.grad[k])
                snprintf(why, sizeof why, "index input %s got a gradient", iname), ok = false;
            continue;
        }
        snprintf(key, sizeof key, "grad/%s", iname);
        tl_tensor *want = tl_npz_get(z, key, &st);
        /* a gradient through an f32 cast is only f32-accurate */
        tl_dtype dt = strstr(name, "cast") ? TL_F32 : r1.grad[k]->dtype;
        stat *s = stat_for(group, dt);
        char w[200];
        if (!want || !close_enough(r1.grad[k], want, s, false, w, sizeof w)) {
            snprintf(why, sizeof why, "grad/%s%s", iname, want ? w : ": no reference");
            ok = false;
        } else if (!same_bits(r1.grad[k], r2.grad[k])) {
            snprintf(why, sizeof why, "grad/%s: a second run gave other bits", iname);
            ok = false;
        }
        tl_tensor_unref(want);
    }
    stat *mine = stat_for(group, strstr(name, "_f32") ? TL_F32 : TL_F64);
    mine->cases++;
    if (!ok) {
        printf("FAIL %s/%s: %s\n", dir, name, why);
        mine->failed++;
    }
    run_free(&r1);
    run_free(&r2);
    for (int i = 0; i < 65; i++) {
        tl_tensor_unref(in[i]);
        tl_tensor_unref(seed[i]);
    }
    tl_npz_close(z);
    tl_graph_free(g);
    return ok;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The fixture names of dir, sorted; returns their count. */
static int list_fixtures(const char *dir, char ***names)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0, cap = 0;
    *names = NULL;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        if (n == cap)
            *names = realloc(*names, sizeof **names * (size_t)(cap = cap ? 2 * cap : 256));
        (*names)[n++] = strndup(e->d_name, len - 5);
    }
    if (d)
        closedir(d);
    if (n)
        qsort(*names, (size_t)n, sizeof **names, cmp_names);
    return n;
}

static void print_table(void)
{
    printf("%-14s %-5s %6s %6s %12s %12s %9s\n", "op", "dtype", "cases", "failed", "max abs err",
           "max rel err", "tolerance");
    for (int i = 0; i < nstats; i++) {
        const stat *s = &stats[i];
        if (!s->cases && !s->failed)
            continue;
        printf("%-14s %-5s %6d %6d %12.3g %12.3g %9.0e\n", s->group, tl_dtype_name(s->dtype), s->cases,
               s->failed, s->max_abs, s->max_rel, s->tol);
    }
}

static int cmp_stats(const void *a, const void *b)
{
    const stat *x = a, *y = b;
    int c = strcmp(x->group, y->group);
    return c ? c : (int)x->dtype - (int)y->dtype;
}

static const tl_backend *open_device(const char *spec)
{
    tl_status st = {0};
    const tl_backend *be = tl_device_open(spec, &st);
    if (!be) {
        printf("gpu_check: --device %s: %s\n", spec, st.msg);
        return NULL;
    }
    if (strcmp(spec, "cpu") && !tl_backend_is_device(be)) {
        printf("gpu_check: --device %s: no usable GPU\n", spec);
        return NULL;
    }
    tl_device_list l;
    tl_device_probe(&l);
    for (int i = 0; i < l.count; i++)
        if (!strcmp(l.name[i], be->name))
            printf("gpu_check: %s: %s, %.1f GiB, compute capability %d.%d (%s)\n", be->name,
                   l.dev[i].model, (double)l.dev[i].memory / (1 << 30), l.dev[i].cc_major,
                   l.dev[i].cc_minor, l.plugin_path);
    return be;
}

static int check(const char *spec, int ndirs, char **dirs)
{
    int passed = 0, failed = 0, total = 0;
    char **names[16];
    int counts[16];
    for (int d = 0; d < ndirs && d < 16; d++)
        total += counts[d] = list_fixtures(dirs[d], &names[d]);
    const tl_backend *be = total ? open_device(spec) : NULL;
    if (!total)
        printf("gpu_check: no fixtures in the folders given\n");
    for (int d = 0; d < ndirs && d < 16; d++) {
        for (int i = 0; i < counts[d]; i++) {
            if (be && check_fixture(be, dirs[d], names[d][i]))
                passed++;
            else
                failed++;
            free(names[d][i]);
        }
        free(names[d]);
    }
    if (be) {
        qsort(stats, (size_t)nstats, sizeof *stats, cmp_stats);
        print_table();
        tl_device_close(be);
    }
    printf("gpu_check: %d passed, %d failed\n", passed, failed);
    return !be ? 2 : failed ? 1 : 0;
}

/* ---------- benchmarks ---------- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds per call of op on x (and y), the median of `reps` timings of
 * `inner` calls each, waiting for the device around each timing. */
static double time_op(tl_ctx *cx, tl_opcode op, tl_tensor *x, tl_tensor *y, const tl_attrs *a,
                      int reps, int inner, tl_status *st)
{
    double t[32];
    tl_tensor *in[2] = {x, y};
    int n = y ? 2 : 1;
    for (int r = 0; r < reps && r < 32; r++) {
        if (cx->backend->sync && cx->backend->sync(cx->backend, st))
            return -1;
        double t0 = now();
        for (int i = 0; i < inner; i++) {
            tl_tensor *o = tl_op(cx, op, n, in, a, st);
            if (!o)
                return -1;
            tl_tensor_unref(o);
        }
        if (cx->backend->sync && cx->backend->sync(cx->backend, st))
            return -1;
        t[r] = (now() - t0) / inner;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    return t[reps / 2];
}

static int bench_ew(const char *spec)
{
    const tl_backend *be = open_device(spec);
    if (!be)
        return 2;
    tl_status st = {0};
    int64_t n = (int64_t)1 << 26; /* 256 MiB of f32 per tensor */
    tl_tensor *hx = tl_tensor_new(TL_F32, 1, &n, &st), *hy = tl_tensor_new(TL_F32, 1, &n, &st);
    if (!hx || !hy) {
        printf("bench-ew: %s\n", st.msg);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) {
        ((float *)hx->data)[i] = (float)(i % 1000) * 1e-3f;
        ((float *)hy->data)[i] = (float)(i % 777) * 2e-3f;
    }
    tl_ctx cx;
    tl_ctx_init(&cx, be);
    tl_attrs none, flat;
    tl_attrs_init(&none);
    tl_attrs_init(&flat);
    flat.nshape = 2;
    flat.shape[0] = n / 1024;
    flat.shape[1] = 1024;
    /* device copies of the inputs (ops on host tensors mirror them once) */
    tl_tensor *x = tl_op(&cx, TL_OP_DETACH, 1, &hx, &none, &st);
    tl_tensor *y = x ? tl_op(&cx, TL_OP_DETACH, 1, &hy, &none, &st) : NULL;
    double bytes = (double)n * 4, copy = -1, add = -1, ex = -1, mul = -1;
    if (y) {
        copy = time_op(&cx, TL_OP_RESHAPE, x, NULL, &flat, 9, 10, &st);
        add = time_op(&cx, TL_OP_ADD, x, y, &none, 9, 10, &st);
        ex = time_op(&cx, TL_OP_EXP, x, NULL, &none, 9, 10, &st);
        mul = time_op(&cx, TL_OP_MUL, x, y, &none, 9, 10, &st);
    }
    int rc = 0;
    if (copy <= 0 || add <= 0 || ex <= 0 || mul <= 0) {
        printf("bench-ew: %s\n", st.msg[0] ? st.msg : "failed");
        rc = 1;
    } else {
        double bw = 2 * bytes / copy;
        printf("bench-ew: %s, f32, 2^26 elements (256 MiB a tensor), median of 9 x 10 calls\n", be->name);
        printf("  copy (reshape)  %8.3f ms  %7.1f GB/s  (the device's copy bandwidth, read + write)\n",
               copy * 1e3, bw / 1e9);
        printf("  add             %8.3f ms  %7.1f GB/s  %5.1f%% of copy\n", add * 1e3, 3 * bytes / add / 1e9,
               100 * 3 * bytes / add / bw);
        printf("  mul             %8.3f ms  %7.1f GB/s  %5.1f%% of copy\n", mul * 1e3, 3 * bytes / mul / 1e9,
               100 * 3 * bytes / mul / bw);
        printf("  exp             %8.3f ms  %7.1f GB/s  %5.1f%% of copy\n", ex * 1e3, 2 * bytes / ex / 1e9,
               100 * 2 * bytes / ex / bw);
    }
    tl_tensor_unref(x);
    tl_tensor_unref(y);
    tl_tensor_unref(hx);
    tl_tensor_unref(hy);
    tl_ctx_release(&cx);
    tl_device_close(be);
    return rc;
}

/* A deterministic fill in [-scale, scale). */
static tl_tensor *filled(int ndim, const int64_t *shape, double scale, uint64_t seed, tl_status *st)
{
    tl_tensor *t = tl_tensor_new(TL_F32, ndim, shape, st);
    for (int64_t i = 0; t && i < t->numel; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ((float *)t->data)[i] = (float)(((double)(seed >> 11) / 9007199254740992.0 * 2 - 1) * scale);
    }
    return t;
}

/* Training steps of g on in[0..n-1] (gradients for every input o->wrt
 * asks): 2 warm-up steps, then 10 timed; their median, how many, and the
 * last step's loss (its first output).  1 after printing "WHAT: error". */
static int time_steps(const char *what, tl_graph *g, tl_tensor **in, int n, const tl_run_opts *o,
                      double *median, int *reps, double *loss)
{
    tl_status st = {0};
    double t[16];
    *reps = 0;
    for (int r = 0; r < 12; r++) {
        double t0 = now();
        tl_result *res;
        tl_tensor *grads[8] = {0};
        if (tl_run(g, in, o, &res, &st) || tl_result_backward(res, grads, &st)) {
            printf("%s: %s\n", what, st.msg);
            return 1;
        }
        *loss = tl_tensor_get(tl_result_output(res, 0), 0);
        for (int i = 0; i < n; i++)
            tl_tensor_unref(grads[i]);
        tl_result_free(res);
        if (r >= 2)
            t[(*reps)++] = now() - t0;
    }
    qsort(t, (size_t)*reps, sizeof *t, cmp_double);
    *median = t[*reps / 2];
    return 0;
}

/* The graph's inputs x [B, D], w1 [D, H], b1 [H], w2 [H, O], b2 [O],
 * y [B, O]; gradients for the weights and biases. */
static int bench_mlp(const char *graph, const char *spec)
{
    const int64_t B = 4096, D = 1024, H = 4096, O = 1024;
    tl_status st = {0};
    tl_graph *g = tl_graph_load(graph, &st);
    if (!g || g->ninputs != 6) {
        printf("bench-mlp: %s\n", g ? "the graph must have the inputs x, w1, b1, w2, b2, y" : st.msg);
        return 1;
    }
    const tl_backend *be = open_device(spec);
    if (!be) {
        tl_graph_free(g);
        return 2;
    }
    int64_t shapes[6][2] = {{B, D}, {D, H}, {H, 0}, {H, O}, {O, 0}, {B, O}};
    double scales[6] = {1, 0.03, 0.1, 0.015, 0.1, 1};
    tl_tensor *in[6];
    for (int i = 0; i < 6; i++)
        in[i] = filled(shapes[i][1] ? 2 : 1, shapes[i], scales[i], (uint64_t)i + 1, &st);
    bool wrt[6] = {false, true, true, true, true, false};
    tl_run_opts o = {.record = true, .backend = be, .wrt = wrt, .strict_device = strcmp(spec, "cpu") != 0};
    double med, loss;
    int reps, rc = time_steps("bench-mlp", g, in, 6, &o, &med, &reps, &loss);
    if (!rc) {
        double flops = 3 * 2.0 * (double)B * (double)H * (double)(D + O);
        printf("bench-mlp: tl on %s: %.2f ms a step (median of %d; loss %.6g; %.1f TFLOP/s in the products)\n",
               be->name, med * 1e3, reps, loss, flops / med / 1e12);
    }
    for (int i = 0; i < 6; i++)
        tl_tensor_unref(in[i]);
    tl_graph_free(g);
    tl_device_close(be);
    return rc;
}

/* One convolution layer's training step, the graph's inputs x [N, C, H, W],
 * w [C, C, 3, 3], b [C]: gradients for all three (a layer inside a
 * network), timed; also the rate of its three convolutions. */
static int bench_conv(const char *graph, const char *spec)
{
    const int64_t N = 32, C = 128, H = 56, W = 56;
    tl_status st = {0};
    tl_graph *g = tl_graph_load(graph, &st);
    if (!g || g->ninputs != 3) {
        printf("bench-conv: %s\n", g ? "the graph must have the inputs x, w, b" : st.msg);
        return 1;
    }
    const tl_backend *be = open_device(spec);
    if (!be) {
        tl_graph_free(g);
        return 2;
    }
    int64_t shapes[3][4] = {{N, C, H, W}, {C, C, 3, 3}, {C}};
    int nd[3] = {4, 4, 1};
    double scales[3] = {1, 0.03, 0.1};
    tl_tensor *in[3];
    for (int i = 0; i < 3; i++)
        in[i] = filled(nd[i], shapes[i], scales[i], (uint64_t)i + 1, &st);
    bool wrt[3] = {true, true, true};
    tl_run_opts o = {.record = true, .backend = be, .wrt = wrt, .strict_device = strcmp(spec, "cpu") != 0};
    double med, loss;
    int reps, rc = time_steps("bench-conv", g, in, 3, &o, &med, &reps, &loss);
    if (!rc) {
        double flops = 3 * 2.0 * (double)(N * H * W) * (double)(C * C * 9);
        printf("bench-conv: tl on %s: %.2f ms a step (median of %d; loss %.6g; %.1f TFLOP/s in the convolutions)\n",
               be->name, med * 1e3, reps, loss, flops / med / 1e12);
    }
    for (int i = 0; i < 3; i++)
        tl_tensor_unref(in[i]);
    tl_graph_free(g);
    tl_device_close(be);
    return rc;
}

/* One more step with every op call timed (each waits for the device):
 * the ops by phase, as tl --profile prints them (GPU_CHECK_PROFILE set). */
static int profile_step(tl_graph *g, tl_tensor **in, const tl_run_opts *o)
{
    tl_status st = {0};
    tl_run_opts po = *o;
    po.profile = true;
    tl_result *res;
    tl_tensor *grads[8] = {0};
    double t0 = now();
    if (tl_run(g, in, &po, &res, &st) || tl_result_backward(res, grads, &st)) {
        printf("bench: %s\n", st.msg);
        return 1;
    }
    printf("bench: a profiled step: %.3f ms\n", (now() - t0) * 1e3);
    const tl_opprof(*p)[2] = tl_result_profile(res);
    for (int ph = 0; ph < 2; ph++)
        for (int op = 0; op < TL_OP_COUNT; op++)
            if (p[op][ph].calls)
                printf("  %-8s %-26s %4lld calls %9.3f ms\n", ph ? "backward" : "forward", tl_ops[op].name,
                       (long long)p[op][ph].calls, p[op][ph].ms);
    for (int i = 0; i < 8; i++)
        tl_tensor_unref(grads[i]);
    tl_result_free(res);
    return 0;
}

/* Any graph's training step on the inputs of an .npz (by the graph's
 * input names): the gradient of every float input, inputs up and
 * gradients down in every step, as bench-mlp; tests/gpu/layers.py runs the
 * same steps in PyTorch. */
static int bench_graph(const char *graph, const char *npz, const char *spec)
{
    tl_status st = {0};
    tl_graph *g = tl_graph_load(graph, &st);
    tl_npz *z = g ? tl_npz_open(npz, &st) : NULL;
    if (!z || g->ninputs > 8) {
        printf("bench: %s\n", z ? "at most 8 inputs" : st.msg);
        tl_npz_close(z);
        tl_graph_free(g);
        return 1;
    }
    tl_tensor *in[8] = {0};
    bool wrt[8] = {false};
    int rc = 0;
    for (int i = 0; i < g->ninputs && !rc; i++) {
        if (!(in[i] = tl_npz_get(z, g->inputs[i].name, &st))) {
            printf("bench: %s: %s\n", g->inputs[i].name, st.msg);
            rc = 1;
        } else {
            wrt[i] = in[i]->dtype == TL_F32 || in[i]->dtype == TL_F64;
        }
    }
    tl_npz_close(z);
    const tl_backend *be = rc ? NULL : open_device(spec);
    if (!rc && !be)
        rc = 2;
    if (!rc) {
        tl_run_opts o = {.record = true, .backend = be, .wrt = wrt, .strict_device = strcmp(spec, "cpu") != 0};
        double med, loss;
        int reps;
        rc = time_steps("bench", g, in, g->ninputs, &o, &med, &reps, &loss);
        if (!rc)
            printf("bench: tl on %s: %.3f ms a step (median of %d; loss %.9g)\n", be->name, med * 1e3, reps, loss);
        if (!rc && getenv("GPU_CHECK_PROFILE"))
            rc = profile_step(g, in, &o);
        tl_device_close(be);
    }
    for (int i = 0; i < 8; i++)
        tl_tensor_unref(in[i]);
    tl_graph_free(g);
    return rc;
}

/* Every tensor of want.npz is in got.npz and close to it. */
static int compare(const char *got_path, const char *want_path)
{
    tl_status st = {0};
    tl_npz *got = tl_npz_open(got_path, &st), *want = got ? tl_npz_open(want_path, &st) : NULL;
    int bad = !want;
    if (!want)
        printf("compare: %s\n", st.msg);
    for (int i = 0; want && i < tl_npz_count(want); i++) {
        const char *key = tl_npz_key(want, i);
        tl_tensor *w = tl_npz_get(want, key, &st), *g = w ? tl_npz_get(got, key, &st) : NULL;
        char why[200] = "";
        if (!g || !close_enough(g, w, stat_for("graph", TL_F32), false, why, sizeof why)) {
            printf("compare: %s: %s\n", key, g ? why : st.msg);
            bad = 1;
        }
        tl_tensor_unref(g);
        tl_tensor_unref(w);
    }
    if (!bad)
        printf("compare: %d tensors agree\n", tl_npz_count(want));
    tl_npz_close(got);
    tl_npz_close(want);
    return bad;
}

int main(int argc, char **argv)
{
    const char *spec = "cuda", *mode = "check", *graph = NULL, *npz = NULL;
    char *dirs[16];
    int ndirs = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--fallback"))
            fallback = true;
        else if (!strcmp(argv[i], "bench-ew") || !strcmp(argv[i], "bench-mlp") ||
                 !strcmp(argv[i], "bench-conv") || !strcmp(argv[i], "bench"))
            mode = argv[i];
        else if ((!strcmp(mode, "bench-mlp") || !strcmp(mode, "bench-conv") || !strcmp(mode, "bench")) && !graph)
            graph = argv[i];
        else if (!strcmp(mode, "bench") && !npz)
            npz = argv[i];
        else if (argv[i][0] != '-' && ndirs < 16)
            dirs[ndirs++] = argv[i];
        else {
            fprintf(stderr, "usage: gpu_check [--device D] [--fallback] DIR... | bench-ew [--device D] | "
                            "bench-mlp GRAPH [--device D] | bench-conv GRAPH [--device D] | "
                            "bench GRAPH INPUTS.npz [--device D] | "
                            "compare GOT.npz WANT.npz\n");
            return 2;
        }
    }
    if (argc == 4 && !strcmp(argv[1], "compare"))
        return compare(argv[2], argv[3]);
    if (!strcmp(mode, "bench-ew"))
        return bench_ew(spec);
    if (!strcmp(mode, "bench-mlp"))
        return graph ? bench_mlp(graph, spec) : 2;
    if (!strcmp(mode, "bench-conv"))
        return graph ? bench_conv(graph, spec) : 2;
    if (!strcmp(mode, "bench"))
        return graph && npz ? bench_graph(graph, npz, spec) : 2;
    return check(spec, ndirs, dirs);
}
