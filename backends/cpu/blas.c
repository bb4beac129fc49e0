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
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/cpu/cpu_features.h"

/* weak: resolved where OpenBLAS is linked in, NULL where it is not */
#pragma weak cblas_sgemm
#pragma weak cblas_dgemm
#pragma weak openblas_set_num_threads
#pragma weak openblas_get_config
#pragma weak openblas_get_corename
#pragma weak gotoblas_init
void gotoblas_init(void);

static cpu_blas blas;
static char why[256];
static char *(*config)(void), *(*corename)(void); /* for tl devices */
static const char *from = "linked in";
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char asked[32];     /* the family OPENBLAS_CORETYPE names when OpenBLAS starts */
static char kernels[512];  /* whose choice that is, and why */

/* The kernels are chosen before OpenBLAS starts: it reads OPENBLAS_CORETYPE
 * once, when it starts (load, below) or is loaded; where it is linked in
 * with its constructor (a program of its own on libtl.a), then, and this
 * one, at priority 101, runs before it.  tl names the
 * family for this processor's features (cpu_features.c says why); a
 * user's OPENBLAS_CORETYPE stands where the processor can run it, and
 * where it cannot (OpenBLAS 0.3.21 takes SkylakeX on an AVX2 processor
 * and dies of an illegal instruction at the first product) tl's choice
 * takes its place and tl devices says so.  TL_BLAS_CHOOSE=0 leaves the
 * choice to OpenBLAS alone. */
__attribute__((constructor(101))) static void choose_kernels(void)
{
    cpu_features f;
    cpu_features_read(&f);
    char why[120], lack[160];
    const char *user = getenv("OPENBLAS_CORETYPE"), *own = getenv("TL_BLAS_CHOOSE");
    bool runs = user && *user && cpu_blas_family_runs(user, &f, lack, sizeof lack);
    if (runs || (!(user && *user) && own && !strcmp(own, "0"))) {
        snprintf(asked, sizeof asked, "%s", runs ? user : "");
        snprintf(kernels, sizeof kernels, runs ? "as OPENBLAS_CORETYPE says" : "OpenBLAS's own choice (TL_BLAS_CHOOSE=0)");
        return;
    }
    const char *family = cpu_blas_family_for(&f, why, sizeof why);
    snprintf(asked, sizeof asked, "%s", family);
    if (user && *user)
        snprintf(kernels, sizeof kernels, "chosen for this processor (%s): OPENBLAS_CORETYPE=%.40s ignored, %s",
                 why, user, lack);
    else
        snprintf(kernels, sizeof kernels, "chosen for this processor (%s)", why);
    setenv("OPENBLAS_CORETYPE", family, 1);
}

static bool linked_in(void) { return cblas_sgemm && cblas_dgemm && openblas_set_num_threads; }

/* The tl program links OpenBLAS without its constructor (the Makefile
 * says why) and starts it here, at the first product or `tl devices`,
 * with OPENBLAS_NUM_THREADS=1 for the moment it reads it: it then starts
 * no worker threads of its own, which would spin for a tenth of a second
 * beside tl's (tl's threads run the products, one single-threaded gemm
 * each).  The variable is put back as it was.  This runs once, on the
 * thread that first asks for a product, before that product's work is
 * handed out; tl's threads read no variables while they wait for work.
 * Starting it again (where its constructor ran) does nothing. */
static void start_linked(void)
{
    const char *v = getenv("OPENBLAS_NUM_THREADS");
    char *was = v ? strdup(v) : NULL;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    gotoblas_init();
    if (was)
        setenv("OPENBLAS_NUM_THREADS", was, 1);
    else if (!v)
        unsetenv("OPENBLAS_NUM_THREADS");
    free(was);
}

/* Loading it, RTLD_LAZY: OpenBLAS's own calls are bound as they are first
 * made, not all of its relocations up front (0.35 of the 2 ms a load
 * takes). */
static void load(void)
{
    if (linked_in()) {
        if (gotoblas_init)
            start_linked();
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

void cpu_blas_facts_get(cpu_blas_facts *f)
{
    pthread_once(&once, load);
    *f = (cpu_blas_facts){.usable = blas.sgemm != NULL, .why = why, .from = from};
    if (!f->usable)
        return;
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64":
     * the name and version, then the kernels it runs (which may not be
     * those asked for: OpenBLAS takes a family it does not know for none) */
    const char *c = config ? config() : "OpenBLAS", *sp = strchr(c, ' ');
    sp = sp ? strchr(sp + 1, ' ') : NULL;
    snprintf(f->library, sizeof f->library, "%.*s", sp ? (int)(sp - c) : (int)strlen(c), c);
    f->kernels = corename ? corename() : "unknown";
    f->choice = kernels;
    if (*asked && strcasecmp(asked, f->kernels)) {
        snprintf(f->other, sizeof f->other, "OpenBLAS's own choice: it does not run the %s kernels asked for", asked);
        f->choice = f->other;
    }
}

void cpu_blas_describe(char *buf, size_t len)
{
    cpu_blas_facts f;
    cpu_blas_facts_get(&f);
    if (!f.usable)
        snprintf(buf, len, "not usable: %s", f.why);
    else
        snprintf(buf, len, "%s, %s: %s kernels, %s", f.library, f.from, f.kernels, f.choice);
}

const char *cpu_blas_kernels_asked(void) { return asked; }

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
