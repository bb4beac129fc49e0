#define _DEFAULT_SOURCE /* madvise */
#define _POSIX_C_SOURCE 200809L
#include "formats/npz.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <libdeflate.h>
#include <unistd.h>
#include <zlib.h>

#include "backends/cpu/threads.h"
#include "formats/npy.h"
#include "formats/sniff.h"

/* CRC-32 over a member: libdeflate's (carry-less multiplication where the
 * processor has it), 4-5x faster than zlib 1.2.13's: 64 MiB in 7.5 ms
 * against 28-40 ms on the development VM's Zen 3 (the MLP benchmark's 29
 * MB of archives read and written: about 10 ms less of CPU time, within
 * that VM's noise of its whole process); zlib still inflates, deflates and
 * combines CRCs. */
static uint32_t crc32_of(uint32_t crc, const void *p, size_t n) { return libdeflate_crc32(crc, p, n); }

/* The ZIP format: PKWARE's APPNOTE.TXT, sections 4.3 and 4.5.3. */
enum {
    SIG_LOCAL = 0x04034b50,
    SIG_CENTRAL = 0x02014b50,
    SIG_EOCD = 0x06054b50,
    SIG_Z64_EOCD = 0x06064b50,
    SIG_Z64_LOCATOR = 0x07064b50,
    LOCAL_LEN = 30,
    CENTRAL_LEN = 46,
    EOCD_LEN = 22,
    Z64_EOCD_LEN = 56,
    Z64_LOCATOR_LEN = 20,
    METHOD_STORED = 0,
    METHOD_DEFLATED = 8,
    DOS_DATE_1980 = 0x21, /* 1980-01-01: fixed, so archives are reproducible */
};
#define MARK32 0xFFFFFFFFu /* "the real value is in the ZIP64 extra field" */
#define MARK16 0xFFFFu
#define ZIP64_LIMIT 0x7FFFFFFFu /* as Python's zipfile, which NumPy uses */
/* Deflate spends at least 2 bits on 258 bytes: no member inflates further. */
#define MAX_INFLATE_RATIO 1032u

typedef struct npz_member {
    char *key; /* owned */
    uint16_t method;
    uint32_t crc;
    uint64_t csize, usize, data_off;
} npz_member;

struct tl_npz {
    unsigned char *buf; /* owned: allocated, or mapped when map_len */
    size_t len, map_len;
    int fd; /* owned: the mapped file, or -1 */
    int n;
    npz_member *m;       /* in archive order */
    npz_member **by_key; /* sorted, for lookup */
};

/* Where the central directory is, and where it must end. */
typedef struct cdir {
    uint64_t off, size, count, end;
} cdir;

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- the end records ---- */

static tl_code find_eocd(const unsigned char *b, size_t len, size_t *pos, tl_status *st)
{
    tl_bytes_kind kind = tl_bytes_kind_of(b, len);
    if (kind == TL_BYTES_NPY)
        return tl_fail(st, TL_EINPUT, "not a zip archive (this is a .npy file, not a .npz)");
    if (len < EOCD_LEN)
        return tl_fail(st, TL_EINPUT, "not a zip archive (%zu bytes, too short)", len);
    size_t lo = len - EOCD_LEN > 65535 ? len - EOCD_LEN - 65535 : 0;
    for (size_t p = len - EOCD_LEN + 1; p-- > lo;)
        if (rd32(b + p) == SIG_EOCD && p + EOCD_LEN + rd16(b + p + 20) == len) {
            *pos = p;
            return TL_OK;
        }
    /* what it is instead, where its first bytes say */
    if (kind == TL_BYTES_ONNX)
        return tl_fail(st, TL_EINPUT, "not a zip archive (it reads as an ONNX model: named .onnx, its "
                       "initializers are MODEL.onnx:NAME)");
    if (kind == TL_BYTES_JSON)
        return tl_fail(st, TL_EINPUT, "not a zip archive (it reads as JSON text: a JSON result file is named .json)");
    return tl_fail(st, TL_EINPUT,
                   "not a zip archive (no end of central directory record; truncated?)");
}

static tl_code multi_disk(tl_status *st)
{
    return tl_fail(st, TL_EINPUT, "multi-disk zip archives are not supported");
}

static tl_code read_zip64_end(const unsigned char *b, size_t loc, cdir *cd, tl_status *st)
{
    const unsigned char *l = b + loc;
    if (rd32(l + 4) != 0 || rd32(l + 16) > 1)
        return multi_disk(st);
    uint64_t z = rd64(l + 8);
    if (z > loc || loc - z < Z64_EOCD_LEN)
        return tl_fail(
            st, TL_EINPUT,
            "ZIP64 end of central directory record (offset %" PRIu64 ") lies outside the file", z);
    const unsigned char *r = b + z;
    if (rd32(r) != SIG_Z64_EOCD)
        return tl_fail(st, TL_EINPUT, "damaged ZIP64 end of central directory record");
    if (rd32(r + 16) != 0 || rd32(r + 20) != 0 || rd64(r + 24) != rd64(r + 32))
        return multi_disk(st);
    cd->count = rd64(r + 32);
    cd->size = rd64(r + 40);
    cd->off = rd64(r + 48);
    cd->end = z;
    return TL_OK;
}

