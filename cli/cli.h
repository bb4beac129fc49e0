/* The command line: one file per command (cmd_*.c), the shared pieces
 * here (common.c: errors, option values, loading graphs; tensor_arg.c:
 * NAME=TENSOR values; output.c: writing results).  The only layer that
 * prints or exits.  Everything here is owned by the running command and
 * freed before it returns. */
#ifndef TL_CLI_H
#define TL_CLI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "exec/exec.h"
#include "formats/compare.h"

#define TL_VERSION "0.1.0"

/* ---------- errors and standard output (common.c) ---------- */

/* Prints "tl: error: MSG" as one line (control characters escaped);
 * returns the exit code for st (3 when st holds none). */
int cli_fail(const tl_status *st);
/* A usage error: exit 2 with " (see tl --help)" appended. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A variable of the environment that makes no sense: exit 2, the manual's
 * ENVIRONMENT named. */
int cli_env_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints text with control characters escaped. */
void cli_print_escaped(FILE *f, const char *text);
/* Flushes standard output; a write error there is exit 3 with one line. */
int cli_finish_stdout(void);
/* Whether writing standard output failed because its reader has gone
 * (tl ... | head): nothing is left to do, and that is no error. */
bool cli_stdout_gone(void);
double cli_now_ms(void);

/* The progress line of long runs (progress.c): on a terminal, one line on
 * standard error from a second after t0, redrawn five times a second by a
 * timer thread, whatever the run is doing; the run only notes how far it
 * got.  The caller owns the struct; nothing else may write to standard
 * error between start and end. */
typedef struct cli_progress {
    double t0;                     /* milliseconds (cli_now_ms) */
    _Atomic(const char *) phase;   /* "forward", or the name given to start */
    _Atomic(const char *) unit;    /* "nodes"; NULL: the time alone */
    _Atomic int64_t done, total;   /* total -1: not known */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool running, stop, shown;
} cli_progress;
/* Starts the timer thread when on (standard error a terminal and no -q);
 * off, or without a thread, notes cost nothing and no line is drawn. */
void cli_progress_start(cli_progress *p, bool on, double t0, const char *name);
/* How far the run got; called per node, so inline and cheap: two loads
 * and a store, the rest when the phase changes. */
static inline void cli_progress_note(cli_progress *p, const char *phase, const char *unit, int64_t done,
                                     int64_t total)
{
    if (atomic_load_explicit(&p->phase, memory_order_relaxed) != phase ||
        atomic_load_explicit(&p->unit, memory_order_relaxed) != unit) {
        atomic_store_explicit(&p->unit, unit, memory_order_relaxed);
        atomic_store_explicit(&p->total, total, memory_order_relaxed);
        atomic_store_explicit(&p->phase, phase, memory_order_relaxed);
    }
    atomic_store_explicit(&p->done, done, memory_order_relaxed);
}
/* Stops the thread; the line, if drawn, is cleared. */
void cli_progress_end(cli_progress *p);

/* Whether s ends with suffix (a file's extension: .npy, .onnx). */
bool cli_ends_with(const char *s, const char *suffix);
/* What a misspelt name most likely meant, for the end of an error
 * message: " (did you mean "fc2_bias"?)" when one of the n names is near
 * it (tl_nearest), else " (KIND a, b, c)" naming them (the first few when many), or
 * "" when n is 0.  Writes into buf and returns it. */
const char *cli_name_hint(const char *name, const char *const *names, int n, const char *kind, char *buf,
                          size_t len);
/* The same among the inputs of g ("its inputs are x, w"). */
const char *cli_input_hint(const tl_graph *g, const char *name, char *buf, size_t len);

/* ---------- options (common.c) ---------- */

/* Whether arg is the option: the short form s, or the long form l alone
 * or as "l=value" (either may be NULL). */
bool cli_is_opt(const char *arg, const char *s, const char *l);
/* Checks cmd's arguments against the options of every command
 * (cli/options.h) before cmd parses them: a usage error (exit 2) for an
 * option of another command ("-d is not an option of tl check (it is one
 * of tl run, grad, jvp and hvp)") or a flag given a value ("--full takes
 * no value"); 0 otherwise.  Run by main for every command. */
int cli_check_options(const char *cmd, int argc, char **argv);
/* The usage error for an option no command has: "unknown option", with
 * the long option of cmd that was most likely meant, or where the thread
 * count is set. */
int cli_unknown_option(const char *cmd, const char *arg);
/* Whether arg is an option whose value is the next argument (-o, --seed;
 * not --seed=S, nor a flag). */
bool cli_value_follows(const char *arg);
/* The option's value: "--opt=value", or the next argument (advancing *i);
 * NULL when there is none. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *arg, const char *l);
/* --format's value (text or json) into *json; a usage error (exit 2)
 * for any other, or none. */
