/* Fused elementwise chains (exec/fuse.c) give the bits of the unfused
 * recipe: every fixture, and thousands of random chains (every elementwise
 * op, numbers, constant scalars, where, comparisons, clamp, gelu, a value
 * used twice, values read after the chain, a sum at the end, special
 * values among the inputs), run forward and backward once with every
 * chain fused (fuse_min 1) and once node by node; outputs and gradients
 * must be equal bit for bit, and the fused run must really have fused. */
#include <math.h>

#include "fixture.h"

/* One run: outputs and gradients (new references), the stats. */
static bool run_with(const tl_graph *g, tl_tensor *const *in, tl_tensor *const *seed, int64_t fuse_min,
                     tl_tensor **outs, tl_tensor **grads, tl_stats *stats, tl_status *st)
{
    tl_run_opts o = {.record = true, .fuse_min = fuse_min};
    tl_result *r;
    if (tl_run(g, in, &o, &r, st))
        return false;
    for (int i = 0; i < g->noutputs; i++)
        outs[i] = tl_tensor_ref((tl_tensor *)tl_result_output(r, i));
    bool ok = !tl_result_pullback(r, seed, grads, st);
    *stats = *tl_result_stats(r);
    tl_result_free(r);
    return ok;
}

/* Equal bit for bit, but for the sign and payload of NaNs: when both
 * operands of an op are NaN, which one's payload the result carries is up
 * to the instruction's operand order, which the compiler may choose
 * differently in two loops over the same formula. */
static bool same_bits(const tl_tensor *a, const tl_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
        return false;
    size_t es = tl_dtype_size(a->dtype);
    for (int64_t i = 0; i < a->numel; i++)
        if (memcmp((char *)a->data + i * (int64_t)es, (char *)b->data + i * (int64_t)es, es) &&
            !(isnan(tl_tensor_get(a, i)) && isnan(tl_tensor_get(b, i))))
            return false;
    return true;
}

/* Fused and unfused runs of g agree; returns the number of nodes fused. */
static int mismatches, failures;

static int64_t compare_runs(const char *what, const tl_graph *g, tl_tensor *const *in,
                            tl_tensor *const *seed)
{
    int no = g->noutputs, ni = g->ninputs;
    tl_tensor *o1[16] = {NULL}, *o2[16] = {NULL}, *g1[16] = {NULL}, *g2[16] = {NULL};
    tl_status s1 = {0}, s2 = {0};
    tl_stats st1 = {0}, st2 = {0};
    cr_assert(no <= 16 && ni <= 16);
    bool a = run_with(g, in, seed, -1, o1, g1, &st1, &s1);
    bool b = run_with(g, in, seed, 1, o2, g2, &st2, &s2);
    cr_expect_eq(a, b, "%s: unfused %s (%s), fused %s (%s)", what, a ? "ran" : "failed", s1.msg,
                 b ? "ran" : "failed", s2.msg);
    if (a && b) {
        for (int i = 0; i < no; i++)
            cr_expect(same_bits(o1[i], o2[i]), "%s: output %d differs fused", what, i);
        for (int i = 0; i < ni; i++) {
            bool same = (!g1[i] && !g2[i]) || same_bits(g1[i], g2[i]);
            cr_expect(same, "%s: the gradient of input %d differs fused", what, i);
            for (int64_t k = 0; !same && g1[i] && g2[i] && k < g1[i]->numel && mismatches < 5; k++)
                if (memcmp((char *)g1[i]->data + k * (int64_t)tl_dtype_size(g1[i]->dtype),
                           (char *)g2[i]->data + k * (int64_t)tl_dtype_size(g1[i]->dtype),
                           tl_dtype_size(g1[i]->dtype)) &&
                    !(isnan(tl_tensor_get(g1[i], k)) && isnan(tl_tensor_get(g2[i], k)))) {
                    cr_log_error("%s: grad %d [%lld]: unfused %.17g, fused %.17g (input %.17g)", what, i,
                                 (long long)k, tl_tensor_get(g1[i], k), tl_tensor_get(g2[i], k),
                                 tl_tensor_get(in[i], k));
                    mismatches++;
                    break;
                }
        }
    } else if (!a && !b) {
        cr_expect_str_eq(s1.msg, s2.msg, "%s: the errors differ", what);
        failures++;
        if (failures <= 3)
            cr_log_info("%s: both runs fail: %s", what, s1.msg);
    }
    for (int i = 0; i < 16; i++) {
        tl_tensor_unref(o1[i]);
        tl_tensor_unref(o2[i]);
        tl_tensor_unref(g1[i]);
        tl_tensor_unref(g2[i]);
    }
    cr_expect_eq(st1.fused, 0, "%s: the unfused run fused", what);
    return b ? st2.fused : 0;
}

