/* OpenBLAS for matrix products (blas.h).  The tl program links the
 * pthreads build statically (Makefile), so its entry points are simply
 * there: no loading and binding of some 12000 relocations at the first
 * product (1.5-2 ms of a fresh process's first 1024^3 product).  A program that
 * links libtl.a without OpenBLAS finds them NULL below, and the library is
 * loaded on first use instead: the build's (TL_BLAS_LIB: the pthreads
 * build, whose calls are safe from several threads at once), else
 * libopenblas.so.0 as the system finds it.
 *
 * Tried and not kept: BLIS (Debian's libblis4-serial, 0.9.0) for the f32
 * products.  On this machine's processor (AMD EPYC, AVX-512) it reached
 * 218 GFLOP/s on one thread for a 1024^3 sgemm with its skx kernels and
 * 197 with its haswell ones, against 124 for OpenBLAS's Haswell kernels
 * (the kernels this machine's OPENBLAS_CORETYPE names); tl's four 1024^3
 * products went from 38 to 24 ms, the MLP benchmark's whole process from
 * 70 to 64 ms.  But BLIS 0.9.0 does not know this processor and picks its
 * generic kernels (38 GFLOP/s), so tl would have to force AVX-512 kernels
 * on it, the very thing the machine's setting keeps OpenBLAS from doing
 * because builds of that age compute wrong results on some processors;
 * and it would be a second BLAS with its own bits. */
#define _GNU_SOURCE
#include "blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* weak: resolved where OpenBLAS is linked in, NULL where it is not */
#pragma weak cblas_sgemm
#pragma weak cblas_dgemm
#pragma weak openblas_set_num_threads
#pragma weak openblas_get_config
#pragma weak openblas_get_corename

static cpu_blas blas;
static char why[256];
static char *(*config)(void), *(*corename)(void); /* for tl devices */
static const char *from = "linked in";
static pthread_once_t once = PTHREAD_ONCE_INIT;

static bool linked_in(void) { return cblas_sgemm && cblas_dgemm && openblas_set_num_threads; }

/* Loading it, RTLD_LAZY: OpenBLAS's own calls are bound as they are first
 * made, not all of its relocations up front (0.35 of the 2 ms a load
 * takes). */
static void load(void)
{
    if (linked_in()) {
        openblas_set_num_threads(1); /* every call on the calling thread */
        config = openblas_get_config;
        corename = openblas_get_corename;
        blas = (cpu_blas){cblas_sgemm, cblas_dgemm};
        return;
    }
    void *h = NULL;
#ifdef TL_BLAS_LIB
    h = dlopen(TL_BLAS_LIB, RTLD_LAZY | RTLD_LOCAL); /* the build's: the pthreads OpenBLAS */
    if (h)
        from = "loaded from " TL_BLAS_LIB;
#endif
    if (!h && (h = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_LOCAL)))
        from = "loaded as libopenblas.so.0";
    if (!h) {
        snprintf(why, sizeof why, "%s", dlerror());
        return;
    }
    void (*threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    int (*shutdown)(void) = (int (*)(void))dlsym(h, "blas_thread_shutdown_");
    if (threads)
        threads(1); /* every call on the calling thread */
    if (shutdown)
        shutdown(); /* and no idle workers of its own beside tl's */
    config = (char *(*)(void))dlsym(h, "openblas_get_config");
    corename = (char *(*)(void))dlsym(h, "openblas_get_corename");
    cpu_blas b = {(__typeof__(cblas_sgemm) *)dlsym(h, "cblas_sgemm"),
                  (__typeof__(cblas_dgemm) *)dlsym(h, "cblas_dgemm")};
    if (!b.sgemm || !b.dgemm) {
        snprintf(why, sizeof why, "libopenblas.so.0 lacks cblas_sgemm or cblas_dgemm");
        return;
    }
    blas = b;
}

const cpu_blas *cpu_blas_get(tl_status *st)
{
    pthread_once(&once, load);
    if (!blas.sgemm) {
        tl_fail(st, TL_ERUNTIME, "cannot load OpenBLAS for a matrix product: %s", why);
        return NULL;
    }
    return &blas;
}

void cpu_blas_describe(char *buf, size_t len)
{
    pthread_once(&once, load);
    if (!blas.sgemm) {
        snprintf(buf, len, "not usable: %s", why);
        return;
    }
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64":
     * the name and version, then the kernels it chose */
    const char *c = config ? config() : "OpenBLAS", *sp = strchr(c, ' ');
    sp = sp ? strchr(sp + 1, ' ') : NULL;
    int n = sp ? (int)(sp - c) : (int)strlen(c);
    snprintf(buf, len, "%.*s (%s kernels), %s", n, c, corename ? corename() : "unknown", from);
}

static void *preload(void *unused)
{
    (void)unused;
    pthread_once(&once, load);
    return NULL;
}

void cpu_blas_preload(void)
{
    if (linked_in())
        return; /* nothing to load */
    pthread_attr_t at;
    pthread_t t;
    if (pthread_attr_init(&at))
        return;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &at, preload, NULL); /* failing, the first product loads it */
    pthread_attr_destroy(&at);
}
