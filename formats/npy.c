#define _GNU_SOURCE /* MAP_POPULATE */
#include "formats/npy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html */
static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
enum { NPY_ALIGN = 64, NPY_GROWTH_DIGITS = 21 }; /* as numpy/lib/format.py */

static bool host_big_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 0;
}

static void swap_bytes(unsigned char *p, int64_t n, size_t sz)
{
    for (int64_t i = 0; i < n; i++, p += sz)
        for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
            unsigned char c = p[a];
            p[a] = p[b];
            p[b] = c;
        }
}

/* ---- reading whole files ---- */

static _Atomic int64_t read_limit;
static _Atomic bool read_limit_given;
static int64_t (*read_limit_default)(void);

void tl_read_limit_set(int64_t bytes, bool given)
{
    read_limit = bytes > 0 ? bytes : 0;
    read_limit_given = given;
}

void tl_read_limit_by_default(int64_t (*limit)(void)) { read_limit_default = limit; }

/* Below this a read never meets the default limit (3/4 of a machine's
 * memory is more): its size is not looked up for the reads of most runs. */
#define READ_SMALL ((uint64_t)64 << 20)

/* The default limit, looked up once, when a read of `bytes` first needs it. */
static void limit_lookup(uint64_t bytes)
{
    if (!read_limit_given && read_limit_default && bytes >= READ_SMALL) {
        tl_read_limit_set(read_limit_default(), false);
        read_limit_default = NULL;
    }
}

tl_code tl_read_fits(uint64_t bytes, const char *what, tl_status *st)
{
    limit_lookup(bytes);
    if (!read_limit_given && read_limit_default) /* small, and the default not looked up */
        return TL_OK;
    int64_t lim = read_limit;
    if (!lim || bytes <= (uint64_t)lim)
        return TL_OK;
    char need[48] = "more than ", have[32];
    if (bytes != UINT64_MAX) /* UINT64_MAX: a stream that goes on past the limit */
        tl_bytes_text((int64_t)bytes, need, sizeof need);
    else
        tl_bytes_text(lim, need + 10, sizeof need - 10);
    tl_bytes_text(lim, have, sizeof have);
    return read_limit_given
               ? tl_fail(st, TL_ERUNTIME, "memory limit: %s needs %s (--max-memory %s)", what, need, have)
               : tl_fail(st, TL_ERUNTIME, "memory limit: %s needs %s, more than the %s tl allows by default (3/4 "
                         "of this machine's memory; --max-memory sets another)", what, need, have);
}

tl_tensor *tl_read_tensor_new(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st)
{
    int64_t n;
    if (tl_shape_numel(ndim, shape, &n, st))
        return NULL;
    /* past 2^61 elements, as many bytes as can be (it returned NULL with
     * no error said, until this re-read) */
    uint64_t bytes = (uint64_t)n > UINT64_MAX / 8 ? UINT64_MAX - 1 : (uint64_t)n * tl_dtype_size(dt);
    if (tl_read_fits(bytes, "a tensor read", st))
        return NULL;
    return tl_tensor_new(dt, ndim, shape, st);
}

/* Binary data no reader here takes: not .npy, not a zip archive, a NUL in
 * its first bytes (text formats have none). */
static bool foreign_binary(const unsigned char *b, size_t n)
{
    if ((n >= 6 && !memcmp(b, "\x93NUMPY", 6)) || (n >= 2 && b[0] == 'P' && b[1] == 'K'))
        return false;
    return memchr(b, 0, n < 4096 ? n : 4096) != NULL;
}

static size_t first_capacity(FILE *f)
{
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
        (uint64_t)sb.st_size < SIZE_MAX - 1)
        return (size_t)sb.st_size + 1; /* +1 so EOF is seen without growing */
    return 65536;
}