static int check_fixture(const char *dir, const char *name)
{
    fixture f;
    int before = mismatches;
    if (load(dir, name, &f))
        compare_runs(name, f.g, f.in, f.seed);
    unload(&f);
    return mismatches != before;
}

static void every_fixture_in(const char *dir)
{
    int fails, count;
    each_case(dir, check_fixture, false, &fails, &count);
    cr_expect_gt(count, 0, "no fixtures in %s", dir);
}

Test(fuse, every_op_fixture) { every_fixture_in("tests/fixtures/ops"); }
Test(fuse, every_flow_fixture) { every_fixture_in("tests/fixtures/flow"); }

/* ---- random chains ---- */

static uint64_t rng = 0x2026113000000001ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }
static double unit(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

static const char *const unary[] = {"neg", "abs", "sign", "exp", "expm1", "log", "log1p", "sqrt",
                                    "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "tanh",
                                    "sigmoid", "erf", "relu", "softplus", "gelu", "silu", "detach",
                                    "clamp"};
static const char *const binary[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                     "eq", "ne", "lt", "le", "gt", "ge"};

/* A random graph over inputs x, y (shape [n] or [r, c]) and a constant
 * scalar k: a chain of elementwise nodes, some results read again after
 * it (by a reshape, a non-elementwise op that ends every chain), and
 * maybe a sum over everything. */
static int random_graph(char *buf, size_t cap, const char *dt, const char *shape)
{
    int nn = 2 + pick(14), k = 0;
    size_t at = 0;
#define PUT(...) (at += (size_t)snprintf(buf + at, cap - at, __VA_ARGS__))
    PUT("{\"version\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", \"shape\": %s}, "
        "{\"name\": \"y\", \"dtype\": \"%s\", \"shape\": %s}], "
        "\"consts\": {\"k\": {\"dtype\": \"%s\", \"shape\": [], \"data\": [%.17g]}}, \"nodes\": [",
        dt, shape, dt, shape, dt, unit() * 4 - 2);
    char names[64][8];
    int nnames = 2;
    strcpy(names[0], "x");
    strcpy(names[1], "y");
    for (int i = 0; i < nn; i++) {
        char arg[3][32];
        for (int a = 0; a < 3; a++) {
            int r = pick(10);
            if (r < 6)
                snprintf(arg[a], sizeof arg[a], "\"%s\"", names[nnames - 1 - pick(nnames < 4 ? nnames : 4)]);
            else if (r < 8)
                snprintf(arg[a], sizeof arg[a], "\"%s\"", names[pick(nnames)]);
            else if (r < 9)
                snprintf(arg[a], sizeof arg[a], "\"k\"");
            else
                snprintf(arg[a], sizeof arg[a], "%.6g", unit() * 6 - 3);
        }
        if (arg[0][0] != '"') /* at least one tensor */
            snprintf(arg[0], sizeof arg[0], "\"%s\"", names[nnames - 1]);
        snprintf(names[nnames], sizeof names[0], "n%d", k++);
        int kind = pick(11);
        if (kind == 10) { /* a map: a branch, a captured scalar, sometimes a loop */
            static const char *const bodies[] = {
                "{\"nodes\": [{\"id\": \"mc%1$d\", \"op\": \"gt\", \"args\": [\"ma%1$d\", 0.3]}, "
                "{\"id\": \"mr%1$d\", \"op\": \"if\", \"cond\": \"mc%1$d\", "
                "\"then\": {\"nodes\": [{\"id\": \"mt%1$d\", \"op\": \"mul\", \"args\": [\"ma%1$d\", \"mb%1$d\"]}], \"result\": \"mt%1$d\"}, "
                "\"else\": {\"nodes\": [{\"id\": \"me%1$d\", \"op\": \"sin\", \"args\": [\"ma%1$d\"]}], \"result\": \"me%1$d\"}}], "
                "\"result\": \"mr%1$d\"}",
                "{\"nodes\": [{\"id\": \"mp%1$d\", \"op\": \"mul\", \"args\": [\"ma%1$d\", \"k\"]}, "
                "{\"id\": \"mq%1$d\", \"op\": \"tanh\", \"args\": [\"mp%1$d\"]}, "
                "{\"id\": \"mu%1$d\", \"op\": \"add\", \"args\": [\"mq%1$d\", \"mb%1$d\"]}], \"result\": \"mu%1$d\"}",
                "{\"nodes\": [{\"id\": \"ml%1$d\", \"op\": \"iterate\", \"count\": 3, \"init\": [\"ma%1$d\"], "
                "\"state\": [\"ms%1$d\"], \"body\": {\"nodes\": [{\"id\": \"mv%1$d\", \"op\": \"mul\", "
                "\"args\": [\"ms%1$d\", \"mb%1$d\"]}, {\"id\": \"mw%1$d\", \"op\": \"sin\", \"args\": [\"mv%1$d\"]}], "
                "\"result\": \"mw%1$d\"}}], \"result\": \"ml%1$d\"}",
            };
            char body[1024];
            snprintf(body, sizeof body, bodies[pick(3)], i);
            PUT("%s{\"id\": \"%s\", \"op\": \"map\", \"args\": [%s, %s], \"params\": [\"ma%d\", \"mb%d\"], "
                "\"body\": %s}", i ? ", " : "", names[nnames], arg[0], arg[1][0] == '"' ? arg[1] : "\"x\"", i, i,
                body);
        } else if (kind < 4) {
            const char *op = unary[pick((int)(sizeof unary / sizeof unary[0]))];
            PUT("%s{\"id\": \"%s\", \"op\": \"%s\", \"args\": [%s]", i ? ", " : "", names[nnames], op, arg[0]);
            if (!strcmp(op, "gelu") && pick(2))
                PUT(", \"approximate\": \"tanh\"");
            if (!strcmp(op, "clamp"))
                PUT(", \"min\": %.3g, \"max\": %.3g", -unit(), unit());
            PUT("}");
        } else if (kind < 9) {
            PUT("%s{\"id\": \"%s\", \"op\": \"%s\", \"args\": [%s, %s]}", i ? ", " : "", names[nnames],
                binary[pick((int)(sizeof binary / sizeof binary[0]))], arg[0], arg[1]);
        } else {
            PUT("%s{\"id\": \"%s\", \"op\": \"where\", \"args\": [%s, %s, %s]}", i ? ", " : "", names[nnames],
                arg[0], arg[1], arg[2]);
        }
        nnames++;
        if (pick(8) == 0) { /* a value read by an op that is not elementwise */
            snprintf(names[nnames], sizeof names[0], "r%d", k++);
            PUT(", {\"id\": \"%s\", \"op\": \"reshape\", \"args\": [\"%s\"], \"shape\": [-1]}", names[nnames],
                names[nnames - 1]);
            nnames++;
        }
    }
    const char *last = names[nnames - 1];
    bool sum = pick(2);
    if (sum)
        PUT(", {\"id\": \"total\", \"op\": \"sum\", \"args\": [\"%s\"]}", last);
    /* outputs: the last value (or the sum), and maybe one from the middle */
    PUT("], \"outputs\": [\"%s\"", sum ? "total" : last);
    int extra = 2 + pick(nnames - 2);
    if (pick(2) && strcmp(names[extra], last) && names[extra][0] == 'n')
        PUT(", \"%s\"", names[extra]);
    PUT("]}");
#undef PUT
    return at < cap ? 0 : -1;
}

static tl_tensor *random_tensor(tl_dtype dt, int ndim, const int64_t *shape)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, ndim, shape, &st);
    static const double special[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 1e-30, 1e30, 0.5};
    for (int64_t i = 0; t && i < t->numel; i++) {
        int r = pick(40);
        tl_tensor_set(t, i, r == 0 ? special[pick(10)] : unit() * 6 - 3);
    }
    return t;
}

