/* Result sets read from .npz, .npy and json files (formats/results.h). */
#define _POSIX_C_SOURCE 200809L
#include "formats/results.h"

#include <cjson/cJSON.h>
#include "json_strict.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/sniff.h"
#include "formats/text.h"

/* A set read from a file: the public part first, so that a
 * tl_result_set * handed out points at the whole. */
typedef struct owned_set {
    tl_result_set pub;
    char **names;
    tl_tensor **ts;
    int cap;
    /* read for one key at a time (a tl_result_file): a tensor the text
     * output elided is kept as a stand-in, its error here for when that
     * key is asked for (NULL: none elided) */
    bool keep_elided;
    char **elided;
} owned_set;

static owned_set *set_new(tl_status *st)
{
    owned_set *o = tl_calloc(1, sizeof *o, "a result set", st);
    if (o)
        o->pub.owned = true;
    return o;
}

/* Appends prefix+name with t, taking t's reference even on failure. */
static tl_code set_add(owned_set *o, const char *prefix, const char *name, tl_tensor *t,
                       tl_status *st)
{
    if (o->pub.n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 8;
        char **names = realloc(o->names, (size_t)cap * sizeof *names);
        if (names)
            o->names = names;
        tl_tensor **ts = names ? realloc(o->ts, (size_t)cap * sizeof *ts) : NULL;
        if (!ts) {
            tl_tensor_unref(t);
            return tl_fail(st, TL_ERUNTIME, "out of memory reading a result set");
        }
        o->ts = ts;
        char **el = o->keep_elided ? realloc(o->elided, (size_t)cap * sizeof *el) : NULL;
        if (o->keep_elided && !el) {
            tl_tensor_unref(t);
            return tl_fail(st, TL_ERUNTIME, "out of memory reading a result set");
        }
        o->elided = el;
        o->cap = cap;
    }
    if (o->elided)
        o->elided[o->pub.n] = NULL;
    size_t np = strlen(prefix), nn = strlen(name);
    char *full = tl_malloc(np + nn + 1, 1, "a tensor name", st);
    if (!full) {
        tl_tensor_unref(t);
        return st->code;
    }
    memcpy(full, prefix, np);
    memcpy(full + np, name, nn + 1);
    o->names[o->pub.n] = full;
    o->ts[o->pub.n++] = t;
    o->pub.names = (const char *const *)o->names;
    o->pub.ts = (const tl_tensor *const *)o->ts;
    return TL_OK;
}

void tl_result_set_free(tl_result_set *s)
{
    if (!s || !s->owned)
        return;
    owned_set *o = (owned_set *)s;
    for (int i = 0; i < s->n; i++) {
        free(o->names[i]);
        tl_tensor_unref(o->ts[i]);
        if (o->elided)
            free(o->elided[i]);
    }
    free(o->elided);
    free(o->names);
    free(o->ts);
    free(o);
}

/* ---------- names ---------- */

typedef struct named {
    const char *name;
    int index;
} named;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

int *tl_result_set_order(const tl_result_set *s, tl_status *st)
{
    named *sorted = tl_malloc((size_t)s->n, sizeof *sorted, "an index of names", st);
    int *order = sorted ? tl_malloc((size_t)s->n, sizeof *order, "an index of names", st) : NULL;
    for (int i = 0; order && i < s->n; i++)
        sorted[i] = (named){s->names[i], i};
    if (order)
        qsort(sorted, (size_t)s->n, sizeof *sorted, by_name);
    for (int i = 0; order && i < s->n; i++) {
        order[i] = sorted[i].index;
        if (i && !strcmp(sorted[i - 1].name, sorted[i].name)) {
            tl_fail(st, TL_EINPUT, "the name '%s' is given twice", sorted[i].name);
            free(order);
            order = NULL;
        }
    }
    free(sorted);
    return order;
}

