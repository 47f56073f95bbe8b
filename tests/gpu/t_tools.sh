#!/usr/bin/env bash
# The bundled tools of `cubpf run -t TOOL` on a real GPU, against tests/cuda/tools_known.cu whose
# answers are known in advance (its "expect" lines), then on PyTorch and CuPy scripts.  Every
# program's own stdout must be identical to a native run (it goes to a file of its own: the
# tool's report is on cubpf run's stdout).  RESULT lines show each figure; FAIL lines what is off.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$BUILD/bin/cubpf
APP=$(cd "$BUILD/gpu" 2>/dev/null && pwd)/tools_known
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
if [ ! -x "$CUBPF" ] || [ ! -x "$APP" ] || [ ! -e "$BUILD/probes/kcount.bpf.o" ]; then
  echo "FAIL missing $CUBPF, $APP or $BUILD/probes (build them with make on the build machine)"; exit 1
fi

# tool NAME PART [cubpf run options...]: PART of the app under the tool.  The app's stdout goes to
# $OUT/tools_NAME.app, the report to $OUT/tools_NAME.out, stderr to $OUT/tools_NAME.err.
tool() {
  local name=$1 part=$2; shift 2
  "$CUBPF" run "$@" -o "$OUT/tools_$name.trace" -- sh -c "exec '$APP' $part > '$OUT/tools_$name.app'" \
    >"$OUT/tools_$name.out" 2>"$OUT/tools_$name.err"
  local rc=$?
  "$APP" "$part" >"$OUT/tools_$name.native" 2>/dev/null
  local same=no; cmp -s "$OUT/tools_$name.native" "$OUT/tools_$name.app" && same=yes
  echo "RESULT tools $name: rc=$rc identical_stdout=$same"
  if [ "$rc" -ne 0 ] || [ "$same" != yes ]; then
    fail "$name: rc=$rc or the program's output changed"
    echo "--- native"; cat "$OUT/tools_$name.native"; echo "--- under cubpf"; cat "$OUT/tools_$name.app"
    echo "--- stderr (tail)"; tail -20 "$OUT/tools_$name.err"
  fi
  echo "--- report"; cat "$OUT/tools_$name.out"
}

# threadhist: exactly 128 threads ran 4, 3, 2 and 1 times.
tool threadhist hist -t threadhist -k '*tools_hist*'
r=$OUT/tools_threadhist.out
for c in 4 3 2 1; do
  n=$(awk -v c="$c" 'NF == 2 && $1 == c { print $2; exit }' "$r")
  echo "RESULT tools threadhist executions=$c threads=${n:-none} expected=128"
  [ "${n:-}" = 128 ] || fail "threadhist: threads that ran $c times: ${n:-none}, expected 128"
done
if grep -q 'threads 512 (ids 0..511)  min 1  max 4  mean 2.500' "$r"; then ok "threadhist summary"
else fail "threadhist summary: $(grep -m1 '^threads ' "$r")"; fi

# kernelretsnoop: thread 37 of block 1 spins ~200 us.  Its warp's lanes reconverge before the
# exit (as in the native kernel), so the slow lane shows as warp 1 of block 1 trailing its
# block's first exit by about that much.
tool kernelretsnoop slow -t kernelretsnoop -k '*tools_slow*'
r=$OUT/tools_kernelretsnoop.out
row=$(grep -A1 'LAST_LANE' "$r" | tail -1)
lag=$(echo "$row" | awk '{print $NF}')
echo "RESULT tools kernelretsnoop slowest warp: ${row:-none} exits: $(grep -m1 'thread exits' "$r")"
case "$row" in *"(1,0,0)"*) if [ "$(echo "$row" | awk '{print $3}')" = 1 ] && [ "${lag:-0}" -ge 100000 ]; then
    ok "kernelretsnoop names the slow warp (block 1, warp 1, ${lag} ns behind)"
  else fail "kernelretsnoop: slowest warp row '${row}', expected warp 1 and >= 100000 ns"; fi ;;
  *) fail "kernelretsnoop: slowest warp row '${row:-none}', expected block (1,0,0) warp 1" ;; esac
grep -q '^128 thread exits' "$r" || fail "kernelretsnoop: not 128 exits: $(grep -m1 'thread exits' "$r")"

# kcount: exact launches and threads per kernel, and GPU runs = launches.
tool kcount chain -t kcount
r=$OUT/tools_kcount.out
for spec in "tools_chain_a 5 6400" "tools_chain_b 3 2304"; do
  set -- $spec
  got=$(awk -v k="$1" '$1 == k { print $2, $3, $4; exit }' "$r")
  echo "RESULT tools kcount $1: launches/threads/gpu_runs=${got:-none} expected=$2 $3 $2"
  [ "$got" = "$2 $3 $2" ] || fail "kcount $1: '${got:-none}', expected '$2 $3 $2'"
done

# launchlate: one sample per launch.
tool launchlate chain -t launchlate
r=$OUT/tools_launchlate.out
for spec in "tools_chain_a 5" "tools_chain_b 3"; do
  set -- $spec
  line=$(grep -m1 "^kernel = $1 " "$r")
  echo "RESULT tools launchlate $1: ${line:-none}"
  case "$line" in *"($2 samples of $2 launches"*) ok "launchlate $1: $2 samples" ;;
    *) fail "launchlate $1: expected $2 samples of $2 launches" ;; esac
