/* The graph loader: JSON text -> validated tl_graph.  One pass over the
 * document; names become slots when defined and are visible only in their
 * block and the blocks nested in it, after their definition. */
#define _DEFAULT_SOURCE /* realpath, madvise */
#include "graph.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/json_strict.h"
#include "formats/npy.h"
#include "formats/text.h"
#include "mapc.h"
#include "program.h"

typedef struct stream stream;

/* Numbers remembered for sharing ids: a direct-mapped cache of this many
 * entries (bounded memory; equal numbers mostly, unequal ones never, share). */
#define NUM_CACHE 1024

typedef struct loader {
    tl_graph *g;
    tl_status *st;
    char *dir; /* the graph file's folder, "" for the current one */
    /* name -> slot, open addressing */
    int *table;
    int tcap;
    int cap; /* capacity of the per-slot arrays */
    bool *visible;
    tl_graph_options opts;
    const char *bad_key; /* the attribute a failed plain_op stopped at */
    stream *stream;      /* the top-level nodes come from the text, one at a time */
    const char *known_name; /* a name whose hash is known_hash (stream_nodes) */
    uint64_t known_hash;
    uint64_t num_bits[NUM_CACHE];
    int num_ids[NUM_CACHE]; /* id + 1; 0: empty */
} loader;

_Static_assert(sizeof(tl_node) <= 64, "a large graph is mostly nodes: keep them small");

/* Nodes that are not if, iterate or map share this (never written). */
static const tl_flow flow_none = {.cond = {.slot = -1}, .index_slot = -1};
#define FLOW_NONE ((tl_flow *)&flow_none)

/* ---------- the arena: names and small per-node arrays, freed at once ---------- */

typedef struct achunk {
    struct achunk *next;
    size_t size;
} achunk;

struct tl_arena {
    achunk *chunks;
    char *p, *end; /* the free part of the current chunk */
    size_t next;   /* size of the next chunk */
};

#define CHUNK_HDR ((sizeof(achunk) + 15) & ~(size_t)15)
#define ARENA_MAX_CHUNK ((size_t)1 << 20)

#define HUGE_PAGE ((size_t)2 << 20)

/* Memory a large graph is about to fill, asked for in huge pages where the
 * system gives them on request (transparent huge pages, "madvise"): the
 * first touch of each 2 MiB is then one page fault rather than 512, and
 * one TLB entry serves it.  On the virtual machine measured, the faults
 * writing the nodes of a 200k-node graph were a quarter of its load, the
 * name table's a few percent more.  Only advice: nothing changes where it
 * is not taken.  (The arena in huge pages too saved as much again there,
 * but a run of the graph then peaked 3 MB higher.) */
static void huge_pages(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)p & ~(pg - 1);
    madvise((void *)at, n + ((uintptr_t)p - at), MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

/* n bytes (a huge page or more) aligned to a huge page and asked for in
 * huge pages, freed with free(); NULL for less, or if the system refuses
 * (the caller then mallocs).  Whole huge pages: malloc's header for what
 * follows must not touch the last one before it is advised. */
static void *huge_alloc(size_t n)
{
    void *p = NULL;
    if (n < HUGE_PAGE || n > SIZE_MAX - HUGE_PAGE)
        return NULL;
    n = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (posix_memalign(&p, HUGE_PAGE, n))
        return NULL;
    huge_pages(p, n);
    return p;
}

static void arena_free(struct tl_arena *a)
{
    if (!a)
        return;
    for (achunk *c = a->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

/* n bytes aligned to align (a power of two up to 16), not zeroed; NULL
 * with an error. */
static void *arena_alloc_at(loader *L, size_t n, size_t align, const char *what)
{
    struct tl_arena *a = L->g->arena;
    if (!a && !(a = L->g->arena = tl_calloc(1, sizeof *a, what, L->st)))
        return NULL;
    size_t pad = (size_t)-(uintptr_t)a->p & (align - 1);
    if (!n)
        n = 1;
    if (a->p && (size_t)(a->end - a->p) >= n + pad) {
        void *r = a->p + pad;
        a->p += pad + n;
        return r;
    }
    if (!a->next)
        a->next = 4096;
    bool own = n > a->next / 4; /* a large request gets a chunk of its own */
    size_t size = own ? n : a->next - CHUNK_HDR - 16; /* with malloc's header: whole pages */
    if (size > SIZE_MAX - CHUNK_HDR)
        return tl_malloc(SIZE_MAX, 2, what, L->st);
    achunk *c = tl_malloc(CHUNK_HDR + size, 1, what, L->st); /* 16-aligned data */
    if (!c)
        return NULL;
    c->size = size;
    char *data = (char *)c + CHUNK_HDR;
    if (own && a->chunks) { /* behind the current chunk, which stays current */
        c->next = a->chunks->next;
        a->chunks->next = c;
        return data;
    }
    c->next = a->chunks;
    a->chunks = c;
    a->p = data + n;
    a->end = data + size;
    if (!own && a->next < ARENA_MAX_CHUNK)
        a->next *= 2;
    return data;
}

/* Of anything: 8-aligned. */
static void *arena_alloc(loader *L, size_t n, const char *what)
{
    return arena_alloc_at(L, n, 8, what);
}

/* n ints. */
static int *arena_ints(loader *L, size_t n, const char *what)
{
    if (n > SIZE_MAX / 2 / sizeof(int))
        return tl_calloc(n, sizeof(int), what, L->st); /* says that it overflows */
    return arena_alloc_at(L, n * sizeof(int), sizeof(int), what);
}

static void *arena_calloc(loader *L, size_t n, size_t size, const char *what)
{
    if (size && n > SIZE_MAX / 2 / size)
        return tl_calloc(n, size, what, L->st); /* says that it overflows */
    void *p = arena_alloc(L, n * size, what);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static char *arena_strdup(loader *L, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = arena_alloc_at(L, n, 1, "a string");
    if (p)
        memcpy(p, s, n);
    return p;
}

/* The id of a number argument: equal numbers (bit for bit) met recently
 * share one, so a run makes one tensor of each (exec/eval.c caches them). */
static int number_id(loader *L, double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    size_t h = (size_t)((b * 0x9E3779B97F4A7C15ull) >> 54) % NUM_CACHE;
    if (L->num_ids[h] && L->num_bits[h] == b)
        return L->num_ids[h] - 1;
    L->num_bits[h] = b;
    L->num_ids[h] = L->g->nnums + 1;
    return L->g->nnums++;
}

#define DTYPE_CHOICES "\"f32\", \"f64\", \"i32\" or \"i64\""

/* ---------- small helpers ---------- */

/* What a byte is to the loops that read every byte of a large text: one
 * lookup, not a chain of comparisons. */
enum {
    B_SPECIAL = 1, /* outside strings, a byte prescan must look at: NUL " { [ } ] , */
    B_STOP = 2,    /* inside a string, one that ends or escapes it or may not be there: " \\ control */
    B_NAME = 4,    /* in a name: [A-Za-z0-9_] */
};
static const unsigned char byte_class[256] = {
    3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0,
    0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 1, 2, 1, 0, 4,
    0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 1, 0, 1, 0, 0,
    /* 0x80 and above: none of them */
};

/* Eight bytes at a step, mixed at the end (the table reads the low bits). */
uint64_t tl_name_hash(const char *s)
{
    size_t n = strlen(s);
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    for (; n >= 8; n -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, s, n);
    h ^= w;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* Name table entries: -1 free, else a slot, with (while the table has at
 * most 2^25 entries, so slots fit in 24 bits) 7 more bits of the name's
 * hash above it: most names that differ are told apart without reading
 * them. */
#define TAG_MAX_TCAP (1 << 25)
static int tag_of(uint64_t h, int tcap) { return tcap <= TAG_MAX_TCAP ? (int)(h >> 57) << 24 : 0; }
static int slot_of(int e, int tcap) { return tcap <= TAG_MAX_TCAP ? e & 0xffffff : e; }

static int lookup(const tl_graph *g, const int *table, int tcap, const char *name)
{
    uint64_t h = tl_name_hash(name), mask = (uint64_t)tcap - 1;
    int tag = tag_of(h, tcap), tmask = tag_of(UINT64_MAX, tcap);
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        int e = table[i];
        if (e < 0)
            return -1;
        if ((e & tmask) == tag && !strcmp(g->slot_name[slot_of(e, tcap)], name))
            return slot_of(e, tcap);
    }
}

static int find_slot(const loader *L, const char *name)
{
    return lookup(L->g, L->table, L->tcap, name);
}

static void table_put(loader *L, int slot)
{
    uint64_t h = tl_name_hash(L->g->slot_name[slot]), i = h & (uint64_t)(L->tcap - 1);
    while (L->table[i] >= 0)
        i = (i + 1) & (uint64_t)(L->tcap - 1);
    L->table[i] = slot | tag_of(h, L->tcap);
}

static bool grow(void **p, int n, size_t es, tl_status *st)
{
    void *q = realloc(*p, (size_t)n * es);
    if (!q) {
        tl_fail(st, TL_ERUNTIME, "out of memory allocating the graph's name table");
        return false;
    }
    *p = q;
    return true;
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(byte_class[(unsigned char)s[i]] & B_NAME))
            return false;
    return true;
}

/* Room for c names in the per-slot arrays and the name table. */
static bool reserve(loader *L, int c)
{
    tl_graph *g = L->g;
    if (c > (1 << 29)) /* the table's size stays an int */
        return tl_fail(L->st, TL_ERUNTIME, "out of memory: a name table for %d names", c), false;
    if (c > L->cap) {
        if (!grow((void **)&g->slot_name, c, sizeof(char *), L->st) ||
            !grow((void **)&g->slot_kind, c, 1, L->st) ||
            !grow((void **)&g->slot_const, c, sizeof(int), L->st) ||
            !grow((void **)&L->visible, c, sizeof(bool), L->st))
            return false;
        L->cap = c;
    }
    int tcap = L->tcap;
    while (2 * ((int64_t)c + 1) > tcap)
        tcap *= 2;
    if (tcap > L->tcap) {
        int *t = huge_alloc(sizeof(int) * (size_t)tcap);
        if (!t && !(t = malloc(sizeof(int) * (size_t)tcap)))
            return tl_fail(L->st, TL_ERUNTIME, "out of memory allocating the name table"), false;
        free(L->table);
        L->table = t;
        L->tcap = tcap;
        for (int i = 0; i < L->tcap; i++)
            t[i] = -1;
        for (int s = 0; s < g->nslots; s++)
            table_put(L, s);
    }
    return true;
}

/* Defines a new name; returns its slot or -1 (error set). */
static int define_name(loader *L, const char *name, enum tl_slot_kind kind)
{
    tl_graph *g = L->g;
    if (!valid_name(name))
        return tl_fail(L->st, TL_EINPUT, "bad name \"%.64s\" (want [A-Za-z_][A-Za-z0-9_]*, at most 255 bytes)", name), -1;
    if (g->nslots == L->cap && !reserve(L, L->cap ? 2 * L->cap : 64))
        return -1;
    uint64_t h = name == L->known_name ? L->known_hash : tl_name_hash(name), mask = (uint64_t)L->tcap - 1, i = h & mask;
    int tag = tag_of(h, L->tcap), tmask = tag_of(UINT64_MAX, L->tcap);
    for (int e; (e = L->table[i]) >= 0; i = (i + 1) & mask)
        if ((e & tmask) == tag && !strcmp(g->slot_name[slot_of(e, L->tcap)], name))
            return tl_fail(L->st, TL_EINPUT, "name \"%s\" is defined twice", name), -1;
    int s = g->nslots;
    if (!(g->slot_name[s] = arena_strdup(L, name)))
        return -1;
    g->nslots++;
    g->slot_kind[s] = (unsigned char)kind;
    g->slot_const[s] = -1;
    L->visible[s] = true;
    L->table[i] = s | tag;
    return s;
}

static int define(loader *L, const cJSON *item, enum tl_slot_kind kind, const char *what)
{
    if (!cJSON_IsString(item))
        return tl_fail(L->st, TL_EINPUT, "%s must be a name (a string)", what), -1;
    return define_name(L, item->valuestring, kind);
}

/* Looks up a name used as an argument; -1 with an error if unknown here. */
static int use(loader *L, const char *name)
{
    int s = L->g->nslots - 1; /* often the name just defined */
    if (s < 0 || strcmp(L->g->slot_name[s], name))
        s = find_slot(L, name);
    if (s < 0)
        return tl_fail(L->st, TL_EINPUT, "unknown name \"%.64s\" (not defined before this point)", name), -1;
    if (!L->visible[s])
        return tl_fail(L->st, TL_EINPUT, "name \"%s\" is local to another block and not visible here", name), -1;
    return s;
}

static bool check_keys(loader *L, const cJSON *obj, const char *const *allowed, int n, const char *what)
{
    for (const cJSON *c = obj->child; c; c = c->next) {
        bool ok = false;
        for (int i = 0; i < n && !ok; i++)
            ok = !strcmp(c->string, allowed[i]);
        if (!ok) {
            tl_fail(L->st, TL_EINPUT, "unknown key \"%.64s\" in %s", c->string, what);
            return false;
        }
    }
    return true;
}

static bool get_int(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (d != floor(d) || !(fabs(d) < 9007199254740992.0)) /* 2^53 + 1 reads as 2^53 */
        return false;
    *out = (int64_t)d;
    return true;
}

/* A slice bound or step: any whole number, as Python takes 10**20 to mean
 * "to the end", held clipped to 2^62 in magnitude (past every axis, so
 * it slices the same; exactness beyond 2^53 does not matter). */
static bool get_bound(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || isinf(v->valuedouble))
        return false;
    double d = fmin(fmax(v->valuedouble, -0x1p62), 0x1p62);
    *out = (int64_t)d;
    return true;
}

/* A number, or one of the strings "nan", "inf", "-inf". */
static bool get_num(const cJSON *v, double *out)
{
    if (cJSON_IsNumber(v)) { /* 1e400 is no double: write "inf" for infinity */
        *out = v->valuedouble;
        return isfinite(*out);
    }
    if (!cJSON_IsString(v))
        return false;
    if (!strcmp(v->valuestring, "nan"))
        *out = NAN;
    else if (!strcmp(v->valuestring, "inf"))
        *out = INFINITY;
    else if (!strcmp(v->valuestring, "-inf"))
        *out = -INFINITY;
    else
        return false;
    return true;
}

/* An int or list of ints into arr (at most TL_MAXDIM). */
static bool get_int_list(loader *L, const cJSON *v, bool scalar_ok, int64_t *arr, int *n, const char *key)
{
    int64_t x;
    if (scalar_ok && get_int(v, &x)) {
        arr[0] = x;
        *n = 1;
        return true;
    }
    if (!cJSON_IsArray(v))
        goto bad;
    *n = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (*n == TL_MAXDIM) {
            tl_fail(L->st, TL_EINPUT, "attribute \"%s\" has more than %d entries", key, TL_MAXDIM);
            return false;
        }
        if (!get_int(c, &arr[(*n)++]))
            goto bad;
    }
    return true;
bad:
    tl_fail(L->st, TL_EINPUT, "attribute \"%s\" must be %s", key,
            scalar_ok ? "an integer or a list of integers" : "a list of integers");
    return false;
}

/* ---------- attributes ---------- */

static const struct {
    uint64_t bit;
    const char *key;
} attr_keys[] = {
    {TL_A_AXES, "axes"},   {TL_A_KEEPDIMS, "keepdims"}, {TL_A_AXIS, "axis"},   {TL_A_APPROX, "approximate"},
    {TL_A_MIN, "min"},     {TL_A_MAX, "max"},           {TL_A_DTYPE, "dtype"}, {TL_A_SHAPE, "shape"},
    {TL_A_PERM, "axes"},   {TL_A_START, "start"},       {TL_A_STOP, "stop"},   {TL_A_STEP, "step"},
    {TL_A_INDICES, "indices"}, {TL_A_DEPTH, "depth"},
    {TL_A_KERNEL, "kernel"}, {TL_A_STRIDE, "stride"}, {TL_A_PADDING, "padding"}, {TL_A_DILATION, "dilation"},
    {TL_A_GROUPS, "groups"}, {TL_A_OUT_PAD, "output_padding"}, {TL_A_CEIL, "ceil_mode"},
    {TL_A_COUNT_PAD, "count_include_pad"}, {TL_A_EPS, "epsilon"}, {TL_A_TRAINING, "training"},
    {TL_A_PADS, "pads"}, {TL_A_MODE, "mode"}, {TL_A_VALUE, "value"}, {TL_A_SIZE, "size"}, {TL_A_SCALE, "scale"},
    {TL_A_COORD, "coordinate"}, {TL_A_NEAREST, "nearest"}, {TL_A_CUBIC, "cubic_coeff"},
    {TL_A_LAST, "select_last_index"}, {TL_A_EXCLUSIVE, "exclusive"}, {TL_A_REVERSE, "reverse"},
    {TL_A_SEED, "seed"}, {TL_A_LOW, "low"}, {TL_A_HIGH, "high"}, {TL_A_MEANV, "mean"}, {TL_A_STD, "std"},
    {TL_A_P, "p"},
};
#define NATTR_KEYS (int)(sizeof attr_keys / sizeof attr_keys[0])

static uint64_t required_attrs(tl_opcode op)
{
    switch (op) {
    case TL_OP_MAX_POOL:
    case TL_OP_AVG_POOL: return TL_A_KERNEL;
    case TL_OP_GROUP_NORM: return TL_A_GROUPS;
    case TL_OP_PAD: return TL_A_PADS;
    case TL_OP_SCATTER_ADD:
    case TL_OP_ARGMAX:
    case TL_OP_ARGMIN:
    case TL_OP_CUMSUM: return TL_A_AXIS;
    case TL_OP_RANDOM_UNIFORM:
    case TL_OP_RANDOM_NORMAL: return TL_A_SHAPE | TL_A_SEED;
    case TL_OP_DROPOUT: return TL_A_P;
    case TL_OP_CAST: return TL_A_DTYPE;
    case TL_OP_RESHAPE:
    case TL_OP_BROADCAST_TO: return TL_A_SHAPE;
    case TL_OP_EXPAND_DIMS: return TL_A_AXIS;
    case TL_OP_TAKE: /* indices: the attribute, or a second argument */
    case TL_OP_GATHER: return TL_A_AXIS;
    case TL_OP_ONE_HOT: return TL_A_DEPTH;
    default: return 0;
    }
}

/* A spatial attribute: an int (every axis) or a list of at most TL_MAXSP
 * ints, each >= lo; n -1 for the int. */
static const char *get_spatial(const cJSON *v, int64_t lo, int64_t *arr, int *n)
{
    static const char *const want[] = {"a non-negative integer or a list of them (one per spatial axis)",
                                       "a positive integer or a list of them (one per spatial axis)"};
    int64_t x;
    if (get_int(v, &x)) {
        arr[0] = x;
        *n = -1;
        return x < lo ? want[lo] : NULL;
    }
    if (!cJSON_IsArray(v) || !v->child)
        return want[lo];
    *n = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (*n == TL_MAXSP)
            return "at most 3 entries (one per spatial axis)";
        if (!get_int(c, &arr[*n]) || arr[*n] < lo)
            return want[lo];
        (*n)++;
    }
    return NULL;
}

