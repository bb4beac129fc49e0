/* OpenBLAS: linked into the tl program; in other programs on libtl.a,
 * loaded when the first matrix product needs it, so a graph without one
 * never pays for loading and relocating the library (1.4 ms, most of a
 * small run).  Each call runs on the calling thread (tl shares products
 * out over its own threads). */
#ifndef TL_CPU_BLAS_H
#define TL_CPU_BLAS_H

#include <cblas.h>
#include <stdbool.h>

#include "backends/status.h"

typedef struct cpu_blas {
    __typeof__(cblas_sgemm) *sgemm;
    __typeof__(cblas_dgemm) *dgemm;
} cpu_blas;

/* The library's entry points, loaded on first use; NULL with st set when
 * it cannot be loaded. */
const cpu_blas *cpu_blas_get(tl_status *st);
/* Loads it on a thread of its own now, for a cpu_blas_get to come
 * (nothing to do where it is linked in). */
void cpu_blas_preload(void);
/* For tl devices: "OpenBLAS 0.3.21, linked in: Haswell kernels, chosen
 * for this processor (AVX2 and FMA)" (or "loaded from PATH", the user's
 * OPENBLAS_CORETYPE, ...), or why it cannot be used. */
void cpu_blas_describe(char *buf, size_t len);
/* The same in parts (tl devices --format json): whether it is usable,
 * else why not; the library and version ("OpenBLAS 0.3.21"), how it came
 * ("linked in", "loaded as libopenblas.so.0"), the kernels it runs
 * ("Cooperlake"), and whose choice those are and why ("chosen for this
 * processor (AVX-512 BF16)", or, where OpenBLAS runs others than asked,
 * that it does). */
typedef struct cpu_blas_facts {
    bool usable;
    char library[64];
    const char *why, *from, *kernels, *choice;
    char other[160]; /* the choice where OpenBLAS does not run the family asked for */
} cpu_blas_facts;
void cpu_blas_facts_get(cpu_blas_facts *f);
/* The family OpenBLAS was started with (tl's choice or the user's
 * OPENBLAS_CORETYPE), "" where OpenBLAS chose alone. */
const char *cpu_blas_kernels_asked(void);

#endif