int cli_format_opt(int argc, char **argv, int *i, const char *arg, bool *json);

/* ---------- graphs and tensors ---------- */

/* Loads GRAPH: a .json file, a program (a .tl file or the text of -e,
 * cli_inline_graph), or, told by its text (cli_text_is_program), "-" (the
 * graph on standard input; file constants are then relative to the
 * current folder) or a file whose name ends otherwise. */
tl_graph *cli_load_graph(const char *arg, const tl_graph_options *o, tl_status *st);

/* Reads a NAME=TENSOR value (tensor_arg.c): a result file of any format
 * tl writes, told by its content, as FILE (a .npy) or FILE:KEY (a member
 * of an .npz, a json or text result: "y", "grad/x"); '-' (the one tensor
 * of a .npy on stdin), '-:KEY' (a member of a result file on stdin); or a
 * literal with an optional dtype prefix. */
tl_tensor *cli_read_tensor(const char *spec, tl_status *st);
/* For a --seed or --tangent value (arg: OPT's whole value, "NAME=" and
 * all; spec: its tensor part) that was an f64 literal where want is f32:
 * " (1 is an f64 literal: write --seed loss=f32:1)"; else "". */
const char *cli_f32_literal_hint(const char *opt, const char *arg, const char *spec, const tl_tensor *got,
                                 tl_dtype want, char *buf, size_t len);
/* The result file on standard input, read on first use and kept (the CLI
 * owns it until cli_stdin_release). */
struct tl_result_file *cli_stdin_file(tl_status *st);
void cli_stdin_release(void);

typedef struct cli_out {
    const char *path;   /* -o, or NULL for stdout text/json */
    bool json, full;
    const char *device; /* effective device name */
    int n;              /* tensors to write */
    const char **names; /* "y", "grad/x" */
    const tl_tensor **ts;
    int noutputs;       /* the first noutputs are outputs, the rest grads */
} cli_out;

/* Writes every tensor: a file (.npy, .npz or .json; complete or absent)
 * or standard output (text, json, or with path "-" .npy/.npz).  A reader
 * that closes standard output early ends the writing quietly (output.c). */
tl_code cli_write(const cli_out *o, tl_status *st);
/* Whether cli_write could write o, asked before a run so that nothing
 * runs for results that cannot be written: the format the path names
 * (or, for a device or FIFO, what standard output would get), the count
 * a .npy holds (not checked while o->n is -1), and cli_check_path.  No
 * tensor is looked at. */
tl_code cli_check_output(const cli_out *o, tl_status *st);
/* Whether a file can be written at path: not a folder, and a folder that
 * takes new files (a FIFO or device there: writable).  Creates nothing. */
tl_code cli_check_path(const char *path, tl_status *st);
/* Whether two output or result paths name one file: the same spelling, or
 * another (./x, a link, a/../x) of the same regular file or folder entry.
 * "-", paths under /dev/, devices and FIFOs are streams, never one file. */
bool cli_same_file(const char *a, const char *b);

/* Writes a file whole or not at all: w writes into a temporary file beside
 * path, which is renamed over path only when complete. */
typedef tl_code (*cli_writer)(FILE *f, const void *ctx, tl_status *st);
/* The temporary file cli_write_atomic is writing (NULL: none). */
extern char *volatile cli_pending_tmp;
/* Deferred writes: from cli_defer_begin, each file cli_write_atomic (and
 * cli_write) completes keeps its temporary name, until cli_defer_commit
 * gives them their names, in order, or cli_defer_abort removes them; the
 * signal handler removes those pending (cli_deferred_tmp). */
#define CLI_DEFER_MAX 4
extern char *volatile cli_deferred_tmp[CLI_DEFER_MAX];
/* Removes the temporary files being written (async-signal-safe: for a
 * signal handler, or a fatal error that ends the process at once). */
void cli_remove_pending(void);
void cli_defer_begin(void);
tl_code cli_defer_commit(tl_status *st);
void cli_defer_abort(void);
tl_code cli_write_atomic(const char *path, cli_writer w, const void *ctx, tl_status *st);

/* ---------- diagnostics (diag.c) ---------- */

typedef struct cli_times {
    double load, run, backward; /* milliseconds */
    double inputs, write;       /* reading the inputs, writing the results */
    int expect;                 /* --expect: 1 compared only, 2 compared and written (-o) */
    const char *requested;      /* the device asked for (-d; "cpu" without it) */
    char device_why[1024];      /* why a GPU asked for was not used ("": it was, or none was asked for) */
} cli_times;

