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
 *   by name, gradients as "grad/NAME" (and "jvps", "hvps", as jvp and
 *   hvp write them, as "jvp/NAME", "hvp/NAME").  At least one of these
 *   groups must be there; other top-level keys (such as "device") and
 *   other keys of T are ignored.  "data" is a flat row-major array of
 *   numbers or the strings "nan", "inf", "-inf" (floats only).  Numbers are
 *   read from their digits, not through a double: an i64 keeps all 64
 *   bits and an f32 is rounded once, so tl's json output reads back to the
 *   same bits.  A number beyond its dtype's range is an error;
 * - tl's text output: for each tensor a header line "NAME: f32[2,3]" and
 *   its values as a literal (formats/text.h) of that shape on the lines
 *   up to the next header, which reads back to the same bits as json
 *   does; an elided tensor ("...", printed without --full) is an error. */
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

/* A result file opened for its tensors one by one, as inputs are taken
 * from it: an .npz is indexed and its members read on demand (tl_npz),
 * any other result file (json, text, .npy) is read whole into a set.  It
 * owns what it read; tl_result_file_get returns a new tensor of the
 * caller's, never shared with the file or another get.  Messages never
 * name the file. */
typedef struct tl_result_file tl_result_file;
/* The file at path, or the bytes in memory (copied); its kind told by its
 * content, as tl_result_set_read tells it (a path ending in .npz is read
 * as an .npz). */
tl_result_file *tl_result_file_open(const char *path, tl_status *st);
tl_result_file *tl_result_file_open_mem(const void *buf, size_t len, tl_status *st);
/* A .npy: one tensor without a name (count 1, key NULL, has() false). */
bool tl_result_file_anonymous(const tl_result_file *f);
/* What the file is, for messages: "a .npy", "an .npz", "a result file". */
const char *tl_result_file_kind(const tl_result_file *f);
int tl_result_file_count(const tl_result_file *f);
const char *tl_result_file_key(const tl_result_file *f, int i);
bool tl_result_file_has(const tl_result_file *f, const char *key);
/* Bytes the tensor key takes, as the file declares it (for planning); 0
 * when there is none. */
uint64_t tl_result_file_size(const tl_result_file *f, const char *key);
/* Whether reading key is work for a thread (inflating an archive's
 * deflated member) rather than a copy. */
bool tl_result_file_deflated(const tl_result_file *f, const char *key);
/* The keys, quoted and joined by ", " into buf (cut short with "..."). */
char *tl_result_file_keys(const tl_result_file *f, char *buf, size_t len);
/* The tensor key (NULL: the one tensor of a .npy); a missing key is
 * TL_EINPUT naming the keys there are. */
tl_tensor *tl_result_file_get(const tl_result_file *f, const char *key, tl_status *st);
void tl_result_file_close(tl_result_file *f); /* NULL ok */

/* Writes a name as a JSON string: quotes, backslashes and control
 * characters escaped, bytes that are not UTF-8 replaced by U+FFFD (a key
 * of an .npz may hold any bytes). */
void tl_json_write_string(FILE *f, const char *s);

#endif
