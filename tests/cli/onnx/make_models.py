#!/usr/bin/python3
"""Writes the small hand-made ONNX models of tests/cli/onnx.txt (run from
the repository root with /usr/bin/python3, which has onnx).  Each model is a
few hundred bytes; the hostile ones are broken on purpose."""
import os
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

D = os.path.dirname(os.path.abspath(__file__))


def save(m, name, check=True):
    if check:
        onnx.checker.check_model(m)
    with open(os.path.join(D, name), "wb") as f:
        f.write(m.SerializeToString())


def model(nodes, inputs, outputs, inits=(), opset=13, name="g"):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="tl tests")


W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 1.0], [0.0, 0.5, -1.5]], np.float32)
B = np.array([0.1, -0.2, 0.3, -0.4], np.float32)
x_in = h.make_tensor_value_info("input.1", T.FLOAT, ["N", 3])
y_out = h.make_tensor_value_info("out", T.FLOAT, ["N", 4])

# mlp: Gemm (transB) then Relu, weights as captured constants
mlp = model([h.make_node("Gemm", ["input.1", "fc.weight", "fc.bias"], ["/fc/Gemm_output_0"], transB=1, name="/fc/Gemm"),
             h.make_node("Relu", ["/fc/Gemm_output_0"], ["out"], name="/relu/Relu")],
            [x_in], [y_out], [nh.from_array(W, "fc.weight"), nh.from_array(B, "fc.bias")])
save(mlp, "mlp.onnx")

# the same with fixed shapes (tl check, dot without inputs)
fixed = model(mlp.graph.node, [h.make_tensor_value_info("input.1", T.FLOAT, [2, 3])],
              [h.make_tensor_value_info("out", T.FLOAT, [2, 4])], mlp.graph.initializer)
save(fixed, "mlp_fixed.onnx")

# an initializer that is also an input: an input with a default
dflt = model([h.make_node("Mul", ["x", "scale"], ["y"])],
             [h.make_tensor_value_info("x", T.FLOAT, [3]), h.make_tensor_value_info("scale", T.FLOAT, [3])],
             [h.make_tensor_value_info("y", T.FLOAT, [3])],
             [nh.from_array(np.array([1.0, 2.0, 3.0], np.float32), "scale")])
save(dflt, "default.onnx")

# shape arithmetic from the call site: flatten all but the first axis
flat = model([h.make_node("Shape", ["x"], ["s"]),
              h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
              h.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
              h.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
              h.make_node("Reshape", ["x", "shape"], ["y"])],
             [h.make_tensor_value_info("x", T.FLOAT, ["N", "C", "H"])],
             [h.make_tensor_value_info("y", T.FLOAT, ["N", "M"])],
             [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array([0], np.int64), "ax0"),
              nh.from_array(np.array([-1], np.int64), "minus1")])
save(flat, "flatten_shape.onnx")

# ---- hostile ----
data = mlp.SerializeToString()
with open(os.path.join(D, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])

lying = onnx.ModelProto()
lying.CopyFrom(mlp)
lying.graph.initializer[0].raw_data = lying.graph.initializer[0].raw_data[:20]
save(lying, "lying_size.onnx", check=False)

save(model([h.make_node("FooBar", ["x"], ["y"], name="mystery")],
           [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3])]),
     "unknown_op.onnx", check=False)

save(model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [3])],
           [h.make_tensor_value_info("y", T.FLOAT, [3])], opset=25), "bad_opset.onnx", check=False)

m = model([h.make_node("Relu", ["x"], ["y"]), h.make_node("Neg", ["x"], ["y"])],
          [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3])])
save(m, "dup_name.onnx", check=False)

m = model([h.make_node("Relu", ["b"], ["a"], name="first"), h.make_node("Neg", ["a"], ["b"], name="second")],
          [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("b", T.FLOAT, [3])])
save(m, "cycle.onnx", check=False)


def external(location, name):
    """the mlp with fc.weight in an external file at location"""
    ext = onnx.ModelProto()
    ext.CopyFrom(mlp)
    w = ext.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "48")):
        e = w.external_data.add()
        e.key, e.value = k, v
    save(ext, name, check=False)


external("../../secret.bin", "external_outside.onnx")
# external data in a file that is not there (and, copied beside a folder of
# that name, one that cannot be read)
external("ext_missing.bin", "ext_missing.onnx")
# a location with a NUL byte: read as its prefix ("mlp.onnx"), it named another file
external("mlp.onnx\0../../x", "ext_nul.onnx")

# names holding a quote and a backslash (tl dot escapes them)
save(model([h.make_node("Relu", ["x"], ['a"b\\c'], name="r"), h.make_node("Neg", ['a"b\\c'], ["y"])],
           [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3])]),
     "quote_names.onnx")

f16 = model([h.make_node("Add", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT16, [3])],
            [h.make_tensor_value_info("y", T.FLOAT16, [3])],
            [nh.from_array(np.array([1, 2, 3], np.float16), "w")])
save(f16, "f16_weights.onnx")

# expected values of the mlp at x = [[1,2,3],[-1,0,1]] (PyTorch-free: numpy)
x = np.array([[1, 2, 3], [-1, 0, 1]], np.float32)
y = np.maximum(x @ W.T + B, 0)
print("mlp out:", y.tolist())

# wide: a 5x4 weight (over 16 elements: tl compile puts it in the .npz)
W5 = (np.arange(20, dtype=np.float32).reshape(5, 4) - 10) / 4
wide = model([h.make_node("MatMul", ["x", "layer.w"], ["y"], name="/mm")],
             [h.make_tensor_value_info("x", T.FLOAT, [2, 5])], [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
             [nh.from_array(W5, "layer.w")])
save(wide, "wide.onnx")

# default_wide: an input with a default of 20 elements (tl compile keeps the
# default, in the .npz) and a dynamic batch
W6 = (np.arange(20, dtype=np.float32).reshape(5, 4) - 8) / 8
dwide = model([h.make_node("MatMul", ["x", "w"], ["y"], name="/mm")],
              [h.make_tensor_value_info("x", T.FLOAT, ["batch", 5]), h.make_tensor_value_info("w", T.FLOAT, [5, 4])],
              [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])], [nh.from_array(W6, "w")])
save(dwide, "default_wide.onnx")
print("default_wide y at x = e0, e4:", (np.eye(5, dtype=np.float32)[[0, 4]] @ W6).tolist())

# the mlp's input as an -i file (tl diff -i)
np.savez(os.path.join(D, "mlp_inputs.npz"), **{"input.1": np.array([[1, 2, 3]], np.float32)})

# ---- the ONNX translations onto iterate, take and matmul (ops tl has no kernel of) ----
# Expected values: numpy loops in ONNX's order; gradients and antialiasing:
# PyTorch (scatter_reduce with include_self, F.interpolate with antialias),
# at float64.
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

fv = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)  # noqa: E731
SI = np.array([[1, 1, 3], [0, 2, 0]], np.int64)  # ScatterElements on axis 1: repeats in each row
NI = np.array([[1], [0], [1]], np.int64)  # ScatterND rows: row 1 twice
sc = model([h.make_node("ScatterElements", ["x", "si", "u"], ["mul"], axis=1, reduction="mul"),
            h.make_node("ScatterElements", ["x", "si", "u"], ["max"], axis=1, reduction="max"),
            h.make_node("ScatterElements", ["x", "si", "u"], ["min"], axis=1, reduction="min"),
            h.make_node("ScatterND", ["x", "ni", "v"], ["nd_max"], reduction="max"),
            h.make_node("ScatterND", ["x", "ni", "v"], ["nd_mul"], reduction="mul")],
           [fv("x", [2, 4]), fv("u", [2, 3]), fv("v", [3, 4])],
           [fv("mul", [2, 4]), fv("max", [2, 4]), fv("min", [2, 4]), fv("nd_max", [2, 4]), fv("nd_mul", [2, 4])],
           [nh.from_array(SI, "si"), nh.from_array(NI, "ni")], opset=18)
