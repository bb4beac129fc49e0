#include "shape.h"

#include "nn.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define DESC(t) tl_tensor_desc((t), (char[96]){0}, 96)

bool tl_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                         int64_t *out)
{
    int n = na > nb ? na : nb;
    int64_t r[TL_MAXDIM]; /* out may alias a or b */
    for (int d = 0; d < n; d++) {
        int da = d - (n - na), db = d - (n - nb);
        int64_t sa = da < 0 ? 1 : a[da], sb = db < 0 ? 1 : b[db];
        if (sa != sb && sa != 1 && sb != 1)
            return false;
        r[d] = sa == 1 ? sb : sa;
    }
    memcpy(out, r, sizeof(int64_t) * (size_t)n);
    *nout = n;
    return true;
}

static void set_like(tl_shape *out, const tl_tensor *t)
{
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->dims, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    memset(out->dims + t->ndim, 0, sizeof(int64_t) * (size_t)(TL_MAXDIM - t->ndim));
}

static tl_code same_dtype(int n, const tl_tensor *const *in, tl_status *st)
{
    for (int i = 1; i < n; i++)
        if (in[i]->dtype != in[0]->dtype)
            return tl_fail(st, TL_EINPUT, "operands differ in dtype: %s and %s (use cast)",
                           DESC(in[0]), DESC(in[i]));
    return TL_OK;
}

static tl_code broadcast_all(int n, const tl_tensor *const *in, tl_shape *out, tl_status *st)
{
    set_like(out, in[0]);
    for (int i = 1; i < n; i++)
        if (!tl_broadcast_shapes(out->ndim, out->dims, in[i]->ndim, in[i]->shape, &out->ndim,
                                 out->dims))
            return tl_fail(st, TL_EINPUT, "cannot broadcast %s with %s", DESC(in[0]),
                           DESC(in[i]));
    return TL_OK;
}

/* Resolves a possibly negative axis against ndim axes. */
static tl_code norm_axis(int64_t *axis, int ndim, const tl_tensor *t, tl_status *st)
{
    if (*axis < -ndim || *axis >= ndim)
        return tl_fail(st, TL_EINPUT, "axis %lld out of range for %s", (long long)*axis,
                       DESC(t));
    if (*axis < 0)
        *axis += ndim;
    return TL_OK;
}

static tl_code reduction(tl_opcode op, const tl_tensor *x, tl_attrs *a, tl_shape *out,
                         tl_status *st)
{
    bool mask[TL_MAXDIM] = {false};
    if (!a->has_axes) {
        a->naxes = x->ndim;
        for (int d = 0; d < x->ndim; d++)
            a->axes[d] = d;
    }
    for (int i = 0; i < a->naxes; i++) {
        if (norm_axis(&a->axes[i], x->ndim, x, st))
            return st->code;
        if (mask[a->axes[i]])
            return tl_fail(st, TL_EINPUT, "axis %lld repeated", (long long)a->axes[i]);
        mask[a->axes[i]] = true;
    }
    a->naxes = 0;
    out->dtype = x->dtype;
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask[d]) {
            a->axes[a->naxes++] = d;
            if (x->shape[d] == 0 && (op == TL_OP_MAX || op == TL_OP_MIN))
                return tl_fail(st, TL_EINPUT, "%s over an empty axis %d of %s", tl_ops[op].name,
                               d, DESC(x));
        }
        if (!mask[d] || a->keepdims)
            out->dims[out->ndim++] = mask[d] ? 1 : x->shape[d];
    }
    return TL_OK;
}

