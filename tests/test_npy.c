/* Tests for formats/npy and formats/npz.  Fixtures under tests/fixtures/npy
 * come from tests/gen/gen_npy_fixtures.py (NumPy): every array holds
 * i * 0.5 - 3 at flat row-major index i, recomputed here.  Run from the
 * repository root; TL_NPY_WRITE_FIXTURES=1 rewrites the tl_written_* files
 * that the script's --check loads in NumPy. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/npy.h"
#include "formats/npz.h"
#include "formats/sniff.h"

#ifndef TL_NPY_FIXDIR
#define TL_NPY_FIXDIR "tests/fixtures/npy/"
#endif
#define FIX(name) TL_NPY_FIXDIR name

/* Repeated in tests/gen/gen_npy_fixtures.py. */
static const uint64_t special_f64[8] = {0x7FF8000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
                                        0x8000000000000000, 0x0000000000000001, 0x7FEFFFFFFFFFFFFF,
                                        0x3FB999999999999A, 0x7FF8000000000BAD};
static const uint32_t special_f32[8] = {0x7FC00000, 0x7F800000, 0xFF800000, 0x80000000,
                                        0x00000001, 0x7F7FFFFF, 0x3DCCCCCD, 0x7FC00BAD};

/* ---- helpers ---- */

typedef struct shape_case {
    const char *name;
    tl_dtype dt;
    int ndim;
    int64_t shape[6];
} shape_case;

/* The generator's values: i/2 - 3 for floats, 3i - 7 for index tensors. */
static double formula_of(tl_dtype dt, int64_t i)
{
    return tl_dtype_is_int(dt) ? (double)(3 * i - 7) : (double)i * 0.5 - 3;
}
static double formula(int64_t i) { return formula_of(TL_F64, i); }

static tl_tensor *formula_tensor(tl_dtype dt, int ndim, const int64_t *shape)
{
    tl_status st = {0};
    tl_tensor *t = tl_tensor_new(dt, ndim, shape, &st);
    cr_assert(t, "%s", st.msg);
    for (int64_t i = 0; i < t->numel; i++)
        tl_tensor_set(t, i, formula_of(dt, i));
    return t;
}

/* int64 values a double cannot hold (the generator's I64_EXTREMES) */
static const int64_t i64_extremes[6] = {INT64_MIN, INT64_MAX, ((int64_t)1 << 53) + 1,
                                        -((int64_t)1 << 53) - 1, 0, -1};

static void check_formula(const tl_tensor *t, tl_dtype dt, int ndim, const int64_t *shape,
                          const char *what)
{
    cr_assert_eq(t->dtype, dt, "%s: dtype", what);
    cr_assert_eq(t->ndim, ndim, "%s: ndim %d", what, t->ndim);
    for (int k = 0; k < ndim; k++)
        cr_assert_eq(t->shape[k], shape[k], "%s: shape[%d]", what, k);
    for (int64_t i = 0; i < t->numel; i++) {
        double want = dt == TL_F32 ? (double)(float)formula(i) : formula_of(dt, i);
        cr_assert_eq(tl_tensor_get(t, i), want, "%s: element %" PRId64, what, i);
    }
}

static void check_cases(const shape_case *cs, int n)
{
    for (int i = 0; i < n; i++) {
        tl_status st = {0};
        tl_tensor *t = tl_npy_read_file(cs[i].name, &st);
        cr_assert(t, "%s: %s", cs[i].name, st.msg);
        check_formula(t, cs[i].dt, cs[i].ndim, cs[i].shape, cs[i].name);
        tl_tensor_unref(t);
    }
}

static bool same_bits(const tl_tensor *a, const tl_tensor *b)
{
    return a->dtype == b->dtype && tl_same_shape(a, b) && a->numel == b->numel &&
           !memcmp(a->data, b->data, (size_t)a->numel * tl_dtype_size(a->dtype));
}

static unsigned char *load(const char *path, size_t *len)
{
    tl_status st = {0};
    unsigned char *buf;
    cr_assert_eq(tl_slurp_path(path, &buf, len, &st), TL_OK, "%s: %s", path, st.msg);
    return buf;
}

static void expect_error(const tl_status *st, tl_code code, const char *part)
{
    cr_assert_eq(st->code, code, "code %d, message: %s", st->code, st->msg);
    cr_assert(strstr(st->msg, part), "message \"%s\" lacks \"%s\"", st->msg, part);
}

static void npy_mem_fails(const void *buf, size_t len, const char *part)
{
    tl_status st = {0};
    tl_tensor *t = tl_npy_read_mem(buf, len, &st);
    cr_assert_null(t, "expected an error with \"%s\"", part);
    expect_error(&st, TL_EINPUT, part);
}

/* A version 1.0 file with the given header text and data. */
static unsigned char *make_npy(const char *header, const void *data, size_t dlen, size_t *len)
{
    size_t hl = strlen(header);
    unsigned char *b = malloc(10 + hl + dlen + 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)hl;
    b[9] = (unsigned char)(hl >> 8);
    memcpy(b + 10, header, hl);
    if (dlen)
        memcpy(b + 10 + hl, data, dlen);
    *len = 10 + hl + dlen;
    return b;
}

static void header_fails(const char *header, size_t dlen, const char *part)
{
    static const unsigned char zeros[64];
    size_t len;
    unsigned char *b = make_npy(header, zeros, dlen, &len);
    npy_mem_fails(b, len, part);
    free(b);
}

static tl_tensor *header_reads(const char *header, const void *data, size_t dlen)
{
    tl_status st = {0};
    size_t len;
    unsigned char *b = make_npy(header, data, dlen, &len);
    tl_tensor *t = tl_npy_read_mem(b, len, &st);
    free(b);
    cr_assert(t, "header %s: %s", header, st.msg);
    return t;
}

/* ---- .npy: files NumPy wrote ---- */

Test(npy, c_order_little_endian)
{
    static const shape_case cs[] = {
        {FIX("f32_2x3.npy"), TL_F32, 2, {2, 3}},
        {FIX("f64_2x3x4.npy"), TL_F64, 3, {2, 3, 4}},
        {FIX("f64_7.npy"), TL_F64, 1, {7}},
        {FIX("i64_2x3.npy"), TL_I64, 2, {2, 3}},
        {FIX("i32_7.npy"), TL_I32, 1, {7}},
    };
    check_cases(cs, 5);
}

