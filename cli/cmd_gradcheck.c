/* tl gradcheck: the tape's vector-Jacobian product against central
 * differences, element by element, with branch boundaries and kinks named
 * (exec/gradcheck.h).  Exit 0 when every element compared matches, 1 on
 * any mismatch, 2 on bad input, 3 on a runtime failure. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "exec/gradcheck.h"
#include "formats/results.h"
#include "formats/text.h"
#include "graph/onnx.h"

typedef struct gc_cmd {
    cli_run_args run; /* GRAPH, inputs, seeds, --wrt, --format, -q */
    tl_gradcheck_opts o;
    bool f64;         /* --f64: check the f64 copy of the recipe */
    char **rest;      /* the arguments handed to the shared parser */
    int nrest;
} gc_cmd;

static int own_option(int argc, char **argv, int *i, gc_cmd *c)
{
    const char *a = argv[*i], *v;
    char *end;
    if (cli_is_opt(a, NULL, "--eps")) {
        errno = 0;
        v = cli_opt_value(argc, argv, i, a, "--eps");
        c->o.eps = v ? strtod(v, &end) : 0;
        if (!v || !*v || *end || errno || !(c->o.eps > 0) || isinf(c->o.eps))
            return cli_usage("--eps takes a number > 0, such as 1e-6");
        return 0;
    }
    if (cli_is_opt(a, NULL, "--order")) {
        v = cli_opt_value(argc, argv, i, a, "--order");
        if (!v || (strcmp(v, "1") && strcmp(v, "2")))
            return cli_usage("--order takes 1 (gradients) or 2 (Hessian-vector products)");
        c->o.order = v[0] - '0';
        return 0;
    }
    errno = 0;
    v = cli_opt_value(argc, argv, i, a, "--samples");
    long long n = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || n < 1)
        return cli_usage("--samples takes a whole number >= 1");
    c->o.samples = n;
    return 0;
}

static int parse(int argc, char **argv, gc_cmd *c)
{
    tl_compare_opts tol = {0};
    if (!(c->rest = calloc((size_t)argc + 1, sizeof *c->rest)))
        return cli_usage("out of memory");
    c->rest[c->nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = -1;
        if (!strcmp(a, "--f64"))
            rc = 0, c->f64 = true;
        else if (cli_is_opt(a, NULL, "--eps") || cli_is_opt(a, NULL, "--samples") || cli_is_opt(a, NULL, "--order"))
            rc = own_option(argc, argv, &i, c);
        else
            rc = cli_compare_option(argc, argv, &i, &tol); /* --rtol, --atol */
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        c->rest[c->nrest++] = argv[i];
        if (cli_value_follows(a) && i + 1 < argc)
            c->rest[c->nrest++] = argv[++i];
    }
    tl_status st = {0};
    if (tl_compare_check_opts(&tol, &st))
        return cli_fail(&st);
    c->o.rtol = tol.rtol_set ? tol.rtol : c->o.rtol;
    c->o.atol = tol.atol_set ? tol.atol : c->o.atol;
    c->run.grad = true;
    return cli_parse_run_args(c->nrest, c->rest, &c->run);
}

/* ---------- progress ---------- */

/* Notes how far the check got for the progress line (cli_progress); called
 * by one worker at a time. */
static void on_progress(void *ctx, int64_t done, int64_t total)
{
    cli_progress_note(ctx, "gradcheck", "elements", done, total);
}

/* ---------- the text report ---------- */

static const char *skip_text(tl_gradcheck_skip s, bool json)
{
    if (s == TL_GC_SKIP_INDEX)
        return json ? "index" : "an index tensor, never differentiated";
    if (s == TL_GC_SKIP_BOOL)
        return json ? "bool" : "bool in the model, never differentiated";
    return json ? "wrt" : "not in --wrt";
}

static char *num(char *buf, double v)
{
    tl_fmt_f64(buf, TL_FMT_LEN, v);
    return buf;
}

static char *index_text(const tl_gradcheck_input *e, int64_t i, char *buf, size_t len)
{
    tl_tensor t = {.ndim = e->ndim};
    memcpy(t.shape, e->shape, sizeof(int64_t) * (size_t)e->ndim);
    return tl_index_desc(&t, i, buf, len);
}

