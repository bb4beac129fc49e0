/* A stand-in CUDA plugin for the end-to-end tests (build/tests/fake-cuda.so):
 * the real plugin interface (backends/plugin.h) over the guarded test
 * device of tests/testdev.h, so that loading, listing, opening, -v, the
 * json device and --strict-device are tested through `tl` itself on
 * machines without a GPU.  Told what to do by the environment:
 *   FAKE_CUDA_DEVICES=N   devices the machine "has" (default 1; 0: none)
 *   FAKE_CUDA_OOM=1       opening fails: out of device memory at start
 *   FAKE_CUDA_LACKS=a,b   ops (by name) the device lacks: they fall back */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TESTDEV_CHECK(cond, ...)                                                   \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fake-cuda: " __VA_ARGS__);                            \
            fputc('\n', stderr);                                                   \
            abort();                                                               \
        }                                                                          \
    } while (0)
#include "testdev.h"

#include "backends/plugin.h"

static int fake_count(char *why, size_t len)
{
    const char *n = getenv("FAKE_CUDA_DEVICES");
    int k = n ? atoi(n) : 1;
    if (k <= 0)
        snprintf(why, len, "no CUDA device (the fake plugin has none)");
    return k > 0 ? k : 0;
}

static tl_code fake_describe(int index, tl_plugin_device *d, tl_status *st)
{
    (void)st;
    snprintf(d->model, sizeof d->model, "Fake GPU %d", index);
    d->memory = (int64_t)16 << 30;
    d->free = (int64_t)15 << 30;
    d->cc_major = 9;
    d->cc_minor = 0;
    return TL_OK;
}

static bool fake_want(tl_opcode op, int n, const tl_dtype *in, tl_dtype out)
{
    (void)n, (void)in, (void)out;
    const char *lacks = getenv("FAKE_CUDA_LACKS");
    if (!lacks)
        return true;
    size_t len = strlen(tl_ops[op].name);
    for (const char *p = lacks; *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && !strncmp(p, tl_ops[op].name, k))
            return false;
        p += k + (p[k] == ',');
    }
    return true;
}

static tl_backend *fake_open(int index, tl_status *st)
{
    if (getenv("FAKE_CUDA_OOM")) {
        tl_fail(st, TL_ERUNTIME, "out of device memory at start (fake)");
        return NULL;
    }
    tl_backend *be = testdev_open(fake_want);
    static char names[16][24];
    snprintf(names[index & 15], sizeof names[0], "cuda:%d", index);
    be->name = names[index & 15];
    be->index = index;
    return be;
}

static const tl_plugin fake = {TL_BACKEND_ABI, fake_count, fake_describe, fake_open};

__attribute__((visibility("default"))) const tl_plugin *tl_cuda_plugin_v1(void);
const tl_plugin *tl_cuda_plugin_v1(void) { return &fake; }