Test(npy, index_tensors_exact)
{
    tl_status st = {0};
    tl_tensor *t = tl_npy_read_file(FIX("i64_extremes.npy"), &st);
    cr_assert(t, "%s", st.msg);
    cr_assert_eq(t->dtype, TL_I64);
    cr_assert_eq(t->numel, 6);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(tl_tensor_get_int(t, i), i64_extremes[i], "element %d", i);
    tl_tensor_unref(t);
}

Test(npy, big_endian)
{
    static const shape_case cs[] = {
        {FIX("be_f32_3x4.npy"), TL_F32, 2, {3, 4}},
        {FIX("be_f64_2x3.npy"), TL_F64, 2, {2, 3}},
        {FIX("scalar_be_f32.npy"), TL_F32, 0, {0}},
        {FIX("be_i64_3x4.npy"), TL_I64, 2, {3, 4}},
        {FIX("be_i32_2x3.npy"), TL_I32, 2, {2, 3}},
    };
    check_cases(cs, 5);
}

Test(npy, fortran_order_is_transposed)
{
    static const shape_case cs[] = {
        {FIX("fortran_f64_3x4.npy"), TL_F64, 2, {3, 4}},
        {FIX("fortran_f32_2x3x4.npy"), TL_F32, 3, {2, 3, 4}},
        {FIX("fortran_be_f64_2x3x4.npy"), TL_F64, 3, {2, 3, 4}},
        {FIX("fortran_f64_2x3x1x4x2.npy"), TL_F64, 5, {2, 3, 1, 4, 2}},
        {FIX("empty_fortran_f64_2x0x4.npy"), TL_F64, 3, {2, 0, 4}},
        {FIX("fortran_i64_2x3x4.npy"), TL_I64, 3, {2, 3, 4}},
        {FIX("fortran_be_i32_2x3x4.npy"), TL_I32, 3, {2, 3, 4}},
    };
    check_cases(cs, 7);
}

Test(npy, format_versions)
{
    static const shape_case cs[] = {
        {FIX("v2_f64_2x3.npy"), TL_F64, 2, {2, 3}},
        {FIX("v3_f32_4.npy"), TL_F32, 1, {4}},
    };
    check_cases(cs, 2);
}

Test(npy, scalars_and_empty)
{
    static const shape_case cs[] = {
        {FIX("scalar_f64.npy"), TL_F64, 0, {0}},
        {FIX("empty_f32_0x3.npy"), TL_F32, 2, {0, 3}},
        {FIX("empty_f64_0.npy"), TL_F64, 1, {0}},
        {FIX("scalar_i64.npy"), TL_I64, 0, {0}},
        {FIX("empty_i32_0x3.npy"), TL_I32, 2, {0, 3}},
    };
    check_cases(cs, 5);
}

Test(npy, hand_written_headers)
{
    static const shape_case cs[] = {
        {FIX("hdr_native_f64_2x3.npy"), TL_F64, 2, {2, 3}},
        {FIX("hdr_py2_long_f64_2x3.npy"), TL_F64, 2, {2, 3}},
        {FIX("hdr_compact_f64_2x3.npy"), TL_F64, 2, {2, 3}},
        {FIX("hdr_unaligned_f64_2x3.npy"), TL_F64, 2, {2, 3}},
    };
    check_cases(cs, 4);
}

Test(npy, special_values_bit_exact)
{
    tl_status st = {0};
    tl_tensor *d = tl_npy_read_file(FIX("special_f64.npy"), &st);
    cr_assert(d, "%s", st.msg);
    tl_tensor *f = tl_npy_read_file(FIX("special_be_f32.npy"), &st);
    cr_assert(f, "%s", st.msg);
    cr_assert(d->dtype == TL_F64 && d->numel == 8 && f->dtype == TL_F32 && f->numel == 8);
    cr_assert(!memcmp(d->data, special_f64, sizeof special_f64));
    cr_assert(!memcmp(f->data, special_f32, sizeof special_f32));
    tl_tensor_unref(d);
    tl_tensor_unref(f);
}

Test(npy, header_variants_accepted)
{
    const float v[3] = {1.5f, -2, 0};
    tl_tensor *t = header_reads("{'descr':'<f4','fortran_order':False,'shape':(3,)}", v, 12);
    cr_assert(t->dtype == TL_F32 && t->ndim == 1 && t->shape[0] == 3 && tl_tensor_get(t, 0) == 1.5);
    tl_tensor_unref(t);
    t = header_reads(" {\t'shape' : ( 3 , ) ,\n 'descr' : \"f4\" , 'fortran_order' : True , } \n",
                     v, 12);
    cr_assert(t->dtype == TL_F32 && t->shape[0] == 3 && tl_tensor_get(t, 1) == -2);
    tl_tensor_unref(t);
    t = header_reads("{'descr': '|f8', 'fortran_order': False, 'shape': (1, 1,), }", v, 8);
    cr_assert(t->dtype == TL_F64 && t->ndim == 2);
    tl_tensor_unref(t);
    const unsigned char be[4] = {0x3f, 0xc0, 0, 0}; /* 1.5f big-endian */
    t = header_reads("{'descr': '>f', 'fortran_order': False, 'shape': (), }", be, 4);
    cr_assert(t->dtype == TL_F32 && t->ndim == 0 && tl_tensor_get(t, 0) == 1.5);
    tl_tensor_unref(t);
    const double one = 1;
    t = header_reads("{'descr': '<d', 'fortran_order': False, 'shape': (1,)}", &one, 8);
    cr_assert(t->dtype == TL_F64 && tl_tensor_get(t, 0) == 1);
    tl_tensor_unref(t);
}

/* ---- .npy: writing ---- */

Test(npy, encode_matches_numpy_bytes)
{
    static const shape_case cs[] = {
        {FIX("f32_2x3.npy"), TL_F32, 2, {2, 3}},
        {FIX("f64_2x3x4.npy"), TL_F64, 3, {2, 3, 4}},
        {FIX("f64_7.npy"), TL_F64, 1, {7}},
        {FIX("scalar_f64.npy"), TL_F64, 0, {0}},
        {FIX("empty_f32_0x3.npy"), TL_F32, 2, {0, 3}},
        {FIX("i64_2x3.npy"), TL_I64, 2, {2, 3}},
        {FIX("i32_7.npy"), TL_I32, 1, {7}},
    };
    for (int i = 0; i < 7; i++) {
        tl_status st = {0};
        size_t len, want_len;
        unsigned char *buf, *want = load(cs[i].name, &want_len);
        tl_tensor *t = formula_tensor(cs[i].dt, cs[i].ndim, cs[i].shape);
        cr_assert_eq(tl_npy_encode(t, &buf, &len, &st), TL_OK, "%s", st.msg);
        cr_assert(len == want_len && !memcmp(buf, want, len), "%s: bytes differ", cs[i].name);
        free(buf);
        free(want);
        tl_tensor_unref(t);
    }
}

