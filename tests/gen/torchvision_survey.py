#!/usr/bin/python3
"""Whole models as users export them: torchvision's classifiers,
segmenters and video networks (3-d) and a small GPT-like transformer, each
exported by torch.onnx.export (opset 17, eval mode, random weights from
seed 0) at a small input size, then `tl grad MODEL.onnx` against
PyTorch's autograd of the same module.  Not part of make check (it needs
PyTorch and torchvision and about two minutes); a survey for maintainers
after a change to the ONNX translation or to a layer op.

    /usr/bin/python3 tests/gen/torchvision_survey.py [--tl ./tl] [MODEL...]

(MODEL: a name below, NAME_train for a training-mode one, or gpt.)

Errors are relative to the largest magnitude of the float64 reference
(PyTorch's module in float64, the same weights).  A model passes when tl's
f32 output and input gradient are within 1e-4 of it, or within ten times
PyTorch's own f32 error.  Where one does not, the model's weights and
input are widened to f64 in the ONNX file and tl runs again: if that agrees
with the reference (to the f32 rounding of the weights the exporter folded,
1e-5), the f32 difference is rounding where the function has a kink or
cancels (a relu input of 4e-15 whose f32 sign differs: mnasnet0_5 at 64x64
is such a case), and the line says so.  The GPT-like transformer is checked
with --params, every weight's gradient under its PyTorch name (its weights
perturbed first: the exporter merges initializers of equal values), and
`tl hvp` of its loss along a random direction in every weight against
PyTorch's double backward.

Three classifiers are also exported in training mode (batch norm on the
batch's statistics, dropout made p = 0 so that no mask is drawn) and
checked with --params, each weight's gradient against the largest of all
of them (a bias before a batch norm has a gradient of zero, which f32 and
f64 meet only to rounding).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
import torch
import torchvision

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CLASSIFIERS = [("mobilenet_v2", 64), ("mobilenet_v3_small", 64), ("squeezenet1_0", 64), ("shufflenet_v2_x0_5", 64),
               ("mnasnet0_5", 64), ("efficientnet_b0", 64), ("efficientnet_v2_s", 64), ("regnet_x_400mf", 64),
               ("convnext_tiny", 64), ("densenet121", 64), ("googlenet", 64), ("inception_v3", 96),
               ("resnext50_32x4d", 64), ("wide_resnet50_2", 64), ("alexnet", 224), ("swin_t", 64),
               ("maxvit_t", 224)]
SEGMENTERS = [("lraspp_mobilenet_v3_large", 64), ("fcn_resnet50", 64)]
VIDEO = [("r3d_18", 32), ("mc3_18", 32), ("r2plus1d_18", 32)]  # 8 frames: 3-d convolutions and pools
TRAINING = [("resnet18", 64), ("mobilenet_v2", 64), ("densenet121", 64)]


class Out(torch.nn.Module):
    """a segmentation model's "out" alone"""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


class GPT(torch.nn.Module):
    """two pre-norm encoder layers with a causal mask, tied embedding, cross-entropy of labels"""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 32)
        self.pos = torch.nn.Parameter(torch.randn(16, 32) * 0.1)
        self.blocks = torch.nn.ModuleList([torch.nn.TransformerEncoderLayer(
            32, 4, 64, dropout=0.0, batch_first=True, norm_first=True, activation="gelu") for _ in range(2)])
        self.ln = torch.nn.LayerNorm(32)

    def forward(self, tok, labels):
        t = tok.shape[1]
        h = self.emb(tok) + self.pos[:t]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        for b in self.blocks:
            h = b(h, src_mask=mask)
        logits = self.ln(h) @ self.emb.weight.t()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 100), labels.reshape(-1))


def rel(a, ref):
    return float(np.abs(a.astype(np.float64) - ref).max() / (np.abs(ref).max() + 1e-300))


def tl_grad(tl, model, args, out, command="grad"):
    """tl COMMAND MODEL ARGS -o OUT, its results; tl's error line raised"""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)  # tl with nothing set, as users run it
    p = subprocess.run([tl, command, model] + args + ["-o", out], capture_output=True, text=True, env=env)
    if p.returncode:
        raise RuntimeError("tl %s exit %d: %s" % (command, p.returncode, p.stderr.strip().splitlines()[-1]))
    return np.load(out)


