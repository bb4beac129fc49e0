#!/usr/bin/python3
"""make bench: tl and PyTorch on the same work, measured side by side in one
run, reported as one table of ratios (the machines here are shared and
noisy: nothing is asserted, figures are medians of alternating runs).

tl's time is its whole process (start, reading the inputs, the run and the
backward pass, writing the gradients); PyTorch's is its compute alone, the
import and the reading of the inputs excluded.  For the layer ops a second
line gives tl's compute alone too (the run and backward times of its -v).  Peak RSS is each process's
own (ru_maxrss).  Needs /usr/bin/python3 with NumPy; PyTorch (the Debian
package python3-torch) is optional: without it the PyTorch columns say so.

The layer ops (a ResNet basic block, a depthwise-separable block, max and
average pooling, layer norm; forward and backward) are timed the same way,
PyTorch at its best of one thread and all (torch.set_num_threads), and the
ResNet block once more with TL_NUM_THREADS 1 and all: the speed-up and
whether every output and gradient has the same bytes.  ResNet-18 (torchvision, exported to ONNX here)
and an LSTM (torch.nn.LSTM, 500 steps), each exported to ONNX here, are timed as tl grad MODEL.onnx
--params against PyTorch's forward and backward of the same model.

tl runs with no OpenBLAS variable set: the kernels it gets are its own
choice.  NumPy's matrix products and PyTorch's MLP and convolutions, whose
BLAS is the same OpenBLAS, are timed with OPENBLAS_CORETYPE unset and set to
each kernel family this CPU can run (from /proc/cpuinfo's flags; a family it
cannot run dies of SIGILL, so those are never named), and their best counts.  The
table names the kernels each line ran (OPENBLAS_VERBOSE=2's "Core: X").

Second derivatives (tl hvp, tl jvp: the MLP's loss, the elementwise chain, the
scalar recurrence) are timed against tl grad on the same graph and PyTorch's
double backward or torch.autograd.functional.jvp, its compute alone.

Where the machine is a VM whose host takes processor time from it (steal, in
/proc/stat), a line under the figures says how much it took while they were
measured: a row measured then is less sure.

    /usr/bin/python3 tests/bench/bench.py [--quick] [--tl ./tl] [--only WORKLOAD]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run_measured(cmd, env=None):
    """Wall, user and system seconds of one process, spawned straight from
    here (its CPU times from wait4), as hyperfine does, and its stderr.
    Through /usr/bin/time the wall time would also count time's own start
    and its wait: 3.5 ms more on a 12 ms run of tl, 0.8 ms on /bin/true."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = 0  # reaped by wait4, not by Popen
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench: %s failed: %s" % (" ".join(cmd), err.decode(errors="replace")))
    return wall, ru.ru_utime, ru.ru_stime, err.decode(errors="replace")


def tl_compute_ms(err):
    """tl's run and backward pass alone, from its -v line ("run X ms, backward Y ms")"""
    line = [l for l in err.splitlines() if "run " in l and "backward " in l][0]
    return float(line.split("run ")[1].split(" ms")[0]) + float(line.split("backward ")[1].split(" ms")[0])


def tl_io_note(runs):
    """"; reading the inputs X ms, writing the results Y ms": the medians of tl's own -v figures (its line
    "inputs read in X ms, results written in Y ms"), the part of a whole process that moves large arrays in
    and out (fresh memory and the page cache: where memory is dear, most of a short run's time)"""
    lines = [[l for l in r[3].splitlines() if "inputs read in " in l] for r in runs]
    if not all(lines):
        return ""
    ins = median([float(l[0].split("inputs read in ")[1].split(" ms")[0]) for l in lines])
    outs = median([float(l[0].split("results written in ")[1].split(" ms")[0]) for l in lines])
    return "; reading the inputs %.1f ms, writing the results %.1f ms" % (ins, outs)


def back_to_back(cmd, env, reps, tl_runs, tt):
    """tl's whole process again, run after run with nothing between (a warm-up first), for the rows whose
    runs of tl alternate with PyTorch's children.  A VM whose balloon takes back the guest's free memory (free page
    reporting: free blocks of 2 MiB given back about 2 s after they were freed, as on the Zen 5 VM) makes
    each process that follows a pause of a second or more fault its fresh memory in from the host again:
    ResNet-18 0.20 s run after run, 0.31-0.39 s after a pause, the difference all system time.  Both
    figures, with their system time, so a reader sees which one a row's ratio met."""
    run_measured(cmd, env)
    runs = [run_measured(cmd, env) for _ in range(reps)]
    wall = median([r[0] for r in runs])
    return "%-38s run after run: %.1f ms%s, system time %.1f ms a run (%.1f ms between PyTorch's children)" % (
        "", wall * 1e3, " (%.2fx)" % (tt["s"] / wall) if tt else "", median([r[2] for r in runs]) * 1e3,
        median([r[2] for r in tl_runs]) * 1e3)


