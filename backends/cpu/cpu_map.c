/* The map engine on the CPU: runs a compiled scalar program (mprog.h) over
 * every element of the broadcast inputs.  Elements go in blocks of LANES:
 * each instruction is dispatched once per block and loops over the
 * block's active lanes, so a map costs about what straight-line tensor ops
 * cost.  An `if` splits the active lanes and runs each branch only for
 * the lanes that selected it; loop counts are literals, the same for
 * every lane.  Forward computes values; the derivative kernel runs the
 * same program in forward mode, carrying one tangent per differentiated
 * input, and writes g * dy/dinput per element.  A tangent that is exactly
 * zero contributes nothing (as an absent path in reverse mode), so 0 * inf
 * never turns into NaN. */
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "backends/mprog.h"
#include "cpu.h"
#include "scalar.h"
#include "scalar_deriv.h"

#define LANES 256

/* Loops over the active lanes: all of 0..m-1 when full (vectorisable),
 * else the listed ones. */
#define EACH_LANE(...)                                                             \
    do {                                                                           \
        if (full)                                                                  \
            for (int l = 0; l < m; l++) {                                          \
                __VA_ARGS__;                                                       \
            }                                                                      \
        else                                                                       \
            for (int j_ = 0; j_ < m; j_++) {                                       \
                int l = lanes[j_];                                                 \
                __VA_ARGS__;                                                       \
            }                                                                      \
    } while (0)

#define UN_LANES(E, EXPR)                                                          \
    case TL_OP_##E:                                                                \
        EACH_LANE(T v = A[l]; D[l] = (T)(EXPR));                                   \
        break;
#define BIN_LANES(E, EXPR)                                                         \
    case TL_OP_##E:                                                                \
        EACH_LANE(T a = A[l], b = B[l]; D[l] = (T)(EXPR));                         \
        break;