static void roundtrip(tl_dtype dt, int ndim, const int64_t *shape)
{
    tl_status st = {0};
    unsigned char *buf;
    size_t len;
    tl_tensor *t = formula_tensor(dt, ndim, shape);
    cr_assert_eq(tl_npy_encode(t, &buf, &len, &st), TL_OK, "%s", st.msg);
    size_t hl = len - (size_t)t->numel * tl_dtype_size(dt);
    cr_assert_eq(hl % 64, 0, "data starts at %zu, not 64-byte aligned", hl);
    cr_assert_eq(buf[6], 1, "version 1.0");
    tl_tensor *u = tl_npy_read_mem(buf, len, &st);
    cr_assert(u, "%s", st.msg);
    cr_assert(same_bits(t, u));
    free(buf);
    tl_tensor_unref(t);
    tl_tensor_unref(u);
}

Test(npy, roundtrip_shapes)
{
    const int64_t s1[] = {5}, s2[] = {0, 3}, s3[] = {3, 1, 4}, s4[] = {0}, s5[] = {100, 1000};
    int64_t ones[TL_MAXDIM];
    for (int i = 0; i < TL_MAXDIM; i++)
        ones[i] = i == TL_MAXDIM - 1 ? 3 : 1;
    for (int d = 0; d < TL_NDTYPES; d++) {
        tl_dtype dt = (tl_dtype)d;
        roundtrip(dt, 0, NULL);
        roundtrip(dt, 1, s1);
        roundtrip(dt, 2, s2);
        roundtrip(dt, 3, s3);
        roundtrip(dt, 1, s4);
        roundtrip(dt, 2, s5);
        roundtrip(dt, TL_MAXDIM, ones);
    }
}

Test(npy, roundtrip_special_bits)
{
    tl_status st = {0};
    const int64_t n8[] = {8};
    tl_tensor *t = tl_tensor_new(TL_F64, 1, n8, &st);
    memcpy(t->data, special_f64, sizeof special_f64);
    unsigned char *buf;
    size_t len;
    cr_assert_eq(tl_npy_encode(t, &buf, &len, &st), TL_OK);
    tl_tensor *u = tl_npy_read_mem(buf, len, &st);
    cr_assert(u && same_bits(t, u));
    free(buf);
    tl_tensor_unref(t);
    tl_tensor_unref(u);
}

Test(npy, write_then_read_stream)
{
    tl_status st = {0};
    char *buf = NULL;
    size_t len = 0;
    const int64_t shape[] = {4, 5};
    tl_tensor *t = formula_tensor(TL_F32, 2, shape);
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(tl_npy_write(f, t, &st), TL_OK, "%s", st.msg);
    fclose(f);
    f = fmemopen(buf, len, "rb");
    tl_tensor *u = tl_npy_read_stream(f, &st);
    fclose(f);
    cr_assert(u, "%s", st.msg);
    cr_assert(same_bits(t, u));
    free(buf);
    tl_tensor_unref(t);
    tl_tensor_unref(u);
}

Test(npy, write_failure_is_runtime_error)
{
    FILE *f = fopen("/dev/full", "wb");
    if (!f)
        cr_skip_test("no /dev/full");
    tl_status st = {0};
    const int64_t shape[] = {3};
    tl_tensor *t = formula_tensor(TL_F64, 1, shape);
    cr_assert_eq(tl_npy_write(f, t, &st), TL_ERUNTIME);
    cr_assert(strstr(st.msg, "write failed"), "%s", st.msg);
    fclose(f);
    tl_tensor_unref(t);
}

/* ---- .npy: bad input ---- */

Test(npy, missing_file)
{
    tl_status st = {0};
    cr_assert_null(tl_npy_read_file(FIX("no_such_file.npy"), &st));
    expect_error(&st, TL_EINPUT, "cannot open: No such file or directory");
    cr_assert_null(strstr(st.msg, "no_such_file"), "no path in the message");
    cr_assert_null(tl_npy_read_file(TL_NPY_FIXDIR, &st));
    cr_assert_eq(st.code, TL_EINPUT, "a directory: %s", st.msg);
}

Test(npy, bad_magic_and_version)
{
    npy_mem_fails("", 0, "empty file");
    npy_mem_fails("PK\x03\x04 not npy", 13, "not a .npy file (bad magic)");
    npy_mem_fails("\x93NUMP", 5, "truncated .npy file");
    npy_mem_fails("\x93NUMPY\x01\x00\x10", 9, "truncated .npy file");
    npy_mem_fails("\x93NUMPY\x02\x00\x00\x00", 10, "truncated .npy file");
    npy_mem_fails("\x93NUMPY\x04\x00\x00\x00\x00\x00", 12, "unsupported .npy format version 4.0");
    npy_mem_fails("\x93NUMPY\x02\x01\x00\x00\x00\x00", 12, "version 2.1");
}

Test(npy, header_length_beyond_file)
{
    size_t len;
    unsigned char *b = load(FIX("f32_2x3.npy"), &len);
    b[8] = 0xff;
    b[9] = 0xff;
    npy_mem_fails(b, len, "header length 65535 runs past the end of the file");
    b[8] = 0x80; /* shorter: the header text then misses its '}' */
    b[9] = 0;
    npy_mem_fails(b, len, "bad .npy header");
    free(b);
}

Test(npy, data_size_checked_before_allocating)
{
    size_t len;
    unsigned char *b = load(FIX("f32_2x3.npy"), &len);
    npy_mem_fails(b, len - 1, "truncated data: f32[2,3] needs 24 bytes, the file has 23");
    free(b);
    header_fails("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1048576), }", 8,
                 "truncated data: f64[1099511627776,1048576] needs 9223372036854775808 bytes");
    header_fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", 8,
        "shape too large");
    header_fails("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -1), }", 8,
                 "negative size -1");
    header_fails("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8,
                 "shape entry too large");
}

Test(npy, trailing_data)
{
    size_t len;
    unsigned char *b = load(FIX("f32_2x3.npy"), &len);
    unsigned char *c = malloc(len + 3);
    memcpy(c, b, len);
    memcpy(c + len, "xyz", 3);
    npy_mem_fails(c, len + 3, "3 bytes of trailing data after the f32[2,3] array");
    free(b);
    free(c);
}

