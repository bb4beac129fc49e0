/* Dense, contiguous, row-major tensors.  A tensor is reference counted:
 * whoever holds a pointer owns one reference and drops it with
 * tl_tensor_unref.  The header is always host memory; the data lives on
 * `device`: in host memory (home NULL), or in the memory of the device
 * backend `home`, which allocated it and frees it.  Only the backend that
 * owns device data may touch it; the host reads it by a download. */
#ifndef TL_TENSOR_H
#define TL_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_MAXDIM 16 /* NumPy allows 32; 16 keeps tensors and tape entries small */

/* f32 and f64 are values; i32 and i64 are index tensors: data that shape
 * ops move and index arguments read, never differentiated and never given
 * to arithmetic. */
typedef enum tl_dtype { TL_F32 = 0, TL_F64 = 1, TL_I32 = 2, TL_I64 = 3 } tl_dtype;
#define TL_NDTYPES 4

typedef enum tl_devkind { TL_DEV_CPU = 0, TL_DEV_CUDA = 1 } tl_devkind;

typedef struct tl_device {
    tl_devkind kind;
    int index;
} tl_device;

/* A memory budget shared by the tensors of one run (and its tape): every
 * tensor made in it is charged on creation and credited when freed.  It is
 * reference counted by its owner and by each tensor charged to it, so
 * tensors may outlive the run that made them. */
typedef struct tl_budget {
    int refs;
    int64_t limit; /* bytes; 0: unlimited */
    int64_t live, peak;
} tl_budget;

/* "7.3 TiB": bytes for a message, in powers of 1024. */
const char *tl_bytes_text(int64_t bytes, char *buf, size_t len);
tl_budget *tl_budget_new(int64_t limit, tl_status *st);
tl_budget *tl_budget_ref(tl_budget *b);
void tl_budget_unref(tl_budget *b);
/* Charges bytes for `what`; TL_ERUNTIME "memory limit ..." when the limit
 * would be passed.  NULL budget: always fine. */
tl_code tl_budget_charge(tl_budget *b, int64_t bytes, const char *what, tl_status *st);
void tl_budget_credit(tl_budget *b, int64_t bytes);

struct tl_backend;

/* The shape comes last: a small host tensor's header ends after
 * shape[ndim - 1], its data right behind (a scalar costs 96 bytes, not
 * 232: a long recorded iterate holds millions of them).  So a header is
 * never copied as a whole struct: tl_tensor_copy_header copies what a
 * tensor has. */
typedef struct tl_tensor {
    int refs;
    tl_dtype dtype;
    tl_budget *budget; /* charged for data bytes; NULL: none */
    const struct tl_backend *home; /* the device holding the data; NULL: host */
    tl_device device;
    int ndim;
    int64_t numel;
    void *data; /* numel * tl_dtype_size(dtype) bytes, at least 1 */
    /* host data inside a private mapping of a file (tl_tensor_map), which
     * the last unref unmaps; NULL: the data follows the header */
    void *map;
    size_t map_len;
    /* a view: the data is base's (reshaped), which it holds a reference
     * to; NULL: its own */
    struct tl_tensor *base;
    int64_t shape[TL_MAXDIM]; /* [ndim] of them exist (see above) */
} tl_tensor;

/* Copies t's header (its ndim sizes, not TL_MAXDIM) over *dst, a whole
 * tl_tensor. */
void tl_tensor_copy_header(tl_tensor *dst, const tl_tensor *t);

size_t tl_dtype_size(tl_dtype dt);
const char *tl_dtype_name(tl_dtype dt); /* "f32", "f64", "i32", "i64" */
/* Parses "f32", "f64", "i32", "i64" (also "float32", "float64", "int32",
 * "int64"); returns false otherwise. */
bool tl_dtype_parse(const char *s, tl_dtype *dt);
static inline bool tl_dtype_is_int(tl_dtype dt) { return dt == TL_I32 || dt == TL_I64; }

/* Product of a shape with overflow and negativity checks; the product of
 * the sizes must also fit in bytes of f64 (2^60 elements). */
tl_code tl_shape_numel(int ndim, const int64_t *shape, int64_t *numel, tl_status *st);
/* Writes "f32[2,3]" into buf. */
char *tl_tensor_desc(const tl_tensor *t, char *buf, size_t len);
char *tl_shape_desc(tl_dtype dt, int ndim, const int64_t *shape, char *buf, size_t len);
bool tl_same_shape(const tl_tensor *a, const tl_tensor *b);
/* Writes "[1,2]": where element j (row-major) sits in t's shape. */
char *tl_index_desc(const tl_tensor *t, int64_t j, char *buf, size_t len);

