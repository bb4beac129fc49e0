/* tl_gradcheck (exec/gradcheck.h): every reference fixture away from kinks
 * passes with its own seeds and nothing flagged; the fixtures on kinks and
 * branch boundaries have their elements named there, never mismatched; a
 * tape made wrong by detach is caught; samples and thread counts do not
 * change the report; bad input is refused. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "exec/gradcheck.h"
#include "fixture.h"
#include "formats/text.h"

static tl_graph *parse(const char *json)
{
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(json, strlen(json), "t.json", &st);
    cr_assert(g, "parse failed: %s", st.msg);
    return g;
}

static tl_tensor *lit(const char *s)
{
    tl_status st = {0};
    tl_tensor *t = tl_literal_parse(s, &st);
    cr_assert(t, "%s", st.msg);
    return t;
}

/* gradcheck of a one-input graph at the literal x, seeded by the literal
 * seed (NULL: ones); the report, or NULL with st set. */
static tl_gradcheck_report *check_graph(const char *json, const char *x, const char *seed,
                                        const tl_gradcheck_opts *o, tl_status *st)
{
    tl_graph *g = parse(json);
    tl_tensor *in = lit(x), *s = seed ? lit(seed) : NULL;
    tl_gradcheck_report *r;
    tl_gradcheck_graph(g, &in, &s, o, &r, st);
    tl_tensor_unref(s);
    tl_tensor_unref(in);
    tl_graph_free(g);
    return r;
}

#define SQUARE "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": [" \
               "{\"id\": \"y\", \"op\": \"square\", \"args\": [\"x\"]}], \"outputs\": \"y\"}"

static tl_gradcheck_report *check_square(const char *x, const char *seed, const tl_gradcheck_opts *o,
                                         tl_status *st)
{
    return check_graph(SQUARE, x, seed, o, st);
}

/* A fixture's check with its own inputs and seeds; NULL with st set when
 * gradcheck refuses it. */
static tl_gradcheck_report *check_fixture(const fixture *f, const tl_gradcheck_opts *o, tl_status *st)
{
    tl_gradcheck_report *r = NULL;
    tl_gradcheck_graph(f->g, f->in, f->seed, o, &r, st);
    return r;
}

/* Whether every output of the fixture's run is an index tensor. */
static bool int_outputs_only(const fixture *f)
{
    tl_status st = {0};
    tl_result *res = NULL;
    if (tl_run(f->g, f->in, NULL, &res, &st))
        return false;
    bool all = tl_result_noutputs(res) > 0;
    for (int i = 0; i < tl_result_noutputs(res); i++)
        all &= tl_dtype_is_int(tl_result_output(res, i)->dtype);
    tl_result_free(res);
    return all;
}

static int passes(const char *dir, const char *name)
{
    fixture f;
    tl_status st = {0};
    int bad = 0;
    if (!load(dir, name, &f)) {
        unload(&f);
        return 1;
    }
    tl_gradcheck_report *r = check_fixture(&f, NULL, &st);
    bool f32_inside = strstr(name, "tof32") != NULL; /* an f32 output: refused */
    if (f32_inside) {
        cr_expect(!r && st.code == TL_EINPUT && strstr(st.msg, "f64 outputs"), "%s: %s", name, st.msg);
    } else if (!r && strstr(st.msg, "every output is an index tensor")) {
        bad = !int_outputs_only(&f); /* nothing to check: refused, if so */
        if (bad)
            cr_log_error("%s: %s", name, st.msg);
    } else if (!r) {
        cr_log_error("%s: %s", name, st.msg);
        bad = 1;
    } else if (r->mismatches || r->nkink || r->nboundary) {
        for (int k = 0; k < r->ninputs; k++) {
            const tl_gradcheck_input *e = &r->inputs[k];
            if (e->mismatches || e->nkink || e->nboundary)
                cr_log_error("%s: %s: %lld mismatches, %lld kinks, %lld boundaries; worst [%lld]: tape "
                             "%.10g, fd %.10g", name, e->name, (long long)e->mismatches,
                             (long long)e->nkink, (long long)e->nboundary, (long long)e->worst,
                             e->worst_tape, e->worst_fd);
        }
        bad = 1;
    }
    tl_gradcheck_free_report(r);
    unload(&f);
    return bad;
}

