/* tl run and tl grad: load the graph and tensors, run (recording a tape
 * for grad), pull back the seeds, and write the results, or compare them
 * with --expect. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/threads.h"
#include "backends/device.h"
#include "cli.h"
#include "formats/npy.h"
#include "graph/onnx.h"
#include "graph/program.h"
#include "formats/compare.h"
#include "formats/results.h"
#include "formats/text.h"

typedef cli_run_args cmd;

/* What a tensor argument takes from standard input: nothing, a .npy
 * ("-"), or members of a result file ("-:KEY"). */
static int stdin_kind(const char *v) { return !strcmp(v, "-") ? 1 : !strncmp(v, "-:", 2) ? 2 : 0; }

/* Standard input is read once: the graph, one .npy, or one result file
 * (.npz, json, text) that any number of "-:KEY" and "-i -" take members
 * from. */
int cli_check_stdin(const cmd *c)
{
    int graph = !strcmp(c->graph, "-"), npy = 0, npz = 0;
    for (int i = 0; i < c->nbind; i++) {
        int k = stdin_kind(strchr(c->bind[i], '=') + 1);
        npy += k == 1;
        npz += k == 2;
    }
    for (int i = 0; i < c->nseed; i++) {
        const char *eq = strchr(c->seed[i], '=');
        int k = stdin_kind(eq ? eq + 1 : c->seed[i]);
        npy += k == 1;
        npz += k == 2;
    }
    for (int i = 0; i < c->ntangent; i++) {
        int k = stdin_kind(strchr(c->tangent[i], '=') + 1);
        npy += k == 1;
        npz += k == 2;
    }
    for (int i = 0; i < c->nnpz; i++)
        npz += !strcmp(c->npz[i], "-");
    int expect = c->expect && !strcmp(c->expect, "-"); /* the golden file, read whole */
    if (graph + npy + (npz > 0) + expect > 1)
        return cli_usage("standard input (-) is read once: it holds the graph, one .npy tensor, one "
                         "result file (.npz, json or text, for any number of -:KEY and -i -) or the --expect "
                         "file, not several of these");
    return 0;
}

int cli_parse_run_args(int argc, char **argv, cmd *c)
{
    static const struct {
        const char *s, *l;
        size_t off;
    } valued[] = {
        {"-o", "--output", offsetof(cmd, output)},   {"-d", "--device", offsetof(cmd, device)},
        {NULL, "--wrt", offsetof(cmd, wrt)},         {NULL, "--max-memory", offsetof(cmd, max_memory)},
        {NULL, "--expect", offsetof(cmd, expect)},   {NULL, "--only", offsetof(cmd, only)},
        {NULL, "--of", offsetof(cmd, of)},           {NULL, "--outputs", offsetof(cmd, outputs)},
        {NULL, "--report", offsetof(cmd, report)},
    };
    static const struct {
        const char *s, *l;
        size_t off;
    } flags[] = {
        {NULL, "--full", offsetof(cmd, full)},         {NULL, "--strict-device", offsetof(cmd, strict)},
        {NULL, "--allow-outside-files", offsetof(cmd, outside)},
        {"-v", "--verbose", offsetof(cmd, verbose)},   {"-q", "--quiet", offsetof(cmd, quiet)},
        {NULL, "--profile", offsetof(cmd, profile)},   {NULL, "--check-finite", offsetof(cmd, check_finite)},
        {NULL, "--params", offsetof(cmd, params)},
    };
    c->bind = calloc((size_t)argc, sizeof *c->bind);
    c->seed = calloc((size_t)argc, sizeof *c->seed);
    c->npz = calloc((size_t)argc, sizeof *c->npz);
    c->tangent = calloc((size_t)argc, sizeof *c->tangent);
    if (!c->bind || !c->seed || !c->npz || !c->tangent)
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
            /* given once: cli_check_options refused a second (main.c) */
            *(const char **)((char *)c + valued[k].off) = v;
            done = true;
        }
        for (size_t k = 0; k < sizeof flags / sizeof flags[0] && !done; k++)
            if ((flags[k].s && !strcmp(a, flags[k].s)) || !strcmp(a, flags[k].l))
                done = *(bool *)((char *)c + flags[k].off) = true;
        int rc = done ? -1 : cli_compare_option(argc, argv, &i, &c->cmp);
        if (done || rc == 0)
            continue;
        if (rc > 0)
            return rc;
        if (cli_is_opt(a, "-i", "--inputs")) {
            const char *v = cli_opt_value(argc, argv, &i, a, "--inputs");
            if (!v)
                return cli_usage("%s needs a result file (.npz, json or text)", a);
            c->npz[c->nnpz++] = v;
        } else if (c->second && cli_is_opt(a, NULL, "--tangent")) {
            const char *v = cli_opt_value(argc, argv, &i, a, "--tangent");
            if (!v || !strchr(v, '=') || v[0] == '=')
                return cli_usage("--tangent needs NAME=TENSOR");
            c->tangent[c->ntangent++] = v;
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
            int usage = cli_format_opt(argc, argv, &i, a, &c->json);
            if (usage)
                return usage;
        } else if (a[0] == '-' && a[1]) {
            return cli_unknown_option(argv[0], a);
        } else if (!c->graph) {
            c->graph = a;
        } else if (strchr(a, '=')) {
            c->bind[c->nbind++] = a;
        } else {
            return cli_usage("'%s' is not NAME=TENSOR", a);
        }
    }
    if (!c->graph)
        return cli_usage("no graph file given");
    if (c->report && (!c->report[0] || !strcmp(c->report, "-")))
        return cli_usage("--report takes a file name (FILE.json, or /dev/stderr), not '%s'", c->report);
    int ofd = !c->output ? -1 : !strcmp(c->output, "-") ? 1 : cli_stream_fd(c->output);
    if (c->report && ofd >= 0 && cli_stream_fd(c->report) == ofd && !c->json) /* json: two documents */
        return cli_usage("-o %s and --report %s write the same stream: the report would follow the binary "
                         "results into it (--format json writes both as JSON)", c->output, c->report);
    if (c->report && c->output && cli_same_file(c->report, c->output))
        return cli_usage("-o %s and --report %s name the same file: the report would take the results' place",
                         c->output, c->report);
    if (c->expect && c->output && cli_same_file(c->expect, c->output))
        return cli_usage("-o %s and --expect %s name the same file: the results would replace the file they "
                         "are checked against", c->output, c->expect);
    if (c->expect && c->report && cli_same_file(c->expect, c->report))
        return cli_usage("--report %s and --expect %s name the same file: the report would replace the file the "
                         "results are checked against", c->report, c->expect);
    if (c->params && !tl_onnx_is_model(c->graph))
        return cli_usage("--params is for ONNX models, whose initializers it makes inputs; %s has none (each of "
                         "its inputs is differentiated, constants never)", c->graph);
    if (c->second && !c->ntangent)
        return cli_usage("tl %s needs at least one --tangent NAME=TENSOR", c->second == 1 ? "jvp" : "hvp");
    bool tolerance = c->cmp.rtol_set || c->cmp.atol_set || c->cmp.use_ulp || c->cmp.equal_nan;
    if (tolerance && !c->expect)
        return cli_usage("--rtol, --atol, --ulp and --equal-nan go with --expect FILE");
    tl_status st = {0}; /* the tolerances before the run, not after it */
    if (c->expect && tl_compare_check_opts(&c->cmp, &st))
        return cli_fail(&st);
    return cli_check_stdin(c);
}

