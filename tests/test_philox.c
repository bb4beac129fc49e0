/* The generator of the seeded draws (backends/philox.h): Philox4x32-10
 * against Random123's known-answer vectors, the key layout, and every
 * draw fixture (tests/fixtures/nn/{random_uniform,random_normal,dropout}_*,
 * whose values tests/gen/gen_nn_random.py computes with its own Philox)
 * bit for bit, run after run. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "backends/philox.h"
#include "fixture.h"

Test(philox, known_answers)
{
    static const uint32_t kat[][10] = { /* counter, key, output (Random123 kat_vectors) */
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {~0u, ~0u, ~0u, ~0u, ~0u, ~0u, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
         0x5001e420, 0x24126ea1},
    };
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        uint32_t out[4];
        tl_philox4x32_10(kat[t], kat[t][4], kat[t][5], out);
        for (int w = 0; w < 4; w++)
            cr_expect_eq(out[w], kat[t][6 + w], "vector %zu word %d: %08x, expected %08x", t, w, out[w],
                         kat[t][6 + w]);
    }
}

Test(philox, key_layout)
{
    /* the seed as two's complement, low word first; element i's counter */
    tl_rng_key k = tl_rng_key_make(-2, 7, 9);
    cr_expect(k.k0 == 0xfffffffeu && k.k1 == 0xffffffffu && k.node == 7 && k.step == 9);
    uint32_t a[4], b[4], c[4] = {5, 1, 7, 9};
    tl_rng_block(&k, ((uint64_t)1 << 32) + 5, a);
    tl_philox4x32_10(c, k.k0, k.k1, b);
    cr_expect(!memcmp(a, b, sizeof a), "counter (i low, i high, node, step)");
    /* step words: 0 at the top, t + 1 in step t, nested ones combined */
    cr_expect_eq(tl_rng_step_word(0, 0), 1u);
    cr_expect_eq(tl_rng_step_word(0, 4), 5u);
    cr_expect_eq(tl_rng_step_word(2, 0), 2u * 0x9E3779B9u + 1u);
    /* another node or step: other words */
    tl_rng_key n = tl_rng_key_make(-2, 8, 9), s = tl_rng_key_make(-2, 7, 10);
    tl_rng_block(&n, 5, a);
    tl_rng_block(&s, 5, b);
    tl_rng_block(&k, 5, c);
    cr_expect(memcmp(a, c, sizeof a) && memcmp(b, c, sizeof b));
    /* the conversions' ends: 0 and the largest below 1; u1 never 0 */
    uint32_t lo[4] = {0, 0, 0, 0}, hi[4] = {~0u, ~0u, ~0u, ~0u};
    cr_expect(tl_rng_unit_f(lo) == 0.0f && tl_rng_unit_f(hi) == 1.0f - 0x1p-24f);
    cr_expect(tl_rng_unit_d(lo) == 0.0 && tl_rng_unit_d(hi) == 1.0 - 0x1p-53);
    cr_expect(isfinite(tl_rng_normal(lo)) && tl_rng_normal(hi) == 0.0);
    /* tl's own log and cos at exact points: log 1, log 1/2 (the double
     * nearest -ln 2), log 2^-53; whole and quarter turns */
    const uint64_t one = (uint64_t)1 << 53;
    cr_expect(tl_rng_log_unit(one) == 0.0 && tl_rng_log_unit(one / 2) == -0.6931471805599453);
    cr_expect(tl_rng_log_unit(1) == -36.7368005696771); /* tests/gen/gen_nn_random.py's bits */
    cr_expect(tl_rng_cos_turn(one) == 1.0 && tl_rng_cos_turn(one / 2) == -1.0);
    cr_expect(tl_rng_cos_turn(one / 4) == 0.0 && tl_rng_cos_turn(3 * (one / 4)) == 0.0);
    cr_expect(tl_rng_cos_turn(one / 8) == 0.7071067811865476);
    /* a draw whose sum rounds up to high is clamped below it */
    cr_expect(tl_rng_uniform_f(hi, 1.0f, 1.0f + 0x1p-23f) == 1.0f);
    cr_expect(tl_rng_uniform_d(hi, 1e16, 1e16 + 2) < 1e16 + 2);
}

/* Every output of one case equals the fixture's value in its dtype, bit
 * for bit (sign included), on two runs. */
static int check_bits(const char *dir, const char *name)
{
    fixture f;
    int bad = 0;
    tl_status st = {0};
    if (!load(dir, name, &f)) {
        unload(&f);
        return 1;
    }
    for (int run = 0; run < 2 && !bad; run++) {
        tl_tensor *outs[16] = {0};
        if (!eval(&f, f.in, outs, NULL, &st)) {
            cr_log_error("%s: %s", name, st.msg);
            bad = 1;
        }
        for (int i = 0; !bad && i < f.g->noutputs; i++) {
            char key[300];
            snprintf(key, sizeof key, "out/%s", f.g->slot_name[f.g->outputs[i]]);
            tl_tensor *want = tl_npz_get(f.z, key, &st);
            for (int64_t j = 0; want && !bad && j < want->numel; j++) {
                double w = tl_tensor_get(want, j), got = tl_tensor_get(outs[i], j);
                if (outs[i]->dtype == TL_F32)
                    w = (float)w;
                if (got != w || signbit(got) != signbit(w)) {
                    cr_log_error("%s: %s[%lld], run %d: got %.17g, expected %.17g", name, key, (long long)j,
                                 run + 1, got, w);
                    bad = 1;
                }
            }
            bad += !want;
            tl_tensor_unref(want);
        }
        for (int i = 0; i < f.g->noutputs; i++)
            tl_tensor_unref(outs[i]);
    }
    unload(&f);
    return bad;
}

Test(philox, fixtures_bit_for_bit)
{
    DIR *d = opendir("tests/fixtures/nn");
    cr_assert(d, "cannot open tests/fixtures/nn (run from the repository root)");
    struct dirent *e;
    int fails = 0, count = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") ||
            (strncmp(e->d_name, "random_", 7) && strncmp(e->d_name, "dropout_", 8)))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
        count++;
        fails += check_bits("tests/fixtures/nn", name);
    }
    closedir(d);
    cr_assert(count >= 20, "only %d draw cases", count);
    cr_assert_eq(fails, 0, "%d of %d draw cases differ from the generator's bits", fails, count);
}
