/* Finding and opening devices.  The plugin is loaded with dlopen and kept
 * loaded for the life of the process (a device record points into it). */
#define _GNU_SOURCE
#include "device.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TL_PLUGIN_DIR
#define TL_PLUGIN_DIR "/usr/local/lib/tl"
#endif
#define PLUGIN_NAME "tl-cuda.so"

/* The folder of the running program ("" when unknown). */
static void exe_dir(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        slash[1] = '\0';
    else
        buf[0] = '\0';
}

/* Loads the plugin; NULL with why filled in. */
static const tl_plugin *load_plugin(char *path, size_t plen, char *why, size_t wlen, bool *found)
{
    const char *env = getenv("TL_CUDA_PLUGIN");
    char dir[512];
    *found = false;
    exe_dir(dir, sizeof dir);
    if (env && env[0])
        snprintf(path, plen, "%s", env);
    else
        snprintf(path, plen, "%s%s", dir, PLUGIN_NAME);
    if (!(env && env[0]) && access(path, F_OK))
        snprintf(path, plen, "%s/%s", TL_PLUGIN_DIR, PLUGIN_NAME);
    if (access(path, F_OK)) {
        if (env && env[0])
            snprintf(why, wlen, "no CUDA plugin at %.180s (TL_CUDA_PLUGIN)", env);
        else
            snprintf(why, wlen, "no CUDA plugin (no %s in %.150s or %s: built without nvcc?)",
                     PLUGIN_NAME, dir[0] ? dir : "the program's folder", TL_PLUGIN_DIR);
        return NULL;
    }
    *found = true;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, wlen, "the CUDA plugin %s cannot be loaded: %s", path, e ? e : "?");
        return NULL;
    }
    tl_plugin_entry entry;
    *(void **)&entry = dlsym(h, TL_PLUGIN_ENTRY);
    const tl_plugin *p = entry ? entry() : NULL;
    if (!p || p->abi != TL_BACKEND_ABI) {
        snprintf(why, wlen, "%s is not a tl %d plugin", path, TL_BACKEND_ABI);
        return NULL;
    }
    return p;
}

void tl_device_probe(tl_device_list *l)
{
    memset(l, 0, sizeof *l);
    const tl_plugin *p = load_plugin(l->plugin_path, sizeof l->plugin_path, l->why, sizeof l->why,
                                     &l->plugin_found);
    if (!p)
        return;
    int n = p->count(l->why, sizeof l->why);
    for (int i = 0; i < n && i < TL_MAX_DEVICES; i++) {
        tl_status st = {0};
        snprintf(l->name[l->count], sizeof l->name[0], "cuda:%d", i);
        if (p->describe(i, &l->dev[l->count], &st))
            snprintf(l->dev[l->count].model, sizeof l->dev[0].model, "(%.120s)", st.msg);
        l->count++;
    }
    if (n > 0)
        l->why[0] = '\0';
}

/* "cuda", "gpu" -> 0; "cuda:N" -> N; -1 for a bad name. */
static int device_index(const char *spec)
{
    if (!strcmp(spec, "cuda") || !strcmp(spec, "gpu") || !strcmp(spec, "auto"))
        return 0;
    if (strncmp(spec, "cuda:", 5) || !spec[5])
        return -1;
    char *end;
    long n = strtol(spec + 5, &end, 10);
    return *end || n < 0 || n > 1 << 20 ? -1 : (int)n;
}

const tl_backend *tl_device_open(const char *spec, tl_status *st)
{
    if (!strcmp(spec, "cpu"))
        return &tl_cpu_backend;
    int index = device_index(spec);
    if (index < 0)
        return tl_fail(st, TL_EINPUT, "unknown device '%.40s' (cpu, cuda, cuda:N, gpu, auto)", spec),
               NULL;
    char path[512], why[256] = "";
    bool found;
    const tl_plugin *p = load_plugin(path, sizeof path, why, sizeof why, &found);
    int n = p ? p->count(why, sizeof why) : 0;
    if (n <= 0) {
        if (!strcmp(spec, "auto"))
            return &tl_cpu_backend;
        return tl_fail(st, TL_ERUNTIME, "no usable GPU: %s", why[0] ? why : "no CUDA device"), NULL;
    }
    if (index >= n) {
        char have[32] = "cuda:0";
        if (n > 1)
            snprintf(have, sizeof have, "cuda:0 to cuda:%d", n - 1);
        return tl_fail(st, TL_EINPUT, "no device %s: this machine has %s", spec, have), NULL;
    }
    tl_backend *be = p->open(index, st);
    if (!be) {
        if (!strcmp(spec, "auto")) {
            tl_status_clear(st);
            return &tl_cpu_backend;
        }
        return tl_wrap(st, "no usable GPU: cuda:%d", index), NULL;
    }
    return be;
}

void tl_device_close(const tl_backend *be)
{
    if (tl_backend_is_device(be) && be->close)
        be->close((tl_backend *)be);
}