save(sc, "scatter_reduce.onnx", check=False)  # onnx 1.12's checker stops at opset 17
SX = np.array([[1.5, -2.0, 0.5, 3.0], [-1.0, 2.5, -0.25, 0.75]])
SU = np.array([[2.0, -0.5, 4.0], [-3.0, 1.25, 0.6]])
SV = np.array([[0.1, -4.0, 2.0, 1.0], [-2.0, 3.5, -1.5, 0.2], [5.0, -0.3, 0.4, -2.5]])
res = {}
for red, fn in (("mul", np.multiply), ("max", np.maximum), ("min", np.minimum)):
    y = SX.copy()
    for i in range(2):
        for j in range(3):
            y[i, SI[i, j]] = fn(y[i, SI[i, j]], SU[i, j])
    res[red] = y
for red, fn in (("nd_max", np.maximum), ("nd_mul", np.multiply)):
    y = SX.copy()
    for r in range(3):
        y[NI[r, 0]] = fn(y[NI[r, 0]], SV[r])
    res[red] = y
for k, y in res.items():
    print("scatter_reduce %s:" % k, y.astype(np.float32).tolist())
tx, tu, tv = (torch.tensor(a, requires_grad=True) for a in (SX, SU, SV))
ti, tn = torch.tensor(SI), torch.tensor(NI).expand(3, 4)
tot = sum(tx.scatter_reduce(1, ti, tu, r, include_self=True).sum() for r in ("prod", "amax", "amin"))
tot = tot + sum(tx.scatter_reduce(0, tn, tv, r, include_self=True).sum() for r in ("amax", "prod"))
tot.backward()
for k, g in (("x", tx), ("u", tu), ("v", tv)):
    print("scatter_reduce grad %s:" % k, g.grad.numpy().astype(np.float32).tolist())

# TopK with k over 64, smallest first, on axis 0 of [66, 2]
tk = model([h.make_node("TopK", ["x", "k"], ["values", "indices"], axis=0, largest=0)],
           [fv("x", [66, 2])], [fv("values", [65, 2]), h.make_tensor_value_info("indices", T.INT64, [65, 2])],
           [nh.from_array(np.array([65], np.int64), "k")], opset=11)
save(tk, "topk_big.onnx")
TX = np.array([[((i * 37) % 66) / 4 - 8, ((i * 5) % 66) / 8 - 4] for i in range(66)], np.float32)
order = np.argsort(TX, axis=0, kind="stable")[:65]
print("topk_big x:", TX.tolist())
print("topk_big values:", np.take_along_axis(TX, order, 0).tolist())
print("topk_big indices:", order.tolist())

# Resize of opset 18 with antialias (and exclude_outside, where PyTorch's
# antialiasing clips its window to the input): [1, 1, 4, 8] to [1, 1, 2, 3]
for mode, A in (("linear", -0.75), ("cubic", -0.5)):
    rz = model([h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=1, exclude_outside=1,
                            cubic_coeff_a=A)],
               [fv("x", [1, 1, 4, 8])], [fv("y", [1, 1, 2, 3])],
               [nh.from_array(np.array([1, 1, 2, 3], np.int64), "sizes")], opset=18)
    save(rz, "resize_aa_%s.onnx" % mode, check=False)
RX = np.array([[[[(i * 7 + j * 3) % 11 - 5 for j in range(8)] for i in range(4)]]], np.float64) / 2
tr = torch.tensor(RX, requires_grad=True)
for mode, tm in (("linear", "bilinear"), ("cubic", "bicubic")):
    y = F.interpolate(tr, size=(2, 3), mode=tm, align_corners=False, antialias=True)
    print("resize_aa_%s x:" % mode, RX.astype(np.float32).tolist())
    print("resize_aa_%s y:" % mode, y.detach().numpy().astype(np.float32).tolist())
    print("resize_aa_%s grad:" % mode, torch.autograd.grad(y.sum(), tr)[0].numpy().astype(np.float32).tolist())

# Einsum: traces, a batch diagonal, implicit outputs, three operands
# (numpy's einsum; the gradient of the sum of the outputs: PyTorch's)
EQS = [("ii->", ["A"]), ("ii", ["A"]), ("bii->bi", ["B"]), ("ij,jk,k->i", ["A", "C", "d"]), ("i,i,i", ["v", "v", "v"]),
       ("bij,bjk,kl->bil", ["B", "B", "C"])]
es = model([h.make_node("Einsum", ins, ["e%d" % i], equation=eq) for i, (eq, ins) in enumerate(EQS)],
           [fv("A", [3, 3]), fv("B", [2, 3, 3]), fv("C", [3, 4]), fv("d", [4]), fv("v", [3])],
           [fv("e%d" % i, list(np.einsum(eq, *[np.zeros((3, 3)) if n == "A" else np.zeros((2, 3, 3)) if n == "B" else
                                               np.zeros((3, 4)) if n == "C" else np.zeros(4) if n == "d" else
                                               np.zeros(3) for n in ins]).shape))
            for i, (eq, ins) in enumerate(EQS)], opset=12)
save(es, "einsum_more.onnx")
EV = {"A": np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0], [2.0, 1.5, -0.5]]),
      "B": np.array([[[0.5, 1.0, -1.5], [2.0, -0.5, 0.25], [1.0, 3.0, -2.0]],
                     [[-1.0, 0.75, 2.5], [0.5, 1.5, -0.25], [-2.0, 1.0, 0.5]]]),
      "C": np.array([[1.0, 0.5, -1.0, 2.0], [-0.5, 1.5, 0.25, -2.0], [2.0, -1.0, 0.5, 1.0]]),
      "d": np.array([0.5, -1.0, 2.0, 0.25]), "v": np.array([1.5, -0.5, 2.0])}
tv = {k: torch.tensor(a, requires_grad=True) for k, a in EV.items()}
tot = 0
for i, (eq, ins) in enumerate(EQS):
    print("einsum_more e%d:" % i, np.einsum(eq, *[EV[n] for n in ins]).astype(np.float32).tolist())
    tot = tot + torch.einsum(eq, *[tv[n] for n in ins]).sum()
tot.backward()
for k in EV:
    print("einsum_more %s:" % k, EV[k].astype(np.float32).tolist())
    print("einsum_more grad %s:" % k, tv[k].grad.numpy().astype(np.float32).tolist())

# Resize as ONNX's reference computes it (onnx 1.12's interpolate_nd, the
# generator of its backend tests): tf_crop_and_resize with an
# extrapolation value, linear exclude_outside, align_corners nearest with a
# fractional input size x scale
from onnx.backend.test.case.node import resize as ref  # noqa: E402
RZ = np.array([[[[(i * 5 + j * 2) % 7 - 3.0 for j in range(5)] for i in range(4)]]]) / 2
RCASES = [("crop", dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0),
           None, [1, 1, 3, 4], np.array([0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7])),
          ("crop_cubic", dict(mode="cubic", coordinate_transformation_mode="tf_crop_and_resize"), None, [1, 1, 3, 3],
           np.array([0, 0, -0.1, 0.2, 1, 1, 0.8, 0.9])),
          ("excl", dict(mode="cubic", exclude_outside=1, coordinate_transformation_mode="half_pixel"),
           np.array([1, 1, 0.6, 1.7]), None, None),
          ("aligned", dict(mode="linear", coordinate_transformation_mode="align_corners"),
           np.array([1, 1, 1.3, 0.7]), None, None)]
