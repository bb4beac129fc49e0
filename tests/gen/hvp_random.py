#!/usr/bin/python3
"""Random graphs for second derivatives (tests/fixtures/hvp_random/).

    /usr/bin/python3 tests/gen/hvp_random.py

A differential test of tl jvp / tl hvp against PyTorch 1.13 at float64:
graph k (k = 0..COUNT-1) is built from numpy's generator seeded with k.
It mixes elementwise unary and binary ops (NumPy broadcasting, weak scalar
and tensor constants), reductions over random axes, softmax, matmul in
its shapes, shape moves, values used more than once, and `if`, `iterate`
and `map` (with branches inside).  The builder evaluates each node as it
adds it and keeps its inputs away from kinks (abs, relu, clamp, maximum,
max reductions, branch conditions) and from the edges of domains (log,
sqrt, acosh, atanh, division...): an operand that would be too close is
first moved into the domain by a smooth node of its own.

Files, byte-identical on re-runs:
  graphs.jsonl  one graph per line; its inputs declare dtype and shape
  values.npz    deflated; key rK (K the seed) holds one float64 vector:
                the inputs (declaration order), the seeds of the outputs,
                the tangents of the inputs, the hvp of every input, the jvp
                of every output, each flattened row-major
References are those of hvpfix.py: the Hessian of <seed, outputs> times
the tangents (double backward) and torch.autograd.functional.jvp.
"""

import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_op_fixtures as G  # noqa: E402
import hvpfix as H  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "hvp_random")
COUNT = int(os.environ.get("HVP_RANDOM_COUNT", 300))
N = G.N
MARGIN = 0.05
BOUND = 30.0  # every value stays within this magnitude

SMOOTH = ["neg", "exp", "expm1", "sin", "cos", "tanh", "sigmoid", "erf", "square", "softplus",
          "gelu", "silu", "sinh", "cosh", "atan", "asinh"]
# op -> (predicate of an operand inside the domain, the node that moves any
# value there: (op, constant))
DOMAIN = {"log": (lambda x: x > 0.2, "pos"), "sqrt": (lambda x: x > 0.2, "pos"),
          "rsqrt": (lambda x: x > 0.2, "pos"), "log1p": (lambda x: x > -0.8, "pos"),
          "reciprocal": (lambda x: np.abs(x) > 0.3, "pos"), "acosh": (lambda x: x > 1.2, "gt1"),
          "atanh": (lambda x: np.abs(x) < 0.8, "unit"), "asin": (lambda x: np.abs(x) < 0.8, "unit"),
          "acos": (lambda x: np.abs(x) < 0.8, "unit"), "tan": (lambda x: np.abs(np.cos(x)) > 0.3, "unit")}
