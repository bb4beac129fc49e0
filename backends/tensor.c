#define _DEFAULT_SOURCE
#define _ISOC11_SOURCE
#include "tensor.h"

#include "backend.h"
#include "cpu/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/mman.h>

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

size_t tl_dtype_size(tl_dtype dt) { return dt == TL_F32 || dt == TL_I32 ? 4 : 8; }

static const char *const dtype_names[TL_NDTYPES][2] = {
    [TL_F32] = {"f32", "float32"},
    [TL_F64] = {"f64", "float64"},
    [TL_I32] = {"i32", "int32"},
    [TL_I64] = {"i64", "int64"},
};

const char *tl_dtype_name(tl_dtype dt) { return dtype_names[dt][0]; }

bool tl_dtype_parse(const char *s, tl_dtype *dt)
{
    for (int d = 0; d < TL_NDTYPES; d++)
        if (!strcmp(s, dtype_names[d][0]) || !strcmp(s, dtype_names[d][1])) {
            *dt = (tl_dtype)d;
            return true;
        }
    return false;
}

tl_code tl_shape_numel(int ndim, const int64_t *shape, int64_t *numel, tl_status *st)
{
    const int64_t limit = (int64_t)1 << 60;
    int64_t n = 1;
    if (ndim < 0 || ndim > TL_MAXDIM)
        return tl_fail(st, TL_EINPUT, "%d dimensions (at most %d)", ndim, TL_MAXDIM);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return tl_fail(st, TL_EINPUT, "negative size %lld", (long long)shape[i]);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            n = 0;
            break;
        }
        if (n > limit / shape[i])
            return tl_fail(st, TL_EINPUT, "shape too large (more than 2^60 elements)");
        n *= shape[i];
    }
    *numel = n;
    return TL_OK;
}

char *tl_shape_desc(tl_dtype dt, int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "%s[", tl_dtype_name(dt));
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}

char *tl_tensor_desc(const tl_tensor *t, char *buf, size_t len)
{
    return tl_shape_desc(t->dtype, t->ndim, t->shape, buf, len);
}

char *tl_index_desc(const tl_tensor *t, int64_t j, char *buf, size_t len)
{
    int64_t idx[TL_MAXDIM];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? j % t->shape[d] : 0;
        j = t->shape[d] ? j / t->shape[d] : 0;
    }
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ",%lld" : "%lld", (long long)idx[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}