Test(npy, unsupported_dtypes)
{
    static const char *const cases[][2] = {
        {FIX("bad_object.npy"), "unsupported dtype '|O' (tl reads f32, f64, i32 and i64)"},
        {FIX("bad_c8.npy"), "unsupported dtype '<c8' (tl reads f32, f64, i32 and i64)"},
        {FIX("bad_U4.npy"), "unsupported dtype '<U4'"},
        {FIX("bad_i2.npy"), "unsupported dtype '<i2'"},
        {FIX("bad_u8.npy"), "unsupported dtype '<u8'"},
        {FIX("bad_u1.npy"), "unsupported dtype '|u1'"},
        {FIX("bad_f2.npy"), "unsupported dtype '<f2'"},
        {FIX("bad_b1.npy"), "unsupported dtype '|b1'"},
        {FIX("bad_struct.npy"), "unsupported dtype: a structured (record) dtype"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_status st = {0};
        cr_assert_null(tl_npy_read_file(cases[i][0], &st), "%s", cases[i][0]);
        expect_error(&st, TL_EINPUT, cases[i][1]);
    }
}

Test(npy, not_a_dict)
{
    header_fails("", 0, "bad .npy header: not a dict");
    header_fails("[('descr', '<f4')]", 0, "not a dict");
    header_fails("'descr'", 0, "not a dict");
    header_fails("\n", 0, "not a dict");
}

Test(npy, strict_header_syntax)
{
    header_fails("{'descr': '<f4', 'shape': (1,), }", 4, "no 'fortran_order' key");
    header_fails("{'descr': '<f4', 'fortran_order': False}", 4, "no 'shape' key");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
                 "unexpected key 'x'");
    header_fails("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
                 "key 'descr' appears twice");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", 4,
                 "',' in a one-element tuple");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", 4,
                 "a tuple for 'shape'");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}", 4, "',' or ')'");
    header_fails("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4, "True or False");
    header_fails("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", 4, "True or False");
    header_fails("{'descr': '<\\x66', 'fortran_order': False, 'shape': (1,)}", 4,
                 "plain string character");
    header_fails("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, "',' or '}'");
    header_fails("{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 4, "expected ':'");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4,
                 "the end of the header after '}'");
    header_fails("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, "',' or '}'");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1,),,}", 4, "a string");
    header_fails("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4, "found the end");
    char many[256] = "{'descr': '<f4', 'fortran_order': False, 'shape': (", want[64];
    for (int i = 0; i <= TL_MAXDIM; i++)
        strcat(many, "1,");
    strcat(many, ")}");
    snprintf(want, sizeof want, "more than %d dimensions", TL_MAXDIM);
    header_fails(many, 4, want);
}

/* Every prefix of a valid file is an error; every one-byte change is an
 * error or a valid tensor, never a crash. */
static void mangle_npy(const char *name)
{
    size_t len;
    unsigned char *b = load(name, &len);
    for (size_t cut = 0; cut < len; cut++) {
        tl_status st = {0};
        unsigned char *c = malloc(cut + 1);
        memcpy(c, b, cut);
        cr_assert_null(tl_npy_read_mem(c, cut, &st), "%s cut at %zu", name, cut);
        cr_assert_eq(st.code, TL_EINPUT);
        free(c);
    }
    for (size_t i = 0; i < len; i++) {
        tl_status st = {0};
        b[i] ^= 0x5a;
        tl_tensor *t = tl_npy_read_mem(b, len, &st);
        cr_assert(t || st.code == TL_EINPUT, "%s byte %zu: %s", name, i, st.msg);
        tl_tensor_unref(t);
        b[i] ^= 0x5a;
    }
    free(b);
}

Test(npy, mangled_files_never_crash)
{
    mangle_npy(FIX("f32_2x3.npy"));
    mangle_npy(FIX("fortran_be_f64_2x3x4.npy"));
    mangle_npy(FIX("empty_f32_0x3.npy"));
    mangle_npy(FIX("v3_f32_4.npy"));
}

/* ---- .npz helpers ---- */

typedef struct member_case {
    const char *key;
    tl_dtype dt;
    int ndim;
    int64_t shape[3];
} member_case;

/* What gen_npy_fixtures.py's npz_members() holds, in that order. */
static const member_case savez_members[] = {
    {"a", TL_F32, 2, {2, 3}}, {"b", TL_F64, 1, {7}},    {"grad/x", TL_F64, 2, {3, 2}},
    {"s", TL_F64, 0, {0}},    {"e", TL_F32, 2, {0, 3}}, {"be", TL_F64, 2, {2, 2}},
};

/* The archive has count members; the first n are ms. */
static void check_npz(const char *path, const member_case *ms, int n, int count)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open(path, &st);
    cr_assert(z, "%s: %s", path, st.msg);
    cr_assert_eq(tl_npz_count(z), count, "%s: %d members", path, tl_npz_count(z));
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(tl_npz_key(z, i), ms[i].key);
        cr_assert(tl_npz_has(z, ms[i].key));
        tl_tensor *t = tl_npz_get(z, ms[i].key, &st);
        cr_assert(t, "%s:%s: %s", path, ms[i].key, st.msg);
        check_formula(t, ms[i].dt, ms[i].ndim, ms[i].shape, ms[i].key);
        tl_tensor_unref(t);
    }
    tl_npz_close(z);
}

static unsigned char *npz_bytes(int n, const char *const *keys, tl_tensor *const *ts, bool compress,
                                bool zip64, size_t *len)
{
    tl_status st = {0};
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    cr_assert_eq(tl_npz_write_ex(f, n, keys, (const tl_tensor *const *)ts, compress, zip64, &st),
                 TL_OK, "%s", st.msg);
    fclose(f);
    return (unsigned char *)buf;
}

/* The archive the tl_written_*.npz files hold. */
static unsigned char *sample_npz(bool compress, bool zip64, size_t *len)
{
    const char *keys[] = {"a", "grad/x", "s", "e"};
    const int64_t s23[] = {2, 3}, s32[] = {3, 2}, s03[] = {0, 3};
    tl_tensor *ts[] = {formula_tensor(TL_F32, 2, s23), formula_tensor(TL_F64, 2, s32),
                       formula_tensor(TL_F64, 0, NULL), formula_tensor(TL_F32, 2, s03)};
    unsigned char *b = npz_bytes(4, keys, ts, compress, zip64, len);
    for (int i = 0; i < 4; i++)
        tl_tensor_unref(ts[i]);
    return b;
}