Test(fuse, random_chains)
{
    int64_t fused = 0;
    int cases = 0;
    char text[16384];
    for (int c = 0; c < 1500; c++) {
        bool f32 = pick(2);
        int64_t shape[2] = {1 + pick(700), 1 + pick(5)};
        int ndim = pick(3) == 0 ? 2 : 1;
        char sh[64];
        if (ndim == 1)
            snprintf(sh, sizeof sh, "[%lld]", (long long)shape[0]);
        else
            snprintf(sh, sizeof sh, "[%lld, %lld]", (long long)shape[0], (long long)shape[1]);
        cr_assert(!random_graph(text, sizeof text, f32 ? "f32" : "f64", sh));
        tl_status st = {0};
        tl_graph *g = tl_graph_parse(text, strlen(text), "random.json", &st);
        cr_assert(g, "%s\n%s", st.msg, text);
        tl_dtype dt = f32 ? TL_F32 : TL_F64;
        tl_tensor *in[2] = {random_tensor(dt, ndim, shape), random_tensor(dt, ndim, shape)};
        tl_tensor *seed[2] = {NULL, NULL};
        char what[64];
        snprintf(what, sizeof what, "random chain %d", c);
        int before = mismatches;
        fused += compare_runs(what, g, in, seed);
        if (mismatches != before)
            cr_log_error("%s: %s", what, text);
        cases++;
        tl_tensor_unref(in[0]);
        tl_tensor_unref(in[1]);
        tl_graph_free(g);
    }
    cr_log_info("%d random chains, %lld nodes run fused", cases, (long long)fused);
    cr_expect_gt(fused, 3 * cases, "the chains were hardly fused: %lld nodes in %d cases", (long long)fused, cases);
}

