/* NumPy .npz archives (ZIP, stored or deflated members, ZIP64).  A tl_npz
 * owns a private copy of the archive bytes and its key strings, which live
 * until tl_npz_close; tl_npz_get returns a new tensor reference owned by the
 * caller.  Messages never name the file; member errors name the key. */
#ifndef TL_NPZ_H
#define TL_NPZ_H

#include <stdbool.h>
#include <stdio.h>

#include "backends/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_npz tl_npz; /* an opened archive; owns its buffer */

/* Reads and indexes the whole archive: every offset and size in it is
 * checked here; member data (CRC, inflation, .npy) is checked by get. */
tl_npz *tl_npz_open(const char *path, tl_status *st);
tl_npz *tl_npz_open_mem(const void *buf, size_t len, tl_status *st); /* copies buf */
int tl_npz_count(const tl_npz *z);
const char *tl_npz_key(const tl_npz *z, int i); /* member name without ".npy" */
bool tl_npz_has(const tl_npz *z, const char *key);
/* The size of the member's .npy once decompressed, as the archive declares
 * it; 0 when there is no such member.  For planning work, not trusted. */
uint64_t tl_npz_size(const tl_npz *z, const char *key);
/* Whether member key is deflated: reading it is inflating it, work for a
 * thread, where a stored member of a file is one read. */
bool tl_npz_deflated(const tl_npz *z, const char *key);
tl_tensor *tl_npz_get(const tl_npz *z, const char *key, tl_status *st); /* new reference */
void tl_npz_close(tl_npz *z);                                           /* NULL ok */

/* Writes n host tensors under the given keys (".npy" appended to member
 * names), deflated when compress is set, stored otherwise; flushes f.
 * Offsets count from f's position at the call.  Duplicate keys are
 * TL_EINPUT; a failed write is TL_ERUNTIME. */
tl_code tl_npz_write(FILE *f, int n, const char *const *keys, const tl_tensor *const *ts,
                     bool compress, tl_status *st);
/* As tl_npz_write; force_zip64 writes ZIP64 extra fields in every header
 * and the ZIP64 end records even for small archives (tests use it). */
tl_code tl_npz_write_ex(FILE *f, int n, const char *const *keys, const tl_tensor *const *ts,
                        bool compress, bool force_zip64, tl_status *st);

#ifdef __cplusplus
}
#endif

#endif
