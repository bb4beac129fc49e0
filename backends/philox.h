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
#if defined(__CUDACC__) /* nvcc: its device pass only (its host pass takes neither pragma) */
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
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

/* The logarithm and the cosine that random_normal needs, in tl's own
 * formulas: only + - * / of doubles, each rounded on its own (no FMA), so
 * the bits are the same on every CPU, libm and device (libm's log and cos
 * differ in their last bit between libraries and from CUDA's).  Both are
 * within about 1 ulp.  tl-graph(5) gives them in full. */

/* log(k * 2^-53) for an integer k in [1, 2^53]: k = m * 2^(e + 53) with m
 * in [sqrt(1/2), sqrt(2)] (exact), s = (m - 1)/(m + 1), and
 *   log(m) = 2s + 2s * s^2 * P(s^2),  P = 1/3 + s^2/5 + ... + s^18/21,
 *   log    = e * ln2_hi + (e * ln2_lo + log(m)),
 * ln2 split as fdlibm splits it (e * ln2_hi is exact). */
TL_RNG_FN double tl_rng_log_unit(uint64_t k)
{
    int b = 0; /* the bit length of k */
    for (int sh = 32; sh; sh >>= 1)
        if (k >> (b + sh))
            b += sh;
    b++;
    double m = (double)k / (double)((uint64_t)1 << (b - 1)); /* in [1, 2) */
    int e = b - 1 - 53;
    if (m > 1.4142135623730951) {
        m = m * 0.5;
        e = e + 1;
    }
    double s = (m - 1.0) / (m + 1.0), z = s * s;
    double p = 1.0 / 21.0;
    p = p * z + 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    double lm = 2.0 * s + 2.0 * s * (z * p);
    return (double)e * 0x1.62e42feep-1 + ((double)e * 0x1.a39ef35793c76p-33 + lm);
}

/* sin and cos of x in [0, pi/4] by their Taylor polynomials to x^17 and
 * x^16, each in Horner's form over x^2. */
TL_RNG_FN double tl_rng_sin_q(double x)
{
    double z = x * x, p = -1.0 / 355687428096000.0;
    p = p * z + 1.0 / 1307674368000.0;
    p = p * z - 1.0 / 6227020800.0;
    p = p * z + 1.0 / 39916800.0;
    p = p * z - 1.0 / 362880.0;
    p = p * z + 1.0 / 5040.0;
    p = p * z - 1.0 / 120.0;
    p = p * z + 1.0 / 6.0;
    return x - x * (z * p);
}

TL_RNG_FN double tl_rng_cos_q(double x)
{
    double z = x * x, p = 1.0 / 20922789888000.0;
    p = p * z - 1.0 / 87178291200.0;
    p = p * z + 1.0 / 479001600.0;
    p = p * z - 1.0 / 3628800.0;
    p = p * z + 1.0 / 40320.0;
    p = p * z - 1.0 / 720.0;
    p = p * z + 1.0 / 24.0;
    p = p * z - 1.0 / 2.0;
    return 1.0 + z * p;
}

/* cos(2 pi k 2^-53) for an integer k in [1, 2^53]: the quarter turn
 * q = (k >> 51) mod 4 and the fraction r = k mod 2^51 of it are exact;
 * beyond half a quarter, cos and sin swap over 2^51 - r; then
 * x = g * (pi/2 * 2^-51) in [0, pi/4] and the quarter's sign. */
TL_RNG_FN double tl_rng_cos_turn(uint64_t k)
{
    const uint64_t quarter = (uint64_t)1 << 51;
    uint64_t q = (k >> 51) & 3, r = k & (quarter - 1);
    int flip = r > quarter / 2;
    double x = (double)(flip ? quarter - r : r) * (1.5707963267948966 * 0x1p-51);
    double c = tl_rng_cos_q(x), s = tl_rng_sin_q(x);
    double cf = flip ? s : c, sf = flip ? c : s; /* cos and sin of (pi/2) r 2^-51 */
    return q == 0 ? cf : q == 1 ? -sf : q == 2 ? -cf : sf;
}

/* A standard normal by Box-Muller, in double: k1 = (x0:x1 >> 11) + 1 and
 * k2 the same from x2:x3, both in [1, 2^53], u1 = k1 2^-53, u2 = k2 2^-53;
 * z = sqrt(-2 log u1) * cos(2 pi u2), with the two functions above.  An
 * f32 draw is z rounded to f32. */
TL_RNG_FN double tl_rng_normal(const uint32_t x[4])
{
    uint64_t k1 = ((((uint64_t)x[0] << 32) | x[1]) >> 11) + 1;
    uint64_t k2 = ((((uint64_t)x[2] << 32) | x[3]) >> 11) + 1;
    return sqrt(-2.0 * tl_rng_log_unit(k1)) * tl_rng_cos_turn(k2);
}

#endif
