#!/usr/bin/python3
"""Fixtures of the convolution family (conv, conv_transpose) for
tests/fixtures/nn: references from torch.nn.functional.conv{1,2,3}d and
conv_transpose{1,2,3}d at float64 (nnfix.py).  Asymmetric padding, which
PyTorch's convolutions do not take, is referenced as F.pad then conv (conv)
and as the unpadded transposed convolution cut by the padding
(conv_transpose).  Tiny shapes; deterministic.

    /usr/bin/python3 tests/gen/gen_nn_conv.py
"""

import zlib

import numpy as np
import torch
import torch.nn.functional as F

from nnfix import N, clean, graph, make_case

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def spread(v, d):
    return list(v) if isinstance(v, (list, tuple)) else [v] * d


def pairs(padding, d):
    """padding as tl reads it -> [(begin, end)] per axis."""
    if isinstance(padding, list) and padding and isinstance(padding[0], list):
        return [tuple(p) for p in padding]
    return [(p, p) for p in spread(padding, d)]


def conv_ref(d, transposed, stride, padding, dilation, groups, output_padding):
    st, dl = spread(stride, d), spread(dilation, d)
    pp = pairs(padding, d)

    def ref(t):
        x, w, b = t["x"], t["w"], t.get("b")
        if not transposed:
            if all(lo == hi for lo, hi in pp):
                y = CONV[d](x, w, b, st, [lo for lo, _ in pp], dl, groups)
            else:
                flat = [v for lo, hi in reversed(pp) for v in (lo, hi)]
                y = CONV[d](F.pad(x, flat), w, b, st, 0, dl, groups)
        else:
            op = spread(output_padding, d)
            y = CONVT[d](x, w, b, st, 0, op, groups, dl)
            for i, (lo, hi) in enumerate(pp):
                y = y.narrow(2 + i, lo, y.shape[2 + i] - lo - hi)
        return {"y": y}

    return ref


def case(name, dt, x, w, bias, stride=1, padding=0, dilation=1, groups=1, output_padding=None, omit=()):
    """x, w: shapes; bias: add a b of the output channels."""
    transposed = name.startswith("conv_transpose")
    d = len(x) - 2
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    np_dt = np.float32 if dt == "f32" else np.float64
    arrays = {"x": rng.standard_normal(x).astype(np_dt), "w": rng.standard_normal(w).astype(np_dt)}
    cout = w[1] * groups if transposed else w[0]
    if bias:
        arrays["b"] = rng.standard_normal([cout]).astype(np_dt)
    attrs = {}
    for key, v, dflt in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1),
                         ("groups", groups, 1), ("output_padding", output_padding, None)):
        if v is not None and v != dflt and key not in omit:
            attrs[key] = v
    op = "conv_transpose" if transposed else "conv"
    args = ["x", "w"] + (["b"] if bias else [])
    g = graph(f"{op}: {name}", {k: dt for k in arrays}, [N("y", op, *args, **attrs)], "y")
    ref = conv_ref(d, transposed, stride, padding, dilation, groups, output_padding or 0)
    make_case(f"{name}_{dt}", g, arrays, ref)


def main():
    clean(["conv"])
    for dt in ("f32", "f64"):
        # conv, 1-d
        case("conv_1d_basic", dt, [2, 3, 7], [4, 3, 3], True)
        case("conv_1d_stride_dilation", dt, [1, 2, 11], [3, 2, 3], False, stride=2, padding=1, dilation=2)
        # 2-d
        case("conv_2d_basic", dt, [2, 3, 5, 6], [4, 3, 3, 3], True, padding=1)
        case("conv_2d_stride", dt, [1, 2, 7, 8], [3, 2, 3, 2], False, stride=[2, 3], padding=[1, 0])
        case("conv_2d_asymmetric", dt, [1, 2, 5, 4], [2, 2, 3, 3], True, padding=[[1, 0], [2, 1]])
        case("conv_2d_groups", dt, [1, 4, 5, 5], [6, 2, 3, 3], True, groups=2, padding=1)
        case("conv_2d_depthwise", dt, [2, 3, 6, 6], [3, 1, 3, 3], True, groups=3, padding=1)
        case("conv_2d_depthwise_mult", dt, [1, 2, 5, 5], [4, 1, 3, 3], False, groups=2, stride=2)
        case("conv_2d_pointwise", dt, [2, 4, 3, 3], [5, 4, 1, 1], True)
        case("conv_2d_pointwise_stride", dt, [1, 3, 5, 4], [2, 3, 1, 1], False, stride=2)
        case("conv_2d_dilation", dt, [1, 2, 7, 7], [2, 2, 3, 3], True, padding=2, dilation=2)
        # 3-d
        case("conv_3d_basic", dt, [1, 2, 4, 4, 3], [2, 2, 2, 3, 2], True, stride=[1, 2, 1], padding=1)
        case("conv_3d_depthwise", dt, [1, 2, 3, 4, 4], [2, 1, 3, 3, 3], False, groups=2, padding=1)
        # its one depth window in the padding before the input: the bias alone
        case("conv_3d_depth_in_padding", dt, [1, 2, 1, 4, 3], [3, 2, 1, 3, 2], True, stride=[3, 1, 1],
             padding=[[1, 0], [1, 1], [0, 1]])
        # conv_transpose
        case("conv_transpose_1d", dt, [2, 3, 4], [3, 2, 3], True, stride=2, padding=1, output_padding=1)
        case("conv_transpose_2d", dt, [1, 2, 3, 4], [2, 3, 3, 3], True, stride=2, padding=1, output_padding=[1, 0])
        case("conv_transpose_2d_groups", dt, [1, 4, 3, 3], [4, 2, 2, 2], False, groups=2)
        # output_padding at or past the stride (allowed below the dilation)
        case("conv_transpose_2d_dilation", dt, [1, 2, 4, 3], [2, 2, 3, 2], True, dilation=2, output_padding=1)
        case("conv_transpose_2d_asymmetric", dt, [1, 2, 3, 3], [2, 2, 3, 3], False, stride=2,
             padding=[[1, 0], [0, 2]])
        case("conv_transpose_2d_depthwise", dt, [1, 3, 4, 4], [3, 1, 3, 3], True, groups=3, stride=2, padding=1,
             output_padding=1)
        case("conv_transpose_2d_pointwise", dt, [2, 3, 3, 2], [3, 2, 1, 1], True)
        # a 1x1 kernel whose output_padding makes the output larger
        case("conv_transpose_2d_pointwise_outpad", dt, [1, 2, 3, 2], [2, 2, 1, 1], True, dilation=2,
             output_padding=[0, 1])
        case("conv_transpose_3d", dt, [1, 2, 2, 3, 2], [2, 2, 2, 2, 3], True, stride=2, padding=[1, 0, 1])


if __name__ == "__main__":
    main()
