#!/usr/bin/env bash
# tl's GPU check, from the bundle that `make gpu-bundle` builds
# (build/gpu-bundle): copy the folder to a machine with the NVIDIA driver
# and the CUDA toolkit, then run
#
#     bash run.sh            (or ./run.sh; GPU_LIMIT_SCALE=2 doubles each step's time limit)
#
# Steps, each with a time limit:
#   1. the machine: nvidia-smi, `tl devices`
#   2. control: every fixture on the CPU (tests the checker and the bundle)
#   3. every op and control-flow fixture on the GPU (--device cuda,
#      --strict-device), forward and backward, against the PyTorch
#      references, each run twice for identical bits; max abs and rel
#      error per op and dtype
#   3b. every layer-op fixture (fixtures/nn) on the GPU the same way, ops
#      without a CUDA kernel on the CPU (--fallback)
#   4. a smoke test of the command line: tl grad on the GPU and the CPU
#   5. benchmark: elementwise throughput as a fraction of the copy
#      bandwidth measured in the same run
#   6. benchmark: an MLP training step on tl, and in PyTorch on the same
#      GPU when python3 can import torch with CUDA (else a note)
#   7. benchmark: a 3x3 convolution layer's training step, likewise
#   8. the end-to-end cases of tests/cli that check numbers (ONNX models,
#      jvp and hvp among them) with -d cuda, and those that only print
#      against the CPU's output (cases.py; needs python3)
# The last line is always `gpu: N passed, M failed` (the fixtures of steps
# 3 and 3b, steps 4 to 7, and step 8 as one); the exit status is 0 when
# nothing failed.  On a machine without a usable GPU, steps 1 and 2 run,
# the GPU steps say why they cannot, and everything they would have
# checked counts as failed.
set -u
cd "$(dirname "$0")" || exit 2
HERE=$(pwd)
export TL_CUDA_PLUGIN="$HERE/tl-cuda.so"
# cuBLAS: the plugin's run path names the build machine's toolkit and its
# own folder; add this machine's toolkits too.
for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-*; do
  if [ -n "$d" ] && [ -d "$d/lib64" ]; then
    LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d/lib64"
  fi
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
SCALE=${GPU_LIMIT_SCALE:-1}
passed=0
failed=0
tmp=$(mktemp -d 2>/dev/null || echo "/tmp/tl-gpu-$$")
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# step NAME SECONDS CMD...: runs CMD with a time limit, output to the
# terminal and to $tmp/NAME.log; returns CMD's status (124: timed out).
step() {
  local name=$1 limit=$(( $2 * SCALE )) rc
  shift 2
  echo
  echo "== $name (time limit ${limit}s)"
  if command -v timeout >/dev/null 2>&1; then
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$tmp/$name.log"
  else
    "$@" 2>&1 | tee "$tmp/$name.log"
  fi
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "$name: stopped after its time limit of ${limit}s"
  fi
  return "$rc"
}

count() { # PASSED FAILED
  passed=$((passed + $1))
  failed=$((failed + $2))
}

