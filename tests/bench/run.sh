#!/usr/bin/env bash
# make bench: tl against PyTorch on the same work, side by side in one run
# (tests/bench/bench.py); reports, never fails the build on a figure.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "make bench needs /usr/bin/python3 with NumPy (Debian: python3-numpy); PyTorch (python3-torch) is optional"
  exit 0
fi
exec /usr/bin/python3 tests/bench/bench.py "$@"
