/* Every op and control-flow construct against PyTorch references
 * (tests/fixtures/{ops,flow}, made by tests/gen/gen_op_fixtures.py):
 * values and vector-Jacobian products in f32 and f64, and, for f64 cases
 * away from kinks, the gradients against central finite differences. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "fixture.h"

/* |got - want| <= rtol*|want| + atol*max(1, max|want|); NaN and
 * infinities must match exactly. */
static int compare(const char *what, const tl_tensor *got, const tl_tensor *want, bool f32,
                   bool signed_zero)
{
    double rtol = f32 ? 2e-4 : 1e-9, atol = f32 ? 2e-5 : 1e-11;
    char a[96], b[96];
    if (!tl_same_shape(got, want)) {
        cr_log_error("%s: shape %s, expected %s", what, tl_tensor_desc(got, a, 96), tl_tensor_desc(want, b, 96));
        return 1;
    }
    if (tl_dtype_is_int(got->dtype) || tl_dtype_is_int(want->dtype)) { /* exact, in its dtype */
        if (got->dtype != want->dtype) {
            cr_log_error("%s: %s, expected %s", what, tl_tensor_desc(got, a, 96), tl_tensor_desc(want, b, 96));
            return 1;
        }
        for (int64_t i = 0; i < want->numel; i++)
            if (tl_tensor_get_int(got, i) != tl_tensor_get_int(want, i)) {
                cr_log_error("%s[%lld]: got %lld, expected %lld", what, (long long)i,
                             (long long)tl_tensor_get_int(got, i), (long long)tl_tensor_get_int(want, i));
                return 1;
            }
        return 0;
    }
    double scale = 1;
    for (int64_t i = 0; i < want->numel; i++) {
        double w = fabs(tl_tensor_get(want, i));
        if (isfinite(w) && w > scale)
            scale = w;
    }
    for (int64_t i = 0; i < want->numel; i++) {
        double x = tl_tensor_get(got, i), y = tl_tensor_get(want, i);
        bool ok = isnan(y) ? isnan(x) : isinf(y) ? x == y : fabs(x - y) <= rtol * fabs(y) + atol * scale;
        if (ok && signed_zero && y == 0)
            ok = signbit(x) == signbit(y);
        if (!ok) {
            cr_log_error("%s[%lld]: got %.17g, expected %.17g", what, (long long)i, x, y);
            return 1;
        }
    }
    return 0;
}

static int check_reference(const char *dir, const char *name)
{
    fixture f;
    int bad = 0;
    char key[300];
    tl_status st = {0};
    if (!load(dir, name, &f)) {
        unload(&f);
        return 1;
    }
    int no = f.g->noutputs, ni = f.g->ninputs;
    tl_tensor *outs[64] = {0}, *grads[64] = {0};
    if (!eval(&f, f.in, outs, grads, &st)) {
        cr_log_error("%s: %s", name, st.msg);
        bad = 1;
    }
    bool sz = strstr(name, "neg_zero") != NULL;
    for (int i = 0; !bad && i < no; i++) {
        snprintf(key, sizeof key, "out/%s", f.g->slot_name[f.g->outputs[i]]);
        tl_tensor *want = tl_npz_get(f.z, key, &st);
        char what[400];
        snprintf(what, sizeof what, "%s: %s", name, key);
        bad += compare(what, outs[i], want, outs[i]->dtype == TL_F32, sz);
        tl_tensor_unref(want);
    }
    for (int k = 0; !bad && k < ni; k++) {
        snprintf(key, sizeof key, "grad/%s", f.g->inputs[k].name);
        if (tl_dtype_is_int(f.in[k]->dtype)) { /* never differentiated */
            cr_expect(!grads[k] && !tl_npz_has(f.z, key), "%s: index input %s has a gradient", name,
                      f.g->inputs[k].name);
            bad += grads[k] != NULL;
            continue;
        }
        tl_tensor *want = tl_npz_get(f.z, key, &st);
        char what[400];
        snprintf(what, sizeof what, "%s: %s", name, key);
        /* a grad that went through an f32 cast is only f32-accurate */
        bool f32 = grads[k]->dtype == TL_F32 || strstr(name, "cast") != NULL;
        bad += compare(what, grads[k], want, f32, false);
        tl_tensor_unref(want);
    }
    for (int i = 0; i < no; i++)
        tl_tensor_unref(outs[i]);
    for (int k = 0; k < ni; k++)
        tl_tensor_unref(grads[k]);
    unload(&f);
    return bad;
}

