#!/usr/bin/python3
"""Fixtures of the normalizations (tests/fixtures/nn/{batch_norm,
layer_norm,group_norm}_*): values and VJPs against
torch.nn.functional.batch_norm (inference and training mode, the latter
also with its three ids: the value, the batch mean and the biased batch
variance), layer_norm (with and without scale and bias, over several
axes) and group_norm (instance norm: groups = C), at float64, in f32 and
f64.

    /usr/bin/python3 tests/gen/gen_nn_norm.py
"""

import numpy as np
import torch
import torch.nn.functional as F

from nnfix import N, clean, graph, make_case


def rand(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape)


def batch_norm(name, shape, training, eps=None, three=False):
    C = shape[1]
    red = [0] + list(range(2, len(shape)))
    for dt in ("f32", "f64"):
        rng = np.random.default_rng(sum(map(ord, name)) + 31 * len(shape))
        npdt = np.float32 if dt == "f32" else np.float64
        arrays = {"x": rand(rng, shape).astype(npdt), "scale": rand(rng, [C], 0.5, 2).astype(npdt),
                  "bias": rand(rng, [C]).astype(npdt), "mean": rand(rng, [C], -0.5, 0.5).astype(npdt),
                  "var": rand(rng, [C], 0.5, 2).astype(npdt)}
        attrs = {}
        if training is not None:
            attrs["training"] = training
        if eps is not None:
            attrs["epsilon"] = eps
        e = 1e-5 if eps is None else eps
        ids = ["y", "m", "v"] if three else "y"
        g = graph(f"batch_norm {name}", {k: dt for k in arrays},
                  [N(ids, "batch_norm", "x", "scale", "bias", "mean", "var", **attrs)],
                  ["y", "m", "v"] if three else ["y"])

        def ref(t):
            x = t["x"]
            if training:
                rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
                y = F.batch_norm(x, rm, rv, t["scale"], t["bias"], training=True, momentum=1.0, eps=e)
                out = {"y": y}
                if three:
                    out["m"] = x.mean(red)
                    out["v"] = ((x - x.mean(red, keepdim=True)) ** 2).mean(red)
                return out
            # PyTorch does not differentiate with respect to running statistics:
            # the formula, checked against F.batch_norm
            sh = [1, C] + [1] * (len(shape) - 2)
            y = (x - t["mean"].reshape(sh)) / torch.sqrt(t["var"].reshape(sh) + e) * t["scale"].reshape(sh) \
                + t["bias"].reshape(sh)
            want = F.batch_norm(x.detach(), t["mean"].detach(), t["var"].detach(), t["scale"].detach(),
                                t["bias"].detach(), training=False, eps=e)
            assert torch.allclose(y, want, rtol=1e-12, atol=1e-12)
            return {"y": y}
        make_case(f"batch_norm_{name}_{dt}", g, arrays, ref)


def layer_norm(name, shape, axis=None, params=2, eps=None):
    ax = -1 if axis is None else axis
    ax = ax + len(shape) if ax < 0 else ax
    tail = shape[ax:]
    for dt in ("f32", "f64"):
        rng = np.random.default_rng(sum(map(ord, name)) + 17 * len(shape))
        npdt = np.float32 if dt == "f32" else np.float64
        arrays = {"x": rand(rng, shape).astype(npdt)}
        if params >= 1:
            arrays["scale"] = rand(rng, tail, 0.5, 2).astype(npdt)
        if params >= 2:
            arrays["bias"] = rand(rng, tail).astype(npdt)
        attrs = {}
        if axis is not None:
            attrs["axis"] = axis
        if eps is not None:
            attrs["epsilon"] = eps
        g = graph(f"layer_norm {name}", {k: dt for k in arrays}, [N("y", "layer_norm", *arrays, **attrs)], ["y"])

        def ref(t):
            return {"y": F.layer_norm(t["x"], tail, t.get("scale"), t.get("bias"), eps=1e-5 if eps is None else eps)}
        make_case(f"layer_norm_{name}_{dt}", g, arrays, ref)


def group_norm(name, shape, groups, params=2, eps=None):
    C = shape[1]
    for dt in ("f32", "f64"):
        rng = np.random.default_rng(sum(map(ord, name)) + 13 * len(shape))
        npdt = np.float32 if dt == "f32" else np.float64
        arrays = {"x": rand(rng, shape).astype(npdt)}
        if params >= 1:
            arrays["scale"] = rand(rng, [C], 0.5, 2).astype(npdt)
        if params >= 2:
            arrays["bias"] = rand(rng, [C]).astype(npdt)
        attrs = {"groups": groups}
        if eps is not None:
            attrs["epsilon"] = eps
        g = graph(f"group_norm {name}", {k: dt for k in arrays}, [N("y", "group_norm", *arrays, **attrs)], ["y"])

        def ref(t):
            return {"y": F.group_norm(t["x"], groups, t.get("scale"), t.get("bias"), eps=1e-5 if eps is None else eps)}
        make_case(f"group_norm_{name}_{dt}", g, arrays, ref)


def main():
    clean(["batch_norm", "layer_norm", "group_norm"])
    batch_norm("inference_1d", [2, 3, 4], None)
    batch_norm("inference_2d", [2, 3, 2, 3], False, eps=1e-3)
    batch_norm("inference_nc", [4, 3], False)
    batch_norm("inference_3d", [1, 2, 2, 2, 3], False)
    batch_norm("training_2d", [3, 2, 2, 3], True)
    batch_norm("training_1d", [4, 3, 5], True, eps=0.1)
    batch_norm("training_nc", [5, 3], True)
    batch_norm("training_stats", [2, 3, 2, 2], True, three=True)
    batch_norm("training_stats_3d", [2, 2, 2, 1, 3], True, three=True)
    layer_norm("last", [3, 8])
    layer_norm("last_plain", [4, 6], params=0)
    layer_norm("last_scale", [2, 3, 5], params=1)
    layer_norm("axis1", [2, 3, 4], axis=1)
    layer_norm("axis_neg2", [3, 2, 5], axis=-2, eps=1e-2)
    layer_norm("axis0", [3, 4], axis=0, params=0)
    layer_norm("vec", [7])
    group_norm("2d", [2, 4, 3, 2], 2)
    group_norm("one_group", [2, 3, 5], 1, eps=1e-3)
    group_norm("instance", [2, 3, 2, 3], 3)
    group_norm("instance_plain", [2, 3, 4], 3, params=0)
    group_norm("scale_only", [1, 6, 2, 2], 3, params=1)
    group_norm("3d", [1, 4, 2, 2, 2], 2)
    group_norm("nc", [3, 6], 2)


if __name__ == "__main__":
    main()
