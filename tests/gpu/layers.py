#!/usr/bin/env python3
"""The layer-op benchmarks of `make bench` (tests/bench) on a GPU: tl's
training step (gpu_check bench: inputs up, forward, backward, every float
input's gradient down) against the same step in PyTorch on the same GPU,
f32, TF32 off in PyTorch (tl never lowers precision), cuDNN at its fastest
algorithm (benchmark mode).  Each at the benchmark's size and at 4 times
its batch.  Run from the repository root on the GPU machine:

    python3 tests/gpu/layers.py BUNDLE/gpu_check

Needs NumPy and PyTorch with CUDA (the GPU machine's python3 has both)."""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "bench")


def inputs(work, batch, rng):
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    he = lambda *s: f32(rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:])))
    near = lambda n, v: f32(v + 0.1 * rng.standard_normal(n))
    if work == "resnet":
        return dict(x=f32(rng.standard_normal((batch, 64, 56, 56))), w1=he(64, 64, 3, 3), s1=near(64, 1),
                    c1=near(64, 0), w2=he(64, 64, 3, 3), s2=near(64, 1), c2=near(64, 0))
    if work == "dwsep":
        return dict(x=f32(rng.standard_normal((batch, 32, 112, 112))), dw=he(32, 1, 3, 3), pw=he(32, 32, 1, 1))
    if work in ("max_pool", "avg_pool"):
        return dict(x=f32(rng.standard_normal((batch, 64, 112, 112))))
    return dict(x=f32(rng.standard_normal((batch * 512, 1024))), scale=near(1024, 1), bias=near(1024, 0))


def torch_step(work, ps):
    if work == "resnet":
        x, w1, s1, c1, w2, s2, c2 = ps
        h = F.relu(F.batch_norm(F.conv2d(x, w1, padding=1), None, None, s1, c1, training=True))
        h = F.batch_norm(F.conv2d(h, w2, padding=1), None, None, s2, c2, training=True)
        return F.relu(h + x)
    if work == "dwsep":
        x, dw, pw = ps
        return F.conv2d(F.relu(F.conv2d(x, dw, padding=1, groups=dw.shape[0])), pw)
    if work == "max_pool":
        return F.max_pool2d(ps[0], 3, 2, 1)
    if work == "avg_pool":
        return F.avg_pool2d(ps[0], 3, 2, 1)
    x, scale, bias = ps
    return F.layer_norm(x, scale.shape, scale, bias)


def torch_time(work, arrays):
    host = [torch.from_numpy(a) for a in arrays.values()]
    times = []
    for i in range(12):
        t0 = time.perf_counter()
        ps = [p.cuda().requires_grad_() for p in host]
        torch_step(work, ps).sum().backward()
        grads = [p.grad.cpu() for p in ps]
        torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    del grads
    return statistics.median(times)


def main(argv):
    if len(argv) != 2 or not torch.cuda.is_available():
        print(__doc__.strip().split("\n\n")[1] if len(argv) != 2 else "layers: torch sees no GPU")
        return 2
    checker = argv[1]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    graphs = {"resnet": "resnet_block.json", "dwsep": "dwsep_block.json", "max_pool": "max_pool.json",
              "avg_pool": "avg_pool.json", "layer_norm": "layer_norm.json"}
    batches = {"resnet": 8, "dwsep": 8, "max_pool": 8, "avg_pool": 8, "layer_norm": 8}
    print("layers: torch %s on %s; ms a step, inputs up and gradients down included" %
          (torch.__version__, torch.cuda.get_device_name(0)))
    print("%-12s %6s %10s %10s %8s" % ("workload", "batch", "tl ms", "torch ms", "ratio"))
    rng = np.random.default_rng(0)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for work, graph in graphs.items():
            for scale in (1, 4):
                batch = batches[work] * scale
                arrays = inputs(work, batch, rng)
                npz = os.path.join(tmp, work + ".npz")
                np.savez(npz, **arrays)
                p = subprocess.run([checker, "bench", os.path.join(BENCH, graph), npz, "--device", "cuda"],
                                   capture_output=True, text=True, timeout=300)
                m = re.search(r"^bench: tl on \S+: ([\d.]+) ms", p.stdout, re.M)
                t_torch = torch_time(work, arrays) * 1e3
                if not m:
                    failed += 1
                    print("%-12s %6d %10s %10.3f   (tl: %s)" % (work, batch, "-", t_torch,
                                                               (p.stdout + p.stderr).strip().split("\n")[-1]))
                    continue
                t_tl = float(m.group(1))
                print("%-12s %6d %10.3f %10.3f %7.2fx" % (work, batch, t_tl, t_torch, t_torch / t_tl))
    print("(ratio: PyTorch's time over tl's; above 1, tl is faster)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
