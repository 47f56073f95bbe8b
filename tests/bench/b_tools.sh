#!/usr/bin/env bash
# Cost of the bundled tools of `cubpf run -t TOOL` (tests/cuda/tools_bench.cu): vector add over
# 2^26 floats, a compute-bound kernel (4096 dependent FMAs per thread) and a barrier-heavy
# reduction (64 barriers per block of 256 threads), REPS (20) timed
# launches each after a warm-up launch (instrumentation happens at the first one), natively and
# under each tool, interleaved, ROUNDS (5) rounds; each mode's figure is the median of its
# rounds.  kernelretsnoop (a ring-buffer record per thread exit: GBs per launch of this grid)
# runs once with 2 launches, for its record count only.  About a minute in all.  Ratios against native;
# targets: kcount, threadhist <= 1.05x, launchlate <= 1.02x, memtrace <= 1.30x on vecadd and
# <= 1.03x on compute (issue 31; CUBPF_SHARED_SUMS=0 in the environment measures it without the
# deferred counters' block sums);
# blocklat <= 1.02x on vecadd and compute, syncwait <= 1.10x on the reduction (issue 32); the
# other kernels' ratios are shown (kernelretsnoop streams one record per thread: shown, no
# target).  BTOOLS_MODES="native blocklat" runs a subset.  The checksum must not change.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
BIN=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_bench
CUBPF=$BUILD/bin/cubpf
if [ ! -x "$BIN" ] || [ ! -x "$CUBPF" ] || [ ! -e "$BUILD/probes/kcount.bpf.o" ]; then
  echo "b_tools: missing $BIN, $CUBPF or $BUILD/probes"; exit 1; fi
echo "b_tools: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
MODES=${BTOOLS_MODES:-native kcount threadhist launchlate memtrace blocklat syncwait kernelretsnoop}
REPS=${REPS:-20}
ROUNDS=${ROUNDS:-5}
failed=0
start=$(date +%s)
declare -A bv bc br sum

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# run MODE ROUND: records the vecadd and compute times of MODE in this round.
run() {
  local mode=$1 round=$2 f=$OUT/tools_bench.$1.$2 reps=$REPS
  [ "$mode" = kernelretsnoop ] && reps=2
  if [ "$mode" = native ]; then "$BIN" "$reps" >"$f.out" 2>"$f.err"
  else "$CUBPF" run -t "$mode" -- sh -c "exec '$BIN' $reps > '$f.out'" >"$f.report" 2>"$f.err"; fi
  local rc=$? v c r s
  v=$(awk '/^vecadd_ms/ {print $2}' "$f.out"); c=$(awk '/^compute_ms/ {print $2}' "$f.out")
  r=$(awk '/^reduce_ms/ {print $2}' "$f.out"); s=$(awk '/^checksum/ {print $2 " " $3}' "$f.out")
  if [ "$rc" -ne 0 ] || [ -z "$v" ] || [ -z "$c" ]; then
    echo "FAIL $mode round $round (rc=$rc)"; cat "$f.out"; tail -10 "$f.err"; failed=$((failed + 1)); return; fi
  echo "round $round $mode: vecadd $v ms, compute $c ms, reduce $r ms per launch (checksum $s)"
  sum[$mode]=$s
  bv[$mode]="${bv[$mode]:-} $v"
  bc[$mode]="${bc[$mode]:-} $c"
  br[$mode]="${br[$mode]:-} $r"
}

# kernelretsnoop writes a record per thread exit (GBs of trace): one round only.
for round in $(seq 1 "$ROUNDS"); do for mode in $MODES; do
  [ "$mode" = kernelretsnoop ] && [ "$round" -gt 1 ] && continue
  run "$mode" "$round"; done; done
for mode in $MODES; do
  [ -n "${bv[$mode]:-}" ] || continue
  bv[$mode]=$(echo "${bv[$mode]}" | tr ' ' '\n' | grep . | median)
  bc[$mode]=$(echo "${bc[$mode]}" | tr ' ' '\n' | grep . | median)
  br[$mode]=$(echo "${br[$mode]}" | tr ' ' '\n' | grep . | median)
done
grep -m2 -E 'instrumented|kernel' "$OUT/tools_bench.kcount.$ROUNDS.report" 2>/dev/null
# targets per kernel: vecadd compute reduce ("-": shown, no target)
declare -A target=([kcount]="1.05 1.05 -" [threadhist]="1.05 1.05 -" [launchlate]="1.02 1.02 -"
  [memtrace]="1.30 1.03 -" [blocklat]="1.02 1.02 -" [syncwait]="- - 1.10")
for mode in $MODES; do
  [ "$mode" = native ] && continue
  [ -n "${bv[$mode]:-}" ] && [ -n "${bv[native]:-}" ] || continue
  [ "$mode" = kernelretsnoop ] && { echo "RESULT b_tools kernelretsnoop: vecadd ${bv[$mode]} ms (2 launches, one run; no target)"; continue; }
  rv=$(awk -v a="${bv[$mode]}" -v b="${bv[native]}" 'BEGIN { printf "%.3f", a / b }')
  rcmp=$(awk -v a="${bc[$mode]}" -v b="${bc[native]}" 'BEGIN { printf "%.3f", a / b }')
  rr=$(awk -v a="${br[$mode]}" -v b="${br[native]}" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "?" }')
  t=${target[$mode]:-"- - -"}
  verdict=$(awk -v r="$rv $rcmp $rr" -v t="$t" 'BEGIN { n = split(r, a, " "); split(t, b, " "); v = "no target";
    for (i = 1; i <= n; i++) if (b[i] != "-") { if (v == "no target") v = "target met"; if (a[i] + 0 > b[i] + 0) v = "target missed" }
    print v }')
  same=yes; [ "${sum[$mode]}" = "${sum[native]}" ] || same=no
  echo "RESULT b_tools $mode: vecadd ${bv[$mode]} ms vs ${bv[native]} ms = ${rv}x, compute ${bc[$mode]} ms vs ${bc[native]} ms = ${rcmp}x, reduce ${br[$mode]} ms vs ${br[native]} ms = ${rr}x (medians of $ROUNDS rounds of $REPS launches; targets vecadd/compute/reduce ${t// //}: $verdict) checksum_same=$same"
  [ "$same" = yes ] || { echo "FAIL $mode changed the result"; failed=$((failed + 1)); }
done
d=$(grep -h -m1 'ring-buffer records' "$OUT"/tools_bench.kernelretsnoop.*.report 2>/dev/null | head -1)
echo "RESULT b_tools kernelretsnoop records: $(grep -h -m1 'thread exits' "$OUT/tools_bench.kernelretsnoop.1.report" 2>/dev/null) ${d:-no drops reported}"
echo "b_tools: $(( $(date +%s) - start )) s"
[ "$failed" -eq 0 ]
