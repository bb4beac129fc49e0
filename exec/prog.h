/* Register programs (backends/mprog.h) over elementwise ops, written by the
 * evaluator's fast paths: fused chains (fuse.c) and scalar loops (loop.c).
 * A builder appends instructions, constants and inputs; a recorder runs a
 * backward rule of grad.c with its op calls turned into instructions, so a
 * fast path's backward program is the rules themselves. */
#ifndef TL_PROG_H
#define TL_PROG_H

#include "backends/mprog.h"
#include "tape.h"

typedef struct tl_pbuild {
    tl_mprog p;
    int cap, ccap, icap;
    const tl_tensor **in; /* input tensors (NULL in a dry run) */
    bool oom;
} tl_pbuild;

void *tl_pb_grow(void *p, int *cap, int need, size_t size, bool *oom);
void tl_pb_free(tl_pbuild *b);
/* the bytes b's arrays hold (what a recorded program is charged) */
int64_t tl_pb_bytes(const tl_pbuild *b);
int tl_pb_reg(tl_pbuild *b);
void tl_pb_emit(tl_pbuild *b, tl_mins ins);
/* a constant in a new register */
int tl_pb_const(tl_pbuild *b, double v);
/* an input tensor into register reg (a new one when reg < 0) */
int tl_pb_input(tl_pbuild *b, const tl_tensor *t, int reg);
/* inputs of a called map body at most */
#define TL_PB_ARGS 9
/* dst = a map body over args (its value); with g >= 0 its gradients as
 * map_grad gives them (g the cotangent, bit i of want: input i), one per
 * wanted input into dst, dst + 1, ... */
void tl_pb_call(tl_pbuild *b, const tl_mprog *sub, int nin, const int *args, int g, uint64_t want,
                int dst);
/* dst = op(r[0], r[1], r[2]) for an elementwise op (or gelu_grad) */
void tl_pb_op(tl_pbuild *b, tl_opcode op, const tl_attrs *a, int dst, const int *r);
/* *slot += g as the tape adds gradients: the first is taken as is, later
 * ones are added after it (slot < 0: none yet) */
void tl_pb_accumulate(tl_pbuild *b, int *slot, int g);

/* Drops the instructions of a straight-line program whose results nothing
 * needs: the registers out[0..nout) are wanted (negative: none). */
void tl_pb_prune(tl_pbuild *b, const int *out, int nout);

/* Binary, comparison, unary (clamp, gelu...) ops and where. */
bool tl_op_elementwise(tl_opcode op);

typedef struct tl_precorder {
    tl_grad_recorder base;
    tl_pbuild *b;
    tl_tensor **stub; /* every symbolic tensor made, one reference held */
    int *reg;
    int *rows; /* 1, or k for a map_grad's k gradients in k registers */
    int n, cap;
    bool failed;
} tl_precorder;

/* A recorder writing into b. */
void tl_pr_init(tl_precorder *r, tl_pbuild *b);
/* A symbolic tensor standing for register reg (the recorder holds it). */
tl_tensor *tl_pr_symbol(tl_precorder *r, int reg, tl_dtype dt, int ndim, const int64_t *shape,
                        tl_status *st);
/* The register a symbolic tensor stands for, or -1. */
int tl_pr_reg(const tl_precorder *r, const tl_tensor *t);
void tl_pr_free(tl_precorder *r);

#endif
