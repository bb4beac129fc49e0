/* The map engine on the CPU: runs a compiled scalar program (mprog.h) for
 * every element of the broadcast inputs.  Forward computes values; the
 * derivative kernel runs the same program in forward mode, carrying one
 * tangent per differentiated input, and writes g * dy/dinput per element.
 * A tangent that is exactly zero contributes nothing (as an absent path
 * in reverse mode), so 0 * inf never turns into NaN. */
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "backends/mprog.h"
#include "cpu.h"
#include "scalar.h"

#define DEFINE_MAP(T, SUF)                                                         \
    static inline T un_##SUF(int op, T v, int approx)                              \
    {                                                                              \
        switch (op) {                                                              \
            TL_UNARY_EXPRS(UN_RETURN)                                              \
        }                                                                          \
        return v;                                                                  \
    }                                                                              \
    static inline T bin_##SUF(int op, T a, T b)                                    \
    {                                                                              \
        switch (op) {                                                              \
            TL_BINARY_EXPRS(BIN_RETURN)                                            \
        }                                                                          \
        return a;                                                                  \
    }                                                                              \
    static inline T dun_##SUF(int op, T v, T y, int approx)                        \
    {                                                                              \
        switch (op) {                                                              \
        case TL_OP_NEG: return -1;                                                 \
        case TL_OP_ABS: return v > 0 ? 1 : v < 0 ? -1 : v == 0 ? 0 : v;            \
        case TL_OP_EXP: return y;                                                  \
        case TL_OP_EXPM1: return y + 1;                                            \
        case TL_OP_LOG: return 1 / v;                                              \
        case TL_OP_LOG1P: return 1 / (v + 1);                                      \
        case TL_OP_SQRT: return 1 / (y * 2);                                       \
        case TL_OP_RSQRT: return (T)-0.5 * (y * y * y);                            \
        case TL_OP_RECIPROCAL: return -(y * y);                                    \
        case TL_OP_SQUARE: return v * 2;                                           \
        case TL_OP_SIN: return cos(v);                                             \
        case TL_OP_COS: return -sin(v);                                            \
        case TL_OP_TAN: return 1 + y * y;                                          \
        case TL_OP_TANH: return 1 - y * y;                                         \
        case TL_OP_SIGMOID: return (1 - y) * y;                                    \
        case TL_OP_ERF: return (T)TL_2_SQRTPI * exp(-(v * v));                     \
        case TL_OP_RELU: return v > 0 ? 1 : 0;                                     \
        case TL_OP_SOFTPLUS: return 1 / (1 + exp(-v));                             \
        case TL_OP_GELU: return TL_GELU_GRAD(v, approx);                           \
        case TL_OP_SILU: {                                                         \
            T s = 1 / (1 + exp(-v));                                               \
            return s * (1 + v * (1 - s));                                          \
        }                                                                          \
        default: return 0; /* sign, detach */                                      \
        }                                                                          \
    }                                                                              \
    static inline void dbin_##SUF(int op, T a, T b, T y, T *da, T *db)             \
    {                                                                              \
        *da = *db = 0;                                                             \
        switch (op) {                                                              \
        case TL_OP_ADD: *da = 1; *db = 1; break;                                   \
        case TL_OP_SUB: *da = 1; *db = -1; break;                                  \
        case TL_OP_MUL: *da = b; *db = a; break;                                   \
        case TL_OP_DIV: *da = 1 / b; *db = -(y / b); break;                        \
        case TL_OP_POW:                                                            \
            *da = b == 0 ? 0 : b * pow(a, b - 1);                                  \
            *db = a == 0 && b >= 0 ? 0 : y * log(a);                               \
            break;                                                                 \
        case TL_OP_MAXIMUM:                                                        \
            *da = a == b ? (T)0.5 : a < b ? 0 : 1;                                 \
            *db = a == b ? (T)0.5 : a > b ? 0 : 1;                                 \
            break;                                                                 \
        case TL_OP_MINIMUM:                                                        \
            *da = a == b ? (T)0.5 : a > b ? 0 : 1;                                 \
            *db = a == b ? (T)0.5 : a < b ? 0 : 1;                                 \
            break;                                                                 \
        default: break; /* comparisons */                                          \
        }                                                                          \
    }                                                                              \
    static void run_##SUF(const tl_mprog *p, T *r, int64_t *cnt, T *tan, int k)    \
    {                                                                              \
        for (int pc = 0; pc < p->nins;) {                                          \
            const tl_mins *in_ = &p->ins[pc++];                                      \
            T *td = tan ? tan + (int64_t)in_->dst * k : NULL;                        \
            switch (in_->code) {                                                     \
            case TL_M_UN: {                                                        \
                T v = r[in_->a], y = un_##SUF(in_->op, v, in_->approx);                  \
                if (tan) {                                                         \
                    T d = dun_##SUF(in_->op, v, y, in_->approx), *ta = tan + in_->a * k; \
                    for (int j = 0; j < k; j++)                                    \
                        td[j] = ta[j] != 0 ? d * ta[j] : 0;                        \
                }                                                                  \
                r[in_->dst] = y;                                                     \
                break;                                                             \
            }                                                                      \
            case TL_M_BIN: {                                                       \
                T a = r[in_->a], b = r[in_->b], y = bin_##SUF(in_->op, a, b), da, db;    \
                if (tan) {                                                         \
                    dbin_##SUF(in_->op, a, b, y, &da, &db);                          \
                    T *ta = tan + in_->a * k, *tb = tan + in_->b * k;                  \
                    for (int j = 0; j < k; j++)                                    \
                        td[j] = (ta[j] != 0 ? da * ta[j] : 0) +                    \
                                (tb[j] != 0 ? db * tb[j] : 0);                     \
                }                                                                  \
                r[in_->dst] = y;                                                     \
                break;                                                             \
            }                                                                      \
            case TL_M_CLAMP: {                                                     \
                T v = r[in_->a], lo = (T)in_->lo, hi = (T)in_->hi;                       \
                if (tan) {                                                         \
                    bool in = (!in_->has_lo || v >= lo) && (!in_->has_hi || v <= hi) && v == v; \
                    T *ta = tan + in_->a * k;                                        \
                    for (int j = 0; j < k; j++)                                    \
                        td[j] = in ? ta[j] : 0;                                    \
                }                                                                  \
                r[in_->dst] = TL_CLAMP(v, lo, hi, in_->has_lo, in_->has_hi);             \
                break;                                                             \
            }                                                                      \
            case TL_M_WHERE:                                                       \
            case TL_M_MOV: {                                                       \
                int src = in_->code == TL_M_MOV || r[in_->a] != 0 ? (int)(in_->code == TL_M_MOV ? in_->a : in_->b) : in_->c; \
                if (tan)                                                           \
                    memcpy(td, tan + (int64_t)src * k, sizeof(T) * (size_t)k);     \
                r[in_->dst] = r[src];                                                \
                break;                                                             \
            }                                                                      \
            case TL_M_JZ:                                                          \
                if (!(r[in_->a] != 0))                                               \
                    pc = (int)in_->imm;                                              \
                break;                                                             \
            case TL_M_JMP: pc = (int)in_->imm; break;                                \
            case TL_M_LOOP_INIT: cnt[in_->c] = 0; break;                             \
            case TL_M_LOOP_TEST:                                                   \
                if (cnt[in_->c] >= in_->b)                                             \
                    pc = (int)in_->imm;                                              \
                else if (in_->dst >= 0)                                              \
                    r[in_->dst] = (T)cnt[in_->c];                                      \
                break;                                                             \
            case TL_M_LOOP_INC: cnt[in_->c]++; break;                                \
            }                                                                      \
        }                                                                          \
    }

