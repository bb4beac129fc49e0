#include "pool.h"

#include <stdlib.h>
#include <string.h>

#define MIN_BYTES 512 /* and the alignment of every block's size */

int cu_pool_class(size_t bytes)
{
    if (bytes <= MIN_BYTES)
        return 0;
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e < bytes <= 2^(e+1) */
    size_t step = (size_t)1 << (e - 3);                            /* eighths of 2^e */
    size_t k = (bytes - ((size_t)1 << e) + step - 1) / step;       /* 1..8 */
    int cls = (e - 9) * 8 + (int)k;                                /* 2^9 = MIN_BYTES: class 0 */
    return cls < CU_POOL_CLASSES ? cls : CU_POOL_CLASSES - 1;
}

size_t cu_pool_class_bytes(int cls)
{
    if (cls == 0)
        return MIN_BYTES;
    int e = (cls - 1) / 8 + 9, k = (cls - 1) % 8 + 1;
    return ((size_t)1 << e) + (size_t)k * ((size_t)1 << (e - 3));
}

void cu_pool_init(cu_pool *p, void *(*raw_alloc)(void *, size_t), void (*raw_free)(void *, void *),
                  void *ctx)
{
    memset(p, 0, sizeof *p);
    p->raw_alloc = raw_alloc;
    p->raw_free = raw_free;
    p->ctx = ctx;
}

static size_t slot(const cu_pool *p, const void *ptr)
{
    uint64_t k = (uint64_t)(uintptr_t)ptr;
    k ^= k >> 17;
    k *= 0x9E3779B97F4A7C15u;
    return (size_t)(k >> 11) & (p->cap - 1);
}

static bool grow(cu_pool *p)
{
    size_t cap = p->cap ? 2 * p->cap : 256;
    cu_pool_block **t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    cu_pool_block **old = p->live;
    size_t oldcap = p->cap;
    p->live = t;
    p->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i]) {
            size_t k = slot(p, old[i]->p);
            while (t[k])
                k = (k + 1) & (cap - 1);
            t[k] = old[i];
        }
    free(old);
    return true;
}

/* Removes the live entry at slot k, re-placing the run after it. */
static void unlink_live(cu_pool *p, size_t k)
{
    p->live[k] = NULL;
    p->nlive--;
    for (size_t j = (k + 1) & (p->cap - 1); p->live[j]; j = (j + 1) & (p->cap - 1)) {
        cu_pool_block *b = p->live[j];
        p->live[j] = NULL;
        size_t s = slot(p, b->p);
        while (p->live[s])
            s = (s + 1) & (p->cap - 1);
        p->live[s] = b;
    }
}

void *cu_pool_alloc(cu_pool *p, size_t bytes)
{
    if (2 * (p->nlive + 1) > p->cap && !grow(p))
        return NULL;
    int cls = cu_pool_class(bytes);
    size_t size = cls == CU_POOL_CLASSES - 1 ? (bytes + MIN_BYTES - 1) / MIN_BYTES * MIN_BYTES
                                             : cu_pool_class_bytes(cls);
    cu_pool_block *b = NULL, **pp = &p->free[cls];
    while (*pp && (*pp)->bytes < size) /* the last class holds blocks of any size */
        pp = &(*pp)->next;
    if (*pp) {
        b = *pp;
        *pp = b->next;
        p->cached -= b->bytes;
        p->hits++;
    } else {
        if (!(b = malloc(sizeof *b)))
            return NULL;
        b->bytes = size;
        b->p = p->raw_alloc(p->ctx, size);
        if (!b->p) {
            cu_pool_trim(p);
            b->p = p->raw_alloc(p->ctx, size);
        }
        if (!b->p) {
            free(b);
            return NULL;
        }
        p->raw_allocs++;
    }
    size_t k = slot(p, b->p);
    while (p->live[k])
        k = (k + 1) & (p->cap - 1);
    p->live[k] = b;
    p->nlive++;
    p->in_use += b->bytes;
    if (p->in_use > p->peak)
        p->peak = p->in_use;
    return b->p;
}

void cu_pool_release(cu_pool *p, void *ptr)
{
    if (!ptr || !p->cap)
        return;
    size_t k = slot(p, ptr);
    while (p->live[k] && p->live[k]->p != ptr)
        k = (k + 1) & (p->cap - 1);
    cu_pool_block *b = p->live[k];
    if (!b)
        return;
    unlink_live(p, k);
    p->in_use -= b->bytes;
    int cls = cu_pool_class(b->bytes);
    b->next = p->free[cls];
    p->free[cls] = b;
    p->cached += b->bytes;
}

void cu_pool_trim(cu_pool *p)
{
    for (int c = 0; c < CU_POOL_CLASSES; c++)
        while (p->free[c]) {
            cu_pool_block *b = p->free[c];
            p->free[c] = b->next;
            p->raw_free(p->ctx, b->p);
            free(b);
        }
    p->cached = 0;
}

void cu_pool_destroy(cu_pool *p)
{
    cu_pool_trim(p);
    for (size_t i = 0; i < p->cap; i++)
        if (p->live[i]) {
            p->raw_free(p->ctx, p->live[i]->p);
            free(p->live[i]);
        }
    free(p->live);
    memset(p, 0, sizeof *p);
}
