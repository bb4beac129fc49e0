/* What the layer ops share: the [N, C, *S] layout and the normalisation of
 * their spatial attributes (nn.md). */
#include "nn.h"

#include <stdio.h>
#include <string.h>

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

tl_code tl_nn_check_layout(const tl_tensor *x, const char *what, tl_status *st)
{
    if (x->ndim < 3 || x->ndim > 2 + TL_MAXSP)
        return tl_fail(st, TL_EINPUT, "%s must be [N, C, *spatial] with 1 to %d spatial axes, got %s", what,
                       TL_MAXSP, DESC(x));
    return TL_OK;
}

/* One spatial attribute to d entries: an int to all, a list of d as is,
 * absent to dflt[] (or to `fill`). */
static tl_code spread(const char *key, int *n, int64_t *v, int d, const int64_t *dflt, int64_t fill,
                      const tl_tensor *x, tl_status *st)
{
    if (*n > 0 && *n != d)
        return tl_fail(st, TL_EINPUT, "attribute \"%s\" has %d entries for the %d spatial axes of %s", key, *n,
                       d, DESC(x));
    for (int i = 0; i < d; i++)
        v[i] = *n > 0 ? v[i] : *n < 0 ? v[0] : dflt ? dflt[i] : fill;
    *n = d;
    return TL_OK;
}

tl_code tl_nn_spatial(const tl_tensor *x, tl_attrs *a, bool pool, tl_status *st)
{
    if (tl_nn_check_layout(x, "x", st))
        return st->code;
    int d = x->ndim - 2;
    a->nsp = d;
    if (spread("kernel", &a->nkernel, a->kernel, d, NULL, 1, x, st))
        return st->code;
    int64_t kernel[TL_MAXSP];
    memcpy(kernel, a->kernel, sizeof kernel);
    if (spread("stride", &a->nstride, a->stride, d, pool ? kernel : NULL, 1, x, st) ||
        spread("dilation", &a->ndilation, a->dilation, d, NULL, 1, x, st) ||
        spread("output_padding", &a->nout_pad, a->out_pad, d, NULL, 0, x, st))
        return st->code;
    int np = a->npadding;
    if (spread("padding", &np, a->pad_lo, d, NULL, 0, x, st))
        return st->code;
    np = a->npadding;
    spread("padding", &np, a->pad_hi, d, NULL, 0, x, st);
    a->npadding = d;
    a->padding_pairs = true;
    return TL_OK;
}
