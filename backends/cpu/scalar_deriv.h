/* The derivatives of the scalar formulas of scalar.h, written once, for
 * forward-mode differentiation of map bodies: dun gives d op(v)/dv from the
 * operand v and the value y = op(v); dbin gives both partials of a binary
 * op from a, b and y.  Used by the CPU map engine (cpu_map.c) and by the
 * CUDA map kernel (cuda/mexec.h).  Include after scalar.h. */
#ifndef TL_SCALAR_DERIV_H
#define TL_SCALAR_DERIV_H

#include "backends/hd.h"
#include "backends/ops.h"

#define TL_DEFINE_DERIVS(T, SUF)                                                   \
    TL_HD static inline T dun_##SUF(int op, T v, T y, int approx)                  \
    {                                                                              \
        switch (op) {                                                              \
        case TL_OP_NEG: return -1;                                                 \
        case TL_OP_ABS: return v > 0 ? 1 : v < 0 ? -1 : v == 0 ? 0 : v;            \
        case TL_OP_EXP: return y;                                                  \
        case TL_OP_EXPM1: return y + 1;                                            \
        case TL_OP_LOG: return 1 / v;                                              \
        case TL_OP_LOG1P: return 1 / (v + 1);                                      \
        case TL_OP_SQRT: return 1 / (y * 2);                                       \
        case TL_OP_RSQRT: return (T)-0.5 * (y * y * y);                            \
        case TL_OP_RECIPROCAL: return -(y * y);                                    \
        case TL_OP_SQUARE: return v * 2;                                           \
        case TL_OP_SIN: return TL_COS(v);                                          \
        case TL_OP_COS: return -TL_SIN(v);                                         \
        case TL_OP_TAN: return 1 + y * y;                                          \
        case TL_OP_TANH: return 1 - y * y;                                         \
        case TL_OP_SIGMOID: return (1 - y) * y;                                    \
        case TL_OP_ERF: return (T)TL_2_SQRTPI * TL_EXP(-(v * v));                  \
        case TL_OP_RELU: return v > 0 ? 1 : 0;                                     \
        case TL_OP_SOFTPLUS: return 1 / (1 + TL_EXP(-v));                          \
        case TL_OP_GELU: return TL_GELU_GRAD(v, approx);                           \
        case TL_OP_SILU: {                                                         \
            T s = 1 / (1 + TL_EXP(-v));                                            \
            return s * (1 + v * (1 - s));                                          \
        }                                                                          \
        default: return 0; /* sign, detach */                                      \
        }                                                                          \
    }                                                                              \
    TL_HD static inline void dbin_##SUF(int op, T a, T b, T y, T *da, T *db)       \
    {                                                                              \
        *da = *db = 0;                                                             \
        switch (op) {                                                              \
        case TL_OP_ADD: *da = 1; *db = 1; break;                                   \
        case TL_OP_SUB: *da = 1; *db = -1; break;                                  \
        case TL_OP_MUL: *da = b; *db = a; break;                                   \
        case TL_OP_DIV: *da = 1 / b; *db = -(y / b); break;                        \
        case TL_OP_POW:                                                            \
            *da = b == 0 ? 0 : b * TL_POW(a, b - 1);                               \
            *db = a == 0 && b >= 0 ? 0 : y * TL_LOG(a);                            \
            break;                                                                 \
        case TL_OP_MAXIMUM:                                                        \
            *da = a == b ? (T)0.5 : a < b ? 0 : 1;                                 \
            *db = a == b ? (T)0.5 : a > b ? 0 : 1;                                 \
            break;                                                                 \
        case TL_OP_MINIMUM:                                                        \
            *da = a == b ? (T)0.5 : a > b ? 0 : 1;                                 \
            *db = a == b ? (T)0.5 : a < b ? 0 : 1;                                 \
            break;                                                                 \
        default: break; /* comparisons */                                          \
        }                                                                          \
    }

TL_DEFINE_DERIVS(float, f)
TL_DEFINE_DERIVS(double, d)

#endif