static tl_code grow(unsigned char **buf, size_t *cap, tl_status *st)
{
    size_t want = *cap > SIZE_MAX / 2 ? SIZE_MAX : *cap * 2;
    limit_lookup(want);
    int64_t lim = read_limit;
    if (lim && want > (uint64_t)lim + 1)
        want = (size_t)lim + 1; /* one byte past the limit: more is refused */
    if (want <= *cap)
        return tl_read_fits(UINT64_MAX, "reading a file", st);
    unsigned char *p = want > *cap ? realloc(*buf, want) : NULL;
    if (!p)
        return tl_fail(st, TL_ERUNTIME, "out of memory reading a file (%zu bytes)", want);
    *buf = p;
    *cap = want;
    return TL_OK;
}

tl_code tl_slurp_stream(FILE *f, unsigned char **out, size_t *len, tl_status *st)
{
    size_t cap = first_capacity(f), n = 0;
    if (tl_read_fits(cap - 1, "reading a file", st))
        return st->code;
    unsigned char *buf = tl_malloc(cap, 1, "a file buffer", st);
    if (!buf)
        return st->code;
    for (bool first = true;; first = false) {
        if (n == cap && grow(&buf, &cap, st)) {
            free(buf);
            return st->code;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (ferror(f)) {
            int e = errno;
            free(buf);
            return tl_fail(st, TL_EINPUT, "read error: %s", e ? strerror(e) : "unknown");
        }
        /* a stream that goes on (a regular file came whole in the first
         * read, for its reader to say what it is) */
        if (first && got && !feof(f) && foreign_binary(buf, n)) {
            free(buf);
            return tl_fail(st, TL_EINPUT, "binary data that is no .npy and no .npz (a NUL byte among its first "
                           "ones): not a file tl reads");
        }
        if (got == 0 || feof(f))
            break;
    }
    *out = buf;
    *len = n;
    return TL_OK;
}

bool tl_path_inside_folder(const char *path)
{
    if (path[0] == '/')
        return false;
    int depth = 0;
    for (const char *p = path; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            depth--;
        else if (n && !(n == 1 && p[0] == '.'))
            depth++;
        if (depth < 0)
            return false;
        p += n + (e != NULL);
    }
    return true;
}

tl_code tl_slurp_path(const char *path, unsigned char **buf, size_t *len, tl_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tl_fail(st, TL_EINPUT, "cannot open: %s", strerror(errno));
    tl_code rc = tl_slurp_stream(f, buf, len, st);
    fclose(f);
    return rc;
}

/* Arrays of this many bytes and more are mapped from a regular file rather
 * than read.  Read-only: tensors never change once made, and a writable
 * private mapping made MAP_POPULATE copy every page on the spot (24 ms for
 * 64 MiB, against 2.4 ms to map the page cache's pages as they are; and
 * 4 ms against 0.6 to unmap).  A write into one would fault: the tests run
 * with every input mapped (make test builds a tl with TL_NPY_MAP_MIN=1).
 * Smaller arrays are read: where the hypervisor shadows the guest's page
 * tables (the Zen 5 VM), each page of a mapping traps at its first read,
 * dearly where a kernel reads it out of order: the first 1024^3 f32
 * product from a mapped 4 MiB input took 9.4 ms (whole process 16.3),
 * from one read 6.2 (13.4); a chain of elementwise ops, which reads in
 * order, lost 1.6 ms reading 16 MiB, 4.5 ms reading 32, 7 ms reading 64
 * (the fresh memory they go to) and gained 1-4 ms reading 4.  A read
 * costs a copy, 0.1 ms a MiB on a plain machine. */
#ifndef TL_NPY_MAP_MIN
#define TL_NPY_MAP_MIN ((size_t)16 << 20)
#endif

/* ---- the header: a strict parser for the Python dict literal ---- */

typedef struct npy_header {
    char descr[40];
    bool fortran;
    int ndim;
    int64_t shape[TL_MAXDIM];
    bool seen_descr, seen_fortran, seen_shape;
} npy_header;

typedef struct cursor {
    const char *p, *start, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end &&
           (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r' || *c->p == '\f'))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* Copies up to 40 header characters at p into buf, escaping the unprintable. */
static const char *snippet(const char *p, const char *end, char *buf, size_t cap)
{
    size_t k = 0;
    for (; p < end && k + 5 < cap && k < 40; p++) {
        unsigned char ch = (unsigned char)*p;
        k += (size_t)snprintf(buf + k, cap - k, isprint(ch) && ch != '\\' ? "%c" : "\\x%02x", ch);
    }
    buf[k] = '\0';
    return buf;
}

static tl_code syntax(cursor *c, const char *expected, tl_status *st)
{
    char near[96];
    skip_ws(c);
    if (c->p >= c->end)
        return tl_fail(st, TL_EINPUT, "bad .npy header: expected %s, found the end", expected);
    return tl_fail(st, TL_EINPUT, "bad .npy header: expected %s at offset %td, found \"%s\"",
                   expected, c->p - c->start, snippet(c->p, c->end, near, sizeof near));
}

/* Reads a quoted string without escapes; longer ones are cut to cap-4 and
 * marked "...", which matches no key or dtype. */
static tl_code parse_string(cursor *c, char *out, size_t cap, tl_status *st)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return syntax(c, "a string", st);
    char q = *c->p++;
    size_t k = 0;
    for (; c->p < c->end && *c->p != q; c->p++) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\\' || ch < 0x20)
            return syntax(c, "a plain string character", st);
        if (k + 4 < cap)
            out[k++] = (char)ch;
        else if (k + 4 == cap)
            k += (size_t)snprintf(out + k, 4, "...");
    }
    if (c->p >= c->end)
        return syntax(c, "a closing quote", st);
    c->p++;
    out[k] = '\0';
    return TL_OK;
}

static bool eat_word(cursor *c, const char *w)
{
    size_t n = strlen(w);
    skip_ws(c);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n))
        return false;
    if (c->p + n < c->end && (isalnum((unsigned char)c->p[n]) || c->p[n] == '_'))
        return false;
    c->p += n;
    return true;
}

