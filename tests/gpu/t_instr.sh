#!/usr/bin/env bash
# Instruction counts (issue 32: bbprobe, ctx->insns/warp_insns, instrcount, opcodehist,
# hotblocks) on a real GPU, against counts computed from the PTX: tests/cuda/tools_instr.cu's
# kernels (64 blocks of 256 threads) and build/gpu/tools_instr.ptx, nvcc's PTX of the same file,
# which tests/gpu/instr_expect.py reads with its own parser (not cubpf's block splitter):
#   instr_straight  every thread issues every instruction once;
#   instr_loop      a do-while run ITERS (100) times by every thread;
#   instr_diverge   a branch 8 lanes of each warp take.
# Checks: the attach points' own counts under the shim (bbprobe, bbretprobe, ctx->insns and
# warp_insns with the probes of tests/ptx/probes) equal the sums over the three kernels;
# instrcount's per-thread counts equal the expected ones exactly, and its per-warp counts
# too (instr_diverge: between every instruction once per warp and the join's block once more);
# opcodehist's classes add up to instrcount's counts, global loads and stores = their count in
# the PTX x threads; hotblocks' hottest block of instr_loop is the loop (ITERS x threads entries,
# its instruction count, the PTX line of its first instruction); -k keeps one kernel; --json
# parses; the program's output is identical to a native run's under every tool.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$BUILD/bin/cubpf
APP=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_instr
PTX=$BUILD/gpu/tools_instr.ptx
HERE=$(cd "$(dirname "$0")" && pwd)
ITERS=100
THREADS=$((64 * 256))
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
for f in "$APP" "$PTX" "$CUBPF" "$BUILD/probes/instrcount.bpf.o"; do
  [ -e "$f" ] || { echo "FAIL missing $f (build it with make on the build machine)"; exit 1; }
done
python3 "$HERE/instr_expect.py" "$PTX" "$THREADS" "$ITERS" >"$OUT/instr.expect" || { fail "expected counts"; exit 1; }
cat "$OUT/instr.expect"
"$APP" "$ITERS" >"$OUT/instr.native" 2>&1 || fail "native run"

# run TOOL [ARGS]: the tool's --json report in $OUT/instr_TOOL.json, the program's output compared
run() {
  local tool=$1; shift
  "$CUBPF" run -t "$tool" --json "$@" -- sh -c "exec '$APP' $ITERS > '$OUT/instr_$tool.app'" \
    >"$OUT/instr_$tool.json" 2>"$OUT/instr_$tool.err"; local rc=$? same=no
  cmp -s "$OUT/instr.native" "$OUT/instr_$tool.app" && same=yes
  echo "RESULT instr $tool run: rc=$rc identical_stdout=$same"
  { [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "$tool: rc=$rc or the program's output changed"; tail -20 "$OUT/instr_$tool.err"; }
  python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]' \
    "$OUT/instr_$tool.json" || fail "$tool --json does not parse: $(head -c 300 "$OUT/instr_$tool.json")"
}
# EXPR over the report's last JSON object (the one at exit), as d.
jq_py() { python3 - "$@" <<'PY'
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith('{')][-1]
print(eval(sys.argv[2], {'d': d}))
PY
}