/* -v: device, counts, fallbacks, branches, memory and times on stderr. */
void cli_print_verbose(const tl_result *r, bool grad, const cli_times *t);
/* --profile: per-op calls, time, share and device, forward and backward. */
void cli_print_profile(const tl_result *r);
/* --report FILE.json, written whole or not at all. */
tl_code cli_write_report(const char *path, const tl_graph *g, const tl_result *r, const cli_times *t,
                         tl_status *st);

/* ---------- programs (cmd_program.c) ---------- */

/* Whether GRAPH is a program by its name: a .tl file, or what
 * cli_inline_graph made; a JSON graph by its name: a .json file. */
bool cli_is_program(const char *graph);
/* A warning for each top-level binding of a program that nothing reads and
 * that is no output (written, and computed, for nothing). */
void cli_warn_unused(const tl_graph *g);
/* 3/4 of physical memory, or of the cgroup's limit when that is lower:
 * the default --max-memory, and what one file read may take (main). */
int64_t cli_default_max_memory(void);
/* The descriptor an output path names: /dev/stdout 1, /dev/stderr 2,
 * /dev/fd/N and /proc/self/fd/N N; -1 for any other path. */
int cli_stream_fd(const char *path);
bool cli_is_graph_file(const char *graph);
/* Whether a text whose name does not say is a program rather than a JSON
 * graph, by its first character past blanks: a JSON graph's "{" is followed by a key ('"') or '}', a program
 * starts with '#', a name, a number, '(', '[', '-', '.' or a block "{"
 * with a statement in it.  Anything else (nothing, binary bytes) is left
 * to the JSON loader, which says what is wrong. */
bool cli_text_is_program(const char *text, size_t len);
/* Loads the program text (path names it in messages and is its folder). */
tl_graph *cli_load_program_text(const char *text, size_t len, const char *path, const tl_graph_options *o,
                                tl_status *st);
/* "-e TEXT": the GRAPH argument that stands for a program file holding
 * TEXT (a new string the caller frees; NULL when out of memory). */
char *cli_inline_graph(const char *text);
tl_graph *cli_load_program(const char *graph, const tl_graph_options *o, tl_status *st);
/* Prints, when f is a terminal, the source line and a caret under the
 * column of the last program error, and forgets them (cli_fail calls it
 * after the error line). */
void cli_print_caret(FILE *f);
/* cli_fail for an error about g (running or checking it): for a program,
 * placed at the text of the node it names, with the caret. */
int cli_fail_in(const tl_graph *g, tl_status *st);
/* tl check of g for the types its inputs declare, where every input
 * declares one (size variables as tl check takes them), else its file
 * constants read: 0, or the error said (exit 2) */
int cli_check_declared(const tl_graph *g, tl_status *st);

/* ---------- the arguments of run, grad and gradcheck (cmd_run.c) ---------- */

/* What run and grad were given.  gradcheck takes its own options first and
 * hands the rest (GRAPH or -e, NAME=TENSOR, -i, --seed, --wrt, --format,
 * -q) to the same parser. */
typedef struct cli_run_args {
    bool grad; /* --seed, --wrt and --of allowed */
    int second; /* 1 jvp, 2 hvp: --tangent allowed (cmd_hvp.c) */
    const char *graph;
    char *inline_graph; /* -e TEXT */
    const char *output, *device, *wrt, *max_memory, *expect, *only, *of, *outputs, *report;
    bool json, full, strict, verbose, quiet, outside, profile, check_finite;
    bool params; /* an ONNX model's float initializers are inputs too */
    tl_tensor **defaults; /* per input: taken when not given (an ONNX model's initializers); owned */
    int ndefaults;
    /* an ONNX model whose inputs, when neither given nor defaulted, are
     * zeros of the shapes it declares (tl compile, tl diff); a dynamic dim
     * is then the error */
    struct tl_onnx_model *declared;
    /* the ONNX model whose inputs the graph being bound names (set by
     * cli_model_open; for a missing input's message, the type it declares) */
    struct tl_onnx_model *model;
    tl_compare_opts cmp;
    int nbind, nseed, nnpz;
    const char **npz;  /* -i FILE.npz, in order ("-": standard input) */
    const char **bind; /* NAME=TENSOR */
    const char **seed; /* [OUT=]TENSOR */
    int ntangent;
    const char **tangent; /* NAME=TENSOR */
} cli_run_args;

/* An ONNX model for run, grad and gradcheck (onnx_model.c): the graph of
 * its inputs alone (c->defaults set for those with a stored value), then,
 * once tensors are bound to them, the recipe for those tensors in its
 * place (*g freed and replaced). */
struct tl_onnx_model;
tl_graph *cli_model_open(cli_run_args *c, struct tl_onnx_model **m, tl_status *st);
int cli_model_translate(const cli_run_args *c, struct tl_onnx_model *m, tl_graph **g, tl_tensor **in,
                        tl_status *st);
