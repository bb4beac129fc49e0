/* Replays every input the fuzzers ever found a problem with.  Each file in
 * tests/fuzz/regressions/NAME/ goes through the same code as the libFuzzer
 * harness tests/fuzz/fuzz_NAME.c (included below with FUZZ_NO_MAIN), which
 * asserts that the input either succeeds or fails cleanly with TL_EINPUT
 * (for graphs also "out of memory", see fuzz_graph.c); the ASan/UBSan
 * build of the library turns any memory error into a crash of the test.
 * Zero files is fine, but every directory must exist and be scanned.
 * Run from the repository root; see tests/fuzz/README.md. */
#define _GNU_SOURCE /* fuzz_npz.c: memfd_create */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NO_MAIN
#define FUZZ_FAIL(...) cr_assert_fail(__VA_ARGS__)
#include "tests/fuzz/fuzz_graph.c"
#include "tests/fuzz/fuzz_literal.c"
#include "tests/fuzz/fuzz_npy.c"
#include "tests/fuzz/fuzz_npz.c"
#include "tests/fuzz/fuzz_onnx.c"
#include "tests/fuzz/fuzz_program.c"
#include "tests/fuzz/fuzz_results.c"

#define REGDIR "tests/fuzz/regressions/"

typedef int (*fuzz_one_fn)(const uint8_t *data, size_t size);

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
    }
    cr_assert(!ferror(f), "cannot read %s", path);
    fclose(f);
    *len = n;
    return buf;
}

/* Feeds every regular file of REGDIR/name (dot files such as .gitkeep
 * excepted) to fn; returns how many. */
static int replay(const char *name, fuzz_one_fn fn)
{
    char dir[256];
    snprintf(dir, sizeof dir, REGDIR "%s", name);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot scan %s (run from the repository root)", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *buf = slurp(path, &len);
        /* Names the input should the harness crash (the sanitizer's report
         * follows on stderr). */
        fprintf(stderr, "fuzz regression: %s\n", path);
        cr_log_info("replaying %s (%zu bytes)", path, len);
        fn(buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    cr_log_info("%s: %d regression inputs", dir, n);
    return n;
}

Test(fuzz_regressions, graph) { cr_assert_geq(replay("graph", fuzz_graph_one), 0); }
Test(fuzz_regressions, npy) { cr_assert_geq(replay("npy", fuzz_npy_one), 0); }
Test(fuzz_regressions, npz) { cr_assert_geq(replay("npz", fuzz_npz_one), 0); }
Test(fuzz_regressions, literal) { cr_assert_geq(replay("literal", fuzz_literal_one), 0); }
Test(fuzz_regressions, program) { cr_assert_geq(replay("program", fuzz_program_one), 0); }
Test(fuzz_regressions, results) { cr_assert_geq(replay("results", fuzz_results_one), 0); }
Test(fuzz_regressions, onnx) { cr_assert_geq(replay("onnx", fuzz_onnx_one), 0); }

/* The harnesses reject what they should: a sanity check that the replay is
 * not vacuous even while the regression directories are empty. */
Test(fuzz_regressions, harnesses_accept_clean_errors)
{
    static const char bad_graph[] = "{\"version\": 2}";
    static const char good_graph[] = "{\"version\": 1, \"inputs\": [\"x\"], \"nodes\": "
                                     "[{\"id\": \"y\", \"op\": \"mul\", \"args\": [\"x\", \"x\"]}], "
                                     "\"outputs\": \"y\"}";
    fuzz_graph_one((const uint8_t *)bad_graph, sizeof bad_graph - 1);
    fuzz_graph_one((const uint8_t *)good_graph, sizeof good_graph - 1);
    fuzz_literal_one((const uint8_t *)"[[1,2],[3", 9);
    fuzz_literal_one((const uint8_t *)"f32:[1,2]", 9);
    fuzz_npy_one((const uint8_t *)"\x93NUMPY", 6);
    fuzz_npz_one((const uint8_t *)"PK\x05\x06", 4);
    fuzz_program_one((const uint8_t *)"y = x * (2", 10);
    fuzz_program_one((const uint8_t *)"y = sin(x) * 2", 14);
    fuzz_onnx_one((const uint8_t *)"\x0a\x03", 2);
}
