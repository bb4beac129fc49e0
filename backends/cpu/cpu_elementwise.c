/* Elementwise kernels: one tight loop per (op, dtype), written once as an
 * expression and instantiated for float and double through <tgmath.h>, so
 * the compiler sees plain arithmetic it can vectorise (no per-element
 * function pointers). */
#include <tgmath.h>
#include <stdio.h>
#include <string.h>

#include "backends/mprog.h"
#include "cpu.h"
#include "threads.h"
#include "scalar.h"

/* Runs BODY once per piece of a row of the plan P within output elements
 * [E0, E1), with `o` the output offset, off[k] the operand offsets, `len`
 * the piece's length and s[k] the operands' strides along the row. */
#define BCAST_RANGE(P, E0, E1, ...)                                                \
    do {                                                                           \
        const cpu_bcast *p_ = (P);                                                 \
        int nd_ = p_->ndim, k_;                                                    \
        int64_t row_ = p_->shape[nd_ - 1], e_ = (E0), end_ = (E1);                 \
        int64_t idx_[TL_MAXDIM] = {0}, off[3] = {0, 0, 0}, s[3] = {0, 0, 0};       \
        for (k_ = 0; k_ < p_->nops; k_++)                                          \
            s[k_] = p_->stride[k_][nd_ - 1];                                       \
        int64_t rest_ = e_ / row_, col_ = e_ % row_;                               \
        for (int d_ = nd_ - 2; d_ >= 0; d_--) {                                    \
            idx_[d_] = rest_ % p_->shape[d_];                                      \
            rest_ /= p_->shape[d_];                                                \
            for (k_ = 0; k_ < p_->nops; k_++)                                      \
                off[k_] += idx_[d_] * p_->stride[k_][d_];                          \
        }                                                                          \
        for (k_ = 0; k_ < p_->nops; k_++)                                          \
            off[k_] += col_ * s[k_];                                               \
        while (e_ < end_) {                                                        \
            int64_t len = row_ - col_ < end_ - e_ ? row_ - col_ : end_ - e_, o = e_; \
            __VA_ARGS__;                                                           \
            e_ += len;                                                             \
            for (k_ = 0; k_ < p_->nops; k_++) /* back to the row's start */        \
                off[k_] -= col_ * s[k_];                                           \
            col_ = 0;                                                              \
            for (int d_ = nd_ - 2; d_ >= 0; d_--) {                                \
                for (k_ = 0; k_ < p_->nops; k_++)                                  \
                    off[k_] += p_->stride[k_][d_];                                 \
                if (++idx_[d_] < p_->shape[d_])                                    \
                    break;                                                         \
                for (k_ = 0; k_ < p_->nops; k_++)                                  \
                    off[k_] -= p_->stride[k_][d_] * p_->shape[d_];                 \
                idx_[d_] = 0;                                                      \
            }                                                                      \
        }                                                                          \
    } while (0)

/* a and b are the operands' elements; EXPR computes the result. */
#define BIN_KERNEL(T, EXPR)                                                        \
    do {                                                                           \
        const T *A_ = in[0]->data, *B_ = in[1]->data;                              \
        T *Y_ = out->data;                                                         \
        BCAST_RANGE(&j->plan, e0, e1, {                                            \
            const T *pa = A_ + off[0], *pb = B_ + off[1];                              \
            T *py = Y_ + o;                                                        \
            if (s[0] == 1 && s[1] == 1) {                                              \
                for (int64_t i = 0; i < len; i++) {                                \
                    T a = pa[i], b = pb[i];                                        \
                    py[i] = (T)(EXPR);                                             \
                }                                                                  \
            } else if (s[0] == 0 && s[1] == 1) {                                       \
                T a = pa[0];                                                       \
                for (int64_t i = 0; i < len; i++) {                                \
                    T b = pb[i];                                                   \
                    py[i] = (T)(EXPR);                                             \
                }                                                                  \
            } else if (s[0] == 1 && s[1] == 0) {                                       \
                T b = pb[0];                                                       \
                for (int64_t i = 0; i < len; i++) {                                \
                    T a = pa[i];                                                   \
                    py[i] = (T)(EXPR);                                             \
                }                                                                  \
            } else {                                                               \
                for (int64_t i = 0; i < len; i++) {                                \
                    T a = pa[i * s[0]], b = pb[i * s[1]];                              \
                    py[i] = (T)(EXPR);                                             \
                }                                                                  \
            }                                                                      \
        });                                                                        \
    } while (0)