/* ---- scalar loops (exec/loop.c) ---- */

/* A random iterate over 1 to 3 scalar states: a body of elementwise ops
 * over the states, the step index, an input scalar w (differentiated), a
 * constant k and numbers; its results are body values; sometimes one
 * state starts from a constant, and an output also reads w after it. */
static int random_loop(char *buf, size_t cap, const char *dt)
{
    int ns = 1 + pick(3), nn = 1 + pick(10), count = 1 + pick(40);
    size_t at = 0;
#define PUT(...) (at += (size_t)snprintf(buf + at, cap - at, __VA_ARGS__))
    PUT("{\"version\": 1, \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", \"shape\": []}, "
        "{\"name\": \"w\", \"dtype\": \"%s\", \"shape\": []}], "
        "\"consts\": {\"k\": {\"dtype\": \"%s\", \"shape\": [], \"data\": [%.17g]}}, \"nodes\": [",
        dt, dt, dt, unit() * 2 - 1);
    PUT("{\"id\": [");
    for (int s = 0; s < ns; s++)
        PUT("%s\"y%d\"", s ? ", " : "", s);
    PUT("], \"op\": \"iterate\", \"count\": %d, \"init\": [", count);
    for (int s = 0; s < ns; s++)
        PUT("%s\"%s\"", s ? ", " : "", s == 0 ? "x" : pick(2) ? "k" : "w");
    PUT("], \"state\": [");
    for (int s = 0; s < ns; s++)
        PUT("%s\"s%d\"", s ? ", " : "", s);
    PUT("], \"index\": \"i\", \"body\": {\"nodes\": [");
    char names[40][16];
    int nnames = 0;
    for (int s = 0; s < ns; s++)
        snprintf(names[nnames++], sizeof names[0], "s%d", s);
    for (int j = 0; j < nn + ns; j++) {
        char arg[3][32];
        for (int a = 0; a < 3; a++) {
            int r = pick(12);
            if (r < 7)
                snprintf(arg[a], sizeof arg[a], "\"%s\"", names[nnames - 1 - pick(nnames < 3 ? nnames : 3)]);
            else if (r < 8)
                snprintf(arg[a], sizeof arg[a], "\"w\"");
            else if (r < 9)
                snprintf(arg[a], sizeof arg[a], "\"k\"");
            else if (r < 10)
                snprintf(arg[a], sizeof arg[a], "\"i\"");
            else
                snprintf(arg[a], sizeof arg[a], "%.4g", unit() * 2 - 1);
        }
        snprintf(names[nnames], sizeof names[0], "b%d", j);
        int kind = pick(10);
        if (kind < 4)
            PUT("%s{\"id\": \"%s\", \"op\": \"%s\", \"args\": [%s]}", j ? ", " : "", names[nnames],
                unary[pick((int)(sizeof unary / sizeof unary[0]) - 1)], arg[0]); /* not clamp */
        else if (kind < 9)
            PUT("%s{\"id\": \"%s\", \"op\": \"%s\", \"args\": [%s, %s]}", j ? ", " : "", names[nnames],
                binary[pick((int)(sizeof binary / sizeof binary[0]))], arg[0], arg[1]);
        else
            PUT("%s{\"id\": \"%s\", \"op\": \"where\", \"args\": [%s, %s, %s]}", j ? ", " : "",
                names[nnames], arg[0], arg[1], arg[2]);
        nnames++;
    }
    /* the last ns body values are the next states (distinct) */
    PUT("], \"result\": [");
    for (int s = 0; s < ns; s++)
        PUT("%s\"%s\"", s ? ", " : "", names[nnames - ns + s]);
    PUT("]}}, {\"id\": \"z\", \"op\": \"mul\", \"args\": [\"y0\", \"w\"]}], \"outputs\": [\"z\"");
    if (ns > 1 && pick(2))
        PUT(", \"y%d\"", ns - 1);
    PUT("]}");
#undef PUT
    return at < cap ? 0 : -1;
}