/* For a node a program made (a name of its own, "_1_9"): its place in
 * the program's text; NULL for any other. */
static const tl_srcpos *site_pos(const tl_graph *g, const tl_node *x)
{
    const tl_srcpos *pos = g->slot_pos && x->nout && x->name[0] == '_' ? &g->slot_pos[x->out[0]] : NULL;
    return pos && pos->line ? pos : NULL;
}

/* Each site's node: its name, or for a node a program made its place in
 * the program's text (FILE:LINE:COL). */
static void text_sites(const tl_graph *g, const tl_gradcheck_input *e, const tl_gradcheck_site *s, int64_t n,
                       const char *where)
{
    char at[TL_MAXDIM * 24];
    if (!n)
        return;
    printf("  %lld on a %s:", (long long)n, where);
    for (int64_t i = 0; i < n && i < TL_GC_SITES; i++) {
        const tl_node *x = s[i].node;
        const tl_srcpos *pos = site_pos(g, x);
        printf("%s %s at ", i ? "," : "", index_text(e, s[i].index, at, sizeof at));
        if (pos) {
            cli_print_escaped(stdout, g->path);
            printf(":%d:%d", pos->line, pos->col);
        } else {
            putchar('"');
            cli_print_escaped(stdout, x->name);
            putchar('"');
        }
        printf(" (%s)", tl_ops[x->op].name);
    }
    puts(n > TL_GC_SITES ? ", ..." : "");
}

/* Order 2: which gradient component the worst difference is in. */
static void text_of(const tl_gradcheck_report *r, const tl_gradcheck_input *e)
{
    char at[TL_MAXDIM * 24];
    if (r->order != 2)
        return;
    const tl_gradcheck_input *o = &r->inputs[e->worst_of];
    printf(" (of grad/");
    cli_print_escaped(stdout, o->name);
    printf("%s)", index_text(o, e->worst_of_index, at, sizeof at));
}

static void text_input(const tl_graph *g, const tl_gradcheck_report *r, const tl_gradcheck_input *e, bool cast)
{
    char d[96], at[TL_MAXDIM * 24], a[TL_FMT_LEN], b[TL_FMT_LEN];
    cli_print_escaped(stdout, e->name);
    printf(": %s%s: ", tl_shape_desc(e->dtype, e->ndim, e->shape, d, sizeof d), cast ? " (cast from f32)" : "");
    if (e->skip) {
        printf("skipped (%s)\n", skip_text(e->skip, false));
        return;
    }
    printf("%lld", (long long)e->checked);
    if (e->checked < e->numel)
        printf(" of %lld", (long long)e->numel);
    if (e->worst < 0) {
        puts(" checked, none compared");
    } else {
        if (e->mismatches)
            printf(" checked, %lld MISMATCHED", (long long)e->mismatches);
        else
            printf(" checked, all match");
        printf(" (max abs %.3g, max rel %.3g)\n", e->max_abs, e->max_rel);
        printf("  worst %s: tape %s, fd %s", index_text(e, e->worst, at, sizeof at),
               num(a, e->worst_tape), num(b, e->worst_fd));
        text_of(r, e);
        printf("\n");
    }
    text_sites(g, e, e->kink, e->nkink, "kink");
    text_sites(g, e, e->boundary, e->nboundary, "branch boundary");
}

/* What --f64 did: cast[k] for each input cast up from f32; NULL: no --f64. */
static void text_report(const tl_graph *g, const tl_gradcheck_report *r, const bool *cast)
{
    char a[TL_FMT_LEN], b[TL_FMT_LEN], c[TL_FMT_LEN];
    if (cast) {
        int n = 0;
        for (int k = 0; k < r->ninputs; k++)
            n += cast[k];
        printf("gradcheck: an f64 copy of the recipe (--f64), %d input%s cast from f32\n", n, n == 1 ? "" : "s");
    }
    for (int k = 0; k < r->ninputs; k++)
        text_input(g, r, &r->inputs[k], cast && cast[k]);
    const char *what = r->order == 2 ? "gradcheck --order 2" : "gradcheck";
    if (r->mismatches)
        printf("%s: %lld of %lld MISMATCHED", what, (long long)r->mismatches, (long long)r->checked);
    else
        printf("%s: ok: %lld checked", what, (long long)r->checked);
    if (r->nkink)
        printf(", %lld on a kink", (long long)r->nkink);
    if (r->nboundary)
        printf(", %lld on a branch boundary", (long long)r->nboundary);
    printf(" (eps %s, rtol %s, atol %s)\n", num(a, r->eps), num(b, r->rtol), num(c, r->atol));
}

