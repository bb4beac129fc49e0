/* CPU kernels of pooling (nn.md): max_pool, avg_pool and their backward
 * kernels max_pool_grad(x, g) and avg_pool_grad(g).  Every shape is seen
 * as 3 spatial axes (leading ones of size 1).  The work is cut into items
 * of whole [N*C] planes, a number that depends on the shapes alone; each
 * plane is computed by one thread in one order, so the bits never depend
 * on the thread count.
 *
 * Within a plane, one output row (od, oh) at a time: for every element of
 * the window in row-major order (kd, kh, kw), an inner loop over the
 * output positions ow updates each output, so each output sees its
 * window's elements in row-major order (the order PyTorch's kernels use):
 * max keeps the first maximum (a later element replaces it only when
 * greater, or NaN: so a NaN wins, the last of several), avg adds in that
 * order from 0.  Padded positions are skipped: they never win a max and
 * add nothing to a sum. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "threads.h"

typedef struct geom {
    int64_t in[3], out[3], k[3], s[3], dl[3], lo[3], hi[3];
    int64_t planes, isz, osz; /* N*C; elements of an input and an output plane */
} geom;

typedef struct pjob {
    tl_opcode op;
    geom G;
    const void *x, *g; /* max_pool_grad: x and g; avg_pool_grad: g in g */
    void *out;
    const int64_t *cnt[3]; /* avg: each output position's counted window length, per axis */
    int64_t *wa, *wb, *woff; /* per kw: the outputs [wa, wb) it serves, its offset from ow*s */
    int64_t per_item;      /* planes per item */
    bool f32;
    /* the padded path (plane_padded): the plane copied into a block of
     * pd x ph x pw with its padding (and every position a window reaches
     * past it) filled, output rows computed owr (a multiple of BLOCK) at a
     * time; first[0..2] the padded index along each axis of each output
     * position's first window element inside the input, -1 where none,
     * and first[3] that of the last axis as a place in its row's phases */
    bool padded;
    int64_t pd, ph, pw, owr;
    int64_t *first[4];
    /* one output a plane, dilation 1 along the last axis (global pooling):
     * its window as nseg runs of the plane, seg[2i] long from seg[2i+1] */
    bool global;
    int64_t nseg, *seg;
    atomic_int oom;
} pjob;

/* x's (for the *_grad kernels: the input's) spatial axes and the output's,
 * as 3 axes. */
static void geom_init(geom *G, const int64_t *ishape, const int64_t *oshape, int ndim,
                      const tl_attrs *a)
{
    int d = ndim - 2;
    for (int j = 0; j < 3; j++) {
        G->in[j] = G->out[j] = G->k[j] = G->s[j] = G->dl[j] = 1;
        G->lo[j] = G->hi[j] = 0;
    }
    for (int i = 0, j = 3 - d; i < d; i++, j++) {
        G->in[j] = ishape[2 + i], G->out[j] = oshape[2 + i], G->k[j] = a->kernel[i];
        G->s[j] = a->stride[i], G->dl[j] = a->dilation[i], G->lo[j] = a->pad_lo[i], G->hi[j] = a->pad_hi[i];
    }
    G->planes = ishape[0] * ishape[1];
    G->isz = G->in[0] * G->in[1] * G->in[2];
    G->osz = G->out[0] * G->out[1] * G->out[2];
}

/* The outputs ow in [*a, *b) whose window element kw lies inside the
 * input along the last axis; returns its offset from ow*s. */
static inline int64_t w_range(const geom *G, int64_t kw, int64_t *a, int64_t *b)
{
    int64_t off = kw * G->dl[2] - G->lo[2], s = G->s[2], last = G->in[2] - 1 - off;
    *a = off < 0 ? (-off + s - 1) / s : 0;
    *b = last < 0 ? 0 : last / s + 1 < G->out[2] ? last / s + 1 : G->out[2];
    return off;
}

/* The inner loops, with the stride along the last axis a constant where
 * it is 1 or 2 (so that they vectorise). */
#define ALWAYS static inline __attribute__((always_inline))
#define STRIDED(call, s) ((s) == 1 ? call(1) : (s) == 2 ? call(2) : call(s))