for nm, at, scales, sizes, roi in RCASES:
    ins = ["x", "roi" if roi is not None else "", "scales" if scales is not None else ""] + (["sizes"] if sizes else [])
    inits = [nh.from_array(np.array([] if roi is None else roi, np.float32), "roi")] if roi is not None else []
    if scales is not None:
        inits.append(nh.from_array(scales.astype(np.float32), "scales"))
    if sizes:
        inits.append(nh.from_array(np.array(sizes, np.int64), "sizes"))
    mode = at["mode"]
    coeffs = {"linear": ref.linear_coeffs, "cubic": ref.cubic_coeffs, "nearest": ref.nearest_coeffs}[mode]
    kw = {k: v for k, v in at.items() if k in ("coordinate_transformation_mode", "extrapolation_value")}
    kw["exclude_outside"] = bool(at.get("exclude_outside", 0))
    y = ref.interpolate_nd(RZ, coeffs, output_size=sizes,
                           scale_factors=None if scales is None else scales.astype(np.float32), roi=roi, **kw)
    m = model([h.make_node("Resize", ins, ["y"], **at)], [fv("x", [1, 1, 4, 5])], [fv("y", list(y.shape))], inits)
    save(m, "resize_ref_%s.onnx" % nm)
    print("resize_ref_%s y:" % nm, y.astype(np.float32).tolist())
print("resize_ref x:", RZ.astype(np.float32).tolist())

# Clip with bounds from the inputs (one computed from an input): the
# bounds stay values of the recipe, differentiated (maximum, minimum)
cb = model([h.make_node("Neg", ["lo"], ["nlo"]), h.make_node("Clip", ["x", "nlo", "hi"], ["y"])],
           [fv("x", [3]), fv("lo", []), fv("hi", [])], [fv("y", [3])])
save(cb, "clip_bounds.onnx")

# loop_slice: a Loop whose body slices x[i+1:i+3] with its step number i
# (Slice's starts and ends computed in the body, as a scripted x[i+1:i+3]
# exports), summing the squares into a carried value and stacking the
# slices; M a graph input (3: every window inside x; 4: the last leaves it)
body = h.make_graph(
    [h.make_node("Constant", [], ["one"], value=nh.from_array(np.array(1, np.int64))),
     h.make_node("Constant", [], ["three"], value=nh.from_array(np.array([3], np.int64))),
     h.make_node("Add", ["i", "one"], ["i1"]),
     h.make_node("Unsqueeze", ["i1", "ax0"], ["start"]),
     h.make_node("Add", ["start", "two"], ["end"]),
     h.make_node("Slice", ["x", "start", "end", "ax0"], ["win"]),
     h.make_node("Mul", ["win", "win"], ["sq"]),
     h.make_node("ReduceSum", ["sq", "ax0"], ["part"], keepdims=0),
     h.make_node("Add", ["acc_in", "part"], ["acc_out"]),
     h.make_node("Identity", ["cond_in"], ["cond_out"]),
     h.make_node("Identity", ["win"], ["win_out"])],
    "body",
    [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
     h.make_tensor_value_info("acc_in", T.FLOAT, [2])],
    [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, [2]),
     h.make_tensor_value_info("win_out", T.FLOAT, [2, 2])])
ls = model([h.make_node("Loop", ["M", "cond", "y"], ["acc", "wins"], body=body)],
           [h.make_tensor_value_info("M", T.INT64, []), h.make_tensor_value_info("x", T.FLOAT, [5, 2]),
            h.make_tensor_value_info("y", T.FLOAT, [2])],
           [h.make_tensor_value_info("acc", T.FLOAT, [2]), h.make_tensor_value_info("wins", T.FLOAT, ["M", 2, 2])],
           [nh.from_array(np.array(True), "cond"), nh.from_array(np.array([0], np.int64), "ax0"),
            nh.from_array(np.array(2, np.int64), "two")])
save(ls, "loop_slice.onnx")
xs = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
wins = [xs[i + 1:i + 3] for i in range(3)]
print("loop_slice: acc", np.array([0.5, -0.5], np.float32) + sum((w * w).sum(0) for w in wins),
      "d acc/dx", 2 * xs * np.array([0, 1, 2, 2, 1], np.float32)[:, None])

# bool_where: a bool input first; given as numbers of either float width,
# the call's float type is the float inputs'
bw = model([h.make_node("Where", ["c", "x", "y"], ["z"])],
           [h.make_tensor_value_info("c", T.BOOL, [2]), fv("x", [2]), fv("y", [2])], [fv("z", [2])])
save(bw, "bool_where.onnx")

# hostile loop counts and conditions (fuzz_onnx found an empty M read past
# its data): a Loop body whose condition output is an empty constant, and
# an opset-8 Scan whose sequence_lens is empty; each must hold one element
lbody = h.make_graph(
    [h.make_node("Constant", [], ["cond_out"], value=nh.from_array(np.zeros([0], bool))),
     h.make_node("Add", ["acc_in", "acc_in"], ["acc_out"])],
    "body",
    [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
     h.make_tensor_value_info("acc_in", T.FLOAT, [2])],
    [h.make_tensor_value_info("cond_out", T.BOOL, [0]), h.make_tensor_value_info("acc_out", T.FLOAT, [2])])
lc = model([h.make_node("Loop", ["M", "", "y"], ["acc"], body=lbody)],
           [h.make_tensor_value_info("M", T.INT64, []), h.make_tensor_value_info("y", T.FLOAT, [2])],
           [h.make_tensor_value_info("acc", T.FLOAT, [2])])
save(lc, "loop_cond_empty.onnx", check=False)
sbody = h.make_graph([h.make_node("Add", ["s_in", "e"], ["s_out"])], "body",
                     [h.make_tensor_value_info("s_in", T.FLOAT, [2]), h.make_tensor_value_info("e", T.FLOAT, [2])],
                     [h.make_tensor_value_info("s_out", T.FLOAT, [2])])
sc = model([h.make_node("Scan", ["lens", "s0", "xs"], ["s"], body=sbody, num_scan_inputs=1)],
           [h.make_tensor_value_info("s0", T.FLOAT, [1, 2]), h.make_tensor_value_info("xs", T.FLOAT, [1, 3, 2])],
           [h.make_tensor_value_info("s", T.FLOAT, [1, 2])], [nh.from_array(np.zeros([0], np.int32), "lens")],
           opset=8)
save(sc, "scan8_lens_empty.onnx", check=False)

# scan outputs stacked as they are made: each step's Neg of a row of xs,
# forward and reversed; the rows of zeros give -0, which the stack keeps
# (tl adds each row into a stack of -0: +0 would have been 0 + -0)
nbody = h.make_graph([h.make_node("Neg", ["e"], ["y"]), h.make_node("Identity", ["s_in"], ["s_out"])], "body",
                     [h.make_tensor_value_info("s_in", T.FLOAT, [2]), h.make_tensor_value_info("e", T.FLOAT, [2])],
                     [h.make_tensor_value_info("s_out", T.FLOAT, [2]), h.make_tensor_value_info("y", T.FLOAT, [2])])
