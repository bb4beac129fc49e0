#!/usr/bin/python3
"""Writes the recurrent and control-flow models of tests/cli/onnx.txt (run
from the repository root with /usr/bin/python3: PyTorch and onnx): small
nn.LSTM / nn.GRU / nn.RNN models exported by torch.onnx.export (opsets 13
and 17, float64), an input .npz each, and the values and gradients of
PyTorch's autograd (seed: all ones, as tl grad) with respect to the input
and every weight, as tl grad's .npz (outputs by name, grad/NAME)."""
import io
import os
import numpy as np
import onnx
import torch

D = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


class Wrap(torch.nn.Module):
    def __init__(self, rnn, with_h0):
        super().__init__()
        self.rnn = rnn
        self.with_h0 = with_h0

    def forward(self, x, *h):
        out = self.rnn(x, *h) if h else self.rnn(x)
        y, hn = out
        if isinstance(hn, tuple):
            return (y,) + hn
        return y, hn


def export(name, rnn, x, h=(), opset=13):
    m = Wrap(rnn, bool(h)).double().eval()
    x = x.double()
    h = tuple(t.double() for t in h)
    in_names = ["x"] + ["h0", "c0"][: len(h)]
    nout = 3 if isinstance(rnn, torch.nn.LSTM) else 2
    out_names = ["y", "hn", "cn"][:nout]
    f = io.BytesIO()
    args = (x,) + (h if not isinstance(rnn, torch.nn.LSTM) or not h else (h,))
    if isinstance(rnn, torch.nn.LSTM) and h:
        class W2(torch.nn.Module):
            def __init__(s, r):
                super().__init__()
                s.rnn = r

            def forward(s, x, h0, c0):
                y, (hn, cn) = s.rnn(x, (h0, c0))
                return y, hn, cn
        m = W2(rnn).double().eval()
        args = (x,) + h
    torch.onnx.export(m, args, os.path.join(D, name + ".onnx"), opset_version=opset,
                      input_names=in_names, output_names=out_names, do_constant_folding=False)
    model = onnx.load(os.path.join(D, name + ".onnx"))
    inits = {i.name for i in model.graph.initializer}
    # gradients of sum of all outputs, wrt inputs and every parameter
    xs = [x.clone().requires_grad_(True)] + [t.clone().requires_grad_(True) for t in h]
    outs = m(*xs)
    params = dict(m.named_parameters())
    total = sum(o.sum() for o in outs)
    total.backward()
    exp = {n: o.detach().numpy() for n, o in zip(out_names, outs)}
    for n, t in zip(in_names, xs):
        exp["grad/" + n] = t.grad.numpy()
    for n, p in params.items():
        exp["grad/" + n] = p.grad.numpy()
    missing = [n for n in params if n not in inits]
    np.savez(os.path.join(D, name + "_inputs.npz"), **{n: t.detach().numpy() for n, t in zip(in_names, xs)})
    np.savez(os.path.join(D, name + "_expected.npz"), **exp)
    ops = sorted({n.op_type for n in model.graph.node})
    print(name, "opset", opset, "ops", ops, "params not initializers:", missing)


export("lstm", torch.nn.LSTM(3, 4, num_layers=1), torch.randn(5, 2, 3), (torch.randn(1, 2, 4), torch.randn(1, 2, 4)))
export("lstm_bi", torch.nn.LSTM(3, 4, bidirectional=True, batch_first=True), torch.randn(2, 5, 3), opset=17)
export("gru", torch.nn.GRU(3, 4, num_layers=2), torch.randn(6, 2, 3), (torch.randn(2, 2, 4),), opset=17)
export("gru_bi", torch.nn.GRU(3, 4, bidirectional=True), torch.randn(4, 1, 3))
export("rnn_relu", torch.nn.RNN(3, 4, nonlinearity="relu", bidirectional=True), torch.randn(5, 2, 3), opset=13)
export("rnn_tanh", torch.nn.RNN(3, 4, num_layers=2, batch_first=True), torch.randn(2, 4, 3), (torch.randn(2, 2, 4),), opset=17)


class Flow(torch.nn.Module):
    """A scripted for loop (Loop, trip count from the shape) and if on data."""
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3) * 0.5)

    def forward(self, x):
        h = x
        for _ in range(x.shape[0]):
            h = torch.tanh(h @ self.w) + x
        if h.sum() > 0:
            y = h * h
        else:
            y = h * 3.0
        return y


def export_scripted(name, m, x, opset):
    m = torch.jit.script(m.double().eval())
    x = x.double()
    path = os.path.join(D, name + ".onnx")
    torch.onnx.export(m, (x,), path, opset_version=opset, input_names=["x"], output_names=["y"])
    model = onnx.load(path)
    xs = x.clone().requires_grad_(True)
    y = m(xs)
    y.sum().backward()
    exp = {"y": y.detach().numpy(), "grad/x": xs.grad.numpy()}
    for n, p in m.named_parameters():
        exp["grad/" + n] = p.grad.numpy()
    np.savez(os.path.join(D, name + "_inputs.npz"), x=x.numpy())
    np.savez(os.path.join(D, name + "_expected.npz"), **exp)
    print(name, "opset", opset, "ops", sorted({n.op_type for n in model.graph.node}),
          "inits", [i.name for i in model.graph.initializer])


export_scripted("flow_pos", Flow(), torch.randn(3, 3).abs() + 0.5, 13)
export_scripted("flow_neg", Flow(), -torch.randn(3, 3).abs() - 3.0, 17)


# a while loop (its condition computed from data): an error naming the node
from onnx import TensorProto as TP, helper as oh, numpy_helper
body = oh.make_graph(
    [oh.make_node("Add", ["x_in", "one"], ["x_out"]),
     oh.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
     oh.make_node("Less", ["s", "ten"], ["c_out"])],
    "body",
    [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("c_in", TP.BOOL, []),
     oh.make_tensor_value_info("x_in", TP.FLOAT, [2])],
    [oh.make_tensor_value_info("c_out", TP.BOOL, []), oh.make_tensor_value_info("x_out", TP.FLOAT, [2])],
    [numpy_helper.from_array(np.ones(2, np.float32), "one"),
     numpy_helper.from_array(np.array(10, np.float32), "ten")])
g = oh.make_graph([oh.make_node("Loop", ["M", "c0", "x"], ["y"], body=body, name="while")], "g",
                  [oh.make_tensor_value_info("x", TP.FLOAT, [2])], [oh.make_tensor_value_info("y", TP.FLOAT, [2])],
                  [numpy_helper.from_array(np.array(100, np.int64), "M"),
                   numpy_helper.from_array(np.array(True), "c0")])
m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)], producer_name="tl tests")
onnx.checker.check_model(m)
onnx.save(m, os.path.join(D, "while.onnx"))
