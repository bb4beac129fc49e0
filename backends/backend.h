/* The backend interface: one record per device.  A backend first answers
 * whether it supports an op with given dtypes; only then is it asked to
 * run it.  `run` receives inputs already in its memory, attributes already
 * normalised by the shape rules (exec/shape.c) and an allocated output of
 * the right dtype and shape; it owns nothing it is given.
 *
 * The CPU computes in host memory and leaves the memory hooks NULL.  A
 * device keeps tensor data in memory of its own: `alloc`/`release` manage
 * it, `upload`/`download` copy between it and the host, `sync` waits for
 * queued work.  Records for devices come from tl_device_open (device.h);
 * the record and its `state` belong to the device until tl_device_close. */
#ifndef TL_BACKEND_H
#define TL_BACKEND_H

#include "ops.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The interface's version: a plugin built against another one is refused. */
#define TL_BACKEND_ABI 1

typedef struct tl_backend tl_backend;

struct tl_backend {
    int abi;          /* TL_BACKEND_ABI */
    const char *name; /* "cpu", "cuda:0" */
    tl_devkind kind;
    int index;        /* N of cuda:N */
    void *state;      /* the backend's own (device handle, pools...) */
    /* Whether op runs here with inputs of dtypes in[0..n-1] giving out;
     * when not, *why (may be NULL) says so in a few words for -v. */
    bool (*supports)(const tl_backend *be, tl_opcode op, int n, const tl_dtype *in, tl_dtype out,
                     const char **why);
    tl_code (*run)(const tl_backend *be, tl_opcode op, int n, const tl_tensor *const *in,
                   const tl_attrs *a, tl_tensor *out, tl_status *st);
    /* device memory (NULL for the CPU) */
    void *(*alloc)(const tl_backend *be, size_t bytes, tl_status *st);
    void (*release)(const tl_backend *be, void *p);
    tl_code (*upload)(const tl_backend *be, void *dst, const void *src, size_t bytes, tl_status *st);
    tl_code (*download)(const tl_backend *be, void *dst, const void *src, size_t bytes,
                        tl_status *st);
    tl_code (*sync)(const tl_backend *be, tl_status *st);
    /* Frees the record and its state (devices only). */
    void (*close)(tl_backend *be);
};

extern const tl_backend tl_cpu_backend;

static inline bool tl_backend_is_device(const tl_backend *be) { return be && be->alloc; }

#ifdef __cplusplus
}
#endif

#endif