/* padding: an int, a list of ints, or a list of [begin, end] pairs. */
static const char *get_padding(const cJSON *v, tl_attrs *a)
{
    static const char *const want =
        "a non-negative integer, a list of them or a list of [begin, end] pairs (one per spatial axis)";
    if (!cJSON_IsArray(v) || !v->child || !cJSON_IsArray(v->child)) {
        const char *why = get_spatial(v, 0, a->pad_lo, &a->npadding);
        if (why)
            return why == want ? why : strstr(why, "at most") ? why : want;
        for (int i = 0; i < (a->npadding < 0 ? 1 : a->npadding); i++)
            a->pad_hi[i] = a->pad_lo[i];
        return NULL;
    }
    a->padding_pairs = true;
    a->npadding = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        if (a->npadding == TL_MAXSP)
            return "at most 3 pairs (one per spatial axis)";
        if (cJSON_GetArraySize(c) != 2 || !get_int(c->child, &a->pad_lo[a->npadding]) ||
            !get_int(c->child->next, &a->pad_hi[a->npadding]) || a->pad_lo[a->npadding] < 0 ||
            a->pad_hi[a->npadding] < 0)
            return want;
        a->npadding++;
    }
    return NULL;
}

/* One of the strings names[0..n-1] into *out. */
static bool get_choice(const cJSON *v, const char *const *names, int n, int *out)
{
    for (int i = 0; cJSON_IsString(v) && i < n; i++)
        if (!strcmp(v->valuestring, names[i])) {
            *out = i;
            return true;
        }
    return false;
}

static bool parse_attr(loader *L, tl_attrs *a, tl_opcode op, uint64_t bit, const cJSON *v, const char *key)
{
    const char *want = NULL;
    switch (bit) {
    case TL_A_AXES:
    case TL_A_PERM:
        a->has_axes = true;
        return get_int_list(L, v, bit == TL_A_AXES, a->axes, &a->naxes, key);
    case TL_A_SHAPE: return get_int_list(L, v, false, a->shape, &a->nshape, key);
    case TL_A_KEEPDIMS:
        if (!cJSON_IsBool(v))
            want = "true or false";
        a->keepdims = cJSON_IsTrue(v);
        break;
    case TL_A_AXIS:
        a->has_axis = true;
        if (!get_int(v, &a->axis))
            want = "an integer";
        break;
    case TL_A_APPROX:
        if (cJSON_IsString(v) && !strcmp(v->valuestring, "none"))
            a->approximate = 0;
        else if (cJSON_IsString(v) && !strcmp(v->valuestring, "tanh"))
            a->approximate = 1;
        else
            want = "\"none\" or \"tanh\"";
        break;
    case TL_A_MIN:
    case TL_A_MAX:
        if (!get_num(v, bit == TL_A_MIN ? &a->min : &a->max))
            want = "a number";
        else if (isnan(bit == TL_A_MIN ? a->min : a->max)) /* it would bound nothing: every comparison false */
            want = "a number, not nan (leave it out for no bound)";
        *(bit == TL_A_MIN ? &a->has_min : &a->has_max) = true;
        break;
    case TL_A_DTYPE:
        a->has_dtype = true;
        if (!cJSON_IsString(v) || !tl_dtype_parse(v->valuestring, &a->dtype))
            want = DTYPE_CHOICES;
        break;
    case TL_A_DEPTH:
        if (!get_int(v, &a->depth) || a->depth < 0)
            want = "a non-negative integer";
        break;
    case TL_A_START:
    case TL_A_STOP:
        if (cJSON_IsNull(v))
            break;
        *(bit == TL_A_START ? &a->has_start : &a->has_stop) = true;
        if (!get_bound(v, bit == TL_A_START ? &a->start : &a->stop))
            want = "an integer or null";
        break;
    case TL_A_STEP:
        if (!get_bound(v, &a->step) || a->step <= 0)
            want = "a positive integer";
        break;
    case TL_A_KERNEL: want = get_spatial(v, 1, a->kernel, &a->nkernel); break;
    case TL_A_STRIDE: want = get_spatial(v, 1, a->stride, &a->nstride); break;
    case TL_A_DILATION: want = get_spatial(v, 1, a->dilation, &a->ndilation); break;
    case TL_A_OUT_PAD: want = get_spatial(v, 0, a->out_pad, &a->nout_pad); break;
    case TL_A_PADDING: want = get_padding(v, a); break;
    case TL_A_GROUPS:
        if (!get_int(v, &a->groups) || a->groups < 1)
            want = "a positive integer";
        break;
    case TL_A_CEIL:
    case TL_A_COUNT_PAD:
    case TL_A_TRAINING:
    case TL_A_LAST:
    case TL_A_EXCLUSIVE:
    case TL_A_REVERSE: {
        if (!cJSON_IsBool(v)) {
            want = "true or false";
            break;
        }
        bool t = cJSON_IsTrue(v);
        if (bit == TL_A_CEIL)
            a->ceil_mode = t;
        else if (bit == TL_A_COUNT_PAD)
            a->count_include_pad = t;
        else if (bit == TL_A_TRAINING)
            a->training = t;
        else if (bit == TL_A_LAST)
            a->select_last = t;
        else if (bit == TL_A_EXCLUSIVE)
            a->exclusive = t;
        else
            a->reverse = t;
        break;
    }
    case TL_A_EPS:
        if (!get_num(v, &a->epsilon) || !(a->epsilon > 0) || isinf(a->epsilon))
            want = "a positive number";
        break;
    case TL_A_VALUE:
        if (!get_num(v, &a->value))
            want = "a number";
        break;
    case TL_A_CUBIC:
        if (!get_num(v, &a->cubic_coeff) || !isfinite(a->cubic_coeff))
            want = "a finite number";
        break;
    case TL_A_LOW:
    case TL_A_HIGH:
    case TL_A_MEANV:
        if (!get_num(v, bit == TL_A_LOW ? &a->low : bit == TL_A_HIGH ? &a->high : &a->mean) ||
            !isfinite(bit == TL_A_LOW ? a->low : bit == TL_A_HIGH ? a->high : a->mean))
            want = "a finite number";
        break;
    case TL_A_STD:
        if (!get_num(v, &a->std) || !(a->std > 0) || isinf(a->std))
            want = "a positive number";
        break;
    case TL_A_P:
        if (!get_num(v, &a->p) || !(a->p >= 0 && a->p < 1))
            want = "a number in [0, 1)";
        break;
    case TL_A_SEED:
        a->has_seed = true;
        if (!get_int(v, &a->seed))
            want = "an integer below 2^53 in magnitude";
        break;
    case TL_A_PADS: {
        if (!cJSON_IsArray(v)) {
            want = "a list of [begin, end] pairs, one per axis";
            break;
        }
        a->npads = 0;
        for (const cJSON *c = v->child; c && !want; c = c->next) {
            if (a->npads == TL_MAXDIM) {
                want = "a list of at most 16 [begin, end] pairs";
                break;
            }
            if (cJSON_GetArraySize(c) != 2 || !get_int(c->child, &a->pads[2 * a->npads]) ||
                !get_int(c->child->next, &a->pads[2 * a->npads + 1]))
                want = "a list of [begin, end] pairs of integers, one per axis";
            a->npads++;
        }
        break;
    }
    case TL_A_MODE: {
        static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};
        static const char *const resize_modes[] = {"nearest", "linear", "cubic"};
        if (op == TL_OP_PAD ? !get_choice(v, pad_modes, 4, &a->mode) : !get_choice(v, resize_modes, 3, &a->mode))
            want = op == TL_OP_PAD ? "\"constant\", \"reflect\", \"edge\" or \"wrap\""
                                   : "\"nearest\", \"linear\" or \"cubic\"";
        break;
    }
    case TL_A_COORD: {
        static const char *const names[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
        if (!get_choice(v, names, 4, &a->coord))
            want = "\"half_pixel\", \"pytorch_half_pixel\", \"align_corners\" or \"asymmetric\"";
        break;
    }
    case TL_A_NEAREST: {
        static const char *const names[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
        if (!get_choice(v, names, 4, &a->nearest))
            want = "\"round_prefer_floor\", \"round_prefer_ceil\", \"floor\" or \"ceil\"";
        break;
    }
    case TL_A_SIZE: {
        int64_t sz[TL_MAXSP];
        int n = 0;
        want = get_spatial(v, 1, sz, &n);
        if (!want && n < 0)
            want = "a list of positive integers (one per spatial axis)";
        if (!want) {
            memcpy(a->size, sz, sizeof sz);
            a->nsize = n;
        }
        break;
    }
    case TL_A_SCALE: {
        if (!cJSON_IsArray(v) || !v->child) {
            want = "a list of positive numbers (one per spatial axis)";
            break;
        }
        a->nscale = 0;
        for (const cJSON *c = v->child; c && !want; c = c->next) {
            if (a->nscale == TL_MAXSP)
                want = "a list of at most 3 positive numbers (one per spatial axis)";
            else if (!get_num(c, &a->scale[a->nscale]) || !(a->scale[a->nscale] > 0) || isinf(a->scale[a->nscale]))
                want = "a list of positive numbers (one per spatial axis)";
            a->nscale++;
        }
        break;
    }
    case TL_A_INDICES: {
        int64_t k = 0;
        if (!cJSON_IsArray(v)) {
            want = "a list of integers";
            break;
        }
        int cnt = cJSON_GetArraySize(v);
        int64_t *ix = arena_alloc(L, (size_t)cnt * sizeof(int64_t), "take indices");
        if (!ix)
            return false;
        for (const cJSON *c = v->child; c && !want; c = c->next)
            if (!get_int(c, &ix[k++]))
                want = "a list of integers";
        a->indices = ix;
        a->nindices = k;
        break;
    }
    }
    if (want)
        tl_fail(L->st, TL_EINPUT, "attribute \"%s\" must be %s", key, want);
    return !want;
}

/* ---------- nodes and blocks ---------- */

static bool parse_block(loader *L, const cJSON *obj, tl_block **out, int nparams,
                        const cJSON *const *params, int *param_slots, const char *what);

/* An argument: the name's slot, or (name NULL) the number num. */
static bool put_arg(loader *L, tl_arg *a, const char *name, double num)
{
    a->slot = -1;
    if (name)
        return (a->slot = use(L, name)) >= 0;
    a->num = num;
    a->num_id = number_id(L, num);
    return true;
}

static bool parse_args(loader *L, const cJSON *v, tl_arg **args, int *nargs, const char *key)
{
    if (!cJSON_IsArray(v)) {
        tl_fail(L->st, TL_EINPUT, "\"%s\" must be an array", key);
        return false;
    }
    int n = cJSON_GetArraySize(v), i = 0;
    *args = arena_calloc(L, (size_t)n, sizeof(tl_arg), "node arguments");
    if (!*args)
        return false;
    *nargs = n;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (!cJSON_IsNumber(c) && !cJSON_IsString(c)) {
            tl_fail(L->st, TL_EINPUT, "\"%s\" entry %d must be a name or a number", key, i);
            return false;
        }
        if (cJSON_IsNumber(c) && !isfinite(c->valuedouble)) /* 1e400: no double; args hold finite numbers */
            return tl_fail(L->st, TL_EINPUT, "\"%s\" entry %d is too large for a double (a number argument is "
                           "finite: an infinity is a constant, {\"shape\": [], \"data\": [\"inf\"]})", key, i),
                   false;
        if (!put_arg(L, &(*args)[i], cJSON_IsString(c) ? c->valuestring : NULL, c->valuedouble))
            return false;
    }
    return true;
}

