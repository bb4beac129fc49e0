/* tl check and tl dot: a graph looked at without running it.  Input types
 * come from NAME=DTYPE[DIMS] specs (a dim may be a size variable, or _
 * for any size), from real tensors (NAME=TENSOR), or from the graph's own
 * declarations.  A size variable stands for an unknown size: the check
 * gives it a value of its own, large and unlike any literal size, and
 * prints it back by name ("n", "2*n", "n/2"). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "exec/check.h"
#include "formats/text.h"
#include "graph/onnx.h"

#define MAX_VARS 64

typedef struct sizes {
    int n;
    char name[MAX_VARS][64];
    int64_t value[MAX_VARS];
    int next;          /* the next prime's index to try */
    const char *avoid; /* the graph's text and the command line: numbers written there */
} sizes;

/* Whether the number v is written in text, standing alone. */
static bool written(const char *text, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%lld", (long long)v);
    for (const char *p = text; p && (p = strstr(p, num)); p++)
        if ((p == text || !isdigit((unsigned char)p[-1])) && !isdigit((unsigned char)p[n]))
            return true;
    return false;
}

/* 5040 times a prime: divisible by 2..10, large, and each one unlike the
 * others, so products and quotients can be read back; and unlike every
 * number written in the graph or on the command line, nor a multiple or a
 * tenth of one, so that no size written there is taken for a variable
 * (reshape to [509040] of f64[n] passed, until tests/cli/inspect.txt's case). */
static int64_t var_value(sizes *z)
{
    for (int64_t p = z->next ? z->next : 101;; p++) {
        bool prime = true;
        for (int64_t d = 2; d * d <= p && prime; d++)
            prime = p % d != 0;
        if (!prime)
            continue;
        int64_t v = 5040 * p;
        bool taken = false;
        for (int k = 1; k <= 10 && !taken && z->avoid; k++)
            taken = written(z->avoid, v * k) || (v % k == 0 && written(z->avoid, v / k));
        if (!taken) {
            z->next = (int)p + 1;
            return v;
        }
    }
}

/* The value standing for size variable name ("_": a new one each time). */
static int64_t var_of(sizes *z, const char *name, size_t len)
{
    for (int i = 0; i < z->n && !(len == 1 && name[0] == '_'); i++)
        if (strlen(z->name[i]) == len && !strncmp(z->name[i], name, len))
            return z->value[i];
    if (z->n == MAX_VARS)
        return -1;
    snprintf(z->name[z->n], sizeof z->name[0], "%.*s", (int)(len < 63 ? len : 63), name);
    z->value[z->n] = var_value(z);
    return z->value[z->n++];
}

/* v in terms of the size variables ("n", "2*n", "n/2", "3*n/2", "n*m",
 * "n-1", "2*n+3"), or false where it is none of them. */
static bool named(const sizes *z, int64_t v, char *buf, size_t len)
{
    for (int i = 0; i < z->n && v > 0 && v < INT64_MAX / 16; i++) { /* a*n/b, then with an offset below 1000 */
        int64_t s = z->value[i];
        for (int pass = 0; pass < 2; pass++)
            for (int64_t b = 1; b <= 10; b++) {
                int64_t a = (v * b + s / 2) / s; /* the nearest a/b of n */
                if (a < 1 || a >= 5040 || (a % b == 0 && b > 1) || (a * s) % b)
                    continue;
                int64_t base = a * s / b, d = v - base;
                if (pass == 0 ? d != 0 : d == 0 || d <= -1000 || d >= 1000)
                    continue;
                int k = a == 1 ? snprintf(buf, len, "%s", z->name[i])
                               : snprintf(buf, len, "%lld*%s", (long long)a, z->name[i]);
                if (b > 1)
                    k += snprintf(buf + k, len - (size_t)k, "/%lld", (long long)b);
                if (d)
                    snprintf(buf + k, len - (size_t)k, "%+lld", (long long)d);
                return true;
            }
    }
    for (int i = 0; i < z->n; i++)
        for (int j = i; j < z->n; j++)
            if (v == z->value[i] * z->value[j]) {
                snprintf(buf, len, "%s*%s", z->name[i], z->name[j]);
                return true;
            }
    return false;
}