static tl_code check_cdir(const cdir *cd, size_t len, tl_status *st)
{
    if (cd->off > cd->end || cd->size > cd->end - cd->off)
        return tl_fail(st, TL_EINPUT,
                       "central directory (offset %" PRIu64 ", %" PRIu64
                       " bytes) lies outside the file (%zu bytes)",
                       cd->off, cd->size, len);
    if (cd->count > cd->size / CENTRAL_LEN || cd->count > INT_MAX)
        return tl_fail(st, TL_EINPUT,
                       "central directory claims %" PRIu64 " entries in %" PRIu64 " bytes",
                       cd->count, cd->size);
    return TL_OK;
}

static tl_code read_cdir(const unsigned char *b, size_t len, cdir *cd, tl_status *st)
{
    size_t e = 0;
    if (find_eocd(b, len, &e, st))
        return st->code;
    const unsigned char *p = b + e;
    uint16_t disk = rd16(p + 4), cd_disk = rd16(p + 6);
    if ((disk != 0 && disk != MARK16) || (cd_disk != 0 && cd_disk != MARK16) ||
        rd16(p + 8) != rd16(p + 10))
        return multi_disk(st);
    *cd = (cdir){.count = rd16(p + 10), .size = rd32(p + 12), .off = rd32(p + 16), .end = e};
    if (e >= Z64_LOCATOR_LEN && rd32(b + e - Z64_LOCATOR_LEN) == SIG_Z64_LOCATOR &&
        read_zip64_end(b, e - Z64_LOCATOR_LEN, cd, st))
        return st->code;
    return check_cdir(cd, len, st);
}

/* ---- central directory entries ---- */

/* Replaces the 0xFFFFFFFF sizes and offset by their ZIP64 values, in the
 * order the format gives them. */
static tl_code read_zip64_extra(const unsigned char *x, size_t n, uint64_t *fields[3],
                                tl_status *st)
{
    while (n >= 4) {
        size_t id = rd16(x), sz = rd16(x + 2);
        if (sz > n - 4)
            return tl_fail(st, TL_EINPUT, "an extra field runs past its header");
        const unsigned char *q = x + 4, *qend = q + sz;
        for (int i = 0; i < 3 && id == 1; i++) {
            if (*fields[i] != MARK32)
                continue;
            if (qend - q < 8)
                return tl_fail(st, TL_EINPUT, "ZIP64 extra field too short");
            *fields[i] = rd64(q);
            q += 8;
        }
        x += 4 + sz;
        n -= 4 + sz;
    }
    return TL_OK;
}

/* The member name without ".npy", as a new string. */
static char *member_key(const unsigned char *name, size_t n, tl_status *st)
{
    if (memchr(name, '\0', n)) {
        tl_fail(st, TL_EINPUT, "a member name contains a NUL byte");
        return NULL;
    }
    if (n >= 4 && !memcmp(name + n - 4, ".npy", 4))
        n -= 4;
    char *k = tl_malloc(n + 1, 1, "a member name", st);
    if (k) {
        memcpy(k, name, n);
        k[n] = '\0';
    }
    return k;
}

/* Finds the member's data behind its local header; data must end before
 * the central directory. */
static tl_code read_local(const tl_npz *z, uint64_t off, uint64_t limit, const unsigned char *name,
                          size_t nlen, npz_member *m, tl_status *st)
{
    const unsigned char *b = z->buf;
    if (off > limit || limit - off < LOCAL_LEN || rd32(b + off) != SIG_LOCAL)
        return tl_fail(st, TL_EINPUT, "no local header at offset %" PRIu64 " (file has %zu bytes)",
                       off, z->len);
    size_t ln = rd16(b + off + 26), le = rd16(b + off + 28);
    uint64_t data = off + LOCAL_LEN + ln + le;
    if (data > limit || m->csize > limit - data)
        return tl_fail(st, TL_EINPUT,
                       "data (offset %" PRIu64 ", %" PRIu64
                       " bytes) runs past the end of the member area",
                       data, m->csize);
    if (ln != nlen || memcmp(b + off + LOCAL_LEN, name, nlen))
        return tl_fail(st, TL_EINPUT, "local header names a different file");
    m->data_off = data;
    return TL_OK;
}

static tl_code check_member(const npz_member *m, uint16_t flags, tl_status *st)
{
    if (flags & 0x41)
        return tl_fail(st, TL_EINPUT, "encrypted members are not supported");
    if (m->method != METHOD_STORED && m->method != METHOD_DEFLATED)
        return tl_fail(st, TL_EINPUT,
                       "unsupported compression method %u (tl reads stored and deflated)",
                       (unsigned)m->method);
    if (m->method == METHOD_STORED && m->csize != m->usize)
        return tl_fail(st, TL_EINPUT,
                       "stored member with compressed size %" PRIu64 " but size %" PRIu64, m->csize,
                       m->usize);
    if (m->usize > SIZE_MAX - 1)
        return tl_fail(st, TL_EINPUT, "member too large for memory");
    return TL_OK;
}

