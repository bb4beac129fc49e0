#!/usr/bin/env bash
# Installs the Debian packages tl needs to build and test, when missing.
# Used by `make deps` (and so by `make check` and `make demo`).
#   .ci/deps.sh --check   installs nothing: names the packages a plain `make`
#                         needs that are missing (one line, exit 1), where
#                         dpkg can tell; the Makefile runs it before the first
#                         compile, so a fresh machine's `make` says what to do
#                         instead of failing on a missing header.
set -euo pipefail
build=(libcjson-dev zlib1g-dev libdeflate-dev libopenblas-dev libopenblas-pthread-dev libsleef-dev
       libprotobuf-c-dev protobuf-c-compiler libonnx-dev)
pkgs=(build-essential clang "${build[@]}" libcriterion-dev valgrind bc pkgconf libonnx-testdata)
missing_of() {
  missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
}
if [ "${1:-}" = "--check" ]; then
  command -v dpkg-query > /dev/null || exit 0  # not Debian: the compiler will say what is missing
  missing_of "${build[@]}"
  cc=(${CC:-cc})
  command -v "${cc[0]}" > /dev/null || missing=(build-essential "${missing[@]}")
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "tl: missing packages to build with: ${missing[*]}; \`make deps\` installs them (apt-get, through sudo when not root)" >&2
  exit 1
fi
missing_of "${pkgs[@]}"
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