/* Puts host tensor t, its data its own and on no budget yet, on budget b,
 * which was charged `charged` bytes for it: from now b holds t's
 * footprint, credited when t is freed.  False (nothing done) otherwise. */
bool tl_tensor_onto_budget(tl_tensor *t, tl_budget *b, int64_t charged);

/* New host tensor with uninitialised data (refs = 1). */
tl_tensor *tl_tensor_new(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st);
/* The same, charged to a budget (NULL: none). */
tl_tensor *tl_tensor_new_in(tl_budget *b, tl_dtype dt, int ndim, const int64_t *shape,
                            tl_status *st);
/* A tensor whose data lives on the device backend `be` (NULL or the CPU:
 * host memory, as tl_tensor_new_in). */
tl_tensor *tl_tensor_new_on(tl_budget *b, const struct tl_backend *be, tl_dtype dt, int ndim,
                            const int64_t *shape, tl_status *st);
static inline bool tl_tensor_on_host(const tl_tensor *t) { return !t->home; }
/* The same host data in another shape (as many elements): a header that
 * holds a reference to t.  Tensors never change after they are made, so a
 * view is as good as a copy. */
tl_tensor *tl_tensor_view(tl_tensor *t, int ndim, const int64_t *shape, tl_status *st);
/* A host tensor over `map` (a private mapping of map_len bytes, which the
 * tensor takes over): its data at byte `offset`, which the caller has
 * checked holds the whole tensor.  NULL (st set, the mapping unmapped)
 * when the header cannot be had. */
tl_tensor *tl_tensor_map(tl_dtype dt, int ndim, const int64_t *shape, void *map, size_t map_len,
                         size_t offset, tl_status *st);
/* Bytes of data. */
static inline size_t tl_tensor_bytes(const tl_tensor *t)
{
    return (size_t)t->numel * (t->dtype == TL_F32 || t->dtype == TL_I32 ? 4 : 8);
}
/* A header with t's dtype, shape and device but no data (data NULL):
 * what keeps a shape alive without the memory behind it. */
tl_tensor *tl_tensor_stub(const tl_tensor *t, tl_status *st);
/* New host tensor filled with zeros. */
tl_tensor *tl_tensor_zeros(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st);
tl_tensor *tl_tensor_scalar(tl_dtype dt, double v, tl_status *st);
/* A new host f64 tensor holding the values of t (a host tensor, f32 or
 * f64: each value exactly, since every float is a double). */
tl_tensor *tl_tensor_f64(const tl_tensor *t, tl_status *st);
tl_tensor *tl_tensor_ref(tl_tensor *t);
void tl_tensor_unref(tl_tensor *t);
/* Frees the blocks of large host tensors kept for reuse (tensor.c keeps
 * up to 8 freed blocks, 1 GiB in all, for the next tensors of their size). */
void tl_tensor_release_cache(void);
/* The bytes of the freed blocks kept for reuse (for tests). */
size_t tl_tensor_cached_bytes(void);
/* size bytes (the block rounded up to 2 MiB) aligned to 2 MiB, the pages of the size mapped,
 * in huge pages where this machine maps those faster (tensor.c measures
 * it once a process); freed with free().  NULL: out of memory.  For
 * memory a long run fills piece by piece (the tape, scalars' slabs). */
void *tl_huge_block(size_t size);
/* A host tensor whose data is `block`, a block from tl_huge_block of
 * the tensor's bytes (2 MiB and more, else NULL with st set): the tensor
 * takes it over, as if it had made it (freed, or kept for reuse, with it).
 * On failure the block stays the caller's. */
tl_tensor *tl_tensor_adopt_huge(tl_dtype dt, int ndim, const int64_t *shape, void *block, tl_status *st);
/* Whether this process has found huge pages the cheaper way to fresh
 * memory (false until it has measured). */
bool tl_huge_pages_chosen(void);
/* Element i as double (host tensors only; an i64 beyond 2^53 rounds). */
double tl_tensor_get(const tl_tensor *t, int64_t i);
/* Stores v converted to the tensor's dtype (integers: v must be integral
 * and in range; callers check). */
void tl_tensor_set(tl_tensor *t, int64_t i, double v);
/* Element i of an index tensor, exactly. */
int64_t tl_tensor_get_int(const tl_tensor *t, int64_t i);

#ifdef __cplusplus
}
#endif

#endif