/* A size as text: a number, or in terms of the size variables. */
static void dim_text(const sizes *z, int64_t v, char *buf, size_t len)
{
    if (!named(z, v, buf, len))
        snprintf(buf, len, "%lld", (long long)v);
}

/* An error from the check speaks of sizes as numbers: put the size
 * variables' names back where their values stand alone (before the
 * message is placed in a program's text, whose lines and columns are
 * numbers too). */
static int fail_named(const tl_graph *g, const sizes *z, tl_status *st)
{
    char out[sizeof st->msg];
    size_t k = 0;
    for (const char *p = st->msg; *p && k + 64 < sizeof out;) {
        size_t nd = strspn(p, "0123456789");
        char name[96];
        if (nd && nd < 19 && (p == st->msg || !isdigit((unsigned char)p[-1])) &&
            named(z, strtoll(p, NULL, 10), name, sizeof name)) { /* (sizes of 50000 and up only) */
            k += (size_t)snprintf(out + k, sizeof out - k, "%s", name);
            p += nd;
        } else {
            for (size_t j = 0; j < (nd ? nd : 1) && k + 64 < sizeof out; j++)
                out[k++] = *p++;
        }
    }
    out[k] = '\0';
    memcpy(st->msg, out, k + 1);
    return cli_fail_in(g, st);
}

static void type_text(const sizes *z, const tl_type *t, char *buf, size_t len)
{
    if (t->weak) {
        snprintf(buf, len, "number");
        return;
    }
    size_t k = (size_t)snprintf(buf, len, "%s[", tl_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && k < len; d++) {
        char dim[96];
        dim_text(z, t->dims[d], dim, sizeof dim);
        k += (size_t)snprintf(buf + k, len - k, d ? ",%s" : "%s", dim);
    }
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

/* "f32[n,3]": a type spec; false when text is not one (then it is a
 * tensor). */
static bool parse_spec(sizes *z, const char *text, tl_type *t, tl_status *st)
{
    const char *br = strchr(text, '[');
    char dt[16];
    struct stat sb;
    if (!br && tl_dtype_parse(text, &t->dtype) && stat(text, &sb)) /* x=f32, not a file of that name */
        return tl_fail(st, TL_EINPUT, "'%s': a type is DTYPE[DIMS], such as %s[n,3] (%s[] for a number)", text,
                       text, text), true;
    if (!br || (size_t)(br - text) >= sizeof dt)
        return false;
    snprintf(dt, sizeof dt, "%.*s", (int)(br - text), text);
    *t = (tl_type){0};
    if (!tl_dtype_parse(dt, &t->dtype)) {
        if (br > text && isalpha((unsigned char)text[0]) && strspn(text, "abcdefghijklmnopqrstuvwxyz0123456789") ==
            (size_t)(br - text) && stat(text, &sb)) /* f16[2]: a type, of a dtype tl lacks */
            return tl_fail(st, TL_EINPUT, "'%s': unknown dtype %s (tl's are f32, f64, i32 and i64)", text, dt), true;
        return false;
    }
    uint64_t numel = 1; /* of the sizes given as numbers (size variables are free), at most 2^60 */
    if (text[strlen(text) - 1] != ']')
        return tl_fail(st, TL_EINPUT, "'%s': a type is DTYPE[DIMS], such as f32[n,3]", text), true;
    for (const char *p = br + 1; *p != ']';) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, ",]");
        while (n && p[n - 1] == ' ')
            n--;
        if (t->ndim == TL_MAXDIM)
            return tl_fail(st, TL_EINPUT, "'%s': more than %d dimensions", text, TL_MAXDIM), true;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        bool number = n && isdigit((unsigned char)p[0]) && end == p + n && v >= 0;
        if (number && (errno || (v && numel > (UINT64_C(1) << 60) / (uint64_t)v)))
            return tl_fail(st, TL_EINPUT, "'%s': more than 2^60 elements", text), true;
        if (number)
            t->dims[t->ndim++] = v, numel *= (uint64_t)v;
        else if (n && strspn(p, "_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") >= n &&
                 !isdigit((unsigned char)p[0]) && (t->dims[t->ndim++] = var_of(z, p, n)) > 0)
            ;
        else
            return tl_fail(st, TL_EINPUT, "'%s': a size is a number, a name or _", text), true;
        p += strcspn(p, ",]");
        if (*p == ',')
            p++;
        while (*p == ' ')
            p++;
        if (!*p)
            break;
    }
    return true;
}