int tl_result_set_lookup(const tl_result_set *s, const int *order, const char *name)
{
    int lo = 0, hi = s->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(s->names[order[mid]], name);
        if (!c)
            return order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---------- .npy and .npz ---------- */

static tl_code read_npy(owned_set *o, const void *buf, size_t len, const char *name, tl_status *st)
{
    tl_tensor *t = tl_npy_read_mem(buf, len, st);
    if (!t)
        return st->code;
    o->pub.anonymous = true;
    return set_add(o, "", name, t, st);
}

static tl_code read_npz(owned_set *o, const void *buf, size_t len, tl_status *st)
{
    tl_npz *z = tl_npz_open_mem(buf, len, st);
    if (!z)
        return st->code;
    tl_code rc = TL_OK;
    for (int i = 0; i < tl_npz_count(z) && !rc; i++) {
        tl_tensor *t = tl_npz_get(z, tl_npz_key(z, i), st);
        rc = t ? set_add(o, "", tl_npz_key(z, i), t, st) : st->code;
    }
    tl_npz_close(z);
    return rc;
}

/* ---------- json ---------- */

typedef struct json_reader {
    const char *text;
    size_t len;
    tl_status *st;
} json_reader;

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void line_col(const char *text, size_t off, int *line, int *col)
{
    const char *nl = NULL;
    *line = 1;
    for (const char *p = text; p < text + off; p++)
        if (*p == '\n')
            (*line)++, nl = p;
    *col = (int)(text + off - (nl ? nl + 1 : text)) + 1;
}

/* Whether the text ends inside a string or with brackets still open
 * (cJSON then points at the last value, not at the end). */
static bool cut_short(const char *s, size_t len)
{
    int64_t depth = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                i += s[i] == '\\';
            if (i >= len)
                return true;
        }
        depth += (s[i] == '[' || s[i] == '{') - (s[i] == ']' || s[i] == '}');
    }
    return depth > 0;
}

static cJSON *parse_json(const json_reader *R)
{
    const char *end = NULL, *why;
    int line, col;
    size_t bad = tl_json_hazard(R->text, R->len, &why); /* what cJSON lets through, as the graph reader refuses it */
    if (bad < R->len) {
        line_col(R->text, bad, &line, &col);
        tl_fail(R->st, TL_EINPUT, "line %d, column %d: malformed JSON: %s", line, col, why);
        return NULL;
    }
    errno = 0; /* cJSON says only "failed": malloc's ENOMEM tells the two apart */
    cJSON *doc = cJSON_ParseWithLengthOpts(R->text, R->len, &end, false);
    if (!doc && errno == ENOMEM) {
        tl_fail(R->st, TL_ERUNTIME, "out of memory parsing JSON");
        return NULL;
    }
    size_t off = end && end >= R->text && end <= R->text + R->len ? (size_t)(end - R->text) : R->len;
    size_t rest = off; /* past the blanks: the end, or text after the object */
    while (rest < R->len && is_blank(R->text[rest]))
        rest++;
    bool oom = false;
    const cJSON *dup = doc && rest == R->len ? tl_json_duplicate(doc, 0, &oom) : NULL;
    if (doc && rest == R->len && (dup || oom)) { /* JSON readers disagree about a key given twice */
        if (oom)
            tl_fail(R->st, TL_ERUNTIME, "out of memory checking keys");
        else
            tl_fail(R->st, TL_EINPUT, "duplicate key \"%.64s\"", dup->string);
        cJSON_Delete(doc);
        return NULL;
    }
    if (doc && rest == R->len)
        return doc;
    bool early = !doc && (rest == R->len || cut_short(R->text, R->len));
    line_col(R->text, doc ? rest : early ? R->len : off, &line, &col);
    tl_fail(R->st, TL_EINPUT, "line %d, column %d: %s", line, col,
            doc ? "text after the result object" : early ? "malformed JSON (unexpected end of the text)"
                                                 : "malformed JSON");
    cJSON_Delete(doc);
    return NULL;
}

static bool number_char(char c) { return isdigit((unsigned char)c) || (c && strchr("+-.eE", c)); }

/* Offset of the first number at or after i, outside strings (i itself is
 * outside one). */
static size_t next_number(const char *s, size_t len, size_t i)
{
    for (; i < len; i++) {
        if (s[i] == '-' || isdigit((unsigned char)s[i]))
            return i;
        if (s[i] != '"')
            continue;
        for (i++; i < len && s[i] != '"'; i++)
            i += s[i] == '\\';
    }
    return len;
}

/* cJSON keeps a number only as a double, which holds neither every i64
 * nor (rounded once more to float) every f32 exactly.  Numbers stand in
 * the tree in the order of the text, so one walk of each gives every
 * number node the offset of its digits, kept in valueint (unused here). */
static bool mark_numbers(cJSON *v, const json_reader *R, size_t *pos)
{
    for (; v; v = v->next) {
        if (cJSON_IsNumber(v)) {
            *pos = next_number(R->text, R->len, *pos);
            if (*pos >= R->len)
                return false;
            v->valueint = (int)*pos;
            while (*pos < R->len && number_char(R->text[*pos]))
                (*pos)++;
        }
        if (v->child && !mark_numbers(v->child, R, pos))
            return false;
    }
    return true;
}

