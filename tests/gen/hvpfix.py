#!/usr/bin/python3
"""Second-derivative fixtures for tl jvp / tl hvp (tests/fixtures/hvp/).

    /usr/bin/python3 tests/gen/hvpfix.py

References are PyTorch 1.13 at float64: the Hessian-vector product of
<seed, outputs> (double backward: the gradient of <grad, v>) and the
Jacobian-vector product of every output (torch.autograd.functional.jvp),
for random tangents v of every float input.

Two kinds of cases:
  * every f64 case of tests/fixtures/ops and tests/fixtures/flow that sits
    away from kinks (the graph and its inputs and seeds are those of that
    fixture), run by gen_op_fixtures.py's interpreter;
  * the cases below (CASES): compositions that make second derivatives
    non-trivial (broadcasting, reductions, matmul in all its shapes,
    shared bindings, constants, multiple outputs with seeds, moves between
    nonlinear ops, and the layer ops of nn.md), whose graphs are written
    to tests/fixtures/hvp/CASE.json.

Everything goes into one file, tests/fixtures/hvp/cases.npz, keys
DIR/CASE/KIND/NAME: DIR is the folder of the graph (ops, flow or hvp);
KIND is tangent (the tangent of input NAME, in its dtype), hvp (float64),
jvp (of output NAME, float64), and for hvp cases also in and seed.  Output
is byte-identical on re-runs (fixed seeds, fixed zip timestamps).
"""

import json
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_op_fixtures as G  # noqa: E402

torch.set_num_threads(1)
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(FIX, "hvp")
F64 = torch.float64
N = G.N

# ----------------------------------------------------------------------------
# The layer ops, for the interpreter (spec nn.md; torch.nn.functional)
# ----------------------------------------------------------------------------
base_apply = G.apply


def spatial(v, d):
    return [v] * d if isinstance(v, int) else list(v)


def nn_apply(op, args, nd, call_dtype):
    if op not in NN:
        return base_apply(op, args, nd, call_dtype)
    D = args[0].dtype
    ts = [a.t for a in args]
    return G.Val(NN[op](ts, nd), D)


def conv(ts, nd):
    x, w = ts[0], ts[1]
    d = x.dim() - 2
    fn = [F.conv1d, F.conv2d, F.conv3d][d - 1]
    return fn(x, w, ts[2] if len(ts) > 2 else None, stride=spatial(nd.get("stride", 1), d),
              padding=spatial(nd.get("padding", 0), d), dilation=spatial(nd.get("dilation", 1), d),
              groups=nd.get("groups", 1))


def conv_t(ts, nd):
    x, w = ts[0], ts[1]
    d = x.dim() - 2
    fn = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][d - 1]
    return fn(x, w, ts[2] if len(ts) > 2 else None, stride=spatial(nd.get("stride", 1), d),
              padding=spatial(nd.get("padding", 0), d),
              output_padding=spatial(nd.get("output_padding", 0), d), groups=nd.get("groups", 1),
              dilation=spatial(nd.get("dilation", 1), d))


def pool(ts, nd, kind):
    x = ts[0]
    d = x.dim() - 2
    k = spatial(nd["kernel"], d)
    s = spatial(nd.get("stride", nd["kernel"]), d)
    p = spatial(nd.get("padding", 0), d)
    if kind == "max":
        fn = [F.max_pool1d, F.max_pool2d, F.max_pool3d][d - 1]
        return fn(x, k, s, p, ceil_mode=nd.get("ceil_mode", False))
    fn = [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][d - 1]
    return fn(x, k, s, p, ceil_mode=nd.get("ceil_mode", False),
              count_include_pad=nd.get("count_include_pad", True))


def batch_norm(ts, nd):
    x, scale, bias, mean, var = ts
    red = [0] + list(range(2, x.dim()))
    if nd.get("training", False):  # the batch's own statistics (biased variance)
        mean = x.mean(red)
        var = ((x - mean.reshape([1, -1] + [1] * (x.dim() - 2))) ** 2).mean(red)
    per = [1, -1] + [1] * (x.dim() - 2)
    return ((x - mean.reshape(per)) / torch.sqrt(var.reshape(per) + nd.get("epsilon", 1e-5))
            * scale.reshape(per) + bias.reshape(per))


def layer_norm(ts, nd):
    x = ts[0]
    axis = nd.get("axis", -1) % x.dim()
    return F.layer_norm(x, x.shape[axis:], ts[1] if len(ts) > 1 else None,
                        ts[2] if len(ts) > 2 else None, nd.get("epsilon", 1e-5))


