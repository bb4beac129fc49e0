/* Comparing result sets, and the text and json reports
 * (formats/compare.h). */
#include "formats/compare.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/text.h"

/* ---------- the rule ---------- */

tl_code tl_compare_check_opts(const tl_compare_opts *o, tl_status *st)
{
    char num[TL_FMT_LEN];
    if (o->rtol_set && !(o->rtol >= 0))
        return tl_fmt_f64(num, sizeof num, o->rtol),
               tl_fail(st, TL_EINPUT, "--rtol %s: a tolerance is a number >= 0", num);
    if (!(o->atol >= 0))
        return tl_fmt_f64(num, sizeof num, o->atol),
               tl_fail(st, TL_EINPUT, "--atol %s: a tolerance is a number >= 0", num);
    if (o->use_ulp && o->ulp < 0)
        return tl_fail(st, TL_EINPUT, "--ulp %" PRId64 ": a count of units in the last place is >= 0",
                       o->ulp);
    if (o->use_ulp && (o->rtol_set || o->atol_set || o->atol != 0))
        return tl_fail(st, TL_EINPUT, "--ulp takes the place of --rtol and --atol: give one or the other");
    return TL_OK;
}

static double rtol_for(const tl_compare_opts *o, tl_dtype dt)
{
    return o->rtol_set ? o->rtol : dt == TL_F32 ? TL_COMPARE_RTOL_F32 : TL_COMPARE_RTOL_F64;
}

/* |a - b| <= atol + rtol * |b| for finite a and b, in NumPy's order of
 * operations.  A difference that overflows is decided on everything
 * halved, which is exact at those magnitudes. */
static bool within_tol(double a, double b, double rtol, double atol)
{
    double d = fabs(a - b);
    if (isinf(d))
        return fabs(a / 2 - b / 2) <= atol / 2 + rtol * fabs(b / 2);
    return d <= atol + rtol * fabs(b);
}

/* Positions on the line of a dtype's values ordered by their bits, where
 * neighbouring values are 1 apart and +0, -0 both sit at 0. */
static int64_t ordered_f64(double x)
{
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? INT64_MIN - i : i;
}