static tl_code matmul(const tl_tensor *x, const tl_tensor *y, const tl_attrs *a, tl_shape *out,
                      tl_status *st)
{
    if (x->ndim == 0 || y->ndim == 0)
        return tl_fail(st, TL_EINPUT, "matmul of a scalar: %s @ %s", DESC(x), DESC(y));
    int64_t xr = x->ndim == 1 ? 1 : x->shape[x->ndim - 2], xc = x->shape[x->ndim - 1];
    int64_t yr = y->ndim == 1 ? y->shape[0] : y->shape[y->ndim - 2];
    int64_t yc = y->ndim == 1 ? 1 : y->shape[y->ndim - 1];
    int64_t m = a->trans_a ? xc : xr, k = a->trans_a ? xr : xc;
    int64_t k2 = a->trans_b ? yc : yr, n = a->trans_b ? yr : yc;
    if (k != k2)
        return tl_fail(st, TL_EINPUT, "inner sizes differ: %s @ %s", DESC(x), DESC(y));
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return tl_fail(st, TL_EINPUT, "matrix too large for BLAS: %s @ %s", DESC(x), DESC(y));
    int nbx = x->ndim > 2 ? x->ndim - 2 : 0, nby = y->ndim > 2 ? y->ndim - 2 : 0;
    out->dtype = x->dtype;
    if (!tl_broadcast_shapes(nbx, x->shape, nby, y->shape, &out->ndim, out->dims))
        return tl_fail(st, TL_EINPUT, "batch axes do not broadcast: %s @ %s", DESC(x),
                       DESC(y));
    if (x->ndim > 1)
        out->dims[out->ndim++] = m;
    if (y->ndim > 1)
        out->dims[out->ndim++] = n;
    return TL_OK;
}

static tl_code reshape(const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < a->nshape; i++) {
        if (a->shape[i] == -1 && infer < 0)
            infer = i;
        else if (a->shape[i] < 0)
            return tl_fail(st, TL_EINPUT, "bad size %lld in reshape", (long long)a->shape[i]);
        else if (tl_shape_numel(1, &a->shape[i], &(int64_t){0}, st) ||
                 (a->shape[i] && known > ((int64_t)1 << 60) / a->shape[i]))
            return tl_fail(st, TL_EINPUT, "reshape target too large");
        else
            known *= a->shape[i];
    }
    out->dtype = x->dtype;
    out->ndim = a->nshape;
    memcpy(out->dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
    if (infer >= 0) {
        if (known == 0 || x->numel % known)
            return tl_fail(st, TL_EINPUT, "cannot reshape %s with -1 into %lld-element pieces",
                           DESC(x), (long long)known);
        out->dims[infer] = x->numel / known;
        known = x->numel;
    }
    if (known != x->numel)
        return tl_fail(st, TL_EINPUT, "cannot reshape %s (%lld element%s) to %lld element%s", DESC(x),
                       (long long)x->numel, x->numel == 1 ? "" : "s", (long long)known, known == 1 ? "" : "s");
    return TL_OK;
}

static tl_code transpose(const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    bool seen[TL_MAXDIM] = {false};
    if (!a->has_axes) {
        a->naxes = x->ndim;
        for (int d = 0; d < x->ndim; d++)
            a->axes[d] = x->ndim - 1 - d;
    }
    if (a->naxes != x->ndim)
        return tl_fail(st, TL_EINPUT, "axes has %d entries for %s", a->naxes, DESC(x));
    set_like(out, x);
    for (int d = 0; d < x->ndim; d++) {
        if (norm_axis(&a->axes[d], x->ndim, x, st))
            return st->code;
        if (seen[a->axes[d]])
            return tl_fail(st, TL_EINPUT, "axes is not a permutation (%lld repeated)",
                           (long long)a->axes[d]);
        seen[a->axes[d]] = true;
        out->dims[d] = x->shape[a->axes[d]];
    }
    return TL_OK;
}

static tl_code broadcast_to(const tl_tensor *x, const tl_attrs *a, tl_shape *out, tl_status *st)
{
    char want[96];
    tl_shape_desc(x->dtype, a->nshape, a->shape, want, sizeof want);
    if (tl_shape_numel(a->nshape, a->shape, &(int64_t){0}, st))
        return tl_wrap(st, "broadcast_to %s", want);
    out->dtype = x->dtype;
    out->ndim = a->nshape;
    memcpy(out->dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
    bool ok = x->ndim <= a->nshape;
    for (int d = 0; ok && d < x->ndim; d++) {
        int64_t s = x->shape[d], t = a->shape[d + a->nshape - x->ndim];
        ok = s == t || s == 1;
    }
    return ok ? TL_OK : tl_fail(st, TL_EINPUT, "cannot broadcast %s to %s", DESC(x), want);
}

static tl_code squeeze(const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    bool drop[TL_MAXDIM] = {false};
    for (int d = 0; !a->has_axes && d < x->ndim; d++)
        drop[d] = x->shape[d] == 1;
    for (int i = 0; a->has_axes && i < a->naxes; i++) {
        if (norm_axis(&a->axes[i], x->ndim, x, st))
            return st->code;
        if (x->shape[a->axes[i]] != 1)
            return tl_fail(st, TL_EINPUT, "cannot squeeze axis %lld of size %lld in %s",
                           (long long)a->axes[i], (long long)x->shape[a->axes[i]], DESC(x));
        if (drop[a->axes[i]]) /* (as the reductions: [0, -3] of a 3-d x names axis 0 twice) */
            return tl_fail(st, TL_EINPUT, "axis %lld repeated", (long long)a->axes[i]);
        drop[a->axes[i]] = true;
    }
    out->dtype = x->dtype;
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!drop[d])
            out->dims[out->ndim++] = x->shape[d];
    return TL_OK;
}

