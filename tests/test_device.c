/* Placement and transfers, tested without a GPU: every fixture runs on the
 * guarded test device (tests/testdev.h) forward and backward, once with
 * every op on the device and once with a subset, so that the rest takes
 * the real per-op CPU fallback; outputs and gradients must equal the
 * CPU's bit for bit, device memory must never be read from the host, and
 * none may be left allocated. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, in testdev.h */
#include <math.h>

#include "fixture.h"
#include "testdev.h"

static bool want_all(tl_opcode op, int n, const tl_dtype *in, tl_dtype out)
{
    (void)op, (void)n, (void)in, (void)out;
    return true;
}

/* A device that lacks some ops altogether and some only in f32. */
static bool want_some(tl_opcode op, int n, const tl_dtype *in, tl_dtype out)
{
    (void)out;
    switch (op) {
    case TL_OP_POW:
    case TL_OP_ERF:
    case TL_OP_GELU_GRAD:
    case TL_OP_PROD:
    case TL_OP_PROD_GRAD:
    case TL_OP_TAKE:
    case TL_OP_TAKE_GRAD:
    case TL_OP_GATHER:
    case TL_OP_ONE_HOT:
    case TL_OP_CONCAT:
    case TL_OP_MAP:
    case TL_OP_MAP_GRAD:
    case TL_OP_LOG_SOFTMAX: return false;
    case TL_OP_ADD:
    case TL_OP_MATMUL: return n && in[0] == TL_F64; /* f32 falls back */
    case TL_OP_CAST: return !tl_dtype_is_int(out);
    default: return true;
    }
}

static bool same_bits(const tl_tensor *a, const tl_tensor *b)
{
    return a && b && tl_tensor_on_host(a) && tl_tensor_on_host(b) && a->dtype == b->dtype &&
           tl_same_shape(a, b) && !memcmp(a->data, b->data, tl_tensor_bytes(a));
}

typedef struct tally {
    int cases, mixed, on_device;
    int64_t syncs, fallbacks;
} tally;

/* The case on the CPU and on the device: the same bits everywhere. */
static int compare_case(const char *dir, const char *name, tl_backend *dev, tally *t)
{
    fixture f;
    tl_status st = {0};
    int bad = 0;
    if (!load(dir, name, &f)) {
        unload(&f);
        return 1;
    }
    int no = f.g->noutputs, ni = f.g->ninputs;
    tl_tensor *o1[64] = {0}, *g1[64] = {0}, *o2[64] = {0}, *g2[64] = {0};
    cr_assert(eval(&f, f.in, o1, g1, &st), "%s on the CPU: %s", name, st.msg);
    /* a lean tape: every tensor a backward rule does not read is kept as
     * a shape alone (data NULL), so a rule reading one would fault */
    tl_run_opts o = {.record = true, .backend = dev, .lean_tape = true};
    tl_result *r;
    cr_assert(!tl_run(f.g, f.in, &o, &r, &st), "%s on the device: %s", name, st.msg);
    for (int i = 0; i < no; i++)
        o2[i] = tl_tensor_ref((tl_tensor *)tl_result_output(r, i));
    cr_assert(!tl_result_pullback(r, f.seed, g2, &st), "%s: backward on the device: %s", name, st.msg);
    const tl_stats *s = tl_result_stats(r);
    t->cases++;
    t->syncs += s->dev.syncs;
    t->fallbacks += s->fallbacks;
    t->mixed += !strcmp(tl_result_device_name(r), "mixed");
    t->on_device += !strcmp(tl_result_device_name(r), "testdev:0");
    cr_expect_eq(s->fallbacks > 0, !strcmp(tl_result_device_name(r), "mixed"), "%s", name);
    for (int i = 0; i < no; i++)
        if (!same_bits(o1[i], o2[i])) {
            cr_log_error("%s: output %d differs on the device", name, i);
            bad = 1;
        }
    for (int k = 0; k < ni; k++)
        if (!(g1[k] == NULL && g2[k] == NULL) && !same_bits(g1[k], g2[k])) {
            cr_log_error("%s: gradient of input %d differs on the device", name, k);
            bad = 1;
        }
    tl_result_free(r);
    for (int i = 0; i < no; i++) {
        tl_tensor_unref(o1[i]);
        tl_tensor_unref(o2[i]);
    }
    for (int k = 0; k < ni; k++) {
        tl_tensor_unref(g1[k]);
        tl_tensor_unref(g2[k]);
    }
    unload(&f);
    return bad;
}

static tl_backend *current;
static tally totals;

