#include "status.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tl_code tl_fail(tl_status *st, tl_code code, const char *fmt, ...)
{
    va_list ap;
    st->code = code;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return code;
}

tl_code tl_append(tl_status *st, const char *fmt, ...)
{
    size_t k = strlen(st->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg + k, sizeof st->msg - k, fmt, ap);
    va_end(ap);
    return st->code;
}

tl_code tl_wrap(tl_status *st, const char *fmt, ...)
{
    char prefix[512], old[sizeof st->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, st->msg, sizeof old);
    size_t k = strlen(prefix);
    if (k > sizeof st->msg - 3)
        k = sizeof st->msg - 3;
    memcpy(st->msg, prefix, k);
    memcpy(st->msg + k, ": ", 2);
    size_t rest = sizeof st->msg - k - 3, n = strlen(old);
    if (n > rest)
        n = rest;
    memcpy(st->msg + k + 2, old, n);
    st->msg[k + 2 + n] = '\0';
    return st->code;
}

void tl_status_clear(tl_status *st)
{
    st->code = TL_OK;
    st->msg[0] = '\0';
}

static void *oom(size_t n, size_t size, const char *what, tl_status *st)
{
    if (size && n > SIZE_MAX / size)
        tl_fail(st, TL_ERUNTIME, "out of memory allocating %s (size overflows)", what);
    else
        tl_fail(st, TL_ERUNTIME, "out of memory allocating %s (%zu bytes)", what, n * size);
    return NULL;
}

void *tl_malloc(size_t n, size_t size, const char *what, tl_status *st)
{
    if (size && n > SIZE_MAX / size)
        return oom(n, size, what, st);
    size_t bytes = n * size;
    void *p = malloc(bytes ? bytes : 1);
    return p ? p : oom(n, size, what, st);
}

void *tl_calloc(size_t n, size_t size, const char *what, tl_status *st)
{
    if (size && n > SIZE_MAX / size)
        return oom(n, size, what, st);
    void *p = calloc(n ? n : 1, size ? size : 1);
    return p ? p : oom(n, size, what, st);
}

char *tl_strdup(const char *s, tl_status *st)
{
    size_t n = strlen(s) + 1;
    char *p = tl_malloc(n, 1, "a string", st);
    if (p)
        memcpy(p, s, n);
    return p;
}
