#!/usr/bin/env bash
# Cost of the Sanitizer backend (issue 29, experimental) against the PTX backend and native, in
# the same run, alternating, 3 rounds each (best round kept):
#   vec_add 2^26 (tests/cuda/live_bench.cu, 200 timed launches): live_bench has PTX (the PTX
#   backend instruments it), sass_bench is the same source built SASS only (the Sanitizer
#   backend patches it); so the same kernel code goes through either backend:
#     native         sass_bench alone
#     subscribed     sass_bench, CUBPF_SANITIZER=auto, no kernel selected (the cost of
#                    subscribing alone: 3.5% in the study)
#     san_empty      an empty kprobe (block enter patch: the floor, 1.09x in the study)
#     san_empty_exit an empty kretprobe (the BLOCK_EXIT site alone)
#     san_count      count.bpf.o (entries and exits per kernel)
#     san_kcount, san_threadhist: the bundled entry/exit tools' probe objects (the target's
#                    tools; threadhist as `cubpf run --sanitizer` loads it, counting at entry)
#     san_mem_empty  the per-access floor: a memprobe that reads the address and returns (a probe
#                    that only returned would be folded away, nothing patched; ~28x in the study)
#     san_memtrace   memtrace's program (within 10% of the floor is the target)
#     ptx_empty, ptx_count, ptx_kcount, ptx_threadhist, ptx_mem_empty, ptx_memtrace: the same
#                    programs on live_bench
#   cublasSgemm 4096 (tests/cuda/sass_gemm.cu, 20 timed GEMMs): native, san_count, san_kcount,
#   san_memtrace.
# Targets (issue 29): entry/exit tools <= 1.2x on vec_add, <= 1.01x on the GEMM; memtrace within
# 10% of the empty-patch floor.  The result's checksum must be the same in every run.
# Written without GPU access (2026-11-28).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/bench-out}
mkdir -p "$OUT"
G=$BUILD/gpu
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
LP=$(cd "$BUILD/live-probes" 2>/dev/null && pwd)
TP=$(cd "$BUILD/probes" 2>/dev/null && pwd)
for f in "$G/live_bench" "$G/sass_bench" "$G/sass_gemm" "$LP/count.bpf.o" "$LP/san_empty_entry.bpf.o" \
         "$LP/san_empty_mem.bpf.o" "$TP/memtrace.bpf.o"; do
  [ -e "$f" ] || { echo "b_sass: missing $f"; exit 1; }
done
echo "b_sass: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
failed=0
declare -A best sum

# probe_of MODE: the probe object of a mode
probe_of() {
  # (*_mem_empty before *_empty, which would match it too)
  case $1 in *_empty_exit) echo "$LP/san_empty_exit.bpf.o" ;; *_mem_empty) echo "$LP/san_empty_mem.bpf.o" ;;
    *_empty) echo "$LP/san_empty_entry.bpf.o" ;; *_count) echo "$LP/count.bpf.o" ;;
    *_kcount) echo "$TP/kcount.bpf.o" ;;
    san_threadhist) echo "$TP/threadhist_entry.bpf.o" ;; # what `cubpf run --sanitizer` loads
    *_threadhist) echo "$TP/threadhist.bpf.o" ;;
    *_memtrace) echo "$TP/memtrace.bpf.o" ;; esac
}

# run BIN ARGS MODE ROUND: one run; keeps the best time (field 2 of the timing line).
run() {
  local bin=$1 args=$2 mode=$3 round=$4 f=$OUT/sass_bench.$3.$4 app=$G/live_bench
  case $mode in native|subscribed|san_*) app=$G/sass_bench ;; esac
  [ "$bin" = gemm ] && app=$G/sass_gemm
  local envs=()
  case $mode in
    native|gemm_native) ;;
    subscribed) envs=(CUBPF_PROGRAMS="$LP/count.bpf.o" CUBPF_SANITIZER=auto CUBPF_KERNELS=none_at_all) ;;
    san_*|gemm_san_*) envs=(CUBPF_PROGRAMS="$(probe_of "${mode#gemm_}")" CUBPF_SANITIZER=auto) ;;
    ptx_*) envs=(CUBPF_PROGRAMS="$(probe_of "$mode")") ;;
  esac
  if [ ${#envs[@]} -eq 0 ]; then "$app" $args >"$f.out" 2>"$f.err"
  else env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info "${envs[@]}" \
      "$app" $args >"$f.out" 2>"$f.err"; fi
  local rc=$? t s
  t=$(awk '/^ms_per_(launch|gemm)/ {print $2}' "$f.out")
  s=$(awk '/^ms_per_launch/ {print $8} /^sgemm/ {print $5}' "$f.out")
  if [ "$rc" -ne 0 ] || [ -z "$t" ]; then echo "FAIL $mode round $round"; cat "$f.out"; tail -10 "$f.err"; failed=$((failed + 1)); return; fi
  echo "round $round $mode: $t ms (checksum $s)"
  sum[$mode]=$s
  best[$mode]=$(awk -v a="${best[$mode]:-1e9}" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
}

VEC="native subscribed san_empty san_empty_exit san_count san_kcount san_threadhist san_mem_empty san_memtrace ptx_empty ptx_count ptx_kcount ptx_threadhist ptx_mem_empty ptx_memtrace"
GEMM="gemm_native gemm_san_count gemm_san_kcount gemm_san_memtrace"
for round in 1 2 3; do
  for m in $VEC; do run vec 200 "$m" "$round"; done
  for m in $GEMM; do run gemm "4096 20" "$m" "$round"; done
done
ratio() { awk -v n="${best[$1]:-0}" -v p="${best[$2]:-0}" 'BEGIN { printf "%.3f", (n > 0 ? p / n : 0) }'; }
for m in $VEC; do
  [ "$m" = native ] && continue
  echo "RESULT b_sass vec_add2^26 $m: ${best[$m]:-none} ms vs native ${best[native]:-none} ms = $(ratio native "$m")x checksum_same=$([ "${sum[$m]:-}" = "${sum[native]:-}" ] && echo yes || echo no)"
done
for m in gemm_san_count gemm_san_kcount gemm_san_memtrace; do
  echo "RESULT b_sass sgemm4096 $m: ${best[$m]:-none} ms vs native ${best[gemm_native]:-none} ms = $(ratio gemm_native "$m")x checksum_same=$([ "${sum[$m]:-}" = "${sum[gemm_native]:-}" ] && echo yes || echo no)"
done
echo "RESULT b_sass memtrace over its floor: sanitizer $(ratio san_mem_empty san_memtrace)x (target <= 1.10)"
grep -hE 'backend sanitizer|sanitizer: ' "$OUT"/sass_bench.san_count.3.err "$OUT"/sass_bench.gemm_san_count.3.err 2>/dev/null | head -6
echo "b_sass: $failed failed"
[ "$failed" -eq 0 ]
