#!/usr/bin/env bash
# Benchmark (GPU machine, where PyTorch is installed; runs on the CPU): read and decompress every
# fatbin of libtorch_cuda.so with cubin/ and compare with a bare zstd/LZ4 loop over the same
# payloads in the same run.  Target: cubin/ at >= 80% of the bare rate.
# Needs $BUILD/bench/cubin_bench (make bench-build).  Also runs on libcublasLt when present, as a
# second large input.
set -u
BUILD=${BUILD:-build}; OUT=${OUT:-$BUILD/bench-out}; mkdir -p "$OUT"
BENCH=$BUILD/bench/cubin_bench
[ -x "$BENCH" ] || { echo "FAIL: $BENCH missing (run make bench-build where it is built)"; exit 1; }
lib=${TORCH_LIB:-}
[ -n "$lib" ] || lib=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))' 2>/dev/null)
[ -n "$lib" ] && [ -f "$lib" ] || { echo "FAIL: libtorch_cuda.so not found"; exit 1; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
rc=0
"$BENCH" "$lib" 5 || rc=1
for extra in /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/lib64/libcublasLt.so; do
  if [ -f "$extra" ]; then echo; "$BENCH" "$extra" 3 || rc=1; break; fi
done
exit $rc
