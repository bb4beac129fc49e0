/* tl run and tl grad: load the graph and tensors, run (recording a tape
 * for grad), pull back the seeds, and write the results. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "formats/npz.h"

typedef struct cmd {
    bool grad;
    const char *graph;
    char *inline_graph; /* -e TEXT */
    const char *output, *device, *wrt, *max_memory;
    bool json, full, strict, verbose, quiet, outside;
    int nbind, nseed, nnpz;
    const char **npz; /* -i FILE.npz, in order */
    const char **bind; /* NAME=TENSOR */
    const char **seed; /* [OUT=]TENSOR */
} cmd;

static int parse(int argc, char **argv, cmd *c)
{
    static const struct {
        const char *s, *l;
        size_t off;
    } valued[] = {
        {"-o", "--output", offsetof(cmd, output)}, {"-d", "--device", offsetof(cmd, device)},
        {NULL, "--wrt", offsetof(cmd, wrt)}, {NULL, "--max-memory", offsetof(cmd, max_memory)},
    };
    c->bind = calloc((size_t)argc, sizeof *c->bind);
    c->seed = calloc((size_t)argc, sizeof *c->seed);
    c->npz = calloc((size_t)argc, sizeof *c->npz);
    if (!c->bind || !c->seed || !c->npz)
        return cli_usage("out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool done = false;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !done; k++) {
            if (!cli_is_opt(a, valued[k].s, valued[k].l))
                continue;
            const char *v = cli_opt_value(argc, argv, &i, a, valued[k].l);
            if (!v)
                return cli_usage("%s needs a value", a);
            *(const char **)((char *)c + valued[k].off) = v;
            done = true;
        }
        if (done)
            continue;
        if (cli_is_opt(a, "-i", "--inputs")) {
            const char *v = cli_opt_value(argc, argv, &i, a, "--inputs");
            if (!v)
                return cli_usage("%s needs a .npz file", a);
            c->npz[c->nnpz++] = v;
        } else if (cli_is_opt(a, NULL, "--seed")) {
            const char *v = cli_opt_value(argc, argv, &i, a, "--seed");
            if (!v)
                return cli_usage("--seed needs a tensor");
            c->seed[c->nseed++] = v;
        } else if (!strcmp(a, "-e")) {
            if (i + 1 == argc || c->inline_graph)
                return cli_usage(c->inline_graph ? "-e given twice" : "-e needs a program");
            if (c->graph && !strchr(c->graph, '='))
                return cli_usage("both a GRAPH (%s) and -e given", c->graph);
            if (c->graph) /* what came before -e was a binding */
                c->bind[c->nbind++] = c->graph;
            if (!(c->graph = c->inline_graph = cli_inline_graph(argv[++i])))
                return cli_usage("out of memory");
        } else if (cli_is_opt(a, NULL, "--format")) {
            const char *v = cli_opt_value(argc, argv, &i, a, "--format");
            if (!v || (strcmp(v, "text") && strcmp(v, "json")))
                return cli_usage("--format takes text or json");
            c->json = !strcmp(v, "json");
        } else if (!strcmp(a, "--full"))
            c->full = true;
        else if (!strcmp(a, "--strict-device"))
            c->strict = true;
        else if (!strcmp(a, "--allow-outside-files"))
            c->outside = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
            c->verbose = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            c->quiet = true;
        else if (a[0] == '-' && a[1])
            return cli_usage("unknown option %s", a);
        else if (!c->graph)
            c->graph = a;
        else if (strchr(a, '='))
            c->bind[c->nbind++] = a;
        else
            return cli_usage("'%s' is not NAME=TENSOR", a);
    }
    if (!c->graph)
        return cli_usage("no graph file given");
    int stdin_uses = !strcmp(c->graph, "-");
    for (int i = 0; i < c->nbind; i++)
        stdin_uses += !strcmp(strchr(c->bind[i], '=') + 1, "-");
    for (int i = 0; i < c->nseed; i++)
        stdin_uses += !strcmp(c->seed[i], "-") || (strchr(c->seed[i], '=') && !strcmp(strchr(c->seed[i], '=') + 1, "-"));
    if (stdin_uses > 1)
        return cli_usage("standard input (-) can supply only one thing: the graph or one tensor");
    if (!c->grad && (c->nseed || c->wrt))
        return cli_usage("--seed and --wrt belong to tl grad");
    return 0;
}

