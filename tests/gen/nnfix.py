"""Shared writer of the layer-op fixtures (tests/fixtures/nn), used by the
tests/gen/gen_nn_<family>.py scripts.  The case layout is that of
tests/gen/gen_op_fixtures.py (read its docstring): CASE.json, a tl graph
with typed inputs, and CASE.npz (ZIP_STORED, fixed timestamps) with
  in/NAME    every input in its tested dtype
  seed/OUT   the cotangent of every output, in the output's dtype
  out/OUT    the expected value, float64 (an index output keeps the dtype
             of the first index input, i64 when there is none)
  grad/NAME  the expected vector-Jacobian product, float64 (every float input)
References are PyTorch 1.13 at float64 on the (upcast) inputs: the caller
gives `reference(inputs_f64) -> {output: tensor}` built from torch ops, and
make_case seeds, differentiates with torch.autograd and writes the files.
Names: <op>_<variant>_<f32|f64>; a `kink_` prefix marks a case on a kink
(max-pool ties, NaN), which the C test does not check with finite
differences.  Each script owns the files of its own op prefixes only:
call `clean(prefixes)` first so stale cases of that family go.

    /usr/bin/python3 tests/gen/gen_nn_<family>.py
"""

import io
import json
import os
import re
import zipfile
import zlib

import numpy as np
import torch

torch.set_num_threads(1)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "nn")
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
CASE_RE = re.compile(r"(kink_)?[a-z0-9]+(_[a-z0-9]+)*_(f32|f64)\Z")


def savez(path, arrays):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def clean(prefixes):
    """Removes this family's cases (names starting with a prefix, with or
    without kink_) so that a re-run leaves no stale ones."""
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        base = f[5:] if f.startswith("kink_") else f
        if f.endswith((".json", ".npz")) and any(base.startswith(p + "_") for p in prefixes):
            os.remove(os.path.join(OUT, f))


def N(id_, op, *args, **attrs):
    d = {"id": id_, "op": op, "args": list(args)}
    d.update(attrs)
    return d


def graph(doc, inputs, nodes, outputs, consts=None):
    """inputs: {name: dtype} in order."""
    g = {"version": 1, "doc": doc, "inputs": [{"name": n, "dtype": dt} for n, dt in inputs.items()]}
    if consts:
        g["consts"] = consts
    g["nodes"] = nodes
    g["outputs"] = outputs
    return g


def dump_json(g):
    lines = ["{"]
    items = []
    for k, v in g.items():
        if k == "nodes":
            items.append('  "nodes": [\n' + ",\n".join("    " + json.dumps(n, allow_nan=False) for n in v) + "\n  ]")
        else:
            items.append(f"  {json.dumps(k)}: {json.dumps(v, allow_nan=False)}")
    return "{\n" + ",\n".join(items) + "\n}\n"


def make_case(name, g, arrays, reference, seed_ones=False):
    """arrays: {input: numpy array in its tested dtype}; reference(t) with t
    {input: float64 torch tensor (requires_grad for float inputs) or int64
    tensor} -> {output: float64 tensor (or int64 for index outputs)}."""
    if not CASE_RE.match(name):
        raise AssertionError(f"bad case name {name}")
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    t = {}
    for k, a in arrays.items():
        if np.issubdtype(a.dtype, np.integer):
            t[k] = torch.tensor(a.astype(np.int64))
        else:
            t[k] = torch.tensor(a.astype(np.float64), requires_grad=True)
    outs = reference(t)
    outnames = g["outputs"] if isinstance(g["outputs"], list) else [g["outputs"]]
    seeds, data = {}, {}
    for d in g["inputs"]:
        data["in/" + d["name"]] = arrays[d["name"]]
    total = None
    for o in outnames:
        v = outs[o]
        if v.dtype in (torch.int64, torch.int32):
            # an index output keeps the dtype of the index tensor it came
            # from (the first integer input), else i64 (argmax, argmin)
            idt = next((a.dtype for a in arrays.values() if np.issubdtype(a.dtype, np.integer)), np.int64)
            s = np.zeros(tuple(v.shape), dtype=idt)
            data["out/" + o] = v.detach().numpy().astype(idt)
        else:
            fdt = NP[name.rsplit("_", 1)[1]]
            s = (np.ones(tuple(v.shape)) if seed_ones
                 else rng.uniform(0.5, 1.5, tuple(v.shape)) * rng.choice([-1.0, 1.0], tuple(v.shape))).astype(fdt)
            term = (v * torch.tensor(s.astype(np.float64))).sum()
            total = term if total is None else total + term
            data["out/" + o] = v.detach().numpy().astype(np.float64)
        seeds[o] = s
        data["seed/" + o] = s
    floats = [k for k in arrays if t[k].dtype == torch.float64]
    grads = {}
    if total is not None and total.requires_grad:
        gs = torch.autograd.grad(total, [t[k] for k in floats], allow_unused=True)
        for k, gk in zip(floats, gs):
            grads[k] = np.zeros(arrays[k].shape) if gk is None else gk.detach().numpy()
    else:
        grads = {k: np.zeros(arrays[k].shape) for k in floats}
    for k in floats:
        data["grad/" + k] = grads[k].astype(np.float64)
    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, name)
    with open(base + ".json", "w") as f:
        f.write(dump_json(g))
    savez(base + ".npz", data)
    return name
