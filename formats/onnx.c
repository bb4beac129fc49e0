/* Reading ONNX protobuf with protobuf-c; see onnx.h. */
#define _DEFAULT_SOURCE /* realpath */
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"
#include "sniff.h"

const char *tl_onnx_type_name(int t)
{
    static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16",
                                        "int32", "int64", "string", "bool", "float16", "double",
                                        "uint32", "uint64", "complex64", "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof names / sizeof names[0]) ? names[t] : "an unknown type";
}

static char *folder_of(const char *path, tl_status *st)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) + 1 : 0;
    char *d = tl_malloc(n + 1, 1, "a path", st);
    if (d) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* A model's protobuf: what protobuf-c allocates of 2 MiB and more (the
 * raw data of large weights above all) is a block of huge pages where the
 * process finds those cheaper (tl_huge_block), which a tensor of the
 * same bytes takes over as its data (tl_onnx_tensor): each weight is
 * read once, out of the file (apart from the parse, below, or copied by
 * protobuf-c), into fresh memory faulted in at once.  Every block is
 * free()'s. */
#define BIG_FIELD ((size_t)2 << 20)

static void *pb_alloc(void *ud, size_t size)
{
    (void)ud;
    return size >= BIG_FIELD ? tl_huge_block(size) : malloc(size);
}

static void pb_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

/* ---------- large weights read apart ----------
 * A model's weights are most of its bytes, and protobuf-c copies each out
 * of the buffer it parses.  Parsed from the file's mapping, that copy
 * reads every page of the mapping from the program, and where the VM's
 * host shadows the guest's page tables each such page traps into it at
 * its first access (ResNet-18's 46 MB: 17-18 ms to copy out of the
 * mapping on the Zen 5 VM, against 5.7 ms to pread the same bytes into
 * memory already mapped in).  So the main graph's initializers whose raw
 * data is STRIP_MIN bytes or more are taken out of the protobuf before it
 * is parsed (the messages around them re-measured), and their raw data is
 * then read into them from the file with pread (or copied from the
 * buffer), into memory from the same allocator protobuf-c uses: the
 * parsed model is the same as the whole file's, byte for byte.  Anything
 * the walk does not expect (a graph twice, a tensor with raw data twice,
 * a group, a length past its message) leaves the buffer whole, for
 * protobuf-c to parse or refuse as ever. */
#ifndef TL_ONNX_STRIP_MIN
#define TL_ONNX_STRIP_MIN (64 << 10)
#endif
#define STRIP_MIN ((size_t)TL_ONNX_STRIP_MIN)
#define PB_LEN 2 /* wire types */
#define MODEL_GRAPH 7
#define GRAPH_INITIALIZER 5
#define TENSOR_RAW_DATA 9

typedef struct extent {
    size_t init;     /* the initializer's index in the main graph */
    size_t off, len; /* its raw data in the file */
} extent;

typedef struct stripper {
    const unsigned char *in;
    unsigned char *out; /* the result: never longer than the input (lengths only shrink), but */
    size_t n, cap;      /* up to 2 x 10 bytes more while a graph and a tensor in it are open */
    extent *ex;
    size_t nex, excap;
    size_t ninit; /* initializers seen */
} stripper;

static bool get_varint(const unsigned char *p, size_t end, size_t *at, uint64_t *v)
{
    uint64_t r = 0;
    for (int sh = 0; sh < 64; sh += 7) {
        if (*at >= end)
            return false;
        unsigned char b = p[(*at)++];
        r |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t k = 0;
    do {
        p[k++] = (unsigned char)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
        v >>= 7;
    } while (v);
    return k;
}

/* The field at *at in [.., end): its number, wire type and payload (a
 * varint's payload is empty: not needed here); *at then past it. */
static bool next_field(const unsigned char *p, size_t end, size_t *at, uint64_t *field, int *wt, size_t *pay,
                       size_t *paylen)
{
    uint64_t key, n = 0;
    if (!get_varint(p, end, at, &key))
        return false;
    *field = key >> 3;
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return *pay = *at, *paylen = 0, get_varint(p, end, at, &n);
    case 1: n = 8; break;
    case 5: n = 4; break;
    case PB_LEN:
        if (!get_varint(p, end, at, &n))
            return false;
        break;
    default: return false; /* groups: not in ONNX */
    }
    if (n > end - *at)
        return false;
    *pay = *at;
    *paylen = (size_t)n;
    *at += (size_t)n;
    return true;
}

