#!/usr/bin/python3
"""Writes the inputs of examples/cnn.json (cnn_inputs.npz) and its golden
results (cnn_expected.npz): the loss and every gradient, computed by
PyTorch's torch.nn.functional at float64 from the same f32 inputs, then
rounded to f32 (tl compare wants the dtype of tl's results).

Run with the Debian NumPy and PyTorch (python3-torch) from the repository
root or from examples/:

    /usr/bin/python3 examples/make_cnn_inputs.py

Values come from a fixed-seed generator and the archives get fixed member
timestamps, so a re-run rewrites byte-identical files.  The keys of
cnn_expected.npz are those of `tl grad examples/cnn.json -o FILE.npz`
(loss, grad/x, grad/w1, ...), so `tl compare` and `--expect` read it as is.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_inputs import save_npz  # noqa: E402

# The inputs in the order of cnn.json; labels are int64 and get no gradient.
FLOAT = ["x", "w1", "gamma1", "beta1", "w2", "gamma2", "beta2", "wd", "bd"]


def inputs():
    rng = np.random.default_rng(20261201)
    f32 = np.float32
    n, k = 8, 10
    he = lambda *s: (rng.standard_normal(s) * np.sqrt(2.0 / np.prod(s[1:]))).astype(f32)
    return {
        "x": rng.standard_normal((n, 3, 16, 16)).astype(f32),
        "w1": he(8, 3, 3, 3),
        "gamma1": (1 + 0.1 * rng.standard_normal(8)).astype(f32),
        "beta1": (0.1 * rng.standard_normal(8)).astype(f32),
        "w2": he(16, 8, 3, 3),
        "gamma2": (1 + 0.1 * rng.standard_normal(16)).astype(f32),
        "beta2": (0.1 * rng.standard_normal(16)).astype(f32),
        "wd": (rng.standard_normal((16, k)) / 4).astype(f32),
        "bd": (0.1 * rng.standard_normal(k)).astype(f32),
        "labels": rng.integers(0, k, n).astype(np.int64),
    }


def loss_of(t, labels):
    """cnn.json, written with torch.nn.functional"""
    h = F.conv2d(t["x"], t["w1"], padding=1)
    h = F.batch_norm(h, None, None, t["gamma1"], t["beta1"], training=True, eps=1e-5)
    h = F.max_pool2d(F.relu(h), 2)
    h = F.conv2d(h, t["w2"], padding=1)
    h = F.batch_norm(h, None, None, t["gamma2"], t["beta2"], training=True, eps=1e-5)
    feat = F.relu(h).mean(dim=(2, 3))
    return F.cross_entropy(feat @ t["wd"] + t["bd"], labels)


def main():
    ins = inputs()
    save_npz("cnn_inputs.npz", ins)
    t = {k: torch.tensor(ins[k], dtype=torch.float64, requires_grad=True) for k in FLOAT}
    loss = loss_of(t, torch.from_numpy(ins["labels"]))
    loss.backward()
    out = {"loss": loss.detach().numpy().astype(np.float32)}
    for k in FLOAT:
        out["grad/" + k] = t[k].grad.numpy().astype(np.float32)
    save_npz("cnn_expected.npz", out)
    print("loss %.7g (float64)" % loss.item())


if __name__ == "__main__":
    main()