sn = model([h.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=nbody, num_scan_inputs=1),
            h.make_node("Scan", ["s0", "xs"], ["s2", "yr"], body=nbody, num_scan_inputs=1,
                        scan_output_directions=[1])],
           [h.make_tensor_value_info("s0", T.FLOAT, [2]), h.make_tensor_value_info("xs", T.FLOAT, [3, 2])],
           [h.make_tensor_value_info("ys", T.FLOAT, [3, 2]), h.make_tensor_value_info("yr", T.FLOAT, [3, 2])],
           opset=13)
save(sn, "scan_negzero.onnx")

# one element where ONNX defines one: If's cond, a Clip bound given as an
# initializer, ConstantOfShape's value; each of two elements is refused,
# in the words of the Loop's checks above
ifb = [h.make_graph([h.make_node(op, ["x"], ["y" + s])], "b" + s, [], [fv("y" + s, [2])])
       for op, s in (("Identity", "t"), ("Neg", "e"))]
ic = model([h.make_node("If", ["c"], ["y"], then_branch=ifb[0], else_branch=ifb[1])],
           [h.make_tensor_value_info("c", T.BOOL, [2]), fv("x", [2])], [fv("y", [2])])
save(ic, "if_cond_two.onnx", check=False)
cc = model([h.make_node("Clip", ["x", "lo"], ["y"])], [fv("x", [3])], [fv("y", [3])],
           [nh.from_array(np.array([0.0, 1.0], np.float32), "lo")])
save(cc, "clip_min_two.onnx", check=False)
cs = model([h.make_node("ConstantOfShape", ["s"], ["y"], value=nh.from_array(np.array([1.0, 2.0], np.float32)))],
           [], [fv("y", [2])], [nh.from_array(np.array([2], np.int64), "s")])
save(cs, "const_of_shape_two.onnx", check=False)

# ---- a session's audit (December 7) ----
# Pad whose constant_value is an input: differentiated like any input (the
# pad cells' cotangents), never folded at load
pc = model([h.make_node("Pad", ["x", "pads", "c"], ["y"], mode="constant", name="pad")],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 3]), h.make_tensor_value_info("c", T.DOUBLE, [])],
           [h.make_tensor_value_info("y", T.DOUBLE, [2, 5])],
           [nh.from_array(np.array([0, 1, 0, 1], np.int64), "pads")])
save(pc, "pad_value_input.onnx")

# attributes of the wrong type, twice, and an input too many: the checker
# refuses each, and so does tl (read as absent, each changed the result)
ab = [h.make_tensor_value_info("a", T.DOUBLE, [2, 2]), h.make_tensor_value_info("b", T.DOUBLE, [2, 2])]
yo = [h.make_tensor_value_info("y", T.DOUBLE, [2, 2])]
gf = model([h.make_node("Gemm", ["a", "b"], ["y"])], ab, yo)
gf.graph.node[0].attribute.append(h.make_attribute("transA", 1.0))  # a FLOAT
save(gf, "gemm_transa_float.onnx", check=False)
gt = model([h.make_node("Gemm", ["a", "b"], ["y"], transA=1)], ab, yo)
gt.graph.node[0].attribute.append(h.make_attribute("transA", 0))
save(gt, "gemm_transa_twice.onnx", check=False)
save(model([h.make_node("Relu", ["a", "b"], ["y"])], ab, yo), "relu_two_inputs.onnx", check=False)
sa = model([h.make_node("Softmax", ["a"], ["y"])], ab[:1], yo)
sa.graph.node[0].attribute.append(h.make_attribute("axis", "zero"))
save(sa, "softmax_axis_string.onnx", check=False)

# NonZero and Compress of constants: evaluated at load (the shape of the
# result follows the values); Compress's data may come at run time
c4 = nh.from_array(np.array([0.0, 2.0, 0.0, 1.0]), "c")
save(model([h.make_node("NonZero", ["c"], ["y"])], [], [h.make_tensor_value_info("y", T.INT64, [1, 2])], [c4]),
     "nonzero_const.onnx")
save(model([h.make_node("Compress", ["x", "cond"], ["y"], axis=1)],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 4])], [h.make_tensor_value_info("y", T.DOUBLE, [2, 3])],
           [nh.from_array(np.array([True, False, True, True]), "cond")]), "compress_const.onnx")

# Einsum's broadcast axes ("..."), aligned to the right, of size 1 against n
save(model([h.make_node("Einsum", ["a", "b"], ["y"], equation="...i,...i->...")],
           [h.make_tensor_value_info("a", T.DOUBLE, [2, 1, 3]), h.make_tensor_value_info("b", T.DOUBLE, [4, 3])],
           [h.make_tensor_value_info("y", T.DOUBLE, [2, 4])]), "einsum_ellipsis_bcast.onnx")

# MatMul of integers: exact and wrapping, batch axes broadcast, a 1-d operand
save(model([h.make_node("MatMul", ["a", "b"], ["y"])],
           [h.make_tensor_value_info("a", T.INT64, [2, 1, 2, 3]), h.make_tensor_value_info("b", T.INT64, [3])],
           [h.make_tensor_value_info("y", T.INT64, [2, 1, 2])]), "matmul_int.onnx")

# ArgMax of int32 (read exactly as f64); of int64, an error
save(model([h.make_node("ArgMax", ["a"], ["y"], axis=1, keepdims=0)],
           [h.make_tensor_value_info("a", T.INT32, [2, 3])], [h.make_tensor_value_info("y", T.INT64, [2])]),
     "argmax_i32.onnx")
save(model([h.make_node("ArgMax", ["a"], ["y"], axis=1, keepdims=0)],
           [h.make_tensor_value_info("a", T.INT64, [2, 3])], [h.make_tensor_value_info("y", T.INT64, [2])]),
     "argmax_i64.onnx")

# Inputs a node needs at load (TopK's k, Reshape's shape): tl compile takes
# their values then, and leaves them out of the compiled graph's inputs
save(model([h.make_node("TopK", ["x", "k"], ["v", "i"], axis=0), h.make_node("Reshape", ["x", "s"], ["r"])],
           [h.make_tensor_value_info("x", T.FLOAT, [6]), h.make_tensor_value_info("k", T.INT64, [1]),
            h.make_tensor_value_info("s", T.INT64, [2])],
           [h.make_tensor_value_info("v", T.FLOAT, ["K"]), h.make_tensor_value_info("i", T.INT64, ["K"]),
            h.make_tensor_value_info("r", T.FLOAT, ["A", "B"])]), "fixed_inputs.onnx")
# a shape input the recipe also reads (added to data): compiled, it stays an
# input that holds for the values given only, and tl compile warns
save(model([h.make_node("Reshape", ["x", "s"], ["r"]), h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
            h.make_node("ReduceSum", ["sf"], ["t"], keepdims=0), h.make_node("Add", ["r", "t"], ["y"])],
           [h.make_tensor_value_info("x", T.FLOAT, [6]), h.make_tensor_value_info("s", T.INT64, [2])],
           [h.make_tensor_value_info("y", T.FLOAT, ["A", "B"])]), "pinned_input.onnx")

# int32 constants through Reshape, Flatten, Squeeze, Unsqueeze and a Cast,
# folded at load: read as int64, they were other numbers
X32 = np.array([[1, -2, 3], [4, 5, -6]], np.int32)
save(model([h.make_node("Reshape", ["c", "s"], ["r"]), h.make_node("Flatten", ["c"], ["f"], axis=0),
            h.make_node("Unsqueeze", ["c", "ax"], ["u"]), h.make_node("Squeeze", ["u", "ax"], ["q"]),
            h.make_node("Cast", ["c"], ["w"], to=T.INT64)],
           [], [h.make_tensor_value_info("r", T.INT32, [3, 2]), h.make_tensor_value_info("f", T.INT32, [1, 6]),
                h.make_tensor_value_info("q", T.INT32, [2, 3]), h.make_tensor_value_info("w", T.INT64, [2, 3])],
           [nh.from_array(X32, "c"), nh.from_array(np.array([3, 2], np.int64), "s"),
            nh.from_array(np.array([0], np.int64), "ax")]), "int32_consts.onnx")

