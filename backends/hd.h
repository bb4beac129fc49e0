/* Qualifiers for code written once and compiled both for the host (as C11
 * or C++) and for a CUDA device: the scalar formulas (cpu/scalar.h), and
 * the device-neutral parts of the CUDA backend (the headers of cuda/), which the host
 * tests compile as plain C. */
#ifndef TL_HD_H
#define TL_HD_H

#ifdef __CUDACC__
#define TL_HD __host__ __device__
#else
#define TL_HD
#endif

#endif