static int64_t ordered_f32(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static uint64_t distance(int64_t p, int64_t q)
{
    return p > q ? (uint64_t)p - (uint64_t)q : (uint64_t)q - (uint64_t)p;
}

/* ---------- one pair ---------- */

/* How bad an element is, for picking the worst: a NaN mismatch, then any
 * mismatch, then a match with a nonzero error; within a class, the larger
 * abs error; the first of equals. */
typedef struct badness {
    int cls;
    double abs;
} badness;

static bool worse(badness x, badness y) { return x.cls > y.cls || (x.cls == y.cls && x.abs > y.abs); }

typedef struct pair_state {
    tl_compare_entry *e;
    badness worst;
} pair_state;

/* Counts element i: whether it matched, its class and its errors. */
static void tally(pair_state *p, int64_t i, bool match, bool nan, double abs, double rel)
{
    tl_compare_entry *e = p->e;
    e->mismatches += !match;
    if (!nan) {
        e->max_abs = abs > e->max_abs ? abs : e->max_abs;
        e->max_rel = rel > e->max_rel ? rel : e->max_rel;
    }
    badness b = {match ? (abs > 0 ? 1 : 0) : nan ? 3 : 2, nan ? 0 : abs};
    if (b.cls && worse(b, p->worst)) {
        p->worst = b;
        e->worst = i;
    }
}

static void compare_floats(pair_state *p, const tl_compare_opts *o)
{
    tl_compare_entry *e = p->e;
    bool f32 = e->a->dtype == TL_F32;
    for (int64_t i = 0; i < e->a->numel; i++) {
        double a = tl_tensor_get(e->a, i), b = tl_tensor_get(e->b, i);
        if (isnan(a) || isnan(b)) {
            tally(p, i, isnan(a) && isnan(b) && o->equal_nan, true, 0, 0);
            continue;
        }
        uint64_t ulp = f32 ? distance(ordered_f32((float)a), ordered_f32((float)b))
                           : distance(ordered_f64(a), ordered_f64(b));
        double abs = a == b ? 0 : fabs(a - b);
        double rel = abs == 0 ? 0 : isinf(b) ? INFINITY : abs / fabs(b);
        bool match = isinf(a) || isinf(b) || a == b ? a == b /* (equal: a match for --rtol inf too, where */
                   : o->use_ulp                     ? ulp <= (uint64_t)o->ulp /* inf * 0 is NaN) */
                                                    : within_tol(a, b, e->rtol, e->atol);
        e->max_ulp = ulp > e->max_ulp ? ulp : e->max_ulp;
        tally(p, i, match, false, abs, rel);
    }
}

static void compare_ints(pair_state *p)
{
    tl_compare_entry *e = p->e;
    for (int64_t i = 0; i < e->a->numel; i++) {
        int64_t a = tl_tensor_get_int(e->a, i), b = tl_tensor_get_int(e->b, i);
        uint64_t d = distance(a, b);
        double rel = !d ? 0 : !b ? INFINITY : (double)d / fabs((double)b);
        e->max_abs_int = d > e->max_abs_int ? d : e->max_abs_int;
        tally(p, i, d == 0, false, (double)d, rel);
    }
}

static void compare_pair(tl_compare_entry *e, const tl_compare_opts *o)
{
    e->worst = -1;
    if (!e->a || !e->b) {
        e->reason = e->a ? TL_CMP_ONLY_A : TL_CMP_ONLY_B;
        return;
    }
    if (e->a->dtype != e->b->dtype) {
        e->reason = TL_CMP_DTYPE;
        return;
    }
    if (!tl_same_shape(e->a, e->b)) {
        e->reason = TL_CMP_SHAPE;
        return;
    }
    pair_state p = {e, {0, 0}};
    if (tl_dtype_is_int(e->a->dtype)) {
        compare_ints(&p);
    } else {
        e->rtol = rtol_for(o, e->a->dtype);
        e->atol = o->atol;
        compare_floats(&p, o);
    }
    e->match = e->mismatches == 0;
}

/* ---------- pairing ---------- */

static void add_entry(tl_compare_report *r, const char *name, const tl_tensor *a, const tl_tensor *b)
{
    tl_compare_entry *e = &r->entries[r->n++];
    *e = (tl_compare_entry){.name = name, .a = a, .b = b};
    compare_pair(e, &r->opts);
    r->mismatched += !e->match;
}

/* A .npy's one unnamed tensor stands for whatever the other side's only
 * tensor is called. */
static bool pair_anonymous(tl_compare_report *r, const tl_result_set *a, const tl_result_set *b)
{
    if (a->n != 1 || b->n != 1 || !(a->anonymous || b->anonymous))
        return false;
    add_entry(r, a->anonymous && !b->anonymous ? b->names[0] : a->names[0], a->ts[0], b->ts[0]);
    return true;
}

static tl_code pair_by_name(tl_compare_report *r, const tl_result_set *a, const tl_result_set *b,
                            tl_status *st)
{
    int *order_a = tl_result_set_order(a, st);
    int *order_b = order_a ? tl_result_set_order(b, st) : NULL;
    if (!order_b) {
        free(order_a);
        return st->code;
    }
    for (int i = 0; i < a->n; i++) {
        int j = tl_result_set_lookup(b, order_b, a->names[i]);
        add_entry(r, a->names[i], a->ts[i], j < 0 ? NULL : b->ts[j]);
    }
    for (int j = 0; j < b->n; j++)
        if (tl_result_set_lookup(a, order_a, b->names[j]) < 0)
            add_entry(r, b->names[j], NULL, b->ts[j]);
    free(order_a);
    free(order_b);
    return TL_OK;
}

/* The values are read in place: a tensor on a device is a caller's bug. */
static tl_code check_host(const tl_result_set *s, tl_status *st)
{
    for (int i = 0; i < s->n; i++)
        if (s->ts[i]->device.kind != TL_DEV_CPU)
            return tl_fail(st, TL_ERUNTIME, "internal error: comparing '%s', which is not in host memory",
                           s->names[i]);
    return TL_OK;
}

tl_compare_report *tl_compare(const tl_result_set *a, const tl_result_set *b,
                              const tl_compare_opts *opts, tl_status *st)
{
    tl_compare_opts dflt = {0};
    opts = opts ? opts : &dflt;
    if (tl_compare_check_opts(opts, st) || check_host(a, st) || check_host(b, st))
        return NULL;
    tl_compare_report *r = tl_calloc(1, sizeof *r, "a comparison report", st);
    if (!r)
        return NULL;
    r->opts = *opts;
    r->entries = tl_calloc((size_t)a->n + (size_t)b->n + 1, sizeof *r->entries, "a comparison report", st);
    if (!r->entries || (!pair_anonymous(r, a, b) && pair_by_name(r, a, b, st))) {
        tl_compare_free(r);
        return NULL;
    }
    return r;
}

bool tl_compare_all_match(const tl_compare_report *r) { return r->mismatched == 0; }

void tl_compare_free(tl_compare_report *r)
{
    if (!r)
        return;
    free(r->entries);
    free(r);
}

/* ---------- formatting ---------- */

enum { CELL = 1024 }; /* room for any cell but the name: two shapes, or an index and two values */

static int fmt_elem(char *buf, size_t len, const tl_tensor *t, int64_t i)
{
    if (t->dtype == TL_F32)
        return tl_fmt_f32(buf, len, ((const float *)t->data)[i]);
    if (t->dtype == TL_F64)
        return tl_fmt_f64(buf, len, ((const double *)t->data)[i]);
    return snprintf(buf, len, "%" PRId64, tl_tensor_get_int(t, i));
}

/* "[2,3]" (sep ","; json: sep ", "). */
static void fmt_dims(char *buf, size_t len, int ndim, const int64_t *dims, const char *sep)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, d ? sep : "", dims[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

/* The multi-index of flat index i of t. */
static void fmt_index(char *buf, size_t len, const tl_tensor *t, int64_t i, const char *sep)
{
    int64_t idx[TL_MAXDIM];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    fmt_dims(buf, len, t->ndim, idx, sep);
}

static const tl_tensor *either(const tl_compare_entry *e) { return e->a ? e->a : e->b; }

static bool is_int(const tl_compare_entry *e) { return tl_dtype_is_int(either(e)->dtype); }

static void fmt_max_abs(char *buf, size_t len, const tl_compare_entry *e)
{
    if (is_int(e))
        snprintf(buf, len, "%" PRIu64, e->max_abs_int);
    else
        tl_fmt_f64(buf, len, e->max_abs);
}

/* ---------- the text report ---------- */

/* Writes s with control characters escaped; returns the columns used. */
static int put_escaped(FILE *f, const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool control = *p < 0x20 || *p == 0x7f;
        if (f && control)
            fprintf(f, "\\x%02x", *p);
        else if (f)
            fputc(*p, f);
        n += control ? 4 : 1;
    }
    return n;
}

enum { C_STATUS, C_NAME, C_DESC, C_ABS, C_REL, C_ULP, C_TAIL, NCOLS };

/* The cells of e's row (C_NAME is left empty: names are written escaped,
 * not copied); returns how many columns the row has. */
static int row_cells(const tl_compare_report *r, const tl_compare_entry *e, char cells[NCOLS][CELL])
{
    char a[TL_FMT_LEN], b[TL_FMT_LEN], at[TL_MAXDIM * 24], sa[TL_MAXDIM * 24], sb[TL_MAXDIM * 24];
    memset(cells, 0, sizeof(char[NCOLS][CELL]));
    snprintf(cells[C_STATUS], CELL, "%s", e->match ? "match" : "MISMATCH");
    tl_tensor_desc(either(e), cells[C_DESC], CELL);
    char *tail = cells[C_ABS]; /* a row without values says why right after the dtype */
    switch (e->reason) {
    case TL_CMP_ONLY_A: snprintf(tail, CELL, "only in A (missing from B)"); return C_ABS + 1;
    case TL_CMP_ONLY_B: snprintf(tail, CELL, "only in B (missing from A)"); return C_ABS + 1;
    case TL_CMP_DTYPE:
        snprintf(tail, CELL, "dtype differs: %s in A, %s in B", tl_dtype_name(e->a->dtype),
                 tl_dtype_name(e->b->dtype));
        return C_ABS + 1;
    case TL_CMP_SHAPE:
        fmt_dims(sa, sizeof sa, e->a->ndim, e->a->shape, ",");
        fmt_dims(sb, sizeof sb, e->b->ndim, e->b->shape, ",");
        snprintf(tail, CELL, "shape differs: %s in A, %s in B", sa, sb);
        return C_ABS + 1;
    case TL_CMP_COMPARED: break;
    }
    /* figures to read, 4 digits (the json report has them exactly) */
    if (is_int(e))
        fmt_max_abs(a, sizeof a, e);
    else
        tl_fmt_sig(a, sizeof a, e->max_abs, 4);
    tl_fmt_sig(b, sizeof b, e->max_rel, 4);
    snprintf(cells[C_ABS], CELL, "max abs %s", a);
    snprintf(cells[C_REL], CELL, "max rel %s", b);
    if (r->opts.use_ulp && !is_int(e))
        snprintf(cells[C_ULP], CELL, "max ulp %" PRIu64, e->max_ulp);
    if (e->match)
        return cells[C_ULP][0] ? C_ULP + 1 : C_REL + 1;
    fmt_index(at, sizeof at, e->a, e->worst, ",");
    fmt_elem(a, sizeof a, e->a, e->worst);
    fmt_elem(b, sizeof b, e->b, e->worst);
    snprintf(cells[C_TAIL], CELL, "%" PRId64 " of %" PRId64 " differ, worst %s: a %s, b %s",
             e->mismatches, e->a->numel, at, a, b);
    return C_TAIL + 1;
}

/* Writes the rows, each cell but a row's last padded to its column's
 * width w; with f NULL, only measures the widths into w. */
static void write_rows(FILE *f, const tl_compare_report *r, bool mismatches_only, int *w)
{
    char cells[NCOLS][CELL];
    for (int i = 0; i < r->n; i++) {
        const tl_compare_entry *e = &r->entries[i];
        if (mismatches_only && e->match)
            continue;
        int n = row_cells(r, e, cells);
        for (int c = 0; c < n; c++) {
            if (c != C_NAME && !cells[c][0])
                continue; /* a column this row does not have */
            int len = c == C_NAME ? put_escaped(f, e->name)
                    : f           ? fprintf(f, "%s", cells[c])
                                  : (int)strlen(cells[c]);
            if (f)
                fprintf(f, "%*s", c + 1 < n ? w[c] - len + 2 : 0, "");
            else if (c + 1 < n)
                w[c] = len > w[c] ? len : w[c];
        }
        if (f)
            fputc('\n', f);
    }
}

static void write_rule(FILE *f, const tl_compare_opts *o)
{
    char rtol[TL_FMT_LEN], atol[TL_FMT_LEN], r32[TL_FMT_LEN], r64[TL_FMT_LEN];
    tl_fmt_f64(atol, sizeof atol, o->atol);
    tl_fmt_f64(rtol, sizeof rtol, o->rtol);
    tl_fmt_f64(r32, sizeof r32, TL_COMPARE_RTOL_F32);
    tl_fmt_f64(r64, sizeof r64, TL_COMPARE_RTOL_F64);
    if (o->use_ulp)
        fprintf(f, "ulp %" PRId64, o->ulp); /* as "rtol X": the rule, not a finding */
    else if (o->rtol_set)
        fprintf(f, "rtol %s, atol %s", rtol, atol);
    else
        fprintf(f, "rtol %s for f64, %s for f32; atol %s", r64, r32, atol);
    fputs(o->equal_nan ? "; NaN equals NaN" : "", f);
}

tl_code tl_compare_write_text(FILE *f, const tl_compare_report *r, bool mismatches_only, tl_status *st)
{
    int w[NCOLS] = {0};
    write_rows(NULL, r, mismatches_only, w);
    write_rows(f, r, mismatches_only, w);
    if (r->mismatched)
        fprintf(f, "%d of %d tensor%s differ%s (", r->mismatched, r->n, r->n == 1 ? "" : "s",
                r->mismatched == 1 ? "s" : "");
    else
        fprintf(f, "%s%d tensor%s (", r->n > 1 ? "all " : "", r->n, r->n == 1 ? " matches" : "s match");
    write_rule(f, &r->opts);
    fputs(")\n", f);
    return ferror(f) ? tl_fail(st, TL_ERUNTIME, "error writing the comparison report") : TL_OK;
}

/* ---------- the json report ---------- */

/* A number as tl prints tensors; NaN and infinities as strings. */
static void json_number(FILE *f, const char *text)
{
    bool word = isalpha((unsigned char)text[text[0] == '-']);
    fprintf(f, word ? "\"%s\"" : "%s", text);
}

static void json_f64(FILE *f, double v)
{
    char buf[TL_FMT_LEN];
    tl_fmt_f64(buf, sizeof buf, v);
    json_number(f, buf);
}

/* ", "KEY": " and null, or without it for the caller to write the value. */
static void json_field(FILE *f, const char *key, bool present)
{
    fprintf(f, ", \"%s\": %s", key, present ? "" : "null");
}

static void json_type(FILE *f, const char *dtype_key, const char *shape_key, const tl_tensor *t)
{
    char shape[TL_MAXDIM * 24];
    json_field(f, dtype_key, t);
    if (t)
        fprintf(f, "\"%s\"", tl_dtype_name(t->dtype));
    json_field(f, shape_key, t);
    if (t)
        fmt_dims(shape, sizeof shape, t->ndim, t->shape, ", "), fputs(shape, f);
}

static const char *reason_text(tl_compare_reason why)
{
    static const char *const text[] = {"", "only in A", "only in B", "dtype differs", "shape differs"};
    return text[why];
}

/* The fields of the values compared, all null when they were not. */
static void json_values(FILE *f, const tl_compare_report *r, const tl_compare_entry *e)
{
    char buf[CELL];
    bool values = e->reason == TL_CMP_COMPARED, floats = values && !is_int(e);
    bool tol = floats && !r->opts.use_ulp, worst = values && e->worst >= 0;
    json_field(f, "mismatches", values);
    if (values)
        fprintf(f, "%" PRId64, e->mismatches);
    json_field(f, "max_abs_error", values);
    if (values)
        fmt_max_abs(buf, sizeof buf, e), json_number(f, buf);
    json_field(f, "max_rel_error", values);
    if (values)
        json_f64(f, e->max_rel);
    json_field(f, "max_ulp_error", floats);
    if (floats)
        fprintf(f, "%" PRIu64, e->max_ulp);
    json_field(f, "rtol", tol);
    if (tol)
        json_f64(f, e->rtol);
    json_field(f, "atol", tol);
    if (tol)
        json_f64(f, e->atol);
    json_field(f, "worst_index", worst);
    if (worst)
        fmt_index(buf, sizeof buf, e->a, e->worst, ", "), fputs(buf, f);
    json_field(f, "a", worst);
    if (worst)
        fmt_elem(buf, sizeof buf, e->a, e->worst), json_number(f, buf);
    json_field(f, "b", worst);
    if (worst)
        fmt_elem(buf, sizeof buf, e->b, e->worst), json_number(f, buf);
}

static void json_entry(FILE *f, const tl_compare_report *r, const tl_compare_entry *e)
{
    fputs("{\"name\": ", f);
    tl_json_write_string(f, e->name);
    fprintf(f, ", \"match\": %s", e->match ? "true" : "false");
    json_field(f, "reason", e->reason);
    if (e->reason)
        tl_json_write_string(f, reason_text(e->reason));
    json_type(f, "dtype", "shape", e->a);
    json_type(f, "b_dtype", "b_shape", e->b);
    json_values(f, r, e);
    fputc('}', f);
}

tl_code tl_compare_write_json(FILE *f, const tl_compare_report *r, tl_status *st)
{
    const tl_compare_opts *o = &r->opts;
    fprintf(f, "{\"match\": %s, \"total\": %d, \"mismatched\": %d, \"rtol\": ",
            r->mismatched ? "false" : "true", r->n, r->mismatched);
    o->rtol_set ? json_f64(f, o->rtol) : (void)fputs("null", f);
    fputs(", \"atol\": ", f);
    json_f64(f, o->atol);
    fputs(", \"ulp\": ", f);
    o->use_ulp ? fprintf(f, "%" PRId64, o->ulp) : fputs("null", f);
    fprintf(f, ", \"equal_nan\": %s, \"tensors\": [", o->equal_nan ? "true" : "false");
    for (int i = 0; i < r->n; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_entry(f, r, &r->entries[i]);
    }
    fputs(r->n ? "\n]}\n" : "]}\n", f);
    return ferror(f) ? tl_fail(st, TL_ERUNTIME, "error writing the comparison report") : TL_OK;
}
