/* End-to-end tests of the built `tl` binary (spec/cli.md), data-driven.
 *
 * The cases are data: every .txt file in tests/cli/ except those whose
 * name starts with known_bugs, in name order (cases.txt, hostile.txt, ...;
 * the format is described at the top of tests/cli/cases.txt).  Each case
 * is one shell command run through /bin/sh -c from the current directory
 * (the repository root), with stdin from /dev/null and stdout and stderr
 * captured to files; its exit status and output are then checked.
 *
 * Environment:
 *   TL             the binary under test (default ./tl); exported to cases.
 *                  It may be several words, e.g.
 *                    TL="valgrind -q --error-exitcode=97 ./tl"
 *                  The harness then writes a small wrapper script
 *                  (exec WORDS "$@", the words split by the shell) and
 *                  exports TL as its path, so cases keep writing "$TL"
 *                  quoted, in tl lines and sh: lines alike.  TL_BARE is
 *                  then the last word, the binary alone, for a skip-if
 *                  that asks about the machine, not the binary (is a GPU
 *                  usable here?): under valgrind, a tl that loads the CUDA
 *                  plugin and cuBLAS takes 14 s to start.  Otherwise
 *                  TL_BARE is TL.
 *   TL_CLI_CASES   the cases files instead of tests/cli/NAME.txt: one path or
 *                  several joined by ':', e.g.
 *                  TL_CLI_CASES=tests/cli/known_bugs.txt runs the known bugs
 *   TL_CLI_TIMEOUT seconds one case may run (default 60)
 *   TL_CLI_JOBS    cases run at the same time (default: the number of CPUs,
 *                  at most 8); each has its own scratch folder, so any
 *                  number is safe; failures are reported in file order
 *   TL_CLI_EXCERPT bytes of stdout/stderr quoted per failure (default 600)
 *   TL_CLI_EVERY   N: only the first case of each file and every Nth after it
 *                  (default 1, all); `make check` runs valgrind over every
 *                  4th case, the sanitized and release binaries over all
 * Each case also gets W, the path of a fresh empty scratch folder that is
 * removed afterwards.
 *
 * Besides the escapes that tests/cli/cases.txt lists for substring values
 * (\n \t \s \\), \xHH stands for the byte with that hex value (not 00).
 *
 * Rules checked for every case besides its own expectations:
 *   - exit status 2 or 3: stderr is exactly one line, "tl: error: ...\n";
 *   - exit status 0: stderr has no "tl: error:";
 *   - no temporary output file is left anywhere under $W: no name that
 *     starts with ".tl-" or contains ".tmp" (tl writes such a file beside
 *     the output and renames it: a leftover is partial output).
 * Every failing case is reported with its FILE:LINE and command, in file
 * order; the test fails when any case does. */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "cli/options.h"

/* ---------- growing strings ---------- */

typedef struct {
    char *s;
    size_t n, cap;
} buf;

static void buf_add(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        cr_assert_not_null(p, "out of memory");
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void buf_printf(buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        buf_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    cr_assert_not_null(big, "out of memory");
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_add(b, big, (size_t)n);
    free(big);
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    cr_assert_not_null(p, "out of memory");
    return p;
}

/* ---------- the cases file ---------- */

enum kind {
    K_STDOUT, K_STDERR,         /* substring (escapes \n \t \s \\) */
    K_STDOUT_RE, K_STDERR_RE,   /* POSIX extended regex, ^ $ per line */
    K_STDOUT_NOT, K_STDERR_NOT, /* substring that must not occur */
    K_JSON,                     /* substring of stdout, numbers normalised */
    K_JSON_NEAR,                /* the same, numbers within a tolerance */
    K_EMPTY,                    /* "stdout" or "stderr" is empty */
    K_EXISTS, K_ABSENT,         /* a path ($W expanded) after the run */
};

typedef struct {
    enum kind kind;
    char *value;
    int line;
    double rtol, atol; /* K_JSON_NEAR */
} expect;

typedef struct {
    int line;       /* of the command */
    char *cmd;      /* the shell command line */
    char *show;     /* the command as written in the file */
    int exit_code;  /* -1 when missing (an error in the file) */
    char *skip_if;  /* shell command: skip the case when it exits 0 */
    expect *ex;
    int nex;
} tcase;

static const struct {
    const char *key;
    enum kind kind;
} keys[] = {
    {"stdout", K_STDOUT},         {"stderr", K_STDERR},         {"stdout~", K_STDOUT_RE},
    {"stderr~", K_STDERR_RE},     {"stdout!", K_STDOUT_NOT},    {"stderr!", K_STDERR_NOT},
    {"json", K_JSON},             {"empty", K_EMPTY},           {"exists", K_EXISTS},
    {"absent", K_ABSENT},
};

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Reads the whole file; NULL if it cannot. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    buf b = {0};
    char tmp[4096];
    size_t got;
    while ((got = fread(tmp, 1, sizeof tmp, f)) > 0)
        buf_add(&b, tmp, got);
    fclose(f);
    if (!b.s)
        buf_add(&b, "", 0);
    if (len)
        *len = b.n;
    return b.s;
}

