/* Writing results.  Files are written to a temporary file beside the
 * target and take its name only when complete, so a failed run leaves
 * no partial output. */
#define _GNU_SOURCE /* renameat2 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/results.h"
#include "formats/text.h"

int cli_stream_fd(const char *path)
{
    if (!strcmp(path, "/dev/stdout"))
        return 1;
    if (!strcmp(path, "/dev/stderr"))
        return 2;
    const char *n = !strncmp(path, "/dev/fd/", 8) ? path + 8 : !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
    if (!n || !isdigit((unsigned char)*n) || strlen(n) > 6 || strspn(n, "0123456789") != strlen(n))
        return -1;
    return atoi(n);
}

/* A target that is there and not a regular file (a FIFO, a device), or
 * one of the process's own descriptors (/dev/stdout may lead to a regular
 * file), is written into: it cannot be replaced, and its reader is
 * waiting.  A regular file elsewhere under /dev (/dev/shm) is replaced as
 * any other (it was appended to, until tests/cli/run_options.txt's case). */
static bool written_into(const char *path, const struct stat *sb)
{
    return !S_ISDIR(sb->st_mode) && (!S_ISREG(sb->st_mode) || cli_stream_fd(path) >= 0);
}

enum kind { AS_NPY, AS_NPZ, AS_JSON };

typedef struct job {
    const cli_out *o;
    enum kind kind;
} job;

/* The json object a result goes in: its name's prefix ("grad/x" in
 * "grads", "jvp/y" in "jvps", "hvp/x" in "hvps"; outputs before). */
static const char *const groups[][2] = {{"grad/", "grads"}, {"jvp/", "jvps"}, {"hvp/", "hvps"}};

static int group_of(const cli_out *o, int i)
{
    for (int k = 0; i >= o->noutputs && k < 3; k++)
        if (!strncmp(o->names[i], groups[k][0], strlen(groups[k][0])))
            return k;
    return -1;
}

static tl_code write_json(FILE *f, const cli_out *o, tl_status *st)
{
    fprintf(f, "{\"device\": \"%s\", \"outputs\": {", o->device);
    int open = -1; /* the group being written */
    bool any[3] = {false};
    for (int i = 0; i < o->n; i++) {
        int k = group_of(o, i);
        if (k != open) {
            for (int j = open + 1; j <= k; j++) /* grads always, jvps/hvps when there are some */
                if (j == k || j == 0)
                    fprintf(f, "}, \"%s\": {", groups[j][1]), any[j] = true;
            open = k;
        } else if (i) {
            fprintf(f, ", ");
        }
        tl_json_write_string(f, k >= 0 ? o->names[i] + strlen(groups[k][0]) : o->names[i]);
        fprintf(f, ": ");
        if (tl_json_tensor_write(f, o->ts[i], st))
            return st->code;
    }
    fprintf(f, any[0] ? "}}\n" : "}, \"grads\": {}}\n");
    return TL_OK;
}

static tl_code write_kind(FILE *f, const void *ctx, tl_status *st)
{
    const job *j = ctx;
    switch (j->kind) {
    case AS_NPY: return tl_npy_write(f, j->o->ts[0], st);
    case AS_NPZ: return tl_npz_write(f, j->o->n, j->o->names, j->o->ts, false, st);
    default: return write_json(f, j->o, st);
    }
}

static tl_code finish_stream(FILE *f, const char *what, tl_status *st)
{
    if (fflush(f) || ferror(f))
        return tl_fail(st, TL_ERUNTIME, "writing %s: %s", what, strerror(errno ? errno : EIO));
    return TL_OK;
}

/* Writes into f and closes it: the stream's errors, the close's, and
 * the writer's are one error naming path. */
static tl_code write_closing(FILE *f, const char *path, cli_writer w, const void *ctx, tl_status *st)
{
    tl_code rc = w(f, ctx, st);
    if (!rc)
        rc = finish_stream(f, path, st);
    if (fclose(f) && !rc)
        rc = tl_fail(st, TL_ERUNTIME, "writing %s: %s", path, strerror(errno));
    return rc;
}

/* The temporary file being written, for the signal handler (main.c) to
 * remove: a run stopped by a signal leaves no partial file behind. */
char *volatile cli_pending_tmp;