/* ---------- the json report ---------- */

static void json_num(double v)
{
    char buf[TL_FMT_LEN];
    num(buf, v);
    printf(isnan(v) || isinf(v) ? "\"%s\"" : "%s", buf);
}

/* Each site: its node's name and, for a node a program made, "at" its
 * place in the text ("FILE:LINE:COL", as the text report names it). */
static void json_sites(const tl_graph *g, const tl_gradcheck_input *e, const char *key,
                       const tl_gradcheck_site *s, int64_t n)
{
    char at[TL_MAXDIM * 24];
    printf(", \"%s\": [", key);
    for (int64_t i = 0; i < n && i < TL_GC_SITES; i++) {
        const tl_srcpos *pos = site_pos(g, s[i].node);
        printf("%s{\"index\": %s, \"node\": ", i ? ", " : "", index_text(e, s[i].index, at, sizeof at));
        tl_json_write_string(stdout, s[i].node->name);
        if (pos) {
            char place[4096 + 32];
            snprintf(place, sizeof place, "%s:%d:%d", g->path, pos->line, pos->col);
            printf(", \"at\": ");
            tl_json_write_string(stdout, place);
        }
        printf(", \"op\": \"%s\", \"tape\": ", tl_ops[s[i].node->op].name);
        json_num(s[i].tape);
        printf(", \"fd\": ");
        json_num(s[i].fd);
        printf("}");
    }
    printf("]");
}

static void json_input(const tl_graph *g, const tl_gradcheck_report *r, const tl_gradcheck_input *e, bool cast)
{
    char at[TL_MAXDIM * 24];
    printf("{\"name\": ");
    tl_json_write_string(stdout, e->name);
    printf(", \"dtype\": \"%s\", \"cast_from\": %s, \"shape\": [", tl_dtype_name(e->dtype),
           cast ? "\"f32\"" : "null");
    for (int d = 0; d < e->ndim; d++)
        printf(d ? ", %lld" : "%lld", (long long)e->shape[d]);
    printf("], \"skipped\": ");
    if (e->skip)
        tl_json_write_string(stdout, skip_text(e->skip, true));
    else
        printf("null");
    printf(", \"elements\": %lld, \"checked\": %lld, \"mismatches\": %lld", (long long)e->numel,
           (long long)e->checked, (long long)e->mismatches);
    bool w = e->worst >= 0;
    printf(", \"max_abs_error\": ");
    w ? json_num(e->max_abs) : (void)printf("null");
    printf(", \"max_rel_error\": ");
    w ? json_num(e->max_rel) : (void)printf("null");
    printf(", \"worst_index\": %s, \"tape\": ", w ? index_text(e, e->worst, at, sizeof at) : "null");
    w ? json_num(e->worst_tape) : (void)printf("null");
    printf(", \"fd\": ");
    w ? json_num(e->worst_fd) : (void)printf("null");
    if (r->order == 2 && w) {
        const tl_gradcheck_input *o = &r->inputs[e->worst_of];
        printf(", \"worst_of\": {\"input\": ");
        tl_json_write_string(stdout, o->name);
        printf(", \"index\": %s}", index_text(o, e->worst_of_index, at, sizeof at));
    } else if (r->order == 2) {
        printf(", \"worst_of\": null");
    }
    printf(", \"kink\": %lld, \"boundary\": %lld", (long long)e->nkink, (long long)e->nboundary);
    json_sites(g, e, "kink_elements", e->kink, e->nkink);
    json_sites(g, e, "boundary_elements", e->boundary, e->nboundary);
    printf("}");
}