static bool put(stripper *s, size_t from, size_t to)
{
    if (to - from > s->cap - s->n)
        return false;
    memcpy(s->out + s->n, s->in + from, to - from);
    s->n += to - from;
    return true;
}

/* A length-delimited field rewritten: its key as it was, then its new
 * length and contents (written from `body` on by the caller, moved here). */
static bool close_field(stripper *s, size_t key_from, size_t key_to, size_t body)
{
    unsigned char v[10];
    size_t len = s->n - body, k = put_varint(v, len), kl = key_to - key_from;
    if (kl + k + len > s->cap - (body - 10)) /* a key of redundant bytes */
        return false;
    memmove(s->out + (body - 10) + kl + k, s->out + body, len); /* body - 10: where the key went */
    memcpy(s->out + (body - 10), s->in + key_from, kl);
    memcpy(s->out + (body - 10) + kl, v, k);
    s->n = (body - 10) + kl + k + len;
    return true;
}

static bool strip_tensor(stripper *s, size_t from, size_t to)
{
    size_t at = from, pay, paylen, raw = 0, raw_at = 0, raw_len = 0, f0;
    uint64_t field;
    int wt;
    while (at < to) {
        if (!next_field(s->in, to, &at, &field, &wt, &pay, &paylen))
            return false;
        if (field == TENSOR_RAW_DATA) {
            raw++;
            raw_at = pay;
            raw_len = paylen;
        }
    }
    if (raw != 1 || raw_len < STRIP_MIN)
        return put(s, from, to);
    if (s->nex == s->excap) {
        size_t cap = s->excap ? 2 * s->excap : 64;
        extent *e = realloc(s->ex, cap * sizeof *e);
        if (!e)
            return false;
        s->ex = e;
        s->excap = cap;
    }
    s->ex[s->nex++] = (extent){s->ninit, raw_at, raw_len};
    for (at = from; at < to;) {
        f0 = at;
        (void)next_field(s->in, to, &at, &field, &wt, &pay, &paylen); /* read once above */
        if (field != TENSOR_RAW_DATA && !put(s, f0, at))
            return false;
    }
    return true;
}

/* graph: the main graph's initializers stripped */
static bool strip_message(stripper *s, size_t from, size_t to, bool graph)
{
    size_t at = from, pay, paylen, f0, graphs = 0;
    uint64_t field;
    int wt;
    if (!graph) /* the model: its graph once, or nothing done */
        for (; at < to;) {
            if (!next_field(s->in, to, &at, &field, &wt, &pay, &paylen))
                return false;
            graphs += field == MODEL_GRAPH;
        }
    if (!graph && graphs != 1)
        return false;
    for (at = from; at < to;) {
        f0 = at;
        if (!next_field(s->in, to, &at, &field, &wt, &pay, &paylen))
            return false;
        bool inner = wt == PB_LEN && field == (graph ? GRAPH_INITIALIZER : MODEL_GRAPH);
        if (!inner) {
            if (!put(s, f0, at))
                return false;
            continue;
        }
        size_t key_end = f0, body;
        uint64_t key;
        (void)get_varint(s->in, to, &key_end, &key);
        if (s->cap - s->n < 10)
            return false;
        s->n += 10; /* room for the key and the new length (a key of redundant bytes: close_field) */
        body = s->n;
        if (graph ? !strip_tensor(s, pay, pay + paylen) : !strip_message(s, pay, pay + paylen, true))
            return false;
        if (!close_field(s, f0, key_end, body))
            return false;
        s->ninit += graph;
    }
    return true;
}