void cli_run_args_free(cli_run_args *c)
{
    free(c->bind);
    free(c->seed);
    free(c->tangent);
    free(c->npz);
    free(c->inline_graph);
    for (int i = 0; i < c->ndefaults; i++)
        tl_tensor_unref(c->defaults[i]);
    free(c->defaults);
}

/* ---------- memory ---------- */

/* 3/4 of physical memory, or of the cgroup's limit when that is lower. */
int64_t cli_default_max_memory(void)
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
        *out = cli_default_max_memory();
        return 0;
    }
    char *end;
    errno = 0;
    /* a decimal number (strtod would take 0x100, inf, nan) */
    const char *m = c->max_memory;
    double v = isdigit((unsigned char)m[0]) || (m[0] == '.' && isdigit((unsigned char)m[1])) ? strtod(m, &end) : -1;
    if (v < 0)
        end = (char *)m;
    else if (strpbrk(m, "xXpP"))
        v = -1;
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
    tl_read_limit_set(*out, true); /* what the inputs read may take, too */
    /* a limit asked for bounds the footprint: freed large blocks go back to
     * the system (main.c keeps them in the heap, where blocks of other
     * sizes could not reuse them: RSS grew to 5x the limit) */
    if (*out) {
        mallopt(M_MMAP_THRESHOLD, 1 << 20);
        mallopt(M_TRIM_THRESHOLD, 1 << 20);
    }
    return 0;
}

/* ---------- device ---------- */

/* The device to run on: a GPU that cannot be used means the whole run on
 * the CPU, with one warning naming the reason (an error with
 * --strict-device); a bad device name is a usage error. */
static int pick_backend(const cmd *c, const tl_backend **be, char *why, size_t len)
{
    const char *d = c->device ? c->device : "cpu";
    tl_status st = {0};
    *be = tl_device_open(d, &st);
    if (*be)
        return 0;
    if (st.code == TL_EINPUT)
        return cli_fail(&st);
    *be = &tl_cpu_backend;
    snprintf(why, len, "%s", st.msg); /* for --report */
    if (c->strict) {
        tl_wrap(&st, "--device %s", d);
        size_t n = strlen(st.msg);
        snprintf(st.msg + n, sizeof st.msg - n, " (--strict-device forbids the CPU fallback)");
        return cli_fail(&st);
    }
    if (!c->quiet) {
        fprintf(stderr, "tl: warning: --device %s: ", d);
        cli_print_escaped(stderr, st.msg);
        fprintf(stderr, "; running on the CPU\n");
    }
    return 0;
}

/* ---------- names and inputs ---------- */

/* Splits a NAME,... list; calls each(name) for every entry.  Errors name
 * the option. */
/* A name of a comma-separated list: where it starts, and its length. */
typedef struct list_name {
    const char *p;
    size_t n;
} list_name;

static int by_text(const void *a, const void *b)
{
    const list_name *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* A name the list holds twice (--wrt x,x: as a tangent named twice), into
 * name; false when none is (or no memory to look: the run says so later). */
static bool named_twice(const char *list, char *name, size_t len)
{
    size_t k = 1, m = 0;
    for (const char *q = list; *q; q++)
        k += *q == ',';
    list_name *v = malloc(k * sizeof *v);
    if (!v)
        return false;
    for (const char *q = list;; q += v[m++].n + 1) { /* sorted, a repeat sits next to itself */
        v[m] = (list_name){q, strcspn(q, ",")};
        if (!q[v[m].n])
            break;
    }
    qsort(v, ++m, sizeof *v, by_text);
    bool twice = false;
    for (size_t i = 1; i < m && !twice; i++)
        if (v[i].n && !by_text(&v[i - 1], &v[i])) {
            snprintf(name, len, "%.*s", (int)(v[i].n < len - 1 ? v[i].n : len - 1), v[i].p);
            twice = true;
        }
    free(v);
    return twice;
}

static int each_name(const char *opt, const char *list, tl_status *st,
                     int (*each)(const char *name, void *ctx), void *ctx)
{
    if (!list[0])
        return tl_fail(st, TL_EINPUT, "%s needs at least one name", opt), cli_fail(st);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (e && !e[1]))
            return tl_fail(st, TL_EINPUT, "%s: empty name in \"%s\"", opt, list), cli_fail(st);
        p += n + (e != NULL);
    }
    char name[300];
    if (named_twice(list, name, sizeof name))
        return tl_fail(st, TL_EINPUT, "%s: \"%s\" is named twice", opt, name), cli_fail(st);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)(n < 299 ? n : 299), p);
        int rc = each(name, ctx);
        if (rc)
            return rc;
        p += n + (e != NULL);
    }
    return 0;
}

/* The unused keys of the -i files, for a missing input's message. */
static void unused_keys(const cmd *c, const tl_graph *g, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int f = 0; f < c->nnpz && k + 80 < len; f++) {
        tl_status st = {0};
        tl_result_file *z = strcmp(c->npz[f], "-") ? tl_result_file_open(c->npz[f], &st) : cli_stdin_file(&st);
        for (int i = 0; z && i < tl_result_file_count(z) && k + 80 < len; i++) {
            const char *key = tl_result_file_key(z, i);
            if (key && tl_graph_input_index(g, key) < 0)
                k += (size_t)snprintf(buf + k, len - k, "%s\"%.60s\"", k ? ", " : "", key);
        }
        if (strcmp(c->npz[f], "-"))
            tl_result_file_close(z);
    }
}

/* The inputs one archive holds, read in turn on this thread, or where
 * megabytes of them are deflated on the worker threads, a member each
 * (inflating them and checking their CRC was most of the time before a
 * run starts); the first failure in input order is the one reported, as
 * a reading in turn would.  A stored member is one read from the file
 * into its fresh tensor, and this thread's tensors are mapped in by every
 * thread at once (tensor.c), where inside a worker's item one thread maps
 * its own alone: the MLP benchmark's 14 MB of stored members read on two
 * workers cost 10 ms more CPU than in turn here (the Zen 5 VM).  Where
 * one member is half the bytes or more, in turn as well, for its tensor's
 * sake. */