/* For tl compile and tl diff: the model opened, *in (one per input of
 * *sig, the caller frees both) bound from c's tensors, the defaults, and
 * for the rest the shapes the model declares (c->declared). */
int cli_model_bind(cli_run_args *c, struct tl_onnx_model **m, tl_graph **sig, tl_tensor ***in, tl_status *st);
/* The tensors bound (one per signature input, NULL where none is) against
 * the shapes the model declares (tl_onnx_check_input): exit status 2 and
 * one line naming the input, what was given and what the model declares,
 * before anything is translated; cli_model_translate and cli_model_bind
 * check. */
int cli_model_check(const char *path, const struct tl_onnx_model *m, int n, tl_tensor *const *in, tl_status *st);
void cli_model_close(struct tl_onnx_model *m);
/* cli_input_hint for a name given to model m (or to a graph: m NULL),
 * whose initializers are names too: one of them named exactly (a
 * constant unless --params or --wrt makes it an input), or the input or
 * initializer nearest to a name mistyped. */
const char *cli_model_input_hint(const struct tl_onnx_model *m, const tl_graph *g, const char *name, char *buf,
                                 size_t len);

/* Each returns 0, or the exit code after printing the error. */
int cli_parse_run_args(int argc, char **argv, cli_run_args *c);
/* Standard input is read once: a usage error (exit 2) when c's graph,
 * tensors and -i files take it for more than one of a graph, a .npy and
 * a result file. */
int cli_check_stdin(const cli_run_args *c);
void cli_run_args_free(cli_run_args *c);
/* TL_NUM_THREADS, when set, is a whole number from 1 to 1024; TL_CONV,
 * blas, grid or avx2. */
int cli_env_ok(void);
/* in[k] for every input of g, from -i files and NAME=TENSOR. */
int cli_bind_inputs(const cli_run_args *c, const tl_graph *g, tl_tensor **in, tl_status *st);
/* wrt[k]: input k is differentiated (all without --wrt). */
int cli_parse_wrt(const cli_run_args *c, const tl_graph *g, tl_tensor *const *in, bool *wrt,
                  tl_status *st);
/* Appends to a dtype error of the run how a literal input without a
 * prefix (so f64) is written in the dtype wanted: "x=f32:[1,2]",
 * "idx=i64:[0,2]". */
void cli_literal_hint(const cli_run_args *c, tl_tensor *const *in, const tl_graph *g, tl_status *st);
/* seeds[i] for output i of r from --seed (NULL: not given); a 0-d seed is
 * broadcast to the output's shape. */
int cli_read_seeds(const cli_run_args *c, const tl_result *r, tl_tensor **seeds, tl_status *st);

/* ---------- jvp and hvp: second derivatives (cmd_hvp.c) ---------- */

/* What tl jvp and tl hvp hold besides what grad does. */
typedef struct cli_second {
    bool jvp;
    int ninputs, nd;
    tl_tensor **tangent; /* per input, NULL: none (zeros) */
    bool *wrt;           /* per input: differentiated in the run */
    tl_tensor **d;       /* jvp/OUT per output, or hvp/NAME per input */
    char **names;
} cli_second;

/* Reads the tangents (exit code 2 with one line for a bad one) and the
 * inputs the run differentiates: --wrt's and every one with a tangent. */
int cli_second_prepare(const cli_run_args *c, const tl_graph *g, tl_tensor *const *in, const bool *wrt,
                       cli_second *s, tl_status *st);
/* The recorded pullback of the seeds, then the tangents pulled back
 * through it: grads (hvp: those of --wrt) and s->d. */
tl_code cli_second_pullback(const cli_run_args *c, tl_result *r, tl_tensor *const *seeds, const bool *wrt,
                            tl_tensor **grads, cli_second *s, tl_status *st);
/* Appends "jvp/OUT" or "hvp/NAME" and the tensors; returns how many. */
int cli_second_names(const tl_graph *g, const tl_result *r, cli_second *s, const char **names,
                     const tl_tensor **ts);
void cli_second_free(cli_second *s);

/* ---------- commands: argv[0] is the command's name ---------- */

int cmd_run(int argc, char **argv);  /* run, grad, jvp and hvp */
int cmd_ops(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_dot(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_gradcheck(int argc, char **argv);

/* --rtol R, --atol A, --ulp N, --equal-nan (cmd_compare.c): when argv[*i]
 * is one of them, stores it in o (advancing *i past a value) and returns
 * 0, or prints a usage error and returns 2; -1 when it is none of them. */
int cli_compare_option(int argc, char **argv, int *i, tl_compare_opts *o);

#endif
