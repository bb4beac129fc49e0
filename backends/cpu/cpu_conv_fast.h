/* conv's own vector kernels of one element type and instruction set,
 * included by cpu_conv.c with T float, SUF f and with T double, SUF d,
 * each with FAST_ISA 512 (AVX-512) and 256 (AVX2) (after the geometry
 * and the job; read the comments there first).
 *
 * Why: OpenBLAS's products at the shapes of a convolution's chunks (64 by
 * a few hundred positions by 576) ran at 140 GFLOP/s on one core of a Zen
 * 5 and at 90 on each of two at once, and the im2col before each copied
 * nine times the input; this kernel keeps 170 on each core.  With AVX2
 * (a Zen 3 of 2 cores, against OpenBLAS's Zen kernels) it is about as fast
 * as im2col and OpenBLAS on the ResNet block's 3x3 convolutions of 64
 * channels, and faster where OpenBLAS's products are thin or im2col's
 * copies dear: ResNet-18's convolutions 70-96 -> 59-60 ms a run, its
 * transposed ones 117-119 -> 73-74 (8x512x4x4: 20 -> 6 ms).
 *
 * How: an item is a block of R output rows of one sample and group (and,
 * with three spatial axes, of one output plane of depth).  Its input rows
 * are copied once into a scratch block laid out so that every tap reads
 * the positions in a row of output as one contiguous run: each channel's
 * rows, zero padded, split by phase (the padded row index modulo the
 * stride, and the column's), Wq columns a row; with three axes, that for
 * each tap of depth, from the input plane it reads (zeros where that is
 * padding).  Output position q = oh Wq + ow then reads tap (kd, kh, kw)
 * of channel c at q + koff[c, kd, kh, kw], the same offset for every
 * position, so the product
 *     out[o, q] = sum over k = (c, kd, kh, kw), in order, of W[o, k] x[q + koff[k]]
 * runs with the input as its own packed matrix and the kernel read in
 * place (a transposed convolution's flipped one too, through aoff):
 * MR output channels by NR positions of accumulators in registers, one
 * fused multiply-add per tap
 * in the order of k, then the Wq - OW columns that are not output (the
 * padded grid's) are dropped as the block is copied out, the bias added.
 * Each output element is one chain of multiply-adds over k in order,
 * whatever the item, block or thread: the same bits for any thread count. */

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)

/* Included once more for each instruction set, FAST_ISA 512 (AVX-512 F:
 * 32 vector registers of 64 bytes) or 256 (AVX2 and FMA: 16 of 32 bytes):
 * the same kernels at the width of the set, FAST_MR rows of the kernel
 * and FAST_GRADW_MO by FAST_GRADW_MK partial sums a call as many as its
 * registers hold.  Each element's chain of multiply-adds is the same at
 * either width (AVX2's blocks of taps go on from the sums in memory), so
 * a conv or conv_transpose that both run here gives the same bits on both;
 * conv_grad_w's partial sums are a vector's lanes, summed at the end, and
 * differ with the width (any one processor: the same bits always). */
#if FAST_ISA == 512
#define ISA z
#define FAST_TARGET __attribute__((target("avx512f")))
#define FAST_MR FAST_MR_Z
#define FAST_GRADW_MO FAST_GRADW_MO_Z
#define FAST_GRADW_MK FAST_GRADW_MK_Z
#else
#define ISA y
#define FAST_TARGET __attribute__((target("avx2,fma")))
#define FAST_MR FAST_MR_Y
#define FAST_GRADW_MO FAST_GRADW_MO_Y
#define FAST_GRADW_MK FAST_GRADW_MK_Y
#endif
#define FN(name) CAT(CAT(name, SUF), ISA)

