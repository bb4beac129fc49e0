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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "backends/mprog.h"
#include "cpu.h"
#include "psum.h"
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

/* Both branches of an `if` over all lanes of a full block, then a
 * select, where that is cheap: straight-line branches (no loops) that
 * write at most MERGE_REGS registers in common (the if's results; every
 * other register a branch writes is its own).  A lane's value is the one
 * its own branch computes, as in the lane-split path, and no branch has
 * effects beyond its registers; the unselected branch's work is discarded.
 * Returns the number of common registers, or -1 to split the lanes. */
#define MERGE_REGS 4
#define MERGE_TANGENTS 4
#define MERGE_SPAN 48 /* instructions of both branches together */

static int both_write(const tl_mprog *p, int pc, int jmp, int join, int *merge)
{
    int nm = 0;
    if (join - pc > MERGE_SPAN)
        return -1;
    for (int i = pc + 1; i < join; i++)
        if (p->ins[i].code >= TL_M_LOOP_INIT)
            return -1;
    for (int i = pc + 1; i < jmp; i++) {
        if (p->ins[i].code > TL_M_MOV)
            continue;
        int d = p->ins[i].dst;
        bool other = false, seen = false;
        for (int e = jmp + 1; e < join && !other; e++)
            other = p->ins[e].code <= TL_M_MOV && p->ins[e].dst == d;
        for (int q = 0; q < nm; q++)
            seen = seen || merge[q] == d;
        if (other && !seen) {
            if (nm == MERGE_REGS)
                return -1;
            merge[nm++] = d;
        }
    }
    return nm;
}

/* Tangents through one op, per lane: d op/d operand times the operand's
 * tangent, a zero tangent contributing nothing (scalar_deriv.h's lists,
 * one loop per op so that it vectorises).  The derivatives go through an
 * array of their own first: with the select in the same loop, GCC moved
 * the call under it and called the scalar function lane by lane (cos, the
 * map benchmark's derivative, was a fifth of its run). */
#define TAN_UN(E, EXPR)                                                            \
    case TL_OP_##E:                                                                \
        EACH_LANE(T v = A[l], y = D[l]; (void)v; (void)y; dv[l] = (T)(EXPR));      \
        EACH_LANE(td[l] = ta[l] != 0 ? dv[l] * ta[l] : 0);                         \
        break;
#define TAN_BIN(E, DA, DB)                                                         \
    case TL_OP_##E:                                                                \
        EACH_LANE(T a = A[l], b = B[l], y = D[l]; (void)a; (void)b; (void)y;       \
                  dv[l] = (T)(DA); dw[l] = (T)(DB));                               \
        EACH_LANE(td[l] = (ta[l] != 0 ? dv[l] * ta[l] : 0) + (tb[l] != 0 ? dw[l] * tb[l] : 0)); \
        break;