static const member_case sample_members[] = {
    {"a", TL_F32, 2, {2, 3}},
    {"grad/x", TL_F64, 2, {3, 2}},
    {"s", TL_F64, 0, {0}},
    {"e", TL_F32, 2, {0, 3}},
};

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Offset of the i-th central directory entry of a small archive. */
static size_t central_entry(const unsigned char *b, size_t len, int i)
{
    size_t p = rd32(b + len - 22 + 16);
    for (; i > 0; i--)
        p += 46 + (size_t)(b[p + 28] | b[p + 29] << 8) + (size_t)(b[p + 30] | b[p + 31] << 8) +
             (size_t)(b[p + 32] | b[p + 33] << 8);
    return p;
}

static size_t member_data(const unsigned char *b, size_t len, int i)
{
    size_t loc = rd32(b + central_entry(b, len, i) + 42);
    return loc + 30 + (size_t)(b[loc + 26] | b[loc + 27] << 8) +
           (size_t)(b[loc + 28] | b[loc + 29] << 8);
}

static void npz_open_fails(const void *b, size_t len, const char *part)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open_mem(b, len, &st);
    cr_assert_null(z, "expected an error with \"%s\"", part);
    expect_error(&st, TL_EINPUT, part);
}

static void npz_get_fails(const void *b, size_t len, const char *key, const char *part)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open_mem(b, len, &st);
    cr_assert(z, "%s", st.msg);
    cr_assert_null(tl_npz_get(z, key, &st), "expected an error with \"%s\"", part);
    expect_error(&st, TL_EINPUT, part);
    tl_npz_close(z);
}

/* ---- .npz: files NumPy wrote ---- */

Test(npz, savez) { check_npz(FIX("savez.npz"), savez_members, 6, 6); }

Test(npz, savez_compressed)
{
    check_npz(FIX("savez_compressed.npz"), (const member_case[]){{"big", TL_F64, 2, {100, 100}}}, 1,
              7);
}

Test(npz, savez_compressed_all_members)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open(FIX("savez_compressed.npz"), &st);
    cr_assert(z, "%s", st.msg);
    cr_assert_eq(tl_npz_count(z), 7);
    for (int i = 0; i < 6; i++) {
        tl_tensor *t = tl_npz_get(z, savez_members[i].key, &st);
        cr_assert(t, "%s", st.msg);
        check_formula(t, savez_members[i].dt, savez_members[i].ndim, savez_members[i].shape,
                      savez_members[i].key);
        tl_tensor_unref(t);
    }
    tl_npz_close(z);
}

Test(npz, streamed_with_data_descriptors)
{
    const member_case ms[] = {{"a", TL_F32, 2, {2, 3}}, {"grad/x", TL_F64, 2, {3, 2}}};
    check_npz(FIX("savez_stream.npz"), ms, 2, 2);
    check_npz(FIX("savez_stream_stored.npz"), ms, 2, 2);
}

Test(npz, positional_keys)
{
    const member_case ms[] = {{"arr_0", TL_F32, 1, {3}}, {"arr_1", TL_F64, 2, {2, 2}}};
    check_npz(FIX("savez_positional.npz"), ms, 2, 2);
}

Test(npz, zip64_end_records_and_extra_fields)
{
    const member_case ms[] = {{"a", TL_F32, 2, {2, 3}}, {"grad/x", TL_F64, 2, {3, 2}}};
    check_npz(FIX("zip64_handmade.npz"), ms, 2, 2);
}

Test(npz, empty_archive_and_missing_keys)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open(FIX("savez_empty.npz"), &st);
    cr_assert(z, "%s", st.msg);
    cr_assert_eq(tl_npz_count(z), 0);
    cr_assert_null(tl_npz_key(z, 0));
    cr_assert_null(tl_npz_get(z, "w", &st));
    expect_error(&st, TL_EINPUT, "no key 'w' (the archive is empty)");
    tl_npz_close(z);
    z = tl_npz_open(FIX("savez.npz"), &st);
    cr_assert(!tl_npz_has(z, "grad") && !tl_npz_has(z, "a.npy") && tl_npz_has(z, "grad/x"));
    tl_tensor *a = tl_npz_get(z, "a.npy", &st); /* asked for by its file name, as NumPy takes it */
    cr_assert(a, "%s", st.msg);
    tl_tensor_unref(a);
    cr_assert_null(tl_npz_get(z, "w", &st));
    expect_error(&st, TL_EINPUT, "no key 'w' (the archive has 'a', 'b', 'grad/x', 's', 'e', 'be')");
    tl_npz_close(z);
    tl_npz_close(NULL);
    cr_assert_null(tl_npz_open(FIX("missing.npz"), &st));
    expect_error(&st, TL_EINPUT, "cannot open: No such file or directory");
}

/* ---- .npz: writing ---- */

static void check_sample(const unsigned char *b, size_t len, const char *what)
{
    tl_status st = {0};
    tl_npz *z = tl_npz_open_mem(b, len, &st);
    cr_assert(z, "%s: %s", what, st.msg);
    cr_assert_eq(tl_npz_count(z), 4);
    for (int i = 0; i < 4; i++) {
        const member_case *m = &sample_members[i];
        cr_assert_str_eq(tl_npz_key(z, i), m->key);
        tl_tensor *t = tl_npz_get(z, m->key, &st);
        cr_assert(t, "%s: %s", what, st.msg);
        check_formula(t, m->dt, m->ndim, m->shape, m->key);
        tl_tensor_unref(t);
    }
    tl_npz_close(z);
}

Test(npz, roundtrip_stored_deflated_zip64)
{
    for (int mode = 0; mode < 4; mode++) {
        size_t len;
        unsigned char *b = sample_npz(mode & 1, mode & 2, &len);
        check_sample(b, len, mode & 1 ? "deflated" : "stored");
        free(b);
    }
}

Test(npz, roundtrip_large_and_unusual_keys)
{
    const char *keys[] = {"grad/big", "ключ", "x.npy", ""};
    const int64_t big[] = {1000, 1000}, one[] = {1};
    tl_tensor *ts[] = {formula_tensor(TL_F64, 2, big), formula_tensor(TL_F32, 1, one),
                       formula_tensor(TL_F32, 1, one), formula_tensor(TL_F64, 0, NULL)};
    for (int compress = 0; compress < 2; compress++) {
        tl_status st = {0};
        size_t len;
        unsigned char *b = npz_bytes(4, keys, ts, compress, false, &len);
        tl_npz *z = tl_npz_open_mem(b, len, &st);
        cr_assert(z, "%s", st.msg);
        for (int i = 0; i < 4; i++) {
            cr_assert_str_eq(tl_npz_key(z, i), keys[i]);
            tl_tensor *t = tl_npz_get(z, keys[i], &st);
            cr_assert(t && same_bits(t, ts[i]), "%s: %s", keys[i], st.msg);
            tl_tensor_unref(t);
        }
        tl_npz_close(z);
        free(b);
    }
    for (int i = 0; i < 4; i++)
        tl_tensor_unref(ts[i]);
}

