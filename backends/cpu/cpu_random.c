/* CPU kernels of seeded randomness (nn.md): random_uniform, random_normal
 * and dropout draw from the counter-based generator of backends/philox.h,
 * keyed by the seed and the node's place (attrs rng_node, rng_step, set
 * by the executor).  Element i's bits depend on the key and i alone, so
 * the work is cut into fixed chunks and any thread may draw any chunk. */
#include <string.h>

#include "backends/philox.h"
#include "cpu.h"
#include "threads.h"

#define RNG_CHUNK 4096

typedef struct draw {
    tl_opcode op;
    tl_rng_key key;
    const tl_attrs *a;
    const tl_tensor *x; /* dropout's operand */
    tl_tensor *out;
} draw;

/* dropout: y = x * m with m = 1/q (q = 1 - p in the dtype) where the
 * element's uniform is below q, else 0 (so NaN and inf stay NaN, as x*0). */
#define DROPOUT(T, UNIT)                                              \
    do {                                                              \
        const T *x_ = j->x->data;                                     \
        T q_ = (T)(1.0 - j->a->p), s_ = (T)1 / q_;                    \
        for (int64_t i = lo; i < hi; i++) {                           \
            tl_rng_block(&j->key, (uint64_t)i, w);                    \
            y[i] = x_[i] * (UNIT(w) < q_ ? s_ : (T)0);                \
        }                                                             \
    } while (0)

static void draw_f(const draw *j, int64_t lo, int64_t hi)
{
    float *y = j->out->data;
    uint32_t w[4];
    float low = (float)j->a->low, high = (float)j->a->high;
    float mean = (float)j->a->mean, sd = (float)j->a->std;
    switch (j->op) {
    case TL_OP_RANDOM_UNIFORM:
        for (int64_t i = lo; i < hi; i++) {
            tl_rng_block(&j->key, (uint64_t)i, w);
            y[i] = tl_rng_uniform_f(w, low, high);
        }
        break;
    case TL_OP_RANDOM_NORMAL:
        for (int64_t i = lo; i < hi; i++) {
            tl_rng_block(&j->key, (uint64_t)i, w);
            y[i] = mean + sd * (float)tl_rng_normal(w);
        }
        break;
    default: DROPOUT(float, tl_rng_unit_f); break;
    }
}

static void draw_d(const draw *j, int64_t lo, int64_t hi)
{
    double *y = j->out->data;
    uint32_t w[4];
    switch (j->op) {
    case TL_OP_RANDOM_UNIFORM:
        for (int64_t i = lo; i < hi; i++) {
            tl_rng_block(&j->key, (uint64_t)i, w);
            y[i] = tl_rng_uniform_d(w, j->a->low, j->a->high);
        }
        break;
    case TL_OP_RANDOM_NORMAL:
        for (int64_t i = lo; i < hi; i++) {
            tl_rng_block(&j->key, (uint64_t)i, w);
            y[i] = j->a->mean + j->a->std * tl_rng_normal(w);
        }
        break;
    default: DROPOUT(double, tl_rng_unit_d); break;
    }
}

static void draw_item(void *ctx, int64_t item)
{
    const draw *j = ctx;
    int64_t lo = item * RNG_CHUNK, hi = lo + RNG_CHUNK;
    if (hi > j->out->numel)
        hi = j->out->numel;
    if (j->out->dtype == TL_F32)
        draw_f(j, lo, hi);
    else
        draw_d(j, lo, hi);
}

tl_code cpu_random(tl_opcode op, int n, cpu_ins in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    (void)st;
    draw j = {op, tl_rng_key_make(a->seed, a->rng_node, a->rng_step), a, n ? in[0] : NULL, out};
    if (!out->numel)
        return TL_OK;
    if (op == TL_OP_DROPOUT && a->training == 0) { /* inference: x as it is */
        memcpy(out->data, in[0]->data, tl_tensor_bytes(out));
        return TL_OK;
    }
    int64_t items = (out->numel + RNG_CHUNK - 1) / RNG_CHUNK;
    cpu_parallel(items, items > 1 ? cpu_nthreads() : 1, draw_item, &j);
    return TL_OK;
}
