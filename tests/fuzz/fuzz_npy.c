/* libFuzzer harness: the .npy reader on bytes in memory. */
#include <stddef.h>
#include <stdint.h>

#include "formats/npy.h"
#include "fuzz_common.h"

int fuzz_npy_one(const uint8_t *data, size_t size);
int fuzz_npy_one(const uint8_t *data, size_t size)
{
    tl_status st = {0};
    tl_tensor *t = tl_npy_read_mem(data, size, &st);
    fuzz_check_tensor(t, &st);
    tl_tensor_unref(t);
    return 0;
}

FUZZ_ENTRY(npy)