/* The names of a node's "id" (or a block's "result"): one string or an array. */
static int name_list(loader *L, const cJSON *v, const cJSON **items, int max, const char *key)
{
    int n = 0;
    if (cJSON_IsString(v)) {
        items[0] = v;
        return 1;
    }
    if (!cJSON_IsArray(v) || !v->child) {
        tl_fail(L->st, TL_EINPUT, "\"%s\" must be a name or a non-empty array of names", key);
        return -1;
    }
    for (const cJSON *c = v->child; c; c = c->next) {
        if (n == max) {
            tl_fail(L->st, TL_EINPUT, "\"%s\" has more than %d names", key, max);
            return -1;
        }
        items[n++] = c;
    }
    return n;
}

#define MAX_IDS 256

static bool parse_result(loader *L, const cJSON *v, tl_block *b)
{
    const cJSON *items[MAX_IDS];
    int n = name_list(L, v, items, MAX_IDS, "result");
    if (n < 0)
        return false;
    b->result = tl_malloc((size_t)n, sizeof(int), "block results", L->st);
    if (!b->result)
        return false;
    b->nresult = n;
    for (int i = 0; i < n; i++) {
        if (!cJSON_IsString(items[i]))
            return tl_fail(L->st, TL_EINPUT, "\"result\" must hold names"), false;
        if ((b->result[i] = use(L, items[i]->valuestring)) < 0)
            return false;
    }
    return true;
}

static bool flow_if(loader *L, const cJSON *obj, tl_node *n, tl_flow *f)
{
    static const char *const keys[] = {"id", "op", "cond", "then", "else"};
    const cJSON *cond = cJSON_GetObjectItemCaseSensitive(obj, "cond");
    if (!check_keys(L, obj, keys, 5, "an if node"))
        return false;
    if (cJSON_IsNumber(cond))
        f->cond = (tl_arg){.slot = -1, .num = cond->valuedouble, .num_id = number_id(L, cond->valuedouble)};
    else if (!cJSON_IsString(cond))
        return tl_fail(L->st, TL_EINPUT, "\"cond\" must name a scalar"), false;
    else if ((f->cond.slot = use(L, cond->valuestring)) < 0)
        return false;
    if (!parse_block(L, cJSON_GetObjectItemCaseSensitive(obj, "then"), &f->then_b, 0, NULL, NULL, "then") ||
        !parse_block(L, cJSON_GetObjectItemCaseSensitive(obj, "else"), &f->else_b, 0, NULL, NULL, "else"))
        return false;
    if (f->then_b->nresult != n->nout || f->else_b->nresult != n->nout)
        return tl_fail(L->st, TL_EINPUT, "%d ids but the branches give %d (then) and %d (else) results",
                       n->nout, f->then_b->nresult, f->else_b->nresult), false;
    return true;
}

static bool flow_iterate(loader *L, const cJSON *obj, tl_node *n, tl_flow *f)
{
    static const char *const keys[] = {"id", "op", "count", "init", "state", "index", "body"};
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(obj, "state");
    const cJSON *index = cJSON_GetObjectItemCaseSensitive(obj, "index");
    const cJSON *params[MAX_IDS + 1];
    int slots[MAX_IDS + 1];
    if (!check_keys(L, obj, keys, 7, "an iterate node"))
        return false;
    if (!get_int(cJSON_GetObjectItemCaseSensitive(obj, "count"), &f->count) || f->count < 0)
        return tl_fail(L->st, TL_EINPUT, "\"count\" must be an integer literal from 0 to 2^53 - 1"), false;
    if (!parse_args(L, cJSON_GetObjectItemCaseSensitive(obj, "init"), &n->args, &n->nargs, "init"))
        return false;
    int ns = name_list(L, state, params, MAX_IDS, "state");
    if (ns < 0)
        return false;
    if (ns != n->nargs || ns != n->nout)
        return tl_fail(L->st, TL_EINPUT, "%d ids, %d init values and %d states must agree", n->nout, n->nargs, ns), false;
    if (index)
        params[ns] = index;
    if (!parse_block(L, cJSON_GetObjectItemCaseSensitive(obj, "body"), &f->body, ns + (index != NULL), params, slots, "body"))
        return false;
    f->state = tl_malloc((size_t)ns, sizeof(int), "iterate states", L->st);
    if (!f->state)
        return false;
    memcpy(f->state, slots, sizeof(int) * (size_t)ns);
    f->index_slot = index ? slots[ns] : -1;
    if (f->body->nresult != ns)
        return tl_fail(L->st, TL_EINPUT, "body gives %d results for %d states", f->body->nresult, ns), false;
    return true;
}

static bool flow_map(loader *L, const cJSON *obj, tl_node *n, tl_flow *f)
{
    static const char *const keys[] = {"id", "op", "args", "params", "body"};
    const cJSON *params[MAX_IDS];
    int slots[MAX_IDS];
    if (!check_keys(L, obj, keys, 5, "a map node"))
        return false;
    if (!parse_args(L, cJSON_GetObjectItemCaseSensitive(obj, "args"), &n->args, &n->nargs, "args"))
        return false;
    int np = name_list(L, cJSON_GetObjectItemCaseSensitive(obj, "params"), params, MAX_IDS, "params");
    if (np < 0)
        return false;
    if (np != n->nargs || n->nargs == 0)
        return tl_fail(L->st, TL_EINPUT, "%d args but %d params", n->nargs, np), false;
    if (n->nout != 1)
        return tl_fail(L->st, TL_EINPUT, "a map node has exactly one id"), false;
    if (!parse_block(L, cJSON_GetObjectItemCaseSensitive(obj, "body"), &f->body, np, params, slots, "body"))
        return false;
    f->params = tl_malloc((size_t)np, sizeof(int), "map params", L->st);
    if (!f->params)
        return false;
    memcpy(f->params, slots, sizeof(int) * (size_t)np);
    if (f->body->nresult != 1)
        return tl_fail(L->st, TL_EINPUT, "a map body gives exactly one result"), false;
    if (tl_map_compile(L->g, n, L->st))
        return false;
    tl_attrs *a = arena_alloc(L, sizeof *a, "a map node");
    if (!a)
        return false;
    tl_attrs_init(a);
    a->prog = f->prog;
    n->attrs = a;
    return true;
}

/* "unknown attribute "axis" (sum takes axes, keepdims; did you mean
 * "axes"?)" */
static void unknown_attribute(loader *L, tl_opcode op, const char *key)
{
    const char *takes[NATTR_KEYS];
    char list[256] = "";
    int n = 0;
    size_t k = 0;
    for (int i = 0; i < NATTR_KEYS; i++)
        if (tl_ops[op].attrs & attr_keys[i].bit) {
            takes[n++] = attr_keys[i].key;
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", attr_keys[i].key);
        }
    const char *near = tl_nearest(key, takes, n);
    if (!n)
        tl_fail(L->st, TL_EINPUT, "unknown attribute \"%.64s\" (%s takes no attributes)", key, tl_ops[op].name);
    else
        tl_fail(L->st, TL_EINPUT, "unknown attribute \"%.64s\" (%s takes %s%s%s%s)", key, tl_ops[op].name, list,
                near ? "; did you mean \"" : "", near ? near : "", near ? "\"?" : "");
}

/* A reduction given two tensors, or an elementwise op given one, was most
 * likely the other: "max(x, 0)" means maximum. */
static const struct twin {
    tl_opcode reduce, pairwise;
    const char *one, *two, *how; /* what the reduction gives, what the pairwise op gives, how it is written */
} twins[] = {
    {TL_OP_MAX, TL_OP_MAXIMUM, "largest element", "maximum", "maximum"},
    {TL_OP_MIN, TL_OP_MINIMUM, "smallest element", "minimum", "minimum"},
    {TL_OP_SUM, TL_OP_ADD, "sum", "sum", "add (a + b)"},
    {TL_OP_PROD, TL_OP_MUL, "product", "product", "mul (a * b)"},
};

static bool wrong_arity(loader *L, tl_opcode op)
{
    size_t k = strlen(L->st->msg);
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++) {
        const struct twin *t = &twins[i];
        if (op == t->reduce)
            snprintf(L->st->msg + k, sizeof L->st->msg - k, " (%s reduces one tensor, over \"axes\"; the "
                     "elementwise %s of two is %s)", tl_ops[op].name, t->two, t->how);
        else if (op == t->pairwise)
            snprintf(L->st->msg + k, sizeof L->st->msg - k, " (%s works elementwise on two tensors; the %s "
                     "of one, over \"axes\", is %s)", tl_ops[op].name, t->one, tl_ops[t->reduce].name);
    }
    return false;
}

static bool plain_checks(loader *L, tl_node *n, uint64_t seen);