/* A large weight's raw data read straight into the tensor it becomes,
 * where its bytes are its values (f32, f64, i32, i64) and its dims hold
 * exactly them: the protobuf's raw_data points into the tensor until
 * tl_onnx_tensor takes it over.  Read into a buffer of its own instead,
 * each weight was copied once more, into fresh memory: ResNet-18's twelve
 * weights from 64 KiB to 2 MiB (6.5 MB) were read into malloc's pages and
 * then copied into their tensors, 12 ms of a 62 ms `tl check` on the Zen 5
 * VM, where each fresh small page traps into the host at its first read. */
struct tl_onnx_pre {
    Onnx__TensorProto *t;
    tl_tensor *x; /* NULL once taken */
};

static bool elem_dtype(int t, tl_dtype *dt);
static size_t raw_size(int t);

/* Whether ONNX type t's raw little-endian bytes are tl's values of dt as
 * they are (no widening, no unsigned conversion). */
static bool raw_is_values(int t, tl_dtype dt) { return raw_size(t) == tl_dtype_size(dt) && t != TL_ONNX_UINT32; }

/* The message's raw data gone: taken over by a tensor, or freed. */
static void drop_raw(Onnx__TensorProto *t)
{
    t->raw_data.data = NULL;
    t->raw_data.len = 0;
    t->has_raw_data = 0;
}

static tl_tensor *tensor_for_raw(const Onnx__TensorProto *t, size_t len)
{
    int type = t->has_data_type ? t->data_type : 0;
    tl_dtype dt;
    int64_t numel;
    tl_status st = {0};
    if (!elem_dtype(type, &dt) || !raw_is_values(type, dt) ||
        (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
        t->n_dims > TL_MAXDIM || tl_shape_numel((int)t->n_dims, t->dims, &numel, &st) ||
        (size_t)numel * raw_size(type) != len)
        return NULL; /* tl_onnx_tensor says what is wrong, or converts */
    return tl_tensor_new(dt, (int)t->n_dims, t->dims, &st);
}

/* pre-read tensors in the order of their messages' addresses, for bsearch */
static int pre_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct tl_onnx_pre *)a)->t, y = (uintptr_t)((const struct tl_onnx_pre *)b)->t;
    return x < y ? -1 : x > y;
}

/* The pre-read tensors tl_onnx_tensor never took, let go, their messages'
 * raw_data no longer pointing into them. */
static void pre_release(struct tl_onnx_pre *pre, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Onnx__TensorProto *t = pre[i].t;
        if (pre[i].x && t->raw_data.data == pre[i].x->data)
            drop_raw(t);
        tl_tensor_unref(pre[i].x);
    }
    free(pre);
}

/* protobuf-c unpacks a message's submessages recursively, so a model that
 * nests subgraphs thousands deep (an If in an If in ...: a few hundred
 * bytes a level) would overflow the stack.  The nesting is measured first,
 * on the wire, along the fields through which ONNX's messages can contain
 * themselves: a graph's nodes, a node's attributes, an attribute's graphs
 * and types, a type's element types. */
enum pb_msg { M_NONE, M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_FUNC, M_TRAIN, M_VALUE, M_TYPE, M_SEQ, M_MAP, M_OPT,
              M_TENSOR, M_ENTRY };

static enum pb_msg sub_message(enum pb_msg m, uint64_t field)
{
    switch (m) {
    case M_MODEL: return field == MODEL_GRAPH ? M_GRAPH : field == 25 ? M_FUNC : field == 20 ? M_TRAIN : M_NONE;
    case M_TRAIN: return field == 1 || field == 2 ? M_GRAPH : M_NONE; /* initialization, algorithm */
    case M_GRAPH: return field == 1 ? M_NODE : field >= 11 && field <= 13 ? M_VALUE : field == 5 ? M_TENSOR : M_NONE;
    case M_FUNC: return field == 7 ? M_NODE : M_NONE;
    case M_NODE: return field == 5 ? M_ATTR : M_NONE;
    case M_ATTR:
        return field == 6 || field == 11   ? M_GRAPH
               : field == 14 || field == 15 ? M_TYPE
               : field == 5 || field == 10  ? M_TENSOR
                                            : M_NONE;
    case M_TENSOR: return field == 13 ? M_ENTRY : M_NONE; /* external_data */
    case M_VALUE: return field == 2 ? M_TYPE : M_NONE;
    case M_TYPE: return field == 4 ? M_SEQ : field == 5 ? M_MAP : field == 9 ? M_OPT : M_NONE;
    case M_SEQ:
    case M_OPT: return field == 1 ? M_TYPE : M_NONE;
    case M_MAP: return field == 2 ? M_TYPE : M_NONE;
    default: return M_NONE;
    }
}

