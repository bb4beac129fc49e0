/* SplitMix64, the tests' random numbers: the same sequence from a seed on
 * every machine and run (test_conv.c, test_norm.c, test_vmath.c). */
#ifndef TL_TESTS_SPLITMIX_H
#define TL_TESTS_SPLITMIX_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

#endif