/* Every f64 fixture of dir away from kinks (each_case's finite-difference
 * set) passes, with no element flagged. */
static void all_pass(const char *dir, int least)
{
    int fails, count;
    each_case(dir, passes, true, &fails, &count);
    cr_assert(count >= least, "only %d cases found in %s", count, dir);
    cr_assert_eq(fails, 0, "%d of %d cases in %s fail gradcheck", fails, count, dir);
}

Test(gradcheck, ops_fixtures_pass) { all_pass("tests/fixtures/ops", 245); }

Test(gradcheck, flow_fixtures_pass) { all_pass("tests/fixtures/flow", 11); }

/* A fixture on kinks or boundaries: no mismatch, and every element that
 * sits there is flagged at the node named, of the kind said. */
static void on_kinks(const char *dir, const char *name, bool boundary, const char *node, int least)
{
    fixture f;
    tl_status st = {0};
    cr_assert(load(dir, name, &f), "%s", name);
    tl_gradcheck_report *r = check_fixture(&f, NULL, &st);
    cr_assert(r, "%s: %s", name, st.msg);
    cr_expect_eq(r->mismatches, 0, "%s: %lld mismatches", name, (long long)r->mismatches);
    cr_expect_geq(boundary ? r->nboundary : r->nkink, least, "%s: %lld flagged", name,
                  (long long)(boundary ? r->nboundary : r->nkink));
    cr_expect_eq(boundary ? r->nkink : r->nboundary, 0, "%s", name);
    for (int k = 0; k < r->ninputs; k++) {
        const tl_gradcheck_input *e = &r->inputs[k];
        int64_t n = boundary ? e->nboundary : e->nkink;
        for (int64_t i = 0; i < n && i < TL_GC_SITES; i++) {
            const tl_gradcheck_site *s = boundary ? &e->boundary[i] : &e->kink[i];
            cr_expect_str_eq(s->node->name, node, "%s: %s[%lld]", name, e->name, (long long)s->index);
        }
    }
    tl_gradcheck_free_report(r);
    unload(&f);
}

