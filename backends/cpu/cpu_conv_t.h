/* The convolution kernels of one element type, included by cpu_conv.c
 * once with T float, SUF f and once with T double, SUF d (read the
 * comments there first: the geometry, the three uses and the cuts). */
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SUF)

/* ---------- im2col and col2im ----------
 * Row r = c * ksz + tap of the column matrix holds, for output positions
 * p0..p0+np, the in-side element that tap reads of channel c (zero in the
 * padding).  col2im adds rows back: the transpose. */

static void FN(im2col)(const geom *G, const T *restrict src, int64_t c0, int64_t c1, int64_t p0, int64_t np,
                       T *restrict col)
{
    for (int64_t c = c0; c < c1; c++) {
        const T *plane = src + c * G->isz;
        for (int64_t k = 0; k < G->ksz; k++) {
            int64_t kk[3] = {k / (G->k[1] * G->k[2]), k / G->k[2] % G->k[1], k % G->k[2]};
            T *row = col + ((c - c0) * G->ksz + k) * np;
            int64_t off2 = kk[2] * G->dl[2] - G->lo[2], a, b;
            valid(off2, G->st[2], G->is[2], G->os[2], &a, &b);
            /* walk the output rows (od, oh) that the range touches */
            int64_t p = p0, end = p0 + np;
            while (p < end) {
                int64_t ow0 = p % G->os[2], oh = p / G->os[2] % G->os[1], od = p / (G->os[2] * G->os[1]);
                int64_t run = G->os[2] - ow0 < end - p ? G->os[2] - ow0 : end - p;
                T *dst = row + (p - p0);
                int64_t id = od * G->st[0] - G->lo[0] + kk[0] * G->dl[0];
                int64_t ih = oh * G->st[1] - G->lo[1] + kk[1] * G->dl[1];
                if (id < 0 || id >= G->is[0] || ih < 0 || ih >= G->is[1]) {
                    memset(dst, 0, sizeof(T) * (size_t)run);
                } else {
                    const T *srow = plane + (id * G->is[1] + ih) * G->is[2];
                    int64_t lo = a > ow0 ? a : ow0, hi = b < ow0 + run ? b : ow0 + run;
                    if (hi < lo)
                        hi = lo;
                    for (int64_t ow = ow0; ow < lo; ow++)
                        dst[ow - ow0] = 0;
                    if (G->st[2] == 1)
                        memcpy(dst + (lo - ow0), srow + lo + off2, sizeof(T) * (size_t)(hi - lo));
                    else
                        for (int64_t ow = lo; ow < hi; ow++)
                            dst[ow - ow0] = srow[ow * G->st[2] + off2];
                    for (int64_t ow = hi; ow < ow0 + run; ow++)
                        dst[ow - ow0] = 0;
                }
                p += run;
            }
        }
    }
}

/* dst[c] += the rows of channel c for positions p0..p0+np, rows in order:
 * im2col's transpose. */
CPU_KERNEL static void FN(col2im)(const geom *G, const T *restrict col, int64_t c0, int64_t c1, int64_t p0,
                                  int64_t np, T *restrict dst)
{
    for (int64_t c = c0; c < c1; c++) {
        T *plane = dst + c * G->isz;
        for (int64_t k = 0; k < G->ksz; k++) {
            int64_t kk[3] = {k / (G->k[1] * G->k[2]), k / G->k[2] % G->k[1], k % G->k[2]};
            const T *row = col + ((c - c0) * G->ksz + k) * np;
            int64_t off2 = kk[2] * G->dl[2] - G->lo[2], a, b;
            valid(off2, G->st[2], G->is[2], G->os[2], &a, &b);
            for (int64_t p = p0, end = p0 + np; p < end;) { /* the output rows the range touches */
                int64_t ow0 = p % G->os[2], oh = p / G->os[2] % G->os[1], od = p / (G->os[2] * G->os[1]);
                int64_t run = G->os[2] - ow0 < end - p ? G->os[2] - ow0 : end - p;
                int64_t id = od * G->st[0] - G->lo[0] + kk[0] * G->dl[0];
                int64_t ih = oh * G->st[1] - G->lo[1] + kk[1] * G->dl[1];
                if (id >= 0 && id < G->is[0] && ih >= 0 && ih < G->is[1]) {
                    T *drow = plane + (id * G->is[1] + ih) * G->is[2] + off2;
                    const T *srow = row + (p - p0) - ow0; /* indexed by ow */
                    int64_t lo = a > ow0 ? a : ow0, hi = b < ow0 + run ? b : ow0 + run;
                    if (G->st[2] == 1)
                        for (int64_t ow = lo; ow < hi; ow++)
                            drow[ow] += srow[ow];
                    else
                        for (int64_t ow = lo; ow < hi; ow++)
                            drow[ow * G->st[2]] += srow[ow];
                }
                p += run;
            }
        }
    }
}

