#!/usr/bin/python3
"""Fixtures of random_uniform, random_normal and dropout (nn.md) in
tests/fixtures/nn, with the bits pinned: this script implements tl's
generator on its own (Philox4x32-10 in NumPy uint32 arithmetic, the key,
counter and conversions of tl-graph(5)), checks Philox against the
published Random123 known-answer vectors, and computes every expected
value in the tested dtype exactly as tl must (float32 arithmetic for f32
cases), so tests/test_philox.c can compare the outputs bit for bit.

  key      (seed mod 2^32, (seed >> 32) mod 2^32)
  counter  (i mod 2^32, i >> 32, node, step): i the element (row-major),
           node the node's index in the recipe (every block, file order),
           step 0 at the top, w*0x9E3779B9 + t + 1 (mod 2^32) in step t of
           an iterate whose surroundings have step word w
  f32 uniform  (x0 >> 8) * 2^-24;  f64 uniform  (x0:x1 >> 11) * 2^-53
  draw     low + (high - low)*v in the dtype, below high
  normal   sqrt(-2 log u1) cos(2 pi u2) in double, u1 = (x0:x1 >> 11 + 1)
           2^-53, u2 likewise from x2:x3, rounded to the dtype; then
           mean + std*z in the dtype; log and cos by tl's own formulas
           (log_unit, cos_turn below, as tl-graph(5) gives them), checked
           here against math.log and math.cos
  dropout  q = 1 - p in the dtype, s = 1/q in the dtype; y = x*s where the
           element's uniform is below q, else x*0

The reference each case hands nnfix.make_case has these exact values and
PyTorch's autograd of the same formula (x + r, x*m) for the gradients.

    /usr/bin/python3 tests/gen/gen_nn_random.py
"""

import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnfix import N, NP, clean, graph, make_case  # noqa: E402

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
STEP_MUL = 0x9E3779B9
MASK = 0xFFFFFFFF
FLOATS = ("f32", "f64")

