/* tl as a library: everything a C program needs to load a graph, a
 * program or an ONNX model, bind tensors, run it on the CPU or a device,
 * pull back cotangents and read and write tensors.  Installed in
 * PREFIX/include/tl; `pkg-config --cflags tl` puts that folder on the
 * include path, so a program writes #include "tl.h" (examples/embed.c).
 *
 * The Result API (exec/exec.h): tl_run gives a tl_result holding the
 * output values and, when recording, the tape; tl_result_pullback (or
 * tl_result_backward, all-ones seeds) consumes the recording and returns
 * a gradient per input; tl_result_close releases an unused recording
 * (harmless twice); tl_result_free frees the result, before its graph.
 * Ownership: each tl_tensor pointer a function returns is one reference
 * the caller drops with tl_tensor_unref; what a tl_result_* accessor
 * returns is borrowed from the result.
 * Errors are values: a function that can fail takes the caller's
 * tl_status, returns NULL or a nonzero tl_code (backends/status.h:
 * TL_EINPUT bad input, TL_ERUNTIME device, memory or I/O) and leaves one
 * line of text in st->msg, starting with the file at fault.  Nothing in
 * the library prints or exits.
 * Threads: reference counts are plain ints, not atomic (a run takes and
 * drops millions of them), so a tensor and a graph are used by one thread
 * at a time: runs on several threads at once each take their own graph and
 * their own input tensors.  Each run uses every core in its kernels. */
#ifndef TL_TL_H
#define TL_TL_H

/* Each header declares its part of the library extern "C" for C++. */
#include "backends/device.h"
#include "exec/check.h"
#include "exec/exec.h"
#include "exec/gradcheck.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"
#include "graph/onnx.h"
#include "graph/program.h"

#endif