/* From the graph's declaration, when it gives a dtype and a shape. */
static bool declared(sizes *z, const tl_graph *g, const tl_input *in, tl_type *t)
{
    if (!in->has_dtype || in->ndim < 0)
        return false;
    *t = (tl_type){in->dtype, in->ndim, {0}, false};
    for (int d = 0; d < in->ndim; d++) {
        const tl_dimspec *s = &in->dims[d];
        const char *name = s->kind == TL_DIM_VAR ? g->sizevars[s->var] : "_";
        t->dims[d] = s->kind == TL_DIM_FIXED ? s->size : var_of(z, name, strlen(name));
    }
    return true;
}

/* Each file constant of g read (and let go): 0, or its error said. */
static int read_file_consts(const tl_graph *g, tl_status *st)
{
    for (int i = 0; i < g->nconsts; i++) {
        tl_tensor *t = g->consts[i].kind == TL_CONST_FILE ? tl_const_read_file(&g->consts[i], st) : NULL;
        tl_tensor_unref(t);
        if (st->code)
            return cli_fail_in(g, st);
    }
    return 0;
}

int cli_check_declared(const tl_graph *g, tl_status *st)
{
    sizes z = {0};
    tl_type *types = calloc((size_t)g->ninputs + 1, sizeof *types);
    if (!types)
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    bool typed = true;
    for (int k = 0; k < g->ninputs && typed; k++)
        typed = declared(&z, g, &g->inputs[k], &types[k]);
    /* (the check reads the file constants; untyped, they are read alone) */
    int rc = !typed ? read_file_consts(g, st) : tl_check(g, types, NULL, NULL, st) ? fail_named(g, &z, st) : 0;
    free(types);
    return rc;
}

/* -i FILE, --inputs FILE or --inputs=FILE at argv[i]: the file (- for
 * standard input), its argument skipped; NULL for anything else. */