/* ---------- gemm on the calling thread ---------- */

static void FN(gemm)(const cpu_blas *bl, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *A, int64_t lda,
                     const T *B, int64_t ldb, bool acc, T *C, int64_t ldc)
{
#if SUF_IS_F
    bl->sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
              1.0f, A, (int)lda, B, (int)ldb, acc ? 1.0f : 0.0f, C, (int)ldc);
#else
    bl->dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
              1.0, A, (int)lda, B, (int)ldb, acc ? 1.0 : 0.0, C, (int)ldc);
#endif
}

/* rows of C += b[row] */
static void FN(add_bias)(const T *bias, int64_t rows, int64_t cols, T *C, int64_t ldc)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            C[r * ldc + j] += bias[r];
}

/* ---------- conv: out-side = W im2col(in-side) ---------- */

static void FN(conv_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    int64_t ch = item % j->nchunks, ng = item / j->nchunks, gi = ng % G->groups;
    int64_t p0 = ch * j->chunk, np = G->osz - p0 < j->chunk ? G->osz - p0 : j->chunk;
    const T *src = (const T *)j->ins + ng * G->ca * G->isz;
    const T *w = (const T *)j->w + gi * G->cb * G->rows;
    T *dst = (T *)j->outs + ng * G->cb * G->osz + p0;
    const T *colp = src + p0;
    int64_t ldb = G->isz;
    T *col = NULL;
    if (!j->pointwise) {
        col = (T *)scratch(j, sizeof(T) * (size_t)(G->rows * np));
        if (!col)
            return;
        FN(im2col)(G, src, 0, G->ca, p0, np, col);
        colp = col;
        ldb = np;
    }
    FN(gemm)(j->blas, false, false, G->cb, np, G->rows, w, G->rows, colp, ldb, false, dst, G->osz);
    if (j->bias)
        FN(add_bias)((const T *)j->bias + gi * G->cb, G->cb, np, dst, G->osz);
    free(col);
}

/* ---------- conv_transpose: in-side = col2im(W^T out-side) ---------- */

static void FN(convt_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    int64_t blk = item % j->nchunks, ng = item / j->nchunks, gi = ng % G->groups;
    int64_t c0 = blk * j->chunk, c1 = G->ca - c0 < j->chunk ? G->ca : c0 + j->chunk;
    const T *src = (const T *)j->outs + ng * G->cb * G->osz;
    const T *w = (const T *)j->w + gi * G->cb * G->rows;
    T *dst = (T *)j->ins + ng * G->ca * G->isz;
    if (j->pointwise) { /* in-side rows c0..c1 = W^T rows straight */
        T *copy = NULL; /* over its input: this item reads the sample's group whole first */
        if (j->over && G->osz) {
            if (!(copy = (T *)scratch(j, sizeof(T) * (size_t)(G->cb * G->osz))))
                return;
            memcpy(copy, src, sizeof(T) * (size_t)(G->cb * G->osz));
            src = copy;
        }
        if (G->osz)
            FN(gemm)(j->blas, true, false, c1 - c0, G->osz, G->cb, w + c0, G->rows, src, G->osz, false,
                     dst + c0 * G->isz, G->isz);
        free(copy);
    } else { /* by chunks of positions, each added in order */
        int64_t rows = (c1 - c0) * G->ksz;
        T *col = (T *)scratch(j, sizeof(T) * (size_t)(rows * j->pchunk));
        if (!col)
            return;
        memset(dst + c0 * G->isz, 0, sizeof(T) * (size_t)((c1 - c0) * G->isz));
        for (int64_t p0 = 0; p0 < G->osz; p0 += j->pchunk) {
            int64_t np = G->osz - p0 < j->pchunk ? G->osz - p0 : j->pchunk;
            FN(gemm)(j->blas, true, false, rows, np, G->cb, w + c0 * G->ksz, G->rows, src + p0, G->osz, false, col,
                     np);
            FN(col2im)(G, col, c0, c1, p0, np, dst);
        }
        free(col);
    }
    if (j->bias)
        FN(add_bias)((const T *)j->bias + gi * G->ca + c0, c1 - c0, G->isz, dst + c0 * G->isz, G->isz);
}

