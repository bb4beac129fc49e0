#!/usr/bin/python3
"""Second-derivative fixtures of the ONNX export cases (tests/fixtures/onnx,
written by onnx_models.py): `tl jvp` and `tl hvp` of PyTorch's exported
models against PyTorch's double backward.

    /usr/bin/python3 tests/gen/onnx_hvp.py                 (every f64 case)
    /usr/bin/python3 tests/gen/onnx_hvp.py --gradgradcheck CASE...

For each float64 case but the fused exports (whose folded weights are no
parameter of the model) this adds to the case's folder
  tangents.npz          a tangent for every finite float input and every
                        float initializer, by its ONNX name (seeded normal)
  expected_jvp.npz      what `tl jvp model.onnx -i inputs.npz --tangent
                        IN=tangents.npz:IN...` writes: the outputs and
                        jvp/OUT, the Jacobian of every output applied to the
                        inputs' tangents (weights fixed)
  expected_hvp.npz      what `tl hvp` writes with the same tangents: the
                        outputs, grad/IN and hvp/IN, the Hessian of the sum
                        of every output w.r.t. the float inputs applied to
                        their tangents (weights fixed)
  expected_hvp_params.npz  `tl hvp --params` with a tangent for every input
                        and every float initializer: grad/ and hvp/ of each,
                        the mixed partials between inputs and weights
                        included
and writes tests/cli/onnx_hvp.txt, the end-to-end cases.

Reference: the graph in model.onnx run by onnx_eval.py's interpreter (each
ONNX node written with PyTorch tensors at float64 after ONNX's
definitions; onnx_eval.py checks it against the exported PyTorch model for
values and gradients), differentiated twice by torch.autograd
(create_graph=True): jvp as the vector-Jacobian product of the backward
pass (the double-vjp identity), hvp as the gradient of <grad, v>.  A case
without a float input (embeddings of integer tokens) has no jvp or
input-only hvp file.  `--gradgradcheck` checks the interpreter's second
derivatives against finite differences (torch.autograd.gradgradcheck).

Tolerance: rtol 1e-7 and an atol of 1e-9 of the largest magnitude among the
case's expected values: float64 graphs of a few hundred ops, whose rounding
differences (summation order, exp/log implementations) are ~1e-14 relative;
the slack is for elements that cancel to near zero.  The atol is at least
the case's own in tests/cli/onnx_models.txt, measured there: where the
export computes in f32 (opset 13's Celu runs between two Casts to float)
or stores a float attribute as an f32, the f64 reference differs by that
much.  A float input that is not finite (an attention mask of -inf) gets
no tangent, and its grad/ and hvp/ are checked all the same.
"""

import os
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nnfix import savez  # noqa: E402
from onnx_eval import OUT, load, run_graph, to_torch, tolerance  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx_models import fmt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(ROOT, "tests", "cli", "onnx_hvp.txt")
REL = "tests/fixtures/onnx"
RTOL = 1e-7
ATOL_SCALE = 1e-9

torch.set_num_threads(1)


def cases():
    return sorted(c for c in os.listdir(OUT)
                  if os.path.isdir(os.path.join(OUT, c)) and c.endswith("_f64") and "_fused_" not in c)


def setup(case):
    """(graph, opset, fixed env, [(name, leaf tensor, tangent, is_input)])"""
    g, opset, inputs = load(os.path.join(OUT, case))
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    fixed, leaves = {}, []
    for t in g.initializer:
        v = to_torch(numpy_helper.to_array(t))
        if v.is_floating_point():
            leaves.append((t.name, v, rng.standard_normal(tuple(v.shape)), False))
        else:
            fixed[t.name] = v
    for i in g.input:
        v = to_torch(inputs[i.name])
        if v.is_floating_point() and bool(torch.isfinite(v).all()):
            leaves.append((i.name, v, rng.standard_normal(tuple(v.shape)), True))
        elif v.is_floating_point():
            # a mask of -inf: differentiated (tl writes its grad/ and hvp/
            # as for any float input) but given no tangent (a zero one)
            leaves.append((i.name, v, None, True))
        else:  # indices
            fixed[i.name] = v
    return g, opset, fixed, leaves


def forward(g, opset, fixed, leaves, active):
    """outputs with the `active` leaves differentiable, the others constants"""
    env = dict(fixed)
    xs = []
    for name, v, _, _ in leaves:
        if name in active:
            x = v.clone().requires_grad_(True)
            xs.append(x)
            env[name] = x
        else:
            env[name] = v
    return run_graph(g, env, opset), xs


def grads(y, xs, create_graph=True, grad_outputs=None):
    gs = torch.autograd.grad(y, xs, grad_outputs=grad_outputs, allow_unused=True, create_graph=create_graph)
    return [torch.zeros_like(x) if gr is None else gr for x, gr in zip(xs, gs)]


def hvp(g, opset, fixed, leaves, active):
    """outputs, {name: grad}, {name: hvp} of the sum of all outputs w.r.t. the
    active leaves, along their tangents"""
    outs, xs = forward(g, opset, fixed, leaves, active)
    act = [lf for lf in leaves if lf[0] in active]
    gs = grads(sum(o.sum() for o in outs), xs)
    dot = sum((gr * torch.tensor(t)).sum() for gr, (_, _, t, _) in zip(gs, act) if t is not None)
    hs = grads(dot, xs, create_graph=False) if dot.requires_grad else [torch.zeros_like(x) for x in xs]
    return (outs, {n: gr.detach().numpy() for gr, (n, _, _, _) in zip(gs, act)},
            {n: h.detach().numpy() for h, (n, _, _, _) in zip(hs, act)})


