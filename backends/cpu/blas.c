/* Loading OpenBLAS on first use (blas.h): the library the build named
 * (TL_BLAS_LIB: the pthreads build, whose calls are safe from several
 * threads at once), else libopenblas.so.0 as the system finds it (beside
 * the program in the GPU bundle). */
#define _GNU_SOURCE
#include "blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static cpu_blas blas;
static char why[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* RTLD_LAZY: OpenBLAS's own calls are bound as they are first made, not
 * all 15000 of its relocations up front (0.35 of the 2 ms a load takes). */
static void load(void)
{
    void *h = NULL;
#ifdef TL_BLAS_LIB
    h = dlopen(TL_BLAS_LIB, RTLD_LAZY | RTLD_LOCAL); /* the build's: the pthreads OpenBLAS */
#endif
    if (!h)
        h = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_LOCAL);
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

static void *preload(void *unused)
{
    (void)unused;
    pthread_once(&once, load);
    return NULL;
}

void cpu_blas_preload(void)
{
    pthread_attr_t at;
    pthread_t t;
    if (pthread_attr_init(&at))
        return;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &at, preload, NULL); /* failing, the first product loads it */
    pthread_attr_destroy(&at);
}
