/* Errors found on the device, in the CPU's words (cpu_shape.c,
 * cpu_elementwise.c): a kernel records the position of the first bad
 * element in a flag; the host reads it back and builds the message from
 * the position and the element's value.  Host side. */
#ifndef TL_CUDA_ERRORS_H
#define TL_CUDA_ERRORS_H

#include <stdio.h>

#include "tl_c.h"

/* No bad element: the flag's reset value. */
#define CU_FLAG_NONE 0xFFFFFFFFFFFFFFFFull

/* "[1,2]": where element j sits in a tensor of that shape. */
static inline const char *cu_position(int ndim, const int64_t *shape, int64_t j, char *buf,
                                      size_t len)
{
    int64_t idx[TL_MAXDIM];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? j % shape[d] : 0;
        j = shape[d] ? j / shape[d] : 0;
    }
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ",%lld" : "%lld", (long long)idx[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}

/* Index `value` at position j of idx is out of range for the op (full:
 * the tensor indexed, x for take and gather, the result for the scatters). */
static inline tl_code cu_index_error(tl_status *st, tl_opcode op, const tl_attrs *a,
                                     const tl_tensor *full, const tl_tensor *idx, int64_t j,
                                     int64_t value)
{
    char what[128], d[96], at[TL_MAXDIM * 24];
    if (op == TL_OP_ONE_HOT)
        snprintf(what, sizeof what, "one_hot with depth %lld", (long long)a->depth);
    else
        snprintf(what, sizeof what, "axis %d of %s", (int)a->axis, tl_tensor_desc(full, d, sizeof d));
    return tl_fail(st, TL_EINPUT, "index %lld out of range for %s (indices%s)", (long long)value,
                   what, cu_position(idx->ndim, idx->shape, j, at, sizeof at));
}

/* Element i of a cast's source, whose bits are `bits` (of its dtype),
 * does not fit the destination. */
static inline tl_code cu_cast_error(tl_status *st, tl_dtype src, const void *bits, int64_t i,
                                    tl_dtype dst)
{
    char v[32];
    switch (src) {
    case TL_F32: snprintf(v, sizeof v, "%.17g", (double)*(const float *)bits); break;
    case TL_F64: snprintf(v, sizeof v, "%.17g", *(const double *)bits); break;
    case TL_I32: snprintf(v, sizeof v, "%lld", (long long)*(const int32_t *)bits); break;
    default: snprintf(v, sizeof v, "%lld", (long long)*(const int64_t *)bits); break;
    }
    return tl_fail(st, TL_EINPUT, "cannot cast element %lld = %s to %s (outside its range)",
                   (long long)i, v, tl_dtype_name(dst));
}

#endif
