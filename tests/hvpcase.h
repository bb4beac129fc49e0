/* The second-derivative cases of tests/fixtures/hvp/cases.npz (made by
 * tests/gen/hvpfix.py), as tests/test_hvp.c and tests/test_cuda_host.c
 * load and run them: a case's graph, inputs, seeds and tangents; its hvps
 * or jvps on a backend; every case of the file in turn.  Include after
 * <criterion/criterion.h>, exec/exec.h and formats/npz.h. */
#ifndef TL_TEST_HVPCASE_H
#define TL_TEST_HVPCASE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CASES "tests/fixtures/hvp/cases.npz"

typedef struct hcase {
    char dir[16], name[200];
    tl_graph *g;
    tl_tensor **in, **seed, **tangent;
} hcase;

static inline tl_tensor *get(const tl_npz *z, const char *fmt, const char *a, const char *b, const char *c)
{
    char key[600];
    snprintf(key, sizeof key, fmt, a, b, c);
    tl_status st = {0};
    return tl_npz_has(z, key) ? tl_npz_get(z, key, &st) : NULL;
}

static inline bool load_case(const tl_npz *z, const char *dir, const char *name, hcase *h)
{
    char path[600];
    tl_status st = {0};
    memset(h, 0, sizeof *h);
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    snprintf(h->name, sizeof h->name, "%s", name);
    snprintf(path, sizeof path, "tests/fixtures/%s/%s.json", dir, name);
    h->g = tl_graph_load(path, &st);
    cr_assert(h->g, "%s: %s", path, st.msg);
    int ni = h->g->ninputs, no = h->g->noutputs;
    h->in = calloc((size_t)ni + 1, sizeof *h->in);
    h->tangent = calloc((size_t)ni + 1, sizeof *h->tangent);
    h->seed = calloc((size_t)no + 1, sizeof *h->seed);
    tl_npz *src = NULL;
    if (strcmp(dir, "hvp")) { /* inputs and seeds: the original fixture's */
        snprintf(path, sizeof path, "tests/fixtures/%s/%s.npz", dir, name);
        src = tl_npz_open(path, &st);
        cr_assert(src, "%s: %s", path, st.msg);
    }
    for (int i = 0; i < ni; i++) {
        const char *n = h->g->inputs[i].name;
        h->in[i] = src ? get(src, "in/%s%s%s", n, "", "") : get(z, "hvp/%s/in/%s%s", name, n, "");
        cr_assert(h->in[i], "%s: no input %s", name, n);
        h->tangent[i] = get(z, "%s/%s/tangent/%s", dir, name, n);
    }
    for (int i = 0; i < no; i++) {
        const char *n = h->g->slot_name[h->g->outputs[i]];
        h->seed[i] = src ? get(src, "seed/%s%s%s", n, "", "") : get(z, "hvp/%s/seed/%s%s", name, n, "");
        cr_assert(h->seed[i], "%s: no seed %s", name, n);
        if (tl_dtype_is_int(h->seed[i]->dtype)) {
            tl_tensor_unref(h->seed[i]);
            h->seed[i] = NULL;
        }
    }
    tl_npz_close(src);
    return true;
}

static inline void free_case(hcase *h)
{
    for (int i = 0; h->g && i < h->g->ninputs; i++) {
        tl_tensor_unref(h->in[i]);
        tl_tensor_unref(h->tangent[i]);
    }
    for (int i = 0; h->g && i < h->g->noutputs; i++)
        tl_tensor_unref(h->seed[i]);
    free(h->in);
    free(h->tangent);
    free(h->seed);
    tl_graph_free(h->g);
}

/* The case's hvps (jvp false) or jvps into d (ninputs + noutputs slots)
 * on backend be (NULL: the CPU); false (logged) when tl refused. */
static int64_t fuse_min; /* the runs' tl_run_opts.fuse_min */

static inline bool products(hcase *h, const tl_backend *be, bool jvp, tl_tensor **d)
{
    tl_status st = {0};
    int ni = h->g->ninputs;
    tl_run_opts o = {.record = true, .twice = true, .backend = be, .lean_tape = be != NULL, .fuse_min = fuse_min};
    tl_result *r = NULL;
    tl_tensor **grads = calloc((size_t)ni + 1, sizeof *grads);
    bool ok = !tl_run(h->g, h->in, &o, &r, &st) &&
              !tl_result_pullback_recorded(r, jvp ? NULL : h->seed, jvp, grads, &st) &&
              !tl_result_pullback_again(r, h->tangent, jvp ? NULL : d, jvp ? d : NULL, &st);
    if (!ok)
        cr_log_error("%s/%s (%s%s): %s", h->dir, h->name, jvp ? "jvp" : "hvp", be ? ", device" : "", st.msg);
    for (int i = 0; i < ni; i++)
        tl_tensor_unref(grads[i]);
    free(grads);
    tl_result_free(r);
    return ok;
}

/* Every case of the file: its directory and name, once each. */
static inline void each(void (*fn)(const tl_npz *z, const char *dir, const char *name, int *fails, int *count),
                 int *fails, int *count)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open(CASES, &st);
    cr_assert(z, "%s (run from the repository root): %s", CASES, st.msg);
    char last[300] = "";
    *fails = *count = 0;
    for (int k = 0; k < tl_npz_count(z); k++) {
        const char *key = tl_npz_key(z, k), *s1 = strchr(key, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        if (!s2 || (size_t)(s2 - key) >= sizeof last || !strncmp(key, last, (size_t)(s2 - key) + 1))
            continue;
        snprintf(last, sizeof last, "%.*s", (int)(s2 - key + 1), key);
        char dir[16], name[200];
        snprintf(dir, sizeof dir, "%.*s", (int)(s1 - key), key);
        snprintf(name, sizeof name, "%.*s", (int)(s2 - s1 - 1), s1 + 1);
        (*count)++;
        fn(z, dir, name, fails, count);
    }
    tl_npz_close(z);
}

#endif
