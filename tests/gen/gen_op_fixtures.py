#!/usr/bin/python3
"""Reference fixtures for tl: one graph + one .npz per case, computed by PyTorch.

Regenerate (needs torch 1.13 and numpy; the Debian interpreter has both):

    /usr/bin/python3 tests/gen/gen_op_fixtures.py

Writes tests/fixtures/ops/ (every op of spec/ops.md except control flow, and
the elementwise additions and integer arithmetic of spec/nn.md) and
tests/fixtures/flow/ (if / iterate / map of spec/graph.md). Per case CASE:
  CASE.json  a tl graph, version 1, inputs declared with their dtype;
  CASE.npz   np.savez layout (stored, not compressed), keys
             in/NAME    every graph input, in the tested dtype (f32 or f64;
                        int32 or int64 for an index input, i32 / i64)
             seed/OUT   the cotangent of every output, in the OUTPUT's dtype
                        (all zeros, int32 / int64, for an index output)
             out/OUT    expected value, float64 (an index output keeps its
                        integer dtype)
             grad/NAME  expected vector-Jacobian product w.r.t. the seeds,
                        float64 (exact zeros for inputs reaching no output);
                        absent for index inputs, which are never differentiated
References are PyTorch at float64 on the (upcast) inputs; the graph is run
by the small interpreter below (control flow as Python if / loops, `map`
element by element; index tensors as torch.int64). The cross-entropy cases
(xent_*) take their references from torch.nn.functional.cross_entropy,
checked against the interpreter. Names: <op>_<variant>_<f32|f64>, with the
index dtype before the value dtype where a case has index inputs
(take_t_rank2_i32_f64); `kink_` cases sit on a kink or branch boundary,
every other case keeps its float inputs >= 1e-2 away from one, which the
generator checks with central differences. Output is byte-identical on
re-runs (fixed seeds, fixed zip timestamps); stale *.json / *.npz in the
two folders are removed. xent_example_f32 is examples/xent.json verbatim
with the inputs of examples/xent_inputs.npz (run examples/make_inputs.py
first when those change).
"""

import io
import json
import math
import os
import re
import sys
import zipfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)  # reproducible reductions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIRS = {"ops": os.path.join(ROOT, "tests", "fixtures", "ops"),
            "flow": os.path.join(ROOT, "tests", "fixtures", "flow")}
EXAMPLES = os.path.join(ROOT, "examples")
F64 = torch.float64
I64 = torch.int64
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
FLOATS = ("f32", "f64")
INTS = ("i32", "i64")
DTYPES = FLOATS + INTS

# ----------------------------------------------------------------------------
# Op tables (spec/ops.md) shared by the validator and the interpreter
# ----------------------------------------------------------------------------
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmod", "mod"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
UNARY = ["neg", "abs", "sign", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt",
         "reciprocal", "square", "sin", "cos", "tan", "tanh", "sigmoid", "erf",
         "relu", "softplus", "gelu", "silu", "clamp", "detach", "cast",
         "floor", "ceil", "round", "trunc", "sinh", "cosh", "asin", "acos", "atan",
         "asinh", "acosh", "atanh", "isnan", "isinf"]
REDUCE = ["sum", "mean", "max", "min", "prod", "logsumexp"]
SHAPE = ["reshape", "transpose", "broadcast_to", "expand_dims", "squeeze",
         "concat", "stack", "slice", "take"]
# ops that move index tensors unchanged (spec/ops.md "Index tensors")
MOVES = set(SHAPE) | {"gather"}
# the integer arithmetic (nn.md): operands of one integer dtype, exact,
# wrapping on overflow; comparisons give 0/1 in that dtype
INT_ARITH = {"add", "sub", "mul", "div", "mod", "fmod", "neg", "abs", "sign", "maximum",
             "minimum", "sum", "prod"} | set(COMPARE)
# no gradient (a piecewise constant value): torch's zero
NO_GRAD = {"floor", "ceil", "round", "trunc", "isnan", "isinf"}
MAP_OK = set(BINARY + COMPARE + UNARY + ["where", "if", "iterate"]) - {"cast"}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v))


def is_axes(v):
    return is_int(v) or (isinstance(v, list) and all(is_int(a) for a in v))


def is_ints(v):
    return isinstance(v, list) and all(is_int(a) for a in v)


# op -> (arity: int or "n", {attr: (check, required)})
OPS = {}
for _op in BINARY + COMPARE + ["matmul"]:
    OPS[_op] = (2, {})
for _op in UNARY:
    OPS[_op] = (1, {})
OPS["gelu"] = (1, {"approximate": (lambda v: v in ("none", "tanh"), False)})
OPS["clamp"] = (1, {"min": (is_num, False), "max": (is_num, False)})
OPS["cast"] = (1, {"dtype": (lambda v: v in DTYPES, True)})
OPS["where"] = (3, {})
for _op in REDUCE:
    OPS[_op] = (1, {"axes": (is_axes, False), "keepdims": (lambda v: isinstance(v, bool), False)})
for _op in ("softmax", "log_softmax"):
    OPS[_op] = (1, {"axis": (is_int, False)})
OPS["reshape"] = (1, {"shape": (is_ints, True)})
OPS["transpose"] = (1, {"axes": (is_ints, False)})
OPS["broadcast_to"] = (1, {"shape": (is_ints, True)})
OPS["expand_dims"] = (1, {"axis": (is_int, True)})
OPS["squeeze"] = (1, {"axes": (is_axes, False)})
OPS["concat"] = ("n", {"axis": (is_int, True)})
OPS["stack"] = ("n", {"axis": (is_int, True)})
OPS["slice"] = (1, {k: (is_int, True) for k in ("axis", "start", "stop", "step")})
# take: (x) with attribute `indices`, or (x, idx) with an index tensor and no
# `indices` (checked in validate)
OPS["take"] = ((1, 2), {"axis": (is_int, True), "indices": (is_ints, False)})
OPS["gather"] = (2, {"axis": (is_int, True)})
OPS["one_hot"] = (1, {"depth": (lambda v: is_int(v) and v > 0, True)})

# ----------------------------------------------------------------------------
# Validator: the static rules of spec/graph.md
# ----------------------------------------------------------------------------
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SPECIAL = ("nan", "inf", "-inf")


class GraphError(Exception):
    pass


def validate(g):
    """Raise GraphError unless g obeys the static rules of the format."""
    defined = set()

    def fail(msg):
        raise GraphError(msg)

    def keys(obj, allowed, required, where):
        if not isinstance(obj, dict):
            fail(f"{where}: expected an object")
        for k in obj:
            if k not in allowed:
                fail(f"{where}: unknown key {k!r}")
        for k in required:
            if k not in obj:
                fail(f"{where}: missing key {k!r}")

    def define(name, scope, where):
        if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > 255:
            fail(f"{where}: bad name {name!r}")
        if name in defined:
            fail(f"{where}: name {name!r} defined twice")
        defined.add(name)
        scope.add(name)

    def names(v):
        return v if isinstance(v, list) else [v]

    def visible(name, scopes, where):
        if not isinstance(name, str) or not any(name in s for s in scopes):
            fail(f"{where}: unknown or forward reference {name!r}")

    def block(b, scopes, in_map, where):
        keys(b, {"nodes", "result"}, {"nodes", "result"}, where)
        walk(b["nodes"], scopes, in_map)
        res = names(b["result"])
        if not res:
            fail(f"{where}: empty result")
        for r in res:
            visible(r, scopes, where)
        return len(res)

    def walk(nodes, scopes, in_map):
        if not isinstance(nodes, list):
            fail("nodes must be an array")
        scope = scopes[-1]
        for nd in nodes:
            where = f"node {nd.get('id')!r}" if isinstance(nd, dict) else "node"
            if not isinstance(nd, dict) or nd.get("op") not in OPS.keys() | {"if", "iterate", "map"}:
                fail(f"{where}: unknown op")
            op = nd["op"]
            if in_map and op not in MAP_OK:
                fail(f"{where}: op {op} not allowed in a map body")
            ids = names(nd.get("id"))
            if op == "if":
                keys(nd, {"id", "op", "cond", "then", "else"}, {"id", "op", "cond", "then", "else"}, where)
                visible(nd["cond"], scopes, where)
                n1 = block(nd["then"], scopes + [set()], in_map, where + " then")
                n2 = block(nd["else"], scopes + [set()], in_map, where + " else")
                if not (n1 == n2 == len(ids)):
                    fail(f"{where}: id/result counts differ")
            elif op == "iterate":
                keys(nd, {"id", "op", "count", "init", "state", "index", "body"},
                     {"id", "op", "count", "init", "state", "body"}, where)
                if not is_int(nd["count"]) or nd["count"] < 0:
                    fail(f"{where}: bad count")
                init, state = names(nd["init"]), names(nd["state"])
                for n in init:
                    visible(n, scopes, where)
                inner = set()
                for n in state:
                    define(n, inner, where)
                if "index" in nd:
                    define(nd["index"], inner, where)
                nr = block(nd["body"], scopes + [inner], in_map, where + " body")
                if not (len(init) == len(state) == nr == len(ids)):
                    fail(f"{where}: init/state/result/id counts differ")
            elif op == "map":
                keys(nd, {"id", "op", "args", "params", "body"}, {"id", "op", "args", "params", "body"}, where)
                if in_map:
                    fail(f"{where}: map inside a map body")
                for a in nd["args"]:
                    visible(a, scopes, where)
                inner = set()
                for p in nd["params"]:
                    define(p, inner, where)
                if len(nd["params"]) != len(nd["args"]) or not nd["args"]:
                    fail(f"{where}: params/args differ")
                if block(nd["body"], scopes + [inner], True, where + " body") != 1 or len(ids) != 1:
                    fail(f"{where}: map has one result")
            else:
                arity, attrs = OPS[op]
                keys(nd, {"id", "op", "args"} | attrs.keys(),
                     {"id", "op", "args"} | {k for k, (_, r) in attrs.items() if r}, where)
                args = nd["args"]
                arities = arity if isinstance(arity, tuple) else (arity,)
                if not isinstance(args, list) or (arity == "n" and not args) or (
                        arity != "n" and len(args) not in arities):
                    fail(f"{where}: wrong number of args for {op}")
                if op == "take" and (len(args) == 2) == ("indices" in nd):
                    fail(f"{where}: take needs either `indices` or an index argument")
                for a in args:
                    if not is_num(a):
                        visible(a, scopes, where)
                for k, (check, _) in attrs.items():
                    if k in nd and not check(nd[k]):
                        fail(f"{where}: bad attribute {k}={nd[k]!r}")
                if len(ids) != 1 or not isinstance(nd["id"], str):
                    fail(f"{where}: plain ops have one id")
            for n in ids:
                define(n, scope, where)

    keys(g, {"version", "doc", "inputs", "consts", "nodes", "outputs"},
         {"version", "inputs", "nodes", "outputs"}, "graph")
    if g["version"] != 1 or not is_int(g["version"]):
        fail("version must be 1")
    top = set()
    for inp in g["inputs"]:
        if isinstance(inp, dict):
            keys(inp, {"name", "dtype", "shape"}, {"name"}, "input")
            if inp.get("dtype", "f32") not in DTYPES:
                fail("input: bad dtype")
            if "shape" in inp and not all(v is None or is_int(v) or isinstance(v, str)
                                          for v in inp["shape"]):
                fail("input: bad shape")
            define(inp["name"], top, "input")
        else:
            define(inp, top, "input")
    for name, c in g.get("consts", {}).items():
        if isinstance(c, dict):
            if "file" in c:
                keys(c, {"file", "key"}, {"file"}, f"const {name}")
            elif "fill" in c:
                keys(c, {"dtype", "shape", "fill"}, {"shape", "fill"}, f"const {name}")
            else:
                keys(c, {"dtype", "shape", "data"}, {"shape", "data"}, f"const {name}")
            if c.get("dtype", "f32") not in DTYPES:
                fail(f"const {name}: bad dtype")
            if c.get("dtype") in INTS and "file" not in c and not all(
                    is_int(v) for v in np.array(c.get("data", c.get("fill")),
                                                dtype=object).ravel()):
                fail(f"const {name}: index data must be integers")
        elif not (is_num(c) or c in SPECIAL):
            fail(f"const {name}: bad value")
        define(name, top, "const")
    walk(g["nodes"], [top], False)
    outs = g["outputs"]
    if not outs or not all(isinstance(o, str) and o in top for o in names(outs)):
        fail("outputs must name top-scope values")


