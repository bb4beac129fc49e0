/* Second derivatives on the same tape (exec.h: tl_result_pullback_recorded
 * and tl_result_pullback_again) against PyTorch's float64 double backward
 * and jvp (tests/fixtures/hvp/cases.npz, made by tests/gen/hvpfix.py):
 * every f64 case of the op and control-flow fixtures away from kinks, and
 * compositions of every op family, the layer ops among them.  Plain grad
 * is unchanged by a run recorded for them, and on the guarded test device
 * (tests/testdev.h), wholly or with per-op CPU fallbacks, the products
 * are the CPU's to the bit. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, in testdev.h */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "formats/npz.h"
#include "testdev.h"

#include "hvpcase.h"

/* |got - want| <= atol + rtol |want| everywhere; prints the first miss. */
static int close_to(const char *what, const tl_tensor *got, const tl_tensor *want, double rtol, double atol)
{
    if (!got || got->numel != want->numel) {
        cr_log_error("%s: %s", what, got ? "wrong size" : "missing");
        return 1;
    }
    for (int64_t i = 0; i < got->numel; i++) {
        double a = tl_tensor_get(got, i), b = tl_tensor_get(want, i);
        if (isnan(a) && isnan(b))
            continue;
        if (!(fabs(a - b) <= atol + rtol * fabs(b))) {
            cr_log_error("%s: element %lld is %.17g, expected %.17g", what, (long long)i, a, b);
            return 1;
        }
    }
    return 0;
}

/* The case's hvp (jvp false) or jvp against the references; 0 when they
 * match, 1 when not or when tl refused (logged). */
static int check(const tl_npz *z, hcase *h, bool jvp, double rtol, double atol)
{
    int ni = h->g->ninputs, no = h->g->noutputs, fails = 0;
    tl_tensor **d = calloc((size_t)(ni + no) + 1, sizeof *d);
    if (!products(h, NULL, jvp, d))
        fails = 2;
    for (int i = 0; !fails && i < (jvp ? no : ni); i++) {
        const char *n = jvp ? h->g->slot_name[h->g->outputs[i]] : h->g->inputs[i].name;
        tl_tensor *want = get(z, jvp ? "%s/%s/jvp/%s" : "%s/%s/hvp/%s", h->dir, h->name, n);
        if (!want)
            continue; /* an index input */
        char what[400];
        snprintf(what, sizeof what, "%s/%s %s/%s", h->dir, h->name, jvp ? "jvp" : "hvp", n);
        fails += close_to(what, d[i], want, rtol, atol);
        tl_tensor_unref(want);
    }
    for (int i = 0; i < ni + no; i++)
        tl_tensor_unref(d[i]);
    free(d);
    return fails ? 1 : 0;
}

static void hvp_one(const tl_npz *z, const char *dir, const char *name, int *fails, int *count)
{
    (void)count;
    hcase h;
    load_case(z, dir, name, &h);
    /* cast_abs goes through f32 and back: its references are f64 */
    double rtol = strstr(name, "cast") ? 1e-6 : 1e-8;
    *fails += check(z, &h, false, rtol, 1e-9);
    *fails += check(z, &h, true, rtol, 1e-9);
    free_case(&h);
}

Test(hvp, pytorch_references)
{
    int fails, count;
    each(hvp_one, &fails, &count);
    cr_expect(count > 300, "only %d cases", count);
    cr_expect(fails == 0, "%d of %d cases (hvp and jvp each) differ from PyTorch", fails, count);
}

/* The same with every elementwise chain fused (of one element and more):
 * on a tape to differentiate twice a chain runs as a map of its program
 * (fuse.c), its derivatives the map's forward mode. */
Test(hvp, pytorch_references_fused_chains)
{
    int fails, count;
    fuse_min = 1;
    each(hvp_one, &fails, &count);
    fuse_min = 0;
    cr_expect(count > 300, "only %d cases", count);
    cr_expect(fails == 0, "%d of %d cases (hvp and jvp each) differ from PyTorch", fails, count);
}

