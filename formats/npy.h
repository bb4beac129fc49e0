/* NumPy .npy files.  Readers return a new host tensor holding one reference
 * that the caller drops with tl_tensor_unref; tl_npy_encode and tl_slurp_*
 * return malloc'd buffers that the caller frees; FILE handles stay the
 * caller's to close.  Messages never name the file: callers wrap with it. */
#ifndef TL_NPY_H
#define TL_NPY_H

#include <stdio.h>

#include "backends/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses a complete .npy file (versions 1.0, 2.0, 3.0; f32, f64, i32, i64, either
 * byte order, C or Fortran order) held in memory. */
tl_tensor *tl_npy_read_mem(const void *buf, size_t len, tl_status *st);
/* The same .npy, its first len bytes at buf and all of it in the file fd
 * from offset off: the header parsed from buf, the data of an array in C
 * order and native byte order read from the file straight into the
 * tensor (pread), its bytes as they are in the file.  NULL with *data_at
 * 0 where the header does not parse or the array is of another kind (for
 * tl_npy_read_mem to report or read; st untouched); NULL with *data_at
 * set where memory or the read failed (st says which); else *data_at is
 * where the data starts in buf.  The caller checks what it read.  With
 * `progress`, the data is read in pieces of TL_NPY_PIECE bytes, and
 * progress(ctx, t, done) is called once the tensor is made (done 0) and
 * after each piece (the first `done` bytes of t->data in place), so that
 * another thread can work on them while the rest is read. */
typedef void (*tl_npy_progress)(void *ctx, const tl_tensor *t, size_t done);
#define TL_NPY_PIECE ((size_t)4 << 20)
tl_tensor *tl_npy_read_at(const void *buf, size_t len, int fd, uint64_t off, size_t *data_at,
                          tl_npy_progress progress, void *ctx, tl_status *st);
/* "cannot open: No such file or directory" style errors, TL_EINPUT. */
tl_tensor *tl_npy_read_file(const char *path, tl_status *st);
/* The dtype and shape of the .npy file at path from its header alone (the
 * data's size is checked against the file's, the data is not read). */
tl_code tl_npy_peek_file(const char *path, tl_dtype *dt, int *ndim, int64_t *shape, tl_status *st);
/* Reads all of f (e.g. stdin), then parses it. */
tl_tensor *tl_npy_read_stream(FILE *f, tl_status *st);

/* Encodes a host tensor as a complete .npy file (version 1.0 when the
 * header fits, little-endian, data 64-byte aligned as NumPy writes it) in a
 * malloc'd buffer owned by the caller. */
tl_code tl_npy_encode(const tl_tensor *t, unsigned char **buf, size_t *len, tl_status *st);
/* The start of that encoding alone (magic, version, header; at most 2048
 * bytes, into pre), and whether t's data follows it as it is in memory
 * (a little-endian host): then a writer needs no copy of the data. */
tl_code tl_npy_preamble(const tl_tensor *t, unsigned char *pre, size_t *len, bool *as_is, tl_status *st);
/* Writes the encoding of t to f and flushes it; a failed write (ENOSPC...)
 * is TL_ERUNTIME. */
tl_code tl_npy_write(FILE *f, const tl_tensor *t, tl_status *st);

/* The most memory one thing read may take (a file read whole, an
 * archive member inflated, a tensor a file declares), checked before it
 * is allocated: a file that declares 10 GB, or a stream that never ends,
 * is refused (TL_ERUNTIME, "memory limit: ...") rather than read into
 * memory until the machine runs out.  `given`: the limit is the user's
 * (--max-memory), not the default (a share of the machine's memory: the
 * message says which).  0: no limit. */
void tl_read_limit_set(int64_t bytes, bool given);
/* Or the default, looked up by `limit` when a read first comes near it
 * (until tl_read_limit_set gives the user's). */
void tl_read_limit_by_default(int64_t (*limit)(void));
/* TL_OK where `bytes` for `what` fit the limit. */
tl_code tl_read_fits(uint64_t bytes, const char *what, tl_status *st);
/* tl_tensor_new for a tensor a file declares, within the limit. */
tl_tensor *tl_read_tensor_new(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st);

/* Reads all of f, or of the file at path, into a malloc'd buffer (*buf is
 * never NULL on success, even for an empty file), within the read limit.
 * A stream (not a regular file) of binary data that is neither .npy
 * (\x93NUMPY) nor a zip archive (PK) is refused at its first bytes (a NUL
 * among them), so that /dev/zero or /dev/urandom given for a file fails at
 * once.  Errors are TL_EINPUT. */
tl_code tl_slurp_stream(FILE *f, unsigned char **buf, size_t *len, tl_status *st);
tl_code tl_slurp_path(const char *path, unsigned char **buf, size_t *len, tl_status *st);

/* Whether a relative path never climbs above its starting folder (no
 * leading "/", never more ".." than folders before them): where file
 * constants and external data may point. */
bool tl_path_inside_folder(const char *path);

#ifdef __cplusplus
}
#endif

#endif