Test(npz, write_errors)
{
    tl_status st = {0};
    const char *keys[] = {"w", "v", "w"};
    tl_tensor *t = formula_tensor(TL_F32, 0, NULL);
    const tl_tensor *ts[] = {t, t, t};
    char *buf = NULL;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(tl_npz_write(f, 3, keys, ts, false, &st), TL_EINPUT);
    expect_error(&st, TL_EINPUT, "duplicate key 'w'");
    fclose(f);
    free(buf);
    f = fopen("/dev/full", "wb");
    if (f) {
        cr_assert_eq(tl_npz_write(f, 2, keys, ts, true, &st), TL_ERUNTIME, "%s", st.msg);
        cr_assert(strstr(st.msg, "write failed"), "%s", st.msg);
        fclose(f);
    }
    tl_tensor_unref(t);
}

/* The tl_written_* fixtures: NumPy loads them (the script's --check); here
 * tl must still write the same bytes (the deflated ones depend on zlib). */
static void golden(const char *path, const unsigned char *b, size_t len, bool exact)
{
    if (getenv("TL_NPY_WRITE_FIXTURES")) {
        FILE *f = fopen(path, "wb");
        cr_assert(f && fwrite(b, 1, len, f) == len && !fclose(f), "writing %s", path);
        return;
    }
    size_t want_len;
    unsigned char *want = load(path, &want_len);
    if (exact)
        cr_assert(len == want_len && !memcmp(b, want, len), "%s: tl writes other bytes", path);
    else
        check_sample(want, want_len, path);
    free(want);
}

static void golden_npy(const char *path, tl_tensor *t)
{
    tl_status st = {0};
    unsigned char *b;
    size_t len;
    cr_assert_eq(tl_npy_encode(t, &b, &len, &st), TL_OK, "%s", st.msg);
    golden(path, b, len, true);
    free(b);
    tl_tensor_unref(t);
}

Test(npz, tl_written_fixtures)
{
    tl_status st = {0};
    const int64_t s23[] = {2, 3}, s234[] = {2, 3, 4}, s03[] = {0, 3}, n8[] = {8};
    int64_t maxd[TL_MAXDIM];
    for (int i = 0; i < TL_MAXDIM; i++)
        maxd[i] = i < TL_MAXDIM - 2 ? 1 : i == TL_MAXDIM - 2 ? 2 : 3;
    golden_npy(FIX("tl_written_f32_2x3.npy"), formula_tensor(TL_F32, 2, s23));
    golden_npy(FIX("tl_written_f64_2x3x4.npy"), formula_tensor(TL_F64, 3, s234));
    golden_npy(FIX("tl_written_scalar_f64.npy"), formula_tensor(TL_F64, 0, NULL));
    golden_npy(FIX("tl_written_empty_f32_0x3.npy"), formula_tensor(TL_F32, 2, s03));
    golden_npy(FIX("tl_written_f64_maxdim.npy"), formula_tensor(TL_F64, TL_MAXDIM, maxd));
    tl_tensor *d = tl_tensor_new(TL_F64, 1, n8, &st), *f = tl_tensor_new(TL_F32, 1, n8, &st);
    memcpy(d->data, special_f64, sizeof special_f64);
    memcpy(f->data, special_f32, sizeof special_f32);
    golden_npy(FIX("tl_written_special_f64.npy"), d);
    golden_npy(FIX("tl_written_special_f32.npy"), f);
    golden_npy(FIX("tl_written_i64_2x3.npy"), formula_tensor(TL_I64, 2, s23));
    golden_npy(FIX("tl_written_i32_7.npy"), formula_tensor(TL_I32, 1, (int64_t[]){7}));
    tl_tensor *x = tl_tensor_new(TL_I64, 1, (int64_t[]){6}, &st);
    memcpy(x->data, i64_extremes, sizeof i64_extremes);
    golden_npy(FIX("tl_written_i64_extremes.npy"), x);
    const char *names[] = {FIX("tl_written_stored.npz"), FIX("tl_written_deflated.npz"),
                           FIX("tl_written_zip64.npz")};
    for (int i = 0; i < 3; i++) {
        size_t len;
        unsigned char *b = sample_npz(i > 0, i == 2, &len);
        golden(names[i], b, len, i == 0);
        free(b);
    }
}

/* ---- .npz: bad input ---- */

Test(npz, not_a_zip)
{
    size_t len;
    unsigned char *b = load(FIX("f32_2x3.npy"), &len);
    npz_open_fails(b, len, "not a zip archive (this is a .npy file, not a .npz)");
    free(b);
    npz_open_fails("", 0, "not a zip archive (0 bytes, too short)");
    npz_open_fails("hello, this is not a zip archive", 32, "no end of central directory record");
    /* what it is instead, where the first byte tells */
    npz_open_fails("\x08\x07\x12\x07pytorch and a model's graph after it", 40, "it reads as an ONNX model");
    npz_open_fails("{\"grad/x\": {\"dtype\": \"f64\", \"shape\": []}}", 41, "it reads as JSON text");
    npz_open_fails("\n  {\"grad/x\": {\"dtype\": \"f64\", \"shape\": []}}", 44, "it reads as JSON text");
}

/* what the first bytes say a file is: every reader asks the same question */
Test(npz, bytes_kind)
{
    cr_assert_eq(tl_bytes_kind_of("", 0), TL_BYTES_EMPTY);
    cr_assert_eq(tl_bytes_kind_of("\x93NUMPY\x01\x00", 8), TL_BYTES_NPY);
    cr_assert_eq(tl_bytes_kind_of("\x93NUMP", 5), TL_BYTES_OTHER); /* the magic cut short */
    cr_assert_eq(tl_bytes_kind_of("PK\3\4\x14\0", 6), TL_BYTES_NPZ);
    cr_assert_eq(tl_bytes_kind_of("PK\5\6", 4), TL_BYTES_NPZ);   /* an empty archive's end record */
    cr_assert_eq(tl_bytes_kind_of("PKad/x f32[]", 12), TL_BYTES_OTHER); /* tl's text output of "PKad/x" */
    cr_assert_eq(tl_bytes_kind_of("\x08\x07\x12", 3), TL_BYTES_ONNX);
    cr_assert_eq(tl_bytes_kind_of(" \t\r\n{}", 6), TL_BYTES_JSON);
    cr_assert_eq(tl_bytes_kind_of("  ", 2), TL_BYTES_OTHER);
    cr_assert_eq(tl_bytes_kind_of("x f32[] 1", 9), TL_BYTES_OTHER);
}

