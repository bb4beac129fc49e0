/* What a file's first bytes say it is, before any reader tries it.  The
 * readers that meet a file of another kind (a tensor file named as a
 * graph, a model named .npz, JSON named .onnx) ask here, and each says
 * in its own words what the user gave it. */
#ifndef TL_SNIFF_H
#define TL_SNIFF_H

#include <stddef.h>

typedef enum {
    TL_BYTES_EMPTY,
    TL_BYTES_NPY,  /* "\x93NUMPY" */
    TL_BYTES_NPZ,  /* a zip archive's first record: a member ("PK\3\4"), or the end of an empty one ("PK\5\6") */
    TL_BYTES_JSON, /* '{' after blanks: a JSON graph, or tl's JSON output */
    TL_BYTES_ONNX, /* 0x08: a protobuf's field 1 as a varint, an ONNX model's ir_version; no text starts so */
    TL_BYTES_OTHER,
} tl_bytes_kind;

tl_bytes_kind tl_bytes_kind_of(const void *buf, size_t len);

#endif
