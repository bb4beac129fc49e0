/* ONNX models (graph/onnx.h, formats/onnx.h): the ONNX conformance suite
 * that Debian's libonnx-testdata installs (node, pytorch-converted,
 * pytorch-operator and simple: a model, its inputs and ONNX's expected
 * outputs per case), every case whose ops tl translates and whose tensors
 * are float or integer, at the suite's tolerance (rtol 1e-3, atol 1e-7).
 *
 * The report (stdout) lists per op the cases passed, failed and skipped,
 * and each skipped case with its reason (an op not translated, a tensor
 * type tl does not compute in...).  A case whose ops are all translated
 * must pass unless tests/onnx_known.txt lists it with its reason.
 * TL_ONNX_DATA overrides the suite's folder; without the package the test
 * says so and passes. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <dirent.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/exec.h"
#include "formats/npy.h"
#include "formats/onnx.h"
#include "graph/onnx.h"

#define DATA "/usr/share/libonnx-testdata/data"

typedef struct opstat {
    char name[64];
    int pass, fail, skip;
} opstat;

static opstat ops[512];
static int nops;

static opstat *op_of(const char *name)
{
    for (int i = 0; i < nops; i++)
        if (!strcmp(ops[i].name, name))
            return &ops[i];
    if (nops == 512)
        return &ops[511];
    snprintf(ops[nops].name, sizeof ops[nops].name, "%s", name);
    return &ops[nops++];
}

static bool translated(const char *op)
{
    int lo, hi;
    const char *n;
    for (int i = 0; (n = tl_onnx_op_name(i, &lo, &hi)); i++)
        if (!strcmp(n, op))
            return true;
    return false;
}

static tl_tensor *read_pb(const char *path, int *ty, tl_status *st)
{
    unsigned char *buf;
    size_t len;
    if (tl_slurp_path(path, &buf, &len, st))
        return NULL;
    tl_tensor *t = tl_onnx_tensor_read_mem(buf, len, ty, st);
    free(buf);
    return t;
}

/* rtol 1e-3, atol 1e-7; NaN matches NaN; integers exactly */
static bool close_enough(const tl_tensor *a, const tl_tensor *b, char *why, size_t len)
{
    char da[64], db[64];
    bool fb = b->dtype == TL_F32 || b->dtype == TL_F64;
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) ||
        (a->dtype != b->dtype && !(a->dtype == TL_I64 && b->dtype == TL_I64))) {
        snprintf(why, len, "got %s, expected %s", tl_tensor_desc(a, da, sizeof da), tl_tensor_desc(b, db, sizeof db));
        return false;
    }
    for (int64_t i = 0; i < a->numel; i++) {
        if (!fb) {
            if (tl_tensor_get_int(a, i) != tl_tensor_get_int(b, i)) {
                snprintf(why, len, "element %lld: %lld, expected %lld", (long long)i,
                         (long long)tl_tensor_get_int(a, i), (long long)tl_tensor_get_int(b, i));
                return false;
            }
            continue;
        }
        double x = tl_tensor_get(a, i), y = tl_tensor_get(b, i);
        if ((isnan(x) && isnan(y)) || x == y)
            continue;
        if (!(fabs(x - y) <= 1e-7 + 1e-3 * fabs(y))) {
            snprintf(why, len, "element %lld: %.9g, expected %.9g", (long long)i, x, y);
            return false;
        }
    }
    return true;
}

static bool tensor_type_ok(int ty)
{
    return ty == TL_ONNX_FLOAT || ty == TL_ONNX_DOUBLE || ty == TL_ONNX_INT32 || ty == TL_ONNX_INT64;
}

