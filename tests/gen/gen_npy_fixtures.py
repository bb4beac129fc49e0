#!/usr/bin/python3
"""NumPy fixtures for tests/test_npy.c, and the check that NumPy reads what tl writes.

Run from the repository root with the Debian NumPy (not a pyenv python):

    /usr/bin/python3 tests/gen/gen_npy_fixtures.py           # rewrite tests/fixtures/npy/
    /usr/bin/python3 tests/gen/gen_npy_fixtures.py --check   # verify tl_written_*

Every array holds formula(i) = i * 0.5 - 3 at flat row-major index i, cast to
its dtype, so the C tests recompute the expected values rather than load them;
the special_* arrays hold the bit patterns SPECIAL_F64 / SPECIAL_F32 below,
which tests/test_npy.c repeats.

The tl_written_* files come from the C tests: `TL_NPY_WRITE_FIXTURES=1
./test_npy` rewrites them; normally the tests compare tl's output against
them.  --check is run by hand (CI does not need Python) and proves NumPy
loads them bit for bit, and that tl's .npy bytes equal np.save's.
"""
import io
import os
import struct
import sys
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "npy")

SPECIAL_F64 = [0x7FF8000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
               0x8000000000000000, 0x0000000000000001, 0x7FEFFFFFFFFFFFFF,
               0x3FB999999999999A, 0x7FF8000000000BAD]
SPECIAL_F32 = [0x7FC00000, 0x7F800000, 0xFF800000, 0x80000000,
               0x00000001, 0x7F7FFFFF, 0x3DCCCCCD, 0x7FC00BAD]


def formula(shape, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    if np.dtype(dtype).kind == "i":  # index tensors: 3i - 7
        return (np.arange(n, dtype=np.int64) * 3 - 7).astype(dtype).reshape(shape)
    return (np.arange(n, dtype=np.float64) * 0.5 - 3).astype(dtype).reshape(shape)


# int64 values a double cannot hold: they must survive every path exactly
I64_EXTREMES = np.array([-2**63, 2**63 - 1, 2**53 + 1, -(2**53) - 1, 0, -1], dtype="<i8")


def special(dtype):
    if np.dtype(dtype).itemsize == 8:
        bits = np.array(SPECIAL_F64, dtype=np.uint64)
    else:
        bits = np.array(SPECIAL_F32, dtype=np.uint32)
    return bits.view(np.dtype(dtype).newbyteorder("=")).astype(dtype)


def path(name):
    return os.path.join(OUT, name)


def save(name, arr, version=None):
    with open(path(name), "wb") as f:
        np.lib.format.write_array(f, arr, version=version)


def raw_npy(name, header, data, version=(1, 0)):
    """A .npy with a header written by hand, exactly as given."""
    fmt = "<H" if version == (1, 0) else "<I"
    text = header.encode("latin1")
    with open(path(name), "wb") as f:
        f.write(b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(text)) + text + data)