bool tl_same_shape(const tl_tensor *a, const tl_tensor *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* Host tensors are one allocation: the header, then the data; large data
 * starts at a 64-byte boundary (whole cache lines for the vectorised
 * kernels), small data right after the header (scalars of a long iterate
 * stay small).  From TL_HUGE_BYTES the data is a block of whole huge
 * pages of its own and the header is malloc's (block_size). */
#define TL_DATA_OFFSET ((sizeof(tl_tensor) + 63) & ~(size_t)63)
/* a small tensor's data: after its ndim sizes, at a 16-byte boundary */
#define TL_SMALL_OFFSET(ndim) ((offsetof(tl_tensor, shape) + 8 * (size_t)(ndim) + 15) & ~(size_t)15)
#define TL_SMALL_BYTES 256
#define TL_HUGE_BYTES ((size_t)2 << 20)
/* from MID_MIN (a block's size) up to one huge page, blocks are whole
 * units of MID_UNIT, in slabs of huge pages where those are chosen (mid_take) */
#define MID_MIN ((size_t)128 << 10)
#define MID_UNIT ((size_t)64 << 10)
#define MID_UNITS 32 /* TL_HUGE_BYTES / MID_UNIT */

tl_budget *tl_budget_new(int64_t limit, tl_status *st)
{
    tl_budget *b = tl_calloc(1, sizeof *b, "a memory budget", st);
    if (b) {
        b->refs = 1;
        b->limit = limit;
    }
    return b;
}

/* Reference counts (of budgets and tensors) are plain ints, not atomic: a
 * run takes and drops millions of them, and atomic ones cost the scalar
 * recurrence's hvp 40% (0.26 s against 0.37).  So a tensor, and a graph
 * (its constants), is used by one thread at a time (tl.h). */
tl_budget *tl_budget_ref(tl_budget *b)
{
    if (b)
        b->refs++;
    return b;
}

void tl_budget_unref(tl_budget *b)
{
    if (b && --b->refs == 0)
        free(b);
}

const char *tl_bytes_text(int64_t bytes, char *buf, size_t len)
{
    const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

tl_code tl_budget_charge(tl_budget *b, int64_t bytes, const char *what, tl_status *st)
{
    if (!b)
        return TL_OK;
    if (b->limit && (bytes > b->limit || b->live > b->limit - bytes)) {
        if (!what)
            what = "a tensor";
        char need[32], used[32], lim[32];
        return tl_fail(st, TL_ERUNTIME, "memory limit: %s needs %s with %s in use (--max-memory %s)",
                       what, tl_bytes_text(bytes, need, sizeof need), tl_bytes_text(b->live, used, sizeof used),
                       tl_bytes_text(b->limit, lim, sizeof lim));
    }
    b->live += bytes;
    if (b->live > b->peak)
        b->peak = b->live;
    return TL_OK;
}

void tl_budget_credit(tl_budget *b, int64_t bytes)
{
    if (b)
        b->live -= bytes;
}

tl_tensor *tl_tensor_new(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st)
{
    return tl_tensor_new_in(NULL, dt, ndim, shape, st);
}

/* What a tensor of `bytes` data costs: header, data and alignment padding
 * (what a budget is charged, so the limit bounds the real footprint). */
static int64_t footprint(size_t bytes, int ndim)
{
    if (bytes > ((size_t)1 << 62))
        return INT64_MAX; /* more than any budget: refused, never wrapped */
    if (bytes < TL_SMALL_BYTES)
        return (int64_t)(TL_SMALL_OFFSET(ndim) + bytes + 16); /* + malloc's own header */
    if (bytes >= TL_HUGE_BYTES) /* whole huge pages, the header apart */
        return (int64_t)(((bytes + TL_HUGE_BYTES - 1) & ~(TL_HUGE_BYTES - 1)) + sizeof(tl_tensor) + 16);
    size_t b = (TL_DATA_OFFSET + bytes + 63) & ~(size_t)63;
    if (b >= MID_MIN && b <= TL_HUGE_BYTES) /* whole units, wherever the block is */
        b = (b + MID_UNIT - 1) & ~(MID_UNIT - 1);
    return (int64_t)b;
}

/* Freed blocks of large host tensors, kept for the next tensor of the same
 * size: an eager run makes many tensors of one size in turn, and each fresh
 * block would be faulted in and zeroed by the kernel page by page again
 * (most of an elementwise op's time on a virtual machine).  At most
 * POOL_SLOTS blocks and POOL_BYTES in all; beyond that a block is freed.
 * Under a memory limit the kept blocks count as in use: a block is kept
 * only where the limit has room for it beside the live tensors, and a
 * tensor the limit has no room for empties the pool first (the pool held
 * up to 1 GiB past --max-memory, until the scaling audit). */
#define POOL_SLOTS 8
#define POOL_MIN ((size_t)1 << 20)
#define PREFAULT_MIN ((size_t)64 << 10) /* 16 pages: below, the touches are few */
#define POOL_BYTES ((size_t)1 << 30)
static struct {
    pthread_mutex_t lock;
    int n;
    size_t bytes;
    void *block[POOL_SLOTS];
    size_t size[POOL_SLOTS];
    bool huge[POOL_SLOTS]; /* data alone, aligned to a huge page */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *pool_take(size_t size, bool huge)
{
    void *p = NULL;
    if (size < POOL_MIN)
        return NULL;
    pthread_mutex_lock(&pool.lock);
    for (int i = pool.n - 1; i >= 0; i--) /* the most recently freed first: warm in cache */
        if (pool.size[i] == size && pool.huge[i] == huge) {
            p = pool.block[i];
            pool.bytes -= size;
            pool.n--;
            memmove(&pool.block[i], &pool.block[i + 1], sizeof(void *) * (size_t)(pool.n - i));
            memmove(&pool.size[i], &pool.size[i + 1], sizeof(size_t) * (size_t)(pool.n - i));
            memmove(&pool.huge[i], &pool.huge[i + 1], sizeof(bool) * (size_t)(pool.n - i));
            break;
        }
    pthread_mutex_unlock(&pool.lock);
    return p;
}

/* Blocks of TINY_BYTES (a 0-d tensor: its header and up to 16 bytes of
 * data) come from a free list of each thread, cut from slabs that live
 * as long as the process: a long recorded iterate makes and frees
 * millions of scalars, and malloc's bins cost ten times the list's
 * instructions a pair.  Under AddressSanitizer or valgrind they are
 * malloc's, so those still see every use after free. */
#define TINY_BYTES 96
#define TINY_SLAB ((size_t)64 << 10)
/* gcc says AddressSanitizer with __SANITIZE_ADDRESS__, clang (the fuzz
 * harnesses) with __has_feature */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(TL_ASAN)
#define TINY_OFF() true
#elif defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define TINY_OFF() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef TINY_OFF
#define TINY_OFF() false
#endif

static _Thread_local void *tiny_free;          /* a block's first word: the next */
static _Thread_local char *tiny_next, *tiny_end; /* the rest of this thread's slab */
static struct {
    pthread_mutex_t lock;
    void **slab; /* every slab, so they stay reachable */
    size_t n, cap;
} slabs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fresh_huge_block(void *p, size_t size, size_t used);

/* A thread's first slabs are malloc's; a long recording's are blocks of
 * huge pages (tl_huge_block): 64 fresh pages a 64 KiB slab were most of
 * the time of the 100k-step recurrence's hvp on the Zen 5 VM. */
#define TINY_SMALL_SLABS 16
#define TINY_BIG_SLAB ((size_t)4 << 20)
static _Thread_local int tiny_slabs; /* slabs this thread took */

static void *new_slab(size_t *size)
{
    *size = tiny_slabs < TINY_SMALL_SLABS ? TINY_SLAB : TINY_BIG_SLAB;
    void *s = *size == TINY_SLAB ? malloc(TINY_SLAB) : tl_huge_block(TINY_BIG_SLAB);
    if (!s)
        return NULL;
    tiny_slabs++;
    pthread_mutex_lock(&slabs.lock);
    if (slabs.n == slabs.cap) {
        size_t cap = slabs.cap ? 2 * slabs.cap : 64;
        void **a = realloc(slabs.slab, sizeof *a * cap);
        if (a) {
            slabs.slab = a;
            slabs.cap = cap;
        }
    }
    bool kept = slabs.n < slabs.cap;
    if (kept)
        slabs.slab[slabs.n++] = s;
    pthread_mutex_unlock(&slabs.lock);
    if (!kept) {
        free(s);
        return NULL;
    }
    return s;
}

static void *tiny_take(void)
{
    if (TINY_OFF())
        return malloc(TINY_BYTES);
    void *p = tiny_free;
    if (p) {
        tiny_free = *(void **)p;
        return p;
    }
    if (tiny_end - tiny_next < TINY_BYTES) {
        size_t size;
        char *s = new_slab(&size);
        if (!s)
            return NULL;
        tiny_next = s;
        tiny_end = s + size;
    }
    p = tiny_next;
    tiny_next += TINY_BYTES;
    if (tiny_end - tiny_next >= 5 * TINY_BYTES) /* written soon: on its way (cold memory) */
        __builtin_prefetch(tiny_next + 4 * TINY_BYTES, 1);
    return p;
}

static void tiny_give(void *p)
{
    if (TINY_OFF()) {
        free(p);
        return;
    }
    *(void **)p = tiny_free;
    tiny_free = p;
}

/* room: what the freeing tensor's memory limit leaves beside its live
 * tensors (SIZE_MAX: no limit). */
static void pool_give(void *p, size_t size, bool huge, size_t room)
{
    if (size <= TINY_BYTES) {
        tiny_give(p);
        return;
    }
    if (size >= POOL_MIN) {
        pthread_mutex_lock(&pool.lock);
        bool kept = pool.n < POOL_SLOTS && pool.bytes + size <= POOL_BYTES && pool.bytes + size <= room;
        if (kept) {
            pool.block[pool.n] = p;
            pool.huge[pool.n] = huge;
            pool.size[pool.n++] = size;
            pool.bytes += size;
        }
        pthread_mutex_unlock(&pool.lock);
        if (kept)
            return;
    }
    free(p);
}

static void mid_release(void);

size_t tl_tensor_cached_bytes(void)
{
    pthread_mutex_lock(&pool.lock);
    size_t n = pool.bytes;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

void tl_tensor_release_cache(void)
{
    mid_release();
    pthread_mutex_lock(&pool.lock);
    for (int i = 0; i < pool.n; i++)
        free(pool.block[i]);
    pool.n = 0;
    pool.bytes = 0;
    pthread_mutex_unlock(&pool.lock);
}

/* Maps the pages of a fresh block's [p, p + size) (its header and data)
 * in one call, before their first writes.  Where each trap into the
 * guest kernel is dear, this saves most of a first touch: on the Zen 5 VM
 * (Linux 6.18, two busy cores) writing 64 MiB of fresh pages cost 37-40 us
 * a page faulted in one by one, 20-29 us a page populated first (the
 * populate itself 2-3 us; the rest is the host mapping the page on the
 * first write).  On the Zen 3 VM both cost the same 1.3 us a page (the
 * page there, not the trap), so nothing is lost.  Only whole pages inside
 * the range; a kernel without the advice (before 5.14) refuses it, and the
 * pages fault in as before.
 *
 * From POPULATE_SPLIT bytes the range is populated by the CPU's worker
 * threads at once, in pieces of POPULATE_PIECE (whole huge pages where
 * the range is in them): what a fresh page costs is mostly the host
 * backing it, and the host backs pages for two vCPUs at once.  On the
 * Zen 5 VM 64 MiB of huge pages that the host had taken back (the guest
 * idle 20 s after another process freed them) took 84-102 ms on one
 * thread and 42-48 ms on two; pages it still held, 3.6 against 4.3 ms.
 * The pages' contents are zero either way: no result changes. */
#define POPULATE_SPLIT ((size_t)1 << 20)
/* The worker threads are backends/cpu/threads.c's, where the program has
 * them: the CUDA plugin builds this file without them (weak references,
 * null there), and populates on the calling thread. */
#pragma weak cpu_parallel
#pragma weak cpu_nthreads
#define POPULATE_PIECE ((size_t)2 << 20)
#define POPULATE_SMALL_PIECE ((size_t)256 << 10)

typedef struct populate_job {
    uintptr_t lo, hi;
    size_t piece;
    atomic_bool refused;
} populate_job;

static void populate_piece(void *ctx, int64_t i)
{
#ifdef MADV_POPULATE_WRITE
    populate_job *j = ctx;
    uintptr_t a = j->lo + (uintptr_t)i * j->piece, b = a + j->piece < j->hi ? a + j->piece : j->hi;
    if (madvise((void *)a, b - a, MADV_POPULATE_WRITE)) {
        atomic_store(&j->refused, true);
        return;
    }
    /* Each page then written once from user mode, its byte written back
     * as read (a fresh block's header may stand in its first page; no
     * other thread writes the block before the populate returns).  Where
     * the hypervisor shadows the guest's page tables (the Zen 5 VM runs
     * under PVM), a page the guest kernel has just mapped still traps
     * into the host at its first access from user mode: 64 MiB in 4 KiB
     * pages populated in 11 ms, then took 64 ms more at the first memset
     * (3.9 us a page; 0.4 ms in huge pages).  The trap is paid once for
     * the process, whichever thread pays it, so the workers pay it here,
     * side by side (40 ms on two threads against 71 on one), and the
     * choice between huge and small pages below weighs it; elsewhere the
     * loop costs a store a page. */
    for (volatile char *q = (volatile char *)a; (uintptr_t)q < b; q += 4096)
        *q = *q;
#else
    (void)ctx, (void)i;
#endif
}

/* [lo, hi) populated, page aligned, in pieces of `piece` on the workers
 * from POPULATE_SPLIT; 0, or -1 where the kernel refused the advice. */
static int populate(uintptr_t lo, uintptr_t hi, size_t piece)
{
#ifdef MADV_POPULATE_WRITE
    if (hi <= lo)
        return 0;
    populate_job j = {.lo = lo, .hi = hi, .piece = hi - lo};
    bool workers = cpu_parallel && cpu_nthreads;
    if (workers && hi - lo >= POPULATE_SPLIT && cpu_nthreads() > 1)
        j.piece = piece;
    atomic_init(&j.refused, false);
    int64_t n = (int64_t)((hi - lo + j.piece - 1) / j.piece);
    if (workers)
        cpu_parallel(n, cpu_nthreads(), populate_piece, &j);
    else
        populate_piece(&j, 0);
    return atomic_load(&j.refused) ? -1 : 0;
#else
    (void)lo, (void)hi, (void)piece;
    return -1;
#endif
}

static void prefault_block(void *p, size_t size)
{
    uintptr_t page = 4096, lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + size) & ~(page - 1);
    if (size >= PREFAULT_MIN && hi > lo)
        (void)populate(lo, hi, (lo & (TL_HUGE_BYTES - 1)) == 0 && tl_huge_pages_chosen() ? POPULATE_PIECE
                                                                                        : POPULATE_SMALL_PIECE);
}

/* Huge pages for fresh blocks of 2 MiB and more, where they are the cheaper
 * way in: measured in each process, on its first fresh blocks of a whole
 * huge page or more.  Each sample times two ways in, on one thread each:
 * a scratch map of SMALL_SAMPLE bytes in 4 KiB pages, populated, touched
 * and unmapped, and the block's first huge page (the block madvised),
 * populated and touched; the block's other pages follow on every thread.
 * Machines differ by a factor of ten either way.  On the Zen 5 VM (Linux
 * 6.18, transparent huge pages on madvise) 64 MiB cost 75 ms in 4 KiB
 * pages (11 populating, 64 at the first touches) and 3-85 ms in huge
 * pages.  On the Zen 3 VM, where the kernel defragments on such a fault
 * (defrag=madvise, Debian's default), a huge page cost four times its 512
 * small ones (512 MiB in 0.9-1.1 s against 0.17-0.21 s), so huge pages
 * were never asked for there; a fixed choice loses on one machine or the
 * other, a measured one on neither.  The sample of small pages is kept
 * off the block: a block's first 2 MiB measured in small pages (as tl
 * did before) stayed in them, 2.4 ms more a sample on the Zen 5 VM than
 * a huge page.  The choice never changes a bit of any result; a system
 * without the advice (or with THP off) times two equal ways and either
 * choice is right. */
#define HUGE_TRY_MIN TL_HUGE_BYTES
#define SMALL_SAMPLE ((size_t)256 << 10)
static _Atomic int huge_choice; /* 0 not yet measured, 1 huge pages, -1 small, 2 measuring */
/* The first HUGE_SAMPLES such blocks are measured, and the cheaper way by
 * the cheapest page of each way seen so far is the choice for the blocks
 * between them and after them: a page the VM's host must map first costs
 * many times one it has mapped, either way, and a single sample
 * sometimes caught a huge page of the first kind against small pages of
 * the second (8 us against 0.5 us a 4 KiB page). */
#define HUGE_SAMPLES 4
/* Once huge pages are the choice, each fresh block's first huge page is
 * timed too, and the choice turns to small pages for good when it cost
 * more than HUGE_SLOW times the cheapest small page: what a huge page
 * costs is not the same all through a process.  On the Sapphire Rapids VM
 * (Firecracker, Linux 6.18, DAMON reclaiming idle memory, THP defrag on
 * madvise) a 2 MiB huge page cost 0.25 ms at best and 5 ms at times, often
 * within one process (the host backing it anew, or the kernel compacting
 * memory to make it); its 512 small pages, 0.44 ms either way.
 * A tl grad of the MLP benchmark, each run 2 s after the last, took 60 to
 * 142 ms in huge pages (median 87) and 67 to 90 in small ones (71). */
#define HUGE_SLOW 2.0
static _Atomic int huge_samples;  /* taken; written by the measuring thread, or ended where huge pages turn dear */
static double min_small, min_huge; /* us a 4 KiB page */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void prefault_block(void *p, size_t size);

/* What a fresh 4 KiB page costs in small pages, in us: a scratch map of
 * SMALL_SAMPLE bytes populated (and touched) on this thread, timed, and
 * unmapped; -1 where the advice is refused. */
static double small_page_us(void)
{
    void *m = mmap(NULL, SMALL_SAMPLE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    (void)madvise(m, SMALL_SAMPLE, MADV_NOHUGEPAGE);
    double t0 = now_us();
    int e = populate((uintptr_t)m, (uintptr_t)m + SMALL_SAMPLE, SMALL_SAMPLE);
    double t = now_us() - t0;
    munmap(m, SMALL_SAMPLE);
    return e ? -1 : t / (double)(SMALL_SAMPLE >> 12);
}

/* What the first huge page of a block (madvised) costs, in us a 4 KiB
 * page: populated and touched on this thread, timed; -1 where the advice
 * is refused. */
static double first_huge_page_us(char *q)
{
    double t0 = now_us();
    if (populate((uintptr_t)q, (uintptr_t)q + TL_HUGE_BYTES, TL_HUGE_BYTES)) /* one thread */
        return -1;
    return (now_us() - t0) / (double)(TL_HUGE_BYTES >> 12);
}

/* A fresh block of `size` (a multiple of 2 MiB, aligned to it) whose
 * first `used` bytes are about to be written. */
static void fresh_huge_block(void *p, size_t size, size_t used)
{
#if defined(MADV_HUGEPAGE) && defined(MADV_POPULATE_WRITE)
    /* acquire: min_small, written before the choice was stored, is read below */
    int c = atomic_load_explicit(&huge_choice, memory_order_acquire);
    if (c <= 0 && used >= HUGE_TRY_MIN && huge_samples < HUGE_SAMPLES &&
        atomic_compare_exchange_strong(&huge_choice, &c, 2)) { /* one thread measures at a time */
        char *q = p;
        double small = small_page_us();
        double big = small < 0 || madvise(q, size, MADV_HUGEPAGE) ? -1 : first_huge_page_us(q);
        if (big < 0) { /* no such advice here: small pages for good */
            huge_samples = HUGE_SAMPLES;
            atomic_store(&huge_choice, -1);
            prefault_block(q, used);
            return;
        }
        min_small = huge_samples && min_small < small ? min_small : small;
        min_huge = huge_samples && min_huge < big ? min_huge : big;
        huge_samples++;
        atomic_store(&huge_choice, min_huge < min_small ? 1 : -1);
        prefault_block(q + TL_HUGE_BYTES, used - TL_HUGE_BYTES);
        return;
    }
    if (c == 1 && used >= HUGE_TRY_MIN && madvise(p, size, MADV_HUGEPAGE) == 0) {
        /* the block's first huge page on this thread, timed: where it cost
         * many times a small page, the rest of it and every block after it
         * take small pages */
        char *q = p;
        if (first_huge_page_us(q) > HUGE_SLOW * min_small) {
            huge_samples = HUGE_SAMPLES; /* no more samples: they would take the cheapest huge page seen */
            atomic_store(&huge_choice, -1);
            (void)madvise(q + TL_HUGE_BYTES, size - TL_HUGE_BYTES, MADV_NOHUGEPAGE);
        }
        prefault_block(q + TL_HUGE_BYTES, used - TL_HUGE_BYTES);
        return;
    }
    if (c == 1)
        (void)madvise(p, size, MADV_HUGEPAGE);
#endif
    prefault_block(p, used);
}

bool tl_huge_pages_chosen(void) { return atomic_load_explicit(&huge_choice, memory_order_relaxed) == 1; }

void *tl_huge_block(size_t size)
{
    size_t whole = (size + TL_HUGE_BYTES - 1) & ~(TL_HUGE_BYTES - 1);
    void *p = aligned_alloc(TL_HUGE_BYTES, whole);
    if (p)
        fresh_huge_block(p, whole, size);
    return p;
}

/* Mid-size blocks (a tensor's header and data, from MID_MIN to one huge
 * page) in slabs of one huge page, cut into MID_UNIT units, where huge
 * pages are the process's choice (fresh_huge_block).  In 4 KiB pages each
 * fresh block of this size cost its pages' first touches again, and glibc
 * hands blocks this large back to the kernel when they are freed (mmap
 * and munmap, or a trimmed heap), so the next one is fresh again: in a
 * ResNet-18's forward and backward at batch 8 (tensors of 128 KiB to 2
 * MiB) 63 MB of them took 34 ms on the Zen 5 VM, every run.  A slab is
 * populated once, and a freed block's units go back to it, warm, for the
 * next block of any size that fits; a slab with nothing in it is kept
 * (up to MID_SPARE of them) or freed.  First fit over the slabs, in the
 * order they were made: the bits of results never depend on where a
 * tensor lies.  Under AddressSanitizer a free unit is poisoned, so a use
 * after free is still seen (until the unit is taken again); under
 * valgrind blocks are malloc's. */
#define MID_SPARE 4
static struct {
    pthread_mutex_t lock;
    int n, cap, spare;
    char **at;      /* the slabs */
    uint32_t *used; /* a bit a unit in use */
} mid = {.lock = PTHREAD_MUTEX_INITIALIZER};

#if defined(__SANITIZE_ADDRESS__) || defined(TL_ASAN)
#include <sanitizer/asan_interface.h>
#define MID_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define MID_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#define MID_OFF() false
#else
#define MID_POISON(p, n) ((void)(p), (void)(n))
#define MID_UNPOISON(p, n) ((void)(p), (void)(n))
#define MID_OFF() TINY_OFF()
#endif

static bool mid_size(size_t size) { return size >= MID_MIN && size <= TL_HUGE_BYTES; }

static uint32_t mid_mask(size_t size)
{
    int k = (int)((size + MID_UNIT - 1) / MID_UNIT);
    return k == MID_UNITS ? UINT32_MAX : (1u << k) - 1;
}

/* The first unit of a free run of mask's units in a slab, or -1. */
static int mid_fit(uint32_t used, uint32_t mask)
{
    for (int p = 0; p < MID_UNITS && (mask << p) >> p == mask; p++)
        if (!(used & mask << p))
            return p;
    return -1;
}

static void *mid_take(size_t size)
{
    if (!mid_size(size) || MID_OFF() || !tl_huge_pages_chosen())
        return NULL;
    uint32_t mask = mid_mask(size);
    pthread_mutex_lock(&mid.lock);
    for (int i = 0; i < mid.n; i++) {
        int p = mid_fit(mid.used[i], mask);
        if (p >= 0) {
            mid.spare -= !mid.used[i];
            mid.used[i] |= mask << p;
            char *b = mid.at[i] + (size_t)p * MID_UNIT;
            MID_UNPOISON(b, size);
            pthread_mutex_unlock(&mid.lock);
            return b;
        }
    }
    bool room = mid.n < mid.cap;
    if (!room) {
        int cap = mid.cap ? 2 * mid.cap : 16;
        char **at = realloc(mid.at, sizeof *at * (size_t)cap);
        if (at)
            mid.at = at;
        uint32_t *used = at ? realloc(mid.used, sizeof *used * (size_t)cap) : NULL;
        if (used) {
            mid.used = used;
            mid.cap = cap;
            room = true;
        }
    }
    pthread_mutex_unlock(&mid.lock);
    if (!room)
        return NULL;
    char *slab = aligned_alloc(TL_HUGE_BYTES, TL_HUGE_BYTES);
    if (!slab)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(slab, TL_HUGE_BYTES, MADV_HUGEPAGE);
#endif
    prefault_block(slab, TL_HUGE_BYTES); /* outside the lock: the slow part */
    pthread_mutex_lock(&mid.lock);
    if (mid.n < mid.cap) {
        MID_POISON(slab + size, TL_HUGE_BYTES - size);
        mid.at[mid.n] = slab;
        mid.used[mid.n++] = mask;
    } else { /* another thread took the room meanwhile */
        free(slab);
        slab = NULL;
    }
    pthread_mutex_unlock(&mid.lock);
    return slab;
}

/* p's units back to its slab: false where p is not in a slab. */
static bool mid_give(void *p, size_t size)
{
    if (!mid_size(size))
        return false;
    char *c = p, *drop = NULL;
    bool found = false;
    pthread_mutex_lock(&mid.lock);
    for (int i = 0; i < mid.n && !found; i++)
        if (c >= mid.at[i] && c < mid.at[i] + TL_HUGE_BYTES) {
            found = true;
            mid.used[i] &= ~(mid_mask(size) << (size_t)(c - mid.at[i]) / MID_UNIT);
            MID_POISON(c, size);
            if (!mid.used[i] && ++mid.spare > MID_SPARE) {
                drop = mid.at[i];
                MID_UNPOISON(drop, TL_HUGE_BYTES);
                memmove(&mid.at[i], &mid.at[i + 1], sizeof *mid.at * (size_t)(mid.n - i - 1));
                memmove(&mid.used[i], &mid.used[i + 1], sizeof *mid.used * (size_t)(mid.n - i - 1));
                mid.n--;
                mid.spare--;
            }
        }
    pthread_mutex_unlock(&mid.lock);
    free(drop);
    return found;
}

/* The slabs with nothing in them freed. */
static void mid_release(void)
{
    pthread_mutex_lock(&mid.lock);
    int k = 0;
    for (int i = 0; i < mid.n; i++)
        if (mid.used[i]) {
            mid.at[k] = mid.at[i];
            mid.used[k++] = mid.used[i];
        } else {
            MID_UNPOISON(mid.at[i], TL_HUGE_BYTES);
            free(mid.at[i]);
        }
    mid.n = k;
    mid.spare = 0;
    pthread_mutex_unlock(&mid.lock);
}

/* The size of the block that holds a host tensor of `bytes` data: its
 * header and data, or from 2 MiB its data alone in whole huge pages (a
 * 2 MiB tensor in one, never two), the header malloc's. */
static size_t block_size(size_t bytes, int ndim)
{
    if (bytes < TL_SMALL_BYTES)
        return TL_SMALL_OFFSET(ndim) + bytes;
    if (bytes >= TL_HUGE_BYTES)
        return (bytes + TL_HUGE_BYTES - 1) & ~(TL_HUGE_BYTES - 1);
    return (TL_DATA_OFFSET + bytes + 63) & ~(size_t)63;
}

tl_tensor *tl_tensor_new_in(tl_budget *budget, tl_dtype dt, int ndim, const int64_t *shape,
                            tl_status *st)
{
    int64_t n;
    if (tl_shape_numel(ndim, shape, &n, st))
        return NULL;
    size_t bytes = (size_t)n * tl_dtype_size(dt);
    int64_t cost = footprint(bytes, ndim);
    if (budget && budget->limit && cost > budget->limit - budget->live) {
        char d[96], what[128]; /* the message is built only on failure: this is a hot path */
        snprintf(what, sizeof what, "a tensor %s", tl_shape_desc(dt, ndim, shape, d, sizeof d));
        tl_budget_charge(budget, cost, what, st);
        return NULL;
    }
    if (cost == INT64_MAX) { /* no limit to refuse it: still never wrap */
        char d[96];
        tl_fail(st, TL_ERUNTIME, "out of memory allocating a tensor %s (more than 4 EiB)",
                tl_shape_desc(dt, ndim, shape, d, sizeof d));
        return NULL;
    }
    if (budget && tl_budget_charge(budget, cost, NULL, st))
        return NULL;
    bool small = bytes < TL_SMALL_BYTES, huge = bytes >= TL_HUGE_BYTES;
    if (!small && budget && budget->limit) { /* the kept blocks no longer fit beside the live tensors: freed */
        pthread_mutex_lock(&pool.lock);
        bool over = pool.bytes > (size_t)(budget->limit - budget->live);
        pthread_mutex_unlock(&pool.lock);
        if (over)
            tl_tensor_release_cache();
    }
    size_t size = block_size(bytes, ndim);
    tl_tensor *t = NULL;
    void *block = size <= TINY_BYTES ? tiny_take() : small ? malloc(size) : NULL;
    if (!small && !(block = huge ? NULL : mid_take(size)))
        block = pool_take(size, huge);
    if (!block && !small && (block = aligned_alloc(huge ? TL_HUGE_BYTES : 64, size))) {
        if (huge)
            fresh_huge_block(block, size, bytes);
        else
            prefault_block(block, TL_DATA_OFFSET + bytes);
    }
    if (block && huge && !(t = malloc(sizeof *t)))
        pool_give(block, size, true, 0);
    else if (!huge)
        t = block;
    if (!t) {
        char d[96];
        tl_budget_credit(budget, cost);
        tl_fail(st, TL_ERUNTIME, "out of memory allocating a tensor %s (%zu bytes)",
                tl_shape_desc(dt, ndim, shape, d, sizeof d), bytes);
        return NULL;
    }
    t->refs = 1;
    t->budget = budget;
    t->home = NULL;
    t->map = NULL;
    t->map_len = 0;
    t->base = NULL;
    if (budget)
        tl_budget_ref(budget);
    t->dtype = dt;
    t->device = (tl_device){TL_DEV_CPU, 0};
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    if (!small) /* a whole header: its unused sizes zero */
        memset(t->shape + ndim, 0, sizeof(int64_t) * (size_t)(TL_MAXDIM - ndim));
    t->numel = n;
    t->data = huge ? block : (char *)t + (small ? TL_SMALL_OFFSET(ndim) : TL_DATA_OFFSET);
    return t;
}

tl_tensor *tl_tensor_adopt_huge(tl_dtype dt, int ndim, const int64_t *shape, void *block, tl_status *st)
{
    int64_t n;
    if (tl_shape_numel(ndim, shape, &n, st))
        return NULL;
    size_t bytes = (size_t)n * tl_dtype_size(dt);
    if (bytes < TL_HUGE_BYTES)
        return tl_fail(st, TL_ERUNTIME, "internal: a tensor of %zu bytes adopting a block of huge pages", bytes), NULL;
    tl_tensor *t = malloc(sizeof *t);
    if (!t)
        return tl_fail(st, TL_ERUNTIME, "out of memory allocating a tensor header"), NULL;
    *t = (tl_tensor){.refs = 1, .dtype = dt, .device = {TL_DEV_CPU, 0}, .ndim = ndim, .numel = n, .data = block};
    if (ndim)
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return t;
}

tl_tensor *tl_tensor_new_on(tl_budget *budget, const tl_backend *be, tl_dtype dt, int ndim,
                            const int64_t *shape, tl_status *st)
{
    if (!tl_backend_is_device(be))
        return tl_tensor_new_in(budget, dt, ndim, shape, st);
    int64_t n;
    if (tl_shape_numel(ndim, shape, &n, st))
        return NULL;
    size_t bytes = (size_t)n * tl_dtype_size(dt);
    int64_t cost = footprint(bytes, ndim);
    char d[96], what[128];
    snprintf(what, sizeof what, "a tensor %s on %s", tl_shape_desc(dt, ndim, shape, d, sizeof d),
             be->name);
    if (cost == INT64_MAX || tl_budget_charge(budget, cost, what, st)) {
        if (cost == INT64_MAX)
            tl_fail(st, TL_ERUNTIME, "out of memory allocating %s (more than 4 EiB)", what);
        return NULL;
    }
    tl_tensor *t = malloc(sizeof *t);
    void *data = t ? be->alloc(be, bytes ? bytes : 1, st) : NULL;
    if (!t || !data) {
        if (!t)
            tl_fail(st, TL_ERUNTIME, "out of memory allocating %s", what);
        else
            tl_wrap(st, "%s", what);
        free(t);
        tl_budget_credit(budget, cost);
        return NULL;
    }
    *t = (tl_tensor){.refs = 1, .budget = budget, .home = be, .dtype = dt, .ndim = ndim, .numel = n,
                     .data = data, .device = {be->kind, be->index}};
    if (ndim)
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    if (budget)
        tl_budget_ref(budget);
    return t;
}

tl_tensor *tl_tensor_map(tl_dtype dt, int ndim, const int64_t *shape, void *map, size_t map_len,
                         size_t offset, tl_status *st)
{
    int64_t n;
    tl_tensor *t = tl_shape_numel(ndim, shape, &n, st) ? NULL : tl_malloc(1, sizeof *t, "a tensor header", st);
    if (!t) {
        munmap(map, map_len);
        return NULL;
    }
    *t = (tl_tensor){.refs = 1, .dtype = dt, .ndim = ndim, .numel = n, .data = (char *)map + offset,
                     .map = map, .map_len = map_len};
    if (ndim)
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return t;
}

tl_tensor *tl_tensor_view(tl_tensor *t, int ndim, const int64_t *shape, tl_status *st)
{
    tl_tensor *v = tl_malloc(1, sizeof *v, "a tensor header", st);
    if (!v)
        return NULL;
    *v = (tl_tensor){.refs = 1, .dtype = t->dtype, .device = t->device, .ndim = ndim,
                     .numel = t->numel, .data = t->data, .base = tl_tensor_ref(t->base ? t->base : t)};
    if (ndim)
        memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return v;
}

void tl_tensor_copy_header(tl_tensor *dst, const tl_tensor *t)
{
    memcpy(dst, t, offsetof(tl_tensor, shape) + sizeof(int64_t) * (size_t)t->ndim);
    memset(dst->shape + t->ndim, 0, sizeof(int64_t) * (size_t)(TL_MAXDIM - t->ndim));
}

bool tl_tensor_onto_budget(tl_tensor *t, tl_budget *b, int64_t charged)
{
    if (!t || !b || t->budget || t->base || t->home)
        return false;
    int64_t cost = footprint((size_t)t->numel * tl_dtype_size(t->dtype), t->ndim);
    if (cost == INT64_MAX)
        return false;
    b->live += cost - charged;
    if (b->live > b->peak)
        b->peak = b->live;
    t->budget = b;
    tl_budget_ref(b);
    return true;
}

tl_tensor *tl_tensor_stub(const tl_tensor *t, tl_status *st)
{
    tl_tensor *s = tl_malloc(1, sizeof *s, "a tensor header", st);
    if (s) {
        tl_tensor_copy_header(s, t);
        s->refs = 1;
        s->budget = NULL;
        s->home = NULL;
        s->data = NULL;
        s->map = NULL;
        s->map_len = 0;
        s->base = NULL;
    }
    return s;
}

tl_tensor *tl_tensor_zeros(tl_dtype dt, int ndim, const int64_t *shape, tl_status *st)
{
    tl_tensor *t = tl_tensor_new(dt, ndim, shape, st);
    if (t)
        memset(t->data, 0, (size_t)t->numel * tl_dtype_size(dt));
    return t;
}

tl_tensor *tl_tensor_f64(const tl_tensor *t, tl_status *st)
{
    tl_tensor *d = tl_tensor_new(TL_F64, t->ndim, t->shape, st);
    for (int64_t i = 0; d && i < t->numel; i++)
        ((double *)d->data)[i] = tl_tensor_get(t, i);
    return d;
}

tl_tensor *tl_tensor_scalar(tl_dtype dt, double v, tl_status *st)
{
    tl_tensor *t = tl_tensor_new(dt, 0, NULL, st);
    if (t)
        tl_tensor_set(t, 0, v);
    return t;
}

tl_tensor *tl_tensor_ref(tl_tensor *t)
{
    if (t)
        t->refs++;
    return t;
}

void tl_tensor_unref(tl_tensor *t)
{
    if (!t || --t->refs > 0)
        return;
    if (t->base) {
        tl_tensor_unref(t->base);
        free(t);
        return;
    }
    size_t room = SIZE_MAX; /* what the limit leaves for kept blocks */
    if (t->budget) {
        tl_budget_credit(t->budget, footprint((size_t)t->numel * tl_dtype_size(t->dtype), t->ndim));
        if (t->budget->limit)
            room = t->budget->limit > t->budget->live ? (size_t)(t->budget->limit - t->budget->live) : 0;
        tl_budget_unref(t->budget);
    }
    if (t->home)
        t->home->release(t->home, t->data);
    if (t->map)
        munmap(t->map, t->map_len);
    size_t bytes = (size_t)t->numel * tl_dtype_size(t->dtype);
    if (t->home || t->map || !t->data) { /* a device tensor's or mapped tensor's header, or a stub */
        free(t);
    } else if (bytes >= TL_HUGE_BYTES) { /* host data in huge pages of its own */
        pool_give(t->data, block_size(bytes, t->ndim), true, room);
        free(t);
    } else if (!mid_give(t, block_size(bytes, t->ndim))) { /* host data in the same block */
        pool_give(t, block_size(bytes, t->ndim), false, room);
    }
}

double tl_tensor_get(const tl_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TL_F32: return (double)((const float *)t->data)[i];
    case TL_F64: return ((const double *)t->data)[i];
    case TL_I32: return (double)((const int32_t *)t->data)[i];
    default: return (double)((const int64_t *)t->data)[i];
    }
}

int64_t tl_tensor_get_int(const tl_tensor *t, int64_t i)
{
    return t->dtype == TL_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

void tl_tensor_set(tl_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case TL_F32: ((float *)t->data)[i] = (float)v; break;
    case TL_F64: ((double *)t->data)[i] = v; break;
    case TL_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    default: ((int64_t *)t->data)[i] = (int64_t)v; break;
    }
}
