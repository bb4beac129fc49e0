/* The CPU backend record: supports every op in both dtypes and routes each
 * call to its kernel family. */
#include "cpu.h"

static bool cpu_supports(const tl_backend *be, tl_opcode op, int n, const tl_dtype *in,
                         tl_dtype out, const char **why)
{
    (void)be, (void)n, (void)in, (void)out, (void)why;
    return op < TL_OP_COUNT && (tl_ops[op].kind != TL_KIND_FLOW || op == TL_OP_MAP);
}

static tl_code cpu_run(const tl_backend *be, tl_opcode op, int n, cpu_ins in, const tl_attrs *a,
                       tl_tensor *out, tl_status *st)
{
    (void)be;
    switch (tl_ops[op].kind) {
    case TL_KIND_BIN:
    case TL_KIND_CMP:
    case TL_KIND_UN: return cpu_elementwise(op, n, in, a, out, st);
    case TL_KIND_RED: return out->numel ? cpu_reduce(op, in[0], a, out, st) : TL_OK;
    default: break;
    }
    switch (op) {
    case TL_OP_CAST:
    case TL_OP_WHERE:
    case TL_OP_GELU_GRAD:
    case TL_OP_RELU_GRAD: return cpu_elementwise(op, n, in, a, out, st);
    case TL_OP_SOFTMAX:
    case TL_OP_LOG_SOFTMAX: return out->numel ? cpu_softmax(op, in[0], a, out, st) : TL_OK;
    case TL_OP_MATMUL: return cpu_matmul(in[0], in[1], a, out, st);
    case TL_OP_MAP:
    case TL_OP_MAP_GRAD: return cpu_map(op, n, in, a, out, st);
    case TL_OP_PROD_GRAD: return out->numel ? cpu_prod_grad(in[0], in[1], out) : TL_OK;
    case TL_OP_CONV:
    case TL_OP_CONV_TRANSPOSE:
    case TL_OP_CONV_GRAD_W: return cpu_conv(op, n, in, a, out, st);
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL:
    case TL_OP_MAX_POOL_GRAD:
    case TL_OP_MAX_POOL_PICK:
    case TL_OP_AVG_POOL_GRAD: return cpu_pool(op, n, in, a, out, st);
    case TL_OP_BATCH_NORM:
    case TL_OP_LAYER_NORM:
    case TL_OP_GROUP_NORM:
    case TL_OP_LAYER_NORM_GRAD:
    case TL_OP_LAYER_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_GRAD: return cpu_norm(op, n, in, a, out, st);
    case TL_OP_BATCH_NORM_VAR: return cpu_batch_norm_var(in[0], in[1], out, st);
    case TL_OP_PAD:
    case TL_OP_RESIZE:
    case TL_OP_PAD_GRAD:
    case TL_OP_RESIZE_GRAD: return cpu_resample(op, n, in, a, out, st);
    case TL_OP_SCATTER_ADD:
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN:
    case TL_OP_CUMSUM: return cpu_scatter(op, n, in, a, out, st);
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL:
    case TL_OP_DROPOUT: return cpu_random(op, n, in, a, out, st);
    default: return cpu_shape_op(op, n, in, a, out, st);
    }
}

const tl_backend tl_cpu_backend = {
    .abi = TL_BACKEND_ABI,
    .name = "cpu",
    .kind = TL_DEV_CPU,
    .supports = cpu_supports,
    .run = cpu_run,
};
