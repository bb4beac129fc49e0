/* tl: run and differentiate computation graphs.  Dispatches to one
 * command (cli/cmd_*.c).  Exit codes: 0 success, 1 a difference, 2 bad
 * usage or input, 3 runtime failure. */
#define _GNU_SOURCE
#include <malloc.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ops.h"
#include "cli.h"
#include "cli/options.h"
#include "formats/npy.h"

/* tl --help: every part below; tl COMMAND --help: its usage lines and the
 * parts that concern it (help). */
static const char usage_text[] =
    "usage: tl run  GRAPH [NAME=TENSOR]... [options]\n"
    "       tl grad GRAPH [NAME=TENSOR]... [--seed [OUT=]TENSOR]... [--wrt NAME,...] [options]\n"
    "       tl jvp  GRAPH [NAME=TENSOR]... --tangent NAME=TENSOR... [options]\n"
    "       tl hvp  GRAPH [NAME=TENSOR]... --tangent NAME=TENSOR... [--seed [OUT=]TENSOR]...\n"
    "               [--wrt NAME,...] [options]\n"
    "       tl compare A B [--rtol R] [--atol A] [--ulp N] [--equal-nan] [--format text|json]\n"
    "       tl show TENSOR [--stats] [--full] [--format text|json]\n"
    "       tl check GRAPH [NAME=DTYPE[DIMS] | NAME=TENSOR]... [-i FILE]\n"
    "       tl dot   GRAPH [NAME=DTYPE[DIMS] | NAME=TENSOR]... [-i FILE]\n"
    "       tl gradcheck GRAPH [NAME=TENSOR]... [--seed [OUT=]TENSOR]... [--wrt NAME,...]\n"
    "                    [--eps E] [--rtol R] [--atol A] [--samples N] [--order 1|2] [--f64]\n"
    "                    [--format text|json]\n"
    "       tl compile PROGRAM [-o FILE.json]\n"
    "       tl compile MODEL.onnx [NAME=TENSOR]... [-i FILE] -o FILE.json\n"
    "       tl diff A B [NAME=TENSOR]... [-i FILE]...   (the inputs of A or B that is an\n"
    "               ONNX model: they fix its shapes, as for tl compile)\n"
    "       tl ops [OP] [--onnx] [--format text|json]\n"
    "       tl devices [--format text|json]\n"
    "\n";

static const char graph_text[] =
    "GRAPH:  a .json graph, a .tl program, -e TEXT (a program given inline), an .onnx model, or -\n"
    "        (a graph or program on stdin, told by its text)\n"
    "TENSOR: file.npy, FILE:KEY (a tensor of an .npz, json or text result:\n"
    "        res.json:grad/x), - (a .npy on stdin), -:KEY (a tensor of a result\n"
    "        file on stdin), or a literal such as 3.5, '[[1,2],[3,4]]',\n"
    "        f32:[1,2,3], i64:[0,2,1] (default dtype f64)\n"
    "\n";

static const char run_text[] =
    "run and grad options:\n"
    "  -i, --inputs FILE       supply every input whose name is a key of a result\n"
    "                          file (.npz, json, text; - for stdin);\n"
    "                          NAME=TENSOR overrides a key\n"
    "  -o, --output PATH       .npy (one tensor), .npz (all) or .json; - for stdout\n"
    "                          (a device or FIFO: as stdout); checked before the run\n"
    "      --format text|json  stdout format (default text)\n"
    "      --full              print every element in text format\n"
    "      --only NAME,...     write only these (outputs, grad/NAME)\n"
    "      --outputs NAME,...  return these top-level names instead of the outputs\n"
    "      --expect FILE       compare the results with FILE (exit 1 when they\n"
    "                          differ); with --rtol, --atol, --ulp, --equal-nan\n"
    "  -d, --device DEV        cpu (default), cuda[:N], gpu, auto\n"
    "      --strict-device     a fallback to the CPU is an error (exit 3)\n"
    "      --seed [OUT=]TENSOR cotangent of an output (grad, hvp, gradcheck; default\n"
    "                          all ones; a 0-d seed fills the output's shape)\n"
    "      --of OUT,...        differentiate only these outputs (grad, hvp)\n"
    "      --wrt NAME,...      differentiate only these inputs (grad, hvp, gradcheck)\n"
    "      --params            an ONNX model's float initializers are differentiated\n"
    "                          inputs too (grad, jvp, hvp, gradcheck)\n"
    "      --tangent NAME=TENSOR  direction for input NAME (jvp, hvp; others: zeros)\n"
    "      --check-finite      stop at the first NaN or infinity, value or gradient\n"
    "      --profile           per-op times on stderr, forward and backward\n"
    "      --report FILE.json  device, fallbacks, syncs, memory, times per op and node\n"
    "      --allow-outside-files  file constants may be absolute or outside the\n"
    "                          graph's folder\n"
    "      --max-memory BYTES  most memory a run may hold in tensors and tape\n"
    "                          (K, M, G, T suffixes; 0: no limit; default 3/4 of RAM)\n"
    "  -v, --verbose           device, fallbacks, counts and timings on stderr\n"
    "  -q, --quiet             no warnings, no progress line\n"
    "  -h, --help              this text\n"
    "      --version           print the version\n"
    "\n";