/* The tolerance of a "json rtol=R" or "json rtol=R atol=A" key (the text
 * after "json "): numbers >= 0, rtol required. */
static bool near_key(const char *s, double *rtol, double *atol)
{
    char *end;
    if (strncmp(s, "rtol=", 5))
        return false;
    *rtol = strtod(s + 5, &end);
    *atol = 0;
    if (end == s + 5 || !(*rtol >= 0))
        return false;
    if (!*end)
        return true;
    if (strncmp(end, " atol=", 6))
        return false;
    s = end + 6;
    *atol = strtod(s, &end);
    return end != s && !*end && *atol >= 0;
}

/* Parses the cases; problems in the file are collected in *errs. */
static tcase *parse_cases(const char *path, int *ncases, buf *errs)
{
    char *text = slurp(path, NULL);
    tcase *cs = NULL;
    int n = 0, cap = 0;
    if (!text) {
        buf_printf(errs, "%s: cannot open: %s\n", path, strerror(errno));
        *ncases = 0;
        return NULL;
    }
    int lineno = 0;
    char *p = text;
    while (*p) {
        /* one logical line: a trailing backslash joins the next line */
        buf line = {0};
        int first = lineno + 1;
        for (;;) {
            char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            lineno++;
            bool cont = len && p[len - 1] == '\\';
            buf_add(&line, p, cont ? len - 1 : len);
            p += len + (e != NULL);
            if (!cont || !*p)
                break;
        }
        char *l = trim(line.s ? line.s : (char *)"");
        if (!*l || *l == '#') {
            free(line.s);
            continue;
        }
        bool is_tl = !strncmp(l, "tl ", 3) || !strcmp(l, "tl");
        bool is_sh = !strncmp(l, "sh:", 3);
        if (is_tl || is_sh) {
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                tcase *ncs = realloc(cs, (size_t)cap * sizeof *cs);
                cr_assert_not_null(ncs, "out of memory");
                cs = ncs;
            }
            tcase *c = &cs[n++];
            memset(c, 0, sizeof *c);
            c->line = first;
            c->exit_code = -1;
            c->show = xstrdup(l);
            if (is_tl) {
                buf cmd = {0};
                buf_printf(&cmd, "\"$TL\"%s", l + 2);
                c->cmd = cmd.s;
            } else {
                c->cmd = xstrdup(trim(l + 3));
            }
            free(line.s);
            continue;
        }
        char *colon = strchr(l, ':');
        if (!colon || !n) {
            buf_printf(errs, "%s:%d: %s\n", path, first,
                       n ? "expected KEY: VALUE" : "an expectation before the first command");
            free(line.s);
            continue;
        }
        *colon = '\0';
        char *key = trim(l), *val = colon + 1;
        if (*val == ' ')
            val++; /* one space after the colon belongs to the syntax */
        tcase *c = &cs[n - 1];
        if (!strcmp(key, "exit")) {
            char *end;
            long v = strtol(val, &end, 10);
            if (end == val || *trim(end) || v < 0 || v > 255)
                buf_printf(errs, "%s:%d: exit wants a number 0..255\n", path, first);
            else
                c->exit_code = (int)v;
        } else if (!strcmp(key, "skip-if")) {
            free(c->skip_if);
            c->skip_if = xstrdup(trim(val));
        } else {
            size_t k = 0;
            double rtol = 0, atol = 0;
            bool near = !strncmp(key, "json ", 5);
            while (!near && k < sizeof keys / sizeof keys[0] && strcmp(keys[k].key, key))
                k++;
            if (near && !near_key(key + 5, &rtol, &atol)) {
                buf_printf(errs, "%s:%d: \"%s\": want json rtol=R or json rtol=R atol=A\n", path,
                           first, key);
            } else if (!near && k == sizeof keys / sizeof keys[0]) {
                buf_printf(errs, "%s:%d: unknown key \"%s\"\n", path, first, key);
            } else if (!near && keys[k].kind == K_EMPTY && strcmp(trim(val), "stdout") &&
                       strcmp(trim(val), "stderr")) {
                buf_printf(errs, "%s:%d: empty: wants stdout or stderr\n", path, first);
            } else {
                expect *ne = realloc(c->ex, (size_t)(c->nex + 1) * sizeof *ne);
                cr_assert_not_null(ne, "out of memory");
                c->ex = ne;
                ne[c->nex].kind = near ? K_JSON_NEAR : keys[k].kind;
                ne[c->nex].line = first;
                ne[c->nex].rtol = rtol;
                ne[c->nex].atol = atol;
                bool raw = !near && (keys[k].kind == K_STDOUT_RE || keys[k].kind == K_STDERR_RE);
                ne[c->nex].value = xstrdup(raw ? val : trim(val));
                c->nex++;
            }
        }
        free(line.s);
    }
    for (int i = 0; i < n; i++)
        if (cs[i].exit_code < 0)
            buf_printf(errs, "%s:%d: the case has no \"exit:\" line\n", path, cs[i].line);
    free(text);
    *ncases = n;
    return cs;
}