def group_norm(ts, nd):
    return F.group_norm(ts[0], nd["groups"], ts[1] if len(ts) > 1 else None,
                        ts[2] if len(ts) > 2 else None, nd.get("epsilon", 1e-5))


def pad(ts, nd):
    x = ts[0]
    flat = []
    for lo, hi in reversed(nd["pads"]):
        flat += [lo, hi]
    mode = nd.get("mode", "constant")
    if mode == "constant":
        return F.pad(x, flat, value=nd.get("value", 0.0))
    # torch pads only the trailing axes in these modes: the cases pad the spatial ones
    return F.pad(x, flat[:2 * (x.dim() - 2)], mode={"reflect": "reflect", "edge": "replicate",
                                                    "wrap": "circular"}[mode])


def resize(ts, nd):
    x = ts[0]
    d = x.dim() - 2
    mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[d] if nd.get("mode") == "linear" else "nearest"
    ac = nd.get("coordinate") == "align_corners"
    return F.interpolate(x, size=nd["size"], mode=mode, align_corners=ac if mode != "nearest" else None)


def cumsum(ts, nd):
    x = ts[0]
    ax = nd["axis"]
    if nd.get("reverse", False):
        x = x.flip(ax)
    y = torch.cumsum(x, ax)
    if nd.get("exclusive", False):
        y = y - x
    return y.flip(ax) if nd.get("reverse", False) else y


def scatter_add(ts, nd):
    return ts[0].scatter_add(nd["axis"], ts[1], ts[2])


NN = {"conv": conv, "conv_transpose": conv_t, "max_pool": lambda t, n: pool(t, n, "max"),
      "avg_pool": lambda t, n: pool(t, n, "avg"), "batch_norm": batch_norm, "layer_norm": layer_norm,
      "group_norm": group_norm, "pad": pad, "resize": resize, "cumsum": cumsum,
      "scatter_add": scatter_add}
G.apply = nn_apply
# gen_op_fixtures' mod takes its gradient from a backward that is not
# itself differentiable; torch.remainder differs only in the sign of a zero
G.py_mod = torch.remainder


def to_np(t):
    """A tensor's values (torch 1.13's efficient zero tensors have no data
    that .numpy() could show)."""
    t = t.detach()
    if t._is_zerotensor():
        return np.zeros(tuple(t.shape))
    return t.numpy().copy()

# ----------------------------------------------------------------------------
# References
# ----------------------------------------------------------------------------


def references(g, arrays, seeds, tangents):
    """(hvp per float input, jvp per output) at float64."""
    decl = G.input_decls(g)
    dts = G.dtypes_of(arrays)
    names = [d["name"] for d in decl]
    floats = [n for n in names if not G.is_index(arrays[n])]

    def leaves(req):
        return {n: (torch.tensor(arrays[n].astype(np.int64)) if G.is_index(arrays[n]) else
                    torch.tensor(arrays[n].astype(np.float64), requires_grad=req)) for n in names}

    def outputs(lv):
        return G.interpret(g, {n: (t, dts[n]) for n, t in lv.items()})

    lv = leaves(True)
    outs = outputs(lv)
    onames = g["outputs"] if isinstance(g["outputs"], list) else [g["outputs"]]
    total = None
    for o, name in zip(outs, onames):
        if o.t.is_floating_point() and o.t.requires_grad:
            term = (o.t * torch.tensor(seeds[name].astype(np.float64))).sum()
            total = term if total is None else total + term
    hvp = {n: np.zeros(arrays[n].shape) for n in floats}
    if total is not None:
        grads = torch.autograd.grad(total, [lv[n] for n in floats], create_graph=True, allow_unused=True)
        dot = None
        for n, gk in zip(floats, grads):
            if gk is not None and gk.requires_grad and n in tangents:
                term = (gk * torch.tensor(tangents[n].astype(np.float64))).sum()
                dot = term if dot is None else dot + term
        if dot is not None:
            hs = torch.autograd.grad(dot, [lv[n] for n in floats], allow_unused=True)
            for n, h in zip(floats, hs):
                if h is not None:
                    hvp[n] = to_np(h)
    # jvp: the outputs as a function of the float inputs
    fixed = leaves(False)

    def fn(*xs):
        lv2 = dict(fixed)
        lv2.update(dict(zip(floats, xs)))
        res = []
        for o in outputs(lv2):
            t = o.t
            res.append(t.to(F64) if t.is_floating_point() else torch.zeros(t.shape, dtype=F64))
        return tuple(res)

    xs = tuple(fixed[n] for n in floats)
    vs = tuple(torch.tensor(tangents.get(n, np.zeros(arrays[n].shape)).astype(np.float64)) for n in floats)
    _, jv = torch.autograd.functional.jvp(fn, xs, vs)
    jvp = {name: to_np(j) for name, j in zip(onames, jv)}
    return hvp, jvp