/* The digits of number node v, NUL-terminated: in buf where they fit,
 * else whole in memory of their own, which the caller frees (NULL when
 * there is none).  A number may run to any length (Python's Decimal
 * writes 5e-324 with 750 digits): cut short, it would read as another. */
static char *digits_whole(const json_reader *R, const cJSON *v, char buf[64])
{
    size_t from = (size_t)v->valueint, n = 0;
    while (from + n < R->len && number_char(R->text[from + n]))
        n++;
    char *s = n < 64 ? buf : malloc(n + 1);
    if (s) {
        memcpy(s, R->text + from, n);
        s[n] = '\0';
    }
    return s;
}

/* The digits of number node v for a message: its first 63 characters. */
static const char *digits(const json_reader *R, const cJSON *v, char buf[64])
{
    size_t k = 0;
    for (size_t i = (size_t)v->valueint; i < R->len && k < 63 && number_char(R->text[i]); i++)
        buf[k++] = R->text[i];
    buf[k] = '\0';
    return buf;
}

/* What v is, for messages: its digits, its string, or its kind. */
static const char *describe(const json_reader *R, const cJSON *v, char buf[64])
{
    if (cJSON_IsNumber(v))
        return digits(R, v, buf);
    if (cJSON_IsString(v)) {
        snprintf(buf, 64, "\"%.40s%s\"", v->valuestring, strlen(v->valuestring) > 40 ? "..." : "");
        return buf;
    }
    return cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? "true" : "false")
         : cJSON_IsNull(v) ? "null"
         : cJSON_IsArray(v) ? "an array"
                            : "an object";
}

/* An integer of dtype dt (i32 or i64) from v's digits, exactly; NULL, or
 * what is wrong with it. */
static const char *int_value(const json_reader *R, const cJSON *v, tl_dtype dt, int64_t *out)
{
    char buf[64];
    if (!cJSON_IsNumber(v))
        return "not an integer";
    char *s = digits_whole(R, v, buf);
    if (!s)
        return "too long to hold (out of memory)";
    const char *why = NULL;
    char *end;
    errno = 0;
    long long x = strpbrk(s, ".eE") ? 0 : strtoll(s, &end, 10);
    if (strpbrk(s, ".eE") || *end)
        why = "not an integer";
    else if (errno == ERANGE || (dt == TL_I32 && (x < INT32_MIN || x > INT32_MAX)))
        why = dt == TL_I32 ? "out of range for i32" : "out of range for i64";
    else
        *out = x;
    if (s != buf)
        free(s);
    return why;
}

/* A float of dtype dt from v: its digits rounded once to dt, or the
 * strings "nan", "inf", "-inf"; NULL, or what is wrong with it. */
static const char *float_value(const json_reader *R, const cJSON *v, tl_dtype dt, double *out)
{
    static const char *const words[] = {"nan", "inf", "-inf"};
    static const double values[] = {NAN, INFINITY, -INFINITY};
    if (cJSON_IsString(v)) {
        for (int k = 0; k < 3; k++)
            if (!strcmp(v->valuestring, words[k]))
                return *out = values[k], NULL;
        return "not a number, \"nan\", \"inf\" or \"-inf\"";
    }
    if (!cJSON_IsNumber(v))
        return "not a number";
    char buf[64], *end;
    char *s = digits_whole(R, v, buf); /* rounded once, from every digit written */
    if (!s)
        return "too long to hold (out of memory)";
    *out = dt == TL_F32 ? (double)strtof(s, &end) : strtod(s, &end);
    const char *why = *end ? "not a number" : isinf(*out) ? (dt == TL_F32 ? "out of range for f32" : "out of range for f64") : NULL;
    if (s != buf)
        free(s);
    return why;
}

static tl_code read_element(const json_reader *R, const cJSON *v, tl_tensor *t, int64_t i)
{
    const char *why;
    int64_t k = 0;
    double d = 0;
    if (!tl_dtype_is_int(t->dtype)) {
        if (!(why = float_value(R, v, t->dtype, &d)))
            return tl_tensor_set(t, i, d), TL_OK;
    } else if (!(why = int_value(R, v, t->dtype, &k))) {
        if (t->dtype == TL_I32)
            ((int32_t *)t->data)[i] = (int32_t)k;
        else
            ((int64_t *)t->data)[i] = k;
        return TL_OK;
    }
    char buf[64];
    return tl_fail(R->st, TL_EINPUT, "data[%lld] is %s: %s", (long long)i, describe(R, v, buf), why);
}

