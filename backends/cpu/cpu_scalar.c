/* Straight-line register programs (mprog.h) over single values: the body
 * and backward rules of a scalar loop (exec/loop.c).  The formulas are the
 * kernels' own (scalar.h), one element at a time, so the bits are those
 * of the same ops run on 0-d tensors. */
#include <tgmath.h>

#include "backends/mprog.h"
#include "cpu.h"
#include "scalar.h"

#define UN_CASE(E, EXPR)                                                           \
    case TL_OP_##E: {                                                              \
        T v = r[in->a];                                                            \
        r[in->dst] = (T)(EXPR);                                                    \
        break;                                                                     \
    }
#define BIN_CASE(E, EXPR)                                                          \
    case TL_OP_##E: {                                                              \
        T a = r[in->a], b = r[in->b];                                              \
        r[in->dst] = (T)(EXPR);                                                    \
        break;                                                                     \
    }

#define DEFINE_SCALAR(TYPE, SUF)                                                      \
    void cpu_prog_scalar_##SUF(const tl_mins *ins, int n, TYPE *r)                    \
    {                                                                              \
        for (const tl_mins *in = ins, *end = ins + n; in < end; in++) {            \
            int approx = in->approx;                                               \
            (void)approx;                                                          \
            switch (in->code) {                                                    \
            case TL_M_UN:                                                          \
                switch (in->op) { TL_UNARY_EXPRS(UN_CASE) }                        \
                break;                                                             \
            case TL_M_BIN:                                                         \
                switch (in->op) {                                                  \
                    TL_BINARY_EXPRS(BIN_CASE)                                      \
                case TL_OP_GELU_GRAD: {                                            \
                    T a = r[in->a], b = r[in->b];                                  \
                    r[in->dst] = (T)(b * TL_GELU_GRAD(a, approx));                 \
                    break;                                                         \
                }                                                                  \
                }                                                                  \
                break;                                                             \
            case TL_M_WHERE: r[in->dst] = r[in->a] != 0 ? r[in->b] : r[in->c]; break; \
            case TL_M_CLAMP: {                                                     \
                T v = r[in->a], lo = (T)in->lo, hi = (T)in->hi;                    \
                r[in->dst] = TL_CLAMP(v, lo, hi, in->has_lo, in->has_hi);          \
                break;                                                             \
            }                                                                      \
            case TL_M_MOV: r[in->dst] = r[in->a]; break;                           \
            default: break; /* no jumps in straight-line programs */               \
            }                                                                      \
        }                                                                          \
    }

/* the case lists name the element type T */
#define T float
DEFINE_SCALAR(float, f)
#undef T
#define T double
DEFINE_SCALAR(double, d)
#undef T