def tangents_for(name, g, arrays):
    rng = np.random.default_rng(zlib.crc32(("tangent " + name).encode()))
    t = {}
    for d in G.input_decls(g):
        a = arrays[d["name"]]
        if not G.is_index(a):
            t[d["name"]] = rng.uniform(-1, 1, a.shape).astype(a.dtype)
    return t


def npz_arrays(path):
    z = np.load(path)
    return {k: z[k] for k in z.files}


def from_fixture(folder, name, data):
    with open(os.path.join(FIX, folder, name + ".json")) as f:
        g = json.load(f)
    z = npz_arrays(os.path.join(FIX, folder, name + ".npz"))
    arrays = {d["name"]: z["in/" + d["name"]] for d in G.input_decls(g)}
    onames = g["outputs"] if isinstance(g["outputs"], list) else [g["outputs"]]
    seeds = {o: z["seed/" + o] for o in onames}
    tang = tangents_for(name, g, arrays)
    try:
        hvp, jvp = references(g, arrays, seeds, tang)
    except (RuntimeError, G.GraphError) as e:
        print(f"skipped {folder}/{name}: {e}")
        return False
    put(data, folder, name, tang, hvp, jvp)
    return True


def put(data, folder, name, tang, hvp, jvp):
    for n, t in tang.items():
        data[f"{folder}/{name}/tangent/{n}"] = t
    for n, h in hvp.items():
        data[f"{folder}/{name}/hvp/{n}"] = h.astype(np.float64)
    for n, j in jvp.items():
        data[f"{folder}/{name}/jvp/{n}"] = np.asarray(j, dtype=np.float64)


# ----------------------------------------------------------------------------
# The composition cases
# ----------------------------------------------------------------------------
CASES = []


def case(name, inputs, nodes, outputs, consts=None, dtypes=None, doc=None):
    """inputs: {name: array (its dtype is the input's)}."""
    CASES.append((name, inputs, nodes, outputs, consts, dtypes, doc or name))


def U(shape, lo=-1.0, hi=1.0, seed=0):
    rng = np.random.default_rng(seed + 7 * len(shape) + int(np.prod(shape) if shape else 1))
    return rng.uniform(lo, hi, shape)