/* A run recorded for second derivatives gives plain grad's bits. */
static void same_grad(const tl_npz *z, const char *dir, const char *name, int *fails, int *count)
{
    (void)count;
    hcase h;
    load_case(z, dir, name, &h);
    tl_status st = {0};
    int ni = h.g->ninputs;
    tl_tensor **a = calloc((size_t)ni + 1, sizeof *a), **b = calloc((size_t)ni + 1, sizeof *b);
    tl_run_opts plain = {.record = true}, twice = {.record = true, .twice = true};
    tl_result *r1, *r2;
    cr_assert(!tl_run(h.g, h.in, &plain, &r1, &st) && !tl_result_pullback(r1, h.seed, a, &st), "%s: %s", name, st.msg);
    cr_assert(!tl_run(h.g, h.in, &twice, &r2, &st) && !tl_result_pullback_recorded(r2, h.seed, false, b, &st),
              "%s: %s", name, st.msg);
    for (int k = 0; k < ni; k++) {
        bool same = (!a[k] && !b[k]) || (a[k] && b[k] && a[k]->numel == b[k]->numel &&
                                         !memcmp(a[k]->data, b[k]->data, tl_tensor_bytes(a[k])));
        /* compositions replace prod_grad, layer_norm_grad and map_grad: close,
         * not the same bits */
        if (!same && !strstr(name, "prod") && !strstr(name, "norm") && !strstr(name, "map")) {
            cr_log_error("%s/%s: grad/%s differs from plain grad", dir, name, h.g->inputs[k].name);
            (*fails)++;
        }
        tl_tensor_unref(a[k]);
        tl_tensor_unref(b[k]);
    }
    free(a);
    free(b);
    tl_result_free(r1);
    tl_result_free(r2);
    free_case(&h);
}

Test(hvp, recorded_grad_is_plain_grad)
{
    int fails, count;
    each(same_grad, &fails, &count);
    cr_expect(fails == 0, "%d gradients differ", fails);
}