static void free_case(tcase *c)
{
    free(c->cmd);
    free(c->show);
    free(c->skip_if);
    for (int k = 0; k < c->nex; k++)
        free(c->ex[k].value);
    free(c->ex);
}

static void free_cases(tcase *cs, int n)
{
    for (int i = 0; i < n; i++)
        free_case(&cs[i]);
    free(cs);
}

/* ---------- values ---------- */

/* Substring values: \n \t \s (space) \\ escapes, and \xHH (two hex
 * digits: any byte but NUL, e.g. \x1b for ESC). */
static char *unescape(const char *s)
{
    char *out = xstrdup(s), *o = out;
    for (; *s; s++) {
        if (*s != '\\' || !s[1]) {
            *o++ = *s;
            continue;
        }
        s++;
        if (*s == 'x' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2]) &&
            (s[1] != '0' || s[2] != '0')) {
            char hex[3] = {s[1], s[2], '\0'};
            *o++ = (char)strtol(hex, NULL, 16);
            s += 2;
            continue;
        }
        *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s == 's' ? ' ' : *s;
    }
    *o = '\0';
    return out;
}

/* s without its whitespace. */
static char *json_strip(const char *s)
{
    char *out = xstrdup(s), *o = out;
    for (; *s; s++)
        if (!isspace((unsigned char)*s))
            *o++ = *s;
    *o = '\0';
    return out;
}

/* json: drops all whitespace and writes integral numbers without ".0"
 * (2.0 -> 2, -0.0 -> -0), so that checks do not depend on spacing or on
 * how an integral float is spelled; every other digit is kept. */
static char *json_norm(const char *s)
{
    char *out = xstrdup(s), *o = out;
    for (const char *p = s; *p; p++) {
        if (isspace((unsigned char)*p))
            continue;
        if (*p == '.' && p > s && isdigit((unsigned char)p[-1]) && p[1] == '0') {
            const char *q = p + 1;
            while (*q == '0')
                q++;
            if (!isdigit((unsigned char)*q) && *q != 'e' && *q != 'E') {
                p = q - 1;
                continue;
            }
        }
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

/* The length of the JSON number at s (-?digits[.digits][e[+-]digits]),
 * 0 when none starts there; *integral: it has no fraction or exponent. */
static size_t number_len(const char *s, bool *integral)
{
    const char *p = s + (*s == '-');
    if (!isdigit((unsigned char)*p))
        return 0;
    while (isdigit((unsigned char)*p))
        p++;
    *integral = true;
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        *integral = false;
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    }
    const char *e = p + (*p == 'e' || *p == 'E');
    e += e > p && (*e == '+' || *e == '-');
    if (e > p && isdigit((unsigned char)*e)) {
        *integral = false;
        for (p = e; isdigit((unsigned char)*p); p++)
            ;
    }
    return (size_t)(p - s);
}

/* want (whitespace dropped) read at out, the numbers of want within
 * |o - w| <= atol + rtol * |w| of out's, but integers on both sides (shapes,
 * counts, index values) equal as written. */
static bool near_at(const char *out, const char *want, double rtol, double atol)
{
    while (*want) {
        bool wi, oi;
        size_t wn = number_len(want, &wi), on = wn ? number_len(out, &oi) : 0;
        if (!wn) {
            if (*out++ != *want++)
                return false;
            continue;
        }
        if (!on)
            return false;
        if (wi && oi) {
            if (wn != on || memcmp(out, want, wn))
                return false;
        } else {
            double o = strtod(out, NULL), w = strtod(want, NULL);
            if (!(fabs(o - w) <= atol + rtol * fabs(w)))
                return false;
        }
        out += on;
        want += wn;
    }
    return true;
}

/* A json rtol= check: want occurs in out, whitespace dropped from both, its
 * numbers within the tolerance of those at their places.  A want that
 * starts with a number matches only where a whole number of out starts. */
static bool json_near(const char *out, const char *want, double rtol, double atol)
{
    char *o = json_strip(out), *w = json_strip(want);
    bool hit = false, integral;
    bool number_first = number_len(w, &integral) > 0;
    for (const char *p = o; *p && !hit; p++) {
        if (number_first && p > o && strchr("0123456789.eE+-", p[-1]))
            continue;
        hit = near_at(p, w, rtol, atol);
    }
    free(o);
    free(w);
    return hit;
}

/* Replaces every "$W" (or "${W}") by the scratch folder. */
static char *expand_w(const char *s, const char *w)
{
    buf b = {0};
    while (*s) {
        if (!strncmp(s, "${W}", 4)) {
            buf_add(&b, w, strlen(w));
            s += 4;
        } else if (s[0] == '$' && s[1] == 'W' && !isalnum((unsigned char)s[2]) && s[2] != '_') {
            buf_add(&b, w, strlen(w));
            s += 2;
        } else {
            buf_add(&b, s, 1);
            s++;
        }
    }
    if (!b.s)
        buf_add(&b, "", 0);
    return b.s;
}

/* A short, one-line-per-line excerpt of captured output for messages. */
static void excerpt(buf *msg, const char *label, const char *s)
{
    size_t n = strlen(s);
    const char *env = getenv("TL_CLI_EXCERPT");
    size_t most = env && atol(env) > 0 ? (size_t)atol(env) : 600;
    buf_printf(msg, "\n    %s (%zu bytes):", label, n);
    if (!n)
        return;
    size_t lim = n < most ? n : most;
    buf_add(msg, "\n      | ", 9);
    for (size_t i = 0; i < lim; i++) {
        if (s[i] == '\n') {
            if (i + 1 < lim)
                buf_add(msg, "\n      | ", 9);
        } else if (isprint((unsigned char)s[i]) || s[i] == '\t') {
            buf_add(msg, &s[i], 1);
        } else {
            buf_printf(msg, "\\x%02x", (unsigned char)s[i]);
        }
    }
    if (lim < n)
        buf_add(msg, " [...]", 6);
}

/* ---------- running ---------- */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_rf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Names under $W that look like a temporary output file that was left
 * behind: tl writes a hidden .tl-XXXXXX beside the output, then renames it
 * (older versions: PATH.tmpXXXXXX). */
static buf *leftover_acc;
static const char *leftover_root;

static int find_tmp(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag;
    const char *name = path + ftw->base;
    if (ftw->level > 0 && (!strncmp(name, ".tl-", 4) || strstr(name, ".tmp")))
        buf_printf(leftover_acc, " %s", path + strlen(leftover_root) + 1);
    return 0;
}

static double timeout_s(void)
{
    const char *t = getenv("TL_CLI_TIMEOUT");
    double v = t ? atof(t) : 0;
    return v > 0 ? v : 60;
}

static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *t = getenv(name);
    int v = t && *t ? atoi(t) : dflt;
    return v < lo ? lo : v > hi ? hi : v;
}

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Starts cmd through /bin/sh -c in a new process group; stdout and stderr
 * to the given files (or /dev/null when NULL), stdin from /dev/null. */
