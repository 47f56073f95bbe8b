#!/usr/bin/env bash
# GPU: the 313 eBPF conformance programs compiled to PTX by ptx-rewriter run on the GPU (one
# thread each, all in one launch; a launch that faults is split until the faulting programs run
# alone, so one bad program does not hide the others) and must return the expected r0, as the
# interpreter does.  Prints "RESULT ptx_conformance PASS|FAIL N/313".
# Inputs are prebuilt by `make` on the build machine: $BUILD/gpu/{ptx_conf_run,ptx_conformance.*}
# (the vectors are compiled into ptx_conformance.*, so ../shared is not needed on the GPU machine).
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
for f in "$BUILD/gpu/ptx_conf_run" "$BUILD/gpu/ptx_conformance.ptx" "$BUILD/gpu/ptx_conformance.txt"; do
  if [ ! -e "$f" ]; then echo "missing $f (run 'make' on the build machine)"; exit 1; fi
done
"$BUILD/gpu/ptx_conf_run" "$BUILD/gpu" 2>&1 | tee "$OUT/ptx_conformance.log"
rc=${PIPESTATUS[0]}
grep -q "^RESULT ptx_conformance" "$OUT/ptx_conformance.log" || echo "RESULT ptx_conformance FAIL (harness died, rc=$rc)"
exit "$rc"
