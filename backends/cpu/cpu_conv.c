/* CPU kernels of convolution (nn.md): conv, conv_transpose and the weight
 * gradient conv_grad_w, all three seen as one convolution of an in-side
 * tensor A [N, groups*ca, *is] into an out-side tensor B [N, groups*cb,
 * *os] with a weight W [groups*cb, ca, *k]:
 *     B[n, g cb + o, p] = sum over c, tap of W[g cb + o, c, tap] A[n, g ca + c, p*stride - pad_lo + tap*dilation]
 * conv computes B from A and W (A is x), conv_transpose A from B and W (B
 * is its x, A its output: the transpose), conv_grad_w W from A and B.
 * Spatial axes are taken as three, leading ones of size 1.
 *
 * The ways, as Caffe and ggml do them, around OpenBLAS gemm on the
 * calling thread (blas.h):
 *   conv:           B[n, g] = W[g] im2col(A[n, g]), by chunks of positions;
 *   conv_transpose: A[n, g] = col2im(W[g]^T B[n, g]), by blocks of channels
 *                   (chunks of positions inside); with stride 1, a conv of
 *                   B with the kernel flipped (as_conv below);
 *   conv_grad_w:    W[g] = sum over n, chunks of B[n, g] im2col(A[n, g])^T,
 *                   by blocks of W, samples and chunks in order;
 * a 1x1 kernel with stride 1 and no padding skips im2col (A is its own
 * column matrix), and one in-side channel per group (depthwise) runs
 * direct kernels instead, a row of taps at a time.
 *
 * Where the processor has AVX-512 (or AVX2 and FMA), tl's own kernels
 * run instead (cpu_conv_fast.h, fast_plan_make), neither im2col nor
 * OpenBLAS: conv, conv_transpose with stride 1 (as a conv, the kernel
 * read flipped in place) and conv_grad_w over 512 positions a sample and
 * more, or pointwise; one, two or three spatial axes (a 3-d one an
 * output plane of depth at a time, reading an input plane a tap of
 * depth).  (A strided conv_transpose run as one such conv per
 * phase of its output was tried: no faster than col2im here.)
 *
 * Threads: the work is cut into items (chunks, blocks, planes) by the
 * shapes alone; each item is computed by one thread in one order and
 * writes its own part of the result, so the bits never depend on the
 * number of threads (threads.h); OpenBLAS's f32 bits depend on the cut,
 * which is why the cut never follows the threads. */
#define _DEFAULT_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cpu.h"
#include "cpu_features.h"
#include "psum.h"
#include "threads.h"

typedef struct geom {
    int64_t n, groups, ca, cb;                       /* channels per group */
    int64_t is[3], os[3], k[3], st[3], dl[3], lo[3]; /* spatial, three axes */
    int64_t isz, osz, ksz, rows;                     /* products; rows = ca ksz */
} geom;

/* A tap of the kernel: the input row it reads from output row (od, oh)
 * is (od*stride0 + doff, oh*stride1 + hoff), element ow*stride2 + off of
 * it, valid for ow in [a, b). */
typedef struct tap {
    int64_t doff, hoff, off, a, b;
} tap;

/* conv's own kernels' path (cpu_conv_fast.h): the item's scratch block
 * and the packed kernel. */
typedef struct fast_plan {
    int isa;            /* the kernels': 512 (AVX-512) or 256 (AVX2) */
    int64_t mr, gmo;    /* their FAST_MR and FAST_GRADW_MO */
    int64_t R, nrb;     /* output rows per item, items per sample and group */
    int64_t rr, wq;     /* scratch rows per phase, columns per row */
    int64_t plane;      /* scratch elements per tap of depth (a 3-d kernel's) */
    int64_t chan;       /* scratch elements per channel: k[0] planes */
    int64_t nod;        /* conv_grad_w: output planes of depth a pass runs over one at a time */
    int64_t xs_len, qs; /* scratch input elements (tail included); output stride */
    int64_t nmb;        /* conv: blocks of mr output channels */
    int64_t cblk, nblk; /* conv_grad_w: in-side channels an item, blocks of them */
    int64_t oblk, noblk; /* conv_grad_w: out-side channels an item, blocks of them */
    int64_t nbk;        /* conv_grad_w: samples a pass (scratch of xs_len each) */
    int32_t *koff;      /* rows = ca ksz offsets into the scratch */
    int32_t *aoff;      /* conv: rows offsets into a row of the kernel */
    int64_t w0, wg, wr; /* conv: the kernel's row o of group g at w0 + g wg + o wr */
    bool direct;        /* conv_grad_w pointwise: no scratch, no koff */
    /* conv over columns (cpu_conv_fast.h): every sample's positions in one
     * row of P a tap and group; items of cbk out-side channels by pb
     * positions, the taps by blocks of kb */
    bool by_cols;
    void *cols;
    int64_t P, pb, npb, cbk, ncb, kb;
} fast_plan;

typedef struct job {
    geom g;
    const tap *taps;       /* the direct kernels': ksz of them */
    const cpu_blas *blas;
    void *ins, *outs, *w;  /* A, B, W: the one being computed is written */
    const void *bias;      /* conv: per out-side channel; conv_transpose: in-side */
    bool pointwise;        /* no im2col: 1x1, stride 1, no padding */
    bool over;             /* conv_transpose written over its input (pointwise): each item copies its part first */
    int64_t chunk, nchunks; /* conv: positions; conv_transpose: channels */
    int64_t pchunk;         /* conv_transpose: positions */
    int64_t cblk, nblk;    /* conv_grad_w: in-side channels per item, blocks per group */
    int64_t oblk, noblk;   /* conv_grad_w: out-side channels per item, blocks per group */
    fast_plan fast;        /* conv on AVX-512 */
    atomic_bool failed;    /* scratch could not be had */
} job;