static tl_code read_shape(const json_reader *R, const cJSON *v, int *ndim, int64_t *shape)
{
    char buf[64];
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > TL_MAXDIM)
        return tl_fail(R->st, TL_EINPUT, "\"shape\" is %s, expected an array of at most %d sizes",
                       describe(R, v, buf), TL_MAXDIM);
    *ndim = 0;
    for (const cJSON *e = v->child; e; e = e->next, (*ndim)++) {
        const char *why = int_value(R, e, TL_I64, &shape[*ndim]);
        if (!why && shape[*ndim] < 0)
            why = "negative";
        if (why)
            return tl_fail(R->st, TL_EINPUT, "shape[%d] is %s: %s", *ndim, describe(R, e, buf), why);
    }
    return TL_OK;
}

/* One T = {"dtype", "shape", "data"}. */
static tl_tensor *read_tensor(const json_reader *R, const cJSON *v)
{
    char buf[64], desc[TL_MAXDIM * 24];
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(v, "shape");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(v, "data");
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !data ? "data" : NULL;
    tl_dtype dt;
    int ndim = 0;
    int64_t dims[TL_MAXDIM], numel = 0;
    if (!cJSON_IsObject(v))
        return tl_fail(R->st, TL_EINPUT, "is %s, expected an object {\"dtype\", \"shape\", \"data\"}",
                       describe(R, v, buf)), NULL;
    if (missing)
        return tl_fail(R->st, TL_EINPUT, "no \"%s\"", missing), NULL;
    if (!cJSON_IsString(dtype) || !tl_dtype_parse(dtype->valuestring, &dt))
        return tl_fail(R->st, TL_EINPUT, "\"dtype\" is %s, expected \"f32\", \"f64\", \"i32\" or \"i64\"",
                       describe(R, dtype, buf)), NULL;
    if (read_shape(R, shape, &ndim, dims) || tl_shape_numel(ndim, dims, &numel, R->st))
        return NULL;
    tl_shape_desc(dt, ndim, dims, desc, sizeof desc);
    if (!cJSON_IsArray(data))
        return tl_fail(R->st, TL_EINPUT, "\"data\" is %s, expected a flat array of the %lld values of %s",
                       describe(R, data, buf), (long long)numel, desc), NULL;
    int64_t count = cJSON_GetArraySize(data);
    if (count != numel)
        return tl_fail(R->st, TL_EINPUT, "\"data\" has %lld value%s, expected the %lld of %s", (long long)count,
                       count == 1 ? "" : "s", (long long)numel, desc), NULL;
    tl_tensor *t = tl_read_tensor_new(dt, ndim, dims, R->st);
    int64_t i = 0;
    for (const cJSON *e = data->child; t && e; e = e->next)
        if (read_element(R, e, t, i++)) {
            tl_tensor_unref(t);
            t = NULL;
        }
    return t;
}

/* The tensors of "outputs" or "grads", named prefix+key. */
static tl_code read_group(const json_reader *R, owned_set *o, const cJSON *g, const char *prefix)
{
    char buf[64];
    if (!cJSON_IsObject(g))
        return tl_fail(R->st, TL_EINPUT, "\"%s\" is %s, expected an object of tensors", g->string,
                       describe(R, g, buf));
    for (const cJSON *e = g->child; e; e = e->next) {
        tl_tensor *t = read_tensor(R, e);
        if (!t || set_add(o, prefix, e->string, t, R->st))
            return tl_wrap(R->st, "%s \"%s\"", g->string, e->string);
    }
    return TL_OK;
}

