#!/usr/bin/python3
"""Convolution kernels of tl against PyTorch's (oneDNN, through
torch.nn.functional.conv2d and its backward), forward and backward, f32,
on 1 and 2 threads, side by side in one run.

Blocks (the targets of the convolution work):
  resnet     ResNet basic block's convolutions: two 3x3 convs, 64 channels,
             batch 8, 56x56, padding 1
  mobilenet  MobileNet depthwise-separable block: 3x3 depthwise conv (groups
             32, padding 1) then a 1x1 conv, 32 channels, batch 8, 112x112

tl's time is the time in its ops (tl grad --profile: forward plus backward
ms in ops, so neither the process start nor reading and writing the tensors
counts); PyTorch's is y = block(x); y.backward(ones) with x, w requiring
grad.  Each figure is the best of --reps runs (the machines here are shared:
the best is the least disturbed).  tl's gradients with 1 and 2 threads are
compared bit for bit.

CPU seconds of one block are shown too, for a machine too loaded for wall
times to mean much (the CPU a thread gets is then a fraction, but what it
spends on the work is still its own): PyTorch's from getrusage around the
timed calls; tl's as the difference of a process running the block three
times (three copies on the same inputs, summed) and one running it once,
halved, so the start and the reading and writing of tensors cancel out.

    /usr/bin/python3 tests/bench/conv_timing.py [--tl ./tl] [--reps 5] [--only resnet]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

BLOCKS = {
    "resnet": {
        "inputs": {"x": (8, 64, 56, 56), "w1": (64, 64, 3, 3), "w2": (64, 64, 3, 3)},
        "nodes": [{"id": "h", "op": "conv", "args": ["x", "w1"], "padding": 1},
                  {"id": "y", "op": "conv", "args": ["h", "w2"], "padding": 1}],
    },
    "mobilenet": {
        "inputs": {"x": (8, 32, 112, 112), "wd": (32, 1, 3, 3), "wp": (32, 32, 1, 1)},
        "nodes": [{"id": "h", "op": "conv", "args": ["x", "wd"], "padding": 1, "groups": 32},
                  {"id": "y", "op": "conv", "args": ["h", "wp"]}],
    },
}


def torch_block(name, t):
    import torch.nn.functional as F
    if name == "resnet":
        return F.conv2d(F.conv2d(t["x"], t["w1"], padding=1), t["w2"], padding=1)
    return F.conv2d(F.conv2d(t["x"], t["wd"], padding=1, groups=32), t["wp"])


def cpu_seconds(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def block_graph(b, copies):
    """The block `copies` times on the same inputs, the results added up."""
    nodes, ys = [], []
    for i in range(copies):
        ren = {n["id"]: f'{n["id"]}{i}' for n in b["nodes"]}
        nodes += [dict(n, id=ren[n["id"]], args=[ren.get(a, a) for a in n["args"]]) for n in b["nodes"]]
        ys.append(ren["y"])
    total = ys[0]
    for i, y in enumerate(ys[1:]):
        nodes.append({"id": f"total{i}", "op": "add", "args": [total, y]})
        total = f"total{i}"
    return {"version": 1, "inputs": [{"name": k, "dtype": "f32"} for k in b["inputs"]], "nodes": nodes,
            "outputs": total}


def time_tl(tl, graph, inputs, out, threads):
    env = dict(os.environ, TL_NUM_THREADS=str(threads))
    before = cpu_seconds(resource.RUSAGE_CHILDREN)
    r = subprocess.run([tl, "grad", graph, "-i", inputs, "-o", out, "--profile", "-q"], env=env,
                       capture_output=True, text=True)
    cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - before
    if r.returncode:
        sys.exit(f"tl failed: {r.stderr}")
    ms = [float(m) for m in re.findall(r"profile, (?:forward|backward): ([0-9.]+) ms in ops", r.stderr)]
    return sum(ms) / 1e3, cpu


class TorchBlock:
    """The block in PyTorch on the same inputs; run(threads) times one
    forward and backward: (wall, CPU seconds)."""

    def __init__(self, name, arrays):
        import torch
        self.torch, self.name = torch, name
        self.t = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}

    def once(self):
        y = torch_block(self.name, self.t)
        y.backward(self.torch.ones_like(y))
        for v in self.t.values():
            v.grad = None

    def run(self, threads):
        self.torch.set_num_threads(threads)
        self.once()  # warm at this thread count
        c = cpu_seconds(resource.RUSAGE_SELF)
        s = time.perf_counter()
        self.once()
        return time.perf_counter() - s, cpu_seconds(resource.RUSAGE_SELF) - c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tl", default=os.path.join(ROOT, "tl"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'block':10} {'threads':>7} {'tl s':>8} {'torch s':>8} {'tl/torch':>8} "
              f"{'tl cpu':>7} {'torch cpu':>9}  bits")
        for name, b in BLOCKS.items():
            if args.only and name != args.only:
                continue
            graph, graph3 = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + "3.json")
            for path, copies in ((graph, 1), (graph3, 3)):
                with open(path, "w") as f:
                    json.dump(block_graph(b, copies), f)
            arrays = {k: (rng.standard_normal(s) * (1 if k == "x" else 0.1)).astype(np.float32)
                      for k, s in b["inputs"].items()}
            inputs = os.path.join(tmp, name + "_in.npz")
            np.savez(inputs, **arrays)
            tb = TorchBlock(name, arrays) if have_torch else None
            outs, tl_best = {}, {}
            for threads in (1, 2):
                out = os.path.join(tmp, f"{name}_{threads}.npz")
                runs, runs3, th = [], [], []
                for _ in range(args.reps):  # alternated, so both meet the same load
                    runs.append(time_tl(args.tl, graph, inputs, out, threads))
                    runs3.append(time_tl(args.tl, graph3, inputs, os.path.join(tmp, "o3.npz"), threads))
                    th.append(tb.run(threads) if tb else (float("nan"),) * 2)
                cpu = (min(r[1] for r in runs3) - min(r[1] for r in runs)) / 2
                tl_best[threads] = (min(r[0] for r in runs), cpu)
                th = (min(r[0] for r in th), min(r[1] for r in th))
                with open(out, "rb") as f:
                    outs[threads] = f.read()
                same = "same" if outs[threads] == outs[1] else "DIFFER"
                print(f"{name:10} {threads:7d} {tl_best[threads][0]:8.3f} {th[0]:8.3f} "
                      f"{th[0] / tl_best[threads][0]:7.2f}x {tl_best[threads][1]:7.3f} {th[1]:9.3f}  {same}")
            print(f"{name:10} tl speed-up with 2 threads: {tl_best[1][0] / tl_best[2][0]:.2f}x")
    print("tl/torch: PyTorch's time over tl's (above 1: tl is faster)")


if __name__ == "__main__":
    main()