/* The ow of [0, out) whose index ow*st + off falls in [0, in): [*a, *b). */
static void valid(int64_t off, int64_t st, int64_t in, int64_t out, int64_t *a, int64_t *b)
{
    int64_t lo = off >= 0 ? 0 : (-off + st - 1) / st;
    int64_t hi = in - 1 - off < 0 ? 0 : (in - 1 - off) / st + 1;
    hi = hi < out ? hi : out;
    *a = lo < hi ? lo : hi;
    *b = hi;
}

static void *scratch(job *j, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        atomic_store(&j->failed, true);
    return p;
}

/* conv's own kernels (cpu_conv_fast.h), AVX-512 and AVX2, where the
 * compiler can build them; which one the processor runs is decided at
 * run time (fast_isa).  Rows of the kernel a call, and conv_grad_w's
 * output channels by taps a call, as many as each set's registers hold
 * (AVX2's 16: 6 rows by 2 vectors of sums, 3 channels by 4 taps). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_FAST 1
#define FAST_MR_Z 8
#define FAST_GRADW_MO_Z 4
#define FAST_MR_Y 6
#define FAST_GRADW_MO_Y 3
#define FAST_GRADW_MK_Z 6
#define FAST_GRADW_MK_Y 4
#define FAST_GRADW_ROWS_Y 256
/* AVX2's conv: taps a block, each position block's 192 rows of its
 * input (12 KiB of f32) read by every block of the kernel's rows while
 * they are in the first-level cache */
#define FAST_TAPS_Y 192
#else
#define HAVE_FAST 0
#endif

/* each element type's kernels: im2col and direct (cpu_conv_t.h), AVX-512
 * and AVX2 */
#define T float
#define SUF f
#define SUF_IS_F 1
#include "cpu_conv_t.h"
#if HAVE_FAST
#define FAST_ISA 512
#include "cpu_conv_fast.h"
#undef FAST_ISA
#define FAST_ISA 256
#include "cpu_conv_fast.h"
#undef FAST_ISA
#endif
#undef T
#undef SUF
#undef SUF_IS_F
#define T double
#define SUF d
#define SUF_IS_F 0
#include "cpu_conv_t.h"
#if HAVE_FAST
#define FAST_ISA 512
#include "cpu_conv_fast.h"
#undef FAST_ISA
#define FAST_ISA 256
#include "cpu_conv_fast.h"
#undef FAST_ISA
#endif
#undef T
#undef SUF
#undef SUF_IS_F

#if HAVE_FAST
/* the own kernels by set (AVX-512, AVX2), element type (f32, f64), kind */
enum { F_CONV, F_GRADW, F_COLS_FILL, F_COLS };
static const cpu_item_fn fast_fns[2][2][4] = {
    {{fast_conv_item_f_z, fast_gradw_item_f_z, fast_cols_fill_f_z, fast_cols_item_f_z},
     {fast_conv_item_d_z, fast_gradw_item_d_z, fast_cols_fill_d_z, fast_cols_item_d_z}},
    {{fast_conv_item_f_y, fast_gradw_item_f_y, fast_cols_fill_f_y, fast_cols_item_f_y},
     {fast_conv_item_d_y, fast_gradw_item_d_y, fast_cols_fill_d_y, fast_cols_item_d_y}}};

static cpu_item_fn fast_fn(int isa, tl_dtype dt, int kind) { return fast_fns[isa != 512][dt != TL_F32][kind]; }
#endif

/* Scratch of about this many bytes per item (an im2col chunk stays in the
 * second-level cache while gemm packs it). */
#define CHUNK_BYTES (1 << 20)
/* conv_grad_w's blocks: about this many items over the groups. */
#define GRADW_ITEMS 8
#define GRADW_COLS 64
#define GRADW_ROWS 16
/* the direct kernels keep ksz * ow partial sums */
#define DIRECT_ACC (1 << 16)
#define MIN_FLOPS_PER_THREAD (1 << 22)

enum { K_CONV, K_CONVT, K_GRADW, K_DW = 3, K_FAST = 6, K_FAST_GRADW, K_FAST_COLS };

/* The geometry from the in-side and out-side shapes and the normalised
 * attributes. */
static geom make_geom(const int64_t *in_shape, const int64_t *out_shape, int ndim, int64_t ca_total,
                      int64_t cb_total, const tl_attrs *a)
{
    geom G = {.n = in_shape[0], .groups = a->groups};
    G.ca = ca_total / a->groups;
    G.cb = cb_total / a->groups;
    int d = ndim - 2, lead = 3 - d;
    for (int i = 0; i < 3; i++) {
        bool sp = i >= lead;
        int s = i - lead;
        G.is[i] = sp ? in_shape[2 + s] : 1;
        G.os[i] = sp ? out_shape[2 + s] : 1;
        G.k[i] = sp ? a->kernel[s] : 1;
        G.st[i] = sp ? a->stride[s] : 1;
        G.dl[i] = sp ? a->dilation[s] : 1;
        G.lo[i] = sp ? a->pad_lo[s] : 0;
    }
    G.isz = G.is[0] * G.is[1] * G.is[2];
    G.osz = G.os[0] * G.os[1] * G.os[2];
    G.ksz = G.k[0] * G.k[1] * G.k[2];
    G.rows = G.ca * G.ksz;
    return G;
}