typedef struct member_job {
    const tl_result_file *z;
    const tl_graph *g;
    const int *which; /* input indices */
    tl_tensor **in;
    tl_status *st; /* one per member */
} member_job;

static void read_one(void *ctx, int64_t i)
{
    member_job *j = ctx;
    int k = j->which[i];
    j->in[k] = tl_result_file_get(j->z, j->g->inputs[k].name, &j->st[i]);
}

static int read_members(const tl_graph *g, const tl_result_file *z, const char *what, const bool *explicit,
                        tl_tensor **in, tl_status *st)
{
    int *which = calloc((size_t)g->ninputs + 1, sizeof *which), n = 0;
    tl_status *sts = calloc((size_t)g->ninputs + 1, sizeof *sts);
    uint64_t bytes = 0, largest = 0, deflated = 0;
    int rc = which && sts ? 0 : (tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st)), twice = -1;
    for (int k = 0; k < g->ninputs && !rc && twice < 0; k++) {
        const char *name = g->inputs[k].name;
        if (explicit[k] || !tl_result_file_has(z, name))
            continue;
        if (in[k])
            twice = k; /* reported after the members before it */
        else {
            which[n++] = k;
            uint64_t b = tl_result_file_size(z, name);
            bytes += b;
            largest = b > largest ? b : largest;
            deflated += tl_result_file_deflated(z, name) ? b : 0;
        }
    }
    if (!rc) {
        member_job j = {z, g, which, in, sts};
        /* threads only for megabytes to inflate: waking them costs more than a small read */
        cpu_parallel(n, deflated >= ((uint64_t)1 << 20) && largest < bytes / 2 ? cpu_nthreads() : 1, read_one, &j);
        for (int i = 0; i < n && !rc; i++)
            if (!in[which[i]]) {
                *st = sts[i];
                rc = (tl_wrap(st, "%s: input \"%s\"", what, g->inputs[which[i]].name), cli_fail(st));
            }
    }
    if (!rc && twice >= 0)
        rc = (tl_fail(st, TL_EINPUT, "input \"%s\" is supplied twice (again by %s)", g->inputs[twice].name, what),
              cli_fail(st));
    free(which);
    free(sts);
    return rc;
}

/* Every input still without a tensor, named in one line, each with what
 * the graph (or the ONNX model) declares of it. */
static int missing_inputs(const cmd *c, const tl_graph *g, tl_tensor *const *in, tl_status *st)
{
    char names[600] = "", keys[400], type[160], one[240];
    int n = 0, shown = 0;
    size_t k = 0;
    for (int i = 0; i < g->ninputs; i++) {
        if (in[i] || n++ >= 8 || shown < n - 1) /* the first eight that fit, in order */
            continue;
        if (c->model)
            tl_onnx_input_text(c->model, i, type, sizeof type);
        else
            tl_input_type_text(g, i, type, sizeof type);
        size_t len = (size_t)snprintf(one, sizeof one, "%s\"%.60s\"%s%s%s", k ? ", " : "", g->inputs[i].name,
                                      type[0] ? " (" : "", type, type[0] ? ")" : "");
        if (k + len + 40 < sizeof names) { /* room for ", ... (N in all)" after */
            memcpy(names + k, one, len + 1);
            k += len;
            shown++;
        }
    }
    if (!n)
        return 0;
    if (!c->model && tl_program_missing_input(g, in, st)) /* a typo: where, and what was meant */
        return cli_fail(st);
    if (shown < n)
        snprintf(names + k, sizeof names - k, ", ... (%d in all)", n);
    unused_keys(c, g, keys, sizeof keys);
    tl_fail(st, TL_EINPUT, "%s: missing input%s %s%s%s%s", g->path, n == 1 ? "" : "s", names,
            keys[0] ? " (the -i files also hold " : "", keys, keys[0] ? ", which are not inputs)" : "");
    return cli_fail(st);
}

/* -i files first (an input in two of them is an error), then NAME=TENSOR,
 * which overrides the same key of an -i file (but not another NAME=). */
int cli_bind_inputs(const cmd *c, const tl_graph *g, tl_tensor **in, tl_status *st)
{
    bool *explicit = calloc((size_t)g->ninputs + 1, sizeof *explicit);
    int rc = explicit ? 0 : (tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st));
    for (int i = 0; i < c->nbind && !rc; i++) {
        const char *eq = strchr(c->bind[i], '=');
        char name[300];
        size_t n = (size_t)(eq - c->bind[i]);
        snprintf(name, sizeof name, "%.*s", (int)(n < 299 ? n : 299), c->bind[i]);
        int k = n < 256 ? tl_graph_input_index(g, name) : -1; /* names have at most 255 bytes */
        char hint[400];
        if (k < 0)
            rc = (tl_fail(st, TL_EINPUT, "%s: \"%s\" is not an input of the graph%s", g->path, name,
                          cli_model_input_hint(c->model, g, name, hint, sizeof hint)), cli_fail(st));
        else if (explicit[k])
            rc = (tl_fail(st, TL_EINPUT, "input \"%s\" is supplied twice", name), cli_fail(st));
        else if (!(in[k] = cli_read_tensor(eq + 1, st)))
            rc = (tl_wrap(st, "input \"%s\"", name), cli_fail(st));
        else
            explicit[k] = true;
    }
    for (int f = 0; f < c->nnpz && !rc; f++) {
        bool from_stdin = !strcmp(c->npz[f], "-");
        const char *what = from_stdin ? "standard input" : c->npz[f];
        tl_result_file *z = from_stdin ? cli_stdin_file(st) : tl_result_file_open(c->npz[f], st);
        if (!z) {
            rc = (tl_wrap(st, "-i %s", c->npz[f]), cli_fail(st));
            break;
        }
        if (tl_result_file_anonymous(z))
            rc = (tl_fail(st, TL_EINPUT, "-i %s: a .npy holds one tensor without a name: bind it as NAME=%s",
                          c->npz[f], c->npz[f]), cli_fail(st));
        else
            rc = read_members(g, z, what, explicit, in, st);
        if (!from_stdin)
            tl_result_file_close(z);
    }
    for (int k = 0; k < g->ninputs && !rc; k++) { /* inputs with a default: an ONNX model's, a graph's */
        if (in[k])
            continue;
        if (c->defaults && k < c->ndefaults && c->defaults[k])
            in[k] = tl_tensor_ref(c->defaults[k]);
        else if (!(in[k] = tl_input_default(g, k, st)) && st->code)
            rc = cli_fail(st);
        else if (!in[k] && c->declared && !(in[k] = tl_onnx_declared(c->declared, k, st)))
            rc = (tl_wrap(st, "%s", g->path), cli_fail(st));
    }
    if (!rc)
        rc = missing_inputs(c, g, in, st);
    free(explicit);
    return rc;
}