static bool plain_op(loader *L, const cJSON *obj, tl_node *n)
{
    const tl_opinfo *info = &tl_ops[n->op];
    uint64_t seen = 0;
    tl_attrs *a = NULL; /* the node's own, made at its first attribute */
    bool have_args = false;
    for (const cJSON *c = obj->child; c; c = c->next) {
        const char *k = c->string;
        if ((k[0] == 'i' && !strcmp(k, "id")) || (k[0] == 'o' && !strcmp(k, "op")))
            continue;
        if (k[0] == 'a' && !strcmp(k, "args")) {
            have_args = true;
            if (!parse_args(L, c, &n->args, &n->nargs, "args"))
                return false;
            continue;
        }
        uint64_t bit = 0;
        for (int i = 0; i < NATTR_KEYS && !bit; i++)
            if ((info->attrs & attr_keys[i].bit) && !strcmp(c->string, attr_keys[i].key))
                bit = attr_keys[i].bit;
        L->bad_key = c->string;
        if (!bit)
            return unknown_attribute(L, n->op, c->string), false;
        if (!a) {
            if (!(a = arena_alloc(L, sizeof *a, "node attributes")))
                return false;
            tl_attrs_init(a);
            n->attrs = a;
        }
        if (!parse_attr(L, a, n->op, bit, c, c->string))
            return false;
        L->bad_key = NULL;
        seen |= bit;
    }
    if (!have_args)
        return tl_fail(L->st, TL_EINPUT, "missing \"args\""), false;
    return plain_checks(L, n, seen);
}

/* What a plain node's arguments and attributes (seen) must satisfy together. */
static bool plain_checks(loader *L, tl_node *n, uint64_t seen)
{
    const tl_opinfo *info = &tl_ops[n->op];
    uint64_t missing = required_attrs(n->op) & ~seen;
    for (int i = 0; missing && i < NATTR_KEYS; i++)
        if (missing & attr_keys[i].bit)
            return tl_fail(L->st, TL_EINPUT, "missing attribute \"%s\"", attr_keys[i].key), false;
    if (tl_op_check_arity(n->op, n->nargs, L->st))
        return wrong_arity(L, n->op);
    if (n->op == TL_OP_BATCH_NORM && n->nout == 3 && n->attrs->training != 1)
        return tl_fail(L->st, TL_EINPUT, "batch_norm gives its batch mean and variance only with \"training\": true; "
                       "\"id\" has 3 names"), false;
    if (n->nout != 1 && !(n->op == TL_OP_BATCH_NORM && n->nout == 3))
        return tl_fail(L->st, TL_EINPUT, "%s gives %s; \"id\" has %d names", info->name,
                       n->op == TL_OP_BATCH_NORM ? "one value (or three in training mode: the value, the batch mean "
                                                   "and the batch variance)" : "one value", n->nout), false;
    if (n->op == TL_OP_RESIZE && !n->attrs->nsize == !n->attrs->nscale)
        return tl_fail(L->st, TL_EINPUT, n->attrs->nsize ? "give \"size\" or \"scale\", not both"
                                                         : "missing attribute \"size\" or \"scale\""), false;
    if (n->op == TL_OP_RANDOM_UNIFORM && !(n->attrs->low < n->attrs->high)) {
        char lo[TL_FMT_LEN], hi[TL_FMT_LEN]; /* every digit: 1.0000001 and 1.0 differ */
        tl_fmt_f64(lo, sizeof lo, n->attrs->low);
        tl_fmt_f64(hi, sizeof hi, n->attrs->high);
        return tl_fail(L->st, TL_EINPUT, "\"low\" (%s) must be below \"high\" (%s)", lo, hi), false;
    }
    if (n->op == TL_OP_CLAMP && !n->attrs->has_min && !n->attrs->has_max)
        return tl_fail(L->st, TL_EINPUT, "clamp needs \"min\", \"max\" or both"), false;
    if (n->op == TL_OP_TAKE && (n->nargs == 2) == ((seen & TL_A_INDICES) != 0))
        return tl_fail(L->st, TL_EINPUT, n->nargs == 2
                       ? "give the indices as the attribute \"indices\" or as a second argument, not both"
                       : "missing the indices: attribute \"indices\" or a second argument"), false;
    return true;
}

static bool parse_node(loader *L, const cJSON *obj, tl_node *n, int pos)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(obj, "op");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "id");
    const cJSON *ids[MAX_IDS];
    n->flow = FLOW_NONE;
    n->attrs = &tl_attrs_default;
    n->index = L->g->nnodes++;
    if (!cJSON_IsObject(obj))
        return tl_fail(L->st, TL_EINPUT, "node %d: must be an object", pos), false;
    if (!id)
        return tl_fail(L->st, TL_EINPUT, "node %d: missing \"id\"", pos), false;
    int nid = name_list(L, id, ids, MAX_IDS, "id");
    if (nid < 0 || !cJSON_IsString(ids[0]))
        return tl_fail(L->st, TL_EINPUT, "node %d: \"id\" must be a name or an array of names", pos), false;
    n->name = ids[0]->valuestring; /* until it is defined, below */
    if (L->table && n->name != L->known_name) /* where define() will look: in cache by then */
        __builtin_prefetch(&L->table[tl_name_hash(n->name) & (uint64_t)(L->tcap - 1)]);
    if (!cJSON_IsString(op))
        return tl_fail(L->st, TL_EINPUT, "node \"%.64s\": missing or non-string \"op\"", n->name), false;
    n->op = tl_op_lookup(op->valuestring);
    if (n->op == TL_OP_COUNT)
    {
        const char *near = tl_op_suggest(op->valuestring);
        return tl_fail(L->st, TL_EINPUT, "node \"%.64s\": unknown op \"%.64s\"%s%s%s", n->name,
                       op->valuestring, near ? " (did you mean \"" : " (tl ops lists them)",
                       near ? near : "", near ? "\"?)" : ""), false;
    }
    n->nout = nid;
    bool ok = true;
    tl_flow *f = NULL;
    if (tl_ops[n->op].kind == TL_KIND_FLOW) {
        if (!(f = arena_alloc(L, sizeof *f, "a node")))
            return tl_wrap(L->st, "node \"%.64s\" (%s)", n->name, op->valuestring), false;
        *f = flow_none;
        n->flow = f;
    }
    switch (n->op) {
    case TL_OP_IF: ok = flow_if(L, obj, n, f); break;
    case TL_OP_ITERATE: ok = flow_iterate(L, obj, n, f); break;
    case TL_OP_MAP: ok = flow_map(L, obj, n, f); break;
    default: ok = plain_op(L, obj, n);
    }
    /* Ids are defined after the node's own arguments and blocks are read. */
    if (ok && !(n->out = arena_ints(L, (size_t)nid, "node ids")))
        ok = false;
    for (int i = 0; ok && i < nid; i++)
        n->out[i] = -1; /* not defined (yet): hide() skips it */
    for (int i = 0; ok && i < nid; i++)
        ok = (n->out[i] = define(L, ids[i], TL_SLOT_NODE, "\"id\"")) >= 0;
    if (ok)
        n->name = L->g->slot_name[n->out[0]];
    else
        tl_wrap(L->st, "node \"%.64s\" (%s)", n->name, op->valuestring);
    return ok;
}

static void hide(loader *L, const tl_block *b, int nparams, const int *params)
{
    for (int i = 0; i < nparams; i++)
        L->visible[params[i]] = false;
    for (int i = 0; i < b->nnodes; i++)
        for (int k = 0; k < b->nodes[i].nout && b->nodes[i].out; k++)
            if (b->nodes[i].out[k] >= 0)
                L->visible[b->nodes[i].out[k]] = false;
}

static bool parse_nodes(loader *L, const cJSON *arr, tl_block *b)
{
    if (!cJSON_IsArray(arr))
        return tl_fail(L->st, TL_EINPUT, "\"nodes\" must be an array"), false;
    int n = cJSON_GetArraySize(arr);
    b->nodes = tl_calloc((size_t)n, sizeof(tl_node), "graph nodes", L->st);
    if (!b->nodes)
        return false;
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        b->nnodes = i + 1;
        if (!parse_node(L, c, &b->nodes[i], i))
            return false;
    }
    return true;
}

static bool parse_block(loader *L, const cJSON *obj, tl_block **out, int nparams,
                        const cJSON *const *params, int *param_slots, const char *what)
{
    static const char *const keys[] = {"nodes", "result"};
    if (!cJSON_IsObject(obj))
        return tl_fail(L->st, TL_EINPUT, "\"%s\" must be a block {\"nodes\", \"result\"}", what), false;
    if (!check_keys(L, obj, keys, 2, what))
        return false;
    tl_block *b = *out = tl_calloc(1, sizeof *b, "a block", L->st);
    if (!b)
        return false;
    for (int i = 0; i < nparams; i++)
        if ((param_slots[i] = define(L, params[i], TL_SLOT_PARAM, "a parameter")) < 0)
            return hide(L, b, i, param_slots), false;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(obj, "result");
    bool ok = parse_nodes(L, cJSON_GetObjectItemCaseSensitive(obj, "nodes"), b);
    if (ok && !res)
        ok = !tl_fail(L->st, TL_EINPUT, "%s: missing \"result\"", what);
    if (ok)
        ok = parse_result(L, res, b);
    hide(L, b, nparams, param_slots);
    return ok;
}

/* ---------- inputs, consts, outputs ---------- */

static bool const_data(loader *L, const cJSON *v, tl_const *c, tl_dtype untyped);
static bool const_file(loader *L, const cJSON *v, tl_const *c);

/* Whether a number written for a tensor of dtype dt is one of its values:
 * an integer in range (below 2^53 for i64: past it a double has rounded
 * what was written), or for f32 not too large (inf written stays inf). */
static bool number_fits(loader *L, double v, tl_dtype dt, const char *what)
{
    char num[TL_FMT_LEN];
    tl_fmt_f64(num, sizeof num, v);
    if (tl_dtype_is_int(dt) && !(v == floor(v) && (dt == TL_I32 ? v >= -2147483648.0 && v <= 2147483647.0
                                                                : fabs(v) < 9007199254740992.0)))
        return tl_fail(L->st, TL_EINPUT, "%s is %s: it must be an integer in %s's range%s", what, num,
                       tl_dtype_name(dt), dt == TL_I64 ? " (below 2^53 in magnitude)" : ""), false;
    if (dt == TL_F32 && tl_f32_overflows(v))
        return tl_fail(L->st, TL_EINPUT, "%s is %s, too large for f32 (write \"inf\")", what, num), false;
    return true;
}

/* An input's "default": a number (a scalar), a data or fill constant (of
 * its own dtype, else the input's, else f64) or a file constant. */
static bool parse_default(loader *L, const cJSON *v, tl_input *in)
{
    tl_const *c = in->dflt = tl_calloc(1, sizeof *c, "a default", L->st);
    double x;
    if (!c)
        return false;
    c->slot = -1;
    c->typed = true;
    tl_dtype dt = in->has_dtype ? in->dtype : TL_F64;
    bool ok;
    if (get_num(v, &x)) {
        c->kind = TL_CONST_DATA;
        ok = number_fits(L, x, dt, "the number") && (c->tensor = tl_tensor_new(dt, 0, NULL, L->st)) != NULL;
        if (ok)
            tl_tensor_set(c->tensor, 0, x);
    } else if (cJSON_IsObject(v) && cJSON_GetObjectItemCaseSensitive(v, "file")) {
        ok = const_file(L, v, c);
    } else if (cJSON_IsObject(v)) {
        ok = const_data(L, v, c, dt);
        c->typed = true;
    } else {
        ok = !tl_fail(L->st, TL_EINPUT, "must be a number or a constant object ({\"dtype\", \"shape\", "
                      "\"data\"}, {\"shape\", \"fill\"} or {\"file\", \"key\"})");
    }
    if (!ok)
        tl_wrap(L->st, "input \"%s\": \"default\"", in->name);
    return ok;
}

static bool parse_input(loader *L, const cJSON *v, tl_input *in)
{
    static const char *const keys[] = {"name", "dtype", "shape", "default"};
    tl_graph *g = L->g;
    const cJSON *name = v;
    in->ndim = -1;
    if (cJSON_IsObject(v)) {
        if (!check_keys(L, v, keys, 4, "an input"))
            return false;
        name = cJSON_GetObjectItemCaseSensitive(v, "name");
    }
    if ((in->slot = define(L, name, TL_SLOT_INPUT, "an input")) < 0)
        return false;
    in->name = g->slot_name[in->slot];
    if (!cJSON_IsObject(v))
        return true;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(v, "shape");
    if (dt && (!cJSON_IsString(dt) || !tl_dtype_parse(dt->valuestring, &in->dtype)))
        return tl_fail(L->st, TL_EINPUT, "input \"%s\": \"dtype\" must be %s", in->name, DTYPE_CHOICES), false;
    in->has_dtype = dt != NULL;
    const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(v, "default");
    if (dflt && !parse_default(L, dflt, in))
        return false;
    if (!shape || cJSON_IsNull(shape))
        return true;
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > TL_MAXDIM)
        return tl_fail(L->st, TL_EINPUT, "input \"%s\": \"shape\" must be an array of at most %d entries", in->name, TL_MAXDIM), false;
    in->ndim = 0;
    for (const cJSON *c = shape->child; c; c = c->next) {
        tl_dimspec *d = &in->dims[in->ndim++];
        if (cJSON_IsNull(c))
            d->kind = TL_DIM_ANY;
        else if (get_int(c, &d->size) && d->size >= 0)
            d->kind = TL_DIM_FIXED;
        else if (cJSON_IsString(c) && c->valuestring[0]) {
            d->kind = TL_DIM_VAR;
            for (d->var = 0; d->var < g->nsizevars && strcmp(g->sizevars[d->var], c->valuestring); d->var++)
                ;
            if (d->var == g->nsizevars) {
                if (!grow((void **)&g->sizevars, g->nsizevars + 1, sizeof(char *), L->st))
                    return false;
                if (!(g->sizevars[g->nsizevars++] = tl_strdup(c->valuestring, L->st)))
                    return false;
            }
        } else
            return tl_fail(L->st, TL_EINPUT, "input \"%s\": a shape entry must be a size, null or a size name", in->name), false;
    }
    return true;
}

