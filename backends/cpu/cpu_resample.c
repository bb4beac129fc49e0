/* CPU kernels of padding and resampling (nn.md): pad, resize and their
 * backward kernels pad_grad, resize_grad.
 *
 * Every one of them is separable: along each axis a result coordinate
 * reads a few source coordinates, with weights (resize) or without (pad).
 * An axis_map holds that relation for one axis; the kernels build one
 * per axis that moves, and run one loop over the result's elements that
 * sums the tensor product of the maps.  A backward kernel is the same
 * loop over the transposed maps (for each source coordinate, the result
 * coordinates that read it, in increasing order), so every element of a
 * gradient is one thread's sum in a fixed order: row-major over the
 * result elements that read it, which are the same bits for any number
 * of threads, and no scatter ever races.
 *
 * Coordinates and weights are computed in double (they depend on sizes
 * and attributes only); the arithmetic on values is in the tensor's
 * dtype: a weight is rounded to it once, and each sum is
 * w0 * (sum over the next axis ...) innermost axis first, left to right,
 * as ONNX's reference writes the interpolation.  pad moves raw bits and
 * takes index tensors too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "threads.h"

/* Result elements per work item: a fixed split, so bits never depend on
 * how many threads there are (each element is computed by one thread). */
#define CHUNK 4096

/* One axis: result coordinate i reads source coordinates
 * idx[start[i] .. start[i+1]) with weights w (NULL: weight 1); wf: the
 * weights rounded to f32, for f32 tensors; taps > 0: every coordinate
 * reads that many (start[i] = i * taps). */
typedef struct axis_map {
    int64_t n;
    int64_t *start, *idx;
    double *w;
    float *wf;
    int taps;
} axis_map;

static void map_free(axis_map *m)
{
    free(m->start);
    free(m->idx);
    free(m->w);
    free(m->wf);
    memset(m, 0, sizeof *m);
}

static tl_code map_alloc(axis_map *m, int64_t n, int64_t entries, bool weighted, tl_status *st)
{
    m->n = n;
    m->wf = NULL;
    m->taps = 0;
    m->start = tl_malloc((size_t)n + 1, sizeof *m->start, "a resampling map", st);
    m->idx = tl_malloc(entries ? (size_t)entries : 1, sizeof *m->idx, "a resampling map", st);
    m->w = weighted ? tl_malloc(entries ? (size_t)entries : 1, sizeof *m->w, "a resampling map", st) : NULL;
    if (!m->start || !m->idx || (weighted && !m->w)) {
        map_free(m);
        return st->code;
    }
    return TL_OK;
}

/* m's weights rounded to f32 into m->wf. */
static tl_code map_round(axis_map *m, tl_status *st)
{
    if (!m->w)
        return TL_OK;
    int64_t entries = m->start[m->n];
    if (!(m->wf = tl_malloc(entries ? (size_t)entries : 1, sizeof *m->wf, "a resampling map", st)))
        return st->code;
    for (int64_t e = 0; e < entries; e++)
        m->wf[e] = (float)m->w[e];
    return TL_OK;
}

/* The transpose of f (whose sources lie in [0, nsrc); entries < 0 read
 * nothing): for each source coordinate the result coordinates that read
 * it, in increasing order, a coordinate read twice listed twice. */
static tl_code map_transpose(const axis_map *f, int64_t nsrc, axis_map *t, tl_status *st)
{
    int64_t entries = f->start[f->n];
    if (map_alloc(t, nsrc, entries, f->w != NULL, st))
        return st->code;
    memset(t->start, 0, sizeof *t->start * (size_t)(nsrc + 1));
    for (int64_t e = 0; e < entries; e++)
        if (f->idx[e] >= 0)
            t->start[f->idx[e] + 1]++;
    for (int64_t s = 0; s < nsrc; s++)
        t->start[s + 1] += t->start[s];
    int64_t *at = tl_malloc((size_t)nsrc + 1, sizeof *at, "a resampling map", st);
    if (!at) {
        map_free(t);
        return st->code;
    }
    memcpy(at, t->start, sizeof *at * (size_t)nsrc);
    for (int64_t i = 0; i < f->n; i++)
        for (int64_t e = f->start[i]; e < f->start[i + 1]; e++) {
            int64_t s = f->idx[e];
            if (s < 0)
                continue;
            t->idx[at[s]] = i;
            if (t->w)
                t->w[at[s]] = f->w[e];
            at[s]++;
        }
    free(at);
    return TL_OK;
}

