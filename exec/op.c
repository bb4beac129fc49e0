#define _POSIX_C_SOURCE 200809L
#include "op.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shape.h"
#include "backends/cpu/vmath.h"

struct tl_mirror {
    tl_tensor *host; /* NULL: a free slot */
    tl_tensor *dev;
};

void tl_ctx_init(tl_ctx *cx, const tl_backend *backend)
{
    memset(cx, 0, sizeof *cx);
    cx->backend = backend ? backend : &tl_cpu_backend;
}

bool tl_ctx_on_device(const tl_ctx *cx) { return tl_backend_is_device(cx->backend); }

void tl_ctx_release(tl_ctx *cx)
{
    for (int i = 0; i < cx->capmirrors; i++) {
        tl_tensor_unref(cx->mirrors[i].host);
        tl_tensor_unref(cx->mirrors[i].dev);
    }
    free(cx->mirrors);
    cx->mirrors = NULL;
    cx->nmirrors = cx->capmirrors = 0;
    for (int i = 0; i < cx->nscalars; i++)
        tl_tensor_unref(cx->scalars[i].t);
    cx->nscalars = 0;
}

/* ---------- copies between host and device ---------- */

static tl_tensor *download(tl_ctx *cx, const tl_tensor *t, tl_status *st)
{
    tl_tensor *h = tl_tensor_new_in(cx->budget, t->dtype, t->ndim, t->shape, st);
    if (!h)
        return NULL;
    size_t bytes = tl_tensor_bytes(t);
    if (bytes && t->home->download(t->home, h->data, t->data, bytes, st)) {
        tl_tensor_unref(h);
        return NULL;
    }
    cx->dev.syncs++;
    cx->dev.bytes_down += (int64_t)bytes;
    return h;
}

static tl_tensor *upload(tl_ctx *cx, const tl_tensor *t, tl_status *st)
{
    const tl_backend *be = cx->backend;
    tl_tensor *d = tl_tensor_new_on(cx->budget, be, t->dtype, t->ndim, t->shape, st);
    if (!d)
        return NULL;
    size_t bytes = tl_tensor_bytes(t);
    if (bytes && be->upload(be, d->data, t->data, bytes, st)) {
        tl_tensor_unref(d);
        return NULL;
    }
    cx->dev.bytes_up += (int64_t)bytes;
    return d;
}

tl_tensor *tl_ctx_to_host(tl_ctx *cx, tl_tensor *t, tl_status *st)
{
    return tl_tensor_on_host(t) ? tl_tensor_ref(t) : download(cx, t, st);
}

tl_code tl_ctx_item(tl_ctx *cx, const tl_tensor *t, double *v, tl_status *st)
{
    if (tl_tensor_on_host(t)) {
        *v = tl_tensor_get(t, 0);
        return TL_OK;
    }
    tl_tensor *h = download(cx, t, st);
    if (!h)
        return st->code;
    *v = tl_tensor_get(h, 0);
    tl_tensor_unref(h);
    return TL_OK;
}

static size_t slot_of(const tl_tensor *t, int cap)
{
    uintptr_t k = (uintptr_t)t;
    k ^= k >> 17;
    k *= 0x9E3779B97F4A7C15u;
    return (size_t)(k >> 7) & (size_t)(cap - 1);
}

static tl_code grow_mirrors(tl_ctx *cx, tl_status *st)
{
    int cap = cx->capmirrors ? 2 * cx->capmirrors : 64;
    tl_mirror *m = tl_calloc((size_t)cap, sizeof *m, "device mirrors", st);
    if (!m)
        return st->code;
    for (int i = 0; i < cx->capmirrors; i++) {
        tl_mirror e = cx->mirrors[i];
        if (!e.host)
            continue;
        size_t k = slot_of(e.host, cap);
        while (m[k].host)
            k = (k + 1) & (size_t)(cap - 1);
        m[k] = e;
    }
    free(cx->mirrors);
    cx->mirrors = m;
    cx->capmirrors = cap;
    return TL_OK;
}

/* The device copy of host tensor t, made on first use (a new reference). */
static tl_tensor *mirror(tl_ctx *cx, tl_tensor *t, tl_status *st)
{
    if (2 * (cx->nmirrors + 1) > cx->capmirrors && grow_mirrors(cx, st))
        return NULL;
    size_t k = slot_of(t, cx->capmirrors);
    while (cx->mirrors[k].host && cx->mirrors[k].host != t)
        k = (k + 1) & (size_t)(cx->capmirrors - 1);
    if (cx->mirrors[k].host)
        return tl_tensor_ref(cx->mirrors[k].dev);
    tl_tensor *d = upload(cx, t, st);
    if (!d)
        return NULL;
    cx->mirrors[k] = (tl_mirror){tl_tensor_ref(t), d};
    cx->nmirrors++;
    return tl_tensor_ref(d);
}