static pid_t spawn_sh(const char *cmd, const char *out, const char *err)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        int in = open("/dev/null", O_RDONLY);
        int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || o < 0 || e < 0 || dup2(in, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        close(in);
        close(o);
        close(e);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so that kill(-pid) cannot miss */
    return pid;
}

/* The exit status of a finished child: its code, 128+N for a signal N. */
static int exit_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

/* Runs cmd to the end (skip-if commands).  Returns the exit status or -1
 * when it had to be killed after the timeout. */
static int run_sh(const char *cmd, const char *out, const char *err)
{
    pid_t pid = spawn_sh(cmd, out, err);
    struct timespec t0, nap = {0, 2 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            cr_assert_fail("waitpid: %s", strerror(errno));
        if (since(&t0) > timeout_s()) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    kill(-pid, SIGKILL); /* anything the command left running in background */
    return exit_status(status);
}

static bool re_search(const char *re, const char *text, buf *why)
{
    regex_t rx;
    int rc = regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB);
    if (rc) {
        char e[256];
        regerror(rc, &rx, e, sizeof e);
        buf_printf(why, "bad regex /%s/: %s", re, e);
        return false;
    }
    bool hit = regexec(&rx, text, 0, NULL, 0) == 0;
    regfree(&rx);
    return hit;
}

/* Checks a finished case (exit status rc, -1 for a timeout, output in
 * dir/stdout and dir/stderr, scratch folder dir/w); returns 1 pass, 0 fail
 * with the message in msg. */