typedef struct wrt_ctx {
    const tl_graph *g;
    const struct tl_onnx_model *model; /* or NULL */
    tl_tensor *const *in;
    bool *wrt;
    tl_status *st;
} wrt_ctx;

static int wrt_one(const char *name, void *ctx)
{
    wrt_ctx *w = ctx;
    int k = strlen(name) < 256 ? tl_graph_input_index(w->g, name) : -1;
    char hint[400];
    if (k < 0)
        return tl_fail(w->st, TL_EINPUT, "--wrt: \"%s\" is not an input of the graph%s", name,
                       cli_model_input_hint(w->model, w->g, name, hint, sizeof hint)), cli_fail(w->st);
    if (tl_dtype_is_int(w->in[k]->dtype))
        return tl_fail(w->st, TL_EINPUT, "--wrt: input \"%s\" is an index tensor (%s), which is never "
                       "differentiated", name, tl_dtype_name(w->in[k]->dtype)), cli_fail(w->st);
    if (tl_onnx_input_is_bool(w->model, k))
        return tl_fail(w->st, TL_EINPUT, "--wrt: input \"%s\" is bool in the model (given as %s 0/1), which is "
                       "never differentiated", name, tl_dtype_name(w->in[k]->dtype)), cli_fail(w->st);
    w->wrt[k] = true;
    return 0;
}

int cli_parse_wrt(const cmd *c, const tl_graph *g, tl_tensor *const *in, bool *wrt,
                  tl_status *st)
{
    for (int k = 0; k < g->ninputs; k++) /* a model's bool input: a condition, never differentiated */
        wrt[k] = c->wrt == NULL && !tl_onnx_input_is_bool(c->model, k);
    wrt_ctx w = {g, c->model, in, wrt, st};
    return c->wrt ? each_name("--wrt", c->wrt, st, wrt_one, &w) : 0;
}

typedef struct outs_ctx {
    const tl_graph *g;
    int *slots, n;
    tl_status *st;
} outs_ctx;

static int output_one(const char *name, void *ctx)
{
    outs_ctx *o = ctx;
    int s = strlen(name) < 256 ? tl_graph_top_slot(o->g, name) : -1;
    if (s < 0)
        return tl_fail(o->st, TL_EINPUT, "--outputs: \"%s\" is not a name of the graph's top level "
                       "(an input, a constant or a node outside blocks)", name), cli_fail(o->st);
    for (int i = 0; i < o->n; i++)
        if (o->slots[i] == s)
            return tl_fail(o->st, TL_EINPUT, "--outputs: \"%s\" is named twice", name), cli_fail(o->st);
    o->slots[o->n++] = s;
    return 0;
}

/* ---------- seeds ---------- */

/* A 0-d seed stands for the output's whole shape. */
static tl_tensor *broadcast_seed(tl_tensor *s, const tl_tensor *y, tl_status *st)
{
    if (s->ndim != 0 || y->ndim == 0 || s->dtype != y->dtype)
        return s;
    tl_tensor *full = tl_tensor_new(y->dtype, y->ndim, y->shape, st);
    for (int64_t i = 0; full && i < full->numel; i++)
        memcpy((char *)full->data + (size_t)i * tl_dtype_size(y->dtype), s->data, tl_dtype_size(y->dtype));
    tl_tensor_unref(s);
    return full;
}

static int output_index(const tl_result *r, const char *name, size_t len)
{
    for (int j = 0; j < tl_result_noutputs(r); j++)
        if (len == strlen(tl_result_output_name(r, j)) && !strncmp(name, tl_result_output_name(r, j), len))
            return j;
    return -1;
}

/* " (did you mean "loss"?)" or " (its outputs are y, z)" for a name that
 * is no output of r. */
static const char *output_hint(const tl_result *r, const char *name, char *buf, size_t len)
{
    int no = tl_result_noutputs(r);
    const char **names = malloc(sizeof *names * ((size_t)no + 1));
    buf[0] = '\0';
    for (int j = 0; names && j < no; j++)
        names[j] = tl_result_output_name(r, j);
    if (names)
        cli_name_hint(name, names, no, no == 1 ? "its output is" : "its outputs are", buf, len);
    free(names);
    return buf;
}

int cli_read_seeds(const cmd *c, const tl_result *r, tl_tensor **seeds, tl_status *st)
{
    int no = tl_result_noutputs(r);
    for (int i = 0; i < c->nseed; i++) {
        const char *s = c->seed[i], *eq = strchr(s, '=');
        int k = 0;
        if (eq) {
            char name[300], hint[400];
            snprintf(name, sizeof name, "%.*s", (int)(eq - s < 299 ? eq - s : 299), s);
            if ((k = output_index(r, s, (size_t)(eq - s))) < 0)
                return tl_fail(st, TL_EINPUT, "--seed %s: not an output of the graph%s", name,
                               output_hint(r, name, hint, sizeof hint)), cli_fail(st);
            s = eq + 1;
        } else if (no != 1) {
            return tl_fail(st, TL_EINPUT, "--seed without OUT= needs a graph with one output (this one has %d)", no), cli_fail(st);
        }
        if (seeds[k])
            return tl_fail(st, TL_EINPUT, "--seed: output \"%s\" is seeded twice", tl_result_output_name(r, k)), cli_fail(st);
        if (!(seeds[k] = cli_read_tensor(s, st)) ||
            !(seeds[k] = broadcast_seed(seeds[k], tl_result_output(r, k), st)))
            return tl_wrap(st, "--seed %s", tl_result_output_name(r, k)), cli_fail(st);
        const tl_tensor *y = tl_result_output(r, k);
        char hint[200], want[96], got[96];
        if (cli_f32_literal_hint("--seed", c->seed[i], s, seeds[k], y->dtype, hint, sizeof hint)[0])
            return tl_fail(st, TL_EINPUT, "--seed %s: expected %s like the output, got %s%s",
                           tl_result_output_name(r, k), tl_tensor_desc(y, want, sizeof want),
                           tl_tensor_desc(seeds[k], got, sizeof got), hint), cli_fail(st);
    }
    return 0;
}

typedef struct of_ctx {
    const tl_result *r;
    bool *of;
    tl_status *st;
} of_ctx;

