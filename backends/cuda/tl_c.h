/* tl's C headers as the CUDA backend's C++ sees them: with C linkage, so
 * that the plugin's C++ code calls the C library code (status.c, ops.c,
 * tensor.c, the CPU's broadcast plan) built into it.  Plain C includes it
 * like any header. */
#ifndef TL_CUDA_TL_C_H
#define TL_CUDA_TL_C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "backends/backend.h"
#include "backends/cpu/cpu.h"
#include "backends/mprog.h"
#ifdef __cplusplus
}
#endif

#include "backends/hd.h"

#endif