/* ---- the separable sum: dst[c] = the maps' tensor product applied to src ---- */

/* The last axis is done SEG elements at a time, each level of the
 * nesting in its own buffer. */
#define SEG 256

typedef struct sep_job {
    tl_dtype dt;
    const void *src;
    void *dst;
    int ndim;
    int64_t shape[TL_MAXDIM];       /* dst's */
    int64_t sstride[TL_MAXDIM];     /* src's, in elements */
    const axis_map *map[TL_MAXDIM]; /* NULL: the identity */
    int nm;                         /* the mapped axes before the last one, outer first */
    int maxis[TL_MAXDIM];
    int64_t rows, rows_per_item;    /* rows: the elements of the last axis */
} sep_job;

/* acc[0..n) = for result coordinates o0.. of the last axis, the nested
 * sum from level lvl (mapped axis maxis[lvl]) inwards, x read at offset
 * off plus the inner levels' offsets.  The same order as the formula
 * element by element: at each level sum_e w_e * (the level inside),
 * terms left to right, the innermost level the last axis. */
#define SEP_KERNEL(T, NAME, W)                                                                        \
    static void NAME##_nest(const sep_job *j, const int64_t *c, int lvl, int64_t off, int64_t o0,  \
                            int n, T (*buf)[SEG])                                                  \
    {                                                                                              \
        const T *x = j->src;                                                                       \
        T *acc = buf[lvl];                                                                         \
        int last = j->ndim - 1;                                                                    \
        if (lvl == j->nm) {                                                                        \
            const axis_map *m = j->map[last];                                                      \
            if (!m) {                                                                              \
                memcpy(acc, x + off + o0, sizeof(T) * (size_t)n);                                  \
                return;                                                                            \
            }                                                                                      \
            const int64_t *ix = m->idx + (m->taps ? o0 * m->taps : 0);                             \
            const T *w = m->W ? m->W + (m->taps ? o0 * m->taps : 0) : NULL;                        \
            x += off;                                                                              \
            if (m->taps == 1 && !w) /* nearest */                                                  \
                for (int i = 0; i < n; i++)                                                        \
                    acc[i] = x[ix[i]];                                                             \
            else if (m->taps == 2 && w) /* linear */                                               \
                for (int i = 0; i < n; i++)                                                        \
                    acc[i] = w[2 * i] * x[ix[2 * i]] + w[2 * i + 1] * x[ix[2 * i + 1]];            \
            else if (m->taps == 4 && w) /* cubic */                                                \
                for (int i = 0; i < n; i++)                                                        \
                    acc[i] = ((w[4 * i] * x[ix[4 * i]] + w[4 * i + 1] * x[ix[4 * i + 1]]) +        \
                              w[4 * i + 2] * x[ix[4 * i + 2]]) +                                   \
                             w[4 * i + 3] * x[ix[4 * i + 3]];                                      \
            else                                                                                   \
                for (int i = 0; i < n; i++) {                                                      \
                    int64_t e0 = m->start[o0 + i], e1 = m->start[o0 + i + 1];                      \
                    T a = 0;                                                                       \
                    for (int64_t e = e0; e < e1; e++) {                                            \
                        T t = x[m->idx[e]];                                                        \
                        if (m->W)                                                                  \
                            t = m->W[e] * t;                                                       \
                        a = e == e0 ? t : a + t;                                                   \
                    }                                                                              \
                    acc[i] = a;                                                                    \
                }                                                                                  \
            return;                                                                                \
        }                                                                                          \
        int ax = j->maxis[lvl];                                                                    \
        const axis_map *m = j->map[ax];                                                            \
        int64_t e0 = m->start[c[ax]], e1 = m->start[c[ax] + 1];                                    \
        const T *in = buf[lvl + 1];                                                                \
        if (e0 == e1)                                                                              \
            memset(acc, 0, sizeof(T) * (size_t)n);                                                 \
        for (int64_t e = e0; e < e1; e++) {                                                        \
            NAME##_nest(j, c, lvl + 1, off + m->idx[e] * j->sstride[ax], o0, n, buf);              \
            T w = m->W ? m->W[e] : (T)1;                                                           \
            if (e == e0 && m->W)                                                                   \
                for (int i = 0; i < n; i++)                                                        \
                    acc[i] = w * in[i];                                                            \
            else if (e == e0)                                                                      \
                memcpy(acc, in, sizeof(T) * (size_t)n);                                            \
            else if (m->W)                                                                         \
                for (int i = 0; i < n; i++)                                                        \
                    acc[i] = acc[i] + w * in[i];                                                   \
            else                                                                                   \
                for (int i = 0; i < n; i++)                                                        \
                    acc[i] = acc[i] + in[i];                                                       \
        }                                                                                          \
    }                                                                                              \
    /* rows r0..r1-1 of dst */                                                                     \
    static void NAME(const sep_job *j, int64_t r0, int64_t r1)                                     \
    {                                                                                              \
        T *d = j->dst, buf[TL_MAXDIM + 1][SEG];                                                    \
        int last = j->ndim - 1;                                                                    \
        int64_t len = j->shape[last], c[TL_MAXDIM], rest = r0;                                     \
        for (int k = last - 1; k >= 0; k--) {                                                      \
            c[k] = rest % j->shape[k];                                                             \
            rest /= j->shape[k];                                                                   \
        }                                                                                          \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            int64_t off = 0;                                                                       \
            for (int k = 0; k < last; k++)                                                         \
                if (!j->map[k])                                                                    \
                    off += c[k] * j->sstride[k];                                                   \
            for (int64_t o0 = 0; o0 < len; o0 += SEG) {                                            \
                int n = len - o0 < SEG ? (int)(len - o0) : SEG;                                    \
                NAME##_nest(j, c, 0, off, o0, n, buf);                                             \
                memcpy(d + r * len + o0, buf[0], sizeof(T) * (size_t)n);                           \
            }                                                                                      \
            for (int k = last - 1; k >= 0 && ++c[k] == j->shape[k]; k--)                           \
                c[k] = 0;                                                                          \
        }                                                                                          \
    }
