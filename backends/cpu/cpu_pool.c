/* CPU kernels of pooling (nn.md). */
#include "cpu.h"

tl_code cpu_pool(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    (void)n, (void)in, (void)a, (void)out;
    return tl_fail(st, TL_EINPUT, "%s: not implemented yet", tl_ops[op].name);
}
