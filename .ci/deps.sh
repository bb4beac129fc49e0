#!/usr/bin/env bash
# Installs the Debian packages tl needs to build and test, when missing.
# Used by `make deps` (and so by `make check` and `make demo`).
set -euo pipefail
pkgs=(build-essential clang libcjson-dev zlib1g-dev libdeflate-dev libopenblas-dev libopenblas-pthread-dev
      libcriterion-dev libsleef-dev valgrind bc pkgconf
      libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