def validator_selftest():
    """Graphs the validator must reject (guards the checks themselves)."""
    def g(nodes, inputs=("x",), outputs="y", **top):
        d = {"version": 1, "inputs": list(inputs), "nodes": nodes, "outputs": outputs}
        d.update(top)
        return d
    ok_if = {"id": "y", "op": "if", "cond": "x",
             "then": {"nodes": [{"id": "t", "op": "neg", "args": ["x"]}], "result": "t"},
             "else": {"nodes": [{"id": "e", "op": "abs", "args": ["x"]}], "result": "e"}}
    validate(g([ok_if]))
    validate(g([{"id": "e", "op": "expand_dims", "args": ["k"], "axis": -1},
                {"id": "t", "op": "take", "args": ["x", "k"], "axis": 0},
                {"id": "u", "op": "gather", "args": ["t", "e"], "axis": -1},
                {"id": "h", "op": "one_hot", "args": ["k"], "depth": 3},
                {"id": "y", "op": "cast", "args": ["k"], "dtype": "f64"}],
               inputs=("x", {"name": "k", "dtype": "i32"}), outputs=["y", "u", "h"],
               consts={"c": {"dtype": "i64", "shape": [2], "data": [0, -1]}}))
    bad = [
        g([{"id": "y", "op": "neg", "args": ["z"]}]),                        # unknown name
        g([{"id": "y", "op": "add", "args": ["x", "y"]}]),                   # self reference
        g([{"id": "a", "op": "neg", "args": ["b"]},
           {"id": "b", "op": "neg", "args": ["x"]}, {"id": "y", "op": "neg", "args": ["a"]}]),
        g([{"id": "y", "op": "sum", "args": ["x"], "axis": 0}]),             # typo attribute
        g([{"id": "y", "op": "sum", "args": ["x"], "keepdims": 1}]),         # wrong JSON type
        g([{"id": "y", "op": "neg", "args": ["x"]}], inputs=("1x",)),        # bad name
        g([{"id": "y", "op": "neg", "args": ["x", "x"]}]),                   # arity
        g([{"id": "y", "op": "frob", "args": ["x"]}]),                       # unknown op
        g([{"id": "y", "op": "neg", "args": ["x"]}], extra=1),               # unknown top key
        g([{"id": "y", "op": "neg", "args": ["nan"]}]),                      # "nan" is a name
        g([dict(ok_if, **{"else": {"nodes": [{"id": "t", "op": "abs", "args": ["x"]}],
                                     "result": "t"}})]),                     # local name twice
        g([dict(ok_if, **{"else": {"nodes": [], "result": "t"}})]),          # sibling's local
        g([ok_if, {"id": "z", "op": "neg", "args": ["t"]}], outputs="z"),    # block-local leak
        g([{"id": "y", "op": "map", "args": ["x"], "params": ["x"],
            "body": {"nodes": [], "result": "x"}}]),                         # param reuses a name
        g([{"id": "y", "op": "map", "args": ["x"], "params": ["p"],
            "body": {"nodes": [{"id": "m", "op": "matmul", "args": ["p", "p"]}],
                     "result": "m"}}]),                                      # not scalar-elementwise
        g([{"id": ["y"], "op": "iterate", "count": -1, "init": ["x"], "state": ["s"],
            "body": {"nodes": [], "result": ["s"]}}]),                       # negative count
        g([{"id": ["y"], "op": "iterate", "count": 2, "init": ["x"], "state": ["s"],
            "body": {"nodes": [], "result": ["s", "s"]}}]),                  # result count
        g([{"id": "y", "op": "neg", "args": ["x"]}], outputs=[]),            # empty outputs
        g([{"id": "y", "op": "take", "args": ["x"], "axis": 0}]),            # take without indices
        g([{"id": "y", "op": "take", "args": ["x", "x"], "axis": 0,
            "indices": [0]}]),                                               # both index forms
        g([{"id": "y", "op": "gather", "args": ["x", "x"]}]),                # gather without axis
        g([{"id": "y", "op": "one_hot", "args": ["x"], "depth": 0}]),        # depth 0
        g([{"id": "y", "op": "one_hot", "args": ["x"]}]),                    # no depth
        g([{"id": "y", "op": "cast", "args": ["x"], "dtype": "i8"}]),        # unknown dtype
        g([{"id": "y", "op": "neg", "args": ["x"]}],
          inputs=({"name": "x", "dtype": "bool"},)),                         # input dtype
        g([{"id": "y", "op": "take", "args": ["x", "k"], "axis": 0}],
          consts={"k": {"dtype": "i64", "shape": [2], "data": [0, 1.5]}}),   # float index data
    ]
    for i, b in enumerate(bad):
        try:
            validate(b)
        except GraphError:
            continue
        raise AssertionError(f"validator accepted bad graph #{i}: {json.dumps(b)}")


# ----------------------------------------------------------------------------
# Reference interpreter: every value is a float64 torch tensor tagged with the
# dtype tl would give it (an index tensor, i32 or i64, is a torch.int64
# tensor); weak scalars are rounded to the dtype they meet.
# ----------------------------------------------------------------------------
class Weak:
    def __init__(self, v):
        self.v = float(v)


class Val:
    def __init__(self, t, dtype):
        self.t, self.dtype = t, dtype


def round_to(v, dtype):
    return float(np.float32(v)) if dtype == "f32" else float(v)


class Scope:
    def __init__(self, parent=None, barrier=False):
        self.vars, self.parent, self.barrier = {}, parent, barrier

    def get(self, name):
        s, crossed = self, False
        while s is not None:
            if name in s.vars:
                v = s.vars[name]
                if crossed and isinstance(v, Val) and v.t.dim() != 0:
                    raise GraphError(f"map body captures non-scalar {name!r}")
                return v
            crossed = crossed or s.barrier
            s = s.parent
        raise GraphError(f"unknown name {name!r}")


def as_tensor(v, dtype):
    if isinstance(v, Weak):
        return torch.tensor(round_to(v.v, dtype), dtype=F64)
    return v.t


def norm_axes(axes, ndim):
    if axes is None:
        return list(range(ndim))
    axes = [axes] if is_int(axes) else axes
    return sorted(a % ndim for a in axes)


def reduce(op, x, nd):
    axes = norm_axes(nd.get("axes"), x.dim())
    keep = nd.get("keepdims", False)
    if op == "prod":  # torch.prod takes one dim: move the axes last and flatten
        rest = [a for a in range(x.dim()) if a not in axes]
        y = x.permute(rest + axes).reshape([x.shape[a] for a in rest] + [-1]).prod(-1)
        if keep:
            y = y.reshape([1 if a in axes else x.shape[a] for a in range(x.dim())])
        return y
    fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax,
          "min": torch.amin, "logsumexp": torch.logsumexp}[op]
    if not axes:
        return x.clone()
    return fn(x, dim=tuple(axes), keepdim=keep)


def index_arg(v, nd):
    """The torch.int64 tensor of an index argument (never a float, never weak)."""
    if not isinstance(v, Val) or v.dtype not in INTS:
        raise GraphError(f"node {nd['id']}: indices must be an i32 or i64 tensor")
    return v.t


def data_arg(v, nd):
    if not isinstance(v, Val):
        raise GraphError(f"node {nd['id']}: a weak scalar cannot be indexed")
    return v


def norm_axis(axis, ndim, nd):
    if not -ndim <= axis < ndim:
        raise GraphError(f"node {nd['id']}: axis {axis} out of range for rank {ndim}")
    return axis % ndim


def check_range(k, lo, hi, nd):
    if k.numel() and (int(k.min()) < lo or int(k.max()) >= hi):
        raise GraphError(f"node {nd['id']}: an index is outside [{lo}, {hi})")


def apply_index(op, args, nd, call_dtype):
    """take with an index tensor, gather, one_hot: torch at float64 (gradients
    by index_select / gather backward, i.e. scatter-add), values cross-checked
    against numpy.take / numpy.take_along_axis / an identity matrix."""
    if op == "one_hot":
        k, d = index_arg(args[0], nd), nd["depth"]
        check_range(k, 0, d, nd)
        y = F.one_hot(k.reshape(-1), d).to(F64).reshape(tuple(k.shape) + (d,))
        if not np.array_equal(y.numpy(), np.eye(d)[k.numpy()]):
            raise AssertionError(f"node {nd['id']}: one_hot differs from numpy")
        return Val(y, call_dtype)
    x, k = data_arg(args[0], nd), index_arg(args[1], nd)
    ax = norm_axis(nd["axis"], x.t.dim(), nd)
    n = x.t.shape[ax]
    check_range(k, -n, n, nd)
    kn = torch.remainder(k, n)  # negative indices count from the end
    xn = x.t.detach().numpy()
    if op == "take":
        shape = tuple(x.t.shape[:ax]) + tuple(k.shape) + tuple(x.t.shape[ax + 1:])
        y = torch.index_select(x.t, ax, kn.reshape(-1)).reshape(shape)
        want = np.take(xn, k.numpy(), axis=ax)
    else:
        if k.dim() != x.t.dim() or any(k.shape[a] != x.t.shape[a]
                                       for a in range(k.dim()) if a != ax):
            raise GraphError(f"node {nd['id']}: gather indices {list(k.shape)} do not "
                             f"fit {list(x.t.shape)} on axis {ax}")
        y = torch.gather(x.t, ax, kn)
        want = np.take_along_axis(xn, k.numpy(), axis=ax)
    if not np.array_equal(y.detach().numpy(), want):
        raise AssertionError(f"node {nd['id']}: {op} differs from numpy")
    return Val(y, x.dtype)


class PyMod(torch.autograd.Function):
    """Python's % (the divisor's sign, a zero result too, as numpy.remainder)
    with torch.remainder's gradient: torch's value differs only in the sign
    of a zero result (it keeps the dividend's)."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        y = torch.remainder(a, b)
        z = torch.where(y == 0, torch.copysign(torch.zeros_like(y), b.expand_as(y)), y)
        with np.errstate(all="ignore"):
            want = np.remainder(a.numpy(), b.numpy())
        if not (np.array_equal(z.numpy(), want, equal_nan=True) and
                np.array_equal(np.signbit(z.numpy()), np.signbit(want))):
            raise AssertionError(f"mod: torch.remainder {z} differs from numpy {want}")
        return z

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with torch.enable_grad():
            a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
            return torch.autograd.grad(torch.remainder(a2, b2), [a2, b2], g)


def py_mod(a, b):
    return PyMod.apply(a, b)


def apply_cast(x, nd):
    """cast between f32, f64, i32, i64; float -> int truncates toward zero; no
    gradient through a cast from or to an integer dtype."""
    x, to = data_arg(x, nd), nd["dtype"]
    D, t = x.dtype, x.t
    if to in INTS:
        v = t if D in INTS else torch.trunc(t.detach())
        lim = 2.0 ** 31 if to == "i32" else 2.0 ** 63
        if v.numel() and not (-lim <= float(v.min()) and float(v.max()) < lim):
            raise GraphError(f"node {nd['id']}: value out of range for {to}")
        return Val(v.to(I64).detach(), to)
    if D in INTS:
        f = t.to(F64)
        return Val(f.float().to(F64) if to == "f32" else f, to)
    return Val(t.float().to(F64) if to == "f32" and D == "f64" else t, to)


def wrap_int(v, dtype):
    """A Python integer wrapped into dtype (two's complement)."""
    bits = 32 if dtype == "i32" else 64
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def int_binary(op, a, b, nd):
    """The integer arithmetic on Python integers, exact (before wrapping)."""
    if op in ("div", "mod", "fmod") and b == 0:
        raise GraphError(f"node {nd['id']}: integer division by zero")
    if op == "div":  # toward zero, as C
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    if op == "fmod":  # the dividend's sign, as C
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return {"add": a + b, "sub": a - b, "mul": a * b, "mod": a % b if b else 0,
            "maximum": max(a, b), "minimum": min(a, b), "eq": int(a == b),
            "ne": int(a != b), "lt": int(a < b), "le": int(a <= b), "gt": int(a > b),
            "ge": int(a >= b)}[op]


def apply_int(op, args, nd, D):
    """The integer arithmetic of nn.md in Python integers (exact), each result
    wrapped to D; numpy's int64 arithmetic (C's, for div / fmod, and Python's
    % for mod) cross-checks what does not overflow.  Weak numbers must be
    integers of D."""
    arrs = []
    for a in args:
        if isinstance(a, Weak):
            if a.v != math.floor(a.v) or wrap_int(int(a.v), D) != int(a.v):
                raise GraphError(f"node {nd['id']}: {a.v} is not an integer of {D}")
            arrs.append(np.array(int(a.v), dtype=object))
        else:
            arrs.append(np.array(a.t.numpy().astype(np.int64), dtype=object))
    if op in ("sum", "prod"):
        x = arrs[0]
        axes = norm_axes(nd.get("axes"), x.ndim)
        keep = nd.get("keepdims", False)
        if not axes:
            y = x.copy()
        else:
            y = (np.sum if op == "sum" else np.prod)(x, axis=tuple(axes), keepdims=keep)
        y = np.vectorize(lambda v: wrap_int(int(v), D), otypes=[object])(np.array(y, dtype=object))
    elif len(arrs) == 1:
        fn = {"neg": lambda v: -v, "abs": abs, "sign": lambda v: (v > 0) - (v < 0)}[op]
        y = np.vectorize(lambda v: wrap_int(fn(int(v)), D), otypes=[object])(arrs[0])
    else:
        a, b = np.broadcast_arrays(arrs[0], arrs[1])
        y = np.empty(a.shape, dtype=object)
        for i in np.ndindex(a.shape):
            y[i] = wrap_int(int_binary(op, int(a[i]), int(b[i]), nd), D)
        if op in ("fmod", "mod"):  # numpy's (C's %, Python's %), where nothing wraps
            an, bn = a.astype(np.int64), b.astype(np.int64)
            ok = (bn != 0) & (bn != -1)
            want = (np.fmod if op == "fmod" else np.remainder)(an[ok], bn[ok])
            if not np.array_equal(np.array(list(y[ok]), dtype=np.int64), want):
                raise AssertionError(f"node {nd['id']}: integer {op} differs from numpy")
    y = np.array(y, dtype=object)
    return Val(torch.tensor(np.array(y.astype(np.int64).reshape(y.shape)), dtype=I64), D)


def apply(op, args, nd, call_dtype):
    if op in ("gather", "one_hot") or (op == "take" and len(args) == 2):
        return apply_index(op, args, nd, call_dtype)
    if op == "cast":
        return apply_cast(args[0], nd)
    vals = [a for a in args if isinstance(a, Val)]
    D = vals[0].dtype if vals else call_dtype
    if any(v.dtype != D for v in vals):
        raise GraphError(f"node {nd['id']}: operand dtypes differ")
    if D in INTS and op in INT_ARITH:
        return apply_int(op, args, nd, D)
    if D in INTS and (op not in MOVES or len(vals) != len(args)):
        raise GraphError(f"node {nd['id']}: {op} of an index tensor (cast it first)")
    ts = [as_tensor(a, D) for a in args]
    x = ts[0]
    if op in BINARY:
        fn = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
              "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
              "fmod": torch.fmod, "mod": py_mod}[op]
        return Val(fn(ts[0], ts[1]), D)
    if op in NO_GRAD:
        fn = {"floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
              "trunc": torch.trunc, "isnan": torch.isnan, "isinf": torch.isinf}[op]
        y = fn(x.detach()).to(F64)
        if op == "round" and not np.array_equal(y.numpy(), np.round(x.detach().numpy()),
                                                 equal_nan=True):
            raise AssertionError(f"node {nd['id']}: round is not numpy's half to even")
        return Val(y, D)
    if op in COMPARE:
        fn = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
              "gt": torch.gt, "ge": torch.ge}[op]
        return Val(fn(ts[0].detach(), ts[1].detach()).to(F64), D)
    if op == "clamp":
        lo = round_to(nd["min"], D) if "min" in nd else None
        hi = round_to(nd["max"], D) if "max" in nd else None
        return Val(torch.clamp(x, min=lo, max=hi), D)
    simple = {
        "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp,
        "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
        "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
        "square": torch.square, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
        "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
        "relu": torch.relu, "silu": F.silu, "detach": torch.detach,
        "sinh": torch.sinh, "cosh": torch.cosh, "asin": torch.asin, "acos": torch.acos,
        "atan": torch.atan, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
        # exact log(1+e^x): torch's default threshold=20 switches to x
        "softplus": lambda t: F.softplus(t, beta=1, threshold=float("inf")),
        "gelu": lambda t: F.gelu(t, approximate=nd.get("approximate", "none")),
        "softmax": lambda t: torch.softmax(t, nd.get("axis", -1)),
        "log_softmax": lambda t: torch.log_softmax(t, nd.get("axis", -1)),
        "reshape": lambda t: t.reshape(nd["shape"]),
        "transpose": lambda t: t.permute(nd.get("axes", list(range(t.dim()))[::-1])),
        "broadcast_to": lambda t: torch.broadcast_to(t, nd["shape"]),
        "expand_dims": lambda t: t.unsqueeze(nd["axis"]),
        "slice": lambda t: t[(slice(None),) * (nd["axis"] % t.dim())
                             + (slice(nd["start"], nd["stop"], nd["step"]),)],
        "take": lambda t: torch.index_select(
            t, nd["axis"], torch.tensor([i % t.shape[nd["axis"]] for i in nd["indices"]])),
    }
    if op in simple:
        return Val(simple[op](x), D)
    if op in REDUCE:
        return Val(reduce(op, x, nd), D)
    if op == "squeeze":
        axes = norm_axes(nd.get("axes"), x.dim()) if "axes" in nd else \
            [a for a in range(x.dim()) if x.shape[a] == 1]
        if any(x.shape[a] != 1 for a in axes):
            raise GraphError("squeeze of a non-1 axis")
        return Val(x.reshape([n for a, n in enumerate(x.shape) if a not in axes]), D)
    if op == "where":
        return Val(torch.where(ts[0].detach() != 0, ts[1], ts[2]), D)
    if op == "matmul":
        return Val(torch.matmul(ts[0], ts[1]), D)
    if op == "concat":
        return Val(torch.cat(ts, nd["axis"]), D)
    if op == "stack":
        return Val(torch.stack(ts, nd["axis"]), D)
    raise GraphError(f"interpreter lacks op {op}")