/* Numbers (and strings) in a nested data array; -1 past a sane depth. */
static int64_t count_leaves(const cJSON *v, int depth)
{
    if (!cJSON_IsArray(v))
        return 1;
    if (depth > TL_MAXDIM)
        return -1;
    int64_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        int64_t k = count_leaves(c, depth + 1);
        if (k < 0)
            return -1;
        n += k;
    }
    return n;
}

static bool const_data(loader *L, const cJSON *v, tl_const *c, tl_dtype untyped)
{
    static const char *const keys[] = {"dtype", "shape", "data", "fill"};
    int64_t shape[TL_MAXDIM];
    int nd = 0;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(v, "data");
    const cJSON *fill = cJSON_GetObjectItemCaseSensitive(v, "fill");
    tl_dtype dtype = untyped;
    double fv;
    if (!check_keys(L, v, keys, 4, "a constant"))
        return false;
    if (dt && (!cJSON_IsString(dt) || !tl_dtype_parse(dt->valuestring, &dtype)))
        return tl_fail(L->st, TL_EINPUT, "\"dtype\" must be %s", DTYPE_CHOICES), false;
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(v, "shape");
    if (!sh) /* a constant's keys are not attributes */
        return tl_fail(L->st, TL_EINPUT, "a constant with \"data\" or \"fill\" needs \"shape\" (a list of "
                       "integers; [] for a scalar)"), false;
    if (!get_int_list(L, sh, false, shape, &nd, "shape"))
        return false;
    if (!data == !fill)
        return tl_fail(L->st, TL_EINPUT, "give exactly one of \"data\" and \"fill\""), false;
    if (fill && !get_num(fill, &fv))
        return tl_fail(L->st, TL_EINPUT, "\"fill\" must be a number"), false;
    if (fill && !number_fits(L, fv, dtype, "\"fill\""))
        return false;
    int64_t numel;
    if (tl_shape_numel(nd, shape, &numel, L->st))
        return tl_wrap(L->st, "\"shape\""), false;
    c->typed = dt != NULL;
    if (fill) { /* made when first used, charged to that run's memory budget */
        c->kind = TL_CONST_FILL;
        c->num = fv;
        c->dtype = dtype;
        c->ndim = nd;
        memcpy(c->shape, shape, sizeof(int64_t) * (size_t)nd);
        return true;
    }
    /* the text bounds the size: compare counts before allocating */
    int64_t leaves = count_leaves(data, 0);
    if (leaves < 0)
        return tl_fail(L->st, TL_EINPUT, "\"data\" nests deeper than %d dimensions", TL_MAXDIM), false;
    if (leaves != numel) {
        char d[96];
        return tl_fail(L->st, TL_EINPUT, "\"data\" has %lld values, expected %lld for %s",
                       (long long)leaves, (long long)numel, tl_shape_desc(dtype, nd, shape, d, sizeof d)), false;
    }
    c->kind = TL_CONST_DATA;
    if (!(c->tensor = tl_tensor_new(dtype, nd, shape, L->st)))
        return false;
    return tl_json_fill(c->tensor, data, L->st) == TL_OK;
}

/* Whether path, with every symbolic link resolved, still lies in dir (the
 * graph's folder, "" for the current one).  A path that does not resolve
 * (no such file) passes here and fails when read. */
static bool resolves_inside(const char *dir, const char *path)
{
    char *rd = realpath(dir[0] ? dir : ".", NULL), *rp = realpath(path, NULL);
    size_t n = rd ? strlen(rd) : 0;
    bool ok = !rd || !rp || (!strncmp(rp, rd, n) && (rp[n] == '/' || (n == 1 && rd[0] == '/')));
    free(rd);
    free(rp);
    return ok;
}

static bool const_file(loader *L, const cJSON *v, tl_const *c)
{
    static const char *const keys[] = {"file", "key"};
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(v, "file");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(v, "key");
    if (!check_keys(L, v, keys, 2, "a file constant"))
        return false;
    if (!cJSON_IsString(file) || !file->valuestring[0] || (key && !cJSON_IsString(key)))
        return tl_fail(L->st, TL_EINPUT, "\"file\" and \"key\" must be strings"), false;
    const char *f = file->valuestring;
    size_t fl = strlen(f);
    if (!key && fl >= 4 && !strcmp(f + fl - 4, ".npz"))
        return tl_fail(L->st, TL_EINPUT, "file \"%.200s\" is an .npz: name the member with \"key\"", f), false;
    if (!L->opts.allow_outside_files && !tl_path_inside_folder(f))
        return tl_fail(L->st, TL_EINPUT, "file \"%.200s\" is outside the graph's folder "
                       "(absolute or climbing out with ..; --allow-outside-files permits it)", f), false;
    size_t n = strlen(L->dir) + strlen(f) + 2;
    if (!(c->path = tl_malloc(n, 1, "a path", L->st)))
        return false;
    snprintf(c->path, n, "%s%s", f[0] == '/' ? "" : L->dir, f);
    if (!L->opts.allow_outside_files && !resolves_inside(L->dir, c->path))
        return tl_fail(L->st, TL_EINPUT, "file \"%.200s\" is outside the graph's folder once links "
                       "are followed (--allow-outside-files permits it)", f), false;
    if (key && !(c->key = tl_strdup(key->valuestring, L->st)))
        return false;
    c->kind = TL_CONST_FILE;
    return true;
}

static bool parse_consts(loader *L, const cJSON *obj)
{
    tl_graph *g = L->g;
    if (!obj)
        return true;
    if (!cJSON_IsObject(obj))
        return tl_fail(L->st, TL_EINPUT, "\"consts\" must be an object"), false;
    int n = cJSON_GetArraySize(obj);
    if (!(g->consts = tl_calloc((size_t)n, sizeof(tl_const), "constants", L->st)))
        return false;
    for (const cJSON *v = obj->child; v; v = v->next) {
        tl_const *c = &g->consts[g->nconsts];
        cJSON name = {.type = cJSON_String, .valuestring = v->string};
        if ((c->slot = define(L, &name, TL_SLOT_CONST, "a constant")) < 0)
            return false;
        c->name = g->slot_name[c->slot];
        g->slot_const[c->slot] = g->nconsts++;
        bool ok = true;
        if (get_num(v, &c->num))
            c->kind = TL_CONST_WEAK;
        else if (cJSON_IsObject(v) && cJSON_GetObjectItemCaseSensitive(v, "file"))
            ok = const_file(L, v, c);
        else if (cJSON_IsObject(v))
            ok = const_data(L, v, c, TL_F64);
        else
            ok = !tl_fail(L->st, TL_EINPUT, "must be a number, \"nan\", \"inf\", \"-inf\" or an object");
        if (!ok)
            return tl_wrap(L->st, "const \"%s\"", c->name), false;
    }
    return true;
}

static bool parse_outputs(loader *L, const cJSON *v)
{
    tl_graph *g = L->g;
    const cJSON *items[MAX_IDS];
    int n = name_list(L, v, items, MAX_IDS, "outputs");
    if (n < 0)
        return false;
    if (!(g->outputs = tl_malloc((size_t)n, sizeof(int), "outputs", L->st)))
        return false;
    for (int i = 0; i < n; i++) {
        if (!cJSON_IsString(items[i]))
            return tl_fail(L->st, TL_EINPUT, "\"outputs\" must hold names"), false;
        if ((g->outputs[i] = use(L, items[i]->valuestring)) < 0)
            return tl_wrap(L->st, "outputs"), false;
        for (int k = 0; k < i; k++)
            if (g->outputs[k] == g->outputs[i])
                return tl_fail(L->st, TL_EINPUT, "outputs: \"%s\" is listed twice", items[i]->valuestring), false;
        g->noutputs = i + 1;
    }
    return true;
}

/* ---------- last uses ---------- */

static void mark_uses(int *last, const tl_block *b, int pos);

static void mark_node(int *last, const tl_node *n, int pos)
{
    for (int i = 0; i < n->nargs; i++)
        if (n->args[i].slot >= 0)
            last[n->args[i].slot] = pos;
    const tl_flow *f = n->flow;
    if (f->cond.slot >= 0)
        last[f->cond.slot] = pos;
    if (f->then_b)
        mark_uses(last, f->then_b, pos);
    if (f->else_b)
        mark_uses(last, f->else_b, pos);
    if (f->body)
        mark_uses(last, f->body, pos);
}

static void mark_uses(int *last, const tl_block *b, int pos)
{
    for (int i = 0; i < b->nnodes; i++)
        mark_node(last, &b->nodes[i], pos);
    for (int i = 0; i < b->nresult; i++)
        last[b->result[i]] = pos;
}

/* Fills free_after for the nodes of b: each local value is released right
 * after the node that reads it last (or defines it, if nothing reads it),
 * unless the block hands it on as a result or output; so is each of the
 * values from outside it in `outer` (the graph's inputs, at the top) that
 * a node reads: the run's own reference to an input goes at its last use
 * (its memory with it, when the caller gave the run its references). */
static bool plan_frees(loader *L, int *last, tl_block *b, const int *keep, int nkeep, const int *outer, int nouter)
{
    for (int i = 0; i < nouter; i++)
        last[outer[i]] = -1;
    for (int i = 0; i < b->nnodes; i++)
        for (int k = 0; k < b->nodes[i].nout; k++)
            last[b->nodes[i].out[k]] = i;
    for (int i = 0; i < b->nnodes; i++)
        mark_node(last, &b->nodes[i], i);
    for (int i = 0; i < nkeep; i++)
        last[keep[i]] = -1;
    /* count, make room, then fill in the same order */
    for (int i = 0; i < nouter; i++)
        if (last[outer[i]] >= 0)
            b->nodes[last[outer[i]]].nfree++;
    for (int i = 0; i < b->nnodes; i++)
        for (int k = 0; k < b->nodes[i].nout; k++)
            if (last[b->nodes[i].out[k]] >= 0)
                b->nodes[last[b->nodes[i].out[k]]].nfree++;
    for (int i = 0; i < b->nnodes; i++) {
        tl_node *m = &b->nodes[i];
        if (m->nfree && !(m->free_after = arena_ints(L, (size_t)m->nfree, "a plan of frees")))
            return false;
        m->nfree = 0;
    }
    for (int i = 0; i < nouter; i++)
        if (last[outer[i]] >= 0) {
            tl_node *m = &b->nodes[last[outer[i]]];
            m->free_after[m->nfree++] = outer[i];
        }
    for (int i = 0; i < b->nnodes; i++) {
        tl_node *n = &b->nodes[i];
        for (int k = 0; k < n->nout; k++) {
            int s = n->out[k], at = last[s];
            if (at >= 0) {
                tl_node *m = &b->nodes[at];
                m->free_after[m->nfree++] = s;
            }
        }
    }
    /* an iterate's state values go after their last use in a step too
     * (iterate binds the next ones after the step): a step's last reader
     * can then write over its state (scatter_add, eval.c) */
    for (int i = 0; i < b->nnodes; i++) {
        tl_node *n = &b->nodes[i];
        tl_block *sub[3] = {n->flow->then_b, n->flow->else_b, n->flow->body};
        bool it = n->op == TL_OP_ITERATE && n->flow->state;
        for (int k = 0; k < 3; k++)
            if (sub[k] && !plan_frees(L, last, sub[k], sub[k]->result, sub[k]->nresult, it ? n->flow->state : NULL,
                                      it ? n->nargs : 0))
                return false;
    }
    return true;
}

/* ---------- JSON document ---------- */

static bool utf8_ok(const unsigned char *s, size_t n, size_t *bad)
{
    for (size_t i = 0; i < n;) {
        uint64_t w;
        if (i + 8 <= n && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ull))) {
            i += 8; /* eight ASCII bytes */
            continue;
        }
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4))
            goto bad;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                goto bad;
        if ((len == 3 && c == 0xE0 && s[i + 1] < 0xA0) || (len == 3 && c == 0xED && s[i + 1] >= 0xA0) ||
            (len == 4 && c == 0xF0 && s[i + 1] < 0x90) || (len == 4 && c == 0xF4 && s[i + 1] >= 0x90))
            goto bad;
        i += len;
        continue;
    bad:
        *bad = i;
        return false;
    }
    return true;
}


/* ---- what a malformed document was missing: a strict JSON scanner run
 * after cJSON has refused the text, to name the first thing expected ---- */

typedef struct jscan {
    const char *s;
    size_t n, i;
    const char *want; /* set at the first error, with i there */
} jscan;

