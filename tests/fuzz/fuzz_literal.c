/* libFuzzer harness: command-line tensor literals (tl_literal_parse) on a
 * NUL-terminated copy of the input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/text.h"
#include "fuzz_common.h"

int fuzz_literal_one(const uint8_t *data, size_t size);
int fuzz_literal_one(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tl_status st = {0};
    tl_tensor *t = tl_literal_parse(s, &st);
    fuzz_check_tensor(t, &st);
    tl_tensor_unref(t);
    free(s);
    return 0;
}

FUZZ_ENTRY(literal)
