#!/usr/bin/env bash
# The Sanitizer backend beside other users of NVIDIA's tool interfaces in the same process
# (issue 29, Deliver 4), each stated by what it prints:
#   1. CUPTI: PyTorch's profiler (Kineto on CUPTI's activity API) records kernels while cubpf
#      patches them (tests/gpu/apps/torch_cupti_app.py under `cubpf run --sanitizer -t kcount`):
#      the program's output (digests and the profiler's kernel count) must be identical to the
#      native run's; the log says whether kernels went through the backend.
#   2. compute-sanitizer (memcheck) running the shim with the backend on: NVIDIA's tool holds
#      the Sanitizer API, so cubpf's subscription fails or is refused; the program's output must
#      be identical to native and cubpf must say why SASS-only kernels run without probes.
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
python3 tests/gpu/apps/torch_cupti_app.py >"$OUT/coexist_cupti.native" 2>"$OUT/coexist_cupti.native.err"
$TO "$CUBPF" run --sanitizer -l info -t kcount -- sh -c "exec python3 tests/gpu/apps/torch_cupti_app.py > '$OUT/coexist_cupti.app'" \
  >"$OUT/coexist_cupti.out" 2>"$OUT/coexist_cupti.err"; rc=$?
same=no; cmp -s "$OUT/coexist_cupti.native" "$OUT/coexist_cupti.app" && same=yes
n=$(grep -c 'backend sanitizer: kernel id' "$OUT/coexist_cupti.err")
echo "RESULT sass coexist cupti: rc=$rc identical_stdout=$same kernels_patched=$n ($(grep 'profiler kernel' "$OUT/coexist_cupti.native"))"
grep -h 'sanitizer' "$OUT/coexist_cupti.err" | grep -v 'kernel id' | head -5
[ "$rc" -eq 0 ] && [ "$same" = yes ] || { fail "cupti: rc=$rc or output changed"; diff "$OUT/coexist_cupti.native" "$OUT/coexist_cupti.app" | head; tail -15 "$OUT/coexist_cupti.err"; }

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