def run_nodes(nodes, scope, call_dtype):
    def ids_of(nd):
        return nd["id"] if isinstance(nd["id"], list) else [nd["id"]]

    def results(block, s):
        r = block["result"]
        return [s.get(n) for n in (r if isinstance(r, list) else [r])]

    for nd in nodes:
        op = nd["op"]
        if op == "if":
            c = scope.get(nd["cond"])
            if not isinstance(c, Val) or c.t.dim() != 0 or c.dtype in INTS:
                raise GraphError("if: cond must be a 0-d floating value")
            branch = nd["then"] if float(c.t) != 0.0 else nd["else"]  # NaN -> then
            s = Scope(scope)
            run_nodes(branch["nodes"], s, call_dtype)
            out = results(branch, s)
        elif op == "iterate":
            out = [scope.get(n) for n in nd["init"]]
            for i in range(nd["count"]):
                s = Scope(scope)
                for n, v in zip(nd["state"], out):
                    s.vars[n] = v
                if "index" in nd:
                    s.vars[nd["index"]] = Weak(i)
                run_nodes(nd["body"]["nodes"], s, call_dtype)
                new = results(nd["body"], s)
                for a, b in zip(out, new):
                    if a.dtype != b.dtype or a.t.shape != b.t.shape:
                        raise GraphError("iterate: result changes shape or dtype")
                out = new
        elif op == "map":
            args = [scope.get(n) for n in nd["args"]]
            D = args[0].dtype
            if any(a.dtype in INTS for a in args):
                raise GraphError("map: arguments must be floating point")
            shape = torch.broadcast_shapes(*[a.t.shape for a in args])
            bts = [torch.broadcast_to(a.t, shape) for a in args]
            elems = []
            for idx in np.ndindex(*shape):
                s = Scope(scope, barrier=True)
                for p, bt in zip(nd["params"], bts):
                    s.vars[p] = Val(bt[idx], D)
                run_nodes(nd["body"]["nodes"], s, call_dtype)
                r = results(nd["body"], s)[0]
                elems.append(as_tensor(r, D).reshape(()))
            out = [Val(torch.stack(elems).reshape(shape), D)]
        else:
            args = [Weak(a) if is_num(a) else scope.get(a) for a in nd["args"]]
            out = [apply(op, args, nd, call_dtype)]
        for n, v in zip(ids_of(nd), out):
            scope.vars[n] = v


def special(v):
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, v)


def interpret(g, inputs):
    """inputs: name -> (float64 tensor, dtype). Returns the output Vals."""
    decl = [i if isinstance(i, dict) else {"name": i} for i in g["inputs"]]
    # the element type of the call: the dtype of the first floating input
    call_dtype = next((inputs[d["name"]][1] for d in decl
                       if inputs[d["name"]][1] in FLOATS), "f64")
    top = Scope()
    for d in decl:
        t, dt = inputs[d["name"]]
        if d.get("dtype", dt) != dt:
            raise GraphError(f"input {d['name']}: dtype {dt} breaks the declaration")
        top.vars[d["name"]] = Val(t, dt)
    for name, c in g.get("consts", {}).items():
        if isinstance(c, dict):
            dt = c.get("dtype", call_dtype)
            if "fill" in c:
                arr = np.full(c["shape"], c["fill"], dtype=NP[dt])
            else:
                flat = np.array([special(v) for v in np.array(c["data"], dtype=object).ravel()])
                arr = flat.astype(NP[dt]).reshape(c["shape"])
            if dt in INTS:
                top.vars[name] = Val(torch.tensor(arr.astype(np.int64)), dt)
            else:
                top.vars[name] = Val(torch.tensor(arr.astype(np.float64)), dt)
        else:
            top.vars[name] = Weak(special(c))
    run_nodes(g["nodes"], top, call_dtype)
    outs = g["outputs"] if isinstance(g["outputs"], list) else [g["outputs"]]
    return [top.get(o) for o in outs]


