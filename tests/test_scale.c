/* Scale: a recurrence of a million scalar steps runs forward and backward
 * through the release binary ($TL, default ./tl) without recursion, and its
 * memory grows linearly with the steps (peak RSS of 1e6 steps against
 * 2.5e5 steps; memory, unlike time, is not noisy on a shared machine). */
#define _DEFAULT_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs tl grad on the graph; returns the child's peak RSS in KiB and
 * fills value and gradient from the json output. */
static long run_grad(const char *graph, const char *fuse, double *y, double *dy)
{
    const char *tl = getenv("TL") ? getenv("TL") : "./tl";
    int fd[2];
    cr_assert(pipe(fd) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        if (fuse)
            setenv("TL_FUSE", fuse, 1);
        execl(tl, tl, "grad", graph, "x=2.0", "--format", "json", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[4096] = {0};
    size_t n = 0;
    ssize_t got;
    while (n < sizeof buf - 1 && (got = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)got;
    close(fd[0]);
    int status;
    struct rusage ru;
    cr_assert(wait4(pid, &status, 0, &ru) == pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tl failed on %s: %s", graph, buf);
    const char *d = strstr(buf, "\"data\": [");
    cr_assert(d, "no data in %s", buf);
    *y = strtod(d + 9, NULL);
    d = strstr(d + 9, "\"data\": [");
    cr_assert(d, "no gradient in %s", buf);
    *dy = strtod(d + 9, NULL);
    return ru.ru_maxrss;
}

/* The general path (TL_FUSE=0: a tape entry per node and step), and the
 * scalar loop (exec/loop.c: a few bytes a node and step). */
static void million_steps(const char *fuse, double lo, double hi, long limit_kib)
{
    double y1, d1, y4, d4;
    long small = run_grad("tests/fixtures/scale/iterate_250000.json", fuse, &y1, &d1);
    long big = run_grad("tests/fixtures/scale/iterate_1000000.json", fuse, &y4, &d4);
    double k = pow(0.999999, 1e6);
    cr_expect(fabs(y4 - (1 + k)) < 1e-9, "y = %.17g, expected %.17g", y4, 1 + k);
    cr_expect(fabs(d4 - k) < 1e-9, "dy/dx = %.17g, expected %.17g", d4, k);
    cr_expect(fabs(d1 - pow(0.999999, 2.5e5)) < 1e-9, "dy/dx = %.17g", d1);
    double ratio = (double)big / (double)small;
    cr_log_info("TL_FUSE=%s: peak RSS %ld KiB for 2.5e5 steps, %ld KiB for 1e6 (ratio %.2f)",
                fuse ? fuse : "unset", small, big, ratio);
    cr_expect(ratio > lo && ratio < hi, "memory is not linear in the steps: ratio %.2f", ratio);
    cr_expect(big < limit_kib, "a million scalar steps took %ld KiB", big);
}

Test(scale, million_step_iterate_is_linear, .timeout = 300) { million_steps("0", 2.5, 4.5, 1500 * 1024); }

/* 16 bytes of values and 8 of mask a step, over a baseline of a few MiB */
Test(scale, million_step_scalar_loop_is_compact, .timeout = 300) { million_steps(NULL, 1.5, 4.5, 48 * 1024); }

/* Peak RSS in KiB of tl hvp on a recurrence over a sequence of T values,
 * each step's value a take of the input: the recorded backward of each
 * take is a full-size scatter, which the tape kept whole (T = 8000 took
 * 1 GB, and 2000 took 75 MB); it keeps only its indices now. */
static long sequence_hvp(int T)
{
    char graph[] = "/tmp/tl-scale-XXXXXX";
    int gfd = mkstemp(graph);
    cr_assert(gfd >= 0);
    FILE *f = fdopen(gfd, "w");
    cr_assert(f);
    fprintf(f, "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": [{\"id\": \"h\", \"op\": \"iterate\", "
               "\"count\": %d, \"init\": [0], \"state\": [\"s\"], \"index\": \"i\", \"body\": {\"nodes\": ["
               "{\"id\": \"xi\", \"op\": \"take\", \"args\": [\"x\", \"i\"], \"axis\": 0},"
               "{\"id\": \"a\", \"op\": \"mul\", \"args\": [\"s\", 0.5]},"
               "{\"id\": \"b\", \"op\": \"add\", \"args\": [\"a\", \"xi\"]},"
               "{\"id\": \"c\", \"op\": \"tanh\", \"args\": [\"b\"]}], \"result\": \"c\"}}], \"outputs\": [\"h\"]}\n",
            T);
    cr_assert(fclose(f) == 0);
    size_t cap = (size_t)T * 24 + 16;
    char *x = malloc(cap), *tx = malloc(cap);
    cr_assert(x && tx);
    size_t k = (size_t)snprintf(x, cap, "x=[");
    for (int i = 0; i < T; i++)
        k += (size_t)snprintf(x + k, cap - k, i ? ",%.6f" : "%.6f", -1.0 + 2.0 * i / (T - 1));
    snprintf(x + k, cap - k, "]");
    snprintf(tx, cap, "x=%s", x + 2);
    const char *tl = getenv("TL") ? getenv("TL") : "./tl";
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(tl, tl, "hvp", graph, x, "--tangent", tx, "--format", "json", (char *)NULL);
        _exit(127);
    }
    int status;
    struct rusage ru;
    cr_assert(wait4(pid, &status, 0, &ru) == pid);
    unlink(graph);
    free(x);
    free(tx);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tl hvp failed for %d steps", T);
    return ru.ru_maxrss;
}

/* (the others' timeout: Criterion's runner leaks 48 bytes, which the
 * sanitizer reports, when tests of different timeouts run side by side) */
Test(scale, sequence_take_hvp_is_linear, .timeout = 300)
{
    long small = sequence_hvp(2000), big = sequence_hvp(8000);
    double ratio = (double)big / (double)small;
    cr_log_info("tl hvp over a sequence: peak RSS %ld KiB for 2000 steps, %ld KiB for 8000 (ratio %.2f)", small,
                big, ratio);
    cr_expect(ratio < 6, "memory is not linear in the steps: ratio %.2f (quadratic: 16)", ratio);
    cr_expect(big < 200 * 1024, "8000 steps took %ld KiB", big);
}
