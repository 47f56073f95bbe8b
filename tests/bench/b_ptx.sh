#!/usr/bin/env bash
# Benchmark: probe overhead of ptx-rewriter's injected code.  Vector add over 2^26 floats
# (memory-bound) and a tiled 4096^3 matmul (compute-bound): native vs entry+exit probes that do
# nothing (empty.bpf.o) vs probes reading the thread index and %globaltimer with some stack
# arithmetic (work.bpf.o).  Same process, launches interleaved, CUDA events, median of 31.
# Targets: empty <= 1.02x, work <= 1.05x.  Also prints the registers each variant uses.
set -u
BUILD=${BUILD:-build}
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
for f in "$BUILD/gpu/ptx_bench" "$BUILD/gpu/ptx_bench.ptx" "$BUILD/gpu/ptx_bench.empty.ptx" "$BUILD/gpu/ptx_bench.work.ptx" "$BUILD/gpu/ptx_bench.work_timer.ptx"; do
  if [ ! -e "$f" ]; then echo "missing $f (run 'make bench-build' on the build machine)"; exit 1; fi
done
"$BUILD/gpu/ptx_bench" "$BUILD/gpu" 31
