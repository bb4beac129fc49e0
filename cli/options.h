/* Every option of every command, and which commands take it: the one list
 * that an argument is checked against before a command parses its own
 * (cli_check_options), that an unknown option's suggestion is drawn from
 * (cli_unknown_option), and that tests/test_cli.c holds each command's
 * parser and tl --help to.  Data only: included by cli/common.c and by the
 * test. */
#ifndef TL_CLI_OPTIONS_H
#define TL_CLI_OPTIONS_H

/* the commands, in the order of the names below */
enum {
    CLI_RUN = 1 << 0,
    CLI_GRAD = 1 << 1,
    CLI_JVP = 1 << 2,
    CLI_HVP = 1 << 3,
    CLI_GRADCHECK = 1 << 4,
    CLI_CHECK = 1 << 5,
    CLI_DOT = 1 << 6,
    CLI_COMPILE = 1 << 7,
    CLI_DIFF = 1 << 8,
    CLI_COMPARE = 1 << 9,
    CLI_SHOW = 1 << 10,
    CLI_OPS = 1 << 11,
    CLI_DEVICES = 1 << 12,
};
static const char *const cli_command_names[] = {
    "run", "grad", "jvp", "hvp", "gradcheck", "check", "dot", "compile", "diff", "compare", "show", "ops", "devices",
};
#define CLI_NCOMMANDS ((int)(sizeof cli_command_names / sizeof cli_command_names[0]))

/* run, grad, jvp and hvp share one parser (cli_parse_run_args) */
#define CLI_RUNS (CLI_RUN | CLI_GRAD | CLI_JVP | CLI_HVP)
/* the commands that read a recipe and the inputs that fix its shapes */
#define CLI_RECIPES (CLI_RUNS | CLI_GRADCHECK | CLI_CHECK | CLI_DOT | CLI_COMPILE | CLI_DIFF)
#define CLI_ALL ((1 << CLI_NCOMMANDS) - 1)

typedef struct cli_option {
    const char *s, *l; /* "-o" and "--output"; either may be NULL */
    int value;         /* 1 when a value follows (the next argument, or --l=VALUE) */
    int cmds;          /* the commands that take it */
} cli_option;

static const cli_option cli_options[] = {
    {"-e", NULL, 1, CLI_RECIPES},
    {"-i", "--inputs", 1, CLI_RECIPES},
    {"-o", "--output", 1, CLI_RUNS | CLI_COMPILE},
    {NULL, "--format", 1, CLI_RUNS | CLI_GRADCHECK | CLI_COMPARE | CLI_SHOW | CLI_OPS | CLI_DEVICES},
    {NULL, "--full", 0, CLI_RUNS | CLI_SHOW},
    {NULL, "--only", 1, CLI_RUNS},
    {NULL, "--outputs", 1, CLI_RUNS},
    {NULL, "--expect", 1, CLI_RUNS},
    {"-d", "--device", 1, CLI_RUNS},
    {NULL, "--strict-device", 0, CLI_RUNS},
    {NULL, "--seed", 1, CLI_GRAD | CLI_HVP | CLI_GRADCHECK},
    {NULL, "--of", 1, CLI_GRAD | CLI_HVP},
    {NULL, "--wrt", 1, CLI_GRAD | CLI_HVP | CLI_GRADCHECK},
    {NULL, "--params", 0, CLI_GRAD | CLI_JVP | CLI_HVP | CLI_GRADCHECK},
    {NULL, "--tangent", 1, CLI_JVP | CLI_HVP},
    {NULL, "--check-finite", 0, CLI_RUNS},
    {NULL, "--profile", 0, CLI_RUNS},
    {NULL, "--report", 1, CLI_RUNS},
    {NULL, "--allow-outside-files", 0, CLI_RECIPES},
    {NULL, "--max-memory", 1, CLI_RUNS},
    {"-v", "--verbose", 0, CLI_RUNS},
    {"-q", "--quiet", 0, CLI_RUNS | CLI_GRADCHECK},
    {NULL, "--rtol", 1, CLI_RUNS | CLI_GRADCHECK | CLI_COMPARE},
    {NULL, "--atol", 1, CLI_RUNS | CLI_GRADCHECK | CLI_COMPARE},
    {NULL, "--ulp", 1, CLI_RUNS | CLI_COMPARE},
    {NULL, "--equal-nan", 0, CLI_RUNS | CLI_COMPARE},
    {NULL, "--eps", 1, CLI_GRADCHECK},
    {NULL, "--order", 1, CLI_GRADCHECK},
    {NULL, "--samples", 1, CLI_GRADCHECK},
    {NULL, "--f64", 0, CLI_GRADCHECK},
    {NULL, "--stats", 0, CLI_SHOW},
    {NULL, "--onnx", 0, CLI_OPS},
    {"-h", "--help", 0, CLI_ALL},
    {NULL, "--version", 0, CLI_ALL},
};
#define CLI_NOPTIONS ((int)(sizeof cli_options / sizeof cli_options[0]))

#endif
