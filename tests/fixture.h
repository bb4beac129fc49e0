/* The reference fixtures of tests/fixtures/{ops,flow} as the test suites
 * use them: one graph and one .npz (in/NAME, seed/OUT, out/OUT,
 * grad/NAME) per case, loaded, run on a chosen backend, and walked over. */
#ifndef TL_TEST_FIXTURE_H
#define TL_TEST_FIXTURE_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "formats/npz.h"

typedef struct fixture {
    char name[256];
    tl_graph *g;
    tl_npz *z;
    tl_tensor **in, **seed;
} fixture;

static inline bool load(const char *dir, const char *name, fixture *f)
{
    char path[1024];
    tl_status st = {0};
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    f->g = tl_graph_load(path, &st);
    cr_expect(f->g != NULL, "%s: %s", name, st.msg);
    snprintf(path, sizeof path, "%s/%s.npz", dir, name);
    f->z = f->g ? tl_npz_open(path, &st) : NULL;
    if (!f->z)
        return false;
    f->in = calloc((size_t)f->g->ninputs + 1, sizeof *f->in);
    f->seed = calloc((size_t)f->g->noutputs + 1, sizeof *f->seed);
    char key[300];
    for (int i = 0; i < f->g->ninputs; i++) {
        snprintf(key, sizeof key, "in/%s", f->g->inputs[i].name);
        f->in[i] = tl_npz_get(f->z, key, &st);
        cr_assert(f->in[i], "%s: %s", name, st.msg);
    }
    for (int i = 0; i < f->g->noutputs; i++) {
        snprintf(key, sizeof key, "seed/%s", f->g->slot_name[f->g->outputs[i]]);
        f->seed[i] = tl_npz_get(f->z, key, &st);
        cr_assert(f->seed[i], "%s: %s", name, st.msg);
        if (tl_dtype_is_int(f->seed[i]->dtype)) { /* an index output: nothing to seed */
            tl_tensor_unref(f->seed[i]);
            f->seed[i] = NULL;
        }
    }
    return true;
}

static inline void unload(fixture *f)
{
    for (int i = 0; f->g && f->in && i < f->g->ninputs; i++)
        tl_tensor_unref(f->in[i]);
    for (int i = 0; f->g && f->seed && i < f->g->noutputs; i++)
        tl_tensor_unref(f->seed[i]);
    free(f->in);
    free(f->seed);
    tl_npz_close(f->z);
    tl_graph_free(f->g);
}

/* Runs forward and backward on a backend (NULL: the CPU); outputs and
 * grads are new references, host tensors. */
static inline bool eval_on(const tl_backend *be, const fixture *f, tl_tensor *const *in,
                           tl_tensor **outs, tl_tensor **grads, tl_status *st)
{
    tl_run_opts o = {.record = grads != NULL, .backend = be};
    tl_result *r;
    if (tl_run(f->g, in, &o, &r, st))
        return false;
    for (int i = 0; i < f->g->noutputs; i++)
        outs[i] = tl_tensor_ref((tl_tensor *)tl_result_output(r, i));
    bool ok = !grads || !tl_result_pullback(r, f->seed, grads, st);
    tl_result_free(r);
    return ok;
}

static inline bool eval(const fixture *f, tl_tensor *const *in, tl_tensor **outs,
                        tl_tensor **grads, tl_status *st)
{
    return eval_on(NULL, f, in, outs, grads, st);
}

typedef int (*checker)(const char *dir, const char *name);

/* Runs check on every case of dir; returns (failures, cases). */
static inline void each_case(const char *dir, checker check, bool fd_only, int *fails, int *count)
{
    DIR *d = opendir(dir);
    cr_assert(d, "cannot open %s (run from the repository root)", dir);
    struct dirent *e;
    *fails = *count = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json"))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
        if (fd_only) {
            /* kinks, detach (invisible to differences), f32 cases, and the
             * required branch-boundary case are checked against references only */
            if (!strncmp(name, "kink_", 5) || strstr(name, "detach") || !strstr(name, "_f64") ||
                !strcmp(name, "map_piecewise_zero_f64"))
                continue;
        }
        (*count)++;
        *fails += check(dir, name);
    }
    closedir(d);
}

#endif
