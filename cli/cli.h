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
/* Prints text with control characters escaped. */
void cli_print_escaped(FILE *f, const char *text);
/* Flushes standard output; a write error there is exit 3 with one line. */
int cli_finish_stdout(void);
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
/* The option's value: "--opt=value", or the next argument (advancing *i);
 * NULL when there is none. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *arg, const char *l);
/* --format's value (text or json) into *json; a usage error (exit 2)
 * for any other, or none. */
int cli_format_opt(int argc, char **argv, int *i, const char *arg, bool *json);

/* ---------- graphs and tensors ---------- */

/* Loads GRAPH: a .json file, "-" (the graph on standard input; file
 * constants are then relative to the current folder), or a program: a .tl
 * file or the text of -e (cli_inline_graph). */
tl_graph *cli_load_graph(const char *arg, const tl_graph_options *o, tl_status *st);

/* Reads a NAME=TENSOR value: file.npy, file.npz:key, '-' (a .npy on
 * stdin), '-:key' (a member of an .npz on stdin), or a literal with an
 * optional dtype prefix (tensor_arg.c). */
tl_tensor *cli_read_tensor(const char *spec, tl_status *st);
/* The .npz on standard input, read on first use and kept (the CLI owns it
 * until cli_stdin_release). */
struct tl_npz *cli_stdin_npz(tl_status *st);
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

/* Writes a file whole or not at all: w writes into a temporary file beside
 * path, which is renamed over path only when complete. */
typedef tl_code (*cli_writer)(FILE *f, const void *ctx, tl_status *st);
/* The temporary file cli_write_atomic is writing (NULL: none). */
extern char *volatile cli_pending_tmp;
tl_code cli_write_atomic(const char *path, cli_writer w, const void *ctx, tl_status *st);

/* ---------- diagnostics (diag.c) ---------- */

typedef struct cli_times {
    double load, run, backward; /* milliseconds */
} cli_times;

/* -v: device, counts, fallbacks, branches, memory and times on stderr. */
void cli_print_verbose(const tl_result *r, bool grad, const cli_times *t);
/* --profile: per-op calls, time, share and device, forward and backward. */
void cli_print_profile(const tl_result *r);
/* --report FILE.json, written whole or not at all. */
tl_code cli_write_report(const char *path, const tl_graph *g, const tl_result *r, const cli_times *t,
                         tl_status *st);

/* ---------- programs (cmd_program.c) ---------- */

/* Whether GRAPH is a program: a .tl file, or what cli_inline_graph made. */
bool cli_is_program(const char *graph);
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

/* ---------- the arguments of run, grad and gradcheck (cmd_run.c) ---------- */

/* What run and grad were given.  gradcheck takes its own options first and
 * hands the rest (GRAPH or -e, NAME=TENSOR, -i, --seed, --wrt, --format,
 * -q) to the same parser. */
typedef struct cli_run_args {
    bool grad; /* --seed, --wrt and --of allowed */
    const char *graph;
    char *inline_graph; /* -e TEXT */
    const char *output, *device, *wrt, *max_memory, *expect, *only, *of, *outputs, *report;
    bool json, full, strict, verbose, quiet, outside, profile, check_finite;
    tl_compare_opts cmp;
    int nbind, nseed, nnpz;
    const char **npz;  /* -i FILE.npz, in order ("-": standard input) */
    const char **bind; /* NAME=TENSOR */
    const char **seed; /* [OUT=]TENSOR */
} cli_run_args;

/* Each returns 0, or the exit code after printing the error. */
int cli_parse_run_args(int argc, char **argv, cli_run_args *c);
void cli_run_args_free(cli_run_args *c);
/* TL_NUM_THREADS, when set, is a whole number from 1 to 1024. */
int cli_threads_ok(void);
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

/* ---------- commands: argv[0] is the command's name ---------- */

int cmd_run(int argc, char **argv);  /* run and grad */
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