/* A decimal integer; Python 2 wrote longs with an 'L' suffix. */
static tl_code parse_int(cursor *c, int64_t *v, tl_status *st)
{
    skip_ws(c);
    bool neg = c->p < c->end && *c->p == '-';
    const char *digits = c->p + neg;
    int64_t x = 0;
    for (c->p = digits; c->p < c->end && isdigit((unsigned char)*c->p); c->p++) {
        if (x > (INT64_MAX - 9) / 10)
            return tl_fail(st, TL_EINPUT, "bad .npy header: shape entry too large");
        x = x * 10 + (*c->p - '0');
    }
    if (c->p == digits)
        return syntax(c, "an integer in 'shape'", st);
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l'))
        c->p++;
    *v = neg ? -x : x;
    return TL_OK;
}

/* A tuple of integers: (), (3,), (2, 3) or (2, 3,). */
static tl_code parse_shape(cursor *c, npy_header *h, tl_status *st)
{
    if (!eat(c, '('))
        return syntax(c, "a tuple for 'shape'", st);
    h->ndim = 0;
    if (eat(c, ')'))
        return TL_OK;
    for (;;) {
        if (h->ndim == TL_MAXDIM)
            return tl_fail(st, TL_EINPUT, "bad .npy header: more than %d dimensions", TL_MAXDIM);
        if (parse_int(c, &h->shape[h->ndim++], st))
            return st->code;
        bool comma = eat(c, ',');
        if (eat(c, ')'))
            return comma || h->ndim > 1 ? TL_OK : syntax(c, "',' in a one-element tuple", st);
        if (!comma)
            return syntax(c, "',' or ')' in 'shape'", st);
    }
}

static tl_code parse_descr(cursor *c, npy_header *h, tl_status *st)
{
    skip_ws(c);
    if (c->p < c->end && (*c->p == '[' || *c->p == '{'))
        return tl_fail(st, TL_EINPUT,
                       "unsupported dtype: a structured (record) dtype (tl reads f32, f64, i32 and i64)");
    return parse_string(c, h->descr, sizeof h->descr, st);
}

static tl_code parse_bool(cursor *c, bool *v, tl_status *st)
{
    if (eat_word(c, "True"))
        *v = true;
    else if (eat_word(c, "False"))
        *v = false;
    else
        return syntax(c, "True or False for 'fortran_order'", st);
    return TL_OK;
}

