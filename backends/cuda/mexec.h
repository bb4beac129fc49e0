/* The map engine on one GPU thread, device-neutral: each thread runs the
 * compiled scalar program (mprog.h) for its own elements, taking its own
 * branches, with the formulas of scalar.h and the derivatives of
 * scalar_deriv.h.  It computes what the CPU's engine (cpu_map.c) computes
 * for each element, in the same order: constants and tangent seeds set once
 * per thread, instructions and their tangents one after the other, a zero
 * tangent contributing nothing; the host tests hold the two to the same
 * bits on every map fixture.
 *
 * The program, the inputs' addresses and strides travel to the device in
 * one buffer (cu_map_pack).  Registers live in device scratch, interleaved
 * across the P threads of the launch (register q of thread t at q * P + t),
 * so neighbouring threads touch neighbouring words.  In C include after
 * <tgmath.h>. */
#ifndef TL_CUDA_MEXEC_H
#define TL_CUDA_MEXEC_H

#include "ew.h"
#include "backends/cpu/scalar_deriv.h"

enum { CU_IN_SAME, CU_IN_SCALAR, CU_IN_STRIDED }; /* how an input is read */

typedef struct cu_mapk {
    const tl_mins *ins;         /* the program */
    const double *const_val;
    const int32_t *const_reg, *in_reg;
    const uint8_t *want;        /* map_grad: which inputs get a derivative */
    const uint8_t *in_mode;
    const void *const *in_data; /* per input */
    const int64_t *in_stride;   /* per input, TL_MAXDIM strides over the output's axes */
    int nins, nregs, ncounters, nconst, nin, result, k;
    int ndim;
    int64_t shape[TL_MAXDIM];
    int64_t total;              /* elements of the result */
    const void *g;              /* map_grad: the cotangent, the result's shape */
    void *y;                    /* map: [total]; map_grad: [k, total] */
    void *scratch;              /* registers of the launch's threads */
    int64_t nthreads;           /* P */
} cu_mapk;

/* Bytes of scratch one thread needs. */
static inline int64_t cu_map_thread_bytes(const cu_mapk *k, size_t es)
{
    return (int64_t)es * k->nregs * (k->k + 1) + (int64_t)sizeof(int64_t) * k->ncounters;
}

#define CU_ALIGN8(n) (((n) + 7) & ~(size_t)7)

/* The buffer's layout for a program of p with nin inputs. */
typedef struct cu_map_layout {
    size_t ins, const_val, in_data, in_stride, const_reg, in_reg, want, in_mode, total;
} cu_map_layout;

static inline cu_map_layout cu_map_layout_of(const tl_mprog *p, int nin)
{
    cu_map_layout l;
    l.ins = 0;
    l.const_val = CU_ALIGN8(l.ins + sizeof(tl_mins) * (size_t)p->nins);
    l.in_data = CU_ALIGN8(l.const_val + sizeof(double) * (size_t)p->nconst);
    l.in_stride = CU_ALIGN8(l.in_data + sizeof(void *) * (size_t)nin);
    l.const_reg = CU_ALIGN8(l.in_stride + sizeof(int64_t) * TL_MAXDIM * (size_t)nin);
    l.in_reg = CU_ALIGN8(l.const_reg + sizeof(int32_t) * (size_t)p->nconst);
    l.want = CU_ALIGN8(l.in_reg + sizeof(int32_t) * (size_t)nin);
    l.in_mode = l.want + (size_t)nin;
    l.total = CU_ALIGN8(l.in_mode + (size_t)nin);
    return l;
}

/* Fills blob (host memory of cu_map_layout_of(...).total bytes) and k for
 * a map or map_grad call; `base` is the address the kernel will read the
 * blob at (device memory, or blob itself on the host).  Pointers in k and
 * in the blob are the tensors' data pointers. */