/* Parses the central entry at *p (before end) into m and moves *p past it. */
static tl_code read_central(const tl_npz *z, uint64_t *p, const cdir *cd, npz_member *m,
                            tl_status *st)
{
    const unsigned char *h = z->buf + *p;
    uint64_t end = cd->off + cd->size;
    if (end - *p < CENTRAL_LEN || rd32(h) != SIG_CENTRAL)
        return tl_fail(st, TL_EINPUT, "damaged central directory entry at offset %" PRIu64, *p);
    size_t nlen = rd16(h + 28), elen = rd16(h + 30), clen = rd16(h + 32);
    if (end - *p - CENTRAL_LEN < nlen + elen + clen)
        return tl_fail(st, TL_EINPUT,
                       "central directory entry at offset %" PRIu64 " runs past the directory", *p);
    if (!(m->key = member_key(h + CENTRAL_LEN, nlen, st)))
        return st->code;
    uint64_t local = rd32(h + 42);
    m->method = rd16(h + 10);
    m->crc = rd32(h + 16);
    m->csize = rd32(h + 20);
    m->usize = rd32(h + 24);
    uint64_t *fields[3] = {&m->usize, &m->csize, &local};
    if (read_zip64_extra(h + CENTRAL_LEN + nlen, elen, fields, st) ||
        check_member(m, rd16(h + 8), st) ||
        read_local(z, local, cd->off, h + CENTRAL_LEN, nlen, m, st))
        return tl_wrap(st, "member '%s'", m->key);
    *p += CENTRAL_LEN + nlen + elen + clen;
    return TL_OK;
}

static int cmp_member(const void *a, const void *b)
{
    return strcmp((*(npz_member *const *)a)->key, (*(npz_member *const *)b)->key);
}

static tl_code index_keys(tl_npz *z, tl_status *st)
{
    z->by_key = tl_malloc((size_t)z->n, sizeof *z->by_key, "the archive index", st);
    if (!z->by_key)
        return st->code;
    for (int i = 0; i < z->n; i++)
        z->by_key[i] = &z->m[i];
    qsort(z->by_key, (size_t)z->n, sizeof *z->by_key, cmp_member);
    for (int i = 1; i < z->n; i++)
        if (!strcmp(z->by_key[i - 1]->key, z->by_key[i]->key))
            return tl_fail(st, TL_EINPUT, "duplicate key '%s'", z->by_key[i]->key);
    return TL_OK;
}

static tl_code read_members(tl_npz *z, tl_status *st)
{
    cdir cd = {0};
    if (read_cdir(z->buf, z->len, &cd, st))
        return st->code;
    z->m = tl_calloc((size_t)cd.count, sizeof *z->m, "the archive index", st);
    if (!z->m)
        return st->code;
    uint64_t p = cd.off;
    for (; z->n < (int)cd.count; z->n++)
        if (read_central(z, &p, &cd, &z->m[z->n], st)) {
            z->n++; /* its key, if any, is freed by close */
            return st->code;
        }
    return index_keys(z, st);
}

/* Takes ownership of buf: allocated, or a mapping of len bytes of the
 * file fd when fd >= 0 (and of fd). */
static tl_npz *open_owned(unsigned char *buf, size_t len, int fd, tl_status *st)
{
    tl_npz *z = tl_calloc(1, sizeof *z, "an archive", st);
    if (!z) {
        if (fd >= 0)
            munmap(buf, len), close(fd);
        else
            free(buf);
        return NULL;
    }
    z->buf = buf;
    z->len = len;
    z->map_len = fd >= 0 ? len : 0;
    z->fd = fd;
    if (read_members(z, st)) {
        tl_npz_close(z);
        return NULL;
    }
    return z;
}

tl_npz *tl_npz_open_mem(const void *buf, size_t len, tl_status *st)
{
    unsigned char *copy = tl_malloc(len, 1, "an archive buffer", st);
    if (!copy)
        return NULL;
    if (len)
        memcpy(copy, buf, len);
    return open_owned(copy, len, -1, st);
}

/* An archive of this many bytes and more in a regular file is mapped
 * read-only instead of read into memory, its file kept open: stored
 * members are read from the file straight into their tensors
 * (read_member), deflated ones inflated from the kernel's own pages of the
 * file; one copy instead of two either way (a read into a fresh buffer
 * faulted in every page of it: 8.6 ms of the MLP benchmark's 14 MB
 * archive, against 1 to map it). */
#ifndef TL_NPZ_MAP_MIN
#define TL_NPZ_MAP_MIN ((size_t)1 << 20)
#endif

tl_npz *tl_npz_open(const char *path, tl_status *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tl_fail(st, TL_EINPUT, "cannot open: %s", strerror(errno)), NULL;
    struct stat sb;
    void *m = MAP_FAILED;
    if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size >= TL_NPZ_MAP_MIN &&
        (uint64_t)sb.st_size <= SIZE_MAX)
        m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED)
        return open_owned(m, (size_t)sb.st_size, fd, st);
    close(fd);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (tl_slurp_path(path, &buf, &len, st))
        return NULL;
    return open_owned(buf, len, -1, st);
}

void tl_npz_close(tl_npz *z)
{
    if (!z)
        return;
    for (int i = 0; i < z->n; i++)
        free(z->m[i].key);
    free(z->m);
    free(z->by_key);
    if (z->map_len)
        munmap(z->buf, z->map_len);
    else
        free(z->buf);
    if (z->fd >= 0)
        close(z->fd);
    free(z);
}

int tl_npz_count(const tl_npz *z) { return z->n; }

const char *tl_npz_key(const tl_npz *z, int i) { return i >= 0 && i < z->n ? z->m[i].key : NULL; }

static const npz_member *find(const tl_npz *z, const char *key)
{
    npz_member probe = {.key = (char *)key}, *pp = &probe;
    npz_member **hit = bsearch(&pp, z->by_key, (size_t)z->n, sizeof *z->by_key, cmp_member);
    return hit ? *hit : NULL;
}

/* A key asked for: as find, or else key less a ".npy" (the member's file
 * name, as NumPy's np.load(F)["x.npy"] takes it too). */
