#!/usr/bin/env bash
# Runs every shell line the user-facing Markdown shows, as written, and
# checks what it prints: tests/docs.sh [FILE.md...] (default: README.md and
# examples/README.md).  TL is the tl under test (default ./tl, made
# absolute); `./tl` in the commands is that binary.
#
# In an indented code block, a line `$ CMD` is a command, each `> MORE`
# right after it continues it (as does the next line, after a line ending
# in a backslash), and the lines after it up to the next blank
# line or `$ ` are what it prints (stdout and stderr), the 4-space indent
# taken off.  A command exits 0 unless its last line ends with the comment
# `# exit status N`; where no output is shown, only the exit status is
# checked.  The commands run one after another in document order, with bash,
# in one scratch copy of the tree (the files git knows, so nothing a user
# left in the clone), so a later command reads what an earlier one wrote;
# HOME is a folder in that copy.  Fails naming FILE:LINE of every command
# that exits otherwise or prints something else.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
TL=${TL:-./tl}
case $TL in /*) ;; *) TL=$root/$TL ;; esac
[ -x "$TL" ] || { echo "docs.sh: no tl at $TL" >&2; exit 2; }
docs=("$@")
[ ${#docs[@]} -gt 0 ] || docs=(README.md examples/README.md)

# Lines that are not run: a bash pattern on the command's text, and why.
skips=(
  # writes into the user's home and rebuilds tl and libtl.a when they are
  # stale (minutes); tests/cli/install.txt installs into a temporary PREFIX
  # and builds examples/embed.c through pkg-config, as these lines do
  'make install *'
  'export PKG_CONFIG_PATH=*'
  'cc -std=c11 examples/embed.c *'
  './embed *'
)
# Commands whose output depends on the CPU's BLAS and convolution kernels
# (f32 matrix products round their sums differently from one CPU to
# another): their numbers are compared with a relative tolerance of 1e-5,
# the rest of the text exactly (whitespace aside, since the columns of a
# tensor are as wide as its longest number).
approx=(
  '*examples/mlp*'
  '*examples/xent*'
  '*examples/cnn*'
  '*np.load("out.npz")*'
  '*=h.npz:*'          # the MLP's hessian-vector product, in h.npz
)
# tl compare's maxima of |tl - PyTorch| are differences of nearly equal
# numbers, which change at any magnitude with the last bit of a sum: only
# the words, names, shapes and counts of these reports are compared.
words=(
  '*tl compare g.npz examples/cnn_expected.npz*'
)
# python lines need NumPy, which tl's build and tests do not: without it
# they are reported as skipped.
numpy=0
/usr/bin/python3 -c 'import numpy' 2>/dev/null && numpy=1

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z -c -o --exclude-standard | xargs -0 cp --parents -t "$scratch" 2>/dev/null)
else
  tar -C "$root" --exclude=./build --exclude=./.git -cf - . | tar -C "$scratch" -xf -
fi
rm -f "$scratch/tl"
ln -s "$TL" "$scratch/tl"
mkdir -p "$scratch/.home"

matches() {  # matches TEXT PATTERN...: TEXT matches one of the patterns
  local t=$1 p; shift
  for p in "$@"; do
    # shellcheck disable=SC2053
    [[ $t == $p ]] && return 0
  done
  return 1
}

# compare MODE EXPECTED ACTUAL: exact, approx (numbers within relative
# 1e-5) or words (integers exact, other numbers not compared)
compare() {
  [ "$1" = exact ] && { cmp -s "$2" "$3"; return; }
  awk -v mode="$1" '
    function toks(s, arr,   n, m) {
      n = 0
      while (length(s) > 0) {
        if (match(s, /^[ \t]+/)) { s = substr(s, RLENGTH + 1); continue }
        if (match(s, /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?/)) m = RLENGTH
        else m = 1
        arr[++n] = substr(s, 1, m); s = substr(s, m + 1)
      }
      return n
    }
    function isnum(t) { return t ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
    function same(a, b,   d, m) {
      if (a == b) return 1
      if (!isnum(a) || !isnum(b)) return 0
      if (mode == "words") return a !~ /^[-+]?[0-9]+$/ && b !~ /^[-+]?[0-9]+$/
      d = a - b; if (d < 0) d = -d
      m = (a < 0 ? -a : a); if ((b < 0 ? -b : b) > m) m = (b < 0 ? -b : b)
      return d <= 1e-5 * m
    }
    FNR == NR { e = e $0 "\n"; next }
    { a = a $0 "\n" }
    END {
      ne = toks(e, E); na = toks(a, A)
      if (ne != na) exit 1
      for (i = 1; i <= ne; i++) if (!same(E[i], A[i])) exit 1
    }' "$2" "$3"
}

fails=0 ran=0 skipped=0
start=$SECONDS
run_one() {  # run_one FILE LINE CMD EXPECTED SHOWN
  local file=$1 line=$2 cmd=$3 expected=$4 shown=$5 want=0 rc mode=exact last
  last=${cmd##*$'\n'}
  if matches "$cmd" "${skips[@]}" || { [[ $cmd == */usr/bin/python3* ]] && [ $numpy = 0 ]; }; then
    echo "skip  $file:$line: ${cmd%%$'\n'*}"
    skipped=$((skipped + 1))
    return
  fi
  [[ $last =~ \#\ exit\ status\ ([0-9]+)[[:space:]]*$ ]] && want=${BASH_REMATCH[1]}
  matches "$cmd" "${approx[@]}" && mode=approx
  matches "$cmd" "${words[@]}" && mode=words
  (cd "$scratch" && HOME=$scratch/.home timeout 60 bash -c "$cmd") >"$scratch/.out" 2>&1 </dev/null
  rc=$?
  ran=$((ran + 1))
  if [ $rc != "$want" ]; then
    echo "FAIL  $file:$line: exit status $rc, the doc implies $want: ${cmd%%$'\n'*}"
    sed 's/^/      | /' "$scratch/.out" | head -20
    fails=$((fails + 1))
  elif [ "$shown" = 1 ]; then
    printf '%s' "$expected" >"$scratch/.want"
    if ! compare $mode "$scratch/.want" "$scratch/.out"; then
      echo "FAIL  $file:$line: prints other than the doc shows ($mode): ${cmd%%$'\n'*}"
      diff "$scratch/.want" "$scratch/.out" | sed 's/^/      | /' | head -30
      fails=$((fails + 1))
    fi
  fi
}

for doc in "${docs[@]}"; do
  n=0 cmd="" cline=0 expected="" shown=0 cont=0
  flush() {
    [ -n "$cmd" ] && run_one "$doc" "$cline" "$cmd" "$expected" "$shown"
    cmd="" expected="" shown=0 cont=0
  }
  while IFS= read -r l || [ -n "$l" ]; do
    n=$((n + 1))
    if [[ $l == '    $ '* ]]; then
      flush
      cmd=${l#'    $ '} cline=$n cont=1
    elif [ -n "$cmd" ] && [ $cont = 1 ] && [[ $l == '    > '* ]]; then
      cmd+=$'\n'${l#'    > '}
    elif [ -n "$cmd" ] && [ $cont = 1 ] && [[ $cmd == *\\ ]] && [[ $l == '    '?* ]]; then
      cmd+=$'\n'${l#'    '}
    elif [ -n "$cmd" ] && [[ $l == '    '?* ]]; then
      expected+=${l#'    '}$'\n' shown=1 cont=0
    else
      flush
    fi
  done <"$root/$doc"
  flush
done
echo "docs: $ran commands run, $skipped skipped, $fails failed ($((SECONDS - start)) s)"
[ $fails = 0 ]