SEP_KERNEL(float, sep_f32, wf)
SEP_KERNEL(double, sep_f64, w)

static void sep_item(void *ctx, int64_t item)
{
    const sep_job *j = ctx;
    int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item < j->rows ? r0 + j->rows_per_item : j->rows;
    if (j->dt == TL_F32)
        sep_f32(j, r0, r1);
    else
        sep_f64(j, r0, r1);
}

/* dst = maps applied to src (maps[d] NULL: axis d is the identity). */
static void sep_run(const tl_tensor *src, tl_tensor *dst, const axis_map *const *maps)
{
    size_t es = tl_dtype_size(dst->dtype);
    if (dst->ndim == 0) {
        memcpy(dst->data, src->data, es);
        return;
    }
    sep_job j = {.dt = dst->dtype, .src = src->data, .dst = dst->data, .ndim = dst->ndim};
    memcpy(j.shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim);
    cpu_strides(src->ndim, src->shape, j.sstride);
    for (int d = 0; d < dst->ndim; d++)
        if ((j.map[d] = maps[d]) && d < dst->ndim - 1)
            j.maxis[j.nm++] = d;
    int64_t len = dst->shape[dst->ndim - 1];
    j.rows = dst->numel / len;
    j.rows_per_item = len >= CHUNK ? 1 : CHUNK / len;
    int64_t items = (j.rows + j.rows_per_item - 1) / j.rows_per_item;
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, sep_item, &j);
}

/* ---- pad ---- */

/* For each result coordinate along an axis of `size` padded by (lo, hi)
 * in `mode`: the source coordinate it copies, or -1 for the constant.
 * The shape rule has checked the pads against the size. */
