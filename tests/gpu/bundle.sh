#!/usr/bin/env bash
# make gpu-bundle: assembles OUT (build/gpu-bundle) from what the Makefile
# built: tl and gpu_check linked to find their libraries beside them
# ($ORIGIN), the CUDA plugin, the non-CUDA shared libraries they need (not
# the C library's, nor CUDA's: the GPU machine has its driver and toolkit),
# the fixtures, the benchmark graph, run.sh, the end-to-end cases with what
# they read (repo/); and OUT.tar.gz, the same folder packed to travel
# (OpenBLAS alone is 35 MiB unpacked).  Fails when the archive would reach
# 32 MiB.
set -euo pipefail
OUT=$1 TL=$2 CHECK=$3 PLUGIN=$4
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
mkdir -p "$OUT/fixtures"
cp "$TL" "$OUT/tl"
cp "$CHECK" "$OUT/gpu_check"
cp "$PLUGIN" "$OUT/tl-cuda.so"
strip --strip-debug "$OUT/tl" "$OUT/gpu_check" "$OUT/tl-cuda.so"
cp -r tests/fixtures/ops tests/fixtures/flow "$OUT/fixtures/"
if [ -d tests/fixtures/nn ]; then cp -r tests/fixtures/nn "$OUT/fixtures/"; fi
cp tests/gpu/run.sh tests/gpu/mlp.json tests/gpu/mlp_torch.py tests/gpu/conv.json tests/gpu/conv_torch.py \
  tests/gpu/cases.py "$OUT/"
# the end-to-end cases (run.sh step 8) and what they read, at their paths
mkdir -p "$OUT/repo/tests/fixtures"
cp -r tests/cli "$OUT/repo/tests/"
cp -r tests/fixtures/onnx tests/fixtures/hvp "$OUT/repo/tests/fixtures/"
cp -r examples "$OUT/repo/"
ln -s repo/examples "$OUT/examples" # run.sh's smoke test reads the MLP example
chmod +x "$OUT/run.sh"

# the libraries: whatever ldd resolves, but the C runtime and CUDA; and
# OpenBLAS, which tl loads when a matrix product needs it (BLAS_LIB), with
# the libraries it needs
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt)\.'
if [ -n "${BLAS_LIB:-}" ]; then
  cp -L "$BLAS_LIB" "$OUT/libopenblas.so.0"
fi
for bin in "$OUT/tl" "$OUT/gpu_check" ${BLAS_LIB:+"$BLAS_LIB"}; do
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $system ]]; then
    cp -L "$path" "$OUT/$name"

  fi
done
# every library found beside the programs, none missing
for bin in "$OUT/tl" "$OUT/gpu_check"; do
  if ldd "$bin" | grep -q 'not found'; then
    ldd "$bin"
    echo "bundle: $bin misses a library" >&2
    exit 1
  fi
  if ldd "$bin" | awk '$2 == "=>" {print $3}' | grep -v "^$OUT/" |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|ld-linux[^/]*)\.so' | grep -q .; then
    ldd "$bin"
    echo "bundle: $bin takes a library from outside the bundle" >&2
    exit 1
  fi
done
cat >"$OUT/README.txt" <<README
tl's GPU bundle (make gpu-bundle), built $(date -u +%Y-%m-%d) from $(git rev-parse --short HEAD 2>/dev/null || echo "a checkout").
On a machine with the NVIDIA driver and the CUDA toolkit (CUDA $(sed -n 's/.*release \([0-9.]*\).*/\1/p' <<<"$(${NVCC:-nvcc} --version 2>/dev/null)" || true)):

    bash run.sh

It checks every op and control-flow fixture on the GPU against the
references, runs the benchmarks, and ends with "gpu: N passed, M failed".
Contents: tl, tl-cuda.so (the CUDA plugin), gpu_check (the checker),
the libraries they need beside them, fixtures/, examples/, mlp.json and
mlp_torch.py (the MLP benchmark), conv.json and conv_torch.py (the
convolution benchmark), cases.py and repo/ (the end-to-end cases and the
files they read), run.sh.
README
tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
size=$(du -sk "$OUT" | awk '{print $1}')
packed=$(du -sk "$OUT.tar.gz" | awk '{print $1}')
echo "bundle: $OUT, $((size / 1024)) MiB; $OUT.tar.gz, $((packed / 1024)) MiB:"
ls -la "$OUT"
if [ "$packed" -ge $((32 * 1024)) ]; then
  echo "bundle: the archive is $((packed / 1024)) MiB, more than the 32 MiB allowed" >&2
  exit 1
fi