#define MAX_GRAPH_DEPTH 64 /* subgraphs within subgraphs */
#define MAX_TYPE_DEPTH 32  /* a sequence of a sequence of ... */

/* Whether message m in [from, to) nests no deeper than the limits (its
 * graphs and types deep already) and no external data entry of a tensor
 * holds a NUL byte; a malformed message passes, for protobuf-c to refuse. */
static bool nesting_ok(const unsigned char *p, size_t from, size_t to, enum pb_msg m, int graphs, int types,
                       const char **what)
{
    size_t at = from, pay, paylen;
    uint64_t field;
    int wt;
    while (at < to) {
        if (!next_field(p, to, &at, &field, &wt, &pay, &paylen))
            return true;
        if (m == M_ENTRY && wt == PB_LEN && memchr(p + pay, 0, paylen)) {
            /* protobuf-c's strings end at a NUL: "w.bin\0../x" would be read as "w.bin" */
            *what = "a NUL byte";
            return false;
        }
        enum pb_msg s = wt == PB_LEN ? sub_message(m, field) : M_NONE;
        if (s == M_NONE)
            continue;
        int g = graphs + (s == M_GRAPH), t = types + (s == M_TYPE);
        if (g > MAX_GRAPH_DEPTH || t > MAX_TYPE_DEPTH) {
            *what = g > MAX_GRAPH_DEPTH ? "subgraphs (the bodies of If, Loop and Scan)" : "types (sequences, maps)";
            return false;
        }
        if (!nesting_ok(p, pay, pay + paylen, s, g, t, what))
            return false;
    }
    return true;
}

/* The model's protobuf parsed, its large raw data read from fd (or, with
 * fd -1, copied from data). */
static Onnx__ModelProto *unpack_model(const unsigned char *data, size_t len, int fd, struct tl_onnx_pre **pre_out,
                                      size_t *npre_out, tl_status *st)
{
    const char *deep = NULL;
    if (!nesting_ok(data, 0, len, M_MODEL, -1, 0, &deep) && strstr(deep, "NUL")) /* the main graph at 0 */
        return tl_fail(st, TL_EINPUT, "a tensor's external data entry holds a NUL byte"), NULL;
    if (deep)
        return tl_fail(st, TL_EINPUT, "the model nests %s more than %d deep: tl reads at most that", deep,
                       strstr(deep, "graph") ? MAX_GRAPH_DEPTH : MAX_TYPE_DEPTH), NULL;
    stripper s = {.in = data, .cap = len + 20};
    bool stripped = len >= STRIP_MIN && (s.out = malloc(s.cap)) && strip_message(&s, 0, len, false) && s.nex;
    Onnx__ModelProto *m = stripped ? onnx__model_proto__unpack(&pb_allocator, s.n, s.out) : NULL;
    free(s.out);
    Onnx__GraphProto *g = m ? m->graph : NULL;
    struct tl_onnx_pre *pre = g && s.nex ? calloc(s.nex, sizeof *pre) : NULL; /* none: each into a buffer */
    size_t npre = 0;
    for (size_t i = 0; g && i < s.nex; i++) { /* as protobuf-c would have found them */
        extent e = s.ex[i];
        Onnx__TensorProto *t = e.init < g->n_initializer ? g->initializer[e.init] : NULL;
        tl_tensor *x = t && !t->has_raw_data && pre ? tensor_for_raw(t, e.len) : NULL;
        void *raw = x ? x->data : t && !t->has_raw_data ? pb_alloc(NULL, e.len) : NULL;
        if (!raw) {
            g = NULL;
            break;
        }
        if (x)
            pre[npre++] = (struct tl_onnx_pre){t, x};
        t->raw_data.data = raw;
        t->raw_data.len = e.len;
        t->has_raw_data = 1;
        if (fd < 0) {
            memcpy(raw, data + e.off, e.len);
            continue;
        }
        for (size_t done = 0; done < e.len;) {
            ssize_t r = pread(fd, (char *)raw + done, e.len - done, (off_t)(e.off + done));
            if (r <= 0) {
                if (r < 0 && errno == EINTR)
                    continue;
                free(s.ex);
                pre_release(pre, npre);
                onnx__model_proto__free_unpacked(m, &pb_allocator);
                return tl_fail(st, TL_EINPUT, "cannot read: %s", r < 0 ? strerror(errno) : "the file shrank"),
                       NULL;
            }
            done += (size_t)r;
        }
    }
    free(s.ex);
    if (m && !g) { /* not as the walk expected: the whole buffer, as ever */
        pre_release(pre, npre);
        pre = NULL;
        npre = 0;
        onnx__model_proto__free_unpacked(m, &pb_allocator);
        m = NULL;
    }
    if (!m)
        m = onnx__model_proto__unpack(&pb_allocator, len, data);
    if (!m) { /* what else a user may have named .onnx: a tensor file, a graph */
        tl_bytes_kind kind = tl_bytes_kind_of(data, len);
        return tl_fail(st, TL_EINPUT, "not an ONNX model (%s)",
                       kind == TL_BYTES_NPZ    ? "an .npz archive, a tensor file"
                       : kind == TL_BYTES_NPY  ? "a .npy tensor file"
                       : kind == TL_BYTES_JSON ? "text, as a JSON graph is"
                                               : "the protobuf is malformed or truncated"), NULL;
    }
    if (npre > 1)
        qsort(pre, npre, sizeof *pre, pre_cmp);
    *pre_out = pre;
    *npre_out = npre;
    return m;
}