/* ---------- memory ---------- */

/* 3/4 of physical memory, or of the cgroup's limit when that is lower. */
static int64_t default_max_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    int64_t mem = pages > 0 && size > 0 ? (int64_t)pages * size : (int64_t)8 << 30;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    long long cg;
    if (f) {
        if (fscanf(f, "%lld", &cg) == 1 && cg > 0 && cg < mem)
            mem = cg;
        fclose(f);
    }
    return mem / 4 * 3;
}

static int parse_max_memory(const cmd *c, int64_t *out)
{
    if (!c->max_memory) {
        *out = default_max_memory();
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(c->max_memory, &end);
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    }
    if (*end == 'i' && shift)
        end++;
    if (*end == 'B')
        end++;
    v *= (double)((int64_t)1 << shift);
    if (end == c->max_memory || *end || errno || !(v >= 0) || v > 9e18)
        return cli_usage("--max-memory takes a size such as 512M, 8G or 0 (no limit), not '%s'",
                           c->max_memory);
    *out = (int64_t)v;
    return 0;
}

/* ---------- device ---------- */

static int pick_backend(const cmd *c, const tl_backend **be, const char **name)
{
    const char *d = c->device ? c->device : "cpu";
    *be = &tl_cpu_backend;
    *name = "cpu";
    if (!strcmp(d, "cpu"))
        return 0;
    bool cuda = !strcmp(d, "cuda") || !strcmp(d, "gpu") || !strncmp(d, "cuda:", 5);
    if (!cuda && strcmp(d, "auto"))
        return cli_usage("unknown device '%s' (cpu, cuda[:N], gpu, auto)", d);
    if (!strncmp(d, "cuda:", 5)) {
        char *end;
        long n = strtol(d + 5, &end, 10);
        if (!d[5] || *end || n < 0)
            return cli_usage("bad device '%s'", d);
    }
    if (!strcmp(d, "auto"))
        return 0; /* no usable GPU in this build: the CPU, silently */
    const char *why = "this tl was built without the CUDA backend";
    if (c->strict) {
        fprintf(stderr, "tl: error: --device %s: %s (--strict-device forbids the CPU fallback)\n", d, why);
        return TL_ERUNTIME;
    }
    if (!c->quiet)
        fprintf(stderr, "tl: warning: --device %s: %s; running on the CPU\n", d, why);
    return 0;
}

/* ---------- inputs ---------- */

static int bind_inputs(const cmd *c, const tl_graph *g, tl_tensor **in, tl_status *st)
{
    for (int f = 0; f < c->nnpz; f++) {
        tl_npz *z = tl_npz_open(c->npz[f], st);
        if (!z)
            return tl_wrap(st, "-i %s", c->npz[f]), cli_fail(st);
        for (int k = 0; k < g->ninputs; k++) {
            const char *name = g->inputs[k].name;
            if (!tl_npz_has(z, name))
                continue;
            if (in[k]) {
                tl_npz_close(z);
                return tl_fail(st, TL_EINPUT, "input \"%s\" is supplied twice (again by %s)", name,
                               c->npz[f]), cli_fail(st);
            }
            if (!(in[k] = tl_npz_get(z, name, st))) {
                tl_wrap(st, "%s: input \"%s\"", c->npz[f], name);
                tl_npz_close(z);
                return cli_fail(st);
            }
        }
        tl_npz_close(z);
    }
    for (int i = 0; i < c->nbind; i++) {
        const char *eq = strchr(c->bind[i], '=');
        char name[300];
        size_t n = (size_t)(eq - c->bind[i]);
        snprintf(name, sizeof name, "%.*s", (int)(n < 299 ? n : 299), c->bind[i]);
        int k = n < 256 ? tl_graph_input_index(g, name) : -1; /* names have at most 255 bytes */
        if (k < 0)
            return tl_fail(st, TL_EINPUT, "%s: \"%s\" is not an input of the graph", g->path, name), cli_fail(st);
        if (in[k])
            return tl_fail(st, TL_EINPUT, "input \"%s\" is supplied twice", name), cli_fail(st);
        if (!(in[k] = cli_read_tensor(eq + 1, st)))
            return tl_wrap(st, "input \"%s\"", name), cli_fail(st);
    }
    for (int k = 0; k < g->ninputs; k++)
        if (!in[k])
            return tl_fail(st, TL_EINPUT, "%s: missing input \"%s\"", g->path, g->inputs[k].name), cli_fail(st);
    return 0;
}

