#!/usr/bin/env bash
# Cost of the instruction tools (issue 32) of `cubpf run -t TOOL` (tests/cuda/tools_bench.cu, as
# b_tools.sh): vector add over 2^26 floats and a compute-bound kernel whose loop body is 7 PTX
# instructions (4 dependent FMAs, the count, the test, the branch: 1024 iterations per thread),
# REPS (20) timed launches each after a warm-up launch, natively and under each tool,
# interleaved, ROUNDS (5) rounds; each mode's figure is the median of its rounds.  Ratios against
# native.  Targets (issue 32): instrcount and hotblocks <= 1.10x on vecadd and <= 1.30x on the
# compute kernel; instrcount_threads (instrcount without the warp-level count: one instruction
# per block entry, `cubpf run -p`) the same; opcodehist is shown without a target.  The checksum
# must not change.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
BIN=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_bench
CUBPF=$BUILD/bin/cubpf
if [ ! -x "$BIN" ] || [ ! -x "$CUBPF" ] || [ ! -e "$BUILD/probes/instrcount.bpf.o" ]; then
  echo "b_instr: missing $BIN, $CUBPF or $BUILD/probes"; exit 1; fi
echo "b_instr: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
MODES="native instrcount instrcount_threads hotblocks opcodehist"
PROBES=$(cd "$BUILD/probes" && pwd)
REPS=${REPS:-20}
ROUNDS=${ROUNDS:-5}
failed=0
start=$(date +%s)
declare -A bv bc sum

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# run MODE ROUND: records the vecadd and compute times of MODE in this round.
run() {
  local mode=$1 round=$2 f=$OUT/instr_bench.$1.$2 reps=$REPS
  if [ "$mode" = native ]; then "$BIN" "$reps" >"$f.out" 2>"$f.err"
  elif [ "$mode" = instrcount_threads ]; then
    "$CUBPF" run -p "$PROBES/instrcount_threads.bpf.o" -- sh -c "exec '$BIN' $reps > '$f.out'" >"$f.report" 2>"$f.err"
  else "$CUBPF" run -t "$mode" -- sh -c "exec '$BIN' $reps > '$f.out'" >"$f.report" 2>"$f.err"; fi
  local rc=$? v c s
  v=$(awk '/^vecadd_ms/ {print $2}' "$f.out"); c=$(awk '/^compute_ms/ {print $2}' "$f.out")
  s=$(awk '/^checksum/ {print $2}' "$f.out")
  if [ "$rc" -ne 0 ] || [ -z "$v" ] || [ -z "$c" ]; then
    echo "FAIL $mode round $round (rc=$rc)"; cat "$f.out"; tail -10 "$f.err"; failed=$((failed + 1)); return; fi
  echo "round $round $mode: vecadd $v ms, compute $c ms per launch (checksum $s)"
  sum[$mode]=$s
  bv[$mode]="${bv[$mode]:-} $v"
  bc[$mode]="${bc[$mode]:-} $c"
}

for round in $(seq 1 "$ROUNDS"); do for mode in $MODES; do run "$mode" "$round"; done; done
for mode in $MODES; do
  [ -n "${bv[$mode]:-}" ] || continue
  bv[$mode]=$(echo "${bv[$mode]}" | tr ' ' '\n' | grep . | median)
  bc[$mode]=$(echo "${bc[$mode]}" | tr ' ' '\n' | grep . | median)
done
sed -n '1,8p' "$OUT/instr_bench.instrcount.$ROUNDS.report" 2>/dev/null
sed -n '1,8p' "$OUT/instr_bench.hotblocks.$ROUNDS.report" 2>/dev/null
# vecadd, compute
declare -A tv=([instrcount]=1.10 [instrcount_threads]=1.10 [hotblocks]=1.10 [opcodehist]=0)
declare -A tc=([instrcount]=1.30 [instrcount_threads]=1.30 [hotblocks]=1.30 [opcodehist]=0)
for mode in $MODES; do
  [ "$mode" = native ] && continue
  [ -n "${bv[$mode]:-}" ] && [ -n "${bv[native]:-}" ] || continue
  rv=$(awk -v a="${bv[$mode]}" -v b="${bv[native]}" 'BEGIN { printf "%.3f", a / b }')
  rcmp=$(awk -v a="${bc[$mode]}" -v b="${bc[native]}" 'BEGIN { printf "%.3f", a / b }')
  t1=${tv[$mode]} t2=${tc[$mode]}
  verdict=$(awk -v r1="$rv" -v r2="$rcmp" -v t1="$t1" -v t2="$t2" 'BEGIN { if (t1 == 0) print "no target";
    else if (r1 <= t1 && r2 <= t2) print "target met"; else print "target missed" }')
  same=yes; [ "${sum[$mode]}" = "${sum[native]}" ] || same=no
  echo "RESULT b_instr $mode: vecadd ${bv[$mode]} ms vs ${bv[native]} ms = ${rv}x, compute ${bc[$mode]} ms vs ${bc[native]} ms = ${rcmp}x (medians of $ROUNDS rounds of $REPS launches; targets <= ${t1}x, <= ${t2}x: $verdict) checksum_same=$same"
  [ "$same" = yes ] || { echo "FAIL $mode changed the result"; failed=$((failed + 1)); }
done
echo "b_instr: $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