static bool is_pointwise(const tl_attrs *a)
{
    for (int i = 0; i < a->nsp; i++)
        if (a->kernel[i] != 1 || a->stride[i] != 1 || a->pad_lo[i] || a->pad_hi[i])
            return false;
    return true;
}

/* A transposed convolution with stride 1 is a convolution of its input
 * with the kernel flipped and its channel axes swapped, padded by
 * dilation*(K-1) - pad_lo at the start: an im2col and one gemm with the
 * long sum (the out-side channels times the taps) instead of a gemm with
 * the short one and col2im. */
static bool unit_stride(const geom *G) { return G->st[0] == 1 && G->st[1] == 1 && G->st[2] == 1; }

static geom as_conv(const geom *G)
{
    geom c = *G;
    c.ca = G->cb;
    c.cb = G->ca;
    for (int i = 0; i < 3; i++) {
        c.is[i] = G->os[i];
        c.os[i] = G->is[i];
        c.lo[i] = G->dl[i] * (G->k[i] - 1) - G->lo[i];
    }
    c.isz = G->osz;
    c.osz = G->isz;
    c.rows = c.ca * c.ksz;
    return c;
}

/* W'[g ca + c, o, K-1-tap] = W[g cb + o, c, tap] */
static void *flip_weight(const geom *G, const void *w, size_t es, tl_status *st)
{
    int64_t n = G->groups * G->ca * G->cb * G->ksz;
    char *f = tl_malloc((size_t)n, es, "a flipped convolution kernel", st);
    if (!f)
        return NULL;
    for (int64_t g = 0; g < G->groups; g++)
        for (int64_t o = 0; o < G->cb; o++)
            for (int64_t c = 0; c < G->ca; c++)
                for (int64_t k = 0; k < G->ksz; k++) {
                    int64_t from = ((g * G->cb + o) * G->ca + c) * G->ksz + k;
                    int64_t to = ((g * G->ca + c) * G->cb + o) * G->ksz + (G->ksz - 1 - k);
                    memcpy(f + to * (int64_t)es, (const char *)w + from * (int64_t)es, es);
                }
    return f;
}

static int threads_for(double flops)
{
    double by_work = flops / MIN_FLOPS_PER_THREAD;
    int n = cpu_nthreads();
    return by_work < n ? (by_work < 1 ? 1 : (int)by_work) : n;
}

/* the columns ways (conv's and conv_grad_w's, below) unless TL_CONV=grid
 * asks for the padded grid's and the im2col path's alone (to compare
 * them; read at each call, so a test can run both) */
