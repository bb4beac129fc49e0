#define _POSIX_C_SOURCE 200809L
#include "formats/text.h"
#include "formats/npy.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ */
/* Numbers                                                             */

static bool same_f64(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static bool same_f32(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Renders v with p significant digits as "-d.ddde+XX"; true when that text
 * reads back to the same bits.  v holds an f32 exactly when is_f32. */
static bool round_trips(char *sci, double v, bool is_f32, int p)
{
    snprintf(sci, TL_FMT_LEN, "%.*e", p - 1, v);
    if (is_f32)
        return same_f32(strtof(sci, NULL), (float)v);
    return same_f64(strtod(sci, NULL), v);
}

/* Leaves in sci the fewest digits that round-trip.  Up to DBL_DIG (FLT_DIG)
 * digits, round-tripping is monotone in the digit count (any decimal of
 * that many digits survives decimal -> binary -> decimal), so a binary
 * search finds the shortest there; that keeps printing a large tensor at
 * about 5 tries a value instead of 17.  Every answer is checked, so even
 * where the monotonicity argument does not hold (subnormals) the text
 * still reads back exactly. */
static void shortest_sci(char *sci, double v, bool is_f32)
{
    int dig = is_f32 ? FLT_DIG : DBL_DIG, max = is_f32 ? 9 : 17;
    if (!round_trips(sci, v, is_f32, dig)) {
        for (int p = dig + 1; p < max; p++)
            if (round_trips(sci, v, is_f32, p))
                return;
        round_trips(sci, v, is_f32, max);
        return;
    }
    int lo = 1, hi = dig;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (round_trips(sci, v, is_f32, mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    round_trips(sci, v, is_f32, hi);
}

/* Lays "-d.ddde+XX" out as Python's repr of a float does. */
static void layout(char *out, size_t len, const char *sci)
{
    char digits[TL_FMT_LEN], *o = out;
    int nd = 0;
    const char *s = sci;
    if (*s == '-')
        *o++ = *s++;
    for (; *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    int exp = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    size_t room = len - (size_t)(o - out);
    if (exp < -4 || exp >= 16)
        snprintf(o, room, "%c%s%.*se%c%02d", digits[0], nd > 1 ? "." : "", nd - 1, digits + 1,
                 exp < 0 ? '-' : '+', abs(exp));
    else if (exp < 0)
        snprintf(o, room, "0.%.*s%.*s", -exp - 1, "0000", nd, digits);
    else if (nd > exp + 1)
        snprintf(o, room, "%.*s.%.*s", exp + 1, digits, nd - exp - 1, digits + exp + 1);
    else
        snprintf(o, room, "%.*s%.*s.0", nd, digits, exp + 1 - nd, "0000000000000000");
}

static int fmt_value(char *buf, size_t len, double v, bool is_f32)
{
    char sci[TL_FMT_LEN], out[TL_FMT_LEN];
    if (isnan(v))
        return snprintf(buf, len, "nan");
    if (isinf(v))
        return snprintf(buf, len, "%s", v < 0 ? "-inf" : "inf");
    shortest_sci(sci, v, is_f32);
    layout(out, sizeof out, sci);
    return snprintf(buf, len, "%s", out);
}

bool tl_f32_overflows(double v) { return isfinite(v) && isinf((float)v); }

int tl_fmt_f64(char *buf, size_t len, double v) { return fmt_value(buf, len, v, false); }

int tl_fmt_sig(char *buf, size_t len, double v, int digits)
{
    char sci[TL_FMT_LEN], out[TL_FMT_LEN];
    if (isnan(v) || isinf(v))
        return fmt_value(buf, len, v, false);
    digits = digits < 1 ? 1 : digits > 17 ? 17 : digits;
    snprintf(sci, sizeof sci, "%.*e", digits - 1, v);
    layout(out, sizeof out, sci);
    return snprintf(buf, len, "%s", out);
}

int tl_fmt_f32(char *buf, size_t len, float v) { return fmt_value(buf, len, (double)v, true); }

static int fmt_elem(char *buf, const tl_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TL_F32: return tl_fmt_f32(buf, TL_FMT_LEN, ((const float *)t->data)[i]);
    case TL_F64: return tl_fmt_f64(buf, TL_FMT_LEN, ((const double *)t->data)[i]);
    default: return snprintf(buf, TL_FMT_LEN, "%lld", (long long)tl_tensor_get_int(t, i));
    }
}

/* The non-finite spellings tl reads, exactly as graph.md writes them (a
 * graph's data and attributes, and command-line literals, alike). */
static bool special_value(const char *s, size_t n, double *v)
{
    static const struct {
        const char *word;
        int sign; /* 0 for NaN */
    } words[] = {{"nan", 0}, {"inf", 1}, {"-inf", -1}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strlen(words[i].word) != n || strncmp(s, words[i].word, n))
            continue;
        *v = words[i].sign ? words[i].sign * (double)INFINITY : (double)NAN;
        return true;
    }
    return false;
}

static tl_code check_host(const tl_tensor *t, tl_status *st)
{
    if (t->device.kind == TL_DEV_CPU)
        return TL_OK;
    return tl_fail(st, TL_ERUNTIME, "internal error: tensor is not in host memory");
}

static tl_code write_status(FILE *f, tl_status *st)
{
    return ferror(f) ? tl_fail(st, TL_ERUNTIME, "error writing tensor output") : TL_OK;
}

/* ------------------------------------------------------------------ */
/* Text output                                                         */

enum {
    EDGE = 3,            /* entries kept at each end of an elided axis */
    SUMMARY_OVER = 1000, /* NumPy's print threshold */
    LINE_WIDTH = 75,     /* NumPy's line width */
};

typedef struct printer {
    FILE *f;
    const tl_tensor *t;
    int64_t stride[TL_MAXDIM];
    bool elide;
    int width; /* widest value shown, so that columns line up */
    int col;   /* column of the next character, for wrapping */
} printer;

/* Slots an axis of n entries shows: all, or EDGE + "..." + EDGE. */
static int64_t slots(const printer *p, int64_t n) { return p->elide && n > 2 * EDGE ? 2 * EDGE + 1 : n; }

/* The entry shown in slot k, or -1 for the "..." slot. */
static int64_t slot_entry(const printer *p, int64_t n, int64_t k)
{
    if (slots(p, n) == n)
        return k;
    return k < EDGE ? k : k == EDGE ? -1 : n - (2 * EDGE + 1) + k;
}

static void measure(printer *p, int axis, int64_t base)
{
    int64_t n = p->t->shape[axis], m = slots(p, n);
    for (int64_t k = 0; k < m; k++) {
        int64_t i = slot_entry(p, n, k);
        if (i < 0)
            continue;
        int64_t at = base + i * p->stride[axis];
        if (axis + 1 < p->t->ndim) {
            measure(p, axis + 1, at);
        } else {
            char buf[TL_FMT_LEN];
            int w = fmt_elem(buf, p->t, at);
            p->width = w > p->width ? w : p->width;
        }
    }
}

static void emit(printer *p, const char *s)
{
    fputs(s, p->f);
    p->col += (int)strlen(s);
}

static void emit_break(printer *p, int newlines, int indent)
{
    for (int i = 0; i < newlines; i++)
        fputc('\n', p->f);
    fprintf(p->f, "%*s", indent, "");
    p->col = indent;
}

static void print_row(printer *p, int axis, int64_t base)
{
    int64_t n = p->t->shape[axis], m = slots(p, n);
    emit(p, "[");
    for (int64_t k = 0; k < m; k++) {
        char buf[TL_FMT_LEN] = "...", cell[2 * TL_FMT_LEN];
        int64_t i = slot_entry(p, n, k);
        if (i >= 0)
            fmt_elem(buf, p->t, base + i);
        snprintf(cell, sizeof cell, "%*s", i >= 0 ? p->width : 0, buf);
        if (k > 0) {
            emit(p, ",");
            /* room for " ", the cell and the "," or "]" after it */
            if (p->col + (int)strlen(cell) + 2 > LINE_WIDTH)
                emit_break(p, 1, axis + 1);
            else
                emit(p, " ");
        }
        emit(p, cell);
    }
    emit(p, "]");
}

static void print_axis(printer *p, int axis, int64_t base)
{
    if (axis + 1 == p->t->ndim) {
        print_row(p, axis, base);
        return;
    }
    int64_t n = p->t->shape[axis], m = slots(p, n);
    emit(p, "[");
    for (int64_t k = 0; k < m; k++) {
        if (k > 0) {
            emit(p, ",");
            /* as NumPy: one more blank line for each level further out */
            emit_break(p, p->t->ndim - axis - 1, axis + 1);
        }
        int64_t i = slot_entry(p, n, k);
        if (i < 0)
            emit(p, "...");
        else
            print_axis(p, axis + 1, base + i * p->stride[axis]);
    }
    emit(p, "]");
}

/* Entries the full print would show: elements, or for an empty tensor the
 * "[]" of its first empty axis, which can be just as many lines. */
static int64_t print_size(const tl_tensor *t)
{
    if (t->numel > 0)
        return t->numel;
    int64_t n = 1;
    for (int a = 0; a < t->ndim && t->shape[a] > 0 && n <= SUMMARY_OVER; a++)
        n = t->shape[a] > SUMMARY_OVER ? SUMMARY_OVER + 1 : n * t->shape[a];
    return n;
}

static void print_values(FILE *f, const tl_tensor *t, bool full)
{
    printer p = {.f = f, .t = t, .elide = !full && print_size(t) > SUMMARY_OVER};
    /* strides only matter when there are elements; with a zero-sized axis
     * the sizes after it could overflow a product */
    for (int a = t->ndim - 1; a >= 0 && t->numel > 0; a--)
        p.stride[a] = a + 1 == t->ndim ? 1 : p.stride[a + 1] * t->shape[a + 1];
    measure(&p, 0, 0);
    print_axis(&p, 0, 0);
}

tl_code tl_text_write(FILE *f, const char *name, const tl_tensor *t, bool full, tl_status *st)
{
    if (check_host(t, st))
        return st->code;
    if (name) {
        char desc[TL_MAXDIM * 24];
        fprintf(f, "%s: %s\n", name, tl_tensor_desc(t, desc, sizeof desc));
    }
    if (t->ndim == 0) {
        char buf[TL_FMT_LEN];
        fmt_elem(buf, t, 0);
        fputs(buf, f);
    } else {
        print_values(f, t, full);
    }
    fputc('\n', f);
    return write_status(f, st);
}

/* ------------------------------------------------------------------ */
/* JSON output                                                         */

static void json_elem(FILE *f, const tl_tensor *t, int64_t i)
{
    char buf[TL_FMT_LEN];
    fmt_elem(buf, t, i);
    /* JSON has no NaN or infinity: those go as strings */
    bool quote = !isfinite(tl_tensor_get(t, i));
    fprintf(f, "%s%s%s", quote ? "\"" : "", buf, quote ? "\"" : "");
}

tl_code tl_json_tensor_write(FILE *f, const tl_tensor *t, tl_status *st)
{
    if (check_host(t, st))
        return st->code;
    fprintf(f, "{\"dtype\": \"%s\", \"shape\": [", tl_dtype_name(t->dtype));
    for (int a = 0; a < t->ndim; a++)
        fprintf(f, "%s%lld", a ? ", " : "", (long long)t->shape[a]);
    fputs("], \"data\": [", f);
    for (int64_t i = 0; i < t->numel; i++) {
        if (i)
            fputs(", ", f);
        json_elem(f, t, i);
    }
    fputs("]}", f);
    return write_status(f, st);
}

/* ------------------------------------------------------------------ */
/* Tensor literals                                                     */

/* A recursive-descent parser rather than cJSON, so that f32 elements are
 * rounded once from their text, and so that depth is capped at TL_MAXDIM
 * before recursing (no stack overflow on "[[[[..."). */
typedef struct lit {
    const char *s; /* the whole text, so that columns count from its start */
    size_t len, pos;
    tl_dtype dt;
    int ndim;    /* depth at which numbers sit, -1 until one is seen */
    int deepest; /* deepest '[' so far, -1 for none */
    bool known[TL_MAXDIM];
    int64_t shape[TL_MAXDIM];
    int64_t idx[TL_MAXDIM]; /* where we are, for messages */
    unsigned char *data;    /* elements of dt so far */
    size_t n, cap;
    tl_status *st;
} lit;

static size_t col(const lit *L) { return L->pos + 1; }

static const char *found(const lit *L, char *buf, size_t len)
{
    unsigned char c = (unsigned char)L->s[L->pos];
    if (!c)
        return "the end of the text";
    if (isprint(c))
        snprintf(buf, len, "'%c'", c);
    else
        snprintf(buf, len, "byte 0x%02x", c);
    return buf;
}

static void skip_ws(lit *L)
{
    while (isspace((unsigned char)L->s[L->pos]))
        L->pos++;
}

/* Appends one element of L->dt, given as its bytes. */
static tl_code push(lit *L, const void *elem)
{
    size_t es = tl_dtype_size(L->dt);
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 64;
        void *p = realloc(L->data, cap * es);
        if (!p)
            return tl_fail(L->st, TL_ERUNTIME, "out of memory reading a tensor literal");
        L->data = p;
        L->cap = cap;
    }
    memcpy(L->data + L->n++ * es, elem, es);
    return TL_OK;
}

/* An element of an index tensor: an integer in the dtype's range, read
 * exactly (an i64 may need all 64 bits, more than a double holds). */
static tl_code parse_integer(lit *L, size_t k)
{
    const char *start = L->s + L->pos;
    if (strcspn(start, ".eE") < k) /* a fraction or an exponent */
        return tl_fail(L->st, TL_EINPUT, "%.*s at column %zu is not an integer (an %s literal holds indices)",
                       (int)(k > 40 ? 40 : k), start, col(L), tl_dtype_name(L->dt));
    char *end;
    errno = 0;
    long long v = strtoll(start, &end, 10);
    bool range = errno == ERANGE || (L->dt == TL_I32 && (v < INT32_MIN || v > INT32_MAX));
    if (end != start + k || range)
        return tl_fail(L->st, TL_EINPUT, "integer %.*s at column %zu is out of range for %s",
                       (int)(k > 40 ? 40 : k), start, col(L), tl_dtype_name(L->dt));
    L->pos += k;
    int32_t i32 = (int32_t)v;
    int64_t i64 = v;
    return push(L, L->dt == TL_I32 ? (const void *)&i32 : (const void *)&i64);
}

size_t tl_scan_number(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i + 1 < n && s[i] == '0' && isdigit((unsigned char)s[i + 1]))
        return 0; /* a leading zero */
    for (; i < n && isdigit((unsigned char)s[i]); i++)
        digits++;
    if (i < n && s[i] == '.')
        for (i++; i < n && isdigit((unsigned char)s[i]); i++)
            digits++;
    if (!digits)
        return 0;
    if (i >= n || (s[i] != 'e' && s[i] != 'E'))
        return i;
    size_t j = i + 1;
    if (j < n && (s[j] == '+' || s[j] == '-'))
        j++;
    if (j >= n || !isdigit((unsigned char)s[j]))
        return 0;
    while (j < n && isdigit((unsigned char)s[j]))
        j++;
    return j;
}

static tl_code parse_number(lit *L)
{
    const char *start = L->s + L->pos;
    size_t k = tl_scan_number(start, L->len - L->pos);
    if (!k)
        return tl_fail(L->st, TL_EINPUT, "malformed number at column %zu", col(L));
    if (tl_dtype_is_int(L->dt))
        return parse_integer(L, k);
    char *end;
    double d = 0;
    float f = 0;
    if (L->dt == TL_F32)
        f = strtof(start, &end); /* straight from the text: rounded once */
    else
        d = strtod(start, &end);
    if (end != start + k)
        return tl_fail(L->st, TL_EINPUT, "malformed number at column %zu", col(L));
    if (L->dt == TL_F32 ? isinf(f) : isinf(d))
        return tl_fail(L->st, TL_EINPUT, "number %.*s at column %zu is too large for %s (write inf)",
                       (int)(k > 40 ? 40 : k), start, col(L), tl_dtype_name(L->dt));
    L->pos += k;
    return push(L, L->dt == TL_F32 ? (const void *)&f : (const void *)&d);
}

static tl_code parse_word(lit *L, bool quoted)
{
    size_t at = col(L), begin = L->pos + quoted, end = begin;
    double v;
    if (quoted) {
        while (L->s[end] && L->s[end] != '"')
            end++;
        if (!L->s[end])
            return tl_fail(L->st, TL_EINPUT, "unterminated string at column %zu", at);
    } else {
        end += L->s[end] == '+' || L->s[end] == '-';
        while (isalpha((unsigned char)L->s[end]))
            end++;
    }
    int n = (int)(end - begin > 40 ? 40 : end - begin);
    if (!special_value(L->s + begin, end - begin, &v))
        return tl_fail(L->st, TL_EINPUT,
                       "'%.*s' at column %zu is not a number (expected a number, nan, inf or -inf)",
                       n, L->s + begin, at);
    if (tl_dtype_is_int(L->dt))
        return tl_fail(L->st, TL_EINPUT, "'%.*s' at column %zu is not an integer (an %s literal holds indices)",
                       n, L->s + begin, at, tl_dtype_name(L->dt));
    L->pos = end + quoted;
    float f = (float)v;
    return push(L, L->dt == TL_F32 ? (const void *)&f : (const void *)&v);
}

static tl_code parse_scalar(lit *L, int depth)
{
    const char *s = L->s + L->pos;
    bool sign = *s == '+' || *s == '-';
    bool word = isalpha((unsigned char)*s) || (sign && isalpha((unsigned char)s[1]));
    bool number = isdigit((unsigned char)*s) || *s == '.' || sign;
    if (!word && !number && *s != '"') {
        char buf[16];
        return tl_fail(L->st, TL_EINPUT, "expected a number, '[', nan or inf at column %zu, found %s",
                       col(L), found(L, buf, sizeof buf));
    }
    if (L->deepest >= depth || (L->ndim >= 0 && L->ndim != depth))
        return tl_fail(L->st, TL_EINPUT, "a number at column %zu where an array was expected", col(L));
    L->ndim = depth;
    if (*s == '"' || word)
        return parse_word(L, *s == '"');
    return parse_number(L);
}

static void row_name(const lit *L, int depth, char *buf, size_t len)
{
    if (depth == 1) {
        snprintf(buf, len, "row %lld", (long long)L->idx[0]);
        return;
    }
    size_t k = (size_t)snprintf(buf, len, "row ");
    for (int d = 0; d < depth && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "[%lld]", (long long)L->idx[d]);
}

/* The first array at each depth sets that dimension; the rest must agree. */
static tl_code close_array(lit *L, int depth, int64_t count)
{
    if (!L->known[depth]) {
        L->known[depth] = true;
        L->shape[depth] = count;
        return TL_OK;
    }
    if (L->shape[depth] == count)
        return TL_OK;
    char where[TL_MAXDIM * 24];
    row_name(L, depth, where, sizeof where);
    return tl_fail(L->st, TL_EINPUT, "ragged nested array: %s has %lld element%s, expected %lld", where,
                   (long long)count, count == 1 ? "" : "s", (long long)L->shape[depth]);
}

static tl_code parse_value(lit *L, int depth);

static tl_code parse_array(lit *L, int depth)
{
    if (depth >= TL_MAXDIM)
        return tl_fail(L->st, TL_EINPUT, "more than %d nested dimensions at column %zu", TL_MAXDIM, col(L));
    if (L->ndim >= 0 && depth >= L->ndim)
        return tl_fail(L->st, TL_EINPUT, "an array at column %zu where a number was expected", col(L));
    L->deepest = depth > L->deepest ? depth : L->deepest;
    L->pos++;
    skip_ws(L);
    int64_t count = 0;
    while (count > 0 || L->s[L->pos] != ']') {
        L->idx[depth] = count++;
        if (parse_value(L, depth + 1))
            return L->st->code;
        skip_ws(L);
        if (L->s[L->pos] == ']')
            break;
        if (L->s[L->pos] != ',') {
            char buf[16];
            return tl_fail(L->st, TL_EINPUT, "expected ',' or ']' at column %zu, found %s", col(L),
                           found(L, buf, sizeof buf));
        }
        L->pos++;
    }
    L->pos++;
    return close_array(L, depth, count);
}

static tl_code parse_value(lit *L, int depth)
{
    skip_ws(L);
    if (L->s[L->pos] == '[')
        return parse_array(L, depth);
    return parse_scalar(L, depth);
}

/* Reads "f32:" or "f64:" (or none) and returns where the value starts. */
static tl_code parse_prefix(lit *L)
{
    const char *colon = strchr(L->s, ':');
    L->dt = TL_F64;
    if (!colon)
        return TL_OK;
    size_t k = (size_t)(colon - L->s);
    char name[16] = "";
    if (k < sizeof name)
        memcpy(name, L->s, k);
    if (k >= sizeof name || !tl_dtype_parse(name, &L->dt))
        return tl_fail(L->st, TL_EINPUT, "unknown dtype prefix '%.*s' (expected f32:, f64:, i32: or i64:)",
                       (int)(k > 20 ? 20 : k), L->s);
    L->pos = k + 1;
    return TL_OK;
}

static tl_code parse_literal(lit *L)
{
    if (parse_prefix(L))
        return L->st->code;
    skip_ws(L);
    if (!L->s[L->pos])
        return tl_fail(L->st, TL_EINPUT, "empty tensor literal");
    if (parse_value(L, 0))
        return L->st->code;
    skip_ws(L);
    if (L->s[L->pos]) {
        char buf[16];
        return tl_fail(L->st, TL_EINPUT, "unexpected %s at column %zu after the value",
                       found(L, buf, sizeof buf), col(L));
    }
    return TL_OK;
}

tl_tensor *tl_literal_parse(const char *text, tl_status *st)
{
    lit L = {.s = text, .len = strlen(text), .ndim = -1, .deepest = -1, .st = st};
    tl_tensor *t = NULL;
    if (!parse_literal(&L)) {
        /* no number seen: the shape is that of the (empty) arrays */
        int ndim = L.ndim >= 0 ? L.ndim : L.deepest + 1;
        t = tl_read_tensor_new(L.dt, ndim, L.shape, st);
    }
    if (t && t->numel != (int64_t)L.n) {
        tl_fail(st, TL_ERUNTIME, "internal error: literal has %zu values for %lld elements", L.n,
                (long long)t->numel);
        tl_tensor_unref(t);
        t = NULL;
    }
    if (t && L.n)
        memcpy(t->data, L.data, L.n * tl_dtype_size(L.dt));
    free(L.data);
    return t;
}

/* ------------------------------------------------------------------ */
/* JSON data arrays                                                    */

typedef struct filler {
    tl_tensor *t;
    int64_t next;           /* element written next */
    int64_t idx[TL_MAXDIM]; /* where we are, for messages */
    tl_status *st;
} filler;

static const char *data_path(const filler *F, int depth, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "data");
    for (int d = 0; d < depth && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "[%lld]", (long long)F->idx[d]);
    return buf;
}

