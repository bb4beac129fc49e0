/* batch_norm_var (backends/cpu/cpu_reduce.c), the variance that training
 * batch_norm computes off the tape: the same bits as the recipe it stands
 * in for, mean(square(x - m)) over every axis but the channels, made with
 * the CPU's own sub, square and mean, over random shapes (2 to 5 axes,
 * one channel, one sample, no samples, empty planes, and planes long enough that the
 * sums run on several threads) in f32 and f64. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/tensor.h"
#include "splitmix.h"

static uint64_t rng_state = 20261202;

static uint64_t next(void) { return splitmix64(&rng_state); }

static int64_t below(int64_t n) { return (int64_t)(next() % (uint64_t)n); }

/* values that round when subtracted and squared: offsets near the mean */
static tl_tensor *random_tensor(tl_dtype dt, int nd, const int64_t *shape)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, nd, shape, &st);
    cr_assert(t, "%s", st.msg);
    for (int64_t i = 0; i < t->numel; i++)
        tl_tensor_set(t, i, 3.0 + (double)(next() >> 11) / 9007199254740992.0 * 0.25 - 0.125);
    return t;
}

static void one_case(tl_dtype dt, int nd, const int64_t *shape, int round)
{
    tl_status st = {0};
    int64_t keep[TL_MAXDIM];
    for (int i = 0; i < nd; i++)
        keep[i] = i == 1 ? shape[1] : 1;
    tl_tensor *x = random_tensor(dt, nd, shape), *m = random_tensor(dt, nd, keep);
    tl_tensor *d = tl_tensor_new(dt, nd, shape, &st), *sq = tl_tensor_new(dt, nd, shape, &st);
    tl_tensor *want = tl_tensor_new(dt, nd, keep, &st), *got = tl_tensor_new(dt, nd, keep, &st);
    cr_assert(d && sq && want && got, "%s", st.msg);
    const tl_tensor *sub_in[2] = {x, m}, *sq_in[1] = {d};
    cr_assert(!cpu_elementwise(TL_OP_SUB, 2, sub_in, &tl_attrs_default, d, &st), "%s", st.msg);
    cr_assert(!cpu_elementwise(TL_OP_SQUARE, 1, sq_in, &tl_attrs_default, sq, &st), "%s", st.msg);
    tl_attrs a;
    tl_attrs_init(&a);
    a.has_axes = a.keepdims = true;
    for (int k = 0; k < nd; k++)
        if (k != 1)
            a.axes[a.naxes++] = k;
    cr_assert(!cpu_reduce(TL_OP_MEAN, sq, &a, want, &st), "%s", st.msg);
    cr_assert(!cpu_batch_norm_var(x, m, got, &st), "%s", st.msg);
    size_t bytes = tl_dtype_size(dt) * (size_t)want->numel;
    cr_assert(!memcmp(got->data, want->data, bytes), "round %d: %s x [%lld, %lld, ... %d axes, %lld elements]: "
              "batch_norm_var differs from mean(square(x - m)) (first channel %.17g against %.17g)",
              round, tl_dtype_name(dt), (long long)shape[0], (long long)shape[1], nd, (long long)x->numel,
              tl_tensor_get(got, 0), tl_tensor_get(want, 0));
    tl_tensor *all[] = {x, m, d, sq, want, got};
    for (int i = 0; i < 6; i++)
        tl_tensor_unref(all[i]);
}

Test(norm, batch_norm_var_has_the_recipes_bits)
{
    for (int round = 0; round < 300; round++) {
        tl_dtype dt = round % 2 ? TL_F64 : TL_F32;
        int nd = 2 + (int)below(4);
        int64_t shape[TL_MAXDIM] = {1 + below(9), 1 + below(7)};
        if (round % 10 == 3)
            shape[1] = 1; /* one channel: the samples' sums by psum */
        if (round % 10 == 4)
            shape[0] = 1;
        if (round % 50 == 17)
            shape[0] = 0; /* no samples: 0 / 0 both ways */
        int64_t budget = 1 << 14;
        for (int i = 2; i < nd; i++) {
            shape[i] = 1 + below(i == nd - 1 ? 40 : 12);
            budget /= shape[i] > 0 ? shape[i] : 1;
        }
        if (round % 25 == 7 && nd > 2)
            shape[nd - 1] = 0; /* empty planes: 0 / 0 both ways */
        if (round % 25 == 11) { /* planes past the threaded sums' threshold */
            nd = 3;
            shape[0] = 2, shape[1] = 2, shape[2] = 70000 + below(5000);
        }
        if (round % 25 == 13) { /* two axes and a long column */
            nd = 2;
            shape[0] = 70000 + below(5000), shape[1] = 1;
        }
        one_case(dt, nd, shape, round);
    }
}