static const npz_member *find_asked(const tl_npz *z, const char *key)
{
    const npz_member *m = find(z, key);
    size_t n = strlen(key);
    if (!m && n > 4 && n < 4096 && !strcmp(key + n - 4, ".npy")) {
        char bare[4096];
        memcpy(bare, key, n - 4);
        bare[n - 4] = '\0';
        m = find(z, bare);
    }
    return m;
}

bool tl_npz_has(const tl_npz *z, const char *key) { return find(z, key) != NULL; }

uint64_t tl_npz_size(const tl_npz *z, const char *key)
{
    const npz_member *m = find(z, key);
    return m ? m->usize : 0;
}

bool tl_npz_deflated(const tl_npz *z, const char *key)
{
    const npz_member *m = find(z, key);
    return m && m->method == METHOD_DEFLATED;
}

/* ---- member data ---- */

/* Hands zlib the next piece (at most UINT_MAX bytes) of what is left. */
static void refill(uInt *avail, uint64_t *left)
{
    if (*avail == 0 && *left) {
        uInt k = *left > UINT_MAX ? UINT_MAX : (uInt)*left;
        *avail = k;
        *left -= k;
    }
}

static tl_code inflate_end(const z_stream *zs, uint64_t in_left, uint64_t made, uint64_t usize,
                           tl_status *st)
{
    if (made < usize)
        return tl_fail(st, TL_EINPUT,
                       "inflates to %" PRIu64 " bytes, fewer than the declared %" PRIu64, made,
                       usize);
    if (zs->avail_in || in_left)
        return tl_fail(st, TL_EINPUT, "%" PRIu64 " bytes after the end of the deflate data",
                       zs->avail_in + in_left);
    return TL_OK;
}

/* Inflates into the usize bytes at next_out; one byte more is an error. */
static tl_code run_inflate(z_stream *zs, uint64_t in_left, uint64_t usize, tl_status *st)
{
    uint64_t out_left = usize;
    unsigned char extra;
    bool probing = false;
    for (;;) {
        refill(&zs->avail_in, &in_left);
        refill(&zs->avail_out, &out_left);
        if (zs->avail_out == 0 && !probing) {
            zs->next_out = &extra;
            zs->avail_out = 1;
            probing = true;
        }
        int r = inflate(zs, Z_NO_FLUSH);
        if (probing && zs->avail_out == 0)
            return tl_fail(st, TL_EINPUT,
                           "inflates past its declared size of %" PRIu64 " bytes (a zip bomb?)",
                           usize);
        if (r == Z_STREAM_END)
            return inflate_end(zs, in_left, probing ? usize : usize - out_left - zs->avail_out,
                               usize, st);
        if (r == Z_MEM_ERROR)
            return tl_fail(st, TL_ERUNTIME, "out of memory inflating a member");
        if (r == Z_BUF_ERROR && zs->avail_in == 0 && in_left == 0)
            return tl_fail(st, TL_EINPUT, "truncated deflate data");
        if (r != Z_OK && r != Z_BUF_ERROR)
            return tl_fail(st, TL_EINPUT, "corrupt deflate data (%s)", zs->msg ? zs->msg : "error");
    }
}

static unsigned char *inflate_member(const unsigned char *src, const npz_member *m, tl_status *st)
{
    if (m->usize / MAX_INFLATE_RATIO > m->csize + 1) {
        tl_fail(st, TL_EINPUT,
                "declares %" PRIu64 " bytes from %" PRIu64
                " deflated bytes, more than deflate can produce (a zip bomb?)",
                m->usize, m->csize);
        return NULL;
    }
    if (tl_read_fits(m->usize, "inflating the member", st))
        return NULL;
    unsigned char *out = tl_malloc((size_t)m->usize, 1, "an inflated member", st);
    if (!out)
        return NULL;
    z_stream zs = {.next_in = (Bytef *)src, .next_out = out};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
        free(out);
        tl_fail(st, TL_ERUNTIME, "cannot start zlib");
        return NULL;
    }
    tl_code rc = run_inflate(&zs, m->csize, m->usize, st);
    inflateEnd(&zs);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}

static void crc_mismatch(uint32_t want, uint32_t have, tl_status *st)
{
    tl_fail(st, TL_EINPUT, "CRC-32 mismatch (the archive says %08" PRIx32 ", the data has %08" PRIx32 ")", want,
            have);
}

/* The CRC-32 of a stored member of a megabyte or more, computed by a
 * second thread while the first moves the bytes between the file and
 * memory (pread in, write out; for writing, see write_archive): on two
 * processors the check then costs no time of its own, where it had cost
 * a third as much as the move (16 MiB: pread 2-3 ms, CRC 1.1 ms on the
 * Zen 5 VM; the layer-norm benchmark's whole process 20.9 -> 19.3 ms, the
 * max-pool benchmark's 30.4 -> 27.7, reading and writing).  Item 0 of a
 * cpu_parallel of two is the mover, which tells how far it has come;
 * item 1 follows it.  On one thread the items run in turn, the CRC after
 * the whole move; the CRC is the same either way. */
#define CRC_PIPE_MIN ((size_t)1 << 20)
typedef struct crc_pipe {
    pthread_mutex_t lock;
    pthread_cond_t more;
    const unsigned char *p; /* the bytes */
    size_t ready;           /* [p, p + ready) in place */
    bool over;              /* the mover is done, or failed */
    uint32_t crc;           /* follows [p, p + ready) */
    void (*move)(struct crc_pipe *c);
} crc_pipe;