def jvp(g, opset, fixed, leaves, active):
    """outputs and J v for the active leaves' tangents: the vjp of the
    backward pass, linear in the cotangents u"""
    outs, xs = forward(g, opset, fixed, leaves, active)
    act = [lf for lf in leaves if lf[0] in active]
    us = [torch.zeros_like(o).requires_grad_(True) for o in outs]
    diff = [(o, u) for o, u in zip(outs, us) if o.requires_grad]
    js = [torch.zeros_like(o) for o in outs]
    if diff:
        gs = grads([o for o, _ in diff], xs, grad_outputs=[u for _, u in diff])
        dot = sum((gr * torch.tensor(t)).sum() for gr, (_, _, t, _) in zip(gs, act) if t is not None)
        if dot.requires_grad:
            ju = grads(dot, [u for _, u in diff], create_graph=False)
            k = 0
            for i, o in enumerate(outs):
                if o.requires_grad:
                    js[i] = ju[k]
                    k += 1
    return outs, [j.detach().numpy() for j in js]


def scale_of(d):
    return max(float(np.max(np.abs(v), initial=0.0)) for v in d.values())


def hvp_file(d, g, opset, fixed, leaves, active, extra, fname, tangent):
    """the expected file of `tl hvp` differentiating the `active` leaves,
    and its line's parts"""
    outs, gs, hs = hvp(g, opset, fixed, leaves, set(active))
    want = {o.name: v.detach().numpy() for o, v in zip(g.output, outs)}
    want.update({"grad/" + n: v for n, v in gs.items()})
    want.update({"hvp/" + n: v for n, v in hs.items()})
    savez(os.path.join(d, fname), want)
    return ("hvp", extra, [n for n in active if n in tangent], fname, scale_of(want))


def make(case):
    g, opset, fixed, leaves = setup(case)
    d = os.path.join(OUT, case)
    onames = [o.name for o in g.output]
    ins = [n for n, _, _, is_in in leaves if is_in]
    every = [n for n, _, _, _ in leaves]
    savez(os.path.join(d, "tangents.npz"), {n: t for n, _, t, _ in leaves if t is not None})
    tangent = [n for n, _, t, _ in leaves if t is not None]
    files = []
    for stale in ("expected_jvp.npz", "expected_hvp.npz"):
        if os.path.exists(os.path.join(d, stale)):
            os.remove(os.path.join(d, stale))
    if ins:
        outs, js = jvp(g, opset, fixed, leaves, set(ins))
        want = {o: v.detach().numpy() for o, v in zip(onames, outs)}
        want.update({"jvp/" + o: j for o, j in zip(onames, js)})
        savez(os.path.join(d, "expected_jvp.npz"), want)
        files.append(("jvp", "", [n for n in ins if n in tangent], "expected_jvp.npz", scale_of(want)))
        files.append(hvp_file(d, g, opset, fixed, leaves, ins, "", "expected_hvp.npz", tangent))
    files.append(hvp_file(d, g, opset, fixed, leaves, every, " --params", "expected_hvp_params.npz", tangent))
    want = np.load(os.path.join(d, "expected_hvp_params.npz"))
    nz = sum(int(np.count_nonzero(v)) for k, v in want.items() if k.startswith("hvp/"))
    return files, nz


def write_cli(made):
    lines = [
        "# jvp and hvp of the ONNX models exported by PyTorch (tests/fixtures/onnx),",
        "# written with this file by tests/gen/onnx_hvp.py: do not edit by hand.",
        "# Per f64 model: tl jvp with a tangent for every float input, tl hvp the",
        "# same, and tl hvp --params with a tangent for every float initializer",
        "# too (mixed partials), against PyTorch's double backward through the",
        "# graph's ONNX definitions at float64; rtol %s, atol %s of the largest" % (fmt(RTOL), fmt(ATOL_SCALE)),
        "# expected magnitude.",
        "",
    ]
    for case, files in made:
        base = f"{REL}/{case}"
        _, case_atol = tolerance(case)
        lines.append(f"# {case}")
        for cmd, extra, names, fname, scale in files:
            tans = " ".join(f"--tangent '{n}={base}/tangents.npz:{n}'" for n in names)
            atol = fmt(float("%.0e" % max(ATOL_SCALE * scale, case_atol, 1e-300)))
            lines += [f"tl {cmd} {base}/model.onnx -i {base}/inputs.npz{extra} {tans} "
                      f"--expect {base}/{fname} --rtol {fmt(RTOL)} --atol {atol}"]
            if fname != "expected_hvp.npz":
                # numbers only: valgrind runs the plain hvp of each model (the sanitized suite runs them all)
                lines.append('skip-if: test -n "$TL_MEMCHECK"')
            lines += ["exit: 0", "empty: stdout", ""]
    with open(CLI, "w") as f:
        f.write("\n".join(lines))


def gradgradcheck(case):
    g, opset, fixed, leaves = setup(case)
    names = [n for n, _, _, _ in leaves]
    vals = tuple(v.clone().requires_grad_(True) for _, v, _, _ in leaves)

    def fn(*xs):
        env = dict(fixed)
        env.update(zip(names, xs))
        return tuple(run_graph(g, env, opset))

    return torch.autograd.gradgradcheck(fn, vals, eps=1e-6, atol=1e-6, rtol=1e-4)


def main(argv):
    if argv[:1] == ["--gradgradcheck"]:
        for c in argv[1:]:
            print("gradgradcheck %-32s %s" % (c, "ok" if gradgradcheck(c) else "FAIL"))
        return
    made = []
    for c in cases():
        files, nz = make(c)
        print("%-34s %s  (%d nonzero hvp elements with --params)"
              % (c, ", ".join(f[3] for f in files), nz))
        made.append((c, files))
    write_cli(made)


if __name__ == "__main__":
    main(sys.argv[1:])
