#!/usr/bin/env bash
# memdelay (issue 32): `cubpf run -t memdelay -n 2000` on tests/cuda/tools_memdelay.cu, whose
# md_stream is memory-bound (its global loads are its time) and md_compute compute-bound (one
# load per thread, then 2^16 dependent multiply-adds).  Every other launch of each kernel runs
# with the delay; the report's slowdown (delayed over native mean device time) must be >= 1.5x
# for md_stream and <= 1.10x for md_compute, with 3 delayed and 3 native launches each, and the
# loads delayed those of md_stream's 3 delayed launches (3 x 2^24).  The program's output must
# be identical to a native run.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$BUILD/bin/cubpf
APP=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_memdelay
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
if [ ! -x "$CUBPF" ] || [ ! -x "$APP" ] || [ ! -e "$BUILD/probes/memdelay.bpf.o" ]; then
  echo "FAIL missing $CUBPF, $APP or $BUILD/probes/memdelay.bpf.o (build them with make)"; exit 1
fi
"$APP" >"$OUT/memdelay.native" 2>/dev/null
"$CUBPF" run -t memdelay -n 2000 -k '*md_*' -- sh -c "exec '$APP' > '$OUT/memdelay.app'" \
  >"$OUT/memdelay.out" 2>"$OUT/memdelay.err"; rc=$?
cmp -s "$OUT/memdelay.native" "$OUT/memdelay.app" && same=yes || same=no
echo "RESULT memdelay run: rc=$rc identical_stdout=$same"; cat "$OUT/memdelay.out"
[ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "rc=$rc or the program's output changed"; tail -20 "$OUT/memdelay.err"; }
row() { awk -v k="$1" '$1 == k' "$OUT/memdelay.out" | head -1; }
set -- $(row md_stream)
echo "RESULT memdelay md_stream: delayed=${3:-none} native=${4:-none} slowdown=${7:-none} loads=${8:-none}"
s=${7%x}
if [ "${3:-}" = 3 ] && [ "${4:-}" = 3 ] && awk -v s="${s:-0}" 'BEGIN { exit !(s >= 1.5) }'; then
  ok "md_stream slowed ${7} by 2 us per load"; else fail "md_stream: $(row md_stream)"; fi
[ "${8:-}" = $((3 * (1 << 24))) ] && ok "md_stream: every load of the delayed launches" || fail "md_stream loads ${8:-none}, expected $((3 * (1 << 24)))"
set -- $(row md_compute)
echo "RESULT memdelay md_compute: delayed=${3:-none} native=${4:-none} slowdown=${7:-none}"
s=${7%x}
if [ "${3:-}" = 3 ] && [ "${4:-}" = 3 ] && awk -v s="${s:-9}" 'BEGIN { exit !(s <= 1.10) }'; then
  ok "md_compute barely slowed (${7})"; else fail "md_compute: $(row md_compute)"; fi
"$CUBPF" run -t memdelay --json -n 2000 -k '*md_*' -- "$APP" >"$OUT/memdelay.json" 2>/dev/null
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]' "$OUT/memdelay.json" \
  && ok "memdelay --json parses" || fail "memdelay --json: $(head -c 300 "$OUT/memdelay.json")"
echo "RESULT memdelay: $failed failed"
[ "$failed" -eq 0 ]