static tl_code parse_entry(cursor *c, npy_header *h, tl_status *st)
{
    char key[40];
    if (parse_string(c, key, sizeof key, st))
        return st->code;
    if (!eat(c, ':'))
        return syntax(c, "':'", st);
    bool *seen = !strcmp(key, "descr")           ? &h->seen_descr
                 : !strcmp(key, "fortran_order") ? &h->seen_fortran
                 : !strcmp(key, "shape")         ? &h->seen_shape
                                                 : NULL;
    if (!seen)
        return tl_fail(st, TL_EINPUT, "bad .npy header: unexpected key '%s'", key);
    if (*seen)
        return tl_fail(st, TL_EINPUT, "bad .npy header: key '%s' appears twice", key);
    *seen = true;
    if (seen == &h->seen_descr)
        return parse_descr(c, h, st);
    if (seen == &h->seen_fortran)
        return parse_bool(c, &h->fortran, st);
    return parse_shape(c, h, st);
}

static tl_code parse_header(const char *text, size_t len, npy_header *h, tl_status *st)
{
    cursor c = {text, text, text + len};
    memset(h, 0, sizeof *h);
    if (!eat(&c, '{'))
        return tl_fail(st, TL_EINPUT, "bad .npy header: not a dict");
    while (!eat(&c, '}')) {
        if (parse_entry(&c, h, st))
            return st->code;
        if (!eat(&c, ',') && !(c.p < c.end && *c.p == '}'))
            return syntax(&c, "',' or '}'", st);
    }
    skip_ws(&c);
    if (c.p != c.end)
        return syntax(&c, "the end of the header after '}'", st);
    const char *missing = !h->seen_descr     ? "descr"
                          : !h->seen_fortran ? "fortran_order"
                          : !h->seen_shape   ? "shape"
                                             : NULL;
    if (missing)
        return tl_fail(st, TL_EINPUT, "bad .npy header: no '%s' key", missing);
    return TL_OK;
}

/* '<f4', '>f8', '=f4', '|f8', 'f4', '<f', '<d', '<i4', '>i8' ...; *swap when
 * the data's byte order differs from the host's. */
static tl_code descr_dtype(const char *descr, tl_dtype *dt, bool *swap, tl_status *st)
{
    char printable[96];
    const char *s = descr;
    char order = strchr("<>=|", *s) && *s ? *s++ : '=';
    if (!strcmp(s, "f4") || !strcmp(s, "f"))
        *dt = TL_F32;
    else if (!strcmp(s, "f8") || !strcmp(s, "d"))
        *dt = TL_F64;
    else if (!strcmp(s, "i4"))
        *dt = TL_I32;
    else if (!strcmp(s, "i8"))
        *dt = TL_I64;
    else if (!strcmp(s, "b1") || !strcmp(s, "?"))
        return tl_fail(st, TL_EINPUT, "unsupported dtype '%s', a bool array (tl reads f32, f64, i32 and i64; "
                       "save a mask as integers, mask.astype(np.int64), which a model's bool input takes, "
                       "nonzero as true)", snippet(descr, descr + strlen(descr), printable, sizeof printable));
    else
        return tl_fail(st, TL_EINPUT, "unsupported dtype '%s' (tl reads f32, f64, i32 and i64)",
                       snippet(descr, descr + strlen(descr), printable, sizeof printable));
    bool big = order == '>' || ((order == '=' || order == '|') && host_big_endian());
    *swap = big != host_big_endian();
    return TL_OK;
}

/* ---- the file ---- */

static uint32_t get_le(const unsigned char *p, int nbytes)
{
    uint32_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Checks magic and version; finds the header text at [*hstart, +*hlen). */
static tl_code read_preamble(const unsigned char *b, size_t len, size_t *hstart, size_t *hlen,
                             tl_status *st)
{
    if (len == 0)
        return tl_fail(st, TL_EINPUT, "empty file (not a .npy file)");
    if (memcmp(b, npy_magic, len < 6 ? len : 6))
        return tl_fail(st, TL_EINPUT, "not a .npy file (bad magic)");
    if (len < 10)
        return tl_fail(st, TL_EINPUT, "truncated .npy file (%zu bytes, no header)", len);
    int major = b[6], minor = b[7];
    if (major == 1 && minor == 0) {
        *hstart = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12)
            return tl_fail(st, TL_EINPUT, "truncated .npy file (%zu bytes, no header)", len);
        *hstart = 12;
    } else {
        return tl_fail(st, TL_EINPUT,
                       "unsupported .npy format version %d.%d (tl reads 1.0, 2.0, 3.0)", major,
                       minor);
    }
    *hlen = get_le(b + 8, (int)*hstart - 8);
    if (*hlen > len - *hstart)
        return tl_fail(st, TL_EINPUT, "header length %zu runs past the end of the file (%zu bytes)",
                       *hlen, len);
    return TL_OK;
}