#define UN_KERNEL(T, EXPR)                                                         \
    do {                                                                           \
        const T *X_ = in[0]->data;                                                 \
        T *Y_ = out->data;                                                         \
        for (int64_t i = e0; i < e1; i++) {                                        \
            T v = X_[i];                                                           \
            Y_[i] = (T)(EXPR);                                                     \
        }                                                                          \
    } while (0)

/* where's runs: each operand read along the run (stride 1) or one value
 * held (stride 0), in loops that vectorise; other strides one at a time
 * (a run in the general form ran an element in several nanoseconds) */
#define WHERE_RUN(T, SC, SA, SB)                                                   \
    for (int64_t i = 0; i < len; i++) {                                            \
        T a_ = pa[i * (SA)], b_ = pb[i * (SB)]; /* both read: a blend */           \
        py[i] = pc[i * (SC)] != 0 ? a_ : b_;                                       \
    }
#define WHERE_KERNEL(T, UNUSED)                                                    \
    do {                                                                           \
        const T *C_ = in[0]->data, *A_ = in[1]->data, *B_ = in[2]->data;           \
        T *Y_ = out->data;                                                         \
        BCAST_RANGE(&j->plan, e0, e1, {                                            \
            const T *pc = C_ + off[0], *pa = A_ + off[1], *pb = B_ + off[2];       \
            T *py = Y_ + o;                                                        \
            int pat = (s[0] == 1 ? 4 : s[0] == 0 ? 0 : 8) | (s[1] == 1 ? 2 : s[1] == 0 ? 0 : 8) | \
                      (s[2] == 1 ? 1 : s[2] == 0 ? 0 : 8);                         \
            switch (pat) {                                                         \
            case 7: WHERE_RUN(T, 1, 1, 1); break;                                  \
            case 6: WHERE_RUN(T, 1, 1, 0); break;                                  \
            case 5: WHERE_RUN(T, 1, 0, 1); break;                                  \
            case 4: WHERE_RUN(T, 1, 0, 0); break;                                  \
            case 3: WHERE_RUN(T, 0, 1, 1); break;                                  \
            case 2: WHERE_RUN(T, 0, 1, 0); break;                                  \
            case 1: WHERE_RUN(T, 0, 0, 1); break;                                  \
            case 0: WHERE_RUN(T, 0, 0, 0); break;                                  \
            default:                                                               \
                for (int64_t i = 0; i < len; i++)                                  \
                    py[i] = pc[i * s[0]] != 0 ? pa[i * s[1]] : pb[i * s[2]];       \
            }                                                                      \
        });                                                                        \
    } while (0)

#define BY_DTYPE(KERNEL, EXPR)                                                     \
    do {                                                                           \
        if (out->dtype == TL_F32)                                                  \
            KERNEL(float, EXPR);                                                   \
        else                                                                       \
            KERNEL(double, EXPR);                                                  \
    } while (0)

/* The integer arithmetic: T and U (its unsigned twin) named for the
 * formulas of scalar.h. */
#define BY_INT_DTYPE(KERNEL, EXPR)                                                 \
    do {                                                                           \
        if (out->dtype == TL_I32) {                                                \
            typedef int32_t T;                                                     \
            typedef uint32_t U;                                                    \
            (void)(U)0;                                                            \
            KERNEL(T, EXPR);                                                       \
        } else {                                                                   \
            typedef int64_t T;                                                     \
            typedef uint64_t U;                                                    \
            (void)(U)0;                                                            \
            KERNEL(T, EXPR);                                                       \
        }                                                                          \
    } while (0)