# ----------------------------------------------------------------------------
# Writing: JSON one node per line, npz like np.savez but with fixed timestamps
# ----------------------------------------------------------------------------
def dump_json(v, ind=0):
    pad, pad2 = " " * ind, " " * (ind + 2)
    expand_dict = isinstance(v, dict) and any(k in v for k in ("nodes", "body", "then", "version"))
    expand_list = isinstance(v, list) and any(isinstance(x, dict) and "op" in x for x in v)
    if expand_dict:
        items = [f"{pad2}{json.dumps(k)}: {dump_json(x, ind + 2)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if expand_list:
        return "[\n" + ",\n".join(pad2 + dump_json(x, ind + 2) for x in v) + "\n" + pad + "]"
    return json.dumps(v, allow_nan=False)


def savez(path, arrays, deflate=False):
    """np.savez (ZIP_STORED, zip64 entries; with deflate, np.savez_compressed)
    with a fixed entry timestamp."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", method, allowZip64=True, compresslevel=9 if deflate else None) as zf:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


# ----------------------------------------------------------------------------
# Case evaluation and checks
# ----------------------------------------------------------------------------
CASE_RE = re.compile(r"(kink_)?[a-z0-9]+(_[a-z0-9]+)*_(f32|f64)\Z")


def input_decls(g):
    return [i if isinstance(i, dict) else {"name": i} for i in g["inputs"]]


def is_index(a):
    return np.asarray(a).dtype.kind in "iu"


def dtypes_of(arrays):
    return {n: ({np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}[a.dtype]
                if is_index(a) else "f32" if a.dtype == np.float32 else "f64")
            for n, a in arrays.items()}


def evaluate(g, arrays, seeds=None, grads=True, dts=None):
    """Run g on numpy inputs: the output Vals, or (outs, grads) with grads=True.
    dts overrides the dtypes read from the arrays (finite differences)."""
    decl = input_decls(g)
    leaves = {d["name"]: (torch.tensor(arrays[d["name"]].astype(np.int64))
                          if is_index(arrays[d["name"]]) else
                          torch.tensor(arrays[d["name"]].astype(np.float64), requires_grad=grads))
              for d in decl}
    dts = dts or dtypes_of(arrays)
    outs = interpret(g, {n: (t, dts[n]) for n, t in leaves.items()})
    if not grads:
        return outs
    floats = [n for n, t in leaves.items() if t.is_floating_point()]  # index inputs: no grad
    pairs = [(o.t, torch.tensor(s.astype(np.float64))) for o, s in zip(outs, seeds)
             if o.t.requires_grad]
    gs = [None] * len(floats)
    if pairs and floats:
        gs = torch.autograd.grad([p[0] for p in pairs], [leaves[n] for n in floats],
                                 grad_outputs=[p[1] for p in pairs], allow_unused=True)
    grad = {n: (np.zeros(arrays[n].shape) if q is None else q.detach().numpy().copy())
            for n, q in zip(floats, gs)}
    return outs, grad


def graph_ops(nodes):
    """Every op used in nodes, blocks included."""
    ops = set()
    for nd in nodes:
        ops.add(nd["op"])
        for k in ("then", "else", "body"):
            if k in nd:
                ops |= graph_ops(nd[k]["nodes"])
    return ops


def rounding_cast(nodes, arrays):
    """Whether a cast to f32 may round a float value (one of an index input
    is exact, and casts to f64 or to an index dtype do not round)."""
    for nd in nodes:
        if nd["op"] == "cast" and nd["dtype"] == "f32" and not (
                nd["args"][0] in arrays and is_index(arrays[nd["args"][0]])):
            return True
        if any(k in nd and rounding_cast(nd[k]["nodes"], arrays)
               for k in ("then", "else", "body")):
            return True
    return False


def fd_check(name, g, arrays, seeds, grad):
    """Central differences at two steps; a kink within ~1e-2 shows at h=9.5e-3.
    detach stops the gradient but not the value: differences do not apply.
    A cast to f32 rounds the value: only the coarse step is meaningful."""
    ops = graph_ops(g["nodes"])
    if "detach" in ops:
        return
    fine = not rounding_cast(g["nodes"], arrays)

    dts = dtypes_of(arrays)

    def f(arrs):
        with torch.no_grad():
            outs = evaluate(g, arrs, grads=False, dts=dts)
        return sum(float((o.t * torch.tensor(s.astype(np.float64))).sum())
                   for o, s in zip(outs, seeds))

    scale = max([1.0] + [float(np.abs(v).max(initial=0)) for v in grad.values()])
    for h, tol in ((1e-5, 2e-6), (9.5e-3, 3e-3)):
        if h < 1e-3 and not fine:
            continue
        for n, x in arrays.items():
            if is_index(x):
                continue
            x64 = x.astype(np.float64)
            for k in range(x.size):
                fd = []
                for sgn in (1, -1):
                    p = dict(arrays)
                    xp = x64.copy().reshape(-1)
                    xp[k] += sgn * h
                    p[n] = xp.reshape(x.shape)
                    fd.append(f(p))
                est = (fd[0] - fd[1]) / (2 * h)
                ad = float(grad[n].reshape(-1)[k])
                if not abs(est - ad) <= tol * scale:
                    raise AssertionError(f"{name}: FD mismatch d/d{n}[{k}] h={h}: "
                                         f"fd={est!r} autograd={ad!r}")


def out_dtype(v):
    return NP[v.dtype]


def check_reference(name, vals, grad, ref_vals, ref_grad):
    """The interpreter and an independent PyTorch reference agree."""
    if vals.keys() != ref_vals.keys() or grad.keys() != ref_grad.keys():
        raise AssertionError(f"{name}: reference has other outputs or inputs")
    for what, mine, ref in (("out", vals, ref_vals), ("grad", grad, ref_grad)):
        for k in mine:
            a, b = np.asarray(mine[k], np.float64), np.asarray(ref[k], np.float64)
            if a.shape != b.shape or not np.allclose(a, b, rtol=1e-12, atol=1e-14):
                raise AssertionError(f"{name}: {what}/{k}: interpreter {a} != reference {b}")


def make_case(folder, name, g, arrays, seed_ones=False, expect=None, boundary=False,
              reference=None, graph_text=None):
    """reference(arrays, seeds) -> (values, grads): an independent PyTorch
    reference that replaces the interpreter's after both agree; graph_text:
    the JSON file to write verbatim (it must parse to g)."""
    if not CASE_RE.match(name):
        raise AssertionError(f"bad case name {name}")
    validate(g)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    outs = evaluate(g, arrays, grads=False)
    seeds = []
    for o in outs:
        shape = tuple(o.t.shape)
        if o.dtype in INTS:  # not seeded: index outputs have no cotangent
            s = np.zeros(shape)
        elif seed_ones:
            s = np.ones(shape)
        else:  # magnitudes in [0.5, 1.5], random signs
            s = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
        seeds.append(s.astype(out_dtype(o)))
    outs, grad = evaluate(g, arrays, seeds)
    outnames = g["outputs"] if isinstance(g["outputs"], list) else [g["outputs"]]
    kink = name.startswith("kink_") or boundary
    vals = {o: v.t.detach().numpy().astype(NP[v.dtype] if v.dtype in INTS else np.float64)
            for o, v in zip(outnames, outs)}
    if reference:
        ref_vals, ref_grad = reference(arrays, seeds)
        check_reference(name, vals, grad, ref_vals, ref_grad)
        vals, grad = ref_vals, ref_grad
    if expect:
        for key, want in expect.items():
            got = vals[key[4:]] if key.startswith("out/") else grad[key[5:]]
            if not np.array_equal(got, np.array(want, dtype=np.float64)):
                raise AssertionError(f"{name}: {key} = {got}, expected {want}")
    if not kink:
        for k, v in list(vals.items()) + list(grad.items()):
            if not np.all(np.isfinite(v)):
                raise AssertionError(f"{name}: non-finite {k} in a non-kink case")
        fd_check(name, g, arrays, seeds, grad)
    data = {}
    for d in input_decls(g):
        data["in/" + d["name"]] = arrays[d["name"]]
    for o, s in zip(outnames, seeds):
        data["seed/" + o] = s
    for o in outnames:
        data["out/" + o] = vals[o]
    for n in grad:
        data["grad/" + n] = grad[n].astype(np.float64)
    base = os.path.join(OUT_DIRS[folder], name)
    if graph_text is not None and json.loads(graph_text) != g:
        raise AssertionError(f"{name}: graph_text is not the graph")
    with open(base + ".json", "w") as f:
        f.write(dump_json(g) + "\n" if graph_text is None else graph_text)
    savez(base + ".npz", data)
    return name


# ----------------------------------------------------------------------------
# Helpers to build graphs and data
# ----------------------------------------------------------------------------
def N(id_, op, *args, **attrs):
    d = {"id": id_, "op": op, "args": list(args)}
    d.update(attrs)
    return d


def graph(doc, dt, inputs, nodes, outputs, consts=None, dtypes=None):
    g = {"version": 1, "doc": doc,
         "inputs": [{"name": n, "dtype": (dtypes or {}).get(n, dt)} for n in inputs]}
    if consts:
        g["consts"] = consts
    g["nodes"] = nodes
    g["outputs"] = outputs
    return g


def uni(rng, shape, lo, hi):
    return rng.uniform(lo, hi, shape)


def away(rng, shape, lo, hi, kinks=(0.0,), margin=0.05):
    """Uniform values at least `margin` from every kink."""
    x = rng.uniform(lo, hi, shape)
    for _ in range(1000):
        bad = np.zeros(np.shape(x), bool)
        for k in kinks:
            bad |= np.abs(x - k) < margin
        if not bad.any():
            return x
        x = np.where(bad, rng.uniform(lo, hi, np.shape(x)), x)
    raise AssertionError("could not place values away from kinks")


def distinct(rng, n, lo, hi, avoid=()):
    """n values, pairwise >= (hi-lo)/(2n) apart, shuffled, away from `avoid`."""
    step = (hi - lo) / n
    grid = lo + (np.arange(n) + 0.5) * step + rng.uniform(-step / 5, step / 5, n)
    for k in avoid:
        grid = np.where(np.abs(grid - k) < 0.05, grid + step / 3, grid)
    return rng.permutation(grid)


def signed(rng, shape, lo, hi):
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


CASES = []  # (folder, name, builder(dt) -> (graph, arrays, kw))


def case(folder, base, dtypes=("f32", "f64")):
    def deco(fn):
        for dt in dtypes:
            CASES.append((folder, f"{base}_{dt}", dt, fn))
        return fn
    return deco


def cast_inputs(dt, arrays, dtypes=None):
    return {k: np.asarray(v, dtype=NP[(dtypes or {}).get(k, dt)]) for k, v in arrays.items()}


def simple(folder, base, inputs, make_nodes, gen, outputs=("y",), consts=None, doc=None,
           dtypes=("f32", "f64"), **kw):
    """Register a case: gen(rng) -> {input: values}; make_nodes() -> nodes."""
    def build(dt, rng):
        g = graph(doc or base, dt, inputs, make_nodes(), list(outputs), consts)
        return g, cast_inputs(dt, gen(rng)), kw
    case(folder, base, dtypes)(build)


# ----------------------------------------------------------------------------
# Ops cases
# ----------------------------------------------------------------------------
def binary_gen(op):
    """Data generator for op over operand shapes (sa, sb)."""
    def gen(rng, sa, sb):
        na, nb = int(np.prod(sa)), int(np.prod(sb))
        if op in ("maximum", "minimum") or op in COMPARE:
            v = distinct(rng, na + nb, -2, 2)
            return v[:na].reshape(sa), v[na:].reshape(sb)
        if op == "div":
            return uni(rng, sa, -2, 2), signed(rng, sb, 0.5, 2)
        if op == "pow":
            return uni(rng, sa, 0.4, 2), uni(rng, sb, -1.5, 2.5)
        return uni(rng, sa, -2, 2), uni(rng, sb, -2, 2)
    return gen


WEAK_K = {"add": 2, "sub": 0.5, "mul": -3, "div": 4, "pow": 3, "maximum": 0.25,
          "minimum": 0.25, "eq": 0.25, "ne": 0.25, "lt": 0.25, "le": 0.25, "gt": 0.25,
          "ge": 0.25}


def ops_binary():
    for op in BINARY + COMPARE:
        if op in ("fmod", "mod"):  # ops_additions: data away from their jumps
            continue
        gen = binary_gen(op)
        for variant, sa, sb in (("same", (2, 3), (2, 3)), ("bcast", (3, 1), (4,)),
                                ("scalar", (), (2, 3)), ("bcast2", (2, 1, 3), (4, 1))):
            if variant == "bcast2" and op not in ("add", "mul", "maximum", "lt"):
                continue
            simple("ops", f"{op}_{variant}", ["a", "b"],
                   lambda op=op: [N("y", op, "a", "b")],
                   lambda rng, gen=gen, sa=sa, sb=sb: dict(zip("ab", gen(rng, sa, sb))),
                   doc=f"{op} of {list(sa)} and {list(sb)}")
        k = WEAK_K[op]
        if op == "pow":   # x**3 with a constant exponent: negative bases are fine
            xgen = lambda rng: {"x": uni(rng, (2, 3), -2, 2)}
        elif op in ("maximum", "minimum") or op in COMPARE:
            xgen = lambda rng: {"x": distinct(rng, 6, -2, 2, avoid=(0.25,)).reshape(2, 3)}
        else:
            xgen = lambda rng: {"x": uni(rng, (2, 3), -2, 2)}
        simple("ops", f"{op}_weak", ["x"], lambda op=op, k=k: [N("y", op, "x", k)], xgen,
               doc=f"{op}(x, {k}) with a weak scalar number in args")
        if op in ("sub", "div", "pow", "maximum", "lt"):
            lk = {"sub": 2, "div": 3, "pow": 2, "maximum": 0.25, "lt": 0.25}[op]
            lgen = xgen
            if op == "div":
                lgen = lambda rng: {"x": signed(rng, (2, 3), 0.4, 2)}
            simple("ops", f"{op}_weakleft", ["x"], lambda op=op, lk=lk: [N("y", op, lk, "x")],
                   lgen, doc=f"{op}({lk}, x): weak scalar on the left")
    # weak scalar consts (rounded to the operand dtype: 1e-3 and 0.1 are inexact in f32)
    simple("ops", "add_weakconst", ["x"], lambda: [N("y", "add", "x", "eps")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, consts={"eps": 1e-3},
           doc="x + eps, eps a weak scalar const")
    simple("ops", "mul_weakconst", ["x"], lambda: [N("y", "mul", "c", "x")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, consts={"c": 0.1},
           doc="c * x, c a weak scalar const on the left")
    simple("ops", "div_weakconst", ["x", "z"],
           lambda: [N("d", "add", "z", "eps"), N("y", "div", "x", "d")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2), "z": uni(rng, (2, 3), 0.5, 2)},
           consts={"eps": 1e-3}, doc="x / (z + eps)")
    simple("ops", "minimum_infconst", ["x"], lambda: [N("y", "minimum", "x", "big")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, consts={"big": "inf"},
           doc="minimum(x, inf) with the weak const string \"inf\"")
    simple("ops", "pow_square", ["x"], lambda: [N("y", "pow", "x", 2)],
           lambda rng: {"x": uni(rng, (5,), -2, 2)}, doc="x**2, negative bases")
    simple("ops", "add_tensorconst", ["x"], lambda: [N("y", "add", "x", "b")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)},
           consts={"b": {"shape": [3], "data": [0.5, -1.25, 2.0]}},
           doc="x + b, b a tensor const without dtype (takes the call's)")
    simple("ops", "mul_fillconst", ["x"], lambda: [N("y", "mul", "x", "w")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)},
           consts={"w": {"shape": [2, 1], "fill": 0.75}}, doc="x * w, w a fill const")
    # kinks
    ties_a, ties_b = [[1.0, -0.5, 2.0], [0.0, 1.5, -1.0]], [[1.0, 0.25, 2.0], [0.0, 1.5, -2.0]]
    for op in ("maximum", "minimum"):
        simple("ops", f"kink_{op}_ties", ["a", "b"], lambda op=op: [N("y", op, "a", "b")],
               lambda rng: {"a": ties_a, "b": ties_b}, doc=f"{op} with ties: each side g/2")
    simple("ops", "kink_cmp_ties", ["a", "b"],
           lambda: [N("y" + op, op, "a", "b") for op in COMPARE],
           lambda rng: {"a": ties_a, "b": ties_b}, outputs=["y" + op for op in COMPARE],
           doc="all six comparisons with exact equalities")
    simple("ops", "kink_pow_zerobase", ["a", "b"], lambda: [N("y", "pow", "a", "b")],
           lambda rng: {"a": [0.0, 0.0, 0.0, 0.0, 0.0, 1.5],
                        "b": [0.0, 0.5, 1.0, 2.0, 3.0, 2.0]},
           doc="pow at base 0, exponent >= 0: the exponent gets 0 gradient")


def ops_unary():
    U = {  # op: (generator, extra attributes)
        "neg": lambda r: uni(r, (2, 3), -2, 2),
        "abs": lambda r: away(r, (2, 3), -2, 2),
        "sign": lambda r: away(r, (2, 3), -2, 2),
        "exp": lambda r: uni(r, (2, 3), -2, 2),
        "expm1": lambda r: uni(r, (2, 3), -2, 2),
        "log": lambda r: uni(r, (2, 3), 0.2, 3),
        "log1p": lambda r: uni(r, (2, 3), -0.8, 2),
        "sqrt": lambda r: uni(r, (2, 3), 0.2, 4),
        "rsqrt": lambda r: uni(r, (2, 3), 0.2, 4),
        "reciprocal": lambda r: signed(r, (2, 3), 0.3, 2),
        "square": lambda r: uni(r, (2, 3), -2, 2),
        "sin": lambda r: uni(r, (2, 3), -3, 3),
        "cos": lambda r: uni(r, (2, 3), -3, 3),
        "tan": lambda r: uni(r, (2, 3), -1.2, 1.2),
        "tanh": lambda r: uni(r, (2, 3), -3, 3),
        "sigmoid": lambda r: uni(r, (2, 3), -4, 4),
        "erf": lambda r: uni(r, (2, 3), -2, 2),
        "relu": lambda r: away(r, (2, 3), -2, 2),
        "softplus": lambda r: uni(r, (2, 3), -3, 3),
        "silu": lambda r: uni(r, (2, 3), -4, 4),
    }
    for op, gen in U.items():
        simple("ops", f"{op}_basic", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng, gen=gen: {"x": gen(rng)}, doc=f"{op} of [2,3]")
    big = lambda r: np.array([-35.0, -20.5, -3.0, 0.5, 20.5, 35.0])
    simple("ops", "softplus_large", ["x"], lambda: [N("y", "softplus", "x")],
           lambda rng: {"x": big(rng)}, doc="softplus far from 0 (stable form)")
    simple("ops", "sigmoid_large", ["x"], lambda: [N("y", "sigmoid", "x")],
           lambda rng: {"x": big(rng)}, doc="sigmoid far from 0")
    small = lambda r: signed(r, (6,), 1e-7, 1e-3)
    for op in ("expm1", "log1p"):
        simple("ops", f"{op}_small", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": small(rng)}, doc=f"{op} of tiny values")
    simple("ops", "exp_scalar", ["x"], lambda: [N("y", "exp", "x")],
           lambda rng: {"x": np.array(0.75)}, doc="exp of a 0-d tensor")
    for approx in ("none", "tanh"):
        simple("ops", f"gelu_{approx}", ["x"],
               lambda approx=approx: [N("y", "gelu", "x", approximate=approx)],
               lambda rng: {"x": uni(rng, (2, 3), -3, 3)}, doc=f"gelu approximate={approx}")
    simple("ops", "gelu_default", ["x"], lambda: [N("y", "gelu", "x")],
           lambda rng: {"x": uni(rng, (2, 3), -3, 3)}, doc="gelu without attribute (erf)")
    for variant, attrs in (("min", {"min": -0.5}), ("max", {"max": 0.75}),
                           ("both", {"min": -0.5, "max": 0.75})):
        simple("ops", f"clamp_{variant}", ["x"],
               lambda attrs=attrs: [N("y", "clamp", "x", **attrs)],
               lambda rng: {"x": away(rng, (3, 4), -2, 2, kinks=(-0.5, 0.75))},
               doc=f"clamp {attrs}")
    simple("ops", "detach_basic", ["x"], lambda: [N("y", "detach", "x")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, doc="detach: zero gradient")
    simple("ops", "detach_mul", ["x"], lambda: [N("d", "detach", "x"), N("y", "mul", "x", "d")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, doc="x * detach(x): gradient d*g")
    # where: condition from a comparison (no jump near the data), weak arg, tensor const
    simple("ops", "where_bcast", ["p", "a", "b"],
           lambda: [N("c", "gt", "p", 0), N("y", "where", "c", "a", "b")],
           lambda rng: {"p": np.array([[0.7], [-1.2]]), "a": uni(rng, (2, 3), -2, 2),
                        "b": uni(rng, (3,), -2, 2)}, doc="where(p > 0, a, b), broadcasting")
    simple("ops", "where_weak", ["p", "a"],
           lambda: [N("c", "lt", "p", 0), N("y", "where", "c", "a", 0)],
           lambda rng: {"p": away(rng, (2, 3), -2, 2), "a": uni(rng, (2, 3), -2, 2)},
           doc="where(p < 0, a, 0): weak scalar branch")
    simple("ops", "where_const", ["a", "b"], lambda: [N("y", "where", "m", "a", "b")],
           lambda rng: {"a": uni(rng, (2, 3), -2, 2), "b": uni(rng, (2, 3), -2, 2)},
           consts={"m": {"shape": [2, 3], "data": [[1, 0, 1], [0, 0, 2]]}},
           doc="where with a const mask")
    # cast: output dtype differs from the input's
    for src, dst in (("f32", "f64"), ("f64", "f32")):
        simple("ops", f"cast_to{dst}", ["x"],
               lambda dst=dst: [N("c", "cast", "x", dtype=dst), N("y", "mul", "c", 3)],
               lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, dtypes=(src,),
               doc=f"cast {src} -> {dst}, then * 3 in {dst}")
        simple("ops", f"cast_bare_to{dst}", ["x"], lambda dst=dst: [N("y", "cast", "x", dtype=dst)],
               lambda rng: {"x": uni(rng, (2, 3), -2, 2)},
               dtypes=(src,), doc=f"bare cast {src} -> {dst}")

    def mixed(dt, rng):
        g = graph("cast x (f32) to f64 and multiply by y (f64)", dt, ["x", "y"],
                  [N("c", "cast", "x", dtype="f64"), N("z", "mul", "c", "y")], ["z"],
                  dtypes={"y": "f64"})
        return g, cast_inputs(dt, {"x": uni(rng, (2, 3), -2, 2), "y": uni(rng, (3,), -2, 2)},
                              {"y": "f64"}), {}
    case("ops", "cast_mixed", ("f32",))(mixed)
    # kinks
    simple("ops", "kink_relu_zero", ["x"], lambda: [N("y", "relu", "x")],
           lambda rng: {"x": [-1.0, 0.0, -0.0, 2.0]}, doc="relu at 0: gradient 0")
    simple("ops", "kink_abs_zero", ["x"], lambda: [N("y", "abs", "x")],
           lambda rng: {"x": [-1.0, 0.0, -0.0, 2.0]}, doc="abs at 0: gradient 0")
    simple("ops", "kink_sign_zero", ["x"], lambda: [N("y", "sign", "x")],
           lambda rng: {"x": [-1.5, 0.0, -0.0, 2.0]}, doc="sign(0) = 0")
    simple("ops", "kink_neg_zero", ["x"], lambda: [N("y", "neg", "x")],
           lambda rng: {"x": [0.0, -0.0, 1.5]}, doc="neg(+0) = -0, neg(-0) = +0: bits")
    simple("ops", "kink_sqrt_zero", ["x"], lambda: [N("y", "sqrt", "x")],
           lambda rng: {"x": [0.0, 1.0, 4.0]}, doc="sqrt'(0) = inf")
    simple("ops", "kink_log_zero", ["x"], lambda: [N("y", "log", "x")],
           lambda rng: {"x": [0.0, 1.0, 2.0]}, doc="log(0) = -inf, gradient g/0")
    simple("ops", "kink_clamp_bounds", ["x"],
           lambda: [N("y", "clamp", "x", min=-0.5, max=0.75)],
           lambda rng: {"x": [-1.0, -0.5, 0.0, 0.75, 1.0]},
           doc="clamp exactly at min and max: gradient passes")
    simple("ops", "kink_clamp_minbound", ["x"], lambda: [N("y", "clamp", "x", min=0.25)],
           lambda rng: {"x": [0.0, 0.25, 0.5]}, doc="clamp at min only bound")
    simple("ops", "kink_where_zero", ["c", "a", "b"], lambda: [N("y", "where", "c", "a", "b")],
           lambda rng: {"c": [1.0, 0.0, -2.0, 0.0], "a": uni(rng, (4,), -2, 2),
                        "b": uni(rng, (4,), -2, 2)},
           doc="where with an input condition holding exact zeros; c gets 0 gradient")


def ops_reduce():
    variants = (("all", {}), ("int", {"axes": 1}), ("list", {"axes": [0, 2]}),
                ("neg", {"axes": -1}), ("keepdims", {"axes": [0, 2], "keepdims": True}),
                ("keepall", {"keepdims": True}))
    gens = {
        "sum": lambda r: uni(r, (2, 3, 4), -2, 2),
        "mean": lambda r: uni(r, (2, 3, 4), -2, 2),
        "max": lambda r: distinct(r, 24, -3, 3).reshape(2, 3, 4),
        "min": lambda r: distinct(r, 24, -3, 3).reshape(2, 3, 4),
        "prod": lambda r: signed(r, (2, 3, 4), 0.6, 1.4),
        "logsumexp": lambda r: uni(r, (2, 3, 4), -3, 3),
    }
    for op, gen in gens.items():
        for variant, attrs in variants:
            if variant == "keepall" and op not in ("sum", "max", "logsumexp"):
                continue
            simple("ops", f"{op}_{variant}", ["x"],
                   lambda op=op, attrs=attrs: [N("y", op, "x", **attrs)],
                   lambda rng, gen=gen: {"x": gen(rng)}, doc=f"{op} of [2,3,4] {attrs}")
    simple("ops", "logsumexp_large", ["x"], lambda: [N("y", "logsumexp", "x", axes=1)],
           lambda rng: {"x": uni(rng, (2, 3), -1, 1) + np.array([[1000.0], [-1000.0]])},
           doc="logsumexp near +-1000 (stable form)")
    simple("ops", "sum_scalar", ["x"], lambda: [N("y", "sum", "x")],
           lambda rng: {"x": np.array(1.25)}, doc="sum of a 0-d tensor")
    # prod with zeros: a polynomial, so no kink
    simple("ops", "prod_zerorows", ["x"], lambda: [N("y", "prod", "x", axes=1)],
           lambda rng: {"x": [[0.5, -1.5, 2.0, 1.25], [1.5, 0.0, -2.0, 0.75],
                              [0.0, 1.25, 0.0, -1.5]]},
           doc="prod per row: no zero, one zero, two zeros")
    simple("ops", "prod_onezero", ["x"], lambda: [N("y", "prod", "x")],
           lambda rng: {"x": [[0.5, -1.5, 2.0], [1.5, 0.0, -2.0]]}, doc="prod of all, one zero")
    simple("ops", "prod_twozeros", ["x"], lambda: [N("y", "prod", "x")],
           lambda rng: {"x": [[0.5, 0.0, 2.0], [1.5, 0.0, -2.0]]}, doc="prod of all, two zeros")
    simple("ops", "kink_max_ties", ["x"], lambda: [N("y", "max", "x", axes=1)],
           lambda rng: {"x": [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.5, -2.0]]},
           doc="max per row with ties: split evenly")
    simple("ops", "kink_min_ties", ["x"], lambda: [N("y", "min", "x")],
           lambda rng: {"x": [[1.0, 3.0, 1.0], [2.0, 1.0, 2.0]]},
           doc="min of all with three ties: each 1/3")
    simple("ops", "kink_max_tieskeep", ["x"],
           lambda: [N("y", "max", "x", axes=[0, 2], keepdims=True)],
           lambda rng: {"x": [[[1.0, 2.0], [0.5, 0.5]], [[2.0, -1.0], [0.5, 0.25]]]},
           doc="max over axes [0,2] keepdims with ties")
    for op in ("softmax", "log_softmax"):
        simple("ops", f"{op}_default", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": uni(rng, (3, 4), -3, 3)}, doc=f"{op} over the last axis")
        simple("ops", f"{op}_axis0", ["x"], lambda op=op: [N("y", op, "x", axis=0)],
               lambda rng: {"x": uni(rng, (3, 4), -3, 3)}, doc=f"{op} axis 0")
        simple("ops", f"{op}_large", ["x"], lambda op=op: [N("y", op, "x", axis=-1)],
               lambda rng: {"x": uni(rng, (2, 4), -2, 2) + np.array([[1000.0], [-1000.0]])},
               doc=f"{op} near +-1000 (stable form)")


def ops_matmul():
    for variant, sa, sb in (("2d2d", (3, 4), (4, 2)), ("1d2d", (4,), (4, 3)),
                            ("2d1d", (3, 4), (4,)), ("1d1d", (4,), (4,)),
                            ("batched", (2, 3, 4), (2, 4, 2)), ("bcastbatch", (2, 3, 4), (4, 2)),
                            ("bcast4d", (2, 1, 2, 3), (3, 3, 2)), ("1d3d", (3,), (2, 3, 2)),
                            ("3d1d", (2, 2, 3), (3,))):
        simple("ops", f"matmul_{variant}", ["a", "b"], lambda: [N("y", "matmul", "a", "b")],
               lambda rng, sa=sa, sb=sb: {"a": uni(rng, sa, -2, 2), "b": uni(rng, sb, -2, 2)},
               doc=f"matmul {list(sa)} @ {list(sb)}")


def ops_shape():
    S = [
        ("reshape_basic", (2, 3), dict(op="reshape", shape=[3, 2])),
        ("reshape_neg1", (2, 3, 4), dict(op="reshape", shape=[4, -1])),
        ("reshape_toscalar", (1, 1), dict(op="reshape", shape=[])),
        ("transpose_default", (2, 3, 4), dict(op="transpose")),
        ("transpose_perm", (2, 3, 4), dict(op="transpose", axes=[1, 2, 0])),
        ("transpose_2d", (2, 3), dict(op="transpose")),
        ("broadcast_to_basic", (3, 1), dict(op="broadcast_to", shape=[2, 3, 4])),
        ("broadcast_to_scalar", (), dict(op="broadcast_to", shape=[2, 3])),
        ("expand_dims_front", (2, 3), dict(op="expand_dims", axis=0)),
        ("expand_dims_mid", (2, 3), dict(op="expand_dims", axis=1)),
        ("expand_dims_neg", (2, 3), dict(op="expand_dims", axis=-1)),
        ("squeeze_default", (1, 3, 1, 2), dict(op="squeeze")),
        ("squeeze_axes", (1, 3, 1, 2), dict(op="squeeze", axes=[0, 2])),
        ("squeeze_int", (1, 3, 1, 2), dict(op="squeeze", axes=2)),
        ("slice_negstartstop", (2, 6), dict(op="slice", axis=1, start=-4, stop=-1, step=1)),
        ("slice_step2", (7, 2), dict(op="slice", axis=0, start=1, stop=6, step=2)),
        ("slice_negstep2", (2, 7), dict(op="slice", axis=1, start=-6, stop=-1, step=2)),
        ("slice_clip", (2, 7), dict(op="slice", axis=1, start=2, stop=100, step=3)),
        ("take_repeat", (4, 3), dict(op="take", axis=0, indices=[2, 0, 2, 3])),
        ("take_negative", (3, 4), dict(op="take", axis=1, indices=[-1, 0, -1, 1, -4])),
    ]
    for name, shape, attrs in S:
        attrs = dict(attrs)
        op = attrs.pop("op")
        simple("ops", name, ["x"], lambda op=op, attrs=attrs: [N("y", op, "x", **attrs)],
               lambda rng, shape=shape: {"x": uni(rng, shape, -2, 2)}, doc=f"{op} {attrs}")
    for op, variant, axis, shapes in (("concat", "axis0", 0, ((1, 3), (2, 3), (3, 3))),
                                      ("concat", "axis1", 1, ((2, 1), (2, 3), (2, 2))),
                                      ("stack", "axis0", 0, ((2, 3),) * 3),
                                      ("stack", "axis1", 1, ((2, 3),) * 3),
                                      ("stack", "axis2", 2, ((2, 3),) * 3)):
        simple("ops", f"{op}_{variant}", ["a", "b", "c"],
               lambda op=op, axis=axis: [N("y", op, "a", "b", "c", axis=axis)],
               lambda rng, shapes=shapes: {k: uni(rng, s, -2, 2) for k, s in zip("abc", shapes)},
               doc=f"{op} of 3 args, axis {axis}")


def ops_graphs():
    simple("ops", "graph_shared", ["x"],
           lambda: [N("y", "mul", "x", "x"), N("yy", "mul", "y", "y"), N("z", "add", "yy", 1)],
           lambda rng: {"x": uni(rng, (4,), -1.5, 1.5)}, outputs=["z"],
           doc="y = x*x used twice: z = y*y + 1")
    simple("ops", "graph_twoout", ["x", "w"],
           lambda: [N("s", "sin", "x"), N("p", "mul", "s", "w"), N("u", "sum", "p"),
                    N("v", "exp", "p")],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2), "w": uni(rng, (3,), -1, 1)},
           outputs=["u", "v"], doc="two outputs sharing p = sin(x)*w")
    simple("ops", "graph_unused", ["x", "u"],
           lambda: [N("y", "tanh", "x"), N("z", "mul", "u", "u")],
           lambda rng: {"x": uni(rng, (3,), -2, 2), "u": uni(rng, (2,), -2, 2)},
           outputs=["y"], doc="u reaches no output: exact zero gradient")
    simple("ops", "graph_outisinput", ["x", "w"], lambda: [N("y", "mul", "x", "w")],
           lambda rng: {"x": uni(rng, (3,), -2, 2), "w": uni(rng, (3,), -2, 2)},
           outputs=["y", "x"], doc="an input is also an output: its gradient adds its seed")

    def mlp(dt, rng):
        onehot = np.eye(3)[[0, 2, 1, 2, 0]]
        nodes = [
            N("xb", "take", "x", axis=0, indices=[0, 2, 3, 1, -1]),
            N("h0", "matmul", "xb", "w1"), N("h1", "add", "h0", "b1"), N("h", "tanh", "h1"),
            N("z0", "matmul", "h", "w2"), N("z", "add", "z0", "b2"),
            N("probs", "softmax", "z", axis=-1), N("logp", "log_softmax", "z"),
            N("picked", "mul", "logp", "onehot"), N("nll", "sum", "picked", axes=1),
            N("tot", "sum", "nll"), N("loss", "mul", "tot", -0.2),
        ]
        g = graph("MLP: take a batch, tanh layer, softmax, cross-entropy loss", dt,
                  ["x", "w1", "b1", "w2", "b2"], nodes, ["loss", "probs"],
                  consts={"onehot": {"dtype": dt, "shape": [5, 3], "data": onehot.tolist()}})
        g["inputs"][0]["shape"] = ["n", 3]
        g["inputs"][1]["shape"] = [3, "k"]
        g["inputs"][2]["shape"] = ["k"]
        g["inputs"][3]["shape"] = ["k", None]
        arrays = {"x": uni(rng, (4, 3), -1, 1), "w1": uni(rng, (3, 4), -1, 1),
                  "b1": uni(rng, (4,), -0.5, 0.5), "w2": uni(rng, (4, 3), -1, 1),
                  "b2": uni(rng, (3,), -0.5, 0.5)}
        return g, cast_inputs(dt, arrays), {}
    case("ops", "graph_mlp")(mlp)


# ----------------------------------------------------------------------------
# Index tensors: take with an index tensor, gather, one_hot, casts to and from
# integers, index tensors moved by shape ops, cross-entropy with labels
# ----------------------------------------------------------------------------
OTHER_INT = {"i32": "i64", "i64": "i32"}


def icase(base, inputs, index_inputs, make_nodes, gen, outputs=("y",), consts=None, doc=None,
          dtypes=("f32", "f64"), **kw):
    """Register base_<i32|i64>_<f32|f64>: the inputs in index_inputs get the
    index dtype it; make_nodes(it, dt) -> nodes; consts(it, dt) -> consts;
    gen(rng) -> {input: values}, the same values for i32 and i64."""
    for it in INTS:
        def build(dt, _rng, it=it):
            rng = np.random.default_rng(zlib.crc32(base.encode()))
            its = {n: it for n in index_inputs}
            g = graph(f"{doc or base} ({it} indices)", dt, inputs, make_nodes(it, dt),
                      list(outputs), consts(it, dt) if consts else None, dtypes=its)
            return g, cast_inputs(dt, gen(rng), its), dict(kw)
        case("ops", f"{base}_{it}", dtypes)(build)


def gather_idx(rng, xshape, axis, m):
    """Random gather indices (size m on axis), negatives and, where m > 1,
    an index repeated within one line along the axis."""
    n, shape = xshape[axis], list(xshape)
    shape[axis] = m
    for _ in range(1000):
        k = rng.integers(-n, n, shape)
        lines = np.moveaxis(k % n, axis, -1).reshape(-1, m)
        if (k < 0).any() and (k >= 0).any() and (
                m == 1 or any(len(set(r)) < m for r in lines.tolist())):
            return k
    raise AssertionError("could not draw gather indices")


def xent_nodes():
    """Cross-entropy of a linear classifier, labels from data (spec/ops.md)."""
    return [N("xw", "matmul", "x", "w"), N("logits", "add", "xw", "b"),
            N("logp", "log_softmax", "logits", axis=-1),
            N("lab", "expand_dims", "labels", axis=-1),
            N("picked", "gather", "logp", "lab", axis=-1),
            N("nll", "neg", "picked"), N("loss", "mean", "nll")]


def xent_reference(arrays, seeds):
    """torch.nn.functional.cross_entropy at float64 on the upcast inputs."""
    x, w, b = (torch.tensor(arrays[k].astype(np.float64), requires_grad=True) for k in "xwb")
    labels = torch.tensor(arrays["labels"].astype(np.int64))
    loss = F.cross_entropy(torch.matmul(x, w) + b, labels)
    gs = torch.autograd.grad(loss, [x, w, b], grad_outputs=torch.tensor(
        seeds[0].astype(np.float64)))
    return ({"loss": loss.detach().numpy().copy()},
            {k: q.numpy().copy() for k, q in zip("xwb", gs)})


def ops_index():
    T = [  # name, x shape, indices, axis
        ("rank0", (4, 3), 2, 0),
        ("rank0neg", (3, 5), -2, 1),
        ("rank1", (5, 3), [3, 0, 4], 0),
        ("rank2", (3, 5), [[4, 0, 2], [1, 3, 3]], 1),
        ("negative", (3, 4), [-1, 0, -4, 2, -3], 1),
        ("repeat", (4, 3), [2, 0, 2, 2, 3, 0], 0),
        ("negaxis", (2, 3, 4), [[3, -1, 1], [0, -4, 3]], -1),
        ("midaxis", (2, 4, 3), [1, -1, 1], 1),
    ]
    for variant, shape, idx, axis in T:
        icase(f"take_t_{variant}", ["x", "idx"], ["idx"],
              lambda it, dt, axis=axis: [N("y", "take", "x", "idx", axis=axis)],
              lambda rng, shape=shape, idx=idx: {"x": uni(rng, shape, -2, 2),
                                                 "idx": np.array(idx)},
              doc=f"take x{list(shape)} at an index tensor {idx}, axis {axis}")
    icase("take_t_ofindex", ["x", "idx"], ["idx"],
          lambda it, dt: [N("sel", "take", "idx", "perm", axis=0),
                          N("y", "take", "x", "sel", axis=0)],
          lambda rng: {"x": uni(rng, (4, 3), -2, 2), "idx": np.array([3, -1, 0, 2, 1])},
          outputs=["y", "sel"],
          consts=lambda it, dt: {"perm": {"dtype": it, "shape": [3], "data": [4, 0, -1]}},
          doc="sel = take(idx, perm) (an index output, from an index const), "
              "y = take(x, sel)")
    G = [  # name, x shape, axis, size of idx on axis
        ("axis0", (2, 3, 4), 0, 3),
        ("axis1", (2, 3, 4), 1, 5),
        ("axis2", (2, 3, 4), 2, 6),
        ("negaxis", (2, 3, 4), -2, 2),
        ("axis0one", (2, 3, 4), 0, 1),
        ("rank1", (5,), 0, 7),
        ("rank2", (3, 4), -1, 4),
    ]
    for variant, shape, axis, m in G:
        icase(f"gather_{variant}", ["x", "idx"], ["idx"],
              lambda it, dt, axis=axis: [N("y", "gather", "x", "idx", axis=axis)],
              lambda rng, shape=shape, axis=axis, m=m: {
                  "x": uni(rng, shape, -2, 2), "idx": gather_idx(rng, shape, axis, m)},
              doc=f"gather x{list(shape)} on axis {axis}, idx of size {m} there "
                  "(negative and repeated indices)")
    # index tensors moved by shape ops before a gather
    icase("gather_reshaped", ["x", "idx"], ["idx"],
          lambda it, dt: [N("r", "reshape", "idx", shape=[2, 3]),
                          N("y", "gather", "x", "r", axis=1)],
          lambda rng: {"x": uni(rng, (2, 4), -2, 2), "idx": np.array([3, 0, -1, 1, 1, -4])},
          doc="gather(x, reshape(idx, [2,3]), axis 1)")
    icase("gather_sliced", ["x", "idx"], ["idx"],
          lambda it, dt: [N("s", "slice", "idx", axis=0, start=1, stop=7, step=2),
                          N("e", "expand_dims", "s", axis=-1),
                          N("y", "gather", "x", "e", axis=1)],
          lambda rng: {"x": uni(rng, (3, 4), -2, 2), "idx": np.array([1, 3, 0, -1, 2, -2, 0])},
          doc="gather(x, expand_dims(idx[1:7:2], -1), axis 1)")
    icase("gather_stacked", ["x", "a", "b"], ["a", "b"],
          lambda it, dt: [N("st", "stack", "a", "b", axis=0),
                          N("y", "gather", "x", "st", axis=1)],
          lambda rng: {"x": uni(rng, (2, 5), -2, 2), "a": np.array([4, 0, -1]),
                       "b": np.array([2, 2, -5])},
          doc="gather(x, stack(a, b), axis 1)")
    icase("gather_expanded", ["x", "idx"], ["idx"],
          lambda it, dt: [N("e", "expand_dims", "idx", axis=0),
                          N("y", "gather", "x", "e", axis=0)],
          lambda rng: {"x": uni(rng, (3, 4), -2, 2), "idx": np.array([2, 0, -1, 1])},
          doc="gather(x, expand_dims(idx, 0), axis 0): one row per column")
    icase("gather_moved", ["x", "idx"], ["idx"],
          lambda it, dt: [N("sq", "squeeze", "idx", axes=0), N("t", "transpose", "sq"),
                          N("cc", "concat", "t", "c0", axis=0),
                          N("y1", "gather", "x", "cc", axis=0),
                          N("bc", "broadcast_to", "c0", shape=[3, 3]),
                          N("y2", "gather", "x", "bc", axis=1)],
          lambda rng: {"x": uni(rng, (3, 3), -2, 2),
                       "idx": np.array([[[0, -1], [2, 1], [-3, 2]]])},
          outputs=["y1", "y2", "cc"],
          consts=lambda it, dt: {"c0": {"dtype": it, "shape": [1, 3], "data": [[2, -1, 0]]}},
          doc="squeeze, transpose, concat (with an index const) and broadcast_to "
              "move indices; cc is an index output")
    # one_hot: no gradient of its own; times a float input
    icase("one_hot_mulsum", ["idx", "w"], ["idx"],
          lambda it, dt: [N("oh", "one_hot", "idx", depth=4), N("p", "mul", "oh", "w"),
                          N("y", "sum", "p")],
          lambda rng: {"idx": np.array([2, 0, 3, 2, 1]), "w": uni(rng, (5, 4), -2, 2)},
          doc="sum(one_hot(idx, 4) * w); idx comes first, the call's element type is w's")
    icase("one_hot_rank2", ["w", "idx"], ["idx"],
          lambda it, dt: [N("oh", "one_hot", "idx", depth=5), N("p", "mul", "oh", "w"),
                          N("y", "sum", "p", axes=-1)],
          lambda rng: {"w": uni(rng, (5,), -2, 2), "idx": np.array([[4, 0, 2], [2, 1, 4]])},
          outputs=["y", "oh"], doc="one_hot of a [2,3] index tensor (also an output) times w")
    icase("one_hot_scalar", ["idx", "w"], ["idx"],
          lambda it, dt: [N("oh", "one_hot", "idx", depth=3), N("y", "mul", "oh", "w")],
          lambda rng: {"idx": np.array(1), "w": uni(rng, (3,), -2, 2)},
          doc="one_hot of a 0-d index tensor times w")
    icase("one_hot_nofloat", ["idx"], ["idx"],
          lambda it, dt: [N("oh", "one_hot", "idx", depth=3)],
          lambda rng: {"idx": np.array([[1, 0], [2, 1]])}, outputs=["oh"], dtypes=("f64",),
          doc="one_hot in a graph without floating inputs: f64")
    # casts between index and float dtypes
    icase("cast_itof", ["x", "idx"], ["idx"],
          lambda it, dt: [N("c", "cast", "idx", dtype=dt), N("y", "mul", "x", "c")],
          lambda rng: {"x": uni(rng, (2, 3), -2, 2), "idx": np.array([3, -2, 5])},
          doc="x * cast(idx) to the value dtype")
    icase("cast_ftoi", ["x", "p"], [],
          lambda it, dt: [N("k", "cast", "p", dtype=it), N("y", "take", "x", "k", axis=0)],
          lambda rng: {"x": uni(rng, (4, 3), -2, 2),
                       "p": np.array([2.7, 0.3, -1.7, 3.45, -0.6])},
          outputs=["y", "k"],
          doc="k = cast(p) truncates toward zero ([2, 0, -1, 3, 0], an index output), "
              "y = take(x, k); p gets no gradient")
    icase("cast_itoi", ["x", "idx"], ["idx"],
          lambda it, dt: [N("k", "cast", "idx", dtype=OTHER_INT[it]),
                          N("y", "take", "x", "k", axis=0)],
          lambda rng: {"x": uni(rng, (4, 3), -2, 2), "idx": np.array([3, -1, 0, -4])},
          outputs=["y", "k"], doc="k = cast(idx) to the other index dtype, y = take(x, k)")
    # cross-entropy: references from torch.nn.functional.cross_entropy
    icase("xent_labels", ["x", "w", "b", "labels"], ["labels"], lambda it, dt: xent_nodes(),
          lambda rng: {"x": uni(rng, (5, 4), -2, 2), "w": uni(rng, (4, 3), -1, 1),
                       "b": uni(rng, (3,), -0.5, 0.5), "labels": np.array([2, 0, 1, 1, 2])},
          outputs=["loss"], reference=xent_reference,
          doc="cross-entropy of x @ w + b with labels: mean(neg(gather(log_softmax(z), "
              "expand_dims(labels, -1), -1)))")

    def example(dt, rng):
        with open(os.path.join(EXAMPLES, "xent.json")) as f:
            text = f.read()
        g = json.loads(text)
        if g["nodes"] != xent_nodes() or g["outputs"] != ["loss"]:
            raise AssertionError("examples/xent.json is not the xent_labels graph")
        with np.load(os.path.join(EXAMPLES, "xent_inputs.npz")) as z:
            arrays = {k: z[k] for k in z.files}
        want = {"x": np.float32, "w": np.float32, "b": np.float32, "labels": np.int64}
        if {k: a.dtype for k, a in arrays.items()} != {k: np.dtype(v) for k, v in want.items()}:
            raise AssertionError("examples/xent_inputs.npz: unexpected keys or dtypes")
        return g, arrays, {"reference": xent_reference, "graph_text": text}
    case("ops", "xent_example", ("f32",))(example)


# ----------------------------------------------------------------------------
# The elementwise additions of nn.md: rounding, fmod and mod, the hyperbolic
# and inverse trigonometric functions, isnan and isinf; integer arithmetic
# ----------------------------------------------------------------------------
def off_grid(rng, shape, lo, hi, step, margin=0.05):
    """Uniform values at least margin from every multiple of step."""
    kinks = [k * step for k in range(int(math.floor(lo / step)) - 1, int(math.ceil(hi / step)) + 2)]
    return away(rng, shape, lo, hi, kinks=kinks, margin=margin)


def quotient_away(rng, b, lo=-4, hi=4):
    """Dividends a = (k + f) * b, f in [0.1, 0.9]: a/b at least 0.1 from an
    integer, where fmod and mod jump."""
    k = rng.integers(lo, hi, np.shape(b))
    return (k + rng.uniform(0.1, 0.9, np.shape(b))) * b


def ops_additions():
    U = {  # op: generator
        "floor": lambda r: off_grid(r, (2, 3), -3, 3, 1.0),
        "ceil": lambda r: off_grid(r, (2, 3), -3, 3, 1.0),
        "round": lambda r: off_grid(r, (2, 3), -3, 3, 0.5),
        "trunc": lambda r: off_grid(r, (2, 3), -3, 3, 1.0),
        "sinh": lambda r: uni(r, (2, 3), -3, 3),
        "cosh": lambda r: uni(r, (2, 3), -3, 3),
        "asin": lambda r: uni(r, (2, 3), -0.9, 0.9),
        "acos": lambda r: uni(r, (2, 3), -0.9, 0.9),
        "atan": lambda r: uni(r, (2, 3), -3, 3),
        "asinh": lambda r: uni(r, (2, 3), -3, 3),
        "acosh": lambda r: uni(r, (2, 3), 1.1, 4),
        "atanh": lambda r: uni(r, (2, 3), -0.9, 0.9),
        "isnan": lambda r: uni(r, (2, 3), -3, 3),
        "isinf": lambda r: uni(r, (2, 3), -3, 3),
    }
    for op, gen in U.items():
        simple("ops", f"{op}_basic", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng, gen=gen: {"x": gen(rng)}, doc=f"{op} of [2,3]")
    # through a product, so the zero gradient meets a nonzero one
    for op in ("floor", "round", "isnan"):
        simple("ops", f"{op}_mul", ["x"], lambda op=op: [N("r", op, "x"), N("y", "mul", "r", "x")],
               lambda rng: {"x": off_grid(rng, (5,), -3, 3, 0.5)},
               doc=f"{op}(x) * x: the gradient is {op}(x) * g")
    for op in ("sinh", "cosh", "asinh", "atan"):
        simple("ops", f"{op}_large", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": np.array([-20.5, -12.0, 9.5, 15.0, 20.0])},
               doc=f"{op} of large arguments")
    for op in ("sinh", "cosh"):
        # kink_: the sums of finite differences would overflow
        simple("ops", f"kink_{op}_edge", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": np.array([88.2, 88.7, 89.2, -89.2])}, dtypes=("f32",),
               doc=f"{op} just below float's overflow", seed_ones=True)
        simple("ops", f"kink_{op}_edge", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": np.array([708.5, 709.5, 710.0, -710.0])}, dtypes=("f64",),
               doc=f"{op} just below double's overflow", seed_ones=True)
    for op in ("asinh", "acosh"):
        simple("ops", f"{op}_huge", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": np.array([2e19, 1e25, 3e38])}, dtypes=("f32",),
               doc=f"{op} beyond the square root of float's largest number")
        simple("ops", f"{op}_huge", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": np.array([2e154, 1e200, 1.7e308])}, dtypes=("f64",),
               doc=f"{op} beyond the square root of double's largest number")
    simple("ops", "asinh_hugeneg", ["x"], lambda: [N("y", "asinh", "x")],
           lambda rng: {"x": np.array([-2e19, -1e25, -3e38])}, doc="asinh of huge negatives")
    for op in ("asin", "acos", "atan", "atanh"):
        simple("ops", f"{op}_small", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng: {"x": signed(rng, (6,), 1e-7, 1e-3)}, doc=f"{op} of tiny values")
    # fmod and mod: same shape, a scalar divisor, weak divisors, negative operands
    for op in ("fmod", "mod"):
        def same(rng):
            b = signed(rng, (2, 3), 0.7, 2.5)
            return {"a": quotient_away(rng, b), "b": b}
        simple("ops", f"{op}_same", ["a", "b"], lambda op=op: [N("y", op, "a", "b")], same,
               doc=f"{op} of [2,3] and [2,3], both signs")

        def scalar_b(rng):
            b = np.array(-1.25)
            return {"a": quotient_away(rng, np.full((2, 3), -1.25)), "b": b}
        simple("ops", f"{op}_scalar", ["a", "b"], lambda op=op: [N("y", op, "a", "b")], scalar_b,
               doc=f"{op} of [2,3] by a negative 0-d divisor")

        def bcast(rng):
            b = np.array([0.75, -1.5])
            return {"a": quotient_away(rng, np.broadcast_to(b, (3, 2))), "b": b}
        simple("ops", f"{op}_bcast", ["a", "b"], lambda op=op: [N("y", op, "a", "b")], bcast,
               doc=f"{op} of [3,2] by [2]: the divisor's gradient summed over rows")
        for k in (1.5, -1.5):
            simple("ops", f"{op}_weak{'neg' if k < 0 else ''}", ["x"],
                   lambda op=op, k=k: [N("y", op, "x", k)],
                   lambda rng: {"x": quotient_away(rng, np.full((2, 3), 1.5))},
                   doc=f"{op}(x, {k}) with a weak divisor")
        simple("ops", f"{op}_weakleft", ["x"], lambda op=op: [N("y", op, 5, "x")],
               lambda rng: {"x": np.array([1.5, -1.5, 2.25, -2.25, 3.5, -3.5])},
               doc=f"{op}(5, x): a weak dividend")
        signs = {"a": [6.0, 6.0, -6.0, -6.0, 5.0, -5.0, 5.0, -5.0, 0.0, -0.0, 0.0, -0.0, 1.0, -1.0],
                 "b": [3.0, -3.0, 3.0, -3.0, 3.0, 3.0, -3.0, -3.0, 2.0, 2.0, -2.0, -2.0, 0.0, 0.0]}
        simple("ops", f"kink_{op}_neg_zero", ["a", "b"], lambda op=op: [N("y", op, "a", "b")],
               lambda rng: signs,
               doc=f"{op} at exact multiples (the sign of a zero result), both signs, "
                   "and by zero (nan)")
        # (mod's divisor gradient: -g*floor(a/b), where torch's floor_divide
        # says -1 for a/b = -0 with a, b of opposite signs and nan for an
        # infinite a; those stay out)
        inf = {"fmod": {"a": [1.0, -1.0, 1.0, -1.0, np.inf, np.nan, 2.0],
                        "b": [np.inf, np.inf, -np.inf, -np.inf, 2.0, 2.0, np.nan]},
               "mod": {"a": [1.0, -1.0, np.nan, 2.0], "b": [np.inf, -np.inf, 2.0, np.nan]}}[op]
        simple("ops", f"kink_{op}_inf", ["a", "b"], lambda op=op: [N("y", op, "a", "b")],
               lambda rng, inf=inf: inf, doc=f"{op} with infinite and NaN operands")
    # kinks of the rounding ops
    edges = [-2.5, -1.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, 0.49999997, -0.49999997,
             np.inf, -np.inf, np.nan]
    simple("ops", "kink_rounding_neg_zero", ["x"],
           lambda: [N("y" + op, op, "x") for op in ("floor", "ceil", "round", "trunc")],
           lambda rng: {"x": edges}, outputs=["y" + op for op in ("floor", "ceil", "round", "trunc")],
           doc="floor, ceil, round (half to even) and trunc at halves, integers, signed "
               "zeros, infinities and NaN")
    simple("ops", "kink_round_half", ["x"], lambda: [N("y", "round", "x")],
           lambda rng: {"x": [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 4.5, 1e6 + 0.5, 2.4999999]},
           doc="round: ties go to the even neighbour")
    simple("ops", "kink_isnan_special", ["x"],
           lambda: [N("yn", "isnan", "x"), N("yi", "isinf", "x")],
           lambda rng: {"x": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, 3e38]}, outputs=["yn", "yi"],
           doc="isnan and isinf: 0 or 1 in the operand's dtype, no gradient")
    for op, xs in (("asin", [-1.0, 1.0, 1.5, -1.5, 0.0]), ("acos", [-1.0, 1.0, 1.5, -1.5, 0.0]),
                   ("atanh", [-1.0, 1.0, 1.5, -1.5, 0.0]), ("acosh", [1.0, 0.5, -1.0, np.inf, 2.0])):
        simple("ops", f"kink_{op}_domain", ["x"], lambda op=op: [N("y", op, "x")],
               lambda rng, xs=xs: {"x": xs},
               doc=f"{op} at the edges of its domain (infinite gradients) and outside (nan)")
    simple("ops", "kink_sinh_inf", ["x"], lambda: [N("ys", "sinh", "x"), N("yc", "cosh", "x")],
           lambda rng: {"x": [np.inf, -np.inf, np.nan, 0.0, -0.0]}, outputs=["ys", "yc"],
           doc="sinh and cosh at the infinities")
    simple("ops", "sinh_odd_neg_zero", ["x"],
           lambda: [N("y" + op, op, "x") for op in ("sinh", "asin", "atan", "asinh", "atanh")],
           lambda rng: {"x": [-0.25, 0.0, -0.0, 0.5]},
           outputs=["y" + op for op in ("sinh", "asin", "atan", "asinh", "atanh")],
           doc="the odd functions keep the sign of a zero")
    # where with a mod condition, in a graph: a periodic mask
    simple("ops", "mod_mask", ["x"],
           lambda: [N("m", "mod", "x", 2), N("c", "lt", "m", 1), N("y", "where", "c", "x", 0)],
           lambda rng: {"x": off_grid(rng, (6,), -4, 4, 1.0)},
           doc="where(mod(x, 2) < 1, x, 0)")


I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1


def intcase(base, inputs, make_nodes, gen, outputs=("y",), doc=None, dtypes=("f64",),
            floats=()):
    """Register base_<i32|i64>_<dtype>: every input but those in floats has
    the integer dtype it; gen(it, rng) -> {input: values} (the ends of it's
    range differ)."""
    for it in INTS:
        def build(dt, _rng, it=it):
            rng = np.random.default_rng(zlib.crc32(base.encode()))
            its = {n: it for n in inputs if n not in floats}
            g = graph(f"{doc or base} ({it})", dt, inputs, make_nodes(it, dt), list(outputs),
                      dtypes=its)
            return g, cast_inputs(dt, gen(it, rng), its), {}
        case("ops", f"{base}_{it}", dtypes)(build)


def int_range(it):
    return (I32_MIN, I32_MAX) if it == "i32" else (I64_MIN, I64_MAX)


def ops_integers():
    ARITH = ["add", "sub", "mul", "div", "mod", "fmod", "maximum", "minimum"]

    def arith_gen(it, rng):
        lo, hi = int_range(it)
        a = [-7, 7, -7, 7, 0, 9, lo, lo, hi, hi, lo, 3, -1, hi // 2 + 1, 6, -6]
        b = [2, 2, -2, -2, 5, 9, -1, 1, 1, -1, lo, lo, hi, 3, -3, 3]
        return {"a": np.array(a, dtype=object), "b": np.array(b, dtype=object)}
    intcase("int_arith", ["a", "b"],
            lambda it, dt: [N("y" + op, op, "a", "b") for op in ARITH], arith_gen,
            outputs=["y" + op for op in ARITH],
            doc="add sub mul div mod fmod maximum minimum of integers: negative division "
                "(toward zero), INT_MIN / -1 and INT_MIN % -1, overflow that wraps")

    def cmp_gen(it, rng):
        lo, hi = int_range(it)
        return {"a": np.array([[lo], [0], [5]], dtype=object),
                "b": np.array([lo, 0, 5, hi], dtype=object)}
    intcase("int_cmp", ["a", "b"], lambda it, dt: [N("y" + op, op, "a", "b") for op in COMPARE],
            cmp_gen, outputs=["y" + op for op in COMPARE],
            doc="the six comparisons of integers, broadcasting [3,1] with [4]: 0/1 in the dtype")

    def un_gen(it, rng):
        lo, hi = int_range(it)
        return {"x": np.array([lo, lo + 1, -5, -1, 0, 1, 5, hi], dtype=object)}
    intcase("int_unary", ["x"],
            lambda it, dt: [N("y" + op, op, "x") for op in ("neg", "abs", "sign")], un_gen,
            outputs=["y" + op for op in ("neg", "abs", "sign")],
            doc="neg, abs, sign of integers; neg and abs of INT_MIN wrap to INT_MIN")

    def red_gen(it, rng):
        lo, hi = int_range(it)
        return {"x": np.array([[hi, 1, 2], [lo, -1, 3]], dtype=object),
                "p": np.array([[hi, 2, 3, 1], [-1, lo, 5, 0], [7, -3, 2, 11]], dtype=object)}
    intcase("int_reduce", ["x", "p"],
            lambda it, dt: [N("s", "sum", "x"), N("s0", "sum", "x", axes=0),
                            N("s1", "sum", "x", axes=-1, keepdims=True),
                            N("q", "prod", "p", axes=1), N("q0", "prod", "p", axes=0),
                            N("qa", "prod", "p"), N("sk", "sum", "p", keepdims=True)],
            red_gen, outputs=["s", "s0", "s1", "q", "q0", "qa", "sk"],
            doc="sum and prod of integers over axes; overflow wraps")

    def weak_gen(it, rng):
        return {"k": np.array([-7, -3, 0, 4, 9], dtype=object)}
    intcase("int_weak", ["k"],
            lambda it, dt: [N("ya", "add", "k", 3), N("ys", "sub", 10, "k"),
                            N("ym", "mul", "k", -2), N("yd", "div", "k", 2),
                            N("yr", "mod", "k", -3), N("yf", "fmod", "k", -3),
                            N("yl", "lt", "k", 0), N("yx", "maximum", "k", 1)],
            weak_gen, outputs=["ya", "ys", "ym", "yd", "yr", "yf", "yl", "yx"],
            doc="integer tensors with weak numbers (integers of their dtype)")

    def bcast_gen(it, rng):
        return {"a": np.array([[[-9, 8, 7]], [[5, -4, 0]]], dtype=object),
                "b": np.array([[2], [-3], [4], [-1]], dtype=object)}
    intcase("int_bcast", ["a", "b"],
            lambda it, dt: [N("yd", "div", "a", "b"), N("yr", "mod", "a", "b"),
                            N("ym", "mul", "a", "b")],
            bcast_gen, outputs=["yd", "yr", "ym"],
            doc="integer div, mod and mul broadcasting [2,1,3] with [4,1]")

    def mixed_gen(it, rng):
        return {"x": uni(rng, (2, 3), -2, 2), "k": np.array([3, -2, 5], dtype=object)}
    intcase("int_mixed", ["x", "k"],
            lambda it, dt: [N("k1", "mul", "k", 2), N("k2", "sub", "k1", 1),
                            N("c", "cast", "k2", dtype=dt), N("y", "mul", "x", "c"),
                            N("ks", "sum", "k2")],
            mixed_gen, outputs=["y", "ks"], floats=("x",), dtypes=("f32", "f64"),
            doc="y = x * cast(2k - 1): integer arithmetic feeding a float value; no "
                "gradient flows into k")


# ----------------------------------------------------------------------------
# Control flow cases
# ----------------------------------------------------------------------------
def B(nodes, result):
    return {"nodes": nodes, "result": result}


def IF(id_, cond, then, else_):
    return {"id": id_, "op": "if", "cond": cond, "then": then, "else": else_}


def ITER(id_, count, init, state, body, index=None):
    d = {"id": id_, "op": "iterate", "count": count, "init": init, "state": state}
    if index:
        d["index"] = index
    d["body"] = body
    return d


def MAP(id_, args, params, body):
    return {"id": id_, "op": "map", "args": args, "params": params, "body": body}


def flow_cases():
    def if_sum():
        return [N("s", "sum", "x"), N("c", "gt", "s", 0),
                IF("r", "c", B([N("t", "mul", "x", "x")], "t"),
                   B([N("e", "sin", "x"), N("e2", "mul", "e", 3)], "e2"))]
    simple("flow", "if_then", ["x"], if_sum,
           lambda rng: {"x": np.array([0.75, -0.5, 1.25, 0.5])}, outputs=["r"],
           doc="if sum(x) > 0 then x*x else 3*sin(x): then selected")
    simple("flow", "if_else", ["x"], if_sum,
           lambda rng: {"x": np.array([-0.75, 0.5, -1.25, -0.5])}, outputs=["r"],
           doc="if sum(x) > 0 then x*x else 3*sin(x): else selected")
    simple("flow", "kink_if_boundary", ["x"], if_sum,
           lambda rng: {"x": np.array([0.5, -0.25, -0.25, 0.0])}, outputs=["r"],
           doc="sum(x) == 0 exactly: else selected, no derivative claimed")
    simple("flow", "if_nanbranch", ["x"],
           lambda: [N("m", "min", "x"), N("c", "gt", "m", 0),
                    IF("r", "c", B([N("l", "log", "x"), N("q", "sqrt", "x"),
                                    N("lq", "add", "l", "q")], "lq"),
                       B([N("sq", "mul", "x", "x"), N("sq2", "add", "sq", "x")], "sq2"))],
           lambda rng: {"x": np.array([1.5, -2.0, 0.75, -0.5])}, outputs=["r"],
           doc="then branch would give NaN (log/sqrt of negatives); it never runs")
    simple("flow", "if_nanbranch_then", ["x"],
           lambda: [N("m", "max", "x"), N("c", "lt", "m", 0),
                    IF("r", "c", B([N("nx", "neg", "x"), N("ls", "log", "nx")], "ls"),
                       B([N("rs", "rsqrt", "x")], "rs"))],
           lambda rng: {"x": np.array([-1.5, -2.0, -0.75])}, outputs=["r"],
           doc="x < 0: then log(-x) runs; else rsqrt(x) would be NaN")
    simple("flow", "if_tworesults", ["x", "y"],
           lambda: [N("sy", "sum", "y"), N("c", "lt", "sy", 1),
                    IF(["p", "q"], "c",
                       B([N("t1", "mul", "x", "y"), N("t2", "exp", "y")], ["t1", "t2"]),
                       B([N("e1", "sub", "x", "y"), N("e2", "neg", "y")], ["e1", "e2"]))],
           lambda rng: {"x": uni(rng, (3,), -1, 1), "y": np.array([0.25, -0.5, 0.75])},
           outputs=["p", "q"], doc="if with two results (then selected)")
    simple("flow", "if_nested_a", ["x"],
           lambda: [N("s", "sum", "x"), N("c", "gt", "s", 0),
                    IF("r", "c",
                       B([N("mx", "max", "x"), N("c2", "gt", "mx", 1),
                          IF("r2", "c2", B([N("a1", "mul", "x", 2)], "a1"),
                             B([N("b1", "square", "x")], "b1"))], "r2"),
                       B([N("d1", "tanh", "x")], "d1"))],
           lambda rng: {"x": np.array([1.5, -0.25, 0.5])}, outputs=["r"],
           doc="if inside if: outer then, inner then")
    simple("flow", "if_nested_b", ["x"],
           lambda: [N("s", "sum", "x"), N("c", "gt", "s", 0),
                    IF("r", "c",
                       B([N("mx", "max", "x"), N("c2", "gt", "mx", 1),
                          IF("r2", "c2", B([N("a1", "mul", "x", 2)], "a1"),
                             B([N("b1", "square", "x")], "b1"))], "r2"),
                       B([N("d1", "tanh", "x")], "d1"))],
           lambda rng: {"x": np.array([0.5, -0.25, 0.75])}, outputs=["r"],
           doc="if inside if: outer then, inner else")
    # iterate
    simple("flow", "iterate_square_plus_one", ["x"],
           lambda: [ITER(["y"], 3, ["x"], ["s"],
                         B([N("s2", "mul", "s", "s"), N("s1", "add", "s2", 1)], ["s1"]))],
           lambda rng: {"x": np.array([1.0, 2.0])}, outputs=["y"], seed_ones=True,
           expect={"out/y": [26, 677], "grad/x": [80, 2080]},
           doc="y -> y*y + 1, 3 times, from [1, 2]: [26, 677], gradient [80, 2080]")
    simple("flow", "iterate_twostate", ["a", "b"],
           lambda: [ITER(["an", "bn"], 4, ["a", "b"], ["u", "v"],
                         B([N("u0", "mul", "u", 0.5), N("vi", "mul", "v", "i"),
                            N("u1", "add", "u0", "vi"), N("uv", "add", "u", "v"),
                            N("v1", "sin", "uv")], ["u1", "v1"]), index="i")],
           lambda rng: {"a": uni(rng, (3,), -1, 1), "b": uni(rng, (3,), -1, 1)},
           outputs=["an", "bn"], doc="u1 = u/2 + v*i, v1 = sin(u+v); 4 steps, index i")
    simple("flow", "iterate_zero", ["x"],
           lambda: [ITER("y", 0, ["x"], ["s"], B([N("s1", "exp", "s")], "s1")),
                    N("z", "mul", "y", 3)],
           lambda rng: {"x": uni(rng, (3,), -1, 1)}, outputs=["z"],
           doc="count 0 returns init: z = 3*x")
    simple("flow", "iterate_capture", ["x", "w", "c"],
           lambda: [ITER("h", 3, ["x"], ["s"],
                         B([N("sw", "matmul", "s", "w"), N("swc", "add", "sw", "c"),
                            N("s1", "tanh", "swc")], "s1"))],
           lambda rng: {"x": uni(rng, (3,), -1, 1), "w": uni(rng, (3, 3), -1, 1),
                        "c": np.array(0.25)}, outputs=["h"],
           doc="RNN-like step capturing outer inputs w and c (0-d)")
    simple("flow", "iterate_newton_sqrt", ["a"],
           lambda: [ITER("r", 6, ["a"], ["y"],
                         B([N("q", "div", "a", "y"), N("yq", "add", "y", "q"),
                            N("y1", "mul", "yq", 0.5)], "y1"))],
           lambda rng: {"a": uni(rng, (4,), 0.5, 4)}, outputs=["r"],
           doc="Newton for sqrt(a): y <- (y + a/y)/2, 6 steps from y = a")
    simple("flow", "iterate_if", ["x"],
           lambda: [ITER(["y"], 4, ["x"], ["s"],
                         B([N("ss", "sum", "s"), N("c", "gt", "ss", 2),
                            IF("n", "c", B([N("h", "mul", "s", 0.5)], "h"),
                               B([N("g1", "mul", "s", 1.5), N("g2", "add", "g1", "k"),
                                  N("g3", "sin", "g2"), N("g4", "add", "g1", "g3")], "g4"))],
                           ["n"], ), index="k")],
           lambda rng: {"x": np.array([0.5, 0.25, 0.75])}, outputs=["y"],
           doc="if inside iterate: halve when sum > 2, else grow")
    # map
    def piecewise():
        return [MAP("y", ["x"], ["p"],
                    B([N("c", "gt", "p", 0),
                       IF("r", "c", B([N("pp", "mul", "p", "p")], "pp"),
                          B([N("np_", "neg", "p")], "np_"))], "r"))]
    # the elementwise additions in a map body (forward-mode derivatives)
    def map_additions(rng):
        b = signed(rng, (2, 3), 1.1, 1.8)  # trunc(b) = +-1, away from its jumps
        return {"x": quotient_away(rng, b, -2, 2), "y": b}
    simple("flow", "map_additions", ["x", "y"],
           lambda: [MAP("z", ["x", "y"], ["a", "b"],
                        B([N("m", "mod", "a", "b"), N("f", "fmod", "a", "b"),
                           N("s", "sinh", "m"), N("t", "atan", "f"), N("u", "add", "s", "t"),
                           N("h", "asinh", "u"), N("c", "cosh", "b"), N("v", "mul", "h", "c"),
                           N("w", "trunc", "b"), N("q", "mul", "v", "w")], "q"))],
           map_additions, outputs=["z"],
           doc="map: asinh(sinh(mod(a, b)) + atan(fmod(a, b))) * cosh(b) * trunc(b)")
    simple("flow", "map_piecewise", ["x"], piecewise,
           lambda rng: {"x": away(rng, (2, 3), -2, 2)}, outputs=["y"],
           doc="map: if x > 0 then x*x else -x")
    simple("flow", "kink_map_piecewise", ["x"], piecewise,
           lambda rng: {"x": np.array([0.0, 1.5, -0.5])}, outputs=["y"],
           doc="map: if x > 0 then x*x else -x, at x = 0 (else branch)")
    simple("flow", "map_piecewise_zero", ["x"],
           lambda: [MAP("y", ["x"], ["p"],
                        B([N("c", "eq", "p", 0),
                           IF("r", "c", B([], "p"),
                              B([N("q1", "mul", "p", "p"), N("q2", "div", "q1", "p"),
                                 N("q3", "neg", "q2")], "q3"))], "r"))],
           lambda rng: {"x": np.array([0.0, 2.0, -3.0])}, outputs=["y"], seed_ones=True,
           dtypes=("f64",), expect={"out/y": [0, -2, 3], "grad/x": [1, -1, -1]}, boundary=True,
           doc="map: if x == 0 then x else -(x*x/x) over [0, 2, -3]; x = 0 is ON the "
               "branch boundary (required name, no kink_ prefix)")
    simple("flow", "map_sqrt_guard", ["x"],
           lambda: [MAP("y", ["x"], ["p"],
                        B([N("c", "gt", "p", 0),
                           IF("r", "c", B([N("sq", "sqrt", "p")], "sq"),
                              B([N("mp", "mul", "p", -0.5)], "mp"))], "r"))],
           lambda rng: {"x": away(rng, (2, 3), -2, 2, margin=0.1)}, outputs=["y"],
           doc="map: if x > 0 then sqrt(x) else -x/2 (sqrt of negatives never runs)")
    simple("flow", "map_bcast_capture", ["x", "y", "s"],
           lambda: [MAP("z", ["x", "y"], ["a", "b"],
                        B([N("as_", "mul", "a", "s"), N("bs", "sub", "b", "s"),
                           N("sb", "sin", "bs"), N("r", "add", "as_", "sb")], "r"))],
           lambda rng: {"x": uni(rng, (3, 1), -2, 2), "y": uni(rng, (4,), -2, 2),
                        "s": np.array(0.7)}, outputs=["z"],
           doc="map over [3,1] x [4] capturing a 0-d input s: a*s + sin(b - s)")
    simple("flow", "map_iterate", ["x"],
           lambda: [MAP("y", ["x"], ["p"],
                        B([ITER(["t"], 3, ["p"], ["u"],
                                B([N("u0", "mul", "u", 0.5), N("us", "sin", "u"),
                                   N("pj", "mul", "p", "j"), N("u1a", "add", "u0", "us"),
                                   N("u1", "add", "u1a", "pj")], ["u1"]), index="j")],
                          "t"))],
           lambda rng: {"x": uni(rng, (2, 3), -2, 2)}, outputs=["y"],
           doc="map with iterate inside: u <- u/2 + sin(u) + p*j, 3 steps")
    simple("flow", "iterate_map", ["x"],
           lambda: [ITER("y", 3, ["x"], ["s"],
                         B([MAP("m", ["s"], ["p"],
                                B([N("c", "gt", "p", 0),
                                   IF("r", "c", B([N("sq", "sqrt", "p")], "sq"),
                                      B([N("pp", "mul", "p", "p"), N("pm", "sub", "pp", 0.5)],
                                        "pm"))], "r")),
                            N("s1", "add", "m", 0.125)], "s1"))],
           lambda rng: {"x": np.array([1.5, -0.25, 0.8, -1.5])}, outputs=["y"],
           doc="map inside iterate: s <- map(p > 0 ? sqrt(p) : p*p - 0.5)(s) + 1/8")


# ----------------------------------------------------------------------------
README = {
    "ops": "every op of spec/ops.md except control flow",
    "flow": "control flow: if, iterate, map (spec/graph.md)",
}


def write_readme(folder, names):
    kinks = sum(n.startswith("kink_") for n in names)
    text = f"""# Reference fixtures: {README[folder]}
Generated by tests/gen/gen_op_fixtures.py (PyTorch 1.13, float64); regenerate
with `/usr/bin/python3 tests/gen/gen_op_fixtures.py`, never edit by hand.
Case CASE = <op>_<variant>_<f32|f64>: CASE.json is a tl graph (version 1),
CASE.npz (np.savez layout) holds in/NAME (inputs, tested dtype),
seed/OUT (cotangent, the output's dtype), out/OUT and grad/NAME (float64:
expected value and vector-Jacobian product w.r.t. the seeds; zeros for
inputs that reach no output). kink_* cases ({kinks} here) sit on a kink or
branch boundary: compare with the reference only, no finite differences.
All other cases stay >= 1e-2 away from kinks (checked by central differences),
except that differences cannot see `detach` (graphs using it) and a cast to
f32 rounds the value (use a step >= 1e-3 there).
"""
    if folder == "flow":
        text += "Exception: map_piecewise_zero_f64 (required name) has x = 0 on its branch boundary.\n"
    if folder == "ops":
        text += """Index tensors: a case using them is named <op>_<variant>_<i32|i64>_<f32|f64>
(index dtype, then value dtype; xent_example_f32 has i64 labels). Its
in/NAME for an index input is int32 / int64 and has no grad/NAME (never
differentiated; finite differences skip it); an index output keeps its
integer dtype in out/OUT and its seed/OUT is all zeros of that dtype (not
seeded). xent_* references come from torch.nn.functional.cross_entropy;
xent_example_f32 is examples/xent.json verbatim with the inputs of
examples/xent_inputs.npz. int_* cases are the integer arithmetic of nn.md
(exact, wrapping): their integer outputs are compared exactly.
"""
    with open(os.path.join(OUT_DIRS[folder], "README.md"), "w") as f:
        f.write(text)


def main():
    validator_selftest()
    ops_binary()
    ops_unary()
    ops_reduce()
    ops_matmul()
    ops_shape()
    ops_graphs()
    ops_index()
    ops_additions()
    ops_integers()
    flow_cases()
    for d in OUT_DIRS.values():
        os.makedirs(d, exist_ok=True)
        for fn in os.listdir(d):
            if fn.endswith((".json", ".npz")):
                os.remove(os.path.join(d, fn))
    done = {k: [] for k in OUT_DIRS}
    for folder, name, dt, build in CASES:
        base = name.rsplit("_", 1)[0]
        g, arrays, kw = build(dt, np.random.default_rng(zlib.crc32(base.encode())))
        if name in done[folder]:
            raise AssertionError(f"duplicate case {name}")
        done[folder].append(make_case(folder, name, g, arrays, **kw))
    for folder, names in done.items():
        write_readme(folder, names)
        size = sum(os.path.getsize(os.path.join(OUT_DIRS[folder], f))
                   for f in os.listdir(OUT_DIRS[folder]))
        print(f"{folder}: {len(names)} cases, {size} bytes")
    total = sum(os.path.getsize(os.path.join(d, f)) for d in OUT_DIRS.values()
                for f in os.listdir(d))
    assert total < 2_000_000, f"fixtures too large: {total} bytes"


if __name__ == "__main__":
    sys.exit(main())