static void jws(jscan *j)
{
    while (j->i < j->n && strchr(" \t\r\n", j->s[j->i]) && j->s[j->i])
        j->i++;
}

static bool jfail(jscan *j, const char *want)
{
    j->want = want;
    return false;
}

static bool jvalue(jscan *j, int depth);

static bool jstring(jscan *j)
{
    j->i++; /* the opening quote */
    while (j->i < j->n && j->s[j->i] != '"') {
        if (j->s[j->i] == '\\') {
            j->i++;
            if (j->i >= j->n)
                break;
            if (j->s[j->i] == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (j->i + (size_t)k >= j->n || !isxdigit((unsigned char)j->s[j->i + (size_t)k]))
                        return jfail(j, "four hex digits after \\u");
                j->i += 4;
            } else if (!strchr("\"\\/bfnrt", j->s[j->i]) || !j->s[j->i]) {
                return jfail(j, "an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX");
            }
        }
        j->i++;
    }
    if (j->i >= j->n)
        return jfail(j, "a closing '\"' (the string never ends)");
    j->i++;
    return true;
}

static bool jcontainer(jscan *j, int depth, bool object)
{
    char close = object ? '}' : ']';
    j->i++;
    jws(j);
    if (j->i < j->n && j->s[j->i] == close) {
        j->i++;
        return true;
    }
    for (;;) {
        jws(j);
        if (object) {
            if (j->i < j->n && j->s[j->i] == '}')
                return jfail(j, "a string key (no comma before '}')");
            if (j->i >= j->n || j->s[j->i] != '"')
                return jfail(j, "a string key in double quotes");
            if (!jstring(j))
                return false;
            jws(j);
            if (j->i >= j->n || j->s[j->i] != ':')
                return jfail(j, "':' after the key");
            j->i++;
            jws(j);
        } else if (j->i < j->n && j->s[j->i] == ']') {
            return jfail(j, "a value (no comma before ']')");
        }
        if (!jvalue(j, depth + 1))
            return false;
        jws(j);
        if (j->i < j->n && j->s[j->i] == ',') {
            j->i++;
            continue;
        }
        if (j->i < j->n && j->s[j->i] == close) {
            j->i++;
            return true;
        }
        return jfail(j, object ? "',' or '}' after a value in an object" : "',' or ']' after a value in an array");
    }
}

static bool jvalue(jscan *j, int depth)
{
    jws(j);
    if (j->i >= j->n)
        return jfail(j, "a value");
    char c = j->s[j->i];
    if (c == '{' || c == '[')
        return depth > 1000 ? jfail(j, "less nesting") : jcontainer(j, depth, c == '{');
    if (c == '"')
        return jstring(j);
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++)
        if (c == words[w][0]) {
            size_t k = strlen(words[w]);
            if (j->n - j->i < k || strncmp(j->s + j->i, words[w], k))
                return jfail(j, "true, false or null");
            j->i += k;
            return true;
        }
    size_t k = j->i;
    if (k < j->n && j->s[k] == '-')
        k++;
    if (k >= j->n || !isdigit((unsigned char)j->s[k]))
        return jfail(j, "a value: an object, array, string (in double quotes), number, true, false or null");
    if (j->s[k] == '0' && k + 1 < j->n && isdigit((unsigned char)j->s[k + 1]))
        return j->i = k + 1, jfail(j, "no leading zero in a number");
    while (k < j->n && isdigit((unsigned char)j->s[k]))
        k++;
    if (k < j->n && j->s[k] == '.') {
        if (++k >= j->n || !isdigit((unsigned char)j->s[k]))
            return j->i = k, jfail(j, "a digit after the decimal point");
        while (k < j->n && isdigit((unsigned char)j->s[k]))
            k++;
    }
    if (k < j->n && (j->s[k] == 'e' || j->s[k] == 'E')) {
        k++;
        if (k < j->n && (j->s[k] == '+' || j->s[k] == '-'))
            k++;
        if (k >= j->n || !isdigit((unsigned char)j->s[k]))
            return j->i = k, jfail(j, "a digit in the exponent");
        while (k < j->n && isdigit((unsigned char)j->s[k]))
            k++;
    }
    j->i = k;
    return true;
}

/* Where the text first breaks JSON and what was expected there (false
 * when the scanner finds nothing wrong). */
static bool json_expected(const char *text, size_t len, size_t *off, char *buf, size_t cap)
{
    jscan j = {text, len, 0, NULL};
    if (jvalue(&j, 0)) {
        jws(&j);
        if (j.i >= len)
            return false;
        j.want = "the end of the text";
    }
    *off = j.i;
    char found[32];
    unsigned char c = j.i < len ? (unsigned char)text[j.i] : 0;
    if (j.i >= len)
        snprintf(found, sizeof found, "the end of the text");
    else if (isprint(c))
        snprintf(found, sizeof found, "'%c'", c);
    else
        snprintf(found, sizeof found, "byte 0x%02x", c);
    snprintf(buf, cap, "expected %s, found %s", j.want, found);
    return true;
}

static void line_col(const char *text, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else
            (*col)++;
    }
}

/* ---------- the top-level nodes, a node at a time ----------
 *
 * A large graph is mostly its "nodes" array.  Rather than one cJSON tree
 * of the whole text (about ten times the text in memory), the fast path
 * parses the document with that array's contents cut out (the skeleton),
 * then each element of the array on its own, turning it into a node and
 * freeing it before the next.  The pieces are cJSON's own grammar put
 * together, so the fast path takes exactly the texts the whole-document
 * parse takes.  It gives up at anything unusual or wrong, and the
 * whole-document path (parse_dom) then loads the text again from the
 * start: every error message comes from there, as it always has. */

struct stream {
    const char *text;
    size_t len;
    size_t lb, rb; /* the top-level nodes array's '[' and ']' */
    int count;     /* the objects in it */
    size_t pos;    /* where the next is read */
    const char *map; /* a mapped file whose pages read can be dropped, or NULL */
    size_t dropped;  /* dropped below this offset */
    size_t page;     /* the page size */
};

/* cJSON's whitespace: any byte up to a space, but a NUL (json_hazard's)
 * stops here too. */
static size_t skip_ws(const char *t, size_t i, size_t end)
{
    while (i < end && (unsigned char)t[i] <= 32 && t[i])
        i++;
    return i;
}

/* One pass over the text: false where json_hazard would stop (or at more),
 * or unless the text is an object holding a key "nodes" (as written, no
 * escapes) once, whose value is an array; its brackets and objects are
 * noted in s.  What follows the object must be whitespace. */
static bool prescan(stream *s)
{
    const unsigned char *t = (const unsigned char *)s->text;
    size_t n = s->len, i = skip_ws(s->text, 0, n);
    int depth = 0, count = 0;
    bool key = false, in_nodes = false, found = false;
    if (i >= n || t[i] != '{')
        return false;
    for (; i < n; i++) {
        unsigned c = t[i];
        if (!(byte_class[c] & B_SPECIAL))
            continue;
        if (c == '"') {
            size_t start = i++;
            for (;; i++) {
                while (i < n && !(byte_class[t[i]] & B_STOP))
                    i++;
                if (i >= n)
                    return false;
                c = t[i];
                if (c < 0x20)
                    return false;
                if (c == '"')
                    break;
                if (c == '\\') {
                    if (i + 1 >= n || t[i + 1] < 0x20 ||
                        (t[i + 1] == 'u' && i + 5 < n && !memcmp(t + i + 2, "0000", 4)))
                        return false;
                    i++;
                }
            }
            if (depth == 1 && key) {
                key = false;
                if (i - start == 6 && !memcmp(t + start + 1, "nodes", 5)) {
                    if (found)
                        return false;
                    size_t j = skip_ws(s->text, i + 1, n);
                    if (j >= n || t[j] != ':')
                        return false;
                    j = skip_ws(s->text, j + 1, n);
                    if (j >= n || t[j] != '[')
                        return false;
                    found = in_nodes = true;
                    s->lb = i = j;
                    depth = 2;
                }
            }
            continue;
        }
        if (c == 0)
            return false;
        if (c == '{' || c == '[') {
            if (++depth > MAX_JSON_DEPTH)
                return false;
            if (depth == 1)
                key = true;
            if (in_nodes && depth == 3 && (c != '{' || count == INT32_MAX))
                return false;
            count += in_nodes && depth == 3;
        } else if (c == '}' || c == ']') {
            if (--depth == 1 && in_nodes) {
                s->rb = i;
                in_nodes = false;
            }
            if (depth <= 0)
                break;
        } else if (c == ',' && depth == 1) {
            key = true;
        }
    }
    if (i >= n || depth != 0 || !found || in_nodes)
        return false;
    for (i++; i < n; i++)
        if (!strchr(" \t\r\n", t[i]) || !t[i])
            return false;
    s->count = count;
    return true;
}

/* Pages of a mapped file below upto leave this process's memory (read
 * again from the file should they be needed): at most DROP_STEP kept. */
#define DROP_STEP ((size_t)1 << 20)
static void drop_pages(stream *s, size_t upto, bool all)
{
    if (!s->map)
        return;
    size_t pg = s->page;
    if (all) {
        madvise((void *)s->map, s->len, MADV_DONTNEED);
        s->dropped = 0;
        return;
    }
    upto &= ~(pg - 1);
    if (upto >= s->dropped + DROP_STEP) {
        madvise((void *)(s->map + s->dropped), upto - s->dropped, MADV_DONTNEED);
        s->dropped = upto;
    }
}

/* ---- the common node, read without cJSON ----
 *
 * Nearly every node of a large graph is {"id": NAME, "op": NAME, "args":
 * [NAME or NUMBER, ...]}, and cJSON spent most of the load on those: a
 * malloc and a free for every key and value, strtod for every number.
 * flat_read reads that one shape straight from the text: an object with
 * exactly the keys "id", "op" and "args", each once, in any order; the id
 * and the op strings, the args an array of strings and numbers; strings
 * of name bytes only ([A-Za-z0-9_]), numbers in JSON's grammar that
 * flat_number converts exactly.  Anything else (another key, another
 * byte, an array of ids, a nested value, another number, a flow op, more
 * than FLAT_ARGS args or FLAT_TEXT bytes of strings, anything malformed)
 * makes it return false, and that element goes through cJSON as before.
 * What it takes, cJSON takes too and reads the same (the same strings, the
 * same double bits), and flat_node makes of it the node parse_node would
 * make. */

#define FLAT_ARGS 16
#define FLAT_TEXT 1024

typedef struct flat {
    char *id, *op;        /* in text, below */
    tl_opcode code;       /* op's */
    int nargs;
    char *arg[FLAT_ARGS]; /* a name in text, or NULL for num[i] */
    double num[FLAT_ARGS];
    size_t used;
    char text[FLAT_TEXT]; /* the strings, each ending in a NUL */
} flat;

/* The string at t[*i] == '"' when it holds only name bytes (all a valid
 * name or op has), copied to f->text. */
static char *flat_string(flat *f, const char *t, size_t *i, size_t end)
{
    size_t a = *i + 1, b = a;
    while (b < end && (byte_class[(unsigned char)t[b]] & B_NAME))
        b++;
    if (b >= end || t[b] != '"' || b - a >= FLAT_TEXT - f->used)
        return NULL;
    char *s = memcpy(f->text + f->used, t + a, b - a);
    s[b - a] = '\0';
    f->used += b - a + 1;
    *i = b + 1;
    return s;
}

static bool digit_at(const char *t, size_t p, size_t end)
{
    return p < end && t[p] >= '0' && t[p] <= '9';
}

/* The powers of ten a double holds exactly. */
static const double exact_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number in JSON's grammar at t[*i] whose digits, read as an integer w,
 * are at most 2^53, times 10^e with |e| <= 22: then w and 10^|e| are
 * doubles, and w * 10^e (or w / 10^-e) one correctly rounded operation,
 * strtod's double bit for bit (Clinger's fast path).  False for any other
 * number, which cJSON then reads. */
static bool flat_number(const char *t, size_t *i, size_t end, double *out)
{
    size_t p = *i + (t[*i] == '-');
    uint64_t w = 0;
    int digits = 0, e = 0;
    if (FLT_EVAL_METHOD != 0 || !digit_at(t, p, end) || (t[p] == '0' && digit_at(t, p + 1, end)))
        return false; /* (wider intermediates would round twice; a leading 0 is not JSON) */
    for (; digit_at(t, p, end); p++, digits++)
        w = w * 10 + (uint64_t)(t[p] - '0');
    if (p < end && t[p] == '.') {
        if (!digit_at(t, ++p, end))
            return false;
        for (; digit_at(t, p, end); p++, digits++, e--)
            w = w * 10 + (uint64_t)(t[p] - '0');
    }
    if (p < end && (t[p] == 'e' || t[p] == 'E')) {
        bool minus = ++p < end && t[p] == '-';
        p += p < end && (t[p] == '+' || t[p] == '-');
        int x = 0, n = 0;
        for (; digit_at(t, p, end) && n < 4; p++, n++)
            x = x * 10 + (t[p] - '0');
        if (!n || digit_at(t, p, end))
            return false; /* no digits, or more than 4 */
        e += minus ? -x : x;
    }
    if (digits > 19 || w > (uint64_t)1 << 53 || e < -22 || e > 22)
        return false; /* 19 digits cannot wrap w */
    double v = e < 0 ? (double)w / exact_pow10[-e] : (double)w * exact_pow10[e];
    *out = t[*i] == '-' ? -v : v;
    *i = p;
    return true;
}