/* Files written whole under their temporary names while deferral is on,
 * which cli_defer_commit gives their names together (tl compile's .npz and
 * .json, a run's -o and --report): a failure before leaves every old file
 * as it was (the .npz was replaced before the .json failed, and -o before
 * --report, until tests/cli/onnx.txt's and hostile.txt's cases). */
typedef struct deferred {
    char *tmp, *path;
    bool reg;
} deferred;
static deferred defer[CLI_DEFER_MAX];
static int ndefer = -1; /* -1: off */
char *volatile cli_deferred_tmp[CLI_DEFER_MAX];

void cli_remove_pending(void)
{
    char *tmp = cli_pending_tmp;
    if (tmp)
        unlink(tmp);
    for (int i = 0; i < CLI_DEFER_MAX; i++)
        if ((tmp = cli_deferred_tmp[i]))
            unlink(tmp);
}

/* The complete file `tmp` takes the name `path`, atomically: a reader
 * sees the old file or the new one, whole.  Where the target exists, the
 * two names are exchanged and the old file, now under the temporary name,
 * is removed: a rename over an existing file makes ext4 write the new
 * file's data out at once (its auto_da_alloc), 20 to 30 ms of a 64 MB
 * gradient's run, where the exchange takes 0.1 ms.  Only a regular file
 * is exchanged (a directory in the way stays an error). */
enum { TRADED = 1, NAMED = 2 };

/* The complete file tmp takes the name path: TRADED, it traded places with
 * the old file, which now has the name tmp; NAMED, there was none (or no
 * exchange here); -1 with errno set on failure, nothing changed. */
static int trade(const char *tmp, const char *path, bool file_there)
{
#ifdef RENAME_EXCHANGE
    struct stat sb;
    if (file_there && !renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE)) {
        if (!lstat(tmp, &sb) && S_ISDIR(sb.st_mode)) { /* a folder took the name since: give it back */
            renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE);
            errno = EISDIR;
            return -1;
        }
        return TRADED;
    }
#endif
    return rename(tmp, path) ? -1 : NAMED;
}

static int replace(const char *tmp, const char *path, bool file_there)
{
    int r = trade(tmp, path, file_there);
    if (r == TRADED)
        unlink(tmp); /* the old file */
    return r < 0 ? -1 : 0;
}

tl_code cli_write_atomic(const char *path, cli_writer w, const void *ctx, tl_status *st)
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
    struct stat was;
    bool exists = !stat(path, &was);
    if (exists && written_into(path, &was)) {
        free(tmp);
        /* never truncated: /dev/stdout leads to the file the shell opened,
         * which >> opened for appending (and > emptied); written through
         * that descriptor, so that what the shell writes next comes after
         * (a new open of /dev/stdout has an offset of its own: the shell's
         * next line overwrote tl's output, until tests/cli/run_options.txt's
         * case) */
        int sfd = cli_stream_fd(path);
        int afd = sfd >= 0 ? fcntl(sfd, F_DUPFD_CLOEXEC, 3) : open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        /* "w" on a descriptor truncates nothing; "a" would set O_APPEND on
         * the shell's own open file */
        FILE *f = afd >= 0 ? fdopen(afd, sfd >= 0 ? "wb" : "ab") : NULL;
        if (!f) {
            if (afd >= 0)
                close(afd);
            return tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s", path, strerror(errno));
        }
        tl_code rc = write_closing(f, path, w, ctx, st);
        if (rc && sfd == 1 && errno == EPIPE) { /* the reader has gone (| head), as for -o - */
            *st = (tl_status){0};
            return TL_OK;
        }
        if (rc && !strstr(st->msg, path))
            tl_wrap(st, "%s", path);
        return rc;
    }
    int fd = mkstemp(tmp);
    if (fd >= 0)
        cli_pending_tmp = tmp;
    if (fd < 0) {
        tl_fail(st, TL_ERUNTIME, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return st->code;
    }
    /* the permissions a new file gets (mkstemp's are 0600), or those of
     * the file it replaces */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, exists && S_ISREG(was.st_mode) ? was.st_mode & 07777 : 0666 & ~mask);
    /* no fsync: taking the name makes the file whole or absent for every
     * reader (a run that fails or is killed leaves nothing); surviving a
     * power loss is the file system's business, as for NumPy's np.save
     * (syncing cost a third of a large gradient's write) */
    FILE *f = fdopen(fd, "wb");
    tl_code rc = f ? write_closing(f, path, w, ctx, st)
                   : (close(fd), tl_fail(st, TL_ERUNTIME, "fdopen failed"));
    if (!rc && ndefer >= 0 && ndefer < CLI_DEFER_MAX) { /* named by cli_defer_commit */
        char *p = strdup(path);
        if (p) {
            defer[ndefer] = (deferred){tmp, p, exists && S_ISREG(was.st_mode)};
            cli_deferred_tmp[ndefer++] = tmp;
            cli_pending_tmp = NULL;
            return TL_OK;
        }
        rc = tl_fail(st, TL_ERUNTIME, "out of memory");
    }
    if (!rc && replace(tmp, path, exists && S_ISREG(was.st_mode)))
        rc = tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s", path, strerror(errno));
    if (rc) {
        unlink(tmp);
        if (!strstr(st->msg, path))
            tl_wrap(st, "%s", path);
    }
    cli_pending_tmp = NULL;
    free(tmp);
    return rc;
}