Test(fuse, random_scalar_loops)
{
    char text[16384];
    int64_t loops = 0;
    for (int c = 0; c < 1500; c++) {
        bool f32 = pick(2);
        cr_assert(!random_loop(text, sizeof text, f32 ? "f32" : "f64"));
        tl_status st = {0};
        tl_graph *g = tl_graph_parse(text, strlen(text), "loop.json", &st);
        cr_assert(g, "%s\n%s", st.msg, text);
        tl_dtype dt = f32 ? TL_F32 : TL_F64;
        tl_tensor *in[2] = {random_tensor(dt, 0, NULL), random_tensor(dt, 0, NULL)};
        tl_tensor *seed[2] = {NULL, NULL};
        char what[64];
        snprintf(what, sizeof what, "random loop %d", c);
        int before = mismatches;
        tl_stats s1, s2;
        tl_tensor *o[16] = {NULL}, *gr[16] = {NULL};
        tl_status q = {0};
        if (run_with(g, in, seed, 1, o, gr, &s2, &q))
            loops += s2.loops;
        for (int i = 0; i < 16; i++) {
            tl_tensor_unref(o[i]);
            tl_tensor_unref(gr[i]);
        }
        (void)s1;
        compare_runs(what, g, in, seed);
        if (mismatches != before)
            cr_log_error("%s: %s", what, text);
        tl_tensor_unref(in[0]);
        tl_tensor_unref(in[1]);
        tl_graph_free(g);
    }
    cr_log_info("1500 random loops, %lld run as scalar loops", (long long)loops);
    cr_expect_gt(loops, 1000, "the loops were hardly compiled: %lld", (long long)loops);
}
