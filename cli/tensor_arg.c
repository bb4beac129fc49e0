/* Tensor arguments on the command line.  Standard input is read at most
 * once: as one .npy ("-"), or as one .npz whose members any number of
 * arguments name ("-:KEY", "-i -"), kept until cli_stdin_release. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"
#include "graph/onnx.h"

static tl_npz *stdin_npz; /* the archive on standard input, once read */

tl_npz *cli_stdin_npz(tl_status *st)
{
    if (stdin_npz)
        return stdin_npz;
    unsigned char *buf;
    size_t len;
    if (tl_slurp_stream(stdin, &buf, &len, st))
        return tl_wrap(st, "standard input"), NULL;
    stdin_npz = tl_npz_open_mem(buf, len, st);
    free(buf);
    if (!stdin_npz)
        tl_wrap(st, "standard input");
    return stdin_npz;
}

void cli_stdin_release(void)
{
    tl_npz_close(stdin_npz);
    stdin_npz = NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

tl_tensor *cli_read_tensor(const char *spec, tl_status *st)
{
    tl_tensor *t = NULL;
    const char *npz = strstr(spec, ".npz:");
    if (!strcmp(spec, "-")) {
        if (!(t = tl_npy_read_stream(stdin, st)))
            tl_wrap(st, "standard input");
    } else if (!strncmp(spec, "-:", 2)) {
        tl_npz *z = cli_stdin_npz(st);
        if (z && !(t = tl_npz_get(z, spec + 2, st)))
            tl_wrap(st, "standard input");
    } else if (ends_with(spec, ".npy")) {
        if (!(t = tl_npy_read_file(spec, st)))
            tl_wrap(st, "%s", spec);
    } else if (npz) {
        size_t plen = (size_t)(npz - spec) + 4;
        char path[4096];
        if (plen >= sizeof path) {
            tl_fail(st, TL_EINPUT, "path too long");
            return NULL;
        }
        memcpy(path, spec, plen);
        path[plen] = '\0';
        tl_npz *z = tl_npz_open(path, st);
        if (z)
            t = tl_npz_get(z, npz + 5, st);
        tl_npz_close(z);
        if (!t)
            tl_wrap(st, "%s", path);
    } else if (strstr(spec, ".onnx:")) { /* an ONNX model's initializer */
        const char *key = strstr(spec, ".onnx:") + 6;
        char *path = strndup(spec, (size_t)(key - 1 - spec));
        tl_onnx_model *m = path ? tl_onnx_open(path, NULL, st) : NULL;
        if (!path)
            tl_fail(st, TL_ERUNTIME, "out of memory");
        else if (m && !(t = tl_onnx_initializer(m, key, st)))
            tl_wrap(st, "%s", path);
        tl_onnx_free(m);
        free(path);
    } else if (ends_with(spec, ".npz")) {
        tl_fail(st, TL_EINPUT, "%s: name the member as %s:KEY (or use -i for all inputs)", spec, spec);
    } else if (!(t = tl_literal_parse(spec, st))) {
        tl_wrap(st, "'%.40s%s' (neither a .npy/.npz:key file nor a literal)", spec,
                strlen(spec) > 40 ? "..." : "");
    }
    return t;
}
