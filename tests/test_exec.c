/* The library API: result lifecycle, the required values, shared
 * bindings, constants, disconnected inputs, control flow semantics, and
 * error messages for bad graphs. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif
#include <math.h>
#include <string.h>

#include "exec/exec.h"
#include "formats/text.h"

static tl_graph *parse(const char *json)
{
    tl_status st = {0};
    tl_graph *g = tl_graph_parse(json, strlen(json), "t.json", &st);
    cr_assert(g, "parse failed: %s", st.msg);
    return g;
}

/* The error a graph gives at load or run time (empty when none). */
static const char *error_of(const char *json, const char *input)
{
    static tl_status st;
    tl_status_clear(&st);
    tl_graph *g = tl_graph_parse(json, strlen(json), "t.json", &st);
    if (!g)
        return st.msg;
    tl_tensor *in = input ? tl_literal_parse(input, &st) : NULL;
    tl_result *r = NULL;
    tl_run_opts o = {.record = true};
    if (!tl_run(g, &in, &o, &r, &st))
        tl_status_clear(&st);
    cr_expect(st.code == TL_OK || st.code == TL_EINPUT, "code %d: %s", st.code, st.msg);
    tl_result_free(r);
    tl_tensor_unref(in);
    tl_graph_free(g);
    return st.msg;
}

static tl_tensor *lit(const char *s)
{
    tl_status st = {0};
    tl_tensor *t = tl_literal_parse(s, &st);
    cr_assert(t, "%s", st.msg);
    return t;
}

static void expect_values(const tl_tensor *t, const double *want, int n)
{
    cr_assert_eq(t->numel, n);
    for (int i = 0; i < n; i++)
        cr_expect(tl_tensor_get(t, i) == want[i], "[%d]: %.17g, expected %.17g", i,
                  tl_tensor_get(t, i), want[i]);
}

/* Runs a one-input graph and pulls back (seed NULL: ones). */
static tl_result *run1(tl_graph *g, const char *x, tl_tensor **grad, const char *seed)
{
    tl_status st = {0};
    tl_tensor *in = lit(x), *s = seed ? lit(seed) : NULL;
    tl_result *r;
    tl_run_opts o = {.record = grad != NULL};
    cr_assert(!tl_run(g, &in, &o, &r, &st), "%s", st.msg);
    if (grad)
        cr_assert(!tl_result_pullback(r, &s, grad, &st), "%s", st.msg);
    tl_tensor_unref(in);
    tl_tensor_unref(s);
    return r;
}

#define POLY "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[" \
    "{\"id\":\"y\",\"op\":\"mul\",\"args\":[\"x\",\"x\"]}," \
    "{\"id\":\"y2\",\"op\":\"mul\",\"args\":[\"y\",\"y\"]}," \
    "{\"id\":\"z\",\"op\":\"add\",\"args\":[\"y2\",1]}],\"outputs\":\"z\"}"

Test(required, shared_binding_polynomial)
{
    tl_graph *g = parse(POLY);
    tl_tensor *gx;
    tl_result *r = run1(g, "[1,2]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){2, 17}, 2);
    expect_values(gx, (double[]){4, 32}, 2);
    /* y is computed once although used twice: three nodes, three ops */
    cr_expect_eq(tl_result_stats(r)->ops, 3);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(required, sum_of_squares)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                        "{\"id\":\"s\",\"op\":\"mul\",\"args\":[\"x\",\"x\"]},"
                        "{\"id\":\"y\",\"op\":\"sum\",\"args\":[\"s\"]}],\"outputs\":[\"y\"]}");
    tl_tensor *gx;
    tl_result *r = run1(g, "[1,2,3]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){14}, 1);
    expect_values(gx, (double[]){2, 4, 6}, 3);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(required, matmul_with_seed)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"a\",\"b\"],\"nodes\":["
                        "{\"id\":\"c\",\"op\":\"matmul\",\"args\":[\"a\",\"b\"]}],\"outputs\":\"c\"}");
    tl_status st = {0};
    tl_tensor *in[2] = {lit("[[1,2]]"), lit("[[2],[3]]")}, *seed = lit("[[2]]"), *grads[2];
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s", st.msg);
    expect_values(tl_result_output(r, 0), (double[]){8}, 1);
    cr_assert(!tl_result_pullback(r, &seed, grads, &st), "%s", st.msg);
    expect_values(grads[0], (double[]){4, 6}, 2);
    expect_values(grads[1], (double[]){2, 4}, 2);
    for (int i = 0; i < 2; i++) {
        tl_tensor_unref(in[i]);
        tl_tensor_unref(grads[i]);
    }
    tl_tensor_unref(seed);
    tl_result_free(r);
    tl_graph_free(g);
}

static tl_graph *unary(const char *op)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"%s\",\"args\":[\"x\"]}],\"outputs\":\"y\"}", op);
    return parse(json);
}

Test(required, neg_zero_and_kinks)
{
    tl_graph *g = unary("neg");
    tl_result *r = run1(g, "[0.0]", NULL, NULL);
    double y = tl_tensor_get(tl_result_output(r, 0), 0);
    cr_expect(y == 0 && signbit(y), "neg(+0) must be -0");
    tl_result_free(r);
    tl_graph_free(g);
    const char *ops[] = {"relu", "abs"};
    for (int i = 0; i < 2; i++) {
        tl_tensor *gx;
        g = unary(ops[i]);
        r = run1(g, "[0.0]", &gx, NULL);
        cr_expect(tl_tensor_get(gx, 0) == 0, "%s'(0) must be 0", ops[i]);
        tl_tensor_unref(gx);
        tl_result_free(r);
        tl_graph_free(g);
    }
}

Test(required, maximum_tie_splits)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"a\",\"b\"],\"nodes\":["
                        "{\"id\":\"m\",\"op\":\"maximum\",\"args\":[\"a\",\"b\"]}],\"outputs\":\"m\"}");
    tl_status st = {0};
    tl_tensor *in[2] = {lit("[3, 1]"), lit("[3, 2]")}, *grads[2];
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s", st.msg);
    cr_assert(!tl_result_backward(r, grads, &st), "%s", st.msg);
    expect_values(grads[0], (double[]){0.5, 0}, 2);
    expect_values(grads[1], (double[]){0.5, 1}, 2);
    for (int i = 0; i < 2; i++) {
        tl_tensor_unref(in[i]);
        tl_tensor_unref(grads[i]);
    }
    tl_result_free(r);
    tl_graph_free(g);
}