/* Per block state: registers [nregs][LANES], tangents [nregs][k][LANES]. */
#define DEFINE_EXEC(T, SUF)                                                        \
    typedef struct mstate_##SUF {                                                  \
        const tl_mprog *p;                                                         \
        int k;                                                                     \
        T *r, *tan;                                                                \
        int64_t *cnt;                                                              \
        char *calls;            /* TL_M_CALL: the called bodies' registers */      \
        const size_t *call_off; /* per instruction, into calls */                  \
    } mstate_##SUF;                                                                \
                                                                                   \
    CPU_KERNEL static void tangents_##SUF(const mstate_##SUF *s, const tl_mins *in_, const int *lanes, \
                               int m, bool full)                                   \
    {                                                                              \
        int k = s->k;                                                              \
        T dv[LANES], dw[LANES];                                                    \
        const T *A = s->r + (int64_t)in_->a * LANES;                               \
        const T *B = s->r + in_->b * LANES, *D = s->r + (int64_t)in_->dst * LANES; \
        for (int j = 0; j < k; j++) {                                              \
            T *td = s->tan + ((int64_t)in_->dst * k + j) * LANES;                  \
            const T *ta = s->tan + ((int64_t)in_->a * k + j) * LANES;              \
            const T *tb = s->tan + (in_->b * k + j) * LANES;                       \
            const T *tc = s->tan + ((int64_t)in_->c * k + j) * LANES;              \
            switch (in_->code) {                                                   \
            case TL_M_UN: {                                                        \
                int approx = in_->approx;                                          \
                (void)approx;                                                      \
                if (in_->op == TL_OP_GELU) { /* the form fixed per loop */         \
                    if (approx)                                                    \
                        EACH_LANE(T v = A[l]; dv[l] = TL_GELU_GRAD(v, 1));         \
                    else                                                           \
                        EACH_LANE(T v = A[l]; dv[l] = TL_GELU_GRAD(v, 0));         \
                    EACH_LANE(td[l] = ta[l] != 0 ? dv[l] * ta[l] : 0);             \
                    break;                                                         \
                }                                                                  \
                switch (in_->op) {                                                 \
                    TL_UNARY_DERIVS(TAN_UN)                                        \
                default: EACH_LANE(T d = 0; td[l] = ta[l] != 0 ? d * ta[l] : 0); break; \
                }                                                                  \
                break;                                                             \
            }                                                                      \
            case TL_M_BIN: {                                                       \
                int approx = in_->approx; /* gelu_grad */                          \
                (void)approx;                                                      \
                switch (in_->op) {                                                 \
                    TL_BINARY_DERIVS(TAN_BIN)                                      \
                default:                                                           \
                    EACH_LANE(T da = 0, db = 0;                                    \
                              td[l] = (ta[l] != 0 ? da * ta[l] : 0) + (tb[l] != 0 ? db * tb[l] : 0)); \
                    break;                                                         \
                }                                                                  \
                break;                                                             \
            }                                                                      \
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
    CPU_KERNEL static void both_##SUF(const mstate_##SUF *s, int pc, int jmp, int join,      \
                                      const int *merge, int nm, const T *cond, int m); \
    static void call_##SUF(const mstate_##SUF *s, const tl_mins *in_, int pc, const int *lanes, \
                           int m, bool full);                                      \
    /* Runs instructions [pc, end) for the given lanes. */                         \
    CPU_KERNEL static void exec_##SUF(const mstate_##SUF *s, int pc, int end, const int *lanes, int m, \
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
                /* gelu's form, and below clamp's bounds, fixed per loop: read   \
                 * per lane, GCC kept the branch in the loop and called the      \
                 * scalar erf lane by lane (15 to 30 times PyTorch's time) */    \
                if (in_->op == TL_OP_GELU && approx) {                             \
                    EACH_LANE(T v = A[l]; D[l] = TL_GELU(v, 1));                   \
                    break;                                                         \
                }                                                                  \
                if (in_->op == TL_OP_GELU) {                                       \
                    EACH_LANE(T v = A[l]; D[l] = TL_GELU(v, 0));                   \
                    break;                                                         \
                }                                                                  \
                switch (in_->op) { TL_UNARY_EXPRS(UN_LANES) }                      \
                break;                                                             \
            }                                                                      \
            case TL_M_BIN: {                                                       \
                int approx = in_->approx; /* gelu_grad (fused backward programs) */ \
                switch (in_->op) {                                                 \
                    TL_BINARY_EXPRS(BIN_LANES)                                     \
                case TL_OP_GELU_GRAD: /* the form fixed per loop */                 \
                    if (approx)                                                    \
                        EACH_LANE(T a = A[l], b = B[l]; D[l] = (T)(b * TL_GELU_GRAD(a, 1))); \
                    else                                                           \
                        EACH_LANE(T a = A[l], b = B[l]; D[l] = (T)(b * TL_GELU_GRAD(a, 0))); \
                    break;                                                         \
                }                                                                  \
                break;                                                             \
            }                                                                      \
            case TL_M_CLAMP: {                                                     \
                T lo = (T)in_->lo, hi = (T)in_->hi;                                \
                if (in_->has_lo && in_->has_hi) /* the bounds fixed per loop, as gelu's form */ \
                    EACH_LANE(T v = A[l]; D[l] = TL_CLAMP(v, lo, hi, true, true)); \
                else if (in_->has_lo)                                              \
                    EACH_LANE(T v = A[l]; D[l] = TL_CLAMP(v, lo, hi, true, false)); \
                else if (in_->has_hi)                                              \
                    EACH_LANE(T v = A[l]; D[l] = TL_CLAMP(v, lo, hi, false, true)); \
                else                                                               \
                    EACH_LANE(D[l] = A[l]);                                        \
                break;                                                             \
            }                                                                      \
            case TL_M_WHERE: EACH_LANE(D[l] = A[l] != 0 ? B[l] : C[l]); break;     \
            case TL_M_MOV: EACH_LANE(D[l] = A[l]); break;                          \
            case TL_M_JZ: { /* then: [pc+1, jmp), else: [imm, jmp target) */       \
                int split[2][LANES], n[2] = {0, 0};                                \
                EACH_LANE(int w = !(A[l] != 0); split[w][n[w]++] = l);             \
                int jmp = (int)in_->imm - 1, join = (int)p->ins[jmp].imm;          \
                int merge[MERGE_REGS], nm;                                         \
                if (full && n[0] && n[1] && s->k <= MERGE_TANGENTS &&              \
                    (nm = both_write(p, pc, jmp, join, merge)) >= 0) {             \
                    both_##SUF(s, pc, jmp, join, merge, nm, A, m);                 \
                    pc = join;                                                     \
                    continue;                                                      \
                }                                                                  \
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
            case TL_M_CALL: call_##SUF(s, in_, pc, lanes, m, full); break;         \
            }                                                                      \
            if (s->k && in_->code <= TL_M_MOV)                                     \
                tangents_##SUF(s, in_, lanes, m, full);                            \
            pc++;                                                                  \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* A map body over the lanes: its inputs from registers a.., its value     \
     * (or, with a cotangent, its gradients as map_grad computes them) into  \
     * dst..; its registers were set up with the job (constants, seeds). */   \
    static void call_##SUF(const mstate_##SUF *s, const tl_mins *in_, int pc, const int *lanes, \
                           int m, bool full)                                       \
    {                                                                              \
        const tl_mprog *q = in_->sub;                                              \
        int k = in_->b >= 0 ? __builtin_popcountll((unsigned long long)in_->imm) : 0; \
        T *qr = (T *)(s->calls + s->call_off[pc]);                                 \
        mstate_##SUF sub = {q, k, qr, k ? qr + (int64_t)q->nregs * LANES : NULL,   \
                            (int64_t *)(qr + (int64_t)q->nregs * (k + 1) * LANES), NULL, NULL}; \
        for (int i = 0; i < in_->c; i++) {                                         \
            const T *A = s->r + (int64_t)(in_->a + i) * LANES;                     \
            T *D = qr + (int64_t)q->in_reg[i] * LANES;                             \
            EACH_LANE(D[l] = A[l]);                                                \
        }                                                                          \
        exec_##SUF(&sub, 0, q->nins, lanes, m, full);                              \
        if (!k) {                                                                  \
            const T *R = qr + (int64_t)q->result * LANES;                          \
            T *D = s->r + (int64_t)in_->dst * LANES;                               \
            EACH_LANE(D[l] = R[l]);                                                \
            return;                                                                \
        }                                                                          \
        const T *G = s->r + in_->b * LANES;                                        \
        for (int j = 0; j < k; j++) {                                              \
            const T *tr = sub.tan + ((int64_t)q->result * k + j) * LANES;          \
            T *D = s->r + (int64_t)(in_->dst + j) * LANES;                         \
            EACH_LANE(D[l] = tr[l] != 0 ? G[l] * tr[l] : 0);                       \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* then over all lanes, its results kept; else over all lanes; the select */   \
    CPU_KERNEL static void both_##SUF(const mstate_##SUF *s, int pc, int jmp, int join,      \
                                      const int *merge, int nm, const T *cond, int m) \
    {                                                                              \
        const tl_mprog *p = s->p;                                                  \
        int k = s->k;                                                              \
        T kept[MERGE_REGS][LANES], kept_tan[MERGE_REGS][MERGE_TANGENTS][LANES];    \
        exec_##SUF(s, pc + 1, jmp, NULL, m, true);                                 \
        for (int q = 0; q < nm; q++) {                                             \
            memcpy(kept[q], s->r + (int64_t)merge[q] * LANES, sizeof(T) * (size_t)m); \
            for (int t = 0; t < k; t++)                                            \
                memcpy(kept_tan[q][t], s->tan + ((int64_t)merge[q] * k + t) * LANES, \
                       sizeof(T) * (size_t)m);                                     \
        }                                                                          \
        exec_##SUF(s, (int)p->ins[pc].imm, join, NULL, m, true);                   \
        for (int q = 0; q < nm; q++) {                                             \
            T *D = s->r + (int64_t)merge[q] * LANES;                               \
            for (int l = 0; l < m; l++)                                            \
                D[l] = cond[l] != 0 ? kept[q][l] : D[l];                           \
            for (int t = 0; t < k; t++) {                                          \
                T *td = s->tan + ((int64_t)merge[q] * k + t) * LANES;              \
                for (int l = 0; l < m; l++)                                        \
                    td[l] = cond[l] != 0 ? kept_tan[q][t][l] : td[l];              \
            }                                                                      \
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

/* One run of a program over `total` elements, cut into ranges that the
 * worker threads take (elements are independent: any cut gives the same
 * bits). */
typedef struct prog_job {
    const tl_mprog *p;
    bool f32;
    int k;            /* derivative mode: tangents per register (map_grad) */
    const bool *want; /* derivative mode: which inputs get one */
    int64_t total;
    int ndim;
    const int64_t *shape;
    int n;            /* inputs, into p->in_reg[0..n) */
    cpu_ins in;
    int *mode;
    int64_t *stride;  /* [n][TL_MAXDIM]: element strides over the output's axes */
    bool gather;
    const void *G;    /* derivative mode: the cotangent, total elements */
    int nout;         /* registers written out, total elements each */
    const int *out_reg;
    void *const *out; /* derivative mode: out[0] is [k, total] */
    int sum_reg;      /* >= 0: the register whose elements psum adds up */
    size_t scratch;   /* bytes of registers, tangents, counters, offsets, calls */
    size_t call_base;  /* where in the scratch the called bodies' registers start */
    size_t *call_off;  /* per instruction: its body's registers, from call_base */
    uint64_t id;      /* tells a thread's scratch whether it is set up for this job */
    _Atomic bool failed; /* a thread found no memory for its scratch */
} prog_job;

/* Each thread's registers, set up once per job (constants, seeds); freed
 * when the thread ends. */
typedef struct scratch {
    void *buf;
    size_t cap;
    uint64_t job;
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    scratch *s = p;
    free(s->buf);
    free(s);
}

static void scratch_init(void) { pthread_key_create(&scratch_key, scratch_free); }

#define LANES_BYTES(j) ((size_t)(j)->p->nregs * (size_t)((j)->k + 1) * LANES * ((j)->f32 ? 4 : 8))

#define DEFINE_SETUP(T, SUF)                                                       \
    static void setup_##SUF(const prog_job *j, T *r)                               \
    {                                                                              \
        const tl_mprog *p = j->p;                                                  \
        int k = j->k;                                                              \
        for (int i = 0; i < p->nconst; i++)                                        \
            for (int l = 0; l < LANES; l++)                                        \
                r[(int64_t)p->const_reg[i] * LANES + l] = (T)p->const_val[i];      \
        T *tan = r + (int64_t)p->nregs * LANES;                                    \
        for (int i = 0, q = 0; k && i < j->n; i++)                                 \
            if (j->want[i]) {                                                      \
                T *t = tan + ((int64_t)p->in_reg[i] * k + q++) * LANES;            \
                for (int l = 0; l < LANES; l++)                                    \
                    t[l] = 1;                                                      \
            }                                                                      \
        for (int pc = 0; j->call_off && pc < p->nins; pc++) { /* called bodies */  \
            const tl_mins *in_ = &p->ins[pc];                                      \
            if (in_->code != TL_M_CALL)                                            \
                continue;                                                          \
            const tl_mprog *q = in_->sub;                                          \
            int kk = in_->b >= 0 ? __builtin_popcountll((unsigned long long)in_->imm) : 0; \
            T *qr = (T *)((char *)r + j->call_base + j->call_off[pc]);             \
            for (int i = 0; i < q->nconst; i++)                                    \
                for (int l = 0; l < LANES; l++)                                    \
                    qr[(int64_t)q->const_reg[i] * LANES + l] = (T)q->const_val[i]; \
            T *qt = qr + (int64_t)q->nregs * LANES;                                \
            for (int i = 0, w = 0; kk && i < in_->c; i++)                          \
                if (in_->imm >> i & 1) {                                           \
                    T *t = qt + ((int64_t)q->in_reg[i] * kk + w++) * LANES;        \
                    for (int l = 0; l < LANES; l++)                                \
                        t[l] = 1;                                                  \
                }                                                                  \
        }                                                                          \
    }
DEFINE_SETUP(float, f)
DEFINE_SETUP(double, d)

/* This thread's scratch for job j, set up; NULL when memory is short. */
static void *scratch_for(const prog_job *j)
{
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s)))
            return NULL;
        if (pthread_setspecific(scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (s->cap < j->scratch) {
        void *b = realloc(s->buf, j->scratch);
        if (!b)
            return NULL;
        s->buf = b;
        s->cap = j->scratch;
        s->job = 0;
    }
    if (s->job != j->id) {
        memset(s->buf, 0, j->scratch);
        if (j->f32)
            setup_f(j, s->buf);
        else
            setup_d(j, s->buf);
        s->job = j->id;
    }
    return s->buf;
}

/* Elements [e0, e1) in blocks of LANES: inputs into registers, the
 * program, registers out.  Returns the last block's registers (for psum's
 * leaves, one block). */
#define DEFINE_RANGE(T, SUF)                                                       \
    CPU_KERNEL static void range_##SUF(const prog_job *j, void *buf, int64_t e0, int64_t e1) \
    {                                                                              \
        const tl_mprog *p = j->p;                                                  \
        int k = j->k, n = j->n;                                                    \
        int64_t *cnt = (int64_t *)((char *)buf + LANES_BYTES(j));                  \
        int64_t *off = cnt + p->ncounters, idx[TL_MAXDIM] = {0};                   \
        mstate_##SUF s = {p, k, buf, NULL, cnt, (char *)buf + j->call_base, j->call_off}; \
        s.tan = k ? s.r + (int64_t)p->nregs * LANES : NULL;                        \
        if (j->gather) { /* the offsets of element e0 */                           \
            int64_t rest = e0;                                                     \
            for (int d = j->ndim - 1; d >= 0; d--) {                               \
                idx[d] = rest % j->shape[d];                                       \
                rest /= j->shape[d];                                               \
            }                                                                      \
            for (int i = 0; i < n; i++) {                                          \
                off[i] = 0;                                                        \
                for (int d = 0; d < j->ndim; d++)                                  \
                    off[i] += idx[d] * j->stride[i * TL_MAXDIM + d];               \
            }                                                                      \
        }                                                                          \
        for (int64_t b0 = e0; b0 < e1; b0 += LANES) {                              \
            int m = e1 - b0 < LANES ? (int)(e1 - b0) : LANES;                      \
            for (int i = 0; i < n; i++) {                                          \
                const T *X = j->in[i]->data;                                       \
                T *R = s.r + (int64_t)p->in_reg[i] * LANES;                        \
                if (j->mode[i] == IN_SAME)                                         \
                    memcpy(R, X + b0, sizeof(T) * (size_t)m);                      \
                else if (j->mode[i] == IN_SCALAR)                                  \
                    for (int l = 0; l < m; l++)                                    \
                        R[l] = X[0];                                               \
            }                                                                      \
            for (int l = 0; j->gather && l < m; l++) {                             \
                for (int i = 0; i < n; i++)                                        \
                    if (j->mode[i] == IN_GATHER)                                   \
                        s.r[(int64_t)p->in_reg[i] * LANES + l] = ((const T *)j->in[i]->data)[off[i]]; \
                for (int d = j->ndim - 1; d >= 0; d--) { /* the next element */    \
                    for (int i = 0; i < n; i++)                                    \
                        off[i] += j->stride[i * TL_MAXDIM + d];                    \
                    if (++idx[d] < j->shape[d])                                    \
                        break;                                                     \
                    for (int i = 0; i < n; i++)                                    \
                        off[i] -= j->stride[i * TL_MAXDIM + d] * j->shape[d];      \
                    idx[d] = 0;                                                    \
                }                                                                  \
            }                                                                      \
            exec_##SUF(&s, 0, p->nins, NULL, m, true);                             \
            if (k) {                                                               \
                const T *G = j->G;                                                 \
                for (int q = 0; q < k; q++) {                                      \
                    const T *tr = s.tan + ((int64_t)p->result * k + q) * LANES;    \
                    T *yq = (T *)j->out[0] + q * j->total + b0;                    \
                    for (int l = 0; l < m; l++)                                    \
                        yq[l] = tr[l] != 0 ? G[b0 + l] * tr[l] : 0;                \
                }                                                                  \
                continue;                                                          \
            }                                                                      \
            for (int o = 0; o < j->nout; o++)                                      \
                memcpy((T *)j->out[o] + b0, s.r + (int64_t)j->out_reg[o] * LANES,  \
                       sizeof(T) * (size_t)m);                                     \
        }                                                                          \
    }                                                                              \
    /* psum's leaf: the block [lo, lo + n), n <= LANES, and its sum */             \
    static T leaf_##SUF(void *ctx, int64_t lo, int64_t n)                          \
    {                                                                              \
        prog_job *j = ctx;                                                         \
        T *r = scratch_for(j);                                                     \
        if (!r) {                                                                  \
            j->failed = true;                                                      \
            return 0;                                                              \
        }                                                                          \
        range_##SUF(j, r, lo, lo + n);                                             \
        return cpu_psum_leaf_##SUF(r + (int64_t)j->sum_reg * LANES, n);            \
    }
DEFINE_RANGE(float, f)
DEFINE_RANGE(double, d)

#define CHUNK (32 * LANES) /* elements per item of a parallel run */

static void chunk_item(void *ctx, int64_t item)
{
    prog_job *j = ctx;
    void *buf = scratch_for(j);
    int64_t e0 = item * CHUNK, e1 = e0 + CHUNK < j->total ? e0 + CHUNK : j->total;
    if (!buf) {
        j->failed = true;
        return;
    }
    if (j->f32)
        range_f(j, buf, e0, e1);
    else
        range_d(j, buf, e0, e1);
}

static uint64_t next_job_id(void)
{
    static _Atomic uint64_t ids;
    return ++ids;
}

/* Runs j over all its elements on the worker threads; with a sum register,
 * *sum gets psum's sum of it. */
#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static tl_code run_job(prog_job *j, void *sum, tl_status *st)
{
    j->id = next_job_id();
    j->call_base = ALIGN64(LANES_BYTES(j) + sizeof(int64_t) * (size_t)(j->p->ncounters + j->n + 1));
    j->scratch = j->call_base;
    j->call_off = NULL;
    size_t es = j->f32 ? 4 : 8;
    for (int pc = 0; pc < j->p->nins; pc++) { /* room for each called body */
        const tl_mins *in = &j->p->ins[pc];
        if (in->code != TL_M_CALL)
            continue;
        if (!j->call_off && !(j->call_off = tl_calloc((size_t)j->p->nins, sizeof(size_t), "map registers", st)))
            return st->code;
        int k = in->b >= 0 ? __builtin_popcountll((unsigned long long)in->imm) : 0;
        j->call_off[pc] = j->scratch - j->call_base;
        j->scratch += ALIGN64((size_t)in->sub->nregs * (size_t)(k + 1) * LANES * es +
                              sizeof(int64_t) * (size_t)(in->sub->ncounters + 1));
    }
    int64_t items = (j->total + CHUNK - 1) / CHUNK;
    int threads = j->total >= 2 * CHUNK ? cpu_nthreads() : 1;
    j->failed = false;
    if (j->sum_reg >= 0) {
        if (j->f32)
            *(float *)sum = cpu_psum_tree_f(leaf_f, j, j->total, threads);
        else
            *(double *)sum = cpu_psum_tree_d(leaf_d, j, j->total, threads);
    } else {
        cpu_parallel(items, threads, chunk_item, j);
    }
    free(j->call_off);
    j->call_off = NULL;
    if (j->failed)
        return tl_fail(st, TL_ERUNTIME, "out of memory for map registers (%zu bytes)", j->scratch);
    return TL_OK;
}

/* Reading plans of the inputs over an output of `shape`. */
static tl_code plan_inputs(prog_job *j, tl_status *st)
{
    int n = j->n;
    j->mode = tl_calloc((size_t)n + 1, sizeof(int) + sizeof(int64_t) * TL_MAXDIM, "map offsets", st);
    if (!j->mode)
        return st->code;
    j->stride = (int64_t *)(j->mode + n + 1 + (n + 1) % 2); /* 8-byte aligned */
    j->gather = false;
    for (int i = 0; i < n; i++) {
        const tl_tensor *t = j->in[i];
        int64_t s[TL_MAXDIM];
        cpu_strides(t->ndim, t->shape, s);
        for (int d = 0; d < j->ndim; d++) {
            int id = d - (j->ndim - t->ndim);
            j->stride[i * TL_MAXDIM + d] = id < 0 || t->shape[id] == 1 ? 0 : s[id];
        }
        j->mode[i] = t->numel == j->total ? IN_SAME : t->numel == 1 ? IN_SCALAR : IN_GATHER;
        j->gather = j->gather || j->mode[i] == IN_GATHER;
    }
    return TL_OK;
}

tl_code cpu_map(tl_opcode op, int nin, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                tl_status *st)
{
    const tl_mprog *p = a->prog;
    bool grad = op == TL_OP_MAP_GRAD;
    int n = grad ? nin - 1 : nin, k = 0;
    for (int i = 0; grad && i < n; i++)
        k += a->want[i];
    prog_job j = {.p = p, .f32 = out->dtype == TL_F32, .k = k, .want = a->want, .n = n, .in = in,
                  .ndim = grad ? out->ndim - 1 : out->ndim,
                  .shape = grad ? out->shape + 1 : out->shape,
                  .G = grad ? in[n]->data : NULL, .nout = 1, .out_reg = &p->result,
                  .out = &out->data, .sum_reg = -1};
    j.total = 1;
    for (int d = 0; d < j.ndim; d++)
        j.total *= j.shape[d];
    if (j.total == 0 || (grad && k == 0))
        return TL_OK;
    if (plan_inputs(&j, st))
        return st->code;
    tl_code rc = run_job(&j, NULL, st);
    free(j.mode);
    return rc;
}

tl_code cpu_prog_run(const tl_mprog *p, tl_dtype dt, int ndim, const int64_t *shape, int nin,
                     cpu_ins in, int nout, const int *out_reg, tl_tensor *const *out,
                     int sum_reg, tl_tensor *sum, tl_status *st)
{
    void *outs_small[8], **outs = nout <= 8 ? outs_small : tl_malloc((size_t)nout, sizeof(void *), "outputs", st);
    if (!outs)
        return st->code;
    for (int o = 0; o < nout; o++)
        outs[o] = out[o]->data;
    prog_job j = {.p = p, .f32 = dt == TL_F32, .n = nin, .in = in, .ndim = ndim, .shape = shape,
                  .nout = nout, .out_reg = out_reg, .out = outs, .sum_reg = sum_reg};
    j.total = 1;
    for (int d = 0; d < ndim; d++)
        j.total *= shape[d];
    tl_code rc = TL_OK;
    if (j.total == 0) {
        if (sum)
            tl_tensor_set(sum, 0, 0);
    } else if (!(rc = plan_inputs(&j, st))) {
        rc = run_job(&j, sum ? sum->data : NULL, st);
        free(j.mode);
    }
    if (outs != outs_small)
        free(outs);
    return rc;
}
