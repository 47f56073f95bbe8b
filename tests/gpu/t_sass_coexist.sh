#!/usr/bin/env bash
# The Sanitizer backend beside other users of NVIDIA's tool interfaces in the same process
# (issue 29, Deliver 4), each stated by what it prints:
#   1. CUPTI: PyTorch's profiler (Kineto on CUPTI's activity API) in the program
#      (tests/gpu/apps/torch_cupti_app.py): natively, under `cubpf run -t kcount` and under
#      `cubpf run --sanitizer -t kcount`.  The results' digests must be identical in all three;
#      the profiler's kernel count must be the native one without --sanitizer (cubpf's default
#      leaves CUPTI alone); with --sanitizer the count is reported (H100, driver 580: 0 of 6, the
#      Sanitizer's subscription takes the profiler's kernels away) and, when it differs, cubpf
#      must have warned that CUPTI was loaded beside the backend.
#   2. compute-sanitizer (memcheck) running the shim with the backend on: NVIDIA's tool holds
#      the Sanitizer API, so cubpf's subscription is refused; the program's output must be
#      identical to native and cubpf must say that SASS-only kernels run without probes.
#   3. Nsight Systems (nsys) when installed: the same run under `nsys profile --trace cuda`.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
CUBPF=$(cd "$BUILD/bin" && pwd)/cubpf
G=$(cd "$BUILD/gpu" && pwd)
SHIM_DIR=$(cd "$BUILD/lib" && pwd)
PROBE=$(cd "$BUILD/probes" && pwd)/kcount.bpf.o
TO="timeout -s KILL ${SASS_TIMEOUT:-120}"
failed=0
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

# 1. CUPTI (PyTorch's profiler)
APPC="python3 tests/gpu/apps/torch_cupti_app.py"
$APPC >"$OUT/coexist_cupti.native" 2>"$OUT/coexist_cupti.native.err"
for v in ptx sanitizer; do
  flag=""; [ $v = sanitizer ] && flag=--sanitizer
  $TO "$CUBPF" run $flag -l info -t kcount -- sh -c "exec $APPC > '$OUT/coexist_cupti.$v.app'" \
    >"$OUT/coexist_cupti.$v.out" 2>"$OUT/coexist_cupti.$v.err"; rc=$?
  same=no; [ "$(head -1 "$OUT/coexist_cupti.native")" = "$(head -1 "$OUT/coexist_cupti.$v.app")" ] && same=yes
  nat=$(sed -n 's/^profiler kernel activities: //p' "$OUT/coexist_cupti.native")
  got=$(sed -n 's/^profiler kernel activities: //p' "$OUT/coexist_cupti.$v.app")
  n=$(grep -c 'backend sanitizer: kernel id' "$OUT/coexist_cupti.$v.err")
  warned=no; grep -q 'libcupti.*is loaded in this process' "$OUT/coexist_cupti.$v.err" && warned=yes
  echo "RESULT sass coexist cupti $v: rc=$rc identical_digests=$same profiler_kernels=${got:-?} native=${nat:-?} kernels_patched=$n cupti_warning=$warned"
  [ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "cupti $v: rc=$rc or the results changed"; tail -15 "$OUT/coexist_cupti.$v.err"; }
  if [ $v = ptx ] && [ "${got:-x}" != "${nat:-y}" ]; then fail "cupti: cubpf without --sanitizer changed the profiler's kernel count"; fi
  if [ $v = sanitizer ] && [ "${got:-x}" != "${nat:-y}" ] && [ $warned = no ]; then
    fail "cupti: the profiler lost kernels under --sanitizer and cubpf did not say why"; fi
done

# 2. compute-sanitizer
CS=""
for c in "${CUDA_HOME:-/usr/local/cuda}/compute-sanitizer/compute-sanitizer" "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"; do
  [ -x "$c" ] && { CS=$c; break; }
done
if [ -z "$CS" ]; then echo "RESULT sass coexist compute-sanitizer: not installed"
else
  "$G/sass_tools_known" hist >"$OUT/coexist_cs.native" 2>&1
  $TO env LD_LIBRARY_PATH="$SHIM_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUBPF_LOG=info CUBPF_PROGRAMS="$PROBE" \
    CUBPF_SANITIZER=auto "$CS" --tool memcheck --print-limit 5 "$G/sass_tools_known" hist >"$OUT/coexist_cs.out" 2>"$OUT/coexist_cs.err"; rc=$?
  grep -v '^=========' "$OUT/coexist_cs.out" >"$OUT/coexist_cs.app"
  same=no; cmp -s "$OUT/coexist_cs.native" "$OUT/coexist_cs.app" && same=yes
  errs=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$OUT/coexist_cs.out")
  echo "RESULT sass coexist compute-sanitizer: rc=$rc identical_stdout=$same memcheck_errors=${errs:-?}"
  grep -h 'sanitizer' "$OUT/coexist_cs.err" | head -5
  [ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "compute-sanitizer: rc=$rc or output changed"; diff "$OUT/coexist_cs.native" "$OUT/coexist_cs.app" | head; tail -15 "$OUT/coexist_cs.err"; }
  grep -q 'sanitizerSubscribe: .*SASS-only kernels run without probes' "$OUT/coexist_cs.err" ||
    grep -q 'backend sanitizer: kernel id' "$OUT/coexist_cs.err" ||
    fail "compute-sanitizer: cubpf neither patched a kernel nor said why it could not"
fi

# 3. Nsight Systems
if ! command -v nsys >/dev/null 2>&1; then echo "RESULT sass coexist nsys: not installed"
else
  $TO nsys profile --trace cuda -o "$OUT/coexist_nsys" --force-overwrite true \
    "$CUBPF" run --sanitizer -l info -t kcount -- "$G/sass_tools_known" hist >"$OUT/coexist_nsys.out" 2>"$OUT/coexist_nsys.err"; rc=$?
  echo "RESULT sass coexist nsys: rc=$rc"
  [ "$rc" -eq 0 ] || { fail "nsys: rc=$rc"; tail -15 "$OUT/coexist_nsys.err"; }
fi
echo "t_sass_coexist: $failed failed"
[ "$failed" -eq 0 ]
