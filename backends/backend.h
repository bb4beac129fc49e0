/* The backend interface: one record per device kind.  A backend first
 * answers whether it supports an (op, dtype) pair; only then is it asked to
 * run it.  `run` receives inputs already on its device, attributes already
 * normalised by the shape rules (exec/shape.c) and an allocated output of
 * the right dtype and shape; it owns nothing it is given. */
#ifndef TL_BACKEND_H
#define TL_BACKEND_H

#include "ops.h"
#include "status.h"
#include "tensor.h"

typedef struct tl_backend {
    const char *name;
    tl_devkind kind;
    bool (*supports)(tl_opcode op, tl_dtype dt);
    tl_code (*run)(tl_opcode op, int n, const tl_tensor *const *in, const tl_attrs *a,
                   tl_tensor *out, tl_status *st);
} tl_backend;

extern const tl_backend tl_cpu_backend;

#endif
