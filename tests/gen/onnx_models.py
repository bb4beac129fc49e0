#!/usr/bin/python3
"""Fixtures of ONNX models exported by PyTorch (tests/fixtures/onnx): small
models written with torch.nn, exported by torch.onnx.export at opsets 13
and 17, in float64 and float32, in eval and (where it means something:
batch norm on batch statistics, dropout p=0 in training mode) train mode,
with PyTorch's values and gradients as the expected results of
`tl run` and `tl grad`.

    /usr/bin/python3 tests/gen/onnx_models.py

For each case tests/fixtures/onnx/NAME/ holds
  model.onnx            the export (do_constant_folding=False,
                        keep_initializers_as_inputs=False: weights are
                        initializers, none of them a graph input)
  inputs.npz            every graph input, keyed by its ONNX name
  expected_run.npz      what `tl run model.onnx -i inputs.npz -o F.npz` writes:
                        every output by its ONNX name
  expected_grad.npz     what `tl grad ...` writes: the outputs and grad/INPUT
                        for every float input (the cotangent all ones: the
                        gradient of the sum of every output); absent when
                        the model has no float input
  expected_params.npz   what `tl grad ... --params` writes: the above and
                        grad/INIT for every float initializer, by its name in
                        model.onnx
and the script writes tests/fixtures/onnx/MANIFEST.md (ops, opset, dtype,
mode and tolerance of each case) and tests/cli/onnx_models.txt (the
end-to-end cases).

References.  Every expected value is PyTorch's autograd at float64 on the
very numbers stored in model.onnx: the initializers are read back from the
file (f32 ones widened exactly), mapped to the model's parameters and
buffers by name and copied into them, each of them a leaf, so that the
gradient of every initializer, running statistics included, comes from
torch.autograd.grad.  f32 cases store the f64 results rounded to f32.  The
tolerance of a case is measured: the same computation in the case's own
dtype (PyTorch at f32) must pass with ten times less slack.

Weights are random (seeded), biases and normalization affines included,
so that no two initializers are equal: the exporter merges initializers of
equal values, which would make one ONNX weight stand for two parameters.
Determinism: torch.manual_seed per case, single thread, npz members with
fixed timestamps; torch.onnx.export writes the same bytes for the same
model, so a re-run rewrites identical files.
"""

import copy
import io
import math
import os
import shutil
import sys
import warnings
import zlib

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnfix import savez  # noqa: E402
from onnx_eval import interpret  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "onnx")
CLI = os.path.join(ROOT, "tests", "cli", "onnx_models.txt")
REL = "tests/fixtures/onnx"
FLOAT_TYPES = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64"}

# ---------------------------------------------------------------- models


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 6)
        self.fc3 = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    """conv, batch norm, relu, max pool, avg pool, both global pools,
    flatten, linear, dropout (p=0: in train mode a Dropout node of ratio 0)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(6)
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        h = F.relu(self.bn2(self.conv2(h)))
        h = F.avg_pool2d(h, 2)
        g = torch.cat([torch.flatten(F.adaptive_avg_pool2d(h, 1), 1),
                       torch.flatten(F.adaptive_max_pool2d(h, 1), 1)], 1)
        return self.fc(self.drop(g))


class DepthwiseSeparable(nn.Module):
    """MobileNet's block: a strided depthwise 3x3 conv, batch norm, ReLU6,
    a pointwise 1x1 conv, batch norm, hardswish, a residual add."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.pw = nn.Conv2d(4, 4, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        h = F.relu6(self.bn1(self.dw(x)))
        return x + F.hardswish(self.bn2(self.pw(h)))


class Encoder(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)

    def forward(self, src):
        return self.layer(src)


