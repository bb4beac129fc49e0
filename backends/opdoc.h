/* What each op computes, its gradient and its attributes, in words: the
 * text behind `tl ops NAME`, `tl ops --format json` and the manual's table
 * of operations.  Read-only data, one row per row of ops.def. */
#ifndef TL_OPDOC_H
#define TL_OPDOC_H

#include "ops.h"

#define TL_MAX_OP_ATTRS 8

typedef struct tl_attrdoc {
    const char *name;    /* "axes"; NULL ends the list */
    const char *type;    /* "int or list of ints" */
    const char *deflt;   /* the default in words; NULL: required */
} tl_attrdoc;

typedef struct tl_opdoc {
    const char *value;    /* what it computes */
    const char *gradient; /* its gradient, and the convention at kinks */
    tl_attrdoc attrs[TL_MAX_OP_ATTRS];
} tl_opdoc;

extern const tl_opdoc tl_opdocs[TL_OP_COUNT];

/* Whether the op passes gradients to its (value) arguments. */
bool tl_op_differentiable(tl_opcode op);

#endif
