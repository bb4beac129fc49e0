#!/usr/bin/env bash
# Runs test binaries two at a time (UNITS_PARALLEL), each with its own
# Criterion workers, from the repository root.  Several of them keep one
# core busy and leave the other idle (the ONNX conformance test is one
# long case), so a pair fills the machine.  Each binary's output goes to
# build/tests/log/NAME.log; a passing one prints its summary line; the
# logs of those that failed are printed whole at the end (never
# interleaved with the other's lines), and then the script fails.
#
#   bash tests/units.sh build/tests/test_onnx build/tests/test_npy ...
set -u
logs=build/tests/log
mkdir -p "$logs"
rm -f "$logs"/*.failed
parallel=${UNITS_PARALLEL:-2}

run_one() {
    local t=$1 name log start rc
    name=$(basename "$t")
    log=$logs/$name.log
    start=$(date +%s)
    "$t" --jobs 2 >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        printf '== %s (%d s): %s\n' "$t" $(( $(date +%s) - start )) \
            "$(grep -a 'Synthesis' "$log" | tail -1 | sed 's/^\[[=-]*\] *//')"
    else
        printf '== %s FAILED (exit %d)\n' "$t" "$rc"
        : >"$log.failed"
        return 1    # never 255, which would stop xargs
    fi
}
export -f run_one
export logs

# xargs exits 123 when a command failed; every binary still runs.
printf '%s\n' "$@" | xargs -P "$parallel" -I{} bash -c 'run_one "$1"' _ {}
rc=$?
for f in "$logs"/*.failed; do
    [ -e "$f" ] || continue
    printf '\n== the output of %s\n' "${f%.failed}"
    cat "${f%.failed}"
done
[ "$rc" -eq 0 ] || { echo "units.sh: a test binary failed (its output is above)"; exit 1; }