KINKED = ["abs", "relu", "clamp"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
REDUCE = ["sum", "mean", "max", "min", "prod", "logsumexp"]


class Reject(Exception):
    pass


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.arrays, self.nodes, self.consts = {}, [], {}
        self.val = {}     # top-level name -> float64 value
        self.pool = []    # names ops may read
        self.n = 0

    # ---- names, inputs, evaluation ----
    def fresh(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def shape(self, rank=None):
        r = self.rng.integers(0, 4) if rank is None else rank
        return [int(d) for d in self.rng.integers(1, 4, r)]

    def new_input(self, shape):
        name = f"x{len(self.arrays)}"
        self.arrays[name] = np.round(self.rng.uniform(-1.5, 1.5, shape), 6)
        self.val[name] = self.arrays[name]
        self.pool.append(name)
        return name

    def new_const(self, shape):
        name = f"k{len(self.consts)}"
        data = np.round(self.rng.uniform(-1.5, 1.5, shape), 3)
        self.consts[name] = {"shape": list(shape), "data": data.reshape(-1).tolist()}
        self.val[name] = data
        return name

    def graph(self, outputs):
        g = {"version": 1, "doc": f"random graph, seed {self.seed}",
             "inputs": [{"name": n, "shape": list(a.shape)} for n, a in self.arrays.items()]}
        if self.consts:
            g["consts"] = self.consts
        g["nodes"] = self.nodes
        g["outputs"] = outputs
        return g

    def add(self, nd):
        """Appends nd (a top-level node) and returns its value; Reject (and
        nothing appended) when a value leaves the bounds."""
        ids = nd["id"] if isinstance(nd["id"], list) else [nd["id"]]
        self.nodes.append(nd)
        try:
            with torch.no_grad():
                outs = G.interpret(self.graph(ids), {n: (torch.tensor(a), "f64") for n, a in self.arrays.items()})
        except (G.GraphError, RuntimeError, IndexError, ValueError) as e:
            self.nodes.pop()
            raise Reject(str(e))
        vs = [o.t.numpy().astype(np.float64) for o in outs]
        if not all(np.all(np.isfinite(v)) and np.all(np.abs(v) <= BOUND) for v in vs):
            self.nodes.pop()
            raise Reject("out of bounds")
        for i, v in zip(ids, vs):
            self.val[i] = v
            self.pool.append(i)
        return vs[0]

    def op(self, op, *args, **attrs):
        name = self.fresh("n")
        self.add(N(name, op, *args, **attrs))
        return name

    def pick(self, cond=lambda v: True):
        cands = [n for n in self.pool if cond(self.val[n])]
        if not cands:
            raise Reject("nothing to pick")
        # mostly recent values, sometimes old ones (values used twice)
        if self.rng.random() < 0.6:
            return cands[-1 - int(self.rng.integers(0, min(3, len(cands))))]
        return cands[int(self.rng.integers(0, len(cands)))]

    # ---- operands ----
    def into(self, kind, a):
        """A smooth node that moves a's values into a domain."""
        c = float(np.round(self.rng.uniform(0.3, 1.0), 2))
        if kind == "pos":
            return self.op("add", self.op("square", a), c)
        if kind == "gt1":
            return self.op("add", self.op("square", a), 1.0 + c)
        return self.op("mul", self.op("tanh", a), 0.7)

    def bcast_shape(self, shape):
        """A shape that broadcasts against shape (a suffix, some sizes 1)."""
        k = int(self.rng.integers(0, len(shape) + 1))
        s = list(shape[len(shape) - k:])
        return [1 if self.rng.random() < 0.3 else d for d in s]

    def other(self, a):
        """A second operand for a: a weak scalar, a constant, a value of
        the pool, or a new input, broadcasting against a."""
        shape = list(self.val[a].shape)
        r = self.rng.random()
        if r < 0.2:
            return float(np.round(self.rng.uniform(-2, 2), 2)) or 0.5
        if r < 0.35:
            return self.new_const(self.bcast_shape(shape))
        fits = [n for n in self.pool if n != a and broadcasts(self.val[n].shape, shape)]
        if r < 0.7 and fits:
            return fits[int(self.rng.integers(0, len(fits)))]
        if r < 0.75:
            return a  # the same value twice
        return self.new_input(self.bcast_shape(shape) if self.rng.random() < 0.7 else shape)

    def value(self, b):
        return np.float64(b) if isinstance(b, float) else self.val[b]

    # ---- the node kinds ----
    def unary(self):
        a = self.pick()
        r = self.rng.random()
        if r < 0.45:
            return self.op(SMOOTH[int(self.rng.integers(0, len(SMOOTH)))], a)
        if r < 0.8:
            op = list(DOMAIN)[int(self.rng.integers(0, len(DOMAIN)))]
            ok, kind = DOMAIN[op]
            if not np.all(ok(self.val[a])):
                a = self.into(kind, a)
                if not np.all(ok(self.val[a])):
                    raise Reject("domain")
            return self.op(op, a)
        op = KINKED[int(self.rng.integers(0, len(KINKED)))]
        v = self.val[a]
        if op == "clamp":
            lo, hi = np.quantile(v, 0.3) - 0.3, np.quantile(v, 0.7) + 0.3
            lo, hi = float(np.round(lo, 2)), float(np.round(hi, 2))
            if np.min(np.abs(v - lo)) < MARGIN or np.min(np.abs(v - hi)) < MARGIN:
                raise Reject("clamp kink")
            attrs = {"min": lo, "max": hi} if self.rng.random() < 0.6 else {"max": hi}
            return self.op("clamp", a, **attrs)
        if np.min(np.abs(v)) < MARGIN:
            raise Reject("kink at 0")
        return self.op(op, a)

    def binary(self):
        a = self.pick()
        op = BINARY[int(self.rng.integers(0, len(BINARY)))]
        b = self.other(a)
        va, vb = self.val[a], self.value(b)
        if op == "div" and not np.all(np.abs(vb) > 0.3):
            if isinstance(b, float):
                b = 1.5
            else:
                b = self.into("pos", b)
        if op == "pow":
            if not np.all(va > 0.2):
                a = self.into("pos", a)
            if not isinstance(b, float):
                b = self.op("mul", self.op("tanh", b), 2.0)
        if op in ("maximum", "minimum"):
            if b == a or np.min(np.abs(va - self.value(b))) < MARGIN:
                raise Reject("tie")
        if op == "pow" and self.rng.random() < 0.2:  # a weak base
            return self.op("pow", float(np.round(self.rng.uniform(0.3, 2.5), 2)), a)
        args = [a, b] if self.rng.random() < 0.7 or op == "pow" else [b, a]
        return self.op(op, *args)

    def where(self):
        a = self.pick()
        b = self.other(a)
        c = self.pick(lambda v: broadcasts(v.shape, self.val[a].shape))
        t = float(np.round(self.rng.uniform(-0.5, 0.5), 2))
        if np.min(np.abs(self.val[c] - t)) < MARGIN:
            raise Reject("tie")
        cond = self.op(["gt", "le"][int(self.rng.integers(0, 2))], c, t)
        return self.op("where", cond, *([a, b] if self.rng.random() < 0.5 else [b, a]))

    def reduction(self):
        a = self.pick(lambda v: v.ndim > 0)
        v = self.val[a]
        op = REDUCE[int(self.rng.integers(0, len(REDUCE)))]
        attrs = {}
        if self.rng.random() < 0.7:
            axes = sorted(int(x) for x in self.rng.choice(v.ndim, int(self.rng.integers(1, v.ndim + 1)),
                                                          replace=False))
            attrs["axes"] = [x - v.ndim if self.rng.random() < 0.3 else x for x in axes]
        else:
            axes = list(range(v.ndim))
        if self.rng.random() < 0.4:
            attrs["keepdims"] = True
        if op in ("max", "min"):
            rest = [d for d in range(v.ndim) if d not in axes]
            w = np.sort(v.transpose(rest + axes).reshape([v.shape[d] for d in rest] + [-1]), axis=-1)
            if w.shape[-1] > 1 and np.min(np.abs(w[..., -1] - w[..., -2]) if op == "max"
                                          else np.abs(w[..., 1] - w[..., 0])) < MARGIN:
                raise Reject("tie")
        return self.op(op, a, **attrs)

    def softmax(self):
        a = self.pick(lambda v: v.ndim > 0)
        op = "softmax" if self.rng.random() < 0.5 else "log_softmax"
        return self.op(op, a, axis=int(self.rng.integers(-self.val[a].ndim, self.val[a].ndim)))

    def matmul(self):
        a = self.pick(lambda v: v.ndim > 0)
        s = list(self.val[a].shape)
        k = s[-1]
        r = self.rng.random()
        if len(s) >= 2 and r < 0.2:  # a @ a^T: one value on both sides
            axes = list(range(len(s) - 2)) + [len(s) - 1, len(s) - 2]
            return self.op("matmul", a, self.op("transpose", a, axes=axes))
        n = int(self.rng.integers(1, 4))
        if r < 0.4:
            b = [k]
        elif r < 0.8:
            b = [k, n]
        else:
            b = [int(self.rng.integers(1, 3)), k, n]
        b = self.new_input(b) if self.rng.random() < 0.8 else self.new_const(b)
        if len(s) >= 2 and self.rng.random() < 0.3:  # a as the right operand
            left = self.new_input([int(self.rng.integers(1, 4)), s[-2]])
            return self.op("matmul", left, a)
        return self.op("matmul", a, b)

    def move(self):
        a = self.pick()
        s = list(self.val[a].shape)
        r = self.rng.random()
        if r < 0.2 and len(s) >= 2:
            return self.op("transpose", a, axes=[int(x) for x in self.rng.permutation(len(s))])
        if r < 0.35:
            return self.op("reshape", a, shape=[-1] if self.rng.random() < 0.5 else s[::-1])
        if r < 0.5:
            return self.op("expand_dims", a, axis=int(self.rng.integers(0, len(s) + 1)))
        if r < 0.65 and s and max(s) > 1:
            ax = int(np.argmax(s))
            return self.op("slice", a, axis=ax, start=int(self.rng.integers(0, s[ax] - 1)), stop=s[ax],
                           step=int(self.rng.integers(1, 3)))
        if r < 0.8 and s:
            same = [n for n in self.pool if list(self.val[n].shape) == s]
            b = same[int(self.rng.integers(0, len(same)))]
            ax = int(self.rng.integers(0, len(s)))
            return self.op("concat" if self.rng.random() < 0.5 else "stack", a, b, axis=ax)
        if r < 0.85:
            return self.op("broadcast_to", a, shape=[2] + s)
        if r < 0.9 and 1 in s:
            return self.op("squeeze", a) if self.rng.random() < 0.5 else self.op("squeeze", a, axes=[s.index(1)])
        if s:
            ax = int(self.rng.integers(0, len(s)))
            idx = [int(i) for i in self.rng.integers(-s[ax], s[ax], int(self.rng.integers(1, 4)))]
            return self.op("take", a, axis=ax, indices=idx)
        return self.op("square", a)

    def index_const(self, shape, hi):
        name = f"k{len(self.consts)}"
        data = self.rng.integers(-hi, hi, shape)
        self.consts[name] = {"dtype": "i64", "shape": list(shape), "data": [int(i) for i in data.reshape(-1)]}
        return name

    def gather(self):
        """take with an index constant, or gather (numpy.take_along_axis)."""
        a = self.pick(lambda v: v.ndim > 0)
        s = list(self.val[a].shape)
        ax = int(self.rng.integers(0, len(s)))
        if self.rng.random() < 0.5:
            idx = self.index_const(self.shape(int(self.rng.integers(0, 3))), s[ax])
            return self.op("take", a, idx, axis=ax)
        shape = list(s)
        shape[ax] = int(self.rng.integers(1, 4))
        return self.op("gather", a, self.index_const(shape, s[ax]), axis=ax)

    def nn(self):
        """A layer op of nn.md on a value seen as [N, C, L]."""
        a = self.pick(lambda v: v.size >= 2)
        v = self.val[a]
        if v.ndim != 3:
            a = self.op("reshape", a, shape=[1, 1, -1])
            v = self.val[a]
        n, c, L = v.shape
        kind = ["conv", "max_pool", "avg_pool", "layer_norm", "group_norm", "batch_norm", "cumsum", "pad",
                "resize"][int(self.rng.integers(0, 9))]
        if kind == "conv":
            k = int(self.rng.integers(1, min(L, 3) + 1))
            groups = c if c > 1 and self.rng.random() < 0.5 else 1
            w = self.new_input([int(self.rng.integers(1, 3)) * groups, c // groups, k])
            args = [a, w] + ([self.new_input([self.val[w].shape[0]])] if self.rng.random() < 0.5 else [])
            return self.op("conv", *args, padding=int(self.rng.integers(0, 2)), stride=int(self.rng.integers(1, 3)),
                           groups=groups)
        if kind in ("max_pool", "avg_pool"):
            k = int(self.rng.integers(1, min(L, 3) + 1))
            stride = int(self.rng.integers(1, 3))
            if kind == "max_pool":
                win = torch.tensor(v).unfold(2, k, stride).numpy()
                w = np.sort(win, axis=-1)
                if k > 1 and np.min(w[..., -1] - w[..., -2]) < MARGIN:
                    raise Reject("tie")
                return self.op("max_pool", a, kernel=k, stride=stride)
            return self.op("avg_pool", a, kernel=k, stride=stride, padding=int(self.rng.integers(0, k // 2 + 1)))
        if kind == "layer_norm":
            if L < 2:
                raise Reject("a single element")
            args = [a] + ([self.new_input([L]), self.new_input([L])] if self.rng.random() < 0.5 else [])
            return self.op("layer_norm", *args)
        if kind == "group_norm":
            if c * L // c < 2 and L < 2:
                raise Reject("a single element")
            return self.op("group_norm", a, self.new_input([c]), self.new_input([c]), groups=1)
        if kind == "batch_norm":
            if n * L < 2:
                raise Reject("a single element")
            ms = [self.new_input([c]), self.new_input([c]), self.new_const([c]),
                  self.op("add", self.op("square", self.new_const([c])), 0.5)]
            return self.op("batch_norm", a, *ms, training=bool(self.rng.random() < 0.6))
        if kind == "cumsum":
            return self.op("cumsum", a, axis=int(self.rng.integers(-3, 3)), exclusive=bool(self.rng.random() < 0.5),
                           reverse=bool(self.rng.random() < 0.5))
        if kind == "pad":
            mode = ["constant", "reflect", "edge", "wrap"][int(self.rng.integers(0, 4))]
            hi = L - 1 if mode == "reflect" else 2
            pads = [[0, 0], [0, 0], [int(self.rng.integers(0, hi + 1)), int(self.rng.integers(0, hi + 1))]]
            attrs = {"value": 0.5} if mode == "constant" else {}
            return self.op("pad", a, pads=pads, mode=mode, **attrs)
        return self.op("resize", a, size=[int(self.rng.integers(1, 6))], mode="linear",
                       coordinate=["half_pixel", "align_corners"][int(self.rng.integers(0, 2))])

    def smooth_chain(self, x, caps, tag):
        """Block nodes: one or two smooth ops on x (and captured caps, each
        broadcasting to x's shape); returns (nodes, result)."""
        nodes, cur = [], x
        for i in range(int(self.rng.integers(1, 3))):
            name = f"{tag}{i}"
            if caps and self.rng.random() < 0.5:
                nodes.append(N(name, ["mul", "add", "sub"][int(self.rng.integers(0, 3))], cur,
                               caps[int(self.rng.integers(0, len(caps)))]))
            else:
                nodes.append(N(name, ["sin", "tanh", "cos", "sigmoid", "atan", "erf"][int(self.rng.integers(0, 6))],
                               cur))
            cur = name
        return nodes, cur

    def if_node(self):
        a = self.pick()
        s = self.val[a]
        cond_src = a if s.ndim == 0 else self.op("sum", a)
        sv = float(self.val[cond_src])
        c = float(np.round(sv + self.rng.choice([-1, 1]) * self.rng.uniform(0.2, 1.0), 3))
        cond = self.op(["gt", "lt"][int(self.rng.integers(0, 2))], cond_src, c)
        x = self.pick()
        shape = self.val[x].shape
        caps = [n for n in self.pool if broadcasts(self.val[n].shape, shape) and
                np.broadcast_shapes(self.val[n].shape, shape) == shape]
        tn, tr = self.smooth_chain(x, caps, self.fresh("t"))
        en, er = self.smooth_chain(x, caps, self.fresh("e"))
        return_name = self.fresh("r")
        self.add({"id": return_name, "op": "if", "cond": cond,
                  "then": {"nodes": tn, "result": tr}, "else": {"nodes": en, "result": er}})
        return return_name

    def iterate(self):
        h = self.pick()
        shape = self.val[h].shape
        caps = [n for n in self.pool if broadcasts(self.val[n].shape, shape) and
                np.broadcast_shapes(self.val[n].shape, shape) == shape]
        w = caps[int(self.rng.integers(0, len(caps)))]
        x = caps[int(self.rng.integers(0, len(caps)))]
        t = self.fresh("i")
        body = [N(t + "m", "mul", t + "h", w), N(t + "n", ["tanh", "sin"][int(self.rng.integers(0, 2))], t + "m"),
                N(t + "o", "add", t + "n", x)]
        nd = {"id": [self.fresh("h")], "op": "iterate", "count": int(self.rng.integers(0, 5)),
              "init": [h], "state": [t + "h"], "body": {"nodes": body, "result": [t + "o"]}}
        r = self.rng.random()
        if r < 0.2:  # a branch in the body, on a condition of the enclosing scope
            src = self.pick(lambda v: v.ndim == 0)
            thr = float(np.round(float(self.val[src]) + self.rng.choice([-1, 1]) * self.rng.uniform(0.2, 1), 3))
            cond = self.op("gt", src, thr)
            body[-1:] = [{"id": t + "f", "op": "if", "cond": cond,
                          "then": {"nodes": [N(t + "f1", "add", t + "n", x)], "result": t + "f1"},
                          "else": {"nodes": [N(t + "f2", "mul", t + "n", x), N(t + "f3", "sin", t + "f2")],
                                   "result": t + "f3"}}]
            nd["body"]["result"] = [t + "f"]
        elif r < 0.6:  # a second state, and the step index
            u = self.pick(lambda v: v.shape == shape)
            body[-1] = N(t + "o", "add", t + "n", t + "u0")
            body += [N(t + "p", "mul", t + "u0", 0.5), N(t + "u", "add", t + "p", t + "k"),
                     N(t + "v", "sin", t + "u"), N(t + "w", "mul", t + "v", t + "h")]
            nd.update({"id": [nd["id"][0], self.fresh("u")], "init": [h, u], "state": [t + "h", t + "u0"], "index": t + "k"})
            nd["body"]["result"] = [t + "o", t + "w"]
        self.add(nd)
        return nd["id"][0]

    def map_node(self):
        p = self.pick()
        q = self.other(p)
        if isinstance(q, float):
            q = self.new_input([])
        vp = np.broadcast_to(self.val[p], np.broadcast_shapes(self.val[p].shape, self.val[q].shape))
        scal = [n for n in self.pool if self.val[n].ndim == 0 and n not in (p, q)]
        t = self.fresh("m")
        cap = scal[int(self.rng.integers(0, len(scal)))] if scal and self.rng.random() < 0.6 else None
        thr = float(np.round(self.rng.uniform(-0.5, 0.5), 2))
        r = self.rng.random()
        if r < 0.15:  # a recurrence in the body
            body = [{"id": [t + "i"], "op": "iterate", "count": int(self.rng.integers(1, 4)), "init": [t + "p"],
                     "state": [t + "s"], "body": {"nodes": [N(t + "s1", "sin", t + "s"),
                                                            N(t + "s2", "mul", t + "s1", t + "q")],
                                                  "result": [t + "s2"]}}]
            res = t + "i"
        elif np.min(np.abs(vp - thr)) < MARGIN or r < 0.3:
            body = [N(t + "a", "mul", t + "p", t + "q"), N(t + "b", "sin", t + "a")]
            res = t + "b"
        else:
            then = [N(t + "a", "mul", t + "p", t + "q"), N(t + "b", "sin", t + "a")]
            els = [N(t + "c", "exp", t + "p"), N(t + "d", "mul", t + "c", cap or t + "q")]
            body = [N(t + "g", "gt", t + "p", thr),
                    {"id": t + "r", "op": "if", "cond": t + "g", "then": {"nodes": then, "result": t + "b"},
                     "else": {"nodes": els, "result": t + "d"}}]
            res = t + "r"
        if cap and self.rng.random() < 0.5:
            body.append(N(t + "z", "add", res, cap))
            res = t + "z"
        name = self.fresh("m")
        self.add({"id": name, "op": "map", "args": [p, q], "params": [t + "p", t + "q"],
                  "body": {"nodes": body, "result": res}})
        return name


def read_names(nodes):
    """Every name the nodes (and their blocks) read."""
    seen = set()
    for nd in nodes:
        seen |= {a for a in nd.get("args", []) + nd.get("init", []) if isinstance(a, str)}
        if "cond" in nd:
            seen.add(nd["cond"])
        for k in ("then", "else", "body"):
            if k in nd:
                seen |= read_names(nd[k]["nodes"])
                r = nd[k]["result"]
                seen |= set(r if isinstance(r, list) else [r])
    return seen


def broadcasts(a, b):
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
        return True
    except ValueError:
        return False


KINDS = [("unary", 30), ("binary", 30), ("where", 4), ("gather", 4), ("nn", 6), ("reduction", 10), ("softmax", 4), ("matmul", 8), ("move", 10),
         ("if_node", 4), ("iterate", 3), ("map_node", 3)]


def build(seed):
    """Graph `seed`: (graph, arrays, outputs)."""
    b = Builder(seed)
    for _ in range(int(b.rng.integers(1, 3))):
        b.new_input(b.shape())
    want = int(b.rng.integers(3, 9))
    kinds = [k for k, _ in KINDS]
    weights = np.array([w for _, w in KINDS], dtype=float)
    tries = 0
    made = 0
    while made < want and tries < 200:
        tries += 1
        kind = kinds[int(b.rng.choice(len(kinds), p=weights / weights.sum()))]
        keep = (list(b.nodes), dict(b.arrays), dict(b.consts), list(b.pool), b.n)
        try:
            getattr(b, kind)()
            made += 1
        except (Reject, G.GraphError, ValueError):
            b.nodes, b.arrays, b.consts, b.pool, b.n = keep
    used = read_names(b.nodes)
    tops = [n for n in b.pool if n not in b.arrays and n not in b.consts]
    if not tops:
        tops = [b.op("sin", b.pick())]
    # the outputs: the values nothing reads (the last first), at most three
    outs = [n for n in reversed(tops) if n not in used][:3] or [tops[-1]]
    r = b.rng.random()
    if r < 0.05:  # an input as an output, beside the others
        outs.append(list(b.arrays)[0])
    elif r < 0.1:  # an output of constants only
        c = b.new_const([2])
        b.pool.append(c)
        outs.append(b.op("sin", c))
    elif r < 0.15:  # an input that reaches no output
        b.new_input(b.shape())
    return b, b.graph(outs), outs


def main():
    os.makedirs(OUT, exist_ok=True)
    lines, data = [], {}
    for seed in range(COUNT):
        b, g, outs = build(seed)
        if not G.graph_ops(g["nodes"]) & set(H.NN):  # the validator knows the ops of ops.md only
            G.validate(g)
        rng = np.random.default_rng(10_000 + seed)
        seeds = {o: np.round(rng.uniform(0.5, 1.5, b.val[o].shape) * rng.choice([-1.0, 1.0], b.val[o].shape), 6)
                 for o in outs}
        tang = {n: np.round(rng.uniform(-1, 1, a.shape), 6) for n, a in b.arrays.items()}
        hvp, jvp = H.references(g, b.arrays, seeds, tang)
        for part in list(hvp.values()) + list(jvp.values()):
            if not np.all(np.isfinite(part)):
                raise AssertionError(f"seed {seed}: a reference is not finite")
        flat = ([b.arrays[n] for n in b.arrays] + [seeds[o] for o in outs] + [tang[n] for n in b.arrays] +
                [hvp[n] for n in b.arrays] + [jvp[o] for o in outs])
        data[f"r{seed}"] = np.concatenate([np.asarray(x, np.float64).reshape(-1) for x in flat])
        lines.append(json.dumps(g, separators=(",", ":"), allow_nan=False))
    with open(os.path.join(OUT, "graphs.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")
    G.savez(os.path.join(OUT, "values.npz"), data, deflate=True)
    ops = {}
    for line in lines:
        for op in G.graph_ops(json.loads(line)["nodes"]):
            ops[op] = ops.get(op, 0) + 1
    print(f"{COUNT} graphs, {os.path.getsize(os.path.join(OUT, 'graphs.jsonl'))} + "
          f"{os.path.getsize(os.path.join(OUT, 'values.npz'))} bytes; graphs per op: "
          + " ".join(f"{k}:{v}" for k, v in sorted(ops.items())))


if __name__ == "__main__":
    sys.exit(main())