#if FAST_ISA == 512 && SUF_IS_F
#define VEC __m512
#define LANES 16
#define VZERO _mm512_setzero_ps
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VSET1 _mm512_set1_ps
#define VFMA _mm512_fmadd_ps
#define VMASKLOAD(m, p) _mm512_maskz_loadu_ps((__mmask16)(m), p)
#define VMASKSTORE(p, m, v) _mm512_mask_storeu_ps(p, (__mmask16)(m), v)
#define VSUM _mm512_reduce_add_ps
#elif FAST_ISA == 512
#define VEC __m512d
#define LANES 8
#define VZERO _mm512_setzero_pd
#define VLOAD _mm512_loadu_pd
#define VSTORE _mm512_storeu_pd
#define VSET1 _mm512_set1_pd
#define VFMA _mm512_fmadd_pd
#define VMASKLOAD(m, p) _mm512_maskz_loadu_pd((__mmask8)(m), p)
#define VMASKSTORE(p, m, v) _mm512_mask_storeu_pd(p, (__mmask8)(m), v)
#define VSUM _mm512_reduce_add_pd
#elif SUF_IS_F
#define VEC __m256
#define LANES 8
#define VZERO _mm256_setzero_ps
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VSET1 _mm256_set1_ps
#define VFMA _mm256_fmadd_ps
/* the masks are always the first lanes (m = 2^k - 1): lanes below k */
FAST_TARGET static inline __m256i FN(lanes_below)(unsigned m)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(__builtin_popcount(m)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define VMASKLOAD(m, p) _mm256_maskload_ps(p, FN(lanes_below)(m))
#define VMASKSTORE(p, m, v) _mm256_maskstore_ps(p, FN(lanes_below)(m), v)
/* the lanes summed in one fixed order: halves, then pairs */
FAST_TARGET static inline float FN(vsum)(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
#define VSUM FN(vsum)
#else
#define VEC __m256d
#define LANES 4
#define VZERO _mm256_setzero_pd
#define VLOAD _mm256_loadu_pd
#define VSTORE _mm256_storeu_pd
#define VSET1 _mm256_set1_pd
#define VFMA _mm256_fmadd_pd
FAST_TARGET static inline __m256i FN(lanes_below)(unsigned m)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(__builtin_popcount(m)), _mm256_setr_epi64x(0, 1, 2, 3));
}
#define VMASKLOAD(m, p) _mm256_maskload_pd(p, FN(lanes_below)(m))
#define VMASKSTORE(p, m, v) _mm256_maskstore_pd(p, FN(lanes_below)(m), v)
FAST_TARGET static inline double FN(vsum)(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
#define VSUM FN(vsum)
#endif

/* mr (<= FAST_MR) rows of C[., 0..2 LANES) = the kernel's rows i (at
 * A + i lda, tap k at aoff[k]) times the positions at B + koff[k],
 * k = 0..K-1 in order. */
FAST_TARGET static inline __attribute__((always_inline)) void FN(fast_mk)(int mr, bool load, int64_t K,
                                                                          const T *restrict A, int64_t lda,
                                                                          const int32_t *restrict aoff,
                                                                          const T *restrict B,
                                                                          const int32_t *restrict koff,
                                                                          T *restrict C, int64_t ldc)
{
    VEC c0[FAST_MR], c1[FAST_MR];
    const T *ar[FAST_MR];
#pragma GCC unroll 8
    for (int i = 0; i < FAST_MR; i++)
        if (i < mr) {
            c0[i] = load ? VLOAD(C + i * ldc) : VZERO();
            c1[i] = load ? VLOAD(C + i * ldc + LANES) : VZERO();
            ar[i] = A + i * lda;
        }
    for (int64_t k = 0; k < K; k++) {
        const T *b = B + koff[k];
        int64_t ao = aoff[k];
        VEC b0 = VLOAD(b), b1 = VLOAD(b + LANES);
#pragma GCC unroll 8
        for (int i = 0; i < FAST_MR; i++)
            if (i < mr) {
                VEC a = VSET1(ar[i][ao]);
                c0[i] = VFMA(a, b0, c0[i]);
                c1[i] = VFMA(a, b1, c1[i]);
            }
    }
#pragma GCC unroll 8
    for (int i = 0; i < FAST_MR; i++)
        if (i < mr) {
            VSTORE(C + i * ldc, c0[i]);
            VSTORE(C + i * ldc + LANES, c1[i]);
        }
}

/* One kernel per row count, each with its registers fixed at compile time;
 * the _c ones go on from the sums in C (the column path's later blocks of
 * taps: each element's chain of multiply-adds goes on where it stopped). */
#define FAST_MK(m)                                                                                            \
    FAST_TARGET static void FN(fast_mk##m)(int64_t K, const T *A, int64_t lda, const int32_t *aoff, const T *B, \
                                           const int32_t *koff, T *C, int64_t ldc)                            \
    {                                                                                                         \
        FN(fast_mk)(m, false, K, A, lda, aoff, B, koff, C, ldc);                                              \
    }                                                                                                         \
    FAST_TARGET static void FN(fast_mkc##m)(int64_t K, const T *A, int64_t lda, const int32_t *aoff,          \
                                            const T *B, const int32_t *koff, T *C, int64_t ldc)               \
    {                                                                                                         \
        FN(fast_mk)(m, true, K, A, lda, aoff, B, koff, C, ldc);                                               \
    }
FAST_MK(1)
FAST_MK(2)
FAST_MK(3)
FAST_MK(4)
FAST_MK(5)
FAST_MK(6)
#if FAST_MR > 6
FAST_MK(7)
FAST_MK(8)
#endif
#undef FAST_MK

typedef void (*FN(fast_mk_fn))(int64_t, const T *, int64_t, const int32_t *, const T *, const int32_t *, T *,
                               int64_t);
#if FAST_MR > 6
#define FAST_MK_MORE(c) , FN(fast_mk##c##7), FN(fast_mk##c##8)
#else
#define FAST_MK_MORE(c)
#endif
static const FN(fast_mk_fn) FN(fast_mks)[FAST_MR + 1] = {NULL,         FN(fast_mk1), FN(fast_mk2), FN(fast_mk3),
                                                         FN(fast_mk4), FN(fast_mk5), FN(fast_mk6) FAST_MK_MORE()};
static const FN(fast_mk_fn) FN(fast_mkcs)[FAST_MR + 1] = {NULL,          FN(fast_mkc1), FN(fast_mkc2), FN(fast_mkc3),
                                                          FN(fast_mkc4), FN(fast_mkc5), FN(fast_mkc6) FAST_MK_MORE(c)};
#undef FAST_MK_MORE

/* One scratch row of n: the input row srow (or none past the input's
 * rows) at columns j st + off, zero where that is outside it; [a, b) the
 * columns inside it (valid(off, st, is2, n), the same for every row of
 * a phase: worked out once a phase, not once a row).  Stride 2 has a
 * loop of its own, which the compiler turns into vector shuffles. */
FAST_TARGET static inline void FN(fast_row)(T *restrict row, const T *restrict srow, int64_t off, int64_t st,
                                            int64_t a, int64_t b, int64_t n)
{
    if (!srow)
        a = b = 0;
    for (int64_t j = 0; j < a; j++)
        row[j] = 0;
    if (st == 1)
        for (int64_t j = a; j < b; j++)
            row[j] = srow[j + off];
    else if (st == 2)
        for (int64_t j = a; j < b; j++)
            row[j] = srow[2 * j + off];
    else
        for (int64_t j = a; j < b; j++)
            row[j] = srow[j * st + off];
    for (int64_t j = b; j < n; j++) /* valid() gives a <= b */
        row[j] = 0;
}

/* The input plane of depth that output plane od's depth tap kd reads
 * (a channel's, at src), or none where that is padding. */
static const T *FN(depth_plane)(const geom *G, const T *src, int64_t od, int64_t kd)
{
    int64_t id = od * G->st[0] - G->lo[0] + kd * G->dl[0];
    return id < 0 || id >= G->is[0] ? NULL : src + id * G->is[1] * G->is[2];
}

/* The item's input rows into the scratch block (see the top): channel c
 * (of c0..c1, at c - c0), depth tap kd of output plane od, phase (ph,
 * pw), row r, column j holds the input at padded row (r0 + r) st1 + ph,
 * padded column j st2 + pw, zero outside the input; then zeros to
 * xs_len. */
FAST_TARGET static void FN(fast_fill)(const geom *G, const fast_plan *f, const T *restrict src, int64_t c0,
                                      int64_t c1, int64_t od, int64_t r0, T *restrict xs)
{
    int64_t s1 = G->st[1], s2 = G->st[2];
    for (int64_t c = c0; c < c1; c++)
        for (int64_t kd = 0; kd < G->k[0]; kd++) {
            const T *plane = FN(depth_plane)(G, src + c * G->isz, od, kd);
            for (int64_t ph = 0; ph < s1; ph++)
                for (int64_t pw = 0; pw < s2; pw++) {
                    int64_t a, b;
                    valid(pw - G->lo[2], s2, G->is[2], f->wq, &a, &b);
                    for (int64_t r = 0; r < f->rr; r++) {
                        int64_t ih = (r0 + r) * s1 + ph - G->lo[1];
                        FN(fast_row)(xs + (c - c0) * f->chan + kd * f->plane + ((ph * s2 + pw) * f->rr + r) * f->wq,
                                     !plane || ih < 0 || ih >= G->is[1] ? NULL : plane + ih * G->is[2], pw - G->lo[2],
                                     s2, a, b, f->wq);
                    }
                }
        }
    /* the tail the last positions' junk columns read */
    memset(xs + (c1 - c0) * f->chan, 0, sizeof(T) * (size_t)(f->xs_len - (c1 - c0) * f->chan));
}

FAST_TARGET static void FN(fast_conv_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    const fast_plan *f = &j->fast;
    int64_t rb = item % f->nrb, od = item / f->nrb % G->os[0], ng = item / f->nrb / G->os[0], gi = ng % G->groups;
    int64_t r0 = rb * f->R, R1 = G->os[1] - r0 < f->R ? G->os[1] - r0 : f->R;
    int64_t q1 = R1 * f->wq, qr = (q1 + 2 * LANES - 1) / (2 * LANES) * (2 * LANES);
    T *xs = (T *)scratch(j, sizeof(T) * (size_t)(f->xs_len + f->nmb * FAST_MR * f->qs));
    if (!xs)
        return;
    T *cs = xs + f->xs_len;
    FN(fast_fill)(G, f, (const T *)j->ins + ng * G->ca * G->isz, 0, G->ca, od, r0, xs);
    const T *wg = (const T *)j->w + f->w0 + gi * f->wg; /* the group's first row */
#if FAST_ISA == 512
    for (int64_t mb = 0; mb < f->nmb; mb++) {
        int64_t mr = G->cb - mb * FAST_MR < FAST_MR ? G->cb - mb * FAST_MR : FAST_MR;
        FN(fast_mk_fn) mk = FN(fast_mks)[mr];
        for (int64_t q = 0; q < qr; q += 2 * LANES)
            mk(G->rows, wg + mb * FAST_MR * f->wr, f->wr, f->aoff, xs + q, f->koff, cs + mb * FAST_MR * f->qs + q,
               f->qs);
    }
#else
    for (int64_t q = 0; q < qr; q += 2 * LANES)
        for (int64_t k0 = 0; k0 < G->rows; k0 += FAST_TAPS_Y) {
            int64_t nk = G->rows - k0 < FAST_TAPS_Y ? G->rows - k0 : FAST_TAPS_Y;
            for (int64_t mb = 0; mb < f->nmb; mb++) {
                int64_t mr = G->cb - mb * FAST_MR < FAST_MR ? G->cb - mb * FAST_MR : FAST_MR;
                (k0 ? FN(fast_mkcs) : FN(fast_mks))[mr](nk, wg + mb * FAST_MR * f->wr, f->wr, f->aoff + k0, xs + q,
                                                        f->koff + k0, cs + mb * FAST_MR * f->qs + q, f->qs);
            }
        }
#endif
    T *dst = (T *)j->outs + ng * G->cb * G->osz + (od * G->os[1] + r0) * G->os[2];
    for (int64_t o = 0; o < G->cb; o++) {
        T bias = j->bias ? ((const T *)j->bias)[gi * G->cb + o] : 0;
        for (int64_t r = 0; r < R1; r++) {
            T *orow = dst + o * G->osz + r * G->os[2];
            const T *crow = cs + o * f->qs + r * f->wq;
            if (j->bias)
                for (int64_t ow = 0; ow < G->os[2]; ow++)
                    orow[ow] = crow[ow] + bias;
            else
                memcpy(orow, crow, sizeof(T) * (size_t)G->os[2]);
        }
    }
    free(xs);
}

/* ---------- conv over columns ----------
 * Where a sample has few output positions (the padded grid of the path
 * above then mostly junk, and the kernel read again for every sample),
 * the positions of every sample are one row of columns instead:
 * cols[g][k][p] for tap k = (c, kh, kw) and position p = n OSZ + q, zero
 * where the tap reads padding and past N OSZ (to a whole block of 2
 * LANES).  The product runs with the same kernels, koff[k] = k P: each
 * output element is the same chain of multiply-adds over k in order as
 * above (a zero read as a zero), cut into blocks of taps whose sums go
 * on from memory: the same bits. */
/* A sample's columns of one group: each channel's plane padded once (hp
 * by wp, the part the taps read), then each tap's rows of OW cut from it:
 * runs of a few elements, moved as masked vectors (stride 1); the last
 * sample's item zeroes the tail past N OSZ too. */
FAST_TARGET static void FN(fast_cols_fill)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    const fast_plan *f = &j->fast;
    int64_t n = item / G->groups, gi = item % G->groups, ow2 = G->os[2], s1 = G->st[1], s2 = G->st[2];
    int64_t hp = (G->os[1] - 1) * s1 + (G->k[1] - 1) * G->dl[1] + 1;
    int64_t wp = (ow2 - 1) * s2 + (G->k[2] - 1) * G->dl[2] + 1;
    T *xp = (T *)scratch(j, sizeof(T) * (size_t)(hp * wp + LANES));
    if (!xp)
        return;
    const T *src = (const T *)j->ins + (n * G->groups + gi) * G->ca * G->isz;
    T *cols = (T *)f->cols + gi * G->rows * f->P;
    int64_t va, vb;
    valid(-G->lo[2], 1, G->is[2], wp, &va, &vb);
    for (int64_t c = 0; c < G->ca; c++) {
        for (int64_t r = 0; r < hp; r++) {
            int64_t ih = r - G->lo[1];
            FN(fast_row)(xp + r * wp, ih < 0 || ih >= G->is[1] ? NULL : src + c * G->isz + ih * G->is[2], -G->lo[2], 1,
                         va, vb, wp);
        }
        for (int64_t kh = 0; kh < G->k[1]; kh++)
            for (int64_t kw = 0; kw < G->k[2]; kw++) {
                T *row = cols + ((c * G->k[1] + kh) * G->k[2] + kw) * f->P;
                T *d = row + n * G->osz;
                const T *sp = xp + kh * G->dl[1] * wp + kw * G->dl[2];
                for (int64_t oh = 0; oh < G->os[1]; oh++, d += ow2, sp += s1 * wp) {
                    if (s2 == 1)
                        for (int64_t ow = 0; ow < ow2; ow += LANES) {
                            unsigned m = ow2 - ow >= LANES ? (1u << LANES) - 1u : (1u << (ow2 - ow)) - 1u;
                            VMASKSTORE(d + ow, m, VMASKLOAD(m, sp + ow));
                        }
                    else
                        for (int64_t ow = 0; ow < ow2; ow++)
                            d[ow] = sp[ow * s2];
                }
                if (n == G->n - 1)
                    for (int64_t p = G->n * G->osz; p < f->P; p++)
                        row[p] = 0;
            }
    }
    free(xp);
}