static int parse_wrt(const cmd *c, const tl_graph *g, tl_tensor *const *in, bool *wrt,
                     tl_status *st)
{
    for (int k = 0; k < g->ninputs; k++)
        wrt[k] = c->wrt == NULL;
    if (!c->wrt)
        return 0;
    if (!c->wrt[0])
        return tl_fail(st, TL_EINPUT, "--wrt needs at least one input name"), cli_fail(st);
    const char *p = c->wrt;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (e && !e[1]))
            return tl_fail(st, TL_EINPUT, "--wrt: empty name in \"%s\"", c->wrt), cli_fail(st);
        char name[300];
        snprintf(name, sizeof name, "%.*s", (int)(n < 299 ? n : 299), p);
        int k = n < 256 ? tl_graph_input_index(g, name) : -1;
        if (k < 0)
            return tl_fail(st, TL_EINPUT, "--wrt: \"%s\" is not an input of the graph", name), cli_fail(st);
        if (tl_dtype_is_int(in[k]->dtype))
            return tl_fail(st, TL_EINPUT, "--wrt: input \"%s\" is an index tensor (%s), which is never "
                           "differentiated", name, tl_dtype_name(in[k]->dtype)), cli_fail(st);
        wrt[k] = true;
        p += n + (e != NULL);
    }
    return 0;
}

static int read_seeds(const cmd *c, const tl_result *r, tl_tensor **seeds, tl_status *st)
{
    int no = tl_result_noutputs(r);
    for (int i = 0; i < c->nseed; i++) {
        const char *s = c->seed[i], *eq = strchr(s, '=');
        int k = -1;
        if (eq) {
            for (int j = 0; j < no; j++)
                if ((size_t)(eq - s) == strlen(tl_result_output_name(r, j)) &&
                    !strncmp(s, tl_result_output_name(r, j), (size_t)(eq - s)))
                    k = j;
            if (k < 0)
                return tl_fail(st, TL_EINPUT, "--seed %.*s: not an output of the graph", (int)(eq - s), s), cli_fail(st);
            s = eq + 1;
        } else if (no != 1) {
            return tl_fail(st, TL_EINPUT, "--seed without OUT= needs a graph with one output (this one has %d)", no), cli_fail(st);
        } else {
            k = 0;
        }
        if (seeds[k])
            return tl_fail(st, TL_EINPUT, "--seed: output \"%s\" is seeded twice", tl_result_output_name(r, k)), cli_fail(st);
        if (!(seeds[k] = cli_read_tensor(s, st)))
            return tl_wrap(st, "--seed %s", tl_result_output_name(r, k)), cli_fail(st);
    }
    return 0;
}

/* ---------- the command ---------- */

static void report(const cmd *c, const tl_result *r, const char *dev, double t_load, double t_run,
                   double t_back)
{
    const tl_stats *s = tl_result_stats(r);
    if (!c->verbose)
        return;
    fprintf(stderr, "tl: device %s\n", dev);
    fprintf(stderr, "tl: %lld nodes evaluated, %lld ops, %lld recorded, %lld fallbacks\n",
            (long long)s->nodes, (long long)s->ops, (long long)s->tape_entries,
            (long long)s->fallbacks);
    for (int i = 0; i < s->nlog; i++)
        fprintf(stderr, "tl: if \"%s\" took %s\n", s->log[i].node, s->log[i].then ? "then" : "else");
    fprintf(stderr, "tl: peak memory %.1f MiB in tensors and tape\n", (double)s->peak_bytes / (1 << 20));
    if (s->branches > s->nlog)
        fprintf(stderr, "tl: ... %lld if decisions in all\n", (long long)s->branches);
    fprintf(stderr, "tl: load %.3f ms, run %.3f ms", t_load, t_run);
    if (c->grad)
        fprintf(stderr, ", backward %.3f ms (%lld ops)", t_back, (long long)s->backward_ops);
    fprintf(stderr, "\n");
}

