#!/usr/bin/python3
"""tl's pools and layer_norm against PyTorch's, forward and backward, f32,
2 threads each (TL_NUM_THREADS=2, torch.set_num_threads(2)).  tl's time is
the sum of its own ops' times as `tl grad --profile` reports them (the
layer op forward and its backward kernels and recipe; the seed's
broadcast and the final sum are left out); PyTorch's is the op's forward
plus `backward` with a ready cotangent.  Figures are medians of runs that
alternate between the two (the machines here are shared and noisy).
tl's figures include the first touch of its fresh result tensors (each
tl run is one process), while PyTorch's loop gets memory back from its
allocator warm: on a virtual machine where a fresh page costs ~1 us,
that is a few ms per 16 MiB tensor in tl's column alone.

    /usr/bin/python3 tests/bench/pool_norm_timing.py [--tl ./tl] [--runs 7]
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (name, tl program, tl ops counted, inputs, torch closure builder)
WORKLOADS = [
    ("max pool 3x3/2, [8,64,112,112]", "y = sum(max_pool(x, kernel=3, stride=2))", {"max_pool", "max_pool_grad"},
     {"x": (8, 64, 112, 112)}, lambda t: F.max_pool2d(t["x"], 3, 2)),
    ("avg pool 3x3/2, [8,64,112,112]", "y = sum(avg_pool(x, kernel=3, stride=2))", {"avg_pool", "avg_pool_grad"},
     {"x": (8, 64, 112, 112)}, lambda t: F.avg_pool2d(t["x"], 3, 2)),
    ("layer norm [4096,1024], scale+bias", "y = sum(layer_norm(x, w, b))",
     {"layer_norm", "layer_norm_grad", "layer_norm_params_grad"}, {"x": (4096, 1024), "w": (1024,), "b": (1024,)},
     lambda t: F.layer_norm(t["x"], (1024,), t["w"], t["b"])),
]


def tl_time(tl, prog, ops, files):
    env = dict(os.environ, TL_NUM_THREADS="2")
    args = [tl, "grad", "-e", prog] + [f"{k}={v}" for k, v in files.items()] + ["--profile", "-o", os.path.join(os.path.dirname(list(files.values())[0]), "out.npz")]
    p = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    total = 0.0
    for line in p.stderr.splitlines():
        m = re.match(r"tl:\s+(\w+)\s+(\d+)\s+([\d.]+)", line)
        if not m:
            continue
        op, ms = m.group(1), float(m.group(3))
        if op in ops:  # not the seed's broadcast, nor the forward's final sum
            total += ms
    return total


def torch_time(build, arrays):
    t = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    y = build(t)
    g = torch.ones_like(y)
    t0 = time.perf_counter()
    y = build(t)
    y.backward(g)
    return (time.perf_counter() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tl", default=os.path.join(ROOT, "tl"))
    ap.add_argument("--runs", type=int, default=7)
    o = ap.parse_args()
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    print(f"{'workload':40s} {'tl ms':>9s} {'torch ms':>9s} {'torch/tl':>9s}")
    with tempfile.TemporaryDirectory() as d:
        for name, prog, ops, shapes, build in WORKLOADS:
            arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
            files = {}
            for k, a in arrays.items():
                files[k] = os.path.join(d, k + ".npy")
                np.save(files[k], a)
            torch_time(build, arrays)  # warm up
            a, b = [], []
            for _ in range(o.runs):
                a.append(tl_time(o.tl, prog, ops, files))
                b.append(torch_time(build, arrays))
            ta, tb = statistics.median(a), statistics.median(b)
            print(f"{name:40s} {ta:9.2f} {tb:9.2f} {tb / ta:8.2f}x", flush=True)


if __name__ == "__main__":
    main()