static tl_code concat(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a,
                      tl_shape *out, tl_status *st)
{
    const tl_tensor *x = in[0];
    bool stack = op == TL_OP_STACK;
    if (stack && x->ndim == TL_MAXDIM)
        return tl_fail(st, TL_EINPUT, "more than %d dimensions", TL_MAXDIM);
    if (same_dtype(n, in, st) || norm_axis(&a->axis, x->ndim + stack, x, st))
        return st->code;
    if (!stack && x->ndim == 0)
        return tl_fail(st, TL_EINPUT, "cannot concat scalars (use stack)");
    for (int i = 1; i < n; i++) {
        bool ok = in[i]->ndim == x->ndim;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = in[i]->shape[d] == x->shape[d] || (!stack && d == a->axis);
        if (!ok)
            return tl_fail(st, TL_EINPUT, "shapes do not fit together: %s and %s", DESC(x),
                           DESC(in[i]));
    }
    out->dtype = x->dtype;
    out->ndim = x->ndim + stack;
    for (int d = 0, s = 0; d < out->ndim; d++)
        out->dims[d] = stack && d == a->axis ? n : x->shape[s++];
    if (!stack)
        for (int i = 1; i < n; i++)
            out->dims[a->axis] += in[i]->shape[a->axis];
    return TL_OK;
}

/* Python slice rules for step > 0: clip start and stop into [0, len]. */
static int64_t clip_bound(bool has, int64_t v, int64_t dflt, int64_t len)
{
    if (!has)
        return dflt;
    if (v < 0)
        v += len;
    return v < 0 ? 0 : v > len ? len : v;
}

static tl_code slice(const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    if (norm_axis(&a->axis, x->ndim, x, st))
        return st->code;
    if (a->step <= 0)
        return tl_fail(st, TL_EINPUT, "step must be positive, got %lld", (long long)a->step);
    int64_t len = x->shape[a->axis];
    int64_t start = clip_bound(a->has_start, a->start, 0, len);
    int64_t stop = clip_bound(a->has_stop, a->stop, len, len);
    a->start = start;
    a->has_start = true;
    set_like(out, x);
    out->dims[a->axis] = stop > start ? (stop - start - 1) / a->step + 1 : 0;
    return TL_OK;
}

static tl_code take(const tl_tensor *x, tl_attrs *a, tl_shape *out, tl_status *st)
{
    if (norm_axis(&a->axis, x->ndim, x, st))
        return st->code;
    int64_t len = x->shape[a->axis];
    for (int64_t i = 0; i < a->nindices; i++)
        if (a->indices[i] < -len || a->indices[i] >= len)
            return tl_fail(st, TL_EINPUT, "index %lld out of range for axis %lld of %s",
                           (long long)a->indices[i], (long long)a->axis, DESC(x));
    set_like(out, x);
    out->dims[a->axis] = a->nindices;
    return TL_OK;
}

/* take with an index tensor: x.shape[:axis] + idx.shape + x.shape[axis+1:] */
static tl_code take_tensor(const tl_tensor *x, const tl_tensor *idx, tl_attrs *a, tl_shape *out,
                           tl_status *st)
{
    if (norm_axis(&a->axis, x->ndim, x, st))
        return st->code;
    if (x->ndim - 1 + idx->ndim > TL_MAXDIM)
        return tl_fail(st, TL_EINPUT, "more than %d dimensions: take from %s with indices %s",
                       TL_MAXDIM, DESC(x), DESC(idx));
    out->dtype = x->dtype;
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d != a->axis) {
            out->dims[out->ndim++] = x->shape[d];
            continue;
        }
        for (int k = 0; k < idx->ndim; k++)
            out->dims[out->ndim++] = idx->shape[k];
    }
    return TL_OK;
}

