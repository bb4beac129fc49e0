/* ONNX model files: the protobuf read with protobuf-c (the code generated
 * at build time from Debian's onnx.proto) and the tensors it holds turned
 * into host tensors.  Nothing here knows what the nodes mean: the
 * translation into a recipe is graph/onnx.c.
 *
 * Ownership: a tl_onnx_file owns the unpacked model (tl_onnx_close frees
 * it); tl_onnx_tensor returns a new tensor holding one reference.
 * Messages never name the model file: callers wrap with it. */
#ifndef TL_FORMATS_ONNX_H
#define TL_FORMATS_ONNX_H

#include "backends/tensor.h"
#include "onnx.pb-c.h"

typedef struct tl_onnx_file {
    Onnx__ModelProto *model; /* model->graph is never NULL */
    char *dir;               /* the model's folder ("" for the current one) */
    bool allow_outside;      /* external data may lie outside dir */
    struct tl_onnx_pre *pre; /* weights read straight into their tensors, for tl_onnx_tensor to take */
    size_t npre;
} tl_onnx_file;

/* Reads and unpacks a model.  A file that is not a well-formed ModelProto
 * with a graph is TL_EINPUT. */
tl_onnx_file *tl_onnx_read(const char *path, bool allow_outside, tl_status *st);
/* The same from bytes in memory; path anchors external data. */
tl_onnx_file *tl_onnx_read_mem(const void *data, size_t len, const char *path, bool allow_outside,
                               tl_status *st);
void tl_onnx_close(tl_onnx_file *f);

/* ONNX element types (TensorProto.DataType) tl reads. */
enum {
    TL_ONNX_FLOAT = 1, TL_ONNX_UINT8 = 2, TL_ONNX_INT8 = 3, TL_ONNX_UINT16 = 4, TL_ONNX_INT16 = 5,
    TL_ONNX_INT32 = 6, TL_ONNX_INT64 = 7, TL_ONNX_STRING = 8, TL_ONNX_BOOL = 9, TL_ONNX_FLOAT16 = 10,
    TL_ONNX_DOUBLE = 11, TL_ONNX_UINT32 = 12, TL_ONNX_UINT64 = 13, TL_ONNX_BFLOAT16 = 16,
};
/* "float", "int64", ... for messages. */
const char *tl_onnx_type_name(int elem_type);

/* The tensor a TensorProto holds: float and double as f32 and f64, int32
 * as i32, int64 as i64, and bool and the small integer types as i64
 * (their values exactly); raw or typed fields, or external data read from
 * the file it names (relative to the model's folder and confined to it).
 * The bytes of raw_data are released once copied, so a model's weights
 * are in memory once: read each tensor once.  Data that disagrees with the dims, a type tl does
 * not compute in (float16, bfloat16, strings...) is TL_EINPUT naming the
 * tensor. */
tl_tensor *tl_onnx_tensor(const tl_onnx_file *f, Onnx__TensorProto *t, tl_status *st);

/* A TensorProto file's bytes (ONNX's test data): the tensor, and its ONNX
 * element type in *elem_type (may be NULL). */
tl_tensor *tl_onnx_tensor_read_mem(const void *data, size_t len, int *elem_type, tl_status *st);

#endif