def peak_rss(cmd, env=None):
    """Peak RSS (MiB) of one process, through /usr/bin/time: a child spawned
    from this big Python process shares its pages until exec, and Linux
    counts them in the child's own maxrss."""
    p = subprocess.run(["/usr/bin/time", "-f", "@@ %M"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env, text=True)
    if p.returncode != 0:
        sys.exit("bench: %s failed: %s" % (" ".join(cmd), p.stderr))
    return int(p.stderr.strip().splitlines()[-1].split()[1]) / 1024


def steal_s():
    """CPU time the VM's host took from this machine's processors since boot (steal, /proc/stat), seconds;
    0 where the system does not count it"""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else 0.0
    except (OSError, ValueError):
        return 0.0


def steal_note(since):
    """a line where the host took processor time while figures were measured: they are then less sure"""
    took = steal_s() - since
    if took >= 0.05:
        print("%-38s the VM's host took %.2f s of processor time (steal) while the figures above were measured"
              % ("", took))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


TORCH_CHILD = r'''
import json, os, resource, sys, time
import numpy as np
import torch
torch.manual_seed(0)
work, tmp, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
# the layer-op workloads and their inputs (gen_inputs)
NN = {"resnet": "resnet.npz", "dwsep": "dwsep.npz", "max_pool": "pool.npz", "avg_pool": "pool.npz",
      "layer_norm": "ln.npz"}
def load(name):
    return torch.from_numpy(np.load(tmp + "/" + name))
if work == "chain":
    x0 = load("x16m.npy")
    def step():
        x = x0.clone().requires_grad_()
        torch.tanh(torch.exp(x) * 0.5 + x).sum().backward()
        return x.grad
elif work == "map":
    x0 = load("x1m.npy")
    def step():
        x = x0.clone().requires_grad_()
        torch.where(x > 0, x * x, torch.sin(x)).sum().backward()
        return x.grad
elif work == "mlp":
    z = np.load(tmp + "/mlp.npz")
    ps0 = [torch.from_numpy(z[k]) for k in ["x", "w1", "b1", "w2", "b2", "w3", "b3"]]
    def step():
        x, w1, b1, w2, b2, w3, b3 = [p.clone().requires_grad_() for p in ps0]
        h = torch.tanh(x @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        torch.tanh(h @ w3 + b3).sum().backward()
        return w1.grad
elif work == "recurrence":
    def step():
        x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        s = x
        for _ in range(100000):
            s = s * 0.999 + torch.sin(s) * 0.001
        s.backward()
        return x.grad
elif work in NN:
    import torch.nn.functional as F
    z = np.load(tmp + "/" + NN[work])
    ps0 = [torch.from_numpy(z[k]) for k in z.files]
    def step():
        ps = [p.detach().requires_grad_() for p in ps0]
        if work == "resnet":
            x, w1, s1, c1, w2, s2, c2 = ps
            h = F.relu(F.batch_norm(F.conv2d(x, w1, padding=1), None, None, s1, c1, training=True))
            h = F.batch_norm(F.conv2d(h, w2, padding=1), None, None, s2, c2, training=True)
            y = F.relu(h + x)
        elif work == "dwsep":
            x, dw, pw = ps
            y = F.conv2d(F.relu(F.conv2d(x, dw, padding=1, groups=dw.shape[0])), pw)
        elif work == "max_pool":
            y = F.max_pool2d(ps[0], 3, 2, 1)
        elif work == "avg_pool":
            y = F.avg_pool2d(ps[0], 3, 2, 1)
        elif work == "layer_norm":
            x, scale, bias = ps
            y = F.layer_norm(x, scale.shape, scale, bias)
        y.sum().backward()
        return ps[0].grad
elif work == "import":
    def step():
        return None
def timed():
    step()  # warm up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]
# the layer ops at PyTorch's best of one thread and all (its default here may be either), or at the
# thread counts given
if len(sys.argv) > 4:
    counts = [int(t) for t in sys.argv[4].split(",")]
else:
    counts = [1, os.cpu_count()] if work in NN and os.cpu_count() > 1 else [torch.get_num_threads()]
by = {}
for th in counts:
    torch.set_num_threads(th)
    by[th] = timed()
best = min(by, key=by.get)
print(json.dumps({"s": by[best], "threads": best, "by_threads": by,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


# NumPy's side of the matrix products: the median of 3 timed runs after a warm-up.  "grad" times what
# tl's backward pass of sum(a @ a) does: seeds of ones, g @ a^T, a^T @ g and their sum.
NUMPY_MATMUL_CHILD = r'''
import sys, time
import numpy as np
m = np.load(sys.argv[1])
if sys.argv[2] == "grad":
    def step():
        g = np.ones_like(m)
        return g @ m.T + m.T @ g
else:
    def step():
        return m @ m
step()
ts = []
for _ in range(3):
    t0 = time.perf_counter()
    step()
    ts.append(time.perf_counter() - t0)
print(sorted(ts)[1])
'''


def retime(peer, tl_run, reps):
    """The peer's figure at the kernel family its search found best, measured again.  The search keeps the
    least of one noisy median per family (nine here), and the least of nine draws of the same noise is
    lower than a typical one: on a shared VM, PyTorch's ResNet block at one family ran 35 to 92 ms in four
    children.  So the search only chooses; the figure is the median of max(3, reps // 2) more children at
    the chosen family, each after a run of tl (tl_run), as the search alternates them.  Returns the
    median child's result, with "again": every child's seconds."""
    got = []
    for _ in range(max(3, reps // 2)):
        tl_run()
        got.append(peer())
    got.sort(key=lambda r: r["s"])
    return dict(got[len(got) // 2], again=[r["s"] for r in got])


def again_line(tt):
    return "%.1f ms (median of %s)" % (tt["s"] * 1e3, ", ".join("%.1f" % (s * 1e3) for s in tt["again"]))


def torch_time(work, tmp, reps, env, threads=None, child=TORCH_CHILD):
    """PyTorch's compute (median of reps steps after a warm-up; for the layer ops the best of one thread and
    all, or of the thread counts given), its peak RSS and the OpenBLAS kernels it ran"""
    p = subprocess.run(["/usr/bin/time", "-f", "@@ %M", "/usr/bin/python3", "-c", child, work, tmp,
                        str(reps)] + ([",".join(map(str, threads))] if threads else []), capture_output=True,
                       text=True, env=dict(env, OPENBLAS_VERBOSE="2"))
    if p.returncode != 0:
        if "No module named 'torch'" in p.stderr:
            return None
        sys.exit("bench: the PyTorch side of %s failed: %s" % (work, p.stderr))
    r = json.loads(p.stdout)
    r["rss"] = int([l for l in p.stderr.splitlines() if l.startswith("@@ ")][-1].split()[1]) / 1024
    r["core"] = core_named(p.stderr)
    return r


def have_torch():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


def gen_inputs(tmp):
    rng = np.random.default_rng(20261130)
    np.save(tmp + "/x16m.npy", rng.uniform(-2, 2, 16 << 20).astype(np.float32))
    np.save(tmp + "/x1m.npy", rng.uniform(-2, 2, 1 << 20))
    w = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
    np.savez(tmp + "/mlp.npz", x=rng.standard_normal((512, 1024)).astype(np.float32),
             w1=w(1024, 1024), b1=w(1024), w2=w(1024, 1024), b2=w(1024), w3=w(1024, 1024), b3=w(1024))
    for dt, name in [(np.float32, "a32.npy"), (np.float64, "a64.npy")]:
        np.save(tmp + "/" + name, rng.standard_normal((1024, 1024)).astype(dt))
    # the layer ops (f32): He-scaled weights, batch-norm scales near 1
    f32 = lambda a: a.astype(np.float32)
    he = lambda *s: f32(rng.standard_normal(s) * np.sqrt(2.0 / np.prod(s[1:])))
    near = lambda c, m: f32(m + 0.1 * rng.standard_normal(c))
    np.savez(tmp + "/resnet.npz", x=f32(rng.standard_normal((8, 64, 56, 56))), w1=he(64, 64, 3, 3),
             s1=near(64, 1), c1=near(64, 0), w2=he(64, 64, 3, 3), s2=near(64, 1), c2=near(64, 0))
    np.savez(tmp + "/dwsep.npz", x=f32(rng.standard_normal((8, 32, 112, 112))), dw=he(32, 1, 3, 3),
             pw=he(32, 32, 1, 1))
    np.savez(tmp + "/pool.npz", x=f32(rng.standard_normal((8, 64, 112, 112))))
    np.savez(tmp + "/ln.npz", x=f32(rng.standard_normal((4096, 1024))), scale=near(1024, 1), bias=near(1024, 0))


def big_graph(path, n=200000):
    """A 200k-node graph: a chain of adds and muls (about 11 MB of JSON)."""
    with open(path, "w") as f:
        f.write('{"version": 1, "doc": "200000 nodes", "inputs": ["x"], "nodes": [\n')
        prev = "x"
        for i in range(n):
            op = "add" if i % 2 else "mul"
            f.write('  {"id": "node_%06d", "op": "%s", "args": ["%s", %s]},\n' % (i, op, prev, "1.0000001"))
            prev = "node_%06d" % i
        f.write('  {"id": "out", "op": "neg", "args": ["%s"]}\n], "outputs": "out"}\n' % prev)


def tl_cmd(tl, *args):
    return [tl] + list(args)


# The rows whose PyTorch side is timed at each OpenBLAS kernel family (its matrix products and convolutions may
# go through the BLAS), and the layer-op rows (PyTorch at its best of one thread and all).
NN_ROWS = ("resnet", "dwsep", "max_pool", "avg_pool", "layer_norm")
BLAS_ROWS = ("mlp", "resnet", "dwsep")

# Some machines here set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for every process, because older OpenBLAS
# builds computed wrong results or crashed on their processors.  tl is timed with neither set (its kernels are
# then its own choice, or OpenBLAS's); NumPy and PyTorch with them unset and with OPENBLAS_CORETYPE set to each
# kernel family the CPU can run, their best counting.
BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# Debian's OpenBLAS 0.3.21 kernel families on x86-64, oldest first, with the CPU features (as /proc/cpuinfo names
# them; SSE3 is "pni") that each adds to the one before (Zen runs the Haswell instruction set; SkylakeX and
# Cooperlake build on Haswell).
FAMILIES = [("Prescott", None, {"pni"}), ("Core2", "Prescott", {"ssse3"}), ("Nehalem", "Core2", {"sse4_2"}),
            ("Sandybridge", "Nehalem", {"avx"}), ("Haswell", "Sandybridge", {"avx2", "fma"}),
            ("Zen", "Haswell", set()),
            ("SkylakeX", "Haswell", {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"}),
            ("Cooperlake", "SkylakeX", {"avx512_bf16"})]
FLAGS_SHOWN = ["pni", "ssse3", "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl",
               "avx512cd", "avx512_bf16"]


def cpu_info():
    """(model name, set of flags) of the first processor in /proc/cpuinfo; empty where there is none"""
    model, flags = "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "model name" and model == "?":
                    model = v.strip()
                elif k.strip() == "flags":
                    flags = set(v.split())
                    break
    except OSError:
        pass
    return model, flags


def runnable_families(flags):
    """the families whose kernels use only instructions this CPU has (naming any other is SIGILL)"""
    need = {}
    for name, base, adds in FAMILIES:
        need[name] = (need[base] if base else set()) | adds
    return [name for name, _, _ in FAMILIES if flags and need[name] <= flags]


def cpu_line(model, flags, fams):
    have = " ".join(f if f != "pni" else "sse3" for f in FLAGS_SHOWN if f in flags)
    lack = " ".join(f for f in FLAGS_SHOWN if f not in flags)
    never = [n for n, _, _ in FAMILIES if n not in fams]
    return "CPU: %s; flags: %s%s\nOpenBLAS kernel families it can run: %s%s" % (
        model, have or "?", " (not: %s)" % lack if lack else "", " ".join(fams) or "none known",
        " (never timed: %s, which would die of SIGILL here)" % " ".join(never) if never else "")


def nothing_set():
    """the environment with no OpenBLAS variable set: how tl is timed"""
    return {k: v for k, v in os.environ.items() if k not in BLAS_VARS}


def blas_envs(fams):
    """(label, environment) for NumPy and PyTorch: the variables unset, then OPENBLAS_CORETYPE at each family"""
    return [("unset", nothing_set())] + [(f, dict(nothing_set(), OPENBLAS_CORETYPE=f)) for f in fams]


def core_named(text):
    core = [l.split("Core:")[1].strip() for l in text.splitlines() if "Core:" in l]
    return core[0] if core else "?"


def blas_core(tl, g, env):
    """the OpenBLAS kernel set tl runs under env (OPENBLAS_VERBOSE=2 names it)"""
    p = subprocess.run([tl, "run", g("matmul_any.json"), "a=[[1]]"], capture_output=True, text=True,
                       env=dict(env, OPENBLAS_VERBOSE="2"))
    return core_named(p.stdout + p.stderr)


def tl_blas_line(tl, env):
    p = subprocess.run([tl, "devices"], capture_output=True, text=True, env=env)
    line = [l for l in p.stdout.splitlines() if l.startswith("blas")]
    return " ".join(line[0].split()[1:]) if line else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tl", default=os.path.join(ROOT, "tl"))
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--only", choices=["chain", "map", "mlp", "recurrence", "resnet", "dwsep", "max_pool", "avg_pool",
                                       "layer_norm", "resnet_threads", "tiny", "matmul", "load"] + list(ONNX_ROWS) +
                    list(SECOND_ROWS),
                    help="one workload")
    a = ap.parse_args()
    reps = 3 if a.quick else 7
    tmp = tempfile.mkdtemp(prefix="tl-bench.")
    try:
        bench(a.tl, tmp, reps, a.only)
    finally:
        shutil.rmtree(tmp)


def bench(tl, tmp, reps, only=None):
    torch_ok = have_torch()
    gen_inputs(tmp)
    g = lambda name: os.path.join(HERE, name)
    model, flags = cpu_info()
    envs = blas_envs(runnable_families(flags))
    tl_env = nothing_set()
    work = [
        ("elementwise chain, 16M f32", "chain",
         tl_cmd(tl, "grad", g("chain.json"), "x=" + tmp + "/x16m.npy", "--only", "grad/x", "-o", tmp + "/g.npy"), 2.0),
        ("map with a branch, 1M f64", "map",
         tl_cmd(tl, "grad", g("branch_map.json"), "x=" + tmp + "/x1m.npy", "--only", "grad/x", "-o", tmp + "/g.npy"), 2.0),
        ("3-layer tanh MLP, 512x1024 f32", "mlp",
         tl_cmd(tl, "grad", g("mlp3.json"), "-i", tmp + "/mlp.npz", "-o", tmp + "/g.npz"), 1.0),
        ("scalar recurrence, 100k x 4 ops f64", "recurrence",
         tl_cmd(tl, "grad", g("recurrence.json"), "x=0.5", "-o", tmp + "/g.npz"), 60.0),
        # the layer ops: forward and backward, gradients of every input written
        ("ResNet basic block, 8x64x56x56 f32", "resnet",
         tl_cmd(tl, "grad", g("resnet_block.json"), "-i", tmp + "/resnet.npz", "-o", tmp + "/g.npz", "-v"), 1.0),
        ("depthwise-separable, 8x32x112x112 f32", "dwsep",
         tl_cmd(tl, "grad", g("dwsep_block.json"), "-i", tmp + "/dwsep.npz", "-o", tmp + "/g.npz", "-v"), 1.0),
        ("max pool 3x3/2, 8x64x112x112 f32", "max_pool",
         tl_cmd(tl, "grad", g("max_pool.json"), "-i", tmp + "/pool.npz", "-o", tmp + "/g.npz", "-v"), 1.5),
        ("avg pool 3x3/2, 8x64x112x112 f32", "avg_pool",
         tl_cmd(tl, "grad", g("avg_pool.json"), "-i", tmp + "/pool.npz", "-o", tmp + "/g.npz", "-v"), 1.5),
        ("layer norm, 4096 rows of 1024 f32", "layer_norm",
         tl_cmd(tl, "grad", g("layer_norm.json"), "-i", tmp + "/ln.npz", "-o", tmp + "/g.npz", "-v"), 1.5),
    ]
    print("tl %s vs PyTorch%s, %d processors; medians of %d alternating runs" %
          (subprocess.run([tl, "--version"], capture_output=True, text=True).stdout.split()[-1],
           "" if torch_ok else " (not installed: PyTorch columns skipped)", os.cpu_count(), reps))
    print(cpu_line(model, flags, [label for label, _ in envs[1:]]))
    print("tl with no OpenBLAS variable set: blas %s; OpenBLAS kernels: %s" %
          (tl_blas_line(tl, tl_env), blas_core(tl, g, tl_env)))
    rows = [w for w in work if not only or only == w[1]]
    if rows:
        print("%-38s %10s %10s %8s %7s %9s %9s" % ("workload (grad)", "tl ms", "torch ms", "ratio", "target",
                                                  "tl MiB", "torch MiB"))
    for title, key, cmd, target in rows:
        stolen = steal_s()
        tl_runs = []
        tt = None
        if key in BLAS_ROWS and torch_ok:
            # PyTorch at its BLAS kernels' best: a child per kernel family, tl's runs between them
            # (the layer ops: the best thread count found under the first, then that one alone)
            tts, threads = {}, None
            for label, env in envs:
                tl_runs += [run_measured(cmd, tl_env) for _ in range(-(-reps // len(envs)))]
                tts[label] = torch_time(key, tmp, 3 if key in NN_ROWS else reps, env, threads)
                if key in NN_ROWS and not threads:
                    threads, by_threads = [tts[label]["threads"]], tts[label]["by_threads"]
            best = min(tts, key=lambda k: tts[k]["s"])
            tt = retime(lambda: torch_time(key, tmp, 3 if key in NN_ROWS else reps, dict(envs)[best], threads),
                        lambda: tl_runs.append(run_measured(cmd, tl_env)), reps)
            if key in NN_ROWS:
                tt = dict(tt, by_threads=by_threads)
        else:
            for _ in range(reps if key != "recurrence" else max(3, reps // 2)):
                tl_runs.append(run_measured(cmd, tl_env))
            if torch_ok:
                tt = torch_time(key, tmp, 3 if key in ("recurrence",) + NN_ROWS else reps, tl_env)
        wall = median([r[0] for r in tl_runs])
        rss = max(peak_rss(cmd, tl_env) for _ in range(3))
        if tt:
            ratio = tt["s"] / wall
            print("%-38s %10.1f %10.1f %7.2fx %6.1fx %9.1f %9.1f" % (title, wall * 1e3, tt["s"] * 1e3, ratio,
                                                                 target, rss, tt["rss"]))
        else:
            print("%-38s %10.1f %10s %8s %6.1fx %9.1f %9s" % (title, wall * 1e3, "-", "-", target, rss, "-"))
        if key in BLAS_ROWS and tt:  # tl's runs alternated with PyTorch's children: run after run as well
            print(back_to_back(cmd, tl_env, reps, tl_runs, tt))
        else:  # tl's runs one after another already
            print("%-38s system time %.1f ms a run (tl's runs one after another)" % (
                "", median([r[2] for r in tl_runs]) * 1e3))
        if key in NN_ROWS:
            comp = median([tl_compute_ms(r[3]) for r in tl_runs])
            print("%-38s tl's run and backward pass alone (-v): %.1f ms%s%s" % (
                "", comp, "; against PyTorch's compute: %.2fx" % (tt["s"] * 1e3 / comp) if tt else "",
                tl_io_note(tl_runs)))
        if key in NN_ROWS and tt:
            print("%-38s PyTorch's best of 1 and %d threads: %d (ms: %s)" % (
                "", os.cpu_count(), tt["threads"], ", ".join("%s threads %.1f" % (th, v * 1e3) for th, v in
                                                             tt["by_threads"].items())))
        if key in BLAS_ROWS and tt:
            print("%-38s PyTorch's best: OPENBLAS_CORETYPE %s (Core: %s), timed again: %s; "
                  "ms by OPENBLAS_CORETYPE (Core) in the search:" % ("", best, tts[best]["core"], again_line(tt)))
            cells = ["%s (%s) %.1f" % (label, r["core"], r["s"] * 1e3) for label, r in tts.items()]
            for i in range(0, len(cells), 4):
                print("%-38s   %s" % ("", ", ".join(cells[i:i + 4])))
        steal_note(stolen)

    if (not only or only == "resnet_threads") and os.cpu_count() > 1:
        stolen = steal_s()
        resnet_threads(tl, tmp, g, reps, tl_env)
        steal_note(stolen)
    for key in ONNX_ROWS:
        if not only or only == key:
            stolen = steal_s()
            onnx_row(key, tl, tmp, reps, tl_env, envs, header=bool(only))
            steal_note(stolen)
    if not only or only in SECOND_ROWS:
        stolen = steal_s()
        second_order(tl, tmp, g, reps, tl_env, torch_ok, envs, only)
        steal_note(stolen)
    if only and only not in ("tiny", "matmul", "load"):
        return
    tiny_cmd = tl_cmd(tl, "grad", os.path.join(ROOT, "examples", "poly.json"), "x=2")
    # alternating with a process that does nothing (/bin/true): the floor of any process on this machine today
    # (a VM's spawn, exec and exit: 2 to 3 ms on the Zen 5 VM from one hour to the next)
    tiny, floor = [], []
    for _ in range(0 if only and only != "tiny" else 21):
        tiny.append(run_measured(tiny_cmd, tl_env))
        floor.append(run_measured(["/bin/true"], tl_env))
    imp = torch_time("import", tmp, 1, tl_env) if torch_ok and tiny else None
    if tiny:
        print("%-38s %10.2f %10s %8s %7s %9.1f %9s   (target <= 3 ms, <= 8 MiB; /bin/true in the same runs: %.2f ms)" %
              ("tiny graph, whole process", median([r[0] for r in tiny]) * 1e3, "-", "-", "",
               max(peak_rss(tiny_cmd, tl_env) for _ in range(3)), "%.1f" % imp["rss"] if imp else "-",
               median([r[0] for r in floor]) * 1e3))
    if torch_ok and tiny:
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True)
        print("%-38s %10s %10.1f   (PyTorch's import alone)" % ("", "", (time.perf_counter() - t0) * 1e3))

    # matrix products: tl with 1 and all threads (its own -v times), NumPy in the same run
    if not only or only == "matmul":
        stolen = steal_s()
        matmul(tl, tmp, g, reps, tl_env, envs)
        steal_note(stolen)
    if not only or only == "load":
        load(tl, tmp, tl_env)


# ---- second derivatives: tl hvp / tl jvp, against tl's own grad and PyTorch ----
SECOND_ROWS = ("hvp_mlp", "jvp_chain", "hvp_recurrence")

# PyTorch's side: the compute alone (median of reps steps after a warm-up), double backward for the hvps
# (the gradient of <grad, v>) and torch.autograd.functional.jvp for the jvp.
SECOND_CHILD = r'''
import json, resource, sys, time
import numpy as np
import torch
work, tmp, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
if work == "hvp_mlp":
    z, t = np.load(tmp + "/mlp.npz"), np.load(tmp + "/mlp_t.npz")
    x = torch.from_numpy(z["x"])
    ps0 = [torch.from_numpy(z[k]) for k in ["w1", "b1", "w2", "b2", "w3", "b3"]]
    vs = [torch.from_numpy(t[k]) for k in ["w1", "b1", "w2", "b2", "w3", "b3"]]
    def step():
        w1, b1, w2, b2, w3, b3 = ps = [p.clone().requires_grad_() for p in ps0]
        h = torch.tanh(x @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        loss = torch.tanh(h @ w3 + b3).sum()
        gs = torch.autograd.grad(loss, ps, create_graph=True)
        return torch.autograd.grad(sum((g * v).sum() for g, v in zip(gs, vs)), ps)
elif work == "jvp_chain":
    x0, v = torch.from_numpy(np.load(tmp + "/x16m.npy")), torch.from_numpy(np.load(tmp + "/t16m.npy"))
    def step():
        return torch.autograd.functional.jvp(lambda x: torch.tanh(torch.exp(x) * 0.5 + x).sum(), x0, v)
else:
    def step():
        x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        s = x
        for _ in range(100000):
            s = s * 0.999 + torch.sin(s) * 0.001
        g, = torch.autograd.grad(s, x, create_graph=True)
        return torch.autograd.grad(g, x)
step()
ts = []
for _ in range(reps):
    t0 = time.perf_counter()
    step()
    ts.append(time.perf_counter() - t0)
print(json.dumps({"s": sorted(ts)[len(ts) // 2], "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
'''


def second_order(tl, tmp, g, reps, tl_env, torch_ok, envs, only=None):
    """tl hvp and tl jvp, whole process, against tl grad on the same graph (whole process) and PyTorch's
    compute alone: the MLP benchmark's loss (hvp in every weight's direction), the elementwise chain (jvp)
    and the scalar recurrence (hvp)."""
    rng = np.random.default_rng(20261202)
    z = np.load(tmp + "/mlp.npz")
    params = ["w1", "b1", "w2", "b2", "w3", "b3"]
    np.savez(tmp + "/mlp_t.npz", **{k: rng.uniform(-1, 1, z[k].shape).astype(np.float32) for k in params})
    np.save(tmp + "/t16m.npy", rng.uniform(-1, 1, 16 << 20).astype(np.float32))
    tangents = [a for k in params for a in ("--tangent", "%s=%s/mlp_t.npz:%s" % (k, tmp, k))]
    work = [
        ("hvp of the MLP loss, 512x1024 f32", "hvp_mlp",
         tl_cmd(tl, "hvp", g("mlp3.json"), "-i", tmp + "/mlp.npz", *tangents, "--wrt", ",".join(params),
                "-o", tmp + "/h.npz"),
         tl_cmd(tl, "grad", g("mlp3.json"), "-i", tmp + "/mlp.npz", "--wrt", ",".join(params), "-o", tmp + "/g.npz")),
        ("jvp of the elementwise chain, 16M f32", "jvp_chain",
         tl_cmd(tl, "jvp", g("chain.json"), "x=" + tmp + "/x16m.npy", "--tangent", "x=" + tmp + "/t16m.npy",
                "-o", tmp + "/j.npz"),
         tl_cmd(tl, "grad", g("chain.json"), "x=" + tmp + "/x16m.npy", "--only", "grad/x", "-o", tmp + "/g.npy")),
        ("hvp of the scalar recurrence, 100k f64", "hvp_recurrence",
         tl_cmd(tl, "hvp", g("recurrence.json"), "x=0.5", "--tangent", "x=1", "-o", tmp + "/h.npz"),
         tl_cmd(tl, "grad", g("recurrence.json"), "x=0.5", "-o", tmp + "/g.npz")),
    ]
    rows = [w for w in work if not only or only == w[1]]
    print("%-38s %10s %10s %8s %10s %8s %9s %9s" % ("second derivatives", "tl ms", "tl grad", "x grad",
                                                     "torch ms", "ratio", "tl MiB", "torch MiB"))
    for title, key, cmd, grad_cmd in rows:
        n = reps if key != "hvp_recurrence" else max(3, reps // 2)
        walls, grads = [], []
        def tl_pair():  # alternating, each first in turn: the same noise for both
            first = len(walls) % 2 == 0
            if not first:
                grads.append(run_measured(grad_cmd, tl_env)[0])
            walls.append(run_measured(cmd, tl_env)[0])
            if first:
                grads.append(run_measured(grad_cmd, tl_env)[0])

        for _ in range(n):
            tl_pair()
        tt, tts, preps = None, {}, 3 if key == "hvp_recurrence" else reps
        if torch_ok and key == "hvp_mlp":
            # matrix products: PyTorch at its BLAS kernels' best, as the MLP row (the search chooses, the
            # figure is timed again)
            for label, env in envs:
                tl_pair()
                tts[label] = torch_time(key, tmp, preps, env, child=SECOND_CHILD)
            best = min(tts, key=lambda k: tts[k]["s"])
            tt = retime(lambda: torch_time(key, tmp, preps, dict(envs)[best], child=SECOND_CHILD), tl_pair, reps)
        elif torch_ok:
            tt = torch_time(key, tmp, preps, tl_env, child=SECOND_CHILD)
        # x grad, a ratio of tl to tl: the pairs run before any PyTorch child (each child's freed memory
        # makes the next process's first touches slower, and the hvp touches more fresh memory than the
        # grad); against PyTorch: every run of tl, those between its children too
        wall, gwall = median(walls), median(grads)
        self_ratio = median(walls[:n]) / median(grads[:n])
        rss = max(peak_rss(cmd, tl_env) for _ in range(3))
        print("%-38s %10.1f %10.1f %7.2fx %10s %8s %9.1f %9s" % (
            title, wall * 1e3, gwall * 1e3, self_ratio, "%.1f" % (tt["s"] * 1e3) if tt else "-",
            "%.2fx" % (tt["s"] / wall) if tt else "-", rss, "%.1f" % tt["rss"] if tt else "-"))
        if tts:
            print("%-38s tl's runs before PyTorch's children alone: %.1f ms (%.2fx), between them alone: %.1f ms" %
                  ("", median(walls[:n]) * 1e3, tt["s"] / median(walls[:n]), median(walls[n:]) * 1e3))
            print("%-38s PyTorch's best: OPENBLAS_CORETYPE %s (Core: %s), timed again: %s; ms in the search:" %
                  ("", best, tts[best]["core"], again_line(tt)))
            cells = ["%s (%s) %.1f" % (label, r["core"], r["s"] * 1e3) for label, r in tts.items()]
            for i in range(0, len(cells), 4):
                print("%-38s   %s" % ("", ", ".join(cells[i:i + 4])))
    print("%-38s (x grad: tl's time over its own grad of the graph, the runs before PyTorch's; ratio: PyTorch's\n"
          "%-38s compute over tl's process, every run)" % ("", ""))


def resnet_threads(tl, tmp, g, reps, tl_env):
    """The ResNet block with one thread and with all: the speed-up (target 1.8x on two) and the same bits,
    every output and gradient compared byte for byte; runs alternate between the two."""
    n = str(os.cpu_count())
    walls, comps, outs = {"1": [], n: []}, {"1": [], n: []}, {}
    for r in range(reps):
        for th in (["1", n] if r % 2 == 0 else [n, "1"]):
            outs[th] = "%s/t%s.npz" % (tmp, th)
            cmd = tl_cmd(tl, "grad", g("resnet_block.json"), "-i", tmp + "/resnet.npz", "-o", outs[th], "-v")
            run = run_measured(cmd, dict(tl_env, TL_NUM_THREADS=th))
            walls[th].append(run[0])
            comps[th].append(tl_compute_ms(run[3]))
    a, b = np.load(outs["1"]), np.load(outs[n])
    same = a.files == b.files and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a.files)
    w1, wn = median(walls["1"]), median(walls[n])
    c1, cn = median(comps["1"]), median(comps[n])
    print("%-38s %10.1f ms on 1 thread, %.1f on %s: x%.2f (target >= %.1fx); %s" % (
        "ResNet block, TL_NUM_THREADS 1 vs " + n, w1 * 1e3, wn * 1e3, n, w1 / wn, 1.8,
        "the same bits (%d tensors)" % len(a.files) if same else "DIFFERENT BITS"))
    print("%-38s its run and backward pass alone (-v): %.1f ms on 1 thread, %.1f on %s: x%.2f" % (
        "", c1, cn, n, c1 / cn))


# ResNet-18 of torchvision (random weights from seed 0, eval mode), exported by torch.onnx.export (opset 17,
# batch-norm nodes kept) into the bench's folder; the PyTorch side builds the same model from the same seed.
R18_EXPORT = r"""
import sys, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18().eval()
torch.onnx.export(m, (torch.zeros(8, 3, 112, 112),), sys.argv[1], opset_version=17, input_names=["x"],
                  output_names=["logits"], do_constant_folding=False)
"""
R18_CHILD = r"""
import json, os, resource, sys, time
import numpy as np
import torch, torchvision
work, tmp, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(0)
m = torchvision.models.resnet18().eval()
x0 = torch.from_numpy(np.load(tmp + "/resnet18_x.npy"))
def step():  # forward and backward: the gradients of sum(logits) for the input and every weight
    m.zero_grad(set_to_none=True)
    x = x0.detach().requires_grad_()
    m(x).sum().backward()
    return x.grad
""" + TORCH_CHILD[TORCH_CHILD.index("def timed():"):]  # timed at the thread counts given, as the others

# An LSTM (torch.nn.LSTM(32, 128), seed 0) over 500 steps of a batch of 16, exported at opset 17: its Y is a
# per-step output, and each step reads one row of the sequence.
LSTM_EXPORT = r"""
import sys, torch
torch.manual_seed(0)
m = torch.nn.LSTM(32, 128)
torch.onnx.export(m, (torch.zeros(500, 16, 32),), sys.argv[1], opset_version=17, input_names=["x"],
                  output_names=["y", "h", "c"])
"""
LSTM_CHILD = r"""
import json, os, resource, sys, time
import numpy as np
import torch
work, tmp, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(0)
m = torch.nn.LSTM(32, 128)
x0 = torch.from_numpy(np.load(tmp + "/lstm_x.npy"))
def step():  # the gradients of the sum of every output (y, h, c) for the input and every weight
    m.zero_grad(set_to_none=True)
    x = x0.detach().requires_grad_()
    y, (h, c) = m(x)
    (y.sum() + h.sum() + c.sum()).backward()
    return x.grad
""" + TORCH_CHILD[TORCH_CHILD.index("def timed():"):]

ONNX_ROWS = {  # key: (title, export, child, input shape, the modules its export needs)
    "resnet18_onnx": ("ResNet-18 ONNX, 8x3x112x112 f32", R18_EXPORT, R18_CHILD, (8, 3, 112, 112), "torch, torchvision"),
    "lstm_onnx": ("LSTM ONNX, 500 steps, 16x32 -> 128 f32", LSTM_EXPORT, LSTM_CHILD, (500, 16, 32), "torch"),
}


def onnx_row(key, tl, tmp, reps, tl_env, envs, header=False):
    """A model exported to ONNX here, f32: tl grad MODEL.onnx --params (the gradient of the input and of every
    initializer), its whole process, against PyTorch's forward and backward of the same model (compute alone, at
    its best of 1 and all threads and of every OpenBLAS kernel family), target >= 1.0x; then the model's load
    (reading and translating it: -v's load figure)."""
    title, export, child, shape, needs = ONNX_ROWS[key]
    name = key[:-len("_onnx")]
    if subprocess.run(["/usr/bin/python3", "-c", "import " + needs], capture_output=True).returncode:
        print("%-38s skipped: exporting it needs %s (the Debian packages python3-%s)" % (
            title, needs, ", python3-".join(needs.split(", "))))
        return
    if header:
        print("%-38s %10s %10s %8s %7s %9s %9s" % ("workload (grad)", "tl ms", "torch ms", "ratio", "target",
                                                  "tl MiB", "torch MiB"))
    model = tmp + "/" + name + ".onnx"
    subprocess.run(["/usr/bin/python3", "-c", export, model], check=True, capture_output=True)
    np.save(tmp + "/" + name + "_x.npy", np.random.default_rng(20261130).standard_normal(shape).astype(np.float32))
    cmd = tl_cmd(tl, "grad", model, "x=" + tmp + "/" + name + "_x.npy", "--params", "-o", tmp + "/g.npz", "-v")
    tl_runs, tts, threads = [], {}, None
    for label, env in envs:  # tl's runs between PyTorch's children, as for the layer rows
        tl_runs += [run_measured(cmd, tl_env) for _ in range(-(-reps // len(envs)))]
        tts[label] = torch_time(name, tmp, 3, env, threads or sorted({1, os.cpu_count()}), child=child)
        if not threads:
            threads, by_threads = [tts[label]["threads"]], tts[label]["by_threads"]
    best = min(tts, key=lambda k: tts[k]["s"])
    tt = retime(lambda: torch_time(name, tmp, 3, dict(envs)[best], threads, child=child),
                lambda: tl_runs.append(run_measured(cmd, tl_env)), reps)
    wall = median([r[0] for r in tl_runs])
    rss = max(peak_rss(cmd, tl_env) for _ in range(3))
    print("%-38s %10.1f %10.1f %7.2fx %6.1fx %9.1f %9.1f" % (title, wall * 1e3, tt["s"] * 1e3, tt["s"] / wall,
                                                         1.0, rss, tt["rss"]))
    comp = median([tl_compute_ms(r[3]) for r in tl_runs])
    print("%-38s tl's run and backward pass alone (-v): %.1f ms; against PyTorch's compute: %.2fx%s" % (
        "", comp, tt["s"] * 1e3 / comp, tl_io_note(tl_runs)))
    print(back_to_back(cmd, tl_env, reps, tl_runs, tt))
    print("%-38s PyTorch's best: %d threads (ms: %s), OPENBLAS_CORETYPE %s (Core: %s; searched: %s), timed "
          "again: %s" % ("", tt["threads"], ", ".join("%s threads %.1f" % (th, v * 1e3) for th, v in
                                                      by_threads.items()), best, tt["core"],
                         ", ".join("%s %.1f" % (label, r["s"] * 1e3) for label, r in tts.items()), again_line(tt)))
    loads = [float(r[3].split("load ")[1].split(" ms")[0]) for r in tl_runs]
    print("%-38s loading the model (%.1f MiB; reading and translating it, -v): %.1f ms" % (
        "", os.path.getsize(model) / 2 ** 20, median(loads)))


def numpy_product(f, grad, env):
    """NumPy's product (median of 3 after a warm-up) in a child process, and the OpenBLAS kernels it ran"""
    p = subprocess.run(["/usr/bin/python3", "-c", NUMPY_MATMUL_CHILD, f, "grad" if grad else "run"],
                       capture_output=True, text=True, check=True, env=dict(env, OPENBLAS_VERBOSE="2"))
    return float(p.stdout), core_named(p.stderr)


def of_best(tl, best):
    """tl's share of NumPy's best, against the target of 85%"""
    return "%.0f%% %s" % (100 * tl / best, "ok" if tl >= 0.85 * best else "BELOW 85%")


def matmul(tl, tmp, g, reps, tl_env, envs):
    """tl with 1 and all threads and NumPy, in rounds that alternate them; NumPy in a child process of its own:
    its OpenBLAS threads spin a while after each product, and a tl run right after one in this process got one
    core's speed from two threads.  tl's figure is its first product in a fresh process (run time of -v, which
    includes loading OpenBLAS and the first touch of its buffers and of the output); NumPy's is the median of
    products after a warm-up, at each kernel family (OPENBLAS_CORETYPE unset and set to each), the best counting.
    "later" is tl's product in steady state, the median time of the 2nd to 4th of 4 products in one run (the nodes'
    own times, --report): "later" with each product summed and dropped before the next, as NumPy's loop drops
    each (its output goes into memory the process already has, as NumPy's does); "kept" with all four kept as
    outputs, each into memory the process takes fresh (where fresh memory is dear, as on a VM whose freed pages
    go back to the host, that is most of the difference)."""
    n = str(os.cpu_count())
    print("\nmatrix product 1024^3 (forward of a @ a; backward of sum(a @ a): g @ a^T and a^T @ g), GFLOP/s; "
          "medians of %d rounds;\ntl with no OpenBLAS variable set (kernels: %s); NumPy at its best of OPENBLAS_CORETYPE "
          "%s (target: tl >= 85%% of it, first and later products):" %
          (reps, blas_core(tl, g, tl_env), ", ".join(label for label, _ in envs)))

    def tl_ms(graph, f, th, grad):
        p = subprocess.run([tl, "grad" if grad else "run", g(graph), "a=" + tmp + "/" + f, "-v", "-o",
                            tmp + "/c.npz"], capture_output=True, text=True,
                           env=dict(tl_env, TL_NUM_THREADS=th), check=True)
        line = [l for l in p.stderr.splitlines() if "run " in l][0]
        return float(line.split("backward " if grad else "run ")[1].split(" ms")[0])

    def tl_later_ms(graph, f, th):
        rep = tmp + "/later.json"
        subprocess.run([tl, "run", g(graph), "a=" + tmp + "/" + f, "--report", rep, "-o", tmp + "/c.npz"],
                       capture_output=True, text=True, env=dict(tl_env, TL_NUM_THREADS=th), check=True)
        with open(rep) as fh:
            ms_ = [nd["ms"] for nd in json.load(fh)["nodes"] if nd["op"] == "matmul"]
        return median(ms_[1:])

    by_kernels = {}
    for dt, f, grad in [("f32", "a32.npy", False), ("f64", "a64.npy", False), ("f64 backward", "a64.npy", True)]:
        ms, later, kept = {"1": [], n: []}, {"1": [], n: []}, {"1": [], n: []}
        np_s, np_core = {label: [] for label, _ in envs}, {}
        for r in range(reps):
            for th in (["1", n] if r % 2 == 0 else [n, "1"]):
                ms[th].append(tl_ms("matmul_any.json", f, th, grad))
            if not grad:
                for th in ("1", n):
                    later[th].append(tl_later_ms("matmul4_dropped.json", f, th))
                    kept[th].append(tl_later_ms("matmul4.json", f, th))
            for label, env in (envs if r % 2 == 0 else envs[::-1]):
                sec, np_core[label] = numpy_product(tmp + "/" + f, grad, env)
                np_s[label].append(sec)
        # the backward pass is two products: g @ a^T and a^T @ g (transposed operands, as gemm flags)
        flop = 2 * 1024 ** 3 * (2 if grad else 1)
        gflops = lambda by_th: {th: flop / (median(v) / 1e3) / 1e9 for th, v in by_th.items()}
        res = gflops(ms)
        npg = {label: flop / median(v) / 1e9 for label, v in np_s.items()}
        best = max(npg, key=npg.get)
        # the search chooses the family; its figure is timed again (retime), after tl's first product each
        again = retime(lambda: {"s": numpy_product(tmp + "/" + f, grad, dict(envs)[best])[0]},
                       lambda: tl_ms("matmul_any.json", f, n, grad), reps)
        np_best = flop / again["s"] / 1e9
        by_kernels[dt] = (npg, np_core)
        tail = ""
        if not grad:
            lg, kg = gflops(later), gflops(kept)
            tail = ("; later: 1 thread %6.1f, %s threads %6.1f (x%.2f; %s); kept (fresh memory each): "
                    "1 thread %6.1f, %s threads %6.1f (%.0f%%)") % (
                lg["1"], n, lg[n], lg[n] / lg["1"], of_best(lg[n], np_best), kg["1"], n, kg[n],
                100 * kg[n] / np_best)
        print("  %-13s tl 1 thread %6.1f, %s threads %6.1f (x%.2f); NumPy's best %6.1f (%s, Core: %s; %.1f in "
              "the search); tl/NumPy first %s%s" % (dt + ":", res["1"], n, res[n], res[n] / res["1"], np_best,
                                                    best, np_core[best], npg[best], of_best(res[n], np_best), tail))
    print("  NumPy by OPENBLAS_CORETYPE (Core: the kernels it ran), GFLOP/s:")
    print("    %-13s %-13s %8s %8s %13s" % ("CORETYPE", "Core", "f32", "f64", "f64 backward"))
    for label, _ in envs:
        print("    %-13s %-13s %8.1f %8.1f %13.1f" % (label, by_kernels["f32"][1][label],
                                                    *(by_kernels[dt][0][label] for dt in ("f32", "f64", "f64 backward"))))


def load(tl, tmp, tl_env):
    """loading a 200k-node graph"""
    big = tmp + "/big.json"
    big_graph(big)
    size = os.path.getsize(big) / 2 ** 20
    loads, rsss = [], []
    for _ in range(3):
        p = subprocess.run(["/usr/bin/time", "-f", "@@ %M", tl, "run", big, "x=1", "-v"], capture_output=True,
                           text=True, check=True, env=tl_env)
        line = [l for l in p.stderr.splitlines() if "load " in l][0]
        loads.append(float(line.split("load ")[1].split(" ms")[0]))
        rsss.append(int(p.stderr.strip().splitlines()[-1].split()[1]) / 1024)
    print("\nloading a 200k-node graph (%.1f MiB of JSON): %.0f ms (target <= 150), peak RSS %.1f MiB = %.1fx the file"
          " (target <= 3x)" % (size, median(loads), median(rsss), median(rsss) / size))


if __name__ == "__main__":
    main()