/* clamp's loop for the bounds it has (HL, HH constants: a loop without
 * branches, which vectorises; with the flags read per element it ran at a
 * tenth of PyTorch's speed) */
#define CLAMP_LOOP(T, HL, HH)                                                      \
    for (int64_t i = e0; i < e1; i++) {                                            \
        T v = X_[i];                                                               \
        Y_[i] = TL_CLAMP(v, lo, hi, HL, HH);                                       \
    }
#define CLAMP_KERNEL(T, UNUSED)                                                    \
    do {                                                                           \
        const T *X_ = in[0]->data;                                                 \
        T *Y_ = out->data;                                                         \
        T lo = (T)a->min, hi = (T)a->max;                                          \
        if (a->has_min && a->has_max)                                              \
            CLAMP_LOOP(T, true, true)                                              \
        else if (a->has_min)                                                       \
            CLAMP_LOOP(T, true, false)                                             \
        else if (a->has_max)                                                       \
            CLAMP_LOOP(T, false, true)                                             \
        else                                                                       \
            CLAMP_LOOP(T, false, false)                                            \
    } while (0)

/* d[i] = (TD)s[i]; into an integer dtype only values in [lo, hi) convert
 * (the first that does not is an error, never undefined behaviour). */
#define CAST_LOOP(TS, TD, CHECK, LO, HI)                                           \
    do {                                                                           \
        const TS *s_ = x->data;                                                    \
        TD *d_ = out->data;                                                        \
        for (int64_t i = 0; i < n; i++) {                                          \
            if (CHECK && !(s_[i] >= LO && s_[i] < HI))                             \
                return cast_fails(x, out, i, st);                                  \
            d_[i] = (TD)s_[i];                                                     \
        }                                                                          \
    } while (0)

/* The source dtype's loop for destination type TD. */
#define CAST_FROM(TD, CHECK, LO, HI)                                               \
    do {                                                                           \
        switch (x->dtype) {                                                        \
        case TL_F32: CAST_LOOP(float, TD, CHECK, LO, HI); break;                   \
        case TL_F64: CAST_LOOP(double, TD, CHECK, LO, HI); break;                  \
        case TL_I32: CAST_LOOP(int32_t, TD, CHECK, LO, HI); break;                 \
        case TL_I64: CAST_LOOP(int64_t, TD, CHECK, LO, HI); break;                 \
        }                                                                          \
    } while (0)

static tl_code cast_fails(const tl_tensor *x, const tl_tensor *out, int64_t i, tl_status *st)
{
    char v[32];
    if (tl_dtype_is_int(x->dtype))
        snprintf(v, sizeof v, "%lld", (long long)tl_tensor_get_int(x, i));
    else
        snprintf(v, sizeof v, "%.17g", tl_tensor_get(x, i));
    return tl_fail(st, TL_EINPUT, "cannot cast element %lld = %s to %s (outside its range)",
                   (long long)i, v, tl_dtype_name(out->dtype));
}

/* cast between any two dtypes; float to integer truncates toward zero */
static tl_code cast(const tl_tensor *x, tl_tensor *out, tl_status *st)
{
    int64_t n = out->numel;
    bool from_float = !tl_dtype_is_int(x->dtype);
    if (x->dtype == out->dtype) {
        memcpy(out->data, x->data, (size_t)n * tl_dtype_size(x->dtype));
        return TL_OK;
    }
    switch (out->dtype) {
    case TL_F32: CAST_FROM(float, false, 0, 0); break;
    case TL_F64: CAST_FROM(double, false, 0, 0); break;
    case TL_I32: CAST_FROM(int32_t, true, -0x1.00000001fffffp+31, 2147483648.0); break; /* above -2^31 - 1: -2147483648.5 truncates into range */
    case TL_I64:
        if (from_float)
            CAST_FROM(int64_t, true, -9223372036854775808.0, 9223372036854775808.0);
        else
            CAST_FROM(int64_t, false, 0, 0); /* i32 -> i64 always fits */
        break;
    }
    return TL_OK;
}