static int on_current(const char *dir, const char *name)
{
    return compare_case(dir, name, current, &totals);
}

static void every_fixture(testdev_want want)
{
    const char *dirs[] = {"tests/fixtures/ops", "tests/fixtures/flow"};
    current = testdev_open(want);
    memset(&totals, 0, sizeof totals);
    int fails = 0, count = 0;
    for (int d = 0; d < 2; d++) {
        int f, c;
        each_case(dirs[d], on_current, false, &f, &c);
        fails += f;
        count += c;
    }
    testdev *dev = testdev_of(current);
    cr_expect_gt(dev->kernels, 0);
    cr_expect_gt(dev->uploads, 0);
    testdev_close(current); /* every buffer released */
    cr_assert_geq(count, 560, "only %d fixtures", count);
    cr_assert_eq(fails, 0, "%d of %d fixtures differ between the CPU and the device", fails, count);
    cr_log_info("%d fixtures: %d wholly on the device, %d mixed, %lld fallbacks, %lld host syncs",
                totals.cases, totals.on_device, totals.mixed, (long long)totals.fallbacks,
                (long long)totals.syncs);
}

Test(device, every_op_on_the_device)
{
    every_fixture(want_all);
    cr_expect_eq(totals.fallbacks, 0);
    cr_expect_eq(totals.on_device, totals.cases, "every run reports the device itself");
    cr_expect_gt(totals.syncs, 0, "if conditions and results read back");
}

Test(device, per_op_fallback_to_the_cpu)
{
    every_fixture(want_some);
    cr_expect_gt(totals.fallbacks, 0);
    cr_expect_gt(totals.mixed, 100, "runs that mixed the device and the CPU: %d", totals.mixed);
    cr_expect_gt(totals.on_device, 10, "runs that never needed the CPU: %d", totals.on_device);
}

#define TAKE_GRAPH "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[" \
    "{\"id\":\"e\",\"op\":\"exp\",\"args\":[\"x\"]}," \
    "{\"id\":\"y\",\"op\":\"take\",\"args\":[\"e\"],\"axis\":0,\"indices\":[1,1]}," \
    "{\"id\":\"s\",\"op\":\"sum\",\"args\":[\"y\"]}],\"outputs\":\"s\"}"

Test(device, strict_device_refuses_a_fallback)
{
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(TAKE_GRAPH, strlen(TAKE_GRAPH), "t.json", &st);
    cr_assert(g, "%s", st.msg);
    tl_tensor *x = tl_tensor_new(TL_F64, 1, (int64_t[]){2}, &st);
    tl_tensor_set(x, 0, 0.5);
    tl_tensor_set(x, 1, 2.0);
    tl_backend *dev = testdev_open(want_some);
    tl_result *r = NULL;
    tl_run_opts o = {.record = true, .backend = dev, .strict_device = true};
    cr_expect_eq(tl_run(g, &x, &o, &r, &st), TL_ERUNTIME);
    cr_expect(strstr(st.msg, "node \"y\" (take): testdev:0 cannot run take on f64 (testdev leaves it to "
                             "the CPU), and --strict-device forbids the CPU fallback"), "%s", st.msg);
    cr_expect_null(r);
    /* without strict: the take falls back, both ways, and the values agree */
    o.strict_device = false;
    tl_status_clear(&st);
    cr_assert(!tl_run(g, &x, &o, &r, &st), "%s", st.msg);
    tl_tensor *grad = NULL;
    cr_assert(!tl_result_backward(r, &grad, &st), "%s", st.msg);
    const tl_stats *s = tl_result_stats(r);
    cr_expect_eq(s->dev.nkinds, 2, "take forward, take_grad backward");
    cr_expect_eq(s->dev.kinds[0].op, TL_OP_TAKE);
    cr_expect_eq(s->dev.kinds[1].op, TL_OP_TAKE_GRAD);
    cr_expect_str_eq(tl_result_device_name(r), "mixed");
    cr_expect(tl_tensor_on_host(tl_result_output(r, 0)) && tl_tensor_on_host(grad));
    cr_expect_eq(tl_tensor_get(tl_result_output(r, 0), 0), 2 * exp(2.0));
    cr_expect_eq(tl_tensor_get(grad, 0), 0.0);
    cr_expect_eq(tl_tensor_get(grad, 1), 2 * exp(2.0));
    cr_expect_gt(s->dev.bytes_down, 0);
    cr_expect_gt(s->dev.bytes_up, 0);
    tl_tensor_unref(grad);
    tl_result_free(r);
    testdev_close(dev);
    tl_tensor_unref(x);
    tl_graph_free(g);
}