/* The args array at t[*i] == '['. */
static bool flat_args(flat *f, const char *t, size_t *i, size_t end)
{
    size_t p = skip_ws(t, *i + 1, end);
    f->nargs = 0;
    if (p < end && t[p] == ']') {
        *i = p + 1;
        return true;
    }
    for (;;) {
        if (p >= end || f->nargs == FLAT_ARGS)
            return false;
        int k = f->nargs++;
        f->arg[k] = NULL;
        f->num[k] = 0;
        if (t[p] == '"' ? !(f->arg[k] = flat_string(f, t, &p, end)) : !flat_number(t, &p, end, &f->num[k]))
            return false;
        p = skip_ws(t, p, end);
        if (p < end && t[p] == ']') {
            *i = p + 1;
            return true;
        }
        if (p >= end || t[p] != ',')
            return false;
        p = skip_ws(t, p + 1, end);
    }
}

static bool text_at(const char *t, size_t p, size_t end, const char *s, size_t n)
{
    return n <= end - p && !memcmp(t + p, s, n);
}

/* The element at t[*i] == '{' when it has the common shape; *i then just
 * past it. */
static bool flat_read(flat *f, const char *t, size_t *i, size_t end)
{
    size_t p = *i;
    unsigned seen = 0; /* 1: id, 2: op, 4: args */
    f->used = 0;
    do {
        p = skip_ws(t, p + 1, end);
        unsigned key = text_at(t, p, end, "\"id\"", 4) ? 1 : text_at(t, p, end, "\"op\"", 4) ? 2
                     : text_at(t, p, end, "\"args\"", 6) ? 4 : 0;
        if (!key || (seen & key))
            return false;
        seen |= key;
        p = skip_ws(t, p + (key == 4 ? 6 : 4), end);
        if (p >= end || t[p] != ':' || (p = skip_ws(t, p + 1, end)) >= end)
            return false;
        if (key == 4 ? t[p] != '[' || !flat_args(f, t, &p, end)
                     : t[p] != '"' || !(*(key == 1 ? &f->id : &f->op) = flat_string(f, t, &p, end)))
            return false;
        p = skip_ws(t, p, end);
    } while (p < end && t[p] == ',');
    if (p >= end || t[p] != '}' || seen != 7)
        return false;
    f->code = tl_op_lookup(f->op);
    if (f->code != TL_OP_COUNT && tl_ops[f->code].kind == TL_KIND_FLOW)
        return false;
    *i = p + 1;
    return true;
}

/* parse_node for a flat element: the same node from the same checks.  A
 * failure needs no message (the stream path is given up and parse_dom
 * gives it), so an unknown op just fails. */
static bool flat_node(loader *L, const flat *f, tl_node *n)
{
    n->flow = FLOW_NONE;
    n->attrs = &tl_attrs_default;
    n->index = L->g->nnodes++;
    n->name = f->id;
    n->op = f->code;
    n->nout = 1;
    if (n->op == TL_OP_COUNT || !(n->args = arena_calloc(L, (size_t)f->nargs, sizeof(tl_arg), "node arguments")))
        return false;
    n->nargs = f->nargs;
    for (int i = 0; i < f->nargs; i++)
        if (!put_arg(L, &n->args[i], f->arg[i], f->num[i]))
            return false;
    if (!plain_checks(L, n, 0) || !(n->out = arena_ints(L, 1, "node ids")) ||
        (n->out[0] = define_name(L, f->id, TL_SLOT_NODE)) < 0)
        return false;
    n->name = L->g->slot_name[n->out[0]];
    return true;
}

/* An element of the nodes array, read flat or (obj) with cJSON. */
typedef struct element {
    cJSON *obj;
    flat f;
} element;

/* The next element of the nodes array, read: 1, 0 at the array's end, -1
 * where the fast path stops (k elements read so far). */
static int next_element(stream *s, int k, element *el)
{
    const char *t = s->text;
    size_t i = skip_ws(t, s->pos, s->rb), e;
    el->obj = NULL;
    if (i == s->rb)
        return 0;
    if (k > 0 && (t[i] != ',' || (i = skip_ws(t, i + 1, s->rb)) == s->rb))
        return -1;
    if (t[i] != '{' || k == s->count)
        return -1;
    e = i;
    if (!flat_read(&el->f, t, &e, s->rb)) {
        /* cJSON stops at the object's end; what follows is read above */
        const char *end = NULL;
        el->obj = cJSON_ParseWithLengthOpts(t + i, s->rb - i, &end, false);
        e = end ? (size_t)(end - t) : 0;
        if (!el->obj || e <= i || e > s->rb) {
            cJSON_Delete(el->obj);
            el->obj = NULL;
            return -1;
        }
    }
    s->pos = e;
    drop_pages(s, e, false);
    return 1;
}

/* The name an element defines first, hashed, and where define() will
 * look for it in the table fetched while the element before is read. */
static uint64_t prefetch_id(loader *L, const element *el, const char **name)
{
    const cJSON *id = el->obj ? cJSON_GetObjectItemCaseSensitive(el->obj, "id") : NULL;
    if (cJSON_IsArray(id))
        id = id->child;
    *name = !el->obj ? el->f.id : cJSON_IsString(id) ? id->valuestring : NULL;
    if (!*name)
        return 0;
    uint64_t h = tl_name_hash(*name);
    __builtin_prefetch(&L->table[h & (uint64_t)(L->tcap - 1)]);
    return h;
}

/* The elements of the top-level nodes array (the skeleton's is empty),
 * one read ahead of the one being turned into a node. */
static bool stream_nodes(loader *L, const cJSON *arr, tl_block *b)
{
    stream *s = L->stream;
    if (!cJSON_IsArray(arr) || arr->child)
        return false;
    if (!reserve(L, L->g->nslots + s->count + 1) ||
        !(b->nodes = tl_calloc((size_t)s->count, sizeof(tl_node), "graph nodes", L->st)))
        return false;
    if (sizeof(tl_node) * (size_t)s->count >= 2 * HUGE_PAGE) /* its middle, at least */
        huge_pages(b->nodes, sizeof(tl_node) * (size_t)s->count);
    s->dropped = s->lb & ~(s->page - 1);
    s->pos = s->lb + 1;
    element two[2], *cur = &two[0], *next = &two[1];
    next->obj = NULL;
    const char *name = NULL, *next_name = NULL;
    uint64_t h = 0, next_h = 0;
    int r = next_element(s, 0, cur), k = 0;
    if (r > 0)
        h = prefetch_id(L, cur, &name);
    for (; r > 0; k++) {
        r = next_element(s, k + 1, next);
        if (r > 0)
            next_h = prefetch_id(L, next, &next_name);
        bool oom = false, ok = r >= 0 && (!cur->obj || (!tl_json_duplicate(cur->obj, 2, &oom) && !oom));
        if (ok) {
            b->nnodes = k + 1;
            L->known_name = name;
            L->known_hash = h;
            ok = cur->obj ? parse_node(L, cur->obj, &b->nodes[k], k) : flat_node(L, &cur->f, &b->nodes[k]);
            L->known_name = NULL;
        }
        cJSON_Delete(cur->obj);
        if (!ok) {
            cJSON_Delete(next->obj);
            return false;
        }
        element *done = cur;
        cur = next;
        next = done;
        name = next_name;
        h = next_h;
    }
    return r == 0 && k == s->count;
}

/* ---------- the document ---------- */

static bool parse_document(loader *L, const cJSON *doc)
{
    static const char *const keys[] = {"version", "doc", "inputs", "consts", "nodes", "outputs"};
    tl_graph *g = L->g;
    int64_t version;
    if (!cJSON_IsObject(doc))
        return tl_fail(L->st, TL_EINPUT, "a graph must be a JSON object"), false;
    bool oom = false;
    const cJSON *dup = tl_json_duplicate(doc, 0, &oom);
    if (oom)
        return tl_fail(L->st, TL_ERUNTIME, "out of memory checking keys"), false;
    if (dup)
        return tl_fail(L->st, TL_EINPUT, "duplicate key \"%.64s\"", dup->string), false;
    if (!check_keys(L, doc, keys, 6, "the graph"))
        return false;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (!ver || !get_int(ver, &version) || version != 1)
        return tl_fail(L->st, TL_EINPUT, "\"version\" must be the integer 1"), false;
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(doc, "doc");
    if (docs && !cJSON_IsString(docs))
        return tl_fail(L->st, TL_EINPUT, "\"doc\" must be a string"), false;
    if (docs && !(g->doc = tl_strdup(docs->valuestring, L->st)))
        return false;
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(doc, "inputs");
    if (!cJSON_IsArray(inputs))
        return tl_fail(L->st, TL_EINPUT, "\"inputs\" must be an array"), false;
    int ni = cJSON_GetArraySize(inputs);
    if (!(g->inputs = tl_calloc((size_t)ni, sizeof(tl_input), "inputs", L->st)))
        return false;
    for (const cJSON *c = inputs->child; c; c = c->next)
        if (!parse_input(L, c, &g->inputs[g->ninputs++]))
            return false;
    if (!parse_consts(L, cJSON_GetObjectItemCaseSensitive(doc, "consts")))
        return false;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
    if (!nodes)
        return tl_fail(L->st, TL_EINPUT, "missing \"nodes\""), false;
    if (!(L->stream ? stream_nodes(L, nodes, &g->top) : parse_nodes(L, nodes, &g->top)))
        return false;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(doc, "outputs");
    if (!outs)
        return tl_fail(L->st, TL_EINPUT, "missing \"outputs\""), false;
    if (!parse_outputs(L, outs))
        return false;
    int *last = tl_malloc((size_t)g->nslots, sizeof(int), "a use table", L->st);
    int *in = tl_malloc((size_t)g->ninputs + 1, sizeof(int), "a use table", L->st);
    if (!last || !in) {
        free(last);
        free(in);
        return false;
    }
    for (int i = 0; i < g->ninputs; i++)
        in[i] = g->inputs[i].slot;
    bool ok = plan_frees(L, last, &g->top, g->outputs, g->noutputs, in, g->ninputs);
    free(in);
    free(last);
    return ok;
}

/* A loader and its empty graph; false with L->g NULL or to be abandoned. */
static bool begin(loader *L, const char *path, const tl_graph_options *o, tl_status *st)
{
    tl_graph *g = L->g = tl_calloc(1, sizeof *g, "a graph", st);
    L->st = st;
    L->tcap = 64;
    if (o)
        L->opts = *o;
    if (!g || !(g->path = tl_strdup(path, st)))
        return false;
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    if (!(L->dir = tl_malloc(dl + 1, 1, "a path", st)))
        return false;
    memcpy(L->dir, path, dl);
    L->dir[dl] = '\0';
    if (!(L->table = tl_malloc((size_t)L->tcap, sizeof(int), "the name table", st)))
        return false;
    for (int i = 0; i < L->tcap; i++)
        L->table[i] = -1;
    return true;
}

/* The graph of a loader that succeeded (ok), else NULL. */
static tl_graph *finish(loader *L, bool ok)
{
    tl_graph *g = L->g;
    /* which slots the top-level nodes make (tl_graph_top_slot, once a name) */
    if (ok && !(g->slot_top = tl_calloc((size_t)g->nslots + 1, 1, "the graph's slots", L->st)))
        ok = false;
    for (int i = 0; ok && i < g->top.nnodes; i++)
        for (int k = 0; k < g->top.nodes[i].nout; k++)
            g->slot_top[g->top.nodes[i].out[k]] = 1;
    if (ok) {
        g->names = L->table; /* kept for tl_graph_input_index */
        g->tcap = L->tcap;
        L->table = NULL;
    }
    free(L->table);
    free(L->visible);
    free(L->dir);
    if (!ok)
        tl_graph_free(g);
    return ok ? g : NULL;
}

/* The fast path; NULL when it does not apply or anything fails. */
static tl_graph *parse_stream(const char *text, size_t len, const char *path, const tl_graph_options *o,
                              const char *map, tl_status *st)
{
    stream s = {.text = text, .len = len, .map = map, .page = (size_t)sysconf(_SC_PAGESIZE)};
    size_t bad;
    if (!utf8_ok((const unsigned char *)text, len, &bad) || !prescan(&s))
        return NULL;
    drop_pages(&s, 0, true);
    size_t head = s.lb + 1, sl = head + (len - s.rb);
    char *skel = malloc(sl);
    if (!skel)
        return NULL;
    memcpy(skel, text, head);
    memcpy(skel + head, text + s.rb, len - s.rb);
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(skel, sl, &end, false);
    bool ok = doc && end;
    while (ok && end < skel + sl && strchr(" \t\r\n", *end) && *end)
        end++;
    ok = ok && end == skel + sl;
    free(skel);
    drop_pages(&s, 0, true);
    loader *L = ok ? calloc(1, sizeof *L) : NULL;
    if (L) {
        L->stream = &s;
        ok = begin(L, path, o, st) && parse_document(L, doc);
    }
    cJSON_Delete(doc);
    tl_graph *g = L ? finish(L, ok) : NULL;
    free(L);
    return g;
}

