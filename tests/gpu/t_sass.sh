#!/usr/bin/env bash
# The Sanitizer backend (issue 29, experimental) on a real GPU: kernels built SASS only
# (nvcc -gencode arch=compute_90,code=sm_90: no PTX, so cubpf can reach them only by patching)
# and cuBLAS's SGEMM (SASS only as shipped), under `--sanitizer` / CUBPF_SANITIZER=auto.
# Needs libsanitizer-public.so (the toolkit's compute-sanitizer folder here) and ptxas.
#   1. count.bpf.o (entries/exits per kernel id) on sass_count: entries = exits = the thread
#      counts the program prints, stdout identical to native, the log names the backend.
#   2. the bundled tools on sass_tools_known with their known answers (as t_tools.sh on the
#      PTX build): threadhist 128 threads x 4/3/2/1 runs, kcount launches/threads, memtrace
#      bytes per space (global and shared, loads and stores: 65536 each).
#   3. kcount, threadhist, memtrace on cublasSgemm 1024: output identical to native; kcount's
#      threads = grid x block of the patched launches (the backend's own count, from the
#      launch callback); memtrace sees global stores = 4 N^2 bytes of C and cp.async loads.
#   4. off by default: without --sanitizer the library is not loaded (no "sanitizer" in the log,
#      not in /proc/PID/maps) and SASS-only kernels are listed as not instrumentable.
# RESULT lines carry the figures, FAIL lines what is off.  Written without GPU access
# (2026-11-28): the first run on a GPU is its first test.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$BUILD/bin/cubpf
# each run may take SASS_TIMEOUT seconds (40): a hang (seen on a two-stream program, 2026-11-28)
# fails that run, not the whole device call
TO="timeout -s KILL ${SASS_TIMEOUT:-40}"
G=$(cd "$BUILD/gpu" 2>/dev/null && pwd)
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
PROBE=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)/count.bpf.o
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
ok() { echo "ok   $*"; }
for f in "$CUBPF" "$G/sass_count" "$G/sass_tools_known" "$G/sass_gemm" "$PROBE"; do
  [ -e "$f" ] || { echo "FAIL missing $f (build it with make on the build machine)"; exit 1; }
done
echo "t_sass: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
lib=$(ls "${CUDA_HOME:-/usr/local/cuda}"/compute-sanitizer/libsanitizer-public.so 2>/dev/null)
echo "RESULT sass library: ${lib:-none}"

# 1. count.bpf.o through the shim directly
"$G/sass_count" >"$OUT/sass_native.out" 2>&1
$TO env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info \
  CUBPF_PROGRAMS="$PROBE" CUBPF_DUMP_MAPS=1 CUBPF_SANITIZER=auto \
  "$G/sass_count" >"$OUT/sass_count.out" 2>"$OUT/sass_count.err"; rc=$?
same=no; cmp -s "$OUT/sass_native.out" "$OUT/sass_count.out" && same=yes
echo "RESULT sass count run: rc=$rc identical_stdout=$same"
[ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "sass_count: rc=$rc or output changed"; tail -20 "$OUT/sass_count.err"; }
grep -E '^cubpf: live: (sanitizer|backend sanitizer)' "$OUT/sass_count.err"
for k in live_vecadd live_stride; do
  want=$(sed -n "s/^expect $k threads=\([0-9]*\).*/\1/p" "$OUT/sass_native.out")
  id=$(sed -n "s/^cubpf: live: backend sanitizer: kernel id \([0-9]*\) = .*$k.*/\1/p" "$OUT/sass_count.err" | head -1)
  ent=$(sed -n "s/^cubpf: map entries\[${id:-x}\] = \([0-9]*\) .*/\1/p" "$OUT/sass_count.err" | head -1)
  ex=$(sed -n "s/^cubpf: map exits\[${id:-x}\] = \([0-9]*\) .*/\1/p" "$OUT/sass_count.err" | head -1)
  echo "RESULT sass count $k: backend=sanitizer kernel_id=${id:-none} entries=${ent:-none} exits=${ex:-none} expected=${want:-none}"
  [ -n "$id" ] && [ "${ent:-0}" = "$want" ] && [ "${ex:-0}" = "$want" ] && ok "$k: exact through the Sanitizer" \
    || fail "$k: entries/exits differ from the thread count (or not patched)"
done

