#!/usr/bin/python3
"""A second, independent check of the ONNX export fixtures
(tests/fixtures/onnx, written by onnx_models.py): a small interpreter of
the ONNX graph itself, node by node after the ONNX operator definitions,
written with PyTorch tensors at float64 so that torch.autograd gives the
gradients with respect to the graph inputs and to every float initializer
under its ONNX name.  It covers only the ops those exports use.  Each
case's expected files must agree with it at the case's tolerance: that
checks the export (PyTorch's model and the graph in the file are the same
function) and the mapping of parameters to initializer names.

    /usr/bin/python3 tests/gen/onnx_eval.py [CASE...]
    /usr/bin/python3 tests/gen/onnx_eval.py --gradcheck CASE...   (f64 cases)

The second form checks the interpreter's own gradients against finite
differences (torch.autograd.gradcheck).

(no ONNX runtime is available to the project; onnx 1.12 has no reference
evaluator).
"""

import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "onnx")
F64 = torch.float64
CAST = {1: F64, 11: F64, 6: torch.int32, 7: torch.int64, 9: torch.bool}  # floats work at f64


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def conv_pads(a, nd):
    pads = a.get("pads", [0] * (2 * nd))
    assert a.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")
    return pads[:nd], pads[nd:]


def pad_nd(x, begin, end, value=0.0):
    flat = []
    for b, e in zip(reversed(begin), reversed(end)):
        flat += [b, e]
    return F.pad(x, flat, value=value) if any(flat) else x


def conv(x, w, b, a):
    nd = x.dim() - 2
    begin, end = conv_pads(a, nd)
    x = pad_nd(x, begin, end)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    return fn(x, w, b, stride=a.get("strides", 1), dilation=a.get("dilations", 1), groups=a.get("group", 1))


def conv_transpose(x, w, b, a):
    nd = x.dim() - 2
    begin, end = conv_pads(a, nd)
    assert begin == end
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    return fn(x, w, b, stride=a.get("strides", 1), padding=begin, output_padding=a.get("output_padding", 0),
              groups=a.get("group", 1), dilation=a.get("dilations", 1))


def pool(x, a, kind):
    nd = x.dim() - 2
    begin, end = conv_pads(a, nd)
    k, s = a["kernel_shape"], a.get("strides", [1] * nd)
    dil = a.get("dilations", [1] * nd)
    # ONNX's output size; with ceil_mode the last window may run past the
    # end: pad there too (-inf for max; for average, outside the count)
    size = [(n + b + e - d * (kk - 1) - 1) / ss + 1 for n, b, e, d, kk, ss in
            zip(x.shape[2:], begin, end, dil, k, s)]
    size = [int(np.ceil(v) if a.get("ceil_mode", 0) else np.floor(v)) for v in size]
    extra = [(o - 1) * ss + d * (kk - 1) + 1 - (n + b + e) for o, ss, d, kk, n, b, e in
             zip(size, s, dil, k, x.shape[2:], begin, end)]
    end2 = [e + max(0, x_) for e, x_ in zip(end, extra)]
    if kind == "max":
        xp = pad_nd(x, begin, end2, float("-inf"))
        y = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd](xp, k, s, dilation=dil)
    else:
        assert dil == [1] * nd
        avg = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
        total = avg(pad_nd(x, begin, end2), k, s) * float(np.prod(k))
        inside = torch.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype)
        if a.get("count_include_pad", 0):
            inside = pad_nd(inside, begin, end, 1.0)
            count = avg(pad_nd(inside, [0] * nd, [e2 - e for e2, e in zip(end2, end)]), k, s) * float(np.prod(k))
        else:
            count = avg(pad_nd(inside, begin, end2), k, s) * float(np.prod(k))
        y = total / count
    assert list(y.shape[2:]) == size, (y.shape, size)
    return y


def batch_norm(x, scale, bias, mean, var, a, training):
    red = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        mean = x.mean(red)
        var = ((x - mean.view(shape)) ** 2).mean(red)
    y = (x - mean.view(shape)) / torch.sqrt(var.view(shape) + a.get("epsilon", 1e-5))
    return y * scale.view(shape) + bias.view(shape)


