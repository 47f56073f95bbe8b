#!/usr/bin/env bash
# Cost of live probes on a memory-bound kernel: vector add over 2^26 floats
# (tests/cuda/live_bench.cu: 200 timed launches after 10 warm-up ones), natively and under the
# shim with two probes, in the same run, alternating, 3 rounds each (best round kept):
#   count: per-kernel entry and exit counters (tests/live/probes/count.bpf.c): every warp adds to
#          the same two addresses (warp-aggregated atomics: 2 x 2^21 per launch on one address);
#   slots: one counter per thread slot (tests/live/probes/slots.bpf.c): an atomic per thread to
#          its own address, no contention.
# The result's checksum must be the same in every run.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
BIN=$BUILD/gpu/live_bench
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
PROBES=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)
if [ ! -x "$BIN" ] || [ ! -e "$PROBES/count.bpf.o" ] || [ ! -e "$PROBES/slots.bpf.o" ]; then
  echo "b_live: missing $BIN or the probes in $BUILD/live-probes"; exit 1; fi
echo "b_live: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
failed=0
declare -A best sum

# run MODE ROUND: one run natively (MODE=native) or under probe MODE; keeps the best time.
run() {
  local mode=$1 round=$2 f=$OUT/live_bench.$1.$2
  if [ "$mode" = native ]; then "$BIN" 200 >"$f.out" 2>"$f.err"
  else env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
      CUBPF_PROGRAMS="$PROBES/$mode.bpf.o" "$BIN" 200 >"$f.out" 2>"$f.err"; fi
  local rc=$? t s
  t=$(awk '/^ms_per_launch/ {print $2}' "$f.out"); s=$(awk '/^ms_per_launch/ {print $8}' "$f.out")
  if [ "$rc" -ne 0 ] || [ -z "$t" ]; then echo "FAIL $mode round $round"; cat "$f.out"; tail -10 "$f.err"; failed=$((failed + 1)); return; fi
  echo "round $round $mode: $t ms per launch (checksum $s)"
  sum[$mode]=$s
  best[$mode]=$(awk -v a="${best[$mode]:-1e9}" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
}

for round in 1 2 3; do for mode in native count slots; do run $mode $round; done; done
grep -E '^cubpf: live: .*instrumented [0-9]' "$OUT/live_bench.count.3.err" | head -2
grep -E '^cubpf: map (entries|slots)' "$OUT/live_bench.count.3.err" "$OUT/live_bench.slots.3.err" | head -4
n=${best[native]:-0}
gbs=$(awk -v n="$n" 'BEGIN { printf "%.0f", (n > 0 ? 3 * 4 * 67108864 / (n * 1e6) : 0) }')
for mode in count slots; do
  p=${best[$mode]:-0}
  ratio=$(awk -v n="$n" -v p="$p" 'BEGIN { printf "%.3f", (n > 0 ? p / n : 0) }')
  inst=$(grep -c ': instrumented [0-9]' "$OUT/live_bench.$mode.3.err" 2>/dev/null)
  same=no; [ "${sum[$mode]:-x}" = "${sum[native]:-y}" ] && same=yes
  echo "RESULT live_bench vecadd 2^26 $mode: native ${n} ms (${gbs} GB/s), probed ${p} ms, ratio ${ratio}x, same_checksum=${same}, modules_instrumented=${inst}"
  [ "$same" = yes ] && [ "$inst" -ge 1 ] || failed=$((failed + 1))
done
[ "$failed" -eq 0 ]