nfixtures=$(ls fixtures/ops/*.json fixtures/flow/*.json 2>/dev/null | wc -l)
if [ ! -x ./tl ] || [ ! -x ./gpu_check ] || [ ! -f ./tl-cuda.so ] || [ "$nfixtures" -eq 0 ]; then
  echo "run.sh: this is not a complete bundle (tl, gpu_check, tl-cuda.so, fixtures/): run make gpu-bundle"
  echo "gpu: 0 passed, 1 failed"
  exit 2
fi

# ---- 1. the machine ----
echo "== the machine"
uname -srm
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 || true
else
  echo "nvidia-smi: not found (no NVIDIA driver installed?)"
fi
timeout 60 ./tl --version 2>&1 | head -1
timeout 120 ./tl devices 2>&1 | tee "$tmp/devices"
gpu=yes
if ! grep -q '^cuda:0 *usable' "$tmp/devices"; then
  gpu=no
  why=$(sed -n 's/^cuda *not usable: //p' "$tmp/devices" | head -1)
  echo
  echo "NO USABLE GPU: ${why:-tl devices lists none}."
  echo "The GPU steps below will say so and count as failed."
fi

# ---- 2. control: the checker on the CPU ----
step control-cpu 300 ./gpu_check --device cpu fixtures/ops fixtures/flow
echo "control-cpu: $(grep '^gpu_check:' "$tmp/control-cpu.log" | tail -1) (not counted below)"

# ---- 3. every fixture on the GPU ----
step fixtures-gpu 420 ./gpu_check --device cuda fixtures/ops fixtures/flow
summary=$(grep -E '^gpu_check: [0-9]+ passed, [0-9]+ failed' "$tmp/fixtures-gpu.log" | tail -1)
if [ -n "$summary" ]; then
  count "$(echo "$summary" | awk '{print $2}')" "$(echo "$summary" | awk '{print $4}')"
else
  echo "fixtures-gpu: no summary (crashed or stopped): all $nfixtures fixtures count as failed"
  count 0 "$nfixtures"
fi

# ---- 3b. every layer-op fixture on the GPU ----
nnfix=$(ls fixtures/nn/*.json 2>/dev/null | wc -l)
if [ "$nnfix" -gt 0 ]; then
  step fixtures-nn-gpu 420 ./gpu_check --device cuda --fallback fixtures/nn
  summary=$(grep -E '^gpu_check: [0-9]+ passed, [0-9]+ failed' "$tmp/fixtures-nn-gpu.log" | tail -1)
  if [ -n "$summary" ]; then
    count "$(echo "$summary" | awk '{print $2}')" "$(echo "$summary" | awk '{print $4}')"
  else
    echo "fixtures-nn-gpu: no summary (crashed or stopped): all $nnfix fixtures count as failed"
    count 0 "$nnfix"
  fi
fi

# ---- 4. the command line on the GPU ----
smoke='./tl grad examples/mlp.json -i examples/mlp_inputs.npz -d cuda --strict-device -v -o "$1/gpu.npz" &&
  ./tl grad examples/mlp.json -i examples/mlp_inputs.npz -o "$1/cpu.npz" &&
  ./gpu_check compare "$1/gpu.npz" "$1/cpu.npz"'
if step cli-gpu 120 bash -c "$smoke" smoke "$tmp"; then count 1 0; else count 0 1; fi

# ---- 5. elementwise throughput against the copy bandwidth ----
if step bench-ew 180 ./gpu_check bench-ew --device cuda; then count 1 0; else count 0 1; fi

# ---- 6. an MLP step, tl and PyTorch ----
if step bench-mlp 240 ./gpu_check bench-mlp mlp.json --device cuda; then count 1 0; else count 0 1; fi
if [ "$gpu" = yes ] && command -v python3 >/dev/null 2>&1 &&
  timeout 120 python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  step bench-torch 300 python3 mlp_torch.py || echo "bench-torch: PyTorch did not finish (not counted)"
  t_tl=$(sed -n 's/^bench-mlp: tl on .*: \([0-9.]*\) ms.*/\1/p' "$tmp/bench-mlp.log")
  t_torch=$(sed -n 's/^bench-mlp: torch .*: \([0-9.]*\) ms a step.*/\1/p' "$tmp/bench-torch.log" 2>/dev/null)
  if [ -n "$t_tl" ] && [ -n "$t_torch" ]; then
    awk -v a="$t_tl" -v b="$t_torch" 'BEGIN { printf "bench-mlp: tl %.2f ms, PyTorch %.2f ms a step: tl takes %.2fx PyTorch'"'"'s time\n", a, b, a / b }'
  fi
else
  echo
  echo "== bench-torch"
  echo "note: no PyTorch comparison (python3 with torch and CUDA is not importable here)"
fi

# ---- 7. a convolution layer, tl and PyTorch ----
if step bench-conv 240 ./gpu_check bench-conv conv.json --device cuda; then count 1 0; else count 0 1; fi
if [ "$gpu" = yes ] && command -v python3 >/dev/null 2>&1 &&
  timeout 120 python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  step bench-conv-torch 300 python3 conv_torch.py || echo "bench-conv-torch: PyTorch did not finish (not counted)"
  t_tl=$(sed -n 's/^bench-conv: tl on .*: \([0-9.]*\) ms.*/\1/p' "$tmp/bench-conv.log")
  t_torch=$(sed -n 's/^bench-conv: torch .*: \([0-9.]*\) ms a step.*/\1/p' "$tmp/bench-conv-torch.log" 2>/dev/null)
  if [ -n "$t_tl" ] && [ -n "$t_torch" ]; then
    awk -v a="$t_tl" -v b="$t_torch" 'BEGIN { printf "bench-conv: tl %.2f ms, PyTorch %.2f ms a step: tl takes %.2fx PyTorch'"'"'s time\n", a, b, a / b }'
  fi
fi

# ---- 8. the end-to-end cases on the GPU ----
if [ -d repo/tests/cli ] && [ -f cases.py ]; then
  if [ "$gpu" = yes ] && command -v python3 >/dev/null 2>&1; then
    step cases-gpu 300 bash -c 'cd repo && python3 ../cases.py --require-device ../tl tests/cli/*.txt'
    summary=$(grep -E '^cases: [0-9]+ passed, [0-9]+ failed' "$tmp/cases-gpu.log" | tail -1)
    if [ -n "$summary" ] && [ "$(echo "$summary" | awk '{print $4}')" -eq 0 ]; then count 1 0; else count 0 1; fi
  else
    echo
    echo "== cases-gpu"
    if [ "$gpu" = yes ]; then why="python3 not found"; else why="no usable GPU"; fi
    echo "cases-gpu: not run ($why)"
    count 0 1
  fi
fi

echo
echo "gpu: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