static void pipe_tell(crc_pipe *c, const unsigned char *p, size_t ready)
{
    pthread_mutex_lock(&c->lock);
    c->p = p;
    c->ready = ready;
    pthread_cond_signal(&c->more);
    pthread_mutex_unlock(&c->lock);
}

static void pipe_item(void *ctx, int64_t item)
{
    crc_pipe *c = ctx;
    if (item == 0) {
        c->move(c);
        pthread_mutex_lock(&c->lock);
        c->over = true;
        pthread_cond_signal(&c->more);
        pthread_mutex_unlock(&c->lock);
        return;
    }
    size_t done = 0;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (c->ready == done && !c->over)
            pthread_cond_wait(&c->more, &c->lock);
        size_t ready = c->ready;
        const unsigned char *p = c->p;
        pthread_mutex_unlock(&c->lock);
        if (ready == done)
            return; /* over */
        c->crc = crc32_of(c->crc, p + done, ready - done);
        done = ready;
    }
}

/* Runs c->move beside the CRC of what it tells; the CRC of the bytes it
 * told of. */
static uint32_t crc_beside(crc_pipe *c)
{
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->more, NULL);
    cpu_parallel(2, 2, pipe_item, c);
    pthread_cond_destroy(&c->more);
    pthread_mutex_destroy(&c->lock);
    return c->crc;
}

typedef struct read_pipe {
    crc_pipe c; /* first */
    const unsigned char *head;
    size_t len, at;
    int fd;
    uint64_t off;
    tl_tensor *t;
    tl_status *st;
} read_pipe;

static void read_told(void *ctx, const tl_tensor *t, size_t done)
{
    pipe_tell(ctx, t->data, done);
}

static void read_move(crc_pipe *c)
{
    read_pipe *r = (read_pipe *)c;
    r->t = tl_npy_read_at(r->head, r->len, r->fd, r->off, &r->at, read_told, c, r->st);
}

static tl_tensor *read_member(const tl_npz *z, const npz_member *m, tl_status *st)
{
    const unsigned char *data = z->buf + m->data_off;
    unsigned char *inflated = NULL;
    tl_tensor *t = NULL;
    /* A stored member of a mapped archive: its data read from the file
     * into the tensor (the header from the mapping), then checked.  Where
     * the hypervisor shadows the guest's page tables, each page of a
     * mapping traps into the host at its first read: the pool
     * benchmark's 25.7 MB input took 11-23 ms mapped and copied, 3.5 ms
     * read (the Zen 5 VM).  Elsewhere the two are the same one copy. */
    if (m->method == METHOD_STORED && z->fd >= 0) {
        size_t at = 0;
        uint32_t data_crc = 0;
        if (m->usize >= CRC_PIPE_MIN && cpu_nthreads() > 1) {
            read_pipe r = {.head = data, .len = (size_t)m->usize, .fd = z->fd, .off = m->data_off, .st = st};
            r.c.move = read_move;
            data_crc = crc_beside(&r.c);
            t = r.t, at = r.at;
        } else if ((t = tl_npy_read_at(data, (size_t)m->usize, z->fd, m->data_off, &at, NULL, NULL, st)))
            data_crc = crc32_of(0, t->data, (size_t)m->usize - at);
        if (!t && at) /* no memory, or the read failed */
            return NULL;
        if (t) {
            uint32_t crc = (uint32_t)crc32_combine(crc32_of(0, data, at), data_crc, (z_off_t)(m->usize - at));
            if (crc == m->crc)
                return t;
            tl_tensor_unref(t);
            return crc_mismatch(m->crc, crc, st), NULL;
        }
    }
#ifdef MADV_POPULATE_READ
    if (z->fd >= 0) { /* the pages to read mapped in at once, as MAP_POPULATE would have */
        uintptr_t lo = (uintptr_t)data & ~(uintptr_t)4095;
        (void)madvise((void *)lo, (uintptr_t)data + m->csize - lo, MADV_POPULATE_READ);
    }
#endif
    if (m->method == METHOD_DEFLATED && !(data = inflated = inflate_member(data, m, st)))
        return NULL;
    uint32_t crc = crc32_of(0, data, (size_t)m->usize);
    if (crc != m->crc)
        crc_mismatch(m->crc, crc, st);
    else
        t = tl_npy_read_mem(data, (size_t)m->usize, st);
    free(inflated);
    return t;
}

static void missing_key(const tl_npz *z, const char *key, tl_status *st)
{
    char have[256] = "";
    size_t k = 0;
    for (int i = 0; i < z->n && k < sizeof have; i++)
        k += (size_t)snprintf(have + k, sizeof have - k, "%s'%s'", i ? ", " : "", z->m[i].key);
    if (k >= sizeof have)
        memcpy(have + sizeof have - 5, "...", 4);
    if (z->n)
        tl_fail(st, TL_EINPUT, "no key '%s' (the archive has %s)", key, have);
    else
        tl_fail(st, TL_EINPUT, "no key '%s' (the archive is empty)", key);
}

tl_tensor *tl_npz_get(const tl_npz *z, const char *key, tl_status *st)
{
    const npz_member *m = find_asked(z, key);
    if (!m) {
        missing_key(z, key, st);
        return NULL;
    }
    tl_tensor *t = read_member(z, m, st);
    if (!t)
        tl_wrap(st, "member '%s'", key);
    return t;
}

/* ---- writing ---- */