FAST_TARGET static void FN(fast_cols_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    const fast_plan *f = &j->fast;
    int64_t pb = item % f->npb, ob = item / f->npb % f->ncb, gi = item / f->npb / f->ncb;
    int64_t p0 = pb * f->pb, np = f->P - p0 < f->pb ? f->P - p0 : f->pb;
    int64_t o0 = ob * f->cbk, no = G->cb - o0 < f->cbk ? G->cb - o0 : f->cbk;
    T *cs = (T *)scratch(j, sizeof(T) * (size_t)(no * np));
    if (!cs)
        return;
    const T *cols = (const T *)f->cols + gi * G->rows * f->P + p0;
    const T *wg = (const T *)j->w + f->w0 + gi * f->wg + o0 * f->wr;
    for (int64_t k0 = 0; k0 < G->rows; k0 += f->kb) {
        int64_t nk = G->rows - k0 < f->kb ? G->rows - k0 : f->kb;
        for (int64_t q = 0; q < np; q += 2 * LANES)
            for (int64_t m0 = 0; m0 < no; m0 += FAST_MR) {
                int mr = (int)(no - m0 < FAST_MR ? no - m0 : FAST_MR);
                (k0 ? FN(fast_mkcs) : FN(fast_mks))[mr](nk, wg + m0 * f->wr, f->wr, f->aoff + k0, cols + q,
                                                        f->koff + k0, cs + m0 * np + q, np);
            }
    }
    /* out[n, g cb + o, p - n OSZ] for the block's positions p below N OSZ */
    int64_t pend = p0 + np < G->n * G->osz ? p0 + np : G->n * G->osz;
    for (int64_t o = 0; o < no; o++) {
        T bias = j->bias ? ((const T *)j->bias)[gi * G->cb + o0 + o] : 0;
        for (int64_t p = p0; p < pend;) {
            int64_t n = p / G->osz, q = p % G->osz, run = G->osz - q < pend - p ? G->osz - q : pend - p;
            T *dst = (T *)j->outs + ((n * G->groups + gi) * G->cb + o0 + o) * G->osz + q;
            const T *src = cs + o * np + (p - p0);
            if (j->bias)
                for (int64_t i = 0; i < run; i++)
                    dst[i] = src[i] + bias;
            else
                memcpy(dst, src, sizeof(T) * (size_t)run);
            p += run;
        }
    }
    free(cs);
}