# The attach points themselves, under the shim with the test probes of tests/ptx/probes (their
# maps dumped at exit): bb.bpf.o (bbprobe: counts[0] the threads' instructions, a warp-aggregated
# add of ctx->insn_count at each block entry; counts[1] the warps', by the lowest lane),
# bbret.bpf.o (bbretprobe: counts[16] = entries x instructions), icount.bpf.o (kretprobe:
# counts[0] ctx->insns, counts[1] ctx->warp_insns summed per warp, counts[3] what the kprobe saw:
# 0).  Totals over the three kernels.
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
PROBES=$(cd "$BUILD/ptx-probes" 2>/dev/null && pwd)
read -r T WMIN WMAX < <(awk '{ t += $2; a += $3; b += $4 } END { print t, a, b }' "$OUT/instr.expect")
probe_run() { # NAME
  env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
    CUBPF_PROGRAMS="$PROBES/$1.bpf.o" CUBPF_DUMP_MAPS=1 "$APP" "$ITERS" >"$OUT/instr_$1.app" 2>"$OUT/instr_$1.err"
  local rc=$? same=no
  cmp -s "$OUT/instr.native" "$OUT/instr_$1.app" && same=yes
  echo "RESULT instr probe $1: rc=$rc identical_stdout=$same"
  { [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "$1: rc=$rc or the program's output changed"; tail -20 "$OUT/instr_$1.err"; }
}
count() { local v; v=$(sed -n "s/^cubpf: map counts\[$2\] = \([0-9]*\) .*/\1/p" "$OUT/instr_$1.err" | head -1); echo "${v:-0}"; }
between() { [ -n "$1" ] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
probe_run bb
echo "RESULT instr bbprobe: threads=$(count bb 0) warps=$(count bb 1) expected threads=$T warps=$WMIN..$WMAX"
[ "$(count bb 0)" = "$T" ] && ok "bbprobe: $T thread instructions" || fail "bbprobe threads $(count bb 0) != $T"
between "$(count bb 1)" "$WMIN" "$WMAX" && ok "bbprobe: warp instructions" || fail "bbprobe warps $(count bb 1) not in $WMIN..$WMAX"
probe_run bbret
echo "RESULT instr bbretprobe: threads=$(count bbret 16) expected $T"
[ "$(count bbret 16)" = "$T" ] && ok "bbretprobe: $T thread instructions" || fail "bbretprobe $(count bbret 16) != $T"
probe_run icount
echo "RESULT instr ctx->insns: threads=$(count icount 0) warps=$(count icount 1) kprobe=$(count icount 3) exits=$(count icount 2)"
[ "$(count icount 0)" = "$T" ] && ok "ctx->insns: $T" || fail "ctx->insns $(count icount 0) != $T"
between "$(count icount 1)" "$WMIN" "$WMAX" && ok "ctx->warp_insns" || fail "ctx->warp_insns $(count icount 1) not in $WMIN..$WMAX"
[ "$(count icount 3)" = 0 ] && [ "$(count icount 2)" = $((3 * THREADS)) ] && ok "kprobe sees 0; every thread left once" \
  || fail "kprobe saw counts $(count icount 3) times, $(count icount 2) exits (expected 0, $((3 * THREADS)))"

run instrcount
while read -r name thr wmin wmax loopn loopline ldg stg; do
  got=$(jq_py "$OUT/instr_instrcount.json" "[(k['thread_insns'], k['warp_insns']) for k in d['kernels'] if k['name'] == '$name']")
  echo "RESULT instr instrcount $name: got (threads, warps) $got expected threads=$thr warps=$wmin..$wmax"
  t=$(echo "$got" | sed -n 's/^\[(\([0-9]*\), \([0-9]*\))\]$/\1/p'); w=$(echo "$got" | sed -n 's/^\[(\([0-9]*\), \([0-9]*\))\]$/\2/p')
  if [ "$t" = "$thr" ]; then ok "instrcount $name: $t thread instructions"; else fail "instrcount $name threads: ${t:-none} != $thr"; fi
  if [ -n "$w" ] && [ "$w" -ge "$wmin" ] && [ "$w" -le "$wmax" ]; then ok "instrcount $name: $w warp instructions"
  else fail "instrcount $name warps: ${w:-none} not in $wmin..$wmax"; fi
done <"$OUT/instr.expect"

run instrcount -k '*instr_loop*'
n=$(jq_py "$OUT/instr_instrcount.json" "len(d['kernels'])")
[ "$n" = 1 ] && ok "instrcount -k: one kernel" || fail "instrcount -k '*instr_loop*': $n kernels"

run opcodehist
while read -r name thr wmin wmax loopn loopline ldg stg; do
  got=$(jq_py "$OUT/instr_opcodehist.json" "[(k['thread_insns'], sum(c['threads'] for c in k['classes'].values()), k['classes'].get('ld.global', {}).get('threads', 0), k['classes'].get('st.global', {}).get('threads', 0)) for k in d['kernels'] if k['name'] == '$name']")
  echo "RESULT instr opcodehist $name: (total, classes, ld.global, st.global) $got"
  if [ "$name" = "${name%instr_diverge*}" ]; then want="[($thr, $thr, $((ldg * THREADS)), $((stg * THREADS)))]"
  else want="[($thr, $thr, $((ldg * THREADS / 4)), $((stg * THREADS / 4)))]"; fi
  [ "$got" = "$want" ] && ok "opcodehist $name" || fail "opcodehist $name: $got != $want"
done <"$OUT/instr.expect"

run hotblocks
read -r name thr wmin wmax loopn loopline ldg stg < <(grep instr_loop "$OUT/instr.expect")
got=$(jq_py "$OUT/instr_hotblocks.json" "[(b['thread_entries'], b['insns'], b['ptx_line']) for b in d['blocks'] if b['kernel'] == '$name'][0]")
want="($((ITERS * THREADS)), $loopn, $loopline)"
echo "RESULT instr hotblocks $name hottest (entries, insns, ptx_line): $got expected $want"
[ "$got" = "$want" ] && ok "hotblocks: the loop is instr_loop's hottest block" || fail "hotblocks $name: $got != $want"
tot=$(jq_py "$OUT/instr_hotblocks.json" "sum(b['thread_insns'] for b in d['blocks'] if b['kernel'] == '$name')")
[ "$tot" = "$thr" ] && ok "hotblocks $name: blocks add up to $thr" || fail "hotblocks $name: blocks add up to $tot, not $thr"
"$CUBPF" run -t hotblocks -- "$APP" "$ITERS" >"$OUT/instr_hotblocks.txt" 2>&1 && sed -n '1,12p' "$OUT/instr_hotblocks.txt"

echo "RESULT instr: $failed failed"
[ "$failed" -eq 0 ]