Test(npz, truncated)
{
    size_t len;
    unsigned char *b = load(FIX("savez.npz"), &len);
    npz_open_fails(b, len / 2, "no end of central directory record; truncated?");
    npz_open_fails(b, len - 1, "no end of central directory record");
    for (size_t cut = 0; cut < len; cut++) {
        tl_status st = {0};
        tl_npz *z = tl_npz_open_mem(b, cut, &st);
        cr_assert_null(z, "cut at %zu opens", cut);
        cr_assert_eq(st.code, TL_EINPUT);
    }
    free(b);
}

Test(npz, bad_crc)
{
    size_t len;
    unsigned char *b = sample_npz(false, false, &len);
    b[member_data(b, len, 1) + 130] ^= 1;
    npz_get_fails(b, len, "grad/x", "member 'grad/x': CRC-32 mismatch");
    free(b);
    b = sample_npz(true, false, &len);
    b[central_entry(b, len, 0) + 16] ^= 1;
    npz_get_fails(b, len, "a", "member 'a': CRC-32 mismatch (the archive says");
    free(b);
}

static void write_file(const char *path, const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(b, 1, len, f) == len && !fclose(f), "cannot write %s", path);
}

/* The archive b in the file at path with byte `flip` flipped: member
 * key's CRC mismatch; then whole again but cut at `cut` once opened: a read
 * error.  b is left as it was. */
static void flipped_then_cut(const char *path, unsigned char *b, size_t len, const char *key, size_t flip,
                             size_t cut)
{
    char want[300];
    tl_status st = {0};
    b[flip] ^= 1;
    write_file(path, b, len);
    tl_npz *z = tl_npz_open(path, &st);
    cr_assert(z, "%s", st.msg);
    cr_assert_null(tl_npz_get(z, key, &st));
    snprintf(want, sizeof want, "member '%s': CRC-32 mismatch", key);
    expect_error(&st, TL_EINPUT, want);
    tl_npz_close(z);
    b[flip] ^= 1;
    write_file(path, b, len);
    st = (tl_status){0};
    z = tl_npz_open(path, &st);
    cr_assert(z, "%s", st.msg);
    cr_assert_eq(truncate(path, (off_t)cut), 0);
    cr_assert_null(tl_npz_get(z, key, &st));
    snprintf(want, sizeof want, "member '%s': read error: the file shrank", key);
    expect_error(&st, TL_EINPUT, want);
    tl_npz_close(z);
}

/* An archive in a file (mapped: the tests' library maps every one) has
 * its stored members read from the file straight into their tensors and
 * their CRC checked over what was read: the same values as from memory, a
 * flipped data byte caught, a file cut short after it was opened reported
 * in a line, never a fault. */
Test(npz, archive_files_read_from_the_file)
{
    for (int mode = 0; mode < 4; mode++) {
        size_t len;
        unsigned char *b = sample_npz(mode & 1, mode & 2, &len);
        char path[] = "/tmp/tl-test-npz-XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        close(fd);
        write_file(path, b, len);
        check_npz(path, sample_members, 4, 4);
        if (mode == 0) { /* stored, offsets in the plain records */
            flipped_then_cut(path, b, len, "grad/x", member_data(b, len, 1) + 130, member_data(b, len, 1) + 140);
        }
        unlink(path);
        free(b);
    }
}

/* Archives of a megabyte and more move between memory and a regular file
 * while a second thread computes their CRC (the CRCs written into the
 * local headers after the data, the data read in pieces and checked as
 * they come): the same bytes as an archive written in one pass (to
 * memory), at the file's start, after other bytes and appended, the same
 * values read back, and a flipped byte in the last piece of a member or
 * a file cut short still caught. */
Test(npz, large_archives_checked_beside_the_move)
{
    setenv("TL_NUM_THREADS", "2", 1); /* two threads on any machine: the pipelined paths */
    const char *keys[] = {"grad/big", "small", "big2"};
    const int64_t big[] = {1200, 1000}, one[] = {3}, mid[] = {300, 1000};
    tl_tensor *ts[] = {formula_tensor(TL_F64, 2, big), formula_tensor(TL_F32, 1, one),
                       formula_tensor(TL_F32, 2, mid)};
    size_t len;
    unsigned char *b = npz_bytes(3, keys, ts, false, false, &len);
    char path[] = "/tmp/tl-test-npz-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    for (int mode = 0; mode < 3; mode++) { /* at the start, after 5 bytes, appended after 5 bytes */
        FILE *f = fopen(path, "wb");
        cr_assert(f);
        if (mode)
            cr_assert_eq(fwrite("junk\n", 1, 5, f), 5);
        if (mode == 2) {
            fclose(f);
            f = fopen(path, "ab");
            cr_assert(f);
        }
        tl_status st = {0};
        cr_assert_eq(tl_npz_write(f, 3, keys, (const tl_tensor *const *)ts, false, &st), TL_OK, "%s", st.msg);
        cr_assert_eq(fclose(f), 0);
        size_t got = 0;
        unsigned char *fb = load(path, &got);
        cr_assert(got == len + (mode ? 5 : 0) && !memcmp(fb + (mode ? 5 : 0), b, len), "mode %d", mode);
        free(fb);
    }
    write_file(path, b, len);
    tl_status st = {0};
    tl_npz *z = tl_npz_open(path, &st);
    cr_assert(z, "%s", st.msg);
    for (int i = 0; i < 3; i++) {
        tl_tensor *t = tl_npz_get(z, keys[i], &st);
        cr_assert(t && same_bits(t, ts[i]), "%s: %s", keys[i], st.msg);
        tl_tensor_unref(t);
    }
    tl_npz_close(z);
    /* a byte in the third 4 MiB piece of grad/big */
    flipped_then_cut(path, b, len, "grad/big", member_data(b, len, 0) + 9600000 - 100,
                     member_data(b, len, 0) + 5000000);
    unlink(path);
    free(b);
    for (int i = 0; i < 3; i++)
        tl_tensor_unref(ts[i]);
}

Test(npz, member_not_npy)
{
    size_t len;
    unsigned char *b = sample_npz(false, false, &len);
    size_t data = member_data(b, len, 0), c = central_entry(b, len, 0);
    b[data + 1] = 'X';
    wr32(b + c + 16, (uint32_t)crc32(0, b + data, rd32(b + c + 24)));
    npz_get_fails(b, len, "a", "member 'a': not a .npy file (bad magic)");
    free(b);
}