static const char gradcheck_text[] =
    "gradcheck options (besides -i, --seed, --wrt, --params, --allow-outside-files,\n"
    "--format, -q; on the CPU):\n"
    "      --eps E             step, relative to max(1, |x|) (default 1e-6)\n"
    "      --rtol R, --atol A  match when |tape - fd| <= atol + rtol * |fd|\n"
    "                          (defaults 1e-3 and 1e-5)\n"
    "      --order 2           Hessian-vector products (tl hvp) against differences\n"
    "                          of the gradient, for each element\n"
    "      --samples N         check N elements of each input (the same ones each\n"
    "                          time) instead of all\n"
    "      --f64               check an f64 copy of an f32 recipe, the inputs cast up\n"
    "\n";

static const char other_text[] =
    "compare options (and --expect's):\n"
    "      --rtol R, --atol A  match when |a - b| <= atol + rtol * |b|, B the reference\n"
    "                          (defaults: rtol 1e-7 for f64, 1e-5 for f32; atol 0)\n"
    "      --ulp N             match within N units in the last place instead\n"
    "      --equal-nan         NaN matches NaN\n"
    "      --format text|json  the report's form\n"
    "\n"
    "show options:\n"
    "      --stats             dtype, shape, min, max, mean (and NaN and infinity\n"
    "                          counts) instead of the values\n"
    "      --full              every element (text elides the middle of long ones)\n"
    "      --format text|json  the form printed\n"
    "\n"
    "ops options:\n"
    "      OP                  one op in full: its value, gradient and attributes\n"
    "      --onnx              the ONNX ops translated, with their opsets\n"
    "      --format text|json  the form printed\n"
    "\n";

static const char footer_text[] =
    "environment: TL_NUM_THREADS, TL_FUSE, TL_CONV, TL_BLAS_CHOOSE, OPENBLAS_CORETYPE,\n"
    "             TL_CUDA_PLUGIN (see ENVIRONMENT in man tl)\n"
    "exit status: 0 ok, 1 a difference (compare, --expect, diff, gradcheck), 2 bad\n"
    "             usage or input, 3 runtime failure\n"
    "manual: man tl, man tl-graph, man tl-program\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", cmd_run},
    {"grad", cmd_run},
    {"jvp", cmd_run},
    {"hvp", cmd_run},
    {"ops", cmd_ops},
    {"devices", cmd_devices},
    {"check", cmd_check},
    {"dot", cmd_dot},
    {"compare", cmd_compare},
    {"show", cmd_show},
    {"compile", cmd_compile},
    {"diff", cmd_diff},
    {"gradcheck", cmd_gradcheck},
};

/* A mistyped command names the one meant; a graph (or -e) where the
 * command goes says that the command comes first. */
static int unknown_command(const char *sub)
{
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        names[k] = commands[k].name;
    static const char *const global[] = {"help", "version"};
    const char *near = !strncmp(sub, "--", 2) ? tl_nearest(sub + 2, global, 2) : NULL;
    if (near) /* tl --verison */
        return cli_usage("unknown option %s (did you mean --%s?)", sub, near);
    near = tl_nearest(sub, names, (int)(sizeof names / sizeof names[0]));
    if (near)
        return cli_usage("unknown command '%s' (did you mean \"%s\"?)", sub, near);
    if (!strcmp(sub, "-e") || cli_ends_with(sub, ".json") || cli_ends_with(sub, ".tl") || cli_ends_with(sub, ".onnx"))
        return cli_usage("unknown command '%s': the command comes first, as in tl run %s ... or tl grad %s ...", sub,
                         sub, sub);
    return cli_usage("unknown command '%s' (run, grad, jvp, hvp, compare, show, check, dot, gradcheck, compile, diff, ops, devices)", sub);
}

/* The usage lines of command cmd (with their continuation lines). */
static void usage_of(const char *cmd)
{
    bool on = false, first = true;
    for (const char *l = usage_text; *l;) {
        const char *e = strchr(l, '\n');
        int n = (int)(e - l);
        const char *tl = n > 7 ? l + 7 : l; /* after "usage: " or its indent */
        if (!strncmp(tl, "tl ", 3)) {
            size_t k = strlen(cmd);
            on = !strncmp(tl + 3, cmd, k) && tl[3 + k] == ' ';
        } else if (n == 0)
            on = false;
        if (on) {
            printf("%s%.*s\n", first ? "usage: " : "       ", n - 7, l + 7);
            first = false;
        }
        l = e + 1;
    }
    putchar('\n');
}

/* run_text's entries of the options cmd takes (cli/options.h says
 * which), under "options:": tl COMMAND --help lists no option that the
 * command refuses, and every one it takes (the audit of December 7) */