class Unseekable(io.RawIOBase):
    """A pipe-like sink, so zipfile writes data descriptors."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


def zip64_archive(name, members):
    """ZIP64 everywhere: local and central extra fields, ZIP64 end records."""
    out, central = bytearray(), bytearray()
    for mname, data, compress in members:
        nm = mname.encode()
        crc = zlib.crc32(data)
        body = data
        if compress:
            co = zlib.compressobj(6, zlib.DEFLATED, -15)
            body = co.compress(data) + co.flush()
        method = 8 if compress else 0
        off = len(out)
        extra = struct.pack("<HHQQ", 1, 16, len(data), len(body))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0x21, crc,
                           0xFFFFFFFF, 0xFFFFFFFF, len(nm), len(extra)) + nm + extra + body
        cextra = struct.pack("<HHQQQ", 1, 24, len(data), len(body), off)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x032D, 45, 0, method, 0,
                               0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(nm), len(cextra), 0, 0,
                               0, 0o600 << 16, 0xFFFFFFFF) + nm + cextra
    n, cd_off = len(members), len(out)
    out += central
    z64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x032D, 45, 0, 0, n, n, len(central),
                       cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path(name), "wb") as f:
        f.write(out)


def npy_bytes(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()


def npz_members():
    return {"a": formula((2, 3), "<f4"), "b": formula((7,), "<f8"),
            "grad/x": np.asfortranarray(formula((3, 2), "<f8")), "s": formula((), "<f8"),
            "e": formula((0, 3), "<f4"), "be": formula((2, 2), ">f8")}


def write_npy_fixtures():
    save("f32_2x3.npy", formula((2, 3), "<f4"))
    save("f64_2x3x4.npy", formula((2, 3, 4), "<f8"))
    save("f64_7.npy", formula((7,), "<f8"))
    save("be_f32_3x4.npy", formula((3, 4), ">f4"))
    save("be_f64_2x3.npy", formula((2, 3), ">f8"))
    save("fortran_f64_3x4.npy", np.asfortranarray(formula((3, 4), "<f8")))
    save("fortran_f32_2x3x4.npy", np.asfortranarray(formula((2, 3, 4), "<f4")))
    save("fortran_be_f64_2x3x4.npy", np.asfortranarray(formula((2, 3, 4), ">f8")))
    save("fortran_f64_2x3x1x4x2.npy", np.asfortranarray(formula((2, 3, 1, 4, 2), "<f8")))
    save("v2_f64_2x3.npy", formula((2, 3), "<f8"), version=(2, 0))
    save("v3_f32_4.npy", formula((4,), "<f4"), version=(3, 0))
    save("scalar_f64.npy", formula((), "<f8"))
    save("scalar_be_f32.npy", formula((), ">f4"))
    save("empty_f32_0x3.npy", formula((0, 3), "<f4"))
    save("empty_f64_0.npy", formula((0,), "<f8"))
    save("special_f64.npy", special("<f8"))
    save("special_be_f32.npy", special(">f4"))
    save("i64_2x3.npy", formula((2, 3), "<i8"))
    save("i32_7.npy", formula((7,), "<i4"))
    save("be_i64_3x4.npy", formula((3, 4), ">i8"))
    save("be_i32_2x3.npy", formula((2, 3), ">i4"))
    save("fortran_i64_2x3x4.npy", np.asfortranarray(formula((2, 3, 4), "<i8")))
    save("fortran_be_i32_2x3x4.npy", np.asfortranarray(formula((2, 3, 4), ">i4")))
    save("scalar_i64.npy", formula((), "<i8"))
    save("empty_i32_0x3.npy", formula((0, 3), "<i4"))
    save("i64_extremes.npy", I64_EXTREMES)
    f64_2x3 = formula((2, 3), "<f8").tobytes()
    raw_npy("hdr_native_f64_2x3.npy",
            "{'descr': '=f8', 'fortran_order': False, 'shape': (2, 3), }\n", f64_2x3)
    raw_npy("hdr_py2_long_f64_2x3.npy",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 3L), }\n", f64_2x3)
    raw_npy("hdr_compact_f64_2x3.npy",
            "{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<f8\"}", f64_2x3)
    raw_npy("hdr_unaligned_f64_2x3.npy",
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3,) ,}  \n", f64_2x3)
    raw_npy("empty_fortran_f64_2x0x4.npy",
            "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 0, 4), }\n", b"")


def write_bad_fixtures():
    np.save(path("bad_object.npy"), np.array([1, "a", None], dtype=object), allow_pickle=True)
    save("bad_c8.npy", np.arange(3, dtype="<c8"))
    save("bad_U4.npy", np.array(["ab", "cd"], dtype="<U4"))
    save("bad_struct.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    save("bad_i2.npy", np.arange(3, dtype="<i2"))
    save("bad_u8.npy", np.arange(3, dtype="<u8"))
    save("bad_u1.npy", np.arange(3, dtype="|u1"))
    save("bad_f2.npy", np.arange(3, dtype="<f2"))
    save("bad_b1.npy", np.array([True, False]))


def write_npz_fixtures():
    m = npz_members()
    np.savez(path("savez.npz"), **m)
    np.savez_compressed(path("savez_compressed.npz"), big=formula((100, 100), "<f8"), **m)
    with open(path("savez_stream.npz"), "wb") as f:
        np.savez_compressed(Unseekable(f), a=m["a"], **{"grad/x": m["grad/x"]})
    with open(path("savez_stream_stored.npz"), "wb") as f:
        np.savez(Unseekable(f), a=m["a"], **{"grad/x": m["grad/x"]})
    np.savez(path("savez_positional.npz"), formula((3,), "<f4"), formula((2, 2), "<f8"))
    np.savez(path("savez_empty.npz"))
    zip64_archive("zip64_handmade.npz", [("a.npy", npy_bytes(m["a"]), True),
                                         ("grad/x.npy", npy_bytes(m["grad/x"]), False)])


def same_bits(a, b):
    return (a.dtype == b.dtype and a.shape == b.shape and
            a.tobytes() == b.tobytes())  # tobytes() is C order


def expect(got, want, what):
    if not same_bits(np.asarray(got), want):
        raise SystemExit("%s: got %r %s, want %r %s" % (what, got.dtype, got.shape, want.dtype,
                                                        want.shape))


def verify_generated():
    """The fixtures read back in NumPy as the C tests expect them."""
    expect(np.load(path("hdr_native_f64_2x3.npy")), formula((2, 3), "<f8"), "hdr_native")
    expect(np.load(path("hdr_py2_long_f64_2x3.npy")), formula((2, 3), "<f8"), "hdr_py2_long")
    expect(np.load(path("hdr_compact_f64_2x3.npy")), formula((2, 3), "<f8"), "hdr_compact")
    expect(np.load(path("hdr_unaligned_f64_2x3.npy")), formula((2, 3), "<f8"), "hdr_unaligned")
    expect(np.load(path("empty_fortran_f64_2x0x4.npy")), formula((2, 0, 4), "<f8"), "empty_f")
    for name in ["savez.npz", "savez_compressed.npz", "zip64_handmade.npz", "savez_stream.npz"]:
        with np.load(path(name)) as z:
            for k in z.files:
                want = npz_members().get(k, formula((100, 100), "<f8"))
                expect(z[k], want, name + ":" + k)


TL_NPY = {"tl_written_f32_2x3.npy": formula((2, 3), "<f4"),
          "tl_written_f64_2x3x4.npy": formula((2, 3, 4), "<f8"),
          "tl_written_scalar_f64.npy": formula((), "<f8"),
          "tl_written_empty_f32_0x3.npy": formula((0, 3), "<f4"),
          "tl_written_special_f64.npy": special("<f8"),
          "tl_written_special_f32.npy": special("<f4"),
          "tl_written_i64_2x3.npy": formula((2, 3), "<i8"),
          "tl_written_i32_7.npy": formula((7,), "<i4"),
          "tl_written_i64_extremes.npy": I64_EXTREMES}
TL_NPZ_KEYS = {"a": formula((2, 3), "<f4"), "grad/x": formula((3, 2), "<f8"),
               "s": formula((), "<f8"), "e": formula((0, 3), "<f4")}


def check_tl_written():
    # TL_MAXDIM dimensions: ones, then 2 and 3.
    maxdim = np.load(path("tl_written_f64_maxdim.npy")).shape
    if maxdim[-2:] != (2, 3) or set(maxdim[:-2]) != {1}:
        raise SystemExit("tl_written_f64_maxdim.npy: shape %r" % (maxdim,))
    TL_NPY["tl_written_f64_maxdim.npy"] = formula(maxdim, "<f8")
    for name, want in TL_NPY.items():
        got = np.load(path(name))
        expect(got, want, name)
        with open(path(name), "rb") as f:
            if f.read() != npy_bytes(want):
                raise SystemExit(name + ": bytes differ from np.save")
    for name in ["tl_written_stored.npz", "tl_written_deflated.npz", "tl_written_zip64.npz"]:
        with np.load(path(name)) as z:
            if z.files != list(TL_NPZ_KEYS):
                raise SystemExit("%s: keys %r" % (name, z.files))
            for k, want in TL_NPZ_KEYS.items():
                expect(z[k], want, name + ":" + k)
    print("NumPy %s loads every tl_written_* file bit for bit" % np.__version__)


def main():
    if sys.argv[1:] == ["--check"]:
        check_tl_written()
        return
    os.makedirs(OUT, exist_ok=True)
    write_npy_fixtures()
    write_bad_fixtures()
    write_npz_fixtures()
    verify_generated()
    print("wrote fixtures to", OUT)


if __name__ == "__main__":
    main()