static tl_code read_json(owned_set *o, const char *text, size_t len, const char *name, tl_status *st)
{
    json_reader R = {text, len, st};
    if (len > INT_MAX) /* offsets are kept in an int */
        return tl_fail(st, TL_EINPUT, "a json result file over 2 GiB (write .npz instead)");
    cJSON *doc = parse_json(&R);
    if (!doc)
        return st->code;
    /* the groups of tensors and the prefixes of their names */
    static const char *const groups[][2] = {
        {"outputs", ""}, {"grads", "grad/"}, {"jvps", "jvp/"}, {"hvps", "hvp/"}};
    enum { NGROUPS = sizeof groups / sizeof groups[0] };
    const cJSON *group[NGROUPS];
    bool any = false;
    for (int k = 0; k < NGROUPS; k++) {
        group[k] = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, groups[k][0]) : NULL;
        any |= group[k] != NULL;
    }
    size_t pos = 0;
    tl_code rc = TL_OK;
    if (!mark_numbers(doc, &R, &pos))
        rc = tl_fail(st, TL_ERUNTIME, "internal error: numbers of the JSON text not found");
    else if (cJSON_IsObject(doc) && cJSON_GetObjectItemCaseSensitive(doc, "nodes"))
        rc = tl_fail(st, TL_EINPUT, "a graph, not a result file: expected a .npy, an .npz, or tl's json or "
                                    "text output"); /* its "outputs" names values; a result's holds them */
    else if (!any && cJSON_IsObject(doc) && cJSON_GetObjectItemCaseSensitive(doc, "dtype")) {
        /* one tensor, as tl show --format json prints it: read as a .npy is */
        tl_tensor *t = read_tensor(&R, doc);
        o->pub.anonymous = true;
        rc = t ? set_add(o, "", name, t, st) : st->code;
    } else if (!any)
        rc = tl_fail(st, TL_EINPUT, "not tl's json result format: expected an object with "
                                    "\"outputs\" and \"grads\", or one tensor {\"dtype\", \"shape\", \"data\"}");
    for (int k = 0; k < NGROUPS && !rc; k++)
        if (group[k])
            rc = read_group(&R, o, group[k], groups[k][1]);
    cJSON_Delete(doc);
    return rc;
}

/* ---------- text ---------- */

/* The header line of one tensor in the text output, "NAME: f32[2,3]":
 * whether line (n bytes) is one, with the name's length, the dtype and
 * the shape.  Value lines never hold ": ". */
static bool text_header(const char *line, size_t n, size_t *name_len, tl_dtype *dt, int *ndim,
                        int64_t *shape)
{
    const char *sep = NULL;
    for (const char *p = line; p + 1 < line + n; p++)
        if (p[0] == ':' && p[1] == ' ')
            sep = p;
    if (!sep || sep == line)
        return false;
    const char *d = sep + 2, *end = line + n, *br = memchr(d, '[', (size_t)(end - d));
    char name[8];
    if (!br || br - d >= (ptrdiff_t)sizeof name || end[-1] != ']')
        return false;
    memcpy(name, d, (size_t)(br - d));
    name[br - d] = '\0';
    if (!tl_dtype_parse(name, dt) || strcmp(name, tl_dtype_name(*dt)))
        return false;
    *ndim = 0;
    for (const char *p = br + 1; p < end - 1; p++) {
        if (*ndim == TL_MAXDIM || !isdigit((unsigned char)*p))
            return false;
        int64_t v = 0;
        for (; p < end - 1 && isdigit((unsigned char)*p); p++)
            if ((v = v * 10 + (*p - '0')) > ((int64_t)1 << 53))
                return false;
        shape[(*ndim)++] = v;
        if (p < end - 1 && (*p != ',' || p + 1 == end - 1))
            return false;
    }
    *name_len = (size_t)(sep - line);
    return true;
}

/* Whether a line holds nothing but what values print as (numbers, nan,
 * inf, brackets, commas, blanks). */
static bool value_line(const char *line, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!line[i] || !strchr("0123456789[], .+-eE\t\rnNaAiIfFtTyY", line[i]))
            return false;
    return true;
}

static size_t line_end(const char *text, size_t len, size_t i)
{
    const char *nl = memchr(text + i, '\n', len - i);
    return nl ? (size_t)(nl - text) : len;
}

/* Whether the values (blen bytes at body) were cut short with "...". */
static bool elided(const char *body, size_t blen)
{
    for (size_t i = 0; i + 2 < blen; i++)
        if (!memcmp(body + i, "...", 3))
            return true;
    return false;
}

static tl_code elided_error(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st)
{
    char desc[TL_MAXDIM * 24];
    tl_shape_desc(dt, ndim, shape, desc, sizeof desc);
    return tl_fail(st, TL_EINPUT, "%s is elided (\"...\"); print it whole with --full", desc);
}

/* One tensor: its values (the lines body, blen bytes) as a literal of the
 * header's dtype, which must have the header's shape (an empty one may
 * print as "[]" whatever its shape). */
