#include "formats/sniff.h"

#include <string.h>

tl_bytes_kind tl_bytes_kind_of(const void *buf, size_t len)
{
    const unsigned char *b = buf;
    if (!len)
        return TL_BYTES_EMPTY;
    if (len >= 6 && !memcmp(b, "\x93NUMPY", 6))
        return TL_BYTES_NPY;
    /* Two letters alone are not enough: tl's text output of an output
     * named "PKad/x" begins with them. */
    if (len >= 4 && (!memcmp(b, "PK\3\4", 4) || !memcmp(b, "PK\5\6", 4)))
        return TL_BYTES_NPZ;
    if (b[0] == 0x08)
        return TL_BYTES_ONNX;
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
        i++;
    return i < len && b[i] == '{' ? TL_BYTES_JSON : TL_BYTES_OTHER;
}