void cli_defer_begin(void) { ndefer = 0; }

static void defer_end(int from)
{
    for (int i = 0; i < ndefer; i++) {
        cli_deferred_tmp[i] = NULL;
        if (i >= from)
            unlink(defer[i].tmp);
        free(defer[i].tmp);
        free(defer[i].path);
    }
    ndefer = -1;
}

void cli_defer_abort(void) { defer_end(0); }

/* The files take their names together or not at all: each new file
 * first trades places with its old one (which keeps the temporary name),
 * and only when every trade is made are the old files removed; a trade
 * that fails undoes those made, so every old file is as it was.  Signals
 * wait for the trades (a few system calls): a signal between two of them
 * removed the first old file and left the second, until this was so. */
tl_code cli_defer_commit(tl_status *st)
{
    int done[CLI_DEFER_MAX] = {0};
    sigset_t all, was;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &was);
    int i = 0, err = 0;
    for (; i < ndefer && !err; i++)
        if ((done[i] = trade(defer[i].tmp, defer[i].path, defer[i].reg)) < 0)
            err = errno;
    if (err) { /* undone, the last first */
        int bad = i - 1;
        for (int j = bad - 1; j >= 0; j--) {
#ifdef RENAME_EXCHANGE
            if (done[j] == TRADED)
                renameat2(AT_FDCWD, defer[j].tmp, AT_FDCWD, defer[j].path, RENAME_EXCHANGE);
#endif
            if (done[j] == NAMED)
                rename(defer[j].path, defer[j].tmp);
        }
        tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s", defer[bad].path, strerror(err));
    }
    sigprocmask(SIG_SETMASK, &was, NULL);
    if (err) {
        defer_end(0); /* every temporary: the new files */
        return st->code;
    }
    for (int j = 0; j < ndefer; j++) /* the old files, under the temporary names */
        if (done[j] == TRADED)
            unlink(defer[j].tmp);
    defer_end(ndefer);
    return TL_OK;
}

/* The format of -o PATH: its ending says, or, for a device or FIFO
 * without one, what standard output would get. */
static tl_code pick_kind(const cli_out *o, enum kind *kind, tl_status *st)
{
    bool out = !o->path || !strcmp(o->path, "-");
    struct stat sb;
    if (out || ((!cli_ends_with(o->path, ".npy") && !cli_ends_with(o->path, ".npz") && !cli_ends_with(o->path, ".json")) &&
                !stat(o->path, &sb) && written_into(o->path, &sb))) {
        *kind = o->json ? AS_JSON : o->n == 1 ? AS_NPY : AS_NPZ;
        return TL_OK;
    }
    *kind = cli_ends_with(o->path, ".npy") ? AS_NPY : cli_ends_with(o->path, ".json") ? AS_JSON : AS_NPZ;
    if (*kind == AS_NPZ && !cli_ends_with(o->path, ".npz"))
        return tl_fail(st, TL_EINPUT, "-o %s: the output must end in .npy, .npz or .json "
                       "(or be a device or FIFO; text goes to standard output, without -o)", o->path);
    if (*kind == AS_NPY && o->n != 1)
        return tl_fail(st, TL_EINPUT, "-o %s: a .npy file holds one tensor, this writes %d (use .npz)",
                       o->path, o->n);
    return TL_OK;
}