Test(lifecycle, consume_close_and_values)
{
    tl_graph *g = parse(POLY);
    tl_status st = {0};
    tl_tensor *gx;
    tl_result *r = run1(g, "[1,2]", &gx, NULL);
    tl_tensor_unref(gx);
    /* a second pullback is an error; the value stays readable */
    cr_expect_eq(tl_result_backward(r, &gx, &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "consumed"), "%s", st.msg);
    cr_expect_null(gx);
    tl_result_close(r);
    tl_result_close(r);
    expect_values(tl_result_output(r, 0), (double[]){2, 17}, 2);
    tl_result_free(r);

    /* close before use: harmless twice, then pulling back is an error */
    tl_tensor *in = lit("[1,2]");
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, &in, &o, &r, &st));
    tl_result_close(r);
    tl_result_close(r);
    expect_values(tl_result_output(r, 0), (double[]){2, 17}, 2);
    cr_expect_eq(tl_result_backward(r, &gx, &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "closed"), "%s", st.msg);
    tl_result_free(r);

    /* without recording nothing is on the tape and there is nothing to pull back */
    o.record = false;
    cr_assert(!tl_run(g, &in, &o, &r, &st));
    cr_expect_eq(tl_result_stats(r)->tape_entries, 0);
    cr_expect_eq(tl_result_backward(r, &gx, &st), TL_EINPUT);
    tl_result_free(r);
    tl_tensor_unref(in);
    tl_graph_free(g);
}

Test(lifecycle, seed_checks)
{
    tl_graph *g = parse(POLY);
    tl_status st = {0};
    tl_tensor *in = lit("[1,2]"), *bad = lit("[1,2,3]"), *bad32 = lit("f32:[1,2]"), *gx;
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, &in, &o, &r, &st));
    cr_expect_eq(tl_result_pullback(r, &bad, &gx, &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "expected f64[2], got f64[3]"), "%s", st.msg);
    tl_result_free(r);
    cr_assert(!tl_run(g, &in, &o, &r, &st));
    cr_expect_eq(tl_result_pullback(r, &bad32, &gx, &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "got f32[2]"), "%s", st.msg);
    tl_result_free(r);
    tl_tensor_unref(in);
    tl_tensor_unref(bad);
    tl_tensor_unref(bad32);
    tl_graph_free(g);
}

/* A refused seed leaves the recording for another pullback (the library
 * audit of December 7: it was consumed, "already consumed by a pullback") */
Test(lifecycle, refused_seed_keeps_the_recording)
{
    tl_graph *g = parse(POLY);
    tl_status st = {0};
    tl_tensor *in = lit("[1,2]"), *bad = lit("[1,2,3]"), *good = lit("[1,1]"), *gx = NULL;
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, &in, &o, &r, &st));
    cr_expect_eq(tl_result_pullback(r, &bad, &gx, &st), TL_EINPUT);
    tl_status_clear(&st);
    cr_expect_eq(tl_result_pullback(r, &good, &gx, &st), TL_OK, "%s", st.msg);
    cr_expect(gx && tl_tensor_get(gx, 0) == 4 && tl_tensor_get(gx, 1) == 32); /* 4 x^3 */
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_tensor_unref(in);
    tl_tensor_unref(bad);
    tl_tensor_unref(good);
    tl_graph_free(g);
}

/* What a C caller can get wrong is TL_EINPUT, never a crash or a write out
 * of bounds: NULL graph, result pointer, inputs or grads, an input left
 * NULL (its default taken where it has one), output slots out of range or
 * inside a block, accessors out of range */
Test(lifecycle, misuse_is_an_error)
{
    tl_graph *g = parse(POLY);
    tl_status st = {0};
    tl_tensor *in = lit("[1,2]"), *none[1] = {NULL};
    tl_result *r = NULL;
    cr_expect_eq(tl_run(NULL, &in, NULL, &r, &st), TL_EINPUT);
    cr_expect_eq(tl_run(g, &in, NULL, NULL, &st), TL_EINPUT);
    cr_expect_eq(tl_run(g, NULL, NULL, &r, &st), TL_EINPUT);
    tl_status_clear(&st);
    cr_expect_eq(tl_run(g, none, NULL, &r, &st), TL_EINPUT);
    cr_expect(strstr(st.msg, "missing input \"x\""), "%s", st.msg);
    for (int slot = -1; slot <= g->nslots; slot += g->nslots + 1) {
        tl_run_opts o = {.outputs = &slot, .noutputs = 1};
        cr_expect_eq(tl_run(g, &in, &o, &r, &st), TL_EINPUT);
        cr_expect(!r);
    }
    tl_run_opts o = {.outputs = g->outputs, .noutputs = -1};
    cr_expect_eq(tl_run(g, &in, &o, &r, &st), TL_EINPUT);
    tl_status_clear(&st);
    cr_assert(!tl_run(g, &in, NULL, &r, &st));
    cr_expect(!tl_result_output(r, -1) && !tl_result_output(r, 1) && !tl_result_output_name(r, 1));
    cr_expect(tl_result_output(r, 0) && !strcmp(tl_result_output_name(r, 0), "z"));
    cr_expect_eq(tl_result_pullback(r, NULL, NULL, &st), TL_EINPUT);
    tl_result_free(r);
    tl_graph_free(g);
    /* a default where the input is left NULL */
    g = parse("{\"version\": 1, \"inputs\": [\"x\", {\"name\": \"s\", \"default\": 3}],"
              " \"nodes\": [{\"id\": \"y\", \"op\": \"mul\", \"args\": [\"x\", \"s\"]}], \"outputs\": [\"y\"]}");
    tl_tensor *two[2] = {in, NULL};
    tl_status_clear(&st);
    cr_assert(!tl_run(g, two, NULL, &r, &st), "%s", st.msg);
    cr_expect(tl_tensor_get(tl_result_output(r, 0), 1) == 6);
    tl_result_free(r);
    tl_graph_free(g);
    tl_tensor_unref(in);
}

Test(gradients, disconnected_and_constants)
{
    /* w only reaches 1/w, which no output uses: its gradient is an exact
     * zero even at w = 0; the const c gets none and changes nothing */
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\",\"w\"],\"consts\":{\"c\":{\"shape\":[2],\"data\":[3,4]}},"
                        "\"nodes\":[{\"id\":\"d\",\"op\":\"div\",\"args\":[1,\"w\"]},"
                        "{\"id\":\"y\",\"op\":\"mul\",\"args\":[\"x\",\"c\"]}],\"outputs\":\"y\"}");
    tl_status st = {0};
    tl_tensor *in[2] = {lit("[1,2]"), lit("[0,0]")}, *grads[2];
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s", st.msg);
    cr_assert(!tl_result_backward(r, grads, &st), "%s", st.msg);
    expect_values(grads[0], (double[]){3, 4}, 2);
    expect_values(grads[1], (double[]){0, 0}, 2);
    cr_expect(!signbit(tl_tensor_get(grads[1], 0)));
    for (int i = 0; i < 2; i++) {
        tl_tensor_unref(in[i]);
        tl_tensor_unref(grads[i]);
    }
    tl_result_free(r);
    tl_graph_free(g);
}