/* Copies column-major src into row-major dst, walking dst in order. */
static void fortran_to_c(unsigned char *dst, const unsigned char *src, int ndim,
                         const int64_t *shape, int64_t n, size_t sz)
{
    int64_t idx[TL_MAXDIM] = {0}, stride[TL_MAXDIM], s = 1, off = 0;
    for (int k = 0; k < ndim; k++) {
        stride[k] = s;
        s *= shape[k];
    }
    for (int64_t j = 0; j < n; j++) {
        memcpy(dst + (size_t)j * sz, src + (size_t)off * sz, sz);
        for (int k = ndim - 1; k >= 0; k--) {
            off += stride[k];
            if (++idx[k] < shape[k])
                break;
            off -= stride[k] * shape[k];
            idx[k] = 0;
        }
    }
}

static tl_code check_data_size(const npy_header *h, tl_dtype dt, size_t have, tl_status *st)
{
    int64_t n;
    if (tl_shape_numel(h->ndim, h->shape, &n, st))
        return tl_wrap(st, "bad .npy header");
    uint64_t want = (uint64_t)n * tl_dtype_size(dt);
    char desc[512];
    tl_shape_desc(dt, h->ndim, h->shape, desc, sizeof desc);
    if (have < want)
        return tl_fail(st, TL_EINPUT,
                       "truncated data: %s needs %" PRIu64 " bytes, the file has %zu", desc, want,
                       have);
    if (have > want)
        return tl_fail(st, TL_EINPUT, "%" PRIu64 " bytes of trailing data after the %s array",
                       (uint64_t)have - want, desc);
    return TL_OK;
}

/* The header of the whole .npy at b[0, len), checked against its data's
 * size: the dtype, the byte order, and where the data starts. */
static tl_code read_header_mem(const unsigned char *b, size_t len, npy_header *h, tl_dtype *dt, bool *swap,
                               size_t *data_at, tl_status *st)
{
    size_t hstart = 0, hlen = 0;
    *dt = TL_F32;
    *swap = false;
    if (read_preamble(b, len, &hstart, &hlen, st) || parse_header((const char *)b + hstart, hlen, h, st) ||
        descr_dtype(h->descr, dt, swap, st) || check_data_size(h, *dt, len - hstart - hlen, st))
        return st->code;
    *data_at = hstart + hlen;
    return TL_OK;
}

tl_tensor *tl_npy_read_mem(const void *buf, size_t len, tl_status *st)
{
    const unsigned char *b = buf;
    size_t at = 0;
    npy_header h;
    tl_dtype dt;
    bool swap;
    if (read_header_mem(b, len, &h, &dt, &swap, &at, st))
        return NULL;
    tl_tensor *t = tl_read_tensor_new(dt, h.ndim, h.shape, st);
    if (!t)
        return NULL;
    const unsigned char *data = b + at;
    size_t sz = tl_dtype_size(dt);
    if (h.fortran)
        fortran_to_c(t->data, data, h.ndim, h.shape, t->numel, sz);
    else if (t->numel)
        memcpy(t->data, data, (size_t)t->numel * sz);
    if (swap)
        swap_bytes(t->data, t->numel, sz);
    return t;
}