static int of_one(const char *name, void *ctx)
{
    of_ctx *o = ctx;
    int k = output_index(o->r, name, strlen(name));
    char hint[400];
    if (k < 0)
        return tl_fail(o->st, TL_EINPUT, "--of: \"%s\" is not an output%s", name,
                       output_hint(o->r, name, hint, sizeof hint)), cli_fail(o->st);
    o->of[k] = true;
    return 0;
}

/* --of: the outputs left out are not differentiated (zero seeds). */
static int seed_only_of(const cmd *c, const tl_result *r, tl_tensor **seeds, tl_status *st)
{
    int no = tl_result_noutputs(r);
    bool *of = calloc((size_t)no + 1, sizeof *of);
    of_ctx o = {r, of, st};
    int rc = of ? each_name("--of", c->of, st, of_one, &o) : (tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st));
    for (int k = 0; k < no && !rc; k++) {
        if (of[k] || (!seeds[k] && tl_dtype_is_int(tl_result_output(r, k)->dtype)))
            continue; /* an index output has no gradient to leave out (a zero seed for it was an error) */
        if (seeds[k])
            rc = (tl_fail(st, TL_EINPUT, "--seed %s: that output is left out by --of", tl_result_output_name(r, k)),
                  cli_fail(st));
        else if (!(seeds[k] = tl_tensor_zeros(tl_result_output(r, k)->dtype, tl_result_output(r, k)->ndim,
                                              tl_result_output(r, k)->shape, st)))
            rc = cli_fail(st);
    }
    free(of);
    return rc;
}

/* ---------- what is written ---------- */

typedef struct only_ctx {
    const char **names;
    const tl_tensor **ts;
    bool *keep;
    int n;
    tl_status *st;
} only_ctx;

static int only_one(const char *name, void *ctx)
{
    only_ctx *o = ctx;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->names[i], name)) {
            o->keep[i] = true;
            return 0;
        }
    char hint[400];
    return tl_fail(o->st, TL_EINPUT, "--only: \"%s\" is not written by this run%s", name,
                   cli_name_hint(name, o->names, o->n, "it writes", hint, sizeof hint)), cli_fail(o->st);
}

/* --only: keeps the named tensors (in their order); *no shrinks to the
 * outputs kept. */
static int apply_only(const char *list, const char **names, const tl_tensor **ts, int *n, int *no,
                      tl_status *st)
{
    bool *keep = calloc((size_t)*n + 1, sizeof *keep);
    only_ctx o = {names, ts, keep, *n, st};
    int rc = keep ? each_name("--only", list, st, only_one, &o) : (tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st));
    int m = 0, mo = 0;
    for (int i = 0; i < *n && !rc; i++)
        if (keep[i]) {
            mo += i < *no;
            names[m] = names[i];
            ts[m++] = ts[i];
        }
    if (!rc) {
        *n = m;
        *no = mo;
    }
    free(keep);
    return rc;
}

/* --expect: the results against a file by compare's rule.  0 when they
 * match, 1 (report printed) when not, 2/3 on an error.  The text report
 * names only what differs and is printed only then; with --format json the
 * whole report is printed either way, as tl compare --format json prints
 * it, for a machine to read.  Either goes to stdout unless results do. */
static int expect(const cmd *c, const tl_result_set *b, int n, const char **names, const tl_tensor **ts,
                  tl_status *st)
{
    tl_result_set a = tl_result_set_view(n, names, ts);
    tl_compare_report *r = tl_compare(&a, b, &c->cmp, st);
    int rc = r ? 0 : (tl_wrap(st, "--expect %s", c->expect), cli_fail(st));
    FILE *f = c->output && !strcmp(c->output, "-") ? stderr : stdout;
    bool match = r && tl_compare_all_match(r);
    if (r && c->json) {
        if (!match)
            fprintf(stderr, "tl: results differ from %s\n", c->expect);
        rc = tl_compare_write_json(f, r, st) ? cli_fail(st) : match ? 0 : 1;
        fflush(f);
    } else if (r && !match) {
        fprintf(f, "tl: results differ from %s\n", c->expect);
        rc = tl_compare_write_text(f, r, true, st) ? cli_fail(st) : 1;
        fflush(f);
    }
    if (r && f == stdout && (c->json || !match)) { /* a report that cannot be written: exit 3, as tl compare */
        int w = cli_finish_stdout();
        rc = w ? w : rc;
    }
    if (match && c->verbose)
        fprintf(stderr, "tl: results match %s\n", c->expect);
    tl_compare_free(r);
    return rc;
}

/* ---------- progress ---------- */

/* Notes how far the run got for the progress line (cli_progress): at
 * every node forward and every tape entry backward. */
static void on_progress(void *ctx, const char *phase, int64_t done, int64_t total)
{
    cli_progress_note(ctx, phase, total > 0 ? "tape entries" : "nodes", done, total);
}

/* For cli_literal_hint: the literal v written with a dtype prefix, as
 * "x=f32:[1,2]", when it reads so (an integer one needs whole numbers). */
static bool prefixed(const char *name, size_t n, const char *v, tl_dtype dt, char *buf, size_t len)
{
    tl_status st = {0};
    snprintf(buf, len, "%s:%s", tl_dtype_name(dt), v);
    tl_tensor *t = strlen(v) < 200 ? tl_literal_parse(buf, &st) : NULL;
    tl_tensor_unref(t);
    snprintf(buf, len, "%.*s=%s:%.40s%s", (int)n, name, tl_dtype_name(dt), v, strlen(v) > 40 ? "..." : "");
    return t != NULL;
}

/* The dtype wanted is f32 or an index type, that of a declared input, or
 * i64 for the indices of take, gather... that a literal input holds. */
