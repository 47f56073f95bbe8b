#!/usr/bin/env bash
# cubpf's own cost per launch in a launch-bound training step, without a GPU (issue 31): the
# fake driver of tests/shim stands in for the real one (tests/bench/train_cpubench.c), so each
# figure is what cubpf adds to the application's thread.  Modes, as b_train.sh runs them:
#   native          the fake driver alone
#   pass            cubpf's libcuda.so.1, nothing to do (CUBPF_REAL_LIBCUDA alone)
#   run_o           `cubpf run -o TRACE`: no probe, the trace with kernel spans
#   kcount_notrace  CUBPF_PROGRAMS=kcount, no trace
#   kcount          `cubpf run -t kcount`: kcount, its own trace, CUBPF_SPANS=0
#   kcount_o        `cubpf run -t kcount -o TRACE`: the same with kernel spans
# Kernels of two of the step's four libraries are instrumented (CUBPF_KERNELS), the others' are
# passed through, as cuBLAS's SASS-only ones are under PyTorch.
# Each step starts TRAIN_CPU_PACE_US (1000) after the last began, the thread spinning meanwhile
# (not counted): the Python work of a real step (train_cpubench.c says why).  TRAIN_CPU_ROUNDS (3) rounds, modes interleaved; each mode's figure is the median of its
# rounds, and "added" is that minus native's, for the step's wall time and for the application
# thread's CPU time (on a machine of few cores cubpf's compressing and polling threads take CPU
# from the application thread, which a GPU host of 16 cores does not).
set -u
BUILD=${BUILD:-build}
BIN=$BUILD/bench/train_cpubench
SHIM=${TRAIN_CPU_SHIM:-$(cd "$BUILD/lib" && pwd)/libcuda.so.1} # another build's, to compare
FAKE=$(cd "$BUILD/tests" && pwd)/libcuda-fake.so
PROBE=$(cd "$BUILD/probes" && pwd)/kcount.bpf.o
if [ ! -x "$BIN" ] || [ ! -e "$SHIM" ] || [ ! -e "$FAKE" ] || [ ! -e "$PROBE" ]; then
  echo "b_train_cpu: missing $BIN, $SHIM, $FAKE or $PROBE (make bench-build and the shim tests)"; exit 1
fi
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
ROUNDS=${TRAIN_CPU_ROUNDS:-3}
STEPS=${TRAIN_CPU_STEPS:-400}
PACE=${TRAIN_CPU_PACE_US:-1000} # a real step's Python work: 24 launches a ms, as a real loop's
MODES="native pass run_o kcount_notrace kcount kcount_o"
T=$OUT/train_cpu.$$.trace
# half the libraries instrumented, half passed through (as cuBLAS's SASS-only kernels are)
GLOB='*_lib[01]k*'
one() { # one MODE: prints "WALL CPU" ns per launch (the step's, its thread's CPU time)
  rm -f "$T" "$T".*
  case $1 in
    native) "$BIN" "$FAKE" "$STEPS" "$PACE" ;;
    pass) env CUBPF_REAL_LIBCUDA="$FAKE" "$BIN" "$SHIM" "$STEPS" "$PACE" ;;
    run_o) env CUBPF_REAL_LIBCUDA="$FAKE" CUBPF_CACHE=off CUBPF_TRACE="$T" CUBPF_SPANS=1 \
      "$BIN" "$SHIM" "$STEPS" "$PACE" ;;
    kcount_notrace) env CUBPF_REAL_LIBCUDA="$FAKE" CUBPF_CACHE=off CUBPF_PROGRAMS="$PROBE" CUBPF_KERNELS="$GLOB" \
      "$BIN" "$SHIM" "$STEPS" "$PACE" ;;
    kcount) env CUBPF_REAL_LIBCUDA="$FAKE" CUBPF_CACHE=off CUBPF_PROGRAMS="$PROBE" CUBPF_KERNELS="$GLOB" \
      CUBPF_TRACE="$T" CUBPF_SPANS=0 "$BIN" "$SHIM" "$STEPS" "$PACE" ;;
    kcount_o) env CUBPF_REAL_LIBCUDA="$FAKE" CUBPF_CACHE=off CUBPF_PROGRAMS="$PROBE" CUBPF_KERNELS="$GLOB" \
      CUBPF_TRACE="$T" CUBPF_SPANS=1 "$BIN" "$SHIM" "$STEPS" "$PACE" ;;
  esac 2>"$OUT/train_cpu.$1.err" | awk '/^ns_per_launch/ {print $2, $4}'
  rm -f "$T" "$T".*
}
declare -A wall cpu
for r in $(seq 1 "$ROUNDS"); do
  for m in $MODES; do
    read -r w c < <(one "$m")
    wall[$m]="${wall[$m]:-} ${w:-0}" cpu[$m]="${cpu[$m]:-} ${c:-0}"
  done
done
med() { printf '%s\n' $1 | sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : 0)}'; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", a - b}'; }
bw=$(med "${wall[native]}") bc=$(med "${cpu[native]}")
line="RESULT train_cpu native_ns $bw"
for m in $MODES; do
  w=$(med "${wall[$m]}") c=$(med "${cpu[$m]}")
  echo "$m: ns per launch $w wall (rounds:${wall[$m]}), added $(sub "$w" "$bw"); thread CPU $c, added $(sub "$c" "$bc")"
  [ "$m" = native ] || line="$line ${m}_added_ns $(sub "$w" "$bw") ${m}_added_cpu_ns $(sub "$c" "$bc")"
done
echo "$line"