static int execute(const cmd *c)
{
    tl_status st = {0};
    const tl_backend *be;
    const char *dev;
    int rc = pick_backend(c, &be, &dev);
    if (rc)
        return rc;
    double t0 = cli_now_ms();
    tl_graph_options go = {c->outside};
    tl_graph *g = cli_load_graph(c->graph, &go, &st);
    if (!g)
        return cli_fail(&st);
    int ni = g->ninputs, no = g->noutputs;
    tl_tensor **in = calloc((size_t)ni + 1, sizeof *in);
    tl_tensor **grads = calloc((size_t)ni + 1, sizeof *grads);
    tl_tensor **seeds = calloc((size_t)no + 1, sizeof *seeds);
    bool *wrt = calloc((size_t)ni + 1, sizeof *wrt);
    const char **names = calloc((size_t)(no + ni) * 2 + 1, sizeof *names);
    const tl_tensor **ts = calloc((size_t)(no + ni) + 1, sizeof *ts);
    char **gnames = calloc((size_t)ni + 1, sizeof *gnames);
    tl_result *r = NULL;
    double t1 = 0, t2 = 0, t3 = 0;
    if (!in || !grads || !seeds || !wrt || !names || !ts || !gnames) {
        rc = tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st);
        goto done;
    }
    int64_t max_memory = 0;
    if ((rc = parse_max_memory(c, &max_memory)) || (rc = bind_inputs(c, g, in, &st)) ||
        (rc = parse_wrt(c, g, in, wrt, &st)))
        goto done;
    t1 = cli_now_ms();
    tl_run_opts o = {c->grad, wrt, be, max_memory};
    if (tl_run(g, in, &o, &r, &st)) {
        rc = cli_fail(&st);
        goto done;
    }
    t2 = cli_now_ms();
    if (c->grad) {
        if ((rc = read_seeds(c, r, seeds, &st)))
            goto done;
        if (tl_result_pullback(r, seeds, grads, &st)) {
            rc = cli_fail(&st);
            goto done;
        }
    }
    t3 = cli_now_ms();
    int n = 0;
    for (int i = 0; i < no; i++) {
        names[n] = tl_result_output_name(r, i);
        ts[n++] = tl_result_output(r, i);
    }
    for (int k = 0; k < ni; k++) {
        if (!grads[k])
            continue;
        size_t len = strlen(g->inputs[k].name) + 6;
        if (!(gnames[k] = malloc(len))) {
            rc = tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st);
            goto done;
        }
        snprintf(gnames[k], len, "grad/%s", g->inputs[k].name);
        names[n] = gnames[k];
        ts[n++] = grads[k];
    }
    cli_out out = {c->output, c->json, c->full, dev, n, names, ts, no};
    if (cli_write(&out, &st))
        rc = cli_fail(&st);
    report(c, r, dev, t1 - t0, t2 - t1, t3 - t2);
done:
    for (int k = 0; in && k < ni; k++) {
        tl_tensor_unref(in[k]);
        tl_tensor_unref(grads[k]);
        free(gnames ? gnames[k] : NULL);
    }
    for (int i = 0; seeds && i < no; i++)
        tl_tensor_unref(seeds[i]);
    tl_result_free(r);
    tl_graph_free(g);
    free(in);
    free(grads);
    free(seeds);
    free(wrt);
    free(names);
    free(ts);
    free(gnames);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    cmd c = {.grad = !strcmp(argv[0], "grad")};
    int rc = parse(argc, argv, &c);
    if (!rc)
        rc = execute(&c);
    free(c.bind);
    free(c.seed);
    free(c.npz);
    free(c.inline_graph);
    return rc;
}