static void json_report(const tl_graph *g, const tl_gradcheck_report *r, const bool *cast)
{
    printf("{\"passed\": %s, \"device\": \"cpu\", \"f64_copy\": %s, ", r->mismatches ? "false" : "true",
           cast ? "true" : "false");
    if (r->order == 2) /* order 1's report is as it always was */
        printf("\"order\": 2, ");
    printf("\"eps\": ");
    json_num(r->eps);
    printf(", \"rtol\": ");
    json_num(r->rtol);
    printf(", \"atol\": ");
    json_num(r->atol);
    printf(r->samples ? ", \"samples\": %lld" : ", \"samples\": null", (long long)r->samples);
    printf(", \"checked\": %lld, \"mismatches\": %lld, \"kink\": %lld, \"boundary\": %lld, \"inputs\": [",
           (long long)r->checked, (long long)r->mismatches, (long long)r->nkink, (long long)r->nboundary);
    for (int k = 0; k < r->ninputs; k++) {
        printf(k ? ", " : "");
        json_input(g, r, &r->inputs[k], cast && cast[k]);
    }
    printf("]}\n");
}

/* ---------- the command ---------- */

typedef struct gc_state {
    tl_graph *g;
    tl_tensor **in, **seeds;
    bool *wrt;
    bool *cast; /* --f64: the inputs cast from f32 */
    int nseeds;
    tl_gradcheck *gc;
    tl_gradcheck_report *r;
    struct tl_onnx_model *model; /* an ONNX model: g is its signature until the inputs are bound */
} gc_state;

static void release(gc_state *s)
{
    for (int k = 0; s->in && k < s->g->ninputs; k++)
        tl_tensor_unref(s->in[k]);
    for (int i = 0; s->seeds && i < s->nseeds; i++)
        tl_tensor_unref(s->seeds[i]);
    tl_gradcheck_free_report(s->r);
    tl_gradcheck_end(s->gc);
    tl_graph_free(s->g);
    cli_model_close(s->model);
    free(s->in);
    free(s->seeds);
    free(s->wrt);
    free(s->cast);
}

/* --f64: the recipe and every f32 tensor given to it, inputs and seeds,
 * cast up (cast[k]: input k was); the cast reads each value exactly. */
static int cast_up(tl_tensor **ts, int n, bool *cast, tl_status *st)
{
    for (int k = 0; k < n; k++) {
        if (!ts[k] || ts[k]->dtype != TL_F32)
            continue;
        tl_tensor *d = tl_tensor_f64(ts[k], st);
        if (!d)
            return cli_fail(st);
        tl_tensor_unref(ts[k]);
        ts[k] = d;
        if (cast)
            cast[k] = true;
    }
    return 0;
}

/* The refusal of an f32 graph names the way to check it anyway. */
static int refused(const gc_cmd *c, gc_state *s, tl_status *st)
{
    bool declared = strstr(st->msg, "expected dtype f32") != NULL; /* an f32 input given in f64 */
    if (!declared)
        cli_literal_hint(&c->run, s->in, s->g, st); /* "write f32:" would only be refused next */
    size_t k = strlen(st->msg);
    if (!c->f64 && (declared || strstr(st->msg, "gradcheck needs f64")))
        snprintf(st->msg + k, sizeof st->msg - k, declared ? "; give --f64 to check an f64 copy of the recipe"
                 : "; or give --f64 to check an f64 copy of the recipe, the inputs cast up");
    return cli_fail_in(s->g, st);
}