# OneHot in a model whose only input is integer (token ids): one_hot is in
# the recipe's f64 there, and its mask was cast to f32 ("operands differ")
save(model([h.make_node("OneHot", ["i", "d", "v"], ["y"])], [h.make_tensor_value_info("i", T.INT64, [2])],
           [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
           [nh.from_array(np.array(3, np.int64), "d"), nh.from_array(np.array([0, 1], np.float32), "v")], opset=11),
     "onehot_ids.onnx")

# ConvTranspose with auto_pad SAME and output_padding: the output is
# in * stride, the output padding part of the total padding
for ap in ("SAME_UPPER", "SAME_LOWER"):
    save(model([h.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], auto_pad=ap, output_padding=[1])],
               [h.make_tensor_value_info("x", T.DOUBLE, [1, 1, 4]), h.make_tensor_value_info("w", T.DOUBLE, [1, 1, 2])],
               [h.make_tensor_value_info("y", T.DOUBLE, [1, 1, 8])], opset=11), "convt_%s.onnx" % ap.lower())

# pools with pads past half the kernel and ceil_mode: a last window that
# starts in the padding after the input is dropped (PyTorch; ONNX from 19)
save(model([h.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3], strides=[2], pads=[2, 2], ceil_mode=1),
            h.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3], strides=[2], pads=[2, 2], ceil_mode=1),
            h.make_node("AveragePool", ["x"], ["c"], kernel_shape=[3], strides=[2], pads=[2, 2], ceil_mode=1,
                        count_include_pad=1)],
           [h.make_tensor_value_info("x", T.DOUBLE, [1, 1, 4])],
           [h.make_tensor_value_info(n, T.DOUBLE, [1, 1, 3]) for n in "mac"]), "pool_wide_ceil.onnx")

# GatherElements with indices smaller than the data on another axis
save(model([h.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], [h.make_tensor_value_info("x", T.DOUBLE, [3, 3])],
           [h.make_tensor_value_info("y", T.DOUBLE, [2, 1])], [nh.from_array(np.array([[2], [0]], np.int64), "i")]),
     "gather_elements_small.onnx")

# Split: a negative size, and an uneven split before opset 18: errors
save(model([h.make_node("Split", ["x", "s"], ["a", "b"])], [h.make_tensor_value_info("x", T.DOUBLE, [3])],
           [h.make_tensor_value_info(n, T.DOUBLE, None) for n in "ab"],
           [nh.from_array(np.array([4, -1], np.int64), "s")]), "split_negative.onnx", check=False)
save(model([h.make_node("Split", ["x"], ["a", "b"])], [h.make_tensor_value_info("x", T.DOUBLE, [3])],
           [h.make_tensor_value_info(n, T.DOUBLE, None) for n in "ab"]), "split_uneven.onnx", check=False)

# BatchNormalization of opset 7 with spatial=0: refused, saying so
save(model([h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0)],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 3, 2])], [h.make_tensor_value_info("y", T.DOUBLE, [2, 3, 2])],
           [nh.from_array(np.ones((3, 2)), n) for n in "sbmv"], opset=7), "bn_spatial0.onnx")

# ---- integers where ONNX defines them (December 7, later) ----
# Relu (14) and PRelu (16) of int64; ReduceMax, ReduceMin, ReduceSumSquare
# and ArgMin of int64, exact past 2^53 (maxima by halves, not through f64)
save(model([h.make_node("Relu", ["a"], ["r"]), h.make_node("PRelu", ["a", "s"], ["p"]),
            h.make_node("ReduceMax", ["a"], ["mx"], axes=[0, 2], keepdims=0),
            h.make_node("ReduceMin", ["a"], ["mn"], axes=[-2]),
            h.make_node("ReduceSumSquare", ["a"], ["ss"], axes=[2], keepdims=0),
            h.make_node("ArgMin", ["a"], ["am"], axis=2, select_last_index=1)],
           [h.make_tensor_value_info("a", T.INT64, [2, 3, 3]), h.make_tensor_value_info("s", T.INT64, [3])],
           [h.make_tensor_value_info("r", T.INT64, [2, 3, 3]), h.make_tensor_value_info("p", T.INT64, [2, 3, 3]),
            h.make_tensor_value_info("mx", T.INT64, [3]), h.make_tensor_value_info("mn", T.INT64, [2, 1, 3]),
            h.make_tensor_value_info("ss", T.INT64, [2, 3]), h.make_tensor_value_info("am", T.INT64, [2, 3, 1])],
           opset=16), "int_ops.onnx")
# ReduceMax of int32 at opset 18 (axes an input); ReduceMean of int64: refused
save(model([h.make_node("ReduceMax", ["a", "ax"], ["y"], keepdims=0)], [h.make_tensor_value_info("a", T.INT32, [2, 5])],
           [h.make_tensor_value_info("y", T.INT32, [2])], [nh.from_array(np.array([1], np.int64), "ax")], opset=18),
     "reduce_max_i32.onnx", check=False)  # (onnx 1.12's checker knows opset 17)
save(model([h.make_node("ReduceMean", ["a"], ["y"], axes=[1])], [h.make_tensor_value_info("a", T.INT64, [2, 5])],
           [h.make_tensor_value_info("y", T.INT64, [2, 1])]), "reduce_mean_i64.onnx")

# ScatterElements with indices smaller than the data on another axis
# (torch.scatter with a smaller index exports so): the block the indices
# cover is scattered, the rest of the data kept
save(model([h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1),
            h.make_node("ScatterElements", ["x", "i", "u"], ["a"], axis=1, reduction="add")],
           [h.make_tensor_value_info("x", T.DOUBLE, ["N", 4]), h.make_tensor_value_info("u", T.DOUBLE, [2, 2])],
           [h.make_tensor_value_info(n, T.DOUBLE, ["N", 4]) for n in "ya"],
           [nh.from_array(np.array([[3, 0], [1, 2]], np.int64), "i")], opset=16), "scatter_elements_small.onnx")

# TopK over infinities, NaN, ties and integers (int64 data, as
# pack_padded_sequence(enforce_sorted=False) exports): every element picked
# once, ties to the lower index, NaN the largest (PyTorch's order)
save(model([h.make_node("TopK", ["x", "k"], ["xl", "il"], axis=1, largest=1),
            h.make_node("TopK", ["x", "k"], ["xs", "is"], axis=1, largest=0),
            h.make_node("TopK", ["n", "k"], ["nl", "jl"], axis=1, largest=1),
            h.make_node("TopK", ["n", "k"], ["ns", "js"], axis=1, largest=0)],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 5]), h.make_tensor_value_info("n", T.INT64, [2, 5])],
           [h.make_tensor_value_info(v, T.DOUBLE, [2, 4]) for v in ("xl", "xs")] +
           [h.make_tensor_value_info(v, T.INT64, [2, 4]) for v in ("il", "is", "nl", "jl", "ns", "js")],
           [nh.from_array(np.array([4], np.int64), "k")], opset=11), "topk_special.onnx")
KX = np.array([[np.inf, 1.0, np.inf, np.nan, -np.inf], [-np.inf, -np.inf, 2.0, 2.0, -np.inf]])
KN = np.array([[2**63 - 1, -2**63, 5, 2**63 - 1, -2**63], [-2**63, -2**63, -2**63, 7, -2**63]], np.int64)
np.savez(os.path.join(D, "topk_special.npz"), x=KX, n=KN)