static bool columns_usable(void)
{
    const char *e = getenv("TL_CONV");
    return !(e && !strcmp(e, "grid"));
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* conv's own kernels: 512 (AVX-512) where the processor has AVX-512 F
 * (and the OS saves its registers), else 256 (AVX2) where it has AVX2
 * and FMA, else 0: im2col and OpenBLAS.  TL_CONV=blas asks for im2col
 * and OpenBLAS everywhere, TL_CONV=avx2 for the AVX2 kernels where the
 * processor has AVX-512 too (to compare the ways, or test each). */
static int fast_isa(void)
{
#if HAVE_FAST
    static _Atomic int isa; /* 0 not yet read, else the set, -1 none */
    int u = atomic_load_explicit(&isa, memory_order_relaxed);
    if (!u) {
        cpu_features f;
        cpu_features_read(&f);
        const char *env = getenv("TL_CONV");
        bool y = f.avx2 && f.fma && f.os_ymm, z = y && f.avx512f && f.os_zmm;
        u = env && !strcmp(env, "blas") ? -1 : z && !(env && !strcmp(env, "avx2")) ? 512 : y ? 256 : -1;
        atomic_store_explicit(&isa, u, memory_order_relaxed);
    }
    return u > 0 ? u : 0;
#else
    return 0;
#endif
}

static bool fast_usable(void) { return fast_isa() != 0; }

/* The geometries the own kernels take: f32 or f64, something to
 * compute; one, two or three spatial axes (the depth of a 3-d one read a
 * plane of input a tap of it, see cpu_conv_fast.h). */
static bool fast_takes(const geom *G, tl_dtype dt)
{
    return fast_usable() && (dt == TL_F32 || dt == TL_F64) && G->ca >= 1 && G->cb >= 1 && G->os[0] >= 1 &&
           G->os[1] >= 1 && G->os[2] >= 1;
}

/* One or two spatial axes: the first of three of size 1, and its one
 * window on that one element, not in padding before it (a 3-d conv's
 * depth window of padding alone was once taken for the input's, until
 * tests/cli/nn_conv.txt's case).  The ways over columns take these
 * alone. */
static bool flat(const geom *G)
{
    return G->is[0] == 1 && G->os[0] == 1 && G->k[0] == 1 && G->lo[0] == 0;
}

/* About this many output positions per item of the own kernels, and at
 * most this many bytes of input scratch (while an item has two rows). */
#define FAST_POSITIONS 512
#define FAST_SCRATCH (512 << 10)
/* and never more than this an item (a row too long, too many channels:
 * the im2col path cuts finer) */
#define FAST_SCRATCH_MOST (64 << 20)
/* conv over columns where the padded grid's blocks of positions would be
 * less than FAST_COLS_USEFUL (of 100) output, the columns at most
 * FAST_COLS_MOST bytes; its items' out-side channels, positions and taps
 * a block (a block of columns: 32 KiB, in the first-level cache) */
#define FAST_COLS_USEFUL 60
#define FAST_COLS_MOST (32 << 20)
#define FAST_COLS_CHANNELS 64
#define FAST_COLS_POSITIONS 128
#define FAST_COLS_TAPS 256
/* conv_grad_w over columns: up to this many output positions a sample,
 * kernels of two taps and more (the products of ResNet-18's last stage,
 * 4x4 a sample, 3x3 kernels: 3.4 -> 3.0 ms, 1.9 -> 1.5; at 7x7 no faster,
 * from 14x14 and with 1x1 kernels slower) */
#define GRADW_COLS_POSITIONS 32
/* conv_grad_w's: about this many items over the groups, and at most this
 * many bytes of partial sums an item */
#define FAST_GRADW_ITEMS 8
#define FAST_ACC (512 << 10)
#define FAST_GRADW_TAPS 24
#define FAST_GRADW_MIN 512
/* conv_grad_w's positions a pass (the ResNet block's weight gradient: 11.3
 * ms at 512, 8.0-8.3 at 2048 and 4096) */
#define FAST_GRADW_POSITIONS 2048

/* conv's scratch offset of tap (kd, kh, kw) in a channel's block: its
 * plane of depth, its phase in it, then its row and column there
 * (cpu_conv_fast.h) */
static int64_t tap_off(const geom *G, const fast_plan *f, int64_t kd, int64_t kh, int64_t kw)
{
    int64_t s1 = G->st[1], s2 = G->st[2], h = kh * G->dl[1], w = kw * G->dl[2];
    return kd * f->plane + ((h % s1 * s2 + w % s2) * f->rr + h / s1) * f->wq + w / s2;
}

/* The own kernels' plan for conv (gradw false) or conv_grad_w (true)
 * of G (cpu_conv_fast.h): 1 made, 0 where the path does not take the
 * geometry (3-d, or offsets past int32), -1 with st set when memory ran
 * out. */
static int fast_plan_make(job *j, tl_dtype dt, bool gradw, bool flipped, tl_status *st)
{
    geom *G = &j->g;
    fast_plan *f = &j->fast;
    if (!fast_takes(G, dt))
        return 0;
    f->isa = fast_isa();
    f->mr = f->isa == 512 ? FAST_MR_Z : FAST_MR_Y;
    f->gmo = f->isa == 512 ? FAST_GRADW_MO_Z : FAST_GRADW_MO_Y;
    int64_t es = (int64_t)tl_dtype_size(dt), vbytes = f->isa / 8, lanes = vbytes / es;
    int64_t s1 = G->st[1], s2 = G->st[2];
    int64_t span = (G->k[1] - 1) * G->dl[1] / s1;
    /* the channels one item's scratch holds: conv's all, conv_grad_w's a
     * block (items by blocks of channels, then of output channels, each
     * summing over every sample and position, the partial sums of a block
     * in at most FAST_ACC bytes) */
    int64_t nch = G->ca;
    /* conv_grad_w's passes over the partial sums pay for themselves over
     * enough positions: under FAST_GRADW_MIN a sample, OpenBLAS's product
     * of the columns (7x7 by 256 channels: 7 against 10 ms) */
    bool pointwise = G->ksz == 1 && s1 == 1 && s2 == 1 && !G->lo[1] && !G->lo[2] && G->isz == G->osz;
    if (gradw && !pointwise && G->osz < FAST_GRADW_MIN)
        return 0;
    /* AVX2's kernels lose to OpenBLAS's products where the convolution is
     * one (pointwise: 1x1 from 8x64x56x56 to 128 channels, 2 threads of a
     * Zen 3: conv 4.0 against 3.7 ms, conv_transpose 4.3 against 2.8), and
     * at the weight gradient (AVX2 holds 3x4 partial sums a call, AVX-512
     * 4x6) but where the product's long side is short (ResNet-18's first
     * convolution, 3 channels of 7x7: 4.3 against 9.1 ms; its 3x3 ones of
     * 64 and 128 channels 8.2 against 7.3, 14.3 against 12.7) */
    if (f->isa == 256 && (pointwise || (gradw && G->rows >= FAST_GRADW_ROWS_Y)))
        return 0;
    if (gradw) {
        int64_t per = G->groups >= FAST_GRADW_ITEMS ? 1 : FAST_GRADW_ITEMS / G->groups;
        /* blocks of at least FAST_GRADW_TAPS taps (few make passes of
         * FAST_GRADW_MK mostly empty), of output channels while more items
         * are wanted */
        f->cblk = clamp64((G->ca + per - 1) / per, (FAST_GRADW_TAPS + G->ksz - 1) / G->ksz, G->ca);
        while (f->cblk > 1 && f->cblk * G->ksz * (G->cb < f->gmo ? G->cb : f->gmo) * vbytes > FAST_ACC)
            f->cblk = (f->cblk + 1) / 2;
        f->nblk = (G->ca + f->cblk - 1) / f->cblk;
        int64_t rest = per / f->nblk > 1 ? per / f->nblk : 1;
        f->oblk = (G->cb + rest - 1) / rest;
        f->oblk = (f->oblk + f->gmo - 1) / f->gmo * f->gmo;
        f->oblk = clamp64(f->oblk, 1, clamp64(FAST_ACC / (f->cblk * G->ksz * vbytes), 1, G->cb));
        f->noblk = (G->cb + f->oblk - 1) / f->oblk;
        nch = f->cblk;
    }
    if (gradw && pointwise) {
        /* pointwise: the input is its own scratch, read in place (a 3-d
         * one's planes of depth as more rows) */
        f->direct = true;
        f->wq = G->os[2];
        f->R = G->os[0] * G->os[1];
        f->nrb = 1;
        f->nod = 1;
        f->nbk = G->n;
        return 1;
    }
    if (gradw) { /* a row of OW a tap column: see fast_gradw_item */
        f->wq = G->os[2];
        f->R = clamp64(FAST_GRADW_POSITIONS / f->wq, 1, G->os[1]);
        while (f->R > 1 && nch * G->k[0] * G->k[2] * s1 * (f->R + span) * f->wq * es > FAST_SCRATCH)
            f->R--;
        f->nrb = (G->os[1] + f->R - 1) / f->R;
        f->nod = G->os[0];
        f->rr = f->R + span;
        f->plane = G->k[2] * s1 * f->rr * f->wq;
        f->chan = G->k[0] * f->plane;
        f->xs_len = nch * f->chan;
        /* a block of rows that is every row: samples by blocks of about as
         * many positions (each pass over the partial sums then runs over
         * them all) */
        f->nbk = f->nrb > 1 ? 1 : clamp64(FAST_GRADW_POSITIONS / (G->os[1] * f->wq), 1, G->n);
        while (f->nbk > 1 && f->nbk * f->xs_len * es > FAST_SCRATCH)
            f->nbk--;
        if ((f->xs_len + f->oblk * f->cblk * G->ksz * lanes) * es > FAST_SCRATCH_MOST)
            return 0;
        if (G->ca * f->chan > INT32_MAX)
            return 0;
        if (!(f->koff = tl_malloc((size_t)G->rows, sizeof(int32_t), "convolution offsets", st)))
            return -1;
        for (int64_t c = 0; c < G->ca; c++)
            for (int64_t kd = 0; kd < G->k[0]; kd++)
                for (int64_t kh = 0; kh < G->k[1]; kh++)
                    for (int64_t kw = 0; kw < G->k[2]; kw++)
                        f->koff[((c * G->k[0] + kd) * G->k[1] + kh) * G->k[2] + kw] =
                            (int32_t)(c * f->chan + kd * f->plane +
                                      ((kw * s1 + kh * G->dl[1] % s1) * f->rr + kh * G->dl[1] / s1) * f->wq);
        return 1;
    }
    f->wq = G->os[2] + (G->k[2] - 1) * G->dl[2] / s2;
    f->R = clamp64(FAST_POSITIONS / f->wq, 1, G->os[1]);
    while (f->R > 1 && nch * G->k[0] * s1 * s2 * (f->R + span) * f->wq * es > FAST_SCRATCH)
        f->R--;
    f->nrb = (G->os[1] + f->R - 1) / f->R;
    f->rr = f->R + span;
    f->plane = s1 * s2 * f->rr * f->wq;
    f->chan = G->k[0] * f->plane;
    f->qs = (f->R * f->wq + 2 * lanes - 1) / (2 * lanes) * (2 * lanes);
    f->nmb = (G->cb + f->mr - 1) / f->mr;
    /* the largest offset (the last channel's, a tap's), then the
     * positions of whole blocks that conv's kernel reads past it */
    int64_t most = 0;
    for (int64_t kd = 0; kd < G->k[0]; kd++)
        for (int64_t kh = 0; kh < G->k[1]; kh++)
            for (int64_t kw = 0; kw < G->k[2]; kw++) {
                int64_t o = (G->ca - 1) * f->chan + tap_off(G, f, kd, kh, kw);
                most = o > most ? o : most;
            }
    f->xs_len = most + f->qs > G->ca * f->chan ? most + f->qs : G->ca * f->chan;
    /* the positions the padded grid's blocks compute, and whether columns
     * would do less: the grid's junk columns and rows past each whole
     * block (small outputs: 4x4 in blocks of 32 is half junk) */
    int64_t block = 2 * lanes, last = G->os[1] - (f->nrb - 1) * f->R;
    int64_t grid = G->n * G->os[0] *
                   ((f->nrb - 1) * ((f->R * f->wq + block - 1) / block) + (last * f->wq + block - 1) / block) * block;
    f->P = (G->n * G->osz + block - 1) / block * block;
    double cols_bytes = (double)G->groups * (double)G->rows * (double)f->P * (double)es;
    bool sparse = G->osz * G->n * 100 < grid * FAST_COLS_USEFUL && columns_usable();
    /* a 3-d one whose grid would be mostly junk: the im2col path, as
     * before the grid took 3-d (TL_CONV=grid still runs it here) */
    if (sparse && !flat(G))
        return 0;
    f->by_cols = sparse && cols_bytes <= FAST_COLS_MOST && (double)G->rows * (double)f->P <= INT32_MAX;
    if (G->groups * G->ca * G->cb * G->ksz > INT32_MAX ||
        (!f->by_cols && (most + f->qs + f->nmb * f->mr * f->qs > INT32_MAX ||
                         (f->xs_len + f->nmb * f->mr * f->qs) * es > FAST_SCRATCH_MOST)))
        return 0;
    f->koff = tl_malloc((size_t)G->rows, sizeof(int32_t), "convolution offsets", st);
    if (!f->koff)
        return -1;
    if (f->by_cols) {
        for (int64_t k = 0; k < G->rows; k++)
            f->koff[k] = (int32_t)(k * f->P);
        f->pb = FAST_COLS_POSITIONS < f->P ? FAST_COLS_POSITIONS : f->P;
        f->npb = (f->P + f->pb - 1) / f->pb;
        f->cbk = FAST_COLS_CHANNELS < G->cb ? FAST_COLS_CHANNELS : G->cb;
        f->ncb = (G->cb + f->cbk - 1) / f->cbk;
        f->kb = FAST_COLS_TAPS;
    } else
        for (int64_t c = 0; c < G->ca; c++)
            for (int64_t kd = 0; kd < G->k[0]; kd++)
                for (int64_t kh = 0; kh < G->k[1]; kh++)
                    for (int64_t kw = 0; kw < G->k[2]; kw++)
                        f->koff[((c * G->k[0] + kd) * G->k[1] + kh) * G->k[2] + kw] =
                            (int32_t)(c * f->chan + tap_off(G, f, kd, kh, kw));
    if (!(f->aoff = tl_malloc((size_t)G->rows, sizeof(int32_t), "convolution offsets", st))) {
        free(f->koff);
        f->koff = NULL;
        return -1;
    }
    if (!flipped) { /* W [groups cb, ca ksz] */
        f->w0 = 0, f->wg = G->cb * G->rows, f->wr = G->rows;
        for (int64_t k = 0; k < G->rows; k++)
            f->aoff[k] = (int32_t)k;
    } else { /* a conv_transpose's kernel [groups ca', cb', ksz], ca' = cb and cb' = ca here, flipped:
              * row c, tap k = (o, t) reads W[g ca' + o, c, ksz - 1 - t] */
        f->w0 = G->ksz - 1, f->wg = G->ca * G->cb * G->ksz, f->wr = G->ksz;
        for (int64_t o = 0; o < G->ca; o++)
            for (int64_t t = 0; t < G->ksz; t++)
                f->aoff[o * G->ksz + t] = (int32_t)(o * G->cb * G->ksz - t);
    }
    return 1;
}

static tl_code conv_run(tl_opcode op, int n, const tl_tensor *x, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                        tl_status *st);

/* conv_grad_w's im2col path: blocks of at least GRADW_COLS columns of W
 * (thinner products pack the whole of B once for very little), then
 * blocks of at least GRADW_ROWS out-side channels while items are wanted;
 * chunks of positions inside.  The number of items. */
static int64_t gradw_blocks(job *j, size_t es)
{
    const geom *G = &j->g;
    int64_t per = G->groups >= GRADW_ITEMS ? 1 : GRADW_ITEMS / G->groups;
    j->cblk = (G->ca + per - 1) / per;
    j->cblk = clamp64((GRADW_COLS + G->ksz - 1) / G->ksz, j->cblk, G->ca);
    j->nblk = (G->ca + j->cblk - 1) / j->cblk;
    int64_t rest = per / j->nblk > 1 ? per / j->nblk : 1;
    j->oblk = (G->cb + rest - 1) / rest;
    j->oblk = j->oblk < GRADW_ROWS ? (GRADW_ROWS < G->cb ? GRADW_ROWS : G->cb) : j->oblk;
    j->noblk = (G->cb + j->oblk - 1) / j->oblk;
    int64_t want = CHUNK_BYTES / (int64_t)es / (j->cblk * G->ksz);
    j->chunk = G->osz <= want ? G->osz : clamp64(want / 64 * 64, 64, G->osz);
    if (j->chunk < 1)
        j->chunk = 1;
    return G->groups * j->nblk * j->noblk;
}

#if HAVE_FAST
/* conv_grad_w over columns, where a sample has at most
 * GRADW_COLS_POSITIONS output positions: the in-side's columns of every
 * sample (conv's, cols[g][k][p], p = n OSZ + q), the out-side moved to
 * the same positions (bt[g][o][p]), then W[g cb + o, k] = sum over p of
 * bt[g][o][p] cols[g][k][p] as the pointwise weight gradient of one
 * sample of N OSZ positions on the im2col path: an item's block of W one
 * product over every sample's positions, where that path made one a
 * sample of a few positions each. */
typedef struct bt_job {
    const geom *G;
    const char *b;
    char *bt;
    size_t es;
} bt_job;

static void bt_item(void *ctx, int64_t item)
{
    bt_job *t = ctx;
    const geom *G = t->G;
    int64_t n = item / G->groups, gi = item % G->groups, run = G->osz * (int64_t)t->es;
    for (int64_t o = 0; o < G->cb; o++)
        memcpy(t->bt + ((gi * G->cb + o) * G->n + n) * run, t->b + ((n * G->groups + gi) * G->cb + o) * run,
               (size_t)run);
}

/* 1 done, 0 not taken here, -1 with st set */
static int gradw_by_cols(job *j, tl_dtype dt, double flops, tl_status *st)
{
    const geom *G = &j->g;
    size_t es = tl_dtype_size(dt);
    int64_t P = G->n * G->osz;
    if (!fast_takes(G, dt) || !flat(G) || G->osz > GRADW_COLS_POSITIONS || G->ksz < 2 || G->n < 1 ||
        (double)G->groups * (double)(G->rows + G->cb) * (double)P * (double)es > FAST_COLS_MOST)
        return 0;
    int64_t numel = G->groups * (G->rows + G->cb) * P;
    tl_tensor *buf = tl_tensor_new(dt, 1, &numel, st); /* the pool's block: warm for the next one */
    if (!buf)
        return -1;
    job f = {.g = *G, .ins = j->ins};
    atomic_init(&f.failed, false);
    f.fast.P = P;
    f.fast.cols = buf->data;
    int th = threads_for(flops);
    cpu_parallel(G->n * G->groups, th, fast_fn(fast_isa(), dt, F_COLS_FILL), &f);
    bt_job t = {G, j->outs, (char *)buf->data + (size_t)(G->groups * G->rows * P) * es, es};
    cpu_parallel(G->n * G->groups, th, bt_item, &t);
    /* W[g cb + o, k] as the pointwise conv_grad_w of one sample of P positions, rows in-side channels */
    job w = {.ins = buf->data, .outs = t.bt, .w = j->w, .blas = j->blas, .pointwise = true};
    atomic_init(&w.failed, false);
    w.g = (geom){.n = 1, .groups = G->groups, .ca = G->rows, .cb = G->cb, .is = {1, 1, P}, .os = {1, 1, P},
                 .k = {1, 1, 1}, .st = {1, 1, 1}, .dl = {1, 1, 1}, .lo = {0, 0, 0}, .isz = P, .osz = P, .ksz = 1,
                 .rows = G->rows};
    if (!atomic_load(&f.failed))
        cpu_parallel(gradw_blocks(&w, es), th, dt == TL_F32 ? items_f[K_GRADW] : items_d[K_GRADW], &w);
    tl_tensor_unref(buf);
    if (atomic_load(&f.failed) || atomic_load(&w.failed)) {
        tl_fail(st, TL_ERUNTIME, "out of memory for the scratch of conv_grad_w");
        return -1;
    }
    return 1;
}
#endif

/* One in-side channel per group, few enough partial sums: the direct kernels. */
static bool direct_dw(int64_t ca, int64_t ksz, int64_t os2) { return ca == 1 && ksz * os2 <= DIRECT_ACC; }

tl_code cpu_conv(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    if (out->numel == 0)
        return TL_OK;
    const tl_tensor *x = in[0];
    /* written over its input (tl_op_over): only a pointwise conv_transpose
     * reads its input by items apart (a sample's group at a time, copied
     * before its result goes there); any other path reads it from a copy */
    tl_tensor *x_copy = NULL;
    bool by_items = op == TL_OP_CONV_TRANSPOSE && is_pointwise(a) && out->numel == x->numel &&
                    !direct_dw(out->shape[1] / a->groups, 1, x->ndim > 2 ? x->shape[x->ndim - 1] : 1);
    if (out->data == x->data && !by_items) {
        if (!(x_copy = tl_tensor_new(x->dtype, x->ndim, x->shape, st)))
            return st->code;
        memcpy(x_copy->data, x->data, tl_dtype_size(x->dtype) * (size_t)x->numel);
        x = x_copy;
    }
    tl_code rc = conv_run(op, n, x, in, a, out, st);
    tl_tensor_unref(x_copy);
    return rc;
}

static tl_code conv_run(tl_opcode op, int n, const tl_tensor *x, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                        tl_status *st)
{
    int which = op == TL_OP_CONV ? K_CONV : op == TL_OP_CONV_TRANSPOSE ? K_CONVT : K_GRADW;
    job j = {.bias = op != TL_OP_CONV_GRAD_W && n > 2 ? in[2]->data : NULL};
    atomic_init(&j.failed, false);
    switch (which) {
    case K_CONV:
        j.g = make_geom(x->shape, out->shape, x->ndim, x->shape[1], out->shape[1], a);
        j.ins = x->data, j.outs = out->data, j.w = in[1]->data;
        break;
    case K_CONVT:
        j.g = make_geom(out->shape, x->shape, x->ndim, out->shape[1], x->shape[1], a);
        j.ins = out->data, j.outs = x->data, j.w = in[1]->data;
        break;
    default:
        j.g = make_geom(x->shape, in[1]->shape, x->ndim, x->shape[1], in[1]->shape[1], a);
        j.ins = x->data, j.outs = in[1]->data, j.w = out->data;
        break;
    }
    geom *G = &j.g;
    size_t es = tl_dtype_size(out->dtype);
    double flops = 2.0 * (double)G->n * (double)G->groups * (double)G->cb * (double)G->rows * (double)G->osz;
    int64_t nitems;
    int kind = which;
    void *w_flip = NULL;
    tl_tensor *cols_t = NULL; /* conv over columns: the columns */
    if (direct_dw(G->ca, G->ksz, G->os[2])) { /* depthwise: direct */
        kind = K_DW + which;
        tap *taps = tl_malloc((size_t)G->ksz, sizeof *taps, "convolution taps", st);
        if (!taps)
            return st->code;
        for (int64_t k = 0; k < G->ksz; k++) {
            int64_t kd = k / (G->k[1] * G->k[2]), kh = k / G->k[2] % G->k[1], kw = k % G->k[2];
            taps[k].doff = kd * G->dl[0] - G->lo[0];
            taps[k].hoff = kh * G->dl[1] - G->lo[1];
            taps[k].off = kw * G->dl[2] - G->lo[2];
            valid(taps[k].off, G->st[2], G->is[2], G->os[2], &taps[k].a, &taps[k].b);
        }
        j.taps = taps;
        nitems = which == K_CONV ? G->n * G->groups * G->cb : which == K_CONVT ? G->n * G->groups : G->groups * G->cb;
    } else {
        j.pointwise = is_pointwise(a) && G->isz == G->osz; /* not with output_padding */
        j.over = which == K_CONVT && j.outs == out->data;
        if (G->rows > INT32_MAX || G->cb * G->ksz > INT32_MAX || G->cb > INT32_MAX || G->osz > INT32_MAX || G->isz > INT32_MAX)
            return tl_fail(st, TL_EINPUT, "%s too large for BLAS", tl_ops[op].name);
        int fp = 0; /* the own kernels' plan: made 1, not taken 0, out of memory -1 */
        /* as a conv with the kernel flipped; a pointwise one (its own
         * path's gemm otherwise) only where the own kernels take it */
        if (which == K_CONVT && unit_stride(G) && (!j.pointwise || fast_usable())) {
            geom was = *G;
            *G = as_conv(G);
            which = kind = K_CONV;
            j.ins = x->data, j.outs = out->data; /* in-side: x; out-side: the result */
            /* the own kernels read the kernel flipped in place; written over
             * its input (pointwise), its items each read their rows of every
             * channel before writing them */
            fp = fast_plan_make(&j, out->dtype, false, true, st);
            if (fp == 0 && j.pointwise) { /* back to its own path */
                *G = was;
                which = kind = K_CONVT;
                j.ins = out->data, j.outs = x->data;
            } else if (fp == 0) {
                if (!(w_flip = flip_weight(&was, in[1]->data, es, st)))
                    return st->code;
                j.w = w_flip;
            }
        } else if (which != K_CONVT) {
            fp = fast_plan_make(&j, out->dtype, which == K_GRADW, false, st);
#if HAVE_FAST
            if (!fp && which == K_GRADW && columns_usable()) {
                if (!(j.blas = cpu_blas_get(st)))
                    return st->code;
                int done = gradw_by_cols(&j, out->dtype, flops, st);
                if (done)
                    return done > 0 ? TL_OK : st->code;
            }
#endif
        }
        if (fp < 0 || (!fp && !(j.blas = cpu_blas_get(st)))) { /* OpenBLAS: the im2col path's alone */
            free(w_flip);
            return st->code;
        }
        if (fp && j.fast.by_cols) {
            kind = K_FAST_COLS;
            nitems = G->groups * j.fast.ncb * j.fast.npb;
            /* a tensor's block: the pool gives the next convolution of this
             * size the same memory back, its pages already there */
            int64_t numel = G->groups * G->rows * j.fast.P;
            if ((cols_t = tl_tensor_new(out->dtype, 1, &numel, st)))
                j.fast.cols = cols_t->data;
            else {
                free(w_flip);
                free(j.fast.koff);
                free(j.fast.aoff);
                return st->code;
            }
        } else if (fp) {
            kind = which == K_CONV ? K_FAST : K_FAST_GRADW;
            nitems = which == K_CONV ? G->n * G->groups * G->os[0] * j.fast.nrb : G->groups * j.fast.nblk * j.fast.noblk;
        } else if (which == K_CONV) { /* chunks of positions */
            int64_t want = CHUNK_BYTES / (int64_t)es / G->rows;
            j.chunk = G->osz <= want ? G->osz : clamp64(want / 64 * 64, 64, G->osz);
            if (j.pointwise)
                j.chunk = G->osz <= 4096 ? G->osz : 4096;
            j.nchunks = (G->osz + j.chunk - 1) / j.chunk;
            nitems = G->n * G->groups * j.nchunks;
        } else if (which == K_CONVT) { /* blocks of in-side channels, chunks of positions inside */
            int64_t want = CHUNK_BYTES / (int64_t)es / (G->ksz * (G->osz ? G->osz : 1));
            j.chunk = j.pointwise ? G->ca : clamp64(want, 1, G->ca);
            j.nchunks = (G->ca + j.chunk - 1) / j.chunk;
            want = CHUNK_BYTES / (int64_t)es / (j.chunk * G->ksz);
            j.pchunk = G->osz <= want ? G->osz : clamp64(want / 64 * 64, 64, G->osz);
            nitems = G->n * G->groups * j.nchunks;
        } else /* blocks of in-side channels, chunks of positions inside */
            nitems = gradw_blocks(&j, es);
    }
    const cpu_item_fn *fns = out->dtype == TL_F32 ? items_f : items_d;
    cpu_item_fn fn = kind < K_FAST ? fns[kind] : NULL;
#if HAVE_FAST
    if (kind == K_FAST)
        fn = fast_fn(j.fast.isa, out->dtype, F_CONV);
    if (kind == K_FAST_GRADW)
        fn = fast_fn(j.fast.isa, out->dtype, F_GRADW);
    if (kind == K_FAST_COLS) { /* the columns first, a sample's group an item */
        cpu_parallel(G->n * G->groups, threads_for(flops), fast_fn(j.fast.isa, out->dtype, F_COLS_FILL), &j);
        fn = fast_fn(j.fast.isa, out->dtype, F_COLS);
    }
#endif
    cpu_parallel(nitems, threads_for(flops), fn, &j);
    tl_tensor_unref(cols_t);
    free(w_flip);
    free(j.fast.koff);
    free(j.fast.aoff);
    free((void *)j.taps);
    if (atomic_load(&j.failed))
        return tl_fail(st, TL_ERUNTIME, "out of memory for the scratch of %s", tl_ops[op].name);
    return TL_OK;
}