typedef struct zentry {
    char *name; /* key + ".npy", owned */
    uint16_t method;
    uint32_t crc, data_crc; /* the member's; of the tensor's data alone (stored members) */
    uint32_t pre_crc;       /* of a stored member's .npy preamble */
    bool late;              /* its CRC written into its local header after its data */
    uint64_t csize, usize, off;
} zentry;

typedef struct zwriter {
    FILE *f;
    uint64_t pos;
    bool force64;
    bool late; /* stored members' CRCs written after their data (write_archive) */
} zwriter;

static void wr16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void wr32(unsigned char *p, uint32_t v)
{
    wr16(p, v);
    wr16(p + 2, v >> 16);
}

static void wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static bool big(const zwriter *w, uint64_t v) { return w->force64 || v > ZIP64_LIMIT; }

static uint32_t mark32(const zwriter *w, uint64_t v) { return big(w, v) ? MARK32 : (uint32_t)v; }

/* errno's reason, or "I/O error" where the stream set none */
static tl_code write_failed(tl_status *st) { return tl_fail(st, TL_ERUNTIME, "write failed: %s", errno ? strerror(errno) : "I/O error"); }

static tl_code zput(zwriter *w, const void *p, size_t n, tl_status *st)
{
    errno = 0;
    if (n && fwrite(p, 1, n, w->f) != n)
        return write_failed(st);
    w->pos += n;
    return TL_OK;
}

static tl_code flushed(zwriter *w, tl_status *st)
{
    errno = 0;
    return fflush(w->f) || ferror(w->f) ? write_failed(st) : TL_OK;
}

/* Bit 11: the name is UTF-8, as Python sets it for non-ASCII names. */
static uint16_t name_flags(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p >= 0x80)
            return 0x800;
    return 0;
}

/* Gives deflate more room in *out, growing it when full. */
static tl_code make_room(z_stream *zs, unsigned char **out, size_t *cap, tl_status *st)
{
    size_t used = (size_t)(zs->next_out - *out);
    if (used == *cap) {
        size_t want = *cap + *cap / 2 + 64;
        unsigned char *p = want > *cap ? realloc(*out, want) : NULL;
        if (!p)
            return tl_fail(st, TL_ERUNTIME, "out of memory compressing a member (%zu bytes)", want);
        *out = p;
        *cap = want;
    }
    size_t room = *cap - used;
    zs->next_out = *out + used;
    zs->avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
    return TL_OK;
}

static tl_code run_deflate(z_stream *zs, uint64_t in_left, unsigned char **out, size_t *cap,
                           tl_status *st)
{
    for (;;) {
        refill(&zs->avail_in, &in_left);
        if (zs->avail_out == 0 && make_room(zs, out, cap, st))
            return st->code;
        int r = deflate(zs, in_left ? Z_NO_FLUSH : Z_FINISH);
        if (r == Z_STREAM_END)
            return TL_OK;
        if (r != Z_OK && r != Z_BUF_ERROR)
            return tl_fail(st, TL_ERUNTIME, "deflate failed (%s)", zs->msg ? zs->msg : "error");
    }
}

/* Deflates src into a new buffer (raw deflate, zlib's default level as
 * Python's zipfile); sets e->csize. */
static unsigned char *deflate_member(const unsigned char *src, zentry *e, tl_status *st)
{
    z_stream zs = {.next_in = (Bytef *)src};
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY)) {
        tl_fail(st, TL_ERUNTIME, "cannot start zlib");
        return NULL;
    }
    size_t cap = deflateBound(&zs, (uLong)e->usize);
    unsigned char *out = tl_malloc(cap, 1, "a compressed member", st);
    zs.next_out = out;
    if (out && run_deflate(&zs, e->usize, &out, &cap, st)) {
        free(out);
        out = NULL;
    }
    if (out)
        e->csize = (uint64_t)(zs.next_out - out);
    deflateEnd(&zs);
    return out;
}

static tl_code write_local(zwriter *w, const zentry *e, tl_status *st)
{
    unsigned char h[LOCAL_LEN], x[20];
    bool z64 = big(w, e->usize) || big(w, e->csize);
    size_t nlen = strlen(e->name);
    wr32(h, SIG_LOCAL);
    wr16(h + 4, z64 ? 45 : 20);
    wr16(h + 6, name_flags(e->name));
    wr16(h + 8, e->method);
    wr16(h + 10, 0);
    wr16(h + 12, DOS_DATE_1980);
    wr32(h + 14, e->crc);
    wr32(h + 18, z64 ? MARK32 : (uint32_t)e->csize);
    wr32(h + 22, z64 ? MARK32 : (uint32_t)e->usize);
    wr16(h + 26, (uint32_t)nlen);
    wr16(h + 28, z64 ? (uint32_t)sizeof x : 0);
    wr16(x, 1);
    wr16(x + 2, 16);
    wr64(x + 4, e->usize);
    wr64(x + 12, e->csize);
    if (zput(w, h, sizeof h, st) || zput(w, e->name, nlen, st) || (z64 && zput(w, x, sizeof x, st)))
        return st->code;
    return TL_OK;
}

/* A stored member straight from the tensor: its preamble, then its data as
 * it is in memory (no copy of megabytes into fresh pages to write them). */