# Random123's kat_vectors: philox4x32 10, counter, key -> output
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK, MASK), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox(c, k0, k1):
    """c: four uint32 arrays; returns four uint32 arrays."""
    c0, c1, c2, c3 = (np.asarray(w, dtype=np.uint32) for w in c)
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0 = np.uint64(M0) * c0.astype(np.uint64)
        p1 = np.uint64(M1) * c2.astype(np.uint64)
        hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), (p0 & np.uint64(MASK)).astype(np.uint32)
        hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), (p1 & np.uint64(MASK)).astype(np.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint32(k0), lo1, hi0 ^ c3 ^ np.uint32(k1), lo0
    return c0, c1, c2, c3


def check_kat():
    for ctr, key, want in KAT:
        got = philox([np.array([w]) for w in ctr], *key)
        got = tuple(int(w[0]) for w in got)
        if got != want:
            raise AssertionError("Philox4x32-10 known answer: got %s, want %s"
                                 % (" ".join("%08x" % w for w in got), " ".join("%08x" % w for w in want)))


def step_word(steps):
    """The step word of nested iterate steps, outermost first."""
    w = 0
    for t in steps:
        w = (w * STEP_MUL + t + 1) & MASK
    return w


def words(numel, seed, node, step):
    s = seed & 0xFFFFFFFFFFFFFFFF
    i = np.arange(numel, dtype=np.uint64)
    ctr = [(i & np.uint64(MASK)).astype(np.uint32), (i >> np.uint64(32)).astype(np.uint32),
           np.full(numel, node, np.uint32), np.full(numel, step, np.uint32)]
    return philox(ctr, s & MASK, s >> 32)


def top53(hi, lo):
    return ((hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)) >> np.uint64(11)


def unit(w, dt):
    if dt == "f32":
        return (w[0] >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
    return top53(w[0], w[1]).astype(np.float64) * 2.0 ** -53


def uniform(shape, seed, node, step, dt, low=0.0, high=1.0):
    T = NP[dt]
    v = unit(words(int(np.prod(shape)), seed, node, step), dt)
    lo, hi = T(low), T(high)
    r = (lo + (hi - lo) * v).astype(T)
    r = np.where(r < hi, r, np.nextafter(hi, lo)).astype(T)
    return r.reshape(shape)


def log_unit(k):
    """log(k 2^-53), k in [1, 2^53]: tl's formula, operation by operation."""
    b = k.bit_length()
    m = float(k) / float(1 << (b - 1))
    e = b - 1 - 53
    if m > 1.4142135623730951:
        m = m * 0.5
        e = e + 1
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = 1.0 / 21.0
    for d in (19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0):
        p = p * z + 1.0 / d
    lm = 2.0 * s + 2.0 * s * (z * p)
    return float(e) * float.fromhex("0x1.62e42feep-1") + (float(e) * float.fromhex("0x1.a39ef35793c76p-33") + lm)


def sin_q(x):
    z = x * x
    p = -1.0 / 355687428096000.0
    for c in (1.0 / 1307674368000.0, -1.0 / 6227020800.0, 1.0 / 39916800.0, -1.0 / 362880.0,
              1.0 / 5040.0, -1.0 / 120.0, 1.0 / 6.0):
        p = p * z + c
    return x - x * (z * p)


def cos_q(x):
    z = x * x
    p = 1.0 / 20922789888000.0
    for c in (-1.0 / 87178291200.0, 1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0,
              -1.0 / 720.0, 1.0 / 24.0, -1.0 / 2.0):
        p = p * z + c
    return 1.0 + z * p


def cos_turn(k):
    """cos(2 pi k 2^-53), k in [1, 2^53]: tl's formula."""
    quarter = 1 << 51
    q, r = (k >> 51) & 3, k & (quarter - 1)
    flip = r > quarter // 2
    x = float(quarter - r if flip else r) * (1.5707963267948966 * 2.0 ** -51)
    c, s = cos_q(x), sin_q(x)
    cf, sf = (s, c) if flip else (c, s)
    return (cf, -sf, -cf, sf)[q]


def check_formulas():
    """tl's log and cos within 2 ulp of the exact values (mpmath, 200 bits)
    at the ends, the quarter turns and random points."""
    import mpmath
    mpmath.mp.prec = 200
    rng = np.random.default_rng(5)
    q = 1 << 51
    ks = [1, 2, 3, (1 << 52) - 1, 1 << 52, (1 << 52) + 1, (1 << 53) - 1, 1 << 53]
    ks += [m * q // 2 + d for m in range(1, 8) for d in (-1, 0, 1)]
    ks += [int(v) for v in rng.integers(1, 1 << 53, 5000)]
    for k in ks:
        u = mpmath.mpf(k) / 2 ** 53
        for got, exact in ((log_unit(k), mpmath.log(u)), (cos_turn(k), mpmath.cos(2 * mpmath.pi * u))):
            if abs(exact) < 1e-40:  # cos of a quarter turn: 0 exactly
                exact = mpmath.mpf(0)
            ulp = math.ulp(float(exact)) if exact != 0 else 2.0 ** -1074
            assert float(abs(mpmath.mpf(got) - exact)) <= 2 * ulp, (k, got, exact)


def normal(shape, seed, node, step, dt, mean=0.0, std=1.0):
    T = NP[dt]
    w = words(int(np.prod(shape)), seed, node, step)
    m1, m2 = top53(w[0], w[1]), top53(w[2], w[3])
    z = np.array([math.sqrt(-2.0 * log_unit(int(a) + 1)) * cos_turn(int(b) + 1) for a, b in zip(m1, m2)])
    return (T(mean) + T(std) * z.astype(T)).astype(T).reshape(shape)


def dropout_scale(shape, p, seed, node, step, dt):
    """The factor m of y = x*m: 1/q where kept, else 0."""
    T = NP[dt]
    q = T(1.0 - p)
    s = T(1) / q
    v = unit(words(int(np.prod(shape)), seed, node, step), dt)
    return np.where(v < q, s, T(0)).astype(T).reshape(shape)


class _Exact(torch.autograd.Function):
    """The value given (bits and signs of zeros kept), the gradient of the
    formula given."""

    @staticmethod
    def forward(ctx, formula, value):
        return value.clone()

    @staticmethod
    def backward(ctx, g):
        return g, None


def exact(value, formula):
    """formula's gradient with value's (exact, dtype-rounded) value."""
    return _Exact.apply(formula, torch.tensor(value.astype(np.float64)))


# ---- cases ----

def uniform_cases(rng):
    for dt in FLOATS:
        T = NP[dt]
        x = rng.uniform(-1, 1, (3, 5)).astype(T)
        r = uniform((3, 5), 20261201, 0, 0, dt, -2.0, 3.0)
        y = (x + r).astype(T)
        g = graph("random_uniform in the call's dtype (no dtype attribute), added to x",
                  {"x": dt}, [N("r", "random_uniform", shape=[3, 5], seed=20261201, low=-2, high=3),
                              N("y", "add", "x", "r")], ["r", "y"])
        make_case(f"random_uniform_{dt}", g, {"x": x},
                  lambda t, r=r, y=y: {"r": torch.tensor(r.astype(np.float64)), "y": exact(y, t["x"] + 0)})
        # an explicit dtype where the call has none (no inputs: f64); a
        # seed beyond 32 bits, negative; the draw is the second node
        seed = -(3 << 40) - 12345
        r0 = uniform((2, 2), 1, 0, 0, dt)
        r1 = uniform((4, 3), seed, 1, 0, dt, 0.5, 0.75)
        g = graph("random_uniform with dtype, a negative 64-bit seed, as node 1",
                  {}, [N("r0", "random_uniform", shape=[2, 2], seed=1, dtype=dt),
                       N("r", "random_uniform", shape=[4, 3], seed=seed, low=0.5, high=0.75, dtype=dt)], ["r0", "r"])
        make_case(f"random_uniform_dtype_{dt}", g, {},
                  lambda t, r0=r0, r1=r1: {"r0": torch.tensor(r0.astype(np.float64)), "r": torch.tensor(r1.astype(np.float64))})


def normal_cases(rng):
    for dt in FLOATS:
        T = NP[dt]
        x = rng.uniform(-1, 1, (4, 3)).astype(T)
        r = normal((4, 3), 7, 0, 0, dt, 0.5, 2.0)
        y = (x + r).astype(T)
        g = graph("random_normal with mean 0.5 and std 2, added to x",
                  {"x": dt}, [N("r", "random_normal", shape=[4, 3], seed=7, mean=0.5, std=2),
                              N("y", "add", "x", "r")], ["r", "y"])
        make_case(f"random_normal_{dt}", g, {"x": x},
                  lambda t, r=r, y=y: {"r": torch.tensor(r.astype(np.float64)), "y": exact(y, t["x"] + 0)})
        r = normal((64,), 0, 0, 0, dt)
        g = graph("random_normal, standard, dtype given", {},
                  [N("r", "random_normal", shape=[64], seed=0, dtype=dt)], ["r"])
        make_case(f"random_normal_standard_{dt}", g, {}, lambda t, r=r: {"r": torch.tensor(r.astype(np.float64))})


def dropout_case(name, doc, dt, x, nodes, y_of):
    g = graph(doc, {"x": dt}, nodes, ["y"])
    make_case(name, g, {"x": x}, y_of)


def dropout_cases(rng):
    for dt in FLOATS:
        T = NP[dt]
        x = rng.uniform(-2, 2, (4, 6)).astype(T)
        m = dropout_scale((4, 6), 0.3, 11, 0, 0, dt)
        dropout_case(f"dropout_{dt}", "dropout with p 0.3: x*mask/(1-p), g through the same mask", dt, x,
                     [N("y", "dropout", "x", p=0.3, seed=11)],
                     lambda t, m=m, x=x: {"y": exact((x * m).astype(T), t["x"] * torch.tensor(m.astype(np.float64)))})
        # node 1, a negative seed; training given as true
        m = dropout_scale((4, 6), 0.5, -3, 1, 0, dt)
        dropout_case(f"dropout_node1_{dt}", "dropout as node 1", dt, x,
                     [N("a", "neg", "x"), N("y", "dropout", "a", p=0.5, seed=-3, training=True)],
                     lambda t, m=m, x=x: {"y": exact((-x * m).astype(T), -t["x"] * torch.tensor(m.astype(np.float64)))})
        dropout_case(f"dropout_eval_{dt}", "dropout with training false: x itself", dt, x,
                     [N("y", "dropout", "x", p=0.9, seed=2, training=False)], lambda t: {"y": t["x"] + 0})
        m = dropout_scale((4, 6), 0.0, 4, 0, 0, dt)
        assert (m == 1).all()
        dropout_case(f"dropout_p0_{dt}", "dropout with p 0 keeps everything", dt, x,
                     [N("y", "dropout", "x", p=0, seed=4)], lambda t: {"y": t["x"] + 0})


def iterate_cases(rng):
    """Each step draws afresh: the step word in the key (and, for dropout,
    in the tape's copy of the key that its backward draws again from)."""
    for dt in FLOATS:
        T = NP[dt]
        x = rng.uniform(-1, 1, (4,)).astype(T)
        # iterate (node 0) { r (node 1), s1 (node 2) } three times
        s = x.copy()
        for t in range(3):
            s = (s + uniform((4,), 9, 1, step_word([t]), dt)).astype(T)
        body = {"nodes": [N("r", "random_uniform", shape=[4], seed=9), N("s1", "add", "s", "r")], "result": ["s1"]}
        g = graph("random_uniform inside iterate: a new draw each step", {"x": dt},
                  [{"id": ["y"], "op": "iterate", "count": 3, "init": ["x"], "state": ["s"], "body": body}], ["y"])
        make_case(f"random_uniform_iterate_{dt}", g, {"x": x}, lambda t, s=s: {"y": exact(s, t["x"] + 0)})
        # nested: outer (node 0) { inner (node 1) { r (node 2), s1 (node 3) } }, 2 x 3 steps
        s = x.copy()
        for a in range(2):
            for b in range(3):
                s = (s + normal((4,), 5, 2, step_word([a, b]), dt)).astype(T)
        inner = {"nodes": [N("r", "random_normal", shape=[4], seed=5), N("s1", "add", "u", "r")], "result": ["s1"]}
        outer = {"nodes": [{"id": ["v"], "op": "iterate", "count": 3, "init": ["s"], "state": ["u"], "body": inner}],
                 "result": ["v"]}
        g = graph("random_normal inside nested iterates: the step word combines both steps", {"x": dt},
                  [{"id": ["y"], "op": "iterate", "count": 2, "init": ["x"], "state": ["s"], "body": outer}], ["y"])
        make_case(f"random_normal_iterate_nested_{dt}", g, {"x": x}, lambda t, s=s: {"y": exact(s, t["x"] + 0)})
        # dropout twice over, a different mask each step; g through both
        x = rng.uniform(-2, 2, (3, 4)).astype(T)
        ms = [dropout_scale((3, 4), 0.25, 6, 1, step_word([t]), dt) for t in range(2)]
        y = x.copy()
        for m in ms:
            y = (y * m).astype(T)
        body = {"nodes": [N("s1", "dropout", "s", p=0.25, seed=6)], "result": ["s1"]}
        g = graph("dropout inside iterate: each step its own mask, the gradient through each", {"x": dt},
                  [{"id": ["y"], "op": "iterate", "count": 2, "init": ["x"], "state": ["s"], "body": body}], ["y"])
        mt = [torch.tensor(m.astype(np.float64)) for m in ms]
        make_case(f"dropout_iterate_{dt}", g, {"x": x}, lambda t, y=y, mt=mt: {"y": exact(y, t["x"] * mt[0] * mt[1])})


def main():
    check_kat()
    check_formulas()
    clean(["random_uniform", "random_normal", "dropout"])
    rng = np.random.default_rng(2011)
    uniform_cases(rng)
    normal_cases(rng)
    dropout_cases(rng)
    iterate_cases(rng)


if __name__ == "__main__":
    main()