static const char *json_kind(const cJSON *v, char *buf, size_t len)
{
    if (cJSON_IsString(v)) {
        snprintf(buf, len, "the string \"%.20s\"", v->valuestring);
        return buf;
    }
    return cJSON_IsNumber(v) ? "a number"
         : cJSON_IsBool(v)   ? "a boolean"
         : cJSON_IsNull(v)   ? "null"
         : cJSON_IsArray(v)  ? "an array"
                             : "an object";
}

static tl_code fill_value(filler *F, const cJSON *v, int depth)
{
    double d;
    /* cJSON keeps only the double, so an f32 is rounded twice (text ->
     * double -> float).  That differs from strtof only for decimals within
     * half a double ulp of a midpoint between two floats; reparsing the text
     * would need a JSON parser that keeps it. */
    if (cJSON_IsNumber(v))
        d = v->valuedouble;
    else if (!cJSON_IsString(v) || !special_value(v->valuestring, strlen(v->valuestring), &d)) {
        char where[TL_MAXDIM * 24], kind[48];
        return tl_fail(F->st, TL_EINPUT, "%s is %s, expected a number or \"nan\", \"inf\", \"-inf\"",
                       data_path(F, depth, where, sizeof where), json_kind(v, kind, sizeof kind));
    }
    if (tl_dtype_is_int(F->t->dtype)) {
        /* cJSON holds a double: integers below 2^53 are exact, larger
         * ones may have been rounded on the way in */
        bool i32 = F->t->dtype == TL_I32;
        if (!(d == floor(d) && (i32 ? d >= -2147483648.0 && d <= 2147483647.0 : fabs(d) < 9007199254740992.0))) {
            char where[TL_MAXDIM * 24], num[TL_FMT_LEN];
            tl_fmt_f64(num, sizeof num, d);
            return tl_fail(F->st, TL_EINPUT, "%s is %s, expected an integer%s for %s", data_path(F, depth, where, sizeof where),
                           num, F->t->dtype == TL_I32 ? " in the i32 range" : " below 2^53 in magnitude (read larger ones from a file)",
                           tl_dtype_name(F->t->dtype));
        }
    }
    if (F->t->dtype == TL_F32 && tl_f32_overflows(d)) { /* 1e999 (JSON's inf) stays allowed */
        char where[TL_MAXDIM * 24], num[TL_FMT_LEN];
        tl_fmt_f64(num, sizeof num, d);
        return tl_fail(F->st, TL_EINPUT, "%s is %s, too large for f32 (write \"inf\")",
                       data_path(F, depth, where, sizeof where), num);
    }
    tl_tensor_set(F->t, F->next++, d);
    return TL_OK;
}