Test(gradients, wrt_subset)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"a\",\"b\"],\"nodes\":["
                        "{\"id\":\"m\",\"op\":\"mul\",\"args\":[\"a\",\"b\"]}],\"outputs\":\"m\"}");
    tl_status st = {0};
    tl_tensor *in[2] = {lit("[2]"), lit("[5]")}, *grads[2];
    bool wrt[2] = {false, true};
    tl_result *r;
    tl_run_opts o = {.record = true, .wrt = wrt};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s", st.msg);
    cr_assert(!tl_result_backward(r, grads, &st), "%s", st.msg);
    cr_expect_null(grads[0]);
    expect_values(grads[1], (double[]){2}, 1);
    tl_tensor_unref(grads[1]);
    for (int i = 0; i < 2; i++)
        tl_tensor_unref(in[i]);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(memory, intermediates_freed_after_last_use)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                        "{\"id\":\"a\",\"op\":\"exp\",\"args\":[\"x\"]},"
                        "{\"id\":\"b\",\"op\":\"sin\",\"args\":[\"a\"]},"
                        "{\"id\":\"unused\",\"op\":\"cos\",\"args\":[\"x\"]},"
                        "{\"id\":\"c\",\"op\":\"add\",\"args\":[\"b\",\"a\"]}],\"outputs\":\"c\"}");
    const tl_block *b = &g->top;
    /* a dies after c, b after c, unused right where it is made, and the
     * input x there too (its last reader); c is kept */
    cr_expect_eq(b->nodes[0].nfree, 0);
    cr_expect_eq(b->nodes[1].nfree, 0);
    cr_expect_eq(b->nodes[2].nfree, 2);
    cr_expect_eq(b->nodes[3].nfree, 2);
    tl_graph_free(g);
}

/* An input given to the run (tl_run_opts.give_inputs, as the command
 * line gives its inputs) goes at its last use and the budget counts it
 * until then: exp(exp(exp(x))) over 4 MiB holds x, a and b at once when x
 * is kept, two tensors when it is given; the caller's entry becomes a
 * header without data. */
Test(memory, given_inputs_go_at_their_last_use)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                        "{\"id\":\"a\",\"op\":\"exp\",\"args\":[\"x\"]},"
                        "{\"id\":\"b\",\"op\":\"exp\",\"args\":[\"a\"]},"
                        "{\"id\":\"c\",\"op\":\"exp\",\"args\":[\"b\"]}],\"outputs\":\"c\"}");
    int64_t peak[2], n = 1 << 20;
    for (int give = 0; give < 2; give++) {
        tl_status st = {0};
        tl_tensor *x = tl_tensor_new(TL_F32, 1, &n, &st);
        cr_assert(x, "%s", st.msg);
        memset(x->data, 0, (size_t)n * 4);
        tl_result *r;
        tl_run_opts o = {.give_inputs = give ? &x : NULL, .fuse_min = -1}; /* op by op: no fused chain */
        cr_assert(!tl_run(g, &x, &o, &r, &st), "%s", st.msg);
        peak[give] = tl_result_stats(r)->peak_bytes;
        cr_expect(give ? !x->data : x->data != NULL, "the caller's entry%s holds the data", give ? " still" : " no longer");
        cr_expect(fabs(tl_tensor_get(tl_result_output(r, 0), 7) - exp(exp(1.0))) < 1e-5);
        tl_result_free(r);
        tl_tensor_unref(x);
    }
    cr_expect(peak[0] >= 3 * 4 * n && peak[1] < 3 * 4 * n && peak[1] >= 2 * 4 * n,
              "peak %lld bytes kept, %lld given", (long long)peak[0], (long long)peak[1]);
    tl_graph_free(g);
}

/* Tensors about the 2 MiB edge, where the data leaves the header's block
 * for whole huge pages of its own (tensor.c): every element writable and
 * kept, the data aligned, the budget charged and credited to the byte,
 * and a freed block taken again by the next tensor of its size.  The
 * first of 5 MiB is where a process measures which pages to ask for. */
Test(memory, tensors_about_the_huge_page_edge)
{
    tl_status st = {0};
    tl_budget *b = tl_budget_new(0, &st);
    cr_assert_not_null(b);
    const int64_t mib2 = 1 << 19; /* f32 elements in 2 MiB */
    const int64_t sizes[] = {mib2 - 1, mib2, mib2 + 1, 5 * mib2 / 2, 3 * mib2, mib2 - 16};
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            int64_t n = sizes[i];
            tl_tensor *t = tl_tensor_new_in(b, TL_F32, 1, &n, &st);
            cr_assert_not_null(t, "%s", st.msg);
            cr_expect_eq(t->numel, n);
            cr_expect_eq((uintptr_t)t->data % 64, 0);
            if (n * 4 >= (2 << 20))
                cr_expect_eq((uintptr_t)t->data % (2 << 20), 0, "%lld elements", (long long)n);
            cr_expect_gt(b->live, n * 4);
            float *d = t->data;
            for (int64_t k = 0; k < n; k++)
                d[k] = (float)(k + round);
            int64_t bad = 0;
            for (int64_t k = 0; k < n; k++)
                bad += d[k] != (float)(k + round);
            cr_expect_eq(bad, 0);
            cr_expect_eq(t->shape[0], n); /* the header survives its data's writes */
            tl_tensor_unref(t);
            cr_expect_eq(b->live, 0);
        }
    /* a freed block is the next one of its size */
    int64_t n = 3 * mib2;
    tl_tensor *t = tl_tensor_new_in(b, TL_F32, 1, &n, &st);
    cr_assert_not_null(t);
    void *data = t->data;
    tl_tensor_unref(t);
    t = tl_tensor_new_in(b, TL_F32, 1, &n, &st);
    cr_assert_not_null(t);
    cr_expect_eq(t->data, data);
    tl_tensor_unref(t);
    tl_budget_unref(b);
    tl_tensor_release_cache();
}

/* Tensors from 128 KiB to 2 MiB (tensor.c's mid-size blocks: units of
 * slabs in huge pages, where the process chose huge pages): made and freed
 * out of order, none overlaps another (each keeps what was written to
 * it), the data aligned, the budget charged whole units; where the slabs
 * are in use, a freed block's units are the next fitting block's. */
Test(memory, mid_size_tensors_never_overlap)
{
    tl_status st = {0};
    tl_budget *b = tl_budget_new(0, &st);
    cr_assert_not_null(b);
    const int64_t mib2 = 1 << 19; /* f32 elements in 2 MiB */
    int64_t big = 3 * mib2; /* the first huge block: where a process makes its choice */
    tl_tensor *first = tl_tensor_new_in(b, TL_F32, 1, &big, &st);
    cr_assert_not_null(first, "%s", st.msg);
    const int64_t sizes[] = {1 << 15, 100000, 200000, 401408, mib2 - 64, 1 << 17, 300001};
    enum { N = 48 };
    tl_tensor *t[N] = {0};
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            if (t[i])
                continue;
            int64_t n = sizes[(i + round) % 7];
            t[i] = tl_tensor_new_in(b, TL_F32, 1, &n, &st);
            cr_assert_not_null(t[i], "%s", st.msg);
            cr_expect_eq((uintptr_t)t[i]->data % 64, 0);
            for (int64_t k = 0; k < n; k++)
                ((float *)t[i]->data)[k] = (float)(i * 1000 + round);
            ((float *)t[i]->data)[0] = (float)i; /* which tensor, in its first element */
        }
        for (int i = 0; i < N; i++) { /* all still as written */
            int64_t bad = 0, n = t[i]->numel;
            const float *d = t[i]->data;
            bad += d[0] != (float)i;
            for (int64_t k = 1; k < n; k++)
                bad += d[k] != d[n - 1];
            cr_expect_eq(bad, 0, "tensor %d of %lld elements, round %d", i, (long long)n, round);
        }
        for (int i = round % 2; i < N; i += 2 + round) {
            tl_tensor_unref(t[i]);
            t[i] = NULL;
        }
    }
    int64_t live = 0, n = 200000;
    for (int i = 0; i < N; i++)
        if (t[i])
            live++;
    cr_expect_gt(live, 0);
    /* a 800 KB tensor is charged 13 units of 64 KiB, header and all */
    int64_t before = b->live;
    tl_tensor *u = tl_tensor_new_in(b, TL_F32, 1, &n, &st);
    cr_assert_not_null(u);
    cr_expect_eq(b->live - before, 13 << 16);
    void *at = u;
    const char *data = u->data;
    tl_tensor_unref(u);