void cli_literal_hint(const cmd *c, tl_tensor *const *in, const tl_graph *g, tl_status *st)
{
    if (!strstr(st->msg, "dtype") && !strstr(st->msg, "an index tensor"))
        return;
    for (int i = 0; i < c->nbind; i++) {
        const char *v = strchr(c->bind[i], '=') + 1;
        size_t n = strlen(v), nl = (size_t)(v - 1 - c->bind[i]);
        bool file = v[0] == '-' || strstr(v, ".npz:") || (n > 4 && !strcmp(v + n - 4, ".npy"));
        char name[300], named[310], got[120], desc[96], how[300];
        snprintf(name, sizeof name, "%.*s", (int)(nl < 299 ? nl : 299), c->bind[i]);
        snprintf(named, sizeof named, "input \"%s\"", name);
        int k = nl < 256 ? tl_graph_input_index(g, name) : -1;
        const char *want_f = strstr(st->msg, "expected dtype ");
        if (file && k >= 0 && in[k] && strstr(st->msg, named) && want_f && !strncmp(want_f + 15, "f", 1)) {
            /* a file of another dtype: tl converts no input, so the file must */
            bool f32 = !strncmp(want_f + 15, "f32", 3);
            size_t m = strlen(st->msg);
            snprintf(st->msg + m, sizeof st->msg - m, " (%s holds %s, and tl converts no input: save it as %s, "
                     "as NumPy's astype(np.%s) would)", v, tl_dtype_name(in[k]->dtype), f32 ? "f32" : "f64",
                     f32 ? "float32" : "float64");
            return;
        }
        if (file || strchr(v, ':') || k < 0 || !in[k])
            continue;
        snprintf(got, sizeof got, "got %s", tl_tensor_desc(in[k], desc, sizeof desc));
        /* only the literal the message is about, and only when it says what it wants */
        const char *e = strstr(st->msg, "expected dtype ");
        char dt[4] = "";
        tl_dtype want = TL_F64;
        if (e)
            snprintf(dt, sizeof dt, "%s", e + 15);
        bool declared = strstr(st->msg, named) && e && tl_dtype_parse(dt, &want);
        if (!declared && strstr(st->msg, "an index tensor") && strstr(st->msg, got))
            want = TL_I64;
        if (want == TL_F64)
            continue;
        size_t m = strlen(st->msg);
        if (prefixed(c->bind[i], nl, v, want, how, sizeof how))
            snprintf(st->msg + m, sizeof st->msg - m, " (%.*s is an f64 literal; write %s for %s)", (int)nl,
                     c->bind[i], how, tl_dtype_name(want));
        else
            snprintf(st->msg + m, sizeof st->msg - m, " (%.*s is an f64 literal; %s elements are whole numbers, "
                     "written with the %s: prefix)", (int)nl, c->bind[i], tl_dtype_name(want), tl_dtype_name(want));
        return;
    }
}

/* ---------- the command ---------- */

typedef struct run_state {
    tl_graph *g;
    struct tl_onnx_model *model; /* an ONNX model: g is its signature until the inputs are bound */
    tl_tensor **in, **grads, **seeds;
    bool *wrt;
    int *out_slots;
    const char **names;
    const tl_tensor **ts;
    char **gnames;
    tl_result *r;
    cli_second second; /* jvp and hvp */
    char nograd[160];  /* why a grad writes no gradient ("": it writes some) */
} run_state;

static void release(run_state *s)
{
    int ni = s->g ? s->g->ninputs : 0, no = s->r ? tl_result_noutputs(s->r) : 0;
    for (int k = 0; s->in && k < ni; k++) {
        tl_tensor_unref(s->in[k]);
        tl_tensor_unref(s->grads[k]);
        free(s->gnames ? s->gnames[k] : NULL);
    }
    for (int i = 0; s->seeds && i < no; i++)
        tl_tensor_unref(s->seeds[i]);
    cli_second_free(&s->second);
    tl_result_free(s->r);
    tl_graph_free(s->g);
    cli_model_close(s->model);
    free(s->in);
    free(s->grads);
    free(s->seeds);
    free(s->wrt);
    free(s->out_slots);
    free(s->names);
    free(s->ts);
    free(s->gnames);
}

int cli_env_ok(void)
{
    const char *t = getenv("TL_NUM_THREADS"), *conv = getenv("TL_CONV");
    char *end;
    long n = t ? strtol(t, &end, 10) : 1;
    if (t && (!isdigit((unsigned char)*t) || *end || n < 1 || n > 1024)) /* digits only: not ' 2', '+2' */
        return cli_env_usage("TL_NUM_THREADS must be a whole number from 1 to 1024, not '%.40s'", t);
    if (conv && strcmp(conv, "blas") && strcmp(conv, "grid") && strcmp(conv, "avx2"))
        return cli_env_usage("TL_CONV must be blas, grid or avx2 (or unset: tl's choice), not '%.40s'", conv);
    const char *choose = getenv("TL_BLAS_CHOOSE"); /* (any other value was taken as 1 without a word) */
    if (choose && strcmp(choose, "0") && strcmp(choose, "1"))
        return cli_env_usage("TL_BLAS_CHOOSE must be 0 (OpenBLAS's own choice of kernels) or 1 (tl's, as unset), "
                             "not '%.40s'", choose);
    return 0;
}

/* TL_FUSE: unset, a number of elements from which chains fuse (1 and
 * up), or 0 to run every op on its own (the same bits either way). */
static int fuse_env(int64_t *min)
{
    const char *t = getenv("TL_FUSE");
    char *end;
    errno = 0;
    long long n = t ? strtoll(t, &end, 10) : 0;
    if (t && (!isdigit((unsigned char)*t) || *end || errno == ERANGE)) /* digits only: not ' 5', '+5', -0 */
        return cli_env_usage("TL_FUSE must be 0 (no fused chains) or a number of elements, not '%.40s'", t);
    *min = !t ? 0 : n == 0 ? -1 : n;
    return 0;
}

/* An ONNX model: its recipe for the inputs bound, in place of the
 * signature graph, with room for its names. */
static int model_graph(const cmd *c, run_state *s, tl_status *st)
{
    int rc = cli_model_translate(c, s->model, &s->g, s->in, st);
    if (rc)
        return rc;
    size_t nmax = (size_t)s->g->ninputs + (size_t)s->g->noutputs + (size_t)s->g->nslots + 1;
    free(s->names); /* gnames holds no name yet: check_writes comes after */
    free(s->ts);
    free(s->out_slots);
    free(s->gnames);
    s->names = calloc(nmax, sizeof *s->names);
    s->ts = calloc(nmax, sizeof *s->ts);
    s->out_slots = calloc((size_t)s->g->nslots + 1, sizeof *s->out_slots);
    s->gnames = calloc((size_t)s->g->ninputs + 1, sizeof *s->gnames);
    if (!s->names || !s->ts || !s->out_slots || !s->gnames)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    return 0;
}

/* "grad/NAME" for input k, kept in s->gnames. */
static const char *grad_name(run_state *s, int k, tl_status *st)
{
    if (!s->gnames[k]) {
        size_t len = strlen(s->g->inputs[k].name) + 6;
        if (!(s->gnames[k] = malloc(len)))
            return tl_fail(st, TL_ERUNTIME, "out of memory"), NULL;
        snprintf(s->gnames[k], len, "grad/%s", s->g->inputs[k].name);
    }
    return s->gnames[k];
}

/* What the run will write, known from the graph and the inputs before
 * it starts: --only and -o are checked against it, so that a run is not
 * wasted on results that cannot be written. */
