/* End-to-end tests of the built `tl` binary (spec/cli.md), data-driven.
 *
 * The cases are data: tests/cli/cases.txt (format described at its top).
 * Each case is one shell command run through /bin/sh -c from the current
 * directory (the repository root), with stdin from /dev/null and stdout and
 * stderr captured to files; its exit status and output are then checked.
 *
 * Environment:
 *   TL             the binary under test (default ./tl); exported to cases
 *   TL_CLI_CASES   the cases file (default tests/cli/cases.txt); e.g.
 *                  TL_CLI_CASES=tests/cli/known_bugs.txt runs the known bugs
 *   TL_CLI_TIMEOUT seconds one case may run (default 60)
 * Each case also gets W, the path of a fresh empty scratch folder that is
 * removed afterwards.
 *
 * Rules checked for every case besides its own expectations:
 *   - exit status 2 or 3: stderr is exactly one line, "tl: error: ...\n";
 *   - exit status 0: stderr has no "tl: error:".
 * Every failing case is reported with its file:line and command; the test
 * fails when any case does. */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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
    K_EMPTY,                    /* "stdout" or "stderr" is empty */
    K_EXISTS, K_ABSENT,         /* a path ($W expanded) after the run */
};

typedef struct {
    enum kind kind;
    char *value;
    int line;
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
            while (k < sizeof keys / sizeof keys[0] && strcmp(keys[k].key, key))
                k++;
            if (k == sizeof keys / sizeof keys[0]) {
                buf_printf(errs, "%s:%d: unknown key \"%s\"\n", path, first, key);
            } else if (keys[k].kind == K_EMPTY && strcmp(trim(val), "stdout") &&
                       strcmp(trim(val), "stderr")) {
                buf_printf(errs, "%s:%d: empty: wants stdout or stderr\n", path, first);
            } else {
                expect *ne = realloc(c->ex, (size_t)(c->nex + 1) * sizeof *ne);
                cr_assert_not_null(ne, "out of memory");
                c->ex = ne;
                ne[c->nex].kind = keys[k].kind;
                ne[c->nex].line = first;
                bool raw = keys[k].kind == K_STDOUT_RE || keys[k].kind == K_STDERR_RE;
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

static void free_cases(tcase *cs, int n)
{
    for (int i = 0; i < n; i++) {
        free(cs[i].cmd);
        free(cs[i].show);
        free(cs[i].skip_if);
        for (int k = 0; k < cs[i].nex; k++)
            free(cs[i].ex[k].value);
        free(cs[i].ex);
    }
    free(cs);
}

/* ---------- values ---------- */

/* Substring values: \n \t \s (space) \\ escapes. */
static char *unescape(const char *s)
{
    char *out = xstrdup(s), *o = out;
    for (; *s; s++) {
        if (*s != '\\' || !s[1]) {
            *o++ = *s;
            continue;
        }
        s++;
        *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s == 's' ? ' ' : *s;
    }
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
    buf_printf(msg, "\n    %s (%zu bytes):", label, n);
    if (!n)
        return;
    size_t lim = n < 600 ? n : 600;
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

static double timeout_s(void)
{
    const char *t = getenv("TL_CLI_TIMEOUT");
    double v = t ? atof(t) : 0;
    return v > 0 ? v : 60;
}

/* Runs cmd through /bin/sh -c; stdout and stderr to the given files (or
 * /dev/null when NULL).  Returns the exit status, 128+N for a signal N, or
 * -1 when it had to be killed after the timeout. */
static int run_sh(const char *cmd, const char *out, const char *err)
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
    struct timespec t0, now, nap = {0, 2 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double limit = timeout_s();
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            cr_assert_fail("waitpid: %s", strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 > limit) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    kill(-pid, SIGKILL); /* anything the command left running in background */
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
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

/* Runs one case; returns 1 pass, 0 fail (message in msg), -1 skipped. */
static int run_case(const tcase *c, const char *cases_path, const char *root, buf *msg)
{
    char w[4096], out[4096], err[4096];
    snprintf(w, sizeof w, "%s/w", root);
    snprintf(out, sizeof out, "%s/stdout", root);
    snprintf(err, sizeof err, "%s/stderr", root);
    rm_rf(w);
    cr_assert_eq(mkdir(w, 0755), 0, "mkdir %s: %s", w, strerror(errno));
    setenv("W", w, 1);

    if (c->skip_if && run_sh(c->skip_if, NULL, NULL) == 0)
        return -1;

    int rc = run_sh(c->cmd, out, err);
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

Test(cli, cases, .timeout = 0)
{
    const char *path = getenv("TL_CLI_CASES");
    if (!path || !*path)
        path = "tests/cli/cases.txt";
    const char *tl = getenv("TL");
    if (!tl || !*tl)
        tl = "./tl";
    setenv("TL", tl, 1);

    buf errs = {0};
    int n = 0;
    tcase *cs = parse_cases(path, &n, &errs);
    cr_assert_null(errs.s, "errors in the cases file:\n%s", errs.s ? errs.s : "");
    cr_assert_gt(n, 0, "%s: no cases", path);
    if (access(tl, X_OK))
        cr_assert_fail("TL=%s is not an executable (build it with `make tl`)", tl);

    char root[] = "/tmp/tl-cli.XXXXXX";
    cr_assert_not_null(mkdtemp(root), "mkdtemp: %s", strerror(errno));

    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        buf msg = {0};
        int r = run_case(&cs[i], path, root, &msg);
        if (r > 0)
            passed++;
        else if (r < 0)
            skipped++, cr_log_info("%s:%d: skipped: %s", path, cs[i].line, cs[i].show);
        else {
            failed++;
            cr_expect_fail("%s", msg.s);
        }
        free(msg.s);
    }
    rm_rf(root);
    cr_log_info("%s: %d cases: %d passed, %d failed, %d skipped", path, n, passed, failed, skipped);
    free_cases(cs, n);
    cr_assert_eq(failed, 0, "%d of %d cases in %s failed (each is reported above)", failed, n, path);
}