static int64_t array_size(const cJSON *v)
{
    int64_t n = 0;
    for (const cJSON *e = v->child; e; e = e->next)
        n++;
    return n;
}

static tl_code fill_nested(filler *F, const cJSON *v, int depth)
{
    if (depth == F->t->ndim)
        return fill_value(F, v, depth);
    char where[TL_MAXDIM * 24], kind[48];
    int64_t want = F->t->shape[depth], n;
    if (!cJSON_IsArray(v))
        return tl_fail(F->st, TL_EINPUT, "%s is %s, expected an array of %lld",
                       data_path(F, depth, where, sizeof where), json_kind(v, kind, sizeof kind),
                       (long long)want);
    if ((n = array_size(v)) != want)
        return tl_fail(F->st, TL_EINPUT, "%s has %lld element%s, expected %lld",
                       data_path(F, depth, where, sizeof where), (long long)n, n == 1 ? "" : "s",
                       (long long)want);
    int64_t k = 0;
    for (const cJSON *e = v->child; e; e = e->next) {
        F->idx[depth] = k++;
        if (fill_nested(F, e, depth + 1))
            return F->st->code;
    }
    return TL_OK;
}

static tl_code fill_flat(filler *F, const cJSON *v)
{
    int64_t n = array_size(v), k = 0;
    if (n != F->t->numel) {
        char desc[TL_MAXDIM * 24];
        return tl_fail(F->st, TL_EINPUT, "data has %lld value%s, expected %lld for %s", (long long)n,
                       n == 1 ? "" : "s", (long long)F->t->numel, tl_tensor_desc(F->t, desc, sizeof desc));
    }
    for (const cJSON *e = v->child; e; e = e->next) {
        F->idx[0] = k++;
        if (fill_value(F, e, 1))
            return F->st->code;
    }
    return TL_OK;
}

tl_code tl_json_fill(tl_tensor *t, const cJSON *data, tl_status *st)
{
    filler F = {.t = t, .st = st};
    if (check_host(t, st))
        return st->code;
    if (!cJSON_IsArray(data)) {
        if (t->numel == 1)
            return fill_value(&F, data, 0);
        char desc[TL_MAXDIM * 24], kind[48];
        return tl_fail(st, TL_EINPUT, "data is %s, expected an array for %s", json_kind(data, kind, sizeof kind),
                       tl_tensor_desc(t, desc, sizeof desc));
    }
    /* a nested array says so by its first element; otherwise read it flat */
    bool nested = data->child && cJSON_IsArray(data->child);
    return nested || t->ndim == 1 ? fill_nested(&F, data, 0) : fill_flat(&F, data);
}