/* gather (take_along_axis): idx has x's rank and sizes except on axis */
static tl_code gather(const tl_tensor *x, const tl_tensor *idx, tl_attrs *a, tl_shape *out,
                      tl_status *st)
{
    if (x->ndim == 0)
        return tl_fail(st, TL_EINPUT, "gather from a scalar %s", DESC(x));
    if (norm_axis(&a->axis, x->ndim, x, st))
        return st->code;
    bool ok = idx->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == a->axis || idx->shape[d] == x->shape[d];
    if (!ok)
        return tl_fail(st, TL_EINPUT, "indices %s do not fit %s: same rank and sizes except on axis %lld",
                       DESC(idx), DESC(x), (long long)a->axis);
    set_like(out, idx);
    out->dtype = x->dtype;
    return TL_OK;
}

static tl_code one_hot(const tl_tensor *idx, const tl_attrs *a, tl_shape *out, tl_status *st)
{
    if (idx->ndim == TL_MAXDIM)
        return tl_fail(st, TL_EINPUT, "more than %d dimensions", TL_MAXDIM);
    set_like(out, idx);
    out->dtype = a->dtype;
    out->dims[out->ndim++] = a->depth;
    return tl_dtype_is_int(a->dtype) ? tl_fail(st, TL_EINPUT, "dtype \"%s\": the values are f32 or f64 (cast "
                                               "the result)", tl_dtype_name(a->dtype)) : TL_OK;
}

/* Derivative scatters produce the shape recorded in attrs. */
static tl_code to_attr_shape(const tl_tensor *g, const tl_attrs *a, tl_shape *out)
{
    out->dtype = g->dtype;
    out->ndim = a->nshape;
    memcpy(out->dims, a->shape, sizeof(int64_t) * (size_t)a->nshape);
    return TL_OK;
}

