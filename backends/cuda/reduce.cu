// Reductions (sum, mean, max, min, prod, logsumexp; sum and prod of
// integers too), softmax, log_softmax and prod_grad, in the fixed tree of launch.h (cu_red_shape) with no
// atomics: the bits depend on the shapes only.  reduce.h holds what each
// thread computes; here are the kernels, the passes and the finishing
// elementwise steps.
#include "common.cuh"
#include "typed.cuh"

// Groups of p.sh.group threads, CU_THREADS / group of them per block, each
// reducing one (output, chunk): every thread folds its elements, then the
// group combines in a halving tree through shared memory.
template <typename T> __global__ void reduce_kernel(cu_red p)
{
    typedef typename cu_t<T>::acc acc;
    __shared__ acc part[CU_THREADS];
    int g = p.sh.group, per = CU_THREADS / g, t = (int)threadIdx.x % g;
    int64_t groups = p.nout * p.sh.nchunks, rounds = (groups + per - 1) / per;
    for (int64_t round = blockIdx.x; round < rounds; round += gridDim.x) { // uniform per block
        int64_t gi = round * per + (int64_t)threadIdx.x / g;
        int64_t o = gi / p.sh.nchunks, c = gi % p.sh.nchunks;
        part[threadIdx.x] = gi < groups ? cu_t<T>::red_thread(&p, o, c, t) : cu_t<T>::red_init(p.mode);
        for (int half = g / 2; half > 0; half /= 2) {
            __syncthreads();
            if (t < half)
                part[threadIdx.x] = cu_t<T>::red_combine(p.mode, part[threadIdx.x],
                                                         part[threadIdx.x + half]);
        }
        if (t == 0 && gi < groups)
            cu_t<T>::red_store(&p, o, c, part[threadIdx.x]);
        __syncthreads();
    }
}

// Runs the passes of p: the last one writes y (or, with y NULL, the
// accumulators into acc_out, one per output).
template <typename T> static tl_code passes(cu_state *s, cu_red p, void *y, void *acc_out,
                                            tl_status *st)
{
    typedef typename cu_t<T>::acc acc;
    void *prev = NULL;
    for (;;) {
        bool last = p.sh.nchunks == 1;
        void *mine = last ? acc_out : cu_scratch(s, sizeof(acc) * (size_t)(p.nout * p.sh.nchunks),
                                                 "reduction partials", st);
        if (!mine && !(last && y)) {
            cu_scratch_free(s, prev);
            return st->code;
        }
        p.y = last ? y : NULL;
        p.acc_out = mine;
        unsigned b = cu_group_blocks(p.nout * p.sh.nchunks, p.sh.group);
        reduce_kernel<T><<<b, CU_THREADS, 0, s->stream>>>(p);
        cu_scratch_free(s, prev); // stream order: read before it is handed out again
        tl_code rc = CU_CHECK(cudaGetLastError());
        if (rc || last) {
            if (!last)
                cu_scratch_free(s, mine);
            return rc;
        }
        prev = mine;
        cu_red_next(&p, prev);
    }
}

template <typename T> __global__ void mean_kernel(T *y, int64_t n, int64_t count)
{
    CU_FOR(i, n) y[i] = y[i] / (T)count;
}

// logsumexp, as the CPU: m = max with infinite maxima replaced by 0, then
// log(sum(exp(x - m))) + m.
template <typename T> __global__ void lse_fix_kernel(T *m, int64_t n)
{
    CU_FOR(i, n) if (isinf(m[i])) m[i] = 0;
}

template <typename T> __global__ void lse_finish_kernel(T *y, const T *sum, int64_t n)
{
    CU_FOR(i, n) y[i] = log(sum[i]) + y[i];
}

template <typename T> static tl_code logsumexp(cu_state *s, const cu_red *plan, tl_tensor *out,
                                               tl_status *st)
{
    cu_red p = *plan;
    int64_t n = out->numel;
    T *y = (T *)out->data;
    p.mode = CU_R_MAX;
    if (passes<T>(s, p, y, NULL, st))
        return st->code;
    CU_LAUNCH(s, lse_fix_kernel<T>, cu_blocks(n), y, n);
    T *sum = (T *)cu_scratch(s, sizeof(T) * (size_t)n, "logsumexp sums", st);
    if (!sum)
        return st->code;
    p = *plan;
    p.mode = CU_R_SUMEXP;
    p.m = y;
    tl_code rc = passes<T>(s, p, sum, NULL, st);
    if (!rc) {
        lse_finish_kernel<T><<<cu_blocks(n), CU_THREADS, 0, s->stream>>>(y, sum, n);
        rc = CU_CHECK(cudaGetLastError());
    }
    cu_scratch_free(s, sum);
    return rc;
}

template <typename T> static tl_code reduce(cu_state *s, tl_opcode op, const tl_tensor *x,
                                            const bool *mask, int64_t count, tl_tensor *out,
                                            tl_status *st)
{
    cu_red p;
    int mode = op == TL_OP_PROD ? CU_R_PROD : op == TL_OP_MAX ? CU_R_MAX
             : op == TL_OP_MIN ? CU_R_MIN : CU_R_SUM;
    cu_red_plan(&p, mode, x->ndim, x->shape, mask);
    p.x = x->data;
    if (op == TL_OP_LOGSUMEXP)
        return logsumexp<T>(s, &p, out, st);
    if (passes<T>(s, p, out->data, NULL, st))
        return st->code;
    if (op == TL_OP_MEAN)
        CU_LAUNCH(s, mean_kernel<T>, cu_blocks(out->numel), (T *)out->data, out->numel, count);
    return TL_OK;
}

