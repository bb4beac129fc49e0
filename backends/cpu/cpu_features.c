/* The processor's features and the OpenBLAS kernel family they call for
 * (cpu_features.h).
 *
 * Why tl chooses at all: Debian's OpenBLAS 0.3.21 picks its kernels from
 * the processor's model number, and a model it does not know gets the
 * oldest family, Prescott (SSE3): every Intel processor newer than the
 * library (Sapphire Rapids and later) ran its products 8x slower than it
 * could (18 against 145 GFLOP/s for a 1024^3 f32 product).  The features
 * say what a processor can run whatever its model, so the choice is made
 * from them, as OpenBLAS 0.3.25 and later do themselves: an AVX-512
 * processor with BF16 gets Cooperlake (so do AMD's Zen 4 and 5, as
 * upstream maps them), one without SkylakeX, an AVX2 one Haswell (Zen on
 * AMD's, whose kernels are Haswell's with Zen's block sizes: 10% faster on
 * a Zen 3), and so down.  A family is only chosen where every instruction
 * it uses is there and the OS saves the registers it uses. */
#include "backends/cpu/cpu_features.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

void cpu_features_read(cpu_features *f)
{
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d, max;
    if (!__get_cpuid(0, &max, &b, &c, &d))
        return;
    memcpy(f->vendor, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    __cpuid(1, a, b, c, d);
    f->sse3 = c & 1u, f->ssse3 = c >> 9 & 1u, f->fma = c >> 12 & 1u, f->sse41 = c >> 19 & 1u;
    f->sse42 = c >> 20 & 1u, f->popcnt = c >> 23 & 1u, f->avx = c >> 28 & 1u;
    bool osxsave = c >> 27 & 1u;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    f->os_ymm = (xcr0 & 0x6) == 0x6;
    f->os_zmm = f->os_ymm && (xcr0 & 0xe0) == 0xe0;
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        unsigned sub = a;
        f->avx2 = b >> 5 & 1u, f->avx512f = b >> 16 & 1u, f->avx512dq = b >> 17 & 1u;
        f->avx512cd = b >> 28 & 1u, f->avx512bw = b >> 30 & 1u, f->avx512vl = b >> 31 & 1u;
        if (sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f->avx512bf16 = a >> 5 & 1u;
        }
    }
    if (__get_cpuid(0x80000000u, &max, &b, &c, &d) && max >= 0x80000001u) {
        __cpuid(0x80000001u, a, b, c, d);
        f->sse4a = c >> 6 & 1u, f->fma4 = c >> 16 & 1u;
    }
}
#else
void cpu_features_read(cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

/* What a family needs, as flags over cpu_features */
enum {
    SSE3 = 1 << 0, SSSE3 = 1 << 1, SSE41 = 1 << 2, SSE42 = 1 << 3, SSE4A = 1 << 4, AVX = 1 << 5,
    FMA4 = 1 << 6, AVX2 = 1 << 7, AVX512 = 1 << 8, BF16 = 1 << 9,
};

static unsigned have(const cpu_features *f)
{
    bool ymm = f->avx && f->os_ymm;
    bool zmm = f->os_zmm && f->avx512f && f->avx512cd && f->avx512bw && f->avx512dq && f->avx512vl;
    return (f->sse3 ? SSE3 : 0) | (f->ssse3 ? SSSE3 : 0) | (f->sse41 ? SSE41 : 0) |
           (f->sse42 ? SSE42 : 0) | (f->sse4a ? SSE4A : 0) | (ymm ? AVX : 0) |
           (ymm && f->fma4 ? FMA4 : 0) | (ymm && f->avx2 && f->fma ? AVX2 : 0) |
           (ymm && f->avx2 && f->fma && zmm ? AVX512 : 0) |
           (ymm && f->avx2 && f->fma && zmm && f->avx512bf16 ? BF16 : 0);
}

/* Every name OpenBLAS 0.3.21's OPENBLAS_CORETYPE takes on x86-64, with
 * what its kernels need.  Where unsure, more: the old AMD families are
 * taken to need their own extensions (SSE4a; FMA4 for the 15h cores). */
static const struct family {
    const char *name;
    unsigned need;
} families[] = {
    {"Katmai", SSE3},      {"Coppermine", SSE3},      {"Northwood", SSE3},   {"Prescott", SSE3},
    {"Banias", SSE3},      {"Yonah", SSE3},           {"Athlon", SSE3},      {"Opteron", SSE3},
    {"Core2", SSSE3},      {"Atom", SSSE3},           {"Nano", SSSE3},       {"Penryn", SSE41},
    {"Dunnington", SSE41}, {"Nehalem", SSE42},        {"Barcelona", SSE4A},  {"Bobcat", SSE4A},
    {"Sandybridge", AVX},  {"Bulldozer", AVX | FMA4}, {"Piledriver", AVX | FMA4},
    {"Steamroller", AVX | FMA4}, {"Excavator", AVX | FMA4}, {"Haswell", AVX2}, {"Zen", AVX2},
    {"SkylakeX", AVX512},  {"Cooperlake", BF16},
};

static const char *feature_name(unsigned bit)
{
    switch (bit) {
    case SSE3: return "SSE3";
    case SSSE3: return "SSSE3";
    case SSE41: return "SSE4.1";
    case SSE42: return "SSE4.2";
    case SSE4A: return "SSE4a";
    case AVX: return "AVX, enabled by the OS";
    case FMA4: return "FMA4";
    case AVX2: return "AVX2 and FMA";
    case AVX512: return "AVX-512 F, CD, BW, DQ and VL, enabled by the OS";
    default: return "AVX-512 BF16";
    }
}

bool cpu_blas_family_runs(const char *name, const cpu_features *f, char *why, size_t len)
{
    unsigned h = have(f);
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (strcasecmp(name, families[i].name))
            continue;
        /* the highest feature missing names the lack */
        unsigned missing = families[i].need & ~h;
        for (unsigned bit = BF16; bit; bit >>= 1)
            if (missing & bit) {
                snprintf(why, len, "%s kernels need %s, which this processor lacks", families[i].name,
                         feature_name(bit));
                return false;
            }
        return true;
    }
    return true;
}

const char *cpu_blas_family_for(const cpu_features *f, char *why, size_t len)
{
    unsigned h = have(f);
    const char *name, *because;
    if (h & BF16)
        name = "Cooperlake", because = "AVX-512 BF16";
    else if (h & AVX512)
        name = "SkylakeX", because = "AVX-512";
    else if (h & AVX2)
        name = strcmp(f->vendor, "AuthenticAMD") ? "Haswell" : "Zen", because = "AVX2 and FMA";
    else if (h & AVX)
        name = "Sandybridge", because = "AVX";
    else if (h & SSE42)
        name = "Nehalem", because = "SSE4.2";
    else if (h & SSSE3)
        name = "Core2", because = "SSSE3";
    else
        name = "Prescott", because = "no SSSE3";
    bool unsaved = f->avx512f && !f->os_zmm && !(h & AVX512);
    snprintf(why, len, "%s%s", because, unsaved ? "; its AVX-512 is not enabled by the OS" : "");
    return name;
}