/* ---------- conv_grad_w: W = sum over n of out-side im2col(in-side)^T ----------
 * An item is a block of W of one group (in-side channels by out-side
 * channels), summed over the samples in order and over the position
 * chunks in order (gemm with beta 1 after the first), whatever the
 * threads. */

static void FN(gradw_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    int64_t ob = item % j->noblk, blk = item / j->noblk % j->nblk, gi = item / j->noblk / j->nblk;
    int64_t c0 = blk * j->cblk, c1 = G->ca - c0 < j->cblk ? G->ca : c0 + j->cblk;
    int64_t o0 = ob * j->oblk, m = G->cb - o0 < j->oblk ? G->cb - o0 : j->oblk;
    int64_t rows = (c1 - c0) * G->ksz;
    T *w = (T *)j->w + (gi * G->cb + o0) * G->rows + c0 * G->ksz;
    T *col = NULL;
    if (!j->pointwise && !(col = (T *)scratch(j, sizeof(T) * (size_t)(rows * j->chunk))))
        return;
    bool first = true;
    for (int64_t n = 0; n < G->n; n++) {
        const T *a = (const T *)j->ins + (n * G->groups + gi) * G->ca * G->isz;
        const T *b = (const T *)j->outs + ((n * G->groups + gi) * G->cb + o0) * G->osz;
        for (int64_t p0 = 0; p0 < G->osz; p0 += j->chunk) {
            int64_t np = G->osz - p0 < j->chunk ? G->osz - p0 : j->chunk;
            if (j->pointwise) {
                FN(gemm)(j->blas, false, true, m, rows, np, b + p0, G->osz, a + c0 * G->isz + p0, G->isz, !first, w,
                         G->rows);
            } else {
                FN(im2col)(G, a, c0, c1, p0, np, col);
                FN(gemm)(j->blas, false, true, m, rows, np, b + p0, G->osz, col, np, !first, w, G->rows);
            }
            first = false;
        }
    }
    if (first) /* no positions at all: sums of nothing */
        for (int64_t o = 0; o < m; o++)
            memset(w + o * G->rows, 0, sizeof(T) * (size_t)rows);
    free(col);
}

/* ---------- direct kernels for one in-side channel per group (depthwise) ----------
 * Each output element's sum runs over the taps in order, a row at a time
 * (the loops over ow vectorise without reordering any one element's sum). */

/* One output row's taps (kd, kh) fixed, kw = 0..K2-1 at t[0..K2-1]:
 * orow[ow] += w[kw] * srow[ow*st + off_kw] for every valid kw in order.
 * Three taps with stride 1 (the common 3x3 kernel) go in one pass over
 * the positions where all three are valid, each element still adding its
 * taps in order, so the bits are those of one pass per tap.  Inlined
 * always, into each of the item's CPU_KERNEL clones: called, it was one
 * SSE body for all (GCC kept it apart), a quarter of the AVX-512 width. */
static inline __attribute__((always_inline)) void FN(dw_row)(T *restrict orow, const T *restrict srow, const T *w, const tap *t, int64_t k2,
                              int64_t st, int64_t os2)
{
    if (k2 == 3 && st == 1) {
        int64_t A = t[0].a > t[1].a ? t[0].a : t[1].a, B = t[0].b < t[1].b ? t[0].b : t[1].b;
        A = A > t[2].a ? A : t[2].a;
        B = B < t[2].b ? B : t[2].b;
        if (A < B) {
            const T *s0 = srow + t[0].off, *s1 = srow + t[1].off, *s2 = srow + t[2].off;
            T w0 = w[0], w1 = w[1], w2 = w[2];
            for (int64_t ow = 0; ow < A; ow++)
                for (int q = 0; q < 3; q++)
                    if (ow >= t[q].a && ow < t[q].b)
                        orow[ow] += w[q] * srow[ow + t[q].off];
            for (int64_t ow = A; ow < B; ow++)
                orow[ow] = ((orow[ow] + w0 * s0[ow]) + w1 * s1[ow]) + w2 * s2[ow];
            for (int64_t ow = B; ow < os2; ow++)
                for (int q = 0; q < 3; q++)
                    if (ow >= t[q].a && ow < t[q].b)
                        orow[ow] += w[q] * srow[ow + t[q].off];
            return;
        }
    }
    for (int64_t q = 0; q < k2; q++) {
        const T *restrict sp = srow + t[q].off;
        T wk = w[q];
        if (st == 1)
            for (int64_t ow = t[q].a; ow < t[q].b; ow++)
                orow[ow] += wk * sp[ow];
        else if (st == 2)
            for (int64_t ow = t[q].a; ow < t[q].b; ow++)
                orow[ow] += wk * sp[2 * ow];
        else
            for (int64_t ow = t[q].a; ow < t[q].b; ow++)
                orow[ow] += wk * sp[ow * st];
    }
}