def topk_ref(a, largest):
    # a stable order: NaN the largest, ties to the lower index
    nan = [v != v for v in a.tolist()]
    key = [((0, 0) if n else (1, -v)) if largest else ((1, 0) if n else (0, v))
           for n, v in zip(nan, a.tolist())]
    return sorted(range(len(key)), key=lambda j: (key[j], j))[:4]


for nm, arr in (("x", KX), ("n", KN)):
    for largest in (True, False):
        print("topk_special %s %s:" % (nm, "largest" if largest else "smallest"),
              [topk_ref(r, largest) for r in arr])

# ScatterElements on int64 data computed at run time (an ArgMax): exact
# past 2^53, reductions none, add and max, and int32 data wrapping
SU = np.array([[2**40 + 5, -7]], np.int64)
save(model([h.make_node("ArgMax", ["x"], ["a"], axis=0, keepdims=1),
            h.make_node("ScatterElements", ["a", "si", "su"], ["none"], axis=1),
            h.make_node("ScatterElements", ["a", "si", "su"], ["add"], axis=1, reduction="add"),
            h.make_node("ScatterElements", ["a", "si", "su"], ["max"], axis=1, reduction="max"),
            h.make_node("Cast", ["a"], ["a32"], to=T.INT32),
            h.make_node("ScatterElements", ["a32", "si", "s32"], ["add32"], axis=1, reduction="add")],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 4])],
           [h.make_tensor_value_info(n, T.INT64, [1, 4]) for n in ("none", "add", "max")] +
           [h.make_tensor_value_info("add32", T.INT32, [1, 4])],
           [nh.from_array(np.array([[3, 1]], np.int64), "si"), nh.from_array(SU, "su"),
            nh.from_array(np.array([[2**31 - 1, -5]], np.int32), "s32")], opset=18),
     "scatter_int.onnx", check=False)
SX = np.array([[1, 0, 3, 0], [0, 2, 1, 4]])
SA = np.argmax(SX, axis=0)[None].astype(np.int64)
ref = {"none": SA.copy(), "add": SA.copy(), "max": SA.copy(), "add32": SA.astype(np.int32)}
for j, (i, u, u32) in enumerate(zip([3, 1], SU[0], [2**31 - 1, -5])):
    ref["none"][0, i] = u
    ref["add"][0, i] += u
    ref["max"][0, i] = max(ref["max"][0, i], u)
    ref["add32"][0, i] = np.int32((int(ref["add32"][0, i]) + u32 + 2**31) % 2**32 - 2**31)
print("scatter_int:", {k: v.tolist() for k, v in ref.items()})

# LayerNormalization with a 0-d Scale and a [1] B (broadcast over the
# normalized axes, as ONNX's reference does), and a Scale of a wrong size
LX = np.array([[1.0, 2.0, 4.0], [-1.0, 0.5, 3.0]])
save(model([h.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 3])], [h.make_tensor_value_info("y", T.DOUBLE, [2, 3])],
           [nh.from_array(np.array(2.0), "s"), nh.from_array(np.array([0.5]), "b")], opset=17),
     "layernorm_scalar.onnx", check=False)
save(model([h.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1)],
           [h.make_tensor_value_info("x", T.DOUBLE, [2, 3])], [h.make_tensor_value_info("y", T.DOUBLE, [2, 3])],
           [nh.from_array(np.array([1.0, 2.0]), "s")], opset=17), "layernorm_bad_scale.onnx", check=False)
lx = torch.tensor(LX, requires_grad=True)
ly = torch.nn.functional.layer_norm(lx, (3,), eps=1e-5) * 2.0 + 0.5
(ly * torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 2.0]])).sum().backward()  # the case's seed
np.savez(os.path.join(D, "layernorm_scalar_expected.npz"), **{"y": ly.detach().numpy(), "grad/x": lx.grad.numpy()})
print("layernorm_scalar y:", ly.detach().tolist(), "grad:", lx.grad.tolist())

# the same name for two initializers, and a graph input listed twice (as
# such and as an initializer's input): errors naming the name
save(model([h.make_node("Add", ["x", "w"], ["y"])], [h.make_tensor_value_info("x", T.DOUBLE, [2])],
           [h.make_tensor_value_info("y", T.DOUBLE, [2])],
           [nh.from_array(np.ones(2), "w"), nh.from_array(np.zeros(2), "w")]), "dup_init.onnx", check=False)
save(model([h.make_node("Add", ["x", "w"], ["y"])],
           [h.make_tensor_value_info("x", T.DOUBLE, [2]), h.make_tensor_value_info("w", T.DOUBLE, [2]),
            h.make_tensor_value_info("x", T.DOUBLE, [2])],
           [h.make_tensor_value_info("y", T.DOUBLE, [2])]), "dup_input.onnx", check=False)
save(model([h.make_node("Add", ["x", "w"], ["y"])],
           [h.make_tensor_value_info("x", T.DOUBLE, [2]), h.make_tensor_value_info("w", T.DOUBLE, [2]),
            h.make_tensor_value_info("w", T.DOUBLE, [2])],
           [h.make_tensor_value_info("y", T.DOUBLE, [2])], [nh.from_array(np.ones(2), "w")]),
     "dup_input_init.onnx", check=False)

# tl compile's twin of a model runs as the model does:
# - OneHot with a float depth input and f64 values: compile fixes depth,
#   and the one_hot it writes keeps the model's element type (f32 here,
#   from depth) instead of taking the compiled graph's (f64, from values)
save(model([h.make_node("OneHot", ["indices", "depth", "values"], ["y"])],
           [h.make_tensor_value_info("indices", T.INT64, [3]), h.make_tensor_value_info("depth", T.FLOAT, []),
            h.make_tensor_value_info("values", T.DOUBLE, [2])],
           [h.make_tensor_value_info("y", T.DOUBLE, [3, "D"])], opset=11), "compile_onehot.onnx")
# - inputs whose values shape nothing (u read through Shape alone, w read
#   by no node): inputs of the twin still, not fixed
save(model([h.make_node("Shape", ["u"], ["su"]), h.make_node("Cast", ["su"], ["sf"], to=T.FLOAT),
            h.make_node("ReduceSum", ["sf"], ["t"], keepdims=0), h.make_node("Add", ["x", "t"], ["y"])],
           [h.make_tensor_value_info("x", T.FLOAT, [3]), h.make_tensor_value_info("u", T.FLOAT, [2]),
            h.make_tensor_value_info("w", T.FLOAT, [3])],
           [h.make_tensor_value_info("y", T.FLOAT, [3])]), "compile_unread.onnx")
# - constants JSON cannot hold: an int64 of 2^53 + 1, and NaNs with the sign
#   bit and with a payload (in the npz beside the twin, not inline)
NANS = np.array([0xffc00000, 0x7fc00123], np.uint32).view(np.float32)
save(model([h.make_node("Mul", ["a", "big"], ["yi"]), h.make_node("Add", ["x", "c"], ["yf"])],
           [h.make_tensor_value_info("a", T.INT64, [2]), h.make_tensor_value_info("x", T.FLOAT, [2])],
           [h.make_tensor_value_info("yi", T.INT64, [2]), h.make_tensor_value_info("yf", T.FLOAT, [2])],
           [nh.from_array(np.array([2 ** 53 + 1], np.int64), "big"), nh.from_array(NANS, "c")]),
     "compile_exact.onnx")