static int check_case(const tcase *c, const char *cases_path, const char *dir, int rc, buf *msg)
{
    char w[4096], out[4096], err[4096];
    snprintf(w, sizeof w, "%s/w", dir);
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(err, sizeof err, "%s/stderr", dir);
    char *so = slurp(out, NULL), *se = slurp(err, NULL);
    cr_assert(so && se, "cannot read the captured output");
    buf why = {0};

    if (rc == -1)
        buf_printf(&why, "\n  timed out after %g s", timeout_s());
    else if (rc != c->exit_code)
        buf_printf(&why, "\n  exit status %d%s, expected %d", rc,
                   rc > 128 ? " (killed by a signal?)" : "", c->exit_code);
    if (rc == 2 || rc == 3) {
        char *nl = strchr(se, '\n');
        if (strncmp(se, "tl: error: ", 11) || !nl || nl[1])
            buf_printf(&why, "\n  stderr is not one line \"tl: error: WHERE: WHAT\"");
    } else if (rc == 0 && strstr(se, "tl: error:")) {
        buf_printf(&why, "\n  exit status 0 but stderr has an error line");
    }
    buf left = {0};
    leftover_acc = &left;
    leftover_root = w;
    nftw(w, find_tmp, 16, FTW_PHYS);
    if (left.s)
        buf_printf(&why, "\n  a temporary file was left behind in $W:%s", left.s);
    free(left.s);
    for (int k = 0; k < c->nex; k++) {
        const expect *e = &c->ex[k];
        buf r = {0};
        switch (e->kind) {
        case K_STDOUT:
        case K_STDERR:
        case K_STDOUT_NOT:
        case K_STDERR_NOT: {
            bool is_out = e->kind == K_STDOUT || e->kind == K_STDOUT_NOT;
            bool neg = e->kind == K_STDOUT_NOT || e->kind == K_STDERR_NOT;
            char *v = unescape(e->value);
            if ((strstr(is_out ? so : se, v) != NULL) == neg)
                buf_printf(&why, "\n  line %d: %s %s \"%s\"", e->line, is_out ? "stdout" : "stderr",
                           neg ? "has" : "lacks", e->value);
            free(v);
            break;
        }
        case K_STDOUT_RE:
        case K_STDERR_RE: {
            bool is_out = e->kind == K_STDOUT_RE;
            if (re_search(e->value, is_out ? so : se, &r))
                break;
            if (r.s)
                buf_printf(&why, "\n  line %d: %s", e->line, r.s);
            else
                buf_printf(&why, "\n  line %d: %s does not match /%s/", e->line,
                           is_out ? "stdout" : "stderr", e->value);
            break;
        }
        case K_JSON: {
            char *a = json_norm(so), *v = json_norm(e->value);
            if (!strstr(a, v))
                buf_printf(&why, "\n  line %d: stdout (json, normalised) lacks %s", e->line, v);
            free(a);
            free(v);
            break;
        }
        case K_JSON_NEAR:
            if (!json_near(so, e->value, e->rtol, e->atol))
                buf_printf(&why, "\n  line %d: stdout (json) lacks %s (numbers within rtol %g, atol %g)",
                           e->line, e->value, e->rtol, e->atol);
            break;
        case K_EMPTY: {
            bool is_out = !strcmp(e->value, "stdout");
            if (*(is_out ? so : se))
                buf_printf(&why, "\n  line %d: %s is not empty", e->line, e->value);
            break;
        }
        case K_EXISTS:
        case K_ABSENT: {
            char *pth = expand_w(e->value, w);
            struct stat sb;
            bool there = stat(pth, &sb) == 0;
            if (there != (e->kind == K_EXISTS))
                buf_printf(&why, "\n  line %d: %s %s", e->line, e->value,
                           there ? "exists (it must not)" : "does not exist");
            free(pth);
            break;
        }
        }
        free(r.s);
    }
    int pass = why.s == NULL;
    if (!pass) {
        buf_printf(msg, "%s:%d: %s", cases_path, c->line, c->show);
        buf_add(msg, why.s, why.n);
        excerpt(msg, "stdout", so);
        excerpt(msg, "stderr", se);
    }
    free(why.s);
    free(so);
    free(se);
    return pass;
}

/* ---------- the suite ---------- */

/* One running case: slot k owns the folder ROOT/k (w, stdout, stderr). */
typedef struct job {
    int idx; /* into the flat case list; -1 when the slot is free */
    pid_t pid;
    struct timespec t0;
    char dir[256]; /* ROOT/k: short, so that the paths below always fit */
} job;

typedef struct flat {
    const tcase *c;
    const char *file;
    int result; /* 1 pass, 0 fail, -1 skipped */
    char *msg;
} flat;

/* Prepares the slot's folders and $W; runs skip-if; starts the command.
 * Returns false when the case is skipped. */
static bool start_case(job *j, flat *f)
{
    char w[4096], out[4096], err[4096];
    snprintf(w, sizeof w, "%s/w", j->dir);
    snprintf(out, sizeof out, "%s/stdout", j->dir);
    snprintf(err, sizeof err, "%s/stderr", j->dir);
    rm_rf(w);
    cr_assert_eq(mkdir(w, 0755), 0, "mkdir %s: %s", w, strerror(errno));
    setenv("W", w, 1);
    if (f->c->skip_if && run_sh(f->c->skip_if, NULL, NULL) == 0)
        return false;
    j->pid = spawn_sh(f->c->cmd, out, err);
    clock_gettime(CLOCK_MONOTONIC, &j->t0);
    return true;
}

/* Reaps the slot's case if it has finished (or ran out of time). */
static bool poll_case(job *j, flat *f)
{
    int status, rc;
    pid_t r = waitpid(j->pid, &status, WNOHANG);
    if (r < 0 && errno != EINTR)
        cr_assert_fail("waitpid: %s", strerror(errno));
    if (r == j->pid) {
        rc = exit_status(status);
    } else if (since(&j->t0) > timeout_s()) {
        kill(-j->pid, SIGKILL);
        waitpid(j->pid, &status, 0);
        rc = -1;
    } else {
        return false;
    }
    kill(-j->pid, SIGKILL); /* anything the command left running in background */
    buf msg = {0};
    f->result = check_case(f->c, f->file, j->dir, rc, &msg);
    f->msg = msg.s;
    return true;
}

/* The case files: TL_CLI_CASES (one file, or several separated by ':'),
 * else every tests/cli/NAME.txt but known_bugs*, in name order. */
