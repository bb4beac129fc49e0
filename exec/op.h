/* The operation interface: every forward op and every backward rule is a
 * call of tl_op.  It checks the call against the shape rules, picks the
 * context's backend (or the CPU where that backend lacks the op or dtype:
 * same dtype, never lower precision), allocates the result and runs the
 * kernel.  The caller owns the returned reference. */
#ifndef TL_OP_H
#define TL_OP_H

#include "backends/backend.h"

typedef struct tl_ctx {
    const tl_backend *backend; /* the requested device's */
    int64_t ops;               /* op calls made */
    int64_t fallbacks;         /* of them, run on the CPU instead */
    tl_budget *budget;         /* results are charged here (NULL: unlimited) */
} tl_ctx;

void tl_ctx_init(tl_ctx *cx, const tl_backend *backend);

/* attrs may be NULL (defaults). */
tl_tensor *tl_op(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs,
                 tl_status *st);

#endif