static int check_writes(const cmd *c, run_state *s, const outs_ctx *oc, tl_status *st)
{
    const tl_graph *g = s->g;
    int n = 0, no = c->outputs ? oc->n : g->noutputs;
    for (int i = 0; i < no; i++)
        s->names[n++] = g->slot_name[c->outputs ? oc->slots[i] : g->outputs[i]];
    for (int k = 0; c->grad && k < g->ninputs; k++)
        if (s->wrt[k] && !tl_dtype_is_int(s->in[k]->dtype) && !(s->names[n++] = grad_name(s, k, st)))
            return cli_fail(st);
    if (c->grad && c->second != 1 && n == no) { /* a grad with nothing to differentiate: said once it ran */
        if (g->ninputs)
            snprintf(s->nograd, sizeof s->nograd, "input \"%.64s\" is an index tensor (%s), never differentiated%s",
                     g->inputs[0].name, tl_dtype_name(s->in[0]->dtype),
                     g->ninputs > 1 ? ", and so is every other input" : "");
        else
            snprintf(s->nograd, sizeof s->nograd, "the graph has no inputs");
    }
    /* jvp/OUT for each output written, hvp/NAME beside each grad/NAME */
    int nsec = !c->second ? 0 : c->second == 1 ? no : n - no;
    char **sec = nsec ? calloc((size_t)nsec, sizeof *sec) : NULL;
    if (nsec && !sec)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    for (int i = 0, base = c->second == 1 ? 0 : no; i < nsec; i++) {
        const char *of = s->names[base + i];
        if (c->second == 2)
            of += 5; /* after "grad/" */
        size_t len = strlen(of) + 5;
        if (!(sec[i] = malloc(len)))
            break;
        snprintf(sec[i], len, "%s/%s", c->second == 1 ? "jvp" : "hvp", of);
        s->names[n++] = sec[i];
    }
    int rc = c->only ? apply_only(c->only, s->names, s->ts, &n, &no, st) : 0;
    cli_out out = {c->output, c->json, c->full, NULL, n, s->names, s->ts, no};
    if (!rc && c->output && cli_check_output(&out, st))
        rc = cli_fail(st);
    for (int i = 0; i < nsec; i++)
        free(sec[i]);
    free(sec);
    return rc;
}

/* Runs (and differentiates); fills the names and tensors to write. */
static int run_graph(const cmd *c, const tl_backend *be, run_state *s, int *nwrite, int *noutw,
                     cli_times *t, tl_status *st)
{
    int64_t max_memory = 0, fuse_min = 0;
    int rc;
    if ((rc = fuse_env(&fuse_min)) || (rc = parse_max_memory(c, &max_memory)))
        return rc;
    double t0 = cli_now_ms();
    if ((rc = cli_bind_inputs(c, s->g, s->in, st)))
        return rc;
    t->inputs = cli_now_ms() - t0;
    t0 = cli_now_ms();
    if (s->model && (rc = model_graph(c, s, st)))
        return rc;
    t->load += cli_now_ms() - t0; /* an ONNX model's translation is part of its load */
    tl_graph *g = s->g;
    int ni = g->ninputs;
    outs_ctx oc = {g, s->out_slots, 0, st};
    if ((rc = cli_parse_wrt(c, g, s->in, s->wrt, st)) ||
        (c->second && (rc = cli_second_prepare(c, g, s->in, s->wrt, &s->second, st))) ||
        (c->outputs && (rc = each_name("--outputs", c->outputs, st, output_one, &oc))) ||
        (rc = check_writes(c, s, &oc, st)))
        return rc;
    cli_progress p;
    bool tty = isatty(2) && !c->quiet;
    tl_run_opts o = {.record = c->grad || c->second, .wrt = c->second ? s->second.wrt : s->wrt,
                     .twice = c->second != 0, .backend = be, .max_memory = max_memory,
                     .strict_device = c->strict, .outputs = c->outputs ? s->out_slots : NULL,
                     .noutputs = oc.n, .profile = c->profile || c->report, .check_finite = c->check_finite,
                     .progress = tty ? on_progress : NULL, .progress_ctx = &p, .fuse_min = fuse_min,
                     /* the run's to drop at their last use: nothing below reads their values */
                     .give_inputs = c->second ? NULL : s->in};
    /* given to the run, the inputs are its alone: the defaults (an ONNX
     * model's weights) drop their references too, the model and the
     * recipe theirs, so that each goes at its last use (ResNet-18's
     * gradients: 125 -> 96 MiB of tensors at the peak, 168 -> 138 MB of
     * memory: its weights' blocks are reused for their gradients) */
    if (o.give_inputs) {
        for (int k = 0; k < c->ndefaults; k++) {
            tl_tensor_unref(c->defaults[k]);
            c->defaults[k] = NULL;
        }
        tl_onnx_drop_inputs(s->model);
        tl_graph_drop_default_data(g);
    }
    double t1 = cli_now_ms();
    cli_progress_start(&p, tty, t1, c->second ? (c->second == 1 ? "jvp" : "hvp") : c->grad ? "grad" : "run");
    tl_code failed = tl_run(g, s->in, &o, &s->r, st);
    cli_progress_end(&p);
    t->run = cli_now_ms() - t1;
    if (failed) {
        cli_literal_hint(c, s->in, g, st);
        return cli_fail_in(g, st);
    }
    int no = tl_result_noutputs(s->r);
    if (!(s->seeds = calloc((size_t)no + 1, sizeof *s->seeds)))
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    if (c->grad || c->second) {
        double t2 = cli_now_ms();
        if ((rc = cli_read_seeds(c, s->r, s->seeds, st)) || (c->of && (rc = seed_only_of(c, s->r, s->seeds, st))))
            return rc;
        /* the same line goes on (from t1) once the seeds, which may print an error, are read */
        cli_progress_start(&p, tty, t1, "backward");
        failed = c->second ? cli_second_pullback(c, s->r, s->seeds, s->wrt, s->grads, &s->second, st)
                           : tl_result_pullback(s->r, s->seeds, s->grads, st);
        cli_progress_end(&p);
        t->backward = cli_now_ms() - t2;
        if (failed)
            return cli_fail_in(g, st);
    }
    int n = 0;
    for (int i = 0; i < no; i++) {
        s->names[n] = tl_result_output_name(s->r, i);
        s->ts[n++] = tl_result_output(s->r, i);
    }
    for (int k = 0; k < ni; k++) {
        if (!s->grads[k])
            continue;
        if (!(s->names[n] = grad_name(s, k, st)))
            return cli_fail(st);
        s->ts[n++] = s->grads[k];
    }
    n += cli_second_names(g, s->r, &s->second, s->names + n, s->ts + n);
    *nwrite = n;
    *noutw = no;
    return c->only ? apply_only(c->only, s->names, s->ts, nwrite, noutw, st) : 0;
}