tl_tensor *tl_npy_read_at(const void *buf, size_t len, int fd, uint64_t off, size_t *data_at,
                          tl_npy_progress progress, void *ctx, tl_status *st)
{
    npy_header h;
    tl_dtype dt;
    bool swap;
    size_t at = 0;
    tl_status quiet = {0}; /* a header that fails is tl_npy_read_mem's to report */
    *data_at = 0;
    if (read_header_mem(buf, len, &h, &dt, &swap, &at, &quiet) || h.fortran || swap)
        return NULL;
    *data_at = at;
    tl_tensor *t = tl_read_tensor_new(dt, h.ndim, h.shape, st);
    size_t bytes = len - *data_at, done = 0;
    if (t && progress)
        progress(ctx, t, 0);
    while (t && done < bytes) {
        size_t want = progress && bytes - done > TL_NPY_PIECE ? TL_NPY_PIECE : bytes - done;
        ssize_t r = pread(fd, (char *)t->data + done, want, (off_t)(off + *data_at + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            tl_fail(st, TL_EINPUT, "read error: %s", r < 0 ? strerror(errno) : "the file shrank");
            tl_tensor_unref(t);
            return NULL;
        }
        done += (size_t)r;
        if (progress)
            progress(ctx, t, done);
    }
    return t;
}

/* A .npy file at path, its header parsed and checked against the file's
 * size: the dtype and shape, and where the data starts.  The first bytes
 * (up to 1 MiB, more than any header tl reads) stay in *head. */
typedef struct npy_file {
    FILE *f;
    npy_header h;
    tl_dtype dt;
    bool swap;
    size_t data;        /* offset of the data */
    unsigned char *head; /* the first `got` bytes */
    size_t got;
} npy_file;

static tl_code npy_open(const char *path, npy_file *nf, tl_status *st)
{
    memset(nf, 0, sizeof *nf);
    if (!(nf->f = fopen(path, "rb")))
        return tl_fail(st, TL_EINPUT, "cannot open: %s", strerror(errno));
    struct stat sb;
    size_t cap = (size_t)1 << 20, hstart = 0, hlen = 0;
    if (fstat(fileno(nf->f), &sb))
        return tl_fail(st, TL_EINPUT, "cannot read: %s", strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return tl_fail(st, TL_EINPUT, "cannot read: %s", strerror(EISDIR));
    if ((uint64_t)sb.st_size < cap)
        cap = (size_t)sb.st_size + 1; /* no larger than the file */
    if (!(nf->head = tl_malloc(cap, 1, "a .npy header", st)))
        return st->code;
    /* the first 64 KiB, then the rest of a header longer than that: a
     * large mapped file's data is not read here */
    size_t first = cap < ((size_t)64 << 10) ? cap : (size_t)64 << 10;
    nf->got = fread(nf->head, 1, first, nf->f);
    if (nf->got == first && first < cap && nf->got >= 12) {
        size_t hs = nf->head[6] == 1 ? 10 : 12, need = hs + get_le(nf->head + 8, (int)hs - 8);
        if (need > cap && need <= (uint64_t)sb.st_size) { /* a header past the first MiB: read to its end */
            unsigned char *more = realloc(nf->head, need);
            if (!more)
                return tl_fail(st, TL_ERUNTIME, "out of memory reading a .npy header of %zu bytes", need);
            nf->head = more;
            cap = need;
        }
        if (need > nf->got)
            nf->got += fread(nf->head + nf->got, 1, cap - nf->got, nf->f);
    }
    if (read_preamble(nf->head, nf->got, &hstart, &hlen, st) ||
        parse_header((const char *)nf->head + hstart, hlen, &nf->h, st) ||
        descr_dtype(nf->h.descr, &nf->dt, &nf->swap, st) ||
        check_data_size(&nf->h, nf->dt, (size_t)sb.st_size - hstart - hlen, st))
        return st->code;
    nf->data = hstart + hlen;
    return TL_OK;
}

static void npy_close(npy_file *nf)
{
    if (nf->f)
        fclose(nf->f);
    free(nf->head);
}

/* A pipe or a device: no size to trust, so the whole of it is read. */
static bool regular_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) || S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode);
}