static tl_onnx_file *read_model(const void *data, size_t len, int fd, const char *path, bool allow_outside,
                                tl_status *st)
{
    struct tl_onnx_pre *pre = NULL;
    size_t npre = 0;
    Onnx__ModelProto *m = unpack_model(data, len, fd, &pre, &npre, st);
    if (!m)
        return NULL;
    if (!m->graph) { /* (never pre-read: the walk found a graph) */
        onnx__model_proto__free_unpacked(m, &pb_allocator);
        return tl_fail(st, TL_EINPUT, "not an ONNX model (no graph)"), NULL;
    }
    tl_onnx_file *f = tl_calloc(1, sizeof *f, "a model", st);
    if (f && !(f->dir = folder_of(path, st))) {
        free(f);
        f = NULL;
    }
    if (!f) {
        pre_release(pre, npre);
        onnx__model_proto__free_unpacked(m, &pb_allocator);
        return NULL;
    }
    f->model = m;
    f->pre = pre;
    f->npre = npre;
    f->allow_outside = allow_outside;
    return f;
}

tl_onnx_file *tl_onnx_read_mem(const void *data, size_t len, const char *path, bool allow_outside,
                               tl_status *st)
{
    return read_model(data, len, -1, path, allow_outside, st);
}

tl_onnx_file *tl_onnx_read(const char *path, bool allow_outside, tl_status *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        int e = fd < 0 ? errno : EISDIR;
        if (fd >= 0)
            close(fd);
        return tl_fail(st, TL_EINPUT, "cannot open: %s", strerror(e)), NULL;
    }
    size_t len = (size_t)sb.st_size;
    /* not populated: the walk reads the pages around the weights, pread the weights */
    void *m = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (m == MAP_FAILED) {
        close(fd);
        return tl_fail(st, TL_EINPUT, "cannot read: %s", strerror(errno)), NULL;
    }
    tl_onnx_file *f = read_model(m ? m : "", len, fd, path, allow_outside, st);
    close(fd);
    if (m)
        munmap(m, len);
    return f;
}

void tl_onnx_close(tl_onnx_file *f)
{
    if (!f)
        return;
    pre_release(f->pre, f->npre);
    onnx__model_proto__free_unpacked(f->model, &pb_allocator);
    free(f->dir);
    free(f);
}

/* ---------- tensors ---------- */