/* Per block state: registers [nregs][LANES], tangents [nregs][k][LANES]. */
#define DEFINE_EXEC(T, SUF)                                                        \
    typedef struct mstate_##SUF {                                                  \
        const tl_mprog *p;                                                         \
        int k;                                                                     \
        T *r, *tan;                                                                \
        int64_t *cnt;                                                              \
    } mstate_##SUF;                                                                \
                                                                                   \
    static void tangents_##SUF(const mstate_##SUF *s, const tl_mins *in_, const int *lanes, \
                               int m, bool full)                                   \
    {                                                                              \
        int k = s->k;                                                              \
        const T *A = s->r + (int64_t)in_->a * LANES;                               \
        const T *B = s->r + in_->b * LANES, *D = s->r + (int64_t)in_->dst * LANES; \
        for (int j = 0; j < k; j++) {                                              \
            T *td = s->tan + ((int64_t)in_->dst * k + j) * LANES;                  \
            const T *ta = s->tan + ((int64_t)in_->a * k + j) * LANES;              \
            const T *tb = s->tan + (in_->b * k + j) * LANES;                       \
            const T *tc = s->tan + ((int64_t)in_->c * k + j) * LANES;              \
            switch (in_->code) {                                                   \
            case TL_M_UN:                                                          \
                EACH_LANE(T d = dun_##SUF(in_->op, A[l], D[l], in_->approx);       \
                          td[l] = ta[l] != 0 ? d * ta[l] : 0);                     \
                break;                                                             \
            case TL_M_BIN:                                                         \
                EACH_LANE(T da; T db; dbin_##SUF(in_->op, A[l], B[l], D[l], &da, &db); \
                          td[l] = (ta[l] != 0 ? da * ta[l] : 0) + (tb[l] != 0 ? db * tb[l] : 0)); \
                break;                                                             \
            case TL_M_CLAMP:                                                       \
                EACH_LANE(T v = A[l];                                              \
                          bool in = (!in_->has_lo || v >= (T)in_->lo) &&           \
                                    (!in_->has_hi || v <= (T)in_->hi) && v == v;   \
                          td[l] = in ? ta[l] : 0);                                 \
                break;                                                             \
            case TL_M_WHERE: EACH_LANE(td[l] = A[l] != 0 ? tb[l] : tc[l]); break;  \
            default: EACH_LANE(td[l] = ta[l]); break; /* MOV */                    \
            }                                                                      \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* Runs instructions [pc, end) for the given lanes. */                         \
    static void exec_##SUF(const mstate_##SUF *s, int pc, int end, const int *lanes, int m, \
                           bool full)                                              \
    {                                                                              \
        const tl_mprog *p = s->p;                                                  \
        while (pc < end) {                                                         \
            const tl_mins *in_ = &p->ins[pc];                                      \
            T *D = s->r + (int64_t)in_->dst * LANES;                               \
            const T *A = s->r + (int64_t)in_->a * LANES, *B = s->r + in_->b * LANES; \
            const T *C = s->r + (int64_t)in_->c * LANES;                           \
            switch (in_->code) {                                                   \
            case TL_M_UN: {                                                        \
                int approx = in_->approx;                                          \
                (void)approx;                                                      \
                switch (in_->op) { TL_UNARY_EXPRS(UN_LANES) }                      \
                break;                                                             \
            }                                                                      \
            case TL_M_BIN:                                                         \
                switch (in_->op) { TL_BINARY_EXPRS(BIN_LANES) }                    \
                break;                                                             \
            case TL_M_CLAMP: {                                                     \
                T lo = (T)in_->lo, hi = (T)in_->hi;                                \
                bool hl = in_->has_lo, hh = in_->has_hi;                           \
                EACH_LANE(T v = A[l]; D[l] = TL_CLAMP(v, lo, hi, hl, hh));         \
                break;                                                             \
            }                                                                      \
            case TL_M_WHERE: EACH_LANE(D[l] = A[l] != 0 ? B[l] : C[l]); break;     \
            case TL_M_MOV: EACH_LANE(D[l] = A[l]); break;                          \
            case TL_M_JZ: { /* then: [pc+1, jmp), else: [imm, jmp target) */       \
                int split[2][LANES], n[2] = {0, 0};                                \
                EACH_LANE(int w = !(A[l] != 0); split[w][n[w]++] = l);             \
                int jmp = (int)in_->imm - 1, join = (int)p->ins[jmp].imm;          \
                if (n[0])                                                          \
                    exec_##SUF(s, pc + 1, jmp, split[0], n[0], full && n[0] == m); \
                if (n[1])                                                          \
                    exec_##SUF(s, (int)in_->imm, join, split[1], n[1], full && n[1] == m); \
                pc = join;                                                         \
                continue;                                                          \
            }                                                                      \
            case TL_M_JMP: pc = (int)in_->imm; continue;                           \
            case TL_M_LOOP_INIT: s->cnt[in_->c] = 0; break;                        \
            case TL_M_LOOP_TEST:                                                   \
                if (s->cnt[in_->c] >= in_->b) {                                    \
                    pc = (int)in_->imm;                                            \
                    continue;                                                      \
                }                                                                  \
                if (in_->dst >= 0) {                                               \
                    T i = (T)s->cnt[in_->c];                                       \
                    EACH_LANE(D[l] = i);                                           \
                }                                                                  \
                break;                                                             \
            case TL_M_LOOP_INC: s->cnt[in_->c]++; break;                           \
            }                                                                      \
            if (s->k && in_->code <= TL_M_MOV)                                     \
                tangents_##SUF(s, in_, lanes, m, full);                            \
            pc++;                                                                  \
        }                                                                          \
    }
#define T float
DEFINE_EXEC(float, f)
#undef T
#define T double
DEFINE_EXEC(double, d)
#undef T

/* How each input is read across the output's elements. */
enum { IN_SAME, IN_SCALAR, IN_GATHER };

typedef struct walker {
    int ndim, n;
    const int64_t *shape;
    int64_t idx[TL_MAXDIM];
    int *mode;
    int64_t *off, *stride; /* n, n * TL_MAXDIM */
} walker;

static bool walker_init(walker *w, int ndim, const int64_t *shape, int64_t total, int n,
                        cpu_ins in, tl_status *st)
{
    w->ndim = ndim;
    w->n = n;
    w->shape = shape;
    memset(w->idx, 0, sizeof w->idx);
    w->off = tl_calloc((size_t)n * (TL_MAXDIM + 2), sizeof(int64_t), "map offsets", st);
    if (!w->off)
        return false;
    w->stride = w->off + n;
    w->mode = (int *)(w->stride + (size_t)n * TL_MAXDIM);
    for (int i = 0; i < n; i++) {
        int64_t s[TL_MAXDIM];
        cpu_strides(in[i]->ndim, in[i]->shape, s);
        for (int d = 0; d < ndim; d++) {
            int id = d - (ndim - in[i]->ndim);
            w->stride[i * TL_MAXDIM + d] = id < 0 || in[i]->shape[id] == 1 ? 0 : s[id];
        }
        w->mode[i] = in[i]->numel == total ? IN_SAME : in[i]->numel == 1 ? IN_SCALAR : IN_GATHER;
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
        mstate_##SUF s = {p, k, scratch, NULL, cnt};                               \
        s.tan = k ? s.r + (int64_t)p->nregs * LANES : NULL;                        \
        T *Y = out->data;                                                          \
        const T *G = k ? in[n]->data : NULL;                                       \
        for (int i = 0; i < p->nconst; i++)                                        \
            for (int l = 0; l < LANES; l++)                                        \
                s.r[(int64_t)p->const_reg[i] * LANES + l] = (T)p->const_val[i];    \
        for (int i = 0, j = 0; k && i < n; i++)                                    \
            if (a->want[i]) {                                                      \
                T *t = s.tan + ((int64_t)p->in_reg[i] * k + j++) * LANES;          \
                for (int l = 0; l < LANES; l++)                                    \
                    t[l] = 1;                                                      \
            }                                                                      \
        for (int64_t e0 = 0; e0 < total; e0 += LANES) {                            \
            int m = total - e0 < LANES ? (int)(total - e0) : LANES;                \
            for (int i = 0; i < n; i++) {                                          \
                const T *X = in[i]->data;                                          \
                T *R = s.r + (int64_t)p->in_reg[i] * LANES;                        \
                if (w.mode[i] == IN_SAME)                                          \
                    memcpy(R, X + e0, sizeof(T) * (size_t)m);                      \
                else if (w.mode[i] == IN_SCALAR)                                   \
                    for (int l = 0; l < m; l++)                                    \
                        R[l] = X[0];                                               \
            }                                                                      \
            for (int l = 0; gather && l < m; l++, walker_next(&w))                 \
                for (int i = 0; i < n; i++)                                        \
                    if (w.mode[i] == IN_GATHER)                                    \
                        s.r[(int64_t)p->in_reg[i] * LANES + l] =                   \
                            ((const T *)in[i]->data)[w.off[i]];                    \
            exec_##SUF(&s, 0, p->nins, NULL, m, true);                             \
            const T *res = s.r + (int64_t)p->result * LANES;                       \
            if (!k) {                                                              \
                memcpy(Y + e0, res, sizeof(T) * (size_t)m);                        \
                continue;                                                          \
            }                                                                      \
            for (int j = 0; j < k; j++) {                                          \
                const T *tr = s.tan + ((int64_t)p->result * k + j) * LANES;        \
                T *yj = Y + j * total + e0;                                        \
                for (int l = 0; l < m; l++)                                        \
                    yj[l] = tr[l] != 0 ? G[e0 + l] * tr[l] : 0;                    \
            }                                                                      \
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
    if (!walker_init(&w, ndim, shape, total, n, in, st))
        return st->code;
    bool gather = false;
    for (int i = 0; i < n; i++)
        gather = gather || w.mode[i] == IN_GATHER;
    size_t es = tl_dtype_size(out->dtype);
    void *scratch = tl_calloc((size_t)p->nregs * (size_t)(k + 1) * LANES, es, "map registers", st);
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
