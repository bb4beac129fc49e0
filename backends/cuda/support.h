/* Which ops the CUDA backend has kernels for: the plugin's supports() and
 * the host twin (tests/cuda_twin.h) both ask here, so the twin replays
 * exactly what the device would run.  An op answered false here runs on
 * the CPU (per-op fallback) until its kernel lands. */
#ifndef TL_CUDA_SUPPORT_H
#define TL_CUDA_SUPPORT_H

#include <stdbool.h>

#include "backends/ops.h"

/* The layer ops of nn.md and their backward kernels, run by nn.h's
 * drivers (the plugin's cu_nn, the twin's twin_nn). */
static inline bool cu_is_nn_op(tl_opcode op)
{
    switch (op) {
    case TL_OP_CONV:
    case TL_OP_CONV_TRANSPOSE:
    case TL_OP_CONV_GRAD_W:
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL:
    case TL_OP_MAX_POOL_GRAD:
    case TL_OP_MAX_POOL_PICK:
    case TL_OP_AVG_POOL_GRAD:
    case TL_OP_PAD:
    case TL_OP_PAD_GRAD:
    case TL_OP_SCATTER_ADD:
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN:
    case TL_OP_CUMSUM:
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL:
    case TL_OP_DROPOUT:
    case TL_OP_RESIZE:
    case TL_OP_RESIZE_GRAD:
    case TL_OP_BATCH_NORM:
    case TL_OP_LAYER_NORM:
    case TL_OP_GROUP_NORM:
    case TL_OP_LAYER_NORM_GRAD:
    case TL_OP_LAYER_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_GRAD: return true;
    default: return false;
    }
}

static inline bool cu_has_kernel(tl_opcode op)
{
    switch (op) {
    /* elementwise additions (nn.md): elementwise.cu, integers too */
    case TL_OP_FLOOR:
    case TL_OP_CEIL:
    case TL_OP_ROUND:
    case TL_OP_TRUNC:
    case TL_OP_SINH:
    case TL_OP_COSH:
    case TL_OP_ASIN:
    case TL_OP_ACOS:
    case TL_OP_ATAN:
    case TL_OP_ASINH:
    case TL_OP_ACOSH:
    case TL_OP_ATANH:
    case TL_OP_ISNAN:
    case TL_OP_ISINF:
    case TL_OP_FMOD:
    case TL_OP_MOD: return true;
    /* the CPU's stand-in for the variance's three ops (exec/eval.c): on a
     * device, training batch_norm runs those ops themselves */
    case TL_OP_BATCH_NORM_VAR: return false;
    default: return op < TL_OP_COUNT && (tl_ops[op].kind != TL_KIND_FLOW || op == TL_OP_MAP);
    }
}

#endif