static const char *inputs_opt(int argc, char **argv, int *i)
{
    if (!strncmp(argv[*i], "--inputs=", 9))
        return argv[*i] + 9;
    if ((!strcmp(argv[*i], "-i") || !strcmp(argv[*i], "--inputs")) && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

/* argv[i] is a binding NAME=...: not an option, the graph, or an option's
 * argument (-e TEXT, -i FILE) */
static bool binding(char **argv, int i, const char *graph)
{
    return argv[i] != graph && strchr(argv[i], '=') && argv[i][0] != '-' && strcmp(argv[i - 1], "-e") &&
           strcmp(argv[i - 1], "-i") && strcmp(argv[i - 1], "--inputs");
}

/* The inputs not named on the command line that a -i file holds, as run
 * takes them: each read into in[k] (a tensor), or its type into types[k]
 * (types non-NULL: set[k] then marks it). */
static int from_files(int argc, char **argv, const tl_graph *g, tl_tensor **in, tl_type *types, bool *set,
                      tl_status *st)
{
    for (int i = 1; i < argc; i++) {
        const char *path = inputs_opt(argc, argv, &i);
        if (!path)
            continue;
        bool std = !strcmp(path, "-");
        tl_result_file *z = std ? cli_stdin_file(st) : tl_result_file_open(path, st);
        if (!z)
            return tl_wrap(st, "%s", std ? "standard input" : path), -1;
        for (int k = 0; k < g->ninputs; k++) {
            const char *name = g->inputs[k].name;
            if ((types ? set[k] : in[k] != NULL) || !tl_result_file_has(z, name))
                continue;
            tl_tensor *t = tl_result_file_get(z, name, st);
            if (!t) {
                tl_wrap(st, "%s: input \"%s\"", std ? "standard input" : path, name);
                if (!std)
                    tl_result_file_close(z);
                return -1;
            }
            if (types) {
                types[k] = tl_type_of(t);
                set[k] = true;
                tl_tensor_unref(t);
            } else {
                in[k] = t;
            }
        }
        if (!std)
            tl_result_file_close(z);
    }
    return 0;
}

typedef struct looked {
    tl_graph *g;
    tl_type *types; /* per input */
    bool typed;     /* every input has a type */
    sizes z;
    char *avoid;    /* z.avoid's text, owned */
} looked;

/* The text of the graph (not of a model) and of the command line, where
 * the size variables' stand-ins must not appear. */
static char *written_text(int argc, char **argv, const char *graph, const char *inlined)
{
    char *buf = NULL;
    size_t cap = 0;
    FILE *m = open_memstream(&buf, &cap);
    if (!m)
        return NULL;
    for (int i = 1; i < argc; i++)
        fprintf(m, "%s\n", argv[i]);
    FILE *f = inlined || tl_onnx_is_model(graph) ? NULL : fopen(graph, "rb");
    char chunk[65536];
    for (size_t n, total = 0; f && total < ((size_t)64 << 20) && (n = fread(chunk, 1, sizeof chunk, f)) > 0;
         total += n)
        fwrite(chunk, 1, n, m);
    if (f)
        fclose(f);
    if (inlined)
        fputs(inlined, m);
    return fclose(m) ? (free(buf), NULL) : buf;
}

/* Whether signature input i, given nothing and with no default, is
 * declared with a dim that has no size (a name such as N, or none): here,
 * unlike tl run, its type fixes it, and the message says so with the
 * declared type, each such dim made 1 ("input.1=f32[1,3]"). */
static bool unsized_input(tl_onnx_model *m, int i, const char *name, const char *path, tl_status *st)
{
    tl_tensor *d = tl_onnx_default(m, i);
    if (d) {
        tl_tensor_unref(d);
        return false;
    }
    char type[160], sized[200];
    tl_onnx_input_text(m, i, type, sizeof type);
    const char *open = strchr(type, '[');
    if (!open || open[1] == ']')
        return false; /* no shape, or a scalar: the translation says what it lacks */
    char dtype[16] = "f32"; /* what the translation takes where the model declares no type */
    tl_dtype dt;
    if (open > type && (snprintf(dtype, sizeof dtype, "%.*s", (int)(open - type), type) >= (int)sizeof dtype ||
                        !tl_dtype_parse(dtype, &dt)))
        return false; /* a type tl does not compute in: the translation says so */
    size_t k = (size_t)snprintf(sized, sizeof sized, "%s[", dtype);
    bool unsized = false;
    for (const char *p = open + 1; *p && k + 4 < sizeof sized;) {
        size_t n = strcspn(p, ",]");
        bool number = n > 0 && strspn(p, "0123456789") == n;
        unsized |= !number;
        k += (size_t)snprintf(sized + k, sizeof sized - k, "%.*s%c", number ? (int)n : 1, number ? p : "1",
                              p[n] ? p[n] : ']');
        p += n + (p[n] != '\0');
    }
    if (!unsized)
        return false;
    return tl_fail(st, TL_EINPUT, "%s: input \"%.200s\" is declared %s, with a dim of no size: give its sizes "
                   "(such as %.200s=%s) or a tensor", path, name, type, name, sized) != TL_OK;
}

/* An ONNX model's shapes are fixed when it is translated: the model
 * translated for the types and tensors given (zeros of a type's shape),
 * its declared shapes and defaults for the rest. */
static tl_graph *model_for(int argc, char **argv, const char *path, bool outside, tl_status *st)
{
    tl_onnx_options o = {.allow_outside_files = outside};
    tl_onnx_model *m = tl_onnx_open(path, &o, st);
    tl_graph *sig = m ? tl_onnx_signature(m, st) : NULL, *g = NULL;
    tl_tensor **in = sig ? calloc((size_t)sig->ninputs + 1, sizeof *in) : NULL;
    bool ok = in != NULL;
    if (sig && !in)
        tl_fail(st, TL_ERUNTIME, "out of memory");
    for (int i = 1; i < argc && ok; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!binding(argv, i, path))
            continue;
        int n = (int)(eq - argv[i]);
        char name[300], hint[400];
        snprintf(name, sizeof name, "%.*s", n < 299 ? n : 299, argv[i]);
        int k = n < 256 ? tl_graph_input_index(sig, name) : -1;
        sizes z = {0};
        tl_type t;
        if (k < 0)
            ok = !tl_fail(st, TL_EINPUT, "%s: \"%s\" is not an input of the model%s", path, name,
                          cli_model_input_hint(m, sig, name, hint, sizeof hint));
        else if (in[k])
            continue; /* given twice: look's own pass says so */
        else if (parse_spec(&z, eq + 1, &t, st))
            ok = !st->code && (z.n == 0 || !tl_fail(st, TL_EINPUT, "input \"%s\": an ONNX model's shapes are "
                                                   "fixed when it is loaded: give sizes (such as f32[8,3]), not "
                                                   "size variables", name)) &&
                 (in[k] = tl_tensor_zeros(t.dtype, t.ndim, t.dims, st)) != NULL;
        else if (!(in[k] = cli_read_tensor(eq + 1, st)))
            ok = (tl_wrap(st, "input \"%s\"", name), false);
    }
    if (ok && from_files(argc, argv, sig, in, NULL, NULL, st))
        ok = false;
    for (int i = 0; ok && i < sig->ninputs; i++) /* the types given against the model's */
        if (tl_onnx_check_input(m, i, in[i], st))
            ok = (tl_wrap(st, "%s", path), false);
    for (int i = 0; ok && i < sig->ninputs; i++)
        if (!in[i])
            ok = !unsized_input(m, i, sig->inputs[i].name, path, st);
    if (ok)
        g = tl_onnx_translate_declared(m, in, st);
    for (int i = 0; in && i < sig->ninputs; i++)
        tl_tensor_unref(in[i]);
    free(in);
    tl_graph_free(sig);
    tl_onnx_free(m);
    return g;
}

/* Loads the graph and the input types from the arguments. */
static int look(int argc, char **argv, const char *cmd, looked *l, tl_status *st)
{
    const char *graph = NULL;
    char *inlined = NULL; /* -e TEXT */
    bool outside = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allow-outside-files"))
            outside = true;
        else if (inputs_opt(argc, argv, &i))
            continue;
        else if (!strcmp(argv[i], "-i") || !strcmp(argv[i], "--inputs"))
            return cli_usage("%s takes a result file (.npz, json, text; - for stdin)", argv[i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc && !inlined && (!graph || strchr(graph, '=')))
            graph = inlined = cli_inline_graph(argv[++i]); /* a GRAPH read before was a binding */
        else if (argv[i][0] == '-' && argv[i][1])
            return cli_unknown_option(cmd, argv[i]);
        else if (!graph)
            graph = argv[i];
        else if (!strchr(argv[i], '='))
            return cli_usage("'%s' is not NAME=SPEC or NAME=TENSOR", argv[i]);
    }
    if (!graph)
        return cli_usage("no graph file given: tl %s GRAPH [NAME=DTYPE[DIMS]]...", cmd);
    tl_graph_options go = {outside};
    l->g = !inlined && tl_onnx_is_model(graph) ? model_for(argc, argv, graph, outside, st)
                                               : cli_load_graph(graph, &go, st);
    if (l->g)
        l->z.avoid = l->avoid = written_text(argc, argv, graph, inlined);
    if (inlined)
        free(inlined), graph = NULL;
    if (!l->g)
        return cli_fail(st);
    tl_graph *g = l->g;
    bool *set = calloc((size_t)g->ninputs + 1, sizeof *set);
    l->types = calloc((size_t)g->ninputs + 1, sizeof *l->types);
    if (!set || !l->types) {
        free(set);
        return tl_fail(st, TL_ERUNTIME, "out of memory"), cli_fail(st);
    }
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!binding(argv, i, graph))
            continue;
        char name[300];
        size_t n = (size_t)(eq - argv[i]);
        snprintf(name, sizeof name, "%.*s", (int)(n < 299 ? n : 299), argv[i]);
        int k = n < 256 ? tl_graph_input_index(g, name) : -1;
        tl_status_clear(st);
        char hint[400];
        if (k < 0)
            rc = (tl_fail(st, TL_EINPUT, "%s: \"%s\" is not an input of the graph%s", g->path, name,
                          cli_input_hint(g, name, hint, sizeof hint)), cli_fail(st));
        else if (set[k])
            rc = (tl_fail(st, TL_EINPUT, "input \"%s\" is given twice", name), cli_fail(st));
        else if (parse_spec(&l->z, eq + 1, &l->types[k], st)) {
            if (st->code)
                rc = cli_fail(st);
        } else {
            tl_tensor *t = cli_read_tensor(eq + 1, st);
            if (!t)
                rc = (tl_wrap(st, "input \"%s\"", name), cli_fail(st));
            else
                l->types[k] = tl_type_of(t);
            tl_tensor_unref(t);
        }
        if (k >= 0)
            set[k] = true;
    }
    if (!rc && from_files(argc, argv, g, NULL, l->types, set, st))
        rc = cli_fail(st);
    if (rc) {
        free(set);
        cli_stdin_release();
        return rc;
    }
    l->typed = true;
    for (int k = 0; k < g->ninputs; k++)
        if (!set[k] && g->inputs[k].dflt) { /* a default: its type */
            tl_tensor *t = tl_input_default(g, k, st);
            if (!t)
                return free(set), cli_fail(st);
            l->types[k] = tl_type_of(t);
            tl_tensor_unref(t);
        } else if (!set[k] && !declared(&l->z, g, &g->inputs[k], &l->types[k])) {
            l->typed = false;
        }
    free(set);
    cli_stdin_release();
    return rc;
}