/* One elementwise call, cut into ranges of output elements for the
 * threads (each element is computed alone: any cut gives the same bits). */
typedef struct ew_job {
    tl_opcode op;
    cpu_ins in;
    const tl_attrs *a;
    tl_tensor *out;
    cpu_bcast plan;
} ew_job;

#define EW_CHUNK 32768 /* elements per item */

CPU_KERNEL static void ew_range(const ew_job *j, int64_t e0, int64_t e1)
{
    cpu_ins in = j->in;
    const tl_attrs *a = j->a;
    tl_tensor *out = j->out;
    int approx = a->approximate;
    (void)approx;
    /* gelu and its derivative in the form given, chosen once (a constant
     * form: loops that vectorise, SLEEF's erf 16 at a time; chosen per
     * element, erf ran one at a time, 15 to 30 times PyTorch's time) */
    if (j->op == TL_OP_GELU && approx) {
        BY_DTYPE(UN_KERNEL, TL_GELU(v, 1));
        return;
    }
    if (j->op == TL_OP_GELU) {
        BY_DTYPE(UN_KERNEL, TL_GELU(v, 0));
        return;
    }
    if (j->op == TL_OP_GELU_GRAD && approx) { /* (x, g) -> g * gelu'(x) */
        BY_DTYPE(BIN_KERNEL, b * TL_GELU_GRAD(a, 1));
        return;
    }
    if (j->op == TL_OP_GELU_GRAD) {
        BY_DTYPE(BIN_KERNEL, b * TL_GELU_GRAD(a, 0));
        return;
    }
    switch (j->op) {
#define BIN_CASE(E, EXPR) case TL_OP_##E: BY_DTYPE(BIN_KERNEL, EXPR); break;
    TL_BINARY_EXPRS(BIN_CASE)
#undef BIN_CASE
    /* (x, g) -> g where x > 0: the selection of where(x > 0, g, 0) */
    case TL_OP_RELU_GRAD: BY_DTYPE(BIN_KERNEL, a > 0 ? b : 0); break;
#define UN_CASE(E, EXPR) case TL_OP_##E: BY_DTYPE(UN_KERNEL, EXPR); break;
    TL_UNARY_EXPRS(UN_CASE)
#undef UN_CASE
    case TL_OP_CLAMP: BY_DTYPE(CLAMP_KERNEL, 0); break;
    case TL_OP_WHERE: BY_DTYPE(WHERE_KERNEL, 0); break;
    default: break;
    }
}

/* The same over i32 and i64 operands (the ops of TL_DT_NUM). */
CPU_KERNEL static void int_range(const ew_job *j, int64_t e0, int64_t e1)
{
    cpu_ins in = j->in;
    tl_tensor *out = j->out;
    switch (j->op) {
#define BIN_CASE(E, EXPR) case TL_OP_##E: BY_INT_DTYPE(BIN_KERNEL, EXPR); break;
    TL_INT_BINARY_EXPRS(BIN_CASE)
#undef BIN_CASE
#define UN_CASE(E, EXPR) case TL_OP_##E: BY_INT_DTYPE(UN_KERNEL, EXPR); break;
    TL_INT_UNARY_EXPRS(UN_CASE)
#undef UN_CASE
    default: break;
    }
}

static void ew_item(void *ctx, int64_t item)
{
    const ew_job *j = ctx;
    int64_t e0 = item * EW_CHUNK, e1 = e0 + EW_CHUNK < j->out->numel ? e0 + EW_CHUNK : j->out->numel;
    if (tl_dtype_is_int(j->out->dtype))
        int_range(j, e0, e1);
    else
        ew_range(j, e0, e1);
}

/* Whether op is one of scalar.h's formulas (the rest: clamp, where,
 * relu_grad, cast, with kernels of their own). */
static bool has_formula(tl_opcode op)
{
    switch (op) {
#define CASE(E, EXPR) case TL_OP_##E:
        TL_BINARY_EXPRS(CASE)
        TL_UNARY_EXPRS(CASE)
#undef CASE
    case TL_OP_GELU_GRAD: return true;
    default: return false;
    }
}