static int case_files(char ***files)
{
    const char *env = getenv("TL_CLI_CASES");
    int n = 0;
    *files = NULL;
    if (env && *env) {
        char *copy = xstrdup(env), *save = NULL;
        for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
            *files = realloc(*files, sizeof **files * (size_t)(n + 1));
            cr_assert_not_null(*files, "out of memory");
            (*files)[n++] = xstrdup(t);
        }
        free(copy);
        return n;
    }
    glob_t g;
    int rc = glob("tests/cli/*.txt", 0, NULL, &g);
    cr_assert(rc == 0 || rc == GLOB_NOMATCH, "glob tests/cli/*.txt failed");
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        if (!strncmp(base, "known_bugs", 10))
            continue;
        *files = realloc(*files, sizeof **files * (size_t)(n + 1));
        cr_assert_not_null(*files, "out of memory");
        (*files)[n++] = xstrdup(g.gl_pathv[i]);
    }
    if (rc == 0)
        globfree(&g);
    return n;
}

/* A TL of several words ("valgrind -q ./tl") becomes a wrapper script
 * ROOT/tl that runs them, so that cases can keep writing "$TL" quoted. */
static void export_tl(const char *root)
{
    const char *tl = getenv("TL");
    if (!tl || !*tl)
        tl = "./tl";
    if (!strpbrk(tl, " \t")) {
        if (access(tl, X_OK))
            cr_assert_fail("TL=%s is not an executable (build it with `make tl`)", tl);
        setenv("TL", tl, 1);
        setenv("TL_BARE", tl, 1);
        return;
    }
    const char *last = tl + strlen(tl);
    while (last > tl && (last[-1] == ' ' || last[-1] == '\t'))
        last--;
    const char *first = last;
    while (first > tl && first[-1] != ' ' && first[-1] != '\t')
        first--;
    char bare[4096];
    snprintf(bare, sizeof bare, "%.*s", (int)(last - first), first);
    setenv("TL_BARE", bare, 1);
    char wrapper[4096];
    snprintf(wrapper, sizeof wrapper, "%s/tl", root);
    FILE *f = fopen(wrapper, "w");
    cr_assert_not_null(f, "cannot write %s: %s", wrapper, strerror(errno));
    fprintf(f, "#!/bin/sh\n# TL as given, split into words by the shell\nexec %s \"$@\"\n", tl);
    cr_assert_eq(fclose(f), 0, "cannot write %s", wrapper);
    cr_assert_eq(chmod(wrapper, 0755), 0, "chmod %s: %s", wrapper, strerror(errno));
    cr_log_info("TL=%s runs through the wrapper %s", tl, wrapper);
    setenv("TL", wrapper, 1);
}

Test(cli, cases, .timeout = 0)
{
    char **files = NULL;
    int nfiles = case_files(&files);
    cr_assert_gt(nfiles, 0, "no case files (TL_CLI_CASES, or .txt files in tests/cli/)");

    buf errs = {0};
    tcase **per = calloc((size_t)nfiles, sizeof *per);
    int *nper = calloc((size_t)nfiles, sizeof *nper), total = 0;
    cr_assert(per && nper, "out of memory");
    for (int i = 0; i < nfiles; i++) {
        per[i] = parse_cases(files[i], &nper[i], &errs);
        const char *base = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i];
        if (!nper[i] && !errs.s && strncmp(base, "known_bugs", 10)) /* may be empty */
            buf_printf(&errs, "%s: no cases\n", files[i]);
        total += nper[i];
    }
    cr_assert_null(errs.s, "errors in the cases files:\n%s", errs.s ? errs.s : "");

    /* TL_CLI_EVERY=N keeps case 0, N, 2N, ... of each file, so every file
     * is sampled; the others are dropped from the run and the counts. */
    int every = env_int("TL_CLI_EVERY", 1, 1, 1000000), dropped = 0;
    for (int i = 0; every > 1 && i < nfiles; i++) {
        int kept = 0;
        for (int c = 0; c < nper[i]; c++) {
            if (c % every == 0)
                per[i][kept++] = per[i][c];
            else
                free_case(&per[i][c]);
        }
        dropped += nper[i] - kept;
        total -= nper[i] - kept;
        nper[i] = kept;
    }
    if (dropped)
        cr_log_info("TL_CLI_EVERY=%d: %d cases left out of this run", every, dropped);

    flat *all = calloc((size_t)total + 1, sizeof *all);
    cr_assert_not_null(all, "out of memory");
    for (int i = 0, k = 0; i < nfiles; i++)
        for (int c = 0; c < nper[i]; c++, k++)
            all[k] = (flat){&per[i][c], files[i], -2, NULL};

    char root[] = "/tmp/tl-cli.XXXXXX";
    cr_assert_not_null(mkdtemp(root), "mkdtemp: %s", strerror(errno));
    export_tl(root);

    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int njobs = env_int("TL_CLI_JOBS", cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus, 1, 64);
    job *jobs = calloc((size_t)njobs, sizeof *jobs);
    cr_assert_not_null(jobs, "out of memory");
    for (int k = 0; k < njobs; k++) {
        jobs[k].idx = -1;
        snprintf(jobs[k].dir, sizeof jobs[k].dir, "%s/%d", root, k);
        cr_assert_eq(mkdir(jobs[k].dir, 0755), 0, "mkdir %s: %s", jobs[k].dir, strerror(errno));
    }
    struct timespec t0, nap = {0, 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int next = 0, running = 0;
    while (next < total || running) {
        bool idle = true;
        for (int k = 0; k < njobs; k++) {
            job *j = &jobs[k];
            if (j->idx >= 0 && poll_case(j, &all[j->idx])) {
                j->idx = -1;
                running--;
                idle = false;
            }
            while (j->idx < 0 && next < total) {
                flat *f = &all[next++];
                idle = false;
                if (start_case(j, f)) {
                    j->idx = (int)(f - all);
                    running++;
                } else {
                    f->result = -1;
                }
            }
        }
        if (idle)
            nanosleep(&nap, NULL);
    }
    double secs = since(&t0);

    int failed = 0;
    for (int i = 0, k = 0; i < nfiles; i++) {
        int p = 0, fl = 0, s = 0;
        for (int c = 0; c < nper[i]; c++, k++) {
            if (all[k].result > 0) {
                p++;
            } else if (all[k].result < 0) {
                s++;
                cr_log_info("%s:%d: skipped: %s", files[i], all[k].c->line, all[k].c->show);
            } else {
                fl++;
                cr_expect_fail("%s", all[k].msg);
            }
            free(all[k].msg);
        }
        cr_log_info("%s: %d cases: %d passed, %d failed, %d skipped", files[i], nper[i], p, fl, s);
        failed += fl;
    }
    cr_log_info("%d cases in %d file%s in %.1f s (TL_CLI_JOBS=%d)", total, nfiles,
                nfiles == 1 ? "" : "s", secs, njobs);
    rm_rf(root);
    for (int i = 0; i < nfiles; i++) {
        free_cases(per[i], nper[i]);
        free(files[i]);
    }
    free(per);
    free(nper);
    free(files);
    free(all);
    free(jobs);
    cr_assert_eq(failed, 0, "%d of %d cases failed (each is reported above as FILE:LINE)", failed,
                 total);
}

