#!/usr/bin/python3
"""Fixtures of scatter_add, argmax, argmin and cumsum (nn.md) in
tests/fixtures/nn, with PyTorch 1.13 float64 references (tests/gen/nnfix.py
writes them; argmax and argmin outputs are int64).

scatter_add: 1-3 dimensions, every axis, negative and repeated indices
(torch wants them in [0, len): the reference adds len to the negative
ones).  argmax/argmin: keepdims, select_last_index (ONNX's attribute; the
reference flips the axis, as ONNX's own does), and kink_ cases on ties and
NaN (a NaN is the extreme: its first index, or its last with
select_last_index).  cumsum: exclusive, reverse and both (ONNX CumSum;
the reference builds them from torch.cumsum, flip and a shift).

    /usr/bin/python3 tests/gen/gen_nn_scatter.py
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnfix import N, NP, clean, graph, make_case  # noqa: E402

FLOATS = ("f32", "f64")


def values(rng, shape, dt):
    return rng.uniform(-2, 2, shape).astype(NP[dt])


# ---- scatter_add ----

def scatter_cases(rng):
    specs = [  # (variant, x shape, axis, size of idx on the axis, index dtype)
        ("1d", (5,), 0, 7, "i64"),
        ("2d_axis0", (3, 4), 0, 5, "i64"),
        ("2d_axis1", (3, 4), 1, 6, "i32"),
        ("2d_axis_neg1", (3, 4), -1, 2, "i64"),
        ("3d_axis0", (2, 3, 4), 0, 3, "i64"),
        ("3d_axis1", (2, 3, 4), 1, 4, "i32"),
        ("3d_axis2", (2, 3, 2), 2, 5, "i64"),
        ("3d_few", (2, 3, 4), 1, 1, "i64"),
    ]
    for variant, xs, axis, m, it in specs:
        ax = axis % len(xs)
        length = xs[ax]
        ishape = list(xs)
        ishape[ax] = m
        idx = rng.integers(-length, length, ishape)
        flat = idx.reshape(-1)
        if flat.size > 1:  # a repeated index, for sure
            flat[1] = flat[0]
        idx = idx.astype(NP[it])
        for dt in FLOATS:
            x = values(rng, xs, dt)
            src = values(rng, ishape, dt)

            def ref(t, axis=axis, length=length):
                i = t["idx"] % length  # numpy rules: -1 is the last
                return {"y": t["x"].scatter_add(axis, i, t["src"])}

            g = graph(f"scatter_add along axis {axis}, repeated and negative indices",
                      {"x": dt, "idx": it, "src": dt},
                      [N("y", "scatter_add", "x", "idx", "src", axis=axis)], ["y"])
            make_case(f"scatter_add_{variant}_{dt}", g, {"x": x, "idx": idx, "src": src}, ref)


# ---- argmax, argmin ----

def arg_ref(op, axis, keep, last):
    def ref(t):
        x = t["x"]
        f = torch.argmax if op == "argmax" else torch.argmin
        if not last:
            return {"y": f(x, dim=axis, keepdim=keep)}
        n = x.shape[axis]
        r = f(torch.flip(x, [axis]), dim=axis, keepdim=keep)
        return {"y": n - 1 - r}
    return ref


def arg_case(name, op, x, dt, axis, keep=False, last=False):
    attrs = {"axis": axis}
    if keep:
        attrs["keepdims"] = True
    if last:
        attrs["select_last_index"] = True
    g = graph(f"{op} along axis {axis}", {"x": dt}, [N("y", op, "x", **attrs)], ["y"])
    make_case(name, g, {"x": x.astype(NP[dt])}, arg_ref(op, axis, keep, last))


def arg_cases(rng):
    ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-1, -5, 4, -5]], dtype=np.float64)
    nan = np.array([[1, np.nan, 3, np.nan], [np.nan, 2, np.nan, 0], [5, 1, 1, 5]])
    for op in ("argmax", "argmin"):
        for dt in FLOATS:
            arg_case(f"{op}_1d_{dt}", op, values(rng, (7,), dt), dt, 0)
            arg_case(f"{op}_2d_axis0_{dt}", op, values(rng, (4, 3), dt), dt, 0)
            arg_case(f"{op}_2d_axis1_keepdims_{dt}", op, values(rng, (4, 3), dt), dt, 1, keep=True)
            arg_case(f"{op}_3d_axis_neg2_{dt}", op, values(rng, (2, 4, 3), dt), dt, -2)
            arg_case(f"{op}_3d_axis2_last_{dt}", op, values(rng, (2, 3, 4), dt), dt, 2, last=True)
            arg_case(f"kink_{op}_ties_{dt}", op, ties, dt, 1)
            arg_case(f"kink_{op}_ties_axis0_{dt}", op, ties, dt, 0, keep=True)
            arg_case(f"kink_{op}_ties_last_{dt}", op, ties, dt, 1, last=True)
            arg_case(f"kink_{op}_nan_{dt}", op, nan, dt, 1)
            arg_case(f"kink_{op}_nan_axis0_{dt}", op, nan, dt, 0)
            arg_case(f"kink_{op}_nan_last_{dt}", op, nan, dt, 1, last=True)


# ---- cumsum ----

def cumsum_ref(axis, exclusive, reverse):
    def ref(t):
        x = t["x"]
        if reverse:
            x = torch.flip(x, [axis])
        y = torch.cumsum(x, dim=axis)
        if exclusive:  # shift by one along the axis, a 0 first
            n = x.shape[axis]
            y = torch.cat([torch.zeros_like(torch.narrow(y, axis, 0, 1)), torch.narrow(y, axis, 0, n - 1)], axis)
        if reverse:
            y = torch.flip(y, [axis])
        return {"y": y}
    return ref


def cumsum_cases(rng):
    specs = [  # (variant, shape, axis, exclusive, reverse)
        ("1d", (6,), 0, False, False),
        ("1d_exclusive", (6,), 0, True, False),
        ("1d_reverse", (6,), 0, False, True),
        ("1d_exclusive_reverse", (6,), 0, True, True),
        ("2d_axis0", (4, 3), 0, False, False),
        ("2d_axis1_exclusive", (4, 3), 1, True, False),
        ("2d_axis_neg1_reverse", (4, 3), -1, False, True),
        ("3d_axis1_exclusive_reverse", (2, 4, 3), 1, True, True),
        ("3d_axis0_reverse", (3, 2, 2), 0, False, True),
        ("3d_axis2", (2, 2, 5), 2, False, False),
        ("one", (3, 1), 1, True, False),
    ]
    for variant, shape, axis, excl, rev in specs:
        for dt in FLOATS:
            attrs = {"axis": axis}
            if excl:
                attrs["exclusive"] = True
            if rev:
                attrs["reverse"] = True
            g = graph(f"cumsum along axis {axis}" + (", exclusive" if excl else "") + (", reverse" if rev else ""),
                      {"x": dt}, [N("y", "cumsum", "x", **attrs)], ["y"])
            make_case(f"cumsum_{variant}_{dt}", g, {"x": values(rng, shape, dt)}, cumsum_ref(axis, excl, rev))


def main():
    clean(["scatter_add", "argmax", "argmin", "cumsum"])
    rng = np.random.default_rng(19)
    scatter_cases(rng)
    arg_cases(rng)
    cumsum_cases(rng)


if __name__ == "__main__":
    main()
