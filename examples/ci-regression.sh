#!/usr/bin/env bash
# One graph, many inputs, each checked against its golden result: the CI
# regression check, run in parallel by an engine made for it rather than
# by tl itself.
#
#   bash examples/ci-regression.sh                 # check every case
#   bash examples/ci-regression.sh --update        # rewrite the golden files
#   GRAPH=g.json CASES=dir JOBS=8 bash examples/ci-regression.sh
#
# GRAPH, CASES and TL are paths from where the script is run; by default
# this folder's xent.json and ci-cases/, and the repository's ./tl (the tl
# on PATH where the repository has none built).  For
# each CASES/NAME.npz (the inputs) it runs
#
#   tl grad GRAPH -i CASES/NAME.npz --expect CASES/NAME.golden.npz $TOL
#
# which exits 0 when outputs and gradients match the golden file, 1 with a
# report when they differ, 2 on bad input (a missing golden file, say).  The
# script exits 0 when every case matches, 1 when some differ, and 2 when a
# case could not be checked (tl's error is printed under it) or on a bad
# argument.  TOL, the tolerance, is
# compare's rule (rtol 1e-5 for f32, 1e-7 for f64) plus --atol 1e-6: golden
# files made on one machine are checked on others, whose BLAS kernels
# round a product's f32 sums differently.  Against these golden files
# (Haswell's and Zen's kernels give them bit for bit) Prescott's to
# Sandybridge's are up to 6e-8 off, on values up to 0.4, and an element
# near zero is then far off relative to itself (1.3e-4 for a gradient of
# 0.0002 in case7); 1e-6 is 1e-5 of the values' scale.  Set TOL for another scale (TOL='--ulp 4',
# or TOL= for compare's rule alone); TL_FLAGS adds other flags.  The cases
# run through GNU parallel when it is installed, else xargs -P; any
# failing case fails the script.  On a Slurm cluster the same line is one
# task of a job array:
#
#   sbatch --array=0-7 --wrap 'f=$(ls CASES/*[0-9].npz | sed -n "$((SLURM_ARRAY_TASK_ID+1))p");
#          tl grad GRAPH -i "$f" --expect "${f%.npz}.golden.npz" --atol 1e-6'
set -euo pipefail
here=$(dirname "$0")
if [ -z "${TL:-}" ]; then # TL may be a command with arguments (valgrind ... tl)
    if [ -x "$here/../tl" ]; then TL=$here/../tl
    elif command -v tl >/dev/null 2>&1; then TL=tl
    else echo "ci-regression: no tl: build it (make tl) or set TL" >&2; exit 2; fi
fi
GRAPH=${GRAPH:-$here/xent.json}
CASES=${CASES:-$here/ci-cases}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TOL=${TOL-"--atol 1e-6"} # set, even empty, it replaces this
TL_FLAGS=${TL_FLAGS:-}
export TL GRAPH TOL TL_FLAGS

case ${1:-} in
'' | --update) [ $# -le 1 ] || { echo "ci-regression: unknown argument $2 (usage: bash ci-regression.sh [--update])" >&2; exit 2; } ;;
*) echo "ci-regression: unknown argument $1 (usage: bash ci-regression.sh [--update])" >&2; exit 2 ;;
esac

shopt -s nullglob
inputs=()
for f in "$CASES"/*.npz; do
    case $f in *.golden.npz) ;; *) inputs+=("$f") ;; esac
done
if [ ${#inputs[@]} -eq 0 ]; then
    echo "ci-regression: no cases in $CASES" >&2
    exit 2
fi

plural=s
[ ${#inputs[@]} -ne 1 ] || plural=

if [ "${1:-}" = --update ]; then
    for f in "${inputs[@]}"; do
        $TL grad "$GRAPH" -i "$f" $TL_FLAGS -o "${f%.npz}.golden.npz"
    done
    echo "ci-regression: wrote ${#inputs[@]} golden file$plural in $CASES"
    exit 0
fi

# One case: prints its verdict, and under a failure what tl printed, in
# one write (so that cases run side by side by xargs never mix their
# lines); the exit status is tl's.
check_one() {
    local f=$1 out rc=0
    out=$($TL grad "$GRAPH" -i "$f" --expect "${f%.npz}.golden.npz" $TOL $TL_FLAGS 2>&1) || rc=$?
    if [ $rc -eq 0 ]; then
        printf 'ok    %s\n' "$f"
    else
        printf 'FAIL  %s (exit %s)\n%s\n' "$f" "$rc" "$(printf '%s\n' "$out" | sed 's/^/      /')"
    fi
    return $rc
}
export -f check_one

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if command -v parallel >/dev/null 2>&1; then
    printf '%s\n' "${inputs[@]}" | parallel --will-cite -j "$JOBS" --keep-order check_one
else
    printf '%s\0' "${inputs[@]}" | xargs -0 -P "$JOBS" -n 1 bash -c 'check_one "$0"'
fi | tee "$log" && status=0 || status=$?
nfail=$(grep -c '^FAIL ' "$log" || true)
ndiff=$(grep -c '^FAIL .*(exit 1)$' "$log" || true)
nerr=$((nfail - ndiff))
n=${#inputs[@]}
if [ $status -eq 0 ] && [ "$nfail" -eq 0 ]; then
    if [ $n -eq 1 ]; then echo "ci-regression: 1 case matches"; else echo "ci-regression: $n cases match"; fi
elif [ "$nfail" -eq 0 ]; then
    echo "ci-regression: the $n case$plural could not be run (see the error above)" >&2
    exit 2
elif [ $nerr -gt 0 ]; then
    diffs=
    [ "$ndiff" -eq 0 ] || diffs=", $ndiff differ$([ "$ndiff" -ne 1 ] || echo s)"
    echo "ci-regression: $nerr of $n case$plural could not be checked (see the error under each)$diffs" >&2
    exit 2
else
    echo "ci-regression: $ndiff of $n case$plural differ$([ "$ndiff" -ne 1 ] || echo s)" >&2
    exit 1
fi
