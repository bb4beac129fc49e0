/* A test-only device backend, so that the placement and transfer logic is
 * tested on every machine, GPU or not.  It keeps tensor data in memory of
 * its own: each buffer is its own mapping, inaccessible (PROT_NONE) except
 * while the backend itself copies into or out of it or runs a kernel on
 * it, so any read or write of device data from the host outside the
 * backend interface faults at once.  It supports only the ops and dtypes
 * its `want` function picks; the rest take the real CPU fallback path.
 * Its kernels are the CPU's, so results must equal the CPU's bit for bit.
 *
 * testdev_open returns a record the caller closes with testdev_close,
 * which fails the test when device memory is still allocated. */
#ifndef TL_TESTDEV_H
#define TL_TESTDEV_H

/* Include with _DEFAULT_SOURCE defined (for MAP_ANONYMOUS).  A broken
 * rule fails the test (TESTDEV_CHECK; the fake plugin aborts instead). */
#ifndef TESTDEV_CHECK
#include <criterion/criterion.h>
#define TESTDEV_CHECK(cond, ...) cr_assert(cond, __VA_ARGS__)
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/backend.h"

typedef bool (*testdev_want)(tl_opcode op, int n, const tl_dtype *in, tl_dtype out);

typedef struct testdev_buf {
    void *p;
    size_t len; /* mapped bytes, whole pages */
} testdev_buf;

typedef struct testdev {
    tl_backend be;
    testdev_want want;
    testdev_buf *bufs;
    int nbufs, cap;
    int64_t allocs, uploads, downloads, kernels;
} testdev;

static inline testdev *testdev_of(const tl_backend *be) { return (testdev *)be->state; }

static inline testdev_buf *testdev_find(testdev *d, const void *p)
{
    for (int i = d->nbufs - 1; i >= 0; i--)
        if (d->bufs[i].p == p)
            return &d->bufs[i];
    TESTDEV_CHECK(false, "testdev: %p is not device memory", p);
    return NULL;
}

static inline void testdev_protect(testdev *d, const void *p, int prot)
{
    testdev_buf *b = testdev_find(d, p);
    TESTDEV_CHECK(!mprotect(b->p, b->len, prot), "testdev: mprotect failed");
}

static inline void *testdev_alloc(const tl_backend *be, size_t bytes, tl_status *st)
{
    testdev *d = testdev_of(be);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        tl_fail(st, TL_ERUNTIME, "testdev: out of device memory (%zu bytes)", bytes);
        return NULL;
    }
    if (d->nbufs == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->bufs = realloc(d->bufs, sizeof *d->bufs * (size_t)d->cap);
        TESTDEV_CHECK(d->bufs, "testdev: out of memory");
    }
    d->bufs[d->nbufs++] = (testdev_buf){p, len};
    d->allocs++;
    return p;
}

static inline void testdev_release(const tl_backend *be, void *p)
{
    testdev *d = testdev_of(be);
    testdev_buf *b = testdev_find(d, p);
    TESTDEV_CHECK(!munmap(b->p, b->len), "testdev: munmap failed");
    *b = d->bufs[--d->nbufs];
}

static inline tl_code testdev_upload(const tl_backend *be, void *dst, const void *src, size_t bytes,
                                     tl_status *st)
{
    testdev *d = testdev_of(be);
    (void)st;
    testdev_protect(d, dst, PROT_READ | PROT_WRITE);
    memcpy(dst, src, bytes);
    testdev_protect(d, dst, PROT_NONE);
    d->uploads++;
    return TL_OK;
}

static inline tl_code testdev_download(const tl_backend *be, void *dst, const void *src,
                                       size_t bytes, tl_status *st)
{
    testdev *d = testdev_of(be);
    (void)st;
    testdev_protect(d, src, PROT_READ);
    memcpy(dst, src, bytes);
    testdev_protect(d, src, PROT_NONE);
    d->downloads++;
    return TL_OK;
}

static inline tl_code testdev_sync(const tl_backend *be, tl_status *st)
{
    (void)be, (void)st;
    return TL_OK;
}

static inline bool testdev_supports(const tl_backend *be, tl_opcode op, int n, const tl_dtype *in,
                                    tl_dtype out, const char **why)
{
    bool ok = tl_cpu_backend.supports(&tl_cpu_backend, op, n, in, out, why) &&
              testdev_of(be)->want(op, n, in, out);
    if (!ok && why)
        *why = "testdev leaves it to the CPU";
    return ok;
}

/* Opens the device memory of every operand and the result, runs the CPU
 * kernel on it in place, and closes it again. */
static inline tl_code testdev_run(const tl_backend *be, tl_opcode op, int n,
                                  const tl_tensor *const *in, const tl_attrs *a, tl_tensor *out,
                                  tl_status *st)
{
    testdev *d = testdev_of(be);
    for (int i = 0; i < n; i++) {
        TESTDEV_CHECK(in[i]->home == be, "testdev: operand %d of %s is not on the device", i,
                      tl_ops[op].name);
        testdev_protect(d, in[i]->data, PROT_READ);
    }
    TESTDEV_CHECK(out->home == be, "testdev: the result of %s is not on the device", tl_ops[op].name);
    testdev_protect(d, out->data, PROT_READ | PROT_WRITE);
    tl_code rc = tl_cpu_backend.run(&tl_cpu_backend, op, n, in, a, out, st);
    for (int i = 0; i < n; i++)
        testdev_protect(d, in[i]->data, PROT_NONE);
    testdev_protect(d, out->data, PROT_NONE);
    d->kernels++;
    return rc;
}

static inline void testdev_close(tl_backend *be)
{
    testdev *d = testdev_of(be);
    TESTDEV_CHECK(d->nbufs == 0, "testdev: %d buffers still allocated at close", d->nbufs);
    free(d->bufs);
    free(d);
}

static inline tl_backend *testdev_open(testdev_want want)
{
    testdev *d = calloc(1, sizeof *d);
    TESTDEV_CHECK(d, "testdev: out of memory");
    d->want = want;
    d->be = (tl_backend){
        .abi = TL_BACKEND_ABI,
        .name = "testdev:0",
        .kind = TL_DEV_CUDA, /* stands in for a GPU */
        .state = d,
        .supports = testdev_supports,
        .run = testdev_run,
        .alloc = testdev_alloc,
        .release = testdev_release,
        .upload = testdev_upload,
        .download = testdev_download,
        .sync = testdev_sync,
        .close = testdev_close,
    };
    return &d->be;
}

#endif