# ---- integer Shrink, Gemm and Einsum; opset-8 Scan over a batch (December 7, eighth) ----
# Shrink of int32 and int64: the tests against ceil(-lambd) and floor(lambd),
# x +- bias truncated toward zero as NumPy's float sum cast back is
# (refused, "the input is int32", until these cases)
save(model([h.make_node("Shrink", ["a"], ["y"], lambd=1.5, bias=0.5),
            h.make_node("Shrink", ["b"], ["z"], lambd=-2.0, bias=-2.25)],
           [h.make_tensor_value_info("a", T.INT32, [7]), h.make_tensor_value_info("b", T.INT64, [7])],
           [h.make_tensor_value_info("y", T.INT32, [7]), h.make_tensor_value_info("z", T.INT64, [7])]),
     "shrink_int.onnx")
# Gemm of int32 (transA, alpha 2, beta -3, a row of C broadcast), wrapping;
# and alpha 0.5, refused
save(model([h.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=2.0, beta=-3.0)],
           [h.make_tensor_value_info("a", T.INT32, [2, 3]), h.make_tensor_value_info("b", T.INT32, [2, 2]),
            h.make_tensor_value_info("c", T.INT32, [2])], [h.make_tensor_value_info("y", T.INT32, [3, 2])]),
     "gemm_int.onnx")
save(model([h.make_node("Gemm", ["a", "b"], ["y"], alpha=0.5)],
           [h.make_tensor_value_info("a", T.INT64, [2, 2]), h.make_tensor_value_info("b", T.INT64, [2, 2])],
           [h.make_tensor_value_info("y", T.INT64, [2, 2])]), "gemm_int_half.onnx")
# Einsum of int64 past 2^53 (a batched product and a diagonal), and of int32
# wrapping; both were refused until these cases
save(model([h.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik"),
            h.make_node("Einsum", ["c"], ["d"], equation="ii->i"),
            h.make_node("Einsum", ["e", "e"], ["w"], equation="i,j->ij")],
           [h.make_tensor_value_info("a", T.INT64, [2, 1, 2]), h.make_tensor_value_info("b", T.INT64, [2, 2, 1]),
            h.make_tensor_value_info("c", T.INT64, [2, 2]), h.make_tensor_value_info("e", T.INT32, [2])],
           [h.make_tensor_value_info("y", T.INT64, [2, 1, 1]), h.make_tensor_value_info("d", T.INT64, [2]),
            h.make_tensor_value_info("w", T.INT32, [2, 2])], opset=12), "einsum_int.onnx")

# Scan at opset 8 over a batch of 3 (axis 0 the batch, axis 1 the steps):
# sequence_lens 4, 1, 2 (the scan outputs padded with zeros), the first
# scan input reversed; s = tanh(s + x f), y = s x, z = f - s.  Only a batch
# of 1 was translated until this case.
f8 = lambda n, s: h.make_tensor_value_info(n, T.DOUBLE, s)
body8 = h.make_graph([h.make_node("Mul", ["e", "f"], ["m"]), h.make_node("Add", ["s_in", "m"], ["u"]),
                      h.make_node("Tanh", ["u"], ["s_out"]), h.make_node("Mul", ["s_out", "e"], ["y"]),
                      h.make_node("Sub", ["f", "s_in"], ["z"])], "body",
                     [f8("s_in", [2]), f8("e", [2]), f8("f", [2])], [f8("s_out", [2]), f8("y", [2]), f8("z", [2])])
save(model([h.make_node("Scan", ["lens", "s0", "xs", "fs"], ["s", "ys", "zs"], body=body8, num_scan_inputs=2,
                        directions=[1, 0])],
           [f8("s0", [3, 2]), f8("xs", [3, 4, 2]), f8("fs", [3, 4, 2])],
           [f8("s", [3, 2]), f8("ys", [3, 4, 2]), f8("zs", [3, 4, 2])],
           [nh.from_array(np.array([4, 1, 2], np.int64), "lens")], opset=8), "scan8_batch.onnx")
rng8 = np.random.default_rng(8)
s0, xs, fs = rng8.standard_normal((3, 2)), rng8.standard_normal((3, 4, 2)), rng8.standard_normal((3, 4, 2))
S, Y, Z = np.zeros((3, 2)), np.zeros((3, 4, 2)), np.zeros((3, 4, 2))
for b, L in enumerate((4, 1, 2)):  # ONNX's definition, a loop over the batch
    s, x = s0[b], xs[b, :L][::-1]
    for i in range(L):
        sn = np.tanh(s + x[i] * fs[b, i])
        Y[b, i], Z[b, i], s = sn * x[i], fs[b, i] - s, sn
    S[b] = s
np.savez(os.path.join(D, "scan8_batch_inputs.npz"), s0=s0, xs=xs, fs=fs)
np.savez(os.path.join(D, "scan8_batch_expected.npz"), s=S, ys=Y, zs=Z)
# a sequence length of 0 is refused (its scan outputs' shape needs a step)
save(model([h.make_node("Scan", ["lens", "s0", "xs", "fs"], ["s", "ys", "zs"], body=body8, num_scan_inputs=2)],
           [f8("s0", [3, 2]), f8("xs", [3, 4, 2]), f8("fs", [3, 4, 2])],
           [f8("s", [3, 2]), f8("ys", [3, 4, 2]), f8("zs", [3, 4, 2])],
           [nh.from_array(np.array([4, 0, 2], np.int64), "lens")], opset=8), "scan8_len0.onnx")
# batches that disagree (inputs of any size here): one line naming both
fb = lambda n, s: h.make_tensor_value_info(n, T.FLOAT, s)
body8b = h.make_graph([h.make_node("Add", ["s_in", "e"], ["s_out"]), h.make_node("Identity", ["s_out"], ["y"])],
                      "body", [fb("s_in", [2]), fb("e", [2])], [fb("s_out", [2]), fb("y", [2])])
save(model([h.make_node("Scan", ["", "s0", "xs"], ["s", "ys"], body=body8b, num_scan_inputs=1)],
           [fb("s0", ["B", 2]), fb("xs", ["C", "T", 2])], [fb("s", ["B", 2]), fb("ys", ["C", "T", 2])], opset=8),
     "scan8_dims.onnx")

# loop_body_weight: a Loop whose body holds its own float initializers (a
# weight Wb and a bias bb: h = tanh(h Wb + bb) each step) and an integer
# one (ax, never a weight); loop_top_weight: the same with Wb and bb at the
# top level.  --params makes both kinds weights, with the same gradients.
# (5 wide: a weight of more than 16 numbers is no constant the loader folds)
Wb = (np.arange(25, dtype=np.float32).reshape(5, 5) % 7 - 3) / 8
bb = np.array([0.1, -0.2, 0.05, 0.3, -0.15], np.float32)


def weight_loop(inits_in_body):
    winits = [nh.from_array(Wb, "Wb"), nh.from_array(bb, "bb")]
    body = h.make_graph(
        [h.make_node("Unsqueeze", ["h_in", "ax"], ["row"]),
         h.make_node("MatMul", ["row", "Wb"], ["m"]),
         h.make_node("Squeeze", ["m", "ax"], ["m1"]),
         h.make_node("Add", ["m1", "bb"], ["a"]),
         h.make_node("Tanh", ["a"], ["h_out"]),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("h_in", T.FLOAT, [5])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, [5])],
        [nh.from_array(np.array([0], np.int64), "ax")] + (winits if inits_in_body else []))
    return model([h.make_node("Loop", ["M", "cond", "h0"], ["hT"], body=body)],
                 [h.make_tensor_value_info("M", T.INT64, []), h.make_tensor_value_info("h0", T.FLOAT, [5])],
                 [h.make_tensor_value_info("hT", T.FLOAT, [5])],
                 [nh.from_array(np.array(True), "cond")] + ([] if inits_in_body else winits))


