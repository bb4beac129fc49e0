#include "ops.h"

#include <stdlib.h>
#include <string.h>

const tl_opinfo tl_ops[TL_OP_COUNT] = {
#define OP(e, nm, lo, hi, k, dt, idx, at) [TL_OP_##e] = {nm, lo, hi, TL_KIND_##k, TL_DT_##dt, idx, at},
#include "ops.def"
#undef OP
};

_Static_assert(sizeof tl_ops / sizeof tl_ops[0] == TL_OP_COUNT, "one table row per op");

tl_opcode tl_op_lookup(const char *name)
{
    for (int i = 0; i < TL_OP_COUNT; i++)
        if (tl_ops[i].name[0] == name[0] && tl_ops[i].kind != TL_KIND_INT && !strcmp(tl_ops[i].name, name))
            return (tl_opcode)i;
    return TL_OP_COUNT;
}

tl_code tl_op_check_arity(tl_opcode op, int n, tl_status *st)
{
    const tl_opinfo *o = &tl_ops[op];
    if (n >= o->min_args && (o->max_args < 0 || n <= o->max_args))
        return TL_OK;
    if (o->max_args < 0)
        return tl_fail(st, TL_EINPUT, "takes %d or more arguments, got %d", o->min_args, n);
    if (o->max_args > o->min_args)
        return tl_fail(st, TL_EINPUT, "takes %d to %d arguments, got %d", o->min_args, o->max_args, n);
    return tl_fail(st, TL_EINPUT, "takes %d argument%s, got %d", o->min_args, o->min_args == 1 ? "" : "s", n);
}

int tl_edit_distance(const char *a, const char *b)
{
    enum { MAXL = 64 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAXL || m >= MAXL)
        return 9;
    int d[MAXL][MAXL];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m] > 9 ? 9 : d[n][m];
}

/* How many letters a and b do not share, counted with repeats: 0 for a
 * swap (tahn, tanh), 1 for a letter dropped or doubled (sinn, sin), 2 for
 * one letter in place of another (sinn, sign). */
static int letters_apart(const char *a, const char *b)
{
    int count[256] = {0}, n = 0;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        count[*p]++;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        count[*p]--;
    for (int c = 0; c < 256; c++)
        n += abs(count[c]);
    return n;
}

const char *tl_nearest(const char *name, const char *const *candidates, int n)
{
    const char *best = NULL;
    int bd = 3, bl = 0;
    for (int i = 0; i < n; i++) {
        int d = tl_edit_distance(name, candidates[i]), l = d <= bd ? letters_apart(name, candidates[i]) : 0;
        if (d < bd || (d == bd && best && l < bl)) { /* a tie: the one of the same letters */
            bd = d;
            bl = l;
            best = candidates[i];
        }
    }
    int len = (int)strlen(name); /* and half its letters kept: "q" is one edit from "x", and means nothing by it */
    return best && (bd <= 2 || 3 * bd <= len) && 2 * bd <= len ? best : NULL;
}

const char *tl_op_suggest(const char *name)
{
    const char *names[TL_OP_COUNT];
    int n = 0;
    for (int i = 0; i < TL_OP_COUNT; i++)
        if (tl_ops[i].kind != TL_KIND_INT)
            names[n++] = tl_ops[i].name;
    return tl_nearest(name, names, n);
}

const tl_attrs tl_attrs_default = {.step = 1,
                                   .dtype = TL_F64,
                                   .groups = 1,
                                   .count_include_pad = true,
                                   .training = -1,
                                   .epsilon = 1e-5,
                                   .cubic_coeff = -0.75,
                                   .high = 1,
                                   .std = 1};

void tl_attrs_init(tl_attrs *a)
{
    memcpy(a, &tl_attrs_default, sizeof *a);
}
