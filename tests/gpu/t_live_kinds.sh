#!/usr/bin/env bash
# The device map kinds beyond arrays, end to end on a real GPU: tests/cuda/live_count.cu under
# the shim with tests/live/probes/kinds.bpf.c (every thread entering a live_* kernel adds 1 to
# a per-SM counter and to its own per-thread copy, and inserts its block index into an 8-entry
# hash map).  The shim allocates the three kinds, reads them back at exit (CUBPF_DUMP_MAPS=1):
#   per_sm:     the SM copies sum to every thread entry (live_vecadd + 3 launches of
#               live_stride), spread over several SMs;
#   per_thread: one copy per thread id that ran (live_vecadd's 10240 ids cover live_stride's);
#   by_key:     full (8 of the 40 block indexes; the rest do not fit).
# The program's stdout must be identical to a native run.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/live_count
PROBE=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)/kinds.bpf.o
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
if [ ! -x "$APP" ] || [ ! -e "$PROBE" ]; then
  echo "FAIL missing $APP or $PROBE (build them with make on the build machine)"; exit 1
fi
"$APP" >"$OUT/kinds_native.out" 2>/dev/null
env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
  CUBPF_PROGRAMS="$PROBE" CUBPF_DUMP_MAPS=1 CUBPF_PERTHREAD_THREADS=16384 \
  "$APP" >"$OUT/kinds.out" 2>"$OUT/kinds.err"; rc=$?
same=no; cmp -s "$OUT/kinds_native.out" "$OUT/kinds.out" && same=yes
echo "RESULT live_kinds run: rc=$rc identical_stdout=$same"
{ [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "the program failed or its output changed"; tail -20 "$OUT/kinds.err"; }
grep -E '^cubpf: (map|live: maps)' "$OUT/kinds.err" | grep -v '^cubpf: map per_thread\[' | head -20
expected() { sed -n "s/^expect $1 threads=\([0-9]*\).*/\1/p" "$OUT/kinds_native.out"; }
vec=$(expected live_vecadd); str=$(expected live_stride)
want=$(( ${vec:-0} + ${str:-0} ))
sm=$(sed -n 's/^cubpf: map per_sm\[1\] = \([0-9]*\) (device 0; \([0-9]*\) SMs.*/\1 \2/p' "$OUT/kinds.err")
set -- $sm
echo "RESULT live_kinds per_sm: sum=${1:-none} sms=${2:-none} expected_sum=$want"
if [ "${1:-0}" = "$want" ] && [ "${2:-0}" -gt 1 ]; then ok "per-SM copies sum to every entry ($want) over $2 SMs"
else fail "per_sm: ${sm:-no line}"; fi
nz=$(sed -n 's/^cubpf: map per_thread: .* \([0-9]*\) non-zero copies.*/\1/p' "$OUT/kinds.err")
echo "RESULT live_kinds per_thread: non_zero_copies=${nz:-none} expected=${vec:-none}"
[ -n "$vec" ] && [ "${nz:-0}" = "$vec" ] && ok "per-thread copies: one per thread id" || fail "per_thread: ${nz:-none}"
inuse=$(sed -n 's/^cubpf: map by_key: .* \([0-9]*\) in use.*/\1/p' "$OUT/kinds.err")
echo "RESULT live_kinds by_key: in_use=${inuse:-none} expected=8"
[ "${inuse:-0}" = 8 ] && ok "hash map full with 8 distinct block indexes" || fail "by_key: ${inuse:-none} in use"
grep -q 'fell back' "$OUT/kinds.err" && ! grep -q ' 0 fell back' "$OUT/kinds.err" && fail "a module fell back: $(grep -m1 'fell back' "$OUT/kinds.err")"
echo "RESULT live_kinds: $failed failed"
[ "$failed" -eq 0 ]