save(weight_loop(True), "loop_body_weight.onnx")
save(weight_loop(False), "loop_top_weight.onnx")

# scan8_body_weight: an opset-8 Scan over a batch of 2 (its body translated
# once for each entry) whose body holds a weight (s = s * Ws + e each step);
# scan8_top_weight: the same with Ws at the top level
Ws = (np.arange(20, dtype=np.float32) % 5 - 2) / 4


def weight_scan8(inits_in_body):
    winit = [nh.from_array(Ws, "Ws")]
    body = h.make_graph([h.make_node("Mul", ["s_in", "Ws"], ["m"]), h.make_node("Add", ["m", "e"], ["s_out"])],
                        "body",
                        [h.make_tensor_value_info("s_in", T.FLOAT, [20]), h.make_tensor_value_info("e", T.FLOAT, [20])],
                        [h.make_tensor_value_info("s_out", T.FLOAT, [20])], winit if inits_in_body else [])
    return model([h.make_node("Scan", ["", "s0", "xs"], ["s"], body=body, num_scan_inputs=1)],
                 [h.make_tensor_value_info("s0", T.FLOAT, [2, 20]), h.make_tensor_value_info("xs", T.FLOAT, [2, 3, 20])],
                 [h.make_tensor_value_info("s", T.FLOAT, [2, 20])], [] if inits_in_body else winit, opset=8)


save(weight_scan8(True), "scan8_body_weight.onnx")
save(weight_scan8(False), "scan8_top_weight.onnx")
np.savez(os.path.join(D, "scan8_weight_inputs.npz"), s0=np.linspace(-1, 1, 40, dtype=np.float32).reshape(2, 20),
         xs=np.sin(np.arange(120, dtype=np.float32)).reshape(2, 3, 20))

# if_branch_weight: an If whose branches hold their own weights (then: x * Wt,
# else: x + We); --params makes both inputs, the branch not taken giving zeros
Wt = np.linspace(-1, 1, 20, dtype=np.float32)
then_g = h.make_graph([h.make_node("Mul", ["x", "Wt"], ["yt"])], "then", [], [fv("yt", [20])],
                      [nh.from_array(Wt, "Wt")])
else_g = h.make_graph([h.make_node("Add", ["x", "We"], ["ye"])], "else", [], [fv("ye", [20])],
                      [nh.from_array(Wt[::-1].copy(), "We")])
save(model([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
           [h.make_tensor_value_info("c", T.BOOL, []), fv("x", [20])], [fv("y", [20])]), "if_branch_weight.onnx")

# loop_body_half: a Loop body whose own initializer is float16: read when
# the model opens, refused in one line that names the Loop node
hbody = h.make_graph([h.make_node("Add", ["h_in", "W"], ["h_out"]), h.make_node("Identity", ["cond_in"], ["cond_out"])],
                     "body",
                     [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                      h.make_tensor_value_info("h_in", T.FLOAT16, [3])],
                     [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT16, [3])],
                     [nh.from_array(np.ones(3, np.float16), "W")])
save(model([h.make_node("Loop", ["M", "cond", "h0"], ["hT"], body=hbody)],
           [h.make_tensor_value_info("M", T.INT64, []), h.make_tensor_value_info("h0", T.FLOAT16, [3])],
           [h.make_tensor_value_info("hT", T.FLOAT16, [3])], [nh.from_array(np.array(True), "cond")]),
     "loop_body_half.onnx")

# loop_input_shadow: a Loop body whose carried input is named x, as the main
# graph's input is (ONNX lets a subgraph's input take a name of the outer
# scope: inside, x is the body's own); the body reads the outer w = x too,
# and after the Loop the main graph reads its x again.  For x = [1, 2], M
# = 2: each step x * w from 2x, so out = 2x^3 = [2, 16], y = out + x
sbody = h.make_graph([h.make_node("Mul", ["x", "w"], ["t"]), h.make_node("Identity", ["cond_in"], ["cond_out"])],
                     "body",
                     [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                      fv("x", [2])],
                     [h.make_tensor_value_info("cond_out", T.BOOL, []), fv("t", [2])])
save(model([h.make_node("Identity", ["x"], ["w"]), h.make_node("Add", ["x", "x"], ["x2"]),
            h.make_node("Loop", ["M", "", "x2"], ["out"], body=sbody), h.make_node("Add", ["out", "x"], ["y"])],
           [fv("x", [2]), h.make_tensor_value_info("M", T.INT64, [])], [fv("out", [2]), fv("y", [2])]),
     "loop_input_shadow.onnx")

# loop_body_det: a Loop whose body holds an op tl does not translate (Det)
# and loop_body_dup: one whose body defines y, a name of the main graph
# (the ONNX checker refuses it): each error names the Loop, then the
# body's node (node 0 of the main graph is another op)
dbody = h.make_graph([h.make_node("Det", ["acc"], ["t"]), h.make_node("Identity", ["acc"], ["acc_out"]),
                      h.make_node("Identity", ["cond_in"], ["cond_out"])],
                     "body",
                     [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                      fv("acc", [2, 2])],
                     [h.make_tensor_value_info("cond_out", T.BOOL, []), fv("acc_out", [2, 2])])
save(model([h.make_node("Identity", ["x"], ["x1"]), h.make_node("Loop", ["M", "", "x1"], ["out"], body=dbody)],
           [fv("x", [2, 2]), h.make_tensor_value_info("M", T.INT64, [])], [fv("out", [2, 2])]), "loop_body_det.onnx")
ubody = h.make_graph([h.make_node("Mul", ["acc", "acc"], ["y"]), h.make_node("Add", ["y", "acc"], ["acc_out"]),
                      h.make_node("Identity", ["cond_in"], ["cond_out"])],
                     "body",
                     [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                      fv("acc", [2])],
                     [h.make_tensor_value_info("cond_out", T.BOOL, []), fv("acc_out", [2])])
save(model([h.make_node("Identity", ["x"], ["y"]), h.make_node("Loop", ["M", "", "y"], ["out"], body=ubody)],
           [fv("x", [2]), h.make_tensor_value_info("M", T.INT64, [])], [fv("out", [2])]), "loop_body_dup.onnx",
     check=False)

# loop_if_det: the Det in the then_branch of an If in a Loop's body (the
# Loop named): the error names each node on the way in
nthen = h.make_graph([h.make_node("Det", ["acc"], ["d"]), h.make_node("Identity", ["acc"], ["r"])], "then", [],
                     [fv("r", [2, 2])])
nelse = h.make_graph([h.make_node("Identity", ["acc"], ["r2"])], "else", [], [fv("r2", [2, 2])])
nbody = h.make_graph([h.make_node("Identity", ["cond_in"], ["c2"]),
                      h.make_node("If", ["c2"], ["acc_out"], then_branch=nthen, else_branch=nelse),
                      h.make_node("Identity", ["cond_in"], ["cond_out"])],
                     "body",
                     [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                      fv("acc", [2, 2])],
                     [h.make_tensor_value_info("cond_out", T.BOOL, []), fv("acc_out", [2, 2])])
save(model([h.make_node("Loop", ["M", "", "x"], ["out"], body=nbody, name="outer_loop")],
           [fv("x", [2, 2]), h.make_tensor_value_info("M", T.INT64, [])], [fv("out", [2, 2])]), "loop_if_det.onnx")