static void pad_sources(int64_t size, int64_t lo, int64_t hi, int mode, int64_t n, int64_t *src)
{
    int64_t cut = lo < 0 ? -lo : 0, kept = size - cut - (hi < 0 ? -hi : 0), add = lo > 0 ? lo : 0;
    for (int64_t o = 0; o < n; o++) {
        int64_t c = o - add; /* in the kept part, [0, kept) */
        if (c < 0 || c >= kept) {
            switch (mode) {
            case TL_PAD_CONSTANT: c = -1; break;
            case TL_PAD_REFLECT: c = c < 0 ? -c : 2 * (kept - 1) - c; break;
            case TL_PAD_EDGE: c = c < 0 ? 0 : kept - 1; break;
            default: c = ((c % kept) + kept) % kept; break; /* wrap */
            }
        }
        src[o] = c < 0 ? -1 : cut + c;
    }
}

typedef struct pad_job {
    size_t es;
    const void *src;
    void *dst;
    int ndim;
    int64_t shape[TL_MAXDIM], sstride[TL_MAXDIM];
    const int64_t *from[TL_MAXDIM]; /* per axis: pad_sources (NULL: the identity) */
    uint64_t value;                 /* the constant's bits in the dtype (low 4 bytes for 4-byte types) */
    int64_t rows, rows_per_item;
} pad_job;

/* Rows (the last axis) r0..r1-1 of the result. */
#define PAD_ROWS(T)                                                                      \
    do {                                                                                 \
        T *d = j->dst, v = (T)j->value;                                                  \
        const T *s = j->src;                                                             \
        int last = j->ndim - 1;                                                          \
        int64_t n = j->shape[last], c[TL_MAXDIM], rest = r0;                             \
        const int64_t *fl = j->from[last];                                               \
        for (int k = last - 1; k >= 0; k--) {                                            \
            c[k] = rest % j->shape[k];                                                   \
            rest /= j->shape[k];                                                         \
        }                                                                                \
        for (int64_t r = r0; r < r1; r++) {                                              \
            int64_t off = 0;                                                             \
            bool inside = true;                                                          \
            for (int k = 0; k < last; k++) {                                             \
                int64_t f = j->from[k] ? j->from[k][c[k]] : c[k];                        \
                inside = inside && f >= 0;                                               \
                off += f * j->sstride[k];                                                \
            }                                                                            \
            T *dr = d + r * n;                                                           \
            if (!inside)                                                                 \
                for (int64_t i = 0; i < n; i++)                                          \
                    dr[i] = v;                                                           \
            else if (!fl)                                                                \
                memcpy(dr, s + off, sizeof(T) * (size_t)n);                              \
            else                                                                         \
                for (int64_t i = 0; i < n; i++)                                          \
                    dr[i] = fl[i] < 0 ? v : s[off + fl[i]];                              \
            for (int k = last - 1; k >= 0 && ++c[k] == j->shape[k]; k--)                 \
                c[k] = 0;                                                                \
        }                                                                                \
    } while (0)

static void pad_item(void *ctx, int64_t item)
{
    const pad_job *j = ctx;
    int64_t r0 = item * j->rows_per_item, r1 = r0 + j->rows_per_item < j->rows ? r0 + j->rows_per_item : j->rows;
    if (j->es == 4)
        PAD_ROWS(uint32_t);
    else
        PAD_ROWS(uint64_t);
}

/* The constant as the bits of an element of dt. */
static uint64_t pad_value_bits(tl_dtype dt, double v)
{
    switch (dt) {
    case TL_F32: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, sizeof b);
        return b;
    }
    case TL_F64: {
        uint64_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
    case TL_I32: return (uint32_t)(int32_t)v; /* the shape rule checked the range */
    default: return (uint64_t)(int64_t)v;
    }
}