static tl_code misc(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a, tl_shape *out,
                    tl_status *st)
{
    const tl_tensor *x = in[0];
    switch (op) {
    case TL_OP_CAST: set_like(out, x); out->dtype = a->dtype; return TL_OK;
    case TL_OP_WHERE:
        return same_dtype(n, in, st) ? st->code : broadcast_all(n, in, out, st);
    case TL_OP_SOFTMAX:
    case TL_OP_LOG_SOFTMAX:
        if (!a->has_axis)
            a->axis = -1;
        if (x->ndim == 0)
            return tl_fail(st, TL_EINPUT, "%s of a scalar", tl_ops[op].name);
        set_like(out, x);
        return norm_axis(&a->axis, x->ndim, x, st);
    case TL_OP_MATMUL: return same_dtype(n, in, st) ? st->code : matmul(x, in[1], a, out, st);
    case TL_OP_RESHAPE: return reshape(x, a, out, st);
    case TL_OP_TRANSPOSE: return transpose(x, a, out, st);
    case TL_OP_BROADCAST_TO: return broadcast_to(x, a, out, st);
    case TL_OP_EXPAND_DIMS:
        if (x->ndim == TL_MAXDIM)
            return tl_fail(st, TL_EINPUT, "more than %d dimensions", TL_MAXDIM);
        if (norm_axis(&a->axis, x->ndim + 1, x, st))
            return st->code;
        out->dtype = x->dtype;
        out->ndim = x->ndim + 1;
        for (int d = 0, s = 0; d < out->ndim; d++)
            out->dims[d] = d == a->axis ? 1 : x->shape[s++];
        return TL_OK;
    case TL_OP_SQUEEZE: return squeeze(x, a, out, st);
    case TL_OP_CONCAT:
    case TL_OP_STACK: return concat(op, n, in, a, out, st);
    case TL_OP_SLICE: return slice(x, a, out, st);
    case TL_OP_TAKE: return n == 2 ? take_tensor(x, in[1], a, out, st) : take(x, a, out, st);
    case TL_OP_GATHER: return gather(x, in[1], a, out, st);
    case TL_OP_ONE_HOT: return one_hot(x, a, out, st);
    case TL_OP_SLICE_GRAD:
    case TL_OP_TAKE_GRAD:
    case TL_OP_GATHER_GRAD: return to_attr_shape(x, a, out);
    case TL_OP_PROD_GRAD:
    case TL_OP_GELU_GRAD:
    case TL_OP_RELU_GRAD: set_like(out, x); return same_dtype(n, in, st);
    case TL_OP_MAP:
        return same_dtype(n, in, st) ? st->code : broadcast_all(n, in, out, st);
    case TL_OP_MAP_GRAD: { /* inputs..., g -> [k, g's shape] */
        int k = 0;
        const tl_tensor *g = in[n - 1];
        for (int i = 0; i < n - 1; i++)
            k += a->want[i];
        if (g->ndim == TL_MAXDIM)
            return tl_fail(st, TL_EINPUT, "more than %d dimensions", TL_MAXDIM);
        out->dtype = g->dtype;
        out->ndim = g->ndim + 1;
        out->dims[0] = k;
        memcpy(out->dims + 1, g->shape, sizeof(int64_t) * (size_t)g->ndim);
        return TL_OK;
    }
    case TL_OP_CONV:
    case TL_OP_CONV_TRANSPOSE:
    case TL_OP_CONV_GRAD_W: return tl_shape_conv(op, n, in, a, out, st);
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL:
    case TL_OP_MAX_POOL_GRAD:
    case TL_OP_MAX_POOL_PICK:
    case TL_OP_AVG_POOL_GRAD: return tl_shape_pool(op, n, in, a, out, st);
    case TL_OP_BATCH_NORM:
    case TL_OP_LAYER_NORM:
    case TL_OP_GROUP_NORM:
    case TL_OP_LAYER_NORM_GRAD:
    case TL_OP_LAYER_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_PARAMS_GRAD:
    case TL_OP_BATCH_NORM_VAR:
    case TL_OP_BATCH_NORM_GRAD: return tl_shape_norm(op, n, in, a, out, st);
    case TL_OP_PAD:
    case TL_OP_RESIZE:
    case TL_OP_PAD_GRAD:
    case TL_OP_RESIZE_GRAD: return tl_shape_resample(op, n, in, a, out, st);
    case TL_OP_SCATTER_ADD:
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN:
    case TL_OP_CUMSUM: return tl_shape_scatter(op, n, in, a, out, st);
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL:
    case TL_OP_DROPOUT: return tl_shape_random(op, n, in, a, out, st);
    default: return tl_fail(st, TL_ERUNTIME, "internal: no shape rule for %s", tl_ops[op].name);
    }
}

/* Index tensors go where the op table lets them, and only there: index
 * arguments, the ops that move data (ANY), and the integer arithmetic
 * (NUM), whose operands then share one integer dtype (same_dtype says so
 * for a mix, suggesting cast). */
static tl_code check_dtypes(const tl_opinfo *info, int n, const tl_tensor *const *in,
                            tl_status *st)
{
    for (int i = 0; i < n; i++) {
        bool is_int = tl_dtype_is_int(in[i]->dtype);
        if (i == info->index_arg && !is_int)
            return tl_fail(st, TL_EINPUT, "indices must be an index tensor (i32 or i64), got %s",
                           DESC(in[i]));
        if (i != info->index_arg && is_int && info->dtypes == TL_DT_FLOAT)
            return tl_fail(st, TL_EINPUT, "argument %d is an index tensor %s: %s takes f32 or f64 "
                           "values (cast it first)", i + 1, DESC(in[i]), info->name);
    }
    return TL_OK;
}

bool tl_shape_reads_no_attrs(tl_opcode op)
{
    tl_opkind k = tl_ops[op].kind;
    return k == TL_KIND_BIN || k == TL_KIND_CMP || k == TL_KIND_UN;
}

tl_code tl_shape_infer(tl_opcode op, int n, const tl_tensor *const *in, tl_attrs *a,
                       tl_shape *out, tl_status *st)
{
    tl_opinfo info = tl_ops[op];
    if (tl_op_check_arity(op, n, st) || check_dtypes(&info, n, in, st))
        return st->code;
    switch (info.kind) {
    case TL_KIND_BIN:
    case TL_KIND_CMP: return same_dtype(n, in, st) ? st->code : broadcast_all(n, in, out, st);
    case TL_KIND_UN: set_like(out, in[0]); return TL_OK;
    case TL_KIND_RED: return reduction(op, in[0], a, out, st);
    default: return misc(op, n, in, a, out, st);
    }
}
