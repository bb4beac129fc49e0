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

ext = onnx.ModelProto()
ext.CopyFrom(mlp)
w = ext.graph.initializer[0]
w.ClearField("raw_data")
w.data_location = T.EXTERNAL
for k, v in (("location", "../../secret.bin"), ("offset", "0"), ("length", "48")):
    e = w.external_data.add()
    e.key, e.value = k, v
save(ext, "external_outside.onnx", check=False)

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
