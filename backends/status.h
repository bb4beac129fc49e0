/* Errors as values.  A tl_status is owned by the caller that declares it;
 * callees fill it once (tl_fail) and callers on the way out prepend where
 * they were (tl_wrap), so a message reads "x.npy: unsupported dtype '<c8'".
 * Nothing below cli/ prints or exits. */
#ifndef TL_STATUS_H
#define TL_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tl_code {
    TL_OK = 0,       /* success */
    TL_EDIFF = 1,    /* a comparison found a difference */
    TL_EINPUT = 2,   /* bad usage or bad input */
    TL_ERUNTIME = 3, /* device, memory, I/O while writing, internal */
} tl_code;

typedef struct tl_status {
    tl_code code;
    char msg[1024];
} tl_status;

/* Sets code and message (printf-style); returns code. */
tl_code tl_fail(tl_status *st, tl_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "CONTEXT: " to the message; returns the code unchanged. */
tl_code tl_wrap(tl_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends to the message (cut at its end); returns the code unchanged. */
tl_code tl_append(tl_status *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tl_status_clear(tl_status *st);

/* malloc/calloc that report "out of memory allocating WHAT (N bytes)" with
 * TL_ERUNTIME; n*size is checked for overflow. */
void *tl_malloc(size_t n, size_t size, const char *what, tl_status *st);
void *tl_calloc(size_t n, size_t size, const char *what, tl_status *st);
char *tl_strdup(const char *s, tl_status *st);

#ifdef __cplusplus
}
#endif

#endif