class ResBlock(nn.Module):
    """ResNet's stem and first downsampling basic block: conv, batch norm,
    relu, a padded 3x3 max pool of stride 2, two 3x3 convs (the first of
    stride 2) beside a strided 1x1 conv, the residual add, the global
    average pool and a dense layer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.conv1 = nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 6, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(6)
        self.down = nn.Conv2d(4, 6, 1, stride=2, bias=False)
        self.bn_down = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, 2, padding=1)
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(h)))))
        y = F.relu(y + self.bn_down(self.down(h)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class Conv1d(nn.Module):
    """a dilated 1-d convolution and three pools: padded max, padded
    average that counts only the real elements, max with ceil_mode"""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 3, 3, dilation=2, padding=2)

    def forward(self, x):
        h = self.conv(x)
        return (F.max_pool1d(h, 3, 2, padding=1), F.avg_pool1d(h, 3, 2, padding=1, count_include_pad=False),
                F.max_pool1d(h, 2, 2, ceil_mode=True))


class Transformer(nn.Module):
    """nn.Transformer, one encoder and one decoder layer, the decoder's
    causal mask an input (-inf above the diagonal)"""

    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)

    def forward(self, src, tgt, tgt_mask):
        return self.t(src, tgt, tgt_mask=tgt_mask)


def causal(n):
    return np.triu(np.full((n, n), -np.inf), 1)


class Attention(nn.Module):
    """cross-attention: queries from one sequence, keys and values from
    another; both the output and the head-averaged weights are outputs."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, kdim=6, vdim=5)

    def forward(self, q, k, v):
        return self.attn(q, k, v)


class EmbedClassifier(nn.Module):
    """tokens -> embedding -> mean over the sequence -> linear -> the
    cross-entropy of integer labels (the mean), and the summed negative
    log-likelihood of the labels (of log(softmax): the exporter fuses
    log_softmax and nll_loss into one SoftmaxCrossEntropyLoss)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.fc = nn.Linear(4, 3)

    def forward(self, tokens, labels):
        logits = self.fc(self.emb(tokens).mean(1))
        return F.cross_entropy(logits, labels), F.nll_loss(torch.log(torch.softmax(logits, 1)), labels, reduction="sum")


class EmbedLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 5)
        self.fc = nn.Linear(5, 2)

    def forward(self, tokens):
        return self.fc(torch.tanh(self.emb(tokens)))


class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.ln = nn.LayerNorm([3, 3])

    def forward(self, x):
        h = torch.tanh(self.gn(x))
        h = torch.sigmoid(self.inorm(h)) * x
        return self.ln(h)


class Resample(nn.Module):
    """PixelShuffle, nearest and bilinear Upsample, a strided conv."""

    def __init__(self):
        super().__init__()
        self.shuffle = nn.PixelShuffle(2)
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)

    def forward(self, x):
        h = self.conv(self.up1(self.shuffle(x)))
        return torch.tanh(self.up2(h))


class UpsampleAligned(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(size=(5, 4), mode="bilinear", align_corners=True)
        self.ct = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.ct(self.up(x))


class LSTMModel(nn.Module):
    """one layer, initial states given: outputs y, h_n, c_n"""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4)

    def forward(self, x, h0, c0):
        y, (h, c) = self.rnn(x, (h0, c0))
        return y, h, c


class LSTMDeep(nn.Module):
    """two layers, bidirectional, batch first, zero initial states"""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 3, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.rnn(x)
        return y, h, c


class PackedLSTM(nn.Module):
    """pack_padded_sequence with enforce_sorted=False: lengths in any order,
    which the export sorts with a TopK on int64 and puts back with a
    ScatterElements before they reach the LSTM's sequence_lens"""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, bidirectional=True, batch_first=True)

    def forward(self, x, lens):
        p = nn.utils.rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
        o, (h, c) = self.rnn(p)
        y, _ = nn.utils.rnn.pad_packed_sequence(o, batch_first=True, total_length=x.shape[1])
        return y, h


class GRUModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.fc(y), h


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(3, 4, num_layers=2)
        self.relu_rnn = nn.RNN(4, 3, nonlinearity="relu")

    def forward(self, x, h0):
        y, h = self.rnn(x, h0)
        z, _ = self.relu_rnn(y)
        return z, h


class ActivationsA(nn.Module):
    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(6)

    def forward(self, x):
        return (F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.hardswish(x),
                F.leaky_relu(x, 0.1), F.elu(x, 0.7), F.softplus(x), F.softplus(x, beta=2.0),
                F.mish(x), self.prelu(x))


ACT_A = ["gelu", "gelu_tanh", "silu", "hardswish", "leaky_relu", "elu", "softplus",
         "softplus_beta2", "mish", "prelu"]


