/* What the processor can run (cpuid, and what the OS enabled: xgetbv),
 * and which of the linked OpenBLAS's kernel families that makes the
 * fastest correct one.  Plain values: nothing here allocates or keeps
 * state. */
#ifndef TL_CPU_FEATURES_H
#define TL_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cpu_features {
    char vendor[13]; /* "GenuineIntel", "AuthenticAMD", ... */
    bool sse3, ssse3, sse41, sse42, sse4a, popcnt, avx, fma, fma4, avx2;
    bool avx512f, avx512cd, avx512bw, avx512dq, avx512vl, avx512bf16;
    bool os_ymm; /* the OS saves the AVX state (XCR0 bits 1-2) */
    bool os_zmm; /* and the AVX-512 state (XCR0 bits 5-7) */
} cpu_features;

/* This processor's, read with cpuid and xgetbv (all false off x86-64). */
void cpu_features_read(cpu_features *f);

/* The OpenBLAS kernel family (its OPENBLAS_CORETYPE name) fastest on a
 * processor with f, among those that are correct on it, with why in
 * why[len]: "AVX-512 BF16", "AVX2 and FMA", ... */
const char *cpu_blas_family_for(const cpu_features *f, char *why, size_t len);

/* Whether the family named (any case) runs on f: false for a family that
 * needs an instruction f lacks, with the missing feature in why[len]; true
 * for a name this table does not know (OpenBLAS then decides, and ignores
 * a name it does not know either). */
bool cpu_blas_family_runs(const char *name, const cpu_features *f, char *why, size_t len);

#endif