/* Per axis with pads, pad_sources into from[d] (the others NULL). */
static tl_code pad_maps(int ndim, const int64_t *xshape, const int64_t *oshape, const tl_attrs *a, int64_t **from,
                        tl_status *st)
{
    for (int d = 0; d < ndim; d++) {
        from[d] = NULL;
        if (a->pads[2 * d] == 0 && a->pads[2 * d + 1] == 0)
            continue;
        if (!(from[d] = tl_malloc(oshape[d] ? (size_t)oshape[d] : 1, sizeof(int64_t), "pad's map", st)))
            return st->code;
        pad_sources(xshape[d], a->pads[2 * d], a->pads[2 * d + 1], a->mode, oshape[d], from[d]);
    }
    return TL_OK;
}

static tl_code pad(const tl_tensor *x, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    size_t es = tl_dtype_size(out->dtype);
    if (out->ndim == 0) {
        memcpy(out->data, x->data, es);
        return TL_OK;
    }
    int64_t *from[TL_MAXDIM] = {0};
    tl_code rc = pad_maps(out->ndim, x->shape, out->shape, a, from, st);
    if (rc == TL_OK) {
        pad_job j = {.es = es, .src = x->data, .dst = out->data, .ndim = out->ndim,
                     .value = pad_value_bits(out->dtype, a->value)};
        memcpy(j.shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
        cpu_strides(x->ndim, x->shape, j.sstride);
        for (int d = 0; d < out->ndim; d++)
            j.from[d] = from[d];
        int64_t n = out->shape[out->ndim - 1];
        j.rows = out->numel / n;
        j.rows_per_item = n >= CHUNK ? 1 : CHUNK / n;
        int64_t items = (j.rows + j.rows_per_item - 1) / j.rows_per_item;
        cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, pad_item, &j);
    }
    for (int d = 0; d < out->ndim; d++)
        free(from[d]);
    return rc;
}

/* g [pad's result] -> dx [attrs.shape]: every copy of an element added up,
 * in row-major order of g. */
static tl_code pad_grad(const tl_tensor *g, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    int64_t *from[TL_MAXDIM] = {0};
    axis_map fwd[TL_MAXDIM] = {0}, back[TL_MAXDIM] = {0};
    const axis_map *maps[TL_MAXDIM] = {0};
    tl_code rc = pad_maps(out->ndim, out->shape, g->shape, a, from, st);
    for (int d = 0; rc == TL_OK && d < out->ndim; d++) {
        if (!from[d])
            continue;
        /* pad_sources as a map of one entry per coordinate */
        fwd[d] = (axis_map){.n = g->shape[d], .idx = from[d]};
        fwd[d].start = tl_malloc((size_t)g->shape[d] + 1, sizeof(int64_t), "pad's map", st);
        if (!fwd[d].start) {
            rc = st->code;
            break;
        }
        for (int64_t i = 0; i <= g->shape[d]; i++)
            fwd[d].start[i] = i;
        rc = map_transpose(&fwd[d], out->shape[d], &back[d], st);
        maps[d] = &back[d];
    }
    if (rc == TL_OK)
        sep_run(g, out, maps);
    for (int d = 0; d < out->ndim; d++) {
        free(from[d]);
        free(fwd[d].start);
        map_free(&back[d]);
    }
    return rc;
}

/* ---- resize ---- */

/* The source coordinate of result coordinate o along an axis of `in`
 * elements resized to `out` with scale s (the coordinate transforms). */
static double resize_coord(int coord, int64_t o, int64_t in, int64_t out, double s)
{
    switch (coord) {
    case TL_COORD_HALF_PIXEL: return ((double)o + 0.5) / s - 0.5;
    case TL_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
    case TL_COORD_ALIGN_CORNERS: return out == 1 ? 0 : (double)o * (double)(in - 1) / (double)(out - 1);
    default: return (double)o / s; /* asymmetric */
    }
}

static int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : i >= in ? in - 1 : i; }

/* ONNX's nearest pixel: x itself when an integer, else by the rounding. */
static int64_t resize_nearest(int rounding, double x)
{
    double f = floor(x), r = x - f;
    bool up;
    switch (rounding) {
    case TL_NEAREST_ROUND_PREFER_FLOOR: up = r > 0.5; break;
    case TL_NEAREST_ROUND_PREFER_CEIL: up = r >= 0.5; break;
    case TL_NEAREST_FLOOR: up = false; break;
    default: up = r > 0; break; /* ceil */
    }
    return (int64_t)f + up;
}