static bool elem_dtype(int t, tl_dtype *dt)
{
    switch (t) {
    case TL_ONNX_FLOAT: *dt = TL_F32; return true;
    case TL_ONNX_DOUBLE: *dt = TL_F64; return true;
    case TL_ONNX_INT32: *dt = TL_I32; return true;
    case TL_ONNX_INT64: case TL_ONNX_BOOL: case TL_ONNX_UINT8: case TL_ONNX_INT8: case TL_ONNX_UINT16:
    case TL_ONNX_INT16: case TL_ONNX_UINT32:
        *dt = TL_I64;
        return true;
    default:
        return false;
    }
}

/* Bytes per element as ONNX stores the type raw. */
static size_t raw_size(int t)
{
    switch (t) {
    case TL_ONNX_BOOL: case TL_ONNX_UINT8: case TL_ONNX_INT8: return 1;
    case TL_ONNX_UINT16: case TL_ONNX_INT16: return 2;
    case TL_ONNX_FLOAT: case TL_ONNX_INT32: case TL_ONNX_UINT32: return 4;
    default: return 8;
    }
}

/* Element i of raw little-endian data of ONNX type t, into dst (tl's type). */
static void from_raw(tl_tensor *x, int t, const unsigned char *src)
{
    int64_t n = x->numel;
    if (raw_is_values(t, x->dtype)) {
        if (n)
            memcpy(x->data, src, (size_t)n * raw_size(t));
        return;
    }
    int64_t *d = x->data;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = src + (size_t)i * raw_size(t);
        switch (t) {
        case TL_ONNX_BOOL: d[i] = p[0] != 0; break;
        case TL_ONNX_UINT8: d[i] = p[0]; break;
        case TL_ONNX_INT8: d[i] = (int8_t)p[0]; break;
        case TL_ONNX_UINT16: d[i] = (uint16_t)(p[0] | p[1] << 8); break;
        case TL_ONNX_INT16: d[i] = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
        default: d[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; break;
        }
    }
}

/* The typed field that holds type t, with its count. */
static const void *typed_field(const Onnx__TensorProto *t, int type, size_t *n)
{
    switch (type) {
    case TL_ONNX_FLOAT: *n = t->n_float_data; return t->float_data;
    case TL_ONNX_DOUBLE: *n = t->n_double_data; return t->double_data;
    case TL_ONNX_INT64: *n = t->n_int64_data; return t->int64_data;
    case TL_ONNX_UINT32: *n = t->n_uint64_data; return t->uint64_data;
    default: *n = t->n_int32_data; return t->int32_data; /* int32, bool, the small integers */
    }
}

static void from_typed(tl_tensor *x, int type, const void *src)
{
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t v;
        switch (type) {
        case TL_ONNX_FLOAT: ((float *)x->data)[i] = ((const float *)src)[i]; continue;
        case TL_ONNX_DOUBLE: ((double *)x->data)[i] = ((const double *)src)[i]; continue;
        case TL_ONNX_INT64: v = ((const int64_t *)src)[i]; break;
        case TL_ONNX_UINT32: v = (int64_t)(uint32_t)((const uint64_t *)src)[i]; break;
        default: v = ((const int32_t *)src)[i]; break;
        }
        if (type == TL_ONNX_BOOL)
            v = v != 0;
        else if (type == TL_ONNX_UINT8)
            v = (uint8_t)v;
        else if (type == TL_ONNX_INT8)
            v = (int8_t)v;
        else if (type == TL_ONNX_UINT16)
            v = (uint16_t)v;
        else if (type == TL_ONNX_INT16)
            v = (int16_t)v;
        if (x->dtype == TL_I32)
            ((int32_t *)x->data)[i] = (int32_t)v;
        else
            ((int64_t *)x->data)[i] = v;
    }
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno)
        return false;
    *v = x;
    return true;
}

/* The external data of t (its location relative, inside the model's
 * folder; offset and length) opened at its offset, *where its location;
 * the file checked to hold the want bytes there before anything is
 * allocated for them (dims of a petabyte with a short file: an error, not
 * an allocation). */