def depth_to_space(x, a):
    b, c, h, w = x.shape
    k = a["blocksize"]
    if a.get("mode", b"DCR") in (b"CRD", "CRD"):
        t = x.reshape(b, c // (k * k), k, k, h, w).permute(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(b, k, k, c // (k * k), h, w).permute(0, 3, 4, 1, 5, 2)
    return t.reshape(b, c // (k * k), h * k, w * k)


def resize(x, scales, sizes, a):
    mode = a.get("mode", b"nearest").decode()
    ctm = a.get("coordinate_transformation_mode", b"half_pixel").decode()
    n = x.dim() - 2
    if sizes is not None and sizes.numel():
        out = ints(sizes)[2:]
    else:
        sc = scales.tolist()
        assert sc[:2] == [1.0, 1.0]
        out = [int(np.floor(d * s)) for d, s in zip(x.shape[2:], sc[2:])]
    # each coordinate map written out (ONNX's formulas), then gathered:
    # x_original = f(x_resized) per axis
    def src(i, din, dout):
        scale = dout / din if sizes is not None and sizes.numel() else sc[2 + i]
        o = torch.arange(dout, dtype=F64)
        if ctm == "asymmetric":
            return o / scale
        if ctm == "half_pixel":
            return (o + 0.5) / scale - 0.5
        if ctm == "pytorch_half_pixel":
            return (o + 0.5) / scale - 0.5 if dout > 1 else torch.zeros(dout, dtype=F64)
        if ctm == "align_corners":
            return o * (din - 1) / (dout - 1) if dout > 1 else torch.zeros(dout, dtype=F64)
        raise NotImplementedError(ctm)
    y = x
    for i in range(n):
        ax = 2 + i
        din, dout = x.shape[ax], out[i]
        s = src(i, din, dout)
        if mode == "nearest":
            assert a.get("nearest_mode", b"round_prefer_floor") == b"floor"
            idx = torch.clamp(torch.floor(s), 0, din - 1).long()
            y = y.index_select(ax, idx)
        elif mode == "linear":
            s = torch.clamp(s, 0, din - 1)
            lo = torch.floor(s).long()
            hi = torch.clamp(lo + 1, max=din - 1)
            wgt = (s - lo).view([-1] + [1] * (y.dim() - ax - 1))
            y = y.index_select(ax, lo) * (1 - wgt) + y.index_select(ax, hi) * wgt
        else:
            raise NotImplementedError(mode)
    return y


def rnn_common(node, a, ins):
    x, w, r = ins[0], ins[1], ins[2]
    b = ins[3] if len(ins) > 3 and ins[3] is not None else None
    lens = ins[4].long() if len(ins) > 4 and ins[4] is not None else None
    assert a.get("layout", 0) == 0
    direction = a.get("direction", b"forward").decode()
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    return x, w, r, b, dirs, lens


def recurrence(x, dirs, step, init, lens=None):
    """runs step(d, x_t, state) -> state over time for each direction; the
    first element of the state is H.  With sequence_lens, batch entry b
    steps only at t < lens[b] (the reverse direction from lens[b] - 1 down):
    its state holds after that and its output there is 0."""
    ys, finals = [], []
    for d, dname in enumerate(dirs):
        state = init(d)
        order = range(x.shape[0]) if dname == "forward" else reversed(range(x.shape[0]))
        hs = [None] * x.shape[0]
        for t in order:
            new = step(d, x[t], state)
            if lens is None:
                state = new
                hs[t] = state[0]
            else:
                valid = (t < lens).view(-1, 1)
                state = tuple(torch.where(valid, n, o) for n, o in zip(new, state))
                hs[t] = torch.where(valid, new[0], torch.zeros_like(new[0]))
        ys.append(torch.stack(hs))
        finals.append(state)
    y = torch.stack(ys, 1)  # [seq, dirs, batch, H]
    return y, [torch.stack([f[i] for f in finals]) for i in range(len(finals[0]))]


ACT = {"Tanh": torch.tanh, "Relu": torch.relu, "Sigmoid": torch.sigmoid}


def lstm(node, a, ins):
    x, w, r, b, dirs, lens = rnn_common(node, a, ins)
    assert len(ins) <= 7 or ins[7] is None, "peepholes"
    H = a["hidden_size"]
    n = x.shape[1]
    h0 = ins[5] if len(ins) > 5 and ins[5] is not None else torch.zeros(len(dirs), n, H, dtype=F64)
    c0 = ins[6] if len(ins) > 6 and ins[6] is not None else torch.zeros(len(dirs), n, H, dtype=F64)

    def step(d, xt, st):
        h, c = st
        g = xt @ w[d].T + h @ r[d].T
        if b is not None:
            g = g + b[d, :4 * H] + b[d, 4 * H:]
        i, o, f, cc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(cc)
        return torch.sigmoid(o) * torch.tanh(c), c

    y, (hn, cn) = recurrence(x, dirs, step, lambda d: (h0[d], c0[d]), lens)
    return [y, hn, cn]


def gru(node, a, ins):
    x, w, r, b, dirs, lens = rnn_common(node, a, ins)
    H = a["hidden_size"]
    lbr = a.get("linear_before_reset", 0)
    n = x.shape[1]
    h0 = ins[5] if len(ins) > 5 and ins[5] is not None else torch.zeros(len(dirs), n, H, dtype=F64)
    zero = torch.zeros(len(dirs), 6 * H, dtype=F64)
    b = zero if b is None else b

    def step(d, xt, st):
        (h,) = st
        wb, rb = b[d, :3 * H], b[d, 3 * H:]
        gx = xt @ w[d].T + wb
        z = torch.sigmoid(gx[:, :H] + h @ r[d, :H].T + rb[:H])
        rr = torch.sigmoid(gx[:, H:2 * H] + h @ r[d, H:2 * H].T + rb[H:2 * H])
        if lbr:
            hh = torch.tanh(gx[:, 2 * H:] + rr * (h @ r[d, 2 * H:].T + rb[2 * H:]))
        else:
            hh = torch.tanh(gx[:, 2 * H:] + (rr * h) @ r[d, 2 * H:].T + rb[2 * H:])
        return ((1 - z) * hh + z * h,)

    y, (hn,) = recurrence(x, dirs, step, lambda d: (h0[d],), lens)
    return [y, hn]


def rnn(node, a, ins):
    x, w, r, b, dirs, lens = rnn_common(node, a, ins)
    H = a["hidden_size"]
    acts = [s.decode() for s in a.get("activations", [b"Tanh"] * len(dirs))]
    n = x.shape[1]
    h0 = ins[5] if len(ins) > 5 and ins[5] is not None else torch.zeros(len(dirs), n, H, dtype=F64)

    def step(d, xt, st):
        g = xt @ w[d].T + st[0] @ r[d].T
        if b is not None:
            g = g + b[d, :H] + b[d, H:]
        return (ACT[acts[d]](g),)

    y, (hn,) = recurrence(x, dirs, step, lambda d: (h0[d],), lens)
    return [y, hn]


def reduce_axes(x, a, ins, opset, op):
    if op == "ReduceSum" and opset >= 13 or opset >= 18:
        axes = ints(ins[1]) if len(ins) > 1 and ins[1] is not None else None
    else:
        axes = a.get("axes")
    if axes is None:
        axes = list(range(x.dim()))
    return [ax % x.dim() for ax in axes], bool(a.get("keepdims", 1))


def nll(logp, labels, a):
    """NegativeLogLikelihoodLoss of [N, C] log-probabilities, no weights"""
    keep = labels != a.get("ignore_index", -(2 ** 63))
    picked = logp.gather(1, torch.where(keep, labels, 0).long().unsqueeze(1)).squeeze(1)
    red = a.get("reduction", b"mean")
    if red == b"mean":
        return -(picked * keep).sum() / keep.sum()
    assert red == b"sum"
    return -(picked * keep).sum()


def softmax_xent(scores, labels, a):
    return [nll(scores - torch.logsumexp(scores, 1, keepdim=True), labels, a)]


def run_node(node, ins, opset, env):
    op, a = node.op_type, attrs(node)
    x = ins[0] if ins else None
    if op in ("Add", "Sub", "Mul", "Div", "Pow"):
        y, z = ins
        return [{"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div,
                 "Pow": torch.pow}[op](y, z) if y.is_floating_point() or op != "Div"
                else torch.div(y, z, rounding_mode="trunc")]
    unary = {"Relu": torch.relu, "Tanh": torch.tanh, "Sigmoid": torch.sigmoid, "Erf": torch.erf,
             "Sqrt": torch.sqrt, "Log": torch.log, "Abs": torch.abs, "Neg": torch.neg, "Sin": torch.sin,
             "Identity": lambda t: t, "Softplus": lambda t: torch.log(1 + torch.exp(t))}
    if op in unary:
        return [unary[op](x)]
    if op in ("Greater", "Less"):
        return [(x > ins[1]) if op == "Greater" else (x < ins[1])]
    if op == "Or":
        return [ins[0] | ins[1]]
    if op == "Where":
        return [torch.where(ins[0], ins[1], ins[2])]
    if op == "Elu":
        al = a.get("alpha", 1.0)
        return [torch.where(x > 0, x, al * (torch.exp(x) - 1))]
    if op == "Celu":
        al = a.get("alpha", 1.0)
        return [torch.clamp(x, min=0) + torch.clamp(al * (torch.exp(x / al) - 1), max=0)]
    if op == "Selu":
        al, ga = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
        return [ga * torch.where(x > 0, x, al * (torch.exp(x) - 1))]
    if op == "LeakyRelu":
        return [torch.where(x >= 0, x, a.get("alpha", 0.01) * x)]
    if op == "HardSigmoid":
        return [torch.clamp(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)]
    if op == "HardSwish":
        return [x * torch.clamp(x / 6 + 0.5, 0, 1)]
    if op == "PRelu":
        return [torch.where(x >= 0, x, ins[1] * x)]
    if op == "Clip":
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else None
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else None
        y = x if lo is None else torch.maximum(x, lo)
        return [y if hi is None else torch.minimum(y, hi)]
    if op in ("Softmax", "LogSoftmax"):
        assert opset >= 13
        ax = a.get("axis", -1)
        return [torch.softmax(x, ax) if op == "Softmax" else torch.log_softmax(x, ax)]
    if op == "Constant":
        return [to_torch(numpy_helper.to_array(a["value"]))]
    if op == "ConstantOfShape":
        v = to_torch(numpy_helper.to_array(a["value"])) if "value" in a else torch.zeros(1, dtype=F64)
        return [v.reshape(()).expand(ints(x)).clone()]
    if op == "Cast":
        return [x.to(CAST[a["to"]])]
    if op == "Shape":
        return [torch.tensor(list(x.shape), dtype=torch.int64)]
    if op == "Gather":
        ax = a.get("axis", 0) % x.dim()
        idx = ins[1].long()
        idx = torch.where(idx < 0, idx + x.shape[ax], idx)
        return [x.index_select(ax, idx.reshape(-1)).reshape(x.shape[:ax] + idx.shape + x.shape[ax + 1:])]
    if op == "Unsqueeze":
        axes = ints(ins[1]) if opset >= 13 else a["axes"]
        r = x.dim() + len(axes)
        y = x
        for ax in sorted(v % r for v in axes):
            y = y.unsqueeze(ax)
        return [y]
    if op == "Squeeze":
        axes = (ints(ins[1]) if len(ins) > 1 else None) if opset >= 13 else a.get("axes")
        if axes is None:
            return [x.squeeze()]
        y = x
        for ax in sorted((v % x.dim() for v in axes), reverse=True):
            y = y.squeeze(ax)
        return [y]
    if op == "Concat":
        return [torch.cat(ins, a["axis"])]
    if op == "Slice":
        starts, ends = ints(ins[1]), ints(ins[2])
        axes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        y = x
        for s, e, ax, st in zip(starts, ends, axes, steps):
            assert st == 1
            ax %= x.dim()
            d = x.shape[ax]
            s = max(0, min(d, s + d if s < 0 else s))
            e = max(0, min(d, e + d if e < 0 else e))
            y = y.narrow(ax, s, max(0, e - s))
        return [y]
    if op == "Reshape":
        shape = ints(ins[1])
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Expand":
        shape = ints(ins[1])
        return [x * torch.ones(shape, dtype=x.dtype) if x.is_floating_point() else
                x.expand(torch.broadcast_shapes(x.shape, tuple(shape)))]
    if op == "Transpose":
        return [x.permute(a.get("perm", list(reversed(range(x.dim())))))]
    if op == "Flatten":
        ax = a.get("axis", 1) % max(x.dim(), 1)
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op == "Gemm":
        A, B = ins[0], ins[1]
        A = A.T if a.get("transA", 0) else A
        B = B.T if a.get("transB", 0) else B
        y = a.get("alpha", 1.0) * (A @ B)
        if len(ins) > 2 and ins[2] is not None:
            y = y + a.get("beta", 1.0) * ins[2]
        return [y]
    if op == "MatMul":
        return [ins[0] @ ins[1]]
    if op in ("ReduceMean", "ReduceSum"):
        axes, keep = reduce_axes(x, a, ins, opset, op)
        fn = torch.mean if op == "ReduceMean" else torch.sum
        return [fn(x, axes, keepdim=keep) if axes else x]
    if op == "Conv":
        return [conv(x, ins[1], ins[2] if len(ins) > 2 else None, a)]
    if op == "ConvTranspose":
        return [conv_transpose(x, ins[1], ins[2] if len(ins) > 2 else None, a)]
    if op == "MaxPool":
        if len(node.output) == 1 or not node.output[1]:
            return [pool(x, a, "max")]
        # Indices: flat over the whole input (row-major; storage_order 0)
        nd = x.dim() - 2
        begin, end = conv_pads(a, nd)
        assert begin == end and not a.get("ceil_mode", 0) and not a.get("storage_order", 0)
        y, i = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd](
            x, a["kernel_shape"], a.get("strides", [1] * nd), begin, a.get("dilations", [1] * nd), return_indices=True)
        plane = int(np.prod(x.shape[2:]))
        base = torch.arange(x.shape[0] * x.shape[1], dtype=torch.int64).reshape(x.shape[:2] + (1,) * nd) * plane
        return [y, i + base]
    if op == "TopK":
        k, ax = int(ints(ins[1])[0]), a.get("axis", -1)
        v, i = torch.topk(x, k, ax, largest=bool(a.get("largest", 1)), sorted=True)
        return [v, i]
    if op == "Einsum":
        return [torch.einsum(a["equation"].decode(), *ins)]
    if op == "ScatterElements":
        assert a.get("reduction", b"none") == b"none"
        ax = a.get("axis", 0) % x.dim()
        idx = ins[1].long()
        return [x.scatter(ax, torch.where(idx < 0, idx + x.shape[ax], idx), ins[2])]
    if op == "GatherElements":
        ax = a.get("axis", 0) % x.dim()
        idx = ins[1].long()
        return [torch.gather(x, ax, torch.where(idx < 0, idx + x.shape[ax], idx))]
    if op == "AveragePool":
        return [pool(x, a, "avg")]
    if op == "GlobalAveragePool":
        return [x.mean(list(range(2, x.dim())), keepdim=True)]
    if op == "Pad":
        assert a.get("mode", b"constant") == b"constant"
        p = ints(ins[1])
        n = len(p) // 2
        val = float(ins[2]) if len(ins) > 2 and ins[2] is not None else 0.0
        return [pad_nd(x, p[:n], p[n:], val)]
    if op == "BatchNormalization":
        training = a.get("training_mode", 0) if opset >= 14 else len([o for o in node.output if o]) > 1
        return [batch_norm(x, *ins[1:5], a, training)]
    if op == "InstanceNormalization":
        red = list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        m = x.mean(red, keepdim=True)
        v = ((x - m) ** 2).mean(red, keepdim=True)
        return [(x - m) / torch.sqrt(v + a.get("epsilon", 1e-5)) * ins[1].view(shape) + ins[2].view(shape)]
    if op == "LayerNormalization":
        ax = a.get("axis", -1) % x.dim()
        red = list(range(ax, x.dim()))
        m = x.mean(red, keepdim=True)
        v = ((x - m) ** 2).mean(red, keepdim=True)
        y = (x - m) / torch.sqrt(v + a.get("epsilon", 1e-5)) * ins[1]
        return [y + ins[2] if len(ins) > 2 and ins[2] is not None else y]
    if op == "Dropout":
        ratio = float(ins[1]) if len(ins) > 1 and ins[1] is not None else 0.5
        training = bool(ins[2]) if len(ins) > 2 and ins[2] is not None else False
        assert ratio == 0 or not training
        return [x, torch.ones(x.shape, dtype=torch.bool)]
    if op == "DepthToSpace":
        return [depth_to_space(x, a)]
    if op == "Resize":
        return [resize(x, ins[2] if len(ins) > 2 else None, ins[3] if len(ins) > 3 else None, a)]
    if op == "NegativeLogLikelihoodLoss":
        assert len(ins) == 2
        return [nll(ins[0], ins[1], a)]
    if op == "SoftmaxCrossEntropyLoss":
        return softmax_xent(ins[0], ins[1], a)
    if op == "LSTM":
        return lstm(node, a, ins)
    if op == "GRU":
        return gru(node, a, ins)
    if op == "RNN":
        return rnn(node, a, ins)
    if op == "If":
        branch = a["then_branch"] if bool(x) else a["else_branch"]
        return run_graph(branch, dict(env), opset)
    if op == "Loop":
        body = a["body"]
        trips = int(ins[0]) if ins[0] is not None else None
        cond = bool(ins[1]) if len(ins) > 1 and ins[1] is not None else True
        carried = list(ins[2:])
        ncar = len(carried)
        scans = []
        i = 0
        while cond and (trips is None or i < trips):
            inner = dict(env)
            names = [v.name for v in body.input]
            inner[names[0]] = torch.tensor(i, dtype=torch.int64)
            inner[names[1]] = torch.tensor(cond)
            for nme, v in zip(names[2:], carried):
                inner[nme] = v
            outs = run_graph(body, inner, opset)
            cond, carried = bool(outs[0]), outs[1:1 + ncar]
            scans.append(outs[1 + ncar:])
            i += 1
        assert all(not s for s in scans), "scan outputs"
        return carried
    raise NotImplementedError(op)


def to_torch(arr):
    if np.issubdtype(arr.dtype, np.floating):
        return torch.tensor(arr.astype(np.float64))
    return torch.tensor(arr)


def run_graph(g, env, opset):
    for t in g.initializer:
        env.setdefault(t.name, to_torch(numpy_helper.to_array(t)))
    for node in g.node:
        ins = [env[n] if n else None for n in node.input]
        outs = run_node(node, ins, opset, env)
        for n, v in zip(node.output, outs):
            if n:
                env[n] = v
    return [env[o.name] for o in g.output]


def load(d):
    m = onnx.load(os.path.join(d, "model.onnx"))
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    return m.graph, opset, dict(np.load(os.path.join(d, "inputs.npz")))


def interpret(d):
    """{output name: value, grad/NAME: gradient} of the case in folder d:
    every output, and the gradients of the sum of all outputs w.r.t. every
    float input and float initializer"""
    g, opset, inputs = load(d)
    env, leaves = {}, {}
    for t in g.initializer:
        v = to_torch(numpy_helper.to_array(t))
        if v.is_floating_point():
            v.requires_grad_(True)
            leaves["grad/" + t.name] = v
        env[t.name] = v
    fin = {}
    for i in g.input:
        v = to_torch(inputs[i.name])
        if v.is_floating_point():
            v.requires_grad_(True)
            fin["grad/" + i.name] = v
        env[i.name] = v
    outs = run_graph(g, env, opset)
    total = sum(o.sum() for o in outs)
    wrt = list(fin.values()) + list(leaves.values())
    gs = torch.autograd.grad(total, wrt, allow_unused=True)
    got = {o.name: v.detach().numpy() for o, v in zip(g.output, outs)}
    for k, w, gr in zip(list(fin) + list(leaves), wrt, gs):
        got[k] = (torch.zeros_like(w) if gr is None else gr).detach().numpy()
    return got


def check(case):
    d = os.path.join(OUT, case)
    got = interpret(d)
    rtol, atol = tolerance(case)
    worst = 0.0
    for fname in ("expected_run.npz", "expected_grad.npz", "expected_params.npz"):
        p = os.path.join(d, fname)
        if not os.path.exists(p):
            continue
        for k, want in np.load(p).items():
            have = got[k]
            assert have.shape == want.shape, (case, k, have.shape, want.shape)
            # |have - want| <= atol + rtol |want|, as tl compare decides
            w = want.astype(np.float64)
            err = np.abs(have - w) - rtol * np.abs(w)
            worst = max(worst, float(err.max(initial=0)) / atol)
            if not np.all(err <= atol):
                i = np.unravel_index(np.argmax(err), err.shape)
                raise AssertionError(f"{case} {fname} {k}{list(i)}: interpreter {have[i]!r}, expected {w[i]!r}")
    return worst


def gradcheck(case):
    """torch.autograd.gradcheck of the interpreted graph (f64 cases): its
    vector-Jacobian products against finite differences, w.r.t. every
    float input and initializer"""
    g, opset, inputs = load(os.path.join(OUT, case))
    fixed, names, values = {}, [], []
    for t in g.initializer:
        v = to_torch(numpy_helper.to_array(t))
        if v.is_floating_point():
            names.append(t.name)
            values.append(v.requires_grad_(True))
        else:
            fixed[t.name] = v
    for i in g.input:
        v = to_torch(inputs[i.name])
        if v.is_floating_point() and bool(torch.isfinite(v).all()):
            names.append(i.name)
            values.append(v.requires_grad_(True))
        else:  # indices, and a mask of -inf, which no step can move
            fixed[i.name] = v

    def fn(*vals):
        env = dict(fixed)
        env.update(zip(names, vals))
        return tuple(run_graph(g, env, opset))

    return torch.autograd.gradcheck(fn, tuple(values), eps=1e-6, atol=1e-7, rtol=1e-5)


def tolerance(case):
    with open(os.path.join(ROOT, "tests", "cli", "onnx_models.txt")) as f:
        for line in f:
            m = re.search(r"/%s/.*--rtol (\S+) --atol (\S+)" % re.escape(case), line)
            if m:
                return float(m.group(1)), float(m.group(2))
    raise AssertionError(f"{case}: no tolerance in tests/cli/onnx_models.txt")


def main():
    if sys.argv[1:2] == ["--gradcheck"]:
        for c in sys.argv[2:]:
            print("gradcheck %-32s %s" % (c, "ok" if gradcheck(c) else "FAIL"))
        return
    cases = sys.argv[1:] or sorted(c for c in os.listdir(OUT) if os.path.isdir(os.path.join(OUT, c)))
    bad = 0
    for c in cases:
        try:
            w = check(c)
            print("ok   %-36s worst error %.3g of the tolerance" % (c, w))
        except (AssertionError, NotImplementedError, KeyError) as e:
            bad += 1
            print("FAIL %-36s %s: %s" % (c, type(e).__name__, e))
    print("%d of %d cases agree" % (len(cases) - bad, len(cases)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