/* The check itself, once the graph is loaded; fills s->r. */
static int check(gc_cmd *c, gc_state *s, tl_status *st)
{
    int ni = s->g->ninputs, rc;
    s->in = calloc((size_t)ni + 1, sizeof *s->in);
    s->wrt = calloc((size_t)ni + 1, sizeof *s->wrt);
    s->cast = calloc((size_t)ni + 1, sizeof *s->cast);
    if (!s->in || !s->wrt || !s->cast)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    /* a model's recipe comes from the inputs bound (their shapes), and its
     * f64 copy from that recipe */
    if (!s->model && c->f64 && tl_graph_to_f64(s->g, st))
        return cli_fail_in(s->g, st);
    if ((rc = cli_bind_inputs(&c->run, s->g, s->in, st)) ||
        (s->model && (rc = cli_model_translate(&c->run, s->model, &s->g, s->in, st))))
        return rc;
    if (s->model && c->f64 && tl_graph_to_f64(s->g, st))
        return cli_fail_in(s->g, st);
    if ((c->f64 && (rc = cast_up(s->in, ni, s->cast, st))) || (rc = cli_parse_wrt(&c->run, s->g, s->in, s->wrt, st)))
        return rc;
    int nfloat = 0; /* a check of nothing is no check: say so rather than pass */
    for (int k = 0; k < ni; k++)
        nfloat += s->wrt[k] && !tl_dtype_is_int(s->in[k]->dtype);
    if (!nfloat && ni)
        return tl_fail(st, TL_EINPUT, "nothing to check: input \"%s\" is an index tensor (%s), never "
                       "differentiated%s", s->g->inputs[0].name, tl_dtype_name(s->in[0]->dtype),
                       ni > 1 ? ", and so is every other input" : ""), cli_fail_in(s->g, st);
    if (!ni)
        return tl_fail(st, TL_EINPUT, "nothing to check: the graph has no inputs"), cli_fail_in(s->g, st);
    int64_t elems = 0; /* and float inputs with no elements (f64[0,3]) are nothing either */
    for (int k = 0; k < ni; k++)
        elems += s->wrt[k] && !tl_dtype_is_int(s->in[k]->dtype) ? s->in[k]->numel : 0;
    if (!elems)
        return tl_fail(st, TL_EINPUT, "nothing to check: the inputs differentiated have no elements"),
               cli_fail_in(s->g, st);
    cli_progress p;
    bool tty = isatty(2) && !c->run.quiet;
    double t0 = cli_now_ms();
    c->o.wrt = s->wrt;
    if (tty) {
        c->o.progress = on_progress;
        c->o.progress_ctx = &p;
    }
    cli_progress_start(&p, tty, t0, "gradcheck");
    tl_code failed = tl_gradcheck_begin(s->g, s->in, &c->o, &s->gc, st); /* the run and its tape */
    cli_progress_end(&p);
    if (failed)
        return refused(c, s, st);
    s->nseeds = tl_result_noutputs(tl_gradcheck_base(s->gc));
    if (!(s->seeds = calloc((size_t)s->nseeds + 1, sizeof *s->seeds)))
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    if ((rc = cli_read_seeds(&c->run, tl_gradcheck_base(s->gc), s->seeds, st)) ||
        (c->f64 && (rc = cast_up(s->seeds, s->nseeds, NULL, st))))
        return rc;
    cli_progress_start(&p, tty, t0, "gradcheck"); /* the same line, once the seeds are read */
    failed = tl_gradcheck_run(s->gc, s->seeds, &s->r, st);
    cli_progress_end(&p);
    return failed ? cli_fail_in(s->g, st) : 0;
}

int cmd_gradcheck(int argc, char **argv)
{
    gc_cmd c = {0};
    tl_gradcheck_defaults(&c.o);
    gc_state s = {0};
    tl_status st = {0};
    int rc = parse(argc, argv, &c);
    if (!rc)
        rc = cli_env_ok();
    tl_graph_options go = {c.run.outside};
    if (!rc && !(s.g = tl_onnx_is_model(c.run.graph) ? cli_model_open(&c.run, &s.model, &st)
                                                     : cli_load_graph(c.run.graph, &go, &st)))
        rc = cli_fail(&st);
    if (!rc)
        rc = check(&c, &s, &st);
    for (int k = 0; !rc && k < s.r->ninputs; k++) /* left out of wrt as a model's bool input */
        if (s.r->inputs[k].skip == TL_GC_SKIP_WRT && tl_onnx_input_is_bool(c.run.model, k))
            s.r->inputs[k].skip = TL_GC_SKIP_BOOL;
    if (!rc) {
        const bool *cast = c.f64 ? s.cast : NULL;
        c.run.json ? json_report(s.g, s.r, cast) : text_report(s.g, s.r, cast);
        rc = cli_finish_stdout();
        rc = rc ? rc : s.r->mismatches ? TL_EDIFF : 0;
    }
    release(&s);
    cli_run_args_free(&c.run);
    free(c.rest);
    cli_stdin_release();
    return rc;
}