static void options_of(const char *cmd)
{
    int bit = 0;
    for (int k = 0; k < CLI_NCOMMANDS; k++)
        bit |= !strcmp(cmd, cli_command_names[k]) ? 1 << k : 0;
    bool keep = false, any = false;
    for (const char *p = strchr(run_text, '\n') + 1; *p && *p != '\n';) {
        size_t n = strcspn(p, "\n") + 1;
        const char *l = strstr(p, "--");
        if ((p[2] == '-' || p[6] == '-') && l && l < p + n) { /* an entry: "  -o, --output ..." */
            size_t len = strcspn(l, " =\n");
            keep = !strncmp(l, "--help", len) || !strncmp(l, "--version", len);
            for (size_t k = 0; k < sizeof cli_options / sizeof cli_options[0] && !keep; k++)
                keep = cli_options[k].l && strlen(cli_options[k].l) == len && !strncmp(cli_options[k].l, l, len) &&
                       (cli_options[k].cmds & bit);
            if (keep && !any)
                fputs("options:\n", stdout), any = true;
        }
        if (keep)
            fwrite(p, 1, n, stdout);
        p += n;
    }
    if (any)
        putchar('\n');
}

/* tl --help: everything; tl COMMAND --help: that command's usage and the
 * parts that concern it. */
static int help(const char *cmd)
{
    if (!cmd) {
        fputs(usage_text, stdout);
        fputs(graph_text, stdout);
        fputs(run_text, stdout);
        fputs(gradcheck_text, stdout);
        fputs(other_text, stdout);
        fputs(footer_text, stdout);
        return cli_finish_stdout();
    }
    usage_of(cmd);
    bool runs = !strcmp(cmd, "run") || !strcmp(cmd, "grad") || !strcmp(cmd, "jvp") || !strcmp(cmd, "hvp");
    bool gc = !strcmp(cmd, "gradcheck");
    bool graphs = runs || gc || !strcmp(cmd, "check") || !strcmp(cmd, "dot") || !strcmp(cmd, "compile") ||
                  !strcmp(cmd, "diff");
    if (graphs)
        fputs(graph_text, stdout);
    if (graphs)
        options_of(cmd);
    if (gc)
        fputs(gradcheck_text, stdout);
    /* the parts of other_text, each up to its blank line */
    static const char *const parts[][2] = {{"compare", "compare options"}, {"show", "show options"},
                                           {"ops", "ops options"}};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        if (strcmp(cmd, parts[k][0]))
            continue;
        const char *p = strstr(other_text, parts[k][1]), *e = strstr(p, "\n\n");
        printf("%.*s\n\n", (int)(e - p), p);
    }
    printf("every command: tl --help; %s", strstr(footer_text, "manual: "));
    return cli_finish_stdout();
}

static int version(void)
{
    printf("tl %s\n", TL_VERSION);
    return cli_finish_stdout();
}

/* A fatal signal removes the output being written.  SIGBUS means a mapped
 * input file (a large .npy is mapped, not copied) shrank under the run:
 * one error line and exit 3, as for any other read error. */
static void on_fatal(int sig)
{
    cli_remove_pending();
    if (sig == SIGBUS) {
        static const char msg[] = "tl: error: an input file changed while tl was reading it (bus error)\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(3);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* a closed pipe is an I/O error (exit 3), not a kill */
    signal(SIGXFSZ, SIG_IGN); /* a file past ulimit -f: the write's error (EFBIG), the temporary removed */
    tl_read_limit_by_default(cli_default_max_memory); /* /dev/zero given for a file: refused, not read until OOM */
    struct sigaction sa = {.sa_handler = on_fatal};
    sigemptyset(&sa.sa_mask);
    /* the signals that end a process by default (SIGKILL cannot be caught) */
    int fatal[] = {SIGINT, SIGTERM, SIGHUP, SIGBUS, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction(fatal[i], &sa, NULL);
    /* Keep freed tensor memory in the process for the next op instead of
     * handing it back to the kernel and faulting it in again (the eager
     * executor frees and reallocates same-sized tensors constantly). */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (argc < 2)
        return cli_usage("no command given: tl run|grad|jvp|hvp|gradcheck|check|dot|compile GRAPH ..., tl diff A B, "
                         "tl compare A B, tl show TENSOR, tl ops, tl devices");
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help"))
        return help(NULL);
    if (!strcmp(sub, "help") && (argc < 3 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")))
        return help(NULL);
    if (!strcmp(sub, "help")) { /* tl help grad */
        for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
            if (!strcmp(argv[2], commands[k].name))
                return help(argv[2]);
        return unknown_command(argv[2]);
    }
    if (!strcmp(sub, "--version"))
        return version();
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(sub, commands[k].name))
            continue;
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
                return help(sub);
            if (!strcmp(argv[i], "--version"))
                return version();
        }
        int usage = cli_check_options(sub, argc - 1, argv + 1);
        return usage ? usage : commands[k].run(argc - 1, argv + 1);
    }
    return unknown_command(sub);
}