def widened(src, dst):
    """the ONNX model with every f32 initializer, constant and value made f64"""
    m = onnx.load(src)
    for i, t in enumerate(m.graph.initializer):
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(a.astype(np.float64), t.name))
    for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            if a.type == onnx.AttributeProto.INT and n.op_type == "Cast" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
    onnx.save(m, dst)


def verdict(tl, tmp, line, model, x, args, e_tl, e_pt, err):
    """ok where tl's f32 error e_tl is within 1e-4 or ten times PyTorch's e_pt; else tl again on the model
    widened to f64 (x the input, args the other arguments, err the error of a result file): ok there is f32
    rounding at a kink"""
    if e_tl <= max(1e-4, 10 * e_pt):
        return True, line + "  ok"
    wide = os.path.join(tmp, "f64.onnx")
    widened(model, wide)
    np.save(os.path.join(tmp, "x64.npy"), x.numpy().astype(np.float64))
    e64 = err(tl_grad(tl, wide, ["x=" + os.path.join(tmp, "x64.npy")] + args, os.path.join(tmp, "g64.npz")))
    if e64 <= 1e-5:
        return True, line + "  ok: f32 rounding at a kink or cancellation (tl at f64: %.1e)" % e64
    return False, line + "  MISMATCH (tl at f64: %.1e)" % e64


def image_model(tl, tmp, name, size, kind):
    torch.manual_seed(0)
    if kind == "segmenter":
        m = Out(torchvision.models.segmentation.__dict__[name](weights=None, weights_backbone=None, aux_loss=None))
    else:
        m = (torchvision.models.video if kind == "video" else torchvision.models).__dict__[name]()
    m.eval()
    x = torch.randn(1, 3, 8, size, size) if kind == "video" else torch.randn(1, 3, size, size)
    model = os.path.join(tmp, name + ".onnx")
    torch.onnx.export(m, (x,), model, opset_version=17, input_names=["x"], output_names=["y"])
    m.eval()  # the export restores the mode the wrapper had, and with it its children's
    refs = {}
    for dt in (torch.float32, torch.float64):
        mm = m.to(dt)
        xx = x.detach().to(dt).clone().requires_grad_()
        y = mm(xx)
        y.sum().backward()
        refs[dt] = (y.detach().numpy(), xx.grad.numpy())
        mm.zero_grad(set_to_none=True)
    y64, g64 = refs[torch.float64]
    np.save(os.path.join(tmp, "x.npy"), x.numpy())
    got = tl_grad(tl, model, ["x=" + os.path.join(tmp, "x.npy")], os.path.join(tmp, "g.npz"))
    def err(r):
        return max(rel(r["y"], y64), rel(r["grad/x"], g64))
    e_tl = err(got)
    e_pt = max(rel(refs[torch.float32][0], y64), rel(refs[torch.float32][1], g64))
    line = "%-28s %4d  tl %.1e  PyTorch f32 %.1e" % (name, size, e_tl, e_pt)
    return verdict(tl, tmp, line, model, x, [], e_tl, e_pt, err)