static tl_code open_external(const tl_onnx_file *f, const Onnx__TensorProto *t, size_t want, FILE **out,
                             const char **where, tl_status *st)
{
    const char *loc = NULL;
    uint64_t off = 0, len = want;
    bool has_len = false;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
        if (!k || !v)
            continue;
        if (!strcmp(k, "location"))
            loc = v;
        else if ((!strcmp(k, "offset") && !parse_u64(v, &off)) || (!strcmp(k, "length") && !(has_len = parse_u64(v, &len))))
            return tl_fail(st, TL_EINPUT, "external data: bad %s \"%.40s\"", k, v);
    }
    if (!loc || !loc[0])
        return tl_fail(st, TL_EINPUT, "external data without a location");
    if (has_len && len != want)
        return tl_fail(st, TL_EINPUT, "external data of %llu bytes, where the dims need %zu", (unsigned long long)len, want);
    if (!f->allow_outside && !tl_path_inside_folder(loc))
        return tl_fail(st, TL_EINPUT, "external data \"%.200s\" is outside the model's folder", loc);
    size_t n = strlen(f->dir) + strlen(loc) + 1;
    char *path = tl_malloc(n, 1, "a path", st);
    if (!path)
        return st->code;
    snprintf(path, n, "%s%s", loc[0] == '/' ? "" : f->dir, loc);
    tl_code rc = TL_OK;
    if (!f->allow_outside) {
        char *rd = realpath(f->dir[0] ? f->dir : ".", NULL), *rp = realpath(path, NULL);
        size_t dn = rd ? strlen(rd) : 0;
        if (rd && rp && !(!strncmp(rp, rd, dn) && (rp[dn] == '/' || (dn == 1 && rd[0] == '/'))))
            rc = tl_fail(st, TL_EINPUT, "external data \"%.200s\" is outside the model's folder once links are followed", loc);
        free(rd);
        free(rp);
    }
    FILE *fp = rc ? NULL : fopen(path, "rb");
    if (!rc && !fp)
        rc = tl_fail(st, TL_EINPUT, "external data \"%.200s\": cannot open: %s", loc, strerror(errno));
    struct stat sb;
    if (fp && !fstat(fileno(fp), &sb) && S_ISREG(sb.st_mode) && ((uint64_t)sb.st_size < off || (uint64_t)sb.st_size - off < want))
        rc = tl_fail(st, TL_EINPUT, "external data \"%.200s\": shorter than offset %llu + %zu bytes", loc,
                     (unsigned long long)off, want);
    if (fp && !rc && fseeko(fp, (off_t)off, SEEK_SET))
        rc = tl_fail(st, TL_EINPUT, "external data \"%.200s\": cannot read: %s", loc, strerror(errno));
    if (rc && fp)
        fclose(fp);
    free(path);
    *out = rc ? NULL : fp;
    *where = loc;
    return rc;
}

/* want bytes of fp (open_external) into data; fp closed. */
static tl_code read_external(FILE *fp, const char *loc, void *data, size_t want, tl_status *st)
{
    tl_code rc = TL_OK;
    if (want && fread(data, 1, want, fp) != want)
        rc = ferror(fp) ? tl_fail(st, TL_EINPUT, "external data \"%.200s\": cannot read: %s", loc, strerror(errno))
                        : tl_fail(st, TL_EINPUT, "external data \"%.200s\": shorter than its %zu bytes", loc, want);
    fclose(fp);
    return rc;
}

