#!/usr/bin/env bash
# make bench: figures measured side by side in one run, reported as
# ratios (the machines are shared and noisy; no absolute target is
# asserted).  Each figure is the median of 7 alternating runs of tl's own
# -v timings, which exclude process start-up.
set -euo pipefail
cd "$(dirname "$0")/../.."
TL=${TL:-./tl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
reps=7

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# prints "run_ms backward_ms" from tl -v
timings() { "$@" -v 2>&1 >/dev/null | sed -n 's/.*run \([0-9.]*\) ms\(, backward \([0-9.]*\) ms\)\?.*/\1 \3/p'; }

$TL run tests/bench/gen_x.json -o "$tmp/x.npy"

echo "== map over 1e6 elements vs the same function as straight-line ops (f64)"
for i in $(seq $reps); do
  timings $TL grad tests/bench/map_piecewise.json x="$tmp/x.npy" >>"$tmp/map"
  timings $TL grad tests/bench/straight_piecewise.json x="$tmp/x.npy" >>"$tmp/line"
done
mf=$(cut -d' ' -f1 "$tmp/map" | median); mb=$(cut -d' ' -f2 "$tmp/map" | median)
lf=$(cut -d' ' -f1 "$tmp/line" | median); lb=$(cut -d' ' -f2 "$tmp/line" | median)
printf '  forward:  map %8.2f ms   straight-line %8.2f ms   ratio %.2f\n' "$mf" "$lf" "$(echo "$mf / $lf" | bc -l)"
printf '  backward: map %8.2f ms   straight-line %8.2f ms   ratio %.2f\n' "$mb" "$lb" "$(echo "$mb / $lb" | bc -l)"

echo "== tl grad on the demo (examples/mlp.json), whole process"
for i in $(seq $reps); do
  s=$(date +%s%N); $TL grad examples/mlp.json -i examples/mlp_inputs.npz >/dev/null; e=$(date +%s%N)
  echo "scale=3; ($e - $s) / 1000000" | bc >>"$tmp/demo"
done
printf '  wall time: %s ms (median of %d)\n' "$(median <"$tmp/demo")" "$reps"

echo "== a million scalar iterate steps, forward and backward"
for i in 1 2 3; do
  timings $TL grad tests/fixtures/scale/iterate_1000000.json x=2.0 >>"$tmp/iter"
done
printf '  forward %s ms, backward %s ms (median of 3)\n' "$(cut -d' ' -f1 "$tmp/iter" | median)" "$(cut -d' ' -f2 "$tmp/iter" | median)"

echo "== f32 matmul 1024^3 (sum(a @ a), grad): TL_NUM_THREADS=1 vs all processors"
$TL run tests/bench/gen_mat.json -o "$tmp/a.npy"
for i in 1 2 3; do
  TL_NUM_THREADS=1 timings $TL grad tests/bench/matmul.json a="$tmp/a.npy" >>"$tmp/mm1"
  timings $TL grad tests/bench/matmul.json a="$tmp/a.npy" >>"$tmp/mmn"
done
f1=$(cut -d' ' -f1 "$tmp/mm1" | median); fn=$(cut -d' ' -f1 "$tmp/mmn" | median)
b1=$(cut -d' ' -f2 "$tmp/mm1" | median); bn=$(cut -d' ' -f2 "$tmp/mmn" | median)
gf() { echo "2 * 1024^3 * $2 / ($1 / 1000) / 1000000000" | bc -l; }
printf '  forward:  1 thread %7.2f ms (%5.1f GFLOP/s)   %d threads %7.2f ms (%5.1f GFLOP/s)\n' "$f1" "$(gf "$f1" 1)" "$(nproc)" "$fn" "$(gf "$fn" 1)"
printf '  backward: 1 thread %7.2f ms (%5.1f GFLOP/s)   %d threads %7.2f ms (%5.1f GFLOP/s)\n' "$b1" "$(gf "$b1" 2)" "$(nproc)" "$bn" "$(gf "$bn" 2)"
