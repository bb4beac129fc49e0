/* A map body compiled to a small register program over scalars: what a
 * backend runs for every element of a `map` (forward values, and forward-
 * mode derivatives for its backward).  Built by exec/map.c, which owns it;
 * backends only read it. */
#ifndef TL_MPROG_H
#define TL_MPROG_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"

typedef enum tl_mcode {
    TL_M_UN,    /* dst = op(a) */
    TL_M_BIN,   /* dst = op(a, b) */
    TL_M_WHERE, /* dst = a != 0 ? b : c */
    TL_M_CLAMP, /* dst = clamp(a, lo, hi) */
    TL_M_MOV,   /* dst = a */
    TL_M_JZ,    /* if a == 0 (NaN is not zero): jump to imm */
    TL_M_JMP,   /* jump to imm */
    TL_M_LOOP_INIT, /* counter[c] = 0 */
    TL_M_LOOP_TEST, /* if counter[c] >= b: jump to imm; else dst (if >= 0) = counter */
    TL_M_LOOP_INC,  /* counter[c]++ */
    /* a map body `sub` over registers a .. a+c-1 as its inputs, into dst
     * (its value); with b >= 0 its derivative instead, as map_grad
     * computes it: b the cotangent, imm the wanted inputs (bit i: input
     * i), dst .. the gradients, one per wanted input.  Only in the CPU's
     * fused chains (exec/fuse.c). */
    TL_M_CALL,
} tl_mcode;

typedef struct tl_mins {
    uint8_t code;
    uint8_t op; /* tl_opcode for UN/BIN */
    uint8_t approx, has_lo, has_hi;
    int32_t dst, a, c;
    int64_t b; /* operand register, or a loop count */
    int64_t imm;
    double lo, hi;
    const struct tl_mprog *sub; /* TL_M_CALL */
} tl_mins;

typedef struct tl_mprog {
    int nins;
    tl_mins *ins;
    int nregs, ncounters;
    int nconst;
    int *const_reg; /* weak numbers of the body */
    double *const_val;
    int nin;     /* the op's inputs: the map's args, then captured scalars */
    int *in_reg;
    int result;
    /* per input: the body's derivative with respect to it, a program of
     * its own, made on first use (exec/mapderiv.c) and freed with this one;
     * then per input the same times one more input (a cotangent) */
    struct tl_mprog **deriv;
    /* the result is the last input times a function of the others (a
     * derivative times a cotangent): linear in it, and since a map is
     * elementwise, its own transpose there */
    bool linear_last;
} tl_mprog;

#endif
