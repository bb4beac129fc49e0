/* tl as a library: everything a C program needs to load a graph, bind
 * tensors, run it on the CPU or a device, pull back cotangents and read
 * and write tensors.  Installed as <tl/tl.h>... with `pkg-config --cflags
 * tl` on the include path, include it as "tl.h".
 *
 * The Result API (exec/exec.h): tl_run gives a tl_result holding the
 * output values and, when recording, the tape; tl_result_pullback (or
 * tl_result_backward, all-ones seeds) consumes the recording and returns
 * a gradient per input; tl_result_close releases an unused recording
 * (harmless twice); tl_result_free frees the result, before its graph.
 * Errors are tl_status values: a code (exec/../backends/status.h) and one
 * line of text. */
#ifndef TL_TL_H
#define TL_TL_H

#include "backends/device.h"
#include "exec/check.h"
#include "exec/exec.h"
#include "exec/gradcheck.h"
#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/text.h"

#endif
