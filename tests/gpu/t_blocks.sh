#!/usr/bin/env bash
# Thread block probes (issue 32, blockprobe/blockretprobe) on a real GPU: tests/cuda/tools_blocks.cu
# under the shim with tests/ptx/probes/block.bpf.c.  Its blocks lose threads in every way a
# kernel can (a third returning at once, whole warps, `exit` in divergent code, all but one
# thread, 3-D grids), and the probe counts:
#   counts[0] blocks begun = counts[1] blocks ended = the blocks launched (the app's expect line);
#   counts[2] = counts[3] = the sum of n(n+1)/2 over launches (every block once, by its index);
#   counts[4] = 0 blocks whose end came before their begin; counts[5] = 0 (ctx->end at begin);
#   counts[6] = 0 ends whose ctx->begin_ns (kept by cubpf) is not a time before their own.
# Twice: with the block's state in the kernel's shared memory (the default: the module declares no
# dynamic shared memory), then in the context's block table (CUBPF_SHARED_SUMS=0;
# ptx-rewriter/layout.h has both).
# The program's stdout must be identical to a native run.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
APP=$BUILD/gpu/tools_blocks
PROBE=$(cd "$BUILD/ptx-probes" 2>/dev/null && pwd)/block.bpf.o
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
if [ ! -x "$APP" ] || [ ! -e "$PROBE" ]; then
  echo "FAIL missing $APP or $PROBE (build them with make on the build machine)"; exit 1
fi
for run in early:1 tail:1 all:1 early:0 tail:0 all:0; do
  part=${run%:*} sums=${run#*:}
  "$APP" "$part" >"$OUT/blocks_$part.native" 2>/dev/null
  [ "$sums" = 0 ] && part="${part}_table"
  env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
    CUBPF_PROGRAMS="$PROBE" CUBPF_DUMP_MAPS=1 CUBPF_SHARED_SUMS="$sums" \
    "$APP" "${run%:*}" >"$OUT/blocks_$part.out" 2>"$OUT/blocks_$part.err"; rc=$?
  same=no; cmp -s "$OUT/blocks_${run%:*}.native" "$OUT/blocks_$part.out" && same=yes
  echo "RESULT blocks $part run: rc=$rc identical_stdout=$same"
  { [ "$rc" -eq 0 ] && [ "$same" = yes ]; } || { fail "$part: the program failed or its output changed"; tail -20 "$OUT/blocks_$part.err"; }
  grep -E 'instrumented|fell back|refused' "$OUT/blocks_$part.err" | head -5
  grep -q 'fell back' "$OUT/blocks_$part.err" && ! grep -q ' 0 fell back' "$OUT/blocks_$part.err" && fail "$part: a module fell back: $(grep -m1 'fell back' "$OUT/blocks_$part.err")"
  # counts[k] from the shim's map dump (an entry not listed is 0)
  count() { local v; v=$(sed -n "s/^cubpf: map counts\[$1\] = \([0-9]*\) .*/\1/p" "$OUT/blocks_$part.err" | head -1); echo "${v:-0}"; }
  want_b=$(sed -n 's/^expect blocks=\([0-9]*\) .*/\1/p' "$OUT/blocks_${run%:*}.native")
  want_s=$(sed -n 's/^expect .* linear_sum=\([0-9]*\).*/\1/p' "$OUT/blocks_${run%:*}.native")
  b0=$(count 0); b1=$(count 1); s2=$(count 2); s3=$(count 3); bad=$(count 4); endflag=$(count 5)
  badbegin=$(count 6)
  echo "RESULT blocks $part: begun=$b0 ended=$b1 expected=${want_b:-none} begin_sum=$s2 end_sum=$s3 expected_sum=${want_s:-none} end_before_begin=$bad end_flag_at_begin=$endflag bad_begin_ns=$badbegin"
  if [ -n "$want_b" ] && [ "$b0" = "$want_b" ] && [ "$b1" = "$want_b" ]; then ok "$part: every block began and ended once ($want_b)"
  else fail "$part: begun $b0, ended $b1, launched ${want_b:-?}"; fi
  if [ -n "$want_s" ] && [ "$s2" = "$want_s" ] && [ "$s3" = "$want_s" ]; then ok "$part: each block by its own index"
  else fail "$part: index sums $s2 / $s3, expected ${want_s:-?}"; fi
  [ "$bad" = 0 ] && [ "$endflag" = 0 ] && [ "$badbegin" = 0 ] || fail "$part: $bad ends before their begin, $endflag begins with ctx->end set, $badbegin bad begin_ns"
  ! grep -q 'found the block table full' "$OUT/blocks_$part.err" || fail "$part: $(grep -m1 'found the block table full' "$OUT/blocks_$part.err")"
done
# blocklat on the tail part: 264 blocks of blk_tail, block 263 doing about 5x the most work of
# any other (40 units against at most 8): the slowest block, and at least 5x the mean.
CUBPF=$BUILD/bin/cubpf
"$CUBPF" run -t blocklat -k '*blk_tail*' -o "$OUT/blocklat.trace" -- sh -c "exec '$(cd "$BUILD/gpu" && pwd)/tools_blocks' tail > '$OUT/blocklat.app'" \
  >"$OUT/blocklat.out" 2>"$OUT/blocklat.err"; rc=$?
cmp -s "$OUT/blocks_tail.native" "$OUT/blocklat.app" && same=yes || same=no
echo "RESULT blocklat run: rc=$rc identical_stdout=$same"; cat "$OUT/blocklat.out"
[ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "blocklat: rc=$rc or the program's output changed"; tail -20 "$OUT/blocklat.err"; }
row=$(grep -m1 '^blk_tail ' "$OUT/blocklat.out")
set -- $row
echo "RESULT blocklat blk_tail: blocks=${2:-none} mean_us=${3:-none} max_us=${5:-none} slowest=${6:-none}"
if [ "${2:-}" = 264 ] && [ "${6:-}" = 263 ] && awk -v m="${3:-0}" -v x="${5:-0}" 'BEGIN { exit !(x >= 4 * m && m > 0) }'; then
  ok "blocklat: 264 blocks, the straggler is block 263"
else fail "blocklat: row '${row:-none}'"; fi
"$CUBPF" run -t blocklat --json -k '*blk_tail*' -- "$(cd "$BUILD/gpu" && pwd)/tools_blocks" tail >"$OUT/blocklat.json" 2>/dev/null
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]' "$OUT/blocklat.json" \
  && ok "blocklat --json parses" || fail "blocklat --json: $(head -c 300 "$OUT/blocklat.json")"

echo "RESULT blocks: $failed failed"
[ "$failed" -eq 0 ]