class ActivationsB(nn.Module):
    def forward(self, x):
        return (F.selu(x), F.celu(x, 1.5), F.softsign(x), F.hardsigmoid(x), F.hardtanh(x, -2.0, 2.5),
                F.relu6(x), F.logsigmoid(x), F.tanhshrink(x), F.softshrink(x, 0.5),
                F.hardshrink(x, 0.5), torch.sigmoid(x), torch.tanh(x), F.softmax(x, 1),
                F.log_softmax(x, 0))


ACT_B = ["selu", "celu", "softsign", "hardsigmoid", "hardtanh", "relu6", "logsigmoid",
         "tanhshrink", "softshrink", "hardshrink", "sigmoid", "tanh", "softmax", "log_softmax"]


class LoopIf(nn.Module):
    """scripted: a `for` over the batch size (a Loop whose trip count comes
    from a shape) and an `if` on the data (an If)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = x
        for _ in range(x.size(0)):
            h = torch.tanh(self.fc(h)) + h
        if bool(x.sum() > 0):
            y = h * h
        else:
            y = torch.sin(h)
        return y


class Selectors(nn.Module):
    """TopK with k over 64, an Einsum of three operands with a diagonal
    (pairwise, in the order written), and MaxPool's indices gathered back
    from the input (GatherElements)."""

    def forward(self, x, a, b, c, img):
        v, _ = torch.topk(x, 70, dim=1)
        e = torch.einsum("iij,jk,kl->il", a, b, c)
        _, idx = F.max_pool2d(img, 2, stride=2, return_indices=True)
        g = torch.gather(img.flatten(2), 2, idx.flatten(2))
        return v, e, g


# ---------------------------------------------------------------- cases
# name: (factory, inputs(rng, variant) -> [arrays, f64 or int64, in forward
# order], input_names or None (PyTorch's), output_names, modes, scripted)

def normal(rng, *shape):
    return rng.standard_normal(shape)


CASES = {
    "mlp": (MLP, lambda r, v: [normal(r, 4, 5)], None, ["y"], ["eval"], False),
    "cnn": (CNN, lambda r, v: [normal(r, 2, 3, 8, 8)], None, ["logits"], ["eval", "train", "fused"], False),
    "depthwise": (DepthwiseSeparable, lambda r, v: [normal(r, 2, 4, 6, 6)], ["x"], ["y"],
                  ["eval", "train"], False),
    "resblock": (ResBlock, lambda r, v: [normal(r, 2, 3, 8, 8)], ["x"], ["logits"], ["eval", "train"], False),
    "conv1d": (Conv1d, lambda r, v: [normal(r, 2, 2, 7)], ["x"], ["max", "avg", "max_ceil"], ["eval"], False),
    "transformer": (Transformer, lambda r, v: [normal(r, 4, 2, 8), normal(r, 3, 2, 8), causal(3)],
                    ["src", "tgt", "tgt_mask"], ["y"], ["eval"], False),
    "encoder": (Encoder, lambda r, v: [normal(r, 3, 2, 8)], None, ["y"], ["eval", "train"], False),
    "encoder_prenorm": (lambda: Encoder(activation="gelu", norm_first=True, batch_first=True),
                        lambda r, v: [normal(r, 2, 3, 8)], ["src"], ["y"], ["eval"], False),
    "attention": (Attention, lambda r, v: [normal(r, 3, 2, 8), normal(r, 4, 2, 6), normal(r, 4, 2, 5)],
                  ["q", "k", "v"], ["out", "weights"], ["eval"], False),
    "embed_xent": (EmbedClassifier,
                   lambda r, v: [r.integers(0, 10, (3, 5)), r.integers(0, 3, (3,))],
                   ["tokens", "labels"], ["loss", "nll_sum"], ["eval"], False),
    "embed_linear": (EmbedLinear, lambda r, v: [r.integers(0, 7, (2, 3))], None, ["y"], ["eval"], False),
    "norms": (Norms, lambda r, v: [normal(r, 2, 4, 3, 3)], None, ["y"], ["eval"], False),
    "resample": (Resample, lambda r, v: [normal(r, 1, 8, 2, 2)], ["x"], ["y"], ["eval"], False),
    "upsample_aligned": (UpsampleAligned, lambda r, v: [normal(r, 1, 2, 3, 2)], ["x"], ["y"],
                         ["eval"], False),
    "lstm": (LSTMModel, lambda r, v: [normal(r, 4, 2, 3), normal(r, 1, 2, 4), normal(r, 1, 2, 4)],
             ["x", "h0", "c0"], ["y", "h_n", "c_n"], ["eval"], False),
    "lstm_deep": (LSTMDeep, lambda r, v: [normal(r, 2, 3, 3)], None, ["y", "h_n", "c_n"], ["eval"], False),
    "packed": (PackedLSTM, lambda r, v: [normal(r, 3, 5, 3), np.array([3, 5, 2], np.int64)], ["x", "lens"],
               ["y", "h_n"], ["eval"], False),
    "gru": (GRUModel, lambda r, v: [normal(r, 2, 4, 3)], ["x"], ["y", "h_n"], ["eval"], False),
    "rnn": (RNNModel, lambda r, v: [normal(r, 3, 2, 3), normal(r, 2, 2, 4)], ["x", "h0"], ["y", "h_n"],
            ["eval"], False),
    "activations_a": (ActivationsA, lambda r, v: [r.uniform(-4, 4, (4, 6))], ["x"], ACT_A, ["eval"], False),
    "activations_b": (ActivationsB, lambda r, v: [r.uniform(-4, 4, (4, 6))], ["x"], ACT_B, ["eval"], False),
    "selectors": (Selectors, lambda r, v: [normal(r, 2, 80), normal(r, 3, 3, 4), normal(r, 4, 5), normal(r, 5, 2),
                                           normal(r, 1, 2, 4, 6)],
                  ["x", "a", "b", "c", "img"], ["topk", "einsum", "pooled"], ["eval"], False),
    # the sign of x picks the branch: opset 13 takes `then`, opset 17 `else`
    "loop_if": (LoopIf, lambda r, v: [(1 if v[0] == 13 else -1) * np.abs(normal(r, 3, 4))], ["x"], ["y"],
                ["eval"], True),
}
# dimensions exported as symbolic (dynamic_axes): their sizes come from the
# inputs given, and the shape arithmetic that follows from them (Shape,
# Gather, Concat into a Reshape) is in the graph
DYNAMIC = {
    "depthwise": {"x": {0: "n", 2: "h", 3: "w"}, "y": {0: "n", 2: "h", 3: "w"}},
    "encoder_prenorm": {"src": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
    "gru": {"x": {0: "batch", 1: "time"}, "y": {0: "batch", 1: "time"}, "h_n": {1: "batch"}},
}
VARIANTS = [(13, "f64"), (13, "f32"), (17, "f64"), (17, "f32")]
# fused exports and the larger models, to keep the fixtures small
FEWER_VARIANTS = [(13, "f64"), (17, "f32")]
FEWER = {("cnn", "fused"), ("encoder", "train"), ("resblock", "train"), ("lstm_deep", "eval"), ("packed", "eval"),
         ("transformer", "eval")}
DT = {"f64": (np.float64, torch.float64), "f32": (np.float32, torch.float32)}


def randomize(model, gen):
    """Random values for every float parameter and buffer: weights keep
    PyTorch's init (seeded), 1-d tensors (biases, affines, statistics) get
    values of their own so that none is all zeros or all ones."""
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(0.5 + torch.rand(t.shape, generator=gen, dtype=torch.float64))
            elif t.dim() == 1 and name.endswith("weight"):
                t.copy_(1 + 0.2 * torch.randn(t.shape, generator=gen, dtype=torch.float64))
            elif t.dim() == 1:
                t.copy_(0.2 * torch.randn(t.shape, generator=gen, dtype=torch.float64))


def flat(x):
    if isinstance(x, (tuple, list)):
        return [y for e in x for y in flat(e)]
    return [x]


def export(model, args, opset, mode, input_names, output_names, scripted, dynamic_axes):
    """mode eval: the model in eval mode, exported as it is
    (TrainingMode.PRESERVE: every node as the module wrote it); fused: the
    export's default (TrainingMode.EVAL), which folds each batch norm into
    the convolution before it, weights that are no parameter of the model;
    train: TrainingMode.TRAINING."""
    f = io.BytesIO()
    train = mode == "train"
    m = copy.deepcopy(model).train(train)
    if scripted:
        m = torch.jit.script(m)
    torch.onnx.export(m, tuple(args), f, opset_version=opset, do_constant_folding=False,
                      keep_initializers_as_inputs=False, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes,
                      training={"eval": torch.onnx.TrainingMode.PRESERVE, "fused": torch.onnx.TrainingMode.EVAL,
                                "train": torch.onnx.TrainingMode.TRAINING}[mode])
    return f.getvalue()


def all_ops(graph, acc):
    for n in graph.node:
        acc.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                all_ops(a.g, acc)
            for g in a.graphs:
                all_ops(g, acc)
    return acc


def batch_norm_formula(input, running_mean, running_var, weight=None, bias=None, training=False,
                       momentum=0.1, eps=1e-5):
    """F.batch_norm in inference written out (ONNX's definition,
    (x - mean) / sqrt(var + eps) * scale + bias): torch's kernel is not
    differentiable w.r.t. the running statistics, which --params asks for."""
    if training:
        return BATCH_NORM(input, running_mean, running_var, weight, bias, training, momentum, eps)
    shape = [1, -1] + [1] * (input.dim() - 2)
    y = (input - running_mean.view(shape)) / torch.sqrt(running_var.view(shape) + eps)
    if weight is not None:
        y = y * weight.view(shape)
    if bias is not None:
        y = y + bias.view(shape)
    return y


BATCH_NORM = F.batch_norm


def evaluate(model, inits, mapping, train, args, dtype):
    """PyTorch at `dtype` on the initializers' values: outputs, gradients of
    the sum of all outputs w.r.t. the float args and the float initializers.
    The values are copied into the model's own parameters and buffers (not
    passed to functional_call: nn.LSTM and its kin run on a cached list of
    their parameters, which functional_call does not replace)."""
    m = model.to(DT[dtype][1]).train(train)
    tensors = dict(m.named_parameters())
    tensors.update(m.named_buffers())
    leaves = {}
    with torch.no_grad():
        for iname, arr in inits.items():
            for s in mapping[iname]:
                assert tuple(tensors[s].shape) == arr.shape, (iname, s)
                tensors[s].copy_(torch.tensor(arr))
    for iname, arr in inits.items():
        if not np.issubdtype(arr.dtype, np.floating):
            continue
        ts = [tensors[s] for s in mapping[iname]]
        # in train mode batch norm updates its running statistics in place,
        # which autograd refuses on a leaf: they reach no output there, so
        # their gradient is an exact zero
        if not train:
            for t in ts:
                t.requires_grad_(True)
        leaves[iname] = [t for t in ts if t.requires_grad]
    targs = []
    for a in args:
        if np.issubdtype(a.dtype, np.floating):
            targs.append(torch.tensor(a.astype(DT[dtype][0]), requires_grad=True))
        else:
            targs.append(torch.tensor(a))
    F.batch_norm = batch_norm_formula
    try:
        outs = flat(m(*targs))
    finally:
        F.batch_norm = BATCH_NORM
    total = sum(o.sum() for o in outs)
    fargs = [t for t in targs if t.requires_grad]
    wrt = fargs + [t for ts in leaves.values() for t in ts]
    gs = torch.autograd.grad(total, wrt, allow_unused=True)
    gs = [torch.zeros_like(w) if g is None else g for w, g in zip(wrt, gs)]
    ga = [g.detach().numpy() for g in gs[:len(fargs)]]
    rest = iter(gs[len(fargs):])
    gi = {}
    for iname, arr in inits.items():
        if np.issubdtype(arr.dtype, np.floating):
            gi[iname] = sum((next(rest).detach().numpy() for _ in leaves[iname]), np.zeros(arr.shape))
    return [o.detach().numpy() for o in outs], ga, gi


def needed_atol(a, b, rtol):
    """the least atol with |a - b| <= atol + rtol |b| everywhere"""
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.max(np.abs(a - b) - rtol * np.abs(b), initial=0.0))


def round_up(x):
    """x rounded up to one significant digit"""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x))
    return float("%.0e" % (math.ceil(x / 10 ** e - 1e-9) * 10 ** e))


def dims(value_info):
    """a graph input's dimensions as the file declares them: sizes, or the
    names of symbolic ones"""
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def make_case(stem, spec, opset, dtype, mode):
    factory, mkinputs, input_names, output_names, modes, scripted = spec
    name = f"{stem}_{mode}_op{opset}_{dtype}"
    seed = zlib.crc32(stem.encode())
    torch.manual_seed(seed)
    model = factory().double()
    randomize(model, torch.Generator().manual_seed(seed))
    rng = np.random.default_rng(seed)
    npdt, tdt = DT[dtype]
    args = [a.astype(npdt) if np.issubdtype(a.dtype, np.floating) else a.astype(np.int64)
            for a in mkinputs(rng, (opset, dtype))]
    train = mode == "train"
    mexp = copy.deepcopy(model).to(tdt)
    blob = export(mexp, [torch.tensor(a) for a in args], opset, mode, input_names, output_names, scripted,
                  DYNAMIC.get(stem))
    mp = onnx.load_from_string(blob)
    g = mp.graph
    in_names = [i.name for i in g.input]
    assert len(in_names) == len(args), (name, in_names)
    assert [o.name for o in g.output] == output_names, (name, [o.name for o in g.output])
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for iname, arr in inits.items():
        if np.issubdtype(arr.dtype, np.floating):
            assert arr.dtype == npdt, (name, iname, arr.dtype)
    state = mexp.state_dict()
    fused = mode == "fused"
    if fused:
        # the folded weights are no parameter of the model: the reference
        # runs on the model's own, and there is no expected_params.npz
        assert any(k not in state for k in inits), (name, "nothing folded")
        values = {k: v.numpy() for k, v in state.items()}
        mapping = {k: [k] for k in values}
    else:
        values = inits
        mapping = {}
        for iname, arr in inits.items():
            if iname in state:
                mapping[iname] = [iname]
            elif np.issubdtype(arr.dtype, np.floating):
                raise AssertionError(f"{name}: initializer {iname} is no parameter of the model")
            else:
                mapping[iname] = []

    outs, ga, gi = evaluate(copy.deepcopy(model), values, mapping, train, args, "f64")
    # the same in the case's dtype: how far PyTorch itself lands from the
    # f64 reference says the tolerance
    outs_l, ga_l, gi_l = evaluate(copy.deepcopy(model), values, mapping, train, args, dtype)
    if fused:
        gi, gi_l = {}, {}

    fin = [n for n, a in zip(in_names, args) if np.issubdtype(a.dtype, np.floating)]
    run = {o: v.astype(npdt) for o, v in zip(output_names, outs)}
    grad = dict(run)
    grad.update({"grad/" + n: v.astype(npdt) for n, v in zip(fin, ga)})
    params = dict(grad)
    params.update({"grad/" + k: v.astype(npdt) for k, v in gi.items()})
    low = {o: v for o, v in zip(output_names, outs_l)}
    low.update({"grad/" + n: v for n, v in zip(fin, ga_l)})
    low.update({"grad/" + k: v for k, v in gi_l.items()})

    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(blob)
    savez(os.path.join(d, "inputs.npz"), dict(zip(in_names, args)))
    savez(os.path.join(d, "expected_run.npz"), run)
    if fin:
        savez(os.path.join(d, "expected_grad.npz"), grad)
    if not fused:
        savez(os.path.join(d, "expected_params.npz"), params)

    # The tolerance: rtol 1e-9 for f64, 1e-4 for f32, and an atol of ten
    # times what two other computations need to pass.  One is the graph
    # itself, run by onnx_eval.py's interpreter (ONNX's definitions at f64):
    # it differs from PyTorch where a float attribute, always an f32 in ONNX
    # (an epsilon, HardSigmoid's 1/6, Selu's constants), is a double in
    # PyTorch: a difference in absolute terms, up to 1e-7 of the scale.  The
    # other, for f32 cases, is PyTorch at f32.
    ref = params if not fused else grad if fin else run
    graph = {k: v for k, v in interpret(d).items() if k in ref}
    scale = max(float(np.max(np.abs(v), initial=0.0)) for v in ref.values())
    rtol = 1e-9 if dtype == "f64" else 1e-4
    need = max(needed_atol(graph[k], v, rtol) for k, v in ref.items())
    if dtype == "f32":
        need = max([need] + [needed_atol(low[k], v, rtol) for k, v in ref.items()])
    atol = round_up(max(10 * need, (1e-10 if dtype == "f64" else 1e-6) * scale))
    assert atol <= (1e-6 if dtype == "f64" else 1e-3) * scale, (name, "the graph and PyTorch differ", atol, scale)
    return {
        "name": name, "opset": opset, "dtype": dtype, "mode": mode, "scripted": scripted,
        "ops": sorted(all_ops(g, set())),
        "inputs": [(n, str(a.dtype), dims(i)) for n, a, i in zip(in_names, args, g.input)],
        "outputs": [(o, list(v.shape)) for o, v in zip(output_names, outs)],
        "inits": sum(1 for a in inits.values() if np.issubdtype(a.dtype, np.floating)),
        "has_grad": bool(fin), "has_params": not fused, "rtol": rtol, "atol": atol, "bytes": len(blob),
    }


# ---------------------------------------------------------------- outputs

def fmt(x):
    """1e-09 -> 1e-9, 0.0001 -> 1e-4"""
    m, e = ("%e" % x).split("e")
    return "%se%d" % (("%g" % float(m)), int(e))


def write_cli(cases):
    lines = [
        "# End-to-end cases of ONNX models exported by PyTorch (tests/fixtures/onnx,",
        "# written with this file by tests/gen/onnx_models.py: do not edit by hand).",
        "# Per model: its values (tl run), the gradient of the sum of its outputs",
        "# w.r.t. its float inputs (tl grad) and w.r.t. every float initializer",
        "# too (tl grad --params), each against PyTorch's autograd at float64 on",
        "# the weights stored in the file (f32 cases: rounded to f32).  The",
        "# tolerance of each case is measured (tests/fixtures/onnx/MANIFEST.md):",
        "# rtol 1e-9 for f64 and 1e-4 for f32, and ten times the atol that the",
        "# graph run by tests/gen/onnx_eval.py and (f32) PyTorch at f32 need.",
        "",
    ]
    for c in cases:
        base = f"{REL}/{c['name']}"
        tol = f"--rtol {fmt(c['rtol'])} --atol {fmt(c['atol'])}"
        src = f"{base}/model.onnx -i {base}/inputs.npz"
        lines.append(f"# {c['name']}: {', '.join(c['ops'])}")
        lines += [f"tl run {src} --expect {base}/expected_run.npz {tol}", "exit: 0", "empty: stdout", ""]
        if c["has_grad"]:
            lines += [f"tl grad {src} --expect {base}/expected_grad.npz {tol}", "exit: 0", "empty: stdout", ""]
        if c["has_params"]:
            lines += [f"tl grad {src} --params --expect {base}/expected_params.npz {tol}", "exit: 0",
                      "empty: stdout", ""]
    with open(CLI, "w") as f:
        f.write("\n".join(lines))


def write_manifest(cases):
    ops = {}
    for c in cases:
        for o in c["ops"]:
            ops.setdefault(o, set()).add(c["opset"])
    lines = [
        "# ONNX export fixtures",
        "",
        "Written by `/usr/bin/python3 tests/gen/onnx_models.py` (PyTorch %s, onnx %s):"
        % (torch.__version__.split("a")[0], onnx.__version__),
        "each folder holds `model.onnx` (torch.onnx.export, do_constant_folding=False),",
        "`inputs.npz` (keyed by the graph's input names), and the results `tl` must",
        "write: `expected_run.npz` (`tl run`), `expected_grad.npz` (`tl grad`: the",
        "outputs and `grad/INPUT` of each float input, the cotangent all ones) and",
        "`expected_params.npz` (`tl grad --params`: also `grad/INIT` of every float",
        "initializer). References: PyTorch's autograd at float64 on the weights",
        "stored in the file; f32 cases rounded to f32. The cases run in",
        "tests/cli/onnx_models.txt at the tolerance given here (`--rtol`, `--atol`).",
        "",
        "Modes: `eval` is the model in eval mode exported node for node",
        "(`training=TrainingMode.PRESERVE`); `fused` is the export's default",
        "(`TrainingMode.EVAL`), which folds each batch norm into the convolution",
        "before it: its weights are no parameter of the model, so it has no",
        "`expected_params.npz`; `train` is `TrainingMode.TRAINING`: batch norm on",
        "the batch's statistics (its running statistics reach no output: their",
        "gradient is zero) and dropout of ratio 0 in training mode (a `Dropout`",
        "node with `training_mode` true). At opset 13 a training batch norm is a",
        "`BatchNormalization` node with five outputs (the running and the saved",
        "statistics) of which only the first is used; from opset 14 it has",
        "`training_mode=1` and three outputs. `scripted`: exported from",
        "`torch.jit.script`, with a `Loop` (trip count a constant) and an `If` on",
        "the data whose subgraphs read outer names (opset 13 takes the `then`",
        "branch, opset 17 the `else` one).",
        "",
        "Input names are the export's: PyTorch's own where the script gives none",
        "(`onnx::Gemm_0`, `input.1`, `query`), else those passed as",
        "`input_names`; output names are always given. Inputs list their",
        "dimensions as the file declares them: a name is a symbolic dimension",
        "(`dynamic_axes`), whose size the given input sets.",
        "",
        "Tolerance: rtol 1e-9 (f64) or 1e-4 (f32), and an atol ten times what",
        "two other computations need to pass: the graph itself, run node by node",
        "by `tests/gen/onnx_eval.py` (ONNX's definitions written in PyTorch at",
        "f64, gradients by autograd under the initializers' ONNX names), and,",
        "for f32 cases, PyTorch at f32. The first differs from the model where",
        "ONNX stores a float attribute as an f32 that PyTorch uses as a double",
        "(batch norm's epsilon, HardSigmoid's alpha 1/6 in opset 13's HardSwish,",
        "Selu's constants, LeakyRelu's 0.1): a correct translation computes with",
        "the f32 value widened, up to 1e-7 of the scale away from PyTorch at f64",
        "(hence the larger atol of the activations and of depthwise at opset 13).",
        "Every float64 case but the fused ones also holds `tangents.npz`,",
        "`expected_jvp.npz`, `expected_hvp.npz` and `expected_hvp_params.npz`:",
        "`tl jvp` and `tl hvp` (with and without `--params`) against PyTorch's",
        "double backward, written by `tests/gen/onnx_hvp.py` (which this script",
        "runs last) with the cases of tests/cli/onnx_hvp.txt.",
        "",
        "`/usr/bin/python3 tests/gen/onnx_eval.py` rechecks every case against",
        "that interpreter; `--gradcheck CASE...` checks the interpreter's",
        "gradients against finite differences (torch.autograd.gradcheck).",
        "",
        "| case | opset | dtype | mode | inputs | outputs | float inits | rtol | atol | ONNX ops |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        ins = ", ".join(f"`{n}` {dt}[{', '.join(map(str, s))}]" for n, dt, s in c["inputs"])
        outs = ", ".join(f"`{n}` {s}" for n, s in c["outputs"])
        mode = c["mode"] + (", scripted" if c["scripted"] else "")
        lines.append(f"| {c['name']} | {c['opset']} | {c['dtype']} | {mode} | {ins} | {outs} | {c['inits']} "
                     f"| {fmt(c['rtol'])} | {fmt(c['atol'])} | {' '.join(c['ops'])} |")
    lines += ["", "## ONNX op types used, with the opsets they appear at", ""]
    for o in sorted(ops):
        lines.append(f"- {o}: {', '.join(str(s) for s in sorted(ops[o]))}")
    with open(os.path.join(OUT, "MANIFEST.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    only = sys.argv[1:]
    if os.path.isdir(OUT) and not only:
        shutil.rmtree(OUT)
    os.makedirs(OUT, exist_ok=True)
    cases = []
    for stem, spec in CASES.items():
        if only and stem not in only:
            continue
        for mode in spec[4]:
            for opset, dtype in (FEWER_VARIANTS if (stem, mode) in FEWER else VARIANTS):
                c = make_case(stem, spec, opset, dtype, mode)
                print("%-32s %6d bytes  rtol %-6s atol %-6s" % (c["name"], c["bytes"], fmt(c["rtol"]), fmt(c["atol"])))
                cases.append(c)
    if not only:
        write_cli(cases)
        write_manifest(cases)
    # the second-derivative files of the f64 cases (onnx_hvp.py) live in the
    # same folders, which this script has just rewritten
    import onnx_hvp
    onnx_hvp.main([])


if __name__ == "__main__":
    main()
