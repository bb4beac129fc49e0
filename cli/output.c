/* Writing results.  Files are written to a temporary file beside the
 * target and renamed over it only when complete, so a failed run leaves
 * no partial output. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static tl_code write_binary(FILE *f, const cli_out *o, bool npy, tl_status *st)
{
    if (npy)
        return tl_npy_write(f, o->ts[0], st);
    return tl_npz_write(f, o->n, o->names, o->ts, false, st);
}

static tl_code write_json(FILE *f, const cli_out *o, tl_status *st)
{
    fprintf(f, "{\"device\": \"%s\", \"outputs\": {", o->device);
    for (int i = 0; i < o->n; i++) {
        bool grad = i >= o->noutputs;
        if (i == o->noutputs)
            fprintf(f, "}, \"grads\": {");
        fprintf(f, "%s\"%s\": ", i && i != o->noutputs ? ", " : "",
                grad ? o->names[i] + 5 : o->names[i]);
        if (tl_json_tensor_write(f, o->ts[i], st))
            return st->code;
    }
    fprintf(f, o->n > o->noutputs ? "}}\n" : "}, \"grads\": {}}\n");
    return TL_OK;
}

static tl_code finish_stream(FILE *f, const char *what, tl_status *st)
{
    if (fflush(f) || ferror(f))
        return tl_fail(st, TL_ERUNTIME, "writing %s: %s", what, strerror(errno ? errno : EIO));
    return TL_OK;
}

typedef struct binary_out {
    const cli_out *o;
    bool npy;
} binary_out;

static tl_code binary_body(FILE *f, const void *ctx, tl_status *st)
{
    const binary_out *b = ctx;
    return write_binary(f, b->o, b->npy, st);
}

static tl_code write_file(const cli_out *o, bool npy, tl_status *st)
{
    binary_out b = {o, npy};
    return cli_write_whole(o->path, binary_body, &b, st);
}

tl_code cli_write_whole(const char *path, cli_body body, const void *ctx, tl_status *st)
{
    /* a short hidden name in the target's folder: rename() stays within one
     * file system, and a name near NAME_MAX still has room */
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return tl_fail(st, TL_ERUNTIME, "out of memory");
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) + 1 : 0;
    snprintf(tmp, n, "%.*s.tl-XXXXXX", dir, path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        tl_fail(st, TL_ERUNTIME, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return st->code;
    }
    FILE *f = fdopen(fd, "wb");
    tl_code rc = f ? body(f, ctx, st) : tl_fail(st, TL_ERUNTIME, "fdopen failed");
    if (!rc)
        rc = finish_stream(f, path, st);
    if (!rc && fsync(fd))
        rc = tl_fail(st, TL_ERUNTIME, "writing %s: %s", path, strerror(errno));
    if (f ? fclose(f) : close(fd))
        rc = rc ? rc : tl_fail(st, TL_ERUNTIME, "writing %s: %s", path, strerror(errno));
    if (!rc && rename(tmp, path))
        rc = tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s", path, strerror(errno));
    if (rc) {
        unlink(tmp);
        if (!strstr(st->msg, path))
            tl_wrap(st, "%s", path);
    }
    free(tmp);
    return rc;
}

tl_code cli_write(const cli_out *o, tl_status *st)
{
    if (o->path && strcmp(o->path, "-")) {
        bool npy = ends_with(o->path, ".npy");
        if (!npy && !ends_with(o->path, ".npz"))
            return tl_fail(st, TL_EINPUT, "-o %s: the output must end in .npy or .npz", o->path);
        if (npy && o->n != 1)
            return tl_fail(st, TL_EINPUT, "-o %s: a .npy file holds one tensor, this writes %d (use .npz)",
                           o->path, o->n);
        return write_file(o, npy, st);
    }
    errno = 0;
    tl_code rc;
    if (o->path) /* "-": binary to stdout */
        rc = write_binary(stdout, o, o->n == 1, st);
    else if (o->json)
        rc = write_json(stdout, o, st);
    else {
        rc = TL_OK;
        for (int i = 0; i < o->n && !rc; i++)
            rc = tl_text_write(stdout, o->names[i], o->ts[i], o->full, st);
    }
    if (!rc)
        rc = finish_stream(stdout, "standard output", st);
    else if (!strstr(st->msg, "standard output"))
        tl_wrap(st, "writing standard output");
    return rc;
}
