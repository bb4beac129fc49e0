/* Tensor arguments on the command line.  Standard input is read at most
 * once: as one result file whose one tensor "-" takes, or whose members
 * any number of arguments name ("-:KEY", "-i -"), kept until
 * cli_stdin_release. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "formats/npy.h"
#include "formats/results.h"
#include "formats/sniff.h"
#include "formats/text.h"
#include "graph/onnx.h"

static tl_result_file *stdin_file; /* the result file on standard input, once read */

tl_result_file *cli_stdin_file(tl_status *st)
{
    if (stdin_file)
        return stdin_file;
    unsigned char *buf;
    size_t len;
    if (tl_slurp_stream(stdin, &buf, &len, st))
        return tl_wrap(st, "standard input"), NULL;
    stdin_file = tl_result_file_open_mem(buf, len, st);
    free(buf);
    if (!stdin_file)
        tl_wrap(st, "standard input");
    return stdin_file;
}

void cli_stdin_release(void)
{
    tl_result_file_close(stdin_file);
    stdin_file = NULL;
}

static bool is_file(const char *path)
{
    struct stat sb;
    return !stat(path, &sb) && !S_ISDIR(sb.st_mode);
}

/* Where spec names a file: the length of its path (then *key is what
 * follows the ':' after it, or NULL), or 0 for a literal.  The name says
 * (FILE.npy, FILE.npz[:KEY], FILE.json[:KEY], FILE.txt[:KEY]), else a
 * dtype prefix or a first character of a number or array makes a
 * literal, else the whole spec when it is a file there, or the longest
 * part before a ':' that is. */
static size_t file_part(const char *spec, const char **key)
{
    static const char *const ends[] = {".npz:", ".json:", ".txt:"};
    *key = NULL;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        const char *p = strstr(spec, ends[i]);
        if (p) {
            *key = p + strlen(ends[i]);
            return (size_t)(*key - 1 - spec);
        }
    }
    if (cli_ends_with(spec, ".npy") || cli_ends_with(spec, ".npz") || cli_ends_with(spec, ".json") || cli_ends_with(spec, ".txt"))
        return strlen(spec);
    if (strchr("[+-0123456789", spec[0]))
        return 0; /* starts as a literal does ("./3.5" is the file) */
    const char *colon = strchr(spec, ':');
    tl_dtype dt;
    char prefix[16];
    if (colon && (size_t)(colon - spec) < sizeof prefix) {
        memcpy(prefix, spec, (size_t)(colon - spec));
        prefix[colon - spec] = '\0';
        if (tl_dtype_parse(prefix, &dt))
            return 0;
    }
    if (is_file(spec) || (strchr(spec, '/') && !colon))
        return strlen(spec); /* a path (data/x), even one not there: said so, not "not a number" */
    char path[4096];
    for (size_t n = strlen(spec); n-- > 1;) {
        if (spec[n] != ':' || n >= sizeof path)
            continue;
        memcpy(path, spec, n);
        path[n] = '\0';
        if (is_file(path)) {
            *key = spec + n + 1;
            return n;
        }
    }
    return 0;
}

/* The tensor key of result file f (NULL: its one tensor: a .npy's, or
 * the only one of another file); what names f in messages is what. */
static tl_tensor *tensor_of(const tl_result_file *f, const char *what, const char *key, tl_status *st)
{
    char have[200];
    if (!key && !tl_result_file_anonymous(f) && tl_result_file_count(f) == 1)
        key = tl_result_file_key(f, 0);
    if (!key && !tl_result_file_anonymous(f))
        return tl_fail(st, TL_EINPUT, "%s: %s holds named tensors (%s): name one as %s:KEY, or give the file "
                       "to -i", what, tl_result_file_kind(f), tl_result_file_keys(f, have, sizeof have),
                       strcmp(what, "standard input") ? what : "-"), NULL;
    tl_tensor *t = tl_result_file_get(f, key, st);
    if (!t)
        tl_wrap(st, "%s", what);
    return t;
}

