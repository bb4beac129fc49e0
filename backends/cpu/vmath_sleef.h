/* The SLEEF entry points vmath.c binds to (libsleef, Debian's libsleef-dev),
 * declared here because <sleef.h> declares each ISA's functions only when
 * the file is compiled for that ISA, and vmath.c is compiled for the
 * baseline x86-64: it never calls them, it hands their addresses out. */
#ifndef TL_VMATH_SLEEF_H
#define TL_VMATH_SLEEF_H

#include <immintrin.h>

#define TL_VMATH_SLEEF_UNARY(X)                                                    \
    X(exp) X(expm1) X(log) X(log1p) X(sin) X(cos) X(tan) X(tanh) X(erf) X(sinh) X(cosh) \
    X(asin) X(acos) X(atan) X(asinh) X(acosh) X(atanh)

/* the target attribute lets the vector types pass in vector registers */
#define TL_SLEEF_DECLARE(RET, NAME, ...)                                           \
    __attribute__((target("avx2,fma,avx512f"))) extern RET NAME(__VA_ARGS__);

/* one function's variants: scalar, SSE/AVX2-128, AVX/AVX2, AVX-512 */
#define TL_SLEEF_VARIANTS(F, A)                                               \
    TL_SLEEF_DECLARE(float, Sleef_finz_##F##f1_u10purecfma, A(float))     \
    TL_SLEEF_DECLARE(float, Sleef_cinz_##F##f1_u10purec, A(float))        \
    TL_SLEEF_DECLARE(double, Sleef_finz_##F##d1_u10purecfma, A(double))  \
    TL_SLEEF_DECLARE(double, Sleef_cinz_##F##d1_u10purec, A(double))     \
    TL_SLEEF_DECLARE(__m128, Sleef_finz_##F##f4_u10avx2128, A(__m128))   \
    TL_SLEEF_DECLARE(__m128, Sleef_cinz_##F##f4_u10sse2, A(__m128))      \
    TL_SLEEF_DECLARE(__m128d, Sleef_finz_##F##d2_u10avx2128, A(__m128d)) \
    TL_SLEEF_DECLARE(__m128d, Sleef_cinz_##F##d2_u10sse2, A(__m128d))   \
    TL_SLEEF_DECLARE(__m256, Sleef_finz_##F##f8_u10avx2, A(__m256))      \
    TL_SLEEF_DECLARE(__m256, Sleef_cinz_##F##f8_u10avx, A(__m256))       \
    TL_SLEEF_DECLARE(__m256d, Sleef_finz_##F##d4_u10avx2, A(__m256d))   \
    TL_SLEEF_DECLARE(__m256d, Sleef_cinz_##F##d4_u10avx, A(__m256d))    \
    TL_SLEEF_DECLARE(__m512, Sleef_finz_##F##f16_u10avx512f, A(__m512))  \
    TL_SLEEF_DECLARE(__m512, Sleef_cinz_##F##f16_u10avx512fnofma, A(__m512)) \
    TL_SLEEF_DECLARE(__m512d, Sleef_finz_##F##d8_u10avx512f, A(__m512d)) \
    TL_SLEEF_DECLARE(__m512d, Sleef_cinz_##F##d8_u10avx512fnofma, A(__m512d))

/* A(T) is the parameter list of a function of T */
#define TL_SLEEF_ONE(T) T
#define TL_SLEEF_TWO(T) T, T
#define TL_SLEEF_UNARY_VARIANTS(F) TL_SLEEF_VARIANTS(F, TL_SLEEF_ONE)
TL_VMATH_SLEEF_UNARY(TL_SLEEF_UNARY_VARIANTS)
TL_SLEEF_VARIANTS(pow, TL_SLEEF_TWO)
#undef TL_SLEEF_UNARY_VARIANTS

#endif