tl_code tl_npy_peek_file(const char *path, tl_dtype *dt, int *ndim, int64_t *shape, tl_status *st)
{
    if (!regular_file(path)) {
        tl_tensor *t = tl_npy_read_file(path, st);
        if (t) {
            *dt = t->dtype;
            *ndim = t->ndim;
            memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
        }
        tl_tensor_unref(t);
        return t ? TL_OK : st->code;
    }
    npy_file nf;
    tl_code rc = npy_open(path, &nf, st);
    if (!rc) {
        *dt = nf.dt;
        *ndim = nf.h.ndim;
        memcpy(shape, nf.h.shape, sizeof(int64_t) * (size_t)nf.h.ndim);
    }
    npy_close(&nf);
    return rc;
}

tl_tensor *tl_npy_read_stream(FILE *f, tl_status *st)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    if (tl_slurp_stream(f, &buf, &len, st))
        return NULL;
    tl_tensor *t = tl_npy_read_mem(buf, len, st);
    free(buf);
    return t;
}

tl_tensor *tl_npy_read_file(const char *path, tl_status *st)
{
    if (!regular_file(path)) {
        unsigned char *buf = NULL;
        size_t len = 0;
        if (tl_slurp_path(path, &buf, &len, st))
            return NULL;
        tl_tensor *t = tl_npy_read_mem(buf, len, st);
        free(buf);
        return t;
    }
    /* the data goes straight from the file into the tensor: no second
     * copy of a large array passes through memory; a large one in native
     * order is mapped instead, sharing the pages the kernel already has */
    npy_file nf;
    tl_tensor *t = NULL;
    unsigned char *tmp = NULL;
    if (npy_open(path, &nf, st))
        goto done;
    int64_t numel = 0;
    if (!nf.h.fortran && !nf.swap && !tl_shape_numel(nf.h.ndim, nf.h.shape, &numel, st)) {
        struct stat sb;
        size_t bytes = (size_t)numel * tl_dtype_size(nf.dt);
        void *m = MAP_FAILED;
        if (tl_read_fits(bytes, "a tensor read", st)) /* before its pages are read in */
            goto done;
        /* data at an offset of a whole number of elements (NumPy pads its
         * headers to 64 bytes; other writers may not): else read, as data
         * out of alignment is no array of its type */
        if (bytes >= TL_NPY_MAP_MIN && nf.data % tl_dtype_size(nf.dt) == 0 && !fstat(fileno(nf.f), &sb) &&
            (size_t)sb.st_size >= nf.data + bytes)
            m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(nf.f), 0);
        if (m != MAP_FAILED) {
            t = tl_tensor_map(nf.dt, nf.h.ndim, nf.h.shape, m, (size_t)sb.st_size, nf.data, st);
            goto done;
        }
    }
    if (!(t = tl_read_tensor_new(nf.dt, nf.h.ndim, nf.h.shape, st)))
        goto done;
    size_t sz = tl_dtype_size(nf.dt), bytes = (size_t)t->numel * sz;
    void *dst = t->data;
    if (nf.h.fortran && bytes && !(dst = tmp = tl_malloc(bytes, 1, "a Fortran-order array", st)))
        goto fail;
    size_t have = nf.got > nf.data ? nf.got - nf.data : 0;
    if (have > bytes)
        have = bytes;
    memcpy(dst, nf.head + nf.data, have);
    if (have < bytes && fread((char *)dst + have, 1, bytes - have, nf.f) != bytes - have) {
        tl_fail(st, TL_EINPUT, "read error: %s", ferror(nf.f) ? strerror(errno) : "the file shrank");
        goto fail;
    }
    if (nf.h.fortran)
        fortran_to_c(t->data, tmp, nf.h.ndim, nf.h.shape, t->numel, sz);
    if (nf.swap)
        swap_bytes(t->data, t->numel, sz);
    goto done;
fail:
    tl_tensor_unref(t);
    t = NULL;
done:
    free(tmp);
    npy_close(&nf);
    return t;
}

/* ---- writing ---- */

