#!/usr/bin/python3
"""Fixtures of the padding and resampling family (nn.md): pad and resize,
written by nnfix into tests/fixtures/nn/{pad,resize}_*.

    /usr/bin/python3 tests/gen/gen_nn_resample.py

References, float64 with autograd:
- pad: per axis, the source coordinate of every result coordinate (numpy's
  reflect, edge, wrap; -1 for the constant), applied with index_select,
  the constant put in with where; every value is checked against
  numpy.pad (crops taken first, as a slice).
- resize: ONNX Resize's formulas (coordinate transform, nearest rounding,
  linear and cubic taps with edge clamping, the taps nearest the source
  coordinate, lower ones on a tie) as one matrix per spatial axis, applied
  with einsum; checked against ONNX's own reference (interpolate_nd of
  onnx/backend/test/case/node/resize.py, where its conventions are the
  operator's) and against torch.nn.functional.interpolate wherever that
  is the same operation (nearest = asymmetric + floor, linear/bilinear/
  trilinear and bicubic = half_pixel or align_corners with -0.75).
Both ops are linear in x, so every case is away from kinks.
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnfix import N, clean, graph, make_case  # noqa: E402

F64 = torch.float64
MODES = ("constant", "reflect", "edge", "wrap")
COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
CHECKED = {"numpy.pad": 0, "onnx": 0, "torch": 0}


def rand(name, shape, dt):
    rng = np.random.default_rng(sum(map(ord, name)) * 7919 + len(shape))
    if dt in ("i32", "i64"):
        return rng.integers(-50, 50, shape).astype(np.int32 if dt == "i32" else np.int64)
    return rng.uniform(-2, 2, shape).astype(np.float32 if dt == "f32" else np.float64)


# ---- pad ----

def pad_sources(size, lo, hi, mode):
    cut, kept, add = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0), max(lo, 0)
    n = kept + add + max(hi, 0)
    src = []
    for o in range(n):
        c = o - add
        if c < 0 or c >= kept:
            if mode == "constant":
                c = -1
            elif mode == "reflect":
                c = -c if c < 0 else 2 * (kept - 1) - c
            elif mode == "edge":
                c = 0 if c < 0 else kept - 1
            else:
                c = c % kept
        src.append(-1 if c < 0 else cut + c)
    return src


def pad_ref(x, pads, mode, value):
    y = x
    for d, (lo, hi) in enumerate(pads):
        src = torch.tensor(pad_sources(x.shape[d], lo, hi, mode), dtype=torch.int64)
        if y.shape[d] == 0:  # only the constant
            shape = list(y.shape)
            shape[d] = len(src)
            y = torch.full(shape, value, dtype=y.dtype)
            continue
        y = torch.index_select(y, d, src.clamp(min=0))
        if mode == "constant":
            shape = [1] * x.dim()
            shape[d] = len(src)
            mask = (src < 0).reshape(shape)
            y = torch.where(mask, torch.full_like(y, value), y)
    return y


def numpy_pad(x, pads, mode, value):
    sl = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(pads))
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    kw = {"constant_values": value} if mode == "constant" else {}
    if not pads:
        return x.copy()
    return np.pad(x[sl], width, mode=mode, **kw)


def pad_case(variant, shape, pads, mode="constant", value=None, dts=("f32", "f64")):
    for dt in dts:
        name = f"pad_{variant}_{dt if dt in ('f32', 'f64') else dt + '_f64'}"
        x = rand(name, shape, dt)
        attrs = {"pads": [list(p) for p in pads]}
        if mode != "constant":
            attrs["mode"] = mode
        if value is not None:
            attrs["value"] = value
        v = 0 if value is None else value
        g = graph(f"pad {mode} of {list(shape)} by {attrs['pads']}", {"x": dt},
                  [N("y", "pad", "x", **attrs)], ["y"])
        want = numpy_pad(x.astype(np.float64), pads, mode, v)

        def ref(t, pads=pads, mode=mode, v=v, want=want):
            y = pad_ref(t["x"], pads, mode, v)
            assert tuple(y.shape) == want.shape, name
            # numpy 1.24 wraps pads longer than the axis on both sides
            # aperiodically; tl's wrap is periodic (x[c mod n]) for any pad
            kept = [shape[d] - max(-lo, 0) - max(-hi, 0) for d, (lo, hi) in enumerate(pads)]
            if mode != "wrap" or all(max(lo, hi) <= kept[d] for d, (lo, hi) in enumerate(pads)):
                assert np.array_equal(y.detach().numpy(), want), name
                CHECKED["numpy.pad"] += 1
            return {"y": y}
        make_case(name, g, {"x": x}, ref)


def pad_cases():
    for mode in MODES:
        pad_case(f"{mode}_1d", [5], [[2, 3]], mode)
        pad_case(f"{mode}_2d", [3, 4], [[1, 2], [2, 1]], mode)
        pad_case(f"{mode}_3d", [2, 3, 4], [[0, 1], [2, 0], [1, 3]], mode)
        pad_case(f"{mode}_4d", [1, 2, 3, 4], [[0, 0], [1, 1], [2, 1], [0, 3]], mode)
        pad_case(f"{mode}_crop", [4, 5], [[-1, 2], [2, -2]], mode)
        pad_case(f"{mode}_crop_both", [5, 6], [[-2, -1], [1, -3]], mode)
    pad_case("constant_value", [2, 3], [[1, 1], [2, 0]], "constant", 1.5)
    pad_case("constant_crop_only", [3, 4], [[-1, 0], [-1, -2]])
    pad_case("constant_empty_axis", [2, 0], [[1, 0], [1, 2]], "constant", -3.0)
    pad_case("wrap_many", [3], [[5, 7]], "wrap")
    pad_case("wrap_many_2d", [2, 3], [[3, 4], [4, 2]], "wrap")
    pad_case("edge_long", [2, 2], [[4, 3], [0, 5]], "edge")
    pad_case("reflect_full", [4], [[3, 3]], "reflect")
    pad_case("reflect_crop_full", [6, 3], [[-2, 3], [2, 2]], "reflect")
    pad_case("scalar", [], [], "constant")
    pad_case("nopad", [2, 3], [[0, 0], [0, 0]], "reflect")
    # index tensors: int in, int out, no gradient
    pad_case("index_constant", [2, 3], [[1, 0], [2, 1]], "constant", 7, dts=("i32", "i64"))
    pad_case("index_reflect", [3, 4], [[-1, 1], [1, 2]], "reflect", dts=("i32", "i64"))
    pad_case("index_wrap", [4], [[5, -1]], "wrap", dts=("i64",))


# ---- resize ----

def cubic_coeffs(t, A):
    u = 1 - t
    return [((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
            ((A + 2) * t - (A + 3)) * t * t + 1,
            ((A + 2) * u - (A + 3)) * u * u + 1,
            ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A]


def source_coord(coord, o, n_in, n_out, s):
    if coord == "half_pixel":
        return (o + 0.5) / s - 0.5
    if coord == "pytorch_half_pixel":
        return (o + 0.5) / s - 0.5 if n_out > 1 else 0.0
    if coord == "align_corners":
        return 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
    return o / s


def nearest_index(rounding, x):
    f = math.floor(x)
    r = x - f
    up = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5, "floor": False, "ceil": r > 0}[rounding]
    return f + int(up)


def axis_matrix(n_in, n_out, s, mode, coord, rounding, A):
    M = np.zeros((n_out, n_in))
    clamp = lambda i: min(max(i, 0), n_in - 1)  # noqa: E731
    for o in range(n_out):
        x = source_coord(coord, o, n_in, n_out, s)
        if mode == "nearest":
            M[o, clamp(nearest_index(rounding, x))] += 1
            continue
        f = math.floor(x)
        t = x - f
        if t == 0:
            f, t = f - 1, 1.0
        if mode == "linear":
            taps = [(f, 1 - t), (f + 1, t)]
        else:
            taps = list(zip(range(f - 1, f + 3), cubic_coeffs(t, A)))
        for i, w in taps:
            M[o, clamp(i)] += w
    return M


def resize_ref(x, sizes, scales, mode, coord, rounding, A):
    d = x.dim() - 2
    y = x
    letters = "pqr"
    for k in range(d):
        n_in = x.shape[2 + k]
        s = scales[k] if scales else sizes[k] / n_in
        M = torch.tensor(axis_matrix(n_in, sizes[k], s, mode, coord, rounding, A), dtype=F64)
        # contract axis 2 + k
        spec_in = "nc" + "".join("ijk"[j] if j != k else "z" for j in range(d))
        spec_out = "nc" + "".join("ijk"[j] if j != k else letters[k] for j in range(d))
        y = torch.einsum(f"{spec_in},{letters[k]}z->{spec_out}", y, M)
    return y


def onnx_check(x, sizes, scales, mode, coord, rounding, A):
    """ONNX's reference where its conventions are the operator's: it takes
    output_width = scale * input (not floored) for align_corners, and -0.5
    for pytorch_half_pixel at one output."""
    if coord == "align_corners" and scales:
        return None
    if coord == "pytorch_half_pixel" and 1 in sizes:
        return None
    from onnx.backend.test.case.node import resize as R
    if mode == "nearest":
        coeffs = lambda r: R.nearest_coeffs(r, mode=rounding)  # noqa: E731
    elif mode == "linear":
        coeffs = R.linear_coeffs
    else:
        coeffs = lambda r: R.cubic_coeffs(r, A=A)  # noqa: E731
    kw = {"coordinate_transformation_mode": coord}
    if scales:
        return R.interpolate_nd(x, coeffs, scale_factors=np.array([1.0, 1.0] + list(scales)), **kw)
    return R.interpolate_nd(x, coeffs, output_size=list(x.shape[:2]) + list(sizes), **kw)


def torch_check(x, sizes, scales, mode, coord, rounding, A):
    """torch.nn.functional.interpolate where it is the same operation."""
    d = x.dim() - 2
    if mode == "nearest" and coord == "asymmetric" and rounding == "floor":
        kw = {"mode": "nearest"}
    elif mode == "linear" and coord in ("half_pixel", "align_corners") or (
            mode == "linear" and coord == "pytorch_half_pixel" and 1 not in sizes):
        kw = {"mode": ("linear", "bilinear", "trilinear")[d - 1], "align_corners": coord == "align_corners"}
    elif mode == "cubic" and d == 2 and A == -0.75 and (
            coord in ("half_pixel", "align_corners") or (coord == "pytorch_half_pixel" and 1 not in sizes)):
        kw = {"mode": "bicubic", "align_corners": coord == "align_corners"}
    else:
        return None
    if scales and not (kw.get("align_corners")):
        return F.interpolate(x, scale_factor=list(scales), recompute_scale_factor=False, **kw)
    return F.interpolate(x, size=list(sizes), **kw)


def resize_case(variant, shape, size=None, scale=None, mode="nearest", coord=None, rounding=None, A=None,
                dts=("f32", "f64")):
    d = len(shape) - 2
    sizes = size if size else [int(math.floor(shape[2 + k] * scale[k])) for k in range(d)]
    for dt in dts:
        name = f"resize_{variant}_{dt}"
        x = rand(name, shape, dt)
        attrs = {"size": size} if size else {"scale": scale}
        if mode != "nearest":
            attrs["mode"] = mode
        if coord:
            attrs["coordinate"] = coord
        if rounding:
            attrs["nearest"] = rounding
        if A is not None:
            attrs["cubic_coeff"] = A
        args = (sizes, scale, mode, coord or "half_pixel", rounding or "round_prefer_floor",
                -0.75 if A is None else A)
        g = graph(f"resize {mode} of {list(shape)} to {sizes}", {"x": dt}, [N("y", "resize", "x", **attrs)], ["y"])
        x64 = torch.tensor(x.astype(np.float64))
        mine = resize_ref(x64, *args).numpy()
        o = onnx_check(x.astype(np.float64), *args)
        if o is not None:
            assert o.shape == mine.shape and np.allclose(o, mine, rtol=1e-12, atol=1e-12), (name, "onnx")
            CHECKED["onnx"] += 1
        t = torch_check(x64, *args)
        if t is not None:
            assert tuple(t.shape) == mine.shape and np.allclose(t.numpy(), mine, rtol=1e-12, atol=1e-12), \
                (name, "torch", np.abs(t.numpy() - mine).max())
            CHECKED["torch"] += 1
        make_case(name, g, {"x": x}, lambda t, args=args: {"y": resize_ref(t["x"], *args)})


def resize_cases():
    short = {"half_pixel": "hp", "pytorch_half_pixel": "php", "align_corners": "ac", "asymmetric": "asym",
             "round_prefer_floor": "rpf", "round_prefer_ceil": "rpc", "floor": "floor", "ceil": "ceil"}
    # nearest: every rounding with every transform; ties on both axes
    # (4 -> 2 and 3 -> 6 put source coordinates on halves for every transform)
    for c in COORDS:
        for r in ROUNDINGS:
            resize_case(f"nearest_{short[c]}_{short[r]}", [1, 2, 4, 3], size=[2, 6], coord=c, rounding=r)
            resize_case(f"nearest_{short[c]}_{short[r]}_up", [2, 1, 3], size=[5], coord=c, rounding=r,
                        dts=("f64",))
    resize_case("nearest_default", [1, 1, 3, 2], size=[5, 3])
    resize_case("nearest_scale_1d", [1, 2, 5], scale=[1.5])
    resize_case("nearest_scale_down", [1, 1, 5, 7], scale=[0.6, 0.45], coord="asymmetric", rounding="floor")
    resize_case("nearest_3d", [1, 1, 2, 3, 2], size=[3, 2, 4], coord="asymmetric", rounding="floor")
    resize_case("nearest_3d_scale", [1, 2, 2, 2, 3], scale=[2.0, 1.5, 0.7], rounding="round_prefer_ceil")
    resize_case("nearest_ac_one", [1, 1, 4], size=[1], coord="align_corners")
    # linear: every transform, up and down, size and scale, 1-3 axes
    for c in COORDS:
        resize_case(f"linear_{short[c]}_up", [1, 2, 3, 4], size=[5, 7], mode="linear", coord=c)
        resize_case(f"linear_{short[c]}_down", [1, 1, 6, 5], size=[4, 2], mode="linear", coord=c)
        resize_case(f"linear_{short[c]}_1d", [2, 1, 4], size=[7], mode="linear", coord=c)
        resize_case(f"linear_{short[c]}_scale", [1, 1, 4, 5], scale=[1.5, 0.7], mode="linear", coord=c)
        resize_case(f"linear_{short[c]}_3d", [1, 1, 2, 3, 2], size=[3, 2, 4], mode="linear", coord=c)
    resize_case("linear_php_one", [1, 1, 4, 3], size=[1, 5], mode="linear", coord="pytorch_half_pixel")
    resize_case("linear_ac_one", [1, 1, 4, 3], size=[1, 2], mode="linear", coord="align_corners")
    resize_case("linear_scale_1d", [1, 2, 5], scale=[2.5], mode="linear")
    resize_case("linear_scale_3d", [1, 1, 3, 2, 4], scale=[1.5, 2.0, 0.5], mode="linear")
    # cubic
    for c in COORDS:
        resize_case(f"cubic_{short[c]}_up", [1, 2, 3, 4], size=[5, 7], mode="cubic", coord=c)
        resize_case(f"cubic_{short[c]}_down", [1, 1, 7, 6], size=[3, 4], mode="cubic", coord=c)
    resize_case("cubic_hp_1d", [2, 1, 5], size=[8], mode="cubic")
    resize_case("cubic_ac_1d", [1, 2, 4], size=[9], mode="cubic", coord="align_corners")
    resize_case("cubic_hp_scale", [1, 1, 4, 4], scale=[1.75, 0.8], mode="cubic")
    resize_case("cubic_coeff_hp", [1, 1, 4, 5], size=[6, 3], mode="cubic", A=-0.5)
    resize_case("cubic_coeff_ac", [1, 2, 3, 3], size=[5, 4], mode="cubic", coord="align_corners", A=-0.5)
    resize_case("cubic_3d", [1, 1, 2, 3, 3], size=[3, 4, 2], mode="cubic")
    resize_case("cubic_php_one", [1, 1, 5, 4], size=[1, 6], mode="cubic", coord="pytorch_half_pixel")


def main():
    clean(["pad", "resize"])
    pad_cases()
    resize_cases()
    print("cases checked against", ", ".join(f"{k}: {v}" for k, v in CHECKED.items()))


if __name__ == "__main__":
    main()
