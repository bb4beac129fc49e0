#!/usr/bin/python3
"""tests/cli/vmath_args.npz: arguments for the end-to-end check that the
vectorised kernels of ./tl give the bits of its element-at-a-time map
engine (tests/cli/vmath.txt).  x32 (f32) and x64 (f64), 4099 values each
(not a multiple of any vector width, so every loop has a tail): uniform
draws where the functions are interesting, random bit patterns over the
whole range, and the edges (zeros, infinities, overflow thresholds, huge
and tiny).  Deterministic; needs NumPy (not CI).

    /usr/bin/python3 tests/gen/gen_vmath_args.py
"""
import os
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "cli", "vmath_args.npz")
N = 4099


def args(dtype, ity, edges):
    rng = np.random.default_rng(20261130)
    n_edges = len(edges)
    a = np.empty(N, dtype)
    a[:n_edges] = edges
    rest = N - n_edges
    half = rest // 2
    a[n_edges:n_edges + half] = rng.uniform(-25, 25, half)
    bits = rng.integers(0, np.iinfo(ity).max, rest - half, dtype=ity, endpoint=True)
    rnd = bits.view(dtype)
    rnd[~np.isfinite(rnd)] = 1.5
    a[n_edges + half:] = rnd
    return a


EDGES = [0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 0.5, 1e-30, -1e-30, 1e-40, 88.72283, 88.7229,
         -87.3, -103.9, -104.0, 709.7827128933839, 709.78, -745.1, 1e30, 3e38, -3e38, 1e10, 1e22]

x32 = args(np.float32, np.uint32, np.array(EDGES, np.float32))
x64 = args(np.float64, np.uint64, np.array(EDGES + [1e300, 1.7e308, -1.7e308, 5e-324], np.float64))
np.savez(OUT, x32=x32, x64=x64)
print("wrote", OUT)
