/* What every command shares: one-line errors, option values, standard
 * output, and loading a graph. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli/options.h"
#include "graph/onnx.h"
#include "formats/npy.h"
#include "formats/sniff.h"

void cli_print_escaped(FILE *f, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

int cli_fail(const tl_status *st)
{
    fputs("tl: error: ", stderr);
    cli_print_escaped(stderr, st->msg);
    fputc('\n', stderr);
    cli_print_caret(stderr);
    return st->code ? (int)st->code : 3;
}

static int usage_with(const char *where, const char *fmt, va_list ap)
{
    tl_status st = {TL_EINPUT, ""};
    vsnprintf(st.msg, sizeof st.msg - 40, fmt, ap);
    strcat(st.msg, where);
    return cli_fail(&st);
}

int cli_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_with(" (see tl --help)", fmt, ap);
    va_end(ap);
    return rc;
}

int cli_env_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = usage_with(" (see ENVIRONMENT in man tl)", fmt, ap);
    va_end(ap);
    return rc;
}

bool cli_stdout_gone(void) { return ferror(stdout) && errno == EPIPE; }

int cli_finish_stdout(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    if (cli_stdout_gone()) /* the reader has gone (tl ops | head): nothing left to do */
        return 0;
    fprintf(stderr, "tl: error: writing standard output: %s\n", strerror(errno ? errno : EIO));
    return TL_ERUNTIME;
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool cli_is_opt(const char *arg, const char *s, const char *l)
{
    size_t n = l ? strlen(l) : 0;
    return (s && !strcmp(arg, s)) || (l && !strncmp(arg, l, n) && (arg[n] == '\0' || arg[n] == '='));
}

/* The option of the table arg is (-o, --output, --output=F), or NULL. */
static const cli_option *table_option(const char *arg)
{
    for (int k = 0; k < CLI_NOPTIONS; k++)
        if (cli_is_opt(arg, cli_options[k].s, cli_options[k].l))
            return &cli_options[k];
    return NULL;
}

static int command_bit(const char *cmd)
{
    for (int k = 0; k < CLI_NCOMMANDS; k++)
        if (!strcmp(cmd, cli_command_names[k]))
            return 1 << k;
    return 0;
}

/* "tl grad, hvp and gradcheck": the commands of bits */
static void command_list(int bits, char *buf, size_t len)
{
    int n = 0, total = 0;
    for (int k = 0; k < CLI_NCOMMANDS; k++)
        total += !!(bits & 1 << k);
    size_t at = (size_t)snprintf(buf, len, "tl");
    for (int k = 0; k < CLI_NCOMMANDS && at < len; k++)
        if (bits & 1 << k)
            at += (size_t)snprintf(buf + at, len - at, "%s %s", !n++ ? "" : n == total ? " and" : ",",
                                   cli_command_names[k]);
}

/* The "=VALUE" of arg given as --long=VALUE, else NULL. */
static const char *inline_value(const cli_option *o, const char *arg)
{
    return o->l && !strncmp(arg, o->l, strlen(o->l)) ? strchr(arg, '=') : NULL;
}

bool cli_value_follows(const char *arg)
{
    const cli_option *o = table_option(arg);
    return o && o->value && !inline_value(o, arg);
}

/* Options that may come more than once: each adds one more. */
static bool repeats(const cli_option *o)
{
    static const char *const many[] = {"-e", "--inputs", "--seed", "--tangent"};
    for (size_t k = 0; k < sizeof many / sizeof many[0]; k++)
        if ((o->s && !strcmp(o->s, many[k])) || (o->l && !strcmp(o->l, many[k])))
            return true;
    return false;
}