Test(gradcheck, kinks_of_ops)
{
    static const struct {
        const char *name, *node;
        int least;
    } cases[] = {
        {"kink_relu_zero_f64", "y", 1},    {"kink_abs_zero_f64", "y", 1},
        {"kink_sign_zero_f64", "y", 1},    {"kink_clamp_bounds_f64", "y", 2},
        {"kink_clamp_minbound_f64", "y", 1}, {"kink_max_ties_f64", "y", 2},
        {"kink_max_tieskeep_f64", "y", 2}, {"kink_min_ties_f64", "y", 2},
        {"kink_maximum_ties_f64", "y", 2}, {"kink_minimum_ties_f64", "y", 2},
        {"kink_where_zero_f64", "y", 1},   {"kink_cmp_ties_f64", "yeq", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        on_kinks("tests/fixtures/ops", cases[i].name, false, cases[i].node, cases[i].least);
}

Test(gradcheck, branch_boundaries)
{
    /* sum(x) == 0: the if flips for every element, named at the if (not
     * at the comparison feeding it) */
    on_kinks("tests/fixtures/flow", "kink_if_boundary_f64", true, "r", 4);
    /* map elements exactly on their branch boundary */
    on_kinks("tests/fixtures/flow", "kink_map_piecewise_f64", true, "y", 1);
    on_kinks("tests/fixtures/flow", "map_piecewise_zero_f64", true, "y", 1);
}

/* x * detach(x): the differences see both factors, the tape one. */
Test(gradcheck, wrong_tape_caught)
{
    tl_status st = {0};
    tl_gradcheck_report *r = check_graph("{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": ["
                                         "{\"id\": \"d\", \"op\": \"detach\", \"args\": [\"x\"]},"
                                         "{\"id\": \"y\", \"op\": \"mul\", \"args\": [\"x\", \"d\"]}],"
                                         " \"outputs\": \"y\"}", "[1, 2, -3]", NULL, NULL, &st);
    cr_assert(r, "%s", st.msg);
    const tl_gradcheck_input *e = &r->inputs[0];
    cr_expect_eq(e->checked, 3);
    cr_expect_eq(e->mismatches, 3);
    cr_expect_eq(e->worst, 2); /* the largest |x|: furthest past its tolerance */
    cr_expect_float_eq(e->worst_tape, -3.0, 1e-12);
    cr_expect_float_eq(e->worst_fd, -6.0, 1e-6);
    cr_expect_float_eq(e->max_abs, 3.0, 1e-6);
    cr_expect_float_eq(e->max_rel, 0.5, 1e-6);
    tl_gradcheck_free_report(r);
}

/* relu at 0 and an if on sum(x) > 1 together, over several inputs: a mix
 * of verdicts to compare between runs. */
static const char *mixed_graph =
    "{\"version\": 1, \"inputs\": [\"x\", \"w\", \"i\"], \"nodes\": ["
    "{\"id\": \"h\", \"op\": \"relu\", \"args\": [\"x\"]},"
    "{\"id\": \"p\", \"op\": \"mul\", \"args\": [\"h\", \"w\"]},"
    "{\"id\": \"t\", \"op\": \"take\", \"args\": [\"p\", \"i\"], \"axis\": 0},"
    "{\"id\": \"s\", \"op\": \"sum\", \"args\": [\"w\"]},"
    "{\"id\": \"c\", \"op\": \"gt\", \"args\": [\"s\", 1]},"
    "{\"id\": \"r\", \"op\": \"if\", \"cond\": \"c\","
    " \"then\": {\"nodes\": [{\"id\": \"a\", \"op\": \"sin\", \"args\": [\"t\"]}], \"result\": \"a\"},"
    " \"else\": {\"nodes\": [{\"id\": \"b\", \"op\": \"square\", \"args\": [\"t\"]}], \"result\": \"b\"}}"
    "], \"outputs\": \"r\"}";

static tl_gradcheck_report *check_mixed(tl_graph *g, int threads, int64_t samples)
{
    tl_tensor *in[3] = {lit("[0, 1, -2, 0.5, 0, 3, -1, 2]"), lit("[0.5, -0.25, 0.25, 0.5, 0, 0, 0, 0]"),
                        lit("i64:[7, 0, 1, 3, 4, 5]")};
    tl_gradcheck_opts o;
    tl_gradcheck_defaults(&o);
    o.threads = threads;
    o.samples = samples;
    tl_gradcheck_report *r;
    tl_status st = {0};
    cr_assert_eq(tl_gradcheck_graph(g, in, NULL, &o, &r, &st), TL_OK, "%s", st.msg);
    for (int k = 0; k < 3; k++)
        tl_tensor_unref(in[k]);
    return r;
}

static void expect_same(const tl_gradcheck_report *a, const tl_gradcheck_report *b)
{
    cr_assert_eq(a->ninputs, b->ninputs);
    cr_expect_eq(a->checked, b->checked);
    cr_expect_eq(a->mismatches, b->mismatches);
    cr_expect_eq(a->nkink, b->nkink);
    cr_expect_eq(a->nboundary, b->nboundary);
    for (int k = 0; k < a->ninputs; k++) {
        const tl_gradcheck_input *x = &a->inputs[k], *y = &b->inputs[k];
        cr_expect(x->skip == y->skip && x->checked == y->checked && x->mismatches == y->mismatches &&
                      x->worst == y->worst && x->nkink == y->nkink && x->nboundary == y->nboundary,
                  "input %s differs", x->name);
        cr_expect(!memcmp(&x->max_abs, &y->max_abs, sizeof(double)) &&
                      !memcmp(&x->max_rel, &y->max_rel, sizeof(double)) &&
                      !memcmp(&x->worst_tape, &y->worst_tape, sizeof(double)) &&
                      !memcmp(&x->worst_fd, &y->worst_fd, sizeof(double)),
                  "input %s: values differ", x->name);
        for (int i = 0; i < TL_GC_SITES && i < x->nkink; i++)
            cr_expect(x->kink[i].index == y->kink[i].index && x->kink[i].node == y->kink[i].node);
        for (int i = 0; i < TL_GC_SITES && i < x->nboundary; i++)
            cr_expect(x->boundary[i].index == y->boundary[i].index &&
                      x->boundary[i].node == y->boundary[i].node);
    }
}

Test(gradcheck, mixed_verdicts)
{
    tl_graph *g = parse(mixed_graph);
    tl_gradcheck_report *r = check_mixed(g, 1, 0);
    const tl_gradcheck_input *x = &r->inputs[0], *w = &r->inputs[1], *i = &r->inputs[2];
    cr_expect_eq(i->skip, TL_GC_SKIP_INDEX);
    cr_expect_eq(i->checked, 0);
    /* sum(w) = 1 exactly: every w element flips the if, named there */
    cr_expect_eq(w->nboundary, 8);
    cr_expect_str_eq(w->boundary[0].node->name, "r");
    /* x[0] and x[4] sit on relu's kink (x[4] is taken, x[0] too) */
    cr_expect_eq(x->nkink, 2);
    cr_expect_eq(x->kink[0].index, 0);
    cr_expect_eq(x->kink[1].index, 4);
    cr_expect_str_eq(x->kink[0].node->name, "h");
    cr_expect_eq(r->mismatches, 0);
    cr_expect_eq(x->checked, 8);
    tl_gradcheck_free_report(r);
    tl_graph_free(g);
}

/* The mixed graph's report with t threads and with u: the same. */
static void same_for(int t, int u, int64_t samples)
{
    tl_graph *g = parse(mixed_graph);
    tl_gradcheck_report *a = check_mixed(g, t, samples), *b = check_mixed(g, u, samples);
    expect_same(a, b);
    tl_gradcheck_free_report(a);
    tl_gradcheck_free_report(b);
    tl_graph_free(g);
}

Test(gradcheck, same_report_for_any_thread_count)
{
    same_for(1, 3, 0);
    same_for(1, 16, 0);
}

/* --samples: the same elements every time, whatever the thread count */
Test(gradcheck, samples_are_fixed)
{
    same_for(1, 1, 3);
    same_for(1, 2, 3);
    tl_graph *g = parse(mixed_graph);
    tl_gradcheck_report *a = check_mixed(g, 2, 3), *all = check_mixed(g, 2, 8);
    cr_expect_eq(a->inputs[0].checked, 3);
    cr_expect_eq(a->inputs[1].checked, 3);
    cr_expect_eq(all->inputs[0].checked, 8); /* as many as there are: every one */
    tl_gradcheck_free_report(a);
    tl_gradcheck_free_report(all);
    tl_graph_free(g);
}

Test(gradcheck, samples_count)
{
    static char x[16000];
    size_t n = 0;
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(x + n, sizeof x - n, "%s%d", i ? ", " : "[", i);
    snprintf(x + n, sizeof x - n, "]");
    tl_gradcheck_opts o;
    tl_gradcheck_defaults(&o);
    o.samples = 50;
    tl_status st = {0};
    tl_gradcheck_report *r = check_square(x, NULL, &o, &st);
    cr_assert(r, "%s", st.msg);
    cr_expect_eq(r->inputs[0].checked, 50);
    cr_expect_eq(r->inputs[0].numel, 1000);
    cr_expect_eq(r->mismatches, 0);
    tl_gradcheck_free_report(r);
}

Test(gradcheck, wrt_leaves_inputs_out)
{
    tl_graph *g = parse(mixed_graph);
    tl_tensor *in[3] = {lit("[1, 2, 3, 4, 5, 6, 7, 8]"), lit("[1, 1, 1, 1, 1, 1, 1, 1]"), lit("i64:[0]")};
    bool wrt[3] = {true, false, false};
    tl_gradcheck_opts o;
    tl_gradcheck_defaults(&o);
    o.wrt = wrt;
    tl_gradcheck_report *r;
    tl_status st = {0};
    cr_assert_eq(tl_gradcheck_graph(g, in, NULL, &o, &r, &st), TL_OK, "%s", st.msg);
    cr_expect_eq(r->inputs[0].checked, 8);
    cr_expect_eq(r->inputs[1].skip, TL_GC_SKIP_WRT);
    cr_expect_eq(r->inputs[2].skip, TL_GC_SKIP_INDEX);
    cr_expect_eq(r->mismatches, 0);
    tl_gradcheck_free_report(r);
    for (int k = 0; k < 3; k++)
        tl_tensor_unref(in[k]);
    tl_graph_free(g);
}

/* map bodies with kinks of their own, iterate and if inside: replayed
 * element by element. */
Test(gradcheck, kinks_inside_map)
{
    tl_status st = {0};
    tl_gradcheck_report *r = check_graph(
        "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": [{\"id\": \"y\", \"op\": \"map\","
        " \"args\": [\"x\"], \"params\": [\"p\"], \"body\": {\"nodes\": ["
        "{\"id\": \"a\", \"op\": \"abs\", \"args\": [\"p\"]},"
        "{\"id\": \"m\", \"op\": \"maximum\", \"args\": [\"p\", 1]},"
        "{\"id\": \"s\", \"op\": \"add\", \"args\": [\"a\", \"m\"]}], \"result\": \"s\"}}],"
        " \"outputs\": \"y\"}", "[0, 1, 2, -3]", NULL, NULL, &st);
    cr_assert(r, "%s", st.msg);
    cr_expect_eq(r->mismatches, 0);
    cr_expect_eq(r->inputs[0].nkink, 2); /* |0| and maximum(1, 1) */
    cr_expect_eq(r->inputs[0].kink[0].index, 0);
    cr_expect_eq(r->inputs[0].kink[1].index, 1);
    cr_expect_eq(r->inputs[0].nboundary, 0);
    tl_gradcheck_free_report(r);
}

Test(gradcheck, refuses_f32)
{
    tl_status st = {0};
    cr_expect_null(check_square("f32:[1, 2]", NULL, NULL, &st));
    cr_expect_eq(st.code, TL_EINPUT);
    cr_expect(strstr(st.msg, "input \"x\" is f32[2]") && strstr(st.msg, "cast the inputs to f64"), "%s", st.msg);
}

Test(gradcheck, refuses_a_seed_of_the_wrong_shape)
{
    tl_status st = {0};
    cr_expect_null(check_square("[1, 2]", "[1, 2, 3]", NULL, &st));
    cr_expect_eq(st.code, TL_EINPUT);
    cr_expect(strstr(st.msg, "seed for output \"y\": expected f64[2], got f64[3]"), "%s", st.msg);
}

Test(gradcheck, seeds_weigh_the_outputs)
{
    tl_status st = {0};
    tl_gradcheck_report *r = check_square("[1, 2]", "[3, -1]", NULL, &st);
    cr_assert(r, "%s", st.msg);
    cr_expect_eq(r->mismatches, 0);
    cr_expect_float_eq(r->inputs[0].worst_fd, r->inputs[0].worst == 0 ? 6.0 : -4.0, 1e-6);
    tl_gradcheck_free_report(r);
}

Test(gradcheck, bad_options)
{
    tl_gradcheck_opts o;
    tl_status st = {0};
    tl_gradcheck_defaults(&o);
    o.eps = 0;
    cr_expect_null(check_square("[1, 2]", NULL, &o, &st));
    cr_expect_eq(st.code, TL_EINPUT);
    tl_gradcheck_defaults(&o);
    o.rtol = -1;
    cr_expect_null(check_square("[1, 2]", NULL, &o, &st));
    cr_expect_eq(st.code, TL_EINPUT);
}

/* An error in a perturbed run (an index from a cast that the step pushes
 * out of range) stops the check and says where; the same error whatever
 * the thread count. */
Test(gradcheck, perturbed_run_fails)
{
    tl_graph *g = parse("{\"version\": 1, \"inputs\": [\"x\", \"v\"], \"nodes\": ["
                        "{\"id\": \"i\", \"op\": \"cast\", \"args\": [\"x\"], \"dtype\": \"i64\"},"
                        "{\"id\": \"t\", \"op\": \"take\", \"args\": [\"v\", \"i\"], \"axis\": 0}],"
                        " \"outputs\": \"t\"}");
    for (int threads = 1; threads <= 3; threads += 2) {
        tl_tensor *in[2] = {lit("[0.5, 0, 1.9999999999999]"), lit("[1, 2]")};
        tl_gradcheck_opts o;
        tl_gradcheck_defaults(&o);
        o.threads = threads;
        tl_gradcheck_report *r;
        tl_status st = {0};
        cr_expect_eq(tl_gradcheck_graph(g, in, NULL, &o, &r, &st), TL_EINPUT);
        cr_expect(strstr(st.msg, "input \"x\" at [2] plus the step: t.json: node \"t\" (take)"), "%s",
                  st.msg);
        for (int k = 0; k < 2; k++)
            tl_tensor_unref(in[k]);
    }
    tl_graph_free(g);
}

/* log(x) at [0, 1, 2]: the output entry stuck at -inf spoils only its own
 * element, not the differences of the others. */
Test(gradcheck, constant_infinities_contribute_nothing)
{
    tl_status st = {0};
    tl_gradcheck_report *r = check_graph("{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": ["
                                         "{\"id\": \"y\", \"op\": \"log\", \"args\": [\"x\"]}],"
                                         " \"outputs\": \"y\"}", "[0, 1, 2]", NULL, NULL, &st);
    cr_assert(r, "%s", st.msg);
    cr_expect_eq(r->mismatches, 1);
    cr_expect_eq(r->inputs[0].worst, 0);
    cr_expect(isinf(r->inputs[0].worst_tape) && isnan(r->inputs[0].worst_fd));
    cr_expect_lt(r->inputs[0].max_abs, 1e-9);
    tl_gradcheck_free_report(r);
}

/* Six 21x21 products on 8 threads: products run at once on several
 * threads stay right (the serial OpenBLAS corrupted them; the race is rare
 * under the sanitizers: tests/cli/gradcheck.txt and threads.txt have the
 * cases that show it with the release build). */
Test(gradcheck, matmul_graphs_on_many_threads)
{
    tl_graph *g = parse("{\"version\": 1, \"inputs\": [\"a\"], \"nodes\": ["
                        "{\"id\": \"c\", \"op\": \"matmul\", \"args\": [\"a\", \"a\"]},"
                        "{\"id\": \"s\", \"op\": \"sin\", \"args\": [\"c\"]}], \"outputs\": \"s\"}");
    tl_status st = {0};
    int64_t shape[3] = {6, 21, 21};
    tl_tensor *a = tl_tensor_zeros(TL_F64, 3, shape, &st);
    for (int64_t i = 0; i < a->numel; i++)
        tl_tensor_set(a, i, sin((double)i) / 4);
    tl_gradcheck_report *r[2];
    for (int t = 0; t < 2; t++) {
        tl_gradcheck_opts o;
        tl_gradcheck_defaults(&o);
        o.threads = t ? 8 : 1;
        o.samples = 200;
        cr_assert_eq(tl_gradcheck_graph(g, &a, NULL, &o, &r[t], &st), TL_OK, "%s", st.msg);
        cr_expect_eq(r[t]->mismatches, 0, "%d threads: %lld mismatches", o.threads,
                     (long long)r[t]->mismatches);
    }
    expect_same(r[0], r[1]);
    tl_gradcheck_free_report(r[0]);
    tl_gradcheck_free_report(r[1]);
    tl_tensor_unref(a);
    tl_graph_free(g);
}