static void unlook(looked *l)
{
    free(l->types);
    free(l->avoid);
    tl_graph_free(l->g);
}

/* ---------- tl check ---------- */

typedef struct printer {
    const looked *l;
    int width; /* of the name column */
    FILE *out; /* the table, printed only once every node has its type */
} printer;

/* The name column: as wide as the longest name (an ONNX model's run to
 * "/layer1/layer1.0/conv1/Conv_output_0"), from 16 to 48 characters. */
static int name_width(const tl_graph *g)
{
    size_t w = 16;
    for (int s = 0; s < g->nslots; s++)
        if (g->slot_name[s] && strlen(g->slot_name[s]) > w)
            w = strlen(g->slot_name[s]);
    return w > 48 ? 48 : (int)w;
}

static void print_node(void *ctx, const tl_node *n, int depth, const char *block, const tl_type *out)
{
    const printer *p = ctx;
    for (int k = 0; k < n->nout; k++) {
        char ty[512], pad[64];
        type_text(&p->l->z, &out[k], ty, sizeof ty);
        snprintf(pad, sizeof pad, "%*s%s%s", 2 * depth, "", block, block[0] ? " " : "");
        fprintf(p->out, "  %s%-*s %-13s %s\n", pad, p->width, p->l->g->slot_name[n->out[k]],
                k ? "" : tl_ops[n->op].name, ty);
    }
}

