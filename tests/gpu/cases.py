#!/usr/bin/env python3
"""The end-to-end cases of tests/cli on the GPU (run from the repository
root, after run.sh, on a machine with a usable GPU):

    python3 tests/gpu/cases.py [--require-device] TL CASEFILE...

TL is the bundle's tl (TL_CUDA_PLUGIN naming its plugin).  From each case
file (the format of tests/cli/cases.txt) it takes the cases that run the
tl command line (run, grad, jvp, hvp) and expect exit 0:
  - a case that checks its numbers (--expect FILE) runs with -d cuda and
    must still exit 0: the GPU's numbers within the case's own tolerance;
  - a case that only prints runs twice, on the CPU and with -d cuda, each
    writing an .npz, and the two must agree within gpu_check's tolerance
    of whole graphs (gpu_check compare).
Ops without a CUDA kernel run on the CPU (the per-op fallback) and are
counted by op and dtype from -v's report.  Prints the failures, the
fallbacks and last `cases: N passed, M failed`; exit 1 when any failed.
--require-device: no op call on the device at all is a failure too (a GPU
that tl could not use runs every case on the CPU, silently but for a
warning).
Standard library only: the GPU machine has python3, not this project's
packages."""
import collections
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile

COMMANDS = ("run", "grad", "jvp", "hvp")


def blocks(path):
    """Cases of one file: (line number, command line, directives)."""
    out, cur, start = [], [], 0
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines + [""], 1):
        if line.strip() == "":
            if cur:
                out.append((start, cur[0], cur[1:]))
            cur = []
        elif line.startswith("#") and not cur:
            continue
        else:
            if not cur:
                start = i
            if cur and cur[-1].endswith("\\"):
                cur[-1] = cur[-1][:-1] + " " + line.strip()
            else:
                cur.append(line)
    return out


def pick(path):
    """The cases of a file that this check runs: (where, kind, command)."""
    picked = []
    for lineno, cmd, directives in blocks(path):
        if not cmd.startswith("tl "):
            continue
        words = cmd.split()
        if len(words) < 2 or words[1] not in COMMANDS:
            continue
        if "exit: 0" not in directives or "--help" in words:
            continue
        if any(d.startswith("skip-if:") and "TL_MEMCHECK" not in d for d in directives):
            continue
        if any(d.startswith("env:") or d.startswith("stdin") for d in directives):
            continue
        where = "%s:%d" % (path, lineno)
        if "--expect" in words or any(w.startswith("--expect=") for w in words):
            picked.append((where, "expect", cmd))
        elif not re.search(r"(^| )(-o|--output|--format|--full|--dry-run|-q)( |=|$)", cmd) \
                and "$W" not in cmd and "|" not in cmd:
            picked.append((where, "compare", cmd))
    return picked


FALLBACK = re.compile(r"^tl: fallback: (\S+) \((\w+)\) ran on the CPU (\d+) times?: (.*)$")
CALLS = re.compile(r"^tl: (\d+) op calls on the device, (\d+) on the CPU")


def run_case(tl, checker, case, tmp):
    """(where, passed, why, the GPU run's stderr) of one case"""
    where, kind, cmd = case
    env = dict(os.environ, TL=tl)
    body = '"$TL"' + cmd[2:]
    tag = re.sub(r"[^A-Za-z0-9]", "_", where)

    def sh(line):
        return subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120)

    try:
        if kind == "expect":
            p = sh(body + " -d cuda -v")
            ok = p.returncode == 0
            return where, ok, "" if ok else "exit %d: %s" % (p.returncode, last_error(p.stderr)), p.stderr
        cpu = os.path.join(tmp, tag + "_cpu.npz")
        gpu = os.path.join(tmp, tag + "_gpu.npz")
        p = sh(body + " -o " + shlex.quote(cpu))
        if p.returncode != 0:
            return where, False, "on the CPU: exit %d: %s" % (p.returncode, last_error(p.stderr)), ""
        q = sh(body + " -d cuda -v -o " + shlex.quote(gpu))
        if q.returncode != 0:
            return where, False, "exit %d: %s" % (q.returncode, last_error(q.stderr)), q.stderr
        c = subprocess.run([checker, "compare", gpu, cpu], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        return where, False, "timed out after %g s" % e.timeout, ""
    ok = c.returncode == 0
    return where, ok, "" if ok else "GPU and CPU differ: " + c.stdout.strip().replace("\n", "; "), q.stderr


def last_error(stderr):
    lines = [l for l in stderr.split("\n") if l.startswith("tl: ") and "fallback" not in l
             and "nodes evaluated" not in l]
    return lines[-1] if lines else stderr.strip().split("\n")[-1] if stderr.strip() else "(no message)"


def main(argv):
    require = "--require-device" in argv
    argv = [a for a in argv if a != "--require-device"]
    if len(argv) < 3:
        print(__doc__.strip().split("\n\n")[1])
        return 2
    tl = os.path.abspath(argv[1])
    checker = os.path.join(os.path.dirname(tl), "gpu_check")  # the bundle's, beside its tl
    if not os.path.exists(checker):
        checker = os.path.abspath("build/gpu/gpu_check")  # a checkout's (make build/gpu/gpu_check)
    if not os.path.exists(checker):
        print("cases: no gpu_check beside %s nor in build/gpu" % tl)
        return 2
    cases = []
    for path in argv[2:]:
        cases += pick(path)
    fallbacks = collections.Counter()
    calls = [0, 0]
    failures = []
    passed = 0
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=min(12, os.cpu_count() or 2)) as pool:
        jobs = [pool.submit(run_case, tl, checker, c, tmp) for c in cases]
        for j in jobs:
            where, ok, why, stderr = j.result()
            for line in stderr.split("\n"):
                m = FALLBACK.match(line)
                if m:
                    fallbacks[(m.group(1), m.group(2), m.group(4))] += int(m.group(3))
                m = CALLS.match(line)
                if m:
                    calls[0] += int(m.group(1))
                    calls[1] += int(m.group(2))
            if ok:
                passed += 1
            else:
                failures.append((where, why))
                print("FAIL %s: %s" % (where, why), flush=True)
            done = passed + len(failures)
            if done % 50 == 0: # a stopped run still says how far it got
                print("cases: %d of %d run, %d failed so far" % (done, len(cases), len(failures)), flush=True)
    if fallbacks:
        print("ops that ran on the CPU (no CUDA kernel), calls over all cases:")
        for (op, dt, why), n in sorted(fallbacks.items(), key=lambda kv: -kv[1]):
            print("  %-20s %-5s %6d  %s" % (op, dt, n, why))
    print("op calls over all cases: %d on the device, %d on the CPU" % tuple(calls))
    if require and cases and calls[0] == 0:
        failures.append(("all", "no op ran on the device"))
        print("FAIL: no op of any case ran on the device")
    print("cases: %d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