static tl_code write_stored(zwriter *w, const tl_tensor *t, const unsigned char *pre, size_t pl,
                            zentry *e, tl_status *st)
{
    size_t n = (size_t)t->numel * tl_dtype_size(t->dtype);
    e->usize = e->csize = pl + n;
    e->pre_crc = crc32_of(0, pre, pl);
    e->late = w->late;
    e->crc = w->late ? 0 : (uint32_t)crc32_combine(e->pre_crc, e->data_crc, (z_off_t)n);
    e->off = w->pos;
    e->method = METHOD_STORED;
    if (write_local(w, e, st) || zput(w, pre, pl, st) || zput(w, t->data, n, st))
        return st->code;
    return TL_OK;
}

static tl_code write_member(zwriter *w, const tl_tensor *t, bool compress, zentry *e, tl_status *st)
{
    unsigned char *npy, *data, pre[2048];
    size_t len = 0;
    bool as_is = false;
    if (tl_npy_preamble(t, pre, &len, &as_is, st))
        return st->code;
    if (!compress && as_is)
        return write_stored(w, t, pre, len, e, st);
    if (tl_npy_encode(t, &npy, &len, st))
        return st->code;
    e->usize = e->csize = len;
    e->crc = crc32_of(0, npy, len);
    e->off = w->pos;
    e->method = compress ? METHOD_DEFLATED : METHOD_STORED;
    data = compress ? deflate_member(npy, e, st) : npy;
    tl_code rc = data ? TL_OK : st->code;
    if (!rc)
        rc = write_local(w, e, st);
    if (!rc)
        rc = zput(w, data, (size_t)e->csize, st);
    if (data != npy)
        free(data);
    free(npy);
    return rc;
}

static tl_code write_central(zwriter *w, const zentry *e, tl_status *st)
{
    unsigned char h[CENTRAL_LEN], x[28];
    size_t xl = 4, nlen = strlen(e->name);
    const uint64_t vals[3] = {e->usize, e->csize, e->off};
    for (int i = 0; i < 3; i++)
        if (big(w, vals[i])) {
            wr64(x + xl, vals[i]);
            xl += 8;
        }
    wr16(x, 1);
    wr16(x + 2, (uint32_t)xl - 4);
    bool z64 = xl > 4;
    uint32_t version = z64 ? 45 : 20;
    wr32(h, SIG_CENTRAL);
    wr16(h + 4, 3 << 8 | version); /* made by: Unix */
    wr16(h + 6, version);
    wr16(h + 8, name_flags(e->name));
    wr16(h + 10, e->method);
    wr16(h + 12, 0);
    wr16(h + 14, DOS_DATE_1980);
    wr32(h + 16, e->crc);
    wr32(h + 20, mark32(w, e->csize));
    wr32(h + 24, mark32(w, e->usize));
    wr16(h + 28, (uint32_t)nlen);
    wr16(h + 30, z64 ? (uint32_t)xl : 0);
    wr16(h + 32, 0);
    wr16(h + 34, 0);
    wr16(h + 36, 0);
    wr32(h + 38, 0600u << 16); /* rw------- as Python's zipfile */
    wr32(h + 42, mark32(w, e->off));
    if (zput(w, h, sizeof h, st) || zput(w, e->name, nlen, st) || (z64 && zput(w, x, xl, st)))
        return st->code;
    return TL_OK;
}

static tl_code write_zip64_end(zwriter *w, uint64_t count, uint64_t cd_off, uint64_t cd_size,
                               tl_status *st)
{
    unsigned char r[Z64_EOCD_LEN], l[Z64_LOCATOR_LEN];
    uint64_t at = w->pos;
    wr32(r, SIG_Z64_EOCD);
    wr64(r + 4, Z64_EOCD_LEN - 12);
    wr16(r + 12, 3 << 8 | 45);
    wr16(r + 14, 45);
    wr32(r + 16, 0);
    wr32(r + 20, 0);
    wr64(r + 24, count);
    wr64(r + 32, count);
    wr64(r + 40, cd_size);
    wr64(r + 48, cd_off);
    wr32(l, SIG_Z64_LOCATOR);
    wr32(l + 4, 0);
    wr64(l + 8, at);
    wr32(l + 16, 1);
    if (zput(w, r, sizeof r, st) || zput(w, l, sizeof l, st))
        return st->code;
    return TL_OK;
}

