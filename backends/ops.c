#include "ops.h"

#include <string.h>

const tl_opinfo tl_ops[TL_OP_COUNT] = {
#define OP(e, nm, lo, hi, k, dt, idx, at) [TL_OP_##e] = {nm, lo, hi, TL_KIND_##k, TL_DT_##dt, idx, at},
#include "ops.def"
#undef OP
};

_Static_assert(sizeof tl_ops / sizeof tl_ops[0] == TL_OP_COUNT, "one table row per op");

tl_opcode tl_op_lookup(const char *name)
{
    for (int i = 0; i < TL_OP_COUNT; i++)
        if (tl_ops[i].kind != TL_KIND_INT && !strcmp(tl_ops[i].name, name))
            return (tl_opcode)i;
    return TL_OP_COUNT;
}

tl_code tl_op_check_arity(tl_opcode op, int n, tl_status *st)
{
    const tl_opinfo *o = &tl_ops[op];
    if (n >= o->min_args && (o->max_args < 0 || n <= o->max_args))
        return TL_OK;
    if (o->max_args < 0)
        return tl_fail(st, TL_EINPUT, "takes %d or more arguments, got %d", o->min_args, n);
    if (o->max_args > o->min_args)
        return tl_fail(st, TL_EINPUT, "takes %d to %d arguments, got %d", o->min_args, o->max_args, n);
    return tl_fail(st, TL_EINPUT, "takes %d argument%s, got %d", o->min_args, o->min_args == 1 ? "" : "s", n);
}

void tl_attrs_init(tl_attrs *a)
{
    memset(a, 0, sizeof *a);
    a->step = 1;
    a->dtype = TL_F64;
}
