#!/usr/bin/env bash
# GPU: fixture kernels instrumented with entry, exit and memory probes (count.bpf.o) give
# bit-identical outputs to the native ones, and the probes count what is known in advance
# (threads entering and leaving; bytes loaded and stored).  Then vec_add with params.bpf.o:
# kernel parameters, map update and printk (vprintf) from a probe.
# Inputs are prebuilt by `make` on the build machine: $BUILD/gpu/ptx_fix_*, $BUILD/ptx-probes.
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-out}
mkdir -p "$OUT"
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
for f in "$BUILD/gpu/ptx_fixtures" "$BUILD/gpu/ptx_fix_vecadd.count.ptx" "$BUILD/ptx-probes/count.bpf.o"; do
  if [ ! -e "$f" ]; then echo "missing $f (run 'make' on the build machine)"; exit 1; fi
done
log="$OUT/ptx_fixtures.txt"
"$BUILD/gpu/ptx_fixtures" "$BUILD/gpu" "$BUILD/ptx-probes" >"$log" 2>&1
rc=$?
cat "$log"
if ! grep -q "^kernel [0-9]* params 4 first [0-9a-f]*$" "$log"; then
  echo "FAIL  printk from the probe did not reach stdout (expected 'kernel ID params 4 first ADDR')"
  rc=1
else
  echo "ok    printk from the probe printed: $(grep -m1 '^kernel [0-9]* params 4 first' "$log")"
fi
exit $rc
