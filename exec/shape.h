/* Shape rules: for an op call, check operand dtypes, shapes and attributes
 * and compute the result's dtype and shape.  Attributes are normalised in
 * place (negative axes resolved, defaults filled in, slice bounds clipped)
 * so kernels never see a raw graph value.  Errors say what and which
 * shapes; the caller adds where (node and op). */
#ifndef TL_SHAPE_H
#define TL_SHAPE_H

#include "backends/ops.h"

typedef struct tl_shape {
    tl_dtype dtype;
    int ndim;
    int64_t dims[TL_MAXDIM];
} tl_shape;

/* The result type of op over in; the shape rule fills in (normalises)
 * the attribute record a, which may be NULL where
 * tl_shape_reads_no_attrs(op). */
tl_code tl_shape_infer(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a,
                       tl_shape *out, tl_status *st);
/* Whether op's shape rule reads no attribute (elementwise ops and
 * comparisons): their callers need no copy of the record. */
bool tl_shape_reads_no_attrs(tl_opcode op);

/* NumPy broadcasting of two shapes into out (false when they do not). */
bool tl_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                         int64_t *out);

#endif