static tl_tensor *text_tensor(const char *body, size_t blen, tl_dtype dt, int ndim, const int64_t *shape,
                              tl_status *st)
{
    char desc[TL_MAXDIM * 24], got[TL_MAXDIM * 24];
    int64_t numel;
    if (tl_shape_numel(ndim, shape, &numel, st))
        return NULL;
    tl_shape_desc(dt, ndim, shape, desc, sizeof desc);
    if (elided(body, blen))
        return elided_error(dt, ndim, shape, st), NULL;
    size_t n = strlen(tl_dtype_name(dt));
    char *lit = tl_malloc(n + 1 + blen + 1, 1, "a text tensor", st);
    if (!lit)
        return NULL;
    memcpy(lit, tl_dtype_name(dt), n);
    lit[n] = ':';
    memcpy(lit + n + 1, body, blen);
    lit[n + 1 + blen] = '\0';
    tl_tensor *t = tl_literal_parse(lit, st);
    free(lit);
    bool same = t && t->ndim == ndim && !memcmp(t->shape, shape, sizeof *shape * (size_t)ndim);
    if (t && !same && t->numel == 0 && numel == 0) { /* "[]" for f64[0,3] */
        tl_tensor_unref(t);
        t = tl_read_tensor_new(dt, ndim, shape, st);
    } else if (t && !same) {
        tl_fail(st, TL_EINPUT, "the values are %s, the header says %s", tl_tensor_desc(t, got, sizeof got), desc);
        tl_tensor_unref(t);
        t = NULL;
    }
    return t;
}

/* tl's text output: "NAME: DTYPE[DIMS]" lines, each followed by the
 * tensor's values as a literal. */
static tl_code read_text(owned_set *o, const char *text, size_t len, tl_status *st)
{
    size_t i = 0;
    int line = 1;
    while (i < len) {
        size_t e = line_end(text, len, i), name_len;
        tl_dtype dt;
        int ndim, first = line;
        int64_t shape[TL_MAXDIM];
        if (!text_header(text + i, e - i, &name_len, &dt, &ndim, shape))
            return tl_fail(st, TL_EINPUT, "line %d: expected a header \"NAME: DTYPE[DIMS]\"", line);
        size_t b = e < len ? e + 1 : len, j = b;
        for (line++; j < len; line++) {
            size_t k = line_end(text, len, j), unused;
            tl_dtype d2;
            int n2;
            int64_t s2[TL_MAXDIM];
            if (text_header(text + j, k - j, &unused, &d2, &n2, s2))
                break;
            if (!value_line(text + j, k - j))
                return tl_fail(st, TL_EINPUT, "line %d: expected values or a header \"NAME: DTYPE[DIMS]\"", line);
            j = k < len ? k + 1 : len;
        }
        /* any length tl writes: "grad/" and a 255-byte input name are 260 */
        char *name = tl_malloc(name_len + 1, 1, "a tensor name", st);
        if (!name)
            return st->code;
        memcpy(name, text + i, name_len);
        name[name_len] = '\0';
        tl_tensor *t = NULL;
        bool cut = o->keep_elided && elided(text + b, j - b);
        if (memchr(text + i, '\0', name_len))
            tl_fail(st, TL_EINPUT, "a NUL byte in the name");
        else if (cut) /* a stand-in; its error kept for when its key is asked for */
            t = tl_read_tensor_new(dt, 0, NULL, st);
        else
            t = text_tensor(text + b, j - b, dt, ndim, shape, st);
        tl_code rc = !t || set_add(o, "", name, t, st) ? tl_wrap(st, "line %d: \"%.255s\"", first, name) : TL_OK;
        if (!rc && cut) {
            tl_status e = {0};
            elided_error(dt, ndim, shape, &e);
            tl_wrap(&e, "line %d: \"%.255s\"", first, name);
            if (!(o->elided[o->pub.n - 1] = tl_strdup(e.msg, st)))
                rc = st->code;
        }
        free(name);
        if (rc)
            return rc;
        i = j;
    }
    return TL_OK;
}

static bool looks_like_text(const char *text, size_t len)
{
    size_t n, e = line_end(text, len, 0);
    tl_dtype dt;
    int ndim;
    int64_t shape[TL_MAXDIM];
    return text_header(text, e, &n, &dt, &ndim, shape);
}

/* ---------- names as JSON ---------- */

