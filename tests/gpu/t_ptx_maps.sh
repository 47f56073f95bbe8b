#!/usr/bin/env bash
# GPU: the map kinds of issue 6 from PTX probes (tests/ptx/gpu/maps.c): vec_add instrumented with
# maps.bpf.o (enable words on), maps allocated per the layouts of ptx-rewriter/layout.h and read
# back: per-SM copies sum to the thread count, each thread's per-thread copy holds its own id, a
# hash key per block holds the block size, one ring buffer record per thread (then lanes too small:
# records + drops = threads exactly), and a zero enable word switches the probe off.  Prints "RESULT
# ptx_maps PASS|FAIL (N failures)".  Inputs are prebuilt by `make` on the build machine:
# $BUILD/gpu/ptx_maps, ptx_fix_vecadd.ptx, $BUILD/ptx-probes/maps.bpf.o.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
for f in "$BUILD/gpu/ptx_maps" "$BUILD/gpu/ptx_fix_vecadd.ptx" "$BUILD/ptx-probes/maps.bpf.o"; do
  if [ ! -e "$f" ]; then echo "missing $f (run 'make' on the build machine)"; exit 1; fi
done
"$BUILD/gpu/ptx_maps" "$BUILD/gpu" "$BUILD/ptx-probes" 2>&1 | tee "$OUT/ptx_maps.log"
rc=${PIPESTATUS[0]}
grep -q "^RESULT ptx_maps [PF]" "$OUT/ptx_maps.log" || echo "RESULT ptx_maps FAIL (harness died, rc=$rc)"
exit "$rc"