/* Runs one case: 1 pass, 0 fail, -1 skip (why says why). */
static int run_case(const char *dir, char *why, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    tl_status st = {0};
    tl_onnx_file *f = tl_onnx_read(path, false, &st);
    if (!f)
        return snprintf(why, len, "unreadable: %.500s", st.msg), -1;
    const Onnx__GraphProto *g = f->model->graph;
    int rc = 1;
    for (size_t i = 0; i < g->n_node && rc > 0; i++) {
        const char *d = g->node[i]->domain;
        if ((d && d[0] && strcmp(d, "ai.onnx")) || !translated(g->node[i]->op_type))
            rc = -1, snprintf(why, len, "op %s%s%s not translated", d && d[0] ? d : "", d && d[0] ? "." : "",
                              g->node[i]->op_type);
    }
    int64_t opset = 0;
    for (size_t i = 0; i < f->model->n_opset_import; i++)
        if (!f->model->opset_import[i]->domain || !f->model->opset_import[i]->domain[0])
            opset = f->model->opset_import[i]->version;
    if (rc > 0 && (opset < 6 || opset > 18))
        rc = -1, snprintf(why, len, "opset %lld", (long long)opset);
    tl_onnx_close(f);
    if (rc < 0)
        return rc;
    tl_tensor *in[64] = {0}, *want[64] = {0};
    int nin = 0, nwant = 0;
    glob_t gl;
    for (int io = 0; io < 2 && rc > 0; io++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/%s_*.pb", dir, io ? "output" : "input");
        if (glob(path, 0, NULL, &gl)) {
            if (io)
                rc = -1, snprintf(why, len, "no expected outputs");
            continue;
        }
        for (size_t i = 0; i < gl.gl_pathc && i < 64 && rc > 0; i++) {
            /* input_10 sorts before input_2: read them by number */
            snprintf(path, sizeof path, "%s/test_data_set_0/%s_%zu.pb", dir, io ? "output" : "input", i);
            int ty;
            tl_status s2 = {0};
            tl_tensor *t = read_pb(path, &ty, &s2);
            if (!t || !tensor_type_ok(ty)) {
                rc = -1;
                snprintf(why, len, "%s %zu is %.300s", io ? "output" : "input", i, t ? tl_onnx_type_name(ty) : s2.msg);
                tl_tensor_unref(t);
                break;
            }
            (io ? want : in)[io ? nwant++ : nin++] = t;
        }
        globfree(&gl);
    }
    tl_onnx_model *m = NULL;
    tl_graph *sig = NULL, *gr = NULL;
    tl_result *r = NULL;
    if (rc > 0) {
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        m = tl_onnx_open(path, NULL, &st);
        sig = m ? tl_onnx_signature(m, &st) : NULL;
        if (!sig)
            rc = 0, snprintf(why, len, "%.900s", st.msg);
    }
    if (rc > 0) {
        for (int i = nin; i < sig->ninputs && i < 64; i++)
            if (!(in[i] = tl_onnx_default(m, i)))
                rc = 0, snprintf(why, len, "input %d has no data", i);
        if (rc > 0 && sig->ninputs < nin)
            rc = 0, snprintf(why, len, "%d inputs given, the model has %d", nin, sig->ninputs);
    }
    if (rc > 0 && !(gr = tl_onnx_translate(m, in, &st)))
        rc = 0, snprintf(why, len, "%.900s", st.msg);
    if (rc > 0) {
        tl_run_opts o = {0};
        if (tl_run(gr, in, &o, &r, &st))
            rc = 0, snprintf(why, len, "run: %.900s", st.msg);
    }
    if (rc > 0 && tl_result_noutputs(r) != nwant)
        rc = 0, snprintf(why, len, "%d outputs, expected %d", tl_result_noutputs(r), nwant);
    for (int i = 0; rc > 0 && i < nwant; i++) {
        char w[300];
        if (!close_enough(tl_result_output(r, i), want[i], w, sizeof w))
            rc = 0, snprintf(why, len, "output %d: %s", i, w);
    }
    tl_result_free(r);
    tl_graph_free(gr);
    int ns = sig ? sig->ninputs : nin;
    tl_graph_free(sig);
    tl_onnx_free(m);
    for (int i = 0; i < 64; i++) {
        if (i < ns || i < nin)
            tl_tensor_unref(in[i]);
        tl_tensor_unref(want[i]);
    }
    return rc;
}

/* tests/onnx_known.txt: "CASE reason" lines for cases that fail for a
 * reason written down. */
static bool known(const char *name, char *reason, size_t len)
{
    FILE *f = fopen("tests/onnx_known.txt", "r");
    char line[512];
    bool hit = false;
    size_t n = strlen(name);
    while (f && !hit && fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ' ') {
            hit = true;
            snprintf(reason, len, "%s", line + n + 1);
            reason[strcspn(reason, "\n")] = '\0';
        }
    if (f)
        fclose(f);
    return hit;
}

static const char *main_op(const char *dir, char *buf, size_t len)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    tl_status st = {0};
    tl_onnx_file *f = tl_onnx_read(path, false, &st);
    snprintf(buf, len, "%s", f && f->model->graph->n_node == 1 ? f->model->graph->node[0]->op_type : "(model)");
    tl_onnx_close(f);
    return buf;
}