/* An op over single values of the output's type (every step of a scalar
 * recurrence differentiated twice): the formula straight, through the
 * scalar programs of cpu_scalar.c, which give ew_range's bits for one
 * element; false when the call is not that. */
static bool one_value(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out)
{
    if (out->numel != 1 || n > 2 || tl_dtype_is_int(out->dtype) || !has_formula(op))
        return false;
    for (int i = 0; i < n; i++)
        if (in[i]->numel != 1 || in[i]->dtype != out->dtype)
            return false;
    tl_mins ins = {.code = n == 2 ? TL_M_BIN : TL_M_UN, .op = (uint8_t)op, .approx = (uint8_t)a->approximate,
                   .dst = 2, .a = 0, .b = 1};
    if (out->dtype == TL_F64) {
        double r[3] = {*(const double *)in[0]->data, n == 2 ? *(const double *)in[1]->data : 0, 0};
        cpu_prog_scalar_d(&ins, 1, r);
        *(double *)out->data = r[2];
    } else {
        float r[3] = {*(const float *)in[0]->data, n == 2 ? *(const float *)in[1]->data : 0, 0};
        cpu_prog_scalar_f(&ins, 1, r);
        *(float *)out->data = r[2];
    }
    return true;
}

/* An integer division or remainder by zero is an error: the first zero
 * of the divisor (every one of its elements is read when the output has
 * any). */
static tl_code int_divisor(tl_opcode op, const tl_tensor *b, tl_status *st)
{
    for (int64_t i = 0; i < b->numel; i++)
        if (tl_tensor_get_int(b, i) == 0) {
            char pos[48] = "";
            if (b->numel > 1)
                snprintf(pos, sizeof pos, " (element %lld of the divisor)", (long long)i);
            return tl_fail(st, TL_EINPUT, "integer %s by zero%s", op == TL_OP_DIV ? "division" : "remainder",
                           pos);
        }
    return TL_OK;
}

/* Whether op has an integer kernel (the TL_DT_NUM ops but the reductions). */
static bool int_known(tl_opcode op)
{
    switch (op) {
#define CASE(E, EXPR) case TL_OP_##E:
        TL_INT_BINARY_EXPRS(CASE)
        TL_INT_UNARY_EXPRS(CASE)
#undef CASE
        return true;
    default: return false;
    }
}

tl_code cpu_elementwise(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out,
                        tl_status *st)
{
    if (out->numel == 0)
        return TL_OK;
    if (op == TL_OP_CAST)
        return cast(in[0], out, st);
    tl_opkind kind = tl_ops[op].kind;
    bool known = kind == TL_KIND_BIN || kind == TL_KIND_CMP || kind == TL_KIND_UN ||
                 op == TL_OP_WHERE || op == TL_OP_GELU_GRAD || op == TL_OP_RELU_GRAD;
    if (!known || (n != 2 && n != 1 && op != TL_OP_WHERE))
        return tl_fail(st, TL_ERUNTIME, "internal: %s is not elementwise", tl_ops[op].name);
    if (tl_dtype_is_int(out->dtype)) {
        if (!int_known(op) || !tl_dtype_is_int(in[0]->dtype))
            return tl_fail(st, TL_ERUNTIME, "internal: %s has no integer kernel", tl_ops[op].name);
        if (TL_INT_DIVIDES(op) && int_divisor(op, in[1], st))
            return st->code;
    }
    if (one_value(op, n, in, a, out))
        return TL_OK;
    ew_job j = {op, in, a, out, {0}};
    if (n >= 2) {
        int nd[3] = {in[0]->ndim, in[1]->ndim, n > 2 ? in[2]->ndim : 0};
        const int64_t *sh[3] = {in[0]->shape, in[1]->shape, n > 2 ? in[2]->shape : NULL};
        cpu_bcast_init(&j.plan, out->ndim, out->shape, n, nd, sh);
    }
    int64_t items = (out->numel + EW_CHUNK - 1) / EW_CHUNK;
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, ew_item, &j);
    return TL_OK;
}
