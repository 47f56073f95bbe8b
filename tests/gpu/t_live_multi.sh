#!/usr/bin/env bash
# Live probes on several GPUs: tests/cuda/live_multi.cu runs live_vecadd on every device (at
# most 4) with a different grid each; under the counting probe each device must get its own maps
# (one allocation per device's context, pointers stored per context) with exactly that device's
# thread count, and the program's output must equal a native run.  Needs two GPUs: on a machine
# with one it checks the single device and says so.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/live_multi
PROBE=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)/count.bpf.o
failed=0
if [ ! -x "$APP" ] || [ ! -e "$PROBE" ]; then echo "FAIL missing $APP or $PROBE"; exit 1; fi
"$APP" >"$OUT/live_multi.native.out" 2>&1; rc1=$?
env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info CUBPF_DUMP_MAPS=1 \
  CUBPF_PROGRAMS="$PROBE" "$APP" >"$OUT/live_multi.out" 2>"$OUT/live_multi.err"; rc2=$?
same=no; cmp -s "$OUT/live_multi.native.out" "$OUT/live_multi.out" && same=yes
ndev=$(sed -n 's/^devices \([0-9]*\)/\1/p' "$OUT/live_multi.native.out")
echo "RESULT live_multi run: devices=${ndev:-?} native_rc=$rc1 shim_rc=$rc2 identical_stdout=$same"
cat "$OUT/live_multi.out"
grep -E '^cubpf: live: (maps on device|clock|cuLibrary|cuModule|kernel id|[0-9]+ modules)' "$OUT/live_multi.err"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$same" = yes ] || { echo "FAIL run"; tail -20 "$OUT/live_multi.err"; failed=$((failed + 1)); }
id=$(sed -n 's/^cubpf: live: kernel id \([0-9]*\) = .*live_vecadd.*/\1/p' "$OUT/live_multi.err" | head -1)
for d in $(seq 0 $(( ${ndev:-1} - 1 ))); do
  want=$(sed -n "s/^expect device $d live_vecadd threads=\([0-9]*\)/\1/p" "$OUT/live_multi.native.out")
  got=$(sed -n "s/^cubpf: map entries\[${id:-x}\] = \([0-9]*\) (device $d)$/\1/p" "$OUT/live_multi.err" | head -1)
  ex=$(sed -n "s/^cubpf: map exits\[${id:-x}\] = \([0-9]*\) (device $d)$/\1/p" "$OUT/live_multi.err" | head -1)
  echo "RESULT live_multi device $d: entries=${got:-none} exits=${ex:-none} expected=${want:-none}"
  if [ -n "$want" ] && [ "${got:-0}" = "$want" ] && [ "${ex:-0}" = "$want" ]; then echo "ok   device $d counted on its own maps"
  else echo "FAIL device $d"; failed=$((failed + 1)); fi
done
# Each bundled tool on the same program: runs to completion with the program's own output, its
# report names every device, and kcount's threads and GPU runs add up over the devices.
CUBPF=$BUILD/bin/cubpf
total=0
for d in $(seq 0 $(( ${ndev:-1} - 1 ))); do
  total=$(( total + $(sed -n "s/^expect device $d live_vecadd threads=\([0-9]*\)/\1/p" "$OUT/live_multi.native.out") ))
done
for t in kcount threadhist launchlate memtrace kernelretsnoop; do
  # the program's stdout to a file of its own: the report is on cubpf run's stdout
  "$CUBPF" run -t "$t" -- sh -c "exec '$APP' > '$OUT/live_multi.$t.app'" \
    >"$OUT/live_multi.$t.out" 2>"$OUT/live_multi.$t.err"; rc=$?
  same=no; cmp -s "$OUT/live_multi.native.out" "$OUT/live_multi.$t.app" && same=yes
  devs=$(grep -c '^device [0-9]*: ' "$OUT/live_multi.$t.out")
  echo "RESULT live_multi tool $t: rc=$rc identical_stdout=$same devices_reported=$devs of ${ndev:-?}"
  if [ "$rc" -ne 0 ] || [ "$same" != yes ] || [ "$devs" -ne "${ndev:-1}" ]; then
    echo "FAIL tool $t"; tail -15 "$OUT/live_multi.$t.err"; cat "$OUT/live_multi.$t.out"; failed=$((failed + 1)); fi
done
line=$(grep '^live_vecadd ' "$OUT/live_multi.kcount.out" | tail -1)
threads=$(echo "$line" | awk '{print $3}'); runs=$(echo "$line" | awk '{print $4}')
echo "RESULT live_multi kcount live_vecadd: threads=${threads:-none} gpu_runs=${runs:-none} expected=$total ${ndev:-?}"
if [ "${threads:-}" = "$total" ] && [ "${runs:-}" = "${ndev:-1}" ]; then echo "ok   kcount adds the devices up"
else echo "FAIL kcount over devices: $line"; failed=$((failed + 1)); fi
# launchlate joins each GPU's starts with that GPU's launches: one sample per launch, and a
# latency of a launch, not of the distance between the GPUs' clocks
ll=$(grep -o 'kernel = live_vecadd  ([0-9]* samples of [0-9]* launches, mean [0-9.]* us' "$OUT/live_multi.launchlate.out")
samples=$(echo "$ll" | awk '{print $4}' | tr -d '('); mean=$(echo "$ll" | awk '{print $10}')
echo "RESULT live_multi launchlate: samples=${samples:-none} of ${ndev:-?} launches, mean ${mean:-none} us"
if [ "${samples:-}" = "${ndev:-1}" ] && awk -v m="${mean:-x}" 'BEGIN { exit !(m + 0 > 0 && m + 0 < 100000) }'; then
  echo "ok   launchlate per GPU"
else echo "FAIL launchlate over devices: $ll"; failed=$((failed + 1)); fi
[ "${ndev:-1}" -ge 2 ] || echo "NOTE live_multi: one GPU here; run on nvidia-h200-x2 for the multi-GPU check"
echo "RESULT live_multi failures=$failed"
[ "$failed" -eq 0 ]