Test(onnx, conformance, .timeout = 600)
{
    const char *root = getenv("TL_ONNX_DATA") ? getenv("TL_ONNX_DATA") : DATA;
    static const char *const sets[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    int pass = 0, fail = 0, skip = 0, kn = 0;
    DIR *probe = opendir(root);
    if (!probe) {
        printf("onnx conformance: %s is not there (install libonnx-testdata); skipped\n", root);
        return;
    }
    closedir(probe);
    FILE *rep = fopen("build/tests/onnx_conformance.txt", "w");
    for (size_t s = 0; s < 4; s++) {
        char pat[1024];
        snprintf(pat, sizeof pat, "%s/%s/*/model.onnx", root, sets[s]);
        glob_t gl;
        if (glob(pat, 0, NULL, &gl))
            continue;
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            char dir[1024], why[1024] = "", opn[64], reason[400];
            snprintf(dir, sizeof dir, "%s", gl.gl_pathv[i]);
            *strrchr(dir, '/') = '\0';
            const char *name = strrchr(dir, '/') + 1;
            int rc = run_case(dir, why, sizeof why);
            opstat *o = op_of(main_op(dir, opn, sizeof opn));
            if (rc > 0) {
                pass++, o->pass++;
            } else if (rc < 0) {
                skip++, o->skip++;
            } else if (known(name, reason, sizeof reason)) {
                kn++, o->skip++;
                snprintf(why, sizeof why, "known: %s", reason);
            } else {
                fail++, o->fail++;
                cr_expect(false, "%s/%s: %s", sets[s], name, why);
            }
            if (rep)
                fprintf(rep, "%-5s %s/%s%s%s\n", rc > 0 ? "pass" : rc < 0 || why[0] == 'k' ? "skip" : "FAIL",
                        sets[s], name, why[0] ? ": " : "", why);
        }
        globfree(&gl);
    }
    if (rep) {
        fprintf(rep, "\nper op (a case with one node counts for its op; others for (model)):\n");
        for (int i = 0; i < nops; i++)
            fprintf(rep, "%-28s pass %3d  fail %3d  skip %3d\n", ops[i].name, ops[i].pass, ops[i].fail, ops[i].skip);
        fclose(rep);
    }
    printf("onnx conformance: %d passed, %d failed, %d known failures, %d skipped (build/tests/onnx_conformance.txt)\n",
           pass, fail, kn, skip);
}

/* Element i of the test tensors of ONNX type `type`. */
static double test_value(int type, int64_t i)
{
    switch (type) {
    case 1: return (double)((float)i * 0.5f - 7);
    case 11: return (double)i * 0.25 - 3;
    case 5: return (double)(i % 30000 - 15000); /* int16 */
    default: return (double)(i * 7 - 100000);   /* int32 */
    }
}

/* A packed TensorProto of n elements of ONNX type `type` (esize bytes
 * each, little-endian as ONNX stores them raw), element i test_value's. */
static uint8_t *packed_tensor(int type, int64_t n, size_t esize, size_t *len)
{
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[2] = {n / 8, 8};
    t.n_dims = 2;
    t.dims = dims;
    t.has_data_type = 1;
    t.data_type = type;
    t.name = "w";
    t.has_raw_data = 1;
    t.raw_data.len = (size_t)n * esize;
    t.raw_data.data = malloc(t.raw_data.len);
    cr_assert(t.raw_data.data);
    for (int64_t i = 0; i < n; i++) {
        uint8_t *p = t.raw_data.data + (size_t)i * esize;
        double v = test_value(type, i);
        float f = (float)v;
        int32_t i32 = (int32_t)v;
        int16_t i16 = (int16_t)v;
        memcpy(p, type == 1 ? (void *)&f : type == 11 ? (void *)&v : type == 5 ? (void *)&i16 : (void *)&i32, esize);
    }
    *len = onnx__tensor_proto__get_packed_size(&t);
    uint8_t *buf = malloc(*len);
    cr_assert(buf);
    onnx__tensor_proto__pack(&t, buf);
    free(t.raw_data.data);
    return buf;
}