/* Length of the valid UTF-8 sequence at s, 0 when there is none. */
static int utf8_length(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : s[0] >= 0xE0 && s[0] < 0xF0 ? 3
          : s[0] >= 0xF0 && s[0] < 0xF5 ? 4 : 0;
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    uint32_t lead = n == 3 ? (uint32_t)(s[0] & 0x0F) << 6 | (s[1] & 0x3F) : 0; /* code point >> 6 */
    if (n == 3 && (lead < 0x20 || (lead >= 0x360 && lead < 0x380))) /* overlong, surrogate */
        return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

void tl_json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = utf8_length(p);
        if (!n)
            fputs("\\ufffd", f), n = 1;
        else if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fwrite(p, 1, (size_t)n, f);
        p += n;
    }
    fputc('"', f);
}

/* ---------- reading ---------- */

/* keep_elided: for a tl_result_file, read for one key at a time */
static tl_result_set *read_mem(const void *buf, size_t len, const char *name, bool keep_elided, tl_status *st)
{
    const char *text = buf;
    tl_bytes_kind kind = tl_bytes_kind_of(buf, len);
    owned_set *o = set_new(st);
    if (!o)
        return NULL;
    o->keep_elided = keep_elided;
    tl_code rc;
    if (kind == TL_BYTES_NPY)
        rc = read_npy(o, buf, len, name, st);
    else if (kind == TL_BYTES_NPZ)
        rc = read_npz(o, buf, len, st);
    else if (kind == TL_BYTES_JSON)
        rc = read_json(o, text, len, name, st);
    else if (kind == TL_BYTES_ONNX)
        rc = tl_fail(st, TL_EINPUT, "an ONNX model, not a result file: expected a .npy, an .npz, or tl's json or "
                                    "text output (MODEL.onnx:NAME is one of its initializers)");
    else if (looks_like_text(text, len))
        rc = read_text(o, text, len, st);
    else
        rc = tl_fail(st, TL_EINPUT, "%s: expected a .npy, an .npz, or tl's json or text output",
                     len ? "not a result file" : "empty file");
    int *order = rc ? NULL : tl_result_set_order(&o->pub, st);
    free(order);
    if (!order) {
        tl_result_set_free(&o->pub);
        return NULL;
    }
    return &o->pub;
}

tl_result_set *tl_result_set_read_mem(const void *buf, size_t len, const char *name, tl_status *st)
{
    return read_mem(buf, len, name, false, st);
}

tl_result_set *tl_result_set_read(const char *path, tl_status *st)
{
    unsigned char *buf;
    size_t len;
    bool in = !strcmp(path, "-");
    if (in ? tl_slurp_stream(stdin, &buf, &len, st) : tl_slurp_path(path, &buf, &len, st))
        return NULL;
    const char *base = strrchr(path, '/');
    tl_result_set *s = tl_result_set_read_mem(buf, len, base && base[1] ? base + 1 : path, st);
    free(buf);
    return s;
}

/* ---------- result files, tensor by tensor ---------- */

struct tl_result_file {
    tl_npz *z;        /* an .npz, or */
    tl_result_set *s; /* anything else, read whole */
    int *order;       /* s by name */
};

static tl_result_file *file_of(tl_npz *z, tl_result_set *s, tl_status *st)
{
    tl_result_file *f = (z || s) ? tl_calloc(1, sizeof *f, "a result file", st) : NULL;
    if (f && s && !(f->order = tl_result_set_order(s, st))) {
        free(f);
        f = NULL;
    }
    if (!f) {
        tl_npz_close(z);
        tl_result_set_free(s);
        return NULL;
    }
    f->z = z;
    f->s = s;
    return f;
}

tl_result_file *tl_result_file_open_mem(const void *buf, size_t len, tl_status *st)
{
    if (tl_bytes_kind_of(buf, len) == TL_BYTES_NPZ)
        return file_of(tl_npz_open_mem(buf, len, st), NULL, st);
    return file_of(NULL, read_mem(buf, len, "", true, st), st);
}

