#!/usr/bin/python3
"""Writes the ONNX example of this folder: a small image classifier written
in PyTorch (untrained: its weights are PyTorch's seeded initialization),
exported by torch.onnx.export, and what tl needs to run it and to check it
in CI.

    classifier.onnx           the model: input "image" f32[batch, 3, 16, 16],
                              output "logits" f32[batch, 10] (the batch
                              size is the input's)
    classifier_inputs.npz     two images, under the input's name
    classifier_expected.npz   what `tl grad classifier.onnx -i
                              classifier_inputs.npz --params` writes: logits,
                              grad/image and grad/WEIGHT for every weight of
                              the model (the gradient of the sum of the
                              logits), computed by PyTorch's autograd at
                              float64 from the same f32 numbers, rounded to
                              f32

Run with the Debian NumPy, PyTorch and onnx (python3-torch, python3-onnx)
from the repository root or from examples/:

    /usr/bin/python3 examples/make_onnx_model.py

The weights and images come from fixed seeds and the archives get fixed
member timestamps, so a re-run rewrites byte-identical files.
"""
import io
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_inputs import save_npz  # noqa: E402


class Classifier(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, classes)

    def forward(self, image):
        h = F.max_pool2d(F.relu(self.conv1(image)), 2)
        h = F.relu(self.conv2(h))
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)  # global average pool
        return self.fc(h)


def export(model, image):
    """The model as ONNX: the weights are initializers under their PyTorch
    names (conv1.weight, ...), none of them folded into another; the batch
    size is left to the caller."""
    f = io.BytesIO()
    torch.onnx.export(model, (image,), f, opset_version=17, input_names=["image"],
                      output_names=["logits"], do_constant_folding=False,
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    return f.getvalue()


def main():
    torch.manual_seed(20261201)
    model = Classifier().eval()
    rng = np.random.default_rng(20261201)
    image = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    blob = export(model, torch.from_numpy(image))
    with open(os.path.join(HERE, "classifier.onnx"), "wb") as f:
        f.write(blob)
    save_npz("classifier_inputs.npz", {"image": image})

    # The reference: the model at float64 on the numbers stored in the file.
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(blob).graph.initializer}
    ref = Classifier().double().eval()
    params = dict(ref.named_parameters())
    assert sorted(weights) == sorted(params), "an initializer that is no parameter"
    with torch.no_grad():
        for name, value in weights.items():
            params[name].copy_(torch.tensor(value))
    x = torch.tensor(image, dtype=torch.float64, requires_grad=True)
    logits = ref(x)
    names = list(weights)
    grads = torch.autograd.grad(logits.sum(), [x] + [params[n] for n in names])
    out = {"logits": logits.detach().numpy().astype(np.float32),
           "grad/image": grads[0].numpy().astype(np.float32)}
    for name, g in zip(names, grads[1:]):
        out["grad/" + name] = g.numpy().astype(np.float32)
    save_npz("classifier_expected.npz", out)
    print("classifier.onnx: %d bytes, initializers %s" % (len(blob), ", ".join(names)))


if __name__ == "__main__":
    main()
