#include "op.h"

#include "shape.h"

void tl_ctx_init(tl_ctx *cx, const tl_backend *backend)
{
    cx->backend = backend ? backend : &tl_cpu_backend;
    cx->ops = 0;
    cx->fallbacks = 0;
    cx->budget = NULL;
}

tl_tensor *tl_op(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs,
                 tl_status *st)
{
    tl_attrs a;
    tl_shape sh;
    if (attrs)
        a = *attrs;
    else
        tl_attrs_init(&a);
    if (tl_shape_infer(op, n, (const tl_tensor *const *)in, &a, &sh, st))
        return NULL;
    const tl_backend *be = cx->backend;
    if (!be->supports(op, n ? in[0]->dtype : sh.dtype)) {
        be = &tl_cpu_backend;
        cx->fallbacks++;
    }
    tl_tensor *out = tl_tensor_new_in(cx->budget, sh.dtype, sh.ndim, sh.dims, st);
    if (!out)
        return NULL;
    cx->ops++;
    if (be->run(op, n, (const tl_tensor *const *)in, &a, out, st)) {
        tl_tensor_unref(out);
        return NULL;
    }
    return out;
}