tl_code cli_check_path(const char *path, tl_status *st)
{
    struct stat sb;
    if (!stat(path, &sb)) {
        if (S_ISDIR(sb.st_mode))
            return tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s", path, strerror(EISDIR));
        if (written_into(path, &sb))
            return access(path, W_OK) ? tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s", path, strerror(errno))
                                      : TL_OK;
    }
    /* the temporary file the writing will make, made and removed at once:
     * whether the folder takes new files, asked of the file system itself */
    size_t n = strlen(path) + 16;
    char *probe = malloc(n);
    if (!probe)
        return tl_fail(st, TL_ERUNTIME, "out of memory");
    const char *slash = strrchr(path, '/');
    snprintf(probe, n, "%.*s.tl-XXXXXX", slash ? (int)(slash - path) + 1 : 0, path);
    int fd = mkstemp(probe);
    tl_code rc = fd < 0 ? tl_fail(st, TL_ERUNTIME, "%s: cannot create: %s", path, strerror(errno)) : TL_OK;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    /* a folder with the sticky bit (/tmp) lets only the owner of a file (or
     * of the folder) replace it: a run whose result could not take its
     * name was lost, found only after it (the audit's case) */
    struct stat dir;
    if (!rc && slash)
        probe[slash - path + 1] = '\0';
    if (!rc && !stat(path, &sb) && S_ISREG(sb.st_mode) && !stat(slash ? probe : ".", &dir) &&
        (dir.st_mode & S_ISVTX) && geteuid() != 0 && sb.st_uid != geteuid() && dir.st_uid != geteuid())
        rc = tl_fail(st, TL_ERUNTIME, "%s: cannot write: %s (another user's file, in a folder with the sticky bit)",
                     path, strerror(EPERM));
    free(probe);
    return rc;
}

/* path's folder resolved (links and "..": realpath) and its last part,
 * into buf; false where the folder cannot be resolved. */
static bool canonical_name(const char *path, char *buf, size_t len)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (slash && snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path) >= (int)sizeof dir)
        return false;
    if (!realpath(slash ? dir : ".", real))
        return false;
    return snprintf(buf, len, "%s/%s", real, slash ? slash + 1 : path) < (int)len;
}

bool cli_same_file(const char *a, const char *b)
{
    if (!strcmp(a, "-") || !strcmp(b, "-") || cli_stream_fd(a) >= 0 || cli_stream_fd(b) >= 0)
        return false; /* written into, appended to: see written_into */
    struct stat sa, sb;
    bool ea = !stat(a, &sa), eb = !stat(b, &sb);
    if (ea && eb) /* a device or FIFO is a stream that two writers may share */
        return S_ISREG(sa.st_mode) && S_ISREG(sb.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb && (ea ? !S_ISREG(sa.st_mode) : !S_ISREG(sb.st_mode)))
        return false;
    char ca[2 * PATH_MAX], cb[2 * PATH_MAX];
    if (!strcmp(a, b))
        return true;
    return canonical_name(a, ca, sizeof ca) && canonical_name(b, cb, sizeof cb) && !strcmp(ca, cb);
}

tl_code cli_check_output(const cli_out *o, tl_status *st)
{
    enum kind kind;
    cli_out known = *o;
    known.n = o->n < 0 ? 1 : o->n; /* a count not known yet is not checked */
    if (pick_kind(&known, &kind, st))
        return st->code;
    return o->path && strcmp(o->path, "-") ? cli_check_path(o->path, st) : TL_OK;
}

tl_code cli_write(const cli_out *o, tl_status *st)
{
    job j = {o, AS_NPZ};
    if (pick_kind(o, &j.kind, st))
        return st->code;
    if (o->path && strcmp(o->path, "-"))
        return cli_write_atomic(o->path, write_kind, &j, st);
    errno = 0;
    tl_code rc = TL_OK;
    if (o->path || o->json) /* "-": .npy, .npz, or json with --format json */
        rc = write_kind(stdout, &j, st);
    else {
        for (int i = 0; i < o->n && !rc; i++)
            rc = tl_text_write(stdout, o->names[i], o->ts[i], o->full, st);
    }
    if (!rc)
        rc = finish_stream(stdout, "standard output", st);
    if (rc && cli_stdout_gone()) /* the reader has gone: nothing left to do */
        return TL_OK;
    if (rc && !strstr(st->msg, "standard output"))
        tl_wrap(st, "writing standard output");
    return rc;
}