/* ---------- conv_grad_w ----------
 * W[o, k] = sum over samples n and output positions p of
 * B[n, o, p] A[n, c, p + tap k], with the positions in vectors.  The
 * scratch block holds, for each channel c of the item's block and each
 * tap column kw, the input that column reads at every output position,
 * rows of OW (by phase of the padded row, as conv's): tap (kh, kw) then
 * reads the block's positions p = r OW + ow as one run at p + koff[k],
 * as B's own rows are laid out.  The item's partial sums
 * (FAST_GRADW_MO output channels by FAST_GRADW_MK taps a pass, a vector
 * of LANES each) run over the blocks of samples, the blocks of rows, the
 * samples of a block and the vectors of positions in order, the last vector masked (its lanes past the
 * block add nothing: both operands load as zero), and each W[o, k] is
 * then its vector's lanes summed in one fixed order. */
FAST_TARGET static void FN(fast_fill_cols)(const geom *G, const fast_plan *f, const T *restrict src, int64_t c0,
                                           int64_t c1, int64_t od, int64_t r0, T *restrict xs)
{
    int64_t s1 = G->st[1], s2 = G->st[2], ow2 = G->os[2];
    for (int64_t c = c0; c < c1; c++)
        for (int64_t kd = 0; kd < G->k[0]; kd++) {
            const T *plane = FN(depth_plane)(G, src + c * G->isz, od, kd);
            for (int64_t kw = 0; kw < G->k[2]; kw++) {
                int64_t a, b;
                valid(kw * G->dl[2] - G->lo[2], s2, G->is[2], ow2, &a, &b);
                for (int64_t ph = 0; ph < s1; ph++)
                    for (int64_t r = 0; r < f->rr; r++) {
                        int64_t ih = (r0 + r) * s1 + ph - G->lo[1];
                        FN(fast_row)(xs + (c - c0) * f->chan + kd * f->plane + ((kw * s1 + ph) * f->rr + r) * ow2,
                                     !plane || ih < 0 || ih >= G->is[1] ? NULL : plane + ih * G->is[2],
                                     kw * G->dl[2] - G->lo[2], s2, a, b, ow2);
                    }
            }
        }
}

