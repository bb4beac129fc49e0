#!/usr/bin/python3
"""Fixtures of the pools (tests/fixtures/nn/{max_pool,avg_pool}_*): values
and VJPs against torch.nn.functional.max_pool{1,2,3}d / avg_pool{1,2,3}d
at float64, in f32 and f64.  Asymmetric padding ([begin, end] pairs),
which PyTorch lacks, is referenced by explicit padding: -inf for max_pool
(padding never wins), zeros for avg_pool, whose divisor without
count_include_pad is the pooled count of real elements.  kink_ cases hold
ties (the first maximum takes g) and NaN (the window's value is NaN and
its last NaN takes g).

    /usr/bin/python3 tests/gen/gen_nn_pool.py
"""

import numpy as np
import torch
import torch.nn.functional as F

from nnfix import N, clean, graph, make_case

MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def pairs(padding, d):
    """padding as (begin, end) per axis."""
    if isinstance(padding, int):
        return [(padding, padding)] * d
    return [tuple(p) if isinstance(p, (list, tuple)) else (p, p) for p in padding]


def torch_pad(pp):
    """F.pad's order: last axis first."""
    out = []
    for lo, hi in reversed(pp):
        out += [lo, hi]
    return out


def reference(op, d, attrs):
    k = attrs["kernel"]
    stride = attrs.get("stride", k)
    pad = attrs.get("padding", 0)
    ceil = attrs.get("ceil_mode", False)
    pp = pairs(pad, d)
    symmetric = all(lo == hi for lo, hi in pp)

    def ref(t):
        x = t["x"]
        if op == "max_pool":
            dil = attrs.get("dilation", 1)
            if symmetric:
                y = MAX[d](x, k, stride, [lo for lo, _ in pp], dil, ceil_mode=ceil)
            else:
                y = MAX[d](F.pad(x, torch_pad(pp), value=-np.inf), k, stride, 0, dil, ceil_mode=ceil)
            return {"y": y}
        cip = attrs.get("count_include_pad", True)
        if symmetric:
            return {"y": AVG[d](x, k, stride, [lo for lo, _ in pp], ceil_mode=ceil, count_include_pad=cip)}
        xp = F.pad(x, torch_pad(pp))
        s = AVG[d](xp, k, stride, 0, ceil_mode=ceil)
        if not cip:
            ones = F.pad(torch.ones_like(x), torch_pad(pp))
            s = s / AVG[d](ones, k, stride, 0, ceil_mode=ceil)
        return {"y": s}
    return ref


def case(name, op, shape, attrs, data=None, kink=False):
    d = len(shape) - 2
    for dt in ("f32", "f64"):
        rng = np.random.default_rng(len(name) * 7919 + sum(map(ord, name)))
        x = (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.37 - 3.1
             if data is None else np.asarray(data, dtype=np.float64).reshape(shape))
        x = x.astype(np.float32 if dt == "f32" else np.float64)
        full = ("kink_" if kink else "") + f"{op}_{name}_{dt}"
        g = graph(f"{op} {name}", {"x": dt}, [N("y", op, "x", **attrs)], ["y"])
        make_case(full, g, {"x": x}, reference(op, d, attrs))


