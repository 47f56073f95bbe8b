#!/usr/bin/env bash
# Barrier and fence probes (issue 32, syncprobe) on a real GPU: tests/cuda/tools_sync.cu under
# the shim with tests/ptx/probes/sync.bpf.c, which counts the threads before and after each kind
# of barrier (counts[2*kind], counts[2*kind+1]) and sums the ids they name (counts[32+kind]).
# Known answers (the app's expect line): bar.sync = barriers x threads (a reduction of 64 blocks
# of 256 threads: 9 __syncthreads each, plus named barriers 1 and 2 and a late-warp kernel),
# bar.red and bar.warp.sync once per thread, a fence once per block; before = after for each;
# counts[48] = 0 (no thread's clock ran backwards across a barrier), counts[49] = 0 (ctx->before_ns,
# kept by cubpf in a register, lies between the thread's before and after probes).  The program's stdout must
# be identical to a native run.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/tools_sync
PROBE=$(cd "$BUILD/ptx-probes" 2>/dev/null && pwd)/sync.bpf.o
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
if [ ! -x "$APP" ] || [ ! -e "$PROBE" ]; then
  echo "FAIL missing $APP or $PROBE (build them with make on the build machine)"; exit 1
fi
"$APP" all >"$OUT/sync.native" 2>/dev/null
env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
  CUBPF_PROGRAMS="$PROBE" CUBPF_DUMP_MAPS=1 CUBPF_PERTHREAD_THREADS=16384 \
  "$APP" all >"$OUT/sync.out" 2>"$OUT/sync.err"; rc=$?
same=no; cmp -s "$OUT/sync.native" "$OUT/sync.out" && same=yes
echo "RESULT sync run: rc=$rc identical_stdout=$same"
{ [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "the program failed or its output changed"; tail -20 "$OUT/sync.err"; }
grep -E 'instrumented|fell back|refused' "$OUT/sync.err" | head -5
grep -q 'fell back' "$OUT/sync.err" && ! grep -q ' 0 fell back' "$OUT/sync.err" && fail "a module fell back: $(grep -m1 'fell back' "$OUT/sync.err")"
count() { local v; v=$(sed -n "s/^cubpf: map counts\[$1\] = \([0-9]*\) .*/\1/p" "$OUT/sync.err" | head -1); echo "${v:-0}"; }
want() { sed -n "s/^expect .*\b$1=\([0-9]*\).*/\1/p" "$OUT/sync.native"; }
check() { # NAME KIND EXPECTED
  local b a; b=$(count $((2 * $2))); a=$(count $((2 * $2 + 1)))
  echo "RESULT sync $1: before=$b after=$a expected=${3:-none}"
  if [ -n "$3" ] && [ "$b" = "$3" ] && [ "$a" = "$3" ]; then ok "$1: $3 threads before and after"
  else fail "$1: before $b, after $a, expected ${3:-?}"; fi
}
check bar.sync 1 "$(want bar)"
check bar.red 3 "$(want red)"
check bar.warp.sync 4 "$(want warp)"
check fence 7 "$(want fence)"
ids=$(count 33); back=$(count 48); badbefore=$(count 49)
echo "RESULT sync bar ids: sum=$ids expected=$(want bar_ids) clock_backwards=$back"
[ "$ids" = "$(want bar_ids)" ] && ok "barrier ids (literal and register)" || fail "barrier id sum $ids"
[ "$back" = 0 ] || fail "$back threads saw the clock go backwards across a barrier"
echo "RESULT sync before_ns outside the barrier: $badbefore"
[ "$badbefore" = 0 ] || fail "$badbefore threads got a before_ns outside their barrier"
# syncwait: on sync_late, warp 7 of each of 32 blocks of 256 threads spins ~100 us before the
# __syncthreads the other 7 warps wait at: one site, 8192 threads, a mean wait of tens of us;
# on the reduction, the bar.sync rows of sync_reduce add up to 9 x 64 x 256 threads.
CUBPF=$BUILD/bin/cubpf
APPDIR=$(cd "$BUILD/gpu" && pwd)
for part in late reduce; do
  "$CUBPF" run -t syncwait -k '*sync_*' -o "$OUT/syncwait_$part.trace" -- sh -c "exec '$APPDIR/tools_sync' $part > '$OUT/syncwait_$part.app'" \
    >"$OUT/syncwait_$part.out" 2>"$OUT/syncwait_$part.err"; rc=$?
  "$APP" "$part" >"$OUT/syncwait_$part.native" 2>/dev/null
  cmp -s "$OUT/syncwait_$part.native" "$OUT/syncwait_$part.app" && same=yes || same=no
  echo "RESULT syncwait $part run: rc=$rc identical_stdout=$same"; cat "$OUT/syncwait_$part.out"
  [ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "syncwait $part: rc=$rc or the program's output changed"; tail -20 "$OUT/syncwait_$part.err"; }
done
row=$(awk '$1 == "sync_late" && $3 == "bar.sync"' "$OUT/syncwait_late.out" | head -1)
set -- $row
echo "RESULT syncwait sync_late: threads=${5:-none} mean_ns=${7:-none}"
if [ "${5:-}" = 8192 ] && [ "${7:-0}" -ge 20000 ] 2>/dev/null; then ok "syncwait: the late warp's barrier, 8192 threads, mean ${7} ns"
else fail "syncwait sync_late row: '${row:-none}'"; fi
bar=$(awk '$1 == "sync_reduce" && $3 == "bar.sync" { n += $5 } END { print n + 0 }' "$OUT/syncwait_reduce.out")
echo "RESULT syncwait sync_reduce bar.sync threads=$bar expected=$((9 * 64 * 256))"
[ "$bar" = $((9 * 64 * 256)) ] && ok "syncwait: barriers x threads on the reduction" || fail "syncwait reduce: $bar threads at bar.sync"
"$CUBPF" run -t syncwait --json -k '*sync_*' -- "$APPDIR/tools_sync" late >"$OUT/syncwait.json" 2>/dev/null
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]' "$OUT/syncwait.json" \
  && ok "syncwait --json parses" || fail "syncwait --json: $(head -c 300 "$OUT/syncwait.json")"

echo "RESULT sync: $failed failed"
[ "$failed" -eq 0 ]