static unsigned char *zeros_npz(size_t *len)
{
    const char *keys[] = {"w"};
    const int64_t shape[] = {1 << 20};
    tl_status st = {0};
    tl_tensor *t = tl_tensor_zeros(TL_F64, 1, shape, &st);
    unsigned char *b = npz_bytes(1, keys, &t, true, false, len);
    tl_tensor_unref(t);
    return b;
}

Test(npz, zip_bomb)
{
    size_t len;
    unsigned char *b = zeros_npz(&len);
    size_t c = central_entry(b, len, 0);
    wr32(b + c + 24, 1000);
    npz_get_fails(b, len, "w", "member 'w': inflates past its declared size of 1000 bytes");
    wr32(b + c + 24, 0xF0000000u);
    npz_get_fails(b, len, "w", "more than deflate can produce (a zip bomb?)");
    wr32(b + c + 24, 8 * (1 << 20) + 128 + 1);
    npz_get_fails(b, len, "w", "fewer than the declared");
    free(b);
}

Test(npz, corrupt_deflate_data)
{
    size_t len;
    unsigned char *b = zeros_npz(&len);
    b[member_data(b, len, 0)] = 0x07; /* final block of the reserved type 3 */
    npz_get_fails(b, len, "w", "member 'w': corrupt deflate data (invalid block type)");
    free(b);
    b = sample_npz(true, false, &len);
    size_t c = central_entry(b, len, 1);
    wr32(b + c + 20, rd32(b + c + 20) - 5);
    npz_get_fails(b, len, "grad/x", "member 'grad/x': truncated deflate data");
    free(b);
}

Test(npz, central_directory_outside_file)
{
    size_t len;
    unsigned char *b = sample_npz(false, false, &len);
    wr32(b + len - 22 + 16, 0x7FFFFFF0u);
    npz_open_fails(b, len, "central directory (offset 2147483632");
    npz_open_fails(b, len, "lies outside the file");
    free(b);
    b = sample_npz(false, false, &len);
    wr32(b + len - 22 + 12, rd32(b + len - 22 + 12) + 1);
    npz_open_fails(b, len, "lies outside the file");
    b[len - 22 + 10] = 200;
    b[len - 22 + 8] = 200;
    wr32(b + len - 22 + 12, rd32(b + len - 22 + 12) - 1);
    npz_open_fails(b, len, "central directory claims 200 entries");
    free(b);
}

Test(npz, member_offsets_checked)
{
    size_t len;
    unsigned char *b = sample_npz(false, false, &len);
    size_t c = central_entry(b, len, 1);
    wr32(b + c + 42, (uint32_t)len + 100);
    npz_open_fails(b, len, "member 'grad/x': no local header at offset");
    free(b);
    b = sample_npz(false, false, &len);
    c = central_entry(b, len, 3);
    wr32(b + c + 20, 1u << 20);
    wr32(b + c + 24, 1u << 20);
    npz_open_fails(b, len, "member 'e': data (offset");
    free(b);
    b = sample_npz(true, true, &len);
    c = central_entry(b, len, 0);
    b[c + 46 + 5 + 2] = 99; /* the ZIP64 extra field's length, after "a.npy" */
    npz_open_fails(b, len, "member 'a': an extra field runs past its header");
    free(b);
}

Test(npz, unsupported_members)
{
    size_t len;
    unsigned char *b = sample_npz(true, false, &len);
    size_t c = central_entry(b, len, 0);
    b[c + 10] = 12;
    npz_open_fails(b, len, "member 'a': unsupported compression method 12");
    b[c + 10] = 8;
    b[c + 8] |= 1;
    npz_open_fails(b, len, "member 'a': encrypted members are not supported");
    free(b);
}

Test(npz, duplicate_keys)
{
    size_t len;
    unsigned char *b = sample_npz(false, false, &len);
    size_t c = central_entry(b, len, 2), loc = rd32(b + c + 42);
    b[c + 46] = 'a'; /* "s.npy" -> "a.npy", in both headers */
    b[loc + 30] = 'a';
    npz_open_fails(b, len, "duplicate key 'a'");
    free(b);
}

Test(npz, mangled_archives_never_crash)
{
    size_t len;
    unsigned char *b = sample_npz(true, true, &len);
    for (size_t i = 0; i < len; i++) {
        tl_status st = {0};
        b[i] ^= 0xa5;
        tl_npz *z = tl_npz_open_mem(b, len, &st);
        for (int k = 0; z && k < tl_npz_count(z); k++) {
            tl_tensor *t = tl_npz_get(z, tl_npz_key(z, k), &st);
            cr_assert(t || st.code == TL_EINPUT, "byte %zu: %s", i, st.msg);
            tl_tensor_unref(t);
        }
        cr_assert(z || st.code == TL_EINPUT, "byte %zu: %s", i, st.msg);
        tl_npz_close(z);
        b[i] ^= 0xa5;
    }
    free(b);
}

/* A large .npy in native order is mapped, not copied; its values are the
 * file's, and the mapping is read-only (tensors never change once made): a
 * write into it faults (in a child process here) and never reaches the
 * file.  Big-endian and Fortran-order files are read and converted. */
Test(npy, large_files_are_mapped)
{
    char path[] = "/tmp/tl-test-npy-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    tl_status st = {0};
    int64_t shape[2] = {512, 1024};
    tl_tensor *t = tl_tensor_new(TL_F32, 2, shape, &st);
    for (int64_t i = 0; i < t->numel; i++)
        ((float *)t->data)[i] = (float)i * 0.5f;
    cr_assert_eq(tl_npy_write(f, t, &st), TL_OK, "%s", st.msg);
    fclose(f);
    tl_tensor *m = tl_npy_read_file(path, &st);
    cr_assert(m, "%s", st.msg);
    cr_expect(m->map != NULL, "a 2 MiB native-order file is mapped");
    cr_expect_eq(m->ndim, 2);
    cr_expect_eq(memcmp(m->data, t->data, (size_t)t->numel * 4), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY); /* no sanitizer report for the fault we want */
        if (null >= 0)
            dup2(null, 2);
        ((float *)m->data)[0] = 42;
        _exit(0);
    }
    int ws = 0;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_expect(!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0), "a write into a mapped input faults");
    tl_tensor *again = tl_npy_read_file(path, &st);
    cr_assert(again, "%s", st.msg);
    cr_expect_eq(((float *)again->data)[0], 0.0f);
    tl_tensor_unref(again);
    tl_tensor_unref(m);
    tl_tensor_unref(t);
    unlink(path);
}