static tl_code write_end(zwriter *w, uint64_t count, uint64_t cd_off, tl_status *st)
{
    unsigned char e[EOCD_LEN];
    uint64_t cd_size = w->pos - cd_off;
    bool z64 = w->force64 || count > MARK16 - 1 || cd_off > ZIP64_LIMIT || cd_size > ZIP64_LIMIT;
    if (z64 && write_zip64_end(w, count, cd_off, cd_size, st))
        return st->code;
    uint32_t n16 = count < MARK16 ? (uint32_t)count : MARK16;
    wr32(e, SIG_EOCD);
    wr16(e + 4, 0);
    wr16(e + 6, 0);
    wr16(e + 8, n16);
    wr16(e + 10, n16);
    wr32(e + 12, cd_size < MARK32 ? (uint32_t)cd_size : MARK32);
    wr32(e + 16, cd_off < MARK32 ? (uint32_t)cd_off : MARK32);
    wr16(e + 20, 0);
    return zput(w, e, sizeof e, st);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static tl_code check_keys(int n, const char *const *keys, tl_status *st)
{
    if (n < 0)
        return tl_fail(st, TL_ERUNTIME, "internal: %d tensors to write", n);
    for (int i = 0; i < n; i++)
        if (strlen(keys[i]) > MARK16 - 4)
            return tl_fail(st, TL_EINPUT, "key too long (%zu bytes)", strlen(keys[i]));
    const char **sorted = tl_malloc((size_t)n, sizeof *sorted, "a key list", st);
    if (!sorted)
        return st->code;
    if (n)
        memcpy(sorted, keys, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    tl_code rc = TL_OK;
    for (int i = 1; i < n && !rc; i++)
        if (!strcmp(sorted[i - 1], sorted[i]))
            rc = tl_fail(st, TL_EINPUT, "duplicate key '%s'", sorted[i]);
    free(sorted);
    return rc;
}

typedef struct crc_job {
    const tl_tensor *const *ts;
    zentry *es;
} crc_job;

static void data_crc(void *ctx, int64_t i)
{
    crc_job *j = ctx;
    const tl_tensor *t = j->ts[i];
    size_t n = t->device.kind == TL_DEV_CPU ? (size_t)t->numel * tl_dtype_size(t->dtype) : 0;
    j->es[i].data_crc = n ? crc32_of(0, t->data, n) : 0;
}

static tl_code write_members(zwriter *w, int n, const char *const *keys, const tl_tensor *const *ts,
                             bool compress, zentry *es, tl_status *st)
{
    for (int i = 0; i < n; i++) {
        size_t k = strlen(keys[i]);
        if (!(es[i].name = tl_malloc(k + 5, 1, "a member name", st)))
            return st->code;
        memcpy(es[i].name, keys[i], k);
        memcpy(es[i].name + k, ".npy", 5);
        if (write_member(w, ts[i], compress, &es[i], st))
            return tl_wrap(st, "member '%s'", keys[i]);
    }
    return TL_OK;
}

/* The members written (item 0) beside the CRCs of their data (item 1),
 * as crc_pipe's two items, with nothing to wait for: the data is all in
 * place already. */
typedef struct write_job {
    zwriter *w;
    int n;
    const char *const *keys;
    const tl_tensor *const *ts;
    zentry *es;
    tl_status *st;
    tl_code rc;
} write_job;

static void write_item(void *ctx, int64_t item)
{
    write_job *j = ctx;
    if (item == 0) {
        j->rc = write_members(j->w, j->n, j->keys, j->ts, false, j->es, j->st);
        return;
    }
    crc_job c = {j->ts, j->es};
    for (int i = 0; i < j->n; i++)
        data_crc(&c, i);
}

/* Where the archive goes to a regular file at a known offset (not a pipe,
 * nor one opened to append, where pwrite would append), the file's
 * offset of its first byte. */
static bool seekable_at(FILE *f, off_t *start)
{
    struct stat sb;
    int fd = fileno(f), fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
    if (fd < 0 || fl < 0 || (fl & O_APPEND) || fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        return false;
    return (*start = ftello(f)) >= 0;
}

static tl_code write_archive(zwriter *w, int n, const char *const *keys, const tl_tensor *const *ts,
                             bool compress, zentry *es, tl_status *st)
{
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (uint64_t)ts[i]->numel * tl_dtype_size(ts[i]->dtype);
    off_t start = 0;
    if (!compress && bytes >= CRC_PIPE_MIN && cpu_nthreads() > 1 && seekable_at(w->f, &start)) {
        /* the data written while its CRCs are computed, and the CRCs then
         * written into the local headers */
        w->late = true;
        write_job j = {w, n, keys, ts, es, st, TL_OK};
        cpu_parallel(2, 2, write_item, &j);
        if (j.rc)
            return j.rc;
        if (flushed(w, st)) /* before the headers are written into */
            return st->code;
        for (int i = 0; i < n; i++) {
            if (!es[i].late)
                continue;
            unsigned char c[4];
            size_t len = (size_t)ts[i]->numel * tl_dtype_size(ts[i]->dtype);
            es[i].crc = (uint32_t)crc32_combine(es[i].pre_crc, es[i].data_crc, (z_off_t)len);
            wr32(c, es[i].crc);
            errno = 0;
            if (pwrite(fileno(w->f), c, 4, start + (off_t)es[i].off + 14) != 4)
                return write_failed(st);
        }
    } else {
        if (!compress) { /* the CRCs of megabytes, a member a thread, before writing in turn */
            crc_job j = {ts, es};
            cpu_parallel(n, bytes >= CRC_PIPE_MIN ? cpu_nthreads() : 1, data_crc, &j);
        }
        if (write_members(w, n, keys, ts, compress, es, st))
            return st->code;
    }
    uint64_t cd_off = w->pos;
    for (int i = 0; i < n; i++)
        if (write_central(w, &es[i], st))
            return st->code;
    if (write_end(w, (uint64_t)n, cd_off, st))
        return st->code;
    return flushed(w, st);
}

tl_code tl_npz_write_ex(FILE *f, int n, const char *const *keys, const tl_tensor *const *ts,
                        bool compress, bool force_zip64, tl_status *st)
{
    if (check_keys(n, keys, st))
        return st->code;
    zentry *es = tl_calloc((size_t)n, sizeof *es, "the archive index", st);
    if (!es)
        return st->code;
    zwriter w = {f, 0, force_zip64, false};
    tl_code rc = write_archive(&w, n, keys, ts, compress, es, st);
    for (int i = 0; i < n; i++)
        free(es[i].name);
    free(es);
    return rc;
}

tl_code tl_npz_write(FILE *f, int n, const char *const *keys, const tl_tensor *const *ts,
                     bool compress, tl_status *st)
{
    return tl_npz_write_ex(f, n, keys, ts, compress, false, st);
}