// sum and prod of integers: exact, so the tree's order does not matter.
template <typename T> static tl_code int_reduce(cu_state *s, tl_opcode op, const tl_tensor *x,
                                                const bool *mask, tl_tensor *out, tl_status *st)
{
    cu_red p;
    cu_red_plan(&p, op == TL_OP_PROD ? CU_R_PROD : CU_R_SUM, x->ndim, x->shape, mask);
    p.x = x->data;
    return passes<T>(s, p, out->data, NULL, st);
}

tl_code cu_reduce(cu_state *s, tl_opcode op, const tl_tensor *x, const tl_attrs *a,
                  tl_tensor *out, tl_status *st)
{
    bool mask[TL_MAXDIM] = {false};
    int64_t count = 1;
    for (int i = 0; i < a->naxes; i++) {
        mask[a->axes[i]] = true;
        count *= x->shape[a->axes[i]];
    }
    if (a->naxes == 0 && op != TL_OP_LOGSUMEXP) // nothing reduced: the CPU copies
        return CU_CHECK(cudaMemcpyAsync(out->data, x->data, tl_tensor_bytes(out),
                                        cudaMemcpyDeviceToDevice, s->stream));
    if (tl_dtype_is_int(x->dtype))
        return CU_BY_INT_DTYPE(x->dtype, int_reduce, s, op, x, mask, out, st);
    return CU_BY_DTYPE(x->dtype, reduce, s, op, x, mask, count, out, st);
}

// ---------- softmax ----------

// x as [outer, r, inner] around the axis; m and sum per (outer, inner).
template <typename T> __global__ void softmax_kernel(const T *x, const T *m, const T *sum, T *y,
                                                     int64_t n, int64_t r, int64_t inner,
                                                     bool log_form)
{
    CU_FOR(i, n)
    {
        int64_t o = i / (r * inner) * inner + i % inner;
        y[i] = cu_t<T>::softmax(log_form, x[i], m[o], sum[o]);
    }
}

template <typename T> static tl_code softmax(cu_state *s, tl_opcode op, const tl_tensor *x,
                                             const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    bool mask[TL_MAXDIM] = {false};
    int ax = (int)a->axis;
    mask[ax] = true;
    cu_red p;
    cu_red_plan(&p, CU_R_MAX, x->ndim, x->shape, mask);
    p.x = x->data;
    int64_t inner = 1, rows = p.nout;
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= x->shape[d];
    T *m = (T *)cu_scratch(s, 2 * sizeof(T) * (size_t)rows, "softmax maxima and sums", st);
    if (!m)
        return st->code;
    T *sum = m + rows;
    tl_code rc = passes<T>(s, p, m, NULL, st);
    p.mode = CU_R_SUMEXP;
    p.m = m;
    if (!rc)
        rc = passes<T>(s, p, sum, NULL, st);
    if (!rc) {
        softmax_kernel<T><<<cu_blocks(x->numel), CU_THREADS, 0, s->stream>>>(
            (const T *)x->data, m, sum, (T *)out->data, x->numel, x->shape[ax], inner,
            op == TL_OP_LOG_SOFTMAX);
        rc = CU_CHECK(cudaGetLastError());
    }
    cu_scratch_free(s, m);
    return rc;
}

tl_code cu_softmax(cu_state *s, tl_opcode op, const tl_tensor *x, const tl_attrs *a,
                   tl_tensor *out, tl_status *st)
{
    return CU_BY_DTYPE(x->dtype, softmax, s, op, x, a, out, st);
}

// ---------- prod_grad ----------

// x [outer, r], g [outer]: each row's zeros and products, then each element.
template <typename T> __global__ void prod_grad_kernel(const T *x, const T *g,
                                                       const typename cu_t<T>::acc *rows, T *y,
                                                       int64_t n, int64_t r)
{
    CU_FOR(i, n) y[i] = cu_t<T>::prod_grad(x[i], g[i / r], rows[i / r]);
}

template <typename T> static tl_code prod_grad(cu_state *s, const tl_tensor *x, const tl_tensor *g,
                                               tl_tensor *out, tl_status *st)
{
    typedef typename cu_t<T>::acc acc;
    bool mask[2] = {false, true};
    cu_red p;
    cu_red_plan(&p, CU_R_PRODZ, 2, x->shape, mask);
    p.x = x->data;
    acc *rows = (acc *)cu_scratch(s, sizeof(acc) * (size_t)p.nout, "prod_grad rows", st);
    if (!rows)
        return st->code;
    tl_code rc = passes<T>(s, p, NULL, rows, st);
    if (!rc) {
        prod_grad_kernel<T><<<cu_blocks(x->numel), CU_THREADS, 0, s->stream>>>(
            (const T *)x->data, (const T *)g->data, rows, (T *)out->data, x->numel, x->shape[1]);
        rc = CU_CHECK(cudaGetLastError());
    }
    cu_scratch_free(s, rows);
    return rc;
}

tl_code cu_prod_grad(cu_state *s, const tl_tensor *x, const tl_tensor *g, tl_tensor *out,
                     tl_status *st)
{
    return CU_BY_DTYPE(x->dtype, prod_grad, s, x, g, out, st);
}