def composite_cases():
    case("bcast_mul_tanh", {"x": U([3, 1]), "w": U([4], seed=1), "b": U([], seed=2)},
         [N("t", "mul", "x", "w"), N("u", "add", "t", "b"), N("y", "tanh", "u")], ["y"])
    case("bcast_div_pow", {"x": U([2, 3], 0.5, 2), "w": U([3], 0.5, 2, seed=3)},
         [N("t", "div", "x", "w"), N("y", "pow", "t", "w")], ["y"])
    case("shared_binding", {"x": U([4], 0.2, 1.5)},
         [N("a", "mul", "x", "x"), N("b", "sin", "x"), N("c", "mul", "a", "b"), N("y", "sum", "c")], ["y"])
    case("two_inputs_cross", {"x": U([3]), "y": U([3], seed=4)},
         [N("a", "mul", "x", "y"), N("b", "exp", "a"), N("c", "mul", "b", "x"), N("z", "sum", "c")], ["z"])
    case("consts", {"x": U([3])},
         [N("a", "mul", "x", "k"), N("b", "add", "a", "w"), N("c", "square", "b"), N("y", "mul", "c", 0.5)],
         ["y"], consts={"k": {"shape": [3], "data": [1.5, -2.0, 0.25]}, "w": 0.75})
    case("multi_out", {"x": U([2, 3]), "w": U([3], seed=5)},
         [N("a", "mul", "x", "w"), N("y1", "sigmoid", "a"), N("b", "sum", "a", axes=[1]),
          N("y2", "square", "b"), N("y3", "log_softmax", "a", axis=1)], ["y1", "y2", "y3"])
    for red in ("sum", "mean", "max", "min", "prod", "logsumexp"):
        case(f"reduce_{red}", {"x": U([3, 4], 0.3, 1.5, seed=6)},
             [N("a", "sin", "x"), N("b", red, "a", axes=[1]), N("y", "square", "b")], ["y"])
        case(f"reduce_{red}_all", {"x": U([2, 3], 0.3, 1.5, seed=7)},
             [N("a", "exp", "x"), N("b", red, "a", keepdims=True), N("c", "mul", "b", "x"),
              N("y", "sum", "c")], ["y"])
    case("prod_with_zero", {"x": np.array([[0.0, 2.0, 3.0], [1.5, -0.5, 2.0]])},
         [N("b", "prod", "x", axes=[1]), N("y", "square", "b")], ["y"])
    case("softmax_xent", {"x": U([2, 4], seed=8), "t": U([2, 4], 0, 1, seed=9)},
         [N("s", "softmax", "x", axis=1), N("l", "log", "s"), N("m", "mul", "l", "t"), N("y", "sum", "m")],
         ["y"])
    mm = {"mm_2d": ([3, 4], [4, 2]), "mm_vec_mat": ([4], [4, 2]), "mm_mat_vec": ([3, 4], [4]),
          "mm_dot": ([4], [4]), "mm_batched": ([2, 3, 4], [2, 4, 2]),
          "mm_bcast_batch": ([2, 1, 3, 4], [3, 4, 2]), "mm_batch_mat": ([2, 3, 4], [4, 2]),
          "mm_vec_batch": ([4], [2, 4, 3])}
    for name, (sa, sb) in mm.items():
        case(name, {"a": U(sa, seed=10), "b": U(sb, seed=11)},
             [N("p", "matmul", "a", "b"), N("q", "tanh", "p"), N("y", "mul", "q", "p")], ["y"])
    case("mlp", {"x": U([4, 3]), "w1": U([3, 5], seed=12), "b1": U([5], seed=13), "w2": U([5, 2], seed=14)},
         [N("h", "matmul", "x", "w1"), N("hb", "add", "h", "b1"), N("r", "gelu", "hb"),
          N("o", "matmul", "r", "w2"), N("l", "logsumexp", "o", axes=[1]), N("y", "mean", "l")], ["y"])
    case("gelu_tanh", {"x": U([5], -2, 2)}, [N("a", "gelu", "x", approximate="tanh"), N("y", "square", "a")], ["y"])
    case("gelu_exact", {"x": U([5], -2, 2)}, [N("a", "gelu", "x"), N("y", "mul", "a", "x")], ["y"])
    case("moves", {"x": U([2, 3, 4], seed=15)},
         [N("a", "sin", "x"), N("b", "transpose", "a", axes=[2, 0, 1]), N("c", "reshape", "b", shape=[4, 6]),
          N("d", "slice", "c", axis=1, start=1, stop=5, step=2), N("e", "expand_dims", "d", axis=0),
          N("f", "squeeze", "e", axes=[0]), N("h", "broadcast_to", "f", shape=[3, 4, 2]),
          N("y", "square", "h")], ["y"])
    case("concat_stack", {"x": U([2, 3]), "w": U([2, 3], seed=16)},
         [N("a", "concat", "x", "w", axis=0), N("b", "stack", "x", "w", axis=1), N("c", "exp", "a"),
          N("d", "reshape", "b", shape=[4, 3]), N("e", "mul", "c", "d"), N("y", "sum", "e")], ["y"])
    case("take_attr", {"x": U([4, 3], seed=17)},
         [N("a", "take", "x", axis=0, indices=[2, 0, 2]), N("b", "cos", "a"), N("y", "mul", "b", "a")], ["y"])
    case("take_gather_idx", {"x": U([4, 3], seed=18), "i": np.array([3, 1, 1], dtype=np.int64),
                             "j": np.array([[0, 2, 1], [1, 1, 0]], dtype=np.int64)},
         [N("a", "take", "x", "i", axis=0), N("b", "gather", "x", "j", axis=0), N("c", "square", "a"),
          N("d", "exp", "b"), N("s", "sum", "c"), N("t", "sum", "d"), N("y", "mul", "s", "t")], ["y"])
    case("where_select", {"x": U([5], seed=19), "w": U([5], seed=20)},
         [N("c", "gt", "x", 0), N("a", "square", "x"), N("b", "exp", "w"), N("y", "where", "c", "a", "b"),
          N("z", "mul", "y", "w")], ["z"])
    case("maximum_clamp", {"x": U([6], seed=21), "w": U([6], seed=22)},
         [N("m", "maximum", "x", "w"), N("c", "clamp", "x", min=-0.5, max=0.5), N("a", "mul", "m", "c"),
          N("y", "square", "a")], ["y"])
    case("cast_abs", {"x": U([4], 0.1, 1)},
         [N("a", "abs", "x"), N("b", "cast", "a", dtype="f32"), N("c", "cast", "b", dtype="f64"),
          N("y", "mul", "c", "x")], ["y"], doc="abs, then a cast to f32 and back: the f32 rounding is the cast's, checked to 1e-6")
    # ---- control flow ----
    if_ = {"id": "r", "op": "if", "cond": "c",
           "then": {"nodes": [N("t1", "mul", "x", "x"), N("t2", "sin", "t1")], "result": "t2"},
           "else": {"nodes": [N("e1", "exp", "x")], "result": "e1"}}
    case("if_then_sq", {"x": U([3], 0.2, 1)}, [N("s", "sum", "x"), N("c", "gt", "s", 0), if_,
                                              N("y", "mul", "r", "x")], ["y"])
    case("if_else_exp", {"x": U([3], -1, -0.2)}, [N("s", "sum", "x"), N("c", "gt", "s", 0), if_,
                                                 N("y", "mul", "r", "x")], ["y"])
    it = {"id": ["hx"], "op": "iterate", "count": 4, "init": ["x"], "state": ["h"],
          "body": {"nodes": [N("m", "mul", "h", "w"), N("n", "tanh", "m"), N("o", "add", "n", "x")],
                   "result": ["o"]}}
    case("iterate_rnn", {"x": U([3]), "w": U([3], seed=23)}, [it, N("y", "square", "hx")], ["y"])
    mp = {"id": "m", "op": "map", "args": ["x", "w"], "params": ["p", "q"],
          "body": {"nodes": [N("c", "gt", "p", 0),
                             {"id": "r", "op": "if", "cond": "c",
                              "then": {"nodes": [N("a", "mul", "p", "q"), N("b", "sin", "a")], "result": "b"},
                              "else": {"nodes": [N("a2", "exp", "p"), N("b2", "mul", "a2", "q")], "result": "b2"}}],
                   "result": "r"}}
    xm = np.array([0.5, -0.7, 1.2, -0.3, 0.8])
    case("map_branches", {"x": xm, "w": U([5], seed=24)}, [mp, N("y", "mul", "m", "x")], ["y"])
    case("map_branches_bcast", {"x": xm, "w": U([], seed=25)}, [mp, N("y", "square", "m")], ["y"])
    # ---- the layer ops (nn.md), each followed by a nonlinearity ----
    case("nn_conv2d", {"x": U([2, 2, 5, 5]), "w": U([4, 1, 3, 3], seed=26), "b": U([4], seed=27)},
         [N("c", "conv", "x", "w", "b", padding=1, groups=2, stride=[1, 2]), N("y", "tanh", "c")], ["y"])
    case("nn_conv1d_dil", {"x": U([1, 3, 9]), "w": U([2, 3, 2], seed=28)},
         [N("c", "conv", "x", "w", dilation=2, stride=2), N("y", "square", "c")], ["y"])
    case("nn_conv_transpose2d", {"x": U([1, 2, 3, 3]), "w": U([2, 3, 2, 2], seed=29), "b": U([3], seed=30)},
         [N("c", "conv_transpose", "x", "w", "b", stride=2, output_padding=1), N("y", "tanh", "c")], ["y"])
    case("nn_avg_pool", {"x": U([1, 2, 5, 5])},
         [N("a", "exp", "x"), N("p", "avg_pool", "a", kernel=2, stride=2, padding=1), N("y", "square", "p")], ["y"])
    case("nn_max_pool", {"x": U([1, 1, 4, 4], seed=31)},
         [N("a", "sin", "x"), N("p", "max_pool", "a", kernel=2), N("y", "square", "p")], ["y"])
    case("nn_batch_norm_inf", {"x": U([2, 3, 4]), "s": U([3], 0.5, 2), "b": U([3], seed=32),
                               "m": U([3], seed=33), "v": U([3], 0.5, 2, seed=34)},
         [N("n", "batch_norm", "x", "s", "b", "m", "v"), N("y", "tanh", "n")], ["y"])
    case("nn_batch_norm_train", {"x": U([3, 2, 4]), "s": U([2], 0.5, 2), "b": U([2], seed=35),
                                 "m": U([2], seed=36), "v": U([2], 0.5, 2, seed=37)},
         [N("n", "batch_norm", "x", "s", "b", "m", "v", training=True), N("y", "tanh", "n")], ["y"])
    case("nn_layer_norm", {"x": U([2, 3, 4]), "s": U([3, 4], 0.5, 2), "b": U([3, 4], seed=38)},
         [N("n", "layer_norm", "x", "s", "b", axis=1), N("y", "tanh", "n")], ["y"])
    case("nn_layer_norm_plain", {"x": U([3, 5])}, [N("n", "layer_norm", "x"), N("y", "sin", "n")], ["y"])
    case("nn_group_norm", {"x": U([2, 4, 3]), "s": U([4], 0.5, 2), "b": U([4], seed=39)},
         [N("n", "group_norm", "x", "s", "b", groups=2), N("y", "tanh", "n")], ["y"])
    case("nn_pad_constant", {"x": U([2, 3])},
         [N("p", "pad", "x", pads=[[1, 0], [-1, 2]], value=0.5), N("y", "exp", "p")], ["y"])
    case("nn_pad_reflect", {"x": U([1, 1, 4])},
         [N("p", "pad", "x", pads=[[0, 0], [0, 0], [2, 1]], mode="reflect"), N("y", "square", "p")], ["y"])
    case("nn_resize_linear", {"x": U([1, 1, 3, 3])},
         [N("p", "resize", "x", size=[5, 4], mode="linear"), N("y", "square", "p")], ["y"])
    case("nn_cumsum", {"x": U([3, 4])},
         [N("p", "cumsum", "x", axis=1, exclusive=True), N("y", "sin", "p")], ["y"])
    case("nn_scatter_add", {"x": U([3, 2]), "i": np.array([[2, 0], [0, 0]], dtype=np.int64), "s": U([2, 2], seed=40)},
         [N("p", "scatter_add", "x", "i", "s", axis=0), N("y", "square", "p")], ["y"])