tl_tensor *tl_onnx_tensor(const tl_onnx_file *f, Onnx__TensorProto *t, tl_status *st)
{
    const char *name = t->name && t->name[0] ? t->name : "(unnamed)";
    int type = t->has_data_type ? t->data_type : 0;
    tl_dtype dt;
    if (type == TL_ONNX_FLOAT16 || type == TL_ONNX_BFLOAT16)
        return tl_fail(st, TL_EINPUT, "tensor \"%.200s\" is %s: tl computes in float and double and never "
                       "changes precision itself; convert the model to float32 first", name, tl_onnx_type_name(type)), NULL;
    if (!elem_dtype(type, &dt))
        return tl_fail(st, TL_EINPUT, "tensor \"%.200s\" is %s, which tl does not compute in", name,
                       tl_onnx_type_name(type)), NULL;
    if (t->n_dims > TL_MAXDIM)
        return tl_fail(st, TL_EINPUT, "tensor \"%.200s\" has %zu dims (at most %d)", name, t->n_dims, TL_MAXDIM), NULL;
    int64_t numel;
    if (tl_shape_numel((int)t->n_dims, t->dims, &numel, st))
        return tl_wrap(st, "tensor \"%.200s\"", name), NULL;
    size_t want = (size_t)numel * raw_size(type);
    bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    size_t ntyped;
    const void *typed = typed_field(t, type, &ntyped);
    if (!external && t->has_raw_data && t->raw_data.len != want)
        return tl_fail(st, TL_EINPUT, "tensor \"%.200s\": %zu bytes of data, where its dims of %s need %zu", name,
                       t->raw_data.len, tl_onnx_type_name(type), want), NULL;
    if (!external && !t->has_raw_data && ntyped != (size_t)numel)
        return tl_fail(st, TL_EINPUT, "tensor \"%.200s\": %zu values, where its dims hold %lld", name, ntyped,
                       (long long)numel), NULL;
    bool same = raw_is_values(type, dt);
    struct tl_onnx_pre key = {t, NULL}, *p = !external && t->has_raw_data && same && f->npre
                                                   ? bsearch(&key, f->pre, f->npre, sizeof key, pre_cmp)
                                                   : NULL;
    if (p && p->x && p->x->data == t->raw_data.data) {
        tl_tensor *x = p->x; /* read into it already: taken over */
        p->x = NULL;
        drop_raw(t);
        return x;
    }
    if (!external && t->has_raw_data && same && want >= BIG_FIELD) {
        /* its own block of the raw data (pb_alloc): taken over, not copied */
        tl_tensor *x = tl_tensor_adopt_huge(dt, (int)t->n_dims, t->dims, t->raw_data.data, st);
        if (!x)
            return tl_wrap(st, "tensor \"%.200s\"", name), NULL;
        drop_raw(t);
        return x;
    }
    FILE *fp = NULL;
    const char *loc = NULL;
    if (external && open_external(f, t, want, &fp, &loc, st))
        return tl_wrap(st, "tensor \"%.200s\"", name), NULL;
    tl_tensor *x = tl_tensor_new(dt, (int)t->n_dims, t->dims, st);
    if (!x) {
        if (fp)
            fclose(fp);
        return tl_wrap(st, "tensor \"%.200s\"", name), NULL;
    }
    if (external) {
        /* read raw into a scratch when the types differ in size */
        bool direct = same;
        tl_tensor *raw = direct ? x : tl_tensor_new(TL_I64, 1, (int64_t[]){(int64_t)(want + 7) / 8}, st);
        tl_code rc = raw ? read_external(fp, loc, raw->data, want, st) : (fclose(fp), st->code);
        if (!rc && !direct)
            from_raw(x, type, raw->data);
        if (!direct)
            tl_tensor_unref(raw);
        if (rc) {
            tl_tensor_unref(x);
            return tl_wrap(st, "tensor \"%.200s\"", name), NULL;
        }
    } else if (t->has_raw_data) {
        from_raw(x, type, t->raw_data.data);
        free(t->raw_data.data); /* one copy of the weights: the tensor's */
        drop_raw(t);
        /* what the tensor holds now stands in the typed field's place for a second read */
    } else {
        from_typed(x, type, typed);
    }
    return x;
}

tl_tensor *tl_onnx_tensor_read_mem(const void *data, size_t len, int *elem_type, tl_status *st)
{
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&pb_allocator, len, data);
    if (!t)
        return tl_fail(st, TL_EINPUT, "not an ONNX tensor (the protobuf is malformed or truncated)"), NULL;
    tl_onnx_file f = {.dir = ""};
    if (elem_type)
        *elem_type = t->has_data_type ? t->data_type : 0;
    tl_tensor *x = tl_onnx_tensor(&f, t, st);
    onnx__tensor_proto__free_unpacked(t, &pb_allocator);
    return x;
}