static void put_le(unsigned char *p, uint32_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

/* The dict exactly as NumPy writes it, with its spare room for growth. */
static size_t header_dict(const tl_tensor *t, char *d, size_t cap)
{
    static const char *const descr[TL_NDTYPES] = {"<f4", "<f8", "<i4", "<i8"};
    int k = snprintf(d, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr[t->dtype]);
    for (int i = 0; i < t->ndim; i++)
        k += snprintf(d + k, cap - (size_t)k, i ? ", %" PRId64 : "%" PRId64, t->shape[i]);
    k += snprintf(d + k, cap - (size_t)k, t->ndim == 1 ? ",), }" : "), }");
    if (t->ndim > 0) {
        int digits = snprintf(NULL, 0, "%" PRId64, t->shape[0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++)
            d[k++] = ' ';
    }
    d[k] = '\0';
    return (size_t)k;
}

/* Writes magic, version, length and padded header into out (>= 2048 bytes);
 * returns its size, a multiple of 64. */
static size_t npy_preamble(const tl_tensor *t, unsigned char *out)
{
    char dict[1024];
    size_t dl = header_dict(t, dict, sizeof dict), hl = dl + 1, pre = 10;
    size_t pad = NPY_ALIGN - (pre + hl) % NPY_ALIGN;
    if (hl + pad > 65535) { /* unreachable with TL_MAXDIM dimensions; as NumPy */
        pre = 12;
        pad = NPY_ALIGN - (pre + hl) % NPY_ALIGN;
    }
    memcpy(out, npy_magic, 6);
    out[6] = pre == 10 ? 1 : 2;
    out[7] = 0;
    put_le(out + 8, (uint32_t)(hl + pad), (int)pre - 8);
    memcpy(out + pre, dict, dl);
    memset(out + pre + dl, ' ', pad);
    out[pre + dl + pad] = '\n';
    return pre + hl + pad;
}

/* Copies n elements as little-endian bytes. */
static void data_le(unsigned char *dst, const void *src, int64_t n, size_t sz)
{
    memcpy(dst, src, (size_t)n * sz);
    if (host_big_endian())
        swap_bytes(dst, n, sz);
}

static tl_code check_host(const tl_tensor *t, tl_status *st)
{
    if (t->device.kind != TL_DEV_CPU)
        return tl_fail(st, TL_ERUNTIME,
                       "internal: cannot write a tensor that is not in host memory");
    return TL_OK;
}

tl_code tl_npy_preamble(const tl_tensor *t, unsigned char *pre, size_t *len, bool *as_is, tl_status *st)
{
    if (check_host(t, st))
        return st->code;
    *len = npy_preamble(t, pre);
    *as_is = !host_big_endian();
    return TL_OK;
}

tl_code tl_npy_encode(const tl_tensor *t, unsigned char **buf, size_t *len, tl_status *st)
{
    unsigned char pre[2048];
    if (check_host(t, st))
        return st->code;
    size_t pl = npy_preamble(t, pre), sz = tl_dtype_size(t->dtype);
    size_t data = (size_t)t->numel * sz;
    unsigned char *b = tl_malloc(pl + data, 1, "a .npy buffer", st);
    if (!b)
        return st->code;
    memcpy(b, pre, pl);
    data_le(b + pl, t->data, t->numel, sz);
    *buf = b;
    *len = pl + data;
    return TL_OK;
}

static tl_code write_failed(tl_status *st)
{
    int e = errno;
    return tl_fail(st, TL_ERUNTIME, "write failed: %s", e ? strerror(e) : "I/O error");
}

tl_code tl_npy_write(FILE *f, const tl_tensor *t, tl_status *st)
{
    unsigned char pre[2048];
    if (check_host(t, st))
        return st->code;
    size_t pl = npy_preamble(t, pre), sz = tl_dtype_size(t->dtype);
    errno = 0;
    if (fwrite(pre, 1, pl, f) != pl)
        return write_failed(st);
    if (!host_big_endian()) {
        if (t->numel && fwrite(t->data, sz, (size_t)t->numel, f) != (size_t)t->numel)
            return write_failed(st);
    } else {
        unsigned char *b;
        size_t len;
        if (tl_npy_encode(t, &b, &len, st))
            return st->code;
        size_t put = fwrite(b + pl, 1, len - pl, f);
        free(b);
        if (put != len - pl)
            return write_failed(st);
    }
    if (fflush(f) || ferror(f))
        return write_failed(st);
    return TL_OK;
}