def write_case(data, name, inputs, nodes, outputs, consts, dtypes, doc):
    g = G.graph(doc, "f64", list(inputs), nodes, outputs, consts=consts,
                dtypes={n: ("i64" if a.dtype == np.int64 else "f64") for n, a in inputs.items()})
    arrays = {n: a if a.dtype == np.int64 else a.astype(np.float64) for n, a in inputs.items()}
    rng = np.random.default_rng(zlib.crc32(("seed " + name).encode()))
    lv = {n: (torch.tensor(a) if a.dtype == np.int64 else torch.tensor(a)) for n, a in arrays.items()}
    outs = G.interpret(g, {n: (t, G.dtypes_of(arrays)[n]) for n, t in lv.items()})
    seeds = {o: rng.uniform(0.5, 1.5, tuple(v.t.shape)) * rng.choice([-1.0, 1.0], tuple(v.t.shape))
             for o, v in zip(outputs, outs)}
    tang = tangents_for(name, g, arrays)
    hvp, jvp = references(g, arrays, seeds, tang)
    with open(os.path.join(OUT, name + "_f64.json"), "w") as f:
        f.write(G.dump_json(g) + "\n")
    for n, a in arrays.items():
        data[f"hvp/{name}_f64/in/{n}"] = a
    for o, s in seeds.items():
        data[f"hvp/{name}_f64/seed/{o}"] = np.asarray(s, dtype=np.float64)
    put(data, "hvp", name + "_f64", tang, hvp, jvp)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".json") or f.endswith(".npz"):
            os.remove(os.path.join(OUT, f))
    data = {}
    n = 0
    for folder in ("ops", "flow"):
        for f in sorted(os.listdir(os.path.join(FIX, folder))):
            if not f.endswith("_f64.json") or f.startswith("kink_") or "detach" in f:
                continue
            n += from_fixture(folder, f[:-5], data)
    composite_cases()
    for c in CASES:
        write_case(data, *c)
    G.savez(os.path.join(OUT, "cases.npz"), dict(sorted(data.items())))
    print(f"{n} fixture cases, {len(CASES)} composition cases, "
          f"{os.path.getsize(os.path.join(OUT, 'cases.npz'))} bytes")


if __name__ == "__main__":
    sys.exit(main())