int cmd_check(int argc, char **argv)
{
    tl_status st = {0};
    looked l = {0};
    int rc = look(argc, argv, "check", &l, &st);
    if (rc) {
        unlook(&l);
        return rc;
    }
    const tl_graph *g = l.g;
    if (!l.typed && (rc = read_file_consts(g, &st))) { /* file constants are read, typed or not */
        unlook(&l);
        return rc;
    }
    if (!l.typed) {
        printf("%s: valid (%d inputs, %d nodes); give every input a type (NAME=f32[2,3]) to see "
               "each node's dtype and shape\n", g->path, g->ninputs, g->nnodes);
        unlook(&l);
        return cli_finish_stdout();
    }
    /* A graph that fails the check prints its error alone: no table cut
     * off at the failing node above it (the error names the node). */
    char *table = NULL;
    size_t tlen = 0;
    printer p = {&l, name_width(g), open_memstream(&table, &tlen)};
    if (!p.out)
        return unlook(&l), tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st);
    fprintf(p.out, "%s: inputs\n", g->path);
    for (int i = 0; i < g->ninputs; i++) {
        char ty[512];
        type_text(&l.z, &l.types[i], ty, sizeof ty);
        fprintf(p.out, "  %-*s %-13s %s\n", p.width, g->inputs[i].name, "input", ty);
    }
    fprintf(p.out, "nodes\n");
    if (tl_check(g, l.types, print_node, &p, &st)) {
        rc = fail_named(g, &l.z, &st);
    } else if (fflush(p.out) || ferror(p.out)) {
        rc = (tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st));
    } else {
        fwrite(table, 1, tlen, stdout);
        printf("outputs:");
        for (int i = 0; i < g->noutputs; i++)
            printf(" %s", g->slot_name[g->outputs[i]]);
        printf("\n%s: ok\n", g->path);
        rc = cli_finish_stdout();
    }
    fclose(p.out);
    free(table);
    unlook(&l);
    return rc;
}