/* ---------- the option table ---------- */

/* Whether tok is an option of the table (cli/options.h). */
static bool in_table(const char *tok)
{
    for (int k = 0; k < CLI_NOPTIONS; k++)
        if ((cli_options[k].s && !strcmp(tok, cli_options[k].s)) ||
            (cli_options[k].l && !strcmp(tok, cli_options[k].l)))
            return true;
    return false;
}

/* Whether the option tok is one of command c's. */
static bool option_of(const char *tok, int c)
{
    for (int k = 0; k < CLI_NOPTIONS; k++)
        if (((cli_options[k].s && !strcmp(tok, cli_options[k].s)) ||
             (cli_options[k].l && !strcmp(tok, cli_options[k].l))) && cli_options[k].cmds & 1 << c)
            return true;
    return false;
}

/* The table against the commands: each takes every option the table
 * gives it (its own parser knows it) and refuses each other one as
 * another command's; and every option tl --help names is in the table. */
Test(cli, options, .timeout = 0)
{
    const char *tl = getenv("TL");
    if (!tl || !*tl)
        tl = "./tl";
    if (strpbrk(tl, " \t")) /* memcheck's TL: ~700 processes under valgrind; the plain run covers it */
        cr_skip_test("TL=%s: the option table is checked with a plain tl", tl);
    char *abs = strchr(tl, '/') ? realpath(tl, NULL) : strdup(tl); /* run from an empty folder */
    cr_assert_not_null(abs, "TL=%s: %s", tl, strerror(errno));
    char dir[] = "/tmp/tl-options-XXXXXX", err[64], cmd[512];
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(err, sizeof err, "%s/err", dir);
    buf fails = {0};
    int checked = 0;
    for (int c = 0; c < CLI_NCOMMANDS; c++)
        for (int k = 0; k < CLI_NOPTIONS; k++)
            for (int form = 0; form < 2; form++) {
                const cli_option *o = &cli_options[k];
                const char *opt = form ? o->l : o->s;
                if (!opt)
                    continue;
                /* run where nothing is written: each option alone (-o 1 without a graph is refused before) */
                snprintf(cmd, sizeof cmd, "cd %s && '%s' %s %s%s", dir, abs, cli_command_names[c], opt,
                         o->value ? " 1" : "");
                int rc = run_sh(cmd, NULL, err);
                char *text = slurp(err, NULL);
                cr_assert_not_null(text);
                bool taken = o->cmds & 1 << c;
                char refused[128];
                snprintf(refused, sizeof refused, "%s is not an option of tl %s", opt, cli_command_names[c]);
                bool ok = rc >= 0 && rc < 128 &&
                          (taken ? !strstr(text, "unknown option") && !strstr(text, "is not an option of") &&
                                       !strstr(text, "takes no value")
                                 : rc == 2 && strstr(text, refused) != NULL);
                if (!ok)
                    buf_printf(&fails, "  tl %s %s%s (%s): exit %d, %s", cli_command_names[c], opt,
                               o->value ? " 1" : "", taken ? "taken" : "refused", rc, text);
                checked++;
                free(text);
            }
    snprintf(cmd, sizeof cmd, "'%s' --help", abs);
    cr_assert_eq(run_sh(cmd, err, NULL), 0, "tl --help");
    char *help = slurp(err, NULL);
    cr_assert_not_null(help);
    int named = 0;
    for (const char *p = help; *p; p++) {
        if (*p != '-' || (p > help && !strchr(" [,(\n", p[-1])))
            continue;
        size_t n = 0; /* --name, or -x alone */
        if (p[1] == '-' && isalpha((unsigned char)p[2]))
            n = 2 + strspn(p + 2, "abcdefghijklmnopqrstuvwxyz0123456789-");
        else if (isalpha((unsigned char)p[1]) && !isalnum((unsigned char)p[2]) && p[2] != '-')
            n = 2;
        if (!n)
            continue;
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)n, p);
        named++;
        if (!in_table(tok))
            buf_printf(&fails, "  tl --help names %s, which cli/options.h lacks\n", tok);
    }
    free(help);
    /* bash completion offers each command its options, those alone */
    for (int c = 0; c < CLI_NCOMMANDS && access("cli/completion.bash", R_OK) == 0; c++) {
        snprintf(cmd, sizeof cmd, "bash -c '. cli/completion.bash; COMP_WORDS=(tl %s -); COMP_CWORD=2; _tl; "
                 "printf \"%%s\\n\" \"${COMPREPLY[@]}\"'", cli_command_names[c]);
        cr_assert_eq(run_sh(cmd, err, NULL), 0, "%s", cmd);
        char *offered = slurp(err, NULL);
        cr_assert_not_null(offered);
        for (char *tok = strtok(offered, "\n"); tok; tok = strtok(NULL, "\n"))
            if (!in_table(tok) || !option_of(tok, c))
                buf_printf(&fails, "  completion offers tl %s %s\n", cli_command_names[c], tok);
        free(offered);
        offered = slurp(err, NULL);
        for (int k = 0; k < CLI_NOPTIONS; k++)
            for (int form = 0; form < 2; form++) {
                const char *opt = form ? cli_options[k].l : cli_options[k].s, *at = offered;
                size_t n = opt ? strlen(opt) : 0;
                while (opt && (at = strstr(at, opt)) && ((at > offered && at[-1] != '\n') || (at[n] && at[n] != '\n')))
                    at += n;
                if (opt && cli_options[k].cmds & 1 << c && strcmp(opt, "--version") && !at)
                    buf_printf(&fails, "  completion lacks tl %s %s\n", cli_command_names[c], opt);
            }
        free(offered);
    }
    rm_rf(dir);
    free(abs);
    cr_log_info("%d option and command pairs, %d options named by tl --help", checked, named);
    cr_assert_gt(named, 30, "tl --help names %d options", named);
    cr_expect(!fails.s, "the option table and the commands differ:\n%s", fails.s);
    free(fails.s);
}

