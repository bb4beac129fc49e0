/* Shared by the harnesses: a parser given bytes must either succeed or
 * fail with TL_EINPUT and a message.  Anything else (a crash, a leak,
 * undefined behaviour, TL_ERUNTIME on a bounded input) is a finding.
 * Each harness defines fuzz_NAME_one(data, size) and, unless FUZZ_NO_MAIN
 * is defined (the regression suite), LLVMFuzzerTestOneInput calling it. */
#ifndef TL_FUZZ_COMMON_H
#define TL_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backends/status.h"
#include "backends/tensor.h"

/* How a harness reports a finding: abort() under libFuzzer; the
 * regression suite (tests/test_fuzz_regressions.c) defines it as a
 * Criterion assertion before including the harness. */
#ifndef FUZZ_FAIL
#define FUZZ_FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), abort())
#endif

static inline void fuzz_check_tensor(const tl_tensor *t, const tl_status *st)
{
    if (!t) {
        if (st->code != TL_EINPUT || !st->msg[0])
            FUZZ_FAIL("failed with code %d, not TL_EINPUT: %s", (int)st->code, st->msg);
        return;
    }
    if (t->refs != 1 || t->ndim < 0 || t->ndim > TL_MAXDIM || t->numel < 0 || !t->data)
        FUZZ_FAIL("malformed tensor (refs %d, ndim %d, numel %lld)", t->refs, t->ndim,
                  (long long)t->numel);
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            FUZZ_FAIL("negative size in shape");
        n *= t->shape[i];
    }
    if (n != t->numel)
        FUZZ_FAIL("numel %lld does not match the shape", (long long)t->numel);
    /* Touch every element, so a short buffer shows up under ASan. */
    volatile double acc = 0;
    for (int64_t i = 0; i < t->numel; i++)
        acc += tl_tensor_get(t, i);
    (void)acc;
}

/* The libFuzzer entry point of harness NAME, which calls fuzz_NAME_one;
 * left out under FUZZ_NO_MAIN, where the regression suite calls it. */
#ifndef FUZZ_NO_MAIN
#define FUZZ_ENTRY(NAME)                                                           \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)                   \
    {                                                                              \
        return fuzz_##NAME##_one(data, size);                                      \
    }
#else
#define FUZZ_ENTRY(NAME)
#endif

#endif