/* Weights of 2 MiB and more become tensors without a second copy (their
 * raw data's block is the tensor's, formats/onnx.c): the values, shapes
 * and dtypes are those of the file whatever the path (float and double
 * taken over, sizes off the 2 MiB grid included; int16 widened to i64 and
 * small ones copied), and the tensors free cleanly (the sanitizers). */
Test(onnx, large_weights_taken_over)
{
    static const struct {
        int type;
        int64_t n;
        size_t esize;
        tl_dtype dt;
    } cases[] = {{1, 600008, 4, TL_F32}, {1, 524288, 4, TL_F32}, {11, 300000, 8, TL_F64},
                 {6, 600008, 4, TL_I32}, {5, 1100000, 2, TL_I64}, {1, 1000, 4, TL_F32}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        uint8_t *buf = packed_tensor(cases[c].type, cases[c].n, cases[c].esize, &len);
        tl_status st = {0};
        int ty = 0;
        tl_tensor *t = tl_onnx_tensor_read_mem(buf, len, &ty, &st);
        free(buf);
        cr_assert(t, "case %zu: %s", c, st.msg);
        cr_expect(ty == cases[c].type && t->dtype == cases[c].dt && t->ndim == 2 &&
                  t->shape[0] == cases[c].n / 8 && t->shape[1] == 8 && t->numel == cases[c].n, "case %zu", c);
        int64_t bad = 0;
        for (int64_t i = 0; i < t->numel; i++)
            bad += tl_tensor_get(t, i) != test_value(cases[c].type, i);
        cr_expect(bad == 0, "case %zu: %lld values differ", c, (long long)bad);
        tl_tensor_unref(t);
    }
}

/* ---------- a model's large raw data read apart (formats/onnx.c) ---------- */

typedef struct wire {
    uint8_t *b;
    size_t n, cap;
} wire;