int cli_check_options(const char *cmd, int argc, char **argv)
{
    int bit = command_bit(cmd);
    const char *first[CLI_NOPTIONS] = {0}; /* each valued option's value, once given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cli_option *o = table_option(a);
        if (!o)
            continue;
        const char *name = o->l && !strncmp(a, "--", 2) ? o->l : o->s;
        if (!(o->cmds & bit)) {
            char others[160];
            command_list(o->cmds, others, sizeof others);
            /* the one refusal with a reason of its own */
            const char *why = bit == CLI_GRADCHECK && o->s && !strcmp(o->s, "-d") ? ", which runs on the CPU" : "";
            return cli_usage("%s is not an option of tl %s%s (it is one of %s)", name, cmd, why, others);
        }
        const char *eq = inline_value(o, a);
        if (eq && !o->value)
            return cli_usage("%s takes no value, got '%s'", o->l, eq + 1);
        const char *v = eq ? eq + 1 : o->value && i + 1 < argc ? argv[i + 1] : NULL;
        int k = (int)(o - cli_options);
        bool list = o->l && (!strcmp(o->l, "--wrt") || !strcmp(o->l, "--only") || !strcmp(o->l, "--of") ||
                             !strcmp(o->l, "--outputs"));
        if (v && !repeats(o) && first[k]) /* the first would be dropped without a word */
            return cli_usage("%s given twice (%s, then %s)%s", name, first[k], v,
                             list ? ": it takes a list, NAME,NAME,..." : "");
        if (v)
            first[k] = v;
        i += o->value && !eq; /* its value, whatever it looks like */
    }
    return 0;
}

int cli_unknown_option(const char *cmd, const char *a)
{
    static const char *const threads[] = {"threads", "thread", "num-threads", "nthreads", "jobs"};
    /* the long names without their "--": the command's, and every one */
    const char *known[CLI_NOPTIONS], *every[CLI_NOPTIONS];
    int n = 0, m = 0, bit = command_bit(cmd);
    for (int k = 0; k < CLI_NOPTIONS; k++)
        if (cli_options[k].l) {
            every[m++] = cli_options[k].l + 2;
            if (cli_options[k].cmds & bit)
                known[n++] = cli_options[k].l + 2;
        }
    size_t len = strcspn(a, "="); /* --name=value */
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), a);
    bool dashes = !strncmp(name, "--", 2);
    bool thread_count = !strncmp(name, "-j", 2) && (!name[2] || (name[2] >= '0' && name[2] <= '9'));
    for (size_t k = 0; dashes && k < sizeof threads / sizeof threads[0]; k++)
        thread_count |= !strcmp(name + 2, threads[k]);
    if (thread_count)
        return cli_usage("unknown option %s: the thread count is set in the environment, TL_NUM_THREADS=N", a);
    const char *near = dashes ? tl_nearest(name + 2, known, n) : NULL;
    if (dashes && !near && strlen(name) >= 5) { /* else the start of one, and of one only */
        int starts = 0;
        for (int k = 0; k < n; k++)
            if (!strncmp(known[k], name + 2, strlen(name + 2)) && starts++ == 0)
                near = known[k];
        near = starts == 1 ? near : NULL;
    }
    if (near)
        return cli_usage("unknown option %s (did you mean --%s?)", a, near);
    /* another command's, mistyped: tl ops --stat */
    near = dashes ? tl_nearest(name + 2, every, m) : NULL;
    const cli_option *o = NULL;
    for (int k = 0; near && k < CLI_NOPTIONS && !o; k++)
        o = cli_options[k].l && !strcmp(cli_options[k].l + 2, near) ? &cli_options[k] : NULL;
    if (o) {
        char others[160];
        command_list(o->cmds, others, sizeof others);
        return cli_usage("unknown option %s (--%s is an option of %s)", a, near, others);
    }
    return cli_usage("unknown option %s", a);
}

const char *cli_opt_value(int argc, char **argv, int *i, const char *arg, const char *l)
{
    size_t n = l ? strlen(l) : 0;
    if (l && !strncmp(arg, l, n) && arg[n] == '=')
        return arg + n + 1;
    if (*i + 1 < argc)
        return argv[++*i];
    return NULL;
}

int cli_format_opt(int argc, char **argv, int *i, const char *arg, bool *json)
{
    const char *v = cli_opt_value(argc, argv, i, arg, "--format");
    if (!v || (strcmp(v, "text") && strcmp(v, "json")))
        return cli_usage("--format takes text or json");
    *json = !strcmp(v, "json");
    return 0;
}

/* An .npy or .npz where the graph goes: a user's inputs, given in the
 * wrong place. */
static tl_graph *data_not_graph(const char *path, tl_status *st)
{
    tl_fail(st, TL_EINPUT, "%s: a tensor file, not a graph: the graph (.json, .tl, .onnx or -e TEXT) comes first, "
            "the inputs after it (NAME=FILE or -i FILE)", path);
    return NULL;
}