def training_model(tl, tmp, name, size):
    def make(dt):
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)().to(dt).train()
        for mod in m.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        return m
    torch.manual_seed(1)
    x = torch.randn(2, 3, size, size)
    model = os.path.join(tmp, name + "_train.onnx")
    torch.onnx.export(make(torch.float32), (x,), model, opset_version=17, input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    refs = {}
    for dt in (torch.float32, torch.float64):
        m = make(dt)
        xx = x.detach().to(dt).clone().requires_grad_()
        y = m(xx)
        y.sum().backward()
        refs[dt] = (y.detach().double().numpy(), xx.grad.double().numpy(),
                    {n: p.grad.double().numpy() for n, p in m.named_parameters()})
    y64, g64, p64 = refs[torch.float64]
    np.save(os.path.join(tmp, "x.npy"), x.numpy())
    got = tl_grad(tl, model, ["x=" + os.path.join(tmp, "x.npy"), "--params"], os.path.join(tmp, "g.npz"))
    missing = [n for n in p64 if "grad/" + n not in got]
    if missing:
        return False, "%-28s %4d  training mode: no gradient for %s" % (name, size, ", ".join(missing[:3]))
    scale = max(np.abs(v).max() for v in p64.values())

    def errs(y, g, p):
        return max(rel(y, y64), rel(g, g64), max(float(np.abs(p[n] - v).max()) / scale for n, v in p64.items()))

    def err(r):
        return errs(r["y"], r["grad/x"], {n: r["grad/" + n] for n in p64})
    e_tl = err(got)
    e_pt = errs(*refs[torch.float32])
    line = "%-28s %4d  tl %.1e  PyTorch f32 %.1e" % (name + ", training", size, e_tl, e_pt)
    return verdict(tl, tmp, line, model, x, ["--params"], e_tl, e_pt, err)


def gpt(tl, tmp):
    torch.manual_seed(0)
    m = GPT().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    tok, lab = torch.randint(0, 100, (2, 16)), torch.randint(0, 100, (2, 16))
    model = os.path.join(tmp, "gpt.onnx")
    torch.onnx.export(m, (tok, lab), model, opset_version=17, input_names=["tok", "labels"], output_names=["loss"],
                      do_constant_folding=False)
    m64 = GPT().eval()
    m64.load_state_dict(m.state_dict())
    m64 = m64.double()
    names, params = zip(*m64.named_parameters())
    loss = m64(tok, lab)
    grads = torch.autograd.grad(loss, params, create_graph=True)
    # the Hessian of the loss in the weights times a random direction: PyTorch's double backward
    rng = np.random.default_rng(3)
    dirs = [torch.from_numpy(rng.standard_normal(p.shape).astype(np.float32)).double() for p in params]
    hv = torch.autograd.grad(sum((g * v).sum() for g, v in zip(grads, dirs)), params)
    np.save(os.path.join(tmp, "tok.npy"), tok.numpy())
    np.save(os.path.join(tmp, "lab.npy"), lab.numpy())
    tan = os.path.join(tmp, "tangents.npz")
    np.savez(tan, **{n: v.numpy().astype(np.float32) for n, v in zip(names, dirs)})
    args = ["tok=" + os.path.join(tmp, "tok.npy"), "labels=" + os.path.join(tmp, "lab.npy"), "--params"]
    got = tl_grad(tl, model, args, os.path.join(tmp, "g.npz"))
    missing = [n for n in names if "grad/" + n not in got]
    errs = [rel(got["loss"], loss.detach().numpy())] + [rel(got["grad/" + n], g.detach().numpy())
                                                        for n, g in zip(names, grads) if "grad/" + n in got]
    line = "%-28s %4s  tl %.1e over the loss and %d weights%s" % (
        "GPT-like, --params", "", max(errs), len(errs) - 1, " (missing: %s)" % ", ".join(missing) if missing else "")
    ok = not missing and max(errs) <= 1e-4
    if ok:  # tl hvp, a tangent for every weight, against the largest entry of the product
        tangents = [a for n in names for a in ("--tangent", "%s=%s:%s" % (n, tan, n))]
        try:
            h = tl_grad(tl, model, args + tangents, os.path.join(tmp, "h.npz"), command="hvp")
        except RuntimeError as e:
            return False, line + "; %s" % e
        scale = max(np.abs(v.numpy()).max() for v in hv)
        e = max(float(np.abs(h["hvp/" + n] - v.numpy()).max()) for n, v in zip(names, hv)) / scale
        ok = e <= 1e-4
        line += "; hvp %.1e" % e
    return ok, line + ("  ok" if ok else "  MISMATCH")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tl", default=os.path.join(ROOT, "tl"))
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    want = set(a.models)
    torch.set_num_threads(1)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="tl-survey.") as tmp:
        jobs = ([(n, s, "classifier") for n, s in CLASSIFIERS] + [(n, s, "segmenter") for n, s in SEGMENTERS] +
                [(n, s, "video") for n, s in VIDEO])
        for name, size, kind in jobs:
            if want and name not in want:
                continue
            try:
                ok, line = image_model(a.tl, tmp, name, size, kind)
            except Exception as e:  # an export PyTorch refuses, or tl's error line
                ok, line = False, "%-28s %4d  %s" % (name, size, e)
            bad += not ok
            print(line, flush=True)
        for name, size in TRAINING:
            if want and name + "_train" not in want:
                continue
            try:
                ok, line = training_model(a.tl, tmp, name, size)
            except Exception as e:
                ok, line = False, "%-28s %4d  %s" % (name + ", training", size, e)
            bad += not ok
            print(line, flush=True)
        if not want or "gpt" in want:
            ok, line = gpt(a.tl, tmp)
            bad += not ok
            print(line)
    print("%d model(s) differ" % bad if bad else "every model agrees")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