/* out-side plane (n, g, o) from in-side plane (n, g, 0) */
CPU_KERNEL static void FN(dw_conv_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    int64_t o = item % G->cb, ng = item / G->cb, gi = ng % G->groups;
    const T *restrict src = (const T *)j->ins + ng * G->isz;
    const T *w = (const T *)j->w + (gi * G->cb + o) * G->ksz;
    T *restrict dst = (T *)j->outs + (ng * G->cb + o) * G->osz;
    T bias = j->bias ? ((const T *)j->bias)[gi * G->cb + o] : 0;
    for (int64_t od = 0; od < G->os[0]; od++)
        for (int64_t oh = 0; oh < G->os[1]; oh++) {
            T *restrict orow = dst + (od * G->os[1] + oh) * G->os[2];
            for (int64_t ow = 0; ow < G->os[2]; ow++)
                orow[ow] = 0;
            for (int64_t k = 0; k < G->ksz; k += G->k[2]) { /* a (kd, kh) row of taps */
                const tap *t = j->taps + k;
                int64_t id = od * G->st[0] + t->doff, ih = oh * G->st[1] + t->hoff;
                if (id < 0 || id >= G->is[0] || ih < 0 || ih >= G->is[1])
                    continue;
                FN(dw_row)(orow, src + (id * G->is[1] + ih) * G->is[2], w + k, t, G->k[2], G->st[2], G->os[2]);
            }
            if (j->bias)
                for (int64_t ow = 0; ow < G->os[2]; ow++)
                    orow[ow] += bias;
        }
}

/* drow[ow*st + off_kw] += w[kw] * grow[ow] for the valid kw in order; with
 * three taps and stride 1, as dw_row, one pass over the destination
 * positions all three reach (each adding its taps in order); inlined
 * always, as dw_row. */
static inline __attribute__((always_inline)) void FN(dw_scatter_row)(T *restrict drow, const T *restrict grow, const T *w, const tap *t, int64_t k2,
                                      int64_t st)
{
    if (k2 == 3 && st == 1) {
        /* destination q = ow + off: tap q's valid q are [a + off, b + off) */
        int64_t A = t[0].a + t[0].off, B = t[0].b + t[0].off;
        for (int q = 1; q < 3; q++) {
            A = A > t[q].a + t[q].off ? A : t[q].a + t[q].off;
            B = B < t[q].b + t[q].off ? B : t[q].b + t[q].off;
        }
        if (A < B) {
            int64_t lo = t[0].a + t[0].off, hi = t[0].b + t[0].off;
            for (int q = 1; q < 3; q++) {
                lo = lo < t[q].a + t[q].off ? lo : t[q].a + t[q].off;
                hi = hi > t[q].b + t[q].off ? hi : t[q].b + t[q].off;
            }
            const T *g0 = grow - t[0].off, *g1 = grow - t[1].off, *g2 = grow - t[2].off;
            T w0 = w[0], w1 = w[1], w2 = w[2];
            for (int64_t d = lo; d < A; d++)
                for (int q = 0; q < 3; q++)
                    if (d - t[q].off >= t[q].a && d - t[q].off < t[q].b)
                        drow[d] += w[q] * grow[d - t[q].off];
            for (int64_t d = A; d < B; d++)
                drow[d] = ((drow[d] + w0 * g0[d]) + w1 * g1[d]) + w2 * g2[d];
            for (int64_t d = B; d < hi; d++)
                for (int q = 0; q < 3; q++)
                    if (d - t[q].off >= t[q].a && d - t[q].off < t[q].b)
                        drow[d] += w[q] * grow[d - t[q].off];
            return;
        }
    }
    for (int64_t q = 0; q < k2; q++) {
        T *restrict dp = drow + t[q].off;
        T wk = w[q];
        if (st == 1)
            for (int64_t ow = t[q].a; ow < t[q].b; ow++)
                dp[ow] += wk * grow[ow];
        else
            for (int64_t ow = t[q].a; ow < t[q].b; ow++)
                dp[ow * st] += wk * grow[ow];
    }
}