#define DEFINE_POOL(T, SUF, I)                                                                    \
    ALWAYS void max_row_##SUF(T *restrict m, const T *restrict row, int64_t off, int64_t a, int64_t b, int64_t s) \
    {                                                                                          \
        for (int64_t ow = a; ow < b; ow++) {                                                   \
            T v = row[ow * s + off], c = m[ow];                                                \
            m[ow] = v > c || v != v ? v : c;                                                   \
        }                                                                                      \
    }                                                                                          \
    ALWAYS void arg_row_##SUF(T *restrict m, I *restrict at, const T *restrict row, int64_t base, \
                              int64_t off, int64_t a, int64_t b, int64_t s)                                 \
    {                                                                                          \
        for (int64_t ow = a; ow < b; ow++) {                                                   \
            T v = row[ow * s + off], c = m[ow];                                                \
            bool take = v > c || v != v || at[ow] < 0;                                         \
            m[ow] = take ? v : c;                                                              \
            at[ow] = take ? (I)(base + ow * s + off) : at[ow];                                            \
        }                                                                                      \
    }                                                                                          \
    ALWAYS void sum_row_##SUF(T *restrict acc, const T *restrict row, int64_t off, int64_t a, int64_t b, int64_t s) \
    {                                                                                          \
        for (int64_t ow = a; ow < b; ow++)                                                     \
            acc[ow] += row[ow * s + off];                                                          \
    }                                                                                          \
    ALWAYS void spread_row_##SUF(T *restrict row, const T *restrict q, int64_t off, int64_t a, int64_t b, int64_t s) \
    {                                                                                          \
        for (int64_t ow = a; ow < b; ow++)                                                     \
            row[ow * s + off] += q[ow];                                                            \
    }                                                                                          \
    /* every window element (kd, kh, kw) of output row (od, oh) inside the \
     * input: BODY with `row` (its input row, offset by kw), `ri` (that  \
     * row's index in the plane), [a, b) the outputs it serves */          \
    CPU_KERNEL static void plane_##SUF(const pjob *j, int64_t p, T *scratch, I *at)      \
    {                                                                                          \
        const geom *G = &j->G;                                                                 \
        int64_t OW = G->out[2], s = G->s[2];                                                   \
        const T *x = j->x ? (const T *)j->x + p * G->isz : NULL;                               \
        bool pick = j->op == TL_OP_MAX_POOL_PICK; /* g: v, of x's shape */                   \
        const T *g = j->g ? (const T *)j->g + p * (pick ? G->isz : G->osz) : NULL;             \
        T *out = (T *)j->out;                                                                  \
        bool fwd = j->op == TL_OP_MAX_POOL || j->op == TL_OP_AVG_POOL || pick;                 \
        /* max_pool_grad: every window's argmax first, then dx: out may be x's \
         * own memory (written over, tl_op_over), each plane read whole first */ \
        bool two = j->op == TL_OP_MAX_POOL_GRAD;                                               \
        if (fwd)                                                                               \
            out += p * G->osz;                                                                 \
        else if (two)                                                                          \
            out += p * G->isz;                                                                 \
        else                                                                                   \
            out += p * G->isz, memset(out, 0, sizeof(T) * (size_t)G->isz);                     \
        for (int64_t od = 0; od < G->out[0]; od++)                                             \
            for (int64_t oh = 0; oh < G->out[1]; oh++) {                                       \
                int64_t orow = (od * G->out[1] + oh) * OW;                                     \
                T *m = fwd && !pick ? out + orow : scratch;                                    \
                I *rat = two ? at + orow : at; /* the row's argmaxes */                         \
                if (j->op == TL_OP_AVG_POOL_GRAD)                                              \
                    for (int64_t ow = 0; ow < OW; ow++)                                        \
                        m[ow] = g[orow + ow] / (T)(j->cnt[0][od] * j->cnt[1][oh] * j->cnt[2][ow]); \
                else                                                                           \
                    for (int64_t ow = 0; ow < OW; ow++)                                        \
                        m[ow] = j->op == TL_OP_AVG_POOL ? 0 : (T)-INFINITY;                    \
                if (j->op == TL_OP_MAX_POOL_GRAD || pick)                                      \
                    for (int64_t ow = 0; ow < OW; ow++)                                        \
                        rat[ow] = -1;                                                          \
                for (int64_t kd = 0; kd < G->k[0]; kd++) {                                     \
                    int64_t id = od * G->s[0] - G->lo[0] + kd * G->dl[0];                      \
                    if (id < 0 || id >= G->in[0])                                              \
                        continue;                                                              \
                    for (int64_t kh = 0; kh < G->k[1]; kh++) {                                 \
                        int64_t ih = oh * G->s[1] - G->lo[1] + kh * G->dl[1];                  \
                        if (ih < 0 || ih >= G->in[1])                                          \
                            continue;                                                          \
                        int64_t ri = (id * G->in[1] + ih) * G->in[2];                          \
                        for (int64_t kw = 0; kw < G->k[2]; kw++) {                             \
                            int64_t a = j->wa[kw], b = j->wb[kw], off = j->woff[kw];           \
                            switch (j->op) {                                                   \
                            case TL_OP_MAX_POOL:                                               \
                                STRIDED(MAXC_##SUF, s);                                        \
                                break;                                                         \
                            case TL_OP_AVG_POOL:                                               \
                                STRIDED(SUMC_##SUF, s);                                        \
                                break;                                                         \
                            case TL_OP_MAX_POOL_GRAD:                                          \
                            case TL_OP_MAX_POOL_PICK:                                          \
                                STRIDED(ARGC_##SUF, s);                                        \
                                break;                                                         \
                            default:                                                           \
                                STRIDED(SPREADC_##SUF, s);                                     \
                            }                                                                  \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
                if (j->op == TL_OP_AVG_POOL)                                                   \
                    for (int64_t ow = 0; ow < OW; ow++)                                        \
                        m[ow] /= (T)(j->cnt[0][od] * j->cnt[1][oh] * j->cnt[2][ow]);           \
                if (pick)                                                                      \
                    for (int64_t ow = 0; ow < OW; ow++)                                        \
                        out[orow + ow] = at[ow] >= 0 ? g[at[ow]] : 0;                          \
            }                                                                                  \
        if (two) { /* all of g to each window's argmax, in window order */                    \
            memset(out, 0, sizeof(T) * (size_t)G->isz);                                        \
            for (int64_t o = 0; o < G->osz; o++)                                               \
                if (at[o] >= 0)                                                                \
                    out[at[o]] += g[o];                                                        \
        }                                                                                      \
    }

/* The padded path of max_pool and max_pool_grad: a plane's rows whole,
 * with no bounds and no strides.  The plane is copied into a block whose
 * padding (and every position a window reaches past it) holds -inf, never
 * greater than what a window has seen, so never taken; each padded row of
 * pw positions is stored as its s phases along the last axis (positions
 * q, q + s, q + 2s, ... for q < s, each phase pw/s long), so that window
 * element kw of outputs 0, 1, 2, ... is one contiguous run of a phase.
 * Each output row is computed owr outputs at a time (a multiple of BLOCK,
 * however many the row has), one window element after another:
 * unit-stride loops of a length the vector width divides, where the
 * bounded path's strided loads and short remainders (the 56-wide rows of
 * a 3x3, stride 2 pool) ran mostly in scalar code.  The benchmark's pool
 * (8x64x112x112 f32, one thread): max_pool 8.2 -> 4.3 ms, max_pool_grad
 * 11.0 -> 8.1.  Each output still sees its window's elements in row-major
 * order, so every bit is the bounded path's: max_pool_grad's argmax
 * starts at the window's first element inside the input (which the
 * bounded path takes first), and a later one replaces it only when
 * greater, or NaN.  avg_pool keeps the bounded path, which was the faster
 * there (2.8 ms against 3.8: its sums need no comparisons to amortise the
 * copy). */
#define BLOCK 16
#define PADDED_MAX ((int64_t)1 << 20) /* elements of a padded plane: the scratch of an item */

#define DEFINE_PADDED(T, SUF, I)                                                                \
    /* x's row (W elements) into the phases of padded row dst */                               \
    ALWAYS void phase_row_##SUF(T *restrict dst, const T *restrict x, int64_t W, int64_t lo,    \
                                int64_t len, int64_t s)                                        \
    {                                                                                          \
        for (int64_t q = 0; q < s; q++) {                                                      \
            int64_t i0 = lo > q ? (lo - q + s - 1) / s : 0, i1 = (W + lo - q + s - 1) / s;     \
            T *d = dst + q * len;                                                              \
            const T *src = x + q - lo;                                                         \
            for (int64_t i = i0; i < i1; i++)                                                  \
                d[i] = src[i * s];                                                             \
        }                                                                                      \
    }                                                                                          \
    CPU_KERNEL static void plane_padded_##SUF(const pjob *j, int64_t p, T *P, T *m, I *at)       \
    {                                                                                          \
        const geom *G = &j->G;                                                                 \
        int64_t ph = j->ph, pw = j->pw, owr = j->owr, OW = G->out[2], s2 = G->s[2];           \
        int64_t len = pw / s2, rows = j->pd * ph;                                              \
        bool grad = j->op == TL_OP_MAX_POOL_GRAD;                                              \
        const T *x = (const T *)j->x + p * G->isz;                                             \
        for (int64_t i = 0; i < rows * pw; i++)                                                \
            P[i] = (T)-INFINITY;                                                               \
        for (int64_t d = 0; d < G->in[0]; d++)                                                 \
            for (int64_t h = 0; h < G->in[1]; h++) {                                           \
                T *dst = P + ((d + G->lo[0]) * ph + h + G->lo[1]) * pw;                        \
                const T *src = x + (d * G->in[1] + h) * G->in[2];                              \
                if (s2 == 1)                                                                   \
                    memcpy(dst + G->lo[2], src, sizeof(T) * (size_t)G->in[2]);                 \
                else if (s2 == 2)                                                              \
                    phase_row_##SUF(dst, src, G->in[2], G->lo[2], len, 2);                     \
                else                                                                           \
                    phase_row_##SUF(dst, src, G->in[2], G->lo[2], len, s2);                    \
            }                                                                                  \
        T *out = (T *)j->out + p * (grad ? G->isz : G->osz);                                   \
        for (int64_t od = 0; od < G->out[0]; od++)                                             \
            for (int64_t oh = 0; oh < G->out[1]; oh++) {                                       \
                int64_t orow = (od * G->out[1] + oh) * OW;                                     \
                I *rat = grad ? at + (od * G->out[1] + oh) * owr : at;                         \
                if (grad) {                                                                    \
                    int64_t fd = j->first[0][od], fh = j->first[1][oh];                        \
                    int64_t row = (fd * ph + fh) * pw;                                         \
                    for (int64_t ow = 0; ow < owr; ow++) {                                     \
                        int64_t fw = ow < OW ? j->first[2][ow] : -1;                           \
                        bool none = fd < 0 || fh < 0 || fw < 0;                                \
                        rat[ow] = none ? -1 : (I)(row + fw);                                   \
                        m[ow] = none ? (T)-INFINITY : P[row + j->first[3][ow]];                \
                    }                                                                          \
                } else                                                                         \
                    for (int64_t ow = 0; ow < owr; ow++)                                       \
                        m[ow] = (T)-INFINITY;                                                  \
                for (int64_t kd = 0; kd < G->k[0]; kd++)                                       \
                    for (int64_t kh = 0; kh < G->k[1]; kh++) {                                 \
                        int64_t row = ((od * G->s[0] + kd * G->dl[0]) * ph + oh * G->s[1] + kh * G->dl[1]) * pw; \
                        for (int64_t kw = 0; kw < G->k[2]; kw++) {                             \
                            int64_t c = kw * G->dl[2], base = row + c;                         \
                            const T *restrict r = P + row + c % s2 * len + c / s2;             \
                            if (!grad)                                                         \
                                for (int64_t ow = 0; ow < owr; ow++) {                         \
                                    T v = r[ow], cur = m[ow];                                  \
                                    m[ow] = v > cur || v != v ? v : cur;                       \
                                }                                                              \
                            else                                                               \
                                for (I ow = 0; ow < (I)owr; ow++) { /* I: the plane's size */  \
                                    T v = r[ow], cur = m[ow];                                  \
                                    bool take = v > cur || v != v;                             \
                                    m[ow] = take ? v : cur;                                    \
                                    rat[ow] = take ? (I)base + ow * (I)s2 : rat[ow];           \
                                }                                                              \
                        }                                                                      \
                    }                                                                          \
                if (!grad)                                                                     \
                    memcpy(out + orow, m, sizeof(T) * (size_t)OW);                             \
            }                                                                                  \
        if (!grad)                                                                             \
            return;                                                                            \
        /* all of g to each window's argmax (a position of the padded plane \
         * in plain row order), in window order, in the block (x's copy no  \
         * longer needed), then its inside to dx */                         \
        const T *g = (const T *)j->g + p * G->osz;                                             \
        memset(P, 0, sizeof(T) * (size_t)(rows * pw));                                         \
        for (int64_t orow = 0; orow < G->out[0] * G->out[1]; orow++)                           \
            for (int64_t ow = 0; ow < OW; ow++)                                                \
                if (at[orow * owr + ow] >= 0)                                                  \
                    P[at[orow * owr + ow]] += g[orow * OW + ow];                               \
        for (int64_t d = 0; d < G->in[0]; d++)                                                 \
            for (int64_t h = 0; h < G->in[1]; h++)                                             \
                memcpy(out + (d * G->in[1] + h) * G->in[2],                                    \
                       P + ((d + G->lo[0]) * ph + h + G->lo[1]) * pw + G->lo[2], sizeof(T) * (size_t)G->in[2]); \
    }

DEFINE_PADDED(float, f, int32_t)
DEFINE_PADDED(double, d, int32_t)

#define MAXC_f(S) max_row_f(m, x + ri, off, a, b, S)
#define MAXC_fl(S) max_row_fl(m, x + ri, off, a, b, S)
#define MAXC_d(S) max_row_d(m, x + ri, off, a, b, S)
#define SUMC_f(S) sum_row_f(m, x + ri, off, a, b, S)
#define SUMC_fl(S) sum_row_fl(m, x + ri, off, a, b, S)
#define SUMC_d(S) sum_row_d(m, x + ri, off, a, b, S)
#define ARGC_f(S) arg_row_f(m, rat, x + ri, ri, off, a, b, S)
#define ARGC_fl(S) arg_row_fl(m, rat, x + ri, ri, off, a, b, S)
#define ARGC_d(S) arg_row_d(m, rat, x + ri, ri, off, a, b, S)
#define SPREADC_f(S) spread_row_f(out + ri, m, off, a, b, S)
#define SPREADC_fl(S) spread_row_fl(out + ri, m, off, a, b, S)
#define SPREADC_d(S) spread_row_d(out + ri, m, off, a, b, S)

/* the argmax as a plane index: 32 bits where a plane has fewer than 2**31
 * elements (they vectorise with the f32 comparisons), else 64 */
DEFINE_POOL(float, f, int32_t)
DEFINE_POOL(double, d, int64_t)
DEFINE_POOL(float, fl, int64_t)

static void pool_item_padded(pjob *j, int64_t item)
{
    const geom *G = &j->G;
    size_t es = j->f32 ? sizeof(float) : sizeof(double), block = (size_t)(j->pd * j->ph * j->pw);
    size_t nat = j->op == TL_OP_MAX_POOL_GRAD ? (size_t)(G->out[0] * G->out[1] * j->owr) : 0;
    /* each part at a cache line's start: the row of outputs m is stored and
     * loaded again at once, and a store across two lines is not forwarded
     * to the load (loops over a misaligned m ran at half speed) */
    size_t mb = (es * block + 63) & ~(size_t)63, ab = (es * (size_t)j->owr + 63) & ~(size_t)63;
    void *mem = malloc(mb + ab + sizeof(int32_t) * nat + 64);
    if (!mem) {
        atomic_store(&j->oom, 1);
        return;
    }
    char *P = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    char *m = P + mb;
    int32_t *at = nat ? (int32_t *)(m + ab) : NULL;
    int64_t p0 = item * j->per_item, p1 = p0 + j->per_item < G->planes ? p0 + j->per_item : G->planes;
    for (int64_t p = p0; p < p1; p++)
        if (j->f32)
            plane_padded_f(j, p, (float *)P, (float *)m, at);
        else
            plane_padded_d(j, p, (double *)P, (double *)m, at);
    free(mem);
}

/* Global pooling (one output a plane): the window's runs one after
 * another, each in the row-major order the other paths take, where they
 * spent a pass of their loops (and the padded path a block of outputs)
 * on every window element.  max: the fold's extreme and NaN flag found in
 * any order (cpu_ext_scan), then the fold's pick looked up in order (the
 * last NaN where there is one, else the first element equal to the
 * extreme), so the value, and the argmax of max_pool_grad and
 * max_pool_pick, are the fold's.  avg: each plane's running sum from 0,
 * GLOBAL_LANES planes at once so that their chains of additions overlap.
 * The same bits as the other paths. */
#define GLOBAL_LANES 8
#define DEFINE_GLOBAL(T, SUF)                                                                   \
    /* the fold's pick over the window of plane x: its index, -1 for none */                   \
    static int64_t global_pick_##SUF(const pjob *j, const T *x)                                \
    {                                                                                          \
        const int64_t *seg = j->seg;                                                           \
        T e = (T)-INFINITY;                                                                    \
        bool nan = false, any;                                                                 \
        for (int64_t i = 0; i < j->nseg; i++) {                                                \
            T v = cpu_ext_scan_##SUF(x + seg[2 * i + 1], seg[2 * i], true, &any);              \
            e = v > e ? v : e;                                                                 \
            nan = nan || any;                                                                  \
        }                                                                                      \
        for (int64_t i = nan ? j->nseg - 1 : -1; i >= 0; i--)                                 \
            for (int64_t k = seg[2 * i + 1] + seg[2 * i] - 1; k >= seg[2 * i + 1]; k--)        \
                if (x[k] != x[k])                                                              \
                    return k;                                                                  \
        for (int64_t i = 0; i < j->nseg; i++)                                                  \
            for (int64_t k = seg[2 * i + 1]; k < seg[2 * i + 1] + seg[2 * i]; k++)             \
                if (x[k] == e)                                                                 \
                    return k;                                                                  \
        return -1;                                                                             \
    }                                                                                          \
    CPU_KERNEL static void global_##SUF(const pjob *j, int64_t p0, int64_t p1)                 \
    {                                                                                          \
        const geom *G = &j->G;                                                                 \
        const T *x = j->x, *g = j->g;                                                          \
        T *out = j->out;                                                                       \
        const int64_t *seg = j->seg, isz = G->isz;                                             \
        if (j->op == TL_OP_AVG_POOL) {                                                         \
            T cnt = (T)(j->cnt[0][0] * j->cnt[1][0] * j->cnt[2][0]);                           \
            for (int64_t p = p0; p < p1; p += GLOBAL_LANES) {                                  \
                int nl = p1 - p < GLOBAL_LANES ? (int)(p1 - p) : GLOBAL_LANES;                 \
                T acc[GLOBAL_LANES] = {0};                                                     \
                const T *xp = x + p * isz;                                                     \
                for (int64_t i = 0; i < j->nseg; i++)                                          \
                    for (int64_t k = seg[2 * i + 1]; k < seg[2 * i + 1] + seg[2 * i]; k++)     \
                        if (nl == GLOBAL_LANES)                                                \
                            for (int l = 0; l < GLOBAL_LANES; l++)                             \
                                acc[l] += xp[l * isz + k];                                     \
                        else                                                                   \
                            for (int l = 0; l < nl; l++)                                       \
                                acc[l] += xp[l * isz + k];                                     \
                for (int l = 0; l < nl; l++)                                                   \
                    out[p + l] = acc[l] / cnt;                                                 \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        for (int64_t p = p0; p < p1; p++) {                                                    \
            if (j->op == TL_OP_AVG_POOL_GRAD) { /* the window's elements: 0 + g / count */     \
                T m = g[p] / (T)(j->cnt[0][0] * j->cnt[1][0] * j->cnt[2][0]), *o = out + p * isz; \
                memset(o, 0, sizeof(T) * (size_t)isz);                                         \
                for (int64_t i = 0; i < j->nseg; i++)                                          \
                    for (int64_t k = seg[2 * i + 1]; k < seg[2 * i + 1] + seg[2 * i]; k++)     \
                        o[k] += m;                                                             \
                continue;                                                                      \
            }                                                                                  \
            const T *xp = x + p * isz;                                                         \
            int64_t at = global_pick_##SUF(j, xp);                                             \
            switch (j->op) {                                                                   \
            case TL_OP_MAX_POOL:                                                               \
                out[p] = at >= 0 ? xp[at] : (T)-INFINITY;                                      \
                break;                                                                         \
            case TL_OP_MAX_POOL_PICK: /* g: v, of x's shape */                                 \
                out[p] = at >= 0 ? g[p * isz + at] : 0;                                        \
                break;                                                                         \
            default: /* max_pool_grad; out may be x's own memory, read above */               \
                memset(out + p * isz, 0, sizeof(T) * (size_t)isz);                             \
                if (at >= 0)                                                                   \
                    out[p * isz + at] += g[p];                                                 \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_GLOBAL(float, f)
DEFINE_GLOBAL(double, d)

static void pool_item(void *ctx, int64_t item)
{
    pjob *j = ctx;
    if (j->global) {
        int64_t p0 = item * j->per_item, p1 = p0 + j->per_item < j->G.planes ? p0 + j->per_item : j->G.planes;
        if (j->f32)
            global_f(j, p0, p1);
        else
            global_d(j, p0, p1);
        return;
    }
    if (j->padded) {
        pool_item_padded(j, item);
        return;
    }
    int64_t OW = j->G.out[2], nat = j->op == TL_OP_MAX_POOL_GRAD ? j->G.osz : OW; /* argmaxes kept */
    void *mem = malloc((size_t)OW * sizeof(double) + (size_t)nat * sizeof(int64_t) + 1);
    if (!mem) {
        atomic_store(&j->oom, 1);
        return;
    }
    int64_t *at = mem, p0 = item * j->per_item;
    int64_t p1 = p0 + j->per_item < j->G.planes ? p0 + j->per_item : j->G.planes;
    for (int64_t p = p0; p < p1; p++)
        if (!j->f32)
            plane_d(j, p, (double *)(at + nat), at);
        else if (j->G.isz <= INT32_MAX)
            plane_f(j, p, (float *)(at + nat), (int32_t *)at);
        else
            plane_fl(j, p, (float *)(at + nat), at);
    free(mem);
}

/* avg: the window length each output position counts along one axis:
 * clipped to the padded input with count_include_pad, else to the input. */
static void counts(int64_t *c, int64_t n, int64_t S, int64_t K, int64_t s, int64_t lo, int64_t hi, bool pad)
{
    for (int64_t o = 0; o < n; o++) {
        int64_t a = o * s - lo, b = a + K < S + hi ? a + K : S + hi;
        if (!pad) {
            a = a < 0 ? 0 : a;
            b = b < S ? b : S;
        }
        c[o] = b - a;
    }
}

tl_code cpu_pool(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    (void)n;
    bool grad = op == TL_OP_MAX_POOL_GRAD || op == TL_OP_AVG_POOL_GRAD;
    const tl_tensor *x = op == TL_OP_AVG_POOL_GRAD ? NULL : in[0];
    const tl_tensor *g = op == TL_OP_MAX_POOL_GRAD || op == TL_OP_MAX_POOL_PICK ? in[1]
                       : op == TL_OP_AVG_POOL_GRAD                               ? in[0]
                                                                                 : NULL;
    pjob j = {.op = op, .x = x ? x->data : NULL, .g = g ? g->data : NULL, .out = out->data,
              .f32 = out->dtype == TL_F32};
    atomic_init(&j.oom, 0);
    const tl_tensor *src = grad ? out : x, *dst = grad ? g : out;
    geom_init(&j.G, src->shape, dst->shape, src->ndim, a);
    int64_t K2 = j.G.k[2], *cnt = malloc(sizeof *cnt * (size_t)(j.G.out[0] + j.G.out[1] + j.G.out[2] + 3 * K2));
    if (!cnt)
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's windows", tl_ops[op].name);
    j.wa = cnt + j.G.out[0] + j.G.out[1] + j.G.out[2], j.wb = j.wa + K2, j.woff = j.wb + K2;
    for (int64_t kw = 0; kw < K2; kw++)
        j.woff[kw] = w_range(&j.G, kw, &j.wa[kw], &j.wb[kw]);
    if (op == TL_OP_AVG_POOL || op == TL_OP_AVG_POOL_GRAD) {
        for (int64_t k = 0, at = 0; k < 3; at += j.G.out[k], k++) {
            j.cnt[k] = cnt + at;
            counts(cnt + at, j.G.out[k], j.G.in[k], j.G.k[k], j.G.s[k], j.G.lo[k], j.G.hi[k],
                   a->count_include_pad);
        }
    }
    int64_t *first = NULL, *seg = NULL;
    if (j.G.planes > 0 && j.G.osz == 1 && j.G.dl[2] == 1 &&
        (seg = malloc(sizeof *seg * (size_t)(2 * j.G.k[0] * j.G.k[1])))) {
        j.global = true, j.seg = seg;
        int64_t w0 = j.G.lo[2] < 0 ? -j.G.lo[2] : 0; /* the window's part of a row, [w0, w1) */
        int64_t w1 = j.G.k[2] - j.G.lo[2] < j.G.in[2] ? j.G.k[2] - j.G.lo[2] : j.G.in[2];
        for (int64_t kd = 0; kd < j.G.k[0] && w1 > w0; kd++) {
            int64_t id = -j.G.lo[0] + kd * j.G.dl[0];
            for (int64_t kh = 0; kh < j.G.k[1] && id >= 0 && id < j.G.in[0]; kh++) {
                int64_t ih = -j.G.lo[1] + kh * j.G.dl[1];
                if (ih >= 0 && ih < j.G.in[1])
                    seg[2 * j.nseg] = w1 - w0, seg[2 * j.nseg++ + 1] = (id * j.G.in[1] + ih) * j.G.in[2] + w0;
            }
        }
    } else if (j.G.planes > 0 && j.G.osz > 0 &&
        (op == TL_OP_MAX_POOL || op == TL_OP_MAX_POOL_GRAD)) {
        /* the padded path, where a padded plane is of a size to copy */
        int64_t ext[3];
        for (int k = 0; k < 3; k++) {
            int64_t out_w = k == 2 ? (j.G.out[2] + BLOCK - 1) / BLOCK * BLOCK : j.G.out[k];
            int64_t reach = (out_w - 1) * j.G.s[k] + (j.G.k[k] - 1) * j.G.dl[k] + 1;
            int64_t whole = j.G.lo[k] + j.G.in[k] + j.G.hi[k];
            ext[k] = reach > whole ? reach : whole;
            if (k == 2) { /* whole phases: each as long as the longest run a window element reads */
                int64_t s = j.G.s[2], len = out_w + (j.G.k[2] - 1) * j.G.dl[2] / s;
                len = len > (ext[2] + s - 1) / s ? len : (ext[2] + s - 1) / s;
                ext[2] = len <= PADDED_MAX && s <= PADDED_MAX ? len * s : PADDED_MAX + 1;
                j.owr = out_w;
            }
        }
        if (ext[0] <= PADDED_MAX && ext[1] <= PADDED_MAX && ext[2] <= PADDED_MAX &&
            ext[0] * ext[1] * ext[2] <= PADDED_MAX && j.G.out[0] * j.G.out[1] * j.owr <= PADDED_MAX &&
            (first = malloc(sizeof *first * (size_t)(j.G.out[0] + j.G.out[1] + 2 * j.G.out[2])))) {
            j.padded = true, j.pd = ext[0], j.ph = ext[1], j.pw = ext[2];
            for (int k = 0, at = 0; k < 3; at += (int)j.G.out[k], k++) {
                j.first[k] = first + at;
                for (int64_t o = 0; o < j.G.out[k]; o++) { /* the first window element inside */
                    first[at + o] = -1;
                    for (int64_t q = 0; q < j.G.k[k] && first[at + o] < 0; q++) {
                        int64_t i = o * j.G.s[k] - j.G.lo[k] + q * j.G.dl[k];
                        if (i >= 0 && i < j.G.in[k])
                            first[at + o] = i + j.G.lo[k];
                    }
                }
            }
            j.first[3] = j.first[2] + j.G.out[2];
            for (int64_t o = 0, s = j.G.s[2]; o < j.G.out[2]; o++)
                j.first[3][o] = j.first[2][o] < 0 ? 0 : j.first[2][o] % s * (j.pw / s) + j.first[2][o] / s;
        }
    }
    if (j.G.planes > 0 && j.G.osz > 0) {
        /* items of whole planes, about 64K window elements each */
        int64_t work = j.G.osz * j.G.k[0] * j.G.k[1] * j.G.k[2] + (grad ? j.G.isz : 0);
        j.per_item = work >= 65536 ? 1 : 65536 / (work > 0 ? work : 1);
        int64_t items = (j.G.planes + j.per_item - 1) / j.per_item;
        cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, pool_item, &j);
    } else if (grad) {
        memset(out->data, 0, tl_dtype_size(out->dtype) * (size_t)out->numel);
    }
    free(cnt);
    free(first);
    free(seg);
    if (atomic_load(&j.oom))
        return tl_fail(st, TL_ERUNTIME, "out of memory for %s's scratch", tl_ops[op].name);
    return TL_OK;
}
