#!/usr/bin/env bash
# Live probes on a real GPU: tests/cuda/live_count.cu under the shim with a counting probe
# (tests/live/probes/count.bpf.c: entries and exits per kernel id, entries per thread of
# live_vecadd).  The counts the shim reads back at exit (CUBPF_DUMP_MAPS=1) must equal the thread
# counts the program is built with, and its stdout must be identical to a native run.  Then:
#   -k (CUBPF_KERNELS) leaves the other kernel alone; a map over the cap (CUBPF_MAP_MAX_MB=1)
#   falls back to the original module with a warning; the trace (CUBPF_TRACE) holds the maps
#   (cubpf trace dump); PyTorch under the probe runs unchanged and its kernels are listed as
#   not instrumentable (no PTX).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/live_count
PROBE=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)/count.bpf.o
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }

if [ ! -x "$APP" ] || [ ! -e "$PROBE" ]; then
  echo "FAIL missing $APP or $PROBE (build them with make on the build machine)"; exit 1
fi

# under NAME ENV...: runs the app under the shim with the probe and ENV; stdout/stderr to $OUT.
under() {
  local name=$1; shift
  env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
    CUBPF_PROGRAMS="$PROBE" "$@" "$APP" >"$OUT/live_$name.out" 2>"$OUT/live_$name.err"
}

# id_of ERRFILE NAME: the kernel id the shim gave the kernel whose mangled name contains NAME.
id_of() { sed -n "s/^cubpf: live: kernel id \([0-9]*\) = .*$2.*/\1/p" "$1" | head -1; }
# map_value ERRFILE MAP KEY
map_value() { sed -n "s/^cubpf: map $2\[$3\] = \([0-9]*\) .*/\1/p" "$1" | head -1; }
# expected KERNEL: the thread count the program prints for KERNEL
expected() { sed -n "s/^expect $1 threads=\([0-9]*\).*/\1/p" "$OUT/live_native.out"; }

"$APP" >"$OUT/live_native.out" 2>"$OUT/live_native.err"; rc_native=$?
under count CUBPF_DUMP_MAPS=1 CUBPF_TRACE="$OUT/live_count.trace"; rc=$?
same=no; cmp -s "$OUT/live_native.out" "$OUT/live_count.out" && same=yes
echo "RESULT live_count run: native_rc=$rc_native shim_rc=$rc identical_stdout=$same"
[ "$rc_native" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$same" = yes ] || {
  fail "the program's output changed or it failed under the probe"
  echo "--- native"; cat "$OUT/live_native.out"; echo "--- under the probe"; cat "$OUT/live_count.out"
  echo "--- shim log (tail)"; tail -30 "$OUT/live_count.err"; }
cat "$OUT/live_count.out"
grep -E '^cubpf: live: ' "$OUT/live_count.err" | head -12

err=$OUT/live_count.err
for k in live_vecadd live_stride; do
  id=$(id_of "$err" "$k"); want=$(expected "$k")
  ent=$(map_value "$err" entries "${id:-x}"); ex=$(map_value "$err" exits "${id:-x}")
  echo "RESULT live_count $k: kernel_id=${id:-none} entries=${ent:-none} exits=${ex:-none} expected=${want:-none}"
  if [ -n "$id" ] && [ -n "$want" ] && [ "${ent:-0}" = "$want" ] && [ "${ex:-0}" = "$want" ]; then
    ok "$k: every thread entered and left once per launch ($want)"
  else fail "$k: entries/exits differ from the thread count"; fi
done

# per_thread: one slot per thread of live_vecadd, each exactly 1 (non-zero count and sum).
hdr=$(grep '^cubpf: map per_thread: ' "$err" | head -1)
nz=$(echo "$hdr" | sed -n 's/.* \([0-9]*\) non-zero.*/\1/p'); sum=$(echo "$hdr" | sed -n 's/.*, sum \([0-9]*\),.*/\1/p')
want=$(expected live_vecadd)
echo "RESULT live_count per_thread: non_zero=${nz:-none} sum=${sum:-none} expected=${want:-none}"
if [ -n "$want" ] && [ "${nz:-0}" = "$want" ] && [ "${sum:-0}" = "$want" ]; then ok "per-thread slots: $want threads, once each"
else fail "per-thread counts: $hdr"; fi
if grep -q 'fell back\|not instrumented, the original module runs' "$err" && ! grep -q ' 0 fell back' "$err"; then
  fail "a module fell back to the original: $(grep -m1 'original module runs' "$err")"; fi