/* in-side plane (n, g, 0) from the out-side planes (n, g, o), o in order */
CPU_KERNEL static void FN(dw_convt_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    int64_t ng = item, gi = ng % G->groups;
    T *restrict dst = (T *)j->ins + ng * G->isz;
    for (int64_t i = 0; i < G->isz; i++)
        dst[i] = 0;
    for (int64_t o = 0; o < G->cb; o++) {
        const T *restrict src = (const T *)j->outs + (ng * G->cb + o) * G->osz;
        const T *w = (const T *)j->w + (gi * G->cb + o) * G->ksz;
        for (int64_t od = 0; od < G->os[0]; od++)
            for (int64_t oh = 0; oh < G->os[1]; oh++) {
                const T *restrict grow = src + (od * G->os[1] + oh) * G->os[2];
                for (int64_t k = 0; k < G->ksz; k += G->k[2]) {
                    const tap *t = j->taps + k;
                    int64_t id = od * G->st[0] + t->doff, ih = oh * G->st[1] + t->hoff;
                    if (id < 0 || id >= G->is[0] || ih < 0 || ih >= G->is[1])
                        continue;
                    FN(dw_scatter_row)(dst + (id * G->is[1] + ih) * G->is[2], grow, w + k, t, G->k[2], G->st[2]);
                }
            }
    }
    if (j->bias) {
        T bias = ((const T *)j->bias)[gi];
        for (int64_t i = 0; i < G->isz; i++)
            dst[i] += bias;
    }
}

static T FN(leaf)(void *ctx, int64_t lo, int64_t n) { return CAT(cpu_psum_leaf, SUF)((const T *)ctx + lo, n); }

/* W[g, o, 0, tap] for one out-side channel: per tap a row of partial sums
 * over ow, accumulated over the samples and output rows in order, then
 * summed over ow in tl's one summation order (psum.h). */
CPU_KERNEL static void FN(dw_gradw_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    int64_t o = item % G->cb, gi = item / G->cb;
    T *acc = (T *)scratch(j, sizeof(T) * (size_t)(G->ksz * G->os[2]));
    if (!acc)
        return;
    for (int64_t i = 0; i < G->ksz * G->os[2]; i++)
        acc[i] = 0;
    for (int64_t n = 0; n < G->n; n++) {
        const T *restrict src = (const T *)j->ins + (n * G->groups + gi) * G->isz;
        const T *restrict gp = (const T *)j->outs + ((n * G->groups + gi) * G->cb + o) * G->osz;
        for (int64_t od = 0; od < G->os[0]; od++)
            for (int64_t oh = 0; oh < G->os[1]; oh++) {
                const T *restrict grow = gp + (od * G->os[1] + oh) * G->os[2];
                for (int64_t k = 0; k < G->ksz; k++) {
                    const tap *t = j->taps + k;
                    int64_t id = od * G->st[0] + t->doff, ih = oh * G->st[1] + t->hoff;
                    if (id < 0 || id >= G->is[0] || ih < 0 || ih >= G->is[1])
                        continue;
                    const T *restrict srow = src + (id * G->is[1] + ih) * G->is[2] + t->off;
                    T *restrict arow = acc + k * G->os[2];
                    if (G->st[2] == 1)
                        for (int64_t ow = t->a; ow < t->b; ow++)
                            arow[ow] += grow[ow] * srow[ow];
                    else
                        for (int64_t ow = t->a; ow < t->b; ow++)
                            arow[ow] += grow[ow] * srow[ow * G->st[2]];
                }
            }
    }
    T *w = (T *)j->w + (gi * G->cb + o) * G->ksz;
    for (int64_t k = 0; k < G->ksz; k++)
        w[k] = CAT(cpu_psum_seq, SUF)(FN(leaf), acc + k * G->os[2], 0, G->os[2]);
    free(acc);
}

static const cpu_item_fn FN(items)[] = {FN(conv_item), FN(convt_item), FN(gradw_item),
                                        FN(dw_conv_item), FN(dw_convt_item), FN(dw_gradw_item)};

#undef FN
#undef CAT
#undef CAT_