#ifdef __SANITIZE_ADDRESS__ /* a freed block is out of bounds to the sanitizer, in a slab too */
    cr_expect(__asan_address_is_poisoned(data + 4 * 1000));
#else
    (void)data;
#endif
    u = tl_tensor_new_in(b, TL_F32, 1, &n, &st);
    cr_assert_not_null(u);
    if (tl_huge_pages_chosen()) /* in a slab: its units again */
        cr_expect_eq((void *)u, at);
    tl_tensor_unref(u);
    for (int i = 0; i < N; i++)
        tl_tensor_unref(t[i]);
    tl_tensor_unref(first);
    cr_expect_eq(b->live, 0);
    tl_budget_unref(b);
    tl_tensor_release_cache();
}

/* ---------- control flow ---------- */

#define IF_GRAPH(cond_expr, then_nodes, then_res) \
    "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[" cond_expr "," \
    "{\"id\":\"r\",\"op\":\"if\",\"cond\":\"c\"," \
    "\"then\":{\"nodes\":[" then_nodes "],\"result\":\"" then_res "\"}," \
    "\"else\":{\"nodes\":[{\"id\":\"e\",\"op\":\"neg\",\"args\":[\"x\"]}],\"result\":\"e\"}}]," \
    "\"outputs\":\"r\"}"