/* The map of one spatial axis: 1 tap (nearest), 2 (linear) or 4 (cubic)
 * per result coordinate, indices clamped into the axis (the edge
 * padding of ONNX's reference), weights the interpolation's. */
static tl_code resize_map(const tl_attrs *a, int64_t in, int64_t out, double s, axis_map *m, tl_status *st)
{
    int taps = a->mode == TL_RESIZE_NEAREST ? 1 : a->mode == TL_RESIZE_LINEAR ? 2 : 4;
    if (map_alloc(m, out, out * taps, taps > 1, st)) /* nearest: weight 1 */
        return st->code;
    m->taps = taps;
    double A = a->cubic_coeff;
    for (int64_t o = 0; o < out; o++) {
        double x = resize_coord(a->coord, o, in, out, s), w[4] = {1};
        int64_t *idx = m->idx + o * taps;
        m->start[o] = o * taps;
        if (taps == 1) {
            idx[0] = clamp_index(resize_nearest(a->nearest, x), in);
            continue;
        }
        /* ONNX takes the taps nearest x, the lower ones on a tie: at an
         * integer x the interval below it, with ratio t = 1 */
        double f = floor(x), t = x - f;
        if (t == 0) {
            f -= 1;
            t = 1;
        }
        int64_t i0 = (int64_t)f;
        if (taps == 2) {
            w[0] = 1 - t;
            w[1] = t;
            idx[0] = clamp_index(i0, in);
            idx[1] = clamp_index(i0 + 1, in);
        } else {
            double u = 1 - t;
            w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
            w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
            w[2] = ((A + 2) * u - (A + 3)) * u * u + 1;
            w[3] = ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A;
            for (int k = 0; k < 4; k++)
                idx[k] = clamp_index(i0 - 1 + k, in);
        }
        memcpy(m->w + o * taps, w, sizeof(double) * (size_t)taps);
    }
    m->start[out] = out * taps;
    return TL_OK;
}

/* resize (x -> out) or resize_grad (g -> out, x's shape). */
static tl_code resize(tl_opcode op, const tl_tensor *src, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    const int64_t *xs = op == TL_OP_RESIZE ? src->shape : out->shape;
    axis_map fwd[TL_MAXSP] = {0}, back[TL_MAXSP] = {0};
    const axis_map *maps[TL_MAXDIM] = {0};
    tl_code rc = TL_OK;
    for (int k = 0; rc == TL_OK && k < a->nsp; k++) {
        int64_t in = xs[2 + k], o = a->size[k];
        double s = a->nscale ? a->scale[k] : (double)o / (double)in;
        rc = resize_map(a, in, o, s, &fwd[k], st);
        if (rc == TL_OK && op == TL_OP_RESIZE_GRAD)
            rc = map_transpose(&fwd[k], in, &back[k], st);
        axis_map *m = op == TL_OP_RESIZE ? &fwd[k] : &back[k];
        if (rc == TL_OK && out->dtype == TL_F32)
            rc = map_round(m, st);
        maps[2 + k] = m;
    }
    if (rc == TL_OK)
        sep_run(src, out, maps);
    for (int k = 0; k < a->nsp; k++) {
        map_free(&fwd[k]);
        map_free(&back[k]);
    }
    return rc;
}

tl_code cpu_resample(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    (void)n;
    if (out->numel == 0)
        return TL_OK;
    switch (op) {
    case TL_OP_PAD: return pad(in[0], a, out, st);
    case TL_OP_PAD_GRAD: return pad_grad(in[0], a, out, st);
    case TL_OP_RESIZE:
    case TL_OP_RESIZE_GRAD: return resize(op, in[0], a, out, st);
    default: return tl_fail(st, TL_ERUNTIME, "internal: %s is not a resampling op", tl_ops[op].name);
    }
}