Test(hvp, refusals)
{
    tl_status st = {0};
    const char *json = "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": ["
                       "{\"id\": \"y\", \"op\": \"square\", \"args\": [\"x\"]}], \"outputs\": \"y\"}";
    tl_graph *g = tl_graph_parse(json, strlen(json), "t.json", &st);
    cr_assert(g);
    tl_tensor *x = tl_tensor_scalar(TL_F64, 3, &st), *t32 = tl_tensor_scalar(TL_F32, 1, &st), *grad = NULL, *h = NULL;
    tl_run_opts plain = {.record = true}, twice = {.record = true, .twice = true};
    tl_result *r;
    /* not recorded for it */
    cr_assert(!tl_run(g, &x, &plain, &r, &st));
    cr_expect(tl_result_pullback_recorded(r, NULL, false, &grad, &st) == TL_EINPUT);
    cr_expect(strstr(st.msg, "twice off"), "%s", st.msg);
    tl_result_free(r);
    /* again before the first, and a tangent of the wrong dtype */
    cr_assert(!tl_run(g, &x, &twice, &r, &st));
    st = (tl_status){0};
    cr_expect(tl_result_pullback_again(r, &t32, &h, NULL, &st) == TL_EINPUT);
    cr_assert(!tl_result_pullback_recorded(r, NULL, false, &grad, &st), "%s", st.msg);
    cr_expect(tl_tensor_get(grad, 0) == 6);
    tl_tensor_unref(grad);
    grad = NULL;
    cr_expect(tl_result_pullback_again(r, &t32, &h, NULL, &st) == TL_EINPUT);
    cr_expect(strstr(st.msg, "tangent for input \"x\": expected f64[], got f32[]"), "%s", st.msg);
    cr_expect(tl_result_pullback(r, NULL, &grad, &st) == TL_EINPUT); /* consumed */
    tl_result_free(r);
    /* hvp of x^2 is 2 v */
    cr_assert(!tl_run(g, &x, &twice, &r, &st));
    cr_assert(!tl_result_pullback_recorded(r, NULL, false, &grad, &st));
    tl_tensor *v = tl_tensor_scalar(TL_F64, 0.25, &st);
    cr_assert(!tl_result_pullback_again(r, &v, &h, NULL, &st), "%s", st.msg);
    cr_expect(tl_tensor_get(h, 0) == 0.5);
    tl_result_free(r);
    tl_tensor_unref(h);
    tl_tensor_unref(grad);
    h = grad = NULL;
    /* recorded for the seeds (jvp): the inputs are constants of that
     * recording, so pulling back to them is refused; to the seed, J v */
    tl_tensor *j = NULL;
    cr_assert(!tl_run(g, &x, &twice, &r, &st));
    cr_assert(!tl_result_pullback_recorded(r, NULL, true, &grad, &st), "%s", st.msg);
    cr_expect(tl_result_pullback_again(r, &v, &h, &j, &st) == TL_EINPUT);
    cr_expect(strstr(st.msg, "vary_seeds"), "%s", st.msg);
    cr_expect(!h && !j);
    tl_result_free(r);
    tl_tensor_unref(grad);
    cr_assert(!tl_run(g, &x, &twice, &r, &st));
    cr_assert(!tl_result_pullback_recorded(r, NULL, true, &grad, &st), "%s", st.msg);
    cr_assert(!tl_result_pullback_again(r, &v, NULL, &j, &st), "%s", st.msg);
    cr_expect(tl_tensor_get(j, 0) == 1.5); /* 2 x v */
    tl_tensor_unref(j);
    tl_result_free(r);
    tl_tensor_unref(grad);
    /* the input itself as the seed (3): still the seed's variable in the
     * recording and the input's value in the rules, J v = 2 x v, s 2 x = 18 */
    cr_assert(!tl_run(g, &x, &twice, &r, &st));
    cr_assert(!tl_result_pullback_recorded(r, &x, true, &grad, &st), "%s", st.msg);
    cr_expect(tl_tensor_get(grad, 0) == 18, "%g", tl_tensor_get(grad, 0));
    cr_assert(!tl_result_pullback_again(r, &v, NULL, &j, &st), "%s", st.msg);
    cr_expect(tl_tensor_get(j, 0) == 1.5, "jvp %g", tl_tensor_get(j, 0));
    tl_tensor_unref(j);
    tl_result_free(r);
    tl_tensor_unref(v);
    tl_tensor_unref(grad);
    tl_tensor_unref(x);
    tl_tensor_unref(t32);
    tl_graph_free(g);
}

/* Beyond the square root of the largest double, atan and acosh have
 * PyTorch's second derivatives: signed zeros (their rules square x as
 * x*x, as torch does, not 0 * inf = NaN), and asinh torch's NaN. */
Test(hvp, huge_arguments)
{
    static const struct {
        const char *op;
        double x[2], want[2];
    } cases[] = {
        {"acosh", {1.7e308, 1.6e308}, {-0.0, -0.0}},
        {"atan", {1.7e308, -1.7e308}, {-0.0, 0.0}},
        {"asinh", {1.7e308, -1.7e308}, {NAN, NAN}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char json[200];
        snprintf(json, sizeof json,
                 "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": [{\"id\": \"y\", \"op\": \"%s\", "
                 "\"args\": [\"x\"]}], \"outputs\": \"y\"}",
                 cases[c].op);
        tl_status st = {0};
        tl_graph *g = tl_graph_parse(json, strlen(json), "huge.json", &st);
        cr_assert(g, "%s", st.msg);
        int64_t two = 2;
        tl_tensor *x = tl_tensor_new(TL_F64, 1, &two, &st), *v = tl_tensor_new(TL_F64, 1, &two, &st);
        for (int i = 0; i < 2; i++) {
            tl_tensor_set(x, i, cases[c].x[i]);
            tl_tensor_set(v, i, 1);
        }
        hcase h = {.g = g, .in = &x, .tangent = &v};
        tl_tensor *d[3] = {NULL, NULL, NULL};
        cr_assert(products(&h, NULL, false, d));
        for (int i = 0; i < 2; i++) {
            double got = tl_tensor_get(d[0], i), want = cases[c].want[i];
            cr_expect(isnan(want) ? isnan(got) : got == want && signbit(got) == signbit(want),
                      "%s(%g): hvp %g, expected %g", cases[c].op, cases[c].x[i], got, want);
        }
        tl_tensor_unref(d[0]);
        tl_tensor_unref(x);
        tl_tensor_unref(v);
        tl_graph_free(g);
    }
}

/* Two outputs of one value (an iterate of count 0 returns its init): the
 * seeds are summed before the pass, and only the forward run's entries
 * are pulled back (the sum once read past the gradients). */
Test(hvp, one_value_output_twice)
{
    const char *json = "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": ["
                       "{\"id\": \"a\", \"op\": \"mul\", \"args\": [\"x\", \"x\"]},"
                       "{\"id\": \"y\", \"op\": \"mul\", \"args\": [\"a\", \"x\"]},"
                       "{\"id\": [\"h\", \"u\"], \"op\": \"iterate\", \"count\": 0, \"init\": [\"y\", \"y\"], "
                       "\"state\": [\"s\", \"t\"], \"body\": {\"nodes\": [], \"result\": [\"s\", \"t\"]}}],"
                       "\"outputs\": [\"h\", \"u\"]}";
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(json, strlen(json), "twice.json", &st);
    cr_assert(g, "%s", st.msg);
    tl_tensor *x = tl_tensor_scalar(TL_F64, 2, &st), *v = tl_tensor_scalar(TL_F64, 0.5, &st);
    tl_tensor *seed[2] = {tl_tensor_scalar(TL_F64, 1, &st), tl_tensor_scalar(TL_F64, 2, &st)};
    hcase h = {.g = g, .in = &x, .tangent = &v, .seed = seed};
    tl_tensor *d[4] = {NULL};
    cr_assert(products(&h, NULL, false, d)); /* (1 + 2) * 6x * v */
    cr_expect(tl_tensor_get(d[0], 0) == 18, "hvp %g", tl_tensor_get(d[0], 0));
    tl_tensor_unref(d[0]);
    d[0] = NULL;
    cr_assert(products(&h, NULL, true, d)); /* 3x^2 v, each */
    cr_expect(tl_tensor_get(d[0], 0) == 6 && tl_tensor_get(d[1], 0) == 6, "jvp %g, %g", tl_tensor_get(d[0], 0),
              tl_tensor_get(d[1], 0));
    for (int i = 0; i < 4; i++)
        tl_tensor_unref(d[i]);
    tl_tensor_unref(x);
    tl_tensor_unref(v);
    tl_tensor_unref(seed[0]);
    tl_tensor_unref(seed[1]);
    tl_graph_free(g);
}

/* ---------- on the test device ---------- */

static bool want_all(tl_opcode op, int n, const tl_dtype *in, tl_dtype out)
{
    (void)op, (void)n, (void)in, (void)out;
    return true;
}

/* A device without some kernels (those of the recorded backward among
 * them): they take the CPU fallback. */
static bool want_some(tl_opcode op, int n, const tl_dtype *in, tl_dtype out)
{
    (void)n, (void)in, (void)out;
    switch (op) {
    case TL_OP_GELU_GRAD:
    case TL_OP_SLICE_GRAD:
    case TL_OP_TAKE_GRAD:
    case TL_OP_MAP:
    case TL_OP_MAP_GRAD:
    case TL_OP_MAX_POOL_PICK:
    case TL_OP_CONV_GRAD_W:
    case TL_OP_CUMSUM:
    case TL_OP_PROD: return false;
    default: return true;
    }
}

static tl_backend *device;

/* The case's hvp and jvp on the CPU and on dev: how many of the two differ
 * in any bit (each logged with what). */
static int device_differs(hcase *h, tl_backend *dev, const char *what)
{
    int n = h->g->ninputs + h->g->noutputs, fails = 0;
    for (int jvp = 0; jvp < 2; jvp++) {
        tl_tensor **a = calloc((size_t)n + 1, sizeof *a), **b = calloc((size_t)n + 1, sizeof *b);
        bool ok = products(h, NULL, jvp, a) && products(h, dev, jvp, b);
        for (int i = 0; ok && i < n; i++)
            if ((a[i] || b[i]) && !(a[i] && b[i] && tl_tensor_on_host(b[i]) && a[i]->numel == b[i]->numel &&
                                   !memcmp(a[i]->data, b[i]->data, tl_tensor_bytes(a[i])))) {
                cr_log_error("%s: %s %d differs on the device", what, jvp ? "jvp" : "hvp", i);
                ok = false;
            }
        fails += !ok;
        for (int i = 0; i < n; i++) {
            tl_tensor_unref(a[i]);
            tl_tensor_unref(b[i]);
        }
        free(a);
        free(b);
    }
    return fails;
}

static void on_device(const tl_npz *z, const char *dir, const char *name, int *fails, int *count)
{
    (void)count;
    hcase h;
    load_case(z, dir, name, &h);
    char what[240];
    snprintf(what, sizeof what, "%s/%s", dir, name);
    *fails += device_differs(&h, device, what);
    free_case(&h);
}

static void every_case_on(testdev_want want)
{
    int fails, count;
    device = testdev_open(want);
    each(on_device, &fails, &count);
    cr_expect_gt(testdev_of(device)->kernels, 0);
    testdev_close(device); /* every buffer released */
    cr_expect(fails == 0, "%d of %d cases differ between the CPU and the device", fails, count);
}

Test(hvp, device_bits) { every_case_on(want_all); }
Test(hvp, device_fallback_bits) { every_case_on(want_some); }

/* ---------- random graphs (tests/gen/hvp_random.py) ---------- */

#define RANDOM "tests/fixtures/hvp_random/"

/* A new f64 tensor of the given shape from v[*at...], *at moved past it. */
static tl_tensor *take_values(const tl_tensor *v, int64_t *at, int ndim, const int64_t *shape)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(TL_F64, ndim, shape, &st);
    cr_assert(t, "%s", st.msg);
    cr_assert(*at + t->numel <= v->numel, "values too short");
    memcpy(t->data, (const double *)v->data + *at, sizeof(double) * (size_t)t->numel);
    *at += t->numel;
    return t;
}

/* Graph `seed` of the random set into h (its inputs, seeds and tangents);
 * *v holds its values, *at where the references begin. */
static void load_random(const tl_npz *z, int seed, const char *json, size_t len, hcase *h, tl_tensor **v,
                        int64_t *at)
{
    char where[64], key[32];
    tl_status st = {0};
    snprintf(where, sizeof where, RANDOM "graphs.jsonl, seed %d", seed);
    snprintf(key, sizeof key, "r%d", seed);
    memset(h, 0, sizeof *h);
    h->g = tl_graph_parse(json, len, where, &st);
    cr_assert(h->g, "%s", st.msg);
    *v = tl_npz_get(z, key, &st);
    cr_assert(*v, "%s: %s", key, st.msg);
    const tl_graph *g = h->g;
    int ni = g->ninputs, no = g->noutputs;
    *at = 0;
    snprintf(h->dir, sizeof h->dir, "random");
    snprintf(h->name, sizeof h->name, "seed %d", seed);
    h->in = calloc((size_t)ni + 1, sizeof *h->in);
    h->tangent = calloc((size_t)ni + 1, sizeof *h->tangent);
    h->seed = calloc((size_t)no + 1, sizeof *h->seed);
    for (int i = 0; i < ni; i++) {
        int64_t shape[TL_MAXDIM];
        for (int d = 0; d < g->inputs[i].ndim; d++)
            shape[d] = g->inputs[i].dims[d].size;
        h->in[i] = take_values(*v, at, g->inputs[i].ndim, shape);
    }
    /* the outputs' shapes, for the seeds: a plain run */
    tl_result *r = NULL;
    tl_run_opts plain = {0};
    cr_assert(!tl_run(g, h->in, &plain, &r, &st), "%s: %s", where, st.msg);
    for (int i = 0; i < no; i++) {
        const tl_tensor *y = tl_result_output(r, i);
        h->seed[i] = take_values(*v, at, y->ndim, y->shape);
    }
    tl_result_free(r);
    for (int i = 0; i < ni; i++)
        h->tangent[i] = take_values(*v, at, h->in[i]->ndim, h->in[i]->shape);
}

/* Graph `seed`'s hvp and jvp against PyTorch's; the number of products
 * that differ (each logged, naming the seed). */
static int random_graph(const tl_npz *z, int seed, const char *json, size_t len)
{
    hcase h;
    tl_tensor *v;
    int64_t at;
    load_random(z, seed, json, len, &h, &v, &at);
    const tl_graph *g = h.g;
    int ni = g->ninputs, no = g->noutputs, fails = 0;
    for (int jvp = 0; jvp < 2; jvp++) {
        int n = jvp ? no : ni;
        tl_tensor **d = calloc((size_t)(ni + no) + 1, sizeof *d);
        bool ok = products(&h, NULL, jvp, d);
        fails += !ok;
        for (int i = 0; i < n; i++) {
            const tl_tensor *like = jvp ? h.seed[i] : h.in[i];
            tl_tensor *want = take_values(v, &at, like->ndim, like->shape);
            char what[200];
            snprintf(what, sizeof what, "random graph seed %d: %s of %s", seed, jvp ? "jvp" : "hvp",
                     jvp ? g->slot_name[g->outputs[i]] : g->inputs[i].name);
            if (ok)
                fails += close_to(what, d[i], want, 1e-8, 1e-9);
            tl_tensor_unref(want);
        }
        for (int i = 0; i < ni + no; i++)
            tl_tensor_unref(d[i]);
        free(d);
    }
    cr_expect(at == v->numel, "seed %d: %lld values left", seed, (long long)(v->numel - at));
    tl_tensor_unref(v);
    free_case(&h);
    return fails;
}

/* Every random graph through check (the number of its failures): the
 * number of graphs, and of those that failed in *bad. */
static int each_random(int (*check)(const tl_npz *z, int seed, const char *json, size_t len), int *bad)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open(RANDOM "values.npz", &st);
    cr_assert(z, "%s (run from the repository root): %s", RANDOM "values.npz", st.msg);
    FILE *f = fopen(RANDOM "graphs.jsonl", "r");
    cr_assert(f, RANDOM "graphs.jsonl: cannot open");
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int seed = 0;
    *bad = 0;
    while ((len = getline(&line, &cap, f)) > 0)
        *bad += check(z, seed++, line, (size_t)len) > 0;
    free(line);
    fclose(f);
    tl_npz_close(z);
    return seed;
}

Test(hvp, random_graphs)
{
    int bad, count = each_random(random_graph, &bad);
    cr_expect(count >= 300, "only %d graphs", count);
    cr_expect(bad == 0, "%d of %d random graphs differ from PyTorch", bad, count);
}

/* On the test device (every kernel there, or some by CPU fallback), and
 * plain grad from a run recorded twice: the CPU's bits. */
static testdev_want random_want;

static int random_bits(const tl_npz *z, int seed, const char *json, size_t len)
{
    hcase h;
    tl_tensor *v;
    int64_t at;
    load_random(z, seed, json, len, &h, &v, &at);
    char what[64];
    snprintf(what, sizeof what, "random graph seed %d", seed);
    tl_backend *dev = testdev_open(random_want);
    int fails = device_differs(&h, dev, what);
    testdev_close(dev); /* every buffer released */
    tl_tensor_unref(v);
    free_case(&h);
    return fails;
}

Test(hvp, random_graphs_device_bits)
{
    int bad, count;
    random_want = want_all;
    count = each_random(random_bits, &bad);
    cr_expect(bad == 0, "%d of %d random graphs differ between the CPU and the device", bad, count);
    random_want = want_some;
    count = each_random(random_bits, &bad);
    cr_expect(bad == 0, "%d of %d random graphs differ between the CPU and the device (fallbacks)", bad, count);
}