Test(flow, unselected_branch_never_runs)
{
    /* the then branch would fail when run (an index out of range, which
     * only its data shows); cond is 0 */
    tl_graph *g = parse(IF_GRAPH("{\"id\":\"c\",\"op\":\"gt\",\"args\":[0,1]}",
                                 "{\"id\":\"k\",\"op\":\"cast\",\"args\":[\"x\"],\"dtype\":\"i64\"},"
                                 "{\"id\":\"t\",\"op\":\"take\",\"args\":[\"x\",\"k\"],\"axis\":0}", "t"));
    tl_tensor *gx;
    tl_result *r = run1(g, "[1,2]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){-1, -2}, 2);
    expect_values(gx, (double[]){-1, -1}, 2);
    const tl_stats *s = tl_result_stats(r);
    cr_expect_eq(s->ops, 2, "gt and neg only, got %lld ops", (long long)s->ops);
    cr_expect_eq(s->nodes, 3);
    cr_expect_eq(s->nlog, 1);
    cr_expect(!s->log[0].then);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(flow, errors_in_either_branch_stop_the_run_before_it_starts)
{
    /* the else branch (never taken here) cannot reshape: an error before
     * the first op, whichever branch the data takes */
    const char *g1 = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"c\",\"op\":\"gt\",\"args\":[1,0]},"
                     "{\"id\":\"r\",\"op\":\"if\",\"cond\":\"c\",\"then\":{\"nodes\":[],\"result\":\"x\"},"
                     "\"else\":{\"nodes\":[{\"id\":\"t\",\"op\":\"reshape\",\"args\":[\"x\"],\"shape\":[3]}],"
                     "\"result\":\"t\"}}],\"outputs\":\"r\"}";
    cr_expect_str_eq(error_of(g1, "[1,2]"), "t.json: node \"r\" (if): else branch: node \"t\" (reshape): "
                                            "cannot reshape f64[2] (2 elements) to 3 elements");
    /* branches that give different types */
    const char *g2 = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"c\",\"op\":\"gt\",\"args\":[1,0]},"
                     "{\"id\":\"r\",\"op\":\"if\",\"cond\":\"c\",\"then\":{\"nodes\":[],\"result\":\"x\"},"
                     "\"else\":{\"nodes\":[{\"id\":\"t\",\"op\":\"sum\",\"args\":[\"x\"]}],"
                     "\"result\":\"t\"}}],\"outputs\":\"r\"}";
    cr_expect_str_eq(error_of(g2, "[1,2]"), "t.json: node \"r\" (if): the branches give \"r\" different types: "
                                            "f64[2] (then) and f64[] (else)");
    /* an iterate body is checked once, however many steps it would run */
    const char *g3 = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"iterate\","
                     "\"count\":1000000000000,\"init\":[\"x\"],\"state\":[\"s\"],\"body\":{\"nodes\":["
                     "{\"id\":\"q\",\"op\":\"sum\",\"args\":[\"s\"]}],\"result\":[\"q\"]}}],\"outputs\":\"y\"}";
    cr_expect_str_eq(error_of(g3, "[1,2]"), "t.json: node \"y\" (iterate): step 0: state \"s\" changed from "
                                            "f64[2] to f64[]");
}

Test(flow, nan_branch_leaves_gradient_clean)
{
    /* then: log(x) would be NaN for negative x; cond selects else there */
    tl_graph *g = parse(IF_GRAPH("{\"id\":\"s\",\"op\":\"sum\",\"args\":[\"x\"]},{\"id\":\"c\",\"op\":\"gt\",\"args\":[\"s\",0]}",
                                 "{\"id\":\"t\",\"op\":\"log\",\"args\":[\"x\"]}", "t"));
    tl_tensor *gx;
    tl_result *r = run1(g, "[1,4]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){0, log(4)}, 2);
    expect_values(gx, (double[]){1, 0.25}, 2);
    tl_result_free(r);
    tl_tensor_unref(gx);
    r = run1(g, "[-1,-2]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){1, 2}, 2);
    expect_values(gx, (double[]){-1, -1}, 2);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

#define ITER(count) "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[" \
    "{\"id\":\"y\",\"op\":\"iterate\",\"count\":" count ",\"init\":[\"x\"],\"state\":[\"s\"]," \
    "\"body\":{\"nodes\":[{\"id\":\"q\",\"op\":\"mul\",\"args\":[\"s\",\"s\"]}," \
    "{\"id\":\"n\",\"op\":\"add\",\"args\":[\"q\",1]}],\"result\":[\"n\"]}}],\"outputs\":\"y\"}"

Test(flow, iterate_square_plus_one)
{
    tl_graph *g = parse(ITER("3"));
    tl_tensor *gx;
    tl_result *r = run1(g, "[1,2]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){26, 677}, 2);
    expect_values(gx, (double[]){80, 2080}, 2);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
    g = parse(ITER("0"));
    r = run1(g, "[1,2]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){1, 2}, 2);
    expect_values(gx, (double[]){1, 1}, 2);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(flow, many_steps_forward_and_backward, .timeout = 120)
{
    /* y <- y * (1 - 1e-6) + 1e-6 on the same tape; tests/test_cli runs the
     * million steps of the issue with the release build, this sanitized
     * build checks the values of a shorter run */
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                        "{\"id\":\"y\",\"op\":\"iterate\",\"count\":100000,\"init\":[\"x\"],\"state\":[\"s\"],"
                        "\"body\":{\"nodes\":[{\"id\":\"q\",\"op\":\"mul\",\"args\":[\"s\",0.999999]},"
                        "{\"id\":\"n\",\"op\":\"add\",\"args\":[\"q\",1e-6]}],\"result\":\"n\"}}],\"outputs\":\"y\"}");
    tl_tensor *gx;
    tl_result *r = run1(g, "2.0", &gx, NULL);
    /* a scalar loop: one tape entry keeping each step's values (exec/loop.c;
     * test_fuse checks it against the general path bit for bit) */
    cr_expect_eq(tl_result_stats(r)->tape_entries, 1);
    cr_expect_eq(tl_result_stats(r)->loops, 1);
    double y = tl_tensor_get(tl_result_output(r, 0), 0), d = tl_tensor_get(gx, 0);
    double k = pow(0.999999, 1e5); /* y = 1 + (x - 1) k, dy/dx = k */
    cr_expect(fabs(y - (1 + k)) < 1e-9, "y = %.17g", y);
    cr_expect(fabs(d - k) < 1e-9, "dy/dx = %.17g, expected %.17g", d, k);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

#define PIECEWISE "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[" \
    "{\"id\":\"z\",\"op\":\"map\",\"args\":[\"x\"],\"params\":[\"a\"],\"body\":{\"nodes\":[" \
    "{\"id\":\"c\",\"op\":\"eq\",\"args\":[\"a\",0]}," \
    "{\"id\":\"r\",\"op\":\"if\",\"cond\":\"c\",\"then\":{\"nodes\":[],\"result\":\"a\"}," \
    "\"else\":{\"nodes\":[{\"id\":\"m\",\"op\":\"mul\",\"args\":[\"a\",\"a\"]}," \
    "{\"id\":\"d\",\"op\":\"div\",\"args\":[\"m\",\"a\"]},{\"id\":\"n\",\"op\":\"neg\",\"args\":[\"d\"]}]," \
    "\"result\":\"n\"}}],\"result\":\"r\"}}],\"outputs\":\"z\"}"

Test(flow, map_piecewise_without_nan)
{
    tl_graph *g = parse(PIECEWISE);
    tl_tensor *gx;
    tl_result *r = run1(g, "[0,2,-3]", &gx, NULL);
    expect_values(tl_result_output(r, 0), (double[]){0, -2, 3}, 3);
    expect_values(gx, (double[]){1, -1, -1}, 3);
    cr_expect_eq(tl_result_stats(r)->tape_entries, 1, "one tape entry for the whole map");
    tl_tensor_unref(gx);
    tl_result_free(r);
    r = run1(g, "[]", &gx, NULL);
    cr_expect_eq(tl_result_output(r, 0)->numel, 0);
    cr_expect_eq(tl_result_output(r, 0)->ndim, 1);
    cr_expect_eq(gx->numel, 0);
    tl_tensor_unref(gx);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(flow, bad_graphs)
{
    struct {
        const char *json, *input, *want;
    } cases[] = {
        {IF_GRAPH("{\"id\":\"c\",\"op\":\"gt\",\"args\":[\"x\",0]}", "", "x"), "[1,2]",
         "node \"r\" (if): cond must be a scalar (shape []), got f64[2]"},
        {ITER("-1"), "[1]", "\"count\" must be an integer literal from 0 to 2^53 - 1"},
        {ITER("2.5"), "[1]", "\"count\" must be an integer literal from 0 to 2^53 - 1"},
        {ITER("\"x\""), "[1]", "\"count\" must be an integer literal from 0 to 2^53 - 1"},
        {"{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"iterate\",\"count\":2,"
         "\"init\":[\"x\",\"x\"],\"state\":[\"s\"],\"body\":{\"nodes\":[],\"result\":[\"s\"]}}],\"outputs\":\"y\"}",
         "[1]", "1 ids, 2 init values and 1 states must agree"},
        {"{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"iterate\",\"count\":2,"
         "\"init\":[\"x\"],\"state\":[\"s\"],\"body\":{\"nodes\":[{\"id\":\"w\",\"op\":\"concat\",\"args\":[\"s\",\"s\"]}],"
         "\"result\":[\"w\"]}}],\"outputs\":\"y\"}",
         "[1]", "step 0: state \"s\" changed from f64[1] to f64[2]"},
        {"{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"z\",\"op\":\"map\",\"args\":[\"x\"],\"params\":[\"a\"],"
         "\"body\":{\"nodes\":[{\"id\":\"s\",\"op\":\"sum\",\"args\":[\"a\"]}],\"result\":\"s\"}}],\"outputs\":\"z\"}",
         "[1]", "sum is not allowed in a map body"},
        {"{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"z\",\"op\":\"map\",\"args\":[\"x\"],\"params\":[\"a\"],"
         "\"body\":{\"nodes\":[{\"id\":\"s\",\"op\":\"mul\",\"args\":[\"a\",\"x\"]}],\"result\":\"s\"}}],\"outputs\":\"z\"}",
         "[1,2]", "the body reads \"x\", which is f64[2]: a map body may capture scalars only"},
        {"{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"y\",\"op\":\"iterate\",\"count\":1,\"init\":[\"x\"],"
         "\"state\":[\"s\"],\"body\":{\"nodes\":[{\"id\":\"inner\",\"op\":\"neg\",\"args\":[\"s\"]}],\"result\":\"inner\"}},"
         "{\"id\":\"o\",\"op\":\"add\",\"args\":[\"y\",\"inner\"]}],\"outputs\":\"o\"}",
         "[1]", "name \"inner\" is local to another block and not visible here"},
        {"{\"version\":1,\"inputs\":[\"x\"],\"nodes\":[{\"id\":\"o\",\"op\":\"add\",\"args\":[\"x\",\"later\"]},"
         "{\"id\":\"later\",\"op\":\"neg\",\"args\":[\"x\"]}],\"outputs\":\"o\"}",
         "[1]", "node \"o\" (add): unknown name \"later\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *msg = error_of(cases[i].json, cases[i].input);
        cr_expect(strstr(msg, cases[i].want), "case %zu: got \"%s\", want \"%s\"", i, msg, cases[i].want);
    }
}

/* ---------- index tensors ---------- */

Test(index, never_differentiated)
{
    /* y = sum(take(x, k, axis=0)) * sum(one_hot(k, 3)); k is an i64 input
     * listed first, so the element type of the call comes from x (f32) */
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"k\",\"x\"],\"nodes\":["
                        "{\"id\":\"t\",\"op\":\"take\",\"args\":[\"x\",\"k\"],\"axis\":0},"
                        "{\"id\":\"h\",\"op\":\"one_hot\",\"args\":[\"k\"],\"depth\":3},"
                        "{\"id\":\"s\",\"op\":\"sum\",\"args\":[\"t\"]},"
                        "{\"id\":\"c\",\"op\":\"sum\",\"args\":[\"h\"]},"
                        "{\"id\":\"y\",\"op\":\"mul\",\"args\":[\"s\",\"c\"]}],\"outputs\":[\"y\",\"k\"]}");
    tl_status st = {0};
    tl_tensor *in[2] = {lit("i64:[2,1,0,2]"), lit("f32:[1,10,100]")}, *grads[2];
    bool wrt[2] = {true, true}; /* asking for k changes nothing */
    cr_expect_eq(tl_call_dtype(g, in), TL_F32);
    tl_result *r;
    tl_run_opts o = {.record = true, .wrt = wrt};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s", st.msg);
    const tl_tensor *y = tl_result_output(r, 0), *k = tl_result_output(r, 1);
    cr_expect_eq(y->dtype, TL_F32);
    expect_values(y, (double[]){(100 + 10 + 1 + 100) * 4.0}, 1);
    cr_expect_eq(k->dtype, TL_I64);
    cr_assert(!tl_result_backward(r, grads, &st), "%s", st.msg);
    cr_expect_null(grads[0], "an index input has no gradient");
    expect_values(grads[1], (double[]){4, 4, 8}, 3); /* repeated index 2 accumulates */
    tl_tensor_unref(grads[1]);
    for (int i = 0; i < 2; i++)
        tl_tensor_unref(in[i]);
    tl_result_free(r);
    tl_graph_free(g);
}

Test(index, casts_record_nothing_through_integers)
{
    /* k = cast(x, i64) is piecewise constant: x gets an exact zero and the
     * tape holds only the take (w's path) */
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"w\",\"x\"],\"nodes\":["
                        "{\"id\":\"k\",\"op\":\"cast\",\"args\":[\"x\"],\"dtype\":\"i64\"},"
                        "{\"id\":\"y\",\"op\":\"take\",\"args\":[\"w\",\"k\"],\"axis\":0}],\"outputs\":\"y\"}");
    tl_status st = {0};
    tl_tensor *in[2] = {lit("[5,6,7]"), lit("[2.9,-0.5,-1.2]")}, *grads[2];
    tl_result *r;
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, in, &o, &r, &st), "%s", st.msg);
    expect_values(tl_result_output(r, 0), (double[]){7, 5, 7}, 3);
    cr_expect_eq(tl_result_stats(r)->tape_entries, 1);
    cr_assert(!tl_result_backward(r, grads, &st), "%s", st.msg);
    expect_values(grads[0], (double[]){1, 0, 2}, 3);
    expect_values(grads[1], (double[]){0, 0, 0}, 3);
    for (int i = 0; i < 2; i++) {
        tl_tensor_unref(in[i]);
        tl_tensor_unref(grads[i]);
    }
    tl_result_free(r);
    tl_graph_free(g);
}

Test(index, weak_scalar_index_and_errors)
{
    /* a number in an index argument is a 0-d i64 index */
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                        "{\"id\":\"y\",\"op\":\"take\",\"args\":[\"x\",-1],\"axis\":0}],\"outputs\":\"y\"}");
    tl_tensor *grad = NULL;
    tl_result *r = run1(g, "[3,4,5]", &grad, NULL);
    expect_values(tl_result_output(r, 0), (double[]){5}, 1);
    cr_expect_eq(tl_result_output(r, 0)->ndim, 0);
    expect_values(grad, (double[]){0, 0, 1}, 3);
    tl_tensor_unref(grad);
    tl_result_free(r);
    tl_graph_free(g);
    const char *take = "{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                       "{\"id\":\"y\",\"op\":\"take\",\"args\":[\"x\",0.5],\"axis\":0}],\"outputs\":\"y\"}";
    cr_expect(strstr(error_of(take, "[1,2]"), "node \"y\" (take): argument 2: 0.5 is not an integer index"), "%s",
              error_of(take, "[1,2]"));
    const char *arith = "{\"version\":1,\"inputs\":[\"k\"],\"nodes\":["
                        "{\"id\":\"y\",\"op\":\"exp\",\"args\":[\"k\"]}],\"outputs\":\"y\"}";
    cr_expect(strstr(error_of(arith, "i32:[1,2]"), "argument 1 is an index tensor i32[2]: exp takes f32 or f64 "
                                                   "values (cast it first)"), "%s", error_of(arith, "i32:[1,2]"));
    const char *imul = "{\"version\":1,\"inputs\":[\"k\"],\"nodes\":["
                       "{\"id\":\"y\",\"op\":\"mul\",\"args\":[\"k\",2]}],\"outputs\":\"y\"}";
    cr_expect_str_eq(error_of(imul, "i32:[1,2]"), "", "integer arithmetic (nn.md)");
    const char *gather = "{\"version\":1,\"inputs\":[\"k\"],\"nodes\":["
                         "{\"id\":\"y\",\"op\":\"gather\",\"args\":[\"k\",\"k\"],\"axis\":0}],\"outputs\":\"y\"}";
    cr_expect_str_eq(error_of(gather, "i64:[1,0,1]"), "", "gather moves an index tensor");
    cr_expect(strstr(error_of(gather, "i64:[1,0,3]"), "index 3 out of range for axis 0 of i64[3] (indices[2])"), "%s",
              error_of(gather, "i64:[1,0,3]"));
}

/* Under a memory limit the freed blocks kept for reuse count as in use:
 * one is kept only where the limit has room for it beside the live
 * tensors, and a tensor the limit has no room for beside them empties the
 * pool (it held up to 1 GiB past --max-memory). */
Test(memory, kept_blocks_fit_the_limit)
{
    tl_status st = {0};
    tl_tensor_release_cache();
    tl_budget *b = tl_budget_new((int64_t)10 << 20, &st); /* 10 MiB */
    int64_t four[1] = {(int64_t)1 << 19}, two[1] = {(int64_t)1 << 18}; /* f64: 4 MiB, 2 MiB */
    tl_tensor *a = tl_tensor_new_in(b, TL_F64, 1, four, &st), *c = tl_tensor_new_in(b, TL_F64, 1, four, &st);
    cr_assert(a && c, "%s", st.msg);
    tl_tensor_unref(a); /* 4 MiB live: room for it */
    cr_expect_geq(tl_tensor_cached_bytes(), (size_t)4 << 20);
    tl_tensor *d = tl_tensor_new_in(b, TL_F64, 1, two, &st); /* 6 MiB live, 4 kept: 10 */
    cr_assert(d, "%s", st.msg);
    tl_tensor *e = tl_tensor_new_in(b, TL_F64, 1, two, &st); /* 8 MiB live: the kept 4 no longer fit */
    cr_assert(e, "%s", st.msg);
    cr_expect_leq(tl_tensor_cached_bytes() + (size_t)b->live, (size_t)b->limit);
    tl_tensor_unref(c); /* 4 MiB live, 4 freed: kept, 8 in all */
    tl_tensor_unref(d);
    tl_tensor_unref(e);
    cr_expect_leq(tl_tensor_cached_bytes(), (size_t)b->limit);
    tl_budget_unref(b);
    /* with no limit the pool keeps them as before */
    tl_tensor *f = tl_tensor_new(TL_F64, 1, four, &st);
    cr_assert(f, "%s", st.msg);
    size_t before = tl_tensor_cached_bytes();
    tl_tensor_unref(f);
    cr_expect_geq(tl_tensor_cached_bytes(), before);
    tl_tensor_release_cache();
}

/* A take's gradient is added in place where the rows it took land
 * (tape.c: take_into) when the indices are distinct and the gradient
 * held so far is the slot's alone; elsewhere the rule's take_grad and an
 * add.  Both give the same bits: here the held gradient has -0 in every
 * place (mul by a constant -0, run after the takes so its rule comes
 * first), which the add of take_grad's zeros turns into +0 where no row
 * landed.  check_finite keeps to the rule and the add. */
static void take_into_case(const char *x)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],"
                        "\"consts\":{\"c\":{\"shape\":[4,3],\"fill\":-0.0},"
                        "\"gi\":{\"dtype\":\"i64\",\"shape\":[1,3],\"data\":[3,0,-1]}},\"nodes\":["
                        "{\"id\":\"t1\",\"op\":\"take\",\"args\":[\"x\"],\"indices\":[2,0],\"axis\":0},"
                        "{\"id\":\"t2\",\"op\":\"take\",\"args\":[\"x\"],\"indices\":[1,1],\"axis\":0},"
                        "{\"id\":\"t3\",\"op\":\"take\",\"args\":[\"x\",-1],\"axis\":1},"
                        "{\"id\":\"t4\",\"op\":\"take\",\"args\":[\"x\",-2],\"axis\":0},"
                        "{\"id\":\"t5\",\"op\":\"gather\",\"args\":[\"x\",\"gi\"],\"axis\":0},"
                        "{\"id\":\"m\",\"op\":\"mul\",\"args\":[\"x\",\"c\"]}],"
                        "\"outputs\":[\"t1\",\"t2\",\"t3\",\"t4\",\"t5\",\"m\"]}");
    tl_tensor *grad[2][1];
    for (int pass = 0; pass < 2; pass++) {
        tl_status st = {0};
        tl_tensor *in = lit(x);
        tl_result *r;
        tl_run_opts o = {.record = true, .check_finite = pass == 1};
        cr_assert(!tl_run(g, &in, &o, &r, &st), "%s", st.msg);
        cr_assert(!tl_result_backward(r, grad[pass], &st), "%s", st.msg);
        tl_result_free(r);
        tl_tensor_unref(in);
    }
    const tl_tensor *a = grad[0][0], *b = grad[1][0];
    cr_assert_eq(a->numel, 12);
    cr_expect(!memcmp(a->data, b->data, (size_t)a->numel * tl_dtype_size(a->dtype)), "in place and the rule differ");
    /* rows 0 and 2 taken once, row 1 twice (t2), row 2 once more (t4: -2), column 2 by t3; t5 gathers
     * [3,0], [0,1] and [3,2] */
    double want[12] = {1, 2, 2, 2, 2, 3, 2, 2, 3, 1, 0, 2};
    for (int i = 0; i < 12; i++) {
        double v = tl_tensor_get(a, i);
        cr_expect(v == want[i] && !signbit(v), "[%d]: %g, expected %g", i, v, want[i]);
    }
    tl_tensor_unref(grad[0][0]);
    tl_tensor_unref(grad[1][0]);
    tl_graph_free(g);
}

Test(index, take_gradient_in_place_same_bits)
{
    take_into_case("f32:[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]");
    take_into_case("[[1,2,3],[4,5,6],[7,8,9],[10,11,12]]");
}

/* A signalling NaN in the gradient held (a seed passed on by reshape's
 * rule) where no row lands: acc + 0 quiets it, and so does the pass the
 * in-place add makes first; a -0 there becomes +0. */
Test(index, take_gradient_in_place_quiets_nan)
{
    tl_graph *g = parse("{\"version\":1,\"inputs\":[\"x\"],\"nodes\":["
                        "{\"id\":\"t\",\"op\":\"take\",\"args\":[\"x\"],\"indices\":[0],\"axis\":0},"
                        "{\"id\":\"r\",\"op\":\"reshape\",\"args\":[\"x\"],\"shape\":[2,2]}],"
                        "\"outputs\":[\"t\",\"r\"]}");
    tl_status st = {0};
    tl_tensor *in = lit("f32:[[1,2],[3,4]]"), *seeds[2] = {lit("f32:[[1,1]]"), lit("f32:[[3,-0.0],[0,-0.0]]")};
    uint32_t snan = 0x7f800001u;
    memcpy((float *)seeds[1]->data + 2, &snan, 4);
    tl_result *r;
    tl_tensor *grad[1];
    tl_run_opts o = {.record = true};
    cr_assert(!tl_run(g, &in, &o, &r, &st), "%s", st.msg);
    cr_assert(!tl_result_pullback(r, seeds, grad, &st), "%s", st.msg);
    uint32_t bits[4];
    memcpy(bits, grad[0]->data, sizeof bits);
    cr_expect_eq(bits[0], 0x40800000u); /* 3 + (0 + 1) = 4 */
    cr_expect_eq(bits[1], 0x3f800000u); /* -0 + (0 + 1) = 1 */
    cr_expect_eq(bits[2], 0x7fc00001u, "%08x", bits[2]); /* sNaN + 0: quieted, its payload kept */
    cr_expect_eq(bits[3], 0u, "%08x", bits[3]);          /* -0 + 0 = +0 */
    tl_tensor_unref(grad[0]);
    tl_tensor_unref(seeds[0]);
    tl_tensor_unref(seeds[1]);
    tl_tensor_unref(in);
    tl_result_free(r);
    tl_graph_free(g);
}

/* A step's stacked output: acc' = scatter_add(acc, [i], x[i]^2), the state
 * read last by the scatter_add, which then adds into it in place
 * (eval.c: over_first); in the second graph the step reads acc again
 * after it (sum(acc), added to the next state), so the scatter_add must
 * leave it as it was.  Values and gradients against the sums by hand. */
#define STACKED(EXTRA, RESULT)                                                                             \
    "{\"version\":1,\"inputs\":[\"x\"],\"consts\":{\"z\":{\"shape\":[4],\"fill\":0},"                      \
    "\"tbl\":{\"dtype\":\"i64\",\"shape\":[4,1],\"data\":[0,1,2,3]}},\"nodes\":["                          \
    "{\"id\":\"y\",\"op\":\"iterate\",\"count\":4,\"init\":[\"z\"],\"state\":[\"acc\"],\"index\":\"i\","   \
    "\"body\":{\"nodes\":[{\"id\":\"k\",\"op\":\"take\",\"args\":[\"tbl\",\"i\"],\"axis\":0},"             \
    "{\"id\":\"e\",\"op\":\"take\",\"args\":[\"x\",\"k\"],\"axis\":0},"                                    \
    "{\"id\":\"row\",\"op\":\"mul\",\"args\":[\"e\",\"e\"]},"                                              \
    "{\"id\":\"nxt\",\"op\":\"scatter_add\",\"args\":[\"acc\",\"k\",\"row\"],\"axis\":0}" EXTRA "],"       \
    "\"result\":[\"" RESULT "\"]}}],\"outputs\":\"y\"}"

Test(flow, stacked_output_in_place)
{
    const char *graphs[2] = {STACKED("", "nxt"),
                             STACKED(",{\"id\":\"u\",\"op\":\"sum\",\"args\":[\"acc\"]},"
                                     "{\"id\":\"w\",\"op\":\"add\",\"args\":[\"nxt\",\"u\"]}",
                                     "w")};
    /* the second: acc1 = [1,0,0,0], acc2 = [1,4,0,0] + 1, acc3 = [2,5,10,1] + 9, acc4 = [11,14,19,26] + 54 */
    double want[2][4] = {{1, 4, 9, 16}, {65, 68, 73, 80}};
    for (int gi = 0; gi < 2; gi++)
        for (int d = 0; d < 2; d++) {
            tl_graph *g = parse(graphs[gi]);
            tl_tensor *grad = NULL;
            tl_result *r = run1(g, d ? "[1,2,3,4]" : "f32:[1,2,3,4]", gi ? NULL : &grad, NULL);
            expect_values(tl_result_output(r, 0), want[gi], 4);
            if (grad)
                expect_values(grad, (double[]){2, 4, 6, 8}, 4);
            tl_tensor_unref(grad);
            tl_result_free(r);
            tl_graph_free(g);
        }
}

/* The same for the recording pullback (record.c), whose in-place take
 * still records take_grad and the add: its gradient, and the Hessian-
 * vector product pulled back through it, with and without the in-place
 * path (check_finite keeps to the rules), bit for bit; and the gradient
 * equal to the plain pass's. */
/* cols columns: 3 (every tensor kept whole on the tape, so only one
 * take adds in place) or 200 (past the tape's 4096 bytes: every one of
 * distinct indices does; t6's, pulled back last, a constant seed added
 * into a gradient that is a variable) */
static void take_into_recorded_case(int cols, tl_tensor **hv_out)
{
    char json[2048];
    snprintf(json, sizeof json,
             "{\"version\":1,\"inputs\":[\"x\"],"
             "\"consts\":{\"c\":{\"shape\":[4,%d],\"fill\":-0.0},"
             "\"gi\":{\"dtype\":\"i64\",\"shape\":[1,%d],\"fill\":3}},\"nodes\":["
             "{\"id\":\"t6\",\"op\":\"take\",\"args\":[\"x\"],\"indices\":[1],\"axis\":0},"
             "{\"id\":\"t1\",\"op\":\"take\",\"args\":[\"x\"],\"indices\":[2,0],\"axis\":0},"
             "{\"id\":\"q1\",\"op\":\"mul\",\"args\":[\"t1\",\"t1\"]},"
             "{\"id\":\"t2\",\"op\":\"take\",\"args\":[\"x\"],\"indices\":[1,1],\"axis\":0},"
             "{\"id\":\"t3\",\"op\":\"take\",\"args\":[\"x\",-1],\"axis\":1},"
             "{\"id\":\"q3\",\"op\":\"mul\",\"args\":[\"t3\",\"t3\"]},"
             "{\"id\":\"t5\",\"op\":\"gather\",\"args\":[\"x\",\"gi\"],\"axis\":0},"
             "{\"id\":\"q5\",\"op\":\"mul\",\"args\":[\"t5\",\"t5\"]},"
             "{\"id\":\"m\",\"op\":\"mul\",\"args\":[\"x\",\"c\"]}],"
             "\"outputs\":[\"q1\",\"t2\",\"q3\",\"q5\",\"m\",\"t6\"]}", cols, cols);
    tl_graph *g = parse(json);
    tl_status st = {0};
    int64_t shape[2] = {4, cols};
    tl_tensor *grad[3][1], *hv[2][1];
    for (int pass = 0; pass < 3; pass++) {
        tl_tensor *in = tl_tensor_new(TL_F64, 2, shape, &st), *cot = tl_tensor_new(TL_F64, 2, shape, &st);
        cr_assert(in && cot, "%s", st.msg);
        for (int64_t i = 0; i < in->numel; i++) {
            tl_tensor_set(in, i, (double)(i % 13) - 4.5);
            tl_tensor_set(cot, i, (double)(i % 7) * 0.5 - 1);
        }
        tl_result *r;
        tl_run_opts o = {.record = true, .twice = pass < 2, .check_finite = pass == 1};
        cr_assert(!tl_run(g, &in, &o, &r, &st), "%s", st.msg);
        if (pass < 2) {
            cr_assert(!tl_result_pullback_recorded(r, NULL, false, grad[pass], &st), "%s", st.msg);
            cr_assert(!tl_result_pullback_again(r, &cot, hv[pass], NULL, &st), "%s", st.msg);
        } else {
            cr_assert(!tl_result_backward(r, grad[pass], &st), "%s", st.msg);
        }
        tl_result_free(r);
        tl_tensor_unref(in);
        tl_tensor_unref(cot);
    }
    for (int p = 1; p < 3; p++)
        cr_expect(!memcmp(grad[0][0]->data, grad[p][0]->data, tl_tensor_bytes(grad[0][0])), "%d columns: "
                  "gradients differ (%d)", cols, p);
    cr_expect(!memcmp(hv[0][0]->data, hv[1][0]->data, tl_tensor_bytes(hv[0][0])), "%d columns: Hessian-vector "
              "products differ", cols);
    for (int p = 0; p < 3; p++)
        tl_tensor_unref(grad[p][0]);
    tl_tensor_unref(hv[1][0]);
    *hv_out = hv[0][0];
    tl_graph_free(g);
}

/* The same for the recording pullback (record.c), whose in-place take
 * still records take_grad and the add: its gradient, and the Hessian-
 * vector product pulled back through it, with and without the in-place
 * path (check_finite keeps to the rules), bit for bit; and the gradient
 * equal to the plain pass's. */
Test(index, take_gradient_in_place_recorded)
{
    for (int cols = 3; cols <= 200; cols += 197) {
        tl_tensor *hv;
        take_into_recorded_case(cols, &hv);
        /* d/dx of <cot, grad>: 2 cot on rows 0 and 2 (q1) and 3 (q5), on the last column (q3): twice at
         * [0,-1], [2,-1] and [3,-1] */
        for (int64_t i = 0; i < hv->numel; i++) {
            int64_t r = i / cols, c = i % cols;
            double cot = (double)(i % 7) * 0.5 - 1;
            double want = 2 * cot * ((r == 0 || r == 2 || r == 3) + (c == cols - 1));
            cr_expect(tl_tensor_get(hv, i) == want, "%d columns, [%lld]: %g, expected %g", cols, (long long)i,
                      tl_tensor_get(hv, i), want);
        }
        tl_tensor_unref(hv);
    }
}