/* Before the results are written: the tensors nothing below reads let go
 * (jvp's and hvp's inputs and tangents, and the seeds; run and grad gave
 * their inputs to the run), and every freed block of the process handed
 * back to the kernel (tensor.c's caches, then malloc's free memory).  The
 * file's pages in the page cache are new memory too, and where a VM's
 * host takes back the pages a guest has left free (free page reporting),
 * new memory is dear: on the Zen 5 VM, 32 MiB written into fresh page
 * cache took 60-100 ms and written into pages just handed back 14-22 ms;
 * `tl grad` of the max-pool benchmark (a 25.7 MB gradient) went from a
 * median of 119 to 88 ms run cold, ResNet-18's from 373 to 314 ms (its
 * writing from 68 to 25 ms), with no change run warm.  Nothing that is
 * written is touched: the bits are the same. */
static void let_go_before_writing(run_state *s)
{
    int ni = s->g ? s->g->ninputs : 0, no = s->r ? tl_result_noutputs(s->r) : 0;
    for (int k = 0; s->in && k < ni; k++) {
        tl_tensor_unref(s->in[k]);
        s->in[k] = NULL;
    }
    for (int k = 0; s->second.tangent && k < s->second.ninputs; k++) {
        tl_tensor_unref(s->second.tangent[k]);
        s->second.tangent[k] = NULL;
    }
    for (int i = 0; s->seeds && i < no; i++) {
        tl_tensor_unref(s->seeds[i]);
        s->seeds[i] = NULL;
    }
    tl_tensor_release_cache();
    malloc_trim(0);
}

static int execute(cmd *c)
{
    tl_status st = {0};
    const tl_backend *be;
    cli_times t = {.expect = c->expect ? 1 + !!c->output : 0, .requested = c->device ? c->device : "cpu"};
    int rc = cli_env_ok();
    if (rc || (rc = pick_backend(c, &be, t.device_why, sizeof t.device_why)))
        return rc;
    /* what can be checked before the graph is loaded: output paths and
     * formats, and the file to compare with */
    cli_out early = {c->output, c->json, c->full, NULL, -1, NULL, NULL, 0};
    tl_result_set *want = NULL;
    if ((c->output && cli_check_output(&early, &st)) || (c->report && cli_check_path(c->report, &st)) ||
        (c->expect && !(want = tl_result_set_read(c->expect, &st)) && tl_wrap(&st, "--expect %s", c->expect))) {
        tl_device_close(be);
        return cli_fail(&st);
    }
    /* --max-memory bounds reading the graph too: a graph or program read
     * whole from standard input (or any stream) past it is refused before
     * it is taken (it was read until the machine ran out) */
    int64_t early_limit;
    if (c->max_memory && (rc = parse_max_memory(c, &early_limit))) {
        tl_result_set_free(want);
        tl_device_close(be);
        return rc;
    }
    double t0 = cli_now_ms();
    tl_graph_options go = {c->outside};
    run_state s = {0};
    if (!(s.g = tl_onnx_is_model(c->graph) ? cli_model_open(c, &s.model, &st) : cli_load_graph(c->graph, &go, &st))) {
        tl_result_set_free(want);
        tl_device_close(be);
        return cli_fail(&st);
    }
    t.load = cli_now_ms() - t0;
    if (be == &tl_cpu_backend)
        tl_prepare(s.g); /* OpenBLAS loads while the inputs are read */
    int ni = s.g->ninputs, no = s.g->noutputs, nmax = 2 * (ni + no) + s.g->nslots;
    s.in = calloc((size_t)ni + 1, sizeof *s.in);
    s.grads = calloc((size_t)ni + 1, sizeof *s.grads);
    s.wrt = calloc((size_t)ni + 1, sizeof *s.wrt);
    s.out_slots = calloc((size_t)s.g->nslots + 1, sizeof *s.out_slots);
    s.names = calloc((size_t)nmax + 1, sizeof *s.names);
    s.ts = calloc((size_t)nmax + 1, sizeof *s.ts);
    s.gnames = calloc((size_t)ni + 1, sizeof *s.gnames);
    int n = 0, nout = 0;
    if (!s.in || !s.grads || !s.wrt || !s.out_slots || !s.names || !s.ts || !s.gnames)
        rc = (tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st));
    else
        rc = run_graph(c, be, &s, &n, &nout, &t, &st);
    double t1 = cli_now_ms();
    if (!rc && c->output)
        let_go_before_writing(&s);
    if (c->report && c->output) /* -o and --report named together: a failure of either changes neither */
        cli_defer_begin();
    if (!rc && c->expect) {
        rc = expect(c, want, n, s.names, s.ts, &st);
        if (rc <= 1 && c->output) { /* --expect with -o writes as well */
            cli_out out = {c->output, c->json, c->full, tl_result_device_name(s.r), n, s.names, s.ts, nout};
            if (cli_write(&out, &st))
                rc = cli_fail(&st);
        }
    } else if (!rc) {
        cli_out out = {c->output, c->json, c->full, tl_result_device_name(s.r), n, s.names, s.ts, nout};
        if (cli_write(&out, &st))
            rc = cli_fail(&st);
    }
    t.write = cli_now_ms() - t1;
    if (rc <= 1 && cli_is_program(c->graph) && !c->quiet) /* (after the run: a failure says one line) */
        cli_warn_unused(s.g);
    if (rc <= 1 && s.nograd[0] && !c->quiet)
        fprintf(stderr, "tl: warning: no gradient to write: %s\n", s.nograd);
    if (s.r && c->verbose)
        cli_print_verbose(s.r, c->grad || c->second, &t);
    if (s.r && c->profile)
        cli_print_profile(s.r);
    /* the report of a run whose results were written or compared (exit 0
     * or 1): one that failed at writing them leaves no file, as tl(1) says
     * of every output; a report that cannot be written is said and exits
     * 3, even after a difference (exit 1) */
    if (s.r && c->report && rc <= 1 && cli_write_report(c->report, s.g, s.r, &t, &st))
        rc = cli_fail(&st);
    if (c->report && c->output && (rc > 1 || cli_defer_commit(&st))) {
        cli_defer_abort();
        if (rc <= 1)
            rc = cli_fail(&st);
    }
    release(&s);
    tl_result_set_free(want);
    tl_device_close(be);
    cli_stdin_release();
    return rc;
}

int cmd_run(int argc, char **argv)
{
    cmd c = {.grad = !strcmp(argv[0], "grad") || !strcmp(argv[0], "hvp"),
             .second = !strcmp(argv[0], "jvp") ? 1 : !strcmp(argv[0], "hvp") ? 2 : 0};
    int rc = cli_parse_run_args(argc, argv, &c);
    if (!rc)
        rc = execute(&c);
    cli_run_args_free(&c);
    return rc;
}
