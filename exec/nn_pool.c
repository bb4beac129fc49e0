/* Shape and backward rules of pooling (nn.md). */
#include "nn.h"

tl_code tl_shape_pool(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                      tl_status *st)
{
    (void)n, (void)in, (void)a, (void)out;
    return tl_fail(st, TL_EINPUT, "%s: not implemented yet", tl_ops[op].name);
}

void tl_rule_pool(bw *b, const tl_entry *e, const tl_attrs *a, const bool *want, tl_tensor *g,
                  tl_tensor **out)
{
    (void)e, (void)a, (void)want, (void)g, (void)out;
    b->failed = true;
    tl_fail(b->st, TL_EINPUT, "no gradient yet");
}