static void wput(wire *w, const void *p, size_t n)
{
    if (!n) /* an empty message */
        return;
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2;
        w->b = realloc(w->b, w->cap);
        cr_assert(w->b);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void wvarint(wire *w, uint64_t v)
{
    uint8_t b[10];
    size_t k = 0;
    do {
        b[k++] = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
        v >>= 7;
    } while (v);
    wput(w, b, k);
}

/* field `field`, length-delimited, holding b (freed) */
static void wfield(wire *w, int field, wire *b)
{
    wvarint(w, (uint64_t)field << 3 | 2);
    wvarint(w, b->n);
    wput(w, b->b, b->n);
    free(b->b);
    *b = (wire){0};
}

/* A TensorProto: float dims {n}, element i as test_value(1, i) * scale,
 * with raw data given `raws` times (the last counts). */
static wire wire_tensor(const char *name, int64_t n, float scale, int raws)
{
    wire t = {0}, r = {0};
    wvarint(&t, 1 << 3); /* dims */
    wvarint(&t, (uint64_t)n);
    wvarint(&t, 2 << 3); /* data_type: float */
    wvarint(&t, 1);
    wvarint(&t, 8 << 3 | 2); /* name */
    wvarint(&t, strlen(name));
    wput(&t, name, strlen(name));
    for (int k = 0; k < raws; k++) {
        for (int64_t i = 0; i < n; i++) {
            float f = (float)test_value(1, i) * (scale + (float)(raws - 1 - k));
            wput(&r, &f, 4);
        }
        wfield(&t, 9, &r);
    }
    return t;
}

/* The initializers of the model in buf, as protobuf-c finds them in the
 * whole buffer, against tl_onnx_read_mem's and tl_onnx_read's (through a
 * file): the same names, dims and raw bytes, in order. */
static void same_as_protobuf_c(const uint8_t *buf, size_t len, const char *what)
{
    Onnx__ModelProto *ref = onnx__model_proto__unpack(NULL, len, buf);
    cr_assert(ref && ref->graph, "%s: protobuf-c reads it", what);
    char path[] = "/tmp/tl_onnx_apart_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert(write(fd, buf, len) == (ssize_t)len);
    close(fd);
    for (int via_file = 0; via_file < 2; via_file++) {
        tl_status st = {0};
        tl_onnx_file *f = via_file ? tl_onnx_read(path, false, &st) : tl_onnx_read_mem(buf, len, path, false, &st);
        cr_assert(f, "%s (%s): %s", what, via_file ? "file" : "memory", st.msg);
        const Onnx__GraphProto *a = ref->graph, *b = f->model->graph;
        cr_assert_eq(a->n_initializer, b->n_initializer, "%s", what);
        for (size_t i = 0; i < a->n_initializer; i++) {
            const Onnx__TensorProto *x = a->initializer[i], *y = b->initializer[i];
            cr_expect_str_eq(x->name, y->name, "%s", what);
            cr_expect(x->n_dims == y->n_dims && !memcmp(x->dims, y->dims, x->n_dims * sizeof *x->dims), "%s", what);
            cr_expect(x->has_raw_data == y->has_raw_data && x->raw_data.len == y->raw_data.len &&
                      !memcmp(x->raw_data.data, y->raw_data.data, x->raw_data.len),
                      "%s (%s): initializer %zu's raw data", what, via_file ? "file" : "memory", i);
        }
        /* and the tensors hold the values */
        for (size_t i = 0; i < b->n_initializer; i++) {
            tl_tensor *t = tl_onnx_tensor(f, b->initializer[i], &st);
            cr_assert(t, "%s: %s", what, st.msg);
            cr_expect_eq(t->numel, (int64_t)a->initializer[i]->raw_data.len / 4);
            cr_expect(!memcmp(t->data, a->initializer[i]->raw_data.data, a->initializer[i]->raw_data.len), "%s", what);
            tl_tensor_unref(t);
        }
        tl_onnx_close(f);
    }
    unlink(path);
    onnx__model_proto__free_unpacked(ref, NULL);
}

/* Initializers of 64 KiB and more are taken out of the protobuf before it
 * is parsed and read into it apart (pread from the file, or a copy from
 * memory): the parsed model is the whole buffer's, whatever the layout,
 * including what the walk leaves to protobuf-c (raw data twice, the graph
 * twice, a key written with redundant bytes, a file cut short). */
Test(onnx, large_weights_read_apart)
{
    const int64_t sizes[] = {40000, 1000, 600000, 16384, 16383, 16384}; /* 16384: 64 KiB */
    wire g = {0};
    for (int i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        wire t = wire_tensor(name, sizes[i], 1.0f + (float)i, i == 3 ? 2 : 1); /* w3: raw data twice */
        wfield(&g, 5, &t);
    }
    wvarint(&g, 2 << 3 | 2); /* the graph's name after its initializers */
    wvarint(&g, 1);
    wput(&g, "g", 1);
    wire gcopy = {0};
    wput(&gcopy, g.b, g.n);
    wire m = {0};
    wvarint(&m, 1 << 3); /* ir_version 8 */
    wvarint(&m, 8);
    wfield(&m, 7, &g);
    same_as_protobuf_c(m.b, m.n, "a model");

    wire twice = {0}; /* the graph twice: protobuf-c's merge */
    wput(&twice, m.b, m.n);
    wfield(&twice, 7, &gcopy);
    same_as_protobuf_c(twice.b, twice.n, "the graph twice");

    wire redundant = {0}; /* the graph's key as 0xba 0x00 */
    wput(&redundant, m.b, 2);
    wput(&redundant, (const uint8_t[]){0xba, 0x00}, 2);
    cr_assert_eq(m.b[2], 0x3a);
    wput(&redundant, m.b + 3, m.n - 3);
    same_as_protobuf_c(redundant.b, redundant.n, "a redundant key");

    /* cut short inside the last large weight: refused as protobuf-c refuses it */
    tl_status st = {0};
    tl_onnx_file *f = tl_onnx_read_mem(m.b, m.n - 70000, "x.onnx", false, &st);
    cr_expect(!f && st.code == TL_EINPUT && strstr(st.msg, "malformed or truncated"), "%s", st.msg);
    tl_onnx_close(f);
    free(m.b);
    free(twice.b);
    free(redundant.b);
}

/* A string field on the wire. */
static void wstr(wire *w, int field, const char *s)
{
    wvarint(w, (uint64_t)field << 3 | 2);
    wvarint(w, strlen(s));
    wput(w, s, strlen(s));
}

/* A graph of one If node whose then branch is graph g (taken) and whose
 * else branch is a Neg: g nested one level deeper. */
static wire if_around(wire *g)
{
    wire then_a = {0}, else_a = {0}, neg = {0}, eg = {0}, node = {0}, out = {0}, eout = {0};
    wstr(&neg, 1, "x");
    wstr(&neg, 2, "y");
    wstr(&neg, 4, "Neg");
    wfield(&eg, 1, &neg);
    wstr(&eg, 2, "e");
    wstr(&eout, 1, "y");
    wfield(&eg, 12, &eout);
    wstr(&then_a, 1, "then_branch");
    wfield(&then_a, 6, g);
    wvarint(&then_a, 20 << 3);
    wvarint(&then_a, 5); /* GRAPH */
    wstr(&else_a, 1, "else_branch");
    wfield(&else_a, 6, &eg);
    wvarint(&else_a, 20 << 3);
    wvarint(&else_a, 5);
    wstr(&node, 1, "c");
    wstr(&node, 2, "y");
    wstr(&node, 4, "If");
    wfield(&node, 5, &then_a);
    wfield(&node, 5, &else_a);
    wire r = {0};
    wfield(&r, 1, &node);
    wstr(&r, 2, "g");
    wstr(&out, 1, "y");
    wfield(&r, 12, &out);
    return r;
}

/* A model of If nodes nested depth deep, around a Relu, with inputs
 * x (f32 [3]) and c (bool []). */
static wire nested_model(int depth)
{
    wire g = {0}, relu = {0};
    wstr(&relu, 1, "x");
    wstr(&relu, 2, "y");
    wstr(&relu, 4, "Relu");
    wfield(&g, 1, &relu);
    wstr(&g, 2, "g");
    wire out = {0};
    wstr(&out, 1, "y");
    wfield(&g, 12, &out);
    for (int i = 0; i < depth; i++) {
        wire up = if_around(&g);
        g = up;
    }
    const struct { const char *name; int type, dims; } ins[] = {{"x", 1, 3}, {"c", 9, -1}};
    for (int i = 0; i < 2; i++) { /* ValueInfo{name, type{tensor_type{elem_type, shape}}} */
        wire vi = {0}, ty = {0}, tt = {0}, shape = {0};
        wvarint(&tt, 1 << 3);
        wvarint(&tt, (uint64_t)ins[i].type);
        if (ins[i].dims > 0) {
            wire dim = {0};
            wvarint(&dim, 1 << 3);
            wvarint(&dim, (uint64_t)ins[i].dims);
            wfield(&shape, 1, &dim);
        }
        wfield(&tt, 2, &shape);
        wfield(&ty, 1, &tt);
        wstr(&vi, 1, ins[i].name);
        wfield(&vi, 2, &ty);
        wfield(&g, 11, &vi);
    }
    wire m = {0}, opset = {0};
    wvarint(&m, 1 << 3);
    wvarint(&m, 8); /* ir_version */
    wvarint(&opset, 2 << 3);
    wvarint(&opset, 13);
    wfield(&m, 8, &opset);
    wfield(&m, 7, &g);
    return m;
}

/* protobuf-c unpacks submessages recursively: a model nesting its
 * subgraphs thousands deep (100 bytes a level) overflowed the stack.  It
 * is refused with one error; 64 levels still load and run. */
Test(onnx, nesting_refused_before_unpacking)
{
    tl_status st = {0};
    wire deep = nested_model(3000);
    tl_onnx_model *m = tl_onnx_open_mem(deep.b, deep.n, "deep.onnx", NULL, &st);
    cr_expect(!m && st.code == TL_EINPUT && strstr(st.msg, "nests subgraphs") && strstr(st.msg, "more than 64 deep"),
              "%s", st.msg);
    tl_onnx_free(m);
    free(deep.b);

    st = (tl_status){0};
    wire ok = nested_model(64);
    m = tl_onnx_open_mem(ok.b, ok.n, "ok.onnx", NULL, &st);
    cr_assert(m, "%s", st.msg);
    tl_tensor *in[2] = {tl_tensor_new(TL_F32, 1, (const int64_t[]){3}, &st), NULL};
    cr_assert(in[0], "%s", st.msg);
    memcpy(in[0]->data, (const float[]){-1, 2, -3}, sizeof(float[3]));
    in[1] = tl_tensor_new(TL_F32, 0, NULL, &st); /* the condition: bools live in the call's dtype */
    cr_assert(in[1], "%s", st.msg);
    ((float *)in[1]->data)[0] = 1;
    tl_graph *g = tl_onnx_translate(m, in, &st);
    cr_expect(g, "64 levels: %s", st.msg);
    tl_graph_free(g);
    tl_tensor_unref(in[0]);
    tl_tensor_unref(in[1]);
    tl_onnx_free(m);
    free(ok.b);
}