FAST_TARGET static void FN(fast_gradw_item)(void *ctx, int64_t item)
{
    job *j = ctx;
    const geom *G = &j->g;
    const fast_plan *f = &j->fast;
    int64_t ob = item % f->noblk, blk = item / f->noblk % f->nblk, gi = item / f->noblk / f->nblk;
    int64_t c0 = blk * f->cblk, c1 = G->ca - c0 < f->cblk ? G->ca : c0 + f->cblk;
    int64_t o0 = ob * f->oblk, no = G->cb - o0 < f->oblk ? G->cb - o0 : f->oblk;
    int64_t k0 = c0 * G->ksz, nk = (c1 - c0) * G->ksz, ow2 = G->os[2];
    T *xs = (T *)scratch(j, sizeof(T) * (size_t)(f->nbk * f->xs_len + no * nk * LANES)); /* xs_len 0: direct */
    if (!xs)
        return;
    T *acc = xs + f->nbk * f->xs_len;
    memset(acc, 0, sizeof(T) * (size_t)(no * nk * LANES));
    int64_t xstep = (G->groups * G->ca) * G->isz, gstep = (G->groups * G->cb) * G->osz; /* a sample */
    /* rows of output a plane of depth (pointwise: every plane's, one pass) */
    int64_t orows = f->direct ? G->os[0] * G->os[1] : G->os[1];
    for (int64_t n0 = 0; n0 < G->n; n0 += f->nbk) {
        int64_t nn = G->n - n0 < f->nbk ? G->n - n0 : f->nbk;
        const T *a = (const T *)j->ins + (n0 * G->groups + gi) * G->ca * G->isz;
        for (int64_t od = 0; od < f->nod; od++) {
            for (int64_t rb = 0; rb < f->nrb; rb++) {
                const T *b = (const T *)j->outs + ((n0 * G->groups + gi) * G->cb + o0) * G->osz + od * G->os[1] * ow2;
                int64_t r0 = rb * f->R, np = (orows - r0 < f->R ? orows - r0 : f->R) * ow2;
                int64_t full = np / LANES * LANES;
                unsigned tail = (1u << (np - full)) - 1u;
                /* sample s of the block: its scratch at s xs_len (direct: its input at s xstep) */
                int64_t xs_s = f->direct ? xstep : f->xs_len;
                if (!f->direct)
                    for (int64_t sn = 0; sn < nn; sn++)
                        FN(fast_fill_cols)(G, f, a + sn * xstep, c0, c1, od, r0, xs + sn * f->xs_len);
                for (int64_t kt = 0; kt < nk; kt += FAST_GRADW_MK) { /* the taps' runs stay in L1 */
                    const T *xp[FAST_GRADW_MK];
                    for (int q = 0; q < FAST_GRADW_MK; q++)
                        xp[q] = f->direct ? a + (k0 + (kt + q < nk ? kt + q : nk - 1)) * G->isz + r0 * ow2
                                          : xs + (f->koff[k0 + (kt + q < nk ? kt + q : nk - 1)] - c0 * f->chan);
                    for (int64_t ot = 0; ot < no; ot += FAST_GRADW_MO) {
                        const T *gp[FAST_GRADW_MO]; /* past the block: its last row again, not stored */
                        int64_t ai[FAST_GRADW_MO][FAST_GRADW_MK];
                        for (int i = 0; i < FAST_GRADW_MO; i++) {
                            int64_t o = ot + i < no ? ot + i : no - 1;
                            gp[i] = b + o * G->osz + r0 * ow2;
                            for (int q = 0; q < FAST_GRADW_MK; q++)
                                ai[i][q] = (o * nk + (kt + q < nk ? kt + q : nk - 1)) * LANES;
                        }
                        VEC s[FAST_GRADW_MO][FAST_GRADW_MK];
    #pragma GCC unroll 4
                        for (int i = 0; i < FAST_GRADW_MO; i++)
    #pragma GCC unroll 6
                            for (int q = 0; q < FAST_GRADW_MK; q++)
                                s[i][q] = VLOAD(acc + ai[i][q]);
                        for (int64_t sn = 0; sn < nn; sn++) {
                            int64_t xo = sn * xs_s, go = sn * gstep;
                            for (int64_t p = 0; p < full; p += LANES) {
                                VEC gv[FAST_GRADW_MO];
    #pragma GCC unroll 4
                                for (int i = 0; i < FAST_GRADW_MO; i++)
                                    gv[i] = VLOAD(gp[i] + go + p);
    #pragma GCC unroll 6
                                for (int q = 0; q < FAST_GRADW_MK; q++) {
                                    VEC xv = VLOAD(xp[q] + xo + p);
    #pragma GCC unroll 4
                                    for (int i = 0; i < FAST_GRADW_MO; i++)
                                        s[i][q] = VFMA(gv[i], xv, s[i][q]);
                                }
                            }
                            if (tail) {
                                VEC gv[FAST_GRADW_MO];
    #pragma GCC unroll 4
                                for (int i = 0; i < FAST_GRADW_MO; i++)
                                    gv[i] = VMASKLOAD(tail, gp[i] + go + full);
    #pragma GCC unroll 6
                                for (int q = 0; q < FAST_GRADW_MK; q++) {
                                    VEC xv = VMASKLOAD(tail, xp[q] + xo + full);
    #pragma GCC unroll 4
                                    for (int i = 0; i < FAST_GRADW_MO; i++)
                                        s[i][q] = VFMA(gv[i], xv, s[i][q]);
                                }
                            }
                        }
    #pragma GCC unroll 4
                        for (int i = 0; i < FAST_GRADW_MO; i++)
    #pragma GCC unroll 6
                            for (int q = 0; q < FAST_GRADW_MK; q++)
                                if (ot + i < no && kt + q < nk)
                                    VSTORE(acc + ai[i][q], s[i][q]);
                    }
                }
            }
        }
    }
    T *w = (T *)j->w + (gi * G->cb + o0) * G->rows + k0;
    for (int64_t o = 0; o < no; o++)
        for (int64_t k = 0; k < nk; k++)
            w[o * G->rows + k] = VSUM(VLOAD(acc + (o * nk + k) * LANES));
    free(xs);
}

#undef VEC
#undef LANES
#undef VZERO
#undef VLOAD
#undef VSTORE
#undef VSET1
#undef VFMA
#undef VMASKLOAD
#undef VMASKSTORE
#undef VSUM
#undef ISA
#undef FAST_TARGET
#undef FAST_MR
#undef FAST_GRADW_MO
#undef FAST_GRADW_MK
#undef FN
#undef CAT
#undef CAT_