static inline void cu_map_pack(cu_mapk *k, void *blob, const void *base, tl_opcode op, int nin,
                               const tl_tensor *const *in, const tl_attrs *a, tl_tensor *out)
{
    const tl_mprog *p = a->prog;
    bool grad = op == TL_OP_MAP_GRAD;
    int n = grad ? nin - 1 : nin;
    cu_map_layout l = cu_map_layout_of(p, n);
    char *b = (char *)blob;
    const char *d = (const char *)base;
    memset(k, 0, sizeof *k);
    memset(blob, 0, l.total);
    k->nins = p->nins;
    k->nregs = p->nregs;
    k->ncounters = p->ncounters;
    k->nconst = p->nconst;
    k->nin = n;
    k->result = p->result;
    k->ndim = grad ? out->ndim - 1 : out->ndim;
    memcpy(k->shape, grad ? out->shape + 1 : out->shape, sizeof(int64_t) * (size_t)k->ndim);
    k->total = 1;
    for (int dd = 0; dd < k->ndim; dd++)
        k->total *= k->shape[dd];
    k->g = grad ? in[n]->data : NULL;
    k->y = out->data;
    if (p->nins)
        memcpy(b + l.ins, p->ins, sizeof(tl_mins) * (size_t)p->nins);
    for (int i = 0; i < p->nconst; i++) {
        ((double *)(b + l.const_val))[i] = p->const_val[i];
        ((int32_t *)(b + l.const_reg))[i] = p->const_reg[i];
    }
    for (int i = 0; i < n; i++) {
        const tl_tensor *t = in[i];
        int64_t st[TL_MAXDIM], *s = (int64_t *)(b + l.in_stride) + (size_t)i * TL_MAXDIM;
        cpu_strides(t->ndim, t->shape, st);
        for (int dd = 0; dd < k->ndim; dd++) {
            int id = dd - (k->ndim - t->ndim);
            s[dd] = id < 0 || t->shape[id] == 1 ? 0 : st[id];
        }
        ((const void **)(b + l.in_data))[i] = t->data;
        ((int32_t *)(b + l.in_reg))[i] = p->in_reg[i];
        ((uint8_t *)(b + l.want))[i] = grad && a->want[i];
        ((uint8_t *)(b + l.in_mode))[i] = t->numel == k->total ? CU_IN_SAME
                                          : t->numel == 1      ? CU_IN_SCALAR
                                                               : CU_IN_STRIDED;
        k->k += grad && a->want[i];
    }
    k->ins = (const tl_mins *)(d + l.ins);
    k->const_val = (const double *)(d + l.const_val);
    k->in_data = (const void *const *)(d + l.in_data);
    k->in_stride = (const int64_t *)(d + l.in_stride);
    k->const_reg = (const int32_t *)(d + l.const_reg);
    k->in_reg = (const int32_t *)(d + l.in_reg);
    k->want = (const uint8_t *)(d + l.want);
    k->in_mode = (const uint8_t *)(d + l.in_mode);
}

/* Input i's offset for element e. */
TL_HD static inline int64_t cu_map_offset(const cu_mapk *k, int i, int64_t e)
{
    if (k->in_mode[i] != CU_IN_STRIDED)
        return k->in_mode[i] == CU_IN_SAME ? e : 0;
    const int64_t *s = k->in_stride + (int64_t)i * TL_MAXDIM;
    int64_t off = 0;
    for (int d = k->ndim - 1; d >= 0; d--) {
        int64_t q = e / k->shape[d];
        off += (e - q * k->shape[d]) * s[d];
        e = q;
    }
    return off;
}

