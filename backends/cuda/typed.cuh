// The device-neutral headers instantiate every function twice, with the
// suffix _f (float) and _d (double), so that plain C can compile them too.
// cu_t<T> gives kernels, which are C++ templates on the element type, the
// instance for T.
#ifndef TL_CUDA_TYPED_CUH
#define TL_CUDA_TYPED_CUH

#include "ew.h"
#include "index.h"
#include "mexec.h"
#include "reduce.h"

template <typename T> struct cu_t;

#define CU_TYPED(T, SUF)                                                                \
    template <> struct cu_t<T> {                                                        \
        typedef cu_acc_##SUF acc;                                                       \
        __device__ static void binary(const cu_ew *k, int op, int64_t i)                \
        {                                                                               \
            cu_ew_binary_##SUF(k, op, i);                                               \
        }                                                                               \
        __device__ static void unary(const cu_ew *k, int op, int64_t i)                 \
        {                                                                               \
            cu_ew_unary_##SUF(k, op, i);                                                \
        }                                                                               \
        __device__ static void where(const cu_ew *k, int64_t i) { cu_ew_where_##SUF(k, i); } \
        __device__ static void clamp(const cu_ew *k, int64_t i) { cu_ew_clamp_##SUF(k, i); } \
        __device__ static acc red_init(int mode) { return cu_acc_init_##SUF(mode); }    \
        __device__ static acc red_thread(const cu_red *p, int64_t o, int64_t c, int t)  \
        {                                                                               \
            return cu_red_thread_##SUF(p, o, c, t);                                     \
        }                                                                               \
        __device__ static acc red_combine(int mode, acc a, acc b)                       \
        {                                                                               \
            return cu_acc_combine_##SUF(mode, a, b);                                    \
        }                                                                               \
        __device__ static void red_store(const cu_red *p, int64_t o, int64_t c, acc a)  \
        {                                                                               \
            cu_red_store_##SUF(p, o, c, a);                                             \
        }                                                                               \
        __device__ static T softmax(bool log_form, T x, T m, T s)                       \
        {                                                                               \
            return cu_softmax_##SUF(log_form, x, m, s);                                 \
        }                                                                               \
        __device__ static T prod_grad(T x, T g, acc a) { return cu_prod_grad_##SUF(x, g, a); } \
        __device__ static void scatter(const cu_idx *k, int64_t n, int64_t e)           \
        {                                                                               \
            cu_scatter_element_##SUF(k, n, e);                                          \
        }                                                                               \
        __device__ static void map_thread(const cu_mapk *k, int64_t t)                   \
        {                                                                               \
            cu_map_thread_##SUF(k, t);                                                  \
        }                                                                               \
    };
CU_TYPED(float, f)
CU_TYPED(double, d)

// The integer arithmetic's instances (ew.h, reduce.h: sum and prod).
#define CU_TYPED_INT(T, SUF)                                                            \
    template <> struct cu_t<T> {                                                        \
        typedef cu_acc_##SUF acc;                                                       \
        __device__ static void binary(const cu_ew *k, int op, int64_t i)                \
        {                                                                               \
            cu_ew_binary_##SUF(k, op, i);                                               \
        }                                                                               \
        __device__ static void unary(const cu_ew *k, int op, int64_t i)                 \
        {                                                                               \
            cu_ew_unary_##SUF(k, op, i);                                                \
        }                                                                               \
        __device__ static bool zero(const cu_ew *k, int64_t i) { return cu_ew_zero_##SUF(k, i); } \
        __device__ static acc red_init(int mode) { return cu_acc_init_##SUF(mode); }    \
        __device__ static acc red_thread(const cu_red *p, int64_t o, int64_t c, int t)  \
        {                                                                               \
            return cu_red_thread_##SUF(p, o, c, t);                                     \
        }                                                                               \
        __device__ static acc red_combine(int mode, acc a, acc b)                       \
        {                                                                               \
            return cu_acc_combine_##SUF(mode, a, b);                                    \
        }                                                                               \
        __device__ static void red_store(const cu_red *p, int64_t o, int64_t c, acc a)  \
        {                                                                               \
            cu_red_store_##SUF(p, o, c, a);                                             \
        }                                                                               \
    };
CU_TYPED_INT(int32_t, i32)
CU_TYPED_INT(int64_t, i64)

// Runs F<int32_t> or F<int64_t>'s launcher by the (integer) dtype.
#define CU_BY_INT_DTYPE(dt, FN, ...) ((dt) == TL_I32 ? FN<int32_t>(__VA_ARGS__) : FN<int64_t>(__VA_ARGS__))

// Runs F<float> or F<double>'s launcher by the dtype.
#define CU_BY_DTYPE(dt, FN, ...) ((dt) == TL_F32 ? FN<float>(__VA_ARGS__) : FN<double>(__VA_ARGS__))

#endif