/* ---------- tl dot ---------- */

typedef struct dot {
    const looked *l;
    tl_type *slot_type; /* per slot, when the inputs are typed */
    bool *has_type;
    int cluster;
    FILE *edges; /* written after every node: an edge inside a cluster would pull its ends in */
} dot;

static void record_type(void *ctx, const tl_node *n, int depth, const char *block, const tl_type *out)
{
    dot *d = ctx;
    (void)depth, (void)block;
    for (int k = 0; k < n->nout; k++) {
        d->slot_type[n->out[k]] = out[k];
        d->has_type[n->out[k]] = true;
    }
}

/* An edge from the value in slot s to node target (a dot id). */
static void edge(dot *d, int s, const char *target, const char *label)
{
    fprintf(d->edges, "  s%d -> %s", s, target);
    char ty[512] = "";
    if (d->has_type[s])
        type_text(&d->l->z, &d->slot_type[s], ty, sizeof ty);
    if (ty[0] || label)
        fprintf(d->edges, " [label=\"%s%s%s\"]", label ? label : "", label && ty[0] ? " " : "", ty);
    fprintf(d->edges, ";\n");
}

static void dot_block(dot *d, const tl_block *b);

/* A name inside a DOT string: '"' and '\' escaped, a line break as \n (an
 * ONNX model's names may hold any of them); cut at the buffer's end. */
static const char *dot_esc(const char *s, char *buf, size_t len)
{
    size_t k = 0;
    for (; *s && k + 3 < len; s++) {
        if (*s == '"' || *s == '\\' || *s == '\n')
            buf[k++] = '\\';
        buf[k++] = *s == '\n' ? 'n' : *s;
    }
    buf[k] = '\0';
    return buf;
}

