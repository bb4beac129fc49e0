/* The choice of OpenBLAS kernels from a processor's features
 * (backends/cpu/cpu_features.c), for the feature sets of processors of
 * every generation whatever processor runs the test, and for this one. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_features.h"

static cpu_features sse_only(void) { return (cpu_features){.vendor = "GenuineIntel", .sse3 = true}; }

static cpu_features sse42(void)
{
    cpu_features f = sse_only();
    f.ssse3 = f.sse41 = f.sse42 = f.popcnt = true;
    return f;
}

static cpu_features avx2(const char *vendor)
{
    cpu_features f = sse42();
    snprintf(f.vendor, sizeof f.vendor, "%s", vendor);
    f.avx = f.fma = f.avx2 = f.os_ymm = true;
    return f;
}

static cpu_features avx512(bool bf16)
{
    cpu_features f = avx2("GenuineIntel");
    f.avx512f = f.avx512cd = f.avx512bw = f.avx512dq = f.avx512vl = f.os_zmm = true;
    f.avx512bf16 = bf16;
    return f;
}

static void expect_choice(cpu_features f, const char *family, const char *why)
{
    char w[200];
    const char *got = cpu_blas_family_for(&f, w, sizeof w);
    cr_expect_str_eq(got, family);
    cr_expect_str_eq(w, why);
    cr_expect(cpu_blas_family_runs(got, &f, w, sizeof w), "the choice %s must run: %s", got, w);
}

Test(cpu_features, choice_per_generation)
{
    expect_choice(sse_only(), "Prescott", "no SSSE3");
    expect_choice(sse42(), "Nehalem", "SSE4.2");
    cpu_features avx = sse42();
    avx.avx = avx.os_ymm = true;
    expect_choice(avx, "Sandybridge", "AVX");
    expect_choice(avx2("GenuineIntel"), "Haswell", "AVX2 and FMA");
    expect_choice(avx2("AuthenticAMD"), "Zen", "AVX2 and FMA");
    expect_choice(avx512(false), "SkylakeX", "AVX-512");
    expect_choice(avx512(true), "Cooperlake", "AVX-512 BF16");
    cpu_features zen4 = avx512(true);
    snprintf(zen4.vendor, sizeof zen4.vendor, "AuthenticAMD");
    expect_choice(zen4, "Cooperlake", "AVX-512 BF16");
}

/* registers the OS does not save are as good as absent */
Test(cpu_features, state_the_os_does_not_save)
{
    cpu_features f = avx512(true);
    f.os_zmm = false;
    expect_choice(f, "Haswell", "AVX2 and FMA; its AVX-512 is not enabled by the OS");
    f.os_ymm = false;
    expect_choice(f, "Nehalem", "SSE4.2; its AVX-512 is not enabled by the OS");
    f = avx512(false);
    f.avx512vl = false; /* Xeon Phi: AVX-512 F and CD, no BW, DQ or VL */
    expect_choice(f, "Haswell", "AVX2 and FMA");
}

Test(cpu_features, families_a_processor_cannot_run)
{
    char why[200];
    cpu_features f = avx2("AuthenticAMD");
    cr_expect(!cpu_blas_family_runs("SkylakeX", &f, why, sizeof why));
    cr_expect_str_eq(why, "SkylakeX kernels need AVX-512 F, CD, BW, DQ and VL, enabled by the OS, "
                          "which this processor lacks");
    cr_expect(!cpu_blas_family_runs("cooperlake", &f, why, sizeof why), "names in any case");
    cr_expect(!cpu_blas_family_runs("Bulldozer", &f, why, sizeof why), "Zen has no FMA4");
    cr_expect_str_eq(why, "Bulldozer kernels need FMA4, which this processor lacks");
    cr_expect(cpu_blas_family_runs("HASWELL", &f, why, sizeof why));
    cr_expect(cpu_blas_family_runs("Prescott", &f, why, sizeof why));
    cr_expect(cpu_blas_family_runs("NoSuchFamily", &f, why, sizeof why), "OpenBLAS decides on names it knows");
    f = sse_only();
    cr_expect(!cpu_blas_family_runs("Haswell", &f, why, sizeof why));
    cr_expect_str_eq(why, "Haswell kernels need AVX2 and FMA, which this processor lacks");
    cr_expect(!cpu_blas_family_runs("Core2", &f, why, sizeof why));
}

/* this processor: what it reads is consistent, and the choice runs on it */
Test(cpu_features, this_processor)
{
    cpu_features f;
    cpu_features_read(&f);
    char why[200];
    const char *family = cpu_blas_family_for(&f, why, sizeof why);
    cr_log_info("%s: %s kernels (%s)", f.vendor, family, why);
#if defined(__x86_64__)
    cr_expect(f.sse3, "every x86-64 processor tl meets has SSE3");
    cr_expect(f.vendor[0] != 0);
#endif
    cr_expect(!f.os_zmm || f.os_ymm);
    cr_expect(cpu_blas_family_runs(family, &f, why, sizeof why), "%s", why);
}