/* seed . f(inputs) */
static double objective(const fixture *f, tl_tensor *const *in, bool *ok)
{
    tl_tensor *outs[64] = {0};
    tl_status st = {0};
    double s = 0;
    *ok = eval(f, in, outs, NULL, &st);
    for (int i = 0; *ok && i < f->g->noutputs; i++)
        for (int64_t j = 0; f->seed[i] && j < outs[i]->numel; j++)
            s += tl_tensor_get(f->seed[i], j) * tl_tensor_get(outs[i], j);
    for (int i = 0; i < f->g->noutputs; i++)
        tl_tensor_unref(outs[i]);
    return s;
}

static int check_finite_differences(const char *dir, const char *name)
{
    fixture f;
    int bad = 0;
    tl_status st = {0};
    if (!load(dir, name, &f)) {
        unload(&f);
        return 1;
    }
    tl_tensor *outs[64] = {0}, *grads[64] = {0};
    if (!eval(&f, f.in, outs, grads, &st)) {
        cr_log_error("%s: %s", name, st.msg);
        bad = 1;
    }
    bool any_f32 = false;
    for (int i = 0; !bad && i < f.g->noutputs; i++)
        any_f32 = any_f32 || outs[i]->dtype == TL_F32;
    for (int k = 0; !any_f32 && !bad && k < f.g->ninputs; k++) {
        tl_tensor *x = f.in[k];
        if (x->dtype != TL_F64)
            continue;
        for (int64_t j = 0; j < x->numel && !bad; j++) {
            double x0 = tl_tensor_get(x, j), h = 1e-6 * fmax(1, fabs(x0));
            bool ok1, ok2;
            tl_tensor_set(x, j, x0 + h);
            double up = objective(&f, f.in, &ok1);
            tl_tensor_set(x, j, x0 - h);
            double down = objective(&f, f.in, &ok2);
            tl_tensor_set(x, j, x0);
            double num = (up - down) / (2 * h), ana = tl_tensor_get(grads[k], j);
            if (!ok1 || !ok2 || !(fabs(num - ana) <= 1e-5 * (1 + fabs(ana)))) {
                cr_log_error("%s: d/d%s[%lld]: finite differences %.10g, tl %.10g", name,
                             f.g->inputs[k].name, (long long)j, num, ana);
                bad = 1;
            }
        }
    }
    for (int i = 0; i < f.g->noutputs; i++)
        tl_tensor_unref(outs[i]);
    for (int k = 0; k < f.g->ninputs; k++)
        tl_tensor_unref(grads[k]);
    unload(&f);
    return bad;
}

/* Every case of dir passes check; at least `least` cases exist. */
static void all_pass(const char *dir, checker check, bool fd_only, int least, const char *what)
{
    int fails, count;
    each_case(dir, check, fd_only, &fails, &count);
    cr_assert(count >= least, "only %d cases found in %s", count, dir);
    cr_assert_eq(fails, 0, "%d of %d cases in %s: %s", fails, count, dir, what);
}

Test(ops, against_pytorch)
{
    all_pass("tests/fixtures/ops", check_reference, false, 654, "differ from PyTorch");
}

Test(ops, finite_differences)
{
    all_pass("tests/fixtures/ops", check_finite_differences, true, 301,
             "disagree with finite differences");
}

Test(flow, against_pytorch)
{
    all_pass("tests/fixtures/flow", check_reference, false, 43, "differ from PyTorch");
}

Test(flow, finite_differences)
{
    all_pass("tests/fixtures/flow", check_finite_differences, true, 19,
             "disagree with finite differences");
}

/* The layer ops of nn.md (tests/fixtures/nn, made by tests/gen/gen_nn_*.py). */
Test(nn, against_pytorch)
{
    all_pass("tests/fixtures/nn", check_reference, false, 1, "differ from PyTorch");
}

Test(nn, finite_differences)
{
    all_pass("tests/fixtures/nn", check_finite_differences, true, 1, "disagree with finite differences");
}