#define UN_RETURN(E, EXPR) case TL_OP_##E: return (T)(EXPR);
#define BIN_RETURN(E, EXPR) case TL_OP_##E: return (T)(EXPR);
#define T float
DEFINE_MAP(float, f)
#undef T
#define T double
DEFINE_MAP(double, d)
#undef T

/* Walks every element of `shape`, keeping each input's broadcast offset. */
typedef struct walker {
    int ndim, n;
    const int64_t *shape;
    int64_t idx[TL_MAXDIM];
    int64_t *off, *stride; /* n, n * TL_MAXDIM */
} walker;

static bool walker_init(walker *w, int ndim, const int64_t *shape, int n, cpu_ins in,
                        tl_status *st)
{
    w->ndim = ndim;
    w->n = n;
    w->shape = shape;
    memset(w->idx, 0, sizeof w->idx);
    w->off = tl_calloc((size_t)n * (TL_MAXDIM + 1), sizeof(int64_t), "map offsets", st);
    if (!w->off)
        return false;
    w->stride = w->off + n;
    for (int i = 0; i < n; i++) {
        int64_t s[TL_MAXDIM];
        cpu_strides(in[i]->ndim, in[i]->shape, s);
        for (int d = 0; d < ndim; d++) {
            int id = d - (ndim - in[i]->ndim);
            w->stride[i * TL_MAXDIM + d] = id < 0 || in[i]->shape[id] == 1 ? 0 : s[id];
        }
    }
    return true;
}