tl_result_file *tl_result_file_open(const char *path, tl_status *st)
{
    /* a regular file shows its first bytes and is then opened as what it
     * is, whatever its name (an .npz mapped, not copied; json, text or a
     * .npy read whole, as tl compare reads them); anything else named .npz
     * is taken for one, and a FIFO is read once, whole */
    size_t n = strlen(path);
    bool zip = n >= 4 && !strcmp(path + n - 4, ".npz");
    unsigned char head[4], *buf;
    size_t len;
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && !fstat(fd, &sb) && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        /* a FIFO or device: read from this one open (a second open of a
         * FIFO whose writer has finished would wait for another for good) */
        FILE *in = fdopen(fd, "rb");
        tl_code rc = in ? tl_slurp_stream(in, &buf, &len, st) : tl_fail(st, TL_ERUNTIME, "cannot read: out of memory");
        if (in)
            fclose(in);
        else
            close(fd);
        if (rc)
            return tl_wrap(st, "%s", path), NULL;
        tl_result_file *f = tl_result_file_open_mem(buf, len, st);
        free(buf);
        return f;
    }
    if (fd >= 0 && !fstat(fd, &sb) && S_ISREG(sb.st_mode))
        zip = read(fd, head, sizeof head) == (ssize_t)sizeof head && tl_bytes_kind_of(head, sizeof head) == TL_BYTES_NPZ;
    if (fd >= 0)
        close(fd);
    if (zip)
        return file_of(tl_npz_open(path, st), NULL, st);
    if (tl_slurp_path(path, &buf, &len, st))
        return NULL;
    tl_result_file *f = tl_result_file_open_mem(buf, len, st);
    free(buf);
    return f;
}

bool tl_result_file_anonymous(const tl_result_file *f) { return f->s && f->s->anonymous; }

const char *tl_result_file_kind(const tl_result_file *f)
{
    return f->z ? "an .npz" : f->s->anonymous ? "a .npy" : "a result file";
}

int tl_result_file_count(const tl_result_file *f) { return f->z ? tl_npz_count(f->z) : f->s->n; }

const char *tl_result_file_key(const tl_result_file *f, int i)
{
    return f->z ? tl_npz_key(f->z, i) : f->s->anonymous || i < 0 || i >= f->s->n ? NULL : f->s->names[i];
}

static int set_index(const tl_result_file *f, const char *key)
{
    return f->s->anonymous ? (key ? -1 : 0) : key ? tl_result_set_lookup(f->s, f->order, key) : -1;
}

bool tl_result_file_has(const tl_result_file *f, const char *key)
{
    return f->z ? tl_npz_has(f->z, key) : key && !f->s->anonymous && set_index(f, key) >= 0;
}

uint64_t tl_result_file_size(const tl_result_file *f, const char *key)
{
    if (f->z)
        return tl_npz_size(f->z, key);
    int i = set_index(f, key);
    return i < 0 ? 0 : tl_tensor_bytes(f->s->ts[i]);
}

bool tl_result_file_deflated(const tl_result_file *f, const char *key) { return f->z && tl_npz_deflated(f->z, key); }

char *tl_result_file_keys(const tl_result_file *f, char *buf, size_t len)
{
    size_t k = 0;
    int n = tl_result_file_count(f);
    buf[0] = '\0';
    for (int j = 0; j < n && k < len; j++) {
        const char *key = f->z ? tl_npz_key(f->z, j) : f->s->anonymous ? "" : f->s->names[f->order[j]];
        k += (size_t)snprintf(buf + k, len - k, "%s'%s'", j ? ", " : "", key);
    }
    if (k >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
    return buf;
}

tl_tensor *tl_result_file_get(const tl_result_file *f, const char *key, tl_status *st)
{
    char have[256];
    if (f->z && key)
        return tl_npz_get(f->z, key, st);
    int i = f->z ? -1 : set_index(f, key);
    if (i < 0 && !key)
        return tl_fail(st, TL_EINPUT, "%s holds named tensors (%s): name one", tl_result_file_kind(f),
                       tl_result_file_keys(f, have, sizeof have)), NULL;
    if (i < 0 && f->s->anonymous)
        return tl_fail(st, TL_EINPUT, "a .npy holds one tensor without a name, not '%s'", key), NULL;
    if (i < 0)
        return tl_fail(st, TL_EINPUT, "no key '%s' (%s%s)", key, f->s->n ? "the file has " : "the file is empty",
                       tl_result_file_keys(f, have, sizeof have)), NULL;
    const owned_set *o = (const owned_set *)f->s;
    if (o->elided && o->elided[i])
        return tl_fail(st, TL_EINPUT, "%s", o->elided[i]), NULL;
    const tl_tensor *t = f->s->ts[i];
    tl_tensor *copy = tl_tensor_new(t->dtype, t->ndim, t->shape, st);
    if (copy)
        memcpy(copy->data, t->data, tl_tensor_bytes(t));
    return copy;
}

void tl_result_file_close(tl_result_file *f)
{
    if (!f)
        return;
    tl_npz_close(f->z);
    tl_result_set_free(f->s);
    free(f->order);
    free(f);
}