/* ---------- the harness's own checks ---------- */

/* json rtol=: numbers within the tolerance, everything else as written. */
Test(harness, json_near)
{
    const char *out = "{\"grads\": {\"b2\": {\"dtype\": \"f32\", \"shape\": [3], "
                      "\"data\": [0.15507543, 0.04479394, -0.19986936, \"nan\"]}}}";
    /* the last digits of a product differ; shapes and names do not */
    cr_expect(json_near(out, "\"shape\": [3], \"data\": [0.15507543, 0.044793934, -0.19986936", 1e-5, 0));
    cr_expect(json_near(out, "\"data\":[0.155075,0.0447939", 1e-5, 0), "whitespace is dropped");
    cr_expect(!json_near(out, "\"data\": [0.15507543, 0.044793934, -0.19986936", 1e-9, 0));
    cr_expect(!json_near(out, "[0.15507543, 0.0448, -0.19986936", 1e-5, 0), "beyond rtol");
    cr_expect(json_near(out, "[0.15507543, 0.0448, -0.19986936", 1e-5, 1e-5), "within atol");
    cr_expect(!json_near(out, "\"shape\": [4]", 1, 0), "integers are exact");
    cr_expect(!json_near(out, "\"b3\"", 1, 0), "integers in names too");
    cr_expect(!json_near(out, "\"dtype\": \"f64\"", 1e-5, 0), "text is exact");
    cr_expect(json_near(out, "-0.19986936, \"nan\"]", 1e-5, 0));
    cr_expect(!json_near(out, "0.19986936", 1e-5, 0), "a sign is not dropped");
    cr_expect(!json_near(out, "5507543", 1e-5, 0), "a number matches a whole number");
    cr_expect(json_near("[2.0, 1e-07]", "[2, 1.0000001e-7]", 1e-5, 0), "2 reads as 2.0");
    cr_expect(!json_near("[2.5]", "[2]", 1e-5, 0));
}

Test(harness, near_key)
{
    double r, a;
    cr_expect(near_key("rtol=1e-5", &r, &a) && r == 1e-5 && a == 0);
    cr_expect(near_key("rtol=1e-5 atol=1e-7", &r, &a) && r == 1e-5 && a == 1e-7);
    cr_expect(!near_key("rtol=", &r, &a));
    cr_expect(!near_key("rtol=-1", &r, &a));
    cr_expect(!near_key("atol=1e-7", &r, &a));
    cr_expect(!near_key("rtol=1e-5 atol=x", &r, &a));
    cr_expect(!near_key("rtol=1e-5x", &r, &a));
}
