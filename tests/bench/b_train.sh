#!/usr/bin/env bash
# A launch-bound PyTorch training loop under cubpf (issue 31): tests/gpu/apps/train_app.py (a
# small MLP, about 550 steps/s on an H200), native and under cubpf, interleaved in one call,
# TRAIN_ROUNDS (3) rounds of each mode, the median steps/s kept:
#   run_o        `cubpf run -o TRACE` (host API calls and kernel spans, no probe)
#   kcount       `cubpf run -t kcount` (no trace file: no spans)
#   kcount_o     `cubpf run -t kcount -o TRACE` (kernel spans on)
#   kcount_o_nospans  the same with CUBPF_SPANS=0 (what the spans cost, by difference)
# Targets: run_o >= 0.98 and kcount >= 0.99 of native steps/s; the weights' digest identical in
# every run.  Also the peak resident memory each mode adds to the process (VmHWM, median).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
CUBPF=$(cd "$BUILD/bin" && pwd)/cubpf
APP="python3 tests/gpu/apps/train_app.py"
ROUNDS=${TRAIN_ROUNDS:-3}
MODES=${TRAIN_MODES:-native run_o kcount kcount_o kcount_o_nospans}
echo "b_train: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
failed=0
run() { # run MODE ROUND
  local f=$OUT/train.$1.$2 t=$OUT/train.$1.$2.trace
  case $1 in
    native) $APP >"$f.out" 2>"$f.err" ;;
    run_o) "$CUBPF" run -o "$t" -- $APP >"$f.out" 2>"$f.err" ;;
    kcount) "$CUBPF" run -t kcount -- $APP >"$f.out" 2>"$f.err" ;;
    kcount_o) "$CUBPF" run -t kcount -o "$t" -- $APP >"$f.out" 2>"$f.err" ;;
    kcount_o_nospans) CUBPF_SPANS=0 "$CUBPF" run -t kcount -o "$t" -- $APP >"$f.out" 2>"$f.err" ;;
  esac
  local rc=$?
  rm -f "$t" "$t".*
  local s; s=$(awk '/^steps_per_s/ {print $2}' "$f.out")
  [ "$rc" -eq 0 ] && [ -n "$s" ] || { echo "FAIL $1 round $2: rc=$rc"; tail -5 "$f.err"; failed=$((failed + 1)); }
  echo "round $2 $1: ${s:-none} steps/s, vmhwm $(awk '/^vmhwm_kb/ {print $2}' "$f.out") kB, $(grep '^train digest' "$f.out")"
}
for r in $(seq 1 "$ROUNDS"); do for m in $MODES; do run "$m" "$r"; done; done
med() { # med MODE FIELD
  for r in $(seq 1 "$ROUNDS"); do awk -v k="$2" '$1 == k {print $2}' "$OUT/train.$1.$r.out"; done |
    sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'
}
n=$(med native steps_per_s); nh=$(med native vmhwm_kb)
want=$(grep '^train digest' "$OUT/train.native.1.out")
for m in $MODES; do
  [ "$m" = native ] && continue
  s=$(med "$m" steps_per_s); h=$(med "$m" vmhwm_kb)
  ratio=$(awk -v a="$s" -v b="$n" 'BEGIN { printf "%.3f", b > 0 ? a / b : 0 }')
  same=yes
  for r in $(seq 1 "$ROUNDS"); do [ "$(grep '^train digest' "$OUT/train.$m.$r.out")" = "$want" ] || same=no; done
  case $m in run_o) tgt=0.98 ;; kcount) tgt=0.99 ;; *) tgt="" ;; esac
  verdict=""
  [ -n "$tgt" ] && verdict=$(awk -v r="$ratio" -v t="$tgt" 'BEGIN { print (r >= t) ? "target " t ": met" : "target " t ": MISSED" }')
  echo "RESULT b_train $m: $s vs native $n steps/s = ${ratio}x (medians of $ROUNDS)${verdict:+; $verdict} weights_same=$same rss_added_mb=$(awk -v a="$h" -v b="$nh" 'BEGIN { printf "%.1f", (a - b) / 1024 }')"
  [ "$same" = yes ] || failed=$((failed + 1))
done
[ "$failed" -eq 0 ]
