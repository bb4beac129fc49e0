/* Result sets: the named tensors that tl writes (outputs by name,
 * gradients as "grad/NAME"), read back from a file or viewed in memory.
 * A set read from a file owns itself, its names and one reference to each
 * tensor, all released by tl_result_set_free.  A view owns nothing: it
 * points at the caller's arrays, which must outlive it, and is never
 * freed.  Messages never name the file: callers wrap with it.
 *
 * What a file holds, told by its content (not its name):
 * - an .npz: one tensor per member, named by its key ("y", "grad/x");
 * - a .npy: one unnamed tensor (see `anonymous`);
 * - tl's json output format, {"device": ..., "outputs": {NAME: T, ...},
 *   "grads": {NAME: T, ...}} with T = {"dtype", "shape", "data"}: outputs
 *   by name, gradients as "grad/NAME".  At least one of "outputs" and
 *   "grads" must be there; other top-level keys (such as "device") and
 *   other keys of T are ignored.  "data" is a flat row-major array of
 *   numbers or the strings "nan", "inf", "-inf" (floats only).  Numbers are
 *   read from their digits, not through a double: an i64 keeps all 64
 *   bits and an f32 is rounded once, so tl's json output reads back to the
 *   same bits.  A number beyond its dtype's range is an error. */
#ifndef TL_FORMATS_RESULTS_H
#define TL_FORMATS_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/tensor.h"

typedef struct tl_result_set {
    int n;
    const char *const *names;    /* n distinct names */
    const tl_tensor *const *ts;  /* n host tensors */
    /* Read from a .npy: the one tensor has no name of its own.  names[0]
     * is then the file's base name (or "-" for standard input), used in
     * reports, and the tensor pairs with the only tensor of the other set
     * whatever that one is called (see tl_compare). */
    bool anonymous;
    bool owned; /* read from a file: tl_result_set_free releases it */
} tl_result_set;

/* A view of n named tensors, e.g. the results of a run: nothing is copied
 * or referenced.  Names must be distinct (tl_compare checks). */
static inline tl_result_set tl_result_set_view(int n, const char *const *names,
                                               const tl_tensor *const *ts)
{
    return (tl_result_set){n, names, ts, false, false};
}

/* Reads a result file, or standard input when path is "-".  Errors are
 * TL_EINPUT (unreadable or malformed file, duplicate names) or
 * TL_ERUNTIME (out of memory). */
tl_result_set *tl_result_set_read(const char *path, tl_status *st);
/* The same from bytes in memory; name is what a .npy's tensor is called. */
tl_result_set *tl_result_set_read_mem(const void *buf, size_t len, const char *name,
                                      tl_status *st);
/* The indices 0..n-1 ordered by name, in a malloc'd array the caller
 * frees; a name given twice is TL_EINPUT. */
int *tl_result_set_order(const tl_result_set *s, tl_status *st);
/* Index of the tensor called name, by binary search in order (from
 * tl_result_set_order); -1 when there is none. */
int tl_result_set_lookup(const tl_result_set *s, const int *order, const char *name);
/* Releases a set read from a file; NULL and views are ignored. */
void tl_result_set_free(tl_result_set *s);

/* Writes a name as a JSON string: quotes, backslashes and control
 * characters escaped, bytes that are not UTF-8 replaced by U+FFFD (a key
 * of an .npz may hold any bytes). */
void tl_json_write_string(FILE *f, const char *s);

#endif