tl_tensor *tl_ctx_scalar(tl_ctx *cx, tl_dtype dt, double v, tl_status *st)
{
    for (int i = 0; i < cx->nscalars; i++) {
        tl_ctx_scalar_entry *e = &cx->scalars[i];
        if (e->dtype == dt && !memcmp(&e->value, &v, sizeof v))
            return tl_tensor_ref(e->t);
    }
    tl_tensor *t = tl_tensor_scalar(dt, v, st);
    if (t && tl_ctx_on_device(cx)) {
        tl_tensor *d = upload(cx, t, st);
        tl_tensor_unref(t);
        t = d;
    }
    if (t && cx->nscalars < TL_CTX_SCALARS)
        cx->scalars[cx->nscalars++] = (tl_ctx_scalar_entry){dt, v, tl_tensor_ref(t)};
    return t;
}

tl_code tl_ctx_check_finite(tl_ctx *cx, tl_tensor *t, const char *what, tl_status *st)
{
    if (tl_dtype_is_int(t->dtype))
        return TL_OK;
    tl_tensor *h = tl_ctx_to_host(cx, t, st);
    if (!h)
        return st->code;
    int64_t bad = -1;
    if (h->dtype == TL_F32) {
        const float *p = h->data;
        for (int64_t i = 0; i < h->numel && bad < 0; i++)
            if (!isfinite(p[i]))
                bad = i;
    } else {
        const double *p = h->data;
        for (int64_t i = 0; i < h->numel && bad < 0; i++)
            if (!isfinite(p[i]))
                bad = i;
    }
    char at[TL_MAXDIM * 24];
    double v = bad >= 0 ? tl_tensor_get(h, bad) : 0;
    if (bad >= 0)
        tl_fail(st, TL_ERUNTIME, "%s holds %s at %s", what, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf",
                tl_index_desc(h, bad, at, sizeof at));
    tl_tensor_unref(h);
    return bad >= 0 ? TL_ERUNTIME : TL_OK;
}

/* ---------- the op ---------- */