# tool NAME APP ARGS -- cubpf options: the app under the tool with --sanitizer; stdout compared.
tool() {
  local name=$1 app=$2 args=$3; shift 3
  $TO "$CUBPF" run --sanitizer -l info "$@" -- sh -c "exec '$app' $args > '$OUT/sass_$name.app'" \
    >"$OUT/sass_$name.out" 2>"$OUT/sass_$name.err"
  local rc=$?
  "$app" $args >"$OUT/sass_$name.native" 2>/dev/null
  local same=no; cmp -s "$OUT/sass_$name.native" "$OUT/sass_$name.app" && same=yes
  local n; n=$(cat "$OUT/sass_$name.out" "$OUT/sass_$name.err" | grep -c 'backend sanitizer: kernel id')
  echo "RESULT sass $name: rc=$rc identical_stdout=$same kernels_patched=$n"
  [ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "$name: rc=$rc or the program's output changed"; tail -20 "$OUT/sass_$name.err"; }
  [ "$n" -ge 1 ] || fail "$name: no kernel went through the Sanitizer backend"
  cat "$OUT/sass_$name.out" "$OUT/sass_$name.err" | grep 'backend sanitizer' | head -5
  echo "--- report"; head -40 "$OUT/sass_$name.out"
}

# 2. known answers
tool threadhist "$G/sass_tools_known" hist -t threadhist -k '*tools_hist*'
for c in 4 3 2 1; do
  n=$(awk -v c="$c" 'NF == 2 && $1 == c { print $2; exit }' "$OUT/sass_threadhist.out")
  echo "RESULT sass threadhist executions=$c threads=${n:-none} expected=128"
  [ "${n:-}" = 128 ] || fail "threadhist: threads that ran $c times: ${n:-none}, expected 128"
done
tool kcount "$G/sass_tools_known" chain -t kcount
for spec in "tools_chain_a 5 6400" "tools_chain_b 3 2304"; do
  set -- $spec
  got=$(awk -v k="$1" '$1 == k { print $2, $3, $4; exit }' "$OUT/sass_kcount.out")
  echo "RESULT sass kcount $1: launches/threads/gpu_runs=${got:-none} expected=$2 $3 $2"
  [ "$got" = "$2 $3 $2" ] || fail "kcount $1: '${got:-none}', expected '$2 $3 $2'"
done
tool memtrace "$G/sass_tools_known" mem -t memtrace -k '*tools_mem*'
for spec in "global load" "global store" "shared load" "shared store"; do
  set -- $spec
  b=$(awk -v s="$1" -v o="$2" '$1 == s && $2 == o { print $3; exit }' "$OUT/sass_memtrace.out")
  echo "RESULT sass memtrace $1 $2 bytes=${b:-none} expected=65536"
  [ "${b:-}" = 65536 ] || fail "memtrace $1 $2: ${b:-none} bytes, expected 65536"
done

# 3. cuBLAS SGEMM 1024
tool gemm_kcount "$G/sass_gemm" 1024 -t kcount
thr=$(cat "$OUT/sass_gemm_kcount.out" "$OUT/sass_gemm_kcount.err" | sed -n 's/.*backend sanitizer: kernel id [0-9]* = \(.*gemm[^:]*\): \([0-9]*\) launches patched (\([0-9]*\) threads).*/\1 \2 \3/p' | head -1)
echo "RESULT sass gemm kcount: kernel/launches/threads(grid x block)=${thr:-none}"
if [ -n "$thr" ]; then
  set -- $thr
  got=$(awk -v k="$1" 'index($1, substr(k, 1, 20)) == 1 { print $3; exit }' "$OUT/sass_gemm_kcount.out")
  echo "RESULT sass gemm kcount threads: report=${got:-none} grid_x_block=$3"
  [ "${got:-}" = "$3" ] || fail "gemm kcount: threads ${got:-none}, grid x block $3"
else fail "gemm: cuBLAS's kernel was not patched"; fi
tool gemm_threadhist "$G/sass_gemm" 1024 -t threadhist
tool gemm_memtrace "$G/sass_gemm" 1024 -t memtrace
st=$(awk '$1 == "global" && $2 == "store" { print $3; exit }' "$OUT/sass_gemm_memtrace.out")
echo "RESULT sass gemm memtrace global store bytes=${st:-none} expected=$((4 * 1024 * 1024)) (C)"
[ "${st:-}" = $((4 * 1024 * 1024)) ] || fail "gemm memtrace: global stores ${st:-none}, expected 4 N^2"

# 4. off by default
$TO "$CUBPF" run -l info -t kcount -- sh -c "exec '$G/sass_count' > '$OUT/sass_off.app'" \
  >"$OUT/sass_off.out" 2>"$OUT/sass_off.err"
if grep -qi 'sanitizer' "$OUT/sass_off.out" "$OUT/sass_off.err"; then fail "off: the log mentions the sanitizer"
else ok "off: no sanitizer without --sanitizer"; fi
grep -A4 'not instrumented' "$OUT/sass_off.out" | head -6

echo "t_sass: $failed failed"
[ "$failed" -eq 0 ]
