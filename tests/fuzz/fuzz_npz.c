/* libFuzzer harness: the .npz reader on bytes in memory; every member it
 * indexes is then read (CRC, inflation, .npy parsing). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/npz.h"
#include "fuzz_common.h"

int fuzz_npz_one(const uint8_t *data, size_t size);
int fuzz_npz_one(const uint8_t *data, size_t size)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open_mem(data, size, &st);
    if (!z) {
        if (st.code != TL_EINPUT || !st.msg[0])
            FUZZ_FAIL("open failed with code %d, not TL_EINPUT: %s", (int)st.code, st.msg);
        return 0;
    }
    int n = tl_npz_count(z);
    if (n < 0)
        FUZZ_FAIL("negative member count");
    for (int i = 0; i < n; i++) {
        const char *key = tl_npz_key(z, i);
        if (!key || !tl_npz_has(z, key))
            FUZZ_FAIL("member %d: key missing or not found", i);
        (void)strlen(key);
        tl_status_clear(&st);
        tl_tensor *t = tl_npz_get(z, key, &st);
        fuzz_check_tensor(t, &st);
        tl_tensor_unref(t);
    }
    const char *absent = "\x01no such key";
    if (!tl_npz_has(z, absent)) {
        tl_status_clear(&st);
        tl_tensor *t = tl_npz_get(z, absent, &st);
        if (t || st.code != TL_EINPUT)
            FUZZ_FAIL("an absent key was not a clean TL_EINPUT");
    }
    tl_npz_close(z);
    return 0;
}

FUZZ_ENTRY(npz)