mem=$(sed -n 's/^cubpf: live: maps on device \([0-9]*\) (context [^)]*): \([0-9]*\) device bytes.*/device \1: \2 bytes/p' "$err" | head -1)
echo "RESULT live_count memory: ${mem:-none shown}"
clk=$(grep -m1 '^cubpf: live: clock device' "$err")
unc=$(echo "$clk" | sed -n 's/.*(+\/- \([0-9]*\) ns).*/\1/p')
echo "RESULT live_count clock: ${clk#cubpf: live: }"
if [ -n "$unc" ] && [ "$unc" -lt 1000000 ]; then ok "clock calibrated within ${unc} ns"; else fail "no clock calibration (or worse than 1 ms)"; fi

# The trace holds the maps.
if [ -x "$BUILD/bin/cubpf" ] && [ -s "$OUT/live_count.trace" ]; then
  "$BUILD/bin/cubpf" trace dump "$OUT/live_count.trace" >"$OUT/live_count.trace.txt" 2>&1; trc=$?
  maps=$(grep -ci 'map' "$OUT/live_count.trace.txt"); clocks=$(grep -ci 'clock' "$OUT/live_count.trace.txt")
  kernels=$(grep -ci 'kernel' "$OUT/live_count.trace.txt")
  echo "RESULT live_count trace: dump_rc=$trc lines_naming_maps=$maps clock_lines=$clocks kernel_lines=$kernels bytes=$(stat -c %s "$OUT/live_count.trace")"
  grep -i 'map\|clock' "$OUT/live_count.trace.txt" | head -6
  [ "$trc" -eq 0 ] && [ "$maps" -gt 0 ] && ok "trace: maps readable with cubpf trace dump" || fail "trace dump"
else fail "no trace written ($OUT/live_count.trace)"; fi

# -k: only live_stride is instrumented.
under glob CUBPF_DUMP_MAPS=1 CUBPF_KERNELS='live_stride*'; rc=$?
id=$(id_of "$OUT/live_glob.err" live_stride); ent=$(map_value "$OUT/live_glob.err" entries "${id:-x}")
other=$(id_of "$OUT/live_glob.err" live_vecadd)
vent=$(map_value "$OUT/live_glob.err" entries "${other:-x}")
echo "RESULT live_count glob: rc=$rc live_stride_entries=${ent:-none} live_vecadd_entries=${vent:-none}"
if [ "$rc" -eq 0 ] && cmp -s "$OUT/live_native.out" "$OUT/live_glob.out" && [ "${ent:-0}" = "$(expected live_stride)" ] && [ -z "$vent" ]; then
  ok "CUBPF_KERNELS selects live_stride only"; else fail "CUBPF_KERNELS"; fi

# Fallback: maps over the cap -> the object refused when it loads (or, for maps of several
# objects that fit alone, the original module at load), one warning, same output.
under cap CUBPF_MAP_MAX_MB=1; rc=$?
warn=$(grep -c 'probe object refused, the application runs without it: .*CUBPF_MAP_MAX_MB\|not instrumented, the original module runs: .*CUBPF_MAP_MAX_MB' "$OUT/live_cap.err")
echo "RESULT live_count fallback: rc=$rc warnings=$warn"
if [ "$rc" -eq 0 ] && cmp -s "$OUT/live_native.out" "$OUT/live_cap.out" && [ "$warn" -ge 1 ]; then
  ok "a refused map falls back to the original module"; else fail "fallback"; tail -5 "$OUT/live_cap.err"; fi

# PyTorch ships SASS only: it must run unchanged, its kernels listed as not instrumentable.
PY=${PYTHON:-python3}
if "$PY" tests/gpu/apps/torch_app.py >"$OUT/live_torch.native.out" 2>"$OUT/live_torch.native.err"; then
  env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info CUBPF_PROGRAMS="$PROBE" \
    "$PY" tests/gpu/apps/torch_app.py >"$OUT/live_torch.out" 2>"$OUT/live_torch.err"; rc=$?
  nopt=$(grep -c 'not instrumentable: no PTX' "$OUT/live_torch.err")
  summary=$(grep -m1 '^cubpf: live: [0-9]* modules instrumented' "$OUT/live_torch.err")
  echo "RESULT live_count torch: rc=$rc modules_without_ptx_lines=$nopt"
  echo "    $summary"
  if [ "$rc" -eq 0 ] && cmp -s "$OUT/live_torch.native.out" "$OUT/live_torch.out" && [ "$nopt" -ge 1 ]; then
    ok "PyTorch runs unchanged; kernels without PTX are listed"; else fail "PyTorch under the probe"; tail -8 "$OUT/live_torch.err"; fi
else echo "SKIP torch: PyTorch does not run here"; fi

echo "RESULT live_count failures=$failed"
[ "$failed" -eq 0 ]
