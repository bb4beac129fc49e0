/* The interface between tl and a device plugin: a shared object (the CUDA
 * backend, tl-cuda.so) that tl loads at run time, so that one binary runs
 * on machines with and without a GPU and never links the CUDA libraries
 * itself.  The plugin exports one function, TL_PLUGIN_ENTRY, returning a
 * static table; everything it returns stays the plugin's. */
#ifndef TL_PLUGIN_H
#define TL_PLUGIN_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_PLUGIN_ENTRY "tl_cuda_plugin_v1"

typedef struct tl_plugin_device {
    char model[128];  /* "NVIDIA H200" */
    int64_t memory;   /* bytes of device memory */
    int64_t free;     /* bytes free now */
    int cc_major, cc_minor;
} tl_plugin_device;

typedef struct tl_plugin {
    int abi; /* TL_BACKEND_ABI */
    /* Devices this machine has; 0 with `why` filled in when there are none
     * (no driver, no device...). */
    int (*count)(char *why, size_t len);
    tl_code (*describe)(int index, tl_plugin_device *d, tl_status *st);
    /* A backend record for device `index`, ready to run; TL_ERUNTIME when
     * it cannot start (out of memory, driver error).  Freed by its close. */
    tl_backend *(*open)(int index, tl_status *st);
} tl_plugin;

typedef const tl_plugin *(*tl_plugin_entry)(void);

#ifdef __cplusplus
}
#endif

#endif