static void note_fallback(tl_ctx *cx, tl_opcode op, tl_dtype dt, const char *why)
{
    tl_devstats *s = &cx->dev;
    cx->fallbacks++;
    cx->last_why = why ? why : "not supported";
    for (int i = 0; i < s->nkinds; i++)
        if (s->kinds[i].op == op && s->kinds[i].dtype == dt) {
            s->kinds[i].count++;
            return;
        }
    if (s->nkinds < TL_MAX_FALLBACK_KINDS)
        s->kinds[s->nkinds++] = (tl_fallback){op, dt, why ? why : "not supported", 1};
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static tl_code run_kernel(tl_ctx *cx, const tl_backend *be, tl_opcode op, int n,
                          tl_tensor *const *in, const tl_attrs *a, tl_tensor *out, tl_status *st)
{
    bool dev = tl_backend_is_device(be);
    cx->ops++;
    *(dev ? &cx->dev.ops_device : &cx->dev.ops_cpu) += 1;
    if (!cx->profile) {
        tl_code rc = be->run(be, op, n, (const tl_tensor *const *)in, a, out, st);
        return rc ? rc : tl_vmath_check(st); /* (SLEEF unusable: the kernel computed NaN) */
    }
    double t0 = now_ms();
    tl_code rc = be->run(be, op, n, (const tl_tensor *const *)in, a, out, st);
    rc = rc ? rc : tl_vmath_check(st);
    if (!rc && dev) /* a device queues work: wait for it, or the time is the launch's */
        rc = be->sync(be, st);
    tl_opprof *p = &cx->prof[op][cx->phase];
    p->calls++;
    p->device_calls += dev;
    p->ms += now_ms() - t0;
    return rc;
}

/* Runs on the device: host operands are mirrored there first. */
static tl_tensor *on_device(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in,
                            const tl_attrs *a, const tl_shape *sh, tl_status *st)
{
    const tl_backend *be = cx->backend;
    tl_tensor *small[8], **dev = n <= 8 ? small : tl_calloc((size_t)n, sizeof *dev, "operands", st);
    if (!dev)
        return NULL;
    int made = 0;
    for (; made < n; made++)
        if (!(dev[made] = tl_tensor_on_host(in[made]) ? mirror(cx, in[made], st) : tl_tensor_ref(in[made])))
            break;
    tl_tensor *out = made == n ? tl_tensor_new_on(cx->budget, be, sh->dtype, sh->ndim, sh->dims, st) : NULL;
    if (out && run_kernel(cx, be, op, n, dev, a, out, st)) {
        tl_tensor_unref(out);
        out = NULL;
    }
    for (int i = 0; i < made; i++)
        tl_tensor_unref(dev[i]);
    if (dev != small)
        free(dev);
    return out;
}

/* Runs on the CPU at the same dtypes: device operands are read back, and
 * on a device context the result goes up again. */
static tl_tensor *on_cpu(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *a,
                         const tl_shape *sh, tl_status *st)
{
    tl_tensor *small[8], **host = n <= 8 ? small : tl_calloc((size_t)n, sizeof *host, "operands", st);
    if (!host)
        return NULL;
    int made = 0;
    for (; made < n; made++)
        if (!(host[made] = tl_ctx_to_host(cx, in[made], st)))
            break;
    tl_tensor *out = made == n ? tl_tensor_new_in(cx->budget, sh->dtype, sh->ndim, sh->dims, st) : NULL;
    if (out && run_kernel(cx, &tl_cpu_backend, op, n, host, a, out, st)) {
        tl_tensor_unref(out);
        out = NULL;
    }
    for (int i = 0; i < made; i++)
        tl_tensor_unref(host[i]);
    if (host != small)
        free(host);
    if (out && tl_ctx_on_device(cx)) {
        tl_tensor *up = upload(cx, out, st);
        tl_tensor_unref(out);
        out = up;
    }
    return out;
}

/* op's attributes (attrs, or the defaults) with what its shape rule
 * fills in, in *a, and its result's type; *use: the record to run with
 * (a, or attrs as they are where the shape rule reads none: an
 * elementwise op on scalars costs less than copying a record). */
static tl_code result_type(tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs, tl_attrs *a,
                           const tl_attrs **use, tl_shape *sh, tl_status *st)
{
    if (tl_shape_reads_no_attrs(op)) {
        *use = attrs ? attrs : &tl_attrs_default;
        return tl_shape_infer(op, n, (const tl_tensor *const *)in, NULL, sh, st);
    }
    if (attrs)
        *a = *attrs;
    else
        tl_attrs_init(a);
    *use = a;
    return tl_shape_infer(op, n, (const tl_tensor *const *)in, a, sh, st);
}

/* A fresh result is fresh memory, which on a virtual machine is mostly
 * its first-touch faults: a backward rule's last use of a cotangent
 * writes its result there instead. */
tl_tensor *tl_op_over(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs, int k,
                      tl_status *st)
{
    tl_tensor *t = in[k];
    bool can = !tl_backend_is_device(cx->backend) && tl_tensor_on_host(t) && t->refs == 1 && !t->map &&
               !t->base && t->data;
    for (int i = 0; i < n && can; i++)
        can = (i == k || in[i] != t) && in[i]->data;
    tl_attrs a;
    const tl_attrs *use;
    tl_shape sh;
    if (!can)
        return tl_op(cx, op, n, in, attrs, st);
    if (result_type(op, n, in, attrs, &a, &use, &sh, st))
        return NULL;
    if (sh.dtype != t->dtype || sh.ndim != t->ndim || memcmp(sh.dims, t->shape, sizeof(int64_t) * (size_t)t->ndim))
        return tl_op(cx, op, n, in, attrs, st);
    if (run_kernel(cx, &tl_cpu_backend, op, n, in, use, t, st))
        return NULL;
    return tl_tensor_ref(t);
}

tl_tensor *tl_op(tl_ctx *cx, tl_opcode op, int n, tl_tensor *const *in, const tl_attrs *attrs,
                 tl_status *st)
{
    tl_attrs a;
    const tl_attrs *use;
    tl_shape sh;
    if (result_type(op, n, in, attrs, &a, &use, &sh, st))
        return NULL;
    for (int i = 0; i < n; i++)
        if (!in[i]->data) /* a shape kept by the tape, read as if it had values */
            return tl_fail(st, TL_ERUNTIME, "internal: %s was given a shape without data (argument %d)",
                           tl_ops[op].name, i + 1), NULL;
    const tl_backend *be = cx->backend;
    if (!tl_backend_is_device(be) && (op == TL_OP_RESHAPE || op == TL_OP_EXPAND_DIMS || op == TL_OP_SQUEEZE) &&
        tl_tensor_on_host(in[0])) { /* (in[0] only when there is one: draws take no arguments) */
        cx->ops++; /* the same data in another shape: no copy */
        cx->dev.ops_cpu++;
        return tl_tensor_view(in[0], sh.ndim, sh.dims, st);
    }
    if (!tl_backend_is_device(be))
        return on_cpu(cx, op, n, in, use, &sh, st);
    tl_dtype small[8], *dts = n <= 8 ? small : tl_malloc((size_t)n, sizeof *dts, "dtypes", st);
    if (!dts)
        return NULL;
    for (int i = 0; i < n; i++)
        dts[i] = in[i]->dtype;
    const char *why = NULL;
    bool here = be->supports(be, op, n, dts, sh.dtype, &why);
    tl_dtype dt0 = n ? dts[0] : sh.dtype;
    if (dts != small)
        free(dts);
    if (here)
        return on_device(cx, op, n, in, use, &sh, st);
    if (cx->strict) {
        tl_fail(st, TL_ERUNTIME, "%s cannot run %s on %s (%s), and --strict-device forbids the CPU "
                "fallback", be->name, tl_ops[op].name, tl_dtype_name(dt0), why ? why : "not supported");
        return NULL;
    }
    note_fallback(cx, op, dt0, why);
    return on_cpu(cx, op, n, in, use, &sh, st);
}
