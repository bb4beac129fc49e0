/* The generator of tl's seeded draws (random_uniform, random_normal,
 * dropout): Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random
 * numbers: as easy as 1, 2, 3", SC 2011; the constants of Random123 and
 * cuRAND), counter-based, so element i's bits depend on (seed, node, step,
 * i) alone, never on the thread or device that draws it.  Plain C with
 * nothing but stdint and math, every function static inline: the CPU
 * kernels (backends/cpu/cpu_random.c) and the CUDA ones include it alike,
 * and tl-graph(5) documents the same algorithm for other programs.
 *
 * Layout of one draw (element i of a node's result, row-major):
 *   key     (k0, k1)          = (seed mod 2^32, (seed >> 32) mod 2^32),
 *                                the 64-bit seed as two's complement
 *   counter (c0, c1, c2, c3)  = (i mod 2^32, i >> 32, node, step)
 *   (x0, x1, x2, x3)          = Philox4x32-10(counter, key)
 * node is the node's index in the recipe (every block, file order, from
 * 0); step is 0 outside any iterate and w*0x9E3779B9 + t + 1 (mod 2^32)
 * inside step t (from 0) of an iterate, w being the step word of the
 * iterates around that one (0 at the top level), so each step draws
 * afresh. */
#ifndef TL_PHILOX_H
#define TL_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TL_RNG_FN static inline __host__ __device__
#else
#define TL_RNG_FN static inline
#endif

/* Philox4x32's multipliers and Weyl key increments (Random123). */
#define TL_PHILOX_M0 0xD2511F53u
#define TL_PHILOX_M1 0xCD9E8D57u
#define TL_PHILOX_W0 0x9E3779B9u
#define TL_PHILOX_W1 0xBB67AE85u
/* the multiplier that folds an iterate's step into the step word */
#define TL_RNG_STEP_MUL 0x9E3779B9u

typedef struct tl_rng_key {
    uint32_t k0, k1;   /* the seed */
    uint32_t node, step;
} tl_rng_key;

TL_RNG_FN tl_rng_key tl_rng_key_make(int64_t seed, uint64_t node, uint64_t step)
{
    uint64_t s = (uint64_t)seed;
    tl_rng_key k = {(uint32_t)s, (uint32_t)(s >> 32), (uint32_t)node, (uint32_t)step};
    return k;
}

/* The step word inside step t of an iterate whose surroundings have `outer`. */
TL_RNG_FN uint32_t tl_rng_step_word(uint32_t outer, int64_t t)
{
    return outer * TL_RNG_STEP_MUL + (uint32_t)(uint64_t)t + 1u;
}

/* Ten rounds: each multiplies words 0 and 2, swaps the halves across and
 * mixes in the key, which gains the Weyl increments between rounds. */
TL_RNG_FN void tl_philox4x32_10(const uint32_t ctr[4], uint32_t k0, uint32_t k1, uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
#if defined(__CUDACC__)
#pragma unroll
#elif defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 10 /* unrolled, a loop over elements vectorises */
#endif
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += TL_PHILOX_W0;
            k1 += TL_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)TL_PHILOX_M0 * c0, p1 = (uint64_t)TL_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The four words of element i. */
TL_RNG_FN void tl_rng_block(const tl_rng_key *k, uint64_t i, uint32_t x[4])
{
    uint32_t c[4] = {(uint32_t)i, (uint32_t)(i >> 32), k->node, k->step};
    tl_philox4x32_10(c, k->k0, k->k1, x);
}

/* Uniforms in [0, 1): f32 from the top 24 bits of x0; f64 from the top 53
 * bits of x0:x1 (x0 the high word).  Both exact. */
TL_RNG_FN float tl_rng_unit_f(const uint32_t x[4]) { return (float)(x[0] >> 8) * 0x1p-24f; }

TL_RNG_FN double tl_rng_unit_d(const uint32_t x[4])
{
    return (double)((((uint64_t)x[0] << 32) | x[1]) >> 11) * 0x1p-53;
}

/* low + (high - low)*v in the dtype, clamped below high (the product can
 * round up to high - low, the sum up to high). */
TL_RNG_FN float tl_rng_uniform_f(const uint32_t x[4], float lo, float hi)
{
    float r = lo + (hi - lo) * tl_rng_unit_f(x);
    return r < hi ? r : nextafterf(hi, lo);
}

TL_RNG_FN double tl_rng_uniform_d(const uint32_t x[4], double lo, double hi)
{
    double r = lo + (hi - lo) * tl_rng_unit_d(x);
    return r < hi ? r : nextafter(hi, lo);
}

/* A standard normal by Box-Muller, in double: u1 = (top 53 bits of x0:x1
 * + 1) * 2^-53 and u2 likewise from x2:x3, both in (0, 1];
 * z = sqrt(-2 log u1) * cos(2 pi u2), 2 pi as the double 6.283185307179586.
 * An f32 draw is z rounded to f32. */
TL_RNG_FN double tl_rng_normal(const uint32_t x[4])
{
    double u1 = (double)(((((uint64_t)x[0] << 32) | x[1]) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(((((uint64_t)x[2] << 32) | x[3]) >> 11) + 1) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