done

# memtrace: exact bytes per space.
tool memtrace mem -t memtrace -k '*tools_mem*'
r=$OUT/tools_memtrace.out
for spec in "global load" "global store" "shared load" "shared store"; do
  set -- $spec
  b=$(awk -v s="$1" -v o="$2" '$1 == s && $2 == o { print $3; exit }' "$r")
  echo "RESULT tools memtrace $1 $2 bytes=${b:-none} expected=65536"
  [ "${b:-}" = 65536 ] || fail "memtrace $1 $2: ${b:-none} bytes, expected 65536"
done
# coalescing: 512 warps x (one load + one store) of 32 x 4 contiguous bytes = 4 sectors each
sec=$(sed -n 's/.*32-byte sectors touched \([0-9]*\) .*/\1/p' "$r")
echo "RESULT tools memtrace sectors=${sec:-none} expected=4096"
[ "${sec:-}" = 4096 ] || fail "memtrace sectors: ${sec:-none}, expected 4096"

# -p: a user program's maps, bpftool style; --json parses; -i prints views while it runs.
tool prog chain -p "$BUILD/probes/kcount.bpf.o"
n=$(grep -c '^key: ' "$OUT/tools_prog.out")
echo "RESULT tools prog: $(grep -m1 '^Found' "$OUT/tools_prog.out") key_lines=$n"
[ "$n" -ge 2 ] || fail "-p: expected at least 2 non-zero entries of kstats"
tool json chain -t kcount --json
if tail -1 "$OUT/tools_json.out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["final"]; print("RESULT tools json:", [(k["name"], k["launches"]) for k in d["kernels"]])'; then
  ok "--json"; else fail "--json: the last line is not the JSON report"; fi
"$CUBPF" run -t kcount -i 0.5 -- sh -c "'$APP' chain >/dev/null; sleep 2.2" >"$OUT/tools_interval.out" 2>&1
views=$(grep -c ' ---$' "$OUT/tools_interval.out")
echo "RESULT tools interval: views=$views (expected >= 3)"
[ "$views" -ge 3 ] || fail "-i 0.5 over ~2.5 s printed $views views"

# -d stops the program (SIGINT, then SIGTERM); the report still comes.
start=$(date +%s)
"$CUBPF" run -t kcount -d 2 -- sh -c "'$APP' chain >/dev/null; exec sleep 60" >"$OUT/tools_duration.out" 2>&1; rc=$?
took=$(( $(date +%s) - start ))
echo "RESULT tools duration: rc=$rc took=${took}s"
{ [ "$rc" -ne 0 ] && [ "$took" -lt 20 ] && grep -q '^tools_chain_a ' "$OUT/tools_duration.out"; } || fail "-d 2: rc=$rc after ${took}s"
# A failing program: its status comes back and the report is printed.
"$CUBPF" run -t kcount -- sh -c "'$APP' chain >/dev/null; exit 7" >"$OUT/tools_fail.out" 2>&1; rc=$?
echo "RESULT tools failing app: rc=$rc (expected 7)"
{ [ "$rc" -eq 7 ] && grep -q '^tools_chain_a ' "$OUT/tools_fail.out"; } || fail "failing app: rc=$rc or no report"

# Each tool on PyTorch and CuPy: completes, output unchanged, kernels listed.
for app in torch cupy; do
  script=tests/gpu/apps/${app}_app.py
  python3 "$script" >"$OUT/tools_${app}.native" 2>/dev/null || { echo "RESULT tools $app: skipped (no $app here)"; continue; }
  for t in kcount threadhist launchlate memtrace kernelretsnoop; do
    "$CUBPF" run -t "$t" -- sh -c "exec python3 '$script' > '$OUT/tools_${app}_$t.app'" \
      >"$OUT/tools_${app}_$t.out" 2>"$OUT/tools_${app}_$t.err"; rc=$?
    same=no; cmp -s "$OUT/tools_${app}.native" "$OUT/tools_${app}_$t.app" && same=yes
    inst=$(sed -n 's/^kernels instrumented: //p' "$OUT/tools_${app}_$t.out")
    notinst=$(sed -n 's/^kernels launched but not instrumented: //p' "$OUT/tools_${app}_$t.out")
    why=$(grep -m1 '^  - ' "$OUT/tools_${app}_$t.out" | cut -c1-120)
    echo "RESULT tools $app $t: rc=$rc identical_stdout=$same instrumented=${inst:-?} not_instrumented=${notinst:-?} ${why}"
    { [ "$rc" -eq 0 ] && [ "$same" = yes ] && [ -n "$inst" ]; } || {
      fail "$app under $t"; tail -15 "$OUT/tools_${app}_$t.err"; }
  done
  sed -n '/^kernels launched but not instrumented:/,$p' "$OUT/tools_${app}_kcount.out" | head -12
done

echo "RESULT tools: $failed failed"
[ "$failed" -eq 0 ]