static _Atomic unsigned long dom_loads;

unsigned long tl_graph_dom_loads(void) { return dom_loads; }

/* The whole document as one cJSON tree. */
static tl_graph *parse_dom(const char *text, size_t len, const char *path, const tl_graph_options *o,
                           tl_status *st)
{
    dom_loads++;
    size_t bad;
    int line, col;
    loader *L = tl_calloc(1, sizeof *L, "a loader", st);
    if (!L)
        return NULL;
    bool ok = false;
    if (!begin(L, path, o, st))
        goto done;
    if (!utf8_ok((const unsigned char *)text, len, &bad)) {
        line_col(text, bad, &line, &col);
        tl_fail(st, TL_EINPUT, "%s:%d:%d: invalid UTF-8", path, line, col);
        goto done;
    }
    const char *why;
    if ((bad = tl_json_hazard(text, len, &why)) < len) {
        line_col(text, bad, &line, &col);
        tl_fail(st, TL_EINPUT, "%s:%d:%d: malformed JSON: %s", path, line, col, why);
        goto done;
    }
    const char *end = NULL;
    errno = 0; /* cJSON says only "failed": malloc's ENOMEM tells the two apart */
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!doc && errno == ENOMEM) {
        tl_fail(st, TL_ERUNTIME, "%s: out of memory parsing the graph's JSON", path);
        goto done;
    }
    bool trailing = false;
    if (doc && end) {
        while ((size_t)(end - text) < len && strchr(" \t\r\n", *end))
            end++;
        if ((size_t)(end - text) < len) {
            cJSON_Delete(doc);
            doc = NULL;
            trailing = true;
        }
    }
    if (!doc) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
        char expected[160];
        bool named = !trailing && json_expected(text, len, &off, expected, sizeof expected);
        line_col(text, off, &line, &col);
        tl_fail(st, TL_EINPUT, "%s:%d:%d: %s%s%s", path, line, col,
                trailing ? "text after the graph object"
                : off >= len ? "malformed JSON (unexpected end of text)" : "malformed JSON",
                named ? ": " : "", named ? expected : "");
        goto done;
    }
    ok = parse_document(L, doc);
    cJSON_Delete(doc);
    if (!ok)
        tl_wrap(st, "%s", path);
done:;
    tl_graph *g = L->g ? finish(L, ok) : NULL;
    free(L);
    return g;
}

static tl_graph *parse_text(const char *text, size_t len, const char *path, const tl_graph_options *o,
                            const char *map, tl_status *st)
{
    tl_status before = *st;
    tl_graph *g = parse_stream(text, len, path, o, map, st);
    if (g)
        return g;
    *st = before; /* whatever stopped the fast path, the message comes from here */
    return parse_dom(text, len, path, o, st);
}

tl_graph *tl_graph_parse(const char *text, size_t len, const char *path, tl_status *st)
{
    return tl_graph_parse_with(text, len, path, NULL, st);
}

tl_graph *tl_graph_parse_with(const char *text, size_t len, const char *path,
                              const tl_graph_options *o, tl_status *st)
{
    return parse_text(text, len, path, o, NULL, st);
}

tl_graph *tl_graph_parse_dom(const char *text, size_t len, const char *path,
                             const tl_graph_options *o, tl_status *st)
{
    return parse_dom(text, len, path, o, st);
}

tl_graph *tl_graph_load(const char *path, tl_status *st)
{
    return tl_graph_load_with(path, NULL, st);
}

/* Files from this size on are mapped rather than read: the loader then
 * holds only the part it is reading, not a copy of the whole text. */
#define MAP_MIN ((off_t)1 << 20)

/* A program (.tl), read whole and translated; an ONNX model, pointed at
 * the functions that read one (it is translated for its inputs). */
static tl_graph *load_other(const char *path, bool model, const tl_graph_options *o, tl_status *st)
{
    if (model)
        return tl_fail(st, TL_EINPUT, "%s: an ONNX model: open it with tl_onnx_open and translate it for its "
                       "inputs with tl_onnx_translate (graph/onnx.h)", path), NULL;
    unsigned char *buf;
    size_t len;
    if (tl_slurp_path(path, &buf, &len, st))
        return tl_wrap(st, "%s", path), NULL;
    tl_srcpos pos;
    tl_graph *g = tl_program_load((const char *)buf, len, path, o, &pos, st);
    free(buf);
    return g;
}

tl_graph *tl_graph_load_with(const char *path, const tl_graph_options *o, tl_status *st)
{
    size_t n = strlen(path);
    bool model = n > 5 && !strcmp(path + n - 5, ".onnx");
    if (model || (n > 3 && !strcmp(path + n - 3, ".tl")))
        return load_other(path, model, o, st);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= MAP_MIN &&
        (uint64_t)sb.st_size < SIZE_MAX / 2) {
        size_t len = (size_t)sb.st_size;
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            close(fd);
            tl_graph *g = parse_text(m, len, path, o, m, st);
            munmap(m, len);
            return g;
        }
    }
    if (fd >= 0)
        close(fd);
    unsigned char *buf;
    size_t len;
    if (tl_slurp_path(path, &buf, &len, st))
        return tl_wrap(st, "%s", path), NULL;
    tl_graph *g = tl_graph_parse_with((const char *)buf, len, path, o, st);
    free(buf);
    return g;
}

static void free_block(tl_block *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->nnodes; i++) {
        tl_flow *f = b->nodes[i].flow;
        if (!f || f == FLOW_NONE) /* the rest is in the arena */
            continue;
        free(f->state);
        free(f->params);
        free(f->cap_slots);
        tl_mprog_free(f->prog);
        free_block(f->then_b);
        free_block(f->else_b);
        free_block(f->body);
        free(f->then_b);
        free(f->else_b);
        free(f->body);
    }
    free(b->nodes);
    free(b->result);
}

static void default_free(tl_const *d)
{
    if (d) {
        tl_tensor_unref(d->tensor);
        free(d->path);
        free(d->key);
        free(d);
    }
}

void tl_graph_drop_default_data(tl_graph *g)
{
    for (int i = 0; g && i < g->ninputs; i++)
        if (g->inputs[i].dflt && g->inputs[i].dflt->kind == TL_CONST_DATA) {
            default_free(g->inputs[i].dflt);
            g->inputs[i].dflt = NULL;
        }
}

void tl_graph_drop_fixed_inputs(tl_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->ninputs; i++)
        if (g->inputs[i].fixed)
            default_free(g->inputs[i].dflt);
        else
            g->inputs[n++] = g->inputs[i];
    g->ninputs = n;
}

void tl_graph_free(tl_graph *g)
{
    if (!g)
        return;
    free_block(&g->top);
    for (int i = 0; i < g->nconsts; i++) {
        tl_tensor_unref(g->consts[i].tensor);
        free(g->consts[i].path);
        free(g->consts[i].key);
    }
    for (int i = 0; i < g->ninputs; i++)
        default_free(g->inputs[i].dflt);
    arena_free(g->arena);
    for (int i = 0; i < g->nsizevars; i++)
        free(g->sizevars[i]);
    free(g->sizevars);
    free(g->consts);
    free(g->inputs);
    free(g->outputs);
    free(g->slot_name);
    free(g->slot_kind);
    free(g->slot_const);
    free(g->slot_top);
    free(g->names);
    free(g->doc);
    free(g->path);
    free(g->source);
    free(g->slot_pos);
    free(g);
}

tl_code tl_graph_check_call(const cJSON *node, const char **bad_key, tl_status *st)
{
    tl_graph g = {0};
    loader L = {.g = &g, .st = st};
    tl_node n = {.nout = 1, .attrs = &tl_attrs_default, .flow = FLOW_NONE};
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(node, "op");
    n.op = cJSON_IsString(op) ? tl_op_lookup(op->valuestring) : TL_OP_COUNT;
    bool ok = n.op != TL_OP_COUNT && tl_ops[n.op].kind != TL_KIND_FLOW
                  ? plain_op(&L, node, &n)
                  : !tl_fail(st, TL_EINPUT, "not an op that a call can name");
    *bad_key = L.bad_key;
    arena_free(g.arena);
    return ok ? TL_OK : st->code;
}

const char *tl_attr_name(uint64_t bit)
{
    for (int i = 0; i < NATTR_KEYS; i++)
        if (attr_keys[i].bit == bit)
            return attr_keys[i].key;
    return "?";
}

int tl_graph_slot(const tl_graph *g, const char *name)
{
    return g->names ? lookup(g, g->names, g->tcap, name) : -1;
}

int tl_graph_input_index(const tl_graph *g, const char *name)
{
    int s = g->names ? lookup(g, g->names, g->tcap, name) : -1;
    if (s < 0 || g->slot_kind[s] != TL_SLOT_INPUT)
        return -1;
    /* inputs take the first slots, in order */
    for (int i = s < g->ninputs ? s : 0; i < g->ninputs; i++)
        if (g->inputs[i].slot == s)
            return i;
    return -1;
}

void tl_input_type_text(const tl_graph *g, int i, char *buf, size_t len)
{
    const tl_input *in = &g->inputs[i];
    size_t k = (size_t)snprintf(buf, len, "%s", in->has_dtype ? tl_dtype_name(in->dtype) : "");
    for (int d = 0; d < in->ndim && k < len; d++) {
        const tl_dimspec *s = &in->dims[d];
        const char *sep = d ? "," : "[";
        if (s->kind == TL_DIM_FIXED)
            k += (size_t)snprintf(buf + k, len - k, "%s%lld", sep, (long long)s->size);
        else
            k += (size_t)snprintf(buf + k, len - k, "%s%.40s", sep, s->kind == TL_DIM_VAR ? g->sizevars[s->var] : "_");
    }
    if (k < len)
        snprintf(buf + k, len - k, "%s", in->ndim < 0 ? "" : in->ndim ? "]" : "[]");
}

int tl_graph_top_slot(const tl_graph *g, const char *name)
{
    int s = g->names ? lookup(g, g->names, g->tcap, name) : -1;
    if (s < 0 || g->slot_kind[s] == TL_SLOT_INPUT || g->slot_kind[s] == TL_SLOT_CONST)
        return s;
    if (g->slot_top)
        return g->slot_top[s] ? s : -1;
    for (int i = 0; i < g->top.nnodes; i++)
        for (int k = 0; k < g->top.nodes[i].nout; k++)
            if (g->top.nodes[i].out[k] == s)
                return s;
    return -1;
}

tl_code tl_graph_call_attrs(const cJSON *node, tl_attrs *out, tl_status *st)
{
    tl_graph g = {0};
    loader L = {.g = &g, .st = st};
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(node, "op");
    tl_opcode code = cJSON_IsString(op) ? tl_op_lookup(op->valuestring) : TL_OP_COUNT;
    bool ok = code != TL_OP_COUNT || !tl_fail(st, TL_EINPUT, "not an op that a call can name");
    tl_attrs_init(out);
    for (const cJSON *c = node->child; ok && c; c = c->next) {
        const char *k = c->string;
        if (!strcmp(k, "id") || !strcmp(k, "op") || !strcmp(k, "args"))
            continue;
        uint64_t bit = 0;
        for (int i = 0; i < NATTR_KEYS && !bit; i++)
            if ((tl_ops[code].attrs & attr_keys[i].bit) && !strcmp(k, attr_keys[i].key))
                bit = attr_keys[i].bit;
        ok = bit ? parse_attr(&L, out, code, bit, c, k) : (unknown_attribute(&L, code, k), false);
    }
    out->indices = NULL; /* in the arena freed here */
    out->nindices = 0;
    arena_free(g.arena);
    return ok ? TL_OK : st->code;
}

static void rename_block(tl_graph *g, tl_block *b)
{
    for (int i = 0; b && i < b->nnodes; i++) {
        tl_node *n = &b->nodes[i];
        if (n->nout)
            n->name = g->slot_name[n->out[0]];
        if (n->flow && n->flow != FLOW_NONE) {
            rename_block(g, n->flow->then_b);
            rename_block(g, n->flow->else_b);
            rename_block(g, n->flow->body);
        }
    }
}

tl_code tl_graph_rename(tl_graph *g, const char *const *names, tl_status *st)
{
    loader L = {.g = g, .st = st};
    for (int s = 0; s < g->nslots; s++)
        if (names[s] && !(g->slot_name[s] = arena_strdup(&L, names[s])))
            return st->code;
    for (int i = 0; i < g->ninputs; i++)
        g->inputs[i].name = g->slot_name[g->inputs[i].slot];
    for (int i = 0; i < g->nconsts; i++)
        g->consts[i].name = g->slot_name[g->consts[i].slot];
    rename_block(g, &g->top);
    /* a table of the new names (two names that became one: the first wins) */
    L.tcap = g->tcap;
    if (!(L.table = tl_malloc((size_t)L.tcap, sizeof(int), "the name table", st)))
        return st->code;
    for (int i = 0; i < L.tcap; i++)
        L.table[i] = -1;
    for (int s = 0; s < g->nslots; s++)
        if (lookup(g, L.table, L.tcap, g->slot_name[s]) < 0)
            table_put(&L, s);
    free(g->names);
    g->names = L.table;
    return TL_OK;
}
