/* Choosing a device: "cpu", "cuda", "cuda:N", "gpu" or "auto".  The CUDA
 * backend is a plugin found at run time (plugin.h): where TL_CUDA_PLUGIN
 * says, else tl-cuda.so beside the running program, else in the install's
 * library folder.  Opening a device that cannot be used says why; the
 * caller decides between that error and the CPU. */
#ifndef TL_DEVICE_H
#define TL_DEVICE_H

#include "backend.h"
#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_MAX_DEVICES 16

/* What this build and machine offer (tl devices). */
typedef struct tl_device_list {
    bool plugin_found;
    char plugin_path[512]; /* where it was found, or where it was looked for */
    char why[256];         /* no usable GPU: the reason; "" when there is one */
    int count;
    char name[TL_MAX_DEVICES][24];
    tl_plugin_device dev[TL_MAX_DEVICES];
} tl_device_list;

/* Fills the list; never fails (reasons go into `why`). */
void tl_device_probe(tl_device_list *l);

/* Opens the device a --device value names.  "cpu" gives the CPU record
 * (never closed).  For a GPU: TL_ERUNTIME "no usable GPU: WHY" when none
 * can run here (no plugin, no driver, no device, out of memory at start);
 * TL_EINPUT for a device number the machine does not have or a bad name.
 * "auto" is the GPU when one is usable, else the CPU without an error. */
const tl_backend *tl_device_open(const char *spec, tl_status *st);
/* Closes a record tl_device_open returned (the CPU's: nothing). */
void tl_device_close(const tl_backend *be);

#ifdef __cplusplus
}
#endif

#endif
