/* libFuzzer harness: the .npz reader on bytes in memory; every member it
 * indexes is then read (CRC, inflation, .npy parsing).  The same bytes
 * are then read as a file (the fuzz build, as make test's, maps every
 * archive, and reads stored members from the file): every member the
 * same tensor, bit for bit, or the same failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats/npz.h"
#include "fuzz_common.h"

/* Member key of the archive z read from a file gives what `want` (from
 * memory, with status `wst`) gave. */
static void same_from_file(tl_npz *f, const char *key, const tl_tensor *want, const tl_status *wst)
{
    tl_status st = {0};
    tl_tensor *t = tl_npz_get(f, key, &st);
    if (!t != !want || (!t && (st.code != wst->code || strcmp(st.msg, wst->msg))))
        FUZZ_FAIL("member '%s' from a file: %s; from memory: %s", key, t ? "read" : st.msg,
                  want ? "read" : wst->msg);
    if (t && (t->dtype != want->dtype || t->ndim != want->ndim ||
              memcmp(t->shape, want->shape, sizeof(int64_t) * (size_t)t->ndim) ||
              memcmp(t->data, want->data, tl_tensor_bytes(t))))
        FUZZ_FAIL("member '%s' from a file differs from memory", key);
    tl_tensor_unref(t);
}

/* The archive of these bytes opened as a file (a memfd); NULL where
 * memfds are missing or it does not open as from memory. */
static tl_npz *open_as_file(const uint8_t *data, size_t size, int *fd)
{
    *fd = memfd_create("fuzz.npz", MFD_CLOEXEC);
    if (*fd < 0)
        return NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", *fd);
    tl_status st = {0};
    if (write(*fd, data, size) != (ssize_t)size)
        return NULL;
    tl_npz *f = tl_npz_open(path, &st);
    if (!f)
        FUZZ_FAIL("opens from memory, not from a file: %s", st.msg);
    return f;
}

int fuzz_npz_one(const uint8_t *data, size_t size);
int fuzz_npz_one(const uint8_t *data, size_t size)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open_mem(data, size, &st);
    if (!z) {
        if (st.code != TL_EINPUT || !st.msg[0])
            FUZZ_FAIL("open failed with code %d, not TL_EINPUT: %s", (int)st.code, st.msg);
        return 0;
    }
    int n = tl_npz_count(z), fd = -1;
    if (n < 0)
        FUZZ_FAIL("negative member count");
    tl_npz *f = open_as_file(data, size, &fd);
    if (f && tl_npz_count(f) != n)
        FUZZ_FAIL("%d members from a file, %d from memory", tl_npz_count(f), n);
    for (int i = 0; i < n; i++) {
        const char *key = tl_npz_key(z, i);
        if (!key || !tl_npz_has(z, key))
            FUZZ_FAIL("member %d: key missing or not found", i);
        (void)strlen(key);
        tl_status_clear(&st);
        tl_tensor *t = tl_npz_get(z, key, &st);
        fuzz_check_tensor(t, &st);
        if (f)
            same_from_file(f, key, t, &st);
        tl_tensor_unref(t);
    }
    tl_npz_close(f);
    if (fd >= 0)
        close(fd);
    const char *absent = "\x01no such key";
    if (!tl_npz_has(z, absent)) {
        tl_status_clear(&st);
        tl_tensor *t = tl_npz_get(z, absent, &st);
        if (t || st.code != TL_EINPUT)
            FUZZ_FAIL("an absent key was not a clean TL_EINPUT");
    }
    tl_npz_close(z);
    return 0;
}

FUZZ_ENTRY(npz)
