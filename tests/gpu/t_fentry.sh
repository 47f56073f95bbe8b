#!/usr/bin/env bash
# Device function probes (issue 32, fentry/fexit) on a real GPU: tests/cuda/tools_fentry.cu under
# the shim with tests/ptx/probes/func.bpf.c.  fe_kernel's threads call the __noinline__ fe_mix a
# known number of times with known arguments; the probe counts (fcounts[k], from the shim's map
# dump):
#   [0] entries = [1] returns = calls x threads (the app's expect line: calls=N);
#   [2] = [4] = the sum of params[0] (at entry, at return) = sum0; [3] = the sum of params[1]
#   (a 64-bit argument, values above 2^32) = sum1;
#   [5] = 0 probes that saw CUBPF_KERNEL_ID_SHARED (one kernel calls fe_mix);
#   [6] = 0 probes whose ctx->exit was wrong; [7] = ctx->func_id = FNV-1a of "_Z6fe_mixjy";
#   [8] = the sum of fexit's ctx->retval = the sum of fe_mix's results (sumret), [9] = returns
#   with ctx->has_retval = calls, [10] = 0 entries with has_retval or retval set.
# The program's stdout must be identical to a native run.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/tools_fentry
PROBE=$(cd "$BUILD/ptx-probes" 2>/dev/null && pwd)/func.bpf.o
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
if [ ! -x "$APP" ] || [ ! -e "$PROBE" ]; then
  echo "FAIL missing $APP or $PROBE (build them with make on the build machine)"; exit 1
fi
"$APP" >"$OUT/fentry.native" 2>/dev/null
env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
  CUBPF_PROGRAMS="$PROBE" CUBPF_DUMP_MAPS=1 CUBPF_CACHE=off \
  "$APP" >"$OUT/fentry.out" 2>"$OUT/fentry.err"; rc=$?
same=no; cmp -s "$OUT/fentry.native" "$OUT/fentry.out" && same=yes
echo "RESULT fentry run: rc=$rc identical_stdout=$same"
{ [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "the program failed or its output changed"; tail -20 "$OUT/fentry.err"; }
grep -E 'instrumented|fell back|refused' "$OUT/fentry.err" | head -5
grep -q 'fell back' "$OUT/fentry.err" && ! grep -q ' 0 fell back' "$OUT/fentry.err" && fail "a module fell back: $(grep -m1 'fell back' "$OUT/fentry.err")"
count() { local v; v=$(sed -n "s/^cubpf: map fcounts\[$1\] = \([0-9]*\) .*/\1/p" "$OUT/fentry.err" | head -1); echo "${v:-0}"; }
want_n=$(sed -n 's/^expect calls=\([0-9]*\) .*/\1/p' "$OUT/fentry.native")
want_s0=$(sed -n 's/^expect .* sum0=\([0-9]*\).*/\1/p' "$OUT/fentry.native")
want_s1=$(sed -n 's/^expect .* sum1=\([0-9]*\).*/\1/p' "$OUT/fentry.native")
want_sr=$(sed -n 's/^expect .* sumret=\([0-9]*\).*/\1/p' "$OUT/fentry.native")
want_id=$(python3 -c 'h=2166136261
for c in b"_Z6fe_mixjy": h=((h^c)*16777619)&0xffffffff
print(h)')
n0=$(count 0); n1=$(count 1); s0=$(count 2); s1=$(count 3); s0x=$(count 4); shared=$(count 5)
badexit=$(count 6); fid=$(count 7)
echo "RESULT fentry: entries=$n0 returns=$n1 expected=${want_n:-none} sum0=$s0 sum0_at_exit=$s0x expected_sum0=${want_s0:-none} sum1=$s1 expected_sum1=${want_s1:-none} shared_id=$shared bad_exit_flag=$badexit func_id=$fid expected_func_id=$want_id"
if [ -n "$want_n" ] && [ "$n0" = "$want_n" ] && [ "$n1" = "$want_n" ]; then ok "every call entered and returned once ($want_n)"
else fail "entries $n0, returns $n1, calls ${want_n:-?}"; fi
if [ -n "$want_s0" ] && [ "$s0" = "$want_s0" ] && [ "$s0x" = "$want_s0" ] && [ "$s1" = "$want_s1" ]; then ok "arguments read exactly (32- and 64-bit, at entry and return)"
else fail "argument sums $s0 / $s0x / $s1, expected ${want_s0:-?} / ${want_s0:-?} / ${want_s1:-?}"; fi
[ "$shared" = 0 ] && [ "$badexit" = 0 ] && [ "$fid" = "$want_id" ] || fail "kernel id shared $shared times, ctx->exit wrong $badexit times, func_id $fid (want $want_id)"
sr=$(count 8); nr=$(count 9); entret=$(count 10)
echo "RESULT fentry retval: sum=$sr expected=${want_sr:-none} returns_with_value=$nr entries_with_value=$entret"
if [ -n "$want_sr" ] && [ "$sr" = "$want_sr" ] && [ "$nr" = "$want_n" ] && [ "$entret" = 0 ]; then ok "fexit's ctx->retval: every return's value, summed exactly"
else fail "retval sum $sr (want ${want_sr:-?}), $nr returns with a value (want ${want_n:-?}), $entret entries with one (want 0)"; fi
echo "RESULT fentry: $failed failed"
[ "$failed" -eq 0 ]