#define CU_DEFINE_MEXEC(T, SUF)                                                    \
    /* Tangents of instruction in_ (just executed); P: the register stride. */     \
    TL_HD static inline void cu_map_tangents_##SUF(const cu_mapk *k, const tl_mins *in_, \
                                                   T *r, T *tan, int64_t P)        \
    {                                                                              \
        int kk = k->k;                                                             \
        T A = r[in_->a * P], D = r[in_->dst * P];                                  \
        for (int j = 0; j < kk; j++) {                                             \
            T *td = tan + ((int64_t)in_->dst * kk + j) * P;                        \
            T ta = tan[((int64_t)in_->a * kk + j) * P];                            \
            switch (in_->code) {                                                   \
            case TL_M_UN: {                                                        \
                T dv = dun_##SUF(in_->op, A, D, in_->approx);                      \
                *td = ta != 0 ? dv * ta : 0;                                       \
                break;                                                             \
            }                                                                      \
            case TL_M_BIN: {                                                       \
                T da, db, B = r[in_->b * P];                                       \
                T tb = tan[(in_->b * kk + j) * P];                                 \
                dbin_##SUF(in_->op, A, B, D, in_->approx, &da, &db);               \
                *td = (ta != 0 ? da * ta : 0) + (tb != 0 ? db * tb : 0);           \
                break;                                                             \
            }                                                                      \
            case TL_M_CLAMP: {                                                     \
                bool inside = (!in_->has_lo || A >= (T)in_->lo) &&                 \
                              (!in_->has_hi || A <= (T)in_->hi) && A == A;         \
                *td = inside ? ta : 0;                                             \
                break;                                                             \
            }                                                                      \
            case TL_M_WHERE:                                                       \
                *td = A != 0 ? tan[(in_->b * kk + j) * P]                          \
                             : tan[((int64_t)in_->c * kk + j) * P];                \
                break;                                                             \
            default: *td = ta; break; /* MOV */                                    \
            }                                                                      \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* Runs the program once on the thread's registers. */                         \
    TL_HD static inline void cu_map_exec_##SUF(const cu_mapk *k, T *r, T *tan,      \
                                               int64_t *cnt, int64_t P)            \
    {                                                                              \
        int pc = 0;                                                                \
        while (pc < k->nins) {                                                     \
            const tl_mins *in_ = &k->ins[pc];                                      \
            switch (in_->code) {                                                   \
            case TL_M_UN:                                                          \
                r[in_->dst * P] = cu_unary_##SUF(in_->op, r[in_->a * P], in_->approx); \
                break;                                                             \
            case TL_M_BIN:                                                         \
                r[in_->dst * P] = cu_binary_##SUF(in_->op, r[in_->a * P], r[in_->b * P], in_->approx); \
                break;                                                             \
            case TL_M_CLAMP: {                                                     \
                T v = r[in_->a * P], lo = (T)in_->lo, hi = (T)in_->hi;             \
                bool hl = in_->has_lo, hh = in_->has_hi;                           \
                r[in_->dst * P] = TL_CLAMP(v, lo, hi, hl, hh);                     \
                break;                                                             \
            }                                                                      \
            case TL_M_WHERE:                                                       \
                r[in_->dst * P] = r[in_->a * P] != 0 ? r[in_->b * P] : r[in_->c * P]; \
                break;                                                             \
            case TL_M_MOV: r[in_->dst * P] = r[in_->a * P]; break;                 \
            case TL_M_JZ: /* then: the next instruction; else: imm */              \
                pc = r[in_->a * P] != 0 ? pc + 1 : (int)in_->imm;                  \
                continue;                                                          \
            case TL_M_JMP: pc = (int)in_->imm; continue;                           \
            case TL_M_LOOP_INIT: cnt[in_->c * P] = 0; break;                       \
            case TL_M_LOOP_TEST:                                                   \
                if (cnt[in_->c * P] >= in_->b) {                                   \
                    pc = (int)in_->imm;                                            \
                    continue;                                                      \
                }                                                                  \
                if (in_->dst >= 0)                                                 \
                    r[in_->dst * P] = (T)cnt[in_->c * P];                          \
                break;                                                             \
            case TL_M_LOOP_INC: cnt[in_->c * P]++; break;                          \
            }                                                                      \
            if (k->k && in_->code <= TL_M_MOV)                                     \
                cu_map_tangents_##SUF(k, in_, r, tan, P);                          \
            pc++;                                                                  \
        }                                                                          \
    }                                                                              \
                                                                                   \
    /* Thread t of P: sets its constants and tangent seeds, then runs the      \
     * program for elements t, t + P, ... */                                       \
    TL_HD static inline void cu_map_thread_##SUF(const cu_mapk *k, int64_t t)       \
    {                                                                              \
        int64_t P = k->nthreads;                                                   \
        int kk = k->k;                                                             \
        T *r = (T *)k->scratch + t, *tan = r + (int64_t)k->nregs * P;              \
        int64_t *cnt = (int64_t *)((T *)k->scratch + (int64_t)k->nregs * (kk + 1) * P) + t; \
        for (int i = 0; i < k->nconst; i++)                                        \
            r[k->const_reg[i] * P] = (T)k->const_val[i];                           \
        for (int64_t q = 0; q < (int64_t)k->nregs * kk; q++)                       \
            tan[q * P] = 0;                                                        \
        for (int i = 0, j = 0; kk && i < k->nin; i++)                              \
            if (k->want[i])                                                        \
                tan[((int64_t)k->in_reg[i] * kk + j++) * P] = 1;                   \
        const T *G = (const T *)k->g;                                              \
        T *Y = (T *)k->y;                                                          \
        for (int64_t e = t; e < k->total; e += P) {                                \
            for (int i = 0; i < k->nin; i++)                                       \
                r[k->in_reg[i] * P] = ((const T *)k->in_data[i])[cu_map_offset(k, i, e)]; \
            cu_map_exec_##SUF(k, r, tan, cnt, P);                                  \
            if (!kk) {                                                             \
                Y[e] = r[k->result * P];                                           \
                continue;                                                          \
            }                                                                      \
            for (int j = 0; j < kk; j++) {                                         \
                T tr = tan[((int64_t)k->result * kk + j) * P];                     \
                Y[j * k->total + e] = tr != 0 ? G[e] * tr : 0;                     \
            }                                                                      \
        }                                                                          \
    }

CU_DEFINE_MEXEC(float, f)
CU_DEFINE_MEXEC(double, d)

#endif
