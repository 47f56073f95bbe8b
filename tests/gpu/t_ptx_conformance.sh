#!/usr/bin/env bash
# GPU: the 313 eBPF conformance programs compiled to PTX by ptx-rewriter run on the GPU (one
# thread each, all in one launch) and must return the expected r0, as the interpreter does.
# Inputs are prebuilt by `make` on the build machine: $BUILD/gpu/{ptx_conf_run,ptx_conformance.*}.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
for f in "$BUILD/gpu/ptx_conf_run" "$BUILD/gpu/ptx_conformance.ptx" "$BUILD/gpu/ptx_conformance.txt"; do
  if [ ! -e "$f" ]; then echo "missing $f (run 'make' on the build machine)"; exit 1; fi
done
"$BUILD/gpu/ptx_conf_run" "$BUILD/gpu" 2>&1 | tee "$OUT/ptx_conformance.log"
exit "${PIPESTATUS[0]}"