tl_graph *cli_load_graph(const char *arg, const tl_graph_options *o, tl_status *st)
{
    if (cli_is_program(arg))
        return cli_load_program(arg, o, st);
    if (tl_onnx_is_model(arg)) {
        tl_onnx_options oo = {.allow_outside_files = o && o->allow_outside_files};
        return tl_onnx_load_declared(arg, &oo, st);
    }
    if (cli_is_graph_file(arg))
        return tl_graph_load_with(arg, o, st);
    if (cli_ends_with(arg, ".npy") || cli_ends_with(arg, ".npz"))
        return data_not_graph(arg, st);
    /* standard input, or a file whose name does not say: its text does */
    bool in = !strcmp(arg, "-");
    const char *path = in ? "standard input" : arg;
    unsigned char *buf;
    size_t len;
    if (in ? tl_slurp_stream(stdin, &buf, &len, st) : tl_slurp_path(arg, &buf, &len, st)) {
        tl_wrap(st, "%s", path);
        return NULL;
    }
    tl_bytes_kind kind = tl_bytes_kind_of(buf, len);
    size_t blank = 0;
    while (blank < len && (buf[blank] == ' ' || buf[blank] == '\t' || buf[blank] == '\n' || buf[blank] == '\r'))
        blank++;
    if (len && blank == len) { /* echo '' | tl run - */
        free(buf);
        return tl_fail(st, TL_EINPUT, "%s: only blank lines: expected a graph (JSON), a program or an ONNX model",
                       path), NULL;
    }
    if (kind == TL_BYTES_EMPTY || kind == TL_BYTES_NPY || kind == TL_BYTES_NPZ) {
        free(buf);
        if (len)
            return data_not_graph(path, st);
        return tl_fail(st, TL_EINPUT, "%s: empty: expected a graph (JSON), a program or an ONNX model", path), NULL;
    }
    if (kind == TL_BYTES_ONNX) {
        free(buf);
        return tl_fail(st, TL_EINPUT, "%s: binary, as an ONNX model is: tl reads a model from a file whose name "
                       "ends in .onnx", path), NULL;
    }
    const char *text = (const char *)buf;
    tl_graph *g = cli_text_is_program(text, len) ? cli_load_program_text(text, len, path, o, st)
                                                 : tl_graph_parse_with(text, len, path, o, st);
    free(buf);
    return g;
}

bool cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

const char *cli_name_hint(const char *name, const char *const *names, int n, const char *kind, char *buf,
                          size_t len)
{
    const char *near = tl_nearest(name, names, n);
    buf[0] = '\0';
    if (near) {
        snprintf(buf, len, " (did you mean \"%s\"?)", near);
    } else if (n > 0) {
        size_t k = (size_t)snprintf(buf, len, " (%s ", kind);
        int i = 0;
        for (; i < n && k + 80 < len && k < 200; i++)
            k += (size_t)snprintf(buf + k, len - k, "%s%.60s", i ? ", " : "", names[i]);
        snprintf(buf + k, len - k, i < n ? ", ... %d in all)" : ")", n);
    }
    return buf;
}

const char *cli_input_hint(const tl_graph *g, const char *name, char *buf, size_t len)
{
    /* an input of the model that tl compile fixed (graph/onnx.c) */
    const char *fixed = g->doc ? strstr(g->doc, "\nfixed by tl compile, no longer inputs") : NULL;
    for (const char *p = fixed; p && (p = strstr(p + 1, "\n"));)
        if (!strncmp(p + 1, name, strlen(name)) && !strncmp(p + 1 + strlen(name), " = ", 3)) {
            int n = (int)strcspn(p + 1, "\n");
            snprintf(buf, len, " (tl compile fixed it, %.*s%s: compile the model again for another value)",
                     n < 160 ? n : 160, p + 1, n < 160 ? "" : "...");
            return buf;
        }
    const char **names = malloc(sizeof *names * ((size_t)g->ninputs + 1));
    if (!names)
        return buf[0] = '\0', buf;
    for (int k = 0; k < g->ninputs; k++)
        names[k] = g->inputs[k].name;
    cli_name_hint(name, names, g->ninputs, g->ninputs == 1 ? "its input is" : "its inputs are", buf, len);
    free(names);
    return buf;
}