static void dot_node(dot *d, const tl_node *n)
{
    const tl_graph *g = d->l->g;
    char id[32], label[600], nm[512];
    snprintf(id, sizeof id, "s%d", n->out[0]);
    size_t k = (size_t)snprintf(label, sizeof label, "%s\\n%s", dot_esc(g->slot_name[n->out[0]], nm, sizeof nm),
                                tl_ops[n->op].name);
    for (int i = 0; i < n->nargs && k + 40 < sizeof label; i++) {
        char num[TL_FMT_LEN]; /* shortest, as compile and diff print numbers (1.1, not 1.1000000000000001) */
        if (n->args[i].slot < 0 && tl_fmt_f64(num, sizeof num, n->args[i].num) >= 0)
            k += (size_t)snprintf(label + k, sizeof label - k, "\\narg %d: %s", i + 1, num);
    }
    printf("  %s [label=\"%s\"];\n", id, label);
    for (int i = 1; i < n->nout; i++) { /* further results of if / iterate */
        printf("  s%d [label=\"%s\", shape=plain];\n", n->out[i], dot_esc(g->slot_name[n->out[i]], nm, sizeof nm));
        fprintf(d->edges, "  %s -> s%d [style=dashed];\n", id, n->out[i]);
    }
    for (int i = 0; i < n->nargs; i++)
        if (n->args[i].slot >= 0)
            edge(d, n->args[i].slot, id, n->op == TL_OP_ITERATE ? "init" : NULL);
    if (n->op == TL_OP_IF && n->flow->cond.slot >= 0)
        edge(d, n->flow->cond.slot, id, "cond");
    const tl_block *blocks[3] = {n->flow->then_b, n->flow->else_b, n->flow->body};
    const char *names[3] = {"then", "else", n->op == TL_OP_MAP ? "body (per element)" : "body"};
    for (int j = 0; j < 3; j++) {
        if (!blocks[j])
            continue;
        printf("  subgraph cluster_%d {\n  label=\"%s: %s\"; style=rounded;\n", d->cluster++,
               dot_esc(g->slot_name[n->out[0]], nm, sizeof nm), names[j]);
        int np = n->op == TL_OP_ITERATE ? n->nargs : n->op == TL_OP_MAP ? n->nargs : 0;
        for (int i = 0; j == 2 && i < np; i++) { /* the block's parameters */
            int s = n->op == TL_OP_ITERATE ? n->flow->state[i] : n->flow->params[i];
            printf("  s%d [label=\"%s\\n%s\", shape=ellipse, style=dashed];\n", s, dot_esc(g->slot_name[s], nm, sizeof nm),
                   n->op == TL_OP_ITERATE ? "state" : "param");
        }
        if (j == 2 && n->op == TL_OP_ITERATE && n->flow->index_slot >= 0)
            printf("  s%d [label=\"%s\\nstep index\", shape=ellipse, style=dashed];\n", n->flow->index_slot,
                   dot_esc(g->slot_name[n->flow->index_slot], nm, sizeof nm));
        dot_block(d, blocks[j]);
        printf("  }\n");
        for (int r = 0; r < blocks[j]->nresult; r++)
            fprintf(d->edges, "  s%d -> %s [style=dotted, label=\"result\"];\n", blocks[j]->result[r], id);
    }
}

static void dot_block(dot *d, const tl_block *b)
{
    for (int i = 0; i < b->nnodes; i++)
        dot_node(d, &b->nodes[i]);
}

int cmd_dot(int argc, char **argv)
{
    tl_status st = {0};
    looked l = {0};
    int rc = look(argc, argv, "dot", &l, &st);
    const tl_graph *g = l.g;
    char *edges = NULL;
    size_t elen = 0;
    dot d = {&l, NULL, NULL, 0, open_memstream(&edges, &elen)};
    if (!d.edges)
        return unlook(&l), tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st);
    if (!rc && (!(d.slot_type = calloc((size_t)g->nslots + 1, sizeof *d.slot_type)) ||
                !(d.has_type = calloc((size_t)g->nslots + 1, sizeof *d.has_type))))
        rc = (tl_fail(&st, TL_ERUNTIME, "out of memory"), cli_fail(&st));
    if (!rc && l.typed) {
        for (int i = 0; i < g->ninputs; i++) {
            d.slot_type[g->inputs[i].slot] = l.types[i];
            d.has_type[g->inputs[i].slot] = true;
        }
        if (tl_check(g, l.types, record_type, &d, &st))
            rc = fail_named(g, &l.z, &st);
    }
    if (!rc) {
        printf("digraph tl {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
        printf("  edge [fontname=\"monospace\", fontsize=10];\n");
        char nm[512];
        for (int i = 0; i < g->ninputs; i++)
            printf("  s%d [label=\"%s\\ninput\", shape=ellipse];\n", g->inputs[i].slot,
                   dot_esc(g->inputs[i].name, nm, sizeof nm));
        for (int i = 0; i < g->nconsts; i++)
            printf("  s%d [label=\"%s\\nconst\", shape=note];\n", g->consts[i].slot,
                   dot_esc(g->consts[i].name, nm, sizeof nm));
        dot_block(&d, &g->top);
        for (int i = 0; i < g->noutputs; i++)
            printf("  out%d [label=\"output %s\", shape=plaintext];\n  s%d -> out%d;\n", i,
                   dot_esc(g->slot_name[g->outputs[i]], nm, sizeof nm), g->outputs[i], i);
        fflush(d.edges);
        fputs(edges, stdout);
        printf("}\n");
        rc = cli_finish_stdout();
    }
    fclose(d.edges);
    free(edges);
    free(d.slot_type);
    free(d.has_type);
    unlook(&l);
    return rc;
}
