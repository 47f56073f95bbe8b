#!/usr/bin/env bash
# What one memory update from an exit probe costs a memory-bound kernel, by who makes it and how
# many SMs share its cache line: tests/cuda/tools_bench.cu's vecadd (2^26 floats) natively and
# under each tests/live/probes/micro_*.bpf.o, REPS (20) launches, ROUNDS (3) interleaved rounds,
# medians.  The rules the bundled tools follow come from these figures (README, "Tools"); first
# measured on an H100 (vecadd 0.2927 ms): empty 1.000x, block_red8 1.025x, block_store8 1.18x,
# warp_red8 2.81x.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
BIN=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_bench
CUBPF=$BUILD/bin/cubpf
PROBES=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)
REPS=${REPS:-20}
ROUNDS=${ROUNDS:-3}
if [ ! -x "$BIN" ] || [ ! -x "$CUBPF" ] || [ ! -e "$PROBES/micro_empty.bpf.o" ]; then
  echo "b_probe_lines: missing $BIN, $CUBPF or $BUILD/live-probes/micro_*.bpf.o"; exit 1; fi
echo "b_probe_lines: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
MODES=${MODES:-"native empty block_red8 block_store8 block_line warp_red8 warp_line warp_distinct warp_spread warp_store"}
failed=0
declare -A t
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for round in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    f=$OUT/probe_lines.$mode.$round
    if [ "$mode" = native ]; then "$BIN" "$REPS" >"$f.out" 2>"$f.err"
    else "$CUBPF" run -p "$PROBES/micro_$mode.bpf.o" -- sh -c "exec '$BIN' $REPS > '$f.out'" \
      >"$f.report" 2>"$f.err"; fi
    v=$(awk '/^vecadd_ms/ {print $2}' "$f.out")
    if [ -z "$v" ]; then echo "FAIL $mode round $round"; tail -5 "$f.err"; failed=$((failed + 1)); continue; fi
    t[$mode]="${t[$mode]:-} $v"
  done
done
nat=$(echo "${t[native]:-}" | tr ' ' '\n' | grep . | median)
for mode in $MODES; do
  [ "$mode" = native ] && continue
  [ -n "${t[$mode]:-}" ] && [ -n "$nat" ] || continue
  m=$(echo "${t[$mode]}" | tr ' ' '\n' | grep . | median)
  echo "RESULT b_probe_lines $mode: vecadd $m ms vs $nat ms = $(awk -v a="$m" -v b="$nat" 'BEGIN { printf "%.3f", a / b }')x"
done
[ "$failed" -eq 0 ]