def main():
    clean(["max_pool", "avg_pool"])
    # max_pool: 1-, 2-, 3-d; strides, dilation, padding, ceil_mode
    case("1d", "max_pool", [2, 2, 7], {"kernel": 3})
    case("1d_stride_pad", "max_pool", [1, 3, 8], {"kernel": 3, "stride": 2, "padding": 1})
    case("1d_dilation", "max_pool", [1, 2, 9], {"kernel": 3, "dilation": 2, "stride": 1})
    case("1d_ceil", "max_pool", [1, 2, 8], {"kernel": 3, "stride": 2, "ceil_mode": True})
    case("2d", "max_pool", [2, 2, 4, 6], {"kernel": 2})
    case("2d_3x3_s2", "max_pool", [1, 2, 7, 7], {"kernel": 3, "stride": 2, "padding": 1})
    case("2d_lists", "max_pool", [1, 2, 6, 7], {"kernel": [2, 3], "stride": [1, 2], "padding": [1, 0]})
    case("2d_dilation", "max_pool", [1, 1, 7, 8], {"kernel": 2, "stride": [2, 1], "dilation": [2, 3]})
    case("2d_ceil", "max_pool", [1, 2, 5, 6], {"kernel": 2, "stride": 2, "ceil_mode": True})
    case("2d_ceil_pad", "max_pool", [1, 1, 6, 7], {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True})
    case("2d_asym", "max_pool", [1, 2, 5, 5], {"kernel": 3, "stride": 2, "padding": [[1, 0], [0, 1]]})
    case("2d_wide_s3", "max_pool", [1, 1, 4, 19], {"kernel": [2, 4], "stride": [1, 3], "padding": [0, 2]})
    case("3d", "max_pool", [1, 2, 4, 4, 4], {"kernel": 2})
    case("3d_mixed", "max_pool", [1, 1, 5, 4, 6],
         {"kernel": [3, 2, 2], "stride": [2, 1, 2], "padding": [1, 0, 1], "dilation": [1, 2, 1],
          "ceil_mode": True})
    # ties and NaN: kinks
    case("ties_2d", "max_pool", [1, 1, 4, 4], {"kernel": 2, "stride": 1},
         data=[1, 3, 3, 0, 2, 3, 1, 1, 5, 5, 1, 1, 5, 5, 1, 2], kink=True)
    case("ties_1d_pad", "max_pool", [1, 1, 6], {"kernel": 3, "stride": 1, "padding": 1},
         data=[2, 2, 2, 0, 4, 4], kink=True)
    nan = float("nan")
    case("nan_2d", "max_pool", [1, 1, 3, 4], {"kernel": 2, "stride": 1},
         data=[1, nan, 3, 4, 5, 6, nan, 8, 9, nan, nan, 1], kink=True)
    case("nan_1d", "max_pool", [1, 1, 6], {"kernel": 3, "stride": 2, "ceil_mode": True},
         data=[nan, 1, nan, 7, 2, nan], kink=True)
    case("nan_3d", "max_pool", [1, 1, 2, 2, 3], {"kernel": 2, "stride": 1},
         data=[1, 2, nan, 4, 5, 6, nan, 8, 9, 10, nan, 12], kink=True)
    case("neg_inf", "max_pool", [1, 1, 4], {"kernel": 2, "padding": 1},
         data=[-np.inf, -np.inf, 1, -np.inf], kink=True)
    # avg_pool: count_include_pad both ways, ceil_mode clipping
    case("1d", "avg_pool", [2, 2, 7], {"kernel": 3})
    case("1d_pad", "avg_pool", [1, 2, 7], {"kernel": 3, "stride": 2, "padding": 1})
    case("1d_pad_nocount", "avg_pool", [1, 2, 7], {"kernel": 3, "stride": 2, "padding": 1,
                                                   "count_include_pad": False})
    case("1d_ceil", "avg_pool", [1, 2, 8], {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True})
    case("1d_ceil_nocount", "avg_pool", [1, 2, 8], {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                                                    "count_include_pad": False})
    case("2d", "avg_pool", [2, 2, 4, 6], {"kernel": 2})
    case("2d_3x3_s2", "avg_pool", [1, 2, 7, 7], {"kernel": 3, "stride": 2, "padding": 1})
    case("2d_3x3_s2_nocount", "avg_pool", [1, 2, 7, 7], {"kernel": 3, "stride": 2, "padding": 1,
                                                         "count_include_pad": False})
    case("2d_ceil", "avg_pool", [1, 2, 5, 6], {"kernel": [2, 3], "stride": 2, "padding": [1, 1], "ceil_mode": True})
    case("2d_ceil_nocount", "avg_pool", [1, 1, 6, 5], {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                                                       "count_include_pad": False})
    case("2d_asym", "avg_pool", [1, 2, 5, 5], {"kernel": 3, "stride": 2, "padding": [[1, 0], [0, 1]]})
    case("2d_asym_nocount", "avg_pool", [1, 2, 5, 6], {"kernel": [3, 2], "stride": [2, 1],
                                                       "padding": [[0, 1], [1, 0]], "count_include_pad": False})
    case("2d_s1", "avg_pool", [1, 1, 5, 9], {"kernel": [3, 4], "stride": 1})
    case("3d", "avg_pool", [1, 2, 4, 4, 4], {"kernel": 2})
    case("3d_mixed", "avg_pool", [1, 1, 5, 4, 6], {"kernel": [3, 2, 2], "stride": [2, 1, 2], "padding": [1, 0, 1],
                                                   "ceil_mode": True, "count_include_pad": False})


if __name__ == "__main__":
    main()
