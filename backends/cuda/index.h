/* Index ops, device-neutral half: take, gather, one_hot and the scatters
 * that are their derivatives (take_grad, gather_grad).
 *
 * Indices are checked by a kernel of their own (one thread per index) that
 * records the position of the first bad one in a device flag; the op's
 * kernels never read through a bad index, and the host reads the flag back
 * after launching them (a host sync per index tensor, as for `if`).
 *
 * The scatters add without atomics, in the CPU's order: every position p
 * of the cotangent gets a key, the output element it adds into; a stable
 * sort of the positions by key lists each output element's contributions
 * in increasing p; and each output element sums its own run from zero, so
 * repeated indices accumulate exactly as the CPU's loop does, bit for bit. */
#ifndef TL_CUDA_INDEX_H
#define TL_CUDA_INDEX_H

#include "plan.h"

typedef struct cu_idx {
    int op;                  /* take, gather, one_hot, take_grad, gather_grad */
    int es;                  /* bytes per element moved: 4 or 8 */
    int64_t outer, len, inner; /* the full tensor around the axis: [outer, len, inner] */
    int64_t m;               /* take: the number of indices; gather: idx's size on the axis */
    const void *idx;         /* the index tensor, or take's attribute list (i64) */
    tl_dtype idx_dtype;
    int64_t nidx;
    bool negative;           /* negative indices count from the end */
    const void *x;
    void *y;
    int64_t depth;           /* one_hot */
    tl_dtype dtype;          /* one_hot's result */
    const int64_t *order;    /* scatters: positions sorted by key */
    const uint64_t *keys;    /* and their keys, sorted */
} cu_idx;

TL_HD static inline int64_t cu_index_raw(const cu_idx *k, int64_t j)
{
    return k->idx_dtype == TL_I32 ? (int64_t)((const int32_t *)k->idx)[j]
                                  : ((const int64_t *)k->idx)[j];
}

/* The CPU's rule: in [-len, len), or [0, len) without negatives. */
TL_HD static inline bool cu_index_ok(int64_t i, int64_t len, bool negative)
{
    return i < len && (negative ? i >= -len : i >= 0);
}

/* Index j, counted from the start; -1 when out of range. */
TL_HD static inline int64_t cu_index_at(const cu_idx *k, int64_t j)
{
    int64_t i = cu_index_raw(k, j);
    if (!cu_index_ok(i, k->len, k->negative))
        return -1;
    return i < 0 ? i + k->len : i;
}

/* take: y[o, j, r] = x[o, idx[j], r] */
TL_HD static inline void cu_take_element(const cu_idx *k, int64_t e)
{
    int64_t r = e % k->inner, t = e / k->inner, j = t % k->m, o = t / k->m;
    int64_t i = cu_index_at(k, j);
    if (i >= 0)
        cu_move(k->es, k->y, e, k->x, (o * k->len + i) * k->inner + r);
}

/* gather (take_along_axis): y[o, j, r] = x[o, idx[o, j, r], r] */
TL_HD static inline void cu_gather_element(const cu_idx *k, int64_t e)
{
    int64_t r = e % k->inner, o = e / k->inner / k->m;
    int64_t i = cu_index_at(k, e);
    if (i >= 0)
        cu_move(k->es, k->y, e, k->x, (o * k->len + i) * k->inner + r);
}

/* one_hot: y[j, d] = idx[j] == d */
TL_HD static inline void cu_one_hot_element(const cu_idx *k, int64_t e)
{
    int64_t j = e / k->depth, d = e % k->depth;
    bool hot = cu_index_raw(k, j) == d;
    if (k->dtype == TL_F32)
        ((float *)k->y)[e] = hot ? 1.0f : 0.0f;
    else
        ((double *)k->y)[e] = hot ? 1.0 : 0.0;
}

/* Scatters.  The key of cotangent position p is the linear index of the
 * output element it adds into; a bad index gets cu_scatter_nokey (sorted
 * last, never summed).  take_grad's cotangent is [outer, m, inner] with
 * index j of position (o, j, r) in the list; gather_grad's has idx's
 * shape and its own index per position. */
TL_HD static inline uint64_t cu_scatter_nokey(const cu_idx *k)
{
    return (uint64_t)(k->outer * k->len * k->inner);
}

TL_HD static inline uint64_t cu_scatter_key(const cu_idx *k, int64_t p)
{
    int64_t r = p % k->inner, o = p / k->inner / k->m, j = p / k->inner % k->m;
    int64_t i = cu_index_at(k, k->op == TL_OP_TAKE_GRAD ? j : p);
    return i < 0 ? cu_scatter_nokey(k) : (uint64_t)((o * k->len + i) * k->inner + r);
}

/* The first of the n sorted keys that is >= key. */
TL_HD static inline int64_t cu_lower_bound(const uint64_t *keys, int64_t n, uint64_t key)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Output element e: zero plus its contributions in increasing position. */
#define CU_DEFINE_SCATTER(T, SUF)                                                  \
    TL_HD static inline void cu_scatter_element_##SUF(const cu_idx *k, int64_t n, int64_t e) \
    {                                                                              \
        uint64_t key = (uint64_t)e;                                                \
        int64_t q = cu_lower_bound(k->keys, n, key);                               \
        const T *g = (const T *)k->x;                                              \
        T s = 0;                                                                   \
        for (; q < n && k->keys[q] == key; q++)                                    \
            s += g[k->order[q]];                                                   \
        ((T *)k->y)[e] = s;                                                        \
    }
CU_DEFINE_SCATTER(float, f)
CU_DEFINE_SCATTER(double, d)

/* The index op's geometry (host side); x, y, idx are the tensors' data.
 * idx is NULL for take's attribute list, which the caller has put on the
 * device as i64 (list). */
static inline void cu_idx_prepare(cu_idx *k, tl_opcode op, const tl_tensor *x,
                                  const tl_tensor *idx, const void *list, const tl_attrs *a,
                                  tl_tensor *out)
{
    bool scatter = op == TL_OP_TAKE_GRAD || op == TL_OP_GATHER_GRAD;
    const tl_tensor *full = scatter ? out : x;
    int ax = (int)a->axis;
    memset(k, 0, sizeof *k);
    k->op = (int)op;
    k->es = (int)tl_dtype_size(out->dtype);
    k->x = x->data;
    k->y = out->data;
    k->idx = idx ? idx->data : list;
    k->idx_dtype = idx ? idx->dtype : TL_I64;
    k->nidx = idx ? idx->numel : a->nindices;
    k->negative = op != TL_OP_ONE_HOT;
    k->depth = a->depth;
    k->dtype = out->dtype;
    k->outer = k->inner = 1;
    if (op == TL_OP_ONE_HOT) {
        k->len = a->depth;
        return;
    }
    for (int d = 0; d < ax; d++)
        k->outer *= full->shape[d];
    for (int d = ax + 1; d < full->ndim; d++)
        k->inner *= full->shape[d];
    k->len = full->shape[ax];
    k->m = op == TL_OP_TAKE || op == TL_OP_TAKE_GRAD ? k->nidx : idx->shape[ax];
}

/* What the scatter's cotangent positions are: take_grad's x is
 * [outer, m, inner], gather_grad's has idx's shape. */
static inline int64_t cu_scatter_positions(const cu_idx *k) { return k->outer * k->m * k->inner; }

#endif