static void walker_next(walker *w)
{
    for (int d = w->ndim - 1; d >= 0; d--) {
        for (int i = 0; i < w->n; i++)
            w->off[i] += w->stride[i * TL_MAXDIM + d];
        if (++w->idx[d] < w->shape[d])
            return;
        for (int i = 0; i < w->n; i++)
            w->off[i] -= w->stride[i * TL_MAXDIM + d] * w->shape[d];
        w->idx[d] = 0;
    }
}

/* k > 0: derivative mode; out is [k, shape] and in[n] is the cotangent. */
#define MAP_KERNEL(T, SUF)                                                         \
    do {                                                                           \
        T *r = scratch, *tan = k ? r + p->nregs : NULL, *Y = out->data;            \
        for (int i = 0; i < p->nconst; i++)                                        \
            r[p->const_reg[i]] = (T)p->const_val[i];                               \
        for (int i = 0, j = 0; k && i < n; i++)                                    \
            if (a->want[i])                                                        \
                tan[(int64_t)p->in_reg[i] * k + j++] = 1;                          \
        const T *G = k ? in[n]->data : NULL;                                       \
        for (int64_t e = 0; e < total; e++, walker_next(&w)) {                     \
            for (int i = 0; i < n; i++)                                            \
                r[p->in_reg[i]] = ((const T *)in[i]->data)[w.off[i]];              \
            run_##SUF(p, r, cnt, tan, k);                                          \
            if (!k) {                                                              \
                Y[e] = r[p->result];                                               \
                continue;                                                          \
            }                                                                      \
            const T *tr = tan + (int64_t)p->result * k;                            \
            for (int j = 0; j < k; j++)                                            \
                Y[j * total + e] = tr[j] != 0 ? G[e] * tr[j] : 0;                  \
        }                                                                          \
    } while (0)

tl_code cpu_map(tl_opcode op, int nin, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                tl_status *st)
{
    const tl_mprog *p = a->prog;
    bool grad = op == TL_OP_MAP_GRAD;
    int n = grad ? nin - 1 : nin, k = 0;
    for (int i = 0; grad && i < n; i++)
        k += a->want[i];
    int ndim = grad ? out->ndim - 1 : out->ndim;
    const int64_t *shape = grad ? out->shape + 1 : out->shape;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++)
        total *= shape[d];
    if (total == 0 || (grad && k == 0))
        return TL_OK;
    walker w;
    if (!walker_init(&w, ndim, shape, n, in, st))
        return st->code;
    size_t es = tl_dtype_size(out->dtype);
    void *scratch = tl_calloc((size_t)p->nregs * (size_t)(k + 1), es, "map registers", st);
    int64_t *cnt = tl_calloc((size_t)p->ncounters + 1, sizeof(int64_t), "map counters", st);
    if (scratch && cnt) {
        if (out->dtype == TL_F32)
            MAP_KERNEL(float, f);
        else
            MAP_KERNEL(double, d);
    }
    free(w.off);
    free(cnt);
    free(scratch);
    return scratch && cnt ? TL_OK : st->code;
}
