/* The operation interface: every forward op and every backward rule is a
 * call of tl_op.  It checks the call against the shape rules, picks the
 * context's backend (or the CPU where a device lacks the op or dtype: the
 * same dtype, never a lower precision, with the copies around it),
 * allocates the result and runs the kernel.  The caller owns the returned
 * reference.
 *
 * With a device backend every result lives on the device: host tensors
 * handed to an op (inputs, constants, seeds) are mirrored there once per
 * context, and a result computed by a CPU fallback is uploaded again.  The
 * context owns its mirrors and cached scalars until tl_ctx_release. */
#ifndef TL_OP_H
#define TL_OP_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One kind of fallback: an (op, dtype) the device lacks, and how often. */
typedef struct tl_fallback {
    tl_opcode op;
    tl_dtype dtype;
    const char *why; /* static text from the backend */
    int64_t count;
} tl_fallback;

#define TL_MAX_FALLBACK_KINDS 32

typedef struct tl_devstats {
    int64_t ops_device, ops_cpu; /* op calls run on the device, on the CPU */
    int64_t syncs;               /* reads back to the host that wait for the device */
    int64_t bytes_up, bytes_down;
    int nkinds;
    tl_fallback kinds[TL_MAX_FALLBACK_KINDS];
} tl_devstats;

typedef struct tl_mirror tl_mirror;

/* Time spent in one op, in one phase (0 forward, 1 backward). */
typedef struct tl_opprof {
    int64_t calls, device_calls; /* of them, run on the device */
    double ms;
} tl_opprof;

#define TL_CTX_SCALARS 64

typedef struct tl_ctx_scalar_entry {
    tl_dtype dtype;
    double value; /* compared bit for bit */
    tl_tensor *t; /* in the context's memory */
} tl_ctx_scalar_entry;

typedef struct tl_ctx {
    const tl_backend *backend; /* the requested device's (the CPU when none) */
    bool strict;               /* a fallback to the CPU is an error */
    int64_t ops;               /* op calls made */
    int64_t fallbacks;         /* of them, run on the CPU instead of the device */
    tl_budget *budget;         /* results are charged here (NULL: unlimited) */
    tl_devstats dev;
    bool profile;       /* time every call (a device is synchronised after each) */
    bool check_finite;  /* values and gradients must be finite */
    const char *last_why; /* the reason of the latest fallback */
    int phase;          /* 0 forward, 1 backward: where profile times go */
    tl_opprof prof[TL_OP_COUNT][2];
    tl_mirror *mirrors; /* host tensor -> its device copy, open addressing */
    int nmirrors, capmirrors;
    int nscalars;
    tl_ctx_scalar_entry scalars[TL_CTX_SCALARS];
} tl_ctx;

void tl_ctx_init(tl_ctx *cx, const tl_backend *backend);
/* Drops the mirrors and cached scalars. */
void tl_ctx_release(tl_ctx *cx);
bool tl_ctx_on_device(const tl_ctx *cx);

/* attrs may be NULL (defaults). */
tl_tensor *tl_op(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs,
                 tl_status *st);
/* tl_op, its result written over in[k] where that is safe: in[k] is a host
 * tensor of the result's dtype and shape with its own data and no other
 * reference than the caller's (which the caller drops after), and the run
 * is on the CPU; else a new tensor as tl_op's.  Only for kernels that read
 * each element of in[k] before they write the same element of the result
 * (elementwise, or a row read whole before it is written). */
tl_tensor *tl_op_over(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs, int k,
                      tl_status *st);

/* t in host memory (a new reference): t itself, or a downloaded copy. */
tl_tensor *tl_ctx_to_host(tl_ctx *cx, tl_tensor *t, tl_status *st);
/* The value of a one-element tensor, read back when it lives on a device
 * (a host sync). */
tl_code tl_ctx_item(tl_ctx *cx, const tl_tensor *t, double *v, tl_status *st);
/* TL_ERUNTIME "WHAT holds nan at [1,2]" when t (read back from a device
 * if need be) has a NaN or an infinity; index tensors always pass. */
tl_code tl_ctx_check_finite(tl_ctx *cx, tl_tensor *t, const char *what, tl_status *st);
/* A 0-d constant of dtype dt in the context's memory, made once (new
 * reference). */
tl_tensor *tl_ctx_scalar(tl_ctx *cx, tl_dtype dt, double v, tl_status *st);

#ifdef __cplusplus
}
#endif

#endif