/* "-", which is all that reads standard input then: a .npy read straight
 * into its tensor, or what a result file there says. */
static tl_tensor *stdin_tensor(tl_status *st)
{
    unsigned char *buf;
    size_t len;
    tl_tensor *t = NULL;
    if (tl_slurp_stream(stdin, &buf, &len, st))
        return tl_wrap(st, "standard input"), NULL;
    if (tl_bytes_kind_of(buf, len) == TL_BYTES_NPY) {
        if (!(t = tl_npy_read_mem(buf, len, st)))
            tl_wrap(st, "standard input");
    } else if ((stdin_file = tl_result_file_open_mem(buf, len, st))) {
        t = tensor_of(stdin_file, "standard input", NULL, st);
    } else {
        tl_wrap(st, "standard input");
    }
    free(buf);
    return t;
}

tl_tensor *cli_read_tensor(const char *spec, tl_status *st)
{
    tl_tensor *t = NULL;
    if (!strcmp(spec, "-"))
        return stdin_tensor(st);
    if (!strncmp(spec, "-:", 2)) {
        tl_result_file *f = cli_stdin_file(st);
        return f ? tensor_of(f, "standard input", spec + 2, st) : NULL;
    }
    if (cli_ends_with(spec, ".npy") && (is_file(spec) || !strstr(spec, ".npz:"))) {
        /* read straight from the file (mapped when large); A.npz:KEY.npy is A's key */
        if (!(t = tl_npy_read_file(spec, st)))
            tl_wrap(st, "%s", spec);
        return t;
    }
    if (strstr(spec, ".onnx:")) { /* an ONNX model's initializer */
        const char *key = strstr(spec, ".onnx:") + 6;
        char *path = strndup(spec, (size_t)(key - 1 - spec));
        tl_onnx_model *m = path ? tl_onnx_open(path, NULL, st) : NULL;
        if (!path)
            tl_fail(st, TL_ERUNTIME, "out of memory");
        else if (m && !(t = tl_onnx_initializer(m, key, st)))
            tl_wrap(st, "%s", path);
        tl_onnx_free(m);
        free(path);
        return t;
    }
    const char *key;
    size_t n = file_part(spec, &key);
    char path[4096];
    if (!n) {
        /* a number out of range: the literal's syntax held, it is one */
        bool range = !(t = tl_literal_parse(spec, st)) &&
                     (strstr(st->msg, " is too large for ") || strstr(st->msg, " is out of range for "));
        if (!t)
            tl_wrap(st, "'%.40s%s'%s", spec, strlen(spec) > 40 ? "..." : "",
                    range || st->code != TL_EINPUT ? "" /* (a memory limit: it is a literal) */
                                                   : " (neither a tensor file, FILE or FILE:KEY, nor a literal)");
        return t;
    }
    if (n >= sizeof path)
        return tl_fail(st, TL_EINPUT, "path too long"), NULL;
    memcpy(path, spec, n);
    path[n] = '\0';
    tl_result_file *f = tl_result_file_open(path, st);
    if (!f)
        return tl_wrap(st, "%s", path), NULL;
    t = tensor_of(f, path, key, st);
    tl_result_file_close(f);
    return t;
}

const char *cli_f32_literal_hint(const char *opt, const char *arg, const char *spec, const tl_tensor *got,
                                 tl_dtype want, char *buf, size_t len)
{
    const char *key;
    buf[0] = '\0';
    if (want == TL_F32 && got->dtype == TL_F64 && strcmp(spec, "-") && strncmp(spec, "-:", 2) &&
        !cli_ends_with(spec, ".npy") && !strstr(spec, ".onnx:") && !file_part(spec, &key) && !strchr(spec, ':'))
        snprintf(buf, len, " (%.40s is an f64 literal: write %s %.*sf32:%.40s)", spec, opt, (int)(spec - arg), arg,
                 spec);
    return buf;
}
